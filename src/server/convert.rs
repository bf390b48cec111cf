//! Protobuf requests to domain values and domain results to protobuf
//! messages (one place, so every RPC agrees).

use crate::change::{Change, ChangeKind};
use crate::entry::{Entry, EntryKind};
use crate::error::Result;
use crate::history::FileVersion;
use crate::path::VfsPath;
use crate::pb;
use crate::search::{AbortReason, Budgets, GrepRequest, Hit, SearchEvent, SearchSpec, Summary};
use crate::service::{
    EditOutcome, MoveOutcome, Precondition, ReadText, TextEdit, UploadMessage, VersionDiff,
    WriteOutcome,
};
use crate::text::Window;
use tonic::Status;

/// A write's condition from its request's `create_only` and `if_version`,
/// with the executable bit it sets (`None`: keep the file's).
pub fn precondition(
    create_only: bool,
    if_version: Option<u64>,
    executable: Option<bool>,
) -> Precondition {
    Precondition {
        create_only,
        if_version,
        executable,
    }
}

/// A Read request's window and version.
pub fn read_text(req: &pb::ReadRequest) -> ReadText {
    ReadText {
        version: req.version,
        offset: req.offset,
        limit: req.limit,
        numbered: req.numbered,
    }
}

/// An Edit request's one replacement.
pub fn edit(req: pb::EditRequest) -> TextEdit {
    TextEdit {
        old: req.old_string,
        new: req.new_string,
        replace_all: req.replace_all,
    }
}

/// One MultiEdit edit.
pub fn text_edit(e: pb::EditOperation) -> TextEdit {
    TextEdit {
        old: e.old_string,
        new: e.new_string,
        replace_all: e.replace_all,
    }
}

/// One WriteBytes message as an upload's: the header (its path parsed by
/// the service, only when it comes first) or a piece of the content.
pub fn upload_message(m: pb::WriteBytesRequest) -> UploadMessage {
    use pb::write_bytes_request::Kind;
    match m.kind {
        Some(Kind::Header(h)) => {
            let pre = precondition(h.create_only, h.if_version, h.executable);
            UploadMessage::Start(h.path, pre)
        }
        Some(Kind::Data(data)) => UploadMessage::Piece(data),
        None => UploadMessage::Neither,
    }
}

/// A search request's budgets.
fn budgets(
    max_results: u64,
    max_visited: u64,
    max_duration_ms: u64,
    include_hidden: bool,
    include_ignored: bool,
) -> Budgets {
    Budgets {
        max_results,
        max_visited,
        max_duration_ms,
        include_hidden,
        include_ignored,
    }
}

/// A Grep request as the search it asks for (compiles the pattern: run it
/// off the runtime).
pub fn grep_spec(root: VfsPath, req: &pb::GrepRequest) -> Result<SearchSpec> {
    let grep = GrepRequest {
        pattern: &req.pattern,
        glob: &req.glob,
        literal: req.literal,
        case_insensitive: req.case_insensitive,
        before_context: req.before_context,
        after_context: req.after_context,
        max_count_per_file: req.max_count_per_file,
    };
    let budgets = budgets(
        req.max_results,
        req.max_visited,
        req.max_duration_ms,
        req.include_hidden,
        req.include_ignored,
    );
    SearchSpec::grep(root, grep, budgets)
}

/// A Glob request as the search it asks for.
pub fn glob_spec(root: VfsPath, req: &pb::GlobRequest) -> Result<SearchSpec> {
    let budgets = budgets(
        req.max_results,
        req.max_visited,
        req.max_duration_ms,
        req.include_hidden,
        req.include_ignored,
    );
    SearchSpec::glob(root, &req.pattern, req.paths_only, budgets)
}

/// A search event as one Grep message: a batch, the summary, or the
/// failure that ends the stream.
pub fn grep_message(event: SearchEvent) -> Result<pb::GrepResponse, Status> {
    use pb::grep_response::Result as Item;
    let item = match event {
        SearchEvent::Batch(hits) => Item::Batch(grep_batch(hits)),
        SearchEvent::Summary(s) => Item::Summary(summary(s)),
        SearchEvent::Failed(err) => return Err(err.into()),
    };
    Ok(pb::GrepResponse { result: Some(item) })
}

/// A search event as one Glob message: a batch, the summary, or the
/// failure that ends the stream.
pub fn glob_message(event: SearchEvent) -> Result<pb::GlobResponse, Status> {
    use pb::glob_response::Result as Item;
    let item = match event {
        SearchEvent::Batch(hits) => Item::Batch(glob_batch(hits)),
        SearchEvent::Summary(s) => Item::Summary(summary(s)),
        SearchEvent::Failed(err) => return Err(err.into()),
    };
    Ok(pb::GlobResponse { result: Some(item) })
}

/// A Read's window of `path` and the file it came from.
pub fn read_response(path: &VfsPath, window: Window, entry: Entry) -> pb::ReadResponse {
    pb::ReadResponse {
        content: window.content,
        total_lines: window.total_lines,
        version: entry.version,
        path: path.to_string(),
        lines_returned: window.lines_returned,
        lossy: window.lossy,
        size: entry.size,
        modified_time: Some(entry.modified.into()),
    }
}

/// What an Edit of the file shown as `path` did.
pub fn edit_response(path: String, o: EditOutcome) -> pb::EditResponse {
    pb::EditResponse {
        path,
        replacements_made: o.replacements,
        version: o.version,
    }
}

/// What a MultiEdit of the file shown as `path` did.
pub fn multi_edit_response(path: String, o: EditOutcome) -> pb::MultiEditResponse {
    pb::MultiEditResponse {
        path,
        replacements_made: o.replacements,
        version: o.version,
    }
}

/// What a WriteBytes did.
pub fn write_bytes_response(o: WriteOutcome) -> pb::WriteBytesResponse {
    pb::WriteBytesResponse {
        path: o.path.to_string(),
        bytes_written: o.bytes_written,
        version: o.version,
        created: o.created,
    }
}

/// What a Move of `(source, destination)` (as shown) did.
pub fn move_response((source, destination): (String, String), o: MoveOutcome) -> pb::MoveResponse {
    pb::MoveResponse {
        source,
        destination,
        files_moved: o.files_moved,
        version: o.version,
    }
}

/// What a Restore of `restored_version` did.
pub fn restore_response(o: WriteOutcome, restored_version: u64) -> pb::RestoreResponse {
    pb::RestoreResponse {
        path: o.path.to_string(),
        version: o.version,
        restored_version,
        bytes_written: o.bytes_written,
        created: o.created,
    }
}

/// A Diff of the file shown as `path`; the unified diff ends with a
/// newline, as `diff -u` writes it.
pub fn diff_response(path: String, out: VersionDiff) -> pb::DiffResponse {
    let mut diff = out.diff.text;
    if !diff.is_empty() {
        diff.push('\n');
    }
    pb::DiffResponse {
        path,
        from_version: out.from_version,
        to_version: out.to_version,
        diff,
        added: out.diff.added as u64,
        removed: out.diff.removed as u64,
        truncated: out.diff.truncated,
    }
}

/// `Entry` → `FileInfo`.
pub fn file_info(e: &Entry) -> pb::FileInfo {
    pb::FileInfo {
        path: e.path.to_string(),
        is_directory: e.kind == EntryKind::Directory,
        size: e.size,
        modified_time: Some(e.modified.into()),
        created_time: Some(e.created.into()),
        version: e.version,
        is_symlink: matches!(e.kind, EntryKind::Symlink { .. }),
        executable: e.executable,
    }
}

/// A change, with the cursor that resumes after it, as a `ChangeEvent`.
pub fn change_event(change: Change, cursor: String) -> pb::ChangeEvent {
    let kind = match change.kind {
        ChangeKind::Created => pb::ChangeKind::Created,
        ChangeKind::Modified => pb::ChangeKind::Modified,
        ChangeKind::Deleted => pb::ChangeKind::Deleted,
    };
    pb::ChangeEvent {
        path: change.path.to_string(),
        kind: kind as i32,
        version: change.version,
        size: change.size,
        time: Some(change.time.into()),
        principal: change.origin.principal,
        handle: change.origin.handle,
        session: change.origin.session,
        label: change.origin.label,
        changeset: change.origin.changeset,
        operation: change.origin.operation.as_str().into(),
        external: change.external,
        moved_path: change.moved_path.map(|p| p.to_string()).unwrap_or_default(),
        cursor,
    }
}

/// The retained versions of the file shown as `path`, in the order given.
pub fn versions_response(path: String, versions: Vec<FileVersion>) -> pb::ListVersionsResponse {
    pb::ListVersionsResponse {
        path,
        versions: versions.into_iter().map(file_version).collect(),
    }
}

/// A retained version as a `FileVersion`.
fn file_version(v: FileVersion) -> pb::FileVersion {
    pb::FileVersion {
        version: v.version,
        size: v.size,
        time: Some(v.time.into()),
        principal: v.origin.principal,
        handle: v.origin.handle,
        session: v.origin.session,
        label: v.origin.label,
        changeset: v.origin.changeset,
        operation: v.origin.operation.as_str().into(),
        deleted: v.deleted,
        current: v.current,
    }
}

/// The proto enum of an abort reason.
pub fn aborted_reason(reason: Option<AbortReason>) -> pb::AbortedReason {
    match reason {
        None => pb::AbortedReason::Unspecified,
        Some(AbortReason::Limit) => pb::AbortedReason::Limit,
        Some(AbortReason::CountLimit) => pb::AbortedReason::CountLimit,
        Some(AbortReason::TimeLimit) => pb::AbortedReason::TimeLimit,
        Some(AbortReason::Cancelled) => pb::AbortedReason::Cancelled,
    }
}

/// `Summary` → `SearchSummary`.
pub fn summary(s: Summary) -> pb::SearchSummary {
    pb::SearchSummary {
        visited: s.visited,
        matched: s.matched,
        files_searched: s.files_searched,
        skipped_ignored: s.skipped_ignored,
        skipped_hidden: s.skipped_hidden,
        skipped_binary: s.skipped_binary,
        skipped_too_large: s.skipped_too_large,
        elapsed_ms: s.elapsed.as_millis() as u64,
        aborted_reason: aborted_reason(s.aborted) as i32,
        matched_files: s.matched_files,
        problems: s
            .problems
            .into_iter()
            .map(|(path, err)| pb::SearchProblem {
                path,
                code: err.code().into(),
                message: err.to_string(),
            })
            .collect(),
    }
}

/// A batch of Grep hits as one message. The matches are counted first so
/// the message's list is allocated once: grown by doubling, a batch of
/// 2,048 lines reallocated and copied it ten times, up to 180 KB, for
/// every batch of a dense Grep.
pub fn grep_batch(hits: Vec<Hit>) -> pb::GrepBatch {
    let lines = hits
        .iter()
        .map(|hit| match hit {
            Hit::File(file) => file.lines.len(),
            _ => 0,
        })
        .sum();
    let mut matches = Vec::with_capacity(lines);
    for hit in hits {
        if let Hit::File(file) = hit {
            let path = file.path.to_string();
            matches.extend(file.lines.into_iter().map(|l| pb::GrepMatch {
                path: path.clone(),
                line_number: l.line_number,
                line: l.line,
                r#match: l.matched,
                is_context: l.is_context,
            }));
        }
    }
    pb::GrepBatch { matches }
}

/// A batch of Glob hits as one message.
pub fn glob_batch(hits: Vec<Hit>) -> pb::GlobBatch {
    let entries = hits
        .iter()
        .filter_map(|h| match h {
            Hit::Entry(e) => Some(file_info(e)),
            Hit::Path { path, symlink } => Some(pb::FileInfo {
                path: path.to_string(),
                is_symlink: *symlink,
                ..Default::default()
            }),
            Hit::File(_) => None,
        })
        .collect();
    pb::GlobBatch { entries }
}

/// What a Write did.
/// A Copy's answer: the source as asked, the destination's write.
pub fn copy_response(source: String, o: WriteOutcome) -> pb::CopyResponse {
    pb::CopyResponse {
        source,
        destination: o.path.to_string(),
        bytes_written: o.bytes_written,
        version: o.version,
        created: o.created,
    }
}

pub fn write_response(o: WriteOutcome) -> pb::WriteResponse {
    pb::WriteResponse {
        path: o.path.to_string(),
        bytes_written: o.bytes_written,
        version: o.version,
        created: o.created,
    }
}
