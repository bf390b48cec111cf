//! The Grep tool: regex search of file contents, newest files first.
//!
//! Flow: resolve the path (a directory or one file), build a Grep
//! [`SearchSpec`] (ripgrep's matcher; case-insensitive unless
//! `case_sensitive`; `include` filters files like ripgrep's `-g`), run it
//! through the shared engine under the Glob and Grep budgets (docs/contract.md), then sort every match
//! by file modification time (newest first), path, line — before cutting to
//! `limit`, so the first matches shown are in the files the agent most likely
//! just touched.
//!
//! Output modes (docs/contract.md § Text formats): `files_with_matches` (paths), `content`
//! (`path:line:text`, with `path-line-text` context lines and `--` between
//! groups when `context` > 0), `count` (`path:N`).
//!
//! Memory: matches are collected to be sorted, so the engine is told to stop
//! at [`MAX_COLLECTED`] matches (reported as partial); lines are cut to
//! [`MAX_LINE_CHARS`] characters so one minified line cannot fill the budget.

use super::args::Args;
use super::glob::{push_cut_notes, push_skip_notes, search_error};
use super::params::{Param, Params};
use super::{Call, Object, Outcome, Status, ToolError};
use crate::access::Op;
use crate::search::{AbortReason, Budgets, FileHits, GrepRequest, Hit, LineHit, SearchSpec};
use crate::text::grep::{self, GrepLine, GrepOutputMode};
use serde_json::{Value, json};
use std::cmp::Reverse;
use std::fmt::Write as _;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Search file contents with a regular expression (Rust regex \
syntax, like ripgrep). Matches are sorted by file modification time, newest first. output_mode: \
'files_with_matches' (default, paths only), 'content' (path:line:text, with 'context' lines \
around each match), 'count' (matches per file). Filter files with include (e.g. '*.rs', \
'src/**/*.ts'). Case-insensitive unless case_sensitive is true. Hidden files and ignored \
directories are skipped unless include_hidden / include_ignored is set; the text says how many.";

/// Most matches one call returns.
pub const MAX_LIMIT: i64 = 1000;
/// Matches returned when `limit` is not given.
pub const DEFAULT_LIMIT: i64 = 100;
/// Most context lines around a match.
pub const MAX_CONTEXT: i64 = 20;
/// Matches collected for sorting before the search stops (partial beyond).
pub const MAX_COLLECTED: u64 = 20_000;
/// Longest line shown, in characters.
pub const MAX_LINE_CHARS: usize = 500;

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "pattern",
            json!({"type": "string", "description": "Regular expression to search for, e.g. 'fn\\s+main' or 'TODO|FIXME'."}),
        ),
        Param::optional(
            "path",
            json!({"type": "string", "description": "File or directory to search (relative to project root).", "default": "."}),
        ),
        Param::optional(
            "include",
            json!({"type": "string", "description": "Glob of files to search, e.g. '*.py' (file name) or 'src/**/*.ts' (path relative to path)."}),
        ),
        Param::optional(
            "case_sensitive",
            json!({"type": "boolean", "description": "Match case exactly.", "default": false}),
        ),
        Param::optional(
            "output_mode",
            json!({"type": "string", "enum": ["files_with_matches", "content", "count"], "description": "files_with_matches: paths; content: matching lines; count: matches per file.", "default": "files_with_matches"}),
        ),
        Param::optional(
            "limit",
            json!({"type": "integer", "description": "Max matches to return (1-1000).", "default": DEFAULT_LIMIT, "minimum": 1, "maximum": MAX_LIMIT}),
        ),
        Param::optional(
            "context",
            json!({"type": "integer", "description": "Lines of context before and after each match (content mode, 0-20).", "default": 0, "minimum": 0, "maximum": MAX_CONTEXT}),
        ),
        Param::optional(
            "include_hidden",
            json!({"type": "boolean", "description": "If true, also search hidden files and directories.", "default": false}),
        ),
        Param::optional(
            "include_ignored",
            json!({"type": "boolean", "description": "If true, also search ignored directories (node_modules, target, dist, etc).", "default": false}),
        ),
    ])
});
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// A match or context line ready to show.
struct Shown {
    file: String,
    line: LineHit,
}

fn clip(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        None => line.to_owned(),
        Some((cut, _)) => format!("{}… [line truncated]", &line[..cut]),
    }
}

/// Runs Grep.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("Grep", raw, PARAMS.names())?;
    let pattern = args.required_string("pattern")?;
    if pattern.is_empty() {
        return Err(ToolError::invalid("Missing required parameter 'pattern'."));
    }
    let path_arg = args.string("path")?.unwrap_or(".");
    let include = args.string("include")?.unwrap_or("");
    let case_sensitive = args.boolean("case_sensitive")?.unwrap_or(false);
    let mode_arg = args.string("output_mode")?.unwrap_or("files_with_matches");
    let mode = GrepOutputMode::parse(mode_arg).ok_or_else(|| {
        ToolError::invalid(format!(
            "output_mode must be one of files_with_matches, content, count; got '{mode_arg}'."
        ))
    })?;
    let limit = args.integer_in("limit", 1, MAX_LIMIT, DEFAULT_LIMIT, || {
        format!("limit must be an integer between 1 and {MAX_LIMIT}.")
    })?;
    let context = args.integer_in("context", 0, MAX_CONTEXT, 0, || {
        format!("context must be an integer between 0 and {MAX_CONTEXT}.")
    })?;
    let include_hidden = args.boolean("include_hidden")?.unwrap_or(false);
    let include_ignored = args.boolean("include_ignored")?.unwrap_or(false);

    let root = call.resolve(path_arg, OUTSIDE)?;
    let shown_root = call.display(&root);
    let context_lines = if mode == GrepOutputMode::Content {
        context as u32
    } else {
        0
    };
    let budgets = Budgets {
        max_results: MAX_COLLECTED,
        include_hidden,
        include_ignored,
        ..Budgets::default()
    };
    let (regex, include) = (pattern.to_owned(), include.to_owned());
    let (hits, summary) = call
        .search(Op::ReadRe, move || {
            let request = GrepRequest {
                pattern: &regex,
                glob: &include,
                case_insensitive: !case_sensitive,
                before_context: context_lines,
                after_context: context_lines,
                ..GrepRequest::default()
            };
            SearchSpec::grep(root, request, budgets)
        })
        .await
        .map_err(|e| search_error(e, &shown_root, pattern, "Path"))?;

    let mut files: Vec<FileHits> = hits
        .into_iter()
        .filter_map(|h| match h {
            Hit::File(f) => Some(f),
            Hit::Entry(_) | Hit::Path { .. } => None,
        })
        .collect();
    files.sort_by(|a, b| {
        (Reverse(a.modified), a.path.order_key()).cmp(&(Reverse(b.modified), b.path.order_key()))
    });
    let total: usize = files
        .iter()
        .map(|f| f.lines.iter().filter(|l| !l.is_context).count())
        .sum();
    let matched_files = files.len();

    // Cut after `limit` matches, keeping the context that belongs to them.
    let mut shown: Vec<Shown> = Vec::new();
    let mut taken = 0;
    'files: for f in files {
        let file = call.display(&f.path);
        let mut after_last = 0;
        for line in f.lines {
            if !line.is_context {
                if taken == limit as usize {
                    break 'files;
                }
                taken += 1;
                after_last = 0;
            } else if taken == limit as usize {
                after_last += 1;
                if after_last > context as usize {
                    break 'files;
                }
            }
            shown.push(Shown {
                file: file.clone(),
                line,
            });
        }
    }
    let truncated = taken < total;
    let aborted = summary.aborted.filter(|r| *r != AbortReason::Cancelled);

    let mut text = if total == 0 {
        format!("No matches found for '{pattern}' in '{shown_root}'")
    } else {
        format!("Found {total} matches in {matched_files} files for '{pattern}' in '{shown_root}'")
    };
    // Writing into a String cannot fail.
    let _ = write!(
        text,
        "\n(Sorted by mtime desc. Took {}ms)",
        summary.elapsed.as_millis()
    );
    push_cut_notes(&mut text, truncated, limit, aborted);
    push_skip_notes(&mut text, &summary, "include_hidden", "include_ignored");
    if summary.skipped_binary + summary.skipped_too_large > 0 {
        let _ = write!(
            text,
            "\n[Skipped: {} binary files and {} files over 64 MiB.]",
            summary.skipped_binary, summary.skipped_too_large
        );
    }
    if !shown.is_empty() {
        text.push_str("\n\n");
        text.push_str(&render(&shown, mode, context > 0));
    }

    let matches: Vec<Value> = shown
        .iter()
        .filter(|s| !s.line.is_context)
        .map(|s| json!({"file": s.file, "line": s.line.line_number, "text": clip(&s.line.line)}))
        .collect();
    let mut data = object! {"matches" => matches, "truncated" => truncated};
    if let Some(reason) = aborted {
        data.insert("aborted_reason".into(), reason.as_str().into());
    }
    Ok(Outcome {
        status: Status::partial_if(truncated || aborted.is_some()),
        data,
        text,
        stats: object! {
            "matched_files" => matched_files,
            "matched_lines" => total,
            "files_searched" => summary.files_searched,
        },
    })
}

/// The body of the text in one output mode.
fn render(shown: &[Shown], mode: GrepOutputMode, with_context: bool) -> String {
    if !(with_context && mode == GrepOutputMode::Content) {
        let clipped: Vec<String> = shown.iter().map(|s| clip(&s.line.line)).collect();
        let lines: Vec<GrepLine<'_>> = shown
            .iter()
            .zip(&clipped)
            .filter(|(s, _)| !s.line.is_context)
            .map(|(s, line)| GrepLine {
                path: &s.file,
                line_number: s.line.line_number,
                line,
            })
            .collect();
        return grep::format_grep_results(&lines, mode);
    }
    // ripgrep's layout: `:` after a match's number, `-` after a context
    // line's, `--` between groups that are not adjacent.
    let mut out = String::new();
    let mut previous: Option<(&str, u64)> = None;
    for s in shown {
        let adjacent =
            previous.is_some_and(|(file, n)| file == s.file && n + 1 == s.line.line_number);
        if previous.is_some() {
            out.push('\n');
            if !adjacent {
                out.push_str("--\n");
            }
        }
        let sep = if s.line.is_context { '-' } else { ':' };
        // Writing into a String cannot fail.
        let _ = write!(
            out,
            "{}{sep}{}{sep}{}",
            s.file,
            s.line.line_number,
            clip(&s.line.line)
        );
        previous = Some((&s.file, s.line.line_number));
    }
    out
}
