//! Grep and Glob over a real directory tree: an ordered walk on the calling
//! thread, file contents searched in parallel, results emitted in path order.
//!
//! Request flow: `FsBackend::search` → [`search`] → the shared
//! [`SearchRun`] (budgets, counters, batched bounded output).
//!
//! Each directory is read once (`getdents64` on a handle opened beneath its
//! parent's handle, never following a link) into a [`Listing`]: names sorted,
//! the name rules below applied without counting, for a Glob mostly by
//! read-ahead workers ([`super::prefetch`]). The walk visits the names depth
//! first, so entries come out in [`VfsPath::order_key`] order, the same order
//! the sorted tiers produce. Names that are not valid logical path segments
//! (not UTF-8, control characters, ...) are listed as problems, never
//! mangled. Per entry, in order: `run.visit()` (visited budget, time budget,
//! cancellation), the shared hidden/default-ignore rules
//! ([`crate::search::rules`]), then the `.ignore`/`.gitignore` rules
//! (`crate::search::ignore_rules`, which follow ripgrep), those of the directories
//! above the search root (up to the mount root) included. Every skip is
//! counted.
//!
//! Links are never followed by search: Glob lists a link as a link, Grep skips
//! it. Workers open each file relative to its directory's handle with
//! `O_NOFOLLOW`, so a file swapped for a link mid-search is refused.
//!
//! Parallelism (Grep): the walk hands the files it keeps, in path order, to
//! the shared order-preserving window ([`crate::search::window`]); its
//! workers open each file beneath its directory's handle (`grep_file`) and
//! search it, and results come out in walk order, bounded as described there.

use super::grep_file::search_opened;
use super::ignore_files::load_level;
use super::index::{FsIndex, Peek, SharedGrep};
use super::prefetch::{CloseOnDrop, DirHandle, Listing, Name, PREFETCHERS, Prefetch};
use super::sandbox::{self, DIR_FLAGS, Links, READ_FLAGS, Sandbox, errno, file_type};
use super::table_walk;
use super::tree::identity;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::ignore_rules::{self, Level, skip_of};
use crate::search::rules::Skip;
use crate::search::window::{self, Window};
use crate::search::{FileHits, FileSearcher, SearchKind, SearchPart, SearchRun};
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// Runs the search of `run` over `part` in the tree of `sandbox`.
/// Links on the way to `part.top` are followed where `rule` accepts their
/// target; the walk below it never follows one. Problems with ignore files
/// the caller may not read are left out of the summary: their text is not
/// the caller's to see.
pub fn search(
    sandbox: &Sandbox,
    scope: &Scope,
    rule: &dyn Fn(&VfsPath) -> Result<()>,
    run: &SearchRun,
    part: &SearchPart,
    index: Option<&FsIndex>,
) -> Result<()> {
    let top = &part.top;
    let fd = sandbox.open_at(top, READ_FLAGS | OFlags::NONBLOCK, Links::Follow(rule))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| errno(top, e))?;
    if file_type(&st) != FileType::Directory {
        return search_one(run, top, fd, &st);
    }
    // Grep's file workers keep every core busy already; read-ahead threads
    // only competed with them (rare literal over the cargo registry: 244 →
    // 230 ms CPU), so a Grep's walk reads its directories itself.
    let whole = *part == SearchPart::whole(top.clone());
    let indexed = match (&run.spec().kind, index) {
        (SearchKind::Grep(grep), Some(index)) => index.start(scope, &grep.plan),
        _ => None,
    };
    // `indexed` is a Grep's only.
    if let (Some(index), Some(shared)) = (index, &indexed)
        && whole
        && *top == run.spec().root
    {
        let mut grep = shared.lock();
        if let Some((table, levels)) = index.table(top, &mut grep) {
            let mount = (&*table, &*levels);
            let walked = table_walk::search(run, part, sandbox, mount, (index, &mut grep));
            drop(grep);
            if let Some(indexed) = indexed {
                indexed.finish();
            }
            return walked;
        }
    }
    let glob = match &run.spec().kind {
        SearchKind::Glob(glob) => Some(glob),
        SearchKind::Grep(_) => None,
    };
    if let (Some(index), Some(_)) = (index, glob)
        && whole
        && *top == run.spec().root
        && let Some(mount) = index.glob_table(top)
    {
        return table_walk::glob(run, part, sandbox, (&mount.0, &mount.1));
    }
    let read_ahead = glob.is_some();
    let prefetch = &Prefetch::new(read_ahead);
    let mut walk = Walk {
        run,
        part,
        whole,
        levels: Vec::new(),
        prefetch,
    };
    if !walk.enter_ancestors(sandbox, scope, rule)? {
        return Ok(());
    }
    let listing = Listing::read(run, fd, top, &walk.levels)?;
    let walked = std::thread::scope(|scope| {
        for _ in 0..if read_ahead { PREFETCHERS } else { 0 } {
            scope.spawn(|| prefetch.work(run));
        }
        let _close = CloseOnDrop(prefetch);
        walk_with(&mut walk, listing, indexed.as_ref())
    });
    if let Some(indexed) = indexed {
        indexed.finish();
    }
    if let (Some(index), Some(_)) = (index, glob) {
        index.globbed(run.visited());
    }
    walked
}

/// Walks from the search's top directory (`listing`), with Grep workers when the run is
/// a Grep, narrowed by `index` when given.
fn walk_with(walk: &mut Walk<'_>, listing: Listing, index: Option<&SharedGrep>) -> Result<()> {
    let run = walk.run;
    match &run.spec().kind {
        SearchKind::Glob(_) => walk.dir(listing, &mut Glob),
        SearchKind::Grep(options) => {
            let grep = |searcher: &mut FileSearcher<'_>, file: &FileTask| {
                let peek = index.map(|index| {
                    (
                        index,
                        index.peek(&file.dir, &file.path, options.max_file_bytes),
                    )
                });
                match peek {
                    // Counted as the scan counts it: searched, no hits
                    // (an indexed file holds no NUL byte).
                    Some((_, Peek::RuledOut)) => {
                        searcher.searched_unread();
                        None
                    }
                    Some((index, Peek::Search { learn: true })) => {
                        grep_file(run, searcher, file, Some(index))
                    }
                    _ => grep_file(run, searcher, file, None),
                }
            };
            window::grep_in_order(run, grep, |files| walk.dir(listing, files))
        }
    }
}

/// Grep on a single file given as the search root.
fn search_one(run: &SearchRun, path: &VfsPath, fd: OwnedFd, st: &rustix::fs::Stat) -> Result<()> {
    let Some(mut searcher) = FileSearcher::new(run) else {
        return Err(Error::NotDirectory(path.to_string()));
    };
    if file_type(st) != FileType::RegularFile {
        return Err(sandbox::not_regular(path));
    }
    if run.visit() && searcher.wants(path.name(), st.st_size as u64) {
        let file = std::fs::File::from(fd);
        let (modified, size) = (sandbox::modified(st), st.st_size as u64);
        if let Some(hits) = searcher.search_reader(path, modified, size, file) {
            run.emit_file(hits);
        }
    }
    Ok(())
}

/// One file for a Grep worker: its name beneath its directory's handle.
struct FileTask {
    dir: Arc<OwnedFd>,
    path: VfsPath,
}

/// Opens and searches one file; failures are soft (problems of the run).
/// With `learn`, the file is read whole and handed to that index first,
/// when it may learn it.
fn grep_file(
    run: &SearchRun,
    searcher: &mut FileSearcher<'_>,
    task: &FileTask,
    learn: Option<&SharedGrep>,
) -> Option<FileHits> {
    let flags = READ_FLAGS | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    // Before the `fstat`: the file must have been settled at that instant.
    let now = std::time::SystemTime::now();
    let opened = rustix::fs::openat(&*task.dir, task.path.name(), flags, Mode::empty())
        .and_then(|fd| rustix::fs::fstat(&fd).map(|st| (fd, st)));
    let (fd, st) = match opened {
        Ok(ok) => ok,
        // Removed since the directory was read.
        Err(Errno::NOENT) => return None,
        Err(e) => {
            run.problem(task.path.as_str(), errno(&task.path, e));
            return None;
        }
    };
    let read_whole = |fd: &OwnedFd| learn?.read_and_learn(&task.path, fd, &st, now);
    search_opened(searcher, &task.path, (fd, &st), read_whole, None)
}

/// What the walk does with the files it keeps.
trait Visitor {
    /// A regular file or link at `path`, not skipped, as listed in `name`.
    fn file(&mut self, run: &SearchRun, dir: &Arc<OwnedFd>, path: VfsPath, name: Name);
}

/// Glob: match the relative path, emit in walk order.
struct Glob;

impl Visitor for Glob {
    fn file(&mut self, run: &SearchRun, _dir: &Arc<OwnedFd>, path: VfsPath, name: Name) {
        let link = name.kind == FileType::Symlink;
        if name.wanted && run.paths_only() {
            return run.emit_path(path, link);
        }
        // The listing took the `lstat` of every file the pattern keeps.
        let st = match (name.wanted, name.stat) {
            (true, Some(Ok(st))) => st,
            (true, Some(Err(e))) if e != Errno::NOENT => {
                return run.problem(path.as_str(), errno(&path, e));
            }
            _ => return,
        };
        run.emit_entry(sandbox::glob_entry(path, &st, link));
    }
}

/// Grep: hand the wanted files to the window's workers, in walk order.
impl Visitor for Window<'_, FileTask> {
    fn file(&mut self, _run: &SearchRun, dir: &Arc<OwnedFd>, path: VfsPath, name: Name) {
        if name.wanted {
            self.push(FileTask {
                dir: dir.clone(),
                path,
            });
        }
    }
}

/// Directories one walk holds open at once, besides the search's top: the
/// one it is in and its nearest ancestors. Deeper, an ancestor's handle is
/// closed as the walk goes down and opened again beneath the top's handle,
/// with no link followed and checked to be the same directory, when the walk
/// comes back up to it. Unbounded, a Glob of a tree 2,000 levels deep held
/// 2,000 descriptors, a client that stopped reading kept them, and the
/// server's 16 searches at once could take more than its descriptor limit
/// (the stress test's `deep_tree` saw "Too many open files" answer another
/// request).
pub(super) const MAX_OPEN_LEVELS: usize = 64;

/// The walk's state: the run, the part to cover, the ignore rules in force.
struct Walk<'a> {
    run: &'a SearchRun,
    part: &'a SearchPart,
    /// True when the part is `part.top`'s whole subtree (no range checks).
    whole: bool,
    /// Ignore rules of every directory from the mount root down to the
    /// directory being walked.
    levels: Vec<Arc<Level>>,
    /// Reads directory listings ahead of the walk.
    prefetch: &'a Prefetch,
}

impl Walk<'_> {
    /// Loads the ignore rules of the directories above `part.top` and applies
    /// the skip rules to those between the search root and `part.top`; false
    /// when `part.top` itself is skipped.
    fn enter_ancestors(
        &mut self,
        sandbox: &Sandbox,
        scope: &Scope,
        rule: &dyn Fn(&VfsPath) -> Result<()>,
    ) -> Result<bool> {
        let run = self.run;
        let top = &self.part.top;
        let root = &run.spec().root;
        let mut dir = sandbox.mount().clone();
        while dir != *top {
            let fd = sandbox.open_at(&dir, DIR_FLAGS, Links::Follow(rule))?;
            let mut problems = Vec::new();
            let level = load_level(run, &fd, &dir, |_| true, &mut problems);
            ignore_rules::report(run, scope, problems, true);
            self.levels.push(Arc::new(level));
            let rel = top.relative_to(&dir).unwrap_or_default();
            let next = rel.split('/').next().unwrap_or(rel);
            dir = dir.join(next)?;
            if dir.is_within(root)
                && dir != *root
                && let Some(skip) = skip_of(run, &self.levels, dir.as_str(), true)
            {
                count_skip(run, skip);
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// True when the part covers `child` (a directory when `is_dir`).
    fn in_part(&self, child: &VfsPath, is_dir: bool) -> bool {
        self.whole
            || if is_dir {
                self.part.overlaps_dir(child)
            } else {
                self.part.contains_key(&child.order_key())
            }
    }

    /// Walks the directory `listing` and everything below it: per entry, in
    /// path order, applies the part's range and the visited budget, counts
    /// skips, enters directories and hands files to `visitor`.
    ///
    /// Iterative, with an explicit stack of the directories being walked: a
    /// tree as deep as the longest logical path (about 2,000 levels) once
    /// overflowed a worker thread's stack through recursion.
    fn dir(&mut self, listing: Listing, visitor: &mut dyn Visitor) -> Result<()> {
        let run = self.run;
        let mut stack = vec![self.enter(listing)];
        let top = match stack[0].0.fd.open() {
            Some(fd) => (fd.clone(), stack[0].0.path.clone()),
            None => return Ok(()),
        };
        while let Some((listing, names)) = stack.last_mut() {
            let Some(mut name) = names.next() else {
                stack.pop();
                self.levels.pop();
                if let Some((parked, names)) = stack.last_mut()
                    && let Err(err) = unpark(&top, parked)
                {
                    run.problem(parked.path.as_str(), err);
                    names.for_each(drop);
                }
                continue;
            };
            let Some(fd) = listing.fd.open() else {
                continue;
            };
            let is_dir = name.kind == FileType::Directory;
            if !self.whole {
                let inside = match &name.path {
                    Some(child) => self.in_part(child, is_dir),
                    // Valid names always join (the listing checked them).
                    None => listing
                        .path
                        .join(listing.file_name(&name))
                        .is_ok_and(|child| self.in_part(&child, is_dir)),
                };
                if !inside {
                    continue;
                }
            }
            if !run.visit() {
                // Every directory still open would stop at its next entry.
                break;
            }
            if let Some(skip) = name.skip {
                count_skip(run, skip);
                continue;
            }
            let Some(child) = name.path.take() else {
                continue;
            };
            match name.kind {
                FileType::Directory => {
                    let sub = self.prefetch.take(&child).unwrap_or_else(|| {
                        let flags = DIR_FLAGS | OFlags::NOFOLLOW;
                        rustix::fs::openat(&**fd, child.name(), flags, Mode::empty())
                            .map_err(|e| errno(&child, e))
                            .and_then(|sub| Listing::read(run, sub, &child, &self.levels))
                    });
                    match sub {
                        Ok(sub) => {
                            let frame = self.enter(sub);
                            stack.push(frame);
                            if let Some(deep) = stack.len().checked_sub(MAX_OPEN_LEVELS + 1)
                                && deep > 0
                            {
                                park(&mut stack[deep].0);
                            }
                        }
                        Err(err) => run.problem(child.as_str(), err),
                    }
                }
                FileType::RegularFile | FileType::Symlink => visitor.file(run, fd, child, name),
                _ => {}
            }
        }
        for _ in 0..stack.len() {
            self.levels.pop();
        }
        Ok(())
    }

    /// Starts walking the directory `listing`: reports its problems, puts its
    /// ignore rules in force and queues its subdirectories for read-ahead;
    /// returns it with its names to walk.
    fn enter(&mut self, mut listing: Listing) -> (Listing, std::vec::IntoIter<Name>) {
        let run = self.run;
        for (shown, err) in std::mem::take(&mut listing.problems) {
            run.problem(shown, err);
        }
        self.levels.push(listing.level.clone());
        // Queue the subdirectories the walk will enter so workers list them
        // ahead. Not the first: the walk needs it at once, and reading it
        // itself beats waiting for a worker that just picked it up (Glob over
        // the cargo registry: 62 → 57 ms median, two runs of 9 each way).
        let subdirs = listing
            .names
            .iter()
            .filter_map(|n| match (&n.path, n.kind) {
                (Some(child), FileType::Directory) if self.in_part(child, true) => Some(child),
                _ => None,
            });
        if let Some(fd) = listing.fd.open() {
            self.prefetch.submit(fd, subdirs.skip(1), &self.levels);
        }
        let names = std::mem::take(&mut listing.names).into_iter();
        (listing, names)
    }
}

/// Closes the handle of `listing`, a directory the walk will come back to.
fn park(listing: &mut Listing) {
    if let Some(fd) = listing.fd.open()
        && let Ok((dev, ino)) = identity(&listing.path, fd)
    {
        listing.fd = DirHandle::Closed(dev, ino);
    }
}

/// Opens the parked directory `listing` again beneath the search's top
/// directory (its handle and path), with no link followed; an error when
/// it is gone or is no longer the directory the walk left.
fn unpark((top, top_path): &(Arc<OwnedFd>, VfsPath), listing: &mut Listing) -> Result<()> {
    let DirHandle::Closed(dev, ino) = listing.fd else {
        return Ok(());
    };
    let path = &listing.path;
    let moved = || Error::NotFound(format!("{path} (moved during the search)"));
    let rel = path.relative_to(top_path).ok_or_else(moved)?;
    let fd = sandbox::open_beneath(top, rel, DIR_FLAGS).map_err(|e| errno(path, e))?;
    if identity(path, &fd)? != (dev, ino) {
        return Err(moved());
    }
    listing.fd = DirHandle::Open(Arc::new(fd));
    Ok(())
}

/// Counts a skipped entry under its rule.
fn count_skip(run: &SearchRun, skip: Skip) {
    match skip {
        Skip::Hidden => run.skipped_hidden(),
        Skip::Ignored => run.skipped_ignored(),
    }
}
