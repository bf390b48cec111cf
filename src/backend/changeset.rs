//! A changeset as a tier applies it: each file's final state and the version
//! the changeset saw it at (docs/changesets.md § Tiers).
//!
//! The application layer stages a changeset's operations (write, edit,
//! delete, move) in order over the files as it read them, then hands the
//! tier one [`FileChange`] per path touched. The tier applies them as one
//! atomic step, or none of them: every file must still be at the version
//! the changeset saw (else [`Error::VersionMismatch`](crate::error::Error),
//! and the application layer stages again), so a changeset is a
//! multi-file compare-and-swap, and concurrent changesets serialize.
//!
//! Paths are distinct, on one mount, and none lies below another (the
//! application layer refuses such changesets), so a tier checks each path
//! against what is stored without minding the others.

use crate::change::Operation;
use crate::error::Error;
use crate::path::VfsPath;
use crate::search::index::Registry;

/// Most files one changeset may touch, whatever `[limits]` says: a tier
/// holds a lock per file while it applies them.
pub const MAX_CHANGESET_FILES: usize = 10_000;

/// What a changeset does to one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileAction {
    /// The file's content becomes `data` (created when absent).
    Put {
        /// The new content (shared with the changeset's staging, not a copy).
        data: bytes::Bytes,
        /// How it came about (write, edit, move), for history and Watch.
        operation: Operation,
        /// For a moved file: where it came from.
        moved_from: Option<VfsPath>,
        /// The executable bit it gets; `None` keeps the replaced file's
        /// (a new file's is off).
        executable: Option<bool>,
    },
    /// The file is deleted.
    Delete {
        /// For a moved file's source: where it went.
        moved_to: Option<VfsPath>,
    },
    /// Nothing changes, but the changeset read the file, so it must still
    /// be at the version seen (an edit then its undo, a write then a delete
    /// of a new file).
    Check,
}

/// One file's part in a changeset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    /// The file's logical path.
    pub path: VfsPath,
    /// The version the changeset saw (`None`: no file was there). The tier
    /// refuses the changeset when the file is at another.
    pub expected: Option<u64>,
    /// What happens to it.
    pub action: FileAction,
}

/// What a committed changeset did to one file, in the order of the
/// [`FileChange`]s given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileCommitted {
    /// The file's logical path.
    pub path: VfsPath,
    /// Its new version (a deletion's: its tombstone's, or 0 where the tier
    /// keeps none); for a [`FileAction::Check`], the version checked.
    pub version: u64,
    /// Its size after the changeset (0 when deleted).
    pub size: u64,
    /// True when the file is gone after the changeset.
    pub deleted: bool,
}

/// The error of a changeset whose files lie on two mounts: `first` on
/// `first_mount`, `path` on `mount` (`None`: on no mount).
pub fn spans_mounts(
    first: &VfsPath,
    first_mount: &VfsPath,
    path: &VfsPath,
    mount: Option<&VfsPath>,
) -> Error {
    Error::InvalidArgument(format!(
        "a changeset changes files of one mount: {first} is on {first_mount}, {path} on {}",
        mount.map_or("no mount".to_owned(), ToString::to_string)
    ))
}

/// The error of a tier whose file no longer is at the version a changeset
/// saw: `expected` as the changeset saw it (0: absent), `actual` as stored.
pub fn stale(path: &VfsPath, expected: Option<u64>, actual: Option<u64>) -> Error {
    Error::VersionMismatch {
        path: path.to_string(),
        expected: expected.unwrap_or(0),
        actual: actual.unwrap_or(0),
    }
}

/// Teaches the search index of `namespace` (in `registry`) the contents a
/// changeset just put, `changes` committed as `done`, as far as one change
/// may teach it (docs/search-index.md § Learning in the write path).
pub fn learn_committed(
    registry: &Registry,
    namespace: &str,
    changes: &[FileChange],
    done: &[FileCommitted],
) {
    let Some(mut learning) = registry.write_learning(namespace) else {
        return;
    };
    for (change, committed) in changes.iter().zip(done) {
        if let FileAction::Put { data, .. } = &change.action {
            learning.add(change.path.order_key(), committed.version, &data[..]);
        }
    }
    learning.learn();
}
