//! Reads on the Filesystem tier: a file opened once, with the metadata its
//! version comes from.
//!
//! Invariants:
//! - what a read returns and the version it names are of one file that the
//!   path named at one moment (docs/contract.md § Versions): once opened,
//!   the path is looked up again and must still name that file, linked,
//!   with the same times and size; else the open is tried again (at most
//!   [`OPEN_ATTEMPTS`] times, then `UNAVAILABLE`);
//! - a read never sees an agentvfs change of the path half done: it opens
//!   under the path's look lock;
//! - only regular files within the size limit are read; a file that grows
//!   past the limit while read is refused, never returned cut.

use super::sandbox::{READ_FLAGS, errno, file_type, not_regular};
use super::{FsBackend, Links};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use rustix::fs::{FileType, OFlags, Stat};
use std::io::Read;
use std::os::fd::OwnedFd;

/// Opens of a file a read tries while the file keeps being replaced under
/// it (each attempt is a few system calls; a writer replaces a file in one).
const OPEN_ATTEMPTS: usize = 64;

impl FsBackend {
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
    pub(super) fn open_named(
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
    pub(super) fn read_whole(&self, path: &VfsPath, fd: OwnedFd, st: &Stat) -> Result<Vec<u8>> {
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
    pub(super) fn regular(&self, path: &VfsPath, fd: &OwnedFd) -> Result<Stat> {
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
