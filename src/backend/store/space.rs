//! One namespace's files as the ordered tier reads them: point lookups,
//! scans, and a search's snapshot.
//!
//! Invariants:
//! - two namespaces never see each other's files: every key read starts
//!   with the namespace id, and every scan is bounded to the namespace's
//!   range (the iterator's bounds and the `meta` column family's
//!   per-namespace prefix extractor), so listing, Glob and Grep are range
//!   scans as `ordered` describes;
//! - a search reads one RocksDB snapshot ([`StoreEngine::space`] with a
//!   snapshot): it sees each file as it was when it started and blocks no
//!   writer; its bulk scans run with `fill_cache(false)`, so one Grep does
//!   not evict the hot set;
//! - values are read pinned, never copied whole; a space of a change
//!   remembers the last record it read, so retiring it (`history`) copies
//!   that value without a second read.

use super::keys::{self, NsId};
use super::{CF_CHUNKS, CF_META, CF_VERSIONS};
use super::{KeyName, StoreCursor, StoreEngine, StoreSpace, bounded, db_error};
use crate::backend::ordered::{Cursor, Files, Frozen};
use crate::backend::record::{self, Meta};
use crate::change::LogBounds;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use rocksdb::{DB, DBPinnableSlice, ReadOptions, SnapshotWithThreadMode};
use std::sync::{Mutex, PoisonError};

impl StoreEngine {
    /// The scope's files, read live or through `snapshot`; a `changing`
    /// space (under the path locks of a change) remembers the last record
    /// it read, which the change may retire.
    pub(super) fn space<'a>(
        &'a self,
        ns: NsId,
        snapshot: Option<&'a SnapshotWithThreadMode<'a, DB>>,
        changing: bool,
    ) -> Result<StoreSpace<'a>> {
        Ok(StoreSpace {
            store: self,
            ns,
            snapshot,
            meta: self.cf(CF_META)?,
            chunks: self.cf(CF_CHUNKS)?,
            versions: self.cf(CF_VERSIONS)?,
            last_read: changing.then(Mutex::default),
        })
    }
}

impl Cursor for StoreCursor<'_> {
    type File = Meta;

    fn seek(&mut self, rel: &[u8]) {
        self.it.seek(keys::meta(self.ns, rel));
    }

    fn next(&mut self) {
        if self.it.valid() {
            self.it.next();
        }
    }

    fn current(&self) -> Option<Result<(&[u8], Meta)>> {
        match self.it.item() {
            Some((key, value)) => Some(
                record::decode(&KeyName(key), value).map(|(meta, _)| (keys::rel_of(key), meta)),
            ),
            None => self.it.status().err().map(|e| Err(db_error("scan")(e))),
        }
    }
}

impl StoreSpace<'_> {
    /// The `meta` value at `key`, pinned (not copied).
    pub(super) fn value(&self, key: &[u8]) -> Result<Option<DBPinnableSlice<'_>>> {
        match self.snapshot {
            Some(snapshot) => snapshot.get_pinned_cf(self.meta, key),
            None => self.store.db.get_pinned_cf(self.meta, key),
        }
        .map_err(db_error("read metadata"))
    }

    /// The `versions` value at `key`, read live or through the snapshot.
    pub(super) fn versions_value(&self, key: &[u8]) -> Result<Option<DBPinnableSlice<'_>>> {
        match self.snapshot {
            Some(snapshot) => snapshot.get_pinned_cf(self.versions, key),
            None => self.store.db.get_pinned_cf(self.versions, key),
        }
        .map_err(db_error("read a past version"))
    }
}

impl Files for StoreSpace<'_> {
    type File = Meta;
    type Cursor<'c>
        = StoreCursor<'c>
    where
        Self: 'c;

    fn get(&self, rel: &[u8]) -> Result<Option<Meta>> {
        let key = keys::meta(self.ns, rel);
        match self.value(&key)? {
            Some(value) => {
                let meta = record::decode(&KeyName(&key), &value)?.0;
                if let Some(last) = &self.last_read {
                    *last.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some((key, value.to_vec()));
                }
                Ok(Some(meta))
            }
            None => Ok(None),
        }
    }

    fn scan(&self, below: &[u8], bulk: bool) -> Result<StoreCursor<'_>> {
        let (lo, hi) = keys::subtree(self.ns, below);
        let mut opts = bounded(lo.clone(), hi);
        if bulk {
            opts.fill_cache(false);
        }
        if let Some(snapshot) = self.snapshot {
            opts.set_snapshot(snapshot);
        }
        let mut it = self.store.db.raw_iterator_cf_opt(self.meta, opts);
        it.seek(&lo);
        Ok(StoreCursor { it, ns: self.ns })
    }
}

impl Frozen for StoreSpace<'_> {
    type Data<'c>
        = Lent<'c>
    where
        Self: 'c;

    /// A file of several chunks is assembled into one buffer.
    const LOAD_COPIES: bool = true;

    fn load<'c>(
        &'c self,
        cursor: Option<&'c StoreCursor<'_>>,
        path: &VfsPath,
        rel: &[u8],
    ) -> Result<Lent<'c>> {
        let key = keys::meta(self.ns, rel);
        let meta = match cursor.and_then(|cursor| cursor.it.item()) {
            Some((k, value)) if k == key.as_slice() => {
                let (meta, inline) = record::decode(path, value)?;
                if meta.inline {
                    return Ok(Lent::Cursor(inline));
                }
                meta
            }
            _ => {
                let value = self
                    .value(&key)?
                    .ok_or_else(|| Error::NotFound(path.to_string()))?;
                let (meta, inline) = record::decode(path, &value)?;
                if meta.inline {
                    let start = value.len() - inline.len();
                    return Ok(Lent::Pinned(value, start));
                }
                meta
            }
        };
        let mut opts = ReadOptions::default();
        if let Some(snapshot) = self.snapshot {
            opts.set_snapshot(snapshot);
        }
        opts.fill_cache(false);
        if meta.chunks() == 1 {
            let chunk = self.store.chunk(&opts, path, &meta, 0)?;
            return Ok(Lent::Pinned(chunk, 0));
        }
        self.store.assemble(&opts, path, &meta).map(Lent::Owned)
    }

    fn log_bounds(&self) -> Result<LogBounds> {
        match self.snapshot {
            Some(snapshot) => self.store.log_bounds_at(snapshot),
            None => self.store.log_bounds_at(&self.store.db.snapshot()),
        }
    }
}

/// A file's content as a search reads it from the Store, lent rather than
/// copied wherever RocksDB lets it be: copying each file into a buffer of
/// its own cost a `malloc` and a `memcpy` per file, and for a file of one
/// 1 MiB chunk a fresh mapping to fault in, whose time grew with the heap's
/// fragmentation (docs/performance.md § The scan lends small files).
pub enum Lent<'c> {
    /// A small file's bytes in the cursor's current value (a scan).
    Cursor(&'c [u8]),
    /// A value pinned by RocksDB (a point lookup: a table walk's candidate,
    /// or a file of one chunk) from the given offset: a small file's
    /// record past its metadata, or the chunk whole.
    Pinned(DBPinnableSlice<'c>, usize),
    /// A file of several chunks, assembled.
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for Lent<'_> {
    fn as_ref(&self) -> &[u8] {
        match self {
            Lent::Cursor(bytes) => bytes,
            Lent::Pinned(value, start) => &value[*start..],
            Lent::Owned(bytes) => bytes,
        }
    }
}
