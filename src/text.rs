//! Text operations shared by the Filesystem RPCs and the Tools layer: line
//! windows, string edits and regex windows. Pure functions over a file's bytes;
//! the tiers only store and fetch.

use crate::error::{Error, Result, echo};
use crate::format;
use regex::Regex;

/// Most matches ReadRe returns; beyond it the call fails and asks for a
/// narrower pattern instead of silently dropping matches.
pub const MAX_READ_RE_MATCHES: usize = 10_000;
/// Most bytes of matches ReadRe returns in one answer (16 MiB, far below the
/// largest message): whole files are Read's job.
pub const MAX_READ_RE_BYTES: usize = 16 << 20;

/// A file's bytes decoded for text operations.
pub struct Text<'a> {
    /// The text (invalid UTF-8 replaced when `lossy`).
    pub text: std::borrow::Cow<'a, str>,
    /// True when invalid bytes were replaced.
    pub lossy: bool,
}

/// Decodes a file for reading: binary content (a NUL byte near the start) is
/// refused, invalid UTF-8 is replaced and flagged.
pub fn decode<'a>(path: &str, data: &'a [u8]) -> Result<Text<'a>> {
    if format::is_binary(data) {
        return Err(Error::Binary(path.to_owned()));
    }
    let text = String::from_utf8_lossy(data);
    let lossy = matches!(text, std::borrow::Cow::Owned(_));
    Ok(Text { text, lossy })
}

/// Decodes a file for editing: it must be valid UTF-8 text, because writing
/// back a lossy decoding would corrupt it.
pub fn decode_strict<'a>(path: &str, data: &'a [u8]) -> Result<&'a str> {
    if format::is_binary(data) {
        return Err(Error::Binary(path.to_owned()));
    }
    std::str::from_utf8(data).map_err(|e| {
        Error::Binary(format!(
            "{path} is not valid UTF-8 (first bad byte at offset {})",
            e.valid_up_to()
        ))
    })
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
    if format::is_binary(data) {
        return Err(Error::Binary(path.to_owned()));
    }
    let valid = std::str::from_utf8(data).ok();
    let total = format::count_lines(data) as u64;
    if let (0, Some(warning)) = (offset, valid.and_then(format::check_empty_content)) {
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
            .map(|(line, n)| format::numbered_line_len(n, line) + 1)
            .sum::<usize>()
            .saturating_sub(1);
        if size > max_bytes {
            return Err(too_large(size.to_string()));
        }
        let mut out = String::with_capacity(size);
        out.push_str(&format::format_lines_numbered(window.lines(), offset + 1));
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
/// [`format::split_lines`] sees them); `from < to <= ` the line count.
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

/// One string replacement.
#[derive(Clone, Debug)]
pub struct EditSpec<'a> {
    /// Text to find; must be non-empty.
    pub old: &'a str,
    /// Replacement.
    pub new: &'a str,
    /// Replace every occurrence instead of requiring exactly one.
    pub replace_all: bool,
}

/// Applies one edit; returns the new text and the number of replacements.
/// A result over `max_bytes` is refused before it is built.
pub fn apply_edit(text: &str, edit: &EditSpec<'_>, max_bytes: u64) -> Result<(String, u64)> {
    splice(text, std::slice::from_ref(edit), max_bytes, |err, _| err)
}

/// Applies several edits, each matched against the original text, all or
/// nothing: matches must be unique (unless replace_all) and must not overlap.
/// A failure names the index of the failing edit (`edit_index` metadata). A
/// result over `max_bytes` is refused before it is built.
pub fn apply_edits(text: &str, edits: &[EditSpec<'_>], max_bytes: u64) -> Result<(String, u64)> {
    if edits.is_empty() {
        return Err(Error::InvalidArgument(
            "edits must contain at least one edit".into(),
        ));
    }
    splice(text, edits, max_bytes, at_edit)
}

fn at_edit(err: Error, index: usize) -> Error {
    err.with_context(
        format!("edit {index} failed"),
        [("edit_index", index.to_string())],
    )
}

/// Checks the edits, then builds the result. Matches are never collected:
/// each pass walks every edit's matches merged in text order (a `replace_all`
/// of a one-byte string in a large file has millions of them), and the
/// result's size is known, and checked, before a byte of it is written.
fn splice(
    text: &str,
    edits: &[EditSpec<'_>],
    max_bytes: u64,
    at: fn(Error, usize) -> Error,
) -> Result<(String, u64)> {
    for (i, edit) in edits.iter().enumerate() {
        check_edit(text, edit).map_err(|e| at(e, i))?;
    }
    let mut size = text.len() as u64;
    let mut count = 0u64;
    let mut previous: Option<(usize, usize)> = None;
    for (range, i) in merged_matches(text, edits) {
        if let Some((_, j)) = previous.filter(|(end, _)| *end > range.start) {
            let (first, second) = (i.min(j), i.max(j));
            return Err(at(
                Error::InvalidArgument(format!(
                    "edit {second} overlaps edit {first} in the original text; merge them into one edit"
                )),
                second,
            ));
        }
        previous = Some((range.end, i));
        size = (size - range.len() as u64).saturating_add(edits[i].new.len() as u64);
        count += 1;
    }
    if size > max_bytes {
        return Err(Error::TooLarge(format!(
            "the edited file would be {size} bytes, over the file size limit of {max_bytes} bytes"
        )));
    }
    let mut out = String::with_capacity(size as usize);
    let mut copied = 0;
    for (range, i) in merged_matches(text, edits) {
        out.push_str(&text[copied..range.start]);
        out.push_str(edits[i].new);
        copied = range.end;
    }
    out.push_str(&text[copied..]);
    Ok((out, count))
}

/// Every match of every edit, in text order (ties: lower edit index first),
/// as (byte range, edit index). Each edit's own matches never overlap.
fn merged_matches<'t>(
    text: &'t str,
    edits: &'t [EditSpec<'t>],
) -> impl Iterator<Item = (std::ops::Range<usize>, usize)> + 't {
    use std::cmp::Reverse;
    let mut found: Vec<_> = edits.iter().map(|e| text.match_indices(e.old)).collect();
    let mut next: std::collections::BinaryHeap<Reverse<(usize, usize)>> = found
        .iter_mut()
        .enumerate()
        .filter_map(|(i, m)| m.next().map(|(at, _)| Reverse((at, i))))
        .collect();
    std::iter::from_fn(move || {
        let Reverse((at, i)) = next.pop()?;
        if let Some((later, _)) = found[i].next() {
            next.push(Reverse((later, i)));
        }
        Some((at..at + edits[i].old.len(), i))
    })
}

/// Checks that an edit is well-formed and matches as it must: once, or at
/// least once with `replace_all`.
fn check_edit(text: &str, edit: &EditSpec<'_>) -> Result<()> {
    if edit.old.is_empty() {
        return Err(Error::InvalidArgument(
            "old_string must not be empty".into(),
        ));
    }
    if edit.old == edit.new {
        return Err(Error::InvalidArgument(
            "No changes to make: old_string and new_string are exactly the same.".into(),
        ));
    }
    match text.match_indices(edit.old).count() {
        0 => Err(Error::InvalidArgument(format!(
            "old_string not found in file: {:?}",
            echo(edit.old)
        ))),
        1 => Ok(()),
        _ if edit.replace_all => Ok(()),
        n => Err(Error::InvalidArgument(format!(
            "old_string matches {n} times in file. It must be unique. Include more surrounding \
             context (2-5 lines) to make it unique, or set replace_all to replace every occurrence."
        ))),
    }
}

/// Every match of `re` in `text` (ReadRe). `overlap` lets the next match
/// reuse up to that many bytes of the previous one; 0 gives plain
/// non-overlapping matches.
///
/// The answer is bounded before it grows: more than [`MAX_READ_RE_MATCHES`]
/// matches or [`MAX_READ_RE_BYTES`] of them is RESOURCE_EXHAUSTED. (With a
/// large `overlap`, a pattern such as `[\s\S]*z` matches from every position
/// to the end of the file: 10,000 such matches of a 3 MiB file would be 30 GB.)
pub fn regex_windows(text: &str, re: &Regex, overlap: u64) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut bytes = 0;
    let mut from = 0;
    while from <= text.len() {
        let Some(m) = re.find_at(text, from) else {
            break;
        };
        if out.len() == MAX_READ_RE_MATCHES {
            return Err(Error::TooLarge(format!(
                "more than {MAX_READ_RE_MATCHES} matches; narrow the pattern"
            )));
        }
        bytes += m.len();
        if bytes > MAX_READ_RE_BYTES {
            return Err(Error::TooLarge(format!(
                "the matches add up to more than {MAX_READ_RE_BYTES} bytes; narrow the pattern \
                 or lower overlap"
            )));
        }
        out.push(m.as_str().to_owned());
        let reuse = usize::try_from(overlap).unwrap_or(usize::MAX);
        let mut next = m.end().saturating_sub(reuse).max(m.start() + 1);
        if m.start() == m.end() {
            next = m.end() + 1;
        }
        while next < text.len() && !text.is_char_boundary(next) {
            next += 1;
        }
        from = next;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit<'a>(old: &'a str, new: &'a str, replace_all: bool) -> EditSpec<'a> {
        EditSpec {
            old,
            new,
            replace_all,
        }
    }

    const MAX: u64 = 1 << 20;

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
            format::EMPTY_CONTENT_WARNING
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

    #[test]
    fn edit_requires_unique_match_unless_replace_all() {
        assert_eq!(
            apply_edit("a b a", &edit("b", "c", false), MAX).unwrap(),
            ("a c a".into(), 1)
        );
        let err = apply_edit("a b a", &edit("a", "c", false), MAX).unwrap_err();
        assert!(err.to_string().contains("matches 2 times"));
        assert_eq!(
            apply_edit("a b a", &edit("a", "c", true), MAX).unwrap(),
            ("c b c".into(), 2)
        );
        assert!(apply_edit("abc", &edit("", "x", false), MAX).is_err());
        let err = apply_edit("abc", &edit("zz", "x", false), MAX).unwrap_err();
        assert!(err.to_string().contains("\"zz\""), "{err}");
    }

    #[test]
    fn edit_results_over_the_limit_are_refused_before_they_are_built() {
        let text = "a".repeat(1 << 20);
        let new = "b".repeat(8 << 10);
        let err = apply_edit(&text, &edit("a", &new, true), 64 << 20).unwrap_err();
        assert_eq!(err.grpc_code(), tonic::Code::ResourceExhausted);
        assert_eq!(
            err.to_string(),
            "too large: the edited file would be 8589934592 bytes, over the file size limit of \
             67108864 bytes"
        );
        assert_eq!(
            apply_edit("aaa", &edit("a", "bb", true), 6).unwrap(),
            ("bbbbbb".into(), 3)
        );
        assert!(apply_edit("aaa", &edit("a", "bb", true), 5).is_err());
    }

    #[test]
    fn a_missing_old_string_is_echoed_capped() {
        let old = "q".repeat(16 << 10);
        let err = apply_edit("abc", &edit(&old, "x", false), MAX).unwrap_err();
        assert!(err.to_string().len() < 512, "{}", err.to_string().len());
        assert!(err.to_string().ends_with("… (16384 bytes)\""), "{err}");
    }

    #[test]
    fn multi_edit_matches_original_and_rejects_overlap() {
        let edits = [edit("one", "two", false), edit("two", "three", false)];
        assert_eq!(apply_edits("one two", &edits, MAX).unwrap().0, "two three");
        let overlapping = [edit("abc", "x", false), edit("bcd", "y", false)];
        let err = apply_edits("abcd", &overlapping, MAX).unwrap_err();
        assert_eq!(err.code(), "INVALID_PARAM");
        assert!(err.to_string().contains("edit 1"), "{err}");
        let inside = [edit("b", "y", true), edit("abcd", "x", false)];
        let err = apply_edits("abcd", &inside, MAX).unwrap_err();
        assert!(err.to_string().contains("edit 1 overlaps edit 0"), "{err}");
        let failing = [edit("a", "b", false), edit("missing", "x", false)];
        assert!(
            apply_edits("a", &failing, MAX)
                .unwrap_err()
                .to_string()
                .starts_with("edit 1 failed")
        );
        let interleaved = [edit("a", "1", true), edit("b", "2", true)];
        assert_eq!(
            apply_edits("abab-ba", &interleaved, MAX).unwrap(),
            ("1212-21".into(), 6)
        );
    }

    #[test]
    fn regex_windows_overlap() {
        let re = |p: &str| Regex::new(p).unwrap();
        assert_eq!(
            regex_windows("aaaa", &re("aa"), 0).unwrap(),
            vec!["aa", "aa"]
        );
        assert_eq!(
            regex_windows("aaaa", &re("aa"), 1).unwrap(),
            vec!["aa", "aa", "aa"]
        );
        assert_eq!(
            regex_windows("é1é2", &re(r"\d"), 0).unwrap(),
            vec!["1", "2"]
        );
    }

    #[test]
    fn regex_windows_bound_the_answer_before_building_it() {
        // Every position to the end: about 3 MiB per match.
        let text = "x".repeat(3 << 20) + "z";
        let err = regex_windows(&text, &Regex::new(r"[\s\S]*z").unwrap(), u64::MAX).unwrap_err();
        assert_eq!(err.code(), "INVALID_PARAM");
        assert!(
            err.to_string().contains("more than 16777216 bytes"),
            "{err}"
        );
    }
}
