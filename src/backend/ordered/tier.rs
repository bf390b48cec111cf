//! [`OrderedTier`]: the one `Backend` implementation of every ordered
//! engine (see the module doc of `ordered`).

use super::keys::{self, MountKeys};
use super::{
    Content, Cursor, Engine, FileMeta, Files, History, HistoryChange, Logged, Past, Space, Stamp,
    Stored, Streamed, file_entry, path_of,
};
use crate::backend::{
    Backend, ChunkReader, ChunkSource, FileChange, FileCommitted, MoveOutcome, Precondition,
    UpdateFn, WriteOutcome, check_directory_delete, no_change_log,
};
use crate::change::{Change, ChangeCursor, ChangeKind, LogPosition, Operation, Origin};
use crate::entry::{Entry, EntryKind};
use crate::error::{Error, Result};
use crate::history::FileVersion;
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::index::check::{IndexUse, spawn_check};
use crate::search::index::written::{StreamCopy, WriteLearning};
use crate::search::index::{IndexSettings, Registry};
use crate::search::{SearchPart, SearchRun};
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::watch;

mod changeset;
mod check;
mod steps;
mod table;

/// Pieces a restore reads a past version in: the size of a Store chunk, so
/// a large version streams into its new blob one chunk at a time.
const RESTORE_CHUNK_BYTES: usize = 1 << 20;

/// A tier made of an [`Engine`] mounted at a prefix. Cloning it is cheap
/// and shares everything (a background self-check holds a clone).
pub struct OrderedTier<E> {
    keys: MountKeys,
    engine: Arc<E>,
    /// The search index of each namespace (docs/search-index.md).
    index: Arc<Registry>,
}

impl<E> Clone for OrderedTier<E> {
    fn clone(&self) -> OrderedTier<E> {
        OrderedTier {
            keys: self.keys.clone(),
            engine: self.engine.clone(),
            index: self.index.clone(),
        }
    }
}

/// The first file strictly below the directory `rel`, if any.
fn first_below<F: Files>(files: &F, rel: &[u8]) -> Result<Option<FileMeta>> {
    match files.scan(rel, false)?.current() {
        Some(item) => Ok(Some(item?.1.meta())),
        None => Ok(None),
    }
}

/// Holds for `learning` the content of the file a Move takes from `rel`
/// (`path`, of `size` bytes) as `version` of `to`, where the Move commits
/// it: read from `space` before the Move applies, and only when it fits
/// what the change may still learn. A read that fails only leaves the file
/// to the Greps: learning never fails a change.
fn learn_moved<S: Space>(
    learning: &mut Option<WriteLearning<'_>>,
    space: &S,
    (path, rel, size): (&VfsPath, &[u8], u64),
    to: &VfsPath,
    version: u64,
) {
    let Some(learning) = learning.as_mut().filter(|l| l.takes(size)) else {
        return;
    };
    if let Ok(Some((_, data))) = space.read(path, rel) {
        learning.add(to.order_key(), version, data);
    }
}

impl<E: Engine> OrderedTier<E> {
    /// The tier of `engine`, answering for paths below `mount`.
    pub(crate) fn mounted(mount: VfsPath, engine: E) -> OrderedTier<E> {
        let engine = Arc::new(engine);
        let keeper = engine.clone().index_keeper();
        OrderedTier {
            keys: MountKeys::new(mount),
            engine,
            index: Arc::new(Registry::new(IndexSettings::default(), keeper)),
        }
    }

    /// What a change in `scope`'s namespace may teach its search index
    /// (docs/search-index.md § Learning in the write path): the change adds
    /// each file it commits, reading a source's content only when
    /// [`WriteLearning::takes`] it, and learns them outside the namespace's
    /// lock once it has committed.
    fn write_learning(&self, scope: &Scope) -> Option<WriteLearning<'_>> {
        self.index.write_learning(&self.engine.index_key(scope))
    }

    /// The tier with its search index set up as `[search]` says.
    pub fn with_search_index(mut self, settings: IndexSettings) -> OrderedTier<E> {
        let keeper = self.engine.clone().index_keeper();
        self.index = Arc::new(Registry::new(settings, keeper));
        self
    }

    /// The engine (for its own counters).
    pub(crate) fn engine(&self) -> &E {
        &self.engine
    }

    /// What `path` is when no file or directory of the scope says more: the
    /// mount root exists (empty), anything else does not.
    fn root_or_missing(&self, path: &VfsPath, rel: &[u8]) -> Result<Entry> {
        if rel.is_empty() {
            Ok(Entry::directory(path.clone(), self.engine.root_time()))
        } else {
            Err(Error::NotFound(path.to_string()))
        }
    }

    /// A file at `path`, a directory implied below it, the mount root, or
    /// `NotFound`.
    fn lookup<F: Files>(&self, files: Option<&F>, path: &VfsPath, rel: &[u8]) -> Result<Entry> {
        if let Some(files) = files {
            if !rel.is_empty()
                && let Some(file) = files.get(rel)?
            {
                return Ok(file_entry(path.clone(), &file));
            }
            if let Some(first) = first_below(files, rel)? {
                return Ok(Entry::directory(path.clone(), first.modified));
            }
        }
        self.root_or_missing(path, rel)
    }

    /// Why `path`, which named no file a moment ago, cannot be read as one:
    /// it is a directory (implied or the mount root), or it does not exist.
    /// A file found there now was created since (a view without a snapshot
    /// reads twice): the read saw none, so it is NOT_FOUND.
    fn not_a_file<F: Files>(&self, files: Option<&F>, path: &VfsPath, rel: &[u8]) -> Error {
        match self.lookup(files, path, rel) {
            Ok(entry) if entry.kind == EntryKind::Directory => Error::IsDirectory(path.to_string()),
            Ok(_) => Error::NotFound(path.to_string()),
            Err(e) => e,
        }
    }

    /// Fails with `NotDirectory` when an ancestor of `rel` is a file.
    fn check_parents<F: Files>(&self, files: &F, rel: &[u8]) -> Result<()> {
        for dir in keys::ancestors(rel).skip(1) {
            if files.get(dir)?.is_some() {
                return Err(Error::NotDirectory(self.keys.path(dir)?.to_string()));
            }
        }
        Ok(())
    }

    /// Fails when no file may be created at `rel`: it is a directory (the
    /// mount root included) or lies below a file.
    fn check_writable<F: Files>(&self, files: &F, path: &VfsPath, rel: &[u8]) -> Result<()> {
        if rel.is_empty() || first_below(files, rel)?.is_some() {
            return Err(Error::IsDirectory(path.to_string()));
        }
        self.check_parents(files, rel)
    }

    /// The relative key of a file to write; the mount root is a directory.
    fn file_rel(&self, path: &VfsPath) -> Result<Vec<u8>> {
        let rel = self.keys.rel(path)?;
        if rel.is_empty() {
            return Err(Error::IsDirectory(path.to_string()));
        }
        Ok(rel)
    }

    fn check_size(&self, path: &VfsPath, len: usize) -> Result<()> {
        Error::check_file_size(path, len as u64, self.engine.max_file_bytes())
    }
}

impl<E: Engine> Backend for OrderedTier<E> {
    fn list(&self, scope: &Scope, dir: &VfsPath) -> Result<Vec<Entry>> {
        let rel = self.keys.rel(dir)?;
        self.engine.view(scope, |files| {
            let this = self.lookup(files, dir, &rel)?;
            if !this.is_directory() {
                return Err(Error::NotDirectory(dir.to_string()));
            }
            let Some(files) = files else {
                return Ok(Vec::new());
            };
            // Keys below `dir` start with `rel ++ \0` (nothing for the root).
            let prefix_len = if rel.is_empty() { 0 } else { rel.len() + 1 };
            let mut cursor = files.scan(&rel, false)?;
            let mut out = Vec::new();
            let mut keys_read = 0u64;
            while let Some(item) = cursor.current() {
                keys_read += 1;
                let (key, file) = item?;
                let child = key.get(prefix_len..).unwrap_or_default();
                match memchr::memchr(0, child) {
                    // A subdirectory: show it once and seek past its subtree.
                    Some(end) => {
                        let sub = &key[..prefix_len + end];
                        out.push(Entry::directory(self.keys.path(sub)?, file.meta().modified));
                        cursor.seek(&keys::past(sub));
                    }
                    None => {
                        out.push(file_entry(path_of(&self.keys, key, &file)?, &file));
                        cursor.next();
                    }
                }
            }
            tracing::debug!(dir = %dir, entries = out.len(), keys_read, "{} list", E::TIER);
            Ok(out)
        })
    }

    fn stat(&self, scope: &Scope, path: &VfsPath) -> Result<Entry> {
        let rel = self.keys.rel(path)?;
        self.engine
            .view(scope, |files| self.lookup(files, path, &rel))
    }

    fn read(&self, scope: &Scope, path: &VfsPath) -> Result<(Vec<u8>, Entry)> {
        let rel = self.keys.rel(path)?;
        self.engine.view(scope, |files| {
            if let Some(files) = files
                && !rel.is_empty()
                && let Some((file, data)) = files.read(path, &rel)?
            {
                return Ok((data, file_entry(path.clone(), &file)));
            }
            Err(self.not_a_file(files, path, &rel))
        })
    }

    fn read_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        max_chunk: usize,
    ) -> Result<(Entry, ChunkReader)> {
        let rel = self.keys.rel(path)?;
        self.engine.view(scope, |files| {
            if let Some(files) = files
                && !rel.is_empty()
                && let Some((file, reader)) = files.read_chunks(path, &rel, max_chunk)?
            {
                return Ok((file_entry(path.clone(), &file), reader));
            }
            Err(self.not_a_file(files, path, &rel))
        })
    }

    fn write(
        &self,
        scope: &Scope,
        path: &VfsPath,
        data: Vec<u8>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        self.check_size(path, data.len())?;
        let rel = self.file_rel(path)?;
        let outcome = self.replace(
            scope,
            path,
            &rel,
            pre,
            Content::Bytes(&data),
            Operation::Write,
        )?;
        outcome.teach(self.write_learning(scope), Some(&data));
        Ok(outcome)
    }

    fn write_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<WriteOutcome> {
        let rel = self.file_rel(path)?;
        // Fail before taking in megabytes when the write cannot succeed; the
        // check is repeated under the lock at commit.
        self.engine.view(scope, |files| {
            let current = match files {
                Some(files) => files.get(&rel)?.map(|f| f.meta().version),
                None => None,
            };
            pre.check(path, current)
        })?;
        self.write_streamed(scope, path, &rel, pre, pieces, Operation::Write)
    }

    fn update(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        let rel = self.keys.rel(path)?;
        let mut written = Vec::new();
        let outcome = self.engine.change(scope, &[&rel], |space| {
            let found = match &space {
                Some(space) if !rel.is_empty() => space.read(path, &rel)?,
                _ => None,
            };
            match (space, found) {
                (Some(space), Some((old, data))) => {
                    Precondition::if_version(if_version).check(path, Some(old.meta().version))?;
                    let data = f(&data)?;
                    self.check_size(path, data.len())?;
                    let origin = Origin::of(scope, Operation::Edit);
                    let content = Content::Bytes(&data);
                    let executable = old.meta().executable;
                    let outcome =
                        self.commit(space, path, &rel, Some(&old), content, executable, origin)?;
                    written = data;
                    Ok(outcome)
                }
                (space, _) => Err(self.not_a_file(space.as_deref(), path, &rel)),
            }
        })?;
        outcome.teach(self.write_learning(scope), Some(&written));
        Ok(outcome)
    }

    fn delete(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        let rel = self.keys.rel(path)?;
        self.engine.change(scope, &[&rel], |space| {
            let Some(space) = space else {
                // Only the (empty) mount root exists in a scope never written.
                self.root_or_missing(path, &rel)?;
                check_directory_delete(path, if_version, recursive)?;
                return Ok(0);
            };
            let mut batch = Default::default();
            let origin = Origin::of(scope, Operation::Delete);
            if !rel.is_empty()
                && let Some(file) = space.get(&rel)?
            {
                Precondition::if_version(if_version).check(path, Some(file.meta().version))?;
                let path = path_of(&self.keys, &rel, &file)?;
                self.delete_file(&*space, &mut batch, &path, &rel, &file, &origin, None)?;
                space.apply(batch)?;
                return Ok(1);
            }
            self.lookup(Some(&*space), path, &rel)?;
            check_directory_delete(path, if_version, recursive)?;
            // Everything below is excluded by the lock on `path`: each file
            // is superseded and logged, then the range dropped, in one batch.
            let mut files = 0;
            let mut cursor = space.scan(&rel, true)?;
            while let Some(item) = cursor.current() {
                let (key, file) = item?;
                let path = path_of(&self.keys, key, &file)?;
                self.delete_file(&*space, &mut batch, &path, key, &file, &origin, None)?;
                files += 1;
                cursor.next();
            }
            drop(cursor);
            space.drop_below(&mut batch, &rel);
            space.apply(batch)?;
            Ok(files)
        })
    }

    fn rename(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        // Each path is checked as it is resolved: the mount root is refused
        // before a destination outside the mount is looked at.
        let movable = |path: &VfsPath| {
            let rel = self.keys.rel(path)?;
            if rel.is_empty() {
                return Err(crate::backend::unmovable_mount(path));
            }
            Ok(rel)
        };
        let from = movable(source)?;
        let to = movable(destination)?;
        let mut learning = self.write_learning(scope);
        let outcome = self.engine.change(scope, &[&from, &to], |space| {
            let Some(space) = space else {
                return Err(Error::NotFound(source.to_string()));
            };
            let file = space.get(&from)?;
            match &file {
                Some(file) => Precondition::if_version(pre.if_version)
                    .check(source, Some(file.meta().version))?,
                None if first_below(&*space, &from)?.is_none() => {
                    return Err(Error::NotFound(source.to_string()));
                }
                None if pre.if_version.is_some() => {
                    return Err(Error::InvalidArgument(
                        "if_version applies to files, not directories".into(),
                    ));
                }
                None => {}
            }
            self.check_parents(&*space, &to)?;
            let replaced = space.get(&to)?;
            if replaced.is_some() || first_below(&*space, &to)?.is_some() {
                // Only a file replaces a file, and only when allowed to.
                if pre.create_only || file.is_none() {
                    return Err(Error::AlreadyExists(destination.to_string()));
                }
                if replaced.is_none() {
                    return Err(Error::IsDirectory(destination.to_string()));
                }
            }
            let mut batch = Default::default();
            let origin = Origin::of(scope, Operation::Move);
            let outcome = match file {
                Some(file) => {
                    let version = self.move_file(
                        &*space,
                        &mut batch,
                        &from,
                        &file,
                        destination,
                        &to,
                        replaced.as_ref(),
                        &origin,
                    )?;
                    let moved = (source, from.as_slice(), file.meta().size);
                    learn_moved(&mut learning, &*space, moved, destination, version);
                    space.drop_key(&mut batch, &from);
                    MoveOutcome {
                        files_moved: 1,
                        version,
                    }
                }
                None => {
                    // The destination's subtree is empty and disjoint from
                    // the source's: copy every file over, then drop the
                    // source's range, in one batch.
                    let mut files_moved = 0;
                    let mut cursor = space.scan(&from, true)?;
                    while let Some(item) = cursor.current() {
                        let (key, file) = item?;
                        let mut rel = to.clone();
                        rel.extend_from_slice(&key[from.len()..]);
                        let path = self.keys.path(&rel)?;
                        let version = self.move_file(
                            &*space, &mut batch, key, &file, &path, &rel, None, &origin,
                        )?;
                        let moved = (&self.keys.path(key)?, key, file.meta().size);
                        learn_moved(&mut learning, &*space, moved, &path, version);
                        files_moved += 1;
                        cursor.next();
                    }
                    drop(cursor);
                    space.drop_below(&mut batch, &from);
                    MoveOutcome {
                        files_moved,
                        version: 0,
                    }
                }
            };
            space.apply(batch)?;
            Ok(outcome)
        })?;
        if let Some(learning) = learning {
            learning.learn();
        }
        Ok(outcome)
    }

    /// One change under the locks of both keys: the destination's new
    /// version gets the source's content through [`Space::put_copy`]
    /// (State shares it; Store copies the bytes into the same batch).
    fn copy(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        let from = self.file_rel(source)?;
        let to = self.file_rel(destination)?;
        let learning = self.write_learning(scope);
        let mut copied = None;
        let outcome = self.engine.change(scope, &[&from, &to], |space| {
            let Some(space) = space else {
                return Err(Error::NotFound(source.to_string()));
            };
            let Some(file) = space.get(&from)? else {
                return Err(self.not_a_file(Some(&*space), source, &from));
            };
            self.check_size(source, file.meta().size as usize)?;
            if learning.as_ref().is_some_and(|l| l.takes(file.meta().size)) {
                // Best effort: a failed read leaves the copy to the Greps.
                copied = space
                    .read(source, &from)
                    .ok()
                    .flatten()
                    .map(|(_, data)| data);
            }
            let old = space.get(&to)?;
            pre.check(destination, old.as_ref().map(|f| f.meta().version))?;
            if old.is_none() {
                self.check_writable(&*space, destination, &to)?;
            }
            let origin = Origin::of(scope, Operation::Write);
            let old = old.as_ref();
            self.commit_with(
                space,
                destination,
                &to,
                old,
                origin,
                |space, batch, version, origin| {
                    let source = (source, from.as_slice(), &file);
                    space.put_copy(batch, destination, &to, old, source, version, origin)
                },
            )
        })?;
        outcome.teach(learning, copied);
        Ok(outcome)
    }

    fn commit(&self, scope: &Scope, changes: &[FileChange]) -> Result<Vec<FileCommitted>> {
        self.commit_changes(scope, changes)
    }

    fn branch_mounts(&self) -> Vec<VfsPath> {
        vec![self.keys.mount.clone()]
    }

    fn search(&self, scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()> {
        let rel = self.keys.rel(&part.top)?;
        let (outcome, narrowed) = self.engine.freeze(scope, &rel, |files| {
            Ok(self.search_view(scope, files, run, part, IndexUse::Request))
        })?;
        if let Some(key) = narrowed {
            spawn_check(self, (&self.index, key), (scope, run.spec(), part));
        }
        outcome
    }

    fn versions(&self, scope: &Scope, path: &VfsPath) -> Result<Vec<FileVersion>> {
        let rel = self.file_rel(path)?;
        self.engine.view(scope, |space| {
            if let Some(space) = space {
                let versions = space.versions(path, &rel)?;
                if !versions.is_empty() {
                    return Ok(versions);
                }
            }
            Err(self.not_a_file(space, path, &rel))
        })
    }

    fn read_version(
        &self,
        scope: &Scope,
        path: &VfsPath,
        version: u64,
        max_chunk: usize,
    ) -> Result<(FileVersion, ChunkReader)> {
        let rel = self.file_rel(path)?;
        let found = self.engine.view(scope, |space| match space {
            Some(space) => space.read_version(path, &rel, version, max_chunk),
            None => Ok(None),
        })?;
        found.ok_or_else(|| Error::VersionNotFound {
            path: path.to_string(),
            version,
        })
    }

    fn restore(
        &self,
        scope: &Scope,
        path: &VfsPath,
        version: u64,
        if_version: Option<u64>,
    ) -> Result<WriteOutcome> {
        let rel = self.file_rel(path)?;
        // A retained version never changes, so it is read without the
        // path's lock and committed under it, `if_version` checked there.
        let (found, mut pieces) = self.read_version(scope, path, version, RESTORE_CHUNK_BYTES)?;
        if found.deleted {
            return Err(crate::backend::restore_of_deletion(path, version));
        }
        let pre = Precondition::if_version(if_version);
        self.write_streamed(scope, path, &rel, pre, &mut pieces, Operation::Restore)
    }

    fn watch_head(&self, scope: &Scope, root: &VfsPath, cursor: &mut ChangeCursor) -> Result<()> {
        if self.engine.keep().changes == 0 {
            return Err(no_change_log(root));
        }
        let bounds = self.engine.read_log(scope, None, 0)?.bounds;
        let head = LogPosition {
            epoch: bounds.epoch,
            seq: bounds.head,
        };
        cursor.set(&self.keys.mount, head);
        Ok(())
    }

    fn changes(
        &self,
        scope: &Scope,
        root: &VfsPath,
        cursor: &mut ChangeCursor,
        max: usize,
    ) -> Result<Vec<Change>> {
        if self.engine.keep().changes == 0 {
            return Err(no_change_log(root));
        }
        let mount = &self.keys.mount;
        let position = cursor.get(mount);
        let read = self.engine.read_log(scope, position.map(|p| p.seq), max)?;
        if let Some(position) = position {
            let kept = self.engine.keep().changes;
            read.bounds.check(mount, cursor, position, kept)?;
        }
        let mut at = LogPosition {
            epoch: read.bounds.epoch,
            seq: position.map_or(read.bounds.trimmed, |p| p.seq),
        };
        let mut out = Vec::new();
        for logged in read.entries {
            at.seq = logged.seq;
            let change = self.change_of(logged)?;
            if change.path.is_within(root) {
                out.push(change);
            }
        }
        cursor.set(mount, at);
        Ok(out)
    }

    fn change_signals(&self, _root: &VfsPath, out: &mut Vec<watch::Receiver<u64>>) {
        if self.engine.keep().changes > 0 {
            out.push(self.engine.counters().signal());
        }
    }
}
