//! Why an Edit's `old_string` (or an ApplyPatch hunk's lines) was not
//! found, told so the model can fix its next call: the closest region of
//! the file, numbered, and what differs (line endings, trailing whitespace, indentation, other whitespace, letter
//! case, or the first differing characters).
//!
//! The closest region is the window of as many lines as `old_string` has with
//! the highest similarity (`similar`'s ratio: of characters, or of lines for
//! an `old_string` over [`MAX_CHAR_SCORED_BYTES`]). When there are more than
//! [`MAX_SCORED_WINDOWS`] windows, or the `old_string` is long, the windows
//! are first ranked by a cheap score (how many of their lines, trimmed, are
//! lines of `old_string`: one hash lookup per line and a sliding sum, so
//! linear in the file) and only the best are scored. All scoring stops at
//! [`HINT_BUDGET`], files over [`MAX_HINT_FILE_BYTES`] are not searched, and
//! region lines are cut to [`MAX_REGION_LINE_CHARS`], so the message stays
//! small and fast whatever the file. The Edit tools build it after the
//! update released the file (`super::edit`), so no lock waits on it.

use similar::{Algorithm, DiffOp, TextDiff};
use std::cmp::Reverse;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Windows scored by similarity; more are ranked by the cheap score first.
pub const MAX_SCORED_WINDOWS: usize = 2000;
/// Lines of the closest region shown.
pub const MAX_REGION_LINES: usize = 30;
/// Below this similarity no region is shown.
pub const MIN_SIMILARITY: f32 = 0.5;
/// Time for one diff; past it `similar` gives a coarser answer.
const DIFF_DEADLINE: Duration = Duration::from_millis(20);
/// Time for scoring all windows: files of very long lines must not make an
/// error message slow. Measured on a 10,000-line file: 8 ms for a one-line
/// `old_string`, 18 ms for two lines, far below it.
pub const HINT_BUDGET: Duration = Duration::from_millis(250);
/// Longest region line shown, in characters (minified files).
pub const MAX_REGION_LINE_CHARS: usize = 500;
/// Largest file searched for a closest region: the search holds every line
/// of the file and a few numbers per line.
pub const MAX_HINT_FILE_BYTES: usize = 2 << 20;
/// Longest `old_string` compared character by character; a longer one is
/// compared line by line (a character diff of two 40 KB texts is slow).
pub const MAX_CHAR_SCORED_BYTES: usize = 2048;

fn ratio(a: &str, b: &str) -> f32 {
    let mut config = TextDiff::configure();
    config
        .algorithm(Algorithm::Myers)
        .deadline(Instant::now() + DIFF_DEADLINE);
    if b.len() > MAX_CHAR_SCORED_BYTES {
        config.diff_lines(a, b).ratio()
    } else {
        config.diff_chars(a, b).ratio()
    }
}

/// The windows of `width` lines worth scoring, best first by the cheap
/// score (ties: earlier first), at most [`MAX_SCORED_WINDOWS`] of them.
fn ranked_windows(lines: &[&str], old: &str, width: usize) -> Vec<usize> {
    let wanted: HashSet<&str> = crate::text::split_lines(old)
        .into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    let hits: Vec<u32> = lines
        .iter()
        .map(|l| u32::from(wanted.contains(l.trim())))
        .collect();
    let windows = lines.len() - width + 1;
    let mut scores = Vec::with_capacity(windows);
    let mut sum: u32 = hits[..width].iter().sum();
    for i in 0..windows {
        scores.push(sum);
        if i + width < lines.len() {
            sum = sum + hits[i + width] - hits[i];
        }
    }
    let key = |i: &usize| (Reverse(scores[*i]), *i);
    let mut candidates: Vec<usize> = (0..windows).collect();
    if candidates.len() > MAX_SCORED_WINDOWS {
        candidates.select_nth_unstable_by_key(MAX_SCORED_WINDOWS - 1, key);
        candidates.truncate(MAX_SCORED_WINDOWS);
    }
    candidates.sort_unstable_by_key(key);
    candidates
}

/// What was looked for, as the message names it.
pub struct Sought {
    /// The message's first sentence.
    pub lead: &'static str,
    /// What the text looked for is called (`old_string`, `the hunk`).
    pub name: &'static str,
    /// The closing advice.
    pub retry: &'static str,
}

/// An Edit's `old_string`.
pub const OLD_STRING: Sought = Sought {
    lead: "old_string not found in file.",
    name: "old_string",
    retry: "Copy old_string exactly from the file (whitespace and indentation included, without \
            the line-number prefix) and retry.",
};

/// The message for an `old_string` that `text` does not contain.
pub fn not_found(text: &str, old: &str) -> String {
    missing(text, old, &OLD_STRING)
}

/// The message for text `old` (named by `sought`) that `text` does not
/// contain.
pub fn missing(text: &str, old: &str, sought: &Sought) -> String {
    let name = sought.name;
    let mut out = String::from(sought.lead);
    if text.len() > MAX_HINT_FILE_BYTES {
        // Writing into a String cannot fail.
        let _ = write!(
            out,
            " The file is too large to look for similar text ({} bytes); Grep for a distinctive \
             line of {name} to find where the text is, then Read it there.",
            text.len()
        );
        return out;
    }
    let lines = crate::text::split_lines(text);
    let want = crate::text::count_lines(old.as_bytes()).max(1);
    if lines.is_empty() {
        out.push_str(" The file is empty.");
        return out;
    }
    let width = want.min(lines.len());
    let windows = lines.len() - width + 1;
    let candidates: Vec<usize> =
        if windows > MAX_SCORED_WINDOWS || old.len() > MAX_CHAR_SCORED_BYTES {
            ranked_windows(&lines, old, width)
        } else {
            (0..windows).collect()
        };
    // Best window so far; the first wins ties. Scoring stops at the budget.
    let started = Instant::now();
    let mut best_window: Option<(usize, f32)> = None;
    for i in candidates {
        if started.elapsed() > HINT_BUDGET {
            break;
        }
        let score = ratio(&lines[i..i + width].join("\n"), old);
        if best_window.is_none_or(|(_, s)| score > s) {
            best_window = Some((i, score));
        }
    }
    let Some((best, score)) = best_window else {
        return out;
    };
    if score < MIN_SIMILARITY {
        out.push_str(
            " No similar text was found either; Read the file to see its current content.",
        );
        return out;
    }
    let region = lines[best..best + width].join("\n");
    // Writing into a String cannot fail.
    let _ = write!(
        out,
        " {}",
        difference(&region, old, text.contains("\r\n"), name)
    );
    let shown = width.min(MAX_REGION_LINES);
    let lines_label = if width == 1 {
        format!("line {}", best + 1)
    } else {
        format!("lines {}-{}", best + 1, best + width)
    };
    let _ = write!(
        out,
        "\nClosest match ({lines_label}, {:.0}% similar):\n{}",
        score * 100.0,
        crate::text::format_lines_numbered(
            lines[best..best + shown].iter().map(|l| clip(l)),
            best as u64 + 1
        )
    );
    if shown < width {
        let _ = write!(out, "\n... ({} more lines)", width - shown);
    }
    out.push('\n');
    out.push_str(sought.retry);
    out
}

/// A line cut to [`MAX_REGION_LINE_CHARS`] characters.
fn clip(line: &str) -> &str {
    line.char_indices()
        .nth(MAX_REGION_LINE_CHARS)
        .map_or(line, |(cut, _)| &line[..cut])
}

/// What separates `old` (called `name`) from the `region` of the file it
/// resembles.
fn difference(region: &str, old: &str, file_crlf: bool, name: &str) -> String {
    let same_under = |f: &dyn Fn(&str) -> String| f(region) == f(old);
    let lf = |s: &str| s.replace("\r\n", "\n");
    if old.contains('\r') != file_crlf && same_under(&lf) {
        return "It differs only in line endings (the file uses CRLF).".into();
    }
    let trim_end = |s: &str| {
        lf(s)
            .lines()
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n")
    };
    if same_under(&trim_end) {
        return "It differs only in trailing whitespace at the end of lines.".into();
    }
    let trim = |s: &str| lf(s).lines().map(str::trim).collect::<Vec<_>>().join("\n");
    if same_under(&trim) {
        return "It differs only in indentation (leading whitespace: check spaces vs tabs and depth)."
            .into();
    }
    let collapse = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    if same_under(&collapse) {
        return "It differs only in whitespace (spaces, tabs or line breaks).".into();
    }
    if same_under(&|s: &str| collapse(s).to_lowercase()) {
        return "It differs only in letter case.".into();
    }
    first_difference(region, old, name)
}

/// The first place where `old` (called `name`) and the file disagree,
/// ignoring file text before and after what `old` covers.
fn first_difference(region: &str, old: &str, name: &str) -> String {
    let diff = TextDiff::configure()
        .deadline(Instant::now() + DIFF_DEADLINE)
        .diff_chars(old, region);
    let ops = diff.ops();
    let chars = |s: &str, r: std::ops::Range<usize>| -> String {
        let taken: String = s.chars().skip(r.start).take(r.len().min(40)).collect();
        if r.len() > 40 {
            format!("{taken}…")
        } else {
            taken
        }
    };
    let inner = ops
        .iter()
        .enumerate()
        .find(|(i, op)| {
            let edge = *i == 0 || *i == ops.len() - 1;
            match op {
                DiffOp::Equal { .. } => false,
                // File text outside what old_string covers is not a difference.
                DiffOp::Insert { .. } => !edge,
                _ => true,
            }
        })
        .map(|(_, op)| op);
    let Some(op) = inner else {
        return "It differs in a few characters.".into();
    };
    let at = op.old_range().start;
    let before: String = old.chars().take(at).collect();
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    let what = match op {
        DiffOp::Delete {
            old_index, old_len, ..
        } => format!(
            "{name} has {:?} which the file does not have",
            chars(old, *old_index..old_index + old_len)
        ),
        DiffOp::Insert {
            new_index, new_len, ..
        } => format!(
            "the file has {:?} which {name} does not have",
            chars(region, *new_index..new_index + new_len)
        ),
        DiffOp::Replace {
            old_index,
            old_len,
            new_index,
            new_len,
        } => format!(
            "{name} has {:?} where the file has {:?}",
            chars(old, *old_index..old_index + old_len),
            chars(region, *new_index..new_index + new_len)
        ),
        DiffOp::Equal { .. } => String::new(),
    };
    format!("First difference at line {line}, column {column} of {name}: {what}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n";

    #[test]
    fn indentation_difference_is_named_with_the_region() {
        let msg = not_found(FILE, "let x = 1;\nprintln!(\"{x}\");");
        assert!(
            msg.starts_with("old_string not found in file. It differs only in indentation"),
            "{msg}"
        );
        assert!(msg.contains("Closest match (lines 2-3"), "{msg}");
        assert!(msg.contains("     2\t    let x = 1;"), "{msg}");
    }

    #[test]
    fn a_changed_character_is_located() {
        let msg = not_found(FILE, "    let y = 1;");
        assert!(
            msg.contains("First difference at line 1, column 9 of old_string: old_string has \"y\" where the file has \"x\"."),
            "{msg}"
        );
    }

    #[test]
    fn whitespace_and_case_differences_are_named() {
        assert!(not_found(FILE, "let  x = 1;").contains("differs only in whitespace"));
        assert!(not_found(FILE, "    LET x = 1;").contains("differs only in letter case"));
        assert!(not_found(FILE, "    let x = 1;  ").contains("trailing whitespace"));
        let crlf = "a\r\nb\r\n";
        assert!(not_found(crlf, "a\nb\n\n").contains("Closest"));
    }

    #[test]
    fn minified_files_give_short_hints_quickly() {
        let line = "var a=1;".repeat(20_000);
        let file = format!("{line}\n{line}\n");
        let started = Instant::now();
        let msg = not_found(&file, "var a=2;var a=1;");
        assert!(
            started.elapsed() < HINT_BUDGET * 4,
            "{:?}",
            started.elapsed()
        );
        assert!(msg.len() < 2000, "{} bytes", msg.len());
    }

    /// A long `old_string` missing from a long file: linear ranking, line
    /// scoring, and the region it was copied from is found.
    #[test]
    fn long_old_strings_in_long_files_are_ranked_cheaply() {
        let file: String = (0..20_000)
            .map(|i| format!("    let value_{i} = compute({i});\n"))
            .collect();
        let old: String = (5_000..5_800)
            .map(|i| format!("    let value_{i} = compute({i});\n"))
            .collect::<String>()
            .replace("compute(5400)", "compute(5401)");
        let started = Instant::now();
        let msg = not_found(&file, &old);
        assert!(
            started.elapsed() < HINT_BUDGET * 8,
            "{:?}",
            started.elapsed()
        );
        assert!(msg.contains("Closest match (lines 5001-5800"), "{msg}");
        assert!(msg.contains("... (770 more lines)"), "{msg}");
    }

    #[test]
    fn files_too_large_to_search_say_so() {
        let file = "x\n".repeat(MAX_HINT_FILE_BYTES);
        let msg = not_found(&file, "y");
        assert!(msg.contains("too large to look for similar text"), "{msg}");
    }

    #[test]
    fn unrelated_text_gets_no_region() {
        let msg = not_found(FILE, "completely unrelated words here");
        assert!(msg.contains("No similar text"), "{msg}");
    }
}
