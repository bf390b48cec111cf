//! The mount table: one logical path space over several tiers.
//!
//! A path belongs to the mount with the longest prefix that contains it on a
//! segment boundary (`/memories` never owns `/memories-old/x`). Each tier is
//! built knowing its own mount prefix and answers in full logical paths, so the
//! table only routes: nothing is rewritten on the way in or out.
//!
//! Listing a directory shows the mount points below it as directories, and a
//! search from `/` (or any ancestor of mounts) spans every mount below it as
//! one path-ordered stream under one budget: the owning tier is searched in the
//! key ranges between its child mounts, and each child mount is searched in its
//! place. A mount that fails during a search is reported in the summary
//! instead of vanishing from the results.

use super::{
    Backend, ChunkReader, ChunkSource, FileChange, FileCommitted, MoveOutcome, Precondition,
    UpdateFn, WriteOutcome, no_change_log,
};
use crate::change::{Change, ChangeCursor};
use crate::entry::Entry;
use crate::error::{Error, Result};
use crate::history::FileVersion;
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::rules::{self, Skip};
use crate::search::{SearchPart, SearchRun};
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::watch;

/// Fewest changes one mount contributes to a page of a Watch spanning
/// several, so a busy mount cannot starve the others.
const MIN_CHANGES_PER_MOUNT: usize = 16;

/// One entry of the mount table.
pub struct Mount {
    /// Where the tier is mounted.
    pub prefix: VfsPath,
    /// The tier (built with the same prefix).
    pub backend: Arc<dyn Backend>,
    /// `state`, `store` or `filesystem`, for logs and errors.
    pub tier: &'static str,
}

/// Routes every call to the tier that owns its path.
pub struct CompositeBackend {
    /// Sorted by path order, so child mounts come out in path order.
    mounts: Vec<Mount>,
    /// When the table was built: the time shown for mount points and the
    /// directories leading to them, which no tier stores.
    built: SystemTime,
}

impl CompositeBackend {
    /// Builds the table; two mounts on one prefix are an error.
    pub fn new(mut mounts: Vec<Mount>) -> Result<CompositeBackend> {
        mounts.sort_by_key(|m| m.prefix.order_key());
        if let Some(w) = mounts.windows(2).find(|w| w[0].prefix == w[1].prefix) {
            return Err(Error::InvalidArgument(format!(
                "two mounts at {}",
                w[0].prefix
            )));
        }
        Ok(CompositeBackend {
            mounts,
            built: SystemTime::now(),
        })
    }

    /// The mounts, in path order.
    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// The mount owning `path`: the longest prefix containing it.
    fn owner(&self, path: &VfsPath) -> Option<&Mount> {
        self.mounts
            .iter()
            .filter(|m| path.is_within(&m.prefix))
            .max_by_key(|m| m.prefix.as_str().len())
    }

    fn route(&self, path: &VfsPath) -> Result<&dyn Backend> {
        match self.owner(path) {
            Some(m) => Ok(m.backend.as_ref()),
            None => Err(Error::NotFound(path.to_string())),
        }
    }

    /// The tier owning both `source` and `destination` of a Move or Copy
    /// (`verb`); paths on two mounts are INVALID_ARGUMENT naming both.
    fn one_mount(
        &self,
        verb: &str,
        source: &VfsPath,
        destination: &VfsPath,
    ) -> Result<&dyn Backend> {
        let from = self
            .owner(source)
            .ok_or_else(|| Error::NotFound(source.to_string()))?;
        let to = self
            .owner(destination)
            .ok_or_else(|| Error::NotFound(destination.to_string()))?;
        if from.prefix != to.prefix {
            return Err(Error::InvalidArgument(format!(
                "cannot {verb} across mounts: {source} is on {}, {destination} on {}",
                from.prefix, to.prefix
            )));
        }
        Ok(from.backend.as_ref())
    }

    /// Runs a file read on the owning tier; a path that only holds mount
    /// points is a directory, not missing.
    fn read_file<T>(&self, path: &VfsPath, f: impl FnOnce(&dyn Backend) -> Result<T>) -> Result<T> {
        match self.route(path).and_then(f) {
            Err(Error::NotFound(_)) if self.holds_mounts(path) => {
                Err(Error::IsDirectory(path.to_string()))
            }
            other => other,
        }
    }

    /// Mounts strictly below `dir` whose nearest enclosing mount is `owner`
    /// (deeper ones are handled when their parent mount is searched).
    fn child_mounts<'a>(&'a self, dir: &VfsPath, owner: Option<&'a Mount>) -> Vec<&'a Mount> {
        self.mounts
            .iter()
            .filter(|m| m.prefix != *dir && m.prefix.is_within(dir))
            .filter(|m| {
                let parent = m.prefix.parent();
                let nearest = self.owner(&parent).map(|o| &o.prefix);
                nearest == owner.map(|o| &o.prefix)
            })
            .collect()
    }

    /// The one mount owning every path of `reads`, when there is one and
    /// none of the paths is a mount point (which only the mount table
    /// answers for).
    fn sole_owner(&self, reads: &[super::FileRead]) -> Option<&Mount> {
        let first = self.owner(&reads.first()?.path)?;
        let sole = reads.iter().all(|r| {
            self.owner(&r.path).is_some_and(|m| std::ptr::eq(m, first))
                && !self.holds_mounts(&r.path)
        });
        sole.then_some(first)
    }

    /// True when `dir` is a mount point or lies above one.
    fn holds_mounts(&self, dir: &VfsPath) -> bool {
        self.mounts.iter().any(|m| m.prefix.is_within(dir))
    }

    /// The mounts whose change logs a Watch of `root` reads: the one
    /// owning `root` and every mount below it.
    fn watched(&self, root: &VfsPath) -> Vec<&Mount> {
        let owner = self.owner(root).map(|m| &m.prefix);
        self.mounts
            .iter()
            .filter(|m| Some(&m.prefix) == owner || m.prefix.is_within(root))
            .collect()
    }

    /// Runs `f` on every mount a Watch of `root` reads, passing over those
    /// that keep no change log; fails when none keeps one.
    fn each_log(
        &self,
        root: &VfsPath,
        mut f: impl FnMut(&Mount, usize) -> Result<()>,
    ) -> Result<()> {
        let watched = self.watched(root);
        let mut logs = 0;
        for mount in &watched {
            match f(mount, watched.len()) {
                Ok(()) => logs += 1,
                Err(Error::Unsupported(_)) => {}
                Err(err) => return Err(err),
            }
        }
        if logs == 0 {
            return Err(no_change_log(root));
        }
        Ok(())
    }

    /// Searches `part` with `owner` around the child mounts, in path order.
    fn search_part(&self, scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()> {
        let owner = self.owner(&part.top);
        let children = self.child_mounts(&part.top, owner);
        let mut lo = part.lo.clone();
        let mut started_owner = false;
        for child in children {
            let (child_lo, child_hi) = child.prefix.subtree_range();
            let child_key = child.prefix.order_key();
            if child_hi <= part.lo || child_key >= part.hi {
                continue;
            }
            if let Some(owner) = owner {
                let gap = SearchPart {
                    top: part.top.clone(),
                    lo: lo.clone(),
                    hi: child_key.clone(),
                };
                self.search_owner(scope, run, owner, &gap, &mut started_owner)?;
            }
            if run.should_stop() {
                return Ok(());
            }
            if !self.mount_hidden(run, &child.prefix) {
                // A search resumed inside the child (a later page of
                // resources/list) starts where it left off, not over.
                let inner = SearchPart {
                    top: child.prefix.clone(),
                    lo: child_lo.max(part.lo.clone()),
                    hi: child_hi.clone(),
                };
                if let Err(err) = self.search_part(scope, run, &inner) {
                    run.problem(child.prefix.as_str(), err);
                }
            }
            lo = child_hi;
        }
        match owner {
            Some(owner) => {
                let rest = SearchPart {
                    top: part.top.clone(),
                    lo,
                    hi: part.hi.clone(),
                };
                self.search_owner(scope, run, owner, &rest, &mut started_owner)
            }
            None if self.holds_mounts(&part.top) => Ok(()),
            None => Err(Error::NotFound(part.top.to_string())),
        }
    }

    /// Searches one gap of the owner. The first call decides whether the
    /// search can start (a missing root is an error); later gaps of a tier
    /// that lost its directory are soft problems.
    fn search_owner(
        &self,
        scope: &Scope,
        run: &SearchRun,
        owner: &Mount,
        gap: &SearchPart,
        started: &mut bool,
    ) -> Result<()> {
        if gap.lo >= gap.hi || run.should_stop() {
            return Ok(());
        }
        let first = !*started;
        *started = true;
        match owner.backend.search(scope, run, gap) {
            Ok(()) => Ok(()),
            // An ancestor of mounts need not exist in its owning tier.
            Err(Error::NotFound(_)) if self.holds_mounts(&gap.top) && gap.top != owner.prefix => {
                Ok(())
            }
            Err(err) if first => Err(err),
            Err(err) => {
                run.problem(gap.top.as_str(), err);
                Ok(())
            }
        }
    }

    /// Applies the hidden/ignore rules to the directories between the search
    /// root and a mount point, counting a skip like a walk would.
    fn mount_hidden(&self, run: &SearchRun, mount: &VfsPath) -> bool {
        let spec = run.spec();
        let Some(rel) = mount.relative_to(&spec.root) else {
            return false;
        };
        for name in rel.split('/').filter(|s| !s.is_empty()) {
            match rules::skip_name(name, spec.include_hidden, spec.include_ignored) {
                Some(Skip::Hidden) => run.skipped_hidden(),
                Some(Skip::Ignored) => run.skipped_ignored(),
                None => continue,
            }
            return true;
        }
        false
    }
}

impl Backend for CompositeBackend {
    fn list(&self, scope: &Scope, dir: &VfsPath) -> Result<Vec<Entry>> {
        let mut entries = match self.route(dir).and_then(|b| b.list(scope, dir)) {
            Ok(entries) => entries,
            Err(Error::NotFound(_)) if self.holds_mounts(dir) => Vec::new(),
            Err(err) => return Err(err),
        };
        for mount in &self.mounts {
            let Some(rel) = mount.prefix.relative_to(dir) else {
                continue;
            };
            if rel.is_empty() {
                continue;
            }
            let child = dir.join(rel.split('/').next().unwrap_or(rel))?;
            entries.retain(|e| e.path != child);
            entries.push(Entry::directory(child, self.built));
        }
        entries.sort_by_key(|e| e.path.order_key());
        entries.dedup_by(|a, b| a.path == b.path);
        Ok(entries)
    }

    fn stat(&self, scope: &Scope, path: &VfsPath) -> Result<Entry> {
        match self.route(path).and_then(|b| b.stat(scope, path)) {
            Err(Error::NotFound(_)) if self.holds_mounts(path) => {
                Ok(Entry::directory(path.clone(), self.built))
            }
            other => other,
        }
    }

    fn read(&self, scope: &Scope, path: &VfsPath) -> Result<(Vec<u8>, Entry)> {
        self.read_file(path, |b| b.read(scope, path))
    }

    fn read_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        max_chunk: usize,
    ) -> Result<(Entry, ChunkReader)> {
        self.read_file(path, |b| b.read_chunks(scope, path, max_chunk))
    }

    fn read_admitted(
        &self,
        scope: &Scope,
        path: &VfsPath,
        admit: &mut super::Admit<'_>,
    ) -> Result<(Vec<u8>, Entry)> {
        self.read_file(path, |b| b.read_admitted(scope, path, admit))
    }

    /// Read together by their tier when one mount owns them all (and none
    /// is a mount point, which only the mount table answers for).
    fn read_files(&self, reads: &[super::FileRead]) -> Result<super::FilesRead> {
        match self.sole_owner(reads) {
            Some(owner) => owner.backend.read_files(reads),
            None => super::read_each(self, reads),
        }
    }

    /// Traced by their tier when one mount owns them all, as `read_files`.
    fn read_files_traced(&self, reads: &[super::FileRead]) -> Result<Option<super::TracedReads>> {
        match self.sole_owner(reads) {
            Some(owner) => owner.backend.read_files_traced(reads),
            None => Ok(None),
        }
    }

    fn write(
        &self,
        scope: &Scope,
        path: &VfsPath,
        data: Vec<u8>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        if self.holds_mounts(path) {
            return Err(Error::IsDirectory(path.to_string()));
        }
        self.route(path)?.write(scope, path, data, pre)
    }

    fn write_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<WriteOutcome> {
        if self.holds_mounts(path) {
            return Err(Error::IsDirectory(path.to_string()));
        }
        self.route(path)?.write_chunks(scope, path, pre, pieces)
    }

    fn update(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        self.route(path)?.update(scope, path, if_version, f)
    }

    fn delete(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        if self.mounts.iter().any(|m| m.prefix == *path) && !recursive {
            return Err(super::mount_point_delete(path));
        }
        self.route(path)?.delete(scope, path, if_version, recursive)
    }

    /// Refuses mount roots, `/` and paths above a mount, and Moves between
    /// two mounts (no tier can move atomically into another); then the one
    /// tier owning both paths moves.
    fn rename(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        for path in [source, destination] {
            if path.is_root() || self.holds_mounts(path) {
                return Err(super::unmovable_mount(path));
            }
        }
        self.one_mount("move", source, destination)?
            .rename(scope, source, destination, pre)
    }

    /// Refuses a destination that holds mounts and a Copy between two
    /// mounts (no tier writes into another), then the one tier owning both
    /// paths copies.
    fn copy(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        if self.holds_mounts(destination) {
            return Err(Error::IsDirectory(destination.to_string()));
        }
        self.one_mount("copy", source, destination)?
            .copy(scope, source, destination, pre)
    }

    fn branch_mounts(&self) -> Vec<VfsPath> {
        self.mounts
            .iter()
            .flat_map(|m| m.backend.branch_mounts())
            .collect()
    }

    fn branch_record_lease(&self, mount: &VfsPath) -> std::time::Duration {
        self.owner(mount).map_or(std::time::Duration::ZERO, |m| {
            m.backend.branch_record_lease(mount)
        })
    }

    fn drop_scope(&self, scope: &Scope, mount: &VfsPath) -> Result<()> {
        self.route(mount)?.drop_scope(scope, mount)
    }

    fn ignore_files_root(&self, path: &VfsPath) -> Option<VfsPath> {
        self.owner(path)?.backend.ignore_files_root(path)
    }

    fn mount_of(&self, path: &VfsPath) -> Option<VfsPath> {
        self.owner(path).map(|m| m.prefix.clone())
    }

    fn commit(&self, scope: &Scope, changes: &[FileChange]) -> Result<Vec<FileCommitted>> {
        let Some(first) = changes.first() else {
            return Ok(Vec::new());
        };
        let owner = self
            .owner(&first.path)
            .ok_or_else(|| Error::NotFound(first.path.to_string()))?;
        for change in changes {
            let path = &change.path;
            if self.holds_mounts(path) {
                return Err(Error::IsDirectory(path.to_string()));
            }
            let mount = self.owner(path).map(|m| &m.prefix);
            if mount != Some(&owner.prefix) {
                return Err(super::changeset::spans_mounts(
                    &first.path,
                    &owner.prefix,
                    path,
                    mount,
                ));
            }
        }
        owner.backend.commit(scope, changes)
    }

    fn search(&self, scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()> {
        self.search_part(scope, run, part)
    }

    fn versions(&self, scope: &Scope, path: &VfsPath) -> Result<Vec<FileVersion>> {
        self.read_file(path, |b| b.versions(scope, path))
    }

    fn read_version(
        &self,
        scope: &Scope,
        path: &VfsPath,
        version: u64,
        max_chunk: usize,
    ) -> Result<(FileVersion, ChunkReader)> {
        self.read_file(path, |b| b.read_version(scope, path, version, max_chunk))
    }

    fn restore(
        &self,
        scope: &Scope,
        path: &VfsPath,
        version: u64,
        if_version: Option<u64>,
    ) -> Result<WriteOutcome> {
        if self.holds_mounts(path) {
            return Err(Error::IsDirectory(path.to_string()));
        }
        self.route(path)?.restore(scope, path, version, if_version)
    }

    /// Every mount under `root` that keeps a change log (those that keep
    /// none are passed over; none at all is FAILED_PRECONDITION).
    fn watch_head(&self, scope: &Scope, root: &VfsPath, cursor: &mut ChangeCursor) -> Result<()> {
        self.each_log(root, |mount, _| {
            mount.backend.watch_head(scope, root, cursor)
        })
    }

    /// Reads each mount's log in turn, each up to its share of `max` (at
    /// least [`MIN_CHANGES_PER_MOUNT`], at most `max`).
    fn changes(
        &self,
        scope: &Scope,
        root: &VfsPath,
        cursor: &mut ChangeCursor,
        max: usize,
    ) -> Result<Vec<Change>> {
        let mut out = Vec::new();
        self.each_log(root, |mount, mounts| {
            let share = (max / mounts).max(MIN_CHANGES_PER_MOUNT.min(max));
            out.extend(mount.backend.changes(scope, root, cursor, share)?);
            Ok(())
        })?;
        Ok(out)
    }

    fn change_signals(&self, root: &VfsPath, out: &mut Vec<watch::Receiver<u64>>) {
        for mount in self.watched(root) {
            mount.backend.change_signals(root, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Keep;
    use crate::backend::state::{StateBackend, StateLimits};
    use crate::search::{Budgets, SearchEvent, SearchSpec};
    use std::time::Duration;

    /// A tier whose storage has failed: every call is an internal error. No
    /// real tier can be made to fail on demand in a test, so this one stands
    /// in for a disk that went away.
    struct Broken;

    fn broken<T>() -> Result<T> {
        Err(Error::Internal("the disk went away".into()))
    }

    impl Backend for Broken {
        fn list(&self, _: &Scope, _: &VfsPath) -> Result<Vec<Entry>> {
            broken()
        }
        fn stat(&self, _: &Scope, _: &VfsPath) -> Result<Entry> {
            broken()
        }
        fn read(&self, _: &Scope, _: &VfsPath) -> Result<(Vec<u8>, Entry)> {
            broken()
        }
        fn write(
            &self,
            _: &Scope,
            _: &VfsPath,
            _: Vec<u8>,
            _: Precondition,
        ) -> Result<WriteOutcome> {
            broken()
        }
        fn update(
            &self,
            _: &Scope,
            _: &VfsPath,
            _: Option<u64>,
            _: &mut UpdateFn<'_>,
        ) -> Result<WriteOutcome> {
            broken()
        }
        fn delete(&self, _: &Scope, _: &VfsPath, _: Option<u64>, _: bool) -> Result<u64> {
            broken()
        }
        fn rename(
            &self,
            _: &Scope,
            _: &VfsPath,
            _: &VfsPath,
            _: Precondition,
        ) -> Result<MoveOutcome> {
            broken()
        }
        fn search(&self, _: &Scope, _: &SearchRun, _: &SearchPart) -> Result<()> {
            broken()
        }
    }

    fn path(p: &str) -> VfsPath {
        VfsPath::parse(p).unwrap()
    }

    /// A search from `/` over a failed mount still returns the other tiers'
    /// results and names the failed mount in the summary's problems.
    #[test]
    fn failed_mount_is_reported_not_silently_dropped() {
        let limits = StateLimits {
            max_total_bytes: 1 << 20,
            max_file_bytes: 1 << 20,
            idle_ttl: Duration::from_secs(60),
            max_sessions: 8,
        };
        let state = Arc::new(StateBackend::new(VfsPath::root(), limits, Keep::DEFAULT));
        let scope = Scope::default();
        for p in ["/a.txt", "/z.txt"] {
            state
                .write(
                    &scope,
                    &path(p),
                    b"needle\n".to_vec(),
                    Precondition::default(),
                )
                .unwrap();
        }
        let table = CompositeBackend::new(vec![
            Mount {
                prefix: VfsPath::root(),
                backend: state,
                tier: "state",
            },
            Mount {
                prefix: path("/broken"),
                backend: Arc::new(Broken),
                tier: "store",
            },
        ])
        .unwrap();
        let spec = SearchSpec::glob(VfsPath::root(), "**", false, Budgets::default()).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let run = SearchRun::new(spec, tx, Duration::from_secs(1));
        table
            .search(&scope, &run, &SearchPart::whole(VfsPath::root()))
            .unwrap();
        run.finish(Ok(()));
        let mut found = Vec::new();
        let mut summary = None;
        while let Ok(event) = rx.try_recv() {
            match event {
                SearchEvent::Batch(hits) => found.extend(hits.into_iter().map(|h| match h {
                    crate::search::Hit::Entry(e) => e.path.to_string(),
                    crate::search::Hit::Path { path, .. } => path.to_string(),
                    crate::search::Hit::File(f) => f.path.to_string(),
                })),
                SearchEvent::Summary(s) => summary = Some(s),
                SearchEvent::Failed(err) => panic!("search failed: {err}"),
            }
        }
        assert_eq!(found, ["/a.txt", "/z.txt"]);
        let problems = summary.expect("summary sent").problems;
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].0, "/broken");
        assert_eq!(problems[0].1.code(), "INTERNAL_ERROR");
    }
}
