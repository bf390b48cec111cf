//! Text operations shared by the Filesystem RPCs and the Tools layer: line
//! windows, string edits and regex windows. Pure functions over a file's bytes;
//! the tiers only store and fetch.

use crate::error::{Error, Result};
use crate::format;
use regex::Regex;

/// Most matches ReadRe returns; beyond it the call fails and asks for a
/// narrower pattern instead of silently dropping matches.
pub const MAX_READ_RE_MATCHES: usize = 10_000;

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
}

/// Lines `[offset, offset + limit)` of `text` (`limit` 0: to the end).
/// Numbered output is `cat -n` style (seed 000); verbatim output keeps the
/// file's own line endings. An empty file gives the EmptyContentWarning.
pub fn read_window(
    path: &str,
    text: &str,
    offset: u64,
    limit: u64,
    numbered: bool,
) -> Result<Window> {
    let lines = format::split_lines(text);
    let total = lines.len() as u64;
    if let (0, Some(warning)) = (offset, format::check_empty_content(text)) {
        return Ok(Window {
            content: warning.to_owned(),
            total_lines: total,
            lines_returned: 0,
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
    let window = &lines[offset as usize..end as usize];
    let content = if numbered {
        format::format_lines_numbered(window.iter().copied(), offset + 1)
    } else {
        verbatim(text, offset as usize, window.len())
    };
    Ok(Window {
        content,
        total_lines: total,
        lines_returned: window.len() as u64,
    })
}

fn past_end(path: &str, offset: u64, total: u64) -> Error {
    Error::InvalidArgument(format!(
        "offset {offset} is past the end of {path}, which has {total} lines (valid offsets: 0 to {})",
        total.saturating_sub(1)
    ))
}

/// `count` lines from line `skip`, with their original terminators.
fn verbatim(text: &str, skip: usize, count: usize) -> String {
    text.split_inclusive('\n').skip(skip).take(count).collect()
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
pub fn apply_edit(text: &str, edit: &EditSpec<'_>) -> Result<(String, u64)> {
    let ranges = find_edit(text, edit)?;
    Ok(splice(
        text,
        &ranges
            .iter()
            .map(|r| (r.clone(), edit.new))
            .collect::<Vec<_>>(),
    ))
}

/// Applies several edits, each matched against the original text, all or
/// nothing: matches must be unique (unless replace_all) and must not overlap.
/// A failure names the index of the failing edit (`edit_index` metadata).
pub fn apply_edits(text: &str, edits: &[EditSpec<'_>]) -> Result<(String, u64)> {
    if edits.is_empty() {
        return Err(Error::InvalidArgument(
            "edits must contain at least one edit".into(),
        ));
    }
    let mut replacements: Vec<(std::ops::Range<usize>, &str, usize)> = Vec::new();
    for (i, edit) in edits.iter().enumerate() {
        let ranges = find_edit(text, edit).map_err(|e| at_edit(e, i))?;
        replacements.extend(ranges.into_iter().map(|r| (r, edit.new, i)));
    }
    replacements.sort_by_key(|(r, _, _)| r.start);
    for pair in replacements.windows(2) {
        let ((a, _, i), (b, _, j)) = (&pair[0], &pair[1]);
        if a.end > b.start {
            let (first, second) = ((*i).min(*j), (*i).max(*j));
            return Err(at_edit(
                Error::InvalidArgument(format!(
                    "edit {second} overlaps edit {first} in the original text; merge them into one edit"
                )),
                second,
            ));
        }
    }
    let plan: Vec<_> = replacements
        .into_iter()
        .map(|(r, new, _)| (r, new))
        .collect();
    Ok(splice(text, &plan))
}

fn at_edit(err: Error, index: usize) -> Error {
    err.with_context(
        format!("edit {index} failed"),
        [("edit_index", index.to_string())],
    )
}

/// The byte ranges an edit replaces, after checking it is well-formed.
fn find_edit(text: &str, edit: &EditSpec<'_>) -> Result<Vec<std::ops::Range<usize>>> {
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
    let ranges: Vec<_> = text
        .match_indices(edit.old)
        .map(|(at, s)| at..at + s.len())
        .collect();
    match ranges.len() {
        0 => Err(Error::InvalidArgument(format!(
            "old_string not found in file: {:?}",
            edit.old
        ))),
        1 => Ok(ranges),
        n if edit.replace_all => {
            debug_assert!(n > 1);
            Ok(ranges)
        }
        n => Err(Error::InvalidArgument(format!(
            "old_string matches {n} times in file. It must be unique. Include more surrounding \
             context (2-5 lines) to make it unique, or set replace_all to replace every occurrence."
        ))),
    }
}

/// Replaces sorted, disjoint ranges.
fn splice(text: &str, plan: &[(std::ops::Range<usize>, &str)]) -> (String, u64) {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (range, new) in plan {
        out.push_str(&text[at..range.start]);
        out.push_str(new);
        at = range.end;
    }
    out.push_str(&text[at..]);
    (out, plan.len() as u64)
}

/// Every match of `pattern` in `text` (seed 002's read_re). `overlap` lets the
/// next match reuse up to that many bytes of the previous one; 0 gives plain
/// non-overlapping matches.
pub fn regex_windows(text: &str, pattern: &str, overlap: u64) -> Result<Vec<String>> {
    let re = Regex::new(pattern)
        .map_err(|e| Error::InvalidArgument(format!("Invalid regex pattern: {e}")))?;
    let mut out = Vec::new();
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

    #[test]
    fn window_numbers_from_offset_and_keeps_verbatim_endings() {
        let w = read_window("/f", "a\r\nb\nc\n", 1, 1, true).unwrap();
        assert_eq!(w.content, "     2\tb");
        assert_eq!((w.total_lines, w.lines_returned), (3, 1));
        let w = read_window("/f", "a\r\nb\nc", 0, 2, false).unwrap();
        assert_eq!(w.content, "a\r\nb\n");
    }

    #[test]
    fn window_past_end_names_length() {
        let err = read_window("/f", "a\nb\n", 2, 0, false).unwrap_err();
        assert!(err.to_string().contains("has 2 lines"), "{err}");
        assert_eq!(
            read_window("/f", "", 0, 0, true).unwrap().content,
            format::EMPTY_CONTENT_WARNING
        );
        assert!(read_window("/f", "", 1, 0, true).is_err());
    }

    #[test]
    fn edit_requires_unique_match_unless_replace_all() {
        assert_eq!(
            apply_edit("a b a", &edit("b", "c", false)).unwrap(),
            ("a c a".into(), 1)
        );
        let err = apply_edit("a b a", &edit("a", "c", false)).unwrap_err();
        assert!(err.to_string().contains("matches 2 times"));
        assert_eq!(
            apply_edit("a b a", &edit("a", "c", true)).unwrap(),
            ("c b c".into(), 2)
        );
        assert!(apply_edit("abc", &edit("", "x", false)).is_err());
        let err = apply_edit("abc", &edit("zz", "x", false)).unwrap_err();
        assert!(err.to_string().contains("\"zz\""), "{err}");
    }

    #[test]
    fn multi_edit_matches_original_and_rejects_overlap() {
        let edits = [edit("one", "two", false), edit("two", "three", false)];
        assert_eq!(apply_edits("one two", &edits).unwrap().0, "two three");
        let overlapping = [edit("abc", "x", false), edit("bcd", "y", false)];
        let err = apply_edits("abcd", &overlapping).unwrap_err();
        assert_eq!(err.code(), "INVALID_PARAM");
        assert!(err.to_string().contains("edit 1"), "{err}");
        let failing = [edit("a", "b", false), edit("missing", "x", false)];
        assert!(
            apply_edits("a", &failing)
                .unwrap_err()
                .to_string()
                .starts_with("edit 1 failed")
        );
    }

    #[test]
    fn regex_windows_overlap() {
        assert_eq!(regex_windows("aaaa", "aa", 0).unwrap(), vec!["aa", "aa"]);
        assert_eq!(
            regex_windows("aaaa", "aa", 1).unwrap(),
            vec!["aa", "aa", "aa"]
        );
        assert!(regex_windows("x", "(", 0).is_err());
        assert_eq!(regex_windows("é1é2", r"\d", 0).unwrap(), vec!["1", "2"]);
    }
}
