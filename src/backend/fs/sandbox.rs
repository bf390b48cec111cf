//! Confinement: every host file the Filesystem tier touches is reached from
//! one directory handle held open on the root, never through a host path.
//!
//! Lookups go through `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS
//! | RESOLVE_NO_SYMLINKS`: the kernel resolves the relative path component by
//! component from the root handle and refuses, atomically, any step that
//! would leave it or go through a symbolic link. So the object a lookup
//! reaches is the one its logical path names, and a grant checked on that
//! path holds for it.
//!
//! Symbolic links ([`Links`]): writes, edits and deletes never go through a
//! link in any component ([`Links::Refuse`]). Reads, listings, stats and
//! search roots may ([`Links::Follow`]): a link is resolved in user space,
//! component by component and never above the root (absolute targets and
//! `..` past the root are `PERMISSION_DENIED`), to the logical path it leads
//! to; the caller's grants are checked on that path; and it is then opened
//! with `RESOLVE_NO_SYMLINKS` again, so swapping a directory for a link
//! between the check and the use (a time-of-check/time-of-use race) makes
//! the open fail instead of leading elsewhere. A path with no link costs one
//! `openat2`, as before.
//!
//! Operations on the last component itself (stat of a link, unlink, rename)
//! use `*at` calls on the already-confined parent handle with
//! `AT_SYMLINK_NOFOLLOW` / `O_NOFOLLOW`, so a link is acted on as a link and
//! never followed.
//!
//! Logical paths contain no `..`, NUL or `//` ([`VfsPath::parse`]); host paths
//! never appear in an error.

use crate::entry::{Entry, EntryKind};
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
/// Most symbolic links followed while resolving one path (the kernel's own
/// limit, `MAXSYMLINKS`).
const MAX_LINK_HOPS: usize = 40;
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

    /// A second handle of the same root directory, for a part of the tier
    /// that keeps its own (the search index's mirror: `super::mirror`).
    pub fn try_clone(&self) -> Result<Sandbox> {
        let root = self.root.try_clone().map_err(|e| {
            Error::Internal(format!("cannot duplicate the root of {}: {e}", self.mount))
        })?;
        Ok(Sandbox {
            root,
            mount: self.mount.clone(),
        })
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

    /// Opens `path` confined to the root, treating symbolic links on the way
    /// as `links` says.
    ///
    /// The common case costs one system call: `openat2` with
    /// `RESOLVE_NO_SYMLINKS` succeeds when no component is a link, and then
    /// the object reached is the one the logical path names. Only when that
    /// fails with `ELOOP` (a link on the way) are links resolved, by
    /// [`Sandbox::resolve`], to the logical path they lead to; `links` decides
    /// whether that path may be reached, and it is then opened again with
    /// `RESOLVE_NO_SYMLINKS`, so a link planted after the check makes the
    /// open fail instead of leading elsewhere.
    pub fn open_at(&self, path: &VfsPath, flags: OFlags, links: Links<'_>) -> Result<OwnedFd> {
        match self.open_exact(path, flags) {
            Err(Errno::LOOP) => {}
            other => return other.map_err(|e| self.lookup_error(path, path, flags, e)),
        }
        let Links::Follow(allowed) = links else {
            return Err(through_link(path));
        };
        let target = self.resolve(path, !flags.contains(OFlags::NOFOLLOW), allowed)?;
        allowed(&target)?;
        self.open_exact(&target, flags)
            .map_err(|e| self.lookup_error(path, &target, flags, e))
    }

    /// The error of opening `path` (reached as `reached`, its links
    /// followed) with `flags`: a file where a directory was needed on the
    /// way means `path` does not exist (`NotFound` naming it); only when the
    /// object reached is itself a file and `flags` asked for a directory is
    /// it `NotDirectory`.
    fn lookup_error(&self, path: &VfsPath, reached: &VfsPath, flags: OFlags, e: Errno) -> Error {
        let parent_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        match e {
            Errno::NOTDIR
                if !flags.contains(OFlags::DIRECTORY)
                    || self.open_exact(&reached.parent(), parent_flags).is_err() =>
            {
                Error::NotFound(path.to_string())
            }
            e => errno(path, e),
        }
    }

    /// Opens `path` with no symbolic link in any component.
    pub(super) fn open_exact(&self, path: &VfsPath, flags: OFlags) -> rustix::io::Result<OwnedFd> {
        let rel = match path.relative_to(&self.mount) {
            Some("") => ".",
            Some(rel) => rel,
            None => return Err(Errno::NOENT),
        };
        open_beneath(&self.root, rel, flags)
    }

    /// The logical path `path` leads to once the symbolic links on the way
    /// (and in its last component when `follow_last`) are followed, as the
    /// kernel would follow them but without leaving the root: an absolute
    /// target or a `..` above the root is `PERMISSION_DENIED`, more than
    /// [`MAX_LINK_HOPS`] links a loop. A failure partway is reported as
    /// `allowed` judges the place it was reached, so a link cannot be used
    /// to learn what exists where the caller has no grant.
    fn resolve(
        &self,
        path: &VfsPath,
        follow_last: bool,
        allowed: &dyn Fn(&VfsPath) -> Result<()>,
    ) -> Result<VfsPath> {
        let outside = || {
            Error::PermissionDenied(format!(
                "{path}: a symbolic link on the way leads outside the filesystem root"
            ))
        };
        let rel = path.relative_to(&self.mount).unwrap_or_default();
        // Components still to walk, the next one last.
        let mut pending: Vec<String> = rel.rsplit('/').map(str::to_owned).collect();
        let mut done: Vec<String> = Vec::new();
        let mut dir = self.open_dir_exact(&done).map_err(|e| errno(path, e))?;
        let mut hops = 0;
        // A failure where `done` leads: denied when the caller may not be there.
        let fail = |done: &[String], err: Error| match self.logical(path, done) {
            Ok(reached) => allowed(&reached).err().unwrap_or(err),
            Err(denied) => denied,
        };
        while let Some(name) = pending.pop() {
            match name.as_str() {
                "" | "." => continue,
                ".." => {
                    done.pop().ok_or_else(outside)?;
                    dir = self
                        .open_dir_exact(&done)
                        .map_err(|e| fail(&done, errno(path, e)))?;
                    continue;
                }
                _ => {}
            }
            let last = pending.iter().all(|n| n.is_empty() || n == ".");
            let st = rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| fail(&done, errno(path, e)))?;
            match file_type(&st) {
                FileType::Symlink if !last || follow_last => {
                    hops += 1;
                    if hops > MAX_LINK_HOPS {
                        return Err(errno(path, Errno::LOOP));
                    }
                    let target = match rustix::fs::readlinkat(&dir, name.as_str(), Vec::new()) {
                        Ok(target) => target,
                        // Replaced since `statat` saw a link: look again (the
                        // hop count bounds how often).
                        Err(Errno::INVAL | Errno::NOENT) => {
                            pending.push(name);
                            continue;
                        }
                        Err(e) => return Err(fail(&done, errno(path, e))),
                    };
                    let target = target.to_str().map_err(|_| {
                        fail(
                            &done,
                            Error::PermissionDenied(format!(
                                "{path}: a symbolic link on the way has a target that is not UTF-8"
                            )),
                        )
                    })?;
                    if target.starts_with('/') {
                        return Err(outside());
                    }
                    pending.extend(target.rsplit('/').map(str::to_owned));
                }
                FileType::Directory if !last => {
                    let flags =
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    match rustix::fs::openat(&dir, name.as_str(), flags, Mode::empty()) {
                        Ok(opened) => dir = opened,
                        // Replaced by a link or a file since `statat` saw a
                        // directory: look again, counted as a hop so a
                        // swapping loop cannot keep this walk going.
                        Err(Errno::LOOP | Errno::NOTDIR) => {
                            hops += 1;
                            if hops > MAX_LINK_HOPS {
                                return Err(errno(path, Errno::LOOP));
                            }
                            pending.push(name);
                            continue;
                        }
                        Err(e) => return Err(fail(&done, errno(path, e))),
                    }
                    done.push(name);
                }
                // A file on the way: nothing exists below it.
                _ if !last => return Err(fail(&done, Error::NotFound(path.to_string()))),
                _ => done.push(name),
            }
        }
        self.logical(path, &done)
    }

    /// The logical path of the components `done` below the root; a name that
    /// cannot be part of a logical path (reached through a link) is refused.
    fn logical(&self, path: &VfsPath, done: &[String]) -> Result<VfsPath> {
        done.iter().try_fold(self.mount.clone(), |at, name| {
            at.join(name).map_err(|_| {
                Error::PermissionDenied(format!(
                    "{path}: a symbolic link on the way leads to a name that is not a valid \
                     logical path"
                ))
            })
        })
    }

    /// A path-only handle on the directory `done` below the root, reached
    /// with no link in any component.
    fn open_dir_exact(&self, done: &[String]) -> rustix::io::Result<OwnedFd> {
        let rel = if done.is_empty() {
            ".".to_owned()
        } else {
            done.join("/")
        };
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        rustix::fs::openat2(
            &self.root,
            rel.as_str(),
            flags,
            Mode::empty(),
            RESOLVE | ResolveFlags::NO_SYMLINKS,
        )
    }

    /// The parent directory of `path`, opened as a directory handle, and the
    /// last component's name. The mount root has no parent here: it is
    /// `IsDirectory` naming it (every caller wants a file's place). A
    /// missing parent, or a file where one is, is `NotFound` naming `path`:
    /// nothing exists below a missing directory or a file. With
    /// [`Links::Follow`], `allowed` judges the path the last component has
    /// below the resolved parent.
    pub fn parent<'p>(&self, path: &'p VfsPath, links: Links<'_>) -> Result<(OwnedFd, &'p str)> {
        if *path == self.mount {
            return Err(Error::IsDirectory(path.to_string()));
        }
        let name = path.name();
        let opened = match links {
            Links::Refuse => self.open_at(&path.parent(), DIR_FLAGS, Links::Refuse),
            Links::Follow(allowed) => {
                let child = |dir: &VfsPath| allowed(&dir.join(name)?);
                self.open_at(&path.parent(), DIR_FLAGS, Links::Follow(&child))
            }
        };
        let fd = opened.map_err(|e| match e {
            Error::NotFound(_) | Error::NotDirectory(_) => Error::NotFound(path.to_string()),
            e => e,
        })?;
        Ok((fd, name))
    }

    /// Like [`Sandbox::parent`] with [`Links::Refuse`], creating missing
    /// directories on the way. Each component is opened beneath the previous
    /// one's handle with no link followed, so a link planted during creation
    /// cannot redirect it. A file on the way is `NotDirectory` naming that
    /// file (the component walk finds it), not the path below it.
    pub fn parent_creating<'p>(&self, path: &'p VfsPath) -> Result<(OwnedFd, &'p str)> {
        match self.parent(path, Links::Refuse) {
            Err(Error::NotFound(_)) => {}
            other => return other,
        }
        let mut dir = self
            .open_exact(&self.mount, DIR_FLAGS)
            .map_err(|e| errno(&self.mount, e))?;
        let mut logical = self.mount.clone();
        let parent = path.parent();
        let rel = self.relative(&parent)?;
        let resolve = RESOLVE | ResolveFlags::NO_SYMLINKS;
        for segment in rel.split('/') {
            logical = logical.join(segment)?;
            let opened = match rustix::fs::openat2(&dir, segment, DIR_FLAGS, Mode::empty(), resolve)
            {
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(&dir, segment, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(errno(&logical, e)),
                    }
                    // The new directory's name, durable before anything
                    // below it is: a file fsynced in a directory whose own
                    // entry is lost in a crash is lost with it (a committed
                    // changeset's temporary file among them,
                    // src/backend/fs/changeset.rs). Also when another
                    // writer made it just now, which may not have synced yet.
                    rustix::fs::fsync(&dir).map_err(|e| errno(&logical, e))?;
                    rustix::fs::openat2(&dir, segment, DIR_FLAGS, Mode::empty(), resolve)
                }
                other => other,
            };
            dir = opened.map_err(|e| match e {
                Errno::LOOP => through_link(path),
                e => errno(&logical, e),
            })?;
        }
        Ok((dir, path.name()))
    }

    /// Metadata of `path` without following a link in its last component.
    pub fn lstat(&self, path: &VfsPath, links: Links<'_>) -> Result<Stat> {
        if *path == self.mount {
            return rustix::fs::fstat(&self.root).map_err(|e| errno(path, e));
        }
        let (dir, name) = self.parent(path, links)?;
        rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| errno(path, e))
    }

    /// What a link at `path` leads to: `Some(stat)` of its target when it
    /// resolves inside the root to a place `allowed` accepts, `None` when it
    /// dangles, leads out or is not for this caller.
    pub fn link_target(
        &self,
        path: &VfsPath,
        allowed: &dyn Fn(&VfsPath) -> Result<()>,
    ) -> Option<Stat> {
        let flags = OFlags::PATH.union(OFlags::CLOEXEC);
        let fd = self.open_at(path, flags, Links::Follow(allowed)).ok()?;
        rustix::fs::fstat(fd).ok()
    }
}

/// What a lookup may do with symbolic links on the way to its target.
#[derive(Clone, Copy)]
pub enum Links<'a> {
    /// A link in any component is refused (`PERMISSION_DENIED`): writes,
    /// edits and deletes act on the object the logical path names, never on
    /// one a link leads to.
    Refuse,
    /// Links that stay inside the root are followed when the function
    /// accepts the logical path they lead to (the caller's grants must hold
    /// there; see `FsBackend`).
    Follow(&'a dyn Fn(&VfsPath) -> Result<()>),
}

/// The error of a write, edit or delete whose path goes through a link.
fn through_link(path: &VfsPath) -> Error {
    Error::PermissionDenied(format!(
        "{path}: a symbolic link on the way; writes, edits and deletes never go through links"
    ))
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
        // Opening a socket (or a device with no driver) for reading.
        Errno::NXIO => not_regular(path),
        other => Error::io(path.as_str(), other.into()),
    }
}

/// The error for a device, socket or pipe where a regular file is needed.
pub fn not_regular(path: &VfsPath) -> Error {
    Error::InvalidArgument(format!(
        "{path} is not a regular file (device, socket or pipe)"
    ))
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

/// Seconds from the epoch to 0001-01-01 and to 9999-12-31T23:59:59, the
/// range of a protobuf `Timestamp`.
const TIMESTAMP_RANGE: std::ops::RangeInclusive<i64> = -62_135_596_800..=253_402_300_799;

/// A file time as a `SystemTime`, clamped to what a protobuf `Timestamp` can
/// carry: a file whose time stamp is absurd (any process may set one, up to
/// `i64::MIN` seconds) is shown at the nearest end of that range instead of
/// breaking the listing of its directory.
pub(super) fn time(secs: i64, nanos: u64) -> SystemTime {
    let secs = secs.clamp(*TIMESTAMP_RANGE.start(), *TIMESTAMP_RANGE.end());
    let nanos = Duration::from_nanos(nanos.min(999_999_999));
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

/// A time `nanos` after the epoch, as the kernel takes it.
pub fn timespec(nanos: u64) -> rustix::fs::Timespec {
    rustix::fs::Timespec {
        tv_sec: (nanos / 1_000_000_000) as _,
        tv_nsec: (nanos % 1_000_000_000) as _,
    }
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

/// The executable bit of a file whose `lstat` is `st`: its owner's execute
/// permission, the bit `chmod +x` sets and the mount shows
/// (docs/contract.md § The executable bit).
pub fn executable(st: &Stat) -> bool {
    st.st_mode & 0o100 != 0
}

/// What a Glob lists for the file or link (`link`) at `path` whose `lstat`
/// is `st`: the tree's walk (`super::search`) and the table's
/// (`super::table_walk`) alike.
pub fn glob_entry(path: VfsPath, st: &Stat, link: bool) -> Entry {
    let modified = modified(st);
    Entry {
        path,
        kind: if link {
            // Search never resolves links, not even to describe them.
            EntryKind::Symlink {
                to_directory: false,
            }
        } else {
            EntryKind::File
        },
        size: st.st_size as u64,
        modified,
        created: modified,
        version: version(st),
        executable: !link && executable(st),
    }
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

/// Opens `rel` beneath the directory `dir` with no symbolic link in any
/// component and no `..` leaving `dir`.
pub(super) fn open_beneath(dir: &OwnedFd, rel: &str, flags: OFlags) -> rustix::io::Result<OwnedFd> {
    let mut tries = 0;
    loop {
        let resolve = RESOLVE | ResolveFlags::NO_SYMLINKS;
        match rustix::fs::openat2(dir, rel, flags, Mode::empty(), resolve) {
            Err(Errno::AGAIN) if tries < EAGAIN_RETRIES => tries += 1,
            other => return other,
        }
    }
}
