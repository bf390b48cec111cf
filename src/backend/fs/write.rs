//! Writes on the Filesystem tier (Write, WriteBytes, and the commit of an
//! Edit): the new content goes to a temporary file, then replaces the
//! target in one rename.
//!
//! Invariants:
//! - a write is atomic: the new content goes to an unnamed temporary file
//!   (`O_TMPFILE`; a named `.agentvfs-*.tmp` where the file system lacks
//!   them) in the target's directory, takes the old file's owner (where the
//!   server may) and permission bits (never setuid, setgid or sticky), is
//!   fsynced, named and renamed over the target (then the directory is
//!   fsynced): a reader sees the old or the new content, never a mix, and a
//!   crash leaves one of the two; a `kill -9` while the content is written
//!   leaves nothing behind (only one between naming and renaming, a window
//!   of two system calls, can leave a `.agentvfs-*.tmp`);
//! - the content is filled without the path's lock (a slow upload delays no
//!   other writer) and never whole in memory when streamed; the precondition
//!   is checked before (so a doomed upload fails at once) and again under
//!   the lock, right before the rename, against the file there now;
//! - `create_only` is kept by the kernel (`RENAME_NOREPLACE`), not by a
//!   check that could race; a write never goes through a link;
//! - the new version is above the old one (the new file's times are set to
//!   now, or one nanosecond past the old version).

use super::sandbox::{self, errno, file_type, not_regular};
use super::{FsBackend, KEPT_MODE_BITS, NEW_FILE_MODE};
use crate::backend::{ChunkSource, Precondition, WriteOutcome};
use crate::change::Operation;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Stat, Timestamps};
use rustix::io::Errno;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::time::SystemTime;

/// A file being written: an unnamed (`O_TMPFILE`) or, where the file system
/// lacks them, a named temporary file in the target's directory. An unnamed
/// one vanishes with the process, so a `kill -9` mid-write leaves nothing
/// behind; a named one is removed on drop unless committed.
pub(super) struct Temp<'d> {
    pub(super) fd: OwnedFd,
    dir: &'d OwnedFd,
    /// The name of a named temporary file, until committed.
    name: Option<String>,
    /// Bytes written.
    pub(super) size: u64,
}

impl Temp<'_> {
    /// The file, renamed into place: its name is no longer its own to
    /// remove.
    pub(super) fn placed(mut self) -> rustix::io::Result<OwnedFd> {
        self.name = None;
        rustix::io::dup(&self.fd)
    }
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
    /// The regular file a write would replace (`None`: none yet).
    pub(super) fn current(
        &self,
        path: &VfsPath,
        dir: &OwnedFd,
        name: &str,
    ) -> Result<Option<Stat>> {
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
    pub(super) fn temp_name(&self) -> String {
        format!(
            ".agentvfs-{}-{}.tmp",
            std::process::id(),
            self.temp_counter.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Creates the temporary file of a write into `dir`.
    pub(super) fn create_temp<'d>(&self, path: &VfsPath, dir: &'d OwnedFd) -> Result<Temp<'d>> {
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

    /// The name of `temp` in its directory: an unnamed file is given one
    /// (removed on drop unless [`Temp::placed`]), for the rename that puts
    /// it in place.
    pub(super) fn name_temp(&self, path: &VfsPath, temp: &mut Temp<'_>) -> Result<String> {
        if let Some(named) = &temp.name {
            return Ok(named.clone());
        }
        // Give the unnamed file a name in its directory through /proc (no
        // capability needed, unlike AT_EMPTY_PATH).
        let named = self.temp_name();
        let proc_path = format!("/proc/self/fd/{}", temp.fd.as_raw_fd());
        rustix::fs::linkat(
            rustix::fs::CWD,
            proc_path.as_str(),
            temp.dir,
            named.as_str(),
            AtFlags::SYMLINK_FOLLOW,
        )
        .map_err(|e| errno(path, e))?;
        temp.name = Some(named.clone());
        Ok(named)
    }

    /// Appends `data` to the temporary file, refusing to grow it past the
    /// file size limit.
    pub(super) fn append(&self, path: &VfsPath, temp: &mut Temp<'_>, data: &[u8]) -> Result<()> {
        Error::check_file_size(path, temp.size + data.len() as u64, self.max_file_bytes)?;
        sandbox::write_all(&temp.fd, data).map_err(|e| errno(path, e))?;
        temp.size += data.len() as u64;
        Ok(())
    }

    /// Puts the written `temp` in place of `name` in `dir` once `pre` holds
    /// against the file there now; see the module doc. The caller holds the
    /// path's lock, so no agentvfs write of the path runs between the check
    /// and the rename.
    pub(super) fn commit(
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
        set_executable_bit(path, &temp.fd, pre.executable)?;
        let stamp = sandbox::nanos(SystemTime::now()).max(old_version.unwrap_or(0) + 1);
        let ts = sandbox::timespec(stamp);
        let times = Timestamps {
            last_access: ts,
            last_modification: ts,
        };
        rustix::fs::futimens(&temp.fd, &times).map_err(os)?;
        rustix::fs::fsync(&temp.fd).map_err(os)?;
        let named = self.name_temp(path, &mut temp)?;
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
    pub(super) fn write_from(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<WriteOutcome> {
        self.write_with(scope, path, pre, &mut |temp| {
            for piece in &mut *pieces {
                self.append(path, temp, &piece?)?;
            }
            Ok(())
        })
    }

    /// Writes `path` with the content `fill` puts in its temporary file
    /// (the pieces of a write, or a Copy's clone of its source): the steps
    /// of [`FsBackend::write_from`], recorded as a write.
    pub(super) fn write_with(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        fill: &mut dyn FnMut(&mut Temp<'_>) -> Result<()>,
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
        fill(&mut temp)?;
        let _guard = self.lock(path);
        self.expect(path);
        let out = self.commit(path, name, temp, pre)?;
        self.record_write(scope, &out, Operation::Write);
        Ok(out)
    }
}

/// Sets (`Some(true)`) or clears (`Some(false)`) the executable bit of the
/// file open as `fd`, as `chmod +x` and `chmod -x` do: execute permission
/// wherever read permission is, or none (docs/contract.md § The executable
/// bit). `None` leaves the mode as it is.
pub(super) fn set_executable_bit(
    path: &VfsPath,
    fd: &OwnedFd,
    executable: Option<bool>,
) -> Result<()> {
    let Some(executable) = executable else {
        return Ok(());
    };
    let st = rustix::fs::fstat(fd).map_err(|e| errno(path, e))?;
    let mode = st.st_mode & KEPT_MODE_BITS & !0o111;
    let mode = match executable {
        true => mode | ((mode & 0o444) >> 2),
        false => mode,
    };
    if mode == st.st_mode & KEPT_MODE_BITS {
        return Ok(());
    }
    rustix::fs::fchmod(fd, Mode::from_raw_mode(mode as _)).map_err(|e| errno(path, e))
}

/// Gives the new content of a replaced file the old file's owner (where the
/// server may: a server running as another user keeps its own) and its
/// permission bits without setuid, setgid or sticky. The owner goes first:
/// changing it clears those bits anyway.
pub(super) fn keep_owner_and_mode(path: &VfsPath, fd: &OwnedFd, old: &Stat) -> Result<()> {
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
