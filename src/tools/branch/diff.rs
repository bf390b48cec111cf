//! The BranchDiff tool: one page of what a branch changed against its base
//! now, with unified diffs (docs/branches.md § Diff).
//!
//! The diffs go to the text (bounded by the output budget, a large page
//! saved whole like any large result); `data` lists each file's path, kind
//! and where a moved file came from, at most `limit` of them.

use super::{failure, name_arg, name_param};
use crate::service::MAX_DIFF_PAGE;
use crate::tools::args::Args;
use crate::tools::params::{Param, Params};
use crate::tools::{Call, Object, Outcome, Status, ToolError};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Show what a branch changed against its base as it is now: \
each file added, changed, deleted or moved, with its unified diff, in path order. A page holds \
at most limit files; when more follow the result is partial and data.next_after is where the \
next page starts (pass it as after).";

/// Files on a page when the call gives no `limit`.
const DEFAULT_LIMIT: i64 = 100;

/// The parameters, in the order the model sees them (`crate::tools::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        name_param(),
        Param::optional(
            "after",
            json!({"type": "string", "description": "Start after this file (data.next_after of the previous page)."}),
        ),
        Param::optional(
            "limit",
            json!({"type": "integer", "description": "Most files on this page.", "default": DEFAULT_LIMIT, "minimum": 1, "maximum": MAX_DIFF_PAGE}),
        ),
    ])
});
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// Runs BranchDiff.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("BranchDiff", raw, PARAMS.names())?;
    let name = name_arg(&args)?;
    let limit = args.integer_in("limit", 1, MAX_DIFF_PAGE as i64, DEFAULT_LIMIT, || {
        format!("Invalid parameter 'limit': must be between 1 and {MAX_DIFF_PAGE}.")
    })? as usize;
    let after = match args.string("after")? {
        Some(after) => Some(call.resolve(after, OUTSIDE)?),
        None => None,
    };
    let page = call
        .service
        .diff_branch(&call.caller, name.to_owned(), after, limit)
        .await
        .map_err(|e| failure(e, name))?;
    let mut text = match page.files.len() {
        0 => format!("Branch '{name}' changes nothing against its base"),
        n => format!("Branch '{name}' against its base: {n} files"),
    };
    text.push_str(if page.next_after.is_some() {
        " on this page."
    } else {
        "."
    });
    let mut files = Vec::with_capacity(page.files.len());
    for f in &page.files {
        let path = call.display(&f.path);
        let mut file = object! {"path" => path.clone(), "kind" => f.kind.as_str()};
        let _ = write!(text, "\n\n{} {path}", f.kind.as_str());
        if let Some(from) = &f.from {
            let from = call.display(from);
            let _ = write!(text, " (from {from})");
            file.insert("from".into(), from.into());
        }
        if !f.diff.is_empty() {
            text.push('\n');
            text.push_str(f.diff.trim_end_matches('\n'));
        }
        files.push(Value::Object(file));
    }
    let next_after = page.next_after.as_ref().map(|p| call.display(p));
    if let Some(next) = &next_after {
        let _ = write!(
            text,
            "\n\nMore files follow: call BranchDiff again with after: '{next}'."
        );
    }
    Ok(Outcome {
        status: Status::partial_if(next_after.is_some()),
        stats: object! {"files" => files.len()},
        data: object! {"files" => files, "next_after" => next_after},
        text,
    })
}
