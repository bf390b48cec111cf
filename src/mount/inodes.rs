//! Inode numbers of the mount: one per logical path, stable while the
//! mount runs (a rename carries the number along), and the directories the
//! mount keeps in memory because the tier has no empty directories
//! (docs/mount.md § Directories).

use fuser::Errno;
use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::sync::Mutex;

/// The inode number of the mount's root.
pub const ROOT: u64 = 1;

#[derive(Debug, Default)]
struct Table {
    by_path: HashMap<String, u64>,
    by_ino: HashMap<u64, String>,
    next: u64,
    /// Directories made or emptied through the mount, kept until `rmdir`.
    local_dirs: BTreeSet<String>,
}

/// The path ↔ inode table.
#[derive(Debug)]
pub struct Inodes {
    table: Mutex<Table>,
}

/// `name` inside `parent` (logical paths).
pub fn join(parent: &str, name: &str) -> String {
    match parent {
        "/" => format!("/{name}"),
        _ => format!("{parent}/{name}"),
    }
}

/// The parent of `path` and its last name (`None` for `/`).
pub fn split(path: &str) -> Option<(&str, &str)> {
    let (parent, name) = path.rsplit_once('/')?;
    if name.is_empty() {
        return None;
    }
    Some((if parent.is_empty() { "/" } else { parent }, name))
}

/// True when `path` is `dir` or below it.
pub fn within(path: &str, dir: &str) -> bool {
    path == dir || dir == "/" || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

impl Inodes {
    /// A table whose root (inode 1) is the logical path `root`.
    pub fn new(root: &str) -> Inodes {
        let mut table = Table {
            next: ROOT + 1,
            ..Table::default()
        };
        table.by_path.insert(root.to_owned(), ROOT);
        table.by_ino.insert(ROOT, root.to_owned());
        Inodes {
            table: Mutex::new(table),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The logical path of `ino`; ENOENT once it was unlinked or forgotten.
    pub fn path(&self, ino: u64) -> Result<String, Errno> {
        self.table().by_ino.get(&ino).cloned().ok_or(Errno::ENOENT)
    }

    /// The path of `name` in directory `parent`; ENAMETOOLONG for a name
    /// longer than a path segment may be (what `statfs` reports as the
    /// longest name), EINVAL for one that is not UTF-8.
    pub fn child(&self, parent: u64, name: &OsStr) -> Result<String, Errno> {
        if name.len() > crate::path::MAX_SEGMENT_BYTES {
            return Err(Errno::ENAMETOOLONG);
        }
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        Ok(join(&self.path(parent)?, name))
    }

    /// The inode number of `path`, given one the first time it is seen.
    pub fn ino(&self, path: &str) -> u64 {
        let mut table = self.table();
        if let Some(&ino) = table.by_path.get(path) {
            return ino;
        }
        let ino = table.next;
        table.next += 1;
        table.by_path.insert(path.to_owned(), ino);
        table.by_ino.insert(ino, path.to_owned());
        ino
    }

    /// The inode number of `path` if it has one.
    pub fn known(&self, path: &str) -> Option<u64> {
        self.table().by_path.get(path).copied()
    }

    /// Forgets `path` (unlinked): a new file there gets a new number.
    pub fn remove(&self, path: &str) {
        let mut table = self.table();
        if let Some(ino) = table.by_path.remove(path) {
            table.by_ino.remove(&ino);
        }
    }

    /// Carries the numbers of `from` and everything below it to `to`,
    /// forgetting what `to` named before.
    pub fn rename(&self, from: &str, to: &str) {
        let mut table = self.table();
        let replaced: Vec<String> = table
            .by_path
            .keys()
            .filter(|p| within(p, to))
            .cloned()
            .collect();
        for path in replaced {
            if let Some(ino) = table.by_path.remove(&path) {
                table.by_ino.remove(&ino);
            }
        }
        let moved: Vec<(String, u64)> = table
            .by_path
            .iter()
            .filter(|(p, _)| within(p, from))
            .map(|(p, &ino)| (p.clone(), ino))
            .collect();
        for (path, ino) in moved {
            let renamed = format!("{to}{}", &path[from.len()..]);
            table.by_path.remove(&path);
            table.by_path.insert(renamed.clone(), ino);
            table.by_ino.insert(ino, renamed);
        }
        let dirs: Vec<String> = table
            .local_dirs
            .iter()
            .filter(|p| within(p, from))
            .cloned()
            .collect();
        for dir in dirs {
            table.local_dirs.remove(&dir);
            table
                .local_dirs
                .insert(format!("{to}{}", &dir[from.len()..]));
        }
    }

    /// Keeps directory `path` (and its parents up to the root) in memory.
    pub fn keep_dir(&self, path: &str) {
        let mut table = self.table();
        let root = table.by_ino.get(&ROOT).cloned().unwrap_or_default();
        let mut dir = path;
        while dir != root && within(dir, &root) {
            table.local_dirs.insert(dir.to_owned());
            match split(dir) {
                Some((parent, _)) => dir = parent,
                None => break,
            }
        }
    }

    /// True when the mount keeps directory `path`.
    pub fn is_local_dir(&self, path: &str) -> bool {
        self.table().local_dirs.contains(path)
    }

    /// Stops keeping directory `path`.
    pub fn drop_dir(&self, path: &str) {
        self.table().local_dirs.remove(path);
    }

    /// The names of the kept directories directly in `dir`.
    pub fn local_children(&self, dir: &str) -> Vec<String> {
        let table = self.table();
        table
            .local_dirs
            .iter()
            .filter_map(|p| split(p))
            .filter(|(parent, _)| *parent == dir)
            .map(|(_, name)| name.to_owned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rename_carries_the_numbers_of_a_tree() {
        let inodes = Inodes::new("/w");
        let a = inodes.ino("/w/a");
        let b = inodes.ino("/w/a/b");
        let old = inodes.ino("/w/c");
        inodes.keep_dir("/w/a/d");
        inodes.rename("/w/a", "/w/c");
        assert_eq!(inodes.path(a).unwrap(), "/w/c");
        assert_eq!(inodes.path(b).unwrap(), "/w/c/b");
        assert!(inodes.path(old).is_err());
        assert!(inodes.is_local_dir("/w/c/d"));
        assert!(!inodes.is_local_dir("/w/a/d"));
        assert_eq!(inodes.ino("/w/ab"), old + 1);
    }

    #[test]
    fn paths_split_and_join_at_the_root() {
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(split("/a"), Some(("/", "a")));
        assert_eq!(split("/a/b"), Some(("/a", "b")));
        assert_eq!(split("/"), None);
    }
}
