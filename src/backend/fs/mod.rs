//! The Filesystem tier: a real host directory, sandboxed, mounted at a logical
//! prefix (`/workspace` by default).
//!
//! Request flow: the mount table routes a call here with a logical path
//! (`/workspace/src/lib.rs`); [`sandbox`] turns it into a lookup relative to the
//! root handle that the kernel confines beneath the root; answers carry logical
//! paths only. Search is [`search`]: an ordered, parallel walk feeding the
//! shared engine in `crate::search`.
//!
//! Invariants:
//! - nothing outside the root is read, written, listed, deleted or searched:
//!   not by `..` (rejected by path validation), absolute paths, symbolic links
//!   or a race that swaps a directory for a link (see [`sandbox`]);
//! - a grant holds for the object actually reached: a symbolic link is
//!   followed (by reads, listings, stats and search roots; a search's walk
//!   never follows one) only when the caller holds at the link's logical
//!   target every right of the operation's kind it holds at the path it
//!   named (see `link_rule`), so a link in a granted directory cannot lead
//!   to an ungranted file;
//! - writes, edits and deletes never go through a link in any component
//!   (`PERMISSION_DENIED`); deleting a link removes the link itself;
//! - writes are atomic: the new content goes to an unnamed temporary file
//!   (`O_TMPFILE`; a named `.agentvfs-*.tmp` where the file system lacks
//!   them) in the target's directory, takes the old file's owner (where the
//!   server may) and permission bits (never setuid, setgid or sticky), is
//!   fsynced, named and renamed over the target (then the directory is
//!   fsynced), so a reader sees the old or the new content, never a mix, and
//!   a crash leaves one of the two; a `kill -9` while the content is being
//!   written leaves nothing behind (only one between naming and renaming, a
//!   window of two system calls, can leave a `.agentvfs-*.tmp`); missing
//!   parent directories are created;
//! - a Move is one `renameat2` between the handles of the source's and the
//!   destination's parent directories, each reached with no link in any
//!   component (`PERMISSION_DENIED` otherwise), so neither end leaves the
//!   root and a grant checked on either logical path holds for what moves
//!   and where it lands; a source that is a link moves the link, never its
//!   target; missing parents of the destination are created as a write
//!   creates them; `create_only` and a directory source rename with
//!   `RENAME_NOREPLACE`, so the kernel, not a check that could race, keeps
//!   them from replacing anything; the moved file gets a version above every
//!   version its new path had (see `FsBackend::moved_version`), while the
//!   files below a moved directory keep theirs (their inodes are not
//!   touched by the rename; docs/tiers.md § Filesystem says what that
//!   allows);
//! - files are streamed: ReadBytes reads and WriteBytes writes one piece at a
//!   time, so a large transfer never holds a whole file in memory;
//! - versions are time stamps in nanoseconds (see [`sandbox::version`]) that
//!   grow on every agentvfs write; `create_only` is enforced by the kernel
//!   (`renameat2(RENAME_NOREPLACE)`), not by a check that could race.
//!
//! Concurrency: a write fills its temporary file without a lock, then holds a
//! per-path lock (one of [`LOCK_STRIPES`] mutexes chosen by the path's hash)
//! while it checks its precondition against the file there now and renames.
//! [`Backend::update`] (Edit) holds the lock across read, transform and
//! rename, so two agentvfs edits never lose an update. A Move holds the
//! locks of both its paths while it checks `if_version` and renames. Against a process
//! writing the host file directly the guarantee is weaker: a change that
//! lands in the microseconds between the check and the rename is overwritten.
//!
//! Files by protocol: `write` (Write, WriteBytes and the commit of an
//! Edit), `read` (opening a file as one version), `moves` (Move), `copy` (Copy, by reflink), `tree`
//! (walks of a directory for recursive Delete and Move), `changes` (the
//! change log and the disk's own events), `search` and `prefetch` (Glob and
//! Grep), `sandbox` (confinement beneath the root), `ignore_files` (reading
//! the ignore files a search's rules come from, `crate::search::ignore_rules`
//! compiling and matching them); this file holds the locks,
//! listings, stats, Edit and Delete.
//!
//! Errors: the kernel's `EACCES`/`EPERM` become `PERMISSION_DENIED` naming the
//! logical path, links leading out `PERMISSION_DENIED`, missing paths
//! `NOT_FOUND`, files over the size limit `RESOURCE_EXHAUSTED`, devices,
//! sockets and pipes `INVALID_ARGUMENT`.

pub mod changes;
mod changeset;
mod copy;
mod fingerprint;
mod grep_file;
mod ignore_files;
mod index;
mod mirror;
mod moves;
pub mod prefetch;
mod read;
pub mod sandbox;
mod scopes;
pub mod search;
mod table_walk;
mod tree;
mod write;

use super::{
    Backend, ChunkReader, ChunkSource, FileChange, FileCommitted, MoveOutcome, Precondition,
    UpdateFn, WriteOutcome, check_directory_delete,
};
use crate::access::{Op, OpSet};
use crate::change::{Change, ChangeCursor, ChangeKind, Operation, Origin};
use crate::entry::{Entry, EntryKind};
use crate::error::{Error, Result};
use crate::path::{VfsPath, check_name};
use crate::scope::Scope;
use crate::search::index::IndexSettings;
use crate::search::{SearchKind, SearchPart, SearchRun};
use changes::FsChanges;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use sandbox::{DIR_FLAGS, Links, READ_FLAGS, Sandbox, errno, file_type};
use std::ffi::CString;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio::sync::watch;
use tree::remove_tree;

/// Number of per-path locks: paths share a lock only when their hashes
/// collide, which merely serialises two unrelated writes; no map of locks has
/// to be grown or cleaned.
pub const LOCK_STRIPES: usize = 64;
/// Mode of a newly created file before the umask (like `touch`).
const NEW_FILE_MODE: u32 = 0o666;
/// The permission bits a replaced file keeps: never setuid, setgid or sticky,
/// so a rewrite (by a server that may run as root) cannot leave a privileged
/// executable behind.
const KEPT_MODE_BITS: u32 = 0o777;
/// Bytes read from disk per ReadBytes piece at most (the piece size the
/// caller asks for is capped by it too).
const READ_PIECE_BYTES: usize = 1 << 20;

// The operations a link's target must allow, per kind of access: a link is
// followed only when the caller holds at its target every one of these that
// it holds at the path naming it, so no operation checked on the logical
// path can reach an object the caller's grants do not cover.
const LIST_OPS: &[Op] = &[Op::List];
const STAT_OPS: &[Op] = &[Op::File];
const READ_OPS: &[Op] = &[Op::ReadFile, Op::ReadBinary, Op::ReadRe];
const GREP_OPS: &[Op] = &[Op::ReadRe];

/// A sandboxed real directory; see the module doc.
pub struct FsBackend {
    sandbox: Arc<Sandbox>,
    max_file_bytes: u64,
    /// The change log, unless the mount keeps none (`change_log = 0`).
    changes: Option<Arc<FsChanges>>,
    locks: [RwLock<()>; LOCK_STRIPES],
    /// Makes temporary file names unique within this process.
    temp_counter: AtomicU64,
    /// The changeset journal, once [`FsBackend::with_journal`] gave one.
    journal: Option<changeset::Journal>,
    /// The served directory on the host, resolved (to keep the journal out
    /// of it).
    host_root: std::path::PathBuf,
    /// Agentvfs' own scopes (branches), once [`FsBackend::with_branches`]
    /// gave them a directory.
    internal: Option<scopes::InternalScopes>,
    /// This tier serves one internal scope's directory (a branch's): every
    /// call is that scope's.
    serves_internal: bool,
    /// The mount's search index, once [`FsBackend::with_search_index`]
    /// turned it on.
    index: Option<Arc<index::FsIndex>>,
}

/// The rule of [`Links::Follow`] for `scope`'s caller reaching `path` with
/// an operation of `family`: the target must grant every operation of
/// `family` the caller holds at `path`.
fn link_rule<'a>(
    scope: &'a Scope,
    path: &'a VfsPath,
    family: &'a [Op],
) -> impl Fn(&VfsPath) -> Result<()> + 'a {
    let held: OpSet = family.iter().copied().collect();
    let needed = scope.principal.ops_on(path).intersect(held);
    move |target: &VfsPath| {
        if scope.principal.ops_on(target).intersect(needed) == needed {
            Ok(())
        } else {
            Err(Error::PermissionDenied(format!(
                "{path}: a symbolic link on the way leads outside your grants"
            )))
        }
    }
}

impl FsBackend {
    /// Opens the tier for `root` mounted at `mount`; reads and writes of
    /// files over `max_file_bytes` fail with `TooLarge`; the change log
    /// keeps the last `change_log` changes (0: no log).
    pub fn open(
        mount: VfsPath,
        root: &Path,
        max_file_bytes: u64,
        change_log: usize,
    ) -> Result<FsBackend> {
        let changed = Arc::new(watch::Sender::new(0));
        FsBackend::open_signalling(mount, root, max_file_bytes, change_log, changed)
    }

    /// [`FsBackend::open`], its change log bumping `changed` after every
    /// change (one sender for every branch of a mount: `scopes`).
    fn open_signalling(
        mount: VfsPath,
        root: &Path,
        max_file_bytes: u64,
        change_log: usize,
        changed: Arc<watch::Sender<u64>>,
    ) -> Result<FsBackend> {
        let sandbox = Arc::new(Sandbox::open(mount, root)?);
        let changes =
            (change_log > 0).then(|| FsChanges::new(sandbox.clone(), root, change_log, changed));
        Ok(FsBackend {
            sandbox,
            max_file_bytes,
            changes,
            locks: std::array::from_fn(|_| RwLock::new(())),
            temp_counter: AtomicU64::new(0),
            journal: None,
            host_root: root.canonicalize().unwrap_or_else(|_| root.to_owned()),
            internal: None,
            serves_internal: false,
            index: None,
        })
    }

    /// The tier taking branches (docs/branches.md § On the Filesystem
    /// tier), their changes kept below `dir` (the server's data directory,
    /// never below the served root), each branch in a directory of its own
    /// (src/backend/fs/scopes.rs). Branch changes keep the mount's change
    /// log length.
    pub fn with_branches(mut self, dir: &Path) -> Result<FsBackend> {
        let scopes = scopes::InternalScopes::new(
            dir,
            self.sandbox.mount().clone(),
            self.max_file_bytes,
            self.changes.as_ref().map_or(0, |c| c.capacity()),
        )?;
        if scopes.dir().starts_with(&self.host_root) {
            return Err(Error::InvalidArgument(format!(
                "the branch directory {} lies inside the served directory",
                dir.display()
            )));
        }
        self.internal = Some(scopes);
        Ok(self)
    }

    /// The tier serving an internal `scope` (a branch's changes), `None`
    /// for a caller's scope: this one.
    fn internal(&self, scope: &Scope) -> Result<Option<Arc<FsBackend>>> {
        if self.serves_internal {
            return Ok(None);
        }
        match &self.internal {
            Some(scopes) => scopes.of(scope),
            None if scope.namespace.starts_with(crate::scope::INTERNAL_SCOPE) => {
                Err(Error::Unsupported(format!(
                    "the mount {} keeps no branches",
                    self.sandbox.mount()
                )))
            }
            None => Ok(None),
        }
    }

    /// The tier with its search index as `settings` say, kept across
    /// restarts in `dir` (the server's data directory, never below the
    /// served root): docs/search-index.md § The Filesystem tier.
    pub fn with_search_index(mut self, settings: IndexSettings, dir: &Path) -> Result<FsBackend> {
        if !settings.enabled {
            return Ok(self);
        }
        let resolved = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
        if resolved.starts_with(&self.host_root) {
            return Err(Error::InvalidArgument(format!(
                "the search index {} lies inside the served directory",
                dir.display()
            )));
        }
        let index = index::FsIndex::new(self.sandbox.try_clone()?, settings, dir);
        self.index = Some(Arc::new(index));
        Ok(self)
    }

    /// The tier taking changesets, with its intent journal in `dir` (the
    /// server's data directory, never below the served root): finishes or
    /// undoes first what changesets left there when the server stopped
    /// (src/backend/fs/changeset.rs).
    pub fn with_journal(mut self, dir: &Path) -> Result<FsBackend> {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::Internal(format!("cannot create the journal {}: {e}", dir.display()))
        })?;
        let resolved = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        if resolved.starts_with(&self.host_root) {
            return Err(Error::InvalidArgument(format!(
                "the changeset journal {} lies inside the served directory",
                dir.display()
            )));
        }
        let journal = changeset::Journal::open(dir)?;
        self.recover(&journal)?;
        self.journal = Some(journal);
        Ok(self)
    }

    /// Marks `path` (and everything below it) as about to be changed by
    /// agentvfs, so the disk's events of the change are not logged again
    /// as external (`changes::FsChanges::expect`).
    fn expect(&self, path: &VfsPath) {
        if let Some(changes) = &self.changes {
            changes.expect(path);
        }
    }

    /// Logs a change agentvfs made (when the mount keeps a log); the caller
    /// still holds the path's lock, so one path's changes log in order.
    fn record(
        &self,
        scope: &Scope,
        path: &VfsPath,
        kind: ChangeKind,
        (version, size): (u64, u64),
        operation: Operation,
        moved: Option<&VfsPath>,
    ) {
        if let Some(changes) = &self.changes {
            let origin = Origin::of(scope, operation);
            changes.record(path, kind, version, size, origin, moved.cloned());
        }
    }

    /// Logs a write's outcome (created or modified).
    fn record_write(&self, scope: &Scope, out: &WriteOutcome, operation: Operation) {
        let kind = if out.created {
            ChangeKind::Created
        } else {
            ChangeKind::Modified
        };
        let stamp = (out.version, out.bytes_written);
        self.record(scope, &out.path, kind, stamp, operation, None);
    }

    /// The index of `path`'s lock among [`LOCK_STRIPES`].
    fn stripe(path: &VfsPath) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        path.hash(&mut h);
        h.finish() as usize % LOCK_STRIPES
    }

    fn lock_stripe(&self, stripe: usize) -> RwLockWriteGuard<'_, ()> {
        // The guarded value is `()`: a poisoned lock protects nothing broken.
        self.locks[stripe]
            .write()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The lock of `path` for a change: no other agentvfs change of the
    /// path, and no read or stat of it, runs until it is dropped.
    fn lock(&self, path: &VfsPath) -> RwLockWriteGuard<'_, ()> {
        self.lock_stripe(Self::stripe(path))
    }

    /// The lock of `path` for a look (read, stat): shared with other looks,
    /// but never held while an agentvfs change of the path is half done (a
    /// Move between its rename and the version it then sets).
    fn look(&self, path: &VfsPath) -> RwLockReadGuard<'_, ()> {
        let stripe = &self.locks[Self::stripe(path)];
        stripe.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The locks of two paths, taken in stripe order (so two Moves locking
    /// the same pair from opposite ends cannot deadlock); one lock when both
    /// share a stripe.
    fn lock_two(&self, a: &VfsPath, b: &VfsPath) -> [Option<RwLockWriteGuard<'_, ()>>; 2] {
        let (first, second) = match (Self::stripe(a), Self::stripe(b)) {
            (i, j) if i < j => (i, Some(j)),
            (i, j) if i > j => (j, Some(i)),
            (i, _) => (i, None),
        };
        let first = self.lock_stripe(first);
        [Some(first), second.map(|s| self.lock_stripe(s))]
    }

    /// The entry of `path` from its (not followed) metadata.
    fn entry(&self, scope: &Scope, path: VfsPath, st: &Stat) -> Entry {
        let modified = sandbox::modified(st);
        let kind = match file_type(st) {
            FileType::Directory => EntryKind::Directory,
            FileType::Symlink => {
                let rule = link_rule(scope, &path, LIST_OPS);
                EntryKind::Symlink {
                    to_directory: self
                        .sandbox
                        .link_target(&path, &rule)
                        .is_some_and(|t| file_type(&t) == FileType::Directory),
                }
            }
            _ => EntryKind::File,
        };
        let is_dir = kind == EntryKind::Directory;
        Entry {
            path,
            kind,
            size: if is_dir { 0 } else { st.st_size as u64 },
            modified,
            created: modified,
            version: if is_dir { 0 } else { sandbox::version(st) },
            executable: kind == EntryKind::File && sandbox::executable(st),
        }
    }
}

/// The valid UTF-8 names in a directory (`.` and `..` left out); others are
/// logged and skipped: a name that cannot be a logical path is never mangled
/// into one.
fn child_names(dir: &VfsPath, fd: &OwnedFd) -> Result<Vec<(String, FileType)>> {
    let mut out = Vec::new();
    sandbox::for_each_entry(fd, |name, kind| {
        let bytes = name.to_bytes();
        match std::str::from_utf8(bytes).map(|n| (check_name(n), n)) {
            Ok((Ok(()), name)) => out.push((name.to_owned(), kind)),
            _ => tracing::warn!(
                dir = %dir,
                name = %bytes.escape_ascii(),
                "skipping a file name that is not a valid logical path segment"
            ),
        }
    })
    .map_err(|e| errno(dir, e))?;
    Ok(out)
}

/// The last component `name` of `path` as a C string (logical names hold no
/// NUL; the check keeps that an error rather than a panic).
fn c_name(path: &VfsPath, name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| Error::invalid_path(path.as_str(), "NUL in name"))
}

/// Checks `if_version` against the non-directory `st` at `path` (Delete and
/// Move of a file): a link has no version of its own, so a condition on one
/// is refused rather than checked against whatever it points to.
fn check_leaf_version(path: &VfsPath, st: &Stat, if_version: Option<u64>) -> Result<()> {
    if if_version.is_some() && file_type(st) == FileType::Symlink {
        return Err(Error::PermissionDenied(format!(
            "{path} is a symbolic link; it has no version of its own"
        )));
    }
    Precondition::if_version(if_version).check(path, Some(sandbox::version(st)))
}

impl Backend for FsBackend {
    fn list(&self, scope: &Scope, dir: &VfsPath) -> Result<Vec<Entry>> {
        if let Some(own) = self.internal(scope)? {
            return own.list(scope, dir);
        }
        let rule = link_rule(scope, dir, LIST_OPS);
        let fd = self.sandbox.open_at(dir, DIR_FLAGS, Links::Follow(&rule))?;
        let mut entries = Vec::new();
        for (name, _) in child_names(dir, &fd)? {
            let path = dir.join(&name)?;
            match rustix::fs::statat(&fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => entries.push(self.entry(scope, path, &st)),
                // Removed since the directory was read.
                Err(Errno::NOENT) => {}
                Err(e) => return Err(errno(&path, e)),
            }
        }
        entries.sort_by_key(|e| e.path.order_key());
        Ok(entries)
    }

    fn stat(&self, scope: &Scope, path: &VfsPath) -> Result<Entry> {
        if let Some(own) = self.internal(scope)? {
            return own.stat(scope, path);
        }
        let rule = link_rule(scope, path, STAT_OPS);
        let _look = self.look(path);
        let st = self.sandbox.lstat(path, Links::Follow(&rule))?;
        Ok(self.entry(scope, path.clone(), &st))
    }

    fn read(&self, scope: &Scope, path: &VfsPath) -> Result<(Vec<u8>, Entry)> {
        self.read_admitted(scope, path, &mut |_| Ok(()))
    }

    /// The file opened and its metadata admitted, then read whole.
    fn read_admitted(
        &self,
        scope: &Scope,
        path: &VfsPath,
        admit: &mut super::Admit<'_>,
    ) -> Result<(Vec<u8>, Entry)> {
        if let Some(own) = self.internal(scope)? {
            return own.read_admitted(scope, path, admit);
        }
        let rule = link_rule(scope, path, READ_OPS);
        let (fd, st) = self.open_named(path, &rule)?;
        let entry = self.entry(scope, path.clone(), &st);
        admit(&entry)?;
        let data = self.read_whole(path, fd, &st)?;
        Ok((data, entry))
    }

    /// Streams the file from disk a piece at a time: a large download holds
    /// one piece in memory, never the file.
    fn read_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        max_chunk: usize,
    ) -> Result<(Entry, ChunkReader)> {
        if let Some(own) = self.internal(scope)? {
            return own.read_chunks(scope, path, max_chunk);
        }
        let rule = link_rule(scope, path, READ_OPS);
        let (fd, st) = self.open_named(path, &rule)?;
        let entry = self.entry(scope, path.clone(), &st);
        let piece = max_chunk.clamp(1, READ_PIECE_BYTES);
        let mut file = std::fs::File::from(fd).take(st.st_size as u64);
        let shown = path.clone();
        let mut first = true;
        let pieces = std::iter::from_fn(move || {
            let mut buf = Vec::with_capacity(piece);
            match (&mut file).take(piece as u64).read_to_end(&mut buf) {
                // A file that shrank while read ends early; an empty file is
                // one empty piece, so a reader always yields at least one.
                Ok(0) if !first => None,
                Ok(_) => {
                    first = false;
                    Some(Ok(buf))
                }
                Err(e) => {
                    first = false;
                    Some(Err(Error::io(shown.as_str(), e)))
                }
            }
        });
        Ok((entry, Box::new(pieces)))
    }

    fn write(
        &self,
        scope: &Scope,
        path: &VfsPath,
        data: Vec<u8>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        if let Some(own) = self.internal(scope)? {
            return own.write(scope, path, data, pre);
        }
        Error::check_file_size(path, data.len() as u64, self.max_file_bytes)?;
        self.write_from(scope, path, pre, &mut std::iter::once(Ok(data)))
    }

    fn write_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<WriteOutcome> {
        if let Some(own) = self.internal(scope)? {
            return own.write_chunks(scope, path, pre, pieces);
        }
        self.write_from(scope, path, pre, pieces)
    }

    /// Reflinks the source where the file system can (`copy`).
    fn copy(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        if let Some(own) = self.internal(scope)? {
            return own.copy(scope, source, destination, pre);
        }
        self.copy_file(scope, source, destination, pre)
    }

    fn update(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        if let Some(own) = self.internal(scope)? {
            return own.update(scope, path, if_version, f);
        }
        let _guard = self.lock(path);
        let (dir, name) = self.sandbox.parent(path, Links::Refuse)?;
        let flags = READ_FLAGS | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let fd =
            rustix::fs::openat(&dir, name, flags, Mode::empty()).map_err(|e| errno(path, e))?;
        let st = self.regular(path, &fd)?;
        let data = self.read_whole(path, fd, &st)?;
        let seen = sandbox::version(&st);
        Precondition::if_version(if_version).check(path, Some(seen))?;
        let new = f(&data)?;
        drop(data);
        let mut temp = self.create_temp(path, &dir)?;
        self.append(path, &mut temp, &new)?;
        let pre = Precondition::if_version(Some(seen));
        self.expect(path);
        let out = self.commit(path, name, temp, pre)?;
        self.record_write(scope, &out, Operation::Edit);
        Ok(out)
    }

    fn delete(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        if let Some(own) = self.internal(scope)? {
            return own.delete(scope, path, if_version, recursive);
        }
        if path == self.sandbox.mount() {
            // A directory like any other to a plain delete; but the tier
            // never removes its own root.
            check_directory_delete(path, if_version, recursive)?;
            return Err(Error::PermissionDenied(format!(
                "{path} is the root of a filesystem mount"
            )));
        }
        let _guard = self.lock(path);
        let (dir, name) = self.sandbox.parent(path, Links::Refuse)?;
        let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| errno(path, e))?;
        let deleted = |file: &VfsPath| {
            let gone = (0, 0);
            self.record(
                scope,
                file,
                ChangeKind::Deleted,
                gone,
                Operation::Delete,
                None,
            );
        };
        if file_type(&st) == FileType::Directory {
            check_directory_delete(path, if_version, recursive)?;
            self.expect(path);
            return remove_tree(&dir, &c_name(path, name)?, path, deleted);
        }
        check_leaf_version(path, &st, if_version)?;
        self.expect(path);
        // Unlinking a link removes the link, never what it points to.
        rustix::fs::unlinkat(&dir, name, AtFlags::empty()).map_err(|e| errno(path, e))?;
        deleted(path);
        Ok(1)
    }

    /// One `renameat2` between the handles of the two parents; see the
    /// module doc (Move).
    fn rename(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        if let Some(own) = self.internal(scope)? {
            return own.rename(scope, source, destination, pre);
        }
        self.move_path(scope, source, destination, pre)
    }

    fn commit(&self, scope: &Scope, changes: &[FileChange]) -> Result<Vec<FileCommitted>> {
        if let Some(own) = self.internal(scope)? {
            return own.commit_changes(scope, changes);
        }
        self.commit_changes(scope, changes)
    }

    fn search(&self, scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()> {
        if let Some(own) = self.internal(scope)? {
            return own.search(scope, run, part);
        }
        let family = match run.spec().kind {
            SearchKind::Glob(_) => LIST_OPS,
            SearchKind::Grep(_) => GREP_OPS,
        };
        let rule = link_rule(scope, &part.top, family);
        let index = self.index.as_deref();
        search::search(&self.sandbox, scope, &rule, run, part, index)
    }

    fn watch_head(&self, scope: &Scope, root: &VfsPath, cursor: &mut ChangeCursor) -> Result<()> {
        if let Some(own) = self.internal(scope)? {
            return own.watch_head(scope, root, cursor);
        }
        let log = changes::log_of(&self.changes, root)?;
        log.follow_disk();
        log.head(cursor);
        Ok(())
    }

    fn changes(
        &self,
        scope: &Scope,
        root: &VfsPath,
        cursor: &mut ChangeCursor,
        max: usize,
    ) -> Result<Vec<Change>> {
        if let Some(own) = self.internal(scope)? {
            return own.changes(scope, root, cursor, max);
        }
        let log = changes::log_of(&self.changes, root)?;
        log.follow_disk();
        log.read(root, cursor, max)
    }

    /// This log's signal and the one every branch of the mount bumps (a
    /// Watch in a branch reads its branch's log; one of the base wakes
    /// early at worst).
    fn change_signals(&self, _root: &VfsPath, out: &mut Vec<watch::Receiver<u64>>) {
        if let Some(log) = &self.changes {
            out.push(log.signal());
        }
        if let Some(scopes) = &self.internal {
            scopes.signals(out);
        }
    }

    fn ignore_files_root(&self, _path: &VfsPath) -> Option<VfsPath> {
        Some(self.sandbox.mount().clone())
    }

    fn branch_mounts(&self) -> Vec<VfsPath> {
        match self.internal {
            Some(_) => vec![self.sandbox.mount().clone()],
            None => Vec::new(),
        }
    }

    fn drop_scope(&self, scope: &Scope, mount: &VfsPath) -> Result<()> {
        match &self.internal {
            Some(scopes) => scopes.drop_scope(scope),
            None => Err(Error::Unsupported(format!(
                "the mount {mount} keeps no branches"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tier alone (no mount table in front) refuses to move its own
    /// root either way, and leaves the directory as it was.
    #[test]
    fn the_mount_root_does_not_move() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "a").unwrap();
        let mount = VfsPath::parse("/workspace").unwrap();
        let fs = FsBackend::open(mount.clone(), tmp.path(), 1 << 20, 0).unwrap();
        let inside = VfsPath::parse("/workspace/a.txt").unwrap();
        for (source, destination) in [(&mount, &inside), (&inside, &mount)] {
            let err = fs
                .rename(
                    &Scope::default(),
                    source,
                    destination,
                    Precondition::default(),
                )
                .unwrap_err();
            assert_eq!(
                err,
                Error::InvalidArgument(
                    "/workspace is a mount root; a mount cannot be moved".into()
                )
            );
        }
        assert!(tmp.path().join("a.txt").is_file());
    }
}
