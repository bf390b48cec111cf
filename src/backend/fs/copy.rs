//! Copy on the Filesystem tier: the destination is written as any write is
//! (a temporary file in its directory, renamed over it under the path's
//! lock, `pre` checked before and at the rename), filled by cloning the
//! source's extents (`FICLONE`, a reflink: no byte is copied and the two
//! files share storage until one changes) where the file system can, by a
//! byte copy otherwise (`copy_file_range(2)`, in the kernel, where it can).
//!
//! The source is opened as a read opens it (a link followed only where the
//! caller's grants hold at its target), so its content is one state of the
//! file; the size limit is checked on the opened file.

use super::sandbox::{self, errno};
use super::write::Temp;
use super::{FsBackend, READ_OPS, link_rule};
use crate::backend::{Precondition, WriteOutcome};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use rustix::io::Errno;
use std::io::Read as _;
use std::os::fd::OwnedFd;

impl FsBackend {
    /// Copies `source` to `destination` (see the module doc).
    pub(super) fn copy_file(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        let rule = link_rule(scope, source, READ_OPS);
        let (src, st) = self.open_named(source, &rule)?;
        let size = st.st_size as u64;
        Error::check_file_size(source, size, self.max_file_bytes)?;
        // The copy gets the source's executable bit, as `cp` gives it.
        let pre = Precondition {
            executable: Some(sandbox::executable(&st)),
            ..pre
        };
        self.write_with(scope, destination, pre, &mut |temp| {
            clone_into(destination, &src, size, self.max_file_bytes, temp)
        })
    }
}

/// Fills `temp` with the `size` bytes of `src` (at most `max` when cloned
/// whole): a reflink where the file system shares extents, else the
/// standard library's file-to-file copy (`copy_file_range(2)` in the
/// kernel where it can, a read-write loop of small buffers where it
/// cannot).
fn clone_into(
    path: &VfsPath,
    src: &OwnedFd,
    size: u64,
    max: u64,
    temp: &mut Temp<'_>,
) -> Result<()> {
    match rustix::fs::ioctl_ficlone(&temp.fd, src) {
        Ok(()) => {
            // The clone is the source as it is now, which may have changed
            // size since it was opened: count (and bound) what was cloned.
            let cloned = rustix::fs::fstat(&temp.fd).map_err(|e| errno(path, e))?;
            temp.size = cloned.st_size as u64;
            return Error::check_file_size(path, temp.size, max);
        }
        // No shared extents here (another file system, or one that does
        // not reflink): copy the bytes.
        Err(Errno::OPNOTSUPP | Errno::XDEV | Errno::INVAL | Errno::NOTTY | Errno::BADF) => {}
        Err(e) => return Err(errno(path, e)),
    }
    let io = |e| Error::io(path.as_str(), e);
    let mut from = std::fs::File::from(src.try_clone().map_err(io)?).take(size);
    let mut to = std::fs::File::from(temp.fd.try_clone().map_err(io)?);
    temp.size = std::io::copy(&mut from, &mut to).map_err(io)?;
    Ok(())
}
