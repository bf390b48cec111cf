//! The path table of a namespace: every file below one directory, in path
//! order, with its metadata, as of one position of the namespace's change
//! log (docs/search-index.md § The path table). A Grep whose frozen view is
//! at that very position walks the table instead of the tier's key space.

use super::codec::{Bytes, Reader};
use crate::change::LogPosition;
use crate::entry::{Entry, EntryKind};
use crate::path::VfsPath;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Most files a table holds: a larger namespace is walked on the tier.
pub const MAX_TABLE_FILES: usize = 1_000_000;

/// Most changes a table advanced by the log remembers (see
/// [`Derivation`]); beyond, what was derived from the older table is taken
/// again (a walk of the whole table costs about as much as this many
/// windows around changes).
const MAX_REMEMBERED_CHANGES: usize = 4096;

/// How a table was made from an older one by [`PathTable::advance`]: the
/// older table's id and each key that changed, in key order. It lets the
/// walk's counts over the older table be carried over, walking again only
/// the rows next to a change (`search::bulk`).
pub struct Derivation {
    /// [`PathTable::id`] of the older table.
    pub from: u64,
    /// The keys that changed, ascending.
    pub changes: Vec<KeyChange>,
}

/// One key of a [`Derivation`].
pub struct KeyChange {
    /// The order key.
    pub key: Box<[u8]>,
    /// True when the older table held a row at it.
    pub was: bool,
    /// True when the newer table holds a row at it.
    pub is: bool,
}

/// One file of a table.
pub struct Row {
    /// Its path's order key ([`crate::path::VfsPath::order_key`]).
    pub key: Box<[u8]>,
    /// Its entry, as the tier's walk would give it.
    pub entry: Entry,
}

impl Row {
    /// The row of `entry`.
    pub fn of(entry: Entry) -> Row {
        Row {
            key: entry.path.order_key().into_boxed_slice(),
            entry,
        }
    }

    /// Bytes it holds in a table, roughly: its key, its path, the rest of
    /// the entry and its place in the table.
    pub fn bytes(&self) -> usize {
        self.key.len() + self.entry.path.as_str().len() + std::mem::size_of::<Row>() + 24
    }
}

/// A namespace's files below one directory at one log position; immutable
/// (a newer position is a new table sharing the unchanged rows).
pub struct PathTable {
    /// Never shared with another table (see [`PathTable::id`]).
    id: u64,
    at: LogPosition,
    /// The order-key range `[lo, hi)` it holds every file of.
    lo: Vec<u8>,
    hi: Vec<u8>,
    rows: Vec<Arc<Row>>,
    bytes: usize,
    /// Set when [`PathTable::advance`] made it and remembered the changes.
    derivation: Option<Derivation>,
}

impl PathTable {
    /// The table of `rows` (in key order, all within `[lo, hi)`) at `at`.
    pub fn new(at: LogPosition, (lo, hi): (Vec<u8>, Vec<u8>), rows: Vec<Row>) -> PathTable {
        let rows: Vec<Arc<Row>> = rows.into_iter().map(Arc::new).collect();
        PathTable::of_rows(at, (lo, hi), rows)
    }

    fn of_rows(at: LogPosition, (lo, hi): (Vec<u8>, Vec<u8>), rows: Vec<Arc<Row>>) -> PathTable {
        let bytes = rows.iter().map(|r| r.bytes()).sum::<usize>() + lo.len() + hi.len();
        static IDS: AtomicU64 = AtomicU64::new(0);
        PathTable {
            id: IDS.fetch_add(1, Relaxed),
            at,
            lo,
            hi,
            rows,
            bytes,
            derivation: None,
        }
    }

    /// How it was made from an older table, when that is remembered.
    pub fn derivation(&self) -> Option<&Derivation> {
        self.derivation.as_ref()
    }

    /// The same table, remembering nothing of the one it came from: what
    /// was derived from that one no longer carries over (the Filesystem
    /// tier's ignore rules changed: `src/backend/fs/mirror/`).
    pub fn without_derivation(mut self) -> PathTable {
        if let Some(derived) = self.derivation.take() {
            self.bytes -= derived
                .changes
                .iter()
                .map(|c| c.key.len() + 24)
                .sum::<usize>();
        }
        self
    }

    /// A number no other table of this process has: what is derived from
    /// a table is keyed by it, so it is never used with another table.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Row `i` (in key order).
    pub fn row(&self, i: usize) -> &Row {
        &self.rows[i]
    }

    /// The index of the first row whose key is `>= from` (the number of
    /// rows when none is).
    pub fn position(&self, from: &[u8]) -> usize {
        self.rows.partition_point(|r| &*r.key < from)
    }

    /// [`PathTable::seek`] for a walk going forward row by row (a Glob
    /// over the table, a walk counting its rows): tries the row after the
    /// one it found last (`next`, which it updates) before a binary
    /// search, which was 40% of a Glob of 50,000 rows.
    pub fn seek_next(&self, next: &mut usize, from: &[u8]) -> Option<&Row> {
        let at = self.position_from(*next, from);
        *next = at + 1;
        self.rows.get(at).map(|r| &**r)
    }

    /// [`PathTable::position`], trying `hint` first: two comparisons when
    /// it is right.
    fn position_from(&self, hint: usize, from: &[u8]) -> usize {
        let rows = &self.rows;
        let after_previous = hint == 0 || rows.get(hint - 1).is_some_and(|r| &*r.key < from);
        let at_or_before = rows.get(hint).is_none_or(|r| &*r.key >= from);
        match hint <= rows.len() && after_previous && at_or_before {
            true => hint,
            false => self.position(from),
        }
    }

    /// The log position it is current at.
    pub fn at(&self) -> LogPosition {
        self.at
    }

    /// True when it holds every file of the key range `[lo, hi)`.
    pub fn covers(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.lo.as_slice() <= lo && hi <= self.hi.as_slice()
    }

    /// True when the order key `key` lies in the range it holds.
    pub fn holds_key(&self, key: &[u8]) -> bool {
        self.lo.as_slice() <= key && key < self.hi.as_slice()
    }

    /// True when the content at `key` in `version` can no longer be read
    /// here: the key lies in the range it holds, and it holds no file there
    /// or one at a newer version.
    pub fn outdates(&self, key: &[u8], version: u64) -> bool {
        self.holds_key(key)
            && self
                .seek(key)
                .is_none_or(|row| *row.key != *key || row.entry.version > version)
    }

    /// Files held.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when it holds no file.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Bytes held, roughly.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The first row whose key is `>= from`.
    pub fn seek(&self, from: &[u8]) -> Option<&Row> {
        self.rows.get(self.position(from)).map(|r| &**r)
    }

    /// Appends the table in the persisted format (docs/search-index.md §
    /// Persistence): its log position, range and rows (path, size, times,
    /// version); `false` (nothing usable written) when a time cannot be
    /// kept as nanoseconds since 1970.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> bool {
        let nanos = |t: SystemTime| {
            let n = t.duration_since(UNIX_EPOCH).ok()?.as_nanos();
            u64::try_from(n).ok()
        };
        out.put_u64(self.at.epoch);
        out.put_u64(self.at.seq);
        out.put_bytes(&self.lo);
        out.put_bytes(&self.hi);
        out.put_u64(self.rows.len() as u64);
        for row in &self.rows {
            let e = &row.entry;
            let (Some(modified), Some(created)) = (nanos(e.modified), nanos(e.created)) else {
                return false;
            };
            out.put_bytes(e.path.as_str().as_bytes());
            for n in [e.size, modified, created, e.version] {
                out.put_u64(n);
            }
        }
        true
    }

    /// Reads back what [`PathTable::encode_into`] wrote; `None` unless
    /// every path parses and the rows are in key order within the range.
    pub fn decode_from(r: &mut Reader<'_>) -> Option<PathTable> {
        let at = LogPosition {
            epoch: r.u64()?,
            seq: r.u64()?,
        };
        let lo = r.bytes()?.to_vec();
        let hi = r.bytes()?.to_vec();
        let n = usize::try_from(r.u64()?).ok()?;
        let mut rows: Vec<Row> = Vec::with_capacity(n.min(r.left()));
        for _ in 0..n {
            let path = VfsPath::parse(std::str::from_utf8(r.bytes()?).ok()?).ok()?;
            let size = r.u64()?;
            let time = |n: u64| UNIX_EPOCH + Duration::from_nanos(n);
            let (modified, created) = (time(r.u64()?), time(r.u64()?));
            let row = Row::of(Entry {
                path,
                kind: EntryKind::File,
                size,
                modified,
                created,
                version: r.u64()?,
                // The table keeps no executable bit: searches never show it.
                executable: false,
            });
            let ordered = rows.last().is_none_or(|last| last.key < row.key);
            if !ordered || *row.key < *lo || *row.key >= *hi {
                return None;
            }
            rows.push(row);
        }
        Some(PathTable::new(at, (lo, hi), rows))
    }

    /// This table moved to `at`: each key of `changes` (all within the
    /// range held) replaced by its row, or removed when `None`.
    pub fn advance(&self, at: LogPosition, changes: BTreeMap<Vec<u8>, Option<Row>>) -> PathTable {
        let mut rows = Vec::with_capacity(self.rows.len() + changes.len());
        let mut remembered = Vec::new();
        let remember = changes.len() <= MAX_REMEMBERED_CHANGES;
        let mut old = self.rows.iter().peekable();
        for (key, row) in changes {
            while let Some(r) = old.next_if(|r| *r.key < *key) {
                rows.push(r.clone());
            }
            let was = old.next_if(|r| *r.key == *key).is_some();
            let is = row.is_some();
            rows.extend(row.map(Arc::new));
            if remember && (was || is) {
                let key = key.into_boxed_slice();
                remembered.push(KeyChange { key, was, is });
            }
        }
        rows.extend(old.cloned());
        let mut next = PathTable::of_rows(at, (self.lo.clone(), self.hi.clone()), rows);
        next.bytes += remembered.iter().map(|c| c.key.len() + 24).sum::<usize>();
        next.derivation = remember.then_some(Derivation {
            from: self.id,
            changes: remembered,
        });
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::EntryKind;
    use crate::path::VfsPath;
    use std::time::SystemTime;

    fn row(path: &str, version: u64) -> Row {
        Row::of(Entry {
            path: VfsPath::parse(path).unwrap(),
            kind: EntryKind::File,
            size: 1,
            modified: SystemTime::UNIX_EPOCH,
            created: SystemTime::UNIX_EPOCH,
            version,
            executable: false,
        })
    }

    fn at(seq: u64) -> LogPosition {
        LogPosition { epoch: 7, seq }
    }

    #[test]
    fn a_position_from_any_hint_is_the_binary_searchs() {
        let top = VfsPath::parse("/d").unwrap();
        let paths = ["/d/a", "/d/b", "/d/b/c", "/d/e"];
        let rows = paths.iter().map(|p| row(p, 1)).collect();
        let table = PathTable::new(at(1), top.subtree_range(), rows);
        let mut keys: Vec<Vec<u8>> = paths.iter().map(|p| row(p, 1).key.to_vec()).collect();
        // Between and around every row: the key itself, just after it,
        // before the first and past the last.
        keys.extend(keys.clone().into_iter().map(|mut k| {
            k.push(0);
            k
        }));
        keys.extend([Vec::new(), vec![0xff; 8]]);
        for key in &keys {
            for hint in 0..=table.len() + 1 {
                assert_eq!(
                    table.position_from(hint, key),
                    table.position(key),
                    "{key:?} from {hint}"
                );
            }
        }
    }

    #[test]
    fn advancing_replaces_adds_and_removes_rows_in_order() {
        let top = VfsPath::parse("/d").unwrap();
        let table = PathTable::new(
            at(1),
            top.subtree_range(),
            vec![row("/d/a", 1), row("/d/b", 2), row("/d/c/x", 3)],
        );
        assert!(table.covers(&top.subtree_range().0, &top.subtree_range().1));
        assert!(!table.holds_key(&VfsPath::parse("/e").unwrap().order_key()));
        let mut changes = BTreeMap::new();
        changes.insert(row("/d/b", 4).key.to_vec(), Some(row("/d/b", 4)));
        changes.insert(row("/d/a", 0).key.to_vec(), None);
        changes.insert(row("/d/c/w", 5).key.to_vec(), Some(row("/d/c/w", 5)));
        changes.insert(row("/d/zz", 0).key.to_vec(), None);
        let next = table.advance(at(3), changes);
        let seen: Vec<(String, u64)> = next
            .rows
            .iter()
            .map(|r| (r.entry.path.to_string(), r.entry.version))
            .collect();
        assert_eq!(
            seen,
            [
                ("/d/b".to_owned(), 4),
                ("/d/c/w".to_owned(), 5),
                ("/d/c/x".to_owned(), 3)
            ]
        );
        assert_eq!(next.at(), at(3));
        let found = next.seek(&row("/d/c", 0).key).unwrap();
        assert_eq!(found.entry.version, 5);
        assert!(next.seek(&row("/d/zz", 0).key).is_none());
        assert_eq!(table.len(), 3);
        let mut bytes = Vec::new();
        assert!(next.encode_into(&mut bytes));
        let back = PathTable::decode_from(&mut Reader::new(&bytes)).unwrap();
        assert_eq!(back.at(), at(3));
        // The newer table remembers what changed (the key neither table
        // holds is no change); a table read back does not.
        let derived = next.derivation().unwrap();
        assert_eq!(derived.from, table.id());
        let remembered: Vec<(String, bool, bool)> = derived
            .changes
            .iter()
            .map(|c| (String::from_utf8_lossy(&c.key).into_owned(), c.was, c.is))
            .collect();
        let key = |p: &str| String::from_utf8_lossy(&row(p, 0).key).into_owned();
        assert_eq!(
            remembered,
            [
                (key("/d/a"), true, false),
                (key("/d/b"), true, true),
                (key("/d/c/w"), false, true)
            ]
        );
        assert!(back.derivation().is_none());
        let kept: usize = derived.changes.iter().map(|c| c.key.len() + 24).sum();
        assert_eq!(back.bytes() + kept, next.bytes());
        assert_eq!(back.seek(&row("/d/c", 0).key).unwrap().entry, found.entry);
        for cut in 0..bytes.len() {
            assert!(PathTable::decode_from(&mut Reader::new(&bytes[..cut])).is_none());
        }
    }
}
