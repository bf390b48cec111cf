//! Reading a directory's ignore files from disk for the Filesystem tier's
//! walks (the ordered walk, [`super::search`], and the read-ahead workers,
//! [`super::prefetch`]); compiling and matching their rules is the search
//! engine's (`crate::search::ignore_rules`).

use super::sandbox::{READ_FLAGS, errno};
use crate::path::VfsPath;
use crate::search::SearchRun;
use crate::search::ignore_rules::{Level, Problem, level_of, read_text};
use rustix::fs::{Mode, OFlags};
use std::os::fd::OwnedFd;

/// Reads the ignore files of `dir` (open as `fd`) that `present` says exist;
/// unreadable files and bad rules go to `problems`.
pub fn load_level(
    run: &SearchRun,
    fd: &OwnedFd,
    dir: &VfsPath,
    present: impl Fn(&str) -> bool,
    problems: &mut Vec<Problem>,
) -> Level {
    level_of(run, dir, problems, |name, path| {
        if !present(name) {
            return Ok(None);
        }
        // Not following links.
        let flags = READ_FLAGS | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let file =
            rustix::fs::openat(fd, name, flags, Mode::empty()).map_err(|e| errno(path, e))?;
        read_text(path, std::fs::File::from(file)).map(Some)
    })
}
