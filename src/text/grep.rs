//! The Grep tool's text in its three output modes (`files_with_matches`,
//! `content`, `count`; docs/contract.md § Glob and Grep). Matches are
//! borrowed ([`GrepLine`]); grouping keeps first-seen order so the output is
//! deterministic and follows the search order.

use std::collections::HashMap;
use std::fmt::Write as _;

/// Returned by [`format_grep_results`] when there is nothing to report.
const NO_MATCHES: &str = "No matches found";

/// How grep results are rendered, mirroring the `output_mode` parameter of
/// deepagents' grep tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GrepOutputMode {
    /// Only the paths of files that matched, one per line (the default).
    #[default]
    FilesWithMatches,
    /// Every matching line as `path:line_number:line`.
    Content,
    /// The number of matching lines per file as `path:N`.
    Count,
}

impl GrepOutputMode {
    /// Parses the wire name: `"files_with_matches"`, `"content"` or
    /// `"count"`; anything else is `None` so the caller can reject it.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "files_with_matches" => Some(Self::FilesWithMatches),
            "content" => Some(Self::Content),
            "count" => Some(Self::Count),
            _ => None,
        }
    }

    /// The wire name accepted by [`GrepOutputMode::parse`].
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FilesWithMatches => "files_with_matches",
            Self::Content => "content",
            Self::Count => "count",
        }
    }
}

/// One matching line found by grep, borrowed from the search results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrepLine<'a> {
    /// Path of the file that matched.
    pub path: &'a str,
    /// 1-based number of the matching line.
    pub line_number: u64,
    /// The matching line, without its terminator.
    pub line: &'a str,
}

/// Renders grep matches for the model in the given mode:
/// [`GrepOutputMode::FilesWithMatches`] lists each path once,
/// [`GrepOutputMode::Content`] gives `path:line_number:line` per match and
/// [`GrepOutputMode::Count`] gives `path:N` per file. Files appear in the
/// order they were first seen, lines are joined by `\n`, and no matches gives
/// [`NO_MATCHES`] so the model never gets an empty answer.
pub fn format_grep_results(matches: &[GrepLine<'_>], mode: GrepOutputMode) -> String {
    if matches.is_empty() {
        return NO_MATCHES.to_owned();
    }
    let mut out = String::new();
    match mode {
        GrepOutputMode::Content => {
            for m in matches {
                if !out.is_empty() {
                    out.push('\n');
                }
                // Writing into a String cannot fail.
                let _ = write!(out, "{}:{}:{}", m.path, m.line_number, m.line);
            }
        }
        GrepOutputMode::FilesWithMatches => {
            for (path, _) in group_grep_matches(matches) {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(path);
            }
        }
        GrepOutputMode::Count => {
            for (path, lines) in group_grep_matches(matches) {
                if !out.is_empty() {
                    out.push('\n');
                }
                // Writing into a String cannot fail.
                let _ = write!(out, "{path}:{}", lines.len());
            }
        }
    }
    out
}

/// Groups grep matches by path, files in first-seen order and each file's
/// matches in input order, so per-file rendering is deterministic (a map would
/// lose the search order).
fn group_grep_matches<'a>(matches: &'a [GrepLine<'a>]) -> Vec<(&'a str, Vec<&'a GrepLine<'a>>)> {
    let mut groups: Vec<(&'a str, Vec<&'a GrepLine<'a>>)> = Vec::new();
    let mut index: HashMap<&'a str, usize> = HashMap::new();
    for m in matches {
        let slot = *index.entry(m.path).or_insert_with(|| {
            groups.push((m.path, Vec::new()));
            groups.len() - 1
        });
        groups[slot].1.push(m);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grep_modes_parse_and_round_trip() {
        for mode in [
            GrepOutputMode::FilesWithMatches,
            GrepOutputMode::Content,
            GrepOutputMode::Count,
        ] {
            assert_eq!(GrepOutputMode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(GrepOutputMode::parse("Content"), None);
        assert_eq!(GrepOutputMode::parse(""), None);
        assert_eq!(GrepOutputMode::default(), GrepOutputMode::FilesWithMatches);
    }

    fn sample_matches() -> Vec<GrepLine<'static>> {
        vec![
            GrepLine {
                path: "/b.rs",
                line_number: 3,
                line: "fn b()",
            },
            GrepLine {
                path: "/a.rs",
                line_number: 1,
                line: "fn a()",
            },
            GrepLine {
                path: "/b.rs",
                line_number: 9,
                line: "b: x:y",
            },
        ]
    }

    #[test]
    fn grep_files_with_matches_lists_unique_paths_in_first_seen_order() {
        assert_eq!(
            format_grep_results(&sample_matches(), GrepOutputMode::FilesWithMatches),
            "/b.rs\n/a.rs"
        );
    }

    #[test]
    fn grep_content_lists_path_line_number_and_line() {
        assert_eq!(
            format_grep_results(&sample_matches(), GrepOutputMode::Content),
            "/b.rs:3:fn b()\n/a.rs:1:fn a()\n/b.rs:9:b: x:y"
        );
    }

    #[test]
    fn grep_count_lists_matches_per_file() {
        assert_eq!(
            format_grep_results(&sample_matches(), GrepOutputMode::Count),
            "/b.rs:2\n/a.rs:1"
        );
    }

    #[test]
    fn grep_without_matches_says_so_in_every_mode() {
        for mode in [
            GrepOutputMode::FilesWithMatches,
            GrepOutputMode::Content,
            GrepOutputMode::Count,
        ] {
            assert_eq!(format_grep_results(&[], mode), "No matches found");
        }
    }

    #[test]
    fn grouping_keeps_first_seen_file_order_and_match_order() {
        let matches = sample_matches();
        let groups = group_grep_matches(&matches);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].0, "/b.rs");
        assert_eq!(
            groups[0]
                .1
                .iter()
                .map(|m| m.line_number)
                .collect::<Vec<_>>(),
            [3, 9]
        );
        assert_eq!(groups[1].0, "/a.rs");
        assert_eq!(groups[1].1, [&matches[1]]);
    }
}
