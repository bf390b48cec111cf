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
//!   them from replacing anything; the moved file gets a version above its
//!   old one and above that of the file it replaced (see
//!   `FsBackend::moved_version`), while the files below a moved directory
//!   keep theirs (their inodes are not touched by the rename);
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
//! Errors: the kernel's `EACCES`/`EPERM` become `PERMISSION_DENIED` naming the
//! logical path, links leading out `PERMISSION_DENIED`, missing paths
//! `NOT_FOUND`, files over the size limit `RESOURCE_EXHAUSTED`, devices,
//! sockets and pipes `INVALID_ARGUMENT`.

pub mod changes;
mod changeset;
pub mod ignore_cache;
pub mod ignore_rules;
pub mod prefetch;
pub mod sandbox;
pub mod search;

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
use crate::search::{SearchKind, SearchPart, SearchRun};
use changes::FsChanges;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Stat, Timestamps};
use rustix::io::Errno;
use sandbox::{DIR_FLAGS, Links, READ_FLAGS, Sandbox, errno, file_type, not_regular};
use std::ffi::{CStr, CString};
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::SystemTime;
use tokio::sync::watch;

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
/// Opens of a file a read tries while the file keeps being replaced under
/// it (each attempt is a few system calls; a writer replaces a file in one).
const OPEN_ATTEMPTS: usize = 64;

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

/// A file being written: an unnamed (`O_TMPFILE`) or, where the file system
/// lacks them, a named temporary file in the target's directory. An unnamed
/// one vanishes with the process, so a `kill -9` mid-write leaves nothing
/// behind; a named one is removed on drop unless committed.
struct Temp<'d> {
    fd: OwnedFd,
    dir: &'d OwnedFd,
    /// The name of a named temporary file, until committed.
    name: Option<String>,
    /// Bytes written.
    size: u64,
}

impl Drop for Temp<'_> {
    fn drop(&mut self) {
        if let Some(name) = &self.name
            && let Err(e) = rustix::fs::unlinkat(self.dir, name.as_str(), AtFlags::empty())
        {
            tracing::warn!(name = %name, cause = %e, "cannot remove temporary file");
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
        let sandbox = Arc::new(Sandbox::open(mount, root)?);
        let changes = (change_log > 0).then(|| FsChanges::new(sandbox.clone(), root, change_log));
        Ok(FsBackend {
            sandbox,
            max_file_bytes,
            changes,
            locks: std::array::from_fn(|_| RwLock::new(())),
            temp_counter: AtomicU64::new(0),
            journal: None,
            host_root: root.canonicalize().unwrap_or_else(|_| root.to_owned()),
        })
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
            let origin = Origin::of(&scope.principal, operation);
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
        }
    }

    /// The regular file a write would replace (`None`: none yet).
    fn current(&self, path: &VfsPath, dir: &OwnedFd, name: &str) -> Result<Option<Stat>> {
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(errno(path, e)),
            Ok(st) => match file_type(&st) {
                FileType::RegularFile => Ok(Some(st)),
                FileType::Directory => Err(Error::IsDirectory(path.to_string())),
                FileType::Symlink => Err(Error::PermissionDenied(format!(
                    "{path} is a symbolic link; agentvfs never writes through links"
                ))),
                _ => Err(not_regular(path)),
            },
        }
    }

    /// A name for a temporary file, unique within this process.
    fn temp_name(&self) -> String {
        format!(
            ".agentvfs-{}-{}.tmp",
            std::process::id(),
            self.temp_counter.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Creates the temporary file of a write into `dir`.
    fn create_temp<'d>(&self, path: &VfsPath, dir: &'d OwnedFd) -> Result<Temp<'d>> {
        let mode = Mode::from_raw_mode(NEW_FILE_MODE as _);
        let unnamed = OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC;
        match rustix::fs::openat(dir, ".", unnamed, mode) {
            Ok(fd) => {
                return Ok(Temp {
                    fd,
                    dir,
                    name: None,
                    size: 0,
                });
            }
            // The file system has no unnamed files: fall back to a name.
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => {}
            Err(e) => return Err(errno(path, e)),
        }
        let name = self.temp_name();
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(dir, name.as_str(), flags, mode).map_err(|e| errno(path, e))?;
        Ok(Temp {
            fd,
            dir,
            name: Some(name),
            size: 0,
        })
    }

    /// Appends `data` to the temporary file, refusing to grow it past the
    /// file size limit.
    fn append(&self, path: &VfsPath, temp: &mut Temp<'_>, data: &[u8]) -> Result<()> {
        Error::check_file_size(path, temp.size + data.len() as u64, self.max_file_bytes)?;
        sandbox::write_all(&temp.fd, data).map_err(|e| errno(path, e))?;
        temp.size += data.len() as u64;
        Ok(())
    }

    /// Puts the written `temp` in place of `name` in `dir` once `pre` holds
    /// against the file there now; see the module doc. The caller holds the
    /// path's lock, so no agentvfs write of the path runs between the check
    /// and the rename.
    fn commit(
        &self,
        path: &VfsPath,
        name: &str,
        mut temp: Temp<'_>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        let os = |e| errno(path, e);
        let dir = temp.dir;
        let old = self.current(path, dir, name)?;
        let old_version = old.as_ref().map(sandbox::version);
        pre.check(path, old_version)?;
        if let Some(st) = &old {
            keep_owner_and_mode(path, &temp.fd, st)?;
        }
        let stamp = sandbox::nanos(SystemTime::now()).max(old_version.unwrap_or(0) + 1);
        let ts = sandbox::timespec(stamp);
        let times = Timestamps {
            last_access: ts,
            last_modification: ts,
        };
        rustix::fs::futimens(&temp.fd, &times).map_err(os)?;
        rustix::fs::fsync(&temp.fd).map_err(os)?;
        let named = match temp.name.take() {
            Some(named) => named,
            None => {
                // Give the unnamed file a name in `dir` through /proc (no
                // capability needed, unlike AT_EMPTY_PATH), then rename it.
                let named = self.temp_name();
                let proc_path = format!("/proc/self/fd/{}", temp.fd.as_raw_fd());
                rustix::fs::linkat(
                    rustix::fs::CWD,
                    proc_path.as_str(),
                    dir,
                    named.as_str(),
                    AtFlags::SYMLINK_FOLLOW,
                )
                .map_err(os)?;
                named
            }
        };
        temp.name = Some(named.clone());
        let rename = if old.is_none() {
            RenameFlags::NOREPLACE
        } else {
            RenameFlags::empty()
        };
        match rustix::fs::renameat_with(dir, named.as_str(), dir, name, rename) {
            Err(Errno::EXIST) => return Err(Error::AlreadyExists(path.to_string())),
            other => other.map_err(os)?,
        }
        // Renamed: nothing left to remove.
        temp.name = None;
        rustix::fs::fsync(dir).map_err(os)?;
        let st = rustix::fs::fstat(&temp.fd).map_err(os)?;
        Ok(WriteOutcome {
            path: path.clone(),
            bytes_written: temp.size,
            version: sandbox::version(&st),
            created: old.is_none(),
        })
    }

    /// Writes `path` from `pieces` (a whole file is one piece): the
    /// precondition is checked first so a doomed upload fails at once, the
    /// pieces go to a temporary file without holding the path's lock (a slow
    /// upload delays no other writer), and the commit re-checks it under the
    /// lock.
    fn write_from(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<WriteOutcome> {
        let (dir, name) = self.sandbox.parent_creating(path)?;
        {
            // A Move landing here holds the path's lock until the file it
            // put here has its new version: look in between, never halfway.
            let _look = self.look(path);
            let early = self.current(path, &dir, name)?;
            pre.check(path, early.as_ref().map(sandbox::version))?;
        }
        let mut temp = self.create_temp(path, &dir)?;
        for piece in pieces {
            self.append(path, &mut temp, &piece?)?;
        }
        let _guard = self.lock(path);
        self.expect(path);
        let out = self.commit(path, name, temp, pre)?;
        self.record_write(scope, &out, Operation::Write);
        Ok(out)
    }

    /// The metadata of a Move's source `name` in `dir` (a link in its last
    /// component is the source itself, never followed) once it passed the
    /// source's checks: a directory takes no `if_version` (like a recursive
    /// Delete), a file's version must equal it.
    fn move_source(
        &self,
        source: &VfsPath,
        dir: &OwnedFd,
        name: &str,
        if_version: Option<u64>,
    ) -> Result<Stat> {
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| errno(source, e))?;
        if file_type(&st) == FileType::Directory {
            check_directory_delete(source, if_version, true)?;
        } else {
            check_leaf_version(source, &st, if_version)?;
        }
        Ok(st)
    }

    /// The files a Move of the source `st` (`name` in `dir`) moves: 1 for a
    /// file or link, and for a directory every non-directory below it, as a
    /// recursive Delete would count them.
    fn files_moved(&self, source: &VfsPath, dir: &OwnedFd, name: &str, st: &Stat) -> Result<u64> {
        if file_type(st) != FileType::Directory {
            return Ok(1);
        }
        count_tree(dir, &c_name(source, name)?, source)
    }

    /// The version of the file a Move just put at `name` in `dir`, made
    /// greater than `floor` (its own old version and that of the file it
    /// replaced), so no `if_version` taken before the Move matches it.
    ///
    /// The rename moved the file's change time forward. Where the kernel
    /// keeps fine-grained change times once they have been read (Linux 6.13
    /// and later on ext4, XFS, btrfs and tmpfs; the Move's own stat reads
    /// it) that alone passes the floor. With coarse change times, a rename in
    /// the same clock tick as the floor leaves the version where it was; then
    /// the modification time is set one nanosecond past the floor, the one
    /// case where a Move changes a file's time. A server that may not set
    /// the times of a file it does not own leaves the version as it is.
    fn moved_version(&self, path: &VfsPath, dir: &OwnedFd, name: &str, floor: u64) -> Result<u64> {
        let os = |e| errno(path, e);
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(os)?;
        if sandbox::version(&st) > floor {
            return Ok(sandbox::version(&st));
        }
        let times = Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: rustix::fs::UTIME_OMIT,
            },
            last_modification: sandbox::timespec(floor + 1),
        };
        match rustix::fs::utimensat(dir, name, &times, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(()) => {}
            Err(Errno::PERM | Errno::ACCESS) => {
                tracing::debug!(path = %path, "cannot move the version of a moved file forward");
                return Ok(sandbox::version(&st));
            }
            Err(e) => return Err(os(e)),
        }
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(os)?;
        Ok(sandbox::version(&st))
    }

    /// Logs a Move that put `source` at `to_name` in `to_dir`
    /// (`destination`): a deletion at the source and a creation (or, when
    /// it `replaced` a file, a modification) at the destination, for the
    /// file or for every file of the moved directory.
    fn record_move(
        &self,
        scope: &Scope,
        (source, destination): (&VfsPath, &VfsPath),
        to_dir: &OwnedFd,
        to_name: &str,
        is_dir: bool,
        replaced: bool,
    ) -> Result<()> {
        let moved = |from: &VfsPath, to: &VfsPath, stamp: (u64, u64), replaced: bool| {
            let came = if replaced {
                ChangeKind::Modified
            } else {
                ChangeKind::Created
            };
            let op = Operation::Move;
            self.record(scope, from, ChangeKind::Deleted, (0, 0), op, Some(to));
            self.record(scope, to, came, stamp, op, Some(from));
        };
        let stamp_of = |dir: &OwnedFd, name: &CStr| {
            rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| (sandbox::version(&st), st.st_size as u64))
                .unwrap_or((0, 0))
        };
        if !is_dir {
            let stamp = stamp_of(to_dir, &c_name(destination, to_name)?);
            moved(source, destination, stamp, replaced);
            return Ok(());
        }
        for_each_file(
            to_dir,
            &c_name(destination, to_name)?,
            destination,
            |dir, chain, leaf| {
                if let (Some(from), Some(to)) =
                    (below(source, chain, leaf), below(destination, chain, leaf))
                {
                    moved(&from, &to, stamp_of(dir, leaf), false);
                }
                Ok(())
            },
        )
    }

    /// Opens the regular file `path` reaches (links followed where `rule`
    /// allows) for reading, with the metadata its version comes from, both
    /// of one file that `path` named at one moment (docs/contract.md §
    /// Versions). The file's own metadata can change after it is opened
    /// although its content does not (every agentvfs write makes a new
    /// file): renaming it away or replacing it, which unlinks it, moves its
    /// change time, and so its version. So once opened, `path` is looked up
    /// again: it must still name this file, linked, with the same times; else
    /// the open is tried again. The look lock keeps agentvfs's own changes of
    /// `path` from landing halfway (a Move sets the version of the file it
    /// moved just after renaming it).
    fn open_named(
        &self,
        path: &VfsPath,
        rule: &dyn Fn(&VfsPath) -> Result<()>,
    ) -> Result<(OwnedFd, Stat)> {
        let _look = self.look(path);
        for _ in 0..OPEN_ATTEMPTS {
            let flags = READ_FLAGS | OFlags::NONBLOCK;
            let fd = self.sandbox.open_at(path, flags, Links::Follow(rule))?;
            let st = self.regular(path, &fd)?;
            if st.st_nlink == 0 {
                continue;
            }
            let again = match self.sandbox.open_at(
                path,
                OFlags::PATH | OFlags::CLOEXEC,
                Links::Follow(rule),
            ) {
                Ok(again) => rustix::fs::fstat(again).map_err(|e| errno(path, e))?,
                Err(Error::NotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            if same_state(&st, &again) {
                return Ok((fd, st));
            }
        }
        Err(Error::Unavailable(format!(
            "{path} kept being replaced while it was opened ({OPEN_ATTEMPTS} times); read it again"
        )))
    }

    /// Reads the whole file `fd` (opened and checked as `st`), refusing
    /// one that grew past the size limit.
    fn read_whole(&self, path: &VfsPath, fd: OwnedFd, st: &Stat) -> Result<Vec<u8>> {
        let mut data = Vec::with_capacity(st.st_size as usize);
        std::fs::File::from(fd)
            .take(self.max_file_bytes + 1)
            .read_to_end(&mut data)
            .map_err(|e| Error::io(path.as_str(), e))?;
        Error::check_file_size(path, data.len() as u64, self.max_file_bytes)?;
        Ok(data)
    }

    /// The metadata of an opened file that must be a regular file within the
    /// size limit.
    fn regular(&self, path: &VfsPath, fd: &OwnedFd) -> Result<Stat> {
        let st = rustix::fs::fstat(fd).map_err(|e| errno(path, e))?;
        match file_type(&st) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(Error::IsDirectory(path.to_string())),
            _ => return Err(not_regular(path)),
        }
        Error::check_file_size(path, st.st_size as u64, self.max_file_bytes)?;
        Ok(st)
    }
}

/// Gives the new content of a replaced file the old file's owner (where the
/// server may: a server running as another user keeps its own) and its
/// permission bits without setuid, setgid or sticky. The owner goes first:
/// changing it clears those bits anyway.
fn keep_owner_and_mode(path: &VfsPath, fd: &OwnedFd, old: &Stat) -> Result<()> {
    let st = rustix::fs::fstat(fd).map_err(|e| errno(path, e))?;
    if (st.st_uid, st.st_gid) != (old.st_uid, old.st_gid) {
        let owner = Some(rustix::fs::Uid::from_raw(old.st_uid));
        let group = Some(rustix::fs::Gid::from_raw(old.st_gid));
        match rustix::fs::fchown(fd, owner, group) {
            Ok(()) => {}
            // Not permitted for this server's user: the file becomes its own.
            Err(Errno::PERM) => {
                tracing::debug!(path = %path, "cannot keep the owner of a replaced file")
            }
            Err(e) => return Err(errno(path, e)),
        }
    }
    let mode = Mode::from_raw_mode((old.st_mode & KEPT_MODE_BITS) as _);
    rustix::fs::fchmod(fd, mode).map_err(|e| errno(path, e))
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

/// One directory on the way down of [`walk_tree`].
struct Descent {
    /// Its name in its parent.
    name: CString,
    /// Device and inode: the parent reached back through `..` must be the
    /// one the walk came from, or the tree was moved and the walk stops.
    id: (u64, u64),
    /// Subdirectories still to walk.
    subdirs: Vec<CString>,
}

/// The device and inode of an open directory.
#[allow(clippy::unnecessary_cast)]
fn identity(path: &VfsPath, fd: &OwnedFd) -> Result<(u64, u64)> {
    let st = rustix::fs::fstat(fd).map_err(|e| errno(path, e))?;
    Ok((st.st_dev as u64, st.st_ino as u64))
}

/// Walks the directory `name` in `parent` and everything below it without
/// following any link: `leaf(dir, name)` is called for every non-directory
/// (a link is a leaf: it is never followed), and `finished(parent, name)`
/// for every directory once everything below it was walked, deepest first
/// and `name` itself last. Names are passed as raw bytes: non-UTF-8 names
/// are walked too.
///
/// Iterative with one open directory at a time, whatever the depth: the way
/// down is a stack of names (a tree 15,000 levels deep neither overflows the
/// stack nor runs out of descriptors), and the way up opens `..`, checked to
/// be the directory the walk came down from.
fn walk_tree(
    parent: &OwnedFd,
    name: &CStr,
    path: &VfsPath,
    mut leaf: impl FnMut(&OwnedFd, &[CString], &CStr) -> Result<()>,
    mut finished: impl FnMut(&OwnedFd, &CStr) -> Result<()>,
) -> Result<()> {
    let os = |e| errno(path, e);
    let open = |dir: &OwnedFd, name: &CStr| {
        rustix::fs::openat(dir, name, DIR_FLAGS | OFlags::NOFOLLOW, Mode::empty()).map_err(os)
    };
    // Calls `leaf` for the non-directories of `fd` (at `chain` below
    // `name`) and returns its subdirectories. The names are read first:
    // `leaf` may remove them.
    let mut visit = |fd: &OwnedFd, chain: &[CString]| -> Result<Vec<CString>> {
        let mut children = Vec::new();
        sandbox::for_each_entry(fd, |name, kind| children.push((name.to_owned(), kind)))
            .map_err(os)?;
        let mut subdirs = Vec::new();
        for (child, kind) in children {
            let kind = match kind {
                FileType::Unknown => {
                    rustix::fs::statat(fd, child.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)
                        .map(|st| file_type(&st))
                        .map_err(os)?
                }
                known => known,
            };
            if kind == FileType::Directory {
                subdirs.push(child);
            } else {
                leaf(fd, chain, &child)?;
            }
        }
        Ok(subdirs)
    };
    let mut fd = open(parent, name)?;
    // The names of the directories from `name` (excluded) down to `fd`.
    let mut chain: Vec<CString> = Vec::new();
    let mut stack = vec![Descent {
        name: name.to_owned(),
        id: identity(path, &fd)?,
        subdirs: visit(&fd, &chain)?,
    }];
    while let Some(top) = stack.last_mut() {
        if let Some(sub) = top.subdirs.pop() {
            fd = open(&fd, &sub)?;
            chain.push(sub.clone());
            let subdirs = visit(&fd, &chain)?;
            stack.push(Descent {
                name: sub,
                id: identity(path, &fd)?,
                subdirs,
            });
            continue;
        }
        // Everything below `top` is walked: go up.
        let done = stack.pop().expect("the loop holds a top");
        chain.pop();
        let (up, up_id) = match stack.last() {
            Some(above) => (open(&fd, c"..")?, above.id),
            None => break,
        };
        if identity(path, &up)? != up_id {
            return Err(Error::Internal(format!(
                "{path}: the tree was moved while it was being walked; the walk stopped"
            )));
        }
        finished(&up, &done.name)?;
        fd = up;
    }
    finished(parent, name)
}

/// The logical path of the file `leaf` at `chain` below the directory
/// `top`; `None` for a name no logical path can hold (not UTF-8, ...).
fn below(top: &VfsPath, chain: &[CString], leaf: &CStr) -> Option<VfsPath> {
    let mut path = top.clone();
    for name in chain.iter().map(CString::as_c_str).chain([leaf]) {
        path = path.join(name.to_str().ok()?).ok()?;
    }
    Some(path)
}

/// Removes the directory `name` in `parent` (`path`) and everything below
/// it without following any link, telling `removed` the logical path of
/// each non-directory removed; returns how many were.
fn remove_tree(
    parent: &OwnedFd,
    name: &CStr,
    path: &VfsPath,
    mut removed: impl FnMut(&VfsPath),
) -> Result<u64> {
    let os = |e| errno(path, e);
    let mut count = 0;
    walk_tree(
        parent,
        name,
        path,
        |dir, chain, leaf| {
            rustix::fs::unlinkat(dir, leaf, AtFlags::empty()).map_err(os)?;
            count += 1;
            if let Some(file) = below(path, chain, leaf) {
                removed(&file);
            }
            Ok(())
        },
        |up, dir| rustix::fs::unlinkat(up, dir, AtFlags::REMOVEDIR).map_err(os),
    )?;
    Ok(count)
}

/// Calls `f` with the directory, the chain of names below `name` and the
/// name of every non-directory in the directory `name` in `parent` (`path`)
/// and below it (links included, never followed).
fn for_each_file(
    parent: &OwnedFd,
    name: &CStr,
    path: &VfsPath,
    f: impl FnMut(&OwnedFd, &[CString], &CStr) -> Result<()>,
) -> Result<()> {
    walk_tree(parent, name, path, f, |_, _| Ok(()))
}

/// The number of non-directories in the directory `name` in `parent` and
/// below it (links counted, never followed): what [`remove_tree`] would
/// remove, and what a Move of the directory reports as moved.
fn count_tree(parent: &OwnedFd, name: &CStr, path: &VfsPath) -> Result<u64> {
    let mut count = 0;
    for_each_file(parent, name, path, |_, _, _| {
        count += 1;
        Ok(())
    })?;
    Ok(count)
}

/// The last component `name` of `path` as a C string (logical names hold no
/// NUL; the check keeps that an error rather than a panic).
fn c_name(path: &VfsPath, name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| Error::invalid_path(path.as_str(), "NUL in name"))
}

/// True when `a` and `b`, two looks at a file, saw the same file in the
/// same state: same inode, same times (so the same version), same size.
#[allow(clippy::unnecessary_cast)]
fn same_state(a: &Stat, b: &Stat) -> bool {
    (a.st_dev, a.st_ino, a.st_size) == (b.st_dev, b.st_ino, b.st_size)
        && (a.st_mtime as i64, a.st_mtime_nsec as u64)
            == (b.st_mtime as i64, b.st_mtime_nsec as u64)
        && (a.st_ctime as i64, a.st_ctime_nsec as u64)
            == (b.st_ctime as i64, b.st_ctime_nsec as u64)
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
    Precondition {
        create_only: false,
        if_version,
    }
    .check(path, Some(sandbox::version(st)))
}

impl Backend for FsBackend {
    fn list(&self, scope: &Scope, dir: &VfsPath) -> Result<Vec<Entry>> {
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
        let rule = link_rule(scope, path, STAT_OPS);
        let _look = self.look(path);
        let st = self.sandbox.lstat(path, Links::Follow(&rule))?;
        Ok(self.entry(scope, path.clone(), &st))
    }

    fn read(&self, scope: &Scope, path: &VfsPath) -> Result<(Vec<u8>, Entry)> {
        let rule = link_rule(scope, path, READ_OPS);
        let (fd, st) = self.open_named(path, &rule)?;
        let data = self.read_whole(path, fd, &st)?;
        Ok((data, self.entry(scope, path.clone(), &st)))
    }

    /// Streams the file from disk a piece at a time: a large download holds
    /// one piece in memory, never the file.
    fn read_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        max_chunk: usize,
    ) -> Result<(Entry, ChunkReader)> {
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
        self.write_from(scope, path, pre, pieces)
    }

    fn update(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        let _guard = self.lock(path);
        let (dir, name) = self.sandbox.parent(path, Links::Refuse)?;
        let flags = READ_FLAGS | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let fd =
            rustix::fs::openat(&dir, name, flags, Mode::empty()).map_err(|e| errno(path, e))?;
        let st = self.regular(path, &fd)?;
        let data = self.read_whole(path, fd, &st)?;
        let seen = sandbox::version(&st);
        Precondition {
            create_only: false,
            if_version,
        }
        .check(path, Some(seen))?;
        let new = f(&data)?;
        drop(data);
        let mut temp = self.create_temp(path, &dir)?;
        self.append(path, &mut temp, &new)?;
        let pre = Precondition {
            create_only: false,
            if_version: Some(seen),
        };
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
        for path in [source, destination] {
            if path == self.sandbox.mount() {
                return Err(super::unmovable_mount(path));
            }
        }
        // Below a missing directory or a file, the source does not exist
        // (`Sandbox::parent` says so).
        let (from_dir, from_name) = self.sandbox.parent(source, Links::Refuse)?;
        // Checked and counted before the destination's parents are created
        // and without the locks (counting a large tree takes a while)...
        let seen = {
            let _look = self.look(source);
            self.move_source(source, &from_dir, from_name, pre.if_version)?
        };
        let mut files_moved = self.files_moved(source, &from_dir, from_name, &seen)?;
        let (to_dir, to_name) = self.sandbox.parent_creating(destination)?;
        // ...and checked again under the locks of both paths, which every
        // agentvfs write, edit and delete of them holds too. Against another
        // process changing the source directly there is a window of one
        // system call between this check and the rename: a disk cannot check
        // a version and rename in one step.
        let _locks = self.lock_two(source, destination);
        let now = self.move_source(source, &from_dir, from_name, pre.if_version)?;
        let is_dir = file_type(&now) == FileType::Directory;
        if is_dir != (file_type(&seen) == FileType::Directory) {
            files_moved = self.files_moved(source, &from_dir, from_name, &now)?;
        }
        let target = match rustix::fs::statat(&to_dir, to_name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Some(st),
            Err(Errno::NOENT) => None,
            Err(e) => return Err(errno(destination, e)),
        };
        let floor = match &target {
            Some(st) if file_type(st) != FileType::Directory => {
                sandbox::version(&now).max(sandbox::version(st))
            }
            _ => sandbox::version(&now),
        };
        let flags = if pre.create_only || is_dir {
            RenameFlags::NOREPLACE
        } else {
            RenameFlags::empty()
        };
        let same_file = target
            .as_ref()
            .is_some_and(|st| (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino));
        self.expect(source);
        self.expect(destination);
        let moved = if same_file && !pre.create_only {
            // Two names of one file: rename(2) would leave both in place.
            rustix::fs::unlinkat(&from_dir, from_name, AtFlags::empty())
        } else {
            rustix::fs::renameat_with(&from_dir, from_name, &to_dir, to_name, flags)
        };
        moved.map_err(|e| match e {
            Errno::NOENT => Error::NotFound(source.to_string()),
            Errno::EXIST | Errno::NOTEMPTY => Error::AlreadyExists(destination.to_string()),
            Errno::ISDIR => Error::IsDirectory(destination.to_string()),
            // A directory onto a file (the parents are handles, so no
            // ancestor is in question): NOREPLACE answers EEXIST first, so
            // only a source that became a directory since it was checked.
            Errno::NOTDIR => Error::NotDirectory(destination.to_string()),
            Errno::XDEV => Error::InvalidArgument(format!(
                "cannot move {source} to {destination}: they are on different file systems \
                 below the root"
            )),
            e => errno(source, e),
        })?;
        rustix::fs::fsync(&to_dir).map_err(|e| errno(destination, e))?;
        if identity(source, &from_dir)? != identity(destination, &to_dir)? {
            rustix::fs::fsync(&from_dir).map_err(|e| errno(source, e))?;
        }
        let version = if is_dir {
            0
        } else {
            self.moved_version(destination, &to_dir, to_name, floor)?
        };
        if self.changes.is_some() {
            let replaced = target.is_some();
            self.record_move(
                scope,
                (source, destination),
                &to_dir,
                to_name,
                is_dir,
                replaced,
            )?;
        }
        Ok(MoveOutcome {
            files_moved,
            version,
        })
    }

    fn commit(&self, scope: &Scope, changes: &[FileChange]) -> Result<Vec<FileCommitted>> {
        self.commit_changes(scope, changes)
    }

    fn search(&self, scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()> {
        let family = match run.spec().kind {
            SearchKind::Glob(_) => LIST_OPS,
            SearchKind::Grep(_) => GREP_OPS,
        };
        let rule = link_rule(scope, &part.top, family);
        search::search(&self.sandbox, scope, &rule, run, part)
    }

    fn watch_head(&self, _scope: &Scope, root: &VfsPath, cursor: &mut ChangeCursor) -> Result<()> {
        let log = changes::log_of(&self.changes, root)?;
        log.follow_disk();
        log.head(cursor);
        Ok(())
    }

    fn changes(
        &self,
        _scope: &Scope,
        root: &VfsPath,
        cursor: &mut ChangeCursor,
        max: usize,
    ) -> Result<Vec<Change>> {
        let log = changes::log_of(&self.changes, root)?;
        log.follow_disk();
        log.read(root, cursor, max)
    }

    fn change_signals(&self, _root: &VfsPath, out: &mut Vec<watch::Receiver<u64>>) {
        if let Some(log) = &self.changes {
            out.push(log.signal());
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
