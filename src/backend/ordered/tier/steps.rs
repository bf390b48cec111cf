//! The steps every change of an ordered tier is made of: staging a file's
//! new content or its removal in the engine's batch, recording what it
//! replaced in history, and logging the change for Watch, then applying
//! the batch at once.
//!
//! Invariants: a change is visible (the batch applied) only with its
//! history record and its log record, in one atomic step of the engine; a
//! path's new version is always greater than any it had, across deletes
//! and re-creations; what a change teaches the search index is learned
//! only after it commits.

use super::*;

impl<E: Engine> OrderedTier<E> {
    /// Stages `content` at `rel` (replacing `old`) with a new version made
    /// by `origin` and the executable bit `executable`, and applies it: the
    /// write step of every Write, Edit and Restore.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn commit<S: History<Upload = E::Upload>>(
        &self,
        space: &mut S,
        path: &VfsPath,
        rel: &[u8],
        old: Option<&S::File>,
        content: Content<'_, E::Upload>,
        executable: bool,
        origin: Origin,
    ) -> Result<WriteOutcome> {
        self.commit_with(
            space,
            path,
            rel,
            old,
            origin,
            |space, batch, version, origin| {
                let stamp = Stamp {
                    version,
                    executable,
                };
                space.put(batch, path, rel, old, content, stamp, origin)
            },
        )
    }

    /// [`OrderedTier::commit`] with the content staged by `put` (given
    /// the batch, the new version and the origin; answering the size):
    /// [`Space::put`] of bytes, or [`Space::put_copy`] of a Copy.
    pub(super) fn commit_with<S: History<Upload = E::Upload>>(
        &self,
        space: &mut S,
        path: &VfsPath,
        rel: &[u8],
        old: Option<&S::File>,
        origin: Origin,
        put: impl FnOnce(&S, &mut S::Batch, u64, &Origin) -> Result<u64>,
    ) -> Result<WriteOutcome> {
        let mut batch = Default::default();
        let version = self.engine.counters().next_version();
        self.supersede(&*space, &mut batch, path, rel, old, None, true)?;
        let size = put(&*space, &mut batch, version, &origin)?;
        let kind = if old.is_some() {
            ChangeKind::Modified
        } else {
            ChangeKind::Created
        };
        self.log(&*space, &mut batch, rel, kind, version, size, origin, None);
        space.apply(batch)?;
        Ok(WriteOutcome {
            path: path.clone(),
            bytes_written: size,
            version,
            created: old.is_none(),
        })
    }

    /// Checks `pre` and writability, then commits `content`, all under the
    /// path's lock: the read-check-write of every Write.
    pub(super) fn replace(
        &self,
        scope: &Scope,
        path: &VfsPath,
        rel: &[u8],
        pre: Precondition,
        content: Content<'_, E::Upload>,
        operation: Operation,
    ) -> Result<WriteOutcome> {
        self.engine.create(scope, rel, |space| {
            let old = space.get(rel)?;
            pre.check(path, old.as_ref().map(|f| f.meta().version))?;
            if old.is_none() {
                self.check_writable(&*space, path, rel)?;
            }
            let origin = Origin::of(scope, operation);
            let executable = pre.executable_after(old.as_ref().map(|f| f.meta().executable));
            self.commit(space, path, rel, old.as_ref(), content, executable, origin)
        })
    }

    /// Stores a streamed write's pieces and commits them as `operation`
    /// under `pre`: the body of WriteBytes and Restore.
    pub(super) fn write_streamed(
        &self,
        scope: &Scope,
        path: &VfsPath,
        rel: &[u8],
        pre: Precondition,
        pieces: &mut ChunkSource<'_>,
        operation: Operation,
    ) -> Result<WriteOutcome> {
        let learning = self.write_learning(scope);
        let mut copying = StreamCopy::new(pieces, learning.as_ref());
        let streamed = self.engine.upload(path, &mut copying)?;
        let copied = copying.whole();
        let outcome = match streamed {
            Streamed::Whole(data) => {
                self.check_size(path, data.len())?;
                self.replace(scope, path, rel, pre, Content::Bytes(&data), operation)?
            }
            Streamed::Stored(upload) => {
                let outcome =
                    self.replace(scope, path, rel, pre, Content::Uploaded(&upload), operation);
                if outcome.is_err() {
                    self.engine.abandon(&upload)?;
                }
                outcome?
            }
        };
        outcome.teach(learning, copied);
        Ok(outcome)
    }

    /// The history step of a change of `rel` (`path`) that replaces or
    /// deletes `old` and, with `tombstone`, leaves a tombstone; `makes_file`
    /// says a current file remains. Keeps `old` as a past version or
    /// releases it, and drops the past versions the retention no longer
    /// keeps, in the same batch.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn supersede<S: History>(
        &self,
        space: &S,
        batch: &mut S::Batch,
        path: &VfsPath,
        rel: &[u8],
        old: Option<&S::File>,
        tombstone: Option<(u64, &Origin)>,
        makes_file: bool,
    ) -> Result<()> {
        let retention = self.engine.keep().history;
        if !retention.keeps_history() {
            if let Some(old) = old {
                space.release(batch, old)?;
            }
            return Ok(());
        }
        let now = SystemTime::now();
        // Every version that is not current after the change, newest first.
        let mut past: Vec<Past> = Vec::new();
        past.extend(tombstone.map(|(version, _)| Past {
            version,
            time: now,
            content: 0,
        }));
        past.extend(old.map(|f| Past {
            version: f.meta().version,
            time: f.meta().modified,
            content: f.content(),
        }));
        let fresh = past.len();
        let stored = space.past(rel)?;
        past.extend_from_slice(&stored);
        let ages: Vec<(u64, SystemTime)> = past.iter().map(|p| (p.version, p.time)).collect();
        let doomed = retention.doomed(usize::from(makes_file), &ages, now);
        let mut retire = old;
        if let Some(old) = old
            && doomed.contains(&old.meta().version)
        {
            space.release(batch, old)?;
            retire = None;
        }
        let forget: Vec<Past> = stored
            .into_iter()
            .filter(|p| doomed.contains(&p.version))
            .collect();
        if fresh == 0 && forget.is_empty() {
            // Nothing new to keep, nothing to drop.
            return Ok(());
        }
        past.retain(|p| !doomed.contains(&p.version));
        let change = HistoryChange {
            retire,
            tombstone,
            forget: &forget,
            past: &past,
        };
        space.set_history(batch, path, rel, change)
    }

    /// Leaves a tombstone of `rel` (`path`) with a new version, after its
    /// current record `file` (if any, else the file moved away); returns the
    /// tombstone's version, which the change's event carries.
    pub(super) fn bury<S: History>(
        &self,
        space: &S,
        batch: &mut S::Batch,
        path: &VfsPath,
        rel: &[u8],
        file: Option<&S::File>,
        origin: &Origin,
    ) -> Result<u64> {
        let version = self.engine.counters().next_version();
        let tombstone = Some((version, origin));
        self.supersede(space, batch, path, rel, file, tombstone, false)?;
        Ok(version)
    }

    /// Stages the change log's record of a change of `rel` (when the tier
    /// keeps a log).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn log<S: Space>(
        &self,
        space: &S,
        batch: &mut S::Batch,
        rel: &[u8],
        kind: ChangeKind,
        version: u64,
        size: u64,
        origin: Origin,
        moved: Option<&[u8]>,
    ) {
        if self.engine.keep().changes == 0 {
            return;
        }
        space.record(
            batch,
            Logged {
                seq: 0,
                rel: rel.to_vec(),
                kind,
                version,
                size,
                time: SystemTime::now(),
                origin,
                moved: moved.map(<[u8]>::to_vec),
            },
        );
    }

    /// Stages the deletion of the file `file` at `rel` (`path`) by
    /// `origin`: its history step, its tombstone, its key and its event
    /// (`moved_to`: where a move took it); returns the tombstone's version.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn delete_file<S: History>(
        &self,
        space: &S,
        batch: &mut S::Batch,
        path: &VfsPath,
        rel: &[u8],
        file: &S::File,
        origin: &Origin,
        moved_to: Option<&[u8]>,
    ) -> Result<u64> {
        let version = self.bury(space, batch, path, rel, Some(file), origin)?;
        space.drop_key(batch, rel);
        let kind = ChangeKind::Deleted;
        self.log(
            space,
            batch,
            rel,
            kind,
            version,
            0,
            origin.clone(),
            moved_to,
        );
        Ok(version)
    }

    /// Stages the move of `file` from `from` to `to_rel` (`to`), replacing
    /// `replaced`: a tombstone at the source, the file under a new version
    /// at the destination, and an event at each end; returns the new
    /// version. The source key is dropped by the caller.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn move_file<S: History>(
        &self,
        space: &S,
        batch: &mut S::Batch,
        from: &[u8],
        file: &S::File,
        to: &VfsPath,
        to_rel: &[u8],
        replaced: Option<&S::File>,
        origin: &Origin,
    ) -> Result<u64> {
        let from_path = path_of(&self.keys, from, file)?;
        let tombstone = self.bury(space, batch, &from_path, from, None, origin)?;
        self.supersede(space, batch, to, to_rel, replaced, None, true)?;
        let version = self.engine.counters().next_version();
        space.relocate(batch, from, file, to, to_rel, version, origin)?;
        let size = file.meta().size;
        let (gone, came) = (ChangeKind::Deleted, ChangeKind::Created);
        let kind = if replaced.is_some() {
            ChangeKind::Modified
        } else {
            came
        };
        self.log(
            space,
            batch,
            from,
            gone,
            tombstone,
            0,
            origin.clone(),
            Some(to_rel),
        );
        self.log(
            space,
            batch,
            to_rel,
            kind,
            version,
            size,
            origin.clone(),
            Some(from),
        );
        Ok(version)
    }

    /// The change a log record stands for, in logical paths.
    pub(super) fn change_of(&self, logged: Logged) -> Result<Change> {
        Ok(Change {
            log: self.keys.mount.clone(),
            shard: 0,
            seq: logged.seq,
            path: self.keys.path(&logged.rel)?,
            kind: logged.kind,
            version: logged.version,
            size: logged.size,
            time: logged.time,
            origin: logged.origin,
            external: false,
            moved_path: logged.moved.map(|rel| self.keys.path(&rel)).transpose()?,
        })
    }
}
