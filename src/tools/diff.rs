//! Unified diff previews of a change, for Write, Edit and MultiEdit.
//!
//! Uses the `similar` crate (Myers diff, line granularity, 3 lines of
//! context, like `diff -u`). The preview is capped at [`MAX_DIFF_LINES`] lines
//! and [`MAX_DIFF_BYTES`] bytes, cut at a line boundary, so a rewrite of a big
//! file cannot flood the model; the added/removed counts always cover the
//! whole change.

use similar::{ChangeTag, TextDiff};

/// Most lines of a diff preview.
pub const MAX_DIFF_LINES: usize = 100;
/// Most bytes of a diff preview.
pub const MAX_DIFF_BYTES: usize = 10240;

/// A change, summarised.
#[derive(Debug, PartialEq, Eq)]
pub struct DiffPreview {
    /// Unified diff, possibly cut.
    pub text: String,
    /// True when `text` was cut.
    pub truncated: bool,
    /// Lines added by the change.
    pub added: usize,
    /// Lines removed by the change.
    pub removed: usize,
}

/// The diff from `old` to `new` of the file shown as `shown`.
pub fn preview(shown: &str, old: &str, new: &str) -> DiffPreview {
    let diff = TextDiff::from_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let full = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{shown}"), &format!("b/{shown}"))
        .to_string();
    let mut text = String::new();
    let mut truncated = false;
    for (i, line) in full.split_inclusive('\n').enumerate() {
        if i == MAX_DIFF_LINES || text.len() + line.len() > MAX_DIFF_BYTES {
            truncated = true;
            break;
        }
        text.push_str(line);
    }
    DiffPreview {
        text: text.trim_end_matches('\n').to_owned(),
        truncated,
        added,
        removed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_lines_and_renders_unified_diff() {
        let d = preview("a.txt", "one\ntwo\n", "one\n2\nthree\n");
        assert_eq!((d.added, d.removed, d.truncated), (2, 1, false));
        assert_eq!(
            d.text,
            "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,3 @@\n one\n-two\n+2\n+three"
        );
    }

    #[test]
    fn long_diffs_are_cut_at_line_boundaries() {
        let new: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let d = preview("big", "", &new);
        assert!(d.truncated);
        assert_eq!(d.added, 500);
        assert_eq!(d.text.lines().count(), MAX_DIFF_LINES);
    }
}
