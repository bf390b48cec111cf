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
//! bound a write is `TooLarge` (RESOURCE_EXHAUSTED). A search holds the
//! session's map as it was when it began while writers go on, and the nodes
//! writers replace meanwhile stay alive for it: while it runs it holds
//! [`space::Snapshot::pinned_bytes`] of the same bound (its every key and
//! pointer), refused as `TooLarge` too when the tier is that full.
//!
//! History and the change log live with the session, under its lock: a
//! version a change replaces moves to the session's past versions (its
//! content shared, not copied), and each change's record joins the session's
//! log, numbered in commit order as the batch applies. The log keeps the
//! last `changes` records ([`Keep`]) and starts over, under a new random
//! epoch, when the session is created again.
//!
//! Files by protocol: this one holds the sessions and the engine; `space`
//! (scans of a session's map, a search's snapshot), `write` (a change's
//! batch and how it applies) and `history` (past versions and their reads).

mod history;
mod space;
mod write;

use super::memory_log::MemoryLog;
use super::ordered::{Counters, Engine, FileMeta, LogRead, Logged, OrderedTier, Stored, Streamed};
use super::{ChunkSource, Keep};
use crate::change::Origin;
use crate::error::{Error, Result};
use crate::history::FileVersion;
use crate::path::VfsPath;
use crate::scope::Scope;
pub use space::{MapCursor, Snapshot, StateSpace};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};
pub use write::StateBatch;

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
    /// The executable bit.
    executable: bool,
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
            executable: self.executable,
        }
    }

    fn path(&self) -> Option<&VfsPath> {
        Some(&self.path)
    }
}

/// A session's files by relative order key. Persistent: a clone shares the
/// tree, and a change copies only the nodes on its path that a clone still
/// holds, so a search's snapshot costs O(1) (space.rs).
type FileMap = imbl::OrdMap<Vec<u8>, Arc<FileRecord>>;

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
    /// The length of every key of `files`, summed: what a search's snapshot
    /// may keep alive of them ([`space::Snapshot::pinned_bytes`]).
    key_bytes: u64,
}

impl SessionData {
    /// Puts `record` at its key, keeping `key_bytes`.
    fn put_file(&mut self, record: Arc<FileRecord>) {
        self.key_bytes += record.key.len() as u64;
        if let Some(old) = self.files.insert(record.key.clone(), record) {
            self.key_bytes -= old.key.len() as u64;
        }
    }

    /// Drops the file at `key`, if any, keeping `key_bytes`.
    fn drop_file(&mut self, key: &[u8]) {
        if self.files.remove(key).is_some() {
            self.key_bytes -= key.len() as u64;
        }
    }
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
                            files: FileMap::new(),
                            past: HashMap::new(),
                            log: MemoryLog::new(),
                            bytes: 0,
                            key_bytes: 0,
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
    /// Holds `bytes` of `max_total_bytes` for a search's snapshot until the
    /// guard is dropped, or refuses them when the tier has no such room.
    fn pin(&self, bytes: u64) -> Result<Pinned<'_>> {
        self.reserve(bytes, 0).map_err(|_| {
            Error::TooLarge(format!(
                "the State tier is too full ({} bytes) for a search to hold this session's \
                 {bytes} bytes of paths while writers change them; delete scratch files first",
                self.limits.max_total_bytes
            ))
        })?;
        Ok(Pinned {
            engine: self,
            bytes,
        })
    }

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

/// The room of `max_total_bytes` a search's snapshot holds while it runs
/// (see [`StateEngine::pin`]); given back when dropped.
struct Pinned<'a> {
    engine: &'a StateEngine,
    bytes: u64,
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        self.engine
            .total_bytes
            .fetch_sub(self.bytes, Ordering::Relaxed);
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

    fn index_key(&self, scope: &Scope) -> String {
        // Sessions are found by (namespace, session); names hold no NUL.
        format!("{}\0{}", scope.namespace, scope.session)
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
        // Dropped after `f`: the room is held as long as the snapshot.
        let _pinned = match &snapshot {
            Some(snapshot) => Some(self.pin(snapshot.pinned_bytes())?),
            None => None,
        };
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
