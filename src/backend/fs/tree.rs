//! Walks of a directory tree on the Filesystem tier (recursive Delete, and
//! Move's count and log of a directory's files).
//!
//! Invariants:
//! - a walk never follows a link: a link is a leaf, and every directory is
//!   opened with `O_NOFOLLOW` relative to its parent's handle, so a walk
//!   never leaves the tree it started in;
//! - one open directory at a time, whatever the depth: the way down is a
//!   stack of names (a tree 15,000 levels deep neither overflows the stack
//!   nor runs out of descriptors), and the way up opens `..`, checked to be
//!   the directory the walk came down from (a tree moved under the walk
//!   stops it with an error, never lets it wander);
//! - names that are not UTF-8 are walked (and removed) too; they are only
//!   left out of what is reported by logical path.

use super::sandbox::{self, DIR_FLAGS, errno, file_type};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::ffi::{CStr, CString};
use std::os::fd::OwnedFd;

/// One directory on the way down of [`walk_tree`].
struct Descent {
    /// Its name in its parent.
    name: CString,
    /// Device and inode: the parent reached back through `..` must be the
    /// one the walk came from, or the tree was moved and the walk stops.
    id: (u64, u64),
    /// Subdirectories still to walk.
    subdirs: Vec<CString>,
}

/// The device and inode of an open directory.
#[allow(clippy::unnecessary_cast)]
pub(super) fn identity(path: &VfsPath, fd: &OwnedFd) -> Result<(u64, u64)> {
    let st = rustix::fs::fstat(fd).map_err(|e| errno(path, e))?;
    Ok((st.st_dev as u64, st.st_ino as u64))
}

/// Walks the directory `name` in `parent` and everything below it without
/// following any link: `leaf(dir, name)` is called for every non-directory
/// (a link is a leaf: it is never followed), and `finished(parent, name)`
/// for every directory once everything below it was walked, deepest first
/// and `name` itself last. Names are passed as raw bytes: non-UTF-8 names
/// are walked too.
///
/// Iterative with one open directory at a time, whatever the depth: the way
/// down is a stack of names (a tree 15,000 levels deep neither overflows the
/// stack nor runs out of descriptors), and the way up opens `..`, checked to
/// be the directory the walk came down from.
fn walk_tree(
    parent: &OwnedFd,
    name: &CStr,
    path: &VfsPath,
    mut leaf: impl FnMut(&OwnedFd, &[CString], &CStr) -> Result<()>,
    mut finished: impl FnMut(&OwnedFd, &CStr) -> Result<()>,
) -> Result<()> {
    let os = |e| errno(path, e);
    let open = |dir: &OwnedFd, name: &CStr| {
        rustix::fs::openat(dir, name, DIR_FLAGS | OFlags::NOFOLLOW, Mode::empty()).map_err(os)
    };
    // Calls `leaf` for the non-directories of `fd` (at `chain` below
    // `name`) and returns its subdirectories. The names are read first:
    // `leaf` may remove them.
    let mut visit = |fd: &OwnedFd, chain: &[CString]| -> Result<Vec<CString>> {
        let mut children = Vec::new();
        sandbox::for_each_entry(fd, |name, kind| children.push((name.to_owned(), kind)))
            .map_err(os)?;
        let mut subdirs = Vec::new();
        for (child, kind) in children {
            let kind = match kind {
                FileType::Unknown => {
                    rustix::fs::statat(fd, child.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)
                        .map(|st| file_type(&st))
                        .map_err(os)?
                }
                known => known,
            };
            if kind == FileType::Directory {
                subdirs.push(child);
            } else {
                leaf(fd, chain, &child)?;
            }
        }
        Ok(subdirs)
    };
    let mut fd = open(parent, name)?;
    // The names of the directories from `name` (excluded) down to `fd`.
    let mut chain: Vec<CString> = Vec::new();
    let mut stack = vec![Descent {
        name: name.to_owned(),
        id: identity(path, &fd)?,
        subdirs: visit(&fd, &chain)?,
    }];
    while let Some(top) = stack.last_mut() {
        if let Some(sub) = top.subdirs.pop() {
            fd = open(&fd, &sub)?;
            chain.push(sub.clone());
            let subdirs = visit(&fd, &chain)?;
            stack.push(Descent {
                name: sub,
                id: identity(path, &fd)?,
                subdirs,
            });
            continue;
        }
        // Everything below `top` is walked: go up.
        let done = stack.pop().expect("the loop holds a top");
        chain.pop();
        let (up, up_id) = match stack.last() {
            Some(above) => (open(&fd, c"..")?, above.id),
            None => break,
        };
        if identity(path, &up)? != up_id {
            return Err(Error::Internal(format!(
                "{path}: the tree was moved while it was being walked; the walk stopped"
            )));
        }
        finished(&up, &done.name)?;
        fd = up;
    }
    finished(parent, name)
}

/// The logical path of the file `leaf` at `chain` below the directory
/// `top`; `None` for a name no logical path can hold (not UTF-8, ...).
pub(super) fn below(top: &VfsPath, chain: &[CString], leaf: &CStr) -> Option<VfsPath> {
    let mut path = top.clone();
    for name in chain.iter().map(CString::as_c_str).chain([leaf]) {
        path = path.join(name.to_str().ok()?).ok()?;
    }
    Some(path)
}

/// Removes the directory `name` in `parent` (`path`) and everything below
/// it without following any link, telling `removed` the logical path of
/// each non-directory removed; returns how many were.
pub(super) fn remove_tree(
    parent: &OwnedFd,
    name: &CStr,
    path: &VfsPath,
    mut removed: impl FnMut(&VfsPath),
) -> Result<u64> {
    let os = |e| errno(path, e);
    let mut count = 0;
    walk_tree(
        parent,
        name,
        path,
        |dir, chain, leaf| {
            rustix::fs::unlinkat(dir, leaf, AtFlags::empty()).map_err(os)?;
            count += 1;
            if let Some(file) = below(path, chain, leaf) {
                removed(&file);
            }
            Ok(())
        },
        |up, dir| rustix::fs::unlinkat(up, dir, AtFlags::REMOVEDIR).map_err(os),
    )?;
    Ok(count)
}

/// Removes the directory `name` in `parent` (`path`) when it and the
/// directories below it hold nothing else, deepest first, each with
/// `rmdir` (which removes only an empty directory, so a file another
/// writer puts there meanwhile stays); IS_DIRECTORY naming `path` when
/// something else is there (empty directories below it may be gone).
pub(super) fn remove_empty_tree(parent: &OwnedFd, name: &CStr, path: &VfsPath) -> Result<()> {
    let occupied = || Error::IsDirectory(path.to_string());
    walk_tree(
        parent,
        name,
        path,
        |_, _, _| Err(occupied()),
        |up, dir| match rustix::fs::unlinkat(up, dir, AtFlags::REMOVEDIR) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST) => Err(occupied()),
            Err(e) => Err(errno(path, e)),
        },
    )
}

/// Calls `f` with the directory, the chain of names below `name` and the
/// name of every non-directory in the directory `name` in `parent` (`path`)
/// and below it (links included, never followed).
pub(super) fn for_each_file(
    parent: &OwnedFd,
    name: &CStr,
    path: &VfsPath,
    f: impl FnMut(&OwnedFd, &[CString], &CStr) -> Result<()>,
) -> Result<()> {
    walk_tree(parent, name, path, f, |_, _| Ok(()))
}

/// The number of non-directories in the directory `name` in `parent` and
/// below it (links counted, never followed): what [`remove_tree`] would
/// remove, and what a Move of the directory reports as moved.
pub(super) fn count_tree(parent: &OwnedFd, name: &CStr, path: &VfsPath) -> Result<u64> {
    let mut count = 0;
    for_each_file(parent, name, path, |_, _, _| {
        count += 1;
        Ok(())
    })?;
    Ok(count)
}
