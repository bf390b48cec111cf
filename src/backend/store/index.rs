//! The Store's search indexes, kept across restarts in the `index` column
//! family (docs/search-index.md § Persistence).
//!
//! Layout: `namespace id (4)` ++ `piece number (u32, big-endian)` → a piece
//! of at most [`PIECE_BYTES`] of the namespace's persisted index
//! (`search::index::persist`). No path reaches this column family, and it
//! is never in the user's tree.
//!
//! Invariants: a save is one `WriteBatch` that deletes the namespace's old
//! pieces and writes the new ones, so after a crash the old copy or the new
//! one is there, whole; it lands after the writes the index describes (one
//! write-ahead log), so an index never survives a write it saw. A load reads
//! the pieces from one iterator (one view) and answers them only when they
//! are numbered 0, 1, 2, ... without a gap; the checksum inside the bytes
//! catches the rest.

use super::keys::{self, NsId};
use super::{CF_INDEX, StoreEngine, bounded, db_error};
use crate::error::Result;
use crate::search::index::persist::Keeper;
use rocksdb::WriteBatch;

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

    /// Stages the removal of every piece of `ns`'s index.
    fn drop_index(&self, batch: &mut WriteBatch, ns: NsId) -> Result<()> {
        let cf = self.cf(CF_INDEX)?;
        batch.delete_range_cf(cf, ns.to_be_bytes(), (ns + 1).to_be_bytes());
        Ok(())
    }
}

impl Keeper for StoreEngine {
    fn load(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let Some(ns) = self.namespace_named(key) else {
            return Ok(None);
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
                return Ok(None);
            }
            bytes.extend_from_slice(v);
            expected += 1;
            it.next();
        }
        it.status().map_err(db_error("read the search index"))?;
        Ok((expected > 0).then_some(bytes))
    }

    fn save(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let Some(ns) = self.namespace_named(key) else {
            return Ok(());
        };
        let mut batch = WriteBatch::default();
        self.drop_index(&mut batch, ns)?;
        let cf = self.cf(CF_INDEX)?;
        for (n, chunk) in bytes.chunks(PIECE_BYTES).enumerate() {
            batch.put_cf(cf, piece(ns, n as u32), chunk);
        }
        self.db
            .write_opt(batch, &self.write_options)
            .map_err(db_error("save the search index"))
    }

    fn forget(&self, key: &str) -> Result<()> {
        let Some(ns) = self.namespace_named(key) else {
            return Ok(());
        };
        let mut batch = WriteBatch::default();
        self.drop_index(&mut batch, ns)?;
        self.db
            .write_opt(batch, &self.write_options)
            .map_err(db_error("drop the search index"))
    }
}
