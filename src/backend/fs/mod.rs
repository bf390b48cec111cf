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
//! rename, so two agentvfs edits never lose an update. Against a process
//! writing the host file directly the guarantee is weaker: a change that
//! lands in the microseconds between the check and the rename is overwritten.
//!
//! Errors: the kernel's `EACCES`/`EPERM` become `PERMISSION_DENIED` naming the
//! logical path, links leading out `PERMISSION_DENIED`, missing paths
//! `NOT_FOUND`, files over the size limit `RESOURCE_EXHAUSTED`, devices,
//! sockets and pipes `INVALID_ARGUMENT`.

pub mod ignore_cache;
pub mod prefetch;
pub mod sandbox;
pub mod search;

use super::{
    Backend, ChunkReader, ChunkSource, Precondition, UpdateFn, WriteOutcome, check_directory_delete,
};
use crate::access::{Op, OpSet};
use crate::entry::{Entry, EntryKind};
use crate::error::{Error, Result};
use crate::path::{VfsPath, check_name};
use crate::scope::Scope;
use crate::search::{SearchKind, SearchPart, SearchRun};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Stat, Timestamps};
use rustix::io::Errno;
use sandbox::{DIR_FLAGS, Links, READ_FLAGS, Sandbox, errno, file_type, not_regular};
use std::ffi::{CStr, CString};
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

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
    sandbox: Sandbox,
    max_file_bytes: u64,
    locks: [Mutex<()>; LOCK_STRIPES],
    /// Makes temporary file names unique within this process.
    temp_counter: AtomicU64,
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
    /// files over `max_file_bytes` fail with `TooLarge`.
    pub fn open(mount: VfsPath, root: &Path, max_file_bytes: u64) -> Result<FsBackend> {
        Ok(FsBackend {
            sandbox: Sandbox::open(mount, root)?,
            max_file_bytes,
            locks: std::array::from_fn(|_| Mutex::new(())),
            temp_counter: AtomicU64::new(0),
        })
    }

    fn lock(&self, path: &VfsPath) -> MutexGuard<'_, ()> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        path.hash(&mut h);
        // The guarded value is `()`: a poisoned lock protects nothing broken.
        self.locks[h.finish() as usize % LOCK_STRIPES]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn check_size(&self, path: &VfsPath, len: u64) -> Result<()> {
        if len > self.max_file_bytes {
            return Err(Error::TooLarge(format!(
                "{path} is {len} bytes; the file size limit is {} bytes",
                self.max_file_bytes
            )));
        }
        Ok(())
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
        self.check_size(path, temp.size + data.len() as u64)?;
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
        let ts = rustix::fs::Timespec {
            tv_sec: (stamp / 1_000_000_000) as _,
            tv_nsec: (stamp % 1_000_000_000) as _,
        };
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
        path: &VfsPath,
        pre: Precondition,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<WriteOutcome> {
        let (dir, name) = self.sandbox.parent_creating(path)?;
        let early = self.current(path, &dir, name)?;
        pre.check(path, early.as_ref().map(sandbox::version))?;
        let mut temp = self.create_temp(path, &dir)?;
        for piece in pieces {
            self.append(path, &mut temp, &piece?)?;
        }
        let _guard = self.lock(path);
        self.commit(path, name, temp, pre)
    }

    /// Reads a whole opened file, refusing directories and oversized files.
    fn read_fd(&self, path: &VfsPath, fd: OwnedFd) -> Result<(Vec<u8>, Stat)> {
        let st = self.regular(path, &fd)?;
        let mut data = Vec::with_capacity(st.st_size as usize);
        std::fs::File::from(fd)
            .take(self.max_file_bytes + 1)
            .read_to_end(&mut data)
            .map_err(|e| Error::io(path.as_str(), e))?;
        self.check_size(path, data.len() as u64)?;
        Ok((data, st))
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
        self.check_size(path, st.st_size as u64)?;
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

/// One directory on the way down of [`remove_tree`].
struct Descent {
    /// Its name in its parent.
    name: CString,
    /// Device and inode: the parent reached back through `..` must be the
    /// one the walk came from, or the tree was moved and the removal stops.
    id: (u64, u64),
    /// Subdirectories still to remove.
    subdirs: Vec<CString>,
}

/// The device and inode of an open directory.
#[allow(clippy::unnecessary_cast)]
fn identity(path: &VfsPath, fd: &OwnedFd) -> Result<(u64, u64)> {
    let st = rustix::fs::fstat(fd).map_err(|e| errno(path, e))?;
    Ok((st.st_dev as u64, st.st_ino as u64))
}

/// Removes the directory `name` in `parent` and everything below it without
/// following any link; returns the number of non-directories removed.
///
/// Iterative with one open directory at a time, whatever the depth: the way
/// down is a stack of names (a tree 15,000 levels deep neither overflows the
/// stack nor runs out of descriptors), and the way up opens `..`, checked to
/// be the directory the walk came down from.
fn remove_tree(parent: &OwnedFd, name: &CStr, path: &VfsPath) -> Result<u64> {
    let os = |e| errno(path, e);
    let open = |dir: &OwnedFd, name: &CStr| {
        rustix::fs::openat(dir, name, DIR_FLAGS | OFlags::NOFOLLOW, Mode::empty()).map_err(os)
    };
    let mut removed = 0;
    // Unlinks the non-directories of `fd` and returns its subdirectories.
    let mut clear = |fd: &OwnedFd| -> Result<Vec<CString>> {
        let mut children = Vec::new();
        sandbox::for_each_entry(fd, |name, kind| children.push((name.to_owned(), kind)))
            .map_err(os)?;
        let mut subdirs = Vec::new();
        // Names are passed as raw bytes: non-UTF-8 names are removed too.
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
                rustix::fs::unlinkat(fd, child.as_c_str(), AtFlags::empty()).map_err(os)?;
                removed += 1;
            }
        }
        Ok(subdirs)
    };
    let mut fd = open(parent, name)?;
    let mut stack = vec![Descent {
        name: name.to_owned(),
        id: identity(path, &fd)?,
        subdirs: clear(&fd)?,
    }];
    while let Some(top) = stack.last_mut() {
        if let Some(sub) = top.subdirs.pop() {
            fd = open(&fd, &sub)?;
            let subdirs = clear(&fd)?;
            stack.push(Descent {
                name: sub,
                id: identity(path, &fd)?,
                subdirs,
            });
            continue;
        }
        // `top` is empty now: go up and remove it.
        let done = stack.pop().expect("the loop holds a top");
        let (up, up_id) = match stack.last() {
            Some(above) => (open(&fd, c"..")?, above.id),
            None => break,
        };
        if identity(path, &up)? != up_id {
            return Err(Error::Internal(format!(
                "{path}: the tree was moved while it was being deleted; deletion stopped"
            )));
        }
        rustix::fs::unlinkat(&up, done.name.as_c_str(), AtFlags::REMOVEDIR).map_err(os)?;
        fd = up;
    }
    rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR).map_err(os)?;
    Ok(removed)
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
        let st = self.sandbox.lstat(path, Links::Follow(&rule))?;
        Ok(self.entry(scope, path.clone(), &st))
    }

    fn read(&self, scope: &Scope, path: &VfsPath) -> Result<(Vec<u8>, Entry)> {
        let rule = link_rule(scope, path, READ_OPS);
        let flags = READ_FLAGS | OFlags::NONBLOCK;
        let fd = self.sandbox.open_at(path, flags, Links::Follow(&rule))?;
        let (data, st) = self.read_fd(path, fd)?;
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
        let flags = READ_FLAGS | OFlags::NONBLOCK;
        let fd = self.sandbox.open_at(path, flags, Links::Follow(&rule))?;
        let st = self.regular(path, &fd)?;
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
        _scope: &Scope,
        path: &VfsPath,
        data: Vec<u8>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        self.check_size(path, data.len() as u64)?;
        self.write_from(path, pre, &mut std::iter::once(Ok(data)))
    }

    fn write_chunks(
        &self,
        _scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<WriteOutcome> {
        self.write_from(path, pre, pieces)
    }

    fn update(
        &self,
        _scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        let _guard = self.lock(path);
        let (dir, name) = self.sandbox.parent(path, Links::Refuse)?;
        let flags = READ_FLAGS | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let fd =
            rustix::fs::openat(&dir, name, flags, Mode::empty()).map_err(|e| errno(path, e))?;
        let (data, st) = self.read_fd(path, fd)?;
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
        self.commit(path, name, temp, pre)
    }

    fn delete(
        &self,
        _scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        let _guard = self.lock(path);
        let (dir, name) = self.sandbox.parent(path, Links::Refuse)?;
        let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| errno(path, e))?;
        if file_type(&st) == FileType::Directory {
            check_directory_delete(path, if_version, recursive)?;
            let name = CString::new(name)
                .map_err(|_| Error::invalid_path(path.as_str(), "NUL in name"))?;
            return remove_tree(&dir, &name, path);
        }
        if if_version.is_some() && file_type(&st) == FileType::Symlink {
            return Err(Error::PermissionDenied(format!(
                "{path} is a symbolic link; it has no version of its own"
            )));
        }
        Precondition {
            create_only: false,
            if_version,
        }
        .check(path, Some(sandbox::version(&st)))?;
        // Unlinking a link removes the link, never what it points to.
        rustix::fs::unlinkat(&dir, name, AtFlags::empty()).map_err(|e| errno(path, e))?;
        Ok(1)
    }

    fn search(&self, scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()> {
        let family = match run.spec().kind {
            SearchKind::Glob(_) => LIST_OPS,
            SearchKind::Grep(_) => GREP_OPS,
        };
        let rule = link_rule(scope, &part.top, family);
        search::search(&self.sandbox, scope, &rule, run, part)
    }
}
