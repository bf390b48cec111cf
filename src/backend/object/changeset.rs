//! Changesets on the object tier (docs/changesets.md § Tiers): every file's
//! head changes at once, decided by one conditional put of a commit record.
//!
//! It is Move's protocol (`moves`) with a record in place of the source
//! head, as Percolator-style commits work:
//!
//! 1. each file's state is read (settled) and checked against the version
//!    the changeset saw; large contents are uploaded as blobs, and the
//!    change-log records, successor marks and past versions are written,
//!    as for any change (`commit`);
//! 2. the commit record `{ns}/x/{id}` is created open (`If-None-Match`);
//! 3. every file's head becomes **pending** on the record (a conditional put
//!    on the ETag read): its new head, what it held before, and the
//!    record's ETag. A file the changeset only read is pended too (its new
//!    head is its old one), so it cannot change before the commit point;
//! 4. the commit point: the record is put committed, conditional on its
//!    open ETag. Readers resolve every pending head by one read of the
//!    record (`state`): open, the file is what it was; committed, its new
//!    head. So the changeset is seen whole or not at all;
//! 5. each pending head is replaced by its new head.
//!
//! A changeset that loses a race (a head changed since it was read, or a
//! reader stopped it) puts back the heads it pended and is staged again by
//! the application layer. A killed server leaves pending heads on an open
//! record: readers see the old files, and the next change of one of them
//! stops the changeset after `state::MOVE_GRACE` by fencing its record (so
//! the committed put can never land), after which the heads read as they
//! were. Records are small and kept: a pending head never rolled forward
//! still needs its record to be read.

use super::bucket::Put;
use super::commit::Change as Planned;
use super::head::{self, Pending};
use super::keys::Position;
use super::log::{self, Intent};
use super::state::{Now, Store, now_micros};
use super::write::NewContent;
use super::{FETCH_CONCURRENCY, ObjectBackend, next_version};
use crate::backend::changeset::{learn_committed, stale};
use crate::backend::{FileAction, FileChange, FileCommitted};
use crate::change::{ChangeKind, Operation, Origin};
use crate::error::{Error, Result};
use crate::scope::Scope;
use bytes::Bytes;
use futures_util::future::try_join_all;

/// One file of a changeset, its new head decided.
struct Staged {
    /// Its head key.
    key: String,
    /// The head it gets (for a file only read: the one it has, refenced).
    new: Bytes,
    /// What the pending head holds as the file's state before.
    prior: Option<Bytes>,
    /// What the head is put back to when the changeset does not commit.
    undo: Bytes,
    /// The conditional put on the head as read.
    mode: Put,
    /// The change-log record, at its position.
    record: Option<(Position, Intent)>,
    /// The change the head's state came from (its successor mark).
    mark: Position,
    /// The past version to keep.
    replaced: Option<(String, Bytes)>,
}

/// How one attempt ended.
enum Outcome {
    Committed,
    Lost,
    Voided,
}

impl ObjectBackend {
    /// Applies `changes` (distinct paths, none below another) as one
    /// changeset, or nothing (see the module doc).
    pub(super) fn commit_changes(
        &self,
        scope: &Scope,
        changes: &[FileChange],
    ) -> Result<Vec<FileCommitted>> {
        let ns = self.namespace(scope)?;
        let keys = changes
            .iter()
            .map(|c| self.file_key(ns, &c.path))
            .collect::<Result<Vec<_>>>()?;
        let mut nows = Vec::with_capacity(changes.len());
        for (change, key) in changes.iter().zip(&keys) {
            if let FileAction::Put { data, .. } = &change.action {
                Error::check_file_size(&change.path, data.len() as u64, self.max_file_bytes)?;
            }
            let now = self.settled(ns, key, 1)?;
            let actual = now.file().map(|f| f.meta.version);
            if actual != change.expected {
                return Err(stale(&change.path, change.expected, actual));
            }
            if actual.is_none() && matches!(change.action, FileAction::Put { .. }) {
                self.new_file_checks(ns, &change.path)?;
            }
            nows.push(now);
        }
        let mut contents = Vec::with_capacity(changes.len());
        for change in changes {
            contents.push(match &change.action {
                FileAction::Put { data, .. } => {
                    Some(self.new_content(ns, &change.path, data.to_vec())?)
                }
                _ => None,
            });
        }
        let done = self.commit_staged(ns, scope, changes, &keys, &nows, &contents);
        if let Ok(done) = &done {
            learn_committed(&self.index, ns, changes, done);
        }
        if done.is_err() {
            for (change, content) in changes.iter().zip(&contents) {
                if let Some(content) = content {
                    self.forget_blob(ns, &change.path, content.blob());
                }
            }
        }
        done
    }

    /// Attempts of the commit itself, the heads read and contents stored.
    fn commit_staged(
        &self,
        ns: &str,
        scope: &Scope,
        changes: &[FileChange],
        keys: &[String],
        nows: &[Now],
        contents: &[Option<NewContent>],
    ) -> Result<Vec<FileCommitted>> {
        let logged = changes
            .iter()
            .filter(|c| !matches!(c.action, FileAction::Check))
            .count();
        loop {
            let (mut positions, prune) = match &self.log {
                Some(log) => log.draw_many(ns, logged),
                None => (vec![Position::NONE; logged], None),
            };
            positions.reverse();
            let mut staged = Vec::with_capacity(changes.len());
            let mut done = Vec::with_capacity(changes.len());
            for ((change, key), (now, content)) in
                changes.iter().zip(keys).zip(nows.iter().zip(contents))
            {
                let (file, shown) =
                    self.stage_file(ns, scope, change, key, now, content, &mut positions)?;
                staged.push(file);
                done.push(shown);
            }
            let id = rand::random::<u64>().max(1);
            let origin = Origin::of(scope, Operation::Write);
            let attempt = Attempt {
                store: self.store(),
                ns: ns.to_owned(),
                id,
                record_key: self.keys.changeset(ns, id)?,
                committed: head::moved_away(0, &origin, Position::NONE, id, &self.keys.mount),
                files: staged,
                logged: self.log.is_some(),
            };
            let outcome = self.run("committing a changeset", attempt.run())?;
            if let Some(through) = prune {
                self.prune_log(ns, through);
            }
            match outcome {
                Outcome::Voided => continue,
                Outcome::Lost => return Err(self.lost(ns, changes, keys)?),
                Outcome::Committed => {
                    self.feed.bump();
                    for (change, now) in changes.iter().zip(nows) {
                        if matches!(change.action, FileAction::Check) {
                            continue;
                        }
                        if let Some(replaced) = now.file() {
                            self.forget_replaced(ns, &change.path, replaced);
                        }
                        self.prune_history(ns, &change.path);
                    }
                    return Ok(done);
                }
            }
        }
    }

    /// The conflict of a changeset that lost a race: the first file no
    /// longer at the version the changeset saw (the application layer
    /// stages it again on what is there).
    fn lost(&self, ns: &str, changes: &[FileChange], keys: &[String]) -> Result<Error> {
        for (change, key) in changes.iter().zip(keys) {
            let actual = self.settled(ns, key, 1)?.file().map(|f| f.meta.version);
            if actual != change.expected {
                return Ok(stale(&change.path, change.expected, actual));
            }
        }
        // Stopped by a reader, nothing changed since: stage again all the same.
        let first = &changes[0];
        Ok(stale(&first.path, first.expected, first.expected))
    }

    /// Decides one file's new head and what its change writes first.
    #[allow(clippy::too_many_arguments)]
    fn stage_file(
        &self,
        ns: &str,
        scope: &Scope,
        change: &FileChange,
        key: &str,
        now: &Now,
        content: &Option<NewContent>,
        positions: &mut Vec<Position>,
    ) -> Result<(Staged, FileCommitted)> {
        let path = &change.path;
        let prior = now.state.as_ref().map(|h| h.body.clone());
        let version = next_version(now.floor());
        let undo = match &now.state {
            Some(state) => head::refenced(&state.body),
            None => head::absent(version),
        };
        let mut shown = FileCommitted {
            path: path.clone(),
            version,
            size: 0,
            deleted: false,
        };
        let (new, kind, moved, operation) = match (&change.action, content) {
            (
                FileAction::Put {
                    operation,
                    moved_from,
                    executable,
                    ..
                },
                Some(content),
            ) => {
                let pos = positions.pop().unwrap_or(Position::NONE);
                let origin = Origin::of(scope, *operation);
                let created = now.file().map(|f| f.meta.created);
                shown.size = content.size();
                let kind = match now.file() {
                    Some(_) => ChangeKind::Modified,
                    None => ChangeKind::Created,
                };
                let replaced = now.file().map(|f| f.meta.executable);
                let executable = executable.or(replaced).unwrap_or(false);
                let new = content.head(version, created, executable, &origin, pos);
                (new, Some((kind, pos)), moved_from.as_ref(), *operation)
            }
            (FileAction::Delete { moved_to }, _) => {
                let pos = positions.pop().unwrap_or(Position::NONE);
                let operation = match moved_to {
                    Some(_) => Operation::Move,
                    None => Operation::Delete,
                };
                let origin = Origin::of(scope, operation);
                shown.deleted = true;
                let new = head::deleted(version, &origin, pos);
                (
                    new,
                    Some((ChangeKind::Deleted, pos)),
                    moved_to.as_ref(),
                    operation,
                )
            }
            _ => {
                // Only read: pended as it is, so it holds still until the
                // commit point.
                shown.version = now.file().map_or(0, |f| f.meta.version);
                shown.size = now.file().map_or(0, |f| f.meta.size);
                shown.deleted = now.file().is_none();
                (undo.clone(), None, None, Operation::Write)
            }
        };
        let origin = Origin::of(scope, operation);
        let record = match (kind, &self.log) {
            (Some((kind, pos)), Some(_)) => {
                let planned = Planned {
                    ns,
                    path,
                    key,
                    now,
                    kind,
                    version,
                    size: shown.size,
                    origin: &origin,
                    moved,
                };
                Some((pos, planned.intent()))
            }
            _ => None,
        };
        let replaced = match kind {
            Some(_) => self.keep_replaced(ns, now.state.as_ref(), path)?,
            None => None,
        };
        let staged = Staged {
            key: key.to_owned(),
            new,
            prior,
            undo,
            mode: now.put_mode(),
            mark: if kind.is_some() {
                now.pos()
            } else {
                Position::NONE
            },
            record,
            replaced,
        };
        Ok((staged, shown))
    }
}

/// The requests of one attempt, run on the tier's runtime.
struct Attempt {
    store: Store,
    ns: String,
    id: u64,
    record_key: String,
    /// The record's committed body.
    committed: Bytes,
    files: Vec<Staged>,
    logged: bool,
}

impl Attempt {
    async fn run(self) -> Result<Outcome> {
        let (store, ns) = (&self.store, self.ns.as_str());
        // 1. What any change writes before its head: records, marks, pasts.
        let mut recorded = true;
        for files in self.files.chunks(FETCH_CONCURRENCY) {
            let firsts = files
                .iter()
                .map(|f| write_firsts(store, ns, f, self.logged));
            recorded &= try_join_all(firsts).await?.into_iter().all(|r| r);
        }
        if !recorded {
            return Ok(Outcome::Voided);
        }
        // 2. The record, open.
        let open = head::absent(0);
        let Some(open_etag) = store.put_head(&self.record_key, open, Put::Create).await? else {
            return Err(Error::Internal(format!(
                "changeset record {} exists already",
                self.record_key
            )));
        };
        // 3. Every head pending on it.
        let since = now_micros();
        let mut pended = Vec::with_capacity(self.files.len());
        for files in self.files.chunks(FETCH_CONCURRENCY) {
            let puts = files.iter().map(|file| {
                let pending = Pending {
                    move_id: self.id,
                    since,
                    source: None,
                    source_etag: open_etag.clone(),
                    new: file.new.clone(),
                    prior: file.prior.clone(),
                };
                let body = head::pending(&pending, Position::NONE);
                store.put_head(&file.key, body, file.mode.clone())
            });
            pended.extend(try_join_all(puts).await?);
        }
        if pended.iter().any(Option::is_none) {
            self.put_back(&pended).await?;
            return Ok(Outcome::Lost);
        }
        // 4. The commit point.
        let committed = store
            .put_head(
                &self.record_key,
                self.committed.clone(),
                Put::Replace(open_etag),
            )
            .await?
            .is_some();
        if !committed {
            // Stopped by a change that waited too long: never committed.
            self.put_back(&pended).await?;
            return Ok(Outcome::Lost);
        }
        // 5. The new heads in place of the pending ones (anyone who finds
        // one pending on a committed record reads it as its new head).
        let bodies: Vec<Bytes> = self.files.iter().map(|f| f.new.clone()).collect();
        self.replace_pended(&pended, &bodies).await?;
        Ok(Outcome::Committed)
    }

    /// Puts back the heads this attempt pended (`pended[i]`: the pending
    /// head's ETag), where they still are.
    async fn put_back(&self, pended: &[Option<String>]) -> Result<()> {
        let bodies: Vec<Bytes> = self.files.iter().map(|f| f.undo.clone()).collect();
        self.replace_pended(pended, &bodies).await
    }

    /// Puts `bodies[i]` over file `i`'s pending head where it still is.
    async fn replace_pended(&self, pended: &[Option<String>], bodies: &[Bytes]) -> Result<()> {
        let store = &self.store;
        let puts: Vec<(&str, &Bytes, &String)> = self
            .files
            .iter()
            .zip(bodies)
            .zip(pended)
            .filter_map(|((file, body), etag)| Some((file.key.as_str(), body, etag.as_ref()?)))
            .collect();
        for batch in puts.chunks(FETCH_CONCURRENCY) {
            let replaced = batch.iter().map(|(key, body, etag)| {
                store.put_head(key, (*body).clone(), Put::Replace((*etag).clone()))
            });
            try_join_all(replaced).await?;
        }
        Ok(())
    }
}

/// Writes what file `file`'s change writes before its head: its record
/// (false: its position was voided), the successor mark and the past
/// version.
async fn write_firsts(store: &Store, ns: &str, file: &Staged, logged: bool) -> Result<bool> {
    let recorded = match &file.record {
        Some((pos, intent)) => log::write_record(store, ns, *pos, intent).await?,
        None => true,
    };
    if logged {
        log::mark_successor(store, ns, file.mark).await?;
    }
    if let Some((key, body)) = &file.replaced {
        store.client.put(key, body.clone(), Put::Overwrite).await?;
    }
    Ok(recorded)
}
