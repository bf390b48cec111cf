//! How a change in a branch is written: each intent applied to the
//! branch's upper scope as one commit, with the whiteouts and base records
//! it needs, and how the branch's changes are shown to Watch.
//!
//! Invariants: every change of a path in the branch writes or checks the
//! path in its commit, so it leaves a trace before its base record can be
//! seen (what `Overlay::read` relies on to tell an untouched path in one
//! round trip); a commit carries at most `MAX_CHANGESET_FILES` changes; the
//! bookkeeping a change leaves (whiteouts, base records, the base log key)
//! is never shown as a change of a file.

use super::*;

impl Overlay {
    /// Applies `intents` as one commit of the upper scope, with the
    /// whiteouts and base records they need; returns each file's result and
    /// the version it replaced.
    pub(super) fn apply(
        &self,
        scope: &Scope,
        intents: &[Intent],
    ) -> Result<Vec<(FileCommitted, Option<u64>)>> {
        for intent in intents {
            self.check_changeable(&intent.path)?;
        }
        let (up, base) = (self.upper(scope), self.base(scope));
        'attempt: for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt);
            }
            let mut changes = Vec::new();
            let mut reports = Vec::new();
            for intent in intents {
                let path = &intent.path;
                let found = self.find(scope, path)?;
                let current = found.current();
                match intent.expect {
                    Expect::Pre(pre) => pre.check(path, current)?,
                    Expect::Exactly(seen) if seen != current => {
                        return Err(Error::VersionMismatch {
                            path: path.to_string(),
                            expected: seen.unwrap_or(0),
                            actual: current.unwrap_or(0),
                        });
                    }
                    Expect::Exactly(_) => {}
                }
                let upper_version = found.upper.as_ref().map(|e| e.version);
                let report = changes.len();
                match &intent.action {
                    FileAction::Put { .. } => {
                        if (found.upper_dir || found.base_dir)
                            && self.shows_directory(scope, &found, path)?
                        {
                            return Err(Error::IsDirectory(path.to_string()));
                        }
                        if found.upper_dir && self.clear_bookkeeping(&up, path)? {
                            // Only bookkeeping lay below: cleared, read
                            // again. (Empty directories alone, as a
                            // Filesystem tier keeps them, give way to the
                            // file in its commit.)
                            continue 'attempt;
                        }
                        self.check_parents(scope, path)?;
                        changes.push(FileChange {
                            path: path.clone(),
                            expected: upper_version,
                            action: found.settled(&intent.action),
                        });
                        let whiteout = sidecar::whiteout(path)?;
                        changes.push(match found.whiteout {
                            Some(v) => FileChange {
                                path: whiteout,
                                expected: Some(v),
                                action: FileAction::Delete { moved_to: None },
                            },
                            None => FileChange {
                                path: whiteout,
                                expected: None,
                                action: FileAction::Check,
                            },
                        });
                        reports.push((report, current, false));
                    }
                    FileAction::Delete { .. } => {
                        if current.is_none() {
                            return Err(Error::NotFound(path.to_string()));
                        }
                        let shadow = match upper_version {
                            Some(_) => intent.action.clone(),
                            None => FileAction::Check,
                        };
                        changes.push(FileChange {
                            path: path.clone(),
                            expected: upper_version,
                            action: shadow,
                        });
                        if found.base_file().is_some() {
                            reports.push((changes.len(), current, true));
                            changes.push(FileChange {
                                path: sidecar::whiteout(path)?,
                                expected: None,
                                action: put(Bytes::new()),
                            });
                        } else {
                            reports.push((report, current, true));
                        }
                    }
                    FileAction::Check => {
                        changes.push(FileChange {
                            path: path.clone(),
                            expected: upper_version,
                            action: FileAction::Check,
                        });
                        reports.push((report, current, false));
                    }
                }
                if !found.based && !matches!(intent.action, FileAction::Check) {
                    let record = match found.base_file() {
                        Some(entry) => BaseRecord {
                            version: Some(entry.version),
                            content: self.inner.read(&base, path)?.0,
                        },
                        None => BaseRecord {
                            version: None,
                            content: Vec::new(),
                        },
                    };
                    changes.push(FileChange {
                        path: sidecar::base(path)?,
                        expected: None,
                        action: put(Bytes::from(record.encode())),
                    });
                }
            }
            if let Some(done) = raced(self.inner.commit(&up, &changes))? {
                {
                    return Ok(intents
                        .iter()
                        .zip(reports)
                        .map(|(intent, (at, previous, deleted))| {
                            let result = &done[at];
                            let version = match intent.action {
                                FileAction::Check => previous.unwrap_or(0),
                                _ => tag(result.version),
                            };
                            let committed = FileCommitted {
                                path: intent.path.clone(),
                                version,
                                size: if deleted { 0 } else { result.size },
                                deleted: deleted || result.deleted,
                            };
                            (committed, previous)
                        })
                        .collect());
                }
            }
        }
        Err(lost(&intents[0].path))
    }

    /// Deletes the bookkeeping the upper scope keeps below `dir`, where the
    /// branch shows nothing, so a file can take the directory's place: base
    /// records of files the branch made and deleted (nothing to merge) go.
    /// The deletion of a base's file must be kept for the merge, so its
    /// whiteout or base record refuses (FAILED_PRECONDITION naming it).
    /// True when something was deleted.
    fn clear_bookkeeping(&self, up: &Scope, dir: &VfsPath) -> Result<bool> {
        let inner = self.inner.as_ref();
        let mut stale = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(below) = stack.pop() {
            let entries = match inner.list(up, &below) {
                Err(Error::NotFound(_) | Error::NotDirectory(_)) => continue,
                other => other?,
            };
            for entry in entries {
                if entry.is_directory() {
                    stack.push(entry.path);
                    continue;
                }
                let kept = match sidecar::based(&entry.path) {
                    Some(_) => BaseRecord::decode(&entry.path, &inner.read(up, &entry.path)?.0)?
                        .version
                        .is_some(),
                    None => true,
                };
                if kept {
                    let file = sidecar::based(&entry.path)
                        .or_else(|| sidecar::whited_out(&entry.path))
                        .unwrap_or(entry.path);
                    return Err(Error::Unsupported(format!(
                        "{dir}: the branch deleted the base's file {file} below it and keeps \
                         that deletion until the branch is merged or discarded; a file cannot \
                         take the directory's place in the branch before then"
                    )));
                }
                stale.push(FileChange {
                    path: entry.path,
                    expected: Some(entry.version),
                    action: FileAction::Delete { moved_to: None },
                });
            }
            if stale.len() > MAX_CHANGESET_FILES {
                return Err(Error::TooLarge(format!(
                    "{dir}: the branch keeps over {MAX_CHANGESET_FILES} records below it"
                )));
            }
        }
        if stale.is_empty() {
            return Ok(false);
        }
        raced(inner.commit(up, &stale)).map(|_| true)
    }

    /// Translates the upper scope's change events into the branch's: a
    /// whiteout made is its file's deletion; base records are bookkeeping.
    pub(super) fn shown_change(mut change: Change) -> Option<Change> {
        if let Some(file) = sidecar::whited_out(&change.path) {
            if change.kind == ChangeKind::Deleted {
                return None;
            }
            change.path = file;
            change.kind = ChangeKind::Deleted;
            change.size = 0;
        } else if sidecar::based(&change.path).is_some() {
            return None;
        }
        change.version = tag(change.version);
        Some(change)
    }

    /// The part of the branch a Watch of `root` covers (`None`: none, it
    /// reads the base's log alone).
    pub(super) fn watched_branch_root(&self, root: &VfsPath) -> Option<VfsPath> {
        if self.within(root) {
            Some(root.clone())
        } else if self.record.root.is_within(root) {
            Some(self.record.root.clone())
        } else {
            None
        }
    }

    /// Where a Watch in the branch keeps its place in the base's log of the
    /// branch's mount, beside its place in the mount's log of the branch's
    /// own changes: under a name no mount has (mount prefixes may not use
    /// the reserved `.avfs-`, src/config).
    pub(super) fn base_log_key(&self) -> Result<VfsPath> {
        let mut key = VfsPath::root().join(BASE_LOG_KEY)?;
        for segment in self.record.mount.segments() {
            key = key.join(segment)?;
        }
        Ok(key)
    }

    /// Up to about `max` changes of the base's logs under `root` that the
    /// branch shows: every change outside the branch's root, and inside it
    /// those of files the branch has not changed (it keeps no base record
    /// of them now; a change to a file the branch changed since is not
    /// shown, the branch's own change is). Changes of the branch's mount
    /// name [`Overlay::base_log_key`] as their log, so a cursor taken after
    /// one moves on in the base's log.
    pub(super) fn base_changes(
        &self,
        scope: &Scope,
        root: &VfsPath,
        cursor: &mut ChangeCursor,
        max: usize,
    ) -> Result<Vec<Change>> {
        let (mount, key) = (&self.record.mount, self.base_log_key()?);
        cursor.swap(mount, &key);
        let read = self.inner.changes(&self.base(scope), root, cursor, max);
        cursor.swap(mount, &key);
        let page = match read {
            Err(Error::Expired { what, oldest }) => {
                let mut from = ChangeCursor::decode(&oldest)?;
                from.swap(mount, &key);
                from.copy_from(cursor, mount);
                return Err(Error::Expired {
                    what,
                    oldest: from.encode(),
                });
            }
            other => other?,
        };
        // Which of the files these changes name inside the branch's root
        // the branch changed: one batch of base record lookups.
        let inside = |path: &VfsPath| self.within(path) && *path != self.record.root;
        let named: BTreeSet<VfsPath> = page
            .iter()
            .filter(|c| c.log == *mount)
            .flat_map(|c| std::iter::once(&c.path).chain(&c.moved_path))
            .filter(|p| inside(p))
            .cloned()
            .collect();
        let up = self.upper(scope);
        let lookups = named
            .iter()
            .map(|p| Ok(FileRead::entry(up.clone(), sidecar::base(p)?)))
            .collect::<Result<Vec<_>>>()?;
        let found = self.inner.read_files(&lookups)?;
        let touched: HashSet<VfsPath> = named
            .into_iter()
            .zip(found)
            .filter_map(|(path, record)| record.map(|_| path))
            .collect();
        let mut out = Vec::with_capacity(page.len());
        for mut change in page {
            if change.log == *mount {
                if touched.contains(&change.path) {
                    continue;
                }
                if change
                    .moved_path
                    .as_ref()
                    .is_some_and(|p| touched.contains(p))
                {
                    // The move's other end is a file the branch changed,
                    // which this change does not show.
                    change.moved_path = None;
                }
                change.log = key.clone();
            }
            out.push(change);
        }
        Ok(out)
    }
}
