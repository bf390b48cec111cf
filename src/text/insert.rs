//! Insert-at-line: the one implementation of putting text between two lines
//! of a file, shared by Claude's memory tool and text-editor tool
//! (`src/tools/memory.rs`, `src/tools/text_editor.rs`).
//!
//! The semantics are those of the reference memory tool in Anthropic's
//! Python SDK (`BetaLocalFilesystemMemoryTool.insert`), so the memory tool's
//! differential test (clients/python/tests/test_claude_tools.py) holds: the
//! file is split at `\n` only (a `\r` stays with its line) and a final `\n`
//! does not start an extra line; the text loses its trailing `\n`s and goes
//! after line `at` (0 = before the first line), and the result always ends
//! with `\n`.

use crate::error::{Error, Result};

/// What an insertion made.
#[derive(Debug, PartialEq, Eq)]
pub struct Inserted {
    /// The new text of the file.
    pub text: String,
    /// How many lines the inserted text spans.
    pub lines: usize,
}

/// The lines insert counts in `content`: split at `\n`, without the empty
/// tail a final `\n` leaves.
pub fn insert_lines(content: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = content.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

/// `content` with `text` inserted after line `at` (0-based boundary). `Ok(Err(n))`
/// when `at` is outside `0..=n`, `n` being the file's line count (each tool
/// words that itself); a result over `max` bytes is refused before it is built.
pub fn insert_at_line(
    content: &str,
    at: i64,
    text: &str,
    max: u64,
) -> Result<std::result::Result<Inserted, usize>> {
    let mut lines = insert_lines(content);
    let n = lines.len();
    let Some(at) = usize::try_from(at).ok().filter(|at| *at <= n) else {
        return Ok(Err(n));
    };
    let text = text.trim_end_matches('\n');
    Error::check_file_size(
        "the edited file",
        (content.len() + text.len() + 2) as u64,
        max,
    )?;
    lines.insert(at, text);
    let mut out = lines.join("\n");
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(Ok(Inserted {
        text: out,
        lines: text.split('\n').count(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(content: &str, at: i64, text: &str) -> std::result::Result<String, usize> {
        insert_at_line(content, at, text, u64::MAX)
            .unwrap()
            .map(|i| i.text)
    }

    #[test]
    fn inserts_between_lines_and_ends_with_a_newline() {
        assert_eq!(insert("a\nb\n", 0, "x\n"), Ok("x\na\nb\n".into()));
        assert_eq!(insert("a\nb\n", 1, "x"), Ok("a\nx\nb\n".into()));
        assert_eq!(insert("a\nb", 2, "x\ny\n\n"), Ok("a\nb\nx\ny\n".into()));
        assert_eq!(insert("", 0, "x"), Ok("x\n".into()));
        assert_eq!(insert("a\r\nb\r\n", 1, "x"), Ok("a\r\nx\nb\r\n".into()));
        // As the SDK does: an empty line inserted at the end joins to nothing.
        assert_eq!(insert("a\n", 1, ""), Ok("a\n".into()));
    }

    #[test]
    fn a_line_outside_the_file_names_the_range() {
        assert_eq!(insert("a\nb\n", 3, "x"), Err(2));
        assert_eq!(insert("a\nb\n", -1, "x"), Err(2));
        assert_eq!(insert("a\n\n", 3, "x"), Err(2));
    }

    #[test]
    fn counts_inserted_lines_and_refuses_oversized_results() {
        let done = insert_at_line("a\n", 1, "x\ny\n", 100).unwrap().unwrap();
        assert_eq!(done.lines, 2);
        assert!(insert_at_line("a\n", 1, "xyz", 4).is_err());
    }
}
