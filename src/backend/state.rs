//! The State tier: per-session scratch files in memory.
//!
//! Its file semantics (lookup, listing, writes, Edit, Delete, Move, search)
//! are the ordered tiers' (`ordered`); this module is the engine under them.
//! Each session (`x-agentvfs-session`, within the caller's namespace) has its
//! own ordered map from the path's order key relative to the mount to file,
//! so a directory listing or a search is a key range and directories are
//! implied by the files below them. A `std` mutex guards the session table
//! and each session's map: every read and every change (a whole Move
//! included) runs under the session's lock, so a reader sees a change
//! entirely or not at all; no lock is ever held across an `.await` or a long
//! computation — searches work on a snapshot of `Arc`s, so writers are never
//! blocked by a slow search.
//!
//! Sessions idle longer than `idle_ttl` are dropped (checked lazily on access,
//! at most once per [`SWEEP_INTERVAL`]). A session is created by its first
//! write, never by a read, list, stat, search, delete or move (those see an
//! empty session), and at most `max_sessions` exist at once. The memory of all
//! sessions together is bounded by `max_total_bytes`, each file counting its
//! content, its path (held three times: the path, its order key in the map
//! and in the record) and [`FILE_OVERHEAD_BYTES`], so empty files with long
//! paths fill the tier too; a Move re-counts every moved file at its new
//! path. Past versions and tombstones (history) count the same way, and each
//! change-log record its keys and [`LOG_RECORD_OVERHEAD_BYTES`]. Beyond either
//! bound a write is `TooLarge` (RESOURCE_EXHAUSTED).
//!
//! History and the change log live with the session, under its lock: a
//! version a change replaces moves to the session's past versions (its
//! content shared, not copied), and each change's record joins the session's
//! log, numbered in commit order as the batch applies. The log keeps the
//! last `changes` records ([`Keep`]) and starts over, under a new random
//! epoch, when the session is created again.

use super::memory_log::MemoryLog;
use super::ordered::{
    Content, Counters, Cursor, Engine, FileMeta, Files, Frozen, History, HistoryChange, LogRead,
    Logged, OrderedTier, Past, Space, Stored, Streamed, keys,
};
use super::{ChunkReader, ChunkSource, Keep, split_chunks};
use crate::change::Origin;
use crate::error::{Error, Result};
use crate::history::FileVersion;
use crate::path::VfsPath;
use crate::scope::Scope;
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// How often idle sessions are looked for.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// What one file costs beyond its content and path copies: the record, its
/// `Arc`, and its share of the map's nodes (a generous round figure).
pub const FILE_OVERHEAD_BYTES: u64 = 256;

/// What one change-log record costs beyond its keys and names.
pub const LOG_RECORD_OVERHEAD_BYTES: u64 = 128;

/// Bounds of the State tier.
#[derive(Clone, Copy, Debug)]
pub struct StateLimits {
    /// Bytes of all sessions together.
    pub max_total_bytes: u64,
    /// Bytes of one file.
    pub max_file_bytes: u64,
    /// A session unused this long is dropped with its files.
    pub idle_ttl: Duration,
    /// Sessions (of all namespaces) that may exist at once.
    pub max_sessions: usize,
}

/// What a logged change costs against `max_total_bytes`.
fn log_cost(logged: &Logged) -> u64 {
    (logged.rel.len()
        + logged.moved.as_ref().map_or(0, Vec::len)
        + logged.origin.principal.len()
        + logged.origin.handle.len()) as u64
        + LOG_RECORD_OVERHEAD_BYTES
}

/// One file of a session, or one of its past versions. Immutable once
/// stored: a change stores a new record, so snapshots of `Arc`s stay valid
/// and a replaced record becomes a past version as it is.
pub struct FileRecord {
    path: VfsPath,
    /// The path's order key relative to the mount, kept so snapshot seeks
    /// compare slices instead of building a key per comparison.
    key: Vec<u8>,
    data: Arc<[u8]>,
    created: SystemTime,
    modified: SystemTime,
    version: u64,
    /// Who made this version, and how.
    origin: Origin,
    /// A tombstone (only ever among past versions).
    deleted: bool,
}

impl FileRecord {
    /// What this file counts against `max_total_bytes`: the content, the
    /// three copies of its path and [`FILE_OVERHEAD_BYTES`].
    fn cost(&self) -> u64 {
        self.data.len() as u64 + 3 * self.path.as_str().len() as u64 + FILE_OVERHEAD_BYTES
    }

    /// This record as a retained version.
    fn as_version(&self, current: bool) -> FileVersion {
        FileVersion {
            version: self.version,
            size: self.data.len() as u64,
            time: self.modified,
            origin: self.origin.clone(),
            deleted: self.deleted,
            current,
        }
    }
}

impl Stored for Arc<FileRecord> {
    fn meta(&self) -> FileMeta {
        FileMeta {
            version: self.version,
            size: self.data.len() as u64,
            created: self.created,
            modified: self.modified,
        }
    }

    fn path(&self) -> Option<&VfsPath> {
        Some(&self.path)
    }
}

/// A session's files by relative order key.
type FileMap = BTreeMap<Vec<u8>, Arc<FileRecord>>;

/// Everything a session holds, under one lock.
struct SessionData {
    files: FileMap,
    /// Past versions and tombstones by relative key, oldest first.
    past: HashMap<Vec<u8>, Vec<Arc<FileRecord>>>,
    /// The session's change log: a cursor of an earlier session of the
    /// same name is never read against it (a new epoch).
    log: MemoryLog<Logged>,
    /// What all of it counts against `max_total_bytes`.
    bytes: u64,
}

/// One session: its files, history and log, and when it was last used.
pub struct Session {
    data: Mutex<SessionData>,
    last_used: Mutex<Instant>,
}

/// The in-memory, per-session tier.
pub type StateBackend = OrderedTier<StateEngine>;

/// The State tier's storage: sessions of in-memory ordered maps.
pub struct StateEngine {
    /// Shown as the time of the (possibly empty) mount root.
    created: SystemTime,
    limits: StateLimits,
    /// Keyed by (namespace, session): principals of different namespaces
    /// never share scratch files, even under one session name.
    sessions: Mutex<HashMap<(String, String), Arc<Session>>>,
    last_sweep: Mutex<Instant>,
    total_bytes: AtomicU64,
    /// One version counter for every file of every session: versions only
    /// grow, even across delete and re-create, so `if_version` can never be
    /// fooled; and one signal for the logged changes of every session.
    counters: Counters,
    /// History and change log settings.
    keep: Keep,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a map half-changed (a batch
    // is applied only after every check passed, and its steps cannot fail),
    // so a poisoned lock is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl OrderedTier<StateEngine> {
    /// A State tier answering for paths below `mount`, keeping `keep` of
    /// each session's past.
    pub fn new(mount: VfsPath, limits: StateLimits, keep: Keep) -> StateBackend {
        OrderedTier::mounted(
            mount,
            StateEngine {
                created: SystemTime::now(),
                limits,
                sessions: Mutex::new(HashMap::new()),
                last_sweep: Mutex::new(Instant::now()),
                total_bytes: AtomicU64::new(0),
                counters: Counters::after(0),
                keep,
            },
        )
    }

    /// Bytes held by all sessions, as counted against `max_total_bytes`.
    pub fn total_bytes(&self) -> u64 {
        self.engine().total_bytes.load(Ordering::Relaxed)
    }
}

impl StateEngine {
    /// The scope's session when it exists (a read never creates one).
    fn existing(&self, scope: &Scope) -> Option<Arc<Session>> {
        self.sweep_idle();
        let session = lock(&self.sessions)
            .get(&(scope.namespace.clone(), scope.session.clone()))
            .cloned()?;
        *lock(&session.last_used) = Instant::now();
        Some(session)
    }

    /// The scope's session for a write: created when missing, unless
    /// `max_sessions` already exist.
    fn session_for_write(&self, scope: &Scope) -> Result<Arc<Session>> {
        self.sweep_idle();
        let mut sessions = lock(&self.sessions);
        let key = (scope.namespace.clone(), scope.session.clone());
        let session = match sessions.get(&key) {
            Some(session) => session.clone(),
            None if sessions.len() >= self.limits.max_sessions => {
                return Err(Error::TooLarge(format!(
                    "the State tier already holds {} sessions, its limit (max_sessions); write \
                     in an existing session or wait for idle ones to expire",
                    self.limits.max_sessions
                )));
            }
            None => sessions
                .entry(key)
                .or_insert_with(|| {
                    Arc::new(Session {
                        data: Mutex::new(SessionData {
                            files: BTreeMap::new(),
                            past: HashMap::new(),
                            log: MemoryLog::new(),
                            bytes: 0,
                        }),
                        last_used: Mutex::new(Instant::now()),
                    })
                })
                .clone(),
        };
        *lock(&session.last_used) = Instant::now();
        Ok(session)
    }

    /// Drops sessions idle longer than `idle_ttl`, at most once per
    /// [`SWEEP_INTERVAL`].
    fn sweep_idle(&self) {
        {
            let mut last = lock(&self.last_sweep);
            if last.elapsed() < SWEEP_INTERVAL {
                return;
            }
            *last = Instant::now();
        }
        let ttl = self.limits.idle_ttl;
        lock(&self.sessions).retain(|(namespace, name), session| {
            let keep = lock(&session.last_used).elapsed() < ttl;
            if !keep {
                let bytes = lock(&session.data).bytes;
                self.total_bytes.fetch_sub(bytes, Ordering::Relaxed);
                tracing::info!(%namespace, session = %name, bytes, "dropped idle State session");
            }
            keep
        });
    }

    /// Accounts for a change that adds files costing `added` and removes
    /// files costing `freed`; refused when it grows the tier past
    /// `max_total_bytes`.
    fn reserve(&self, added: u64, freed: u64) -> Result<()> {
        let max = self.limits.max_total_bytes;
        self.total_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |total| {
                let next = total + added - freed;
                (next <= max || added <= freed).then_some(next)
            })
            .map(|_| ())
            .map_err(|_| {
                Error::TooLarge(format!(
                    "the State tier is full ({max} bytes); delete scratch files first"
                ))
            })
    }
}

impl Engine for StateEngine {
    const TIER: &'static str = "state";
    type Space<'a> = StateSpace<'a>;
    type Frozen<'a> = Snapshot;
    /// In memory every write is whole: nothing is stored before a commit.
    type Upload = Infallible;
    type Scoped = Arc<Session>;

    fn root_time(&self) -> SystemTime {
        self.created
    }

    fn max_file_bytes(&self) -> u64 {
        self.limits.max_file_bytes
    }

    fn keep(&self) -> Keep {
        self.keep
    }

    fn read_log(&self, scope: &Scope, after: Option<u64>, max: usize) -> Result<LogRead> {
        let Some(session) = self.existing(scope) else {
            return Ok(LogRead::default());
        };
        let data = lock(&session.data);
        Ok(LogRead {
            bounds: data.log.bounds(),
            entries: data.log.read(after, max),
        })
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn find(&self, scope: &Scope) -> Result<Option<Arc<Session>>> {
        Ok(self.existing(scope))
    }

    fn find_or_create(&self, scope: &Scope) -> Result<Arc<Session>> {
        self.session_for_write(scope)
    }

    fn enter<R>(
        &self,
        session: &Arc<Session>,
        _changing: Option<&[&[u8]]>,
        f: impl FnOnce(&mut StateSpace<'_>) -> Result<R>,
    ) -> Result<R> {
        // The session's lock covers every path of the session, for reads
        // and changes alike.
        f(&mut StateSpace {
            engine: self,
            data: &mut lock(&session.data),
        })
    }

    fn freeze<R>(
        &self,
        scope: &Scope,
        top: &[u8],
        f: impl FnOnce(Option<&Snapshot>) -> Result<R>,
    ) -> Result<R> {
        let snapshot = self.view(scope, |space| Ok(space.map(|space| space.snapshot(top))))?;
        f(snapshot.as_ref())
    }

    fn upload(&self, path: &VfsPath, pieces: &mut ChunkSource<'_>) -> Result<Streamed<Infallible>> {
        let mut data = Vec::new();
        for piece in pieces {
            data.extend_from_slice(&piece?);
            Error::check_file_size(path, data.len() as u64, self.limits.max_file_bytes)?;
        }
        Ok(Streamed::Whole(data))
    }

    fn abandon(&self, upload: &Infallible) -> Result<()> {
        match *upload {}
    }
}

/// The key range `[lo, hi)` a State scan covers.
struct Bounds {
    lo: Vec<u8>,
    hi: Option<Vec<u8>>,
}

impl Bounds {
    /// Everything below the directory `rel`.
    fn below(rel: &[u8]) -> Bounds {
        let (lo, hi) = keys::below(rel);
        Bounds { lo, hi }
    }

    /// Where a seek to `rel` starts: never before the range.
    fn start<'k>(&'k self, rel: &'k [u8]) -> &'k [u8] {
        rel.max(self.lo.as_slice())
    }

    /// True when `key` (at or after the start) is still in the range.
    fn holds(&self, key: &[u8]) -> bool {
        self.hi.as_ref().is_none_or(|hi| key < hi.as_slice())
    }
}

/// A session's live files, under the session's lock.
pub struct StateSpace<'a> {
    engine: &'a StateEngine,
    data: &'a mut SessionData,
}

impl StateSpace<'_> {
    /// A scan of everything below the directory `rel`.
    fn cursor(&self, rel: &[u8]) -> MapCursor<'_> {
        let mut cursor = MapCursor {
            files: &self.data.files,
            bounds: Bounds::below(rel),
            at: None,
        };
        cursor.seek(b"");
        cursor
    }

    /// The files at and below `top`, for a search that runs without the lock.
    fn snapshot(&self, top: &[u8]) -> Snapshot {
        let mut files = Vec::new();
        if let Some(file) = self.data.files.get(top) {
            files.push(file.clone());
        }
        let mut cursor = self.cursor(top);
        while let Some((_, file)) = cursor.at {
            files.push(file.clone());
            cursor.next();
        }
        Snapshot { files }
    }
}

/// A scan of a session's map.
pub struct MapCursor<'a> {
    files: &'a FileMap,
    bounds: Bounds,
    at: Option<(&'a [u8], &'a Arc<FileRecord>)>,
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

/// A change of a session's map, applied at once under its lock.
#[derive(Default)]
pub struct StateBatch {
    steps: Vec<Step>,
    /// What the records stored by the change cost.
    added: u64,
    /// What the records it removes cost.
    freed: u64,
    /// Change-log records, numbered as the batch applies.
    logged: Vec<Logged>,
}

enum Step {
    Put(Arc<FileRecord>),
    Drop(Vec<u8>),
    DropBelow(Vec<u8>),
    /// Keep a record among its key's past versions.
    Retire(Arc<FileRecord>),
    /// Drop these past versions of a key.
    Forget(Vec<u8>, Vec<u64>),
}

impl Space for StateSpace<'_> {
    type Batch = StateBatch;
    type Upload = Infallible;

    fn read(&self, _path: &VfsPath, rel: &[u8]) -> Result<Option<(Arc<FileRecord>, Vec<u8>)>> {
        Ok(self
            .data
            .files
            .get(rel)
            .map(|file| (file.clone(), file.data.to_vec())))
    }

    /// The file's pieces cut from its shared content as they are asked for:
    /// a download holds one piece, never a copy of the whole file.
    fn read_chunks(
        &self,
        _path: &VfsPath,
        rel: &[u8],
        max_chunk: usize,
    ) -> Result<Option<(Arc<FileRecord>, ChunkReader)>> {
        Ok(self.data.files.get(rel).map(|file| {
            let (data, max) = (file.data.clone(), max_chunk.max(1));
            let mut at = 0;
            // One piece, even empty, as `split_chunks` gives.
            let pieces = std::iter::from_fn(move || {
                if at > 0 && at >= data.len() {
                    return None;
                }
                let end = data.len().min(at + max);
                let piece = data[at..end].to_vec();
                at = end.max(1);
                Some(Ok(piece))
            });
            (file.clone(), Box::new(pieces) as ChunkReader)
        }))
    }

    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        batch: &mut StateBatch,
        path: &VfsPath,
        rel: &[u8],
        old: Option<&Arc<FileRecord>>,
        content: Content<'_, Infallible>,
        version: u64,
        origin: &Origin,
    ) -> Result<u64> {
        let data = match content {
            Content::Bytes(data) => data,
            Content::Uploaded(upload) => match *upload {},
        };
        let now = SystemTime::now();
        let record = FileRecord {
            path: path.clone(),
            key: rel.to_vec(),
            data: data.into(),
            created: old.map_or(now, |old| old.created),
            modified: now,
            version,
            origin: origin.clone(),
            deleted: false,
        };
        batch.added += record.cost();
        batch.steps.push(Step::Put(Arc::new(record)));
        Ok(data.len() as u64)
    }

    #[allow(clippy::too_many_arguments)]
    fn relocate(
        &self,
        batch: &mut StateBatch,
        _from: &[u8],
        file: &Arc<FileRecord>,
        to: &VfsPath,
        to_rel: &[u8],
        version: u64,
        origin: &Origin,
    ) -> Result<()> {
        let record = FileRecord {
            path: to.clone(),
            key: to_rel.to_vec(),
            data: file.data.clone(),
            created: file.created,
            modified: file.modified,
            version,
            origin: origin.clone(),
            deleted: false,
        };
        // The content is shared, but the path's copies change length.
        batch.added += record.cost();
        batch.freed += file.cost();
        batch.steps.push(Step::Put(Arc::new(record)));
        Ok(())
    }

    fn release(&self, batch: &mut StateBatch, file: &Arc<FileRecord>) -> Result<()> {
        batch.freed += file.cost();
        Ok(())
    }

    fn record(&self, batch: &mut StateBatch, change: Logged) {
        batch.added += log_cost(&change);
        batch.logged.push(change);
    }

    fn drop_key(&self, batch: &mut StateBatch, rel: &[u8]) {
        batch.steps.push(Step::Drop(rel.to_vec()));
    }

    fn drop_below(&self, batch: &mut StateBatch, rel: &[u8]) {
        batch.steps.push(Step::DropBelow(rel.to_vec()));
    }

    fn apply(&mut self, batch: StateBatch) -> Result<()> {
        let StateBatch {
            steps,
            added,
            mut freed,
            logged,
        } = batch;
        // Records the log drops to make room count as freed by the change.
        let capacity = self.engine.keep.changes;
        let log = &self.data.log;
        let dropped = (log.len() + logged.len()).saturating_sub(capacity);
        let from_log = dropped.min(log.len());
        let from_batch = dropped - from_log;
        freed += log.oldest(from_log).map(log_cost).sum::<u64>();
        freed += logged.iter().take(from_batch).map(log_cost).sum::<u64>();
        self.engine.reserve(added, freed)?;
        self.data.bytes = (self.data.bytes + added).saturating_sub(freed);
        for step in steps {
            match step {
                Step::Put(record) => {
                    self.data.files.insert(record.key.clone(), record);
                }
                Step::Drop(key) => {
                    self.data.files.remove(&key);
                }
                Step::DropBelow(rel) => {
                    let mut doomed = Vec::new();
                    let mut cursor = self.cursor(&rel);
                    while let Some((key, _)) = cursor.at {
                        doomed.push(key.to_vec());
                        cursor.next();
                    }
                    for key in doomed {
                        self.data.files.remove(&key);
                    }
                }
                Step::Retire(record) => {
                    self.data
                        .past
                        .entry(record.key.clone())
                        .or_default()
                        .push(record);
                }
                Step::Forget(rel, versions) => {
                    if let Some(past) = self.data.past.get_mut(&rel) {
                        past.retain(|r| !versions.contains(&r.version));
                        if past.is_empty() {
                            self.data.past.remove(&rel);
                        }
                    }
                }
            }
        }
        if !logged.is_empty() {
            let log = &mut self.data.log;
            for record in logged {
                log.push(|seq| Logged { seq, ..record });
            }
            log.trim(capacity);
            self.engine.counters.changed();
        }
        Ok(())
    }
}

impl History for StateSpace<'_> {
    fn past(&self, rel: &[u8]) -> Result<Vec<Past>> {
        let past = self.data.past.get(rel).into_iter().flatten().rev();
        Ok(past
            .map(|r| Past {
                version: r.version,
                time: r.modified,
                content: 0,
            })
            .collect())
    }

    fn set_history(
        &self,
        batch: &mut StateBatch,
        path: &VfsPath,
        rel: &[u8],
        change: HistoryChange<'_, Arc<FileRecord>>,
    ) -> Result<()> {
        // The session's map of past versions is what `past` reads, so the
        // list the change keeps follows from these steps.
        if !change.forget.is_empty() {
            let doomed: Vec<u64> = change.forget.iter().map(|p| p.version).collect();
            if let Some(past) = self.data.past.get(rel) {
                for record in past.iter().filter(|r| doomed.contains(&r.version)) {
                    batch.freed += record.cost();
                }
            }
            batch.steps.push(Step::Forget(rel.to_vec(), doomed));
        }
        if let Some(file) = change.retire {
            // Its cost stays counted: the record lives on as a past version.
            batch.steps.push(Step::Retire(file.clone()));
        }
        if let Some((version, origin)) = change.tombstone {
            let now = SystemTime::now();
            let record = FileRecord {
                path: path.clone(),
                key: rel.to_vec(),
                data: Arc::from(&[][..]),
                created: now,
                modified: now,
                version,
                origin: origin.clone(),
                deleted: true,
            };
            batch.added += record.cost();
            batch.steps.push(Step::Retire(Arc::new(record)));
        }
        Ok(())
    }

    fn versions(&self, _path: &VfsPath, rel: &[u8]) -> Result<Vec<FileVersion>> {
        let current = self.data.files.get(rel).map(|r| r.as_version(true));
        let past = self.data.past.get(rel).into_iter().flatten().rev();
        Ok(current
            .into_iter()
            .chain(past.map(|r| r.as_version(false)))
            .collect())
    }

    fn read_version(
        &self,
        _path: &VfsPath,
        rel: &[u8],
        version: u64,
        max_chunk: usize,
    ) -> Result<Option<(FileVersion, ChunkReader)>> {
        let current = self.data.files.get(rel).filter(|r| r.version == version);
        let found = match current {
            Some(record) => Some((record, true)),
            None => self
                .data
                .past
                .get(rel)
                .and_then(|past| past.iter().find(|r| r.version == version))
                .map(|record| (record, false)),
        };
        Ok(found.map(|(record, current)| {
            (
                record.as_version(current),
                split_chunks(record.data.to_vec(), max_chunk),
            )
        }))
    }
}

/// The files of one subtree, captured at the start of a search, in key
/// order.
pub struct Snapshot {
    files: Vec<Arc<FileRecord>>,
}

impl Snapshot {
    /// Where `rel` is or would be.
    fn position(&self, rel: &[u8]) -> usize {
        self.files.partition_point(|f| f.key.as_slice() < rel)
    }
}

/// A scan of a [`Snapshot`].
pub struct SliceCursor<'a> {
    files: &'a [Arc<FileRecord>],
    bounds: Bounds,
    at: usize,
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
}
