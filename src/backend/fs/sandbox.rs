//! Confinement: every host file the Filesystem tier touches is reached from
//! one directory handle held open on the root, never through a host path.
//!
//! Lookups go through `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`:
//! the kernel resolves the relative path component by component from the root
//! handle and refuses, atomically, any step that would leave it (an absolute
//! symbolic link, a link whose `..` climbs above the root, a `/proc` magic
//! link). A symbolic link that stays inside the root is followed; one that
//! leads out fails with `EXDEV`, reported as `PERMISSION_DENIED` naming the
//! logical path. Because the check happens inside the same system call that
//! opens the file, swapping a directory for a link between a check and a use
//! (a time-of-check/time-of-use race) cannot get out either.
//!
//! Operations on the last component itself (stat of a link, unlink, rename)
//! use `*at` calls on the already-confined parent handle with
//! `AT_SYMLINK_NOFOLLOW` / `O_NOFOLLOW`, so a link is acted on as a link and
//! never followed.
//!
//! Logical paths contain no `..`, NUL or `//` ([`VfsPath::parse`]); host paths
//! never appear in an error.

use crate::error::{Error, Result};
use crate::path::VfsPath;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir, ResolveFlags, Stat};
use rustix::io::Errno;
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How lookups resolve: beneath the root handle, no magic links.
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);
/// `openat2` returns `EAGAIN` when a concurrent rename makes a `..` step
/// ambiguous; a handful of retries always suffices in practice.
const EAGAIN_RETRIES: usize = 8;
/// Flags of a directory handle that can be listed and used as a `dirfd`.
pub const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC);
/// Flags of a file opened for reading.
pub const READ_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::CLOEXEC);
/// Bytes of `getdents64` output taken per system call, as glibc's `readdir`.
/// rustix's `Dir` starts at 768 bytes and duplicates the handle on open
/// (`openat(fd, ".")` and `fcntl`): three more system calls per directory,
/// 7,600 of them in a Glob over 2,550 directories.
const DIR_BUFFER_BYTES: usize = 32 << 10;

/// The root handle of one Filesystem mount and its logical prefix.
pub struct Sandbox {
    root: OwnedFd,
    mount: VfsPath,
}

impl Sandbox {
    /// Opens `root` (a host directory chosen by the operator, so following
    /// links in it is fine) for the mount at `mount`.
    pub fn open(mount: VfsPath, root: &Path) -> Result<Sandbox> {
        let describe = |e: std::io::Error| {
            Error::Internal(format!(
                "cannot open filesystem root {} for {mount}: {e}",
                root.display()
            ))
        };
        let fd =
            rustix::fs::open(root, DIR_FLAGS, Mode::empty()).map_err(|e| describe(e.into()))?;
        Ok(Sandbox { root: fd, mount })
    }

    /// The logical prefix of this mount.
    pub fn mount(&self) -> &VfsPath {
        &self.mount
    }

    /// `path` relative to the root (`.` for the root itself); `None` when the
    /// path is not in this mount.
    pub fn relative<'p>(&self, path: &'p VfsPath) -> Result<&'p str> {
        match path.relative_to(&self.mount) {
            Some("") => Ok("."),
            Some(rel) => Ok(rel),
            None => Err(Error::NotFound(path.to_string())),
        }
    }

    /// Opens `path` confined to the root, following links only while they
    /// stay inside it.
    pub fn open_at(&self, path: &VfsPath, flags: OFlags) -> Result<OwnedFd> {
        let rel = self.relative(path)?;
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(&self.root, rel, flags, Mode::empty(), RESOLVE) {
                Err(Errno::AGAIN) if tries < EAGAIN_RETRIES => tries += 1,
                other => return other.map_err(|e| errno(path, e)),
            }
        }
    }

    /// The parent directory of `path`, opened as a directory handle, and the
    /// last component's name. Fails for the mount root itself.
    pub fn parent<'p>(&self, path: &'p VfsPath) -> Result<(OwnedFd, &'p str)> {
        if *path == self.mount {
            return Err(Error::PermissionDenied(format!(
                "{path} is the root of a filesystem mount"
            )));
        }
        let fd = self.open_at(&path.parent(), DIR_FLAGS)?;
        Ok((fd, path.name()))
    }

    /// Like [`Sandbox::parent`], creating missing directories on the way.
    /// Each component is opened beneath the previous one's handle, so a link
    /// planted during creation cannot redirect it.
    pub fn parent_creating<'p>(&self, path: &'p VfsPath) -> Result<(OwnedFd, &'p str)> {
        match self.parent(path) {
            Err(Error::NotFound(_)) => {}
            other => return other,
        }
        let mut dir = self.open_at(&self.mount, DIR_FLAGS)?;
        let mut logical = self.mount.clone();
        let parent = path.parent();
        let rel = self.relative(&parent)?;
        for segment in rel.split('/') {
            logical = logical.join(segment)?;
            let opened = match rustix::fs::openat2(&dir, segment, DIR_FLAGS, Mode::empty(), RESOLVE)
            {
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(&dir, segment, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(errno(&logical, e)),
                    }
                    rustix::fs::openat2(&dir, segment, DIR_FLAGS, Mode::empty(), RESOLVE)
                }
                other => other,
            };
            dir = opened.map_err(|e| errno(&logical, e))?;
        }
        Ok((dir, path.name()))
    }

    /// Metadata of `path` without following a link in its last component.
    pub fn lstat(&self, path: &VfsPath) -> Result<Stat> {
        if *path == self.mount {
            return rustix::fs::fstat(&self.root).map_err(|e| errno(path, e));
        }
        let (dir, name) = self.parent(path)?;
        rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| errno(path, e))
    }

    /// What a link at `path` leads to: `Some(stat)` of its target when it
    /// resolves inside the root, `None` when it dangles or leads out.
    pub fn link_target(&self, path: &VfsPath) -> Option<Stat> {
        let fd = self
            .open_at(path, OFlags::PATH.union(OFlags::CLOEXEC))
            .ok()?;
        rustix::fs::fstat(fd).ok()
    }
}

/// A system call error met on `path`, as a domain error: links leading out
/// of the root are `PermissionDenied`, the rest keeps its I/O kind.
pub fn errno(path: &VfsPath, e: Errno) -> Error {
    match e {
        Errno::XDEV => Error::PermissionDenied(format!(
            "{path}: a symbolic link on the way leads outside the filesystem root"
        )),
        Errno::LOOP => Error::PermissionDenied(format!(
            "{path}: symbolic link not followed (a loop, or a link where a file is required)"
        )),
        other => Error::io(path.as_str(), other.into()),
    }
}

/// Calls `each` with the name and type (`Unknown` when the file system does
/// not say) of every entry of the directory open as `fd`, except `.` and
/// `..`. Reads from the handle's position: pass a freshly opened one.
pub fn for_each_entry(
    fd: &OwnedFd,
    mut each: impl FnMut(&CStr, FileType),
) -> rustix::io::Result<()> {
    let mut buf = [MaybeUninit::<u8>::uninit(); DIR_BUFFER_BYTES];
    let mut dir = RawDir::new(fd, &mut buf);
    while let Some(entry) = dir.next() {
        let entry = entry?;
        let name = entry.file_name();
        if !matches!(name.to_bytes(), b"." | b"..") {
            each(name, entry.file_type());
        }
    }
    Ok(())
}

/// The file type recorded in a `Stat`.
pub fn file_type(st: &Stat) -> FileType {
    FileType::from_raw_mode(st.st_mode as _)
}

fn time(secs: i64, nanos: u64) -> SystemTime {
    let nanos = Duration::from_nanos(nanos);
    if secs >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64) + nanos
    } else {
        SystemTime::UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nanos
    }
}

/// Last modification time.
// `Stat`'s field types differ between architectures; the casts are no-ops here.
#[allow(clippy::unnecessary_cast)]
pub fn modified(st: &Stat) -> SystemTime {
    time(st.st_mtime as i64, st.st_mtime_nsec as u64)
}

/// Nanoseconds since the epoch of a time (0 before it).
pub fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

/// The version of a real file: the later of its modification and status
/// change times in nanoseconds since the epoch. Every write of this tier sets
/// the modification time to at least the previous version + 1, so versions
/// of agentvfs writes always grow; the kernel moves the change time forward on
/// every outside change (write, chmod, rename) and nobody can set it back, so
/// outside changes are seen too, except two within one kernel clock tick
/// (a few milliseconds), which may share a version.
#[allow(clippy::unnecessary_cast)]
pub fn version(st: &Stat) -> u64 {
    let m = nanos(modified(st));
    let c = nanos(time(st.st_ctime as i64, st.st_ctime_nsec as u64));
    m.max(c).max(1)
}

/// Writes every byte of `data` to `fd`.
pub fn write_all(fd: impl AsFd, mut data: &[u8]) -> rustix::io::Result<()> {
    while !data.is_empty() {
        match rustix::io::write(fd.as_fd(), data) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => data = &data[n..],
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
