//! The search verbs: `grep` (ripgrep-style `path:line:text`, or JSON) and
//! `glob` (one path per line), streamed as found, their summary on stderr.
//! Like rg, grep exits 1 when nothing matched and 2 on an error; a search a
//! budget cut short exits with the verb's failure status unless
//! `--allow-partial` says its results are enough.

use super::connect::{Fs, describe_status as fail};
use super::format::count;
use super::{Outcome, io};
use crate::pb;
use std::io::Write;

/// The walk switches and budgets shared by `grep` and `glob`.
#[derive(Debug, clap::Args)]
pub struct SearchFlags {
    /// Include hidden files.
    #[arg(long)]
    pub(super) hidden: bool,
    /// Include ignored files.
    #[arg(long)]
    pub(super) no_ignore: bool,
    /// Visited-entries budget (0: default 20000).
    #[arg(long, default_value_t = 0)]
    pub(super) max_visited: u64,
    /// Time budget in ms (0: default 2000).
    #[arg(long, default_value_t = 0)]
    pub(super) max_duration_ms: u64,
    /// Exit as if complete when a budget cut the search short.
    #[arg(long)]
    pub(super) allow_partial: bool,
}

/// Refuses a pattern that is no regex before any call, quoting the
/// pattern as the user typed it (the server sees it inside the flags it
/// adds, and would quote that).
pub(super) fn check_regex(pattern: &str, ignore_case: bool) -> Result<(), String> {
    regex_syntax::ParserBuilder::new()
        .case_insensitive(ignore_case)
        .build()
        .parse(pattern)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// `grep`: matches streamed as `path:line:text` (context lines `-`), or one
/// JSON object each.
pub(super) async fn grep(
    fs: &mut Fs,
    req: pb::GrepRequest,
    json: bool,
    allow_partial: bool,
    out: &mut impl Write,
) -> Result<Outcome, String> {
    let mut stream = fs.grep(req).await.map_err(|s| fail(&s))?.into_inner();
    let mut matched = false;
    let mut cut_short = false;
    while let Some(msg) = stream.message().await.map_err(|s| fail(&s))? {
        match msg.result {
            Some(pb::grep_response::Result::Batch(b)) => {
                for m in b.matches {
                    matched |= !m.is_context;
                    if json {
                        let record = serde_json::json!({
                            "path": m.path,
                            "line_number": m.line_number,
                            "line": m.line,
                            "context": m.is_context,
                        });
                        writeln!(out, "{record}")
                    } else {
                        let sep = if m.is_context { '-' } else { ':' };
                        writeln!(out, "{}{sep}{}{sep}{}", m.path, m.line_number, m.line)
                    }
                    .map_err(io)?;
                }
                out.flush().map_err(io)?;
            }
            Some(pb::grep_response::Result::Summary(s)) => cut_short = print_summary(&s),
            None => {}
        }
    }
    out.flush().map_err(io)?;
    Ok(match (cut_short && !allow_partial, matched) {
        (true, _) => Outcome::CutShort,
        (false, true) => Outcome::Done,
        (false, false) => Outcome::NothingMatched,
    })
}

/// `glob`: matching paths streamed one per line.
pub(super) async fn glob(
    fs: &mut Fs,
    req: pb::GlobRequest,
    allow_partial: bool,
    out: &mut impl Write,
) -> Result<Outcome, String> {
    let mut stream = fs.glob(req).await.map_err(|s| fail(&s))?.into_inner();
    let mut cut_short = false;
    while let Some(msg) = stream.message().await.map_err(|s| fail(&s))? {
        match msg.result {
            Some(pb::glob_response::Result::Batch(b)) => {
                for e in b.entries {
                    writeln!(out, "{}", e.path).map_err(io)?;
                }
                out.flush().map_err(io)?;
            }
            Some(pb::glob_response::Result::Summary(s)) => cut_short = print_summary(&s),
            None => {}
        }
    }
    out.flush().map_err(io)?;
    Ok(match cut_short && !allow_partial {
        true => Outcome::CutShort,
        false => Outcome::Done,
    })
}

/// Prints a search's summary on stderr; true when a budget cut it short,
/// in which case the summary names the flag that raises it.
fn print_summary(s: &pb::SearchSummary) -> bool {
    let stopped = match s.aborted_reason() {
        pb::AbortedReason::Unspecified => None,
        pb::AbortedReason::CountLimit => Some(format!(
            "the visited-entries budget ran out after {}; raise it with --max-visited",
            count(s.visited, "entry", "entries")
        )),
        pb::AbortedReason::TimeLimit => Some(format!(
            "the time budget ran out after {} ms; raise it with --max-duration-ms",
            s.elapsed_ms
        )),
        pb::AbortedReason::Limit => Some("the result limit was reached".to_owned()),
        pb::AbortedReason::Cancelled => Some("cancelled".to_owned()),
    };
    eprintln!(
        "{} matched, {} visited, {} searched, skipped {} ignored / {} hidden / {} binary / {} too large, {} ms",
        s.matched,
        s.visited,
        count(s.files_searched, "file", "files"),
        s.skipped_ignored,
        s.skipped_hidden,
        s.skipped_binary,
        s.skipped_too_large,
        s.elapsed_ms
    );
    for p in &s.problems {
        eprintln!("problem: {}: {} [{}]", p.path, p.message, p.code);
    }
    if let Some(why) = &stopped {
        eprintln!(
            "search cut short: {why} (results may be incomplete; pass --allow-partial to accept them)"
        );
    }
    stopped.is_some()
}
