//! Reading a directory's ignore files from disk for the Filesystem tier's
//! walks (the ordered walk, [`super::search`], and the read-ahead workers,
//! [`super::prefetch`]); compiling and matching their rules is the search
//! engine's (`crate::search::ignore_rules`).

use super::sandbox::{READ_FLAGS, errno};
use crate::path::VfsPath;
use crate::search::SearchRun;
use crate::search::ignore_rules::{Level, Problem, level_of, read_text, rules_of};
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
    level_of(run, dir, problems, reader(fd, present))
}

/// [`load_level`] whatever a search includes: what the Filesystem tier's
/// path table keeps of each directory (`super::mirror`).
pub fn load_rules(
    fd: &OwnedFd,
    dir: &VfsPath,
    present: impl Fn(&str) -> bool,
    problems: &mut Vec<Problem>,
) -> Level {
    rules_of(dir, problems, reader(fd, present))
}

/// Reads an ignore file of the directory `fd` by name, when `present`.
fn reader(
    fd: &OwnedFd,
    present: impl Fn(&str) -> bool,
) -> impl FnMut(&str, &VfsPath) -> crate::error::Result<Option<String>> {
    move |name, path| {
        if !present(name) {
            return Ok(None);
        }
        // Not following links.
        let flags = READ_FLAGS | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let file =
            rustix::fs::openat(fd, name, flags, Mode::empty()).map_err(|e| errno(path, e))?;
        read_text(path, std::fs::File::from(file)).map(Some)
    }
}
