//! Deletes on the object tier (docs/object-storage.md § Delete).
//!
//! A file is deleted by one conditional put of a tombstone over its head,
//! on the ETag read: of two racing deletes one wins and the other reads
//! again and finds no file (NOT_FOUND), and a delete never erases a write
//! it did not see. A recursive delete deletes file by file, each as it is
//! when its turn comes; it is not atomic: a crash leaves some files
//! deleted, never one half-deleted.

use super::commit::Change;
use super::head;
use super::{MAX_ATTEMPTS, ObjectBackend, backoff, next_version};
use crate::backend::{Precondition, check_directory_delete};
use crate::change::{ChangeKind, Operation, Origin};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;

impl ObjectBackend {
    /// Deletes the file at `path` if there is one: `Ok(true)` once deleted,
    /// `Ok(false)` when no file is there (then it may be a directory).
    fn delete_file(
        &self,
        ns: &str,
        path: &VfsPath,
        if_version: Option<u64>,
        origin: &Origin,
    ) -> Result<bool> {
        let key = self.file_key(ns, path)?;
        for attempt in 0..MAX_ATTEMPTS {
            let now = self.settled(ns, &key, 1)?;
            let Some(file) = now.file() else {
                return Ok(false);
            };
            Precondition::if_version(if_version).check(path, Some(file.meta.version))?;
            let version = next_version(now.floor());
            let change = Change {
                ns,
                path,
                key: &key,
                now: &now,
                kind: ChangeKind::Deleted,
                version,
                size: 0,
                origin,
                moved: None,
            };
            if self.commit(&change, |pos| head::deleted(version, origin, pos))? {
                self.forget_replaced(ns, path, file);
                return Ok(true);
            }
            backoff(attempt);
        }
        Err(Error::Unavailable(format!(
            "{path}: gave up after {MAX_ATTEMPTS} deletes lost races with other writers"
        )))
    }

    /// Delete: a file, or with `recursive` every file below a directory;
    /// returns how many files went.
    pub(super) fn remove(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        let ns = self.namespace(scope)?;
        let origin = Origin::of(scope, Operation::Delete);
        if path != &self.keys.mount && self.delete_file(ns, path, if_version, &origin)? {
            return Ok(1);
        }
        self.lookup_missing(ns, path)?;
        check_directory_delete(path, if_version, recursive)?;
        let mut deleted = 0;
        let mut after = None;
        loop {
            // A page of the files below at a time; each is deleted as it is
            // when its turn comes (one changed since the listing too).
            let (files, last) = self.files_below(ns, path, after)?;
            for file in files {
                if self.delete_file(ns, &file, None, &origin)? {
                    deleted += 1;
                }
            }
            match last {
                Some(last) => after = Some(last),
                None => return Ok(deleted),
            }
        }
    }
}
