//! The file semantics of tiers whose files live in one key-ordered space
//! (State: a `BTreeMap` per session; Store: RocksDB per namespace), written
//! once over a small storage trait.
//!
//! Where it sits: [`OrderedTier`] implements [`Backend`](super::Backend) for
//! any [`Engine`]; `state` and `store` are engines. The engine owns storage
//! (how a scope's files are found, locked, read, and changed atomically, and
//! how content is kept); this module owns every decision: what a path is
//! (a file, a directory implied by the files below it, or the mount root,
//! which always exists), one-level listing, the writable check, recursive
//! delete, atomic update, preconditions, Move, and where a search starts.
//!
//! Model: each file is a record under the order key of its path relative to
//! the mount (`keys`), so key order is path order and a directory's subtree
//! is one key range. Directories are never stored; they exist while a file
//! lies below them.
//!
//! Invariants (every engine, through this one implementation):
//! - listing, Glob and Grep are range scans: seek to the directory's range,
//!   stop at its end, and skip a subdirectory's subtree with one seek, so
//!   listing 10 entries costs the same among 1,000,000 files as among 100
//!   (the `keys_read` of each list is logged at debug level to show it);
//! - every change is a read-check-write inside [`Engine::change`] (or
//!   [`Engine::create`]), which holds the engine's lock over the paths
//!   involved, and ends in one [`Space::apply`] of one batch (atomic): no
//!   lost update, `if_version`/`create_only` are checked against what is
//!   replaced, and a reader sees a Move's old tree or its new one, never
//!   both or neither;
//! - a file is never created at a directory, nor below a file;
//! - versions only grow: every write and every moved file draws a new one
//!   from [`Counters::next_version`], one counter per tier, across deletes and
//!   re-creates;
//! - a search works on [`Engine::freeze`]'s consistent view, so a slow
//!   search never blocks writers;
//! - history (docs/contract.md § Changes and history): a change keeps the
//!   version it replaces and a deletion or a move leaves a tombstone, as the
//!   engine's [`Retention`] says, and drops in the same batch the versions it
//!   no longer keeps ([`History::set_history`]); a past version is immutable
//!   until dropped;
//! - the change log: every change stages one [`Logged`] record per file
//!   into the batch that makes it ([`Space::record`]); the engine numbers
//!   them in commit order when the batch applies, so an acknowledged change
//!   always has its record and no record exists without its change.
//!
//! Errors: `NotFound`, `IsDirectory`, `NotDirectory`, `AlreadyExists`,
//! `VersionMismatch` and `InvalidArgument` as docs/contract.md describes;
//! `TooLarge` over the engine's `max_file_bytes`; engines add their own
//! (`TooLarge` when memory is full, `Internal` storage failures).

pub mod keys;
mod tier;
mod walk;

pub use tier::OrderedTier;

use super::{ChunkReader, ChunkSource, Keep, split_chunks};
use crate::change::{ChangeKind, LogBounds, Origin};
use crate::entry::{Entry, EntryKind};
use crate::error::Result;
use crate::history::FileVersion;
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::index::persist::Keeper;
use keys::MountKeys;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;
use tokio::sync::watch;

/// The entry of the file `file` at `path`.
pub(crate) fn file_entry(path: VfsPath, file: &impl Stored) -> Entry {
    let FileMeta {
        version,
        size,
        created,
        modified,
        executable,
    } = file.meta();
    Entry {
        path,
        kind: EntryKind::File,
        size,
        modified,
        created,
        version,
        executable,
    }
}

/// The logical path of the file `file` scanned at `rel`.
pub(crate) fn path_of(keys: &MountKeys, rel: &[u8], file: &impl Stored) -> Result<VfsPath> {
    match file.path() {
        Some(path) => Ok(path.clone()),
        None => keys.path(rel),
    }
}

/// One file's metadata, as the shared semantics read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileMeta {
    /// Generation, unique in the tier and growing.
    pub version: u64,
    /// Content length in bytes.
    pub size: u64,
    /// Creation time (kept across rewrites and moves).
    pub created: SystemTime,
    /// Last change of the content (kept across moves).
    pub modified: SystemTime,
    /// The executable bit (kept across rewrites, moves and copies unless a
    /// write sets it).
    pub executable: bool,
}

/// What a change stamps on the file it puts: its new version and its
/// executable bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The new version, from [`Counters::next_version`].
    pub version: u64,
    /// The executable bit the file gets.
    pub executable: bool,
}

/// A file record as an engine keeps it (State: the record itself; Store:
/// its decoded metadata), carried from a read or scan into a change.
pub trait Stored {
    /// The file's metadata.
    fn meta(&self) -> FileMeta;

    /// The file's logical path when the record holds it, which saves
    /// rebuilding it from the key (State keeps paths; Store does not).
    fn path(&self) -> Option<&VfsPath> {
        None
    }

    /// The engine's handle on the record's content ([`Past::content`]).
    fn content(&self) -> u64 {
        0
    }
}

/// A position in a scan over one key range, in key order.
pub trait Cursor {
    /// The engine's file record.
    type File: Stored;

    /// Moves to the first key `>= rel` within the scanned range.
    fn seek(&mut self, rel: &[u8]);

    /// Moves to the key after the current one (nothing past the end).
    fn next(&mut self);

    /// The current relative key and its file; `None` past the end, `Err`
    /// when storage failed.
    fn current(&self) -> Option<Result<(&[u8], Self::File)>>;
}

/// The files of one scope (a State session, a Store namespace), by relative
/// order key: live, or a search's snapshot.
pub trait Files {
    /// The engine's file record.
    type File: Stored;
    /// A scan over this set.
    type Cursor<'c>: Cursor<File = Self::File>
    where
        Self: 'c;

    /// The file at `rel`, if one is there.
    fn get(&self, rel: &[u8]) -> Result<Option<Self::File>>;

    /// A scan of everything strictly below the directory `rel` (the whole
    /// set for the mount root `""`), positioned at its first file. `bulk`
    /// says the scan may read many keys once (a search, a recursive
    /// delete), so an engine can keep it out of its caches.
    fn scan(&self, below: &[u8], bulk: bool) -> Result<Self::Cursor<'_>>;
}

/// A search's consistent view of one scope: files and their content.
pub trait Frozen: Files {
    /// File content: shared, owned, or lent by the view or its cursor
    /// for as long as they are borrowed.
    type Data<'c>: AsRef<[u8]>
    where
        Self: 'c;

    /// Whether `load` copies content into memory of its own (the Store's
    /// files of several chunks), for which a search holds room
    /// (`crate::search::room`).
    const LOAD_COPIES: bool;

    /// The content of the file at `rel` (`path`): usually the file
    /// `cursor` stands on, which saves a lookup (and, on the Store, lends
    /// a small file's bytes with no copy); a worker searching a table
    /// walk's candidate has no cursor.
    fn load<'c>(
        &'c self,
        cursor: Option<&'c Self::Cursor<'_>>,
        path: &VfsPath,
        rel: &[u8],
    ) -> Result<Self::Data<'c>>;

    /// Where the scope's change log stood in this view: read with its files,
    /// so every change the view shows is numbered at or before `head`
    /// (docs/search-index.md § The path table).
    fn log_bounds(&self) -> Result<LogBounds>;
}

/// One change as an engine's log keeps it: paths as keys relative to the
/// mount (so a store can be mounted elsewhere), numbered when its batch
/// applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    /// Place in the scope's log, in commit order (0 until applied).
    pub seq: u64,
    /// The file's relative key.
    pub rel: Vec<u8>,
    /// What happened to it.
    pub kind: ChangeKind,
    /// Its new version (a deletion's: its tombstone's).
    pub version: u64,
    /// Its size after the change.
    pub size: u64,
    /// When the change was made.
    pub time: SystemTime,
    /// Who made it, and how.
    pub origin: Origin,
    /// For a move: the other end's relative key.
    pub moved: Option<Vec<u8>>,
}

/// What a read of a scope's change log found, all from one consistent view.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogRead {
    /// Where the log stands.
    pub bounds: LogBounds,
    /// Changes after the position asked for, in commit order.
    pub entries: Vec<Logged>,
}

/// What one change does to one file's history, staged at once
/// ([`History::set_history`]).
pub struct HistoryChange<'a, F> {
    /// The record the change replaces or deletes, kept as a past version
    /// (its content and origin with it; its key stays until dropped).
    pub retire: Option<&'a F>,
    /// A tombstone to add: the file was deleted or moved away now, at this
    /// version, by this origin.
    pub tombstone: Option<(u64, &'a Origin)>,
    /// Past versions to drop, their content released.
    pub forget: &'a [Past],
    /// The past versions kept after the change, newest first: what
    /// [`History::past`] answers next.
    pub past: &'a [Past],
}

/// A past version as a change's history step sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Past {
    /// Its version.
    pub version: u64,
    /// When it was made (a tombstone: when the file went).
    pub time: SystemTime,
    /// The engine's handle on its content, so dropping it needs no read
    /// (Store: the blob id of a version kept in chunks, 0 when inline or a
    /// tombstone; State: 0).
    pub content: u64,
}

/// New content for [`Space::put`].
pub enum Content<'a, U> {
    /// Bytes in memory.
    Bytes(&'a [u8]),
    /// Content a streamed write already stored (see [`Engine::upload`]).
    Uploaded(&'a U),
}

/// What [`Engine::upload`] made of a streamed write's pieces.
pub enum Streamed<U> {
    /// Small enough to write whole: every piece, gathered.
    Whole(Vec<u8>),
    /// Stored apart as it arrived; committed by [`Space::put`] with
    /// [`Content::Uploaded`], or given back with [`Engine::abandon`].
    Stored(U),
}

/// The live files of one scope under the engine's lock: reads, and changes
/// staged into a batch that [`Space::apply`] makes visible at once.
pub trait Space: Files {
    /// Changes staged for one atomic [`Space::apply`], in order.
    type Batch: Default;
    /// What [`Engine::upload`] stores (see [`Streamed`]).
    type Upload;

    /// The file at `rel` (`path`) and its whole content, if one is there.
    fn read(&self, path: &VfsPath, rel: &[u8]) -> Result<Option<(Self::File, Vec<u8>)>>;

    /// The file at `rel` (`path`) and its content as pieces of at most
    /// `max_chunk` bytes. The default reads it whole; an engine that keeps
    /// large files in chunks fetches one at a time.
    fn read_chunks(
        &self,
        path: &VfsPath,
        rel: &[u8],
        max_chunk: usize,
    ) -> Result<Option<(Self::File, ChunkReader)>> {
        Ok(self
            .read(path, rel)?
            .map(|(file, data)| (file, split_chunks(data, max_chunk))))
    }

    /// Stages `content` as the file at `rel` (`path`) with `stamp`'s
    /// version and executable bit, made by `origin`, replacing `old` (whose
    /// content the caller released or retired; its creation time is kept)
    /// or created now; returns the new size.
    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        batch: &mut Self::Batch,
        path: &VfsPath,
        rel: &[u8],
        old: Option<&Self::File>,
        content: Content<'_, Self::Upload>,
        stamp: Stamp,
        origin: &Origin,
    ) -> Result<u64>;

    /// Stages the content of `file` (the current file at `from`, `from_path`)
    /// as a new version of `rel` (`path`), replacing `old`: a Copy's put,
    /// which gives the copy the source's executable bit, as `cp` does.
    /// Answers the bytes stored. The default reads the bytes and puts them
    /// (one batch with the rest of the change); an engine whose records can
    /// share content overrides it.
    #[allow(clippy::too_many_arguments)]
    fn put_copy(
        &self,
        batch: &mut Self::Batch,
        path: &VfsPath,
        rel: &[u8],
        old: Option<&Self::File>,
        (from_path, from, file): (&VfsPath, &[u8], &Self::File),
        version: u64,
        origin: &Origin,
    ) -> Result<u64> {
        let (_, data) = self
            .read(from_path, from)?
            .ok_or_else(|| crate::error::Error::NotFound(from_path.to_string()))?;
        let stamp = Stamp {
            version,
            executable: file.meta().executable,
        };
        self.put(batch, path, rel, old, Content::Bytes(&data), stamp, origin)
    }

    /// Stages a copy of `file` (now at `from`) at `to_rel` (`to`) with a new
    /// `version` made by `origin`, its content, creation and modification
    /// times and executable bit kept. The key `from` stays until dropped.
    #[allow(clippy::too_many_arguments)]
    fn relocate(
        &self,
        batch: &mut Self::Batch,
        from: &[u8],
        file: &Self::File,
        to: &VfsPath,
        to_rel: &[u8],
        version: u64,
        origin: &Origin,
    ) -> Result<()>;

    /// Stages the release of `file`'s content (its key stays until dropped).
    fn release(&self, batch: &mut Self::Batch, file: &Self::File) -> Result<()>;

    /// Stages `change` for the scope's change log: it is numbered, and made
    /// visible to readers of the log, when the batch applies.
    fn record(&self, batch: &mut Self::Batch, change: Logged);

    /// Stages the removal of the key `rel` (its content stays).
    fn drop_key(&self, batch: &mut Self::Batch, rel: &[u8]);

    /// Stages the removal of every key below the directory `rel`.
    fn drop_below(&self, batch: &mut Self::Batch, rel: &[u8]);

    /// Applies `batch` as one atomic step; on `Err` nothing changed.
    fn apply(&mut self, batch: Self::Batch) -> Result<()>;
}

/// What every engine counts alike: the versions it hands out, and the
/// signal its watchers wait on.
pub struct Counters {
    /// The last version handed out.
    generation: AtomicU64,
    /// Bumped after every batch that logged changes.
    changed: watch::Sender<u64>,
}

impl Counters {
    /// Counters whose last version handed out is `generation` (a Store
    /// resumes its persisted counter; a new tier starts at 0).
    pub fn after(generation: u64) -> Counters {
        Counters {
            generation: AtomicU64::new(generation),
            changed: watch::Sender::new(0),
        }
    }

    /// A new version, larger than every one handed out before.
    pub fn next_version(&self) -> u64 {
        self.generation.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// A receiver whose value changes after every batch that logged
    /// changes, so watchers wait without polling.
    pub fn signal(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Wakes the watchers: a batch that logged changes was applied.
    pub fn changed(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// The history of one scope's files, under the same lock as the [`Space`]
/// it extends: the past versions a change keeps, and reads of them
/// (docs/contract.md § Changes and history). Apart from [`Space`] so an
/// engine can keep its history in a file of its own.
pub trait History: Space {
    /// The past versions of `rel` (retired records and tombstones), newest
    /// first.
    fn past(&self, rel: &[u8]) -> Result<Vec<Past>>;

    /// Stages what a change does to the history of `rel` (`path`): see
    /// [`HistoryChange`].
    fn set_history(
        &self,
        batch: &mut Self::Batch,
        path: &VfsPath,
        rel: &[u8],
        change: HistoryChange<'_, Self::File>,
    ) -> Result<()>;

    /// Every retained version of `rel` (`path`): its current record and its
    /// past versions, newest first; empty when it has none.
    fn versions(&self, path: &VfsPath, rel: &[u8]) -> Result<Vec<FileVersion>>;

    /// Retained `version` of `rel` (`path`), current or past, with its
    /// content as pieces of at most `max_chunk` bytes (a tombstone's are
    /// empty).
    fn read_version(
        &self,
        path: &VfsPath,
        rel: &[u8],
        version: u64,
        max_chunk: usize,
    ) -> Result<Option<(FileVersion, ChunkReader)>>;
}

/// A tier's storage: scopes' key spaces, their locks, versions and content.
pub trait Engine: Send + Sync + 'static {
    /// `state` or `store`, for logs.
    const TIER: &'static str;
    /// The live files of one scope.
    type Space<'a>: History<Upload = Self::Upload>
    where
        Self: 'a;
    /// A search's view of one scope, read by the walk and by the
    /// workers that search its files (`walk::search_table`).
    type Frozen<'a>: Frozen + Sync
    where
        Self: 'a;
    /// What a streamed write stores before its commit.
    type Upload;
    /// One scope's storage once found (State: its session; Store: its
    /// namespace id).
    type Scoped;

    /// The time shown for the mount root when no file dates it.
    fn root_time(&self) -> SystemTime;

    /// The largest file accepted.
    fn max_file_bytes(&self) -> u64;

    /// What the tier keeps of its past: history and change log.
    fn keep(&self) -> Keep;

    /// The scope's change log from just after `after` (`None`: from the
    /// oldest change held), at most `max` changes, with the log's bounds,
    /// all read from one consistent view.
    fn read_log(&self, scope: &Scope, after: Option<u64>, max: usize) -> Result<LogRead>;

    /// The tier's version counter and change signal.
    fn counters(&self) -> &Counters;

    /// The name of the file set `scope` sees, distinct per set: the key of
    /// its search index (docs/search-index.md).
    fn index_key(&self, scope: &Scope) -> String;

    /// Where the tier keeps its namespaces' search indexes across restarts
    /// (docs/search-index.md § Persistence); `None`: in memory only.
    fn index_keeper(self: Arc<Self>) -> Option<Arc<dyn Keeper>> {
        None
    }

    /// The storage of `scope` if it has any: `None` when the scope never
    /// stored a file. Never creates it.
    fn find(&self, scope: &Scope) -> Result<Option<Self::Scoped>>;

    /// The storage of `scope`, created when missing (its first write).
    fn find_or_create(&self, scope: &Scope) -> Result<Self::Scoped>;

    /// Runs `f` on the live files of `scoped`. With `changing`, the engine's
    /// lock for a change of those paths (and everything below them) is held
    /// until `f` returns; without, `f` only reads.
    fn enter<R>(
        &self,
        scoped: &Self::Scoped,
        changing: Option<&[&[u8]]>,
        f: impl FnOnce(&mut Self::Space<'_>) -> Result<R>,
    ) -> Result<R>;

    /// Runs `f` on the scope's files (`None` when the scope never stored a
    /// file: only the empty mount root exists); never creates the scope.
    fn view<R>(
        &self,
        scope: &Scope,
        f: impl FnOnce(Option<&Self::Space<'_>>) -> Result<R>,
    ) -> Result<R> {
        match self.find(scope)? {
            Some(scoped) => self.enter(&scoped, None, |space| f(Some(space))),
            None => f(None),
        }
    }

    /// Runs `f` on the scope's files while holding the engine's lock for a
    /// change of the paths `rels` (and everything below them); `None` when
    /// the scope never stored a file. Never creates the scope.
    fn change<R>(
        &self,
        scope: &Scope,
        rels: &[&[u8]],
        f: impl FnOnce(Option<&mut Self::Space<'_>>) -> Result<R>,
    ) -> Result<R> {
        match self.find(scope)? {
            Some(scoped) => self.enter(&scoped, Some(rels), |space| f(Some(space))),
            None => f(None),
        }
    }

    /// As [`Engine::change`] for the one path `rel`, creating the scope when
    /// missing (the first write).
    fn create<R>(
        &self,
        scope: &Scope,
        rel: &[u8],
        f: impl FnOnce(&mut Self::Space<'_>) -> Result<R>,
    ) -> Result<R> {
        let scoped = self.find_or_create(scope)?;
        self.enter(&scoped, Some(&[rel]), f)
    }

    /// Runs `f` on a consistent view of the scope holding at least the
    /// subtree of `top` (`None` when the scope never stored a file), without
    /// holding any lock that writers wait for.
    fn freeze<R>(
        &self,
        scope: &Scope,
        top: &[u8],
        f: impl FnOnce(Option<&Self::Frozen<'_>>) -> Result<R>,
    ) -> Result<R>;

    /// Takes in a streamed write's pieces for `path`: gathers them when the
    /// file is small enough to write whole, else stores them apart as they
    /// arrive (a large upload is then never whole in memory).
    fn upload(
        &self,
        path: &VfsPath,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<Streamed<Self::Upload>>;

    /// Removes what an upload stored when it does not commit.
    fn abandon(&self, upload: &Self::Upload) -> Result<()>;
}
