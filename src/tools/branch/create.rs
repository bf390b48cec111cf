//! The BranchCreate tool: fork a directory into a new branch.
//!
//! Flow: resolve the directory (default the project root), then the
//! service's fork (`read_file` on the directory, a mount that takes
//! branches, no branch already named so; docs/branches.md § Fork).

use super::{failure, name_arg};
use crate::tools::args::Args;
use crate::tools::params::{Param, Params};
use crate::tools::{Call, Object, Outcome, Status, ToolError};
use serde_json::json;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Fork a directory into a new named branch: a private \
copy-on-write copy (nothing is copied, whatever the directory holds) whose changes stay apart \
from the original until BranchMerge brings them back or BranchDiscard drops them. Calls made in \
the branch (a connection or handle set to it) see and change only the branch. Branches do not \
nest: fork from the base.";

/// The parameters, in the order the model sees them (`crate::tools::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "name",
            json!({"type": "string", "description": "The new branch's name: 1-128 of letters, digits and -_.@+:~, unique among your branches.", "minLength": 1, "maxLength": 128}),
        ),
        Param::optional(
            "path",
            json!({"type": "string", "description": "Directory to fork (relative to project root or absolute within it).", "default": "."}),
        ),
    ])
});
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// Runs BranchCreate.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("BranchCreate", raw, PARAMS.names())?;
    let name = name_arg(&args)?;
    let path = call.resolve(args.string("path")?.unwrap_or("."), OUTSIDE)?;
    let shown = call.display(&path);
    let info = call
        .service
        .create_branch(&call.caller, name.to_owned(), path)
        .await
        .map_err(|e| failure(e, name))?;
    let created = prost_types::Timestamp::from(info.created).to_string();
    Ok(Outcome {
        status: Status::Success,
        data: object! {"name" => info.name, "root" => shown.clone(), "created" => created},
        text: format!(
            "Created branch '{name}' of '{shown}' (copy-on-write: nothing was copied). Calls \
             in the branch see and change only it; BranchDiff shows what it changed, \
             BranchMerge brings it back, BranchDiscard drops it."
        ),
        stats: Object::new(),
    })
}
