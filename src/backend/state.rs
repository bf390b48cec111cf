//! The State tier: per-session scratch files in memory.
//!
//! Each session (`x-agentvfs-session`, within the caller's namespace) has its own ordered map from
//! [`VfsPath::order_key`] to file, so a directory listing or a search is a key
//! range and directories are implied by the files below them. A `std` mutex
//! guards the session table and each session's map: no lock is ever held
//! across an `.await` or a long computation — searches work on a snapshot of
//! `Arc`s, so writers are never blocked by a slow search.
//!
//! Sessions idle longer than `idle_ttl` are dropped (checked lazily on access,
//! at most once per [`SWEEP_INTERVAL`]). A session is created by its first
//! write, never by a read, list, stat, search or delete (those see an empty
//! session), and at most `max_sessions` exist at once. The memory of all
//! sessions together is bounded by `max_total_bytes`, each file counting its
//! content, its path (held three times: the path, its order key in the map
//! and in the record) and [`FILE_OVERHEAD_BYTES`], so empty files with long
//! paths fill the tier too. Beyond either bound a write is `TooLarge`
//! (RESOURCE_EXHAUSTED).

use super::{Backend, Precondition, UpdateFn, WriteOutcome, check_directory_delete};
use crate::entry::{Entry, EntryKind};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::sorted::{self, SortedFiles};
use crate::search::{SearchPart, SearchRun};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// How often idle sessions are looked for.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// What one file costs beyond its content and path copies: the record, its
/// `Arc`, and its share of the map's nodes (a generous round figure).
pub const FILE_OVERHEAD_BYTES: u64 = 256;

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

struct FileRecord {
    path: VfsPath,
    /// `path.order_key()`, kept so snapshot seeks compare slices instead of
    /// building a key per comparison.
    key: Vec<u8>,
    data: Arc<[u8]>,
    created: SystemTime,
    modified: SystemTime,
    version: u64,
}

impl FileRecord {
    /// What this file counts against `max_total_bytes`.
    fn cost(&self) -> u64 {
        cost(&self.path, self.data.len())
    }

    fn entry(&self) -> Entry {
        Entry {
            path: self.path.clone(),
            kind: EntryKind::File,
            size: self.data.len() as u64,
            modified: self.modified,
            created: self.created,
            version: self.version,
        }
    }
}

type Files = BTreeMap<Vec<u8>, Arc<FileRecord>>;

/// What a file of `len` bytes at `path` counts against `max_total_bytes`:
/// the content, the three copies of its path and [`FILE_OVERHEAD_BYTES`].
fn cost(path: &VfsPath, len: usize) -> u64 {
    len as u64 + 3 * path.as_str().len() as u64 + FILE_OVERHEAD_BYTES
}

struct Session {
    files: Mutex<Files>,
    last_used: Mutex<Instant>,
}

/// The in-memory, per-session tier.
pub struct StateBackend {
    mount: VfsPath,
    /// Shown as the time of the (possibly empty) mount root.
    created: SystemTime,
    limits: StateLimits,
    /// Keyed by (namespace, session): principals of different namespaces
    /// never share scratch files, even under one session name.
    sessions: Mutex<HashMap<(String, String), Arc<Session>>>,
    last_sweep: Mutex<Instant>,
    total_bytes: AtomicU64,
    /// One counter for every file of every session: versions only grow, even
    /// across delete and re-create, so `if_version` can never be fooled.
    generation: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a map half-changed (every
    // change is one insert/remove), so a poisoned lock is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl StateBackend {
    /// A State tier answering for paths below `mount`.
    pub fn new(mount: VfsPath, limits: StateLimits) -> StateBackend {
        StateBackend {
            mount,
            created: SystemTime::now(),
            limits,
            sessions: Mutex::new(HashMap::new()),
            last_sweep: Mutex::new(Instant::now()),
            total_bytes: AtomicU64::new(0),
            generation: AtomicU64::new(0),
        }
    }

    /// Bytes held by all sessions, as counted against `max_total_bytes`.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes.load(Ordering::Relaxed)
    }

    /// The scope's session when it exists (a read never creates one).
    fn existing(&self, scope: &Scope) -> Option<Arc<Session>> {
        self.sweep_idle();
        let session = lock(&self.sessions)
            .get(&(scope.namespace.clone(), scope.session.clone()))
            .cloned()?;
        *lock(&session.last_used) = Instant::now();
        Some(session)
    }

    /// Runs `f` on the scope's files, an empty map when it has no session.
    fn with_files<R>(&self, scope: &Scope, f: impl FnOnce(&Files) -> R) -> R {
        match self.existing(scope) {
            Some(session) => f(&lock(&session.files)),
            None => f(&Files::new()),
        }
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
                        files: Mutex::new(BTreeMap::new()),
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
                let bytes: u64 = lock(&session.files).values().map(|f| f.cost()).sum();
                self.total_bytes.fetch_sub(bytes, Ordering::Relaxed);
                tracing::info!(%namespace, session = %name, bytes, "dropped idle State session");
            }
            keep
        });
    }

    fn next_version(&self) -> u64 {
        self.generation.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Reserves room for the file at `path` to hold `len` bytes, replacing
    /// `old` (what it costs now, 0 when new).
    fn reserve(&self, path: &VfsPath, old: u64, len: usize) -> Result<()> {
        if len as u64 > self.limits.max_file_bytes {
            return Err(Error::TooLarge(format!(
                "{path} would be {len} bytes; the file size limit is {} bytes",
                self.limits.max_file_bytes
            )));
        }
        let new = cost(path, len);
        let max = self.limits.max_total_bytes;
        self.total_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |total| {
                let next = total - old + new;
                (next <= max || new <= old).then_some(next)
            })
            .map(|_| ())
            .map_err(|_| {
                Error::TooLarge(format!(
                    "the State tier is full ({max} bytes); delete scratch files first"
                ))
            })
    }

    /// A file at `path` or a directory implied below it.
    fn lookup(&self, files: &Files, path: &VfsPath) -> Result<Entry> {
        if let Some(file) = files.get(&path.order_key()) {
            return Ok(file.entry());
        }
        let (start, end) = path.subtree_range();
        match files.range(start..end).next() {
            Some((_, first)) => Ok(Entry::directory(path.clone(), first.modified)),
            None if *path == self.mount => Ok(Entry::directory(path.clone(), self.created)),
            None => Err(Error::NotFound(path.to_string())),
        }
    }

    /// Fails when `path` is a directory or lies below a file.
    fn check_writable(&self, files: &Files, path: &VfsPath) -> Result<()> {
        let (start, end) = path.subtree_range();
        if files.range(start..end).next().is_some() || *path == self.mount {
            return Err(Error::IsDirectory(path.to_string()));
        }
        let mut dir = path.parent();
        while dir.is_within(&self.mount) && dir != self.mount {
            if files.contains_key(&dir.order_key()) {
                return Err(Error::NotDirectory(dir.to_string()));
            }
            dir = dir.parent();
        }
        Ok(())
    }

    fn store(
        &self,
        files: &mut Files,
        path: &VfsPath,
        data: Vec<u8>,
        created: Option<SystemTime>,
    ) -> WriteOutcome {
        let now = SystemTime::now();
        let record = FileRecord {
            path: path.clone(),
            key: path.order_key(),
            data: data.into(),
            created: created.unwrap_or(now),
            modified: now,
            version: self.next_version(),
        };
        let outcome = WriteOutcome {
            path: path.clone(),
            bytes_written: record.data.len() as u64,
            version: record.version,
            created: created.is_none(),
        };
        files.insert(record.key.clone(), Arc::new(record));
        outcome
    }

    /// Why `path`, which names no file in `files`, cannot be read as one:
    /// it is a directory (implied or the mount root), or it does not exist.
    fn not_a_file(&self, files: &Files, path: &VfsPath) -> Error {
        match self.lookup(files, path) {
            Ok(_) => Error::IsDirectory(path.to_string()),
            Err(e) => e,
        }
    }

    /// One directory level of `files`.
    fn list_in(&self, files: &Files, dir: &VfsPath) -> Result<Vec<Entry>> {
        let this = self.lookup(files, dir)?;
        if !this.is_directory() {
            return Err(Error::NotDirectory(dir.to_string()));
        }
        let (mut cursor, end) = dir.subtree_range();
        let mut out = Vec::new();
        while let Some((key, file)) = files.range(cursor.clone()..end.clone()).next() {
            let rel = file.path.relative_to(dir).unwrap_or_default();
            match rel.split_once('/') {
                // A subdirectory: show it once and seek past everything below it.
                Some((child, _)) => {
                    let child = dir.join(child)?;
                    cursor = child.subtree_range().1;
                    out.push(Entry::directory(child, file.modified));
                }
                None => {
                    cursor = key.clone();
                    cursor.push(0);
                    out.push(file.entry());
                }
            }
        }
        Ok(out)
    }

    /// Deletes a file or, when `recursive`, a directory tree of `files`.
    fn delete_in(
        &self,
        files: &mut Files,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        let key = path.order_key();
        if let Some(file) = files.get(&key) {
            Precondition {
                create_only: false,
                if_version,
            }
            .check(path, Some(file.version))?;
            let bytes = file.cost();
            files.remove(&key);
            self.total_bytes.fetch_sub(bytes, Ordering::Relaxed);
            return Ok(1);
        }
        self.lookup(files, path)?;
        check_directory_delete(path, if_version, recursive)?;
        let (start, end) = path.subtree_range();
        let doomed: Vec<Vec<u8>> = files.range(start..end).map(|(k, _)| k.clone()).collect();
        let mut bytes = 0;
        for key in &doomed {
            if let Some(file) = files.remove(key) {
                bytes += file.cost();
            }
        }
        self.total_bytes.fetch_sub(bytes, Ordering::Relaxed);
        Ok(doomed.len() as u64)
    }
}

impl Backend for StateBackend {
    fn list(&self, scope: &Scope, dir: &VfsPath) -> Result<Vec<Entry>> {
        self.with_files(scope, |files| self.list_in(files, dir))
    }

    fn stat(&self, scope: &Scope, path: &VfsPath) -> Result<Entry> {
        self.with_files(scope, |files| self.lookup(files, path))
    }

    fn read(&self, scope: &Scope, path: &VfsPath) -> Result<(Vec<u8>, Entry)> {
        self.with_files(scope, |files| match files.get(&path.order_key()) {
            Some(file) => Ok((file.data.to_vec(), file.entry())),
            None => Err(self.not_a_file(files, path)),
        })
    }

    fn write(
        &self,
        scope: &Scope,
        path: &VfsPath,
        data: Vec<u8>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        let session = self.session_for_write(scope)?;
        let mut files = lock(&session.files);
        let existing = files.get(&path.order_key()).cloned();
        pre.check(path, existing.as_ref().map(|f| f.version))?;
        if existing.is_none() {
            self.check_writable(&files, path)?;
        }
        let old = existing.as_ref().map_or(0, |f| f.cost());
        self.reserve(path, old, data.len())?;
        Ok(self.store(&mut files, path, data, existing.map(|f| f.created)))
    }

    fn update(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        let Some(session) = self.existing(scope) else {
            return Err(self.not_a_file(&Files::new(), path));
        };
        let mut files = lock(&session.files);
        let Some(existing) = files.get(&path.order_key()).cloned() else {
            return Err(self.not_a_file(&files, path));
        };
        Precondition {
            create_only: false,
            if_version,
        }
        .check(path, Some(existing.version))?;
        let data = f(&existing.data)?;
        self.reserve(path, existing.cost(), data.len())?;
        Ok(self.store(&mut files, path, data, Some(existing.created)))
    }

    fn delete(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        match self.existing(scope) {
            Some(session) => self.delete_in(&mut lock(&session.files), path, if_version, recursive),
            None => self.delete_in(&mut Files::new(), path, if_version, recursive),
        }
    }

    fn search(&self, scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()> {
        let root = &part.top;
        let (root_entry, mut snapshot) = self.with_files(scope, |files| {
            let root_entry = self.lookup(files, root)?;
            let (start, end) = root.subtree_range();
            let mut snapshot: Vec<Arc<FileRecord>> =
                files.range(start..end).map(|(_, f)| f.clone()).collect();
            if let Some(file) = files.get(&root.order_key()) {
                snapshot.push(file.clone());
            }
            Ok::<_, Error>((root_entry, Snapshot { files: snapshot }))
        })?;
        if root_entry.is_directory() {
            sorted::walk(run, &mut snapshot, part)
        } else {
            sorted::search_one(run, &mut snapshot, root_entry)
        }
    }
}

/// Files of one subtree, captured at the start of a search.
struct Snapshot {
    files: Vec<Arc<FileRecord>>,
}

impl SortedFiles for Snapshot {
    type Data = Arc<[u8]>;

    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
        let at = self.files.partition_point(|f| f.key.as_slice() < from);
        self.files.get(at).map(|f| Ok(f.entry()))
    }

    fn load(&mut self, entry: &Entry) -> Result<Arc<[u8]>> {
        let key = entry.path.order_key();
        let at = self.files.partition_point(|f| f.key < key);
        match self.files.get(at) {
            Some(f) if f.path == entry.path => Ok(f.data.clone()),
            _ => Err(Error::NotFound(entry.path.to_string())),
        }
    }
}
