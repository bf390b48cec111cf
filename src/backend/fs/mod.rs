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
//!   (followed only while they stay inside, never by search), or a race that
//!   swaps a directory for a link (see [`sandbox`]);
//! - writes are atomic: a temporary file in the target's directory is written,
//!   given the old file's permission bits, fsynced, and renamed over the
//!   target (then the directory is fsynced), so a reader sees the old or the
//!   new content, never a mix, and a crash leaves one of the two; missing
//!   parent directories are created;
//! - writes never go through a symbolic link: writing, editing or deleting
//!   with if_version a path whose last component is a link is refused
//!   (`PERMISSION_DENIED`); deleting a link removes the link itself;
//! - versions are time stamps in nanoseconds (see [`sandbox::version`]) that
//!   grow on every agentvfs write; `create_only` is enforced by the kernel
//!   (`renameat2(RENAME_NOREPLACE)`), not by a check that could race.
//!
//! Concurrency: [`Backend::update`] (Edit) holds a per-path lock (one of
//! [`LOCK_STRIPES`] mutexes chosen by the path's hash) across read, transform
//! and rename, and re-checks the file's version just before the rename, so two
//! agentvfs edits never lose an update. Against a process writing the host
//! file directly the guarantee is weaker: a change that lands in the
//! microseconds between the re-check and the rename is overwritten.
//!
//! Errors: the kernel's `EACCES`/`EPERM` become `PERMISSION_DENIED` naming the
//! logical path, links leading out `PERMISSION_DENIED`, missing paths
//! `NOT_FOUND`, files over the size limit `RESOURCE_EXHAUSTED`.

pub mod ignore_cache;
pub mod prefetch;
pub mod sandbox;
pub mod search;

use super::{
    Backend, Entry, EntryKind, Precondition, Scope, UpdateFn, WriteOutcome, check_directory_delete,
};
use crate::error::{Error, Result};
use crate::path::{VfsPath, check_name};
use crate::search::{SearchPart, SearchRun};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Stat, Timestamps};
use rustix::io::Errno;
use sandbox::{DIR_FLAGS, READ_FLAGS, Sandbox, errno, file_type};
use std::ffi::{CStr, CString};
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::os::fd::OwnedFd;
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

/// A sandboxed real directory; see the module doc.
pub struct FsBackend {
    sandbox: Sandbox,
    max_file_bytes: u64,
    locks: [Mutex<()>; LOCK_STRIPES],
    /// Makes temporary file names unique within this process.
    temp_counter: AtomicU64,
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
    fn entry(&self, path: VfsPath, st: &Stat) -> Entry {
        let modified = sandbox::modified(st);
        let kind = match file_type(st) {
            FileType::Directory => EntryKind::Directory,
            FileType::Symlink => EntryKind::Symlink {
                to_directory: self
                    .sandbox
                    .link_target(&path)
                    .is_some_and(|t| file_type(&t) == FileType::Directory),
            },
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
                _ => Err(Error::InvalidArgument(format!(
                    "{path} is not a regular file (device, socket or pipe)"
                ))),
            },
        }
    }

    /// Atomically replaces (or creates) `name` in `dir` with `data` once
    /// `pre` holds; see the module doc. The caller holds the path's lock.
    fn replace(
        &self,
        path: &VfsPath,
        dir: &OwnedFd,
        name: &str,
        data: &[u8],
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        let old = self.current(path, dir, name)?;
        let old_version = old.as_ref().map(sandbox::version);
        pre.check(path, old_version)?;
        let temp = format!(
            ".agentvfs-{}-{}.tmp",
            std::process::id(),
            self.temp_counter.fetch_add(1, Ordering::Relaxed)
        );
        let mode = old.as_ref().map_or(NEW_FILE_MODE, |st| st.st_mode & 0o7777);
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(dir, &temp, flags, Mode::from_raw_mode(mode as _))
            .map_err(|e| errno(path, e))?;
        let written = (|| -> Result<Stat> {
            let os = |e| errno(path, e);
            sandbox::write_all(&fd, data).map_err(os)?;
            if old.is_some() {
                // The creation mode went through the umask; restore exactly.
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode as _)).map_err(os)?;
            }
            let stamp = sandbox::nanos(SystemTime::now()).max(old_version.unwrap_or(0) + 1);
            let ts = rustix::fs::Timespec {
                tv_sec: (stamp / 1_000_000_000) as _,
                tv_nsec: (stamp % 1_000_000_000) as _,
            };
            rustix::fs::futimens(
                &fd,
                &Timestamps {
                    last_access: ts,
                    last_modification: ts,
                },
            )
            .map_err(os)?;
            rustix::fs::fsync(&fd).map_err(os)?;
            // Re-check just before the rename: narrows the window in which a
            // writer outside agentvfs could be overwritten unseen.
            let now = self.current(path, dir, name)?;
            if now.as_ref().map(sandbox::version) != old_version {
                return Err(Error::VersionMismatch {
                    path: path.to_string(),
                    expected: old_version.unwrap_or(0),
                    actual: now.as_ref().map_or(0, sandbox::version),
                });
            }
            let rename = if old.is_none() {
                RenameFlags::NOREPLACE
            } else {
                RenameFlags::empty()
            };
            match rustix::fs::renameat_with(dir, &temp, dir, name, rename) {
                Err(Errno::EXIST) => return Err(Error::AlreadyExists(path.to_string())),
                other => other.map_err(os)?,
            }
            rustix::fs::fsync(dir).map_err(os)?;
            rustix::fs::fstat(&fd).map_err(os)
        })();
        match written {
            Ok(st) => Ok(WriteOutcome {
                path: path.clone(),
                bytes_written: data.len() as u64,
                version: sandbox::version(&st),
                created: old.is_none(),
            }),
            Err(err) => {
                if let Err(e) = rustix::fs::unlinkat(dir, &temp, AtFlags::empty()) {
                    tracing::warn!(path = %path, cause = %e, "cannot remove temporary file");
                }
                Err(err)
            }
        }
    }

    /// Reads a whole opened file, refusing directories and oversized files.
    fn read_fd(&self, path: &VfsPath, fd: OwnedFd) -> Result<(Vec<u8>, Stat)> {
        let st = rustix::fs::fstat(&fd).map_err(|e| errno(path, e))?;
        match file_type(&st) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(Error::IsDirectory(path.to_string())),
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "{path} is not a regular file (device, socket or pipe)"
                )));
            }
        }
        self.check_size(path, st.st_size as u64)?;
        let mut data = Vec::with_capacity(st.st_size as usize);
        std::fs::File::from(fd)
            .take(self.max_file_bytes + 1)
            .read_to_end(&mut data)
            .map_err(|e| Error::io(path.as_str(), e))?;
        self.check_size(path, data.len() as u64)?;
        Ok((data, st))
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

/// Removes the directory `name` in `parent` and everything below it without
/// following any link; returns the number of non-directories removed.
fn remove_tree(parent: &OwnedFd, name: &CStr, path: &VfsPath) -> Result<u64> {
    let os = |e| errno(path, e);
    let flags = DIR_FLAGS | OFlags::NOFOLLOW;
    let fd = rustix::fs::openat(parent, name, flags, Mode::empty()).map_err(os)?;
    let mut children = Vec::new();
    sandbox::for_each_entry(&fd, |name, kind| children.push((name.to_owned(), kind)))
        .map_err(os)?;
    let mut removed = 0;
    // Names are passed as raw bytes: non-UTF-8 names are removed too.
    for (child, kind) in children {
        let kind = match kind {
            FileType::Unknown => {
                rustix::fs::statat(&fd, child.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .map(|st| file_type(&st))
                    .map_err(os)?
            }
            known => known,
        };
        if kind == FileType::Directory {
            removed += remove_tree(&fd, &child, path)?;
        } else {
            rustix::fs::unlinkat(&fd, child.as_c_str(), AtFlags::empty()).map_err(os)?;
            removed += 1;
        }
    }
    rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR).map_err(os)?;
    Ok(removed)
}

impl Backend for FsBackend {
    fn list(&self, _scope: &Scope, dir: &VfsPath) -> Result<Vec<Entry>> {
        let fd = self.sandbox.open_at(dir, DIR_FLAGS)?;
        let mut entries = Vec::new();
        for (name, _) in child_names(dir, &fd)? {
            let path = dir.join(&name)?;
            match rustix::fs::statat(&fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => entries.push(self.entry(path, &st)),
                // Removed since the directory was read.
                Err(Errno::NOENT) => {}
                Err(e) => return Err(errno(&path, e)),
            }
        }
        entries.sort_by_key(|e| e.path.order_key());
        Ok(entries)
    }

    fn stat(&self, _scope: &Scope, path: &VfsPath) -> Result<Entry> {
        let st = self.sandbox.lstat(path)?;
        Ok(self.entry(path.clone(), &st))
    }

    fn read(&self, _scope: &Scope, path: &VfsPath) -> Result<(Vec<u8>, Entry)> {
        let fd = self.sandbox.open_at(path, READ_FLAGS | OFlags::NONBLOCK)?;
        let (data, st) = self.read_fd(path, fd)?;
        Ok((data, self.entry(path.clone(), &st)))
    }

    fn write(
        &self,
        _scope: &Scope,
        path: &VfsPath,
        data: Vec<u8>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        self.check_size(path, data.len() as u64)?;
        let _guard = self.lock(path);
        let (dir, name) = self.sandbox.parent_creating(path)?;
        self.replace(path, &dir, name, &data, pre)
    }

    fn update(
        &self,
        _scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        let _guard = self.lock(path);
        let (dir, name) = self.sandbox.parent(path)?;
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
        self.check_size(path, new.len() as u64)?;
        let pre = Precondition {
            create_only: false,
            if_version: Some(seen),
        };
        self.replace(path, &dir, name, &new, pre)
    }

    fn delete(
        &self,
        _scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        let _guard = self.lock(path);
        let (dir, name) = self.sandbox.parent(path)?;
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

    fn search(&self, _scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()> {
        search::search(&self.sandbox, run, part)
    }
}
