//! `cat -n` numbering and Read's line windows (docs/contract.md § Text
//! formats). A line longer than [`MAX_LINE_LENGTH`] characters is shown as
//! several rows labelled `5`, `5.1`, `5.2`, … so line numbers keep matching
//! the file; line numbers are `u64` and saturate instead of overflowing.

use crate::error::{Error, Result};
use std::fmt::{Display, Write as _};

/// Longest line, in characters, shown on one row; longer lines are split into
/// continuation rows so a single minified line cannot flood a tool result.
pub const MAX_LINE_LENGTH: usize = 10000;

/// Width the line-number column is right-aligned to, as `cat -n` does.
const LINE_NUMBER_WIDTH: usize = 6;

/// Formats lines `cat -n` style: each line as `{n:>6}\t{line}`, numbered from
/// `start_line`, joined by `\n` with no trailing newline.
///
/// A line longer than [`MAX_LINE_LENGTH`] characters is split into chunks of
/// that many characters (never inside a UTF-8 character); the first chunk is
/// labelled with the line number (`5`) and the rest with continuation labels
/// (`5.1`, `5.2`, …), right-aligned the same way. This is deepagents'
/// `format_content_with_line_numbers`, so models trained on its output read
/// ours the same way. The lines must not contain their terminators.
pub fn format_lines_numbered<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    start_line: u64,
) -> String {
    let mut out = String::new();
    push_lines_numbered(&mut out, lines, start_line);
    out
}

/// [`format_lines_numbered`] appended to `out`, so an answer sized first
/// is built in one buffer.
pub fn push_lines_numbered<'a>(
    out: &mut String,
    lines: impl IntoIterator<Item = &'a str>,
    start_line: u64,
) {
    let mut line_num = start_line;
    for (i, line) in lines.into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        push_numbered_line(out, line_num, line);
        line_num = line_num.saturating_add(1);
    }
}

/// Pushes one logical line as one or more rows (see [`format_lines_numbered`]),
/// the rows after the first each preceded by `\n`.
fn push_numbered_line(out: &mut String, line_num: u64, line: &str) {
    for (chunk_idx, chunk) in rows(line) {
        if chunk_idx == 0 {
            push_row(out, line_num, chunk);
        } else {
            out.push('\n');
            push_row(out, format!("{line_num}.{chunk_idx}"), chunk);
        }
    }
}

/// The rows one logical line is shown as: its continuation index (0 for the
/// first row) and text, cut every [`MAX_LINE_LENGTH`] characters.
fn rows(line: &str) -> impl Iterator<Item = (u64, &str)> {
    let mut rest = line;
    let mut chunk_idx: u64 = 0;
    std::iter::from_fn(move || {
        if chunk_idx > 0 && rest.is_empty() {
            return None;
        }
        // A line of at most MAX_LINE_LENGTH bytes has at most that many chars.
        let end = if rest.len() <= MAX_LINE_LENGTH {
            rest.len()
        } else {
            rest.char_indices()
                .nth(MAX_LINE_LENGTH)
                .map_or(rest.len(), |(i, _)| i)
        };
        let (chunk, tail) = rest.split_at(end);
        rest = tail;
        chunk_idx += 1;
        Some((chunk_idx - 1, chunk))
    })
}

/// Bytes [`format_lines_numbered`] spends on one line numbered `line_num`
/// (all its rows, without the `\n` that precedes it after another line), so
/// a caller can bound an answer before building it.
pub fn numbered_line_len(line_num: u64, line: &str) -> usize {
    let digits = |n: u64| n.checked_ilog10().map_or(1, |d| d as usize + 1);
    rows(line)
        .map(|(chunk_idx, chunk)| {
            let label = match chunk_idx {
                0 => digits(line_num),
                i => digits(line_num) + 1 + digits(i),
            };
            // Row separator, label padded to the column, tab, text.
            usize::from(chunk_idx > 0) + label.max(LINE_NUMBER_WIDTH) + 1 + chunk.len()
        })
        .sum()
}

/// Bytes [`format_lines_numbered`] makes of `lines` numbered from
/// `start_line`, counted without building it, so a caller can charge or
/// refuse an answer first.
pub fn numbered_len<'a>(lines: impl IntoIterator<Item = &'a str>, start_line: u64) -> usize {
    let mut size = 0usize;
    let mut line_num = start_line;
    for (i, line) in lines.into_iter().enumerate() {
        size += usize::from(i > 0) + numbered_line_len(line_num, line);
        line_num = line_num.saturating_add(1);
    }
    size
}

/// The pieces `range` of `text.split('\n')` as one slice of `text` (the
/// `\n`s between them included), found by scanning: nothing is held per
/// line. `range` must be non-empty and within the piece count (one more
/// than the `\n`s).
pub fn split_span(text: &str, range: std::ops::Range<usize>) -> &str {
    debug_assert!(range.start < range.end);
    let mut breaks = memchr::memchr_iter(b'\n', text.as_bytes());
    let start = match range.start {
        0 => 0,
        n => breaks.nth(n - 1).map_or(text.len(), |i| i + 1),
    };
    let end = breaks
        .nth(range.end - range.start - 1)
        .unwrap_or(text.len());
    &text[start..end.max(start)]
}

/// Where each line of a text starts, as `u32` byte offsets: four bytes a
/// line, for the random access a diff of whole files needs, where a vector
/// of slices would hold sixteen (and a file of empty lines has one line a
/// byte). Lines are `split_inclusive('\n')` pieces: each keeps its
/// terminator, and a final `\n` starts no empty line.
pub struct LineIndex<'a> {
    text: &'a str,
    /// Line `i` is `bounds[i]..bounds[i + 1]`.
    bounds: Vec<u32>,
}

impl<'a> LineIndex<'a> {
    /// Indexes `text` (one scan); a text of 4 GiB or more is refused.
    pub fn new(text: &'a str) -> Result<LineIndex<'a>> {
        let len = u32::try_from(text.len()).map_err(|_| {
            Error::TooLarge(format!(
                "a text of {} bytes is over the 4 GiB a line index addresses",
                text.len()
            ))
        })?;
        let mut bounds = Vec::with_capacity(super::count_lines(text.as_bytes()) + 1);
        bounds.push(0);
        // Each offset is below `len`, which fits.
        bounds.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i as u32 + 1));
        if bounds.last() != Some(&len) {
            bounds.push(len);
        }
        Ok(LineIndex { text, bounds })
    }

    /// The number of lines.
    pub fn len(&self) -> usize {
        self.bounds.len() - 1
    }

    /// True for an empty text.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Lines `range` as one slice of the text, terminators included.
    pub fn span(&self, range: std::ops::Range<usize>) -> &'a str {
        &self.text[self.bounds[range.start] as usize..self.bounds[range.end] as usize]
    }
}

impl std::ops::Index<usize> for LineIndex<'_> {
    type Output = str;

    /// Line `i`, its terminator included.
    fn index(&self, i: usize) -> &str {
        self.span(i..i + 1)
    }
}

/// Pushes one `{label:>6}\t{text}` row.
fn push_row(out: &mut String, label: impl Display, text: &str) {
    // Writing into a String cannot fail.
    let _ = write!(out, "{label:>LINE_NUMBER_WIDTH$}\t{text}");
}

/// A window of lines read from a file.
#[derive(Debug, PartialEq, Eq)]
pub struct Window {
    /// The lines, numbered or verbatim (terminators kept).
    pub content: String,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// Lines in `content`.
    pub lines_returned: u64,
    /// True when the file is not valid UTF-8 (invalid bytes shown as U+FFFD).
    pub lossy: bool,
}

/// Lines `[offset, offset + limit)` of a file's bytes (`limit` 0: to the
/// end). Numbered output is `cat -n` style (docs/contract.md § Text formats); verbatim output keeps
/// the file's own line endings. An empty file gives the EmptyContentWarning.
///
/// Binary content (a NUL byte near the start) is refused. Only the window is
/// decoded (invalid UTF-8 replaced) and the lines before it are skipped
/// without being collected; an answer over `max_bytes` is refused before it
/// is built (RESOURCE_EXHAUSTED), telling the caller to page with offset and
/// limit.
pub fn read_window(
    path: &str,
    data: &[u8],
    offset: u64,
    limit: u64,
    numbered: bool,
    max_bytes: usize,
) -> Result<Window> {
    if super::is_binary(data) {
        return Err(Error::Binary(path.to_owned()));
    }
    let valid = std::str::from_utf8(data).ok();
    let total = super::count_lines(data) as u64;
    if let (0, Some(warning)) = (offset, valid.and_then(super::check_empty_content)) {
        return Ok(Window {
            content: warning.to_owned(),
            total_lines: total,
            lines_returned: 0,
            lossy: false,
        });
    }
    if offset >= total {
        return Err(past_end(path, offset, total));
    }
    let end = if limit == 0 {
        total
    } else {
        total.min(offset.saturating_add(limit))
    };
    let span = line_range(data, offset as usize, end as usize);
    let too_large = |size: String| {
        Error::TooLarge(format!(
            "reading lines {offset} to {} of {path} would answer {size} bytes, over the limit of \
             {max_bytes} bytes for one Read; read fewer lines at a time with offset and limit",
            end - 1
        ))
    };
    // Decoding and numbering only ever grow the window's bytes.
    if span.len() > max_bytes {
        return Err(too_large(format!("at least {}", span.len())));
    }
    let window = String::from_utf8_lossy(&data[span]);
    let content = if numbered {
        let size = window
            .lines()
            .zip(offset + 1..)
            .map(|(line, n)| numbered_line_len(n, line) + 1)
            .sum::<usize>()
            .saturating_sub(1);
        if size > max_bytes {
            return Err(too_large(size.to_string()));
        }
        let mut out = String::with_capacity(size);
        push_lines_numbered(&mut out, window.lines(), offset + 1);
        out
    } else {
        window.into_owned()
    };
    Ok(Window {
        content,
        total_lines: total,
        lines_returned: end - offset,
        lossy: valid.is_none(),
    })
}

/// The bytes of lines `[from, to)` of `data`, terminators included (lines as
/// [`split_lines`] sees them); `from < to <= ` the line count.
pub fn line_range(data: &[u8], from: usize, to: usize) -> std::ops::Range<usize> {
    debug_assert!(from < to);
    let mut start = if from == 0 { Some(0) } else { None };
    for (n, at) in memchr::memchr_iter(b'\n', data).enumerate() {
        let line = n + 1;
        if line == from {
            start = Some(at + 1);
        }
        if line == to {
            return start.unwrap_or(at + 1)..at + 1;
        }
    }
    start.unwrap_or(data.len())..data.len()
}

fn past_end(path: &str, offset: u64, total: u64) -> Error {
    Error::InvalidArgument(format!(
        "offset {offset} is past the end of {path}, which has {total} lines (valid offsets: 0 to {})",
        total.saturating_sub(1)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole text numbered from `start_line`, as Read shows it.
    fn format_content_with_line_numbers(content: &str, start_line: u64) -> String {
        format_lines_numbered(crate::text::split_lines(content), start_line)
    }

    #[test]
    fn numbers_lines_cat_n_style_without_trailing_newline() {
        assert_eq!(
            format_content_with_line_numbers("alpha\nbeta\n", 1),
            "     1\talpha\n     2\tbeta"
        );
        assert_eq!(
            format_content_with_line_numbers("x\n\ny", 41),
            "    41\tx\n    42\t\n    43\ty"
        );
    }

    #[test]
    fn numbering_empty_content_gives_empty_string() {
        assert_eq!(format_content_with_line_numbers("", 1), "");
        assert_eq!(format_content_with_line_numbers("\n", 1), "     1\t");
    }

    #[test]
    fn wide_line_numbers_are_not_cut() {
        assert_eq!(format_lines_numbered(["a"], 1_234_567), "1234567\ta");
    }

    #[test]
    fn long_line_is_split_with_continuation_labels() {
        let long = "a".repeat(10000) + &"b".repeat(10000) + &"c".repeat(5000);
        let out = format_lines_numbered(["first", long.as_str(), "last"], 4);
        let expected = format!(
            "     4\tfirst\n     5\t{}\n   5.1\t{}\n   5.2\t{}\n     6\tlast",
            "a".repeat(10000),
            "b".repeat(10000),
            "c".repeat(5000)
        );
        assert_eq!(out, expected);
    }

    #[test]
    fn line_of_exactly_max_length_is_not_split() {
        let line = "z".repeat(MAX_LINE_LENGTH);
        let out = format_lines_numbered([line.as_str()], 1);
        assert_eq!(out, format!("     1\t{line}"));
    }

    #[test]
    fn long_line_is_counted_in_chars_and_split_on_char_boundaries() {
        // 9999 ASCII chars then multi-byte chars: the 10000th char is 'é'
        // (2 bytes), so the first chunk ends right after it.
        let line = "a".repeat(9999) + "é" + "日本" + "🦀";
        let out = format_lines_numbered([line.as_str()], 7);
        assert_eq!(
            out,
            format!("     7\t{}é\n   7.1\t日本🦀", "a".repeat(9999))
        );

        // Over MAX_LINE_LENGTH bytes but not chars: one row.
        let wide = "日".repeat(MAX_LINE_LENGTH);
        assert_eq!(
            format_lines_numbered([wide.as_str()], 1),
            format!("     1\t{wide}")
        );
    }

    #[test]
    fn crlf_endings_are_not_displayed() {
        assert_eq!(
            format_content_with_line_numbers("one\r\ntwo\r\n", 1),
            "     1\tone\n     2\ttwo"
        );
    }

    #[test]
    fn numbered_line_len_is_the_formatted_length() {
        let long = "é".repeat(MAX_LINE_LENGTH * 2 + 3);
        for (n, line) in [
            (1, ""),
            (7, "abc"),
            (1_234_567, "x"),
            (42, long.as_str()),
            (9_999_999, long.as_str()),
        ] {
            assert_eq!(
                numbered_line_len(n, line),
                format_lines_numbered([line], n).len(),
                "line {n}"
            );
        }
    }

    #[test]
    fn numbered_len_is_the_formatted_length() {
        for (text, first) in [("", 1), ("a", 9), ("a\n\nbc", 99_999), ("x\ny\n", 3)] {
            let lines = text.split('\n');
            assert_eq!(
                numbered_len(lines.clone(), first),
                format_lines_numbered(lines, first).len(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn split_span_is_the_pieces_joined() {
        for text in ["", "\n", "a", "a\nb", "a\nb\n", "\n\n\n", "a\r\nb\n\nc"] {
            let pieces: Vec<&str> = text.split('\n').collect();
            for start in 0..pieces.len() {
                for end in start + 1..=pieces.len() {
                    assert_eq!(
                        split_span(text, start..end),
                        pieces[start..end].join("\n"),
                        "{text:?} {start}..{end}"
                    );
                }
            }
        }
    }

    #[test]
    fn line_index_holds_the_inclusive_lines() {
        for text in ["", "\n", "a", "a\nb", "a\nb\n", "\n\n", "a\r\nb\n\nc"] {
            let index = LineIndex::new(text).unwrap();
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            assert_eq!(index.len(), lines.len(), "{text:?}");
            for (i, line) in lines.iter().enumerate() {
                assert_eq!(&index[i], *line, "{text:?} line {i}");
            }
            assert_eq!(index.span(0..index.len()), text);
        }
    }

    fn window(text: &str, offset: u64, limit: u64, numbered: bool) -> Result<Window> {
        read_window("/f", text.as_bytes(), offset, limit, numbered, 1 << 20)
    }

    #[test]
    fn window_numbers_from_offset_and_keeps_verbatim_endings() {
        let w = window("a\r\nb\nc\n", 1, 1, true).unwrap();
        assert_eq!(w.content, "     2\tb");
        assert_eq!((w.total_lines, w.lines_returned), (3, 1));
        let w = window("a\r\nb\nc", 0, 2, false).unwrap();
        assert_eq!(w.content, "a\r\nb\n");
        assert_eq!(window("a\nb\nc", 2, 0, false).unwrap().content, "c");
        assert_eq!(window("a\nb\nc\n", 1, 9, false).unwrap().content, "b\nc\n");
    }

    #[test]
    fn window_past_end_names_length() {
        let err = window("a\nb\n", 2, 0, false).unwrap_err();
        assert!(err.to_string().contains("has 2 lines"), "{err}");
        assert_eq!(
            window("", 0, 0, true).unwrap().content,
            super::super::EMPTY_CONTENT_WARNING
        );
        assert!(window("", 1, 0, true).is_err());
    }

    #[test]
    fn window_decodes_only_what_it_shows_and_flags_invalid_files() {
        let w = read_window("/f", b"ok\n\xff\n", 0, 1, false, 100).unwrap();
        assert_eq!((w.content.as_str(), w.lossy), ("ok\n", true));
        let w = read_window("/f", b"ok\n\xff\n", 1, 1, true, 100).unwrap();
        assert_eq!(w.content, "     2\t\u{fffd}");
    }

    #[test]
    fn window_over_the_bound_is_refused_before_it_is_built() {
        let text = "x\n".repeat(100);
        // 100 rows of 8 bytes ("     N\tx"), 99 separators.
        let exact = read_window("/f", text.as_bytes(), 0, 0, true, 899).unwrap();
        assert_eq!(exact.content.len(), 899);
        let err = read_window("/f", text.as_bytes(), 0, 0, true, 898).unwrap_err();
        assert_eq!(err.code(), "INVALID_PARAM");
        assert_eq!(err.grpc_code(), tonic::Code::ResourceExhausted);
        assert_eq!(
            err.to_string(),
            "too large: reading lines 0 to 99 of /f would answer 899 bytes, over the limit of 898 \
             bytes for one Read; read fewer lines at a time with offset and limit"
        );
        let err = read_window("/f", text.as_bytes(), 10, 0, false, 100).unwrap_err();
        assert!(
            err.to_string().contains("would answer at least 180 bytes"),
            "{err}"
        );
        assert!(read_window("/f", text.as_bytes(), 10, 50, false, 100).is_ok());
    }
}
