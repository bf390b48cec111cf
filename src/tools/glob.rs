//! The Glob tool (docs/contract.md § Glob and Grep): file paths matching a glob, in path order.
//!
//! Flow: resolve the search root, build a Glob [`SearchSpec`] (pattern
//! relative to the root; `*` and `?` never cross `/`, `**` does, `**/foo`
//! matches `foo`), run it through the shared engine under the Glob and Grep budgets (docs/contract.md)
//! (20,000 visited entries, 2,000 ms) with `max_results = limit + 1` so a cut
//! is detected without walking further, and render.
//!
//! Status (docs/contract.md § Glob and Grep): success; partial when cut by `limit`
//! (`data.truncated`) or stopped by a budget with results
//! (`data.aborted_reason` = `count_limit` / `time_limit`); error when a budget
//! ran out before any result (TIMEOUT), or for bad parameters and paths with
//! the messages of docs/contract.md § Glob and Grep.

use super::args::Args;
use super::params::{Param, Params};
use super::{Call, Object, Outcome, Status, ToolError};
use crate::access::Op;
use crate::error::Error;
use crate::search::{AbortReason, Budgets, DEFAULT_MAX_VISITED, Hit, SearchSpec, Summary};
use serde_json::json;
use std::fmt::Write as _;
use std::sync::LazyLock;

/// The Glob tool's description (docs/contract.md § Glob and Grep).
pub const DESCRIPTION: &str = "Find files using glob patterns (relative to the search root). \
'*' and '?' match within one path segment, '**' matches across directories ('**/*.rs' finds Rust \
files at any depth, '*.rs' only directly in path), '{a,b}' alternates. Results are file paths \
relative to the project root in path order. Hidden files and ignored directories (.git, \
node_modules, target, dist, ...) are skipped unless include_hidden / include_ignored is set. The \
search stops after 20000 entries or 2 seconds; narrow path or pattern when it does.";

/// Most paths one call returns (docs/contract.md § Glob and Grep).
pub const MAX_LIMIT: i64 = 200;
/// Paths returned when `limit` is not given (docs/contract.md § Glob and Grep).
pub const DEFAULT_LIMIT: i64 = 50;

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "pattern",
            json!({"type": "string", "description": "Glob pattern relative to the search root (path), e.g. '**/*.js'."}),
        ),
        Param::optional(
            "path",
            json!({"type": "string", "description": "Directory to start search from (relative to project root).", "default": "."}),
        ),
        Param::optional(
            "limit",
            json!({"type": "integer", "description": "Max matches to return (1-200).", "default": DEFAULT_LIMIT, "minimum": 1, "maximum": MAX_LIMIT}),
        ),
        Param::optional(
            "include_hidden",
            json!({"type": "boolean", "description": "If true, include hidden files and directories.", "default": false}),
        ),
        Param::optional(
            "include_ignored",
            json!({"type": "boolean", "description": "If true, traverse ignored directories (node_modules, dist, etc).", "default": false}),
        ),
    ])
});
const OUTSIDE: &str = "Access denied. Path must be within project root.";

/// Runs Glob.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("Glob", raw, PARAMS.names())?;
    let pattern = args.required_string("pattern")?;
    if pattern.is_empty() {
        return Err(ToolError::invalid("Missing required parameter 'pattern'."));
    }
    let path_arg = args.string("path")?.unwrap_or(".");
    // docs/contract.md § Glob and Grep gives one message for a limit of the wrong type or range.
    let limit_message = || format!("limit must be an integer between 1 and {MAX_LIMIT}.");
    let limit = args
        .integer_in("limit", 1, MAX_LIMIT, DEFAULT_LIMIT, limit_message)
        .map_err(|_| ToolError::invalid(limit_message()))?;
    let include_hidden = args.boolean("include_hidden")?.unwrap_or(false);
    let include_ignored = args.boolean("include_ignored")?.unwrap_or(false);
    let posix = pattern.replace('\\', "/");
    let normalized = crate::search::normalize_pattern(&posix).to_owned();
    let root = call.resolve(path_arg, OUTSIDE)?;
    call.context
        .insert("pattern_normalized".into(), normalized.clone().into());
    let shown = call.display(&root);
    let budgets = Budgets {
        max_results: limit as u64 + 1,
        include_hidden,
        include_ignored,
        ..Budgets::default()
    };
    let (top, glob) = (root.clone(), normalized.clone());
    let (hits, summary) = call
        .search(Op::List, move || {
            SearchSpec::glob(top, &glob, true, budgets)
        })
        .await
        .map_err(|e| search_error(e, &shown, pattern, "Search root"))?;

    let mut paths: Vec<String> = hits
        .iter()
        .filter_map(|h| match h {
            Hit::Path { path, .. } => Some(call.display(path)),
            Hit::Entry(e) => Some(call.display(&e.path)),
            Hit::File(_) => None,
        })
        .collect();
    let truncated = paths.len() > limit as usize;
    paths.truncate(limit as usize);
    let aborted = match summary.aborted {
        Some(r @ (AbortReason::CountLimit | AbortReason::TimeLimit)) => Some(r),
        _ => None,
    };
    let elapsed = summary.elapsed.as_millis();

    let mut text = if paths.is_empty() {
        format!("No files found matching '{pattern}' in '{shown}'")
    } else {
        format!(
            "Found {} files matching '{pattern}' in '{shown}'",
            paths.len()
        )
    };
    // Writing into a String cannot fail.
    let _ = write!(text, "\n(Scanned {} items in {elapsed}ms)", summary.visited);
    push_cut_notes(&mut text, truncated, limit, aborted);
    push_skip_notes(&mut text, &summary, "include_hidden", "include_ignored");
    if !paths.is_empty() {
        text.push('\n');
        for p in &paths {
            text.push('\n');
            text.push_str(p);
        }
    }

    let mut data = object! {"paths" => paths.clone(), "truncated" => truncated};
    if let Some(reason) = aborted {
        data.insert("aborted_reason".into(), reason.as_str().into());
    }
    Ok(Outcome {
        status: Status::partial_if(truncated || aborted.is_some()),
        data,
        text,
        stats: object! {"matched" => paths.len(), "visited" => summary.visited},
    })
}

/// Maps a search that could not run (or found nothing before a budget ran
/// out) to a message; `what` names the path ("Search root", "Path").
pub fn search_error(e: Error, shown: &str, pattern: &str, what: &str) -> ToolError {
    let message = match e.kind() {
        Error::NotFound(_) => format!("{what} '{shown}' does not exist."),
        Error::NotDirectory(_) => format!("{what} '{shown}' is not a directory."),
        Error::PermissionDenied(_) => format!("Permission denied accessing '{shown}'."),
        Error::Timeout(detail) => timeout_message(detail, pattern, shown),
        _ => e.to_string(),
    };
    ToolError::new(e, message)
}

/// The notes of a result cut by `limit` or stopped by a budget
/// (`aborted`: count_limit, time_limit, or limit for the collection cap).
pub fn push_cut_notes(
    text: &mut String,
    truncated: bool,
    limit: i64,
    aborted: Option<AbortReason>,
) {
    if truncated {
        // Writing into a String cannot fail.
        let _ = write!(
            text,
            "\n[Truncated: Showing first {limit} matches. Narrow pattern or path.]"
        );
    }
    match aborted {
        Some(AbortReason::TimeLimit) => {
            text.push_str("\n[Partial: Search timed out (>2s). Results are incomplete.]");
        }
        Some(AbortReason::CountLimit) => {
            let _ = write!(
                text,
                "\n[Partial: Scanned the maximum of {DEFAULT_MAX_VISITED} items. Results are incomplete.]"
            );
        }
        Some(AbortReason::Limit) => {
            text.push_str(
                "\n[Partial: Stopped after collecting the maximum number of matches; only those were sorted. Narrow pattern or path.]",
            );
        }
        Some(AbortReason::Cancelled) | None => {}
    }
}

/// The text of a search stopped by a budget before any result.
fn timeout_message(detail: &str, pattern: &str, shown: &str) -> String {
    let why = if detail.contains(AbortReason::CountLimit.as_str()) {
        format!("scanned the maximum of {DEFAULT_MAX_VISITED} items")
    } else {
        "timed out (>2s)".to_owned()
    };
    format!(
        "Search for '{pattern}' in '{shown}' {why} before finding any result. Narrow the path or \
         the pattern."
    )
}

/// Notes saying what hidden and ignore rules left out, naming the parameter
/// that includes them.
pub fn push_skip_notes(text: &mut String, s: &Summary, hidden_param: &str, ignored_param: &str) {
    if s.skipped_ignored > 0 {
        // Writing into a String cannot fail.
        let _ = write!(
            text,
            "\n[Skipped: {} ignored entries (.git, node_modules, target, dist, ...). Use {ignored_param}=true to include them.]",
            s.skipped_ignored
        );
    }
    if s.skipped_hidden > 0 {
        let _ = write!(
            text,
            "\n[Skipped: {} hidden entries (names starting with '.'). Use {hidden_param}=true to include them.]",
            s.skipped_hidden
        );
    }
}
