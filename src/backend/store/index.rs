//! The Store's search indexes, kept across restarts in the `index` column
//! family (docs/search-index.md § Persistence).
//!
//! Layout: `namespace id (4)` ++ `piece number (u32, big-endian)` → a piece
//! of at most [`PIECE_BYTES`] of the namespace's persisted index
//! (`search::index::persist`). No path reaches this column family, and it
//! is never in the user's tree.
//!
//! Invariants:
//! - a save is one `WriteBatch` that deletes the namespace's old pieces and
//!   writes the new ones, then a flush of the column family, so after a
//!   crash the old copy or the new one is there, whole;
//! - it bypasses the write-ahead log (a restart would otherwise replay every
//!   copy ever saved since the last flush, tens of times the index), and
//!   syncs the log first: every write the index saw is durable before the
//!   index is, also across a power loss with `sync = false`, so versions
//!   the index names are never handed out again (`open`);
//! - a load reads the pieces from one iterator (one view) and answers them
//!   only when they are numbered 0, 1, 2, ... without a gap; the checksum
//!   inside the bytes catches the rest.

use super::keys::{self, NsId};
use super::{CF_INDEX, StoreEngine, bounded, db_error};
use crate::error::Result;
use crate::search::index::persist::{Keeper, Kept};
use rocksdb::{WriteBatch, WriteOptions};

/// Largest piece of a persisted index in one RocksDB value.
const PIECE_BYTES: usize = 4 << 20;

/// The key of piece `n` of namespace `ns`'s index.
fn piece(ns: NsId, n: u32) -> [u8; keys::NS_BYTES + 4] {
    let mut key = [0; keys::NS_BYTES + 4];
    key[..keys::NS_BYTES].copy_from_slice(&ns.to_be_bytes());
    key[keys::NS_BYTES..].copy_from_slice(&n.to_be_bytes());
    key
}

impl StoreEngine {
    /// The id of the namespace named `name`, if it was ever written.
    fn namespace_named(&self, name: &str) -> Option<NsId> {
        self.namespaces
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .copied()
    }

    /// Replaces `ns`'s index by `bytes` (none: drops it), durably and
    /// atomically (see the module doc).
    fn put_index(&self, ns: NsId, bytes: Option<&[u8]>) -> Result<()> {
        let cf = self.cf(CF_INDEX)?;
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(cf, ns.to_be_bytes(), (ns + 1).to_be_bytes());
        for (n, chunk) in bytes.unwrap_or_default().chunks(PIECE_BYTES).enumerate() {
            batch.put_cf(cf, piece(ns, n as u32), chunk);
        }
        self.db
            .flush_wal(true)
            .map_err(db_error("sync the log before the search index"))?;
        let mut no_log = WriteOptions::default();
        no_log.disable_wal(true);
        self.db
            .write_opt(batch, &no_log)
            .map_err(db_error("save the search index"))?;
        self.db
            .flush_cf(cf)
            .map_err(db_error("flush the search index"))
    }
}

impl Keeper for StoreEngine {
    fn load(&self, key: &str, limit: u64) -> Result<Kept> {
        let Some(ns) = self.namespace_named(key) else {
            return Ok(Kept::Nothing);
        };
        let opts = bounded(ns.to_be_bytes().to_vec(), (ns + 1).to_be_bytes().to_vec());
        let mut it = self.db.raw_iterator_cf_opt(self.cf(CF_INDEX)?, opts);
        it.seek_to_first();
        let mut bytes = Vec::new();
        let mut expected = 0u32;
        while let Some((k, v)) = it.item() {
            if k != piece(ns, expected) {
                tracing::warn!(
                    namespace = key,
                    "persisted search index has a missing piece"
                );
                return Ok(Kept::Nothing);
            }
            let length = (bytes.len() + v.len()) as u64;
            if length > limit {
                return Ok(Kept::Over(length));
            }
            bytes.extend_from_slice(v);
            expected += 1;
            it.next();
        }
        it.status().map_err(db_error("read the search index"))?;
        Ok(match expected {
            0 => Kept::Nothing,
            _ => Kept::Bytes(bytes),
        })
    }

    fn save(&self, key: &str, bytes: &[u8]) -> Result<()> {
        match self.namespace_named(key) {
            Some(ns) => self.put_index(ns, Some(bytes)),
            None => Ok(()),
        }
    }

    fn forget(&self, key: &str) -> Result<()> {
        match self.namespace_named(key) {
            Some(ns) => self.put_index(ns, None),
            None => Ok(()),
        }
    }
}
