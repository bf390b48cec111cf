//! Three-way merge of text, line by line (a branch's merge,
//! docs/branches.md § Merge).
//!
//! Each side's changes against the common ancestor are found with the same
//! line diff as the diffs (`similar`, Myers, stopped refining at
//! [`DIFF_DEADLINE`]: a slower diff is coarser, never wrong). Changes on one
//! side only are taken; the same change on both sides is taken once;
//! changes that overlap, or touch (one ends where the other starts), are a
//! conflict, as `diff3` and git decide it: nothing is guessed.

use super::diff::DIFF_DEADLINE;
use super::lines::LineIndex;
use similar::{Algorithm, DiffOp, capture_diff_deadline};
use std::time::Instant;

/// One side's change: the ancestor's lines `start..end` become `text` (the
/// side's lines, one slice of it).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Hunk<'a> {
    start: usize,
    end: usize,
    text: &'a str,
}

/// The changes that turn `ancestor` into `side`, in order, adjacent ones
/// joined.
fn hunks<'a>(ancestor: &LineIndex<'_>, side: &LineIndex<'a>) -> Vec<Hunk<'a>> {
    let deadline = Instant::now() + DIFF_DEADLINE;
    let ops = capture_diff_deadline(
        Algorithm::Myers,
        ancestor,
        0..ancestor.len(),
        side,
        0..side.len(),
        Some(deadline),
    );
    // (hunk, the side's lines it takes), adjacent changes joined: the
    // side's lines of joined changes are adjacent too.
    let mut out: Vec<(Hunk<'a>, std::ops::Range<usize>)> = Vec::new();
    for op in ops {
        let (start, end, new) = match op {
            DiffOp::Equal { .. } => continue,
            DiffOp::Delete {
                old_index,
                old_len,
                new_index,
            } => (old_index, old_index + old_len, new_index..new_index),
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => (old_index, old_index, new_index..new_index + new_len),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => (
                old_index,
                old_index + old_len,
                new_index..new_index + new_len,
            ),
        };
        match out.last_mut() {
            Some((last, lines)) if last.end == start => {
                last.end = end;
                lines.end = new.end;
                last.text = side.span(lines.clone());
            }
            _ => out.push((
                Hunk {
                    start,
                    end,
                    text: side.span(new.clone()),
                },
                new,
            )),
        }
    }
    out.into_iter().map(|(hunk, _)| hunk).collect()
}

/// True when two changes cannot both be taken: their ranges overlap or
/// touch (an insertion at the edge of the other's range included).
fn clash(a: &Hunk<'_>, b: &Hunk<'_>) -> bool {
    a.start <= b.end && b.start <= a.end
}

/// Merges the changes `ours` and `theirs` made to `ancestor`; `None` when
/// they conflict (or a text is 4 GiB or more). Lines are found by offset
/// ([`LineIndex`], four bytes a line of each text): beyond it, the diff's
/// own working vectors hold sixteen bytes a line of the two texts compared.
pub fn merge3(ancestor: &str, ours: &str, theirs: &str) -> Option<String> {
    if ours == theirs || theirs == ancestor {
        return Some(ours.to_owned());
    }
    if ours == ancestor {
        return Some(theirs.to_owned());
    }
    let base = LineIndex::new(ancestor).ok()?;
    let (mine, other) = (LineIndex::new(ours).ok()?, LineIndex::new(theirs).ok()?);
    let (a, b) = (hunks(&base, &mine), hunks(&base, &other));
    let mut taken: Vec<&Hunk<'_>> = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => {
                taken.push(x);
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if clash(x, y) => return None,
            (Some(x), Some(y)) if x.start <= y.start => {
                taken.push(x);
                i += 1;
            }
            (Some(_), Some(y)) | (None, Some(y)) => {
                taken.push(y);
                j += 1;
            }
            (Some(x), None) => {
                taken.push(x);
                i += 1;
            }
            (None, None) => break,
        }
    }
    let mut out = String::with_capacity(ours.len().max(theirs.len()));
    let mut at = 0;
    for hunk in taken {
        out.push_str(base.span(at..hunk.start));
        out.push_str(hunk.text);
        at = hunk.end;
    }
    out.push_str(base.span(at..base.len()));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::merge3;

    const BASE: &str = "a\nb\nc\nd\ne\nf\ng\n";

    #[test]
    fn changes_apart_merge() {
        let ours = "A\nb\nc\nd\ne\nf\ng\n";
        let theirs = "a\nb\nc\nd\ne\nf\nG\n";
        assert_eq!(
            merge3(BASE, ours, theirs).as_deref(),
            Some("A\nb\nc\nd\ne\nf\nG\n")
        );
        assert_eq!(
            merge3(BASE, theirs, ours).as_deref(),
            Some("A\nb\nc\nd\ne\nf\nG\n")
        );
    }

    #[test]
    fn overlapping_or_touching_changes_conflict() {
        assert_eq!(
            merge3(BASE, "a\nX\nc\nd\ne\nf\ng\n", "a\nY\nc\nd\ne\nf\ng\n"),
            None
        );
        assert_eq!(
            merge3(BASE, "a\nX\nc\nd\ne\nf\ng\n", "a\nb\nY\nd\ne\nf\ng\n"),
            None
        );
        assert_eq!(
            merge3(BASE, "a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nd\ne\nf\ng\ni\n"),
            None
        );
    }

    #[test]
    fn the_same_change_on_both_sides_is_taken_once() {
        let both = "a\nb\nC\nd\ne\nf\ng\n";
        assert_eq!(merge3(BASE, both, both).as_deref(), Some(both));
        let ours = "a\nb\nC\nd\ne\nf\nG\n";
        assert_eq!(merge3(BASE, ours, both).as_deref(), Some(ours));
    }

    #[test]
    fn insertions_and_deletions_apart_merge() {
        let ours = "a\nnew\nb\nc\nd\ne\nf\ng\n";
        let theirs = "a\nb\nc\nd\ne\ng\n";
        assert_eq!(
            merge3(BASE, ours, theirs).as_deref(),
            Some("a\nnew\nb\nc\nd\ne\ng\n")
        );
    }

    #[test]
    fn a_last_line_without_newline_merges() {
        assert_eq!(merge3("a\nb", "A\nb", "a\nB").as_deref(), None);
        assert_eq!(
            merge3("a\nb\nc\nd", "A\nb\nc\nd", "a\nb\nc\nD").as_deref(),
            Some("A\nb\nc\nD")
        );
    }
}
