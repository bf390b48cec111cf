//! A changeset on an ordered tier: one batch (docs/changesets.md § Tiers).
//!
//! Invariants: the engine's locks over every path of the changeset are held
//! from the first check to the batch's apply, so no other change of those
//! files interleaves; every file is checked at the version the changeset
//! saw before anything is staged; the whole changeset (contents, history
//! steps, tombstones and change-log records) is one [`Space::apply`], which
//! is atomic for a crash and for readers alike (State: one session lock;
//! Store: one RocksDB WriteBatch). Its change-log records are consecutive,
//! so a watcher receives them together.

use super::OrderedTier;
use crate::backend::changeset::{learn_committed, stale};
use crate::backend::ordered::{Content, Engine, Files, Space, Stamp, Stored};
use crate::backend::{FileAction, FileChange, FileCommitted};
use crate::change::{ChangeKind, Operation, Origin};
use crate::error::Result;
use crate::scope::Scope;

impl<E: Engine> OrderedTier<E> {
    /// Applies `changes` (distinct paths, none below another) as one batch,
    /// or nothing.
    pub(super) fn commit_changes(
        &self,
        scope: &Scope,
        changes: &[FileChange],
    ) -> Result<Vec<FileCommitted>> {
        let rels = changes
            .iter()
            .map(|c| self.file_rel(&c.path))
            .collect::<Result<Vec<_>>>()?;
        for (change, rel) in changes.iter().zip(&rels) {
            if let FileAction::Put { data, .. } = &change.action {
                self.check_size(&change.path, data.len())?;
            }
            debug_assert!(!rel.is_empty());
        }
        let locked: Vec<&[u8]> = rels.iter().map(Vec::as_slice).collect();
        let puts = changes
            .iter()
            .any(|c| matches!(c.action, FileAction::Put { .. }));
        let scoped = if puts {
            Some(self.engine.find_or_create(scope)?)
        } else {
            self.engine.find(scope)?
        };
        let Some(scoped) = scoped else {
            // Nothing stored, nothing to put: every file must be absent.
            return changes
                .iter()
                .map(|c| match c.expected {
                    None => Ok(committed(c, 0, 0)),
                    Some(_) => Err(stale(&c.path, c.expected, None)),
                })
                .collect();
        };
        let done = self.engine.enter(&scoped, Some(&locked), |space| {
            let mut olds = Vec::with_capacity(changes.len());
            for (change, rel) in changes.iter().zip(&rels) {
                let old = space.get(rel)?;
                let actual = old.as_ref().map(|f| f.meta().version);
                if actual != change.expected {
                    return Err(stale(&change.path, change.expected, actual));
                }
                if old.is_none() && matches!(change.action, FileAction::Put { .. }) {
                    self.check_writable(&*space, &change.path, rel)?;
                }
                olds.push(old);
            }
            let mut batch = Default::default();
            let mut done = Vec::with_capacity(changes.len());
            for ((change, rel), old) in changes.iter().zip(&rels).zip(&olds) {
                let path = &change.path;
                match &change.action {
                    FileAction::Put {
                        data,
                        operation,
                        moved_from,
                        executable,
                    } => {
                        let origin = Origin::of(scope, *operation);
                        let version = self.engine.counters().next_version();
                        self.supersede(&*space, &mut batch, path, rel, old.as_ref(), None, true)?;
                        let content = Content::Bytes(data);
                        let replaced = old.as_ref().map(|f| f.meta().executable);
                        let stamp = Stamp {
                            version,
                            executable: executable.or(replaced).unwrap_or(false),
                        };
                        let size = space.put(
                            &mut batch,
                            path,
                            rel,
                            old.as_ref(),
                            content,
                            stamp,
                            &origin,
                        )?;
                        let kind = if old.is_some() {
                            ChangeKind::Modified
                        } else {
                            ChangeKind::Created
                        };
                        let moved = moved_from.as_ref().map(|p| self.keys.rel(p)).transpose()?;
                        let from = moved.as_deref();
                        self.log(&*space, &mut batch, rel, kind, version, size, origin, from);
                        done.push(committed(change, version, size));
                    }
                    FileAction::Delete { moved_to } => {
                        let Some(file) = old else {
                            return Err(stale(path, change.expected, None));
                        };
                        let operation = match moved_to {
                            Some(_) => Operation::Move,
                            None => Operation::Delete,
                        };
                        let origin = Origin::of(scope, operation);
                        let moved = moved_to.as_ref().map(|p| self.keys.rel(p)).transpose()?;
                        let version = self.delete_file(
                            &*space,
                            &mut batch,
                            path,
                            rel,
                            file,
                            &origin,
                            moved.as_deref(),
                        )?;
                        let mut gone = committed(change, version, 0);
                        gone.deleted = true;
                        done.push(gone);
                    }
                    FileAction::Check => {
                        let (version, size) = old
                            .as_ref()
                            .map_or((0, 0), |f| (f.meta().version, f.meta().size));
                        done.push(committed(change, version, size));
                    }
                }
            }
            space.apply(batch)?;
            Ok(done)
        })?;
        let namespace = self.engine.index_key(scope);
        learn_committed(&self.index, &namespace, changes, &done);
        Ok(done)
    }
}

/// A file's outcome: present with `version` and `size` (a Check of an
/// absent file: deleted).
fn committed(change: &FileChange, version: u64, size: u64) -> FileCommitted {
    FileCommitted {
        path: change.path.clone(),
        version,
        size,
        deleted: matches!(change.action, FileAction::Delete { .. })
            || (matches!(change.action, FileAction::Check) && change.expected.is_none()),
    }
}
