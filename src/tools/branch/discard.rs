//! The BranchDiscard tool: delete a branch and everything it holds
//! (`delete` on every file it changed, and on its root unless the caller's
//! principal forked it: docs/branches.md § List and discard); the base is
//! untouched.

use super::{failure, name_arg, name_param};
use crate::tools::args::Args;
use crate::tools::params::Params;
use crate::tools::{Call, Object, Outcome, Status, ToolError};
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Discard a branch: delete it and every change made in it. The \
directory it forked is untouched. Merge first (BranchMerge) to keep its changes.";

/// The parameters, in the order the model sees them (`crate::tools::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| Params::new(vec![name_param()]));

/// Runs BranchDiscard.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("BranchDiscard", raw, PARAMS.names())?;
    let name = name_arg(&args)?;
    call.service
        .discard_branch(&call.caller, name.to_owned())
        .await
        .map_err(|e| failure(e, name))?;
    Ok(Outcome {
        status: Status::Success,
        data: object! {"name" => name, "discarded" => true},
        text: format!("Discarded branch '{name}' and its changes; the base is untouched."),
        stats: Object::new(),
    })
}
