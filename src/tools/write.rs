//! The Write tool: create a file, or replace one the model has read.
//!
//! Flow: resolve, check `write`, then on a blocking thread: look at the
//! current file (its content for the diff when `read_file` is granted),
//! enforce the version rule, diff, and — unless `dry_run` — one conditional
//! `Backend::write` (`create_only` for a new file, `if_version` for an
//! existing one), so a file changed between the look and the write is a
//! CONFLICT, never a lost update.
//!
//! Version rule: overwriting an existing file needs `expected_version`, the
//! `stats.version` of the model's last Read (or Write/Edit); a missing or stale
//! one is CONFLICT "File has been modified since you read it…" style. A new
//! file needs none (0 is accepted as "must not exist").

use super::args::Args;
use super::envelope::version_json;
use super::params::{Param, Params, version_schema};
use super::{Call, Object, Outcome, Status, ToolError};
use crate::access::Op;
use crate::error::Error;
use crate::service::Precondition;
use crate::text::diff::{self, DiffPreview};
use serde_json::json;
use std::fmt::Write as _;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Create a file or replace its whole content. To overwrite an \
existing file, first Read it and pass stats.version as expected_version (a file changed since \
is refused with CONFLICT). Parent directories are created. dry_run shows the diff without \
writing. Prefer Edit or MultiEdit for changes to part of a file.";

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "path",
            json!({"type": "string", "description": "File to write (relative to project root or absolute within it)."}),
        ),
        Param::required(
            "content",
            json!({"type": "string", "description": "The complete new content of the file."}),
        ),
        Param::optional(
            "dry_run",
            json!({"type": "boolean", "description": "If true, only report what would change.", "default": false}),
        ),
        Param::optional(
            "expected_version",
            version_schema(
                "stats.version from your last Read of this file; required to overwrite an existing file.",
            ),
        ),
        Param::label(),
    ])
});
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// Reads `expected_version`: a version as the tools show it
/// ([`Args::version`]), shared by every tool that takes one.
pub fn expected_version(args: &Args<'_>) -> Result<Option<u64>, ToolError> {
    Ok(args.version("expected_version")?)
}

/// Maps an error met while changing `shown` to a message for the model
/// (shared by Write, Edit and MultiEdit).
pub fn change_error(e: Error, shown: &str) -> ToolError {
    let message = match e.kind() {
        Error::AlreadyExists(_) => format!(
            "File '{shown}' already exists. Read it first and pass the version from Read's stats \
             as expected_version to overwrite it."
        ),
        Error::VersionMismatch { actual: 0, .. } => format!(
            "File has been modified since you read it: '{shown}' no longer exists. Write it \
             without expected_version to create it again."
        ),
        Error::VersionMismatch {
            expected, actual, ..
        } => format!(
            "File has been modified since you read it (you read version {expected}, it is now \
             version {actual}). Read '{shown}' again and retry with the version from Read's stats."
        ),
        Error::NotFound(_) => format!("File '{shown}' does not exist. Use Write to create it."),
        Error::IsDirectory(_) => {
            format!("Path '{shown}' is a directory. Use LS to explore it; write to a file path.")
        }
        Error::NotDirectory(dir) => {
            format!("Cannot write '{shown}': {dir} is a file, not a directory.")
        }
        Error::Binary(_) => format!(
            "File '{shown}' appears to be binary or is not valid UTF-8. Cannot edit it as text; \
             use Write to replace it whole."
        ),
        Error::PermissionDenied(_) => format!("Permission denied accessing '{shown}'."),
        Error::TooLarge(detail) => format!("Cannot write '{shown}': {detail}."),
        _ => format!("Failed to write file - {e}"),
    };
    ToolError::new(e, message)
}

/// The text of a change's diff: the preview and a note when it was cut or
/// is coarse.
pub fn push_diff(text: &mut String, d: &DiffPreview) {
    if !d.text.is_empty() {
        text.push_str("\n\n");
        text.push_str(&d.text);
    }
    if d.coarse {
        // Writing into a String cannot fail.
        let _ = write!(
            text,
            "\n[Diff summarised: the changed lines are over {} bytes, so they are shown as \
             removed then added instead of diffed line by line.]",
            diff::MAX_DIFFED_BYTES
        );
    }
    if d.truncated {
        // Writing into a String cannot fail.
        let _ = write!(
            text,
            "\n[Diff truncated: showing the first {} lines / {} bytes.]",
            diff::MAX_DIFF_LINES,
            diff::MAX_DIFF_BYTES
        );
    }
}

/// Runs Write.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("Write", raw, PARAMS.names())?;
    let path_arg = args.required_string("path")?;
    let content = args.required_string("content")?.to_owned();
    let dry_run = args.boolean("dry_run")?.unwrap_or(false);
    let expected = expected_version(&args)?;
    let path = call.resolve(path_arg, OUTSIDE)?;
    let shown = call.display(&path);
    call.check(&path, Op::Write)?;
    let can_read = call.caller.principal.check(&path, Op::ReadFile).is_ok();
    let lines = crate::text::count_lines(content.as_bytes());
    let bytes = content.len();
    let shown_in = shown.clone();
    let max = call.service.max_file_bytes();
    let (existed, preview, version) = call
        .service
        .run_asked(&call.caller, move |files| {
            Error::check_file_size(&path, bytes as u64, max)?;
            let current = if can_read {
                files.read(&path, Op::ReadFile).map(|(data, e)| {
                    let old = String::from_utf8(data)
                        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                    (Some(old), e)
                })
            } else {
                files.stat(&path, Op::Write).and_then(|e| {
                    if e.is_directory() {
                        Err(Error::IsDirectory(path.to_string()))
                    } else {
                        Ok((None, e))
                    }
                })
            };
            let current = match current {
                Ok((old, entry)) => Some((old, entry.version)),
                Err(e) if matches!(e.kind(), Error::NotFound(_)) => None,
                Err(e) => return Err(e),
            };
            let pre = Precondition {
                create_only: current.is_none(),
                if_version: current.as_ref().map(|(_, v)| *v),
                ..Precondition::default()
            };
            match (&current, expected) {
                (Some(_), None) => return Err(Error::AlreadyExists(path.to_string())),
                (Some((_, actual)), Some(e)) if e != *actual => {
                    return Err(Error::VersionMismatch {
                        path: path.to_string(),
                        expected: e,
                        actual: *actual,
                    });
                }
                (None, Some(e)) if e != 0 => {
                    return Err(Error::VersionMismatch {
                        path: path.to_string(),
                        expected: e,
                        actual: 0,
                    });
                }
                _ => {}
            }
            let preview = match &current {
                Some((None, _)) => DiffPreview {
                    text: String::new(),
                    truncated: false,
                    coarse: false,
                    added: lines,
                    removed: 0,
                },
                Some((Some(old), _)) => diff::preview(&shown_in, old, &content),
                None => diff::preview(&shown_in, "", &content),
            };
            let existed = current.is_some();
            let version = if dry_run {
                current.map_or(0, |(_, v)| v)
            } else {
                files.write(&path, content.into_bytes(), pre)?.version
            };
            Ok((existed, preview, version))
        })
        .await
        .map_err(|e| change_error(e, &shown))?;

    let (verb, operation) = match (dry_run, existed) {
        (false, false) => ("Created", "create"),
        (false, true) => ("Updated", "update"),
        (true, false) => ("[Dry Run] Would create", "create"),
        (true, true) => ("[Dry Run] Would update", "update"),
    };
    let mut text = if existed {
        format!(
            "{verb} '{shown}' (+{}/-{} lines, {bytes} bytes).",
            preview.added, preview.removed
        )
    } else {
        format!("{verb} '{shown}' ({lines} lines, {bytes} bytes).")
    };
    if existed && !can_read {
        text.push_str("\n[No diff: reading this file is not granted.]");
    } else if existed || dry_run {
        push_diff(&mut text, &preview);
    }
    Ok(Outcome {
        status: Status::Success,
        data: object! {
            "applied" => !dry_run,
            "operation" => operation,
            "diff_preview" => preview.text,
            "diff_truncated" => preview.truncated,
        },
        text,
        stats: object! {
            "lines" => lines,
            "bytes" => bytes,
            "lines_added" => preview.added,
            "lines_removed" => preview.removed,
            "version" => version_json(version),
        },
    })
}
