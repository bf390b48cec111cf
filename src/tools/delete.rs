//! The Delete tool: remove a file, or a directory and everything below it.
//!
//! Flow: resolve, check `delete` (as the Filesystem service's Delete), then
//! on a blocking thread one look at the path (a directory needs
//! `recursive`) and one `Backend::delete`, with `expected_version` as its
//! `if_version` when given. The project root itself is never deleted.

use super::args::Args;
use super::params::{Param, Params, version_schema};
use super::write::{change_error, expected_version};
use super::{Call, Object, Outcome, Status, ToolError};
use crate::access::Op;
use crate::error::Error;
use serde_json::json;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Delete a file, or with recursive a directory and everything in it. \
Pass expected_version (stats.version of your last Read) to delete a file only if it has not \
changed since. The change is kept in History, so History can restore a deleted file.";

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "path",
            json!({"type": "string", "description": "File or directory to delete (relative to project root or absolute within it)."}),
        ),
        Param::optional(
            "recursive",
            json!({"type": "boolean", "description": "Required to delete a directory: deletes everything below it.", "default": false}),
        ),
        Param::optional(
            "expected_version",
            version_schema("stats.version from your last Read; the file must still be at it."),
        ),
        Param::label(),
    ])
});
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// Runs Delete.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("Delete", raw, PARAMS.names())?;
    let path_arg = args.required_string("path")?;
    let recursive = args.boolean("recursive")?.unwrap_or(false);
    let expected = expected_version(&args)?;
    let path = call.resolve(path_arg, OUTSIDE)?;
    let shown = call.display(&path);
    if path == call.root {
        return Err(ToolError::invalid(
            "Refusing to delete the project root; delete the files or directories in it.",
        ));
    }
    call.check(&path, Op::Delete)?;
    let (directory, files_deleted) = call
        .service
        .run_asked(&call.caller, move |files| {
            let directory = files.stat(&path, Op::Delete)?.is_directory();
            Ok((directory, files.delete(&path, expected, recursive)?))
        })
        .await
        .map_err(|e| delete_error(e, &shown))?;
    let text = if directory {
        format!("Deleted directory '{shown}' ({files_deleted} files).")
    } else {
        format!("Deleted '{shown}'.")
    };
    Ok(Outcome {
        status: Status::Success,
        data: object! {"path" => shown, "directory" => directory},
        text,
        stats: object! {"files_deleted" => files_deleted},
    })
}

/// The tool's message for a failed delete of `shown`.
fn delete_error(e: Error, shown: &str) -> ToolError {
    match e.kind() {
        Error::NotFound(_) => {
            let message = format!("Path '{shown}' does not exist.");
            ToolError::new(e, message)
        }
        Error::IsDirectory(_) => {
            let message = format!(
                "Path '{shown}' is a directory. Pass recursive: true to delete it and everything \
                 in it."
            );
            ToolError::new(e, message)
        }
        Error::InvalidArgument(detail) => {
            let message = format!("Cannot delete '{shown}': {detail}.");
            ToolError::new(e, message)
        }
        _ => change_error(e, shown),
    }
}
