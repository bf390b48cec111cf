//! What a path names: the metadata every tier reports and the search
//! engine walks. A leaf module, so tiers, search and front ends share it
//! without depending on one another.

use crate::path::VfsPath;
use std::time::SystemTime;

/// What kind of entry a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory (explicit on disk, implied by file paths in memory).
    Directory,
    /// A symbolic link (Filesystem tier only; shown, never followed outside).
    Symlink {
        /// True when the link resolves, inside the root, to a directory.
        to_directory: bool,
    },
}

/// Metadata of one entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Logical path.
    pub path: VfsPath,
    /// File, directory or link.
    pub kind: EntryKind,
    /// Size in bytes (0 for directories).
    pub size: u64,
    /// Last change.
    pub modified: SystemTime,
    /// Creation (the tier's best knowledge; modification time when unknown).
    pub created: SystemTime,
    /// Generation: grows on every change of this path; 0 for directories.
    pub version: u64,
    /// The executable bit of a file (docs/contract.md § The executable bit):
    /// stored on every tier, so build scripts and git hooks written through
    /// any surface run from a mount. False for directories and links.
    pub executable: bool,
}

impl Entry {
    /// True for directories (not for links to directories).
    pub fn is_directory(&self) -> bool {
        self.kind == EntryKind::Directory
    }

    /// A directory entry with no meaningful times (implied directories).
    pub fn directory(path: VfsPath, time: SystemTime) -> Entry {
        Entry {
            path,
            kind: EntryKind::Directory,
            size: 0,
            modified: time,
            created: time,
            version: 0,
            executable: false,
        }
    }
}
