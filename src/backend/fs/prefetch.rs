//! Directory listings read ahead of the ordered search walk by worker threads.
//!
//! Request flow: for a Glob, `fs::search::search` starts [`PREFETCHERS`]
//! threads running [`Prefetch::work`]; the ordered walk (one thread, path
//! order) calls [`Prefetch::submit`] for the subdirectories it will enter and
//! [`Prefetch::take`] when it enters one. A worker opens the directory beneath
//! its parent's handle (`O_NOFOLLOW`, so confinement is the walk's own) and
//! builds its [`Listing`]: its ignore files loaded, names sorted, types
//! resolved, each name's skip rule and the run's name filter decided, logical
//! paths made for the entries the walk will use, and for a Glob the `lstat`
//! of every file the pattern keeps (emission needs size and times, unless
//! the Glob is `paths_only`). A Grep's walk reads its directories itself
//! ([`Listing::read`] is the same code).
//!
//! Invariants: workers only read; every decision that counts (visited budget,
//! skip rules and their counters, problems, emission) stays with the ordered
//! walk, so results and summaries are identical to a one-thread walk. Workers
//! take queued directories smallest path first, which is the order the walk
//! needs them. A directory the walk reaches while still queued is read by the
//! walk itself (never waits on an idle queue). At most [`MAX_AHEAD`]
//! directories are queued or held (each holds an open handle and its names),
//! which bounds memory and descriptors. [`Prefetch::close`] (run by a guard on
//! every exit of the walk) stops the workers; listings never taken are dropped.
//!
//! Errors: a failed open or read is kept in the slot and reported by the walk
//! when it reaches the directory, exactly as if it had read it itself.
//!
//! Performance: Glob spent its time on one thread (getdents, sort, ignore
//! matching, one `lstat` per match) while fd walks on two; moving that to
//! workers leaves the walk with counting and emission, and took Glob over the
//! cargo registry from 2.60× to about 1.7–2.3× fd's time on the shared 2-core
//! machine. The rest is mostly CPU fd does not spend (the `lstat` per result
//! that Glob's entries carry, gRPC encoding).

use super::ignore_files::load_level;
use super::sandbox::{DIR_FLAGS, errno, file_type, for_each_entry};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::search::ignore_rules::{Level, Problem, skip_of};
use crate::search::rules::Skip;
use crate::search::{SearchKind, SearchRun};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::ops::Range;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// `lstat`, never following a link.
const NOFOLLOW: AtFlags = AtFlags::SYMLINK_NOFOLLOW;
/// Directories queued or read ahead and not yet taken by the walk.
pub const MAX_AHEAD: usize = 128;
/// Threads reading directories ahead of the walk.
pub const PREFETCHERS: usize = 2;

/// One entry of a directory with every decision that needs no counting
/// made: its type, skip rule, the run's name filter and, for the entries the
/// walk will use, its logical path.
pub struct Name {
    /// Where its file name lies in its listing's `arena`.
    span: Range<usize>,
    /// Its type (never `Unknown`: the listing resolves it with `lstat`).
    pub kind: FileType,
    /// `lstat` of a file a Glob with metadata keeps (or of an entry whose
    /// type the directory did not say).
    pub stat: Option<std::result::Result<Stat, Errno>>,
    /// The hidden/ignore rule that skips it, if any.
    pub skip: Option<Skip>,
    /// True when the run's name filter keeps this file (Glob pattern, Grep
    /// `glob` filter).
    pub wanted: bool,
    /// The logical path of a directory that is not skipped and of a wanted
    /// file; `None` for the rest, most entries of a typical search, which
    /// thus cost no allocation.
    pub path: Option<VfsPath>,
}

/// A listed directory's handle, as a walk holds it.
pub enum DirHandle {
    /// Open: its files and subdirectories are opened beneath it.
    Open(Arc<OwnedFd>),
    /// Closed by a deep walk until it comes back up
    /// (`super::search::MAX_OPEN_LEVELS`), with the directory's device and
    /// inode, to be checked when it is opened again.
    Closed(u64, u64),
}

impl DirHandle {
    /// The handle, when open.
    pub fn open(&self) -> Option<&Arc<OwnedFd>> {
        match self {
            DirHandle::Open(fd) => Some(fd),
            DirHandle::Closed(..) => None,
        }
    }
}

/// A directory's handle, ignore rules and entries sorted by name.
pub struct Listing {
    /// The directory's handle (files are opened beneath it).
    pub fd: DirHandle,
    /// Its logical path.
    pub path: VfsPath,
    /// The directory's own ignore rules.
    pub level: Arc<Level>,
    /// Problems of its ignore files and of names that cannot be logical
    /// paths (reported, never mangled).
    pub problems: Vec<Problem>,
    /// The valid entry names, one after the other.
    arena: String,
    /// Entries other than `.` and `..` with valid names, sorted by name bytes.
    pub names: Vec<Name>,
}

impl Listing {
    /// Reads the directory open as `fd` at `path` for `run`; `levels` are the
    /// ignore rules of the directories above it.
    pub fn read(
        run: &SearchRun,
        fd: OwnedFd,
        path: &VfsPath,
        levels: &[Arc<Level>],
    ) -> Result<Listing> {
        // Names go to one buffer and are sorted by their spans: one
        // allocation per directory instead of one per entry.
        let mut bytes = Vec::new();
        let mut raw: Vec<(Range<usize>, FileType)> = Vec::new();
        for_each_entry(&fd, |name, kind| {
            let start = bytes.len();
            bytes.extend_from_slice(name.to_bytes());
            raw.push((start..bytes.len(), kind));
        })
        .map_err(|e| errno(path, e))?;
        raw.sort_unstable_by(|a, b| bytes[a.0.clone()].cmp(&bytes[b.0.clone()]));
        let mut problems = Vec::new();
        let present = |file: &str| {
            raw.binary_search_by(|(span, _)| bytes[span.clone()].cmp(file.as_bytes()))
                .is_ok()
        };
        let level = Arc::new(load_level(run, &fd, path, present, &mut problems));
        let mut levels = levels.to_vec();
        levels.push(level.clone());
        let spec = run.spec();
        let glob_stats = matches!(&spec.kind, SearchKind::Glob(g) if !g.paths_only);
        // Each child's logical path is built in `full` without allocating;
        // the part the name filters match (relative to the search root) is
        // a suffix of it.
        let dir_rel = path.relative_to(&spec.root).map(str::len);
        let mut full = String::with_capacity(path.as_str().len() + 64);
        if !path.is_root() {
            full.push_str(path.as_str());
        }
        full.push('/');
        let base = full.len();
        let mut arena = String::with_capacity(bytes.len());
        let mut names = Vec::with_capacity(raw.len());
        for (span, mut kind) in raw {
            let name = match valid_name(path, &bytes[span]) {
                Ok(name) => name,
                Err(problem) => {
                    problems.push(problem);
                    continue;
                }
            };
            let mut stat = None;
            if kind == FileType::Unknown {
                match rustix::fs::statat(&fd, name, NOFOLLOW) {
                    Ok(st) => {
                        kind = file_type(&st);
                        stat = Some(Ok(st));
                    }
                    Err(e) => {
                        let child = path.join(name)?;
                        problems.push((child.to_string(), errno(&child, e)));
                        continue;
                    }
                }
            }
            full.truncate(base);
            full.push_str(name);
            let is_dir = kind == FileType::Directory;
            let skip = skip_of(run, &levels, &full, is_dir);
            let rel = match dir_rel {
                None => "",
                Some(0) => name,
                Some(len) => &full[full.len() - len - 1 - name.len()..],
            };
            let wanted = skip.is_none()
                && match &spec.kind {
                    SearchKind::Glob(glob) => {
                        matches!(kind, FileType::RegularFile | FileType::Symlink)
                            && glob.matcher.is_match(rel)
                    }
                    SearchKind::Grep(grep) => kind == FileType::RegularFile && grep.accepts(rel),
                };
            if wanted && glob_stats && stat.is_none() {
                stat = Some(rustix::fs::statat(&fd, name, NOFOLLOW));
            }
            let used = wanted || (is_dir && skip.is_none());
            let start = arena.len();
            arena.push_str(name);
            names.push(Name {
                span: start..arena.len(),
                kind,
                stat,
                skip,
                wanted,
                path: if used { Some(path.join(name)?) } else { None },
            });
        }
        Ok(Listing {
            fd: DirHandle::Open(Arc::new(fd)),
            path: path.clone(),
            level,
            problems,
            arena,
            names,
        })
    }

    /// The file name of `name`, one of this listing's entries.
    pub fn file_name(&self, name: &Name) -> &str {
        &self.arena[name.span.clone()]
    }
}

/// `name` (found in `dir`) as a file name, or the problem (never a mangled
/// name) when it cannot be one.
pub(super) fn valid_name<'n>(
    dir: &VfsPath,
    name: &'n [u8],
) -> std::result::Result<&'n str, Problem> {
    let shown = || format!("{dir}/{}", name.escape_ascii());
    let name = std::str::from_utf8(name).map_err(|_| {
        let err = Error::invalid_path(&shown(), "file name is not valid UTF-8; skipped");
        (shown(), err)
    })?;
    if dir.joins_plainly(name) {
        return Ok(name);
    }
    dir.join(name).map(|_| name).map_err(|err| (shown(), err))
}

/// Where a submitted directory is.
enum Slot {
    /// Waiting for a worker: the parent handle to open it beneath and the
    /// ignore rules above it.
    Queued(Arc<OwnedFd>, Vec<Arc<Level>>),
    /// A worker is reading it.
    Running,
    /// Read (or failed).
    Ready(Result<Listing>),
}

#[derive(Default)]
struct State {
    /// Queued directories, smallest path order key first.
    queue: BinaryHeap<Reverse<(Vec<u8>, VfsPath)>>,
    slots: HashMap<VfsPath, Slot>,
    closed: bool,
    /// Workers asleep on `work`, and walks asleep on `ready`: a condition
    /// variable's notify is a system call even when nobody waits, and one
    /// per submit and per listing was two per directory (docs/performance.md
    /// § Walks of a real directory), so only a sleeper is woken.
    idle_workers: usize,
    waiting_walks: usize,
}

/// The shared read-ahead queue of one search.
#[derive(Default)]
pub struct Prefetch {
    /// False when no worker runs: nothing is queued, the walk reads all.
    enabled: bool,
    state: Mutex<State>,
    /// Signalled when a listing is ready.
    ready: Condvar,
    /// Signalled when work is queued or the prefetch closes.
    work: Condvar,
}

impl Prefetch {
    /// A queue for workers to read ahead from, or (`enabled` false) one that
    /// takes nothing, for a walk without workers.
    pub fn new(enabled: bool) -> Prefetch {
        Prefetch {
            enabled,
            ..Prefetch::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues the directories `paths` (children of the directory open as
    /// `parent`, under the ignore rules `levels`) for reading ahead, under
    /// one lock and one wake-up (per directory they were 7% of a Glob's
    /// CPU); stops at [`MAX_AHEAD`] pending.
    pub fn submit<'p>(
        &self,
        parent: &Arc<OwnedFd>,
        paths: impl Iterator<Item = &'p VfsPath>,
        levels: &[Arc<Level>],
    ) {
        if !self.enabled {
            return;
        }
        let mut state = self.lock();
        let mut queued = 0;
        for path in paths {
            if state.closed || state.slots.len() >= MAX_AHEAD {
                break;
            }
            if state.slots.contains_key(path) {
                continue;
            }
            state.queue.push(Reverse((path.order_key(), path.clone())));
            state
                .slots
                .insert(path.clone(), Slot::Queued(parent.clone(), levels.to_vec()));
            queued += 1;
        }
        let idle = state.idle_workers;
        drop(state);
        match queued.min(idle) {
            0 => {}
            1 => self.work.notify_one(),
            _ => self.work.notify_all(),
        }
    }

    /// The listing of `path` if it was submitted and a worker has started
    /// on it (waiting for the worker to finish); `None` when the walk must
    /// read it itself.
    pub fn take(&self, path: &VfsPath) -> Option<Result<Listing>> {
        let mut state = self.lock();
        loop {
            match state.slots.get(path) {
                None => return None,
                Some(Slot::Queued(..)) => {
                    // The worker that pops it will find no slot and skip it.
                    state.slots.remove(path);
                    return None;
                }
                Some(Slot::Running) => {
                    state.waiting_walks += 1;
                    state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
                    state.waiting_walks -= 1;
                }
                Some(Slot::Ready(_)) => {
                    return match state.slots.remove(path) {
                        Some(Slot::Ready(listing)) => Some(listing),
                        _ => None,
                    };
                }
            }
        }
    }

    /// Stops the workers; pending listings are dropped.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.queue.clear();
        state.slots.clear();
        drop(state);
        self.work.notify_all();
        self.ready.notify_all();
    }

    /// A worker: reads queued directories until [`Prefetch::close`].
    pub fn work(&self, run: &SearchRun) {
        let mut state = self.lock();
        loop {
            if state.closed {
                return;
            }
            let Some(Reverse((_, path))) = state.queue.pop() else {
                state.idle_workers += 1;
                state = self.work.wait(state).unwrap_or_else(|p| p.into_inner());
                state.idle_workers -= 1;
                continue;
            };
            let Some(slot) = state.slots.get_mut(&path) else {
                continue;
            };
            let Slot::Queued(parent, levels) = std::mem::replace(slot, Slot::Running) else {
                continue;
            };
            drop(state);
            let flags = DIR_FLAGS | OFlags::NOFOLLOW;
            let listing = rustix::fs::openat(&*parent, path.name(), flags, Mode::empty())
                .map_err(|e| errno(&path, e))
                .and_then(|fd| Listing::read(run, fd, &path, &levels));
            state = self.lock();
            if let Some(slot) = state.slots.get_mut(&path) {
                *slot = Slot::Ready(listing);
                if state.waiting_walks > 0 {
                    self.ready.notify_all();
                }
            }
        }
    }
}

/// Closes a [`Prefetch`] when dropped, so its workers end on every exit.
pub struct CloseOnDrop<'p>(pub &'p Prefetch);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}
