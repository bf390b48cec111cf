//! The backend protocol: the contract every tier (State, Store, Filesystem,
//! Object) and the mount table (Composite) implement.
//!
//! The trait is synchronous on purpose: every tier either finishes at once
//! (State) or blocks on disk (Store, Filesystem). The gRPC layer calls it through
//! `spawn_blocking`, so blocking I/O never runs on the runtime's worker threads.
//!
//! Invariants callers rely on:
//! - every path handed in passed [`VfsPath::parse`] and the caller's grant check;
//! - every path handed back is a logical path, never a host path;
//! - [`Backend::update`] is an atomic read-modify-write: no lost update when
//!   many clients edit one file at once;
//! - versions only grow: every change of a path gives it a new, larger version;
//! - a tier that keeps a change log records every change it commits, in commit
//!   order, atomically with the change (docs/contract.md § Changes and
//!   history); one that keeps history keeps past versions and tombstones by
//!   its [`Retention`].

pub mod branch;
pub mod changeset;
pub mod composite;
pub mod fs;
pub mod memory_log;
pub mod object;
pub mod ordered;
pub mod record;
pub mod state;
pub mod store;

pub use changeset::{FileAction, FileChange, FileCommitted};

use crate::change::{Change, ChangeCursor};
use crate::error::{Error, Result};
use crate::history::{FileVersion, Retention};
use crate::path::VfsPath;
use crate::search::index::written::WriteLearning;
use crate::search::{SearchPart, SearchRun};
use tokio::sync::watch;

use crate::entry::Entry;
use crate::scope::Scope;

/// What a tier keeps of its past, per mount (the configuration's
/// `history_versions`, `history_seconds` and `change_log`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keep {
    /// Which past versions of a file are kept.
    pub history: Retention,
    /// Changes the tier's change log keeps for Watch to resume from (per
    /// State session, per Store, per Filesystem mount); 0 keeps no log.
    pub changes: usize,
}

impl Keep {
    /// Default changes kept.
    pub const DEFAULT_CHANGES: usize = 100_000;

    /// The default: ten versions per file, the last 100,000 changes.
    pub const DEFAULT: Keep = Keep {
        history: Retention::DEFAULT,
        changes: Keep::DEFAULT_CHANGES,
    };

    /// Nothing: no history, no change log.
    pub const NOTHING: Keep = Keep {
        history: Retention {
            versions: 1,
            within: None,
        },
        changes: 0,
    };
}

impl Default for Keep {
    fn default() -> Keep {
        Keep::DEFAULT
    }
}

/// The error of a history call on a mount that keeps no history.
pub fn no_history(path: &VfsPath) -> Error {
    Error::Unsupported(format!(
        "{path} is on a mount that keeps no version history"
    ))
}

/// The error of a Watch of a mount that keeps no change log.
pub fn no_change_log(path: &VfsPath) -> Error {
    Error::Unsupported(format!("{path} is on a mount that keeps no change log"))
}

/// The error of a Restore of a version that is a deletion (a tombstone has
/// no content to bring back).
pub fn restore_of_deletion(path: &VfsPath, version: u64) -> Error {
    Error::InvalidArgument(format!(
        "version {version} of {path} is a deletion: restore a version with content, or Delete \
         the file"
    ))
}

/// The condition a write must meet, from `create_only` and `if_version`,
/// and the one attribute a write may set besides content: the executable
/// bit (docs/contract.md § The executable bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Precondition {
    /// Fail with [`Error::AlreadyExists`] when the file exists.
    pub create_only: bool,
    /// When set, the current version must equal it (0: must not exist), else
    /// [`Error::VersionMismatch`].
    pub if_version: Option<u64>,
    /// The executable bit the written file gets; `None` keeps the replaced
    /// file's (a new file's is off), as rewriting a file in POSIX keeps its
    /// mode.
    pub executable: Option<bool>,
}

impl Precondition {
    /// The condition of a change of an existing file: only `if_version`.
    pub fn if_version(if_version: Option<u64>) -> Precondition {
        Precondition {
            if_version,
            ..Precondition::default()
        }
    }

    /// The executable bit of the written file, given the replaced file's
    /// (`None`: no file was there).
    pub fn executable_after(&self, replaced: Option<bool>) -> bool {
        self.executable.or(replaced).unwrap_or(false)
    }

    /// Checks the condition against the current version (`None`: no file).
    pub fn check(&self, path: &VfsPath, current: Option<u64>) -> Result<()> {
        if self.create_only && current.is_some() {
            return Err(Error::AlreadyExists(path.to_string()));
        }
        if let Some(expected) = self.if_version {
            let actual = current.unwrap_or(0);
            if expected != actual {
                return Err(Error::VersionMismatch {
                    path: path.to_string(),
                    expected,
                    actual,
                });
            }
        }
        Ok(())
    }
}

/// Checks that a Delete naming a directory may go on: it must be recursive
/// and carry no `if_version` (versions belong to files).
pub fn check_directory_delete(
    path: &VfsPath,
    if_version: Option<u64>,
    recursive: bool,
) -> Result<()> {
    if !recursive {
        return Err(Error::IsDirectory(format!(
            "{path} (pass recursive to delete a directory)"
        )));
    }
    if if_version.is_some() {
        return Err(Error::InvalidArgument(
            "if_version applies to files, not directories".into(),
        ));
    }
    Ok(())
}

/// What a write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Logical path written.
    pub path: VfsPath,
    /// Bytes in the file now.
    pub bytes_written: u64,
    /// The file's new version.
    pub version: u64,
    /// True when the file did not exist before.
    pub created: bool,
}

impl WriteOutcome {
    /// Teaches the search index `data`, the content this write committed,
    /// through `learning`, when there are both: the next Grep rules the
    /// file out, or selects it, without reading it first
    /// (docs/search-index.md § Learning in the write path).
    pub(crate) fn teach<'a>(
        &self,
        learning: Option<WriteLearning<'a>>,
        data: Option<impl Into<std::borrow::Cow<'a, [u8]>>>,
    ) {
        if let (Some(learning), Some(data)) = (learning, data) {
            learning.learn_file(self.path.order_key(), self.version, data);
        }
    }
}

/// What a Move did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveOutcome {
    /// Files now below (or at) the destination that were below the source.
    pub files_moved: u64,
    /// The moved file's new version; 0 when a directory moved.
    pub version: u64,
}

/// Refuses a Move whose two paths cannot name two distinct places: the
/// same path, or a destination inside the source (docs/contract.md § Move).
/// Every tier's `rename` may rely on this having been checked.
pub fn check_move_paths(source: &VfsPath, destination: &VfsPath) -> Result<()> {
    if source == destination {
        return Err(Error::InvalidArgument(format!(
            "source and destination are the same path: {source}"
        )));
    }
    if destination.is_within(source) {
        return Err(Error::InvalidArgument(format!(
            "cannot move {source} into itself ({destination})"
        )));
    }
    Ok(())
}

/// The error of a Move whose source or destination is a mount root, or lies
/// above one (docs/contract.md § Move): a mount is configuration, not data,
/// so no tier moves it. Tiers refuse their own root with it too.
pub fn unmovable_mount(path: &VfsPath) -> Error {
    Error::InvalidArgument(format!("{path} is a mount root; a mount cannot be moved"))
}

/// One look of a [`Backend::read_files`] batch: the file at `path` in
/// `scope`, with its content or only its metadata.
#[derive(Clone, Debug)]
pub struct FileRead {
    /// The scope the path is read in.
    pub scope: Scope,
    /// The file's path.
    pub path: VfsPath,
    /// False: only whether a file is there and its metadata (its content
    /// answers empty), for a look that rarely needs more, so a large file
    /// is not fetched for nothing.
    pub content: bool,
}

impl FileRead {
    /// The file's content and metadata.
    pub fn file(scope: Scope, path: VfsPath) -> FileRead {
        FileRead {
            scope,
            path,
            content: true,
        }
    }

    /// The file's metadata only.
    pub fn entry(scope: Scope, path: VfsPath) -> FileRead {
        FileRead {
            scope,
            path,
            content: false,
        }
    }
}

/// What [`Backend::read_files`] answers: per look, the file's content (empty
/// for a metadata-only look) and metadata, or `None` where there is no file.
pub type FilesRead = Vec<Option<(Vec<u8>, Entry)>>;

/// What [`Backend::read_files_traced`] answers: [`FilesRead`], and per look
/// whether the scope keeps a trace at the path where it holds no file.
pub type TracedReads = (FilesRead, Vec<bool>);

/// [`Backend::read_files`] one look after another.
pub fn read_each<B: Backend + ?Sized>(backend: &B, reads: &[FileRead]) -> Result<FilesRead> {
    reads
        .iter()
        .map(|read| {
            let found = if read.content {
                backend.read(&read.scope, &read.path)
            } else {
                backend
                    .stat(&read.scope, &read.path)
                    .map(|entry| (Vec::new(), entry))
            };
            match found {
                Ok((_, entry)) if entry.is_directory() => Ok(None),
                Ok(found) => Ok(Some(found)),
                Err(Error::NotFound(_) | Error::NotDirectory(_) | Error::IsDirectory(_)) => {
                    Ok(None)
                }
                Err(e) => Err(e),
            }
        })
        .collect()
}

/// The error of a delete of a mount point without `recursive`: the mount
/// table's answer, a branch forked at a mount root gives it too.
pub fn mount_point_delete(path: &VfsPath) -> Error {
    Error::IsDirectory(format!("{path} is a mount point"))
}

/// Sleeps a little more after each lost race (up to ~20 ms, jittered), so
/// contending writers spread out (the object tier's compare-and-set loops,
/// a branch's changes).
pub(crate) fn backoff(attempt: u32) {
    let max = 1u64 << attempt.min(4);
    let ms = rand::random_range(0..=max);
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// A transformation of a file's content for [`Backend::update`]: given the
/// current bytes, return the new bytes (or an error to change nothing).
pub type UpdateFn<'a> = dyn FnMut(&[u8]) -> Result<Vec<u8>> + 'a;

/// A file's content in pieces, produced on demand (ReadBytes streams it, so a
/// tier that stores chunks never holds a whole large file in memory).
pub type ChunkReader = Box<dyn Iterator<Item = Result<Vec<u8>>> + Send>;

/// What [`Backend::read_admitted`] asks before it holds a file's content:
/// given the file's metadata, an error refuses the read.
pub type Admit<'a> = dyn FnMut(&Entry) -> Result<()> + 'a;

/// The piece size [`Backend::read_admitted`]'s default reads in: the
/// Filesystem tier's own read size, so no piece is copied twice.
const GATHERED_PIECE_BYTES: usize = 1 << 20;

/// The pieces of `entry`'s content as one buffer of its admitted size; a
/// piece beyond that size is refused, not held (the admitted size is what
/// the caller was charged). A sole piece is taken as it is, uncopied.
fn gather(entry: &Entry, pieces: ChunkReader) -> Result<Vec<u8>> {
    let mut data: Vec<u8> = Vec::new();
    for piece in pieces {
        let piece = piece?;
        let held = (data.len() + piece.len()) as u64;
        if held > entry.size {
            return Err(Error::Unavailable(format!(
                "{} grew past its size of {} bytes while it was read; read it again",
                entry.path, entry.size
            )));
        }
        if data.is_empty() && held == entry.size {
            data = piece;
        } else {
            data.reserve_exact(entry.size as usize - data.len());
            data.extend_from_slice(&piece);
        }
    }
    Ok(data)
}

/// A file's new content in pieces as they arrive (WriteBytes).
pub type ChunkSource<'a> = dyn Iterator<Item = Result<Vec<u8>>> + 'a;

/// Cuts `data` into pieces of at most `max_chunk` bytes; an empty `data` is
/// one empty piece, so a reader always yields at least one.
pub fn split_chunks(data: Vec<u8>, max_chunk: usize) -> ChunkReader {
    if data.len() <= max_chunk {
        return Box::new(std::iter::once(Ok(data)));
    }
    let max_chunk = max_chunk.max(1);
    let pieces: Vec<Result<Vec<u8>>> = data.chunks(max_chunk).map(|c| Ok(c.to_vec())).collect();
    Box::new(pieces.into_iter())
}

/// The backend protocol (docs/contract.md § Backend protocol), structured.
pub trait Backend: Send + Sync {
    /// Lists one directory level, sorted by path (segment order).
    fn list(&self, scope: &Scope, dir: &VfsPath) -> Result<Vec<Entry>>;

    /// Metadata of one path.
    fn stat(&self, scope: &Scope, path: &VfsPath) -> Result<Entry>;

    /// The whole content of a file and its metadata.
    fn read(&self, scope: &Scope, path: &VfsPath) -> Result<(Vec<u8>, Entry)>;

    /// The files at several paths, each in its own scope, looked at together
    /// (`None` where no file is, whatever else is there): what a call in a
    /// branch reads of a file's layers at once (docs/branches.md). The
    /// default reads them in turn; a tier whose every read is a request
    /// (the object tier) sends them at once, so they cost one round trip.
    fn read_files(&self, reads: &[FileRead]) -> Result<FilesRead> {
        read_each(self, reads)
    }

    /// [`Backend::read_files`], telling too of each path with no file
    /// whether its scope keeps a *trace* there: what a file deleted, or a
    /// changeset that checked the path, leaves. A path without one was never
    /// written nor checked by a changeset in that scope. `None`, the
    /// default: the tier keeps no traces; the object tier does, since its
    /// heads are never removed (docs/object-storage.md § Heads). A Read in a
    /// branch uses it to tell a path the branch never changed from the
    /// file's own read, with no read of the path's base record
    /// (docs/branches.md § Across servers).
    fn read_files_traced(&self, reads: &[FileRead]) -> Result<Option<TracedReads>> {
        let _ = reads;
        Ok(None)
    }

    /// The whole content of a file and its metadata, with `admit` asked
    /// about the file (its size) before its content is held: a whole-file
    /// read charges its caller's memory there, and refuses a file over the
    /// size limit unread (`crate::service::Files::read`). The default takes
    /// the metadata and then the pieces of [`Backend::read_chunks`]; a tier
    /// with a cheaper whole read overrides it, asking `admit` between its
    /// look at the file and its read of the content.
    fn read_admitted(
        &self,
        scope: &Scope,
        path: &VfsPath,
        admit: &mut Admit<'_>,
    ) -> Result<(Vec<u8>, Entry)> {
        let (entry, pieces) = self.read_chunks(scope, path, GATHERED_PIECE_BYTES)?;
        admit(&entry)?;
        let data = gather(&entry, pieces)?;
        Ok((data, entry))
    }

    /// A file's metadata and its content as pieces of at most `max_chunk`
    /// bytes. The default reads the whole file first; tiers that store files
    /// in chunks override it to fetch one piece at a time.
    fn read_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        max_chunk: usize,
    ) -> Result<(Entry, ChunkReader)> {
        let (data, entry) = self.read(scope, path)?;
        Ok((entry, split_chunks(data, max_chunk)))
    }

    /// Creates or replaces a file (creating parent directories as needed).
    fn write(
        &self,
        scope: &Scope,
        path: &VfsPath,
        data: Vec<u8>,
        pre: Precondition,
    ) -> Result<WriteOutcome>;

    /// Creates or replaces a file from pieces as they arrive (WriteBytes).
    /// An `Err` piece aborts the write and leaves the file as it was. The
    /// default gathers the pieces and calls [`Backend::write`]; a chunked tier
    /// stores them as they come, so an upload is never whole in memory.
    fn write_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<WriteOutcome> {
        let mut data = Vec::new();
        for piece in pieces {
            data.extend_from_slice(&piece?);
        }
        self.write(scope, path, data, pre)
    }

    /// Atomically replaces a file's content with `f(current)`, checking
    /// `if_version` against the version `f` saw. The file must exist.
    fn update(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome>;

    /// Deletes a file, or a directory tree when `recursive`; returns the number
    /// of files removed.
    fn delete(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64>;

    /// Moves the file or directory tree at `source` to `destination` as one
    /// atomic step (docs/contract.md § Move): `pre.if_version` applies to the
    /// source (a file), `pre.create_only` to the destination. Missing parent
    /// directories of the destination are created; only a file replaces a
    /// file. Callers have passed [`check_move_paths`].
    fn rename(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome>;

    /// The mounts that can hold branches (docs/branches.md): tiers that
    /// keep files by scope and take changesets. None by default.
    fn branch_mounts(&self) -> Vec<VfsPath> {
        Vec::new()
    }

    /// How long a server may trust a branch record of `mount` it confirmed,
    /// for Reads in the branch, without reading the registry again
    /// (docs/branches.md § Discard). Zero, the default, for tiers one server
    /// owns: a registry read there costs no round trip. A tier that servers
    /// share gives a lease, and every discard of a branch there waits it out
    /// between removing the branch's record and clearing its changes.
    fn branch_record_lease(&self, mount: &VfsPath) -> std::time::Duration {
        let _ = mount;
        std::time::Duration::ZERO
    }

    /// Drops what an internal `scope` (a discarded branch's changes) still
    /// holds on the mount `mount` once its files are deleted: the Filesystem
    /// tier removes the scope's directory; tiers that key files by scope
    /// hold nothing more.
    fn drop_scope(&self, scope: &Scope, mount: &VfsPath) -> Result<()> {
        let _ = (scope, mount);
        Ok(())
    }

    /// Copies the file at `source` to `destination` as one write of the
    /// destination (docs/contract.md § Copy): `pre` applies to the
    /// destination as Write's does, missing parents are created, and the
    /// change is recorded as a write. Callers have checked that the paths
    /// differ and the source's size. The copy gets the source's executable
    /// bit, as `cp` gives it. The default reads the source whole and
    /// writes it (a byte copy, as the object tier does); the Filesystem
    /// tier reflinks, State shares the bytes, Store copies them under the
    /// locks of both keys.
    fn copy(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        let (data, entry) = self.read(scope, source)?;
        let pre = Precondition {
            executable: Some(entry.executable),
            ..pre
        };
        self.write(scope, destination, data, pre)
    }

    /// The mount root whose `.ignore` and `.gitignore` files, from it down,
    /// apply to a search at `path`: the Filesystem tier's mount; `None` for
    /// tiers whose searches read no ignore files. A search in a branch
    /// reads them through the branch (docs/branches.md § On the Filesystem
    /// tier).
    fn ignore_files_root(&self, path: &VfsPath) -> Option<VfsPath> {
        let _ = path;
        None
    }

    /// The mount owning `path`: the mount table's answer; `None` from a tier
    /// on its own (it owns every path it is asked about). Changesets use it
    /// to refuse spanning mounts before any work.
    fn mount_of(&self, path: &VfsPath) -> Option<VfsPath> {
        let _ = path;
        None
    }

    /// Applies a changeset's file changes as one atomic step, all or none
    /// (docs/changesets.md § Tiers): every file must still be at the
    /// version the changeset saw, else `VersionMismatch` and nothing
    /// changes. Answers what happened to each file, in the order given. A
    /// tier that cannot apply several files atomically refuses, naming the
    /// mount.
    fn commit(&self, scope: &Scope, changes: &[FileChange]) -> Result<Vec<FileCommitted>> {
        let _ = scope;
        let path = changes
            .first()
            .map_or(String::new(), |c| c.path.to_string());
        Err(Error::Unsupported(format!(
            "the mount of {path} does not take changesets"
        )))
    }

    /// Runs the Grep or Glob of `run` over `part` (a subtree at or below the
    /// search root, cut to a key range), feeding entries to `run` in path
    /// order. Result paths are matched relative to `run.spec().root`.
    /// Per-file failures are soft (reported through the run); an `Err` means
    /// the search could not start (`part.top` missing, ...).
    fn search(&self, scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()>;

    /// The retained versions of the file at `path`, newest first: its
    /// current version (if it exists), past versions and tombstones.
    fn versions(&self, _scope: &Scope, path: &VfsPath) -> Result<Vec<FileVersion>> {
        Err(no_history(path))
    }

    /// A retained version's metadata and its content in pieces of at most
    /// `max_chunk` bytes (NOT_FOUND when it is not retained; a tombstone's
    /// content is empty).
    fn read_version(
        &self,
        _scope: &Scope,
        path: &VfsPath,
        _version: u64,
        _max_chunk: usize,
    ) -> Result<(FileVersion, ChunkReader)> {
        Err(no_history(path))
    }

    /// Writes the content of retained `version` back as the file's newest
    /// version, `if_version` checked against the current one (0: the file
    /// must not exist).
    fn restore(
        &self,
        _scope: &Scope,
        path: &VfsPath,
        _version: u64,
        _if_version: Option<u64>,
    ) -> Result<WriteOutcome> {
        Err(no_history(path))
    }

    /// Sets `cursor`'s position in every change log that holds changes
    /// under `root` to that log's head (Watch `from_now`).
    fn watch_head(&self, _scope: &Scope, root: &VfsPath, _cursor: &mut ChangeCursor) -> Result<()> {
        Err(no_change_log(root))
    }

    /// Up to about `max` changes under `root` committed after `cursor`, in
    /// each log's commit order, moving `cursor` past every change read
    /// (also those outside `root`). A log the cursor has no position in is
    /// read from its oldest retained change; a position the log no longer
    /// holds is [`Error::Expired`] naming the oldest cursor still available.
    fn changes(
        &self,
        _scope: &Scope,
        root: &VfsPath,
        _cursor: &mut ChangeCursor,
        _max: usize,
    ) -> Result<Vec<Change>> {
        Err(no_change_log(root))
    }

    /// Receivers that change whenever a log holding changes under `root`
    /// may have grown, for a Watch to wait on without polling.
    fn change_signals(&self, _root: &VfsPath, _out: &mut Vec<watch::Receiver<u64>>) {}
}
