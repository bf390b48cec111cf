//! Unified diffs of a change: the previews of Write, Edit and MultiEdit, the
//! Diff RPC and the History tool.
//!
//! Uses the `similar` crate (Myers diff, line granularity, 3 lines of
//! context, like `diff -u`). The text is capped ([`DiffCaps`]: a preview at
//! [`MAX_DIFF_LINES`] lines and [`MAX_DIFF_BYTES`] bytes), cut at a line
//! boundary, so a rewrite of a big file cannot flood the model or a message.
//!
//! Cost is bounded, because a diff is computed for every change and Myers is
//! quadratic on very different texts (an 80,000-line replacement took 25 s):
//! - [`Change::new`] keeps only the changed lines and their context (the
//!   lines the two texts share at the start and at the end are dropped in one
//!   linear pass). Edit calls it inside the update, under the file's lock, and
//!   diffs after the lock is released;
//! - changed regions over [`MAX_DIFFED_BYTES`] are not diffed: the preview
//!   shows them as removed then added lines (`coarse`), and the counts are
//!   the region's lines;
//! - the diff itself stops refining at [`DIFF_DEADLINE`] (`similar` then
//!   reports the rest as replaced), and only the shown lines are rendered.
//!
//! The added/removed counts always cover the whole change.

use similar::{Algorithm, ChangeTag, DiffOp, TextDiff};
use std::time::{Duration, Instant};

/// Most lines of a diff preview.
pub const MAX_DIFF_LINES: usize = 100;
/// Most bytes of a diff preview.
pub const MAX_DIFF_BYTES: usize = 10240;
/// Most bytes (old and new together) of changed lines diffed line by line;
/// a larger change is shown coarsely.
pub const MAX_DIFFED_BYTES: usize = 1 << 20;
/// Time one diff may take to refine; past it the rest counts as replaced.
pub const DIFF_DEADLINE: Duration = Duration::from_millis(200);
/// Lines of context around each change.
const CONTEXT_LINES: usize = 3;

/// How much diff text may be rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiffCaps {
    /// Most lines.
    pub lines: usize,
    /// Most bytes.
    pub bytes: usize,
}

impl DiffCaps {
    /// A preview for a model: [`MAX_DIFF_LINES`] lines, [`MAX_DIFF_BYTES`].
    pub const PREVIEW: DiffCaps = DiffCaps {
        lines: MAX_DIFF_LINES,
        bytes: MAX_DIFF_BYTES,
    };
    /// A whole diff for a person or a program (the Diff RPC): 1 MiB, far
    /// below the 4 MiB a gRPC client accepts in one message.
    pub const WHOLE: DiffCaps = DiffCaps {
        lines: 100_000,
        bytes: 1 << 20,
    };
}

/// A change, summarised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffPreview {
    /// Unified diff, possibly cut.
    pub text: String,
    /// True when `text` was cut.
    pub truncated: bool,
    /// True when the change was too large to diff line by line: `text`
    /// shows it as removed then added lines and the counts are its lines.
    pub coarse: bool,
    /// Lines added by the change.
    pub added: usize,
    /// Lines removed by the change.
    pub removed: usize,
}

/// What a diff needs of a change, and only that: the changed lines with their
/// context, or (when they are too many) their line counts and beginnings.
#[derive(Debug)]
pub struct Change {
    /// 0-based line of the files where `old` and `new` start.
    first_line: usize,
    /// The changed lines of the old text with context, or the first
    /// [`MAX_DIFF_BYTES`] bytes of the changed lines when coarse.
    old: String,
    /// The same of the new text.
    new: String,
    /// `(removed, added)` line counts of a change too large to diff.
    coarse: Option<(usize, usize)>,
}

/// Start of the line holding byte `at` of `text` (`at` itself when it starts one).
fn line_start(text: &str, at: usize) -> usize {
    memchr::memrchr(b'\n', &text.as_bytes()[..at]).map_or(0, |i| i + 1)
}

/// Lines in `text` (a final line without terminator counts).
fn lines_in(text: &str) -> usize {
    crate::text::count_lines(text.as_bytes())
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn head(text: &str, max: usize) -> &str {
    let mut cut = text.len().min(max);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// The lines of `text` that fit in `max` bytes, for the head of a coarse
/// change: whole lines only, so no cut line is shown as the file's last
/// (with a false "No newline at end of file"); a first line longer than
/// `max` is cut on a character boundary and ended with a newline.
fn head_lines(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let cut = head(text, max);
    match memchr::memrchr(b'\n', cut.as_bytes()) {
        Some(end) => cut[..=end].to_owned(),
        None => format!("{cut}\n"),
    }
}

impl Change {
    /// Captures the change from `old` to `new` in one linear pass, copying
    /// only the changed lines and their context (or, past
    /// [`MAX_DIFFED_BYTES`], their beginnings).
    pub fn new(old: &str, new: &str) -> Change {
        let (a, b) = (old.as_bytes(), new.as_bytes());
        let same_start = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let start = line_start(old, same_start);
        let room = a.len().min(b.len()) - start;
        let same_end = a
            .iter()
            .rev()
            .zip(b.iter().rev())
            .take(room)
            .take_while(|(x, y)| x == y)
            .count();
        let (mut old_end, mut new_end) = (a.len() - same_end, b.len() - same_end);
        // The changed lines end where a line ends in both texts: extend them
        // to the end of the shared line they stop in.
        let ends_line = |text: &[u8], end: usize| end == start || text[end - 1] == b'\n';
        if !ends_line(a, old_end) || !ends_line(b, new_end) {
            let rest = memchr::memchr(b'\n', &a[old_end..]).map_or(a.len() - old_end, |i| i + 1);
            old_end += rest;
            new_end += rest;
        }
        let (old_core, new_core) = (&old[start..old_end], &new[start..new_end]);
        let first_changed = memchr::memchr_iter(b'\n', &a[..start]).count();
        if old_core.len() + new_core.len() > MAX_DIFFED_BYTES {
            return Change {
                first_line: first_changed,
                old: head_lines(old_core, MAX_DIFF_BYTES),
                new: head_lines(new_core, MAX_DIFF_BYTES),
                coarse: Some((lines_in(old_core), lines_in(new_core))),
            };
        }
        let mut from = start;
        for _ in 0..CONTEXT_LINES {
            if from == 0 {
                break;
            }
            from = line_start(old, from - 1);
        }
        let after = |text: &str, mut at: usize| {
            for _ in 0..CONTEXT_LINES {
                match memchr::memchr(b'\n', &text.as_bytes()[at..]) {
                    Some(i) => at += i + 1,
                    None => return text.len(),
                }
            }
            at
        };
        let context_after = after(old, old_end) - old_end;
        Change {
            first_line: first_changed - old[from..start].matches('\n').count(),
            old: old[from..old_end + context_after].to_owned(),
            new: new[from..new_end + context_after].to_owned(),
            coarse: None,
        }
    }

    /// The preview of this change in the file shown as `shown`.
    pub fn preview(&self, shown: &str) -> DiffPreview {
        self.render(shown, DiffCaps::PREVIEW)
    }

    /// The diff of this change in the file shown as `shown`, within `caps`.
    pub fn render(&self, shown: &str, caps: DiffCaps) -> DiffPreview {
        let mut out = Preview {
            caps,
            ..Preview::default()
        };
        let header = format!("--- a/{shown}\n+++ b/{shown}\n");
        if let Some((removed, added)) = self.coarse {
            out.push(&header);
            let range = |len: usize| hunk_range(self.first_line, self.first_line + len);
            out.push(&format!("@@ -{} +{} @@\n", range(removed), range(added)));
            // The heads hold whole lines (`head_lines`).
            for (sign, text) in [('-', &self.old), ('+', &self.new)] {
                for line in text.split_inclusive('\n') {
                    out.push_change(sign, line);
                }
            }
            // A coarse change is over MAX_DIFFED_BYTES, so at least one of
            // its heads was cut: the text is never the whole change.
            out.truncated = true;
            return out.finish(removed, added, true);
        }
        let diff = TextDiff::configure()
            .algorithm(Algorithm::Myers)
            .deadline(Instant::now() + DIFF_DEADLINE)
            .diff_lines(self.old.as_str(), self.new.as_str());
        let (mut added, mut removed) = (0, 0);
        for op in diff.ops() {
            let (_, old_range, new_range) = op.as_tag_tuple();
            if !matches!(op, DiffOp::Equal { .. }) {
                removed += old_range.len();
                added += new_range.len();
            }
        }
        for group in diff.grouped_ops(CONTEXT_LINES) {
            let (Some(first), Some(last)) = (group.first(), group.last()) else {
                continue;
            };
            if out.text.is_empty() {
                out.push(&header);
            }
            let old_range = hunk_range(
                self.first_line + first.old_range().start,
                self.first_line + last.old_range().end,
            );
            let new_range = hunk_range(
                self.first_line + first.new_range().start,
                self.first_line + last.new_range().end,
            );
            out.push(&format!("@@ -{old_range} +{new_range} @@\n"));
            for op in &group {
                for change in diff.iter_changes(op) {
                    let sign = match change.tag() {
                        ChangeTag::Delete => '-',
                        ChangeTag::Insert => '+',
                        ChangeTag::Equal => ' ',
                    };
                    out.push_change(sign, change.value());
                }
            }
            if out.truncated {
                break;
            }
        }
        out.finish(removed, added, false)
    }
}

/// A hunk's line range as `diff -u` writes it: `start,len`, 1-based, just
/// `start` when one line long, the line before when empty.
fn hunk_range(start: usize, end: usize) -> String {
    match end - start {
        1 => format!("{}", start + 1),
        0 => format!("{start},0"),
        len => format!("{},{len}", start + 1),
    }
}

/// A preview being rendered, line by line, up to the caps.
struct Preview {
    text: String,
    lines: usize,
    truncated: bool,
    caps: DiffCaps,
}

impl Default for Preview {
    fn default() -> Preview {
        Preview {
            text: String::new(),
            lines: 0,
            truncated: false,
            caps: DiffCaps::PREVIEW,
        }
    }
}

impl Preview {
    /// Appends lines (each ending in `\n`) unless the caps are reached.
    fn push(&mut self, lines: &str) {
        for line in lines.split_inclusive('\n') {
            if self.truncated {
                return;
            }
            if self.lines == self.caps.lines || self.text.len() + line.len() > self.caps.bytes {
                self.truncated = true;
                return;
            }
            self.text.push_str(line);
            self.lines += 1;
        }
    }

    /// Appends one changed line, marking a last line without terminator.
    fn push_change(&mut self, sign: char, line: &str) {
        let mut row = String::with_capacity(line.len() + 1);
        row.push(sign);
        row.push_str(line);
        if !line.ends_with('\n') {
            row.push_str("\n\\ No newline at end of file\n");
        }
        self.push(&row);
    }

    fn finish(self, removed: usize, added: usize, coarse: bool) -> DiffPreview {
        DiffPreview {
            text: self.text.trim_end_matches('\n').to_owned(),
            truncated: self.truncated,
            coarse,
            added,
            removed,
        }
    }
}

/// The diff from `old` to `new` of the file shown as `shown`.
pub fn preview(shown: &str, old: &str, new: &str) -> DiffPreview {
    Change::new(old, new).preview(shown)
}

/// The diff from `old` to `new` of the file shown as `shown`, within `caps`.
pub fn unified(shown: &str, old: &str, new: &str, caps: DiffCaps) -> DiffPreview {
    Change::new(old, new).render(shown, caps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change over MAX_DIFFED_BYTES rendered with room for all of its
    /// heads (the Diff RPC's caps) shows whole lines of the files only.
    #[test]
    fn a_coarse_change_shows_whole_lines_only() {
        let old: String = (0..100_000).map(|i| format!("old line {i}\n")).collect();
        let new: String = (0..100_000).map(|i| format!("new line {i}\n")).collect();
        let d = Change::new(&old, &new).render("f", DiffCaps::WHOLE);
        assert!(d.truncated);
        assert!(
            !d.text.contains("No newline"),
            "a cut line was shown as the last"
        );
        for line in d.text.lines().skip(3) {
            let body = &line[1..];
            assert!(
                old.contains(&format!("{body}\n")) || new.contains(&format!("{body}\n")),
                "not a whole line of either file: {line:?}"
            );
        }
    }

    #[test]
    fn counts_lines_and_renders_unified_diff() {
        let d = preview("a.txt", "one\ntwo\n", "one\n2\nthree\n");
        assert_eq!((d.added, d.removed, d.truncated), (2, 1, false));
        assert_eq!(
            d.text,
            "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,3 @@\n one\n-two\n+2\n+three"
        );
    }

    /// A change deep in a file keeps the file's line numbers and only three
    /// lines of context, like `diff -u` of the whole file.
    #[test]
    fn hunks_keep_file_line_numbers() {
        let old: String = (1..=50).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 30\n", "line thirty\n");
        let whole = TextDiff::from_lines(old.as_str(), new.as_str())
            .unified_diff()
            .header("a/f", "b/f")
            .to_string();
        let d = preview("f", &old, &new);
        assert_eq!(d.text, whole.trim_end());
        assert!(d.text.contains("@@ -27,7 +27,7 @@"), "{}", d.text);
        let appended = format!("{old}tail");
        let whole = TextDiff::from_lines(old.as_str(), appended.as_str())
            .unified_diff()
            .header("a/f", "b/f")
            .to_string();
        assert_eq!(preview("f", &old, &appended).text, whole.trim_end());
        let removed_first = old.replacen("line 1\n", "", 1);
        let whole = TextDiff::from_lines(old.as_str(), removed_first.as_str())
            .unified_diff()
            .header("a/f", "b/f")
            .to_string();
        assert_eq!(preview("f", &old, &removed_first).text, whole.trim_end());
    }

    #[test]
    fn long_diffs_are_cut_at_line_boundaries() {
        let new: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let d = preview("big", "", &new);
        assert!(d.truncated);
        assert_eq!(d.added, 500);
        assert_eq!(d.text.lines().count(), MAX_DIFF_LINES);
    }

    /// An 80,000-line replacement is not diffed line by line: the preview is
    /// coarse, capped, and counts every line.
    #[test]
    fn huge_replacements_are_summarised() {
        let old: String = (0..80_000).map(|i| format!("old line {i}\n")).collect();
        let new: String = (0..80_000).map(|i| format!("new line {i}\n")).collect();
        let d = preview("big", &old, &new);
        assert!(d.coarse && d.truncated);
        assert_eq!((d.added, d.removed), (80_000, 80_000));
        assert!(d.text.len() <= MAX_DIFF_BYTES);
        assert!(
            d.text
                .starts_with("--- a/big\n+++ b/big\n@@ -1,80000 +1,80000 @@\n-old line 0\n"),
            "{}",
            &d.text[..100]
        );
    }
}
