//! Streamed writes (WriteBytes, Restore) on the Store tier: content stored
//! a chunk at a time as it arrives, before the commit that makes it a file.
//!
//! Invariants:
//! - a large upload is never whole in memory: at most two chunks are held
//!   while it is stored;
//! - its chunks go under a fresh blob id (drawn from the generation counter,
//!   so no other content ever had it), recorded by an `up:` marker before
//!   the first chunk; the file becomes visible only with the batch that
//!   writes its metadata and deletes the marker (`write`): a crash
//!   mid-upload leaves no file, and the next open removes what the marker
//!   names;
//! - an upload that does not commit (a failed precondition, a size over the
//!   limit, a client gone) is removed with its marker at once.

use super::keys;
use super::{
    CF_CHUNKS, GENERATION_KEY, StoreEngine, UPLOAD_PREFIX, Uploaded, db_error, decode_u64,
};
use crate::backend::ChunkSource;
use crate::backend::ordered::Streamed;
use crate::backend::record::{CHUNK_BYTES, INLINE_MAX_BYTES};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use rocksdb::WriteBatch;

/// The marker key of the upload of `blob`.
pub(super) fn upload_marker(blob: u64) -> Vec<u8> {
    [UPLOAD_PREFIX, &blob.to_be_bytes()[..]].concat()
}

impl StoreEngine {
    /// Takes in a streamed write's pieces for `path`: gathered when the file
    /// is small enough to live inline, else stored as chunks as they arrive.
    pub(super) fn take_in(
        &self,
        path: &VfsPath,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<Streamed<Uploaded>> {
        // Gather up to the inline limit: a small file is an ordinary write.
        let mut head = Vec::new();
        while head.len() <= INLINE_MAX_BYTES {
            match pieces.next() {
                None => return Ok(Streamed::Whole(head)),
                Some(piece) => head.extend_from_slice(&piece?),
            }
        }
        let blob = self.begin_upload()?;
        match self.store_chunks(path, blob, head, pieces) {
            Ok(size) => Ok(Streamed::Stored(Uploaded { blob, size })),
            Err(err) => {
                self.abandon_upload(blob)?;
                Err(err)
            }
        }
    }

    /// Starts an upload: draws its blob id and records it, so the chunks of
    /// an upload cut short by a crash are found and removed at the next open.
    fn begin_upload(&self) -> Result<u64> {
        let blob = self.counters.next_version();
        let mut batch = WriteBatch::default();
        batch.put(upload_marker(blob), []);
        batch.merge(GENERATION_KEY, blob.to_be_bytes());
        self.db
            .write_opt(batch, &self.write_options)
            .map_err(db_error("start an upload"))?;
        Ok(blob)
    }

    /// Stores `head` and then every piece as full chunks of `blob` as they
    /// fill up; returns the size. Never holds more than two chunks.
    fn store_chunks(
        &self,
        path: &VfsPath,
        blob: u64,
        mut buf: Vec<u8>,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<usize> {
        let chunks = self.cf(CF_CHUNKS)?;
        let mut size = buf.len();
        let mut index = 0u32;
        let store = |data: &[u8], index: u32| {
            tracing::debug!(path = %path, blob, chunk = index, "stored upload chunk");
            self.db
                .put_cf_opt(chunks, keys::chunk(blob, index), data, &self.write_options)
                .map_err(db_error("store an upload chunk"))
        };
        loop {
            while buf.len() >= CHUNK_BYTES {
                store(&buf[..CHUNK_BYTES], index)?;
                buf.drain(..CHUNK_BYTES);
                index += 1;
            }
            match pieces.next() {
                None => break,
                Some(piece) => {
                    let piece = piece?;
                    size += piece.len();
                    Error::check_file_size(path, size as u64, self.options.max_file_bytes)?;
                    buf.extend_from_slice(&piece);
                }
            }
        }
        if !buf.is_empty() {
            store(&buf, index)?;
        }
        Ok(size)
    }

    /// Removes the chunks and the marker of an upload that did not commit.
    pub(super) fn abandon_upload(&self, blob: u64) -> Result<()> {
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(
            self.cf(CF_CHUNKS)?,
            keys::chunk(blob, 0),
            keys::chunk(blob + 1, 0),
        );
        batch.delete(upload_marker(blob));
        self.db
            .write_opt(batch, &self.write_options)
            .map_err(db_error("remove an unfinished upload"))
    }

    /// Removes what uploads cut short by a crash left behind (at open).
    pub(super) fn abandon_unfinished_uploads(&self) -> Result<()> {
        let mut blobs = Vec::new();
        for item in self.db.prefix_iterator(UPLOAD_PREFIX) {
            let (key, _) = item.map_err(db_error("read upload markers"))?;
            let Some(blob) = key.strip_prefix(UPLOAD_PREFIX).and_then(decode_u64) else {
                break;
            };
            blobs.push(blob);
        }
        for &blob in &blobs {
            self.abandon_upload(blob)?;
        }
        if !blobs.is_empty() {
            tracing::info!(count = blobs.len(), "removed unfinished uploads");
        }
        Ok(())
    }
}
