//! The Copy tool: copy one file to another path of the same mount.
//!
//! Flow: resolve both paths, then the Filesystem service's Copy on a
//! blocking thread (`read_file` and `read_binary` on the source, `write` on
//! the destination,
//! one tier step: a reflink on the Filesystem tier where the file system
//! shares extents, a byte copy otherwise; docs/contract.md § Copy), with
//! `create_only` unless `overwrite`.

use super::args::Args;
use super::envelope::version_json;
use super::mv::transfer_error;
use super::params::{Param, Params};
use super::{Call, Object, Outcome, Status, ToolError};
use crate::access::Op;
use crate::service::Precondition;
use serde_json::json;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Copy a file to a new path. Missing parent directories are created. \
An existing destination is refused unless overwrite is true. Both paths must be on the same \
mount; directories are not copied (copy their files one by one).";

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "source",
            json!({"type": "string", "description": "File to copy (relative to project root or absolute within it)."}),
        ),
        Param::required(
            "destination",
            json!({"type": "string", "description": "Path of the copy."}),
        ),
        Param::optional(
            "overwrite",
            json!({"type": "boolean", "description": "Replace an existing destination file.", "default": false}),
        ),
        Param::label(),
    ])
});
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// Runs Copy.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("Copy", raw, PARAMS.names())?;
    let source_arg = args.required_string("source")?;
    let destination_arg = args.required_string("destination")?;
    let overwrite = args.boolean("overwrite")?.unwrap_or(false);
    let source = call.resolve(source_arg, OUTSIDE)?;
    let destination = call.resolve(destination_arg, OUTSIDE)?;
    let shown = (call.display(&source), call.display(&destination));
    call.check(&source, Op::ReadFile)?;
    call.check(&source, Op::ReadBinary)?;
    call.check(&destination, Op::Write)?;
    let pre = Precondition {
        create_only: !overwrite,
        if_version: None,
        ..Precondition::default()
    };
    let out = call
        .service
        .run(&call.caller, move |files| {
            files.copy(&source, &destination, pre)
        })
        .await
        .map_err(|e| transfer_error(e, &shown.0, &shown.1))?;
    let (from, to) = shown;
    let verb = if out.created { "Copied" } else { "Copied over" };
    Ok(Outcome {
        status: Status::Success,
        data: object! {"source" => from.clone(), "destination" => to.clone(), "created" => out.created},
        text: format!("{verb} '{from}' to '{to}' ({} bytes).", out.bytes_written),
        stats: object! {"bytes" => out.bytes_written, "version" => version_json(out.version)},
    })
}
