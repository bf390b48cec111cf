//! One session's files as the ordered tier reads them: scans of its map
//! under the session's lock, and the snapshot a search reads without it.
//!
//! Invariants:
//! - a scan is a key range of one session's map ([`Bounds`]): two sessions,
//!   and two namespaces, never see each other's files;
//! - a read under the session's lock sees every change entirely or not at
//!   all (a change applies under the same lock);
//! - a search reads a [`Snapshot`] taken under the lock (the persistent map
//!   itself, shared in O(1)) and walks it without the lock, so a slow search
//!   never blocks a writer; it sees each file as it was when the search
//!   started. While it runs, a writer copies the map's nodes it changes
//!   that the snapshot still shares: at most one copy of the map's nodes
//!   (keys and pointers, never contents), freed with the snapshot.

use super::{FileMap, FileRecord, SessionData, StateEngine};
use crate::backend::ordered::{Cursor, Files, Frozen, keys};
use crate::change::LogBounds;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use std::ops::Bound;
use std::sync::Arc;

/// The key range `[lo, hi)` a State scan covers.
pub(super) struct Bounds {
    pub(super) lo: Vec<u8>,
    pub(super) hi: Option<Vec<u8>>,
}

impl Bounds {
    /// Everything below the directory `rel`.
    pub(super) fn below(rel: &[u8]) -> Bounds {
        let (lo, hi) = keys::below(rel);
        Bounds { lo, hi }
    }

    /// Where a seek to `rel` starts: never before the range.
    pub(super) fn start<'k>(&'k self, rel: &'k [u8]) -> &'k [u8] {
        rel.max(self.lo.as_slice())
    }

    /// True when `key` (at or after the start) is still in the range.
    pub(super) fn holds(&self, key: &[u8]) -> bool {
        self.hi.as_ref().is_none_or(|hi| key < hi.as_slice())
    }

    /// The file or directory `rel` and everything below it: `[rel,
    /// rel\x01)`, one range because a subtree's keys follow its root's.
    fn subtree(rel: &[u8]) -> Bounds {
        Bounds {
            lo: rel.to_vec(),
            hi: (!rel.is_empty()).then(|| keys::past(rel)),
        }
    }

    /// True when `key` lies in the range.
    fn contains(&self, key: &[u8]) -> bool {
        key >= self.lo.as_slice() && self.holds(key)
    }

    /// The range as bounds of a map's `range`.
    pub(super) fn range(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        let hi = self.hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        (Bound::Included(self.lo.as_slice()), hi)
    }

    /// The keys in both ranges.
    fn meet(self, other: &Bounds) -> Bounds {
        let hi = match (self.hi, &other.hi) {
            (Some(a), Some(b)) => Some(a.min(b.clone())),
            (a, b) => a.or_else(|| b.clone()),
        };
        Bounds {
            lo: self.lo.max(other.lo.clone()),
            hi,
        }
    }
}

/// A session's live files, under the session's lock.
pub struct StateSpace<'a> {
    pub(super) engine: &'a StateEngine,
    pub(super) data: &'a mut SessionData,
}

impl StateSpace<'_> {
    /// The files at and below `top`, for a search that runs without the
    /// lock: the session's map itself, shared. The map is persistent, so
    /// this is O(1) and a writer copies only the nodes it changes while a
    /// search holds them; copying the subtree's 78,000 `Arc`s instead set a
    /// floor of about 11 ms under every State Grep on the kernel
    /// (docs/performance.md § Indexed search).
    pub(super) fn snapshot(&self, top: &[u8]) -> Snapshot {
        Snapshot {
            pinned: self.data.files.len() as u64 * PINNED_BYTES_PER_FILE + self.data.key_bytes,
            files: self.data.files.clone(),
            covered: Bounds::subtree(top),
            log: self.data.log.bounds(),
        }
    }
}

/// A scan of a session's map: one pass of the map's own iterator from each
/// seek (seeking again from the root for every file cost a selective Grep
/// on the kernel more than its whole walk).
pub struct MapCursor<'a> {
    bounds: Bounds,
    files: &'a FileMap,
    rest:
        imbl::ordmap::RangedIter<'a, Vec<u8>, Arc<FileRecord>, imbl::shared_ptr::DefaultSharedPtr>,
    at: Option<&'a Arc<FileRecord>>,
}

impl<'a> MapCursor<'a> {
    /// A scan of the keys of `files` in `bounds`.
    fn new(files: &'a FileMap, bounds: Bounds) -> MapCursor<'a> {
        let mut cursor = MapCursor {
            rest: files.range::<_, [u8]>(bounds.range()),
            bounds,
            files,
            at: None,
        };
        cursor.next_in_bounds();
        cursor
    }
}

impl Cursor for MapCursor<'_> {
    type File = Arc<FileRecord>;

    fn seek(&mut self, rel: &[u8]) {
        let from = self.bounds.start(rel);
        self.rest = self
            .files
            .range::<_, [u8]>((Bound::Included(from), Bound::Unbounded));
        self.next_in_bounds();
    }

    fn next(&mut self) {
        if self.at.is_some() {
            self.next_in_bounds();
        }
    }

    fn current(&self) -> Option<Result<(&[u8], Arc<FileRecord>)>> {
        self.at.map(|file| Ok((file.key.as_slice(), file.clone())))
    }
}

impl MapCursor<'_> {
    /// Steps to the next file of the map, if still in the bounds.
    fn next_in_bounds(&mut self) {
        self.at = self
            .rest
            .next()
            .filter(|(key, _)| self.bounds.holds(key))
            .map(|(_, file)| file);
    }
}

impl Files for StateSpace<'_> {
    type File = Arc<FileRecord>;
    type Cursor<'c>
        = MapCursor<'c>
    where
        Self: 'c;

    fn get(&self, rel: &[u8]) -> Result<Option<Arc<FileRecord>>> {
        Ok(self.data.files.get(rel).cloned())
    }

    fn scan(&self, below: &[u8], _bulk: bool) -> Result<MapCursor<'_>> {
        Ok(MapCursor::new(&self.data.files, Bounds::below(below)))
    }
}

/// What a snapshot may keep alive of each file besides its key's bytes once
/// writers have replaced every node it shares: the entry (a key's vector and
/// an `Arc`, 32 bytes) and its share of a node (at least half full).
const PINNED_BYTES_PER_FILE: u64 = 64;

/// The files of one subtree as they were at the start of a search: the
/// session's persistent map as it was then, read only in `covered`.
pub struct Snapshot {
    /// See [`Snapshot::pinned_bytes`].
    pinned: u64,
    files: FileMap,
    /// The subtree the search may reach: its top and everything below.
    covered: Bounds,
    /// The session's log bounds when the snapshot was taken (under the
    /// same lock).
    log: LogBounds,
}

impl Snapshot {
    /// The most memory this snapshot can hold besides the live map: all of
    /// the map's nodes and keys, once writers have replaced every node it
    /// shares (contents are shared `Arc`s, never copied). A snapshot covers
    /// the session's whole map whatever subtree it reads.
    pub fn pinned_bytes(&self) -> u64 {
        self.pinned
    }
}

impl Files for Snapshot {
    type File = Arc<FileRecord>;
    type Cursor<'c> = MapCursor<'c>;

    fn get(&self, rel: &[u8]) -> Result<Option<Arc<FileRecord>>> {
        if !self.covered.contains(rel) {
            return Ok(None);
        }
        Ok(self.files.get(rel).cloned())
    }

    fn scan(&self, below: &[u8], _bulk: bool) -> Result<MapCursor<'_>> {
        let bounds = Bounds::below(below).meet(&self.covered);
        Ok(MapCursor::new(&self.files, bounds))
    }
}

impl Frozen for Snapshot {
    type Data<'c> = Arc<[u8]>;

    /// The session's files are lent, not copied.
    const LOAD_COPIES: bool = false;

    fn load<'c>(
        &'c self,
        cursor: Option<&'c MapCursor<'_>>,
        path: &VfsPath,
        rel: &[u8],
    ) -> Result<Arc<[u8]>> {
        let file = match cursor.and_then(|cursor| cursor.at) {
            Some(file) if file.key == rel => Some(file.clone()),
            _ => self.get(rel)?,
        };
        match file {
            Some(file) => Ok(file.data.clone()),
            None => Err(Error::NotFound(path.to_string())),
        }
    }

    fn log_bounds(&self) -> Result<LogBounds> {
        Ok(self.log)
    }
}
