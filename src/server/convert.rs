//! Domain types to protobuf messages (one place, so every RPC agrees).

use crate::change::{Change, ChangeKind};
use crate::entry::{Entry, EntryKind};
use crate::history::FileVersion;
use crate::pb;
use crate::search::{AbortReason, Hit, Summary};
use crate::service::WriteOutcome;

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
        operation: change.origin.operation.as_str().into(),
        external: change.external,
        moved_path: change.moved_path.map(|p| p.to_string()).unwrap_or_default(),
        cursor,
    }
}

/// A retained version as a `FileVersion`.
pub fn file_version(v: FileVersion) -> pb::FileVersion {
    pb::FileVersion {
        version: v.version,
        size: v.size,
        time: Some(v.time.into()),
        principal: v.origin.principal,
        handle: v.origin.handle,
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

/// A batch of Grep hits as one message.
pub fn grep_batch(hits: Vec<Hit>) -> pb::GrepBatch {
    let mut matches = Vec::new();
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

/// What a Write or WriteBytes did.
pub fn write_response(o: WriteOutcome) -> pb::WriteResponse {
    pb::WriteResponse {
        path: o.path.to_string(),
        bytes_written: o.bytes_written,
        version: o.version,
        created: o.created,
    }
}
