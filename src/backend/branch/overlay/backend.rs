//! The `Backend` of a call in a branch: each operation on the branch's
//! view (its upper scope over the base), or on the base as it is outside
//! the branch's root.
//!
//! Invariants: a path outside the branch's root is read from the base and
//! never changed from the branch; every call first confirms the branch's
//! record (unless leased), so a branch discarded or forked again by another
//! server is seen; versions of files the branch holds carry `UPPER_BIT`.

use super::*;

impl Backend for Overlay {
    fn list(&self, scope: &Scope, dir: &VfsPath) -> Result<Vec<Entry>> {
        self.confirm()?;
        Ok(self.merged_listing(scope, dir, true)?.entries)
    }

    fn stat(&self, scope: &Scope, path: &VfsPath) -> Result<Entry> {
        self.confirm()?;
        if !self.within(path) || *path == self.record.root {
            return self.inner.stat(&self.base(scope), path);
        }
        let found = self.find(scope, path)?;
        if let Some(entry) = found.upper.clone() {
            return Ok(tagged(entry));
        }
        if let Some(entry) = found.base_file() {
            return Ok(entry.clone());
        }
        if (found.upper_dir || found.base_dir) && self.shows_directory(scope, &found, path)? {
            let base = probe(self.inner.as_ref(), &self.base(scope), path)?;
            let upper = probe(self.inner.as_ref(), &self.upper(scope), path)?;
            if let Some(dir) = base.or(upper) {
                return Ok(dir);
            }
        }
        Err(Error::NotFound(path.to_string()))
    }

    fn read(&self, scope: &Scope, path: &VfsPath) -> Result<(Vec<u8>, Entry)> {
        let base = self.base(scope);
        if !self.within(path) || *path == self.record.root {
            self.confirm()?;
            return self.inner.read(&base, path);
        }
        // The branch's file, whether it changed the path, and the base's
        // file (and a cached record's confirmation, unless it is leased) in
        // one go: on the object tier one round trip (docs/performance.md §
        // Branches). A path the branch never changed shows the base's file.
        // It changed the path if it keeps a base record of it; a tier that
        // keeps traces tells that from the branch's read of the file itself
        // (every change of a path in the branch writes or checks the path in
        // its commit, so leaves a trace, before its base record can be
        // seen; a trace alone, as an aborted commit leaves, only costs the
        // second look below).
        let (up, record) = (self.upper(scope), sidecar::base(path)?);
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt);
            }
            let mut reads = vec![
                FileRead::file(up.clone(), path.clone()),
                FileRead::file(base.clone(), path.clone()),
            ];
            let lease = self.lease();
            let check = match lease {
                Some(_) => None,
                None => self.pending_check()?,
            };
            let checking = check.is_some();
            reads.extend(check);
            let sent = Instant::now();
            let (found, based) = match self.inner.read_files_traced(&reads)? {
                Some((found, traces)) => (found, traces[0]),
                None => {
                    reads.push(FileRead::entry(up.clone(), record.clone()));
                    let mut found = self.inner.read_files(&reads)?;
                    let based = found.pop().flatten().is_some();
                    (found, based)
                }
            };
            let mut found = found.into_iter();
            let (upper, below) = (found.next().flatten(), found.next());
            if checking {
                let registered = found.next().flatten();
                self.confirm_with(registered.as_ref().map(|(data, _)| data.as_slice()), sent)?;
            }
            let shown = match (upper, based) {
                (Some((data, entry)), _) => Shown {
                    file: Some((data, tagged(entry))),
                    deleted: false,
                },
                (None, false) => Shown {
                    file: below.flatten(),
                    deleted: false,
                },
                (None, true) => self.read_changed(&up, &base, path, &record)?,
            };
            if !self.ended_within(lease) {
                continue;
            }
            if let Some(file) = shown.file {
                return Ok(file);
            }
            // No file to read: say what is there. A file that appeared
            // since the look is looked at again, a bounded number of times
            // (it once recursed, unbounded, under a writer that kept
            // creating and deleting the file).
            match self.stat(scope, path) {
                Ok(entry) if entry.is_directory() => {
                    return Err(Error::IsDirectory(path.to_string()));
                }
                Ok(_) if !shown.deleted => {}
                Ok(_) => return Err(Error::NotFound(path.to_string())),
                Err(e) => return Err(e),
            }
        }
        Err(Error::Unavailable(format!(
            "{path} in branch {:?} changed between every look of {MAX_ATTEMPTS}; try again",
            self.record.name
        )))
    }

    /// Outside the branch's root, the base's own admitted read. Within it,
    /// the one-round-trip read of both layers ([`Overlay::read`]), admitted
    /// once it is held: a read in a branch holds up to two versions of the
    /// file before its charge (docs/security.md § Memory no principal is
    /// charged for yet).
    fn read_admitted(
        &self,
        scope: &Scope,
        path: &VfsPath,
        admit: &mut crate::backend::Admit<'_>,
    ) -> Result<(Vec<u8>, Entry)> {
        if !self.within(path) || *path == self.record.root {
            self.confirm()?;
            return self.inner.read_admitted(&self.base(scope), path, admit);
        }
        let (data, entry) = self.read(scope, path)?;
        admit(&entry)?;
        Ok((data, entry))
    }

    fn read_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        max_chunk: usize,
    ) -> Result<(Entry, ChunkReader)> {
        self.confirm()?;
        let base = self.base(scope);
        if !self.within(path) || *path == self.record.root {
            return self.inner.read_chunks(&base, path, max_chunk);
        }
        let entry = self.stat(scope, path)?;
        if entry.is_directory() {
            return Err(Error::IsDirectory(path.to_string()));
        }
        match untag(entry.version) {
            Some(_) => {
                let (entry, chunks) =
                    self.inner
                        .read_chunks(&self.upper(scope), path, max_chunk)?;
                Ok((tagged(entry), chunks))
            }
            None => self.inner.read_chunks(&base, path, max_chunk),
        }
    }

    fn write(
        &self,
        scope: &Scope,
        path: &VfsPath,
        data: Vec<u8>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        self.confirm()?;
        let bytes = data.len() as u64;
        let intent = Intent {
            path: path.clone(),
            expect: Expect::Pre(pre),
            action: FileAction::Put {
                data: Bytes::from(data),
                operation: Operation::Write,
                moved_from: None,
                executable: pre.executable,
            },
        };
        let (done, previous) = self.apply(scope, &[intent])?.remove(0);
        Ok(WriteOutcome {
            path: path.clone(),
            bytes_written: bytes,
            version: done.version,
            created: previous.is_none(),
        })
    }

    fn update(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        self.confirm()?;
        self.check_changeable(path)?;
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt);
            }
            let (data, entry) = self.read(scope, path)?;
            if let Some(expected) = if_version
                && expected != entry.version
            {
                return Err(Error::VersionMismatch {
                    path: path.to_string(),
                    expected,
                    actual: entry.version,
                });
            }
            let new = f(&data)?;
            let bytes = new.len() as u64;
            let intent = Intent {
                path: path.clone(),
                expect: Expect::Exactly(Some(entry.version)),
                action: FileAction::Put {
                    data: Bytes::from(new),
                    operation: Operation::Edit,
                    moved_from: None,
                    executable: None,
                },
            };
            let Some(mut done) = raced(self.apply(scope, &[intent]))? else {
                continue;
            };
            return Ok(WriteOutcome {
                path: path.clone(),
                bytes_written: bytes,
                version: done.remove(0).0.version,
                created: false,
            });
        }
        Err(lost(path))
    }

    fn delete(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        self.confirm()?;
        if *path != self.record.root {
            self.check_changeable(path)?;
        } else if !recursive && self.inner.mount_of(path).as_ref() == Some(path) {
            // As the mount table answers for its mount points.
            return Err(mount_point_delete(path));
        }
        let entry = self.stat(scope, path)?;
        if !entry.is_directory() {
            let intent = Intent {
                path: path.clone(),
                expect: Expect::Pre(Precondition::if_version(if_version)),
                action: FileAction::Delete { moved_to: None },
            };
            self.apply(scope, &[intent])?;
            return Ok(1);
        }
        check_directory_delete(path, if_version, recursive)?;
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt);
            }
            let intents: Vec<Intent> = self
                .files_below(scope, path)?
                .into_iter()
                .map(|e| Intent {
                    path: e.path,
                    expect: Expect::Exactly(Some(e.version)),
                    action: FileAction::Delete { moved_to: None },
                })
                .collect();
            if let Some(done) = raced(self.apply(scope, &intents))? {
                return Ok(done.len() as u64);
            }
        }
        Err(lost(path))
    }

    fn rename(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        self.confirm()?;
        for end in [source, destination] {
            if *end == self.record.mount {
                return Err(unmovable_mount(end));
            }
            if *end == self.record.root {
                return Err(Error::InvalidArgument(format!(
                    "{end} is the root of branch {:?}; a branch's root cannot be moved",
                    self.record.name
                )));
            }
        }
        self.check_changeable(source)?;
        self.check_changeable(destination)?;
        // A racing change of the same files (another Move of the source)
        // reads everything again: the loser then finds what the winner left.
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt);
            }
            let entry = self.stat(scope, source)?;
            if entry.is_directory() && pre.if_version.is_some() {
                return Err(Error::InvalidArgument(
                    "if_version applies to files, not directories".into(),
                ));
            }
            let target = probe(self, scope, destination)?;
            let refusal = match &target {
                Some(t) if t.is_directory() && !entry.is_directory() => {
                    Some(Error::IsDirectory(destination.to_string()))
                }
                Some(_) if pre.create_only || entry.is_directory() => {
                    Some(Error::AlreadyExists(destination.to_string()))
                }
                _ => None,
            };
            if let Some(refusal) = refusal {
                // A refusal stands for one instant holding both ends as
                // seen: the source unchanged since before the destination
                // was looked at. Else the two looks straddled a change.
                if probe(self, scope, source)?.map(|e| e.version) == Some(entry.version) {
                    return Err(refusal);
                }
                continue;
            }
            if !entry.is_directory() {
                let (data, read) = self.read(scope, source)?;
                if let Some(expected) = pre.if_version
                    && expected != read.version
                {
                    return Err(Error::VersionMismatch {
                        path: source.to_string(),
                        expected,
                        actual: read.version,
                    });
                }
                let intents = [
                    Intent {
                        path: source.clone(),
                        expect: Expect::Exactly(Some(read.version)),
                        action: FileAction::Delete {
                            moved_to: Some(destination.clone()),
                        },
                    },
                    Intent {
                        path: destination.clone(),
                        expect: Expect::Exactly(target.map(|t| t.version)),
                        action: FileAction::Put {
                            data: Bytes::from(data),
                            operation: Operation::Move,
                            moved_from: Some(source.clone()),
                            executable: Some(read.executable),
                        },
                    },
                ];
                let Some(done) = raced(self.apply(scope, &intents))? else {
                    continue;
                };
                return Ok(MoveOutcome {
                    files_moved: 1,
                    version: done[1].0.version,
                });
            }
            let mut intents = Vec::new();
            let mut bytes = 0;
            for file in self.files_below(scope, source)? {
                let (data, read) = self.read(scope, &file.path)?;
                bytes += data.len();
                if bytes > MAX_MOVE_BYTES {
                    return Err(Error::TooLarge(format!(
                        "{source}: a Move in a branch carries at most {MAX_MOVE_BYTES} bytes"
                    )));
                }
                let Some(moved) = file.path.rebase(source, destination) else {
                    continue;
                };
                intents.push(Intent {
                    path: file.path.clone(),
                    expect: Expect::Exactly(Some(read.version)),
                    action: FileAction::Delete {
                        moved_to: Some(moved.clone()),
                    },
                });
                intents.push(Intent {
                    path: moved,
                    expect: Expect::Exactly(None),
                    action: FileAction::Put {
                        data: Bytes::from(data),
                        operation: Operation::Move,
                        moved_from: Some(file.path),
                        executable: Some(read.executable),
                    },
                });
            }
            let Some(done) = raced(self.apply(scope, &intents))? else {
                continue;
            };
            return Ok(MoveOutcome {
                files_moved: (done.len() / 2) as u64,
                version: 0,
            });
        }
        Err(lost(source))
    }

    fn mount_of(&self, path: &VfsPath) -> Option<VfsPath> {
        self.inner.mount_of(path)
    }

    fn branch_mounts(&self) -> Vec<VfsPath> {
        self.inner.branch_mounts()
    }

    fn branch_record_lease(&self, mount: &VfsPath) -> std::time::Duration {
        self.inner.branch_record_lease(mount)
    }

    fn commit(&self, scope: &Scope, changes: &[FileChange]) -> Result<Vec<FileCommitted>> {
        self.confirm()?;
        let intents: Vec<Intent> = changes
            .iter()
            .map(|c| Intent {
                path: c.path.clone(),
                expect: Expect::Exactly(c.expected),
                action: c.action.clone(),
            })
            .collect();
        Ok(self
            .apply(scope, &intents)?
            .into_iter()
            .map(|(done, _)| done)
            .collect())
    }

    fn search(&self, scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()> {
        self.confirm()?;
        let base = self.base(scope);
        let (lo, hi) = self.record.root.subtree_range();
        if !part.overlaps_dir(&self.record.root) {
            return self.inner.search(&base, run, part);
        }
        if !self.within(&part.top) {
            // The base before the branch's root, the branch, the base after.
            let before = SearchPart {
                top: part.top.clone(),
                lo: part.lo.clone(),
                hi: lo.clone().min(part.hi.clone()),
            };
            if before.lo < before.hi {
                self.inner.search(&base, run, &before)?;
            }
            let inside = SearchPart {
                top: self.record.root.clone(),
                lo: lo.clone().max(part.lo.clone()),
                hi: hi.clone().min(part.hi.clone()),
            };
            sorted::walk(
                run,
                &mut ViewFiles::new(self, scope, inside.top.clone()),
                &inside,
            )?;
            let after = SearchPart {
                top: part.top.clone(),
                lo: hi.max(part.lo.clone()),
                hi: part.hi.clone(),
            };
            if after.lo < after.hi {
                self.inner.search(&base, run, &after)?;
            }
            return Ok(());
        }
        let top = self.stat(scope, &part.top)?;
        let mut files = ViewFiles::new(self, scope, part.top.clone());
        if top.is_directory() {
            sorted::walk(run, &mut files, part)
        } else {
            sorted::search_one(run, &mut files, top)
        }
    }

    fn versions(&self, scope: &Scope, path: &VfsPath) -> Result<Vec<FileVersion>> {
        self.confirm()?;
        let base = self.base(scope);
        if !self.within(path) {
            return self.inner.versions(&base, path);
        }
        let mut out: Vec<FileVersion> = match self.inner.versions(&self.upper(scope), path) {
            Ok(versions) => versions
                .into_iter()
                .map(|mut v| {
                    v.version = tag(v.version);
                    v
                })
                .collect(),
            Err(Error::NotFound(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        // Once the branch changed the file, the base's versions are its past.
        let touched = !out.is_empty();
        match self.inner.versions(&base, path) {
            Ok(versions) => out.extend(versions.into_iter().map(|mut v| {
                v.current &= !touched;
                v
            })),
            Err(e) if !touched => return Err(e),
            Err(_) => {}
        }
        Ok(out)
    }

    fn read_version(
        &self,
        scope: &Scope,
        path: &VfsPath,
        version: u64,
        max_chunk: usize,
    ) -> Result<(FileVersion, ChunkReader)> {
        self.confirm()?;
        if let Some(upper) = untag(version)
            && self.within(path)
        {
            let (mut v, chunks) = self
                .inner
                .read_version(&self.upper(scope), path, upper, max_chunk)
                .map_err(|e| match e {
                    Error::VersionNotFound { path, .. } => Error::VersionNotFound { path, version },
                    other => other,
                })?;
            v.version = tag(v.version);
            return Ok((v, chunks));
        }
        self.inner
            .read_version(&self.base(scope), path, version, max_chunk)
    }

    fn restore(
        &self,
        scope: &Scope,
        path: &VfsPath,
        version: u64,
        if_version: Option<u64>,
    ) -> Result<WriteOutcome> {
        self.confirm()?;
        self.check_changeable(path)?;
        let (found, chunks) = self.read_version(scope, path, version, 1 << 20)?;
        if found.deleted {
            return Err(restore_of_deletion(path, version));
        }
        let mut data = Vec::new();
        for chunk in chunks {
            data.extend_from_slice(&chunk?);
        }
        let bytes = data.len() as u64;
        let intent = Intent {
            path: path.clone(),
            expect: Expect::Pre(Precondition::if_version(if_version)),
            action: FileAction::Put {
                data: Bytes::from(data),
                operation: Operation::Restore,
                moved_from: None,
                executable: None,
            },
        };
        let (done, previous) = self.apply(scope, &[intent])?.remove(0);
        Ok(WriteOutcome {
            path: path.clone(),
            bytes_written: bytes,
            version: done.version,
            created: previous.is_none(),
        })
    }

    fn watch_head(&self, scope: &Scope, root: &VfsPath, cursor: &mut ChangeCursor) -> Result<()> {
        self.confirm()?;
        let Some(branch_root) = self.watched_branch_root(root) else {
            return self.inner.watch_head(&self.base(scope), root, cursor);
        };
        self.inner
            .watch_head(&self.upper(scope), &branch_root, cursor)?;
        let key = self.base_log_key()?;
        cursor.swap(&self.record.mount, &key);
        let head = self.inner.watch_head(&self.base(scope), root, cursor);
        cursor.swap(&self.record.mount, &key);
        head
    }

    fn changes(
        &self,
        scope: &Scope,
        root: &VfsPath,
        cursor: &mut ChangeCursor,
        max: usize,
    ) -> Result<Vec<Change>> {
        self.confirm()?;
        let Some(branch_root) = self.watched_branch_root(root) else {
            return self.inner.changes(&self.base(scope), root, cursor, max);
        };
        // The branch's own changes first. The upper log also holds the
        // bookkeeping's changes, which are not shown: read on until the
        // page is full or the log gives out, so a page is as full as the
        // base's would be.
        let up = self.upper(scope);
        let mut out = Vec::new();
        for _ in 0..MAX_CHANGE_READS {
            let ask = max - out.len();
            let page = self.inner.changes(&up, &branch_root, cursor, ask)?;
            let short = page.len() < ask;
            out.extend(page.into_iter().filter_map(Overlay::shown_change));
            if short || out.len() == max {
                break;
            }
        }
        if out.len() < max {
            out.extend(self.base_changes(scope, root, cursor, max - out.len())?);
        }
        Ok(out)
    }

    fn change_signals(&self, root: &VfsPath, out: &mut Vec<watch::Receiver<u64>>) {
        self.inner.change_signals(root, out)
    }
}
