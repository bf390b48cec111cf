//! The scopes agentvfs keeps for itself on a Filesystem mount (a branch's
//! changes, the registry of branches: names starting with
//! [`INTERNAL_SCOPE`], which no caller can send), kept in the server's data
//! directory, never in the served one (docs/branches.md § On the
//! Filesystem tier).
//!
//! The State, Store and object tiers key files by scope, so a branch's
//! changes live beside the base's under another name. A Filesystem mount
//! serves one real directory whatever the scope, so each internal scope
//! gets a directory of its own, `<dir>/<scope>/files`, served by a
//! Filesystem tier of its own mounted at the same logical prefix (paths
//! line up with the base's), with its own changeset journal
//! (`<dir>/<scope>/journal`): writes, compare-and-set, commits and Moves
//! there work exactly as on the tier. Nothing reaches the served directory
//! until a merge commits to the base scope.

use super::FsBackend;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::{INTERNAL_SCOPE, Scope};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;

/// Longest directory name an internal scope's directory has (file names
/// end at 255 bytes); a longer scope name is split in two (see
/// [`InternalScopes::home`]).
const MAX_DIR_NAME: usize = 192;
/// Ends the first half of a split name: no scope name holds it, so a split
/// name's directory is never a whole name's.
const SPLIT_MARK: char = '=';

/// The internal scopes of one Filesystem mount.
pub(super) struct InternalScopes {
    /// Where their directories are (in the server's data directory).
    dir: PathBuf,
    mount: VfsPath,
    max_file_bytes: u64,
    change_log: usize,
    /// The tiers opened so far, by scope name: one per scope, so the locks
    /// of a scope's paths are one set.
    open: Mutex<HashMap<String, Arc<FsBackend>>>,
    /// Bumped after every change of every scope, those opened after a
    /// Watch began included (a scope opens at its first call).
    changed: Arc<watch::Sender<u64>>,
}

impl InternalScopes {
    /// The internal scopes of the mount at `mount`, kept below `dir`.
    pub(super) fn new(
        dir: &Path,
        mount: VfsPath,
        max_file_bytes: u64,
        change_log: usize,
    ) -> Result<InternalScopes> {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::Internal(format!(
                "cannot create the branch directory {}: {e}",
                dir.display()
            ))
        })?;
        Ok(InternalScopes {
            dir: dir.canonicalize().unwrap_or_else(|_| dir.to_owned()),
            mount,
            max_file_bytes,
            change_log,
            open: Mutex::new(HashMap::new()),
            changed: Arc::new(watch::Sender::new(0)),
        })
    }

    /// Where they are kept.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    fn opened(&self) -> MutexGuard<'_, HashMap<String, Arc<FsBackend>>> {
        // Every critical section leaves the map whole (an insert, a remove).
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tier serving `scope`, opened (and its journal recovered) on
    /// first use; `None` for a caller's scope, which the served directory
    /// holds.
    pub(super) fn of(&self, scope: &Scope) -> Result<Option<Arc<FsBackend>>> {
        if !scope.namespace.starts_with(INTERNAL_SCOPE) {
            return Ok(None);
        }
        Scope::check_stored_name("namespace", &scope.namespace)?;
        let mut open = self.opened();
        if let Some(tier) = open.get(&scope.namespace) {
            return Ok(Some(tier.clone()));
        }
        let home = self.home(&scope.namespace);
        let files = home.join("files");
        std::fs::create_dir_all(&files)
            .map_err(|e| Error::Internal(format!("cannot create {}: {e}", files.display())))?;
        let mut tier = FsBackend::open_signalling(
            self.mount.clone(),
            &files,
            self.max_file_bytes,
            self.change_log,
            self.changed.clone(),
        )?
        .with_journal(&home.join("journal"))?;
        tier.serves_internal = true;
        let tier = Arc::new(tier);
        open.insert(scope.namespace.clone(), tier.clone());
        Ok(Some(tier))
    }

    /// Deletes everything `scope` holds, its directory included.
    pub(super) fn drop_scope(&self, scope: &Scope) -> Result<()> {
        if !scope.namespace.starts_with(INTERNAL_SCOPE) {
            return Err(Error::InvalidArgument(format!(
                "{}: only an internal scope can be dropped",
                self.mount
            )));
        }
        Scope::check_stored_name("namespace", &scope.namespace)?;
        let mut open = self.opened();
        open.remove(&scope.namespace);
        let home = self.home(&scope.namespace);
        match std::fs::remove_dir_all(&home) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::Internal(format!(
                "cannot remove {}: {e}",
                home.display()
            ))),
        }
    }

    /// The change signal of every scope, opened now or later (a Watch in
    /// a branch waits on its scope's log, which may open after it began).
    pub(super) fn signals(&self, out: &mut Vec<watch::Receiver<u64>>) {
        out.push(self.changed.subscribe());
    }

    /// The directory of the internal scope `name`: its name without the
    /// marker (letters, digits and `-_.@+:~`, which
    /// `Scope::check_stored_name` holds it to, never `.` or `..` alone: it
    /// starts `branch`), or one longer than [`MAX_DIR_NAME`] split into
    /// `<first part>=/<rest>`.
    fn home(&self, name: &str) -> PathBuf {
        let name = name.trim_start_matches(INTERNAL_SCOPE);
        if name.len() <= MAX_DIR_NAME {
            return self.dir.join(name);
        }
        let (head, rest) = name.split_at(MAX_DIR_NAME);
        self.dir.join(format!("{head}{SPLIT_MARK}")).join(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_stay_distinct_and_short() {
        let tmp = tempfile::tempdir().unwrap();
        let mount = VfsPath::parse("/workspace").unwrap();
        let scopes = InternalScopes::new(tmp.path(), mount, 1 << 20, 0).unwrap();
        let a = format!("!branch.{}.a", "n".repeat(300));
        let b = format!("!branch.{}.b", "n".repeat(300));
        let (ha, hb) = (scopes.home(&a), scopes.home(&b));
        assert_ne!(ha, hb);
        assert_eq!(ha.parent(), hb.parent());
        for part in ha.strip_prefix(scopes.dir()).unwrap() {
            assert!(part.len() <= MAX_DIR_NAME + 1, "{ha:?}");
        }
        assert_eq!(
            scopes.home("!branch.ns.x").file_name().unwrap(),
            "branch.ns.x"
        );
    }
}
