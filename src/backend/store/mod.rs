//! The Store tier: persistent, namespaced files on RocksDB.
//!
//! Where it sits: the mount table routes calls for paths below the store's
//! mount (`/memories` by default) here, on a blocking thread. The file
//! semantics (lookup, listing, writes, Edit, Delete, Move, search) are the
//! ordered tiers' (`ordered`); this module is the engine under them, turning
//! them into RocksDB point lookups, bounded range scans and atomic
//! `WriteBatch`es.
//!
//! Layout (see `keys`, `record` and `log`): the `meta` column family maps
//! `namespace id ++ relative order key` to a file's metadata (and its content
//! when it is small); the `chunks` column family holds large files in 1 MiB
//! chunks keyed by blob id; the `versions` column family holds past versions
//! and tombstones (history), each the value it had as the current record;
//! the `log` column family holds each namespace's change log; the `index`
//! column family holds each namespace's persisted search index; the `default`
//! column family holds the namespace name → id table, the generation
//! counter, the change log's epoch, head and trim point, and the markers of
//! uploads in progress. Directories are implied by file keys (`ordered`).
//!
//! Invariants:
//! - two namespaces never see each other's files: every key starts with the
//!   namespace id and every scan is bounded to one namespace (`space`);
//! - listing, Glob and Grep are range scans bounded to the namespace (the
//!   iterator's bounds and the `meta` column family's per-namespace prefix
//!   extractor), as `ordered` describes;
//! - every change is one `WriteBatch` (atomic) applied under the path's
//!   stripe lock (`locks`), after checking preconditions under the same lock:
//!   no lost update, and `if_version`/`create_only` are checked against what
//!   is replaced. A Move is one batch under the locks of both paths: it
//!   rewrites the moved files' `meta` keys (new versions, times kept), while
//!   chunks stay where they are, keyed by blob id (`write`);
//! - versions only grow, across deletes, re-creates and restarts: one
//!   generation counter per store, persisted in the same batch as the write
//!   through a `max` merge operator (so concurrent batches landing out of
//!   order never lower it; `open`, `write`);
//! - a streamed upload (WriteBytes) stores its chunks as they arrive under a
//!   fresh blob id, recorded by an `up:` marker, and becomes visible only
//!   with the batch that writes its metadata: a crash mid-upload leaves no
//!   file, and the next open removes the orphaned chunks (`upload`);
//! - the change log: changes are numbered across namespaces, in commit
//!   order, under one mutex held while their batch is written, and each
//!   record is in the batch of its change: an acknowledged write always has
//!   its record, a record never exists without its write, across `kill -9`.
//!   Records older than the last `changes` of the store ([`Keep`]) are
//!   dropped in the batch that passes the bound by an eighth; a log read
//!   takes its records and bounds from one snapshot (`log`);
//! - a past version keeps its chunks (their blob id is its own) until the
//!   retention drops it; a restore copies the version into a new blob
//!   (`history`);
//! - durability: the write-ahead log is always on, so an acknowledged write
//!   survives a crash of the process (`kill -9`); `sync = true` also fsyncs
//!   the log before acknowledging, for power loss. A second server on the
//!   same directory fails at open on RocksDB's `LOCK` file.
//!
//! Files by protocol: `open` (opening a store, the namespace table),
//! `space` (one namespace's files: lookups, scans, a search's snapshot),
//! `index` (the persisted search indexes),
//! `write` (how a change is staged into one batch and applied), `upload`
//! (WriteBytes' chunks before their commit), `read` (whole and streamed
//! content), `history` (past versions and tombstones), `log` (the change
//! log), `keys` (the key layout), `locks` (the stripe locks of changes).
//!
//! Errors: the file semantics' own as `ordered` decides them; `TooLarge`
//! over `max_file_bytes`; RocksDB failures are `Internal` (logged by the
//! error mapping).
//!
//! Performance decisions: small files (≤ 64 KiB) live inside their metadata
//! value, so a small read is one lookup and Grep reads content straight from
//! the iterator it walks; metadata checks and reads use pinned values, never
//! a copy of the whole value; the search iterator steps with `next` instead
//! of a fresh seek when the walk asks for the key right after the previous
//! one (see `ordered::walk`); big scans run with `fill_cache(false)` so one
//! Grep does not evict the hot set. Measured (`cargo bench --bench store`, 2
//! cores, docs/performance.md has the table): ListInfo of 10 entries takes
//! 8.5 µs in-process among 100 files and 10.4 µs among 1,000,000; Grep over 100,000 stored files (112 MB) through
//! gRPC takes 288 ms against ripgrep's 318 ms over the same files on disk;
//! in-process 1 KiB writes and reads cost 1–1.5× bare RocksDB.

mod history;
mod index;
mod keys;
mod locks;
mod log;
mod open;
mod read;
mod space;
mod upload;
mod write;

use super::ordered::{Counters, Engine, LogRead, Logged, OrderedTier, Streamed};
use super::{ChunkSource, Keep};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::index::persist::Keeper;
use keys::NsId;
use locks::PathLocks;
use rocksdb::{
    ColumnFamily, DB, DBRawIteratorWithThreadMode, ReadOptions, SnapshotWithThreadMode, WriteBatch,
    WriteOptions,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

/// Column family of file metadata (and inline content).
const CF_META: &str = "meta";
/// Column family of large files' chunks.
const CF_CHUNKS: &str = "chunks";
/// Column family of past versions and tombstones.
const CF_VERSIONS: &str = "versions";
/// Column family of the change log.
const CF_LOG: &str = "log";
/// Column family of the persisted search indexes (`index`).
const CF_INDEX: &str = "index";
/// Key (default column family) of the generation counter.
const GENERATION_KEY: &[u8] = b"generation";
/// Key (default column family) of the change log's epoch, drawn at random
/// when the store is created.
const LOG_EPOCH_KEY: &[u8] = b"log:epoch";
/// Key (default column family) of the last change numbered (a `max` merge).
const LOG_HEAD_KEY: &[u8] = b"log:head";
/// Key (default column family) of the last change dropped (a `max` merge).
const LOG_TRIMMED_KEY: &[u8] = b"log:trimmed";
/// Key prefix (default column family) of the namespace table: `ns:` ++ name
/// → id (u32, big-endian).
const NAMESPACE_PREFIX: &[u8] = b"ns:";
/// Key prefix (default column family) of the uploads in progress: `up:` ++
/// blob id. Written before an upload's first chunk, deleted with its commit.
const UPLOAD_PREFIX: &[u8] = b"up:";

/// Settings of a Store tier.
#[derive(Clone, Copy, Debug)]
pub struct StoreOptions {
    /// fsync the write-ahead log before acknowledging each write (power-loss
    /// durability, 1–10 ms per write); without it a write survives a crash of
    /// the process but not of the machine.
    pub sync: bool,
    /// Largest file accepted; larger writes fail with `TooLarge`.
    pub max_file_bytes: u64,
    /// History and change log.
    pub keep: Keep,
}

/// Where the change log stands, changed only under its mutex.
struct LogState {
    /// The last change numbered.
    head: u64,
    /// The last change dropped.
    trimmed: u64,
}

/// The RocksDB-backed, per-namespace tier.
pub type StoreBackend = OrderedTier<StoreEngine>;

/// The Store tier's storage: one RocksDB database, namespaces as key ranges.
pub struct StoreEngine {
    /// Shared with streaming readers, which outlive the call that opened them.
    db: Arc<DB>,
    options: StoreOptions,
    write_options: WriteOptions,
    locks: PathLocks,
    /// Namespace name → id; grows only, mirrored from the `ns:` keys.
    namespaces: RwLock<HashMap<String, NsId>>,
    /// Serializes the creation of namespaces (rare).
    new_namespace: Mutex<()>,
    /// The last version handed out (persisted through [`GENERATION_KEY`]),
    /// and the signal bumped after every batch that logged changes.
    counters: Counters,
    /// The change log's epoch (constant for the store's life).
    log_epoch: u64,
    /// Numbers changes: held while a batch with changes is written.
    log: Mutex<LogState>,
}

/// One namespace's files: live (reads, and changes under the path locks the
/// engine took), or a search's snapshot (`space`).
pub struct StoreSpace<'a> {
    store: &'a StoreEngine,
    ns: NsId,
    snapshot: Option<&'a SnapshotWithThreadMode<'a, DB>>,
    meta: &'a ColumnFamily,
    chunks: &'a ColumnFamily,
    versions: &'a ColumnFamily,
    /// In a change: the key and value the last
    /// [`Files::get`](super::ordered::Files::get) read, so
    /// retiring that record copies it without reading it again (a change
    /// reads the record it replaces first, under the path's lock, so the
    /// value is the current one).
    last_read: Option<Mutex<Option<KeyValue>>>,
}

/// A key and the value read at it.
type KeyValue = (Vec<u8>, Vec<u8>);

/// A bounded scan of one namespace's `meta` keys (`space`).
pub struct StoreCursor<'a> {
    it: DBRawIteratorWithThreadMode<'a, DB>,
    ns: NsId,
}

/// A change of one namespace: one `WriteBatch` (`write`).
#[derive(Default)]
pub struct StoreBatch {
    batch: WriteBatch,
    /// The largest version the change hands out (0: none), persisted with it.
    version: u64,
    /// Its change-log records, numbered as it is written.
    logged: Vec<Logged>,
}

/// Chunks a streamed write (WriteBytes) stored before its commit (`upload`).
pub struct Uploaded {
    /// The upload's blob id.
    blob: u64,
    /// Bytes uploaded.
    size: usize,
}

fn decode_u64(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

fn db_error(what: &str) -> impl Fn(rocksdb::Error) -> Error + '_ {
    move |e| Error::Internal(format!("Store: {what}: {e}"))
}

/// The column family `name` of `db`.
fn column<'d>(db: &'d DB, name: &str) -> Result<&'d ColumnFamily> {
    db.cf_handle(name)
        .ok_or_else(|| Error::Internal(format!("Store: column family {name} missing")))
}

impl StoreEngine {
    fn cf(&self, name: &str) -> Result<&ColumnFamily> {
        column(&self.db, name)
    }
}

/// Read options bounded to `[lo, hi)`.
fn bounded(lo: Vec<u8>, hi: Vec<u8>) -> ReadOptions {
    let mut opts = ReadOptions::default();
    opts.set_iterate_lower_bound(lo);
    opts.set_iterate_upper_bound(hi);
    opts
}

/// A `meta` key shown as its relative path, formatted only when an error
/// message needs it (scans decode every key).
struct KeyName<'a>(&'a [u8]);

impl std::fmt::Display for KeyName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::path::from_order_key(keys::rel_of(self.0)))
    }
}

impl Engine for StoreEngine {
    const TIER: &'static str = "store";
    type Space<'a> = StoreSpace<'a>;
    type Frozen<'a> = StoreSpace<'a>;
    type Upload = Uploaded;
    type Scoped = NsId;

    fn root_time(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH
    }

    fn max_file_bytes(&self) -> u64 {
        self.options.max_file_bytes
    }

    fn keep(&self) -> Keep {
        self.options.keep
    }

    fn read_log(&self, scope: &Scope, after: Option<u64>, max: usize) -> Result<LogRead> {
        self.read_changes(scope, after, max)
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn index_key(&self, scope: &Scope) -> String {
        scope.namespace.clone()
    }

    fn index_keeper(self: Arc<Self>) -> Option<Arc<dyn Keeper>> {
        Some(self)
    }

    fn find(&self, scope: &Scope) -> Result<Option<NsId>> {
        self.namespace(scope)
    }

    fn find_or_create(&self, scope: &Scope) -> Result<NsId> {
        self.create_namespace(scope)
    }

    fn enter<R>(
        &self,
        ns: &NsId,
        changing: Option<&[&[u8]]>,
        f: impl FnOnce(&mut StoreSpace<'_>) -> Result<R>,
    ) -> Result<R> {
        let _held = changing.map(|rels| self.locks.lock(*ns, rels));
        f(&mut self.space(*ns, None, changing.is_some())?)
    }

    fn freeze<R>(
        &self,
        scope: &Scope,
        _top: &[u8],
        f: impl FnOnce(Option<&StoreSpace<'_>>) -> Result<R>,
    ) -> Result<R> {
        let Some(ns) = self.namespace(scope)? else {
            return f(None);
        };
        let snapshot = self.db.snapshot();
        f(Some(&self.space(ns, Some(&snapshot), false)?))
    }

    fn upload(&self, path: &VfsPath, pieces: &mut ChunkSource<'_>) -> Result<Streamed<Uploaded>> {
        self.take_in(path, pieces)
    }

    fn abandon(&self, upload: &Uploaded) -> Result<()> {
        self.abandon_upload(upload.blob)
    }
}
