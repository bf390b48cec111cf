//! The Move tool: rename a file or a directory tree within one mount.
//!
//! Flow: resolve both paths, check `read_file`, `read_binary`, `write` and
//! `delete` on the source and
//! `write` on the destination (as the Filesystem service's Move), then one
//! atomic `Backend::rename` on a blocking thread: `create_only` unless
//! `overwrite`, `expected_version` as the source's `if_version`.

use super::args::Args;
use super::envelope::version_json;
use super::params::{Param, Params, version_schema};
use super::write::{change_error, expected_version};
use super::{Call, Object, Outcome, Status, ToolError};
use crate::access::Op;
use crate::error::Error;
use crate::service::Precondition;
use serde_json::json;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Move or rename a file or a directory, atomically. Missing parent \
directories of the destination are created. An existing destination is refused unless overwrite \
is true (only a file replaces a file). Both paths must be on the same mount.";

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "source",
            json!({"type": "string", "description": "File or directory to move (relative to project root or absolute within it)."}),
        ),
        Param::required(
            "destination",
            json!({"type": "string", "description": "Its new path."}),
        ),
        Param::optional(
            "overwrite",
            json!({"type": "boolean", "description": "Replace an existing destination file.", "default": false}),
        ),
        Param::optional(
            "expected_version",
            version_schema(
                "stats.version from your last Read of the source file; it must still be at it.",
            ),
        ),
        Param::label(),
    ])
});
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// Runs Move.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("Move", raw, PARAMS.names())?;
    let source_arg = args.required_string("source")?;
    let destination_arg = args.required_string("destination")?;
    let overwrite = args.boolean("overwrite")?.unwrap_or(false);
    let expected = expected_version(&args)?;
    let source = call.resolve(source_arg, OUTSIDE)?;
    let destination = call.resolve(destination_arg, OUTSIDE)?;
    let shown = (call.display(&source), call.display(&destination));
    call.check(&source, Op::ReadFile)?;
    call.check(&source, Op::ReadBinary)?;
    call.check(&source, Op::Write)?;
    call.check(&source, Op::Delete)?;
    call.check(&destination, Op::Write)?;
    let pre = Precondition {
        create_only: !overwrite,
        if_version: expected,
        ..Precondition::default()
    };
    let out = call
        .service
        .run(&call.caller, move |files| {
            files.rename(&source, &destination, pre)
        })
        .await
        .map_err(|e| transfer_error(e, &shown.0, &shown.1))?;
    let (from, to) = shown;
    let text = if out.version == 0 {
        format!(
            "Moved directory '{from}' to '{to}' ({} files).",
            out.files_moved
        )
    } else {
        format!("Moved '{from}' to '{to}'.")
    };
    Ok(Outcome {
        status: Status::Success,
        data: object! {"source" => from, "destination" => to},
        text,
        stats: object! {"files_moved" => out.files_moved, "version" => version_json(out.version)},
    })
}

/// The message of a failed Move or Copy from `source` to `destination`
/// (shared with the Copy tool).
pub fn transfer_error(e: Error, source: &str, destination: &str) -> ToolError {
    let message = match e.kind() {
        Error::NotFound(_) => format!("Path '{source}' does not exist."),
        Error::AlreadyExists(_) => format!(
            "Path '{destination}' already exists. Pass overwrite: true to replace it, or choose \
             another destination."
        ),
        Error::IsDirectory(_) => format!(
            "Cannot put '{source}' at '{destination}': only a file replaces a file, and Copy \
             copies one file."
        ),
        Error::InvalidArgument(detail) => format!("Cannot do that: {detail}."),
        _ => return change_error(e, source),
    };
    ToolError::new(e, message)
}
