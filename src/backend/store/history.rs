//! History on the Store tier: past versions and tombstones in the
//! `versions` column family (docs/contract.md § Changes and history).
//!
//! Invariants:
//! - a file's past versions are one key range of `versions`, oldest first,
//!   ending with its index of them at [`keys::PAST_INDEX`]: a change reads
//!   the index, not the range (which fills with the deletes of dropped
//!   versions);
//! - a retired record moves as it is (origin, inline content or blob id), in
//!   the batch of the change that replaces it: a past version is immutable
//!   until the retention drops it;
//! - a past version keeps its chunks (their blob id is its own) until the
//!   retention drops it, in one range delete; a restore copies the version
//!   into a new blob (`upload`), so it never shares chunks with it.

use super::keys;
use super::{KeyName, StoreBatch, StoreSpace, bounded, db_error};
use crate::backend::ChunkReader;
use crate::backend::ordered::{History, HistoryChange, Past};
use crate::backend::record::{self, Meta};
use crate::error::{Error, Result};
use crate::history::FileVersion;
use crate::path::VfsPath;
use std::sync::PoisonError;

impl StoreSpace<'_> {
    /// The past versions of `rel` as `(version, value)`, newest first (the
    /// index key, past every version, is left out).
    fn past_values(&self, rel: &[u8]) -> Result<Vec<(u64, Vec<u8>)>> {
        let (lo, _) = keys::versions_of(self.ns, rel);
        let hi = keys::version(self.ns, rel, keys::PAST_INDEX);
        let mut opts = bounded(lo, hi);
        if let Some(snapshot) = self.snapshot {
            opts.set_snapshot(snapshot);
        }
        let mut it = self.store.db.raw_iterator_cf_opt(self.versions, opts);
        it.seek_to_last();
        let mut out = Vec::new();
        while let Some((key, value)) = it.item() {
            out.push((keys::trailing_u64(key), value.to_vec()));
            it.prev();
        }
        it.status().map_err(db_error("read past versions"))?;
        Ok(out)
    }

    /// A stored value (current or past) of `path` as a retained version.
    fn as_version(&self, path: &VfsPath, value: &[u8], current: bool) -> Result<FileVersion> {
        let (meta, _) = record::decode(path, value)?;
        Ok(FileVersion {
            version: meta.version,
            size: meta.size,
            time: meta.modified_time(),
            origin: record::origin(path, value)?,
            deleted: record::is_tombstone(value),
            current,
        })
    }
}

impl History for StoreSpace<'_> {
    fn past(&self, rel: &[u8]) -> Result<Vec<Past>> {
        let key = keys::version(self.ns, rel, keys::PAST_INDEX);
        match self.versions_value(&key)? {
            Some(index) => record::decode_past(&KeyName(rel), &index),
            None => Ok(Vec::new()),
        }
    }

    fn set_history(
        &self,
        batch: &mut StoreBatch,
        _path: &VfsPath,
        rel: &[u8],
        change: HistoryChange<'_, Meta>,
    ) -> Result<()> {
        for past in change.forget {
            if past.content != 0 {
                // Every chunk of the blob: one range, no read needed.
                let (from, to) = (
                    keys::chunk(past.content, 0),
                    keys::chunk(past.content + 1, 0),
                );
                batch.batch.delete_range_cf(self.chunks, from, to);
            }
            let key = keys::version(self.ns, rel, past.version);
            batch.batch.delete_cf(self.versions, key);
        }
        if let Some(file) = change.retire {
            // The value moves as it is: origin, inline content or blob id.
            let key = keys::meta(self.ns, rel);
            let past = keys::version(self.ns, rel, file.version);
            let remembered = self.last_read.as_ref().and_then(|last| {
                let last = last.lock().unwrap_or_else(PoisonError::into_inner);
                let (read, value) = last.as_ref()?;
                (*read == key && record::decode(&KeyName(&key), value).ok()?.0 == *file)
                    .then(|| value.clone())
            });
            match remembered {
                Some(value) => batch.batch.put_cf(self.versions, past, value),
                None => {
                    let value = self
                        .value(&key)?
                        .ok_or_else(|| Error::NotFound(KeyName(&key).to_string()))?;
                    batch.batch.put_cf(self.versions, past, &*value);
                }
            }
        }
        if let Some((version, origin)) = change.tombstone {
            let key = keys::version(self.ns, rel, version);
            let tomb = record::encode_tombstone(&Meta::tombstone(version), origin);
            batch.batch.put_cf(self.versions, key, tomb);
            batch.version = batch.version.max(version);
        }
        let index = keys::version(self.ns, rel, keys::PAST_INDEX);
        if change.past.is_empty() {
            batch.batch.delete_cf(self.versions, index);
        } else {
            let encoded = record::encode_past(change.past);
            batch.batch.put_cf(self.versions, index, encoded);
        }
        Ok(())
    }

    fn versions(&self, path: &VfsPath, rel: &[u8]) -> Result<Vec<FileVersion>> {
        let mut out = Vec::new();
        if let Some(value) = self.value(&keys::meta(self.ns, rel))? {
            out.push(self.as_version(path, &value, true)?);
        }
        for (_, value) in self.past_values(rel)? {
            out.push(self.as_version(path, &value, false)?);
        }
        Ok(out)
    }

    fn read_version(
        &self,
        path: &VfsPath,
        rel: &[u8],
        version: u64,
        max_chunk: usize,
    ) -> Result<Option<(FileVersion, ChunkReader)>> {
        if let Some(value) = self.value(&keys::meta(self.ns, rel))?
            && record::decode(path, &value)?.0.version == version
        {
            let found = self.as_version(path, &value, true)?;
            let (_, reader) = self.pieces(path, rel, &value, false, max_chunk)?;
            return Ok(Some((found, reader)));
        }
        if version == keys::PAST_INDEX {
            return Ok(None);
        }
        let key = keys::version(self.ns, rel, version);
        let Some(value) = self.versions_value(&key)? else {
            return Ok(None);
        };
        let found = self.as_version(path, &value, false)?;
        let (_, reader) = self.pieces(path, rel, &value, true, max_chunk)?;
        Ok(Some((found, reader)))
    }
}
