//! The search verbs: `grep` (ripgrep-style `path:line:text`) and `glob`
//! (one path per line), streamed as found, their summary on stderr.

use super::connect::{Fs, describe_status as fail};
use super::io;
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
}

/// `grep`: matches streamed as `path:line:text` (context lines `-`).
pub(super) async fn grep(
    fs: &mut Fs,
    req: pb::GrepRequest,
    out: &mut impl Write,
) -> Result<(), String> {
    let mut stream = fs.grep(req).await.map_err(|s| fail(&s))?.into_inner();
    while let Some(msg) = stream.message().await.map_err(|s| fail(&s))? {
        match msg.result {
            Some(pb::grep_response::Result::Batch(b)) => {
                for m in b.matches {
                    let sep = if m.is_context { '-' } else { ':' };
                    writeln!(out, "{}{sep}{}{sep}{}", m.path, m.line_number, m.line).map_err(io)?;
                }
                out.flush().map_err(io)?;
            }
            Some(pb::grep_response::Result::Summary(s)) => print_summary(&s),
            None => {}
        }
    }
    Ok(())
}

/// `glob`: matching paths streamed one per line.
pub(super) async fn glob(
    fs: &mut Fs,
    req: pb::GlobRequest,
    out: &mut impl Write,
) -> Result<(), String> {
    let mut stream = fs.glob(req).await.map_err(|s| fail(&s))?.into_inner();
    while let Some(msg) = stream.message().await.map_err(|s| fail(&s))? {
        match msg.result {
            Some(pb::glob_response::Result::Batch(b)) => {
                for e in b.entries {
                    writeln!(out, "{}", e.path).map_err(io)?;
                }
                out.flush().map_err(io)?;
            }
            Some(pb::glob_response::Result::Summary(s)) => print_summary(&s),
            None => {}
        }
    }
    Ok(())
}

fn print_summary(s: &pb::SearchSummary) {
    let reason = match s.aborted_reason() {
        pb::AbortedReason::Unspecified => String::new(),
        other => format!(", stopped: {}", other.as_str_name()),
    };
    eprintln!(
        "{} matched, {} visited, {} files searched, skipped {} ignored / {} hidden / {} binary / {} too large, {} ms{reason}",
        s.matched,
        s.visited,
        s.files_searched,
        s.skipped_ignored,
        s.skipped_hidden,
        s.skipped_binary,
        s.skipped_too_large,
        s.elapsed_ms
    );
    for p in &s.problems {
        eprintln!("problem: {}: {} [{}]", p.path, p.message, p.code);
    }
}
