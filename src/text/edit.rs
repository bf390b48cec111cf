//! Edit and MultiEdit's string replacements: exact matches, unique unless
//! `replace_all`, several edits matched against the original text, and the
//! result's size checked before it is built.

use crate::error::{Error, Result, echo};

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
}
