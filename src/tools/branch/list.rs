//! The BranchList tool: the caller's branches with their root, age and
//! size (those of its namespace whose root it may list; a handle bound to
//! a branch sees its own only).

use crate::tools::args::Args;
use crate::tools::params::Params;
use crate::tools::{Call, Object, Outcome, Status, ToolError};
use serde_json::Value;
use std::fmt::Write as _;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "List your branches: each one's name, the directory it forks \
(root), when and by whom it was created, and how many files it changed and bytes it holds.";

/// The parameters: none.
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| Params::new(Vec::new()));

/// Runs BranchList.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    Args::new("BranchList", raw, PARAMS.names())?;
    let branches = call.service.list_branches(&call.caller).await?;
    let mut text = match branches.len() {
        0 => "No branches. BranchCreate forks one.".to_owned(),
        1 => "1 branch:".to_owned(),
        n => format!("{n} branches:"),
    };
    let mut listed = Vec::with_capacity(branches.len());
    for b in &branches {
        let root = call.display(&b.root);
        let created = prost_types::Timestamp::from(b.created).to_string();
        let _ = write!(
            text,
            "\n{}  root '{root}'  {} files changed, {} bytes  created {created} by {}",
            b.name, b.files, b.bytes, b.creator
        );
        listed.push(Value::Object(object! {
            "name" => b.name.clone(),
            "root" => root,
            "created" => created,
            "creator" => b.creator.clone(),
            "files_changed" => b.files,
            "bytes" => b.bytes,
        }));
    }
    Ok(Outcome {
        status: Status::Success,
        data: object! {"branches" => listed},
        text,
        stats: object! {"branches" => branches.len()},
    })
}
