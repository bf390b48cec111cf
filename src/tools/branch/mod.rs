//! The branch tools (docs/branches.md, docs/tools.md § Branches):
//! `BranchCreate`, `BranchList`, `BranchDiff`, `BranchMerge` and
//! `BranchDiscard`, one file each, over the application layer's branch
//! operations (`service/branch.rs`), which check the grants and bounds
//! exactly as the Filesystem RPCs of the same names do.
//!
//! What they share is here: the `name` parameter and the wording of a
//! branch operation's failure.

pub mod create;
pub mod diff;
pub mod discard;
pub mod list;
pub mod merge;

use super::ToolError;
use super::args::Args;
use super::params::Param;
use crate::error::{Error, echo};
use serde_json::json;

/// The `name` parameter naming an existing branch.
fn name_param() -> Param {
    Param::required(
        "name",
        json!({"type": "string", "description": "The branch's name (BranchList shows yours).", "minLength": 1, "maxLength": 128}),
    )
}

/// The branch a call names (`name`).
fn name_arg<'a>(args: &Args<'a>) -> Result<&'a str, ToolError> {
    Ok(args.required_string("name")?)
}

/// The tool's message for a branch operation on `name` that failed: the
/// service's error, worded for a model.
fn failure(e: Error, name: &str) -> ToolError {
    let name = echo(name);
    let message = match e.kind() {
        Error::NotFound(detail) if detail.starts_with("branch ") => {
            format!("Branch '{name}' does not exist. BranchList shows your branches.")
        }
        Error::AlreadyExists(detail) if detail.starts_with("branch ") => format!(
            "A branch named '{name}' already exists. Choose another name, or BranchDiscard it \
             first."
        ),
        Error::InvalidArgument(detail) => format!("Cannot use branch '{name}': {detail}."),
        _ => format!("Branch '{name}': {e}."),
    };
    ToolError::new(e, message)
}
