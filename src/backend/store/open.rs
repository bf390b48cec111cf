//! Opening a Store, and its namespace table.
//!
//! Invariants:
//! - one server per directory: a second one fails at open on RocksDB's
//!   `LOCK` file, naming the directory;
//! - versions only grow across restarts: the generation counter, the change
//!   log's head and its trim point are read back at open, each the `max` of
//!   every value merged into it ([`merge_max`]), so batches that landed out
//!   of order never lower them; the change log's epoch is drawn once, when
//!   the store is created;
//! - nothing an upload cut short by a crash stored survives the next open
//!   (`upload`);
//! - a namespace's id is assigned once, at its first write, and never
//!   reused or changed (`ns:` keys, mirrored in memory); ids stay below
//!   `u32::MAX`, so `id + 1` ends a namespace's key range (`keys`).

use super::keys::{self, NsId};
use super::locks::PathLocks;
use super::{
    CF_CHUNKS, CF_INDEX, CF_LOG, CF_META, CF_VERSIONS, GENERATION_KEY, LOG_EPOCH_KEY, LOG_HEAD_KEY,
    LOG_TRIMMED_KEY, LogState, NAMESPACE_PREFIX, StoreBackend, StoreEngine, StoreOptions, db_error,
    decode_u64,
};
use crate::backend::ordered::{Counters, OrderedTier};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use rocksdb::{
    BlockBasedIndexType, BlockBasedOptions, Cache, ColumnFamilyDescriptor, DB, DBCompressionType,
    MergeOperands, Options, SliceTransform, WriteOptions,
};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

/// Block cache shared by the column families: 64 MiB holds the index,
/// filters and hot blocks of a few million small files.
const BLOCK_CACHE_BYTES: usize = 64 << 20;

/// Size of one partition of a table's index and filter: RocksDB's default
/// (4 KiB), small enough that any shard of the cache holds many.
const METADATA_BLOCK_BYTES: usize = 4 << 10;

/// The write-ahead log that may pile up before RocksDB flushes the column
/// families still holding its oldest part. Opening replays the whole live
/// log, so this bounds the replay after a crash. RocksDB's default is four
/// times the memtables of all column families (3 GiB here): the small
/// column families (namespace table, change log counters) are rarely full,
/// so they kept the whole log of a large load alive and a restart replayed
/// it all (4.5 s after loading the 947 MB kernel; docs/performance.md
/// § Cold start). 128 MiB replays in a fraction of a second and costs a
/// load an extra flush of the small families per 128 MiB written.
const MAX_WAL_BYTES: u64 = 128 << 20;

/// The `max` merge operator of the counters in the default column family
/// (the generation, the change log's head and trim point).
fn merge_max(_key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    let max = existing
        .into_iter()
        .chain(operands)
        .filter_map(decode_u64)
        .max()
        .unwrap_or(0);
    Some(max.to_be_bytes().to_vec())
}

impl OrderedTier<StoreEngine> {
    /// Opens (creating if needed) the store in `dir`, answering for paths
    /// below `mount`. Fails with a clear message when another server holds
    /// the directory.
    pub fn open(mount: VfsPath, dir: &Path, options: StoreOptions) -> Result<StoreBackend> {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::Internal(format!(
                "cannot create data directory {}: {e}",
                dir.display()
            ))
        })?;
        let cache = Cache::new_lru_cache(BLOCK_CACHE_BYTES);
        let table = |prefix_len: usize| {
            let mut block = BlockBasedOptions::default();
            block.set_block_cache(&cache);
            block.set_bloom_filter(10.0, false);
            block.set_cache_index_and_filter_blocks(true);
            // Index and filter blocks cut into partitions of a few KiB,
            // with only each table's top level pinned: a whole index block
            // of a 64 MB table of small files is over 1 MiB decompressed,
            // more than one shard of the cache holds, so every point
            // lookup read it again and decompressed it (half of a broad
            // Grep's CPU on the Store; docs/performance.md § The Store's
            // index blocks). A lookup now reads one partition.
            block.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
            block.set_partition_filters(true);
            block.set_metadata_block_size(METADATA_BLOCK_BYTES);
            block.set_pin_top_level_index_and_filter(true);
            let mut cf = Options::default();
            cf.set_block_based_table_factory(&block);
            cf.set_compression_type(DBCompressionType::Lz4);
            cf.set_prefix_extractor(SliceTransform::create_fixed_prefix(prefix_len));
            cf.set_memtable_prefix_bloom_ratio(0.1);
            cf
        };
        // The log replayed at open stays in the memtables (and the log),
        // flushed later in the background, instead of being written to new
        // tables before the server can serve (docs/performance.md § Cold
        // start). The crate has no setter for this option.
        let mut db_options = Options::default()
            .get_options_from_string("avoid_flush_during_recovery=true")
            .map_err(|e| Error::Internal(format!("cannot set the store's options: {e}")))?;
        db_options.create_if_missing(true);
        db_options.create_missing_column_families(true);
        db_options.increase_parallelism(2);
        db_options.set_max_total_wal_size(MAX_WAL_BYTES);
        // The search indexes' column family is not compressed: its values
        // are read whole at a cold start, where decompressing them was a
        // tenth of the time to the first Grep, and rewritten by every save
        // and compaction, for a quarter less disk (the kernel's copy: 167
        // MB, 120 MB with LZ4; docs/performance.md § Cold start).
        let mut index_table = table(keys::NS_BYTES);
        index_table.set_compression_type(DBCompressionType::None);
        // Large files' chunks are not compressed either: a Grep reads its
        // large candidates' chunks past the block cache, so LZ4 decompressed
        // them on every Grep (28% of a selective regex's CPU). Measured in
        // pairs on the kernel: selective regexes 20-30% faster, the store
        // 31% larger on disk (docs/performance.md § Large files' chunks
        // uncompressed). Tables written before keep their LZ4 blocks until
        // compaction rewrites them.
        let mut chunks_table = table(keys::BLOB_BYTES);
        chunks_table.set_compression_type(DBCompressionType::None);
        let mut default_cf = Options::default();
        default_cf.set_merge_operator_associative("agentvfs.max", merge_max);
        let cfs = vec![
            ColumnFamilyDescriptor::new(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, default_cf),
            ColumnFamilyDescriptor::new(CF_META, table(keys::NS_BYTES)),
            ColumnFamilyDescriptor::new(CF_CHUNKS, chunks_table),
            ColumnFamilyDescriptor::new(CF_VERSIONS, table(keys::NS_BYTES)),
            ColumnFamilyDescriptor::new(CF_LOG, table(keys::NS_BYTES)),
            ColumnFamilyDescriptor::new(CF_INDEX, index_table),
        ];
        let db = DB::open_cf_descriptors(&db_options, dir, cfs).map_err(|e| {
            if e.to_string().contains("lock file") {
                Error::Internal(format!(
                    "data directory {} is in use by another agentvfs server ({e})",
                    dir.display()
                ))
            } else {
                Error::Internal(format!("cannot open the store in {}: {e}", dir.display()))
            }
        })?;
        let counter = |key: &[u8]| -> Result<u64> {
            Ok(db
                .get(key)
                .map_err(db_error("read a counter"))?
                .as_deref()
                .and_then(decode_u64)
                .unwrap_or(0))
        };
        let generation = counter(GENERATION_KEY)?;
        let log = LogState {
            head: counter(LOG_HEAD_KEY)?,
            trimmed: counter(LOG_TRIMMED_KEY)?,
        };
        let log_epoch = match counter(LOG_EPOCH_KEY)? {
            0 => {
                let epoch = rand::random::<u64>().max(1);
                db.put(LOG_EPOCH_KEY, epoch.to_be_bytes())
                    .map_err(db_error("start the change log"))?;
                epoch
            }
            epoch => epoch,
        };
        let mut namespaces = HashMap::new();
        for item in db.prefix_iterator(NAMESPACE_PREFIX) {
            let (key, value) = item.map_err(db_error("read the namespace table"))?;
            let Some(name) = key.strip_prefix(NAMESPACE_PREFIX) else {
                break;
            };
            let id = value
                .as_ref()
                .try_into()
                .map(u32::from_be_bytes)
                .map_err(|_| Error::Internal("corrupt namespace table".into()))?;
            namespaces.insert(String::from_utf8_lossy(name).into_owned(), id);
        }
        tracing::info!(dir = %dir.display(), mount = %mount, namespaces = namespaces.len(),
            generation, sync = options.sync, "opened store");
        let mut write_options = WriteOptions::default();
        write_options.set_sync(options.sync);
        let store = StoreEngine {
            db: Arc::new(db),
            options,
            write_options,
            locks: PathLocks::default(),
            namespaces: RwLock::new(namespaces),
            new_namespace: Mutex::new(()),
            counters: Counters::after(generation),
            log_epoch,
            log: Mutex::new(log),
        };
        store.abandon_unfinished_uploads()?;
        Ok(OrderedTier::mounted(mount, store))
    }
}

impl StoreEngine {
    /// The id of the caller's namespace; `None` when it has never been
    /// written to.
    pub(super) fn namespace(&self, scope: &Scope) -> Result<Option<NsId>> {
        let name = scope.namespace.as_str();
        Scope::check_stored_name("namespace", name)?;
        Ok(self
            .namespaces
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .copied())
    }

    /// The id of the caller's namespace, created at its first write.
    pub(super) fn create_namespace(&self, scope: &Scope) -> Result<NsId> {
        if let Some(id) = self.namespace(scope)? {
            return Ok(id);
        }
        let name = scope.namespace.as_str();
        // A poisoned lock guards `()`: nothing can be half-done.
        let _creating = self.new_namespace.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(id) = self.namespace(scope)? {
            return Ok(id);
        }
        let mut map = self.namespaces.write().unwrap_or_else(|p| p.into_inner());
        let id = map.values().max().map_or(1, |m| m + 1);
        if id == NsId::MAX {
            return Err(Error::TooLarge(
                "the store has no room for another namespace".into(),
            ));
        }
        let mut key = NAMESPACE_PREFIX.to_vec();
        key.extend_from_slice(name.as_bytes());
        self.db
            .put_opt(key, id.to_be_bytes(), &self.write_options)
            .map_err(db_error("create a namespace"))?;
        map.insert(name.to_owned(), id);
        tracing::info!(namespace = name, id, "created store namespace");
        Ok(id)
    }
}
