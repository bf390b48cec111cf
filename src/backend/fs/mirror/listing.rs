//! Listing one directory for the mirror (`super`): its entries with each
//! file's metadata and its ignore rules, and the table rows and rule
//! levels made of what was listed.
//!
//! Invariants: a listing is `troubled` whenever the tree's own walk would
//! report a problem there (an unreadable entry, a name that is not a
//! logical path, a device, pipe or socket, a bad ignore file), so a table
//! is never handed out where the walk would say more; an entry removed
//! between the listing and its `lstat` is left out (its event follows).

use super::super::fingerprint::fingerprint;
use super::super::ignore_files::load_rules;
use super::super::prefetch::valid_name;
use super::super::sandbox::{self, file_type, for_each_entry, modified};
use super::Levels;
use crate::entry::{Entry, EntryKind};
use crate::path::VfsPath;
use crate::search::ignore_rules::Level;
use crate::search::index::table::Row;
use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// One mirrored directory.
pub(super) struct Dir {
    pub(super) path: VfsPath,
    pub(super) wd: i32,
    /// Device and inode: a directory moved in under a known name is not
    /// the one listed there before.
    pub(super) id: (u64, u64),
    /// Its entries, by name.
    pub(super) children: BTreeMap<Box<str>, Child>,
    pub(super) level: Arc<Level>,
    /// Its listing had a problem the tree's walk reports.
    pub(super) troubled: bool,
}

/// One entry of a directory.
pub(super) enum Child {
    File(FileMeta),
    Dir,
    Link,
}

/// What a table row needs of a file's `lstat`.
#[derive(Clone, Copy)]
pub(super) struct FileMeta {
    pub(super) size: u64,
    pub(super) modified: std::time::SystemTime,
    pub(super) fingerprint: u64,
    pub(super) executable: bool,
}

/// A directory as just listed.
pub(super) struct Listed {
    pub(super) children: BTreeMap<Box<str>, Child>,
    pub(super) level: Arc<Level>,
    pub(super) troubled: bool,
}

/// Lists the directory open as `fd` at `path`: its entries (a file's
/// metadata by `lstat`) and its ignore rules; `troubled` when the tree's
/// walk would report a problem here.
pub(super) fn list(fd: &OwnedFd, path: &VfsPath) -> Listed {
    let mut raw: Vec<(Vec<u8>, FileType)> = Vec::new();
    let mut troubled = for_each_entry(fd, |name, kind| {
        raw.push((name.to_bytes().to_vec(), kind));
    })
    .is_err();
    let mut children = BTreeMap::new();
    for (bytes, mut kind) in raw {
        let Ok(name) = valid_name(path, &bytes) else {
            troubled = true;
            continue;
        };
        let mut meta = None;
        if kind == FileType::RegularFile || kind == FileType::Unknown {
            match rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => {
                    kind = file_type(&st);
                    meta = Some(FileMeta {
                        size: st.st_size as u64,
                        modified: modified(&st),
                        fingerprint: fingerprint(&st),
                        executable: sandbox::executable(&st),
                    });
                }
                // Removed since the listing: its event follows.
                Err(Errno::NOENT) => continue,
                Err(_) => {
                    troubled = true;
                    continue;
                }
            }
        }
        let child = match (kind, meta) {
            (FileType::RegularFile, Some(meta)) => Child::File(meta),
            (FileType::Directory, _) => Child::Dir,
            (FileType::Symlink, _) => Child::Link,
            // A device, pipe or socket: the tree's walk visits it, a
            // table has no row for it.
            _ => {
                troubled = true;
                continue;
            }
        };
        children.insert(name.into(), child);
    }
    let mut problems = Vec::new();
    let level = load_rules(fd, path, |name| children.contains_key(name), &mut problems);
    Listed {
        children,
        level: Arc::new(level),
        troubled: troubled || !problems.is_empty(),
    }
}

/// The table rows `dir` holds: its files and links, or itself when it is
/// empty (the walk visits an empty directory too); the mount root has no
/// row (a walk starts inside it).
pub(super) fn rows_of(mount: &VfsPath, dir: &Dir) -> Vec<Row> {
    if dir.children.is_empty() {
        if dir.path == *mount {
            return Vec::new();
        }
        let entry = Entry {
            path: dir.path.clone(),
            kind: EntryKind::Directory,
            size: 0,
            modified: std::time::UNIX_EPOCH,
            created: std::time::UNIX_EPOCH,
            version: 0,
            executable: false,
        };
        return vec![Row::of(entry)];
    }
    let mut rows = Vec::new();
    for (name, child) in &dir.children {
        let (kind, meta) = match child {
            Child::Dir => continue,
            Child::Link => (
                EntryKind::Symlink {
                    to_directory: false,
                },
                None,
            ),
            Child::File(meta) => (EntryKind::File, Some(*meta)),
        };
        let Ok(path) = dir.path.join(name) else {
            continue;
        };
        let modified = meta.map_or(std::time::UNIX_EPOCH, |m| m.modified);
        rows.push(Row::of(Entry {
            path,
            kind,
            size: meta.map_or(0, |m| m.size),
            modified,
            created: modified,
            version: meta.map_or(0, |m| m.fingerprint),
            executable: meta.is_some_and(|m| m.executable),
        }));
    }
    rows
}

/// The rules of every directory of `dirs` that has ignore files.
pub(super) fn levels_of(dirs: &BTreeMap<Vec<u8>, Dir>) -> Levels {
    dirs.values()
        .filter(|d| d.level.has_rules())
        .map(|d| (d.path.as_str().into(), d.level.clone()))
        .collect()
}
