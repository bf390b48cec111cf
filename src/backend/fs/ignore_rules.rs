//! The ignore rules in force during a walk of the Filesystem tier: one
//! [`Level`] per directory from the mount root down, holding that
//! directory's `.ignore` and `.gitignore` rules, and [`skip_of`], which
//! decides whether a path is skipped by them or by the shared
//! hidden/default-ignore name rules ([`crate::search::rules`]).
//!
//! Both the ordered walk ([`super::search`]) and the read-ahead workers
//! ([`super::prefetch`]) use it; it depends on neither.
//!
//! Ignore files follow ripgrep: rules in deeper directories win, and any
//! `.ignore` match wins over any `.gitignore` match. Unlike ripgrep,
//! `.gitignore` applies outside git repositories as well (ripgrep's
//! `--no-require-git`): a workspace copied without its `.git` keeps its
//! rules. `.git/info/exclude` and global excludes are not read. Each file
//! is matched with the `ignore` crate's gitignore matcher, compiled once per
//! distinct file text ([`super::ignore_cache`]).

use super::ignore_cache::{self, Compiled};
use super::sandbox::{READ_FLAGS, errno};
use crate::error::Error;
use crate::path::VfsPath;
use crate::search::SearchRun;
use crate::search::rules::{self, Skip};
use ignore::Match;
use rustix::fs::{Mode, OFlags};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// Ignore files larger than this are not read (reported as a problem).
pub const MAX_IGNORE_FILE_BYTES: u64 = 1 << 20;
/// The ignore files read in each directory, `.ignore` first (it wins).
const IGNORE_FILES: [&str; 2] = [".ignore", ".gitignore"];

/// A problem found while reading a directory or its ignore files: the
/// logical path shown and the error, reported by the walk when it gets there.
pub type Problem = (String, Error);

/// The ignore files of one directory of the walk.
#[derive(Default)]
pub struct Level {
    /// By [`IGNORE_FILES`] index.
    matchers: [Option<Arc<Compiled>>; 2],
    /// Bytes of the directory's logical path and the `/` after it: what to
    /// cut from a path below it to match it against these rules.
    prefix_len: usize,
}

/// Why the hidden, default-ignore and ignore-file rules (of `levels`, the
/// directories from the mount root down to `path`'s parent) skip `path` (a
/// logical path).
pub fn skip_of(run: &SearchRun, levels: &[Arc<Level>], path: &str, is_dir: bool) -> Option<Skip> {
    let spec = run.spec();
    let name = path.rsplit('/').next().unwrap_or(path);
    rules::skip_name(name, spec.include_hidden, spec.include_ignored)
        .or_else(|| ignored_by_files(levels, path, is_dir).then_some(Skip::Ignored))
}

/// ripgrep's precedence: the deepest `.ignore` match, else the deepest
/// `.gitignore` match.
fn ignored_by_files(levels: &[Arc<Level>], path: &str, is_dir: bool) -> bool {
    for kind in 0..IGNORE_FILES.len() {
        for level in levels.iter().rev() {
            if let Some(m) = level.matchers[kind]
                .as_ref()
                .and_then(|c| c.matcher.as_ref())
            {
                // Relative to the rules' directory (the matcher's root is
                // `.`), so `matched` has no prefix to strip: stripping
                // compared `Path`s component by component, 5% of a Glob.
                let rel = path.get(level.prefix_len..).unwrap_or_default();
                match m.matched(rel, is_dir) {
                    Match::None => {}
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                }
            }
        }
    }
    false
}

/// Reads the ignore files of `dir` (open as `fd`) that `present` says exist;
/// unreadable files and bad rules go to `problems`.
pub fn load_level(
    run: &SearchRun,
    fd: &OwnedFd,
    dir: &VfsPath,
    present: impl Fn(&str) -> bool,
    problems: &mut Vec<Problem>,
) -> Level {
    let mut level = Level {
        prefix_len: if dir.is_root() {
            1
        } else {
            dir.as_str().len() + 1
        },
        ..Level::default()
    };
    if run.spec().include_ignored {
        return level;
    }
    for (slot, name) in level.matchers.iter_mut().zip(IGNORE_FILES) {
        if present(name) {
            *slot = load_ignore_file(fd, dir, name, problems);
        }
    }
    level
}

/// Reads one ignore file (not following links) into a matcher of paths
/// relative to `dir`.
fn load_ignore_file(
    fd: &OwnedFd,
    dir: &VfsPath,
    name: &str,
    problems: &mut Vec<Problem>,
) -> Option<Arc<Compiled>> {
    let path = dir.join(name).ok()?;
    let flags = READ_FLAGS | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    let mut text = String::new();
    let read = rustix::fs::openat(fd, name, flags, Mode::empty())
        .map_err(|e| errno(&path, e))
        .and_then(|f| {
            std::fs::File::from(f)
                .take(MAX_IGNORE_FILE_BYTES)
                .read_to_string(&mut text)
                .map_err(|e| Error::io(path.as_str(), e))
        });
    match read {
        Ok(_) => {}
        Err(Error::NotFound(_)) => return None,
        Err(err) => {
            problems.push((path.to_string(), err));
            return None;
        }
    }
    let compiled = ignore_cache::compiled(text);
    for message in &compiled.errors {
        problems.push((path.to_string(), Error::InvalidArgument(message.clone())));
    }
    Some(compiled)
}
