//! One session's files as the ordered tier reads them: scans of its map
//! under the session's lock, and the snapshot a search reads without it.
//!
//! Invariants:
//! - a scan is a key range of one session's map ([`Bounds`]): two sessions,
//!   and two namespaces, never see each other's files;
//! - a read under the session's lock sees every change entirely or not at
//!   all (a change applies under the same lock);
//! - a search reads a [`Snapshot`] of `Arc`s taken under the lock and walks
//!   it without the lock, so a slow search never blocks a writer; it sees
//!   each file as it was when the search started.

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
}

/// A session's live files, under the session's lock.
pub struct StateSpace<'a> {
    pub(super) engine: &'a StateEngine,
    pub(super) data: &'a mut SessionData,
}

impl StateSpace<'_> {
    /// A scan of everything below the directory `rel`.
    pub(super) fn cursor(&self, rel: &[u8]) -> MapCursor<'_> {
        let mut cursor = MapCursor {
            files: &self.data.files,
            bounds: Bounds::below(rel),
            at: None,
        };
        cursor.seek(b"");
        cursor
    }

    /// The files at and below `top`, for a search that runs without the lock.
    pub(super) fn snapshot(&self, top: &[u8]) -> Snapshot {
        let mut files = Vec::new();
        if let Some(file) = self.data.files.get(top) {
            files.push(file.clone());
        }
        // One pass of the map's own iterator: a cursor's `next` seeks again
        // from the root for every file, which cost a selective Grep on the
        // kernel's 78,000 files more than its whole walk (docs/performance.md
        // § Indexed search).
        let bounds = Bounds::below(top);
        let below = (Bound::Included(bounds.lo.as_slice()), Bound::Unbounded);
        let below = self.data.files.range::<[u8], _>(below);
        files.extend(
            below
                .take_while(|(key, _)| bounds.holds(key))
                .map(|(_, file)| file.clone()),
        );
        Snapshot {
            files,
            log: self.data.log.bounds(),
        }
    }
}

/// A scan of a session's map.
pub struct MapCursor<'a> {
    pub(super) files: &'a FileMap,
    pub(super) bounds: Bounds,
    pub(super) at: Option<(&'a [u8], &'a Arc<FileRecord>)>,
}

impl<'a> MapCursor<'a> {
    fn find(&self, from: Bound<&[u8]>) -> Option<(&'a [u8], &'a Arc<FileRecord>)> {
        let files: &'a FileMap = self.files;
        files
            .range::<[u8], _>((from, Bound::Unbounded))
            .next()
            .filter(|(key, _)| self.bounds.holds(key))
            .map(|(key, file)| (key.as_slice(), file))
    }
}

impl Cursor for MapCursor<'_> {
    type File = Arc<FileRecord>;

    fn seek(&mut self, rel: &[u8]) {
        self.at = self.find(Bound::Included(self.bounds.start(rel)));
    }

    fn next(&mut self) {
        if let Some((key, _)) = self.at {
            self.at = self.find(Bound::Excluded(key));
        }
    }

    fn current(&self) -> Option<Result<(&[u8], Arc<FileRecord>)>> {
        self.at.map(|(key, file)| Ok((key, file.clone())))
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
        Ok(self.cursor(below))
    }
}

/// The files of one subtree, captured at the start of a search, in key
/// order.
pub struct Snapshot {
    pub(super) files: Vec<Arc<FileRecord>>,
    /// The session's log bounds when the snapshot was taken (under the
    /// same lock).
    pub(super) log: LogBounds,
}

impl Snapshot {
    /// Where `rel` is or would be.
    fn position(&self, rel: &[u8]) -> usize {
        self.files.partition_point(|f| f.key.as_slice() < rel)
    }
}

/// A scan of a [`Snapshot`].
pub struct SliceCursor<'a> {
    pub(super) files: &'a [Arc<FileRecord>],
    pub(super) bounds: Bounds,
    pub(super) at: usize,
}

impl SliceCursor<'_> {
    fn here(&self) -> Option<&Arc<FileRecord>> {
        self.files
            .get(self.at)
            .filter(|file| self.bounds.holds(&file.key))
    }
}

impl Cursor for SliceCursor<'_> {
    type File = Arc<FileRecord>;

    fn seek(&mut self, rel: &[u8]) {
        let from = self.bounds.start(rel);
        self.at = self.files.partition_point(|f| f.key.as_slice() < from);
    }

    fn next(&mut self) {
        if self.here().is_some() {
            self.at += 1;
        }
    }

    fn current(&self) -> Option<Result<(&[u8], Arc<FileRecord>)>> {
        self.here()
            .map(|file| Ok((file.key.as_slice(), file.clone())))
    }
}

impl Files for Snapshot {
    type File = Arc<FileRecord>;
    type Cursor<'c> = SliceCursor<'c>;

    fn get(&self, rel: &[u8]) -> Result<Option<Arc<FileRecord>>> {
        Ok(self
            .files
            .get(self.position(rel))
            .filter(|file| file.key == rel)
            .cloned())
    }

    fn scan(&self, below: &[u8], _bulk: bool) -> Result<SliceCursor<'_>> {
        let mut cursor = SliceCursor {
            files: &self.files,
            bounds: Bounds::below(below),
            at: 0,
        };
        cursor.seek(b"");
        Ok(cursor)
    }
}

impl Frozen for Snapshot {
    type Data = Arc<[u8]>;

    fn load(&self, cursor: &SliceCursor<'_>, path: &VfsPath, rel: &[u8]) -> Result<Arc<[u8]>> {
        let file = match cursor.here() {
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
