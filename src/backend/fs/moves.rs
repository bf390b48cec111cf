//! Move on the Filesystem tier: one `renameat2` between the handles of the
//! source's and the destination's parent directories.
//!
//! Invariants:
//! - both parents are reached with no link in any component
//!   (`PERMISSION_DENIED` otherwise), so neither end leaves the root and a
//!   grant checked on either logical path holds for what moves and where it
//!   lands; a source that is a link moves the link, never its target;
//! - missing parents of the destination are created as a write creates
//!   them; `create_only` and a directory source rename with
//!   `RENAME_NOREPLACE`, so the kernel, not a check that could race, keeps
//!   them from replacing anything;
//! - the source is checked (and its files counted) once without the locks,
//!   then again under the locks of both paths, which every agentvfs write,
//!   edit and delete of them holds too;
//! - the moved file gets a version above its old one, above that of the
//!   file it replaced and above the clock read under the locks before the
//!   rename, so above every version its new path ever had
//!   (`FsBackend::moved_version`), set before the locks are released,
//!   while the files below a moved directory keep theirs (their inodes are
//!   not touched by the rename);
//! - the log records a deletion at the source and a creation (or a
//!   modification) at the destination, for every file moved.

use super::sandbox::{self, Links, errno, file_type};
use super::tree::{below, count_tree, for_each_file, identity};
use super::{FsBackend, c_name, check_leaf_version};
use crate::backend::{MoveOutcome, Precondition, check_directory_delete};
use crate::change::{ChangeKind, Operation};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use rustix::fs::{AtFlags, FileType, RenameFlags, Stat, Timestamps};
use rustix::io::Errno;
use std::ffi::CStr;
use std::os::fd::OwnedFd;
use std::time::SystemTime;

impl FsBackend {
    /// Moves `source` to `destination` (Backend::rename); see the module
    /// doc.
    pub(super) fn move_path(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        for path in [source, destination] {
            if path == self.sandbox.mount() {
                return Err(crate::backend::unmovable_mount(path));
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
        // Every earlier version of the destination, deleted files' included,
        // was drawn from the clock under this lock before now (writes stamp
        // their files under it), so the clock read here bounds them all.
        let clock = sandbox::nanos(SystemTime::now());
        let floor = match &target {
            Some(st) if file_type(st) != FileType::Directory => {
                sandbox::version(&now).max(sandbox::version(st))
            }
            _ => sandbox::version(&now),
        }
        .max(clock);
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
    /// greater than `floor` (its own old version, that of the file it
    /// replaced, and the clock read under the locks before the rename), so
    /// no `if_version` taken before the Move matches it and the destination's
    /// versions only grow, across deletes too.
    ///
    /// The rename moved the file's change time forward, but the kernel
    /// stamps it from its coarse clock unless the file system keeps
    /// fine-grained change times, so it may lag the clock read before the
    /// rename by up to a tick (a write's version, drawn from the fine clock a
    /// moment earlier, can be above it: the linearizability checker found
    /// exactly that, docs/linearizability.md). Then the modification time is
    /// set one nanosecond past the floor: the one case where a Move changes
    /// a file's time. A server that may not set the times of a file it does
    /// not own leaves the version as it is.
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
}
