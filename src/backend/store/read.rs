//! Reads of file content on the Store tier: whole, or streamed a chunk at a
//! time.
//!
//! Invariants:
//! - a small file (at most `INLINE_MAX_BYTES`) lives inside its metadata
//!   value: reading it is one lookup, and a search reads it straight from
//!   the iterator it walks;
//! - a large file read whole is read from one snapshot, its metadata and
//!   every chunk, so a concurrent rewrite cannot mix two versions; it is in
//!   memory once, assembled straight into one buffer;
//! - a large file streamed (ReadBytes) is fetched one chunk at a time, never
//!   whole in memory; a chunk that vanished under the stream means the file
//!   was replaced (`VERSION_MISMATCH`, naming the version now there) or, for
//!   a past version, dropped by the retention (`VERSION_NOT_FOUND`), never a
//!   mix of two versions.

use super::keys::{self, NsId};
use super::{CF_CHUNKS, CF_META, StoreEngine, StoreSpace, column, db_error};
use crate::backend::record::{self, Meta};
use crate::backend::{ChunkReader, split_chunks};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use rocksdb::{DB, DBPinnableSlice, ReadOptions};
use std::sync::Arc;

impl StoreEngine {
    /// The whole content of a chunked file, read through `opts` (a snapshot)
    /// straight into one buffer: the file is in memory once.
    pub(super) fn assemble(
        &self,
        opts: &ReadOptions,
        path: &VfsPath,
        meta: &Meta,
    ) -> Result<Vec<u8>> {
        // Sizes are bounded by max_file_bytes, which the process can hold.
        let mut data = Vec::with_capacity(meta.size as usize);
        for i in 0..meta.chunks() {
            data.extend_from_slice(&self.chunk(opts, path, meta, i)?);
        }
        Ok(data)
    }

    /// Chunk `i` of the large file `meta` (`path`), pinned, not copied.
    pub(super) fn chunk(
        &self,
        opts: &ReadOptions,
        path: &VfsPath,
        meta: &Meta,
        i: u32,
    ) -> Result<DBPinnableSlice<'_>> {
        self.db
            .get_pinned_cf_opt(self.cf(CF_CHUNKS)?, keys::chunk(meta.blob, i), opts)
            .map_err(db_error("read a chunk"))?
            .ok_or_else(|| Error::Internal(format!("Store: chunk {i} of {path} is missing")))
    }
}

impl StoreSpace<'_> {
    /// The metadata and whole content of the large file at `key` (`path`),
    /// read again from one snapshot so a concurrent rewrite cannot mix two
    /// versions.
    pub(super) fn read_large(&self, path: &VfsPath, key: &[u8]) -> Result<(Meta, Vec<u8>)> {
        let snapshot = self.store.db.snapshot();
        let mut opts = ReadOptions::default();
        opts.set_snapshot(&snapshot);
        let meta_now = self
            .store
            .db
            .get_pinned_cf_opt(self.meta, key, &opts)
            .map_err(db_error("read metadata"))?;
        let Some(value) = meta_now else {
            return Err(Error::NotFound(path.to_string()));
        };
        let (meta, inline) = record::decode(path, &value)?;
        let data = if meta.inline {
            inline.to_vec()
        } else {
            self.store.assemble(&opts, path, &meta)?
        };
        Ok((meta, data))
    }

    /// The content of a stored value of `path` in pieces: inline, or its
    /// blob's chunks fetched one at a time.
    pub(super) fn pieces(
        &self,
        path: &VfsPath,
        rel: &[u8],
        value: &[u8],
        past: bool,
        max_chunk: usize,
    ) -> Result<(Meta, ChunkReader)> {
        let (meta, inline) = record::decode(path, value)?;
        if meta.inline {
            return Ok((meta, split_chunks(inline.to_vec(), max_chunk)));
        }
        let reader = StreamedFile {
            db: self.store.db.clone(),
            path: path.clone(),
            ns: self.ns,
            rel: rel.to_vec(),
            meta,
            next: 0,
            past,
        };
        let split = reader.flat_map(move |chunk| match chunk {
            Ok(data) => split_chunks(data, max_chunk),
            Err(err) => Box::new(std::iter::once(Err(err))),
        });
        Ok((meta, Box::new(split)))
    }
}

/// The chunks of one large file version, fetched one at a time as a
/// ReadBytes stream asks for them (never the whole file in memory).
struct StreamedFile {
    db: Arc<DB>,
    path: VfsPath,
    ns: NsId,
    rel: Vec<u8>,
    meta: Meta,
    next: u32,
    /// A past version: its chunks vanish only when the retention drops it.
    past: bool,
}

impl StreamedFile {
    fn fetch(&self, index: u32) -> Result<Vec<u8>> {
        let cf = |name| column(&self.db, name);
        if let Some(data) = self
            .db
            .get_cf(cf(CF_CHUNKS)?, keys::chunk(self.meta.blob, index))
            .map_err(db_error("read a chunk"))?
        {
            return Ok(data);
        }
        if self.past {
            // Dropped from the history while it was being read.
            return Err(Error::VersionNotFound {
                path: self.path.to_string(),
                version: self.meta.version,
            });
        }
        // The chunks of a version vanish only when it is replaced or deleted.
        let actual = match self
            .db
            .get_cf(cf(CF_META)?, keys::meta(self.ns, &self.rel))
            .map_err(db_error("read metadata"))?
        {
            Some(value) => record::decode(&self.path, &value)?.0.version,
            None => 0,
        };
        Err(Error::VersionMismatch {
            path: self.path.to_string(),
            expected: self.meta.version,
            actual,
        }
        .with_context(
            "the file changed while it was being read; read it again",
            [],
        ))
    }
}

impl Iterator for StreamedFile {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Result<Vec<u8>>> {
        if self.next >= self.meta.chunks() {
            return None;
        }
        let chunk = self.fetch(self.next);
        self.next = if chunk.is_ok() {
            self.next + 1
        } else {
            u32::MAX
        };
        Some(chunk)
    }
}
