//! Changes on the Store tier: how the steps the ordered tier stages (put,
//! relocate, release, drop, log) become one `WriteBatch`, and how it lands.
//! Also the live reads of one file, which read through `read`.
//!
//! Invariants:
//! - every change is one `WriteBatch` (atomic), applied under the stripe
//!   locks of its paths (`locks`), which the ordered tier took before it
//!   checked its preconditions: no lost update, and `if_version` /
//!   `create_only` are checked against what is replaced;
//! - a Move is one batch under the locks of both paths: it rewrites the
//!   moved files' `meta` keys (new versions, times kept), while their chunks
//!   stay where they are, keyed by blob id;
//! - versions only grow, across restarts: the largest version a batch hands
//!   out is merged into the generation counter (a `max` merge, see `open`)
//!   in the same batch;
//! - an uploaded file (`upload`) becomes visible with the batch that writes
//!   its metadata, which also deletes its upload marker;
//! - a batch with change-log records is written by the log (`log`), which
//!   numbers them in commit order.

use super::keys;
use super::upload::upload_marker;
use super::{GENERATION_KEY, KeyName, StoreBatch, StoreSpace, Uploaded, db_error};
use crate::backend::ChunkReader;
use crate::backend::ordered::{Content, Logged, Space, Stamp};
use crate::backend::record::{self, CHUNK_BYTES, INLINE_MAX_BYTES, Meta};
use crate::change::Origin;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use rocksdb::WriteBatch;
use std::time::SystemTime;

impl StoreSpace<'_> {
    /// Adds the deletion of a file's chunks to `batch`.
    fn delete_chunks(&self, batch: &mut WriteBatch, meta: &Meta) {
        for i in 0..meta.chunks() {
            batch.delete_cf(self.chunks, keys::chunk(meta.blob, i));
        }
    }
}

impl Space for StoreSpace<'_> {
    type Batch = StoreBatch;
    type Upload = Uploaded;

    fn read(&self, path: &VfsPath, rel: &[u8]) -> Result<Option<(Meta, Vec<u8>)>> {
        let key = keys::meta(self.ns, rel);
        let Some(value) = self.value(&key)? else {
            return Ok(None);
        };
        let (meta, inline) = record::decode(path, &value)?;
        if meta.inline {
            return Ok(Some((meta, inline.to_vec())));
        }
        self.read_large(path, &key).map(Some)
    }

    fn read_chunks(
        &self,
        path: &VfsPath,
        rel: &[u8],
        max_chunk: usize,
    ) -> Result<Option<(Meta, ChunkReader)>> {
        let Some(value) = self.value(&keys::meta(self.ns, rel))? else {
            return Ok(None);
        };
        Ok(Some(self.pieces(path, rel, &value, false, max_chunk)?))
    }

    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        batch: &mut StoreBatch,
        _path: &VfsPath,
        rel: &[u8],
        old: Option<&Meta>,
        content: Content<'_, Uploaded>,
        stamp: Stamp,
        origin: &Origin,
    ) -> Result<u64> {
        let version = stamp.version;
        let now = record::nanos(SystemTime::now());
        let (size, inline, blob) = match content {
            Content::Bytes(data) if data.len() <= INLINE_MAX_BYTES => (data.len(), true, 0),
            Content::Bytes(data) => (data.len(), false, version),
            Content::Uploaded(upload) => (upload.size, false, upload.blob),
        };
        let meta = Meta {
            version,
            size: size as u64,
            created: old.map_or(now, |m| m.created),
            modified: now,
            inline,
            blob,
            executable: stamp.executable,
        };
        let key = keys::meta(self.ns, rel);
        match content {
            Content::Bytes(data) if inline => {
                let value = record::encode(&meta, origin, Some(data));
                batch.batch.put_cf(self.meta, key, value);
            }
            Content::Bytes(data) => {
                for (i, chunk) in data.chunks(CHUNK_BYTES).enumerate() {
                    // i < meta.chunks(), which fits u32 (see `Meta::chunks`).
                    batch
                        .batch
                        .put_cf(self.chunks, keys::chunk(blob, i as u32), chunk);
                }
                let value = record::encode(&meta, origin, None);
                batch.batch.put_cf(self.meta, key, value);
            }
            Content::Uploaded(_) => {
                let value = record::encode(&meta, origin, None);
                batch.batch.put_cf(self.meta, key, value);
                batch.batch.delete(upload_marker(blob));
            }
        }
        batch.version = batch.version.max(version);
        Ok(meta.size)
    }

    #[allow(clippy::too_many_arguments)]
    fn relocate(
        &self,
        batch: &mut StoreBatch,
        from: &[u8],
        file: &Meta,
        _to: &VfsPath,
        to_rel: &[u8],
        version: u64,
        origin: &Origin,
    ) -> Result<()> {
        let meta = Meta { version, ..*file };
        let value = if meta.inline {
            let key = keys::meta(self.ns, from);
            let value = self
                .value(&key)?
                .ok_or_else(|| Error::NotFound(KeyName(&key).to_string()))?;
            let content = record::decode(&KeyName(&key), &value)?.1;
            record::encode(&meta, origin, Some(content))
        } else {
            // The chunks stay under their blob id; only the metadata moves.
            record::encode(&meta, origin, None)
        };
        batch
            .batch
            .put_cf(self.meta, keys::meta(self.ns, to_rel), value);
        batch.version = batch.version.max(version);
        Ok(())
    }

    fn release(&self, batch: &mut StoreBatch, file: &Meta) -> Result<()> {
        self.delete_chunks(&mut batch.batch, file);
        Ok(())
    }

    fn record(&self, batch: &mut StoreBatch, change: Logged) {
        batch.logged.push(change);
    }

    fn drop_key(&self, batch: &mut StoreBatch, rel: &[u8]) {
        batch.batch.delete_cf(self.meta, keys::meta(self.ns, rel));
    }

    fn drop_below(&self, batch: &mut StoreBatch, rel: &[u8]) {
        let (lo, hi) = keys::subtree(self.ns, rel);
        batch.batch.delete_range_cf(self.meta, lo, hi);
    }

    fn apply(&mut self, batch: StoreBatch) -> Result<()> {
        let StoreBatch {
            mut batch,
            version,
            logged,
        } = batch;
        if version > 0 {
            batch.merge(GENERATION_KEY, version.to_be_bytes());
        }
        if !logged.is_empty() {
            return self.store.write_logged(self.ns, batch, logged);
        }
        self.store
            .db
            .write_opt(batch, &self.store.write_options)
            .map_err(db_error("write"))
    }
}
