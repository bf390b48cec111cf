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

use super::Costs;
use crate::error::{Error, Result};

/// What an insertion made.
#[derive(Debug, PartialEq, Eq)]
pub struct Inserted {
    /// The new text of the file.
    pub text: String,
    /// How many lines the inserted text spans.
    pub lines: usize,
}

/// How many lines insert counts in `content`: pieces split at `\n`, without
/// the empty tail a final `\n` leaves. Counted, never collected (a file of
/// empty lines has one per byte).
pub fn line_count(content: &str) -> usize {
    let pieces = memchr::memchr_iter(b'\n', content.as_bytes()).count() + 1;
    pieces - usize::from(content.is_empty() || content.ends_with('\n'))
}

/// The lines insert counts in `content`, lazily (see [`line_count`]).
pub fn lines(content: &str) -> impl Iterator<Item = &str> {
    content.split('\n').take(line_count(content))
}

/// `content` with `text` inserted after line `at` (0-based boundary). `Ok(Err(n))`
/// when `at` is outside `0..=n`, `n` being the file's line count (each tool
/// words that itself). The result is sized first: over `max` bytes it is
/// refused, and otherwise charged to `costs` before it is built. The file is
/// cut at one byte offset, found by scanning: nothing is held per line.
pub fn insert_at_line(
    content: &str,
    at: i64,
    text: &str,
    max: u64,
    costs: &Costs<'_>,
) -> Result<std::result::Result<Inserted, usize>> {
    let n = line_count(content);
    let Some(at) = usize::try_from(at).ok().filter(|at| *at <= n) else {
        return Ok(Err(n));
    };
    let text = text.trim_end_matches('\n');
    // Where line `at` starts; at the end, after the last line's break, which
    // an unterminated last line gets here.
    let cut = match at {
        0 => 0,
        at => memchr::memchr_iter(b'\n', content.as_bytes())
            .nth(at - 1)
            .map_or(content.len(), |i| i + 1),
    };
    let (head, tail) = content.split_at(cut);
    // The lines after the text are joined as the reference joins them: the
    // file's final break is the empty tail it dropped, added back below
    // only if the result lacks one.
    let tail = tail.strip_suffix('\n').unwrap_or(tail);
    let head_break = !head.is_empty() && !head.ends_with('\n');
    let size =
        head.len() + usize::from(head_break) + text.len() + if at < n { 1 + tail.len() } else { 0 };
    // The result always ends with a break: add one unless the last piece
    // brings it (the tail, or a head that ends the text on its own).
    let ends = if at < n {
        tail.ends_with('\n')
    } else {
        text.is_empty() && !head.is_empty()
    };
    let size = size + usize::from(!ends);
    Error::check_file_size("the edited file", size as u64, max)?;
    (costs.charge)(size as u64, "the edited file")?;
    let mut out = String::with_capacity(size);
    out.push_str(head);
    if head_break {
        out.push('\n');
    }
    out.push_str(text);
    if at < n {
        out.push('\n');
        out.push_str(tail);
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    debug_assert_eq!(out.len(), size);
    Ok(Ok(Inserted {
        text: out,
        lines: memchr::memchr_iter(b'\n', text.as_bytes()).count() + 1,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(content: &str, at: i64, text: &str) -> std::result::Result<String, usize> {
        insert_at_line(content, at, text, u64::MAX, &Costs::unbounded())
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
        let done = insert_at_line("a\n", 1, "x\ny\n", 100, &Costs::unbounded())
            .unwrap()
            .unwrap();
        assert_eq!(done.lines, 2);
        assert!(insert_at_line("a\n", 1, "xyz", 4, &Costs::unbounded()).is_err());
    }
}
