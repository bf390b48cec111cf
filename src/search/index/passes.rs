//! What lets a narrowed Grep over a path table cost O(candidates) rather
//! than O(files) (docs/search-index.md § The path table):
//!
//! - [`Passes`]: prefix sums of what the walk counts as it passes each row
//!   of a table (visited files and directories, hidden and ignored skips,
//!   too-large files, files that reach the index), for one search root,
//!   rule set, glob and size limit. They are taken once by the walk itself
//!   in a counting mode (`search::bulk`), so the rules have one
//!   implementation; or carried over from the sums over the table a table
//!   was derived from ([`Passes::carry`]), which also records the rows the
//!   walk reaches so that a window walked again can start at one.
//! - [`RowDocs`]: each row's doc id in a segment when the segment holds
//!   that row's very version, by one merge-join (both are in path order).
//!
//! Both are keyed by the table's id, which a table never shares with
//! another (a table advanced to a newer log position is a new table), so
//! a stale one is never used.

use super::segment::{Segment, Selected};
use super::table::PathTable;
use std::sync::Arc;

/// Counts the walk adds up as it passes entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Directories entered and files visited.
    pub visited: u32,
    /// Entries skipped as hidden.
    pub hidden: u32,
    /// Entries skipped as ignored.
    pub ignored: u32,
    /// Files over the size limit.
    pub too_large: u32,
    /// Files that reach the index (and are searched, or ruled out and so
    /// counted as searched).
    pub checked: u32,
}

impl Counts {
    /// `self` and `other` added up.
    pub fn plus(&self, other: &Counts) -> Counts {
        Counts {
            visited: self.visited + other.visited,
            hidden: self.hidden + other.hidden,
            ignored: self.ignored + other.ignored,
            too_large: self.too_large + other.too_large,
            checked: self.checked + other.checked,
        }
    }

    /// What was counted between `earlier` and `self`.
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            visited: self.visited - earlier.visited,
            hidden: self.hidden - earlier.hidden,
            ignored: self.ignored - earlier.ignored,
            too_large: self.too_large - earlier.too_large,
            checked: self.checked - earlier.checked,
        }
    }
}

/// What one set of [`Passes`] is for: everything the walk's counts depend
/// on besides the table's rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassKey {
    /// [`PathTable::id`] of the table walked.
    pub table: u64,
    /// The search root (the walk counts directories relative to it).
    pub root: String,
    /// The order keys `[lo, hi)` walked.
    pub lo: Vec<u8>,
    /// See `lo`.
    pub hi: Vec<u8>,
    /// `include_hidden`.
    pub hidden: bool,
    /// `include_ignored`.
    pub ignored: bool,
    /// The Grep's glob filter ("" for none).
    pub glob: String,
    /// The Grep's `max_file_bytes`.
    pub max_file_bytes: u64,
}

/// Prefix sums of the walk's counts over the rows `[first, first + n)` of a
/// table; see the module doc.
#[derive(Debug, PartialEq, Eq)]
pub struct Passes {
    key: PassKey,
    first: usize,
    /// `before[i]`: counted before the walk reaches row `first + i` (or a
    /// later row, when the walk prunes the directory that row is in);
    /// `before[n]` is the whole walk's count.
    before: Vec<Counts>,
    /// Bit `i`: row `first + i` reaches the index.
    checked: Vec<u64>,
    /// Bit `i`: the walk reaches row `first + i` (it is not below a
    /// directory the walk pruned at an earlier row).
    reached: Vec<u64>,
}

/// Sets bit `i` of `bits`.
fn set_bit(bits: &mut Vec<u64>, i: usize) {
    if bits.len() <= i / 64 {
        bits.resize(i / 64 + 1, 0);
    }
    bits[i / 64] |= 1 << (i % 64);
}

/// Bit `i` of `bits`.
fn bit(bits: &[u64], i: usize) -> bool {
    bits.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
}

impl Passes {
    /// Starts the sums for `key` over the rows from `first` on.
    pub fn start(key: PassKey, first: usize) -> Passes {
        Passes {
            key,
            first,
            before: Vec::new(),
            checked: Vec::new(),
            reached: Vec::new(),
        }
    }

    /// Records that the walk reached `row` having counted `so_far`: every
    /// row not yet recorded up to `row` was passed with that count.
    pub fn reached(&mut self, row: usize, so_far: Counts) {
        self.fill_to(row, so_far);
        set_bit(&mut self.reached, row - self.first);
    }

    /// Records `so_far` for every row not yet recorded up to `row`.
    pub fn fill_to(&mut self, row: usize, so_far: Counts) {
        while self.first + self.before.len() <= row {
            self.before.push(so_far);
        }
    }

    /// Records that `row` (the row reached last) reaches the index.
    pub fn checks(&mut self, row: usize) {
        set_bit(&mut self.checked, row - self.first);
    }

    /// The row the sums go on at: the first not recorded yet.
    pub fn next_row(&self) -> usize {
        self.first + self.before.len()
    }

    /// Records the rows of `earlier` (sums over an older table) from
    /// `from` up to `to` (exclusive) as the rows from
    /// [`Passes::next_row`] on, their sums moved by what was counted
    /// differently before them: `earlier`'s count before row `from` is
    /// `then`, this one's is `now`.
    pub fn carry(
        &mut self,
        earlier: &Passes,
        (from, to): (usize, usize),
        (then, now): (Counts, Counts),
    ) {
        for row in from..to {
            let at = self.next_row();
            let i = row - earlier.first;
            self.before.push(earlier.before[i].since(&then).plus(&now));
            if bit(&earlier.reached, i) {
                set_bit(&mut self.reached, at - self.first);
            }
            if bit(&earlier.checked, i) {
                set_bit(&mut self.checked, at - self.first);
            }
        }
    }

    /// Ends the sums at row `end` (exclusive) with the walk's total.
    pub fn finish(mut self, end: usize, total: Counts) -> Passes {
        self.fill_to(end, total);
        self.before.truncate(end - self.first + 1);
        let words = (end - self.first).div_ceil(64);
        self.checked.resize(words, 0);
        self.reached.resize(words, 0);
        self
    }

    /// What it is for.
    pub fn key(&self) -> &PassKey {
        &self.key
    }

    /// The rows `[first, end)` it covers.
    pub fn rows(&self) -> std::ops::Range<usize> {
        self.first..self.first + self.before.len() - 1
    }

    /// Counted before the walk reaches `row` (within [`Passes::rows`], or
    /// its end).
    pub fn before(&self, row: usize) -> Counts {
        self.before[row - self.first]
    }

    /// True when `row` reaches the index.
    pub fn reaches_index(&self, row: usize) -> bool {
        bit(&self.checked, row - self.first)
    }

    /// True when the walk reaches `row` (see [`Passes::reached`]).
    pub fn is_reached(&self, row: usize) -> bool {
        bit(&self.reached, row - self.first)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.before.len() * std::mem::size_of::<Counts>()
            + (self.checked.len() + self.reached.len()) * 8
            + self.key.root.len()
            + self.key.lo.len()
            + self.key.hi.len()
            + self.key.glob.len()
            + std::mem::size_of::<Passes>()
    }
}

/// No doc: the row is not in the segment at its version.
const NO_DOC: u32 = u32::MAX;

/// Each row's doc id in one segment; see the module doc.
pub struct RowDocs {
    table: u64,
    segment: Arc<Segment>,
    /// Row of each doc holding its row's version, else [`NO_DOC`].
    row_of_doc: Vec<u32>,
    /// Rows whose version the segment does not hold, ascending.
    unknown: Vec<u32>,
}

/// What the index knows of the very version of a file a Grep searches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Known {
    /// Nothing: the file is searched as a scan searches it.
    #[default]
    Nothing,
    /// Selected by its trigrams: it is text, which has no NUL byte
    /// (`trigram::extract`), so Grep's binary detection would find none.
    NulFree,
    /// As [`Known::NulFree`], and every match lies in its first this many
    /// pieces ([`super::segment::Segment::matches_within`]), so Grep
    /// searches only up to their end (`crate::search::FileSearcher::search_slice`).
    MatchesWithin(u32),
}

/// A row a narrowed Grep must look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Candidate {
    /// Its row in the table.
    pub row: u32,
    /// The segment holds the row at its version and selected it (or always
    /// scans it): the Grep searches it without asking the index again.
    /// False for rows the segment does not hold, and for rows the overlay
    /// also knows, which the index is asked about as before.
    pub selected: bool,
    /// What the segment knows of this very version's content.
    pub known: Known,
}

impl RowDocs {
    /// Joins `table` with `segment`.
    pub fn join(table: &PathTable, segment: Arc<Segment>) -> RowDocs {
        let mut row_of_doc = vec![NO_DOC; segment.len()];
        let mut unknown = Vec::new();
        let mut doc = 0;
        for row in 0..table.len() {
            let r = table.row(row);
            while doc < segment.len() && *segment.key(doc) < *r.key {
                doc += 1;
            }
            let held = doc < segment.len()
                && *segment.key(doc) == *r.key
                && segment.version(doc) == r.entry.version;
            match held {
                true => row_of_doc[doc] = row as u32,
                false => unknown.push(row as u32),
            }
        }
        RowDocs {
            table: table.id(),
            segment,
            row_of_doc,
            unknown,
        }
    }

    /// True when it joins these two.
    pub fn joins(&self, table: &PathTable, segment: &Arc<Segment>) -> bool {
        self.table == table.id() && Arc::ptr_eq(&self.segment, segment)
    }

    /// The rows within `rows` a Grep whose selection is `selected` must
    /// look at, ascending: rows the segment does not hold at their
    /// version, and rows of docs selected or always scanned. `None` when
    /// the selection is everything.
    pub fn candidates(
        &self,
        selected: &Selected,
        rows: std::ops::Range<usize>,
    ) -> Option<Vec<Candidate>> {
        let mut out: Vec<Candidate> = self
            .segment
            .selected_or_unindexed(selected)?
            .filter_map(|doc| Some((doc, *self.row_of_doc.get(doc as usize)?)))
            .filter(|&(_, row)| row != NO_DOC && rows.contains(&(row as usize)))
            .map(|(doc, row)| Candidate {
                row,
                selected: true,
                known: match self.segment.unindexed(doc) {
                    true => Known::Nothing,
                    false => self
                        .segment
                        .matches_within(selected, doc)
                        .map_or(Known::NulFree, Known::MatchesWithin),
                },
            })
            .collect();
        let from = self.unknown.partition_point(|&r| (r as usize) < rows.start);
        let to = self.unknown.partition_point(|&r| (r as usize) < rows.end);
        out.extend(self.unknown[from..to].iter().map(|&row| Candidate {
            row,
            selected: false,
            known: Known::Nothing,
        }));
        out.sort_unstable();
        Some(out)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.row_of_doc.len() + self.unknown.len()) * 4 + std::mem::size_of::<RowDocs>()
    }
}
