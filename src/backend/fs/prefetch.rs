//! Directory listings read ahead of the ordered search walk by worker threads.
//!
//! Request flow: `fs::search::search` starts [`PREFETCHERS`] threads running
//! [`Prefetch::work`]; the ordered walk (one thread, path order) calls
//! [`Prefetch::submit`] for the subdirectories it will enter and
//! [`Prefetch::take`] when it enters one. A worker opens the directory beneath
//! its parent's handle (`O_NOFOLLOW`, so confinement is the walk's own) and
//! builds its [`Listing`]: its ignore files loaded, names sorted, types
//! resolved, each name's logical path, skip rule and the run's name filter
//! decided, and for a Glob the `lstat` of every file the pattern keeps
//! (emission needs size and times).
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

use super::sandbox::{DIR_FLAGS, errno, file_type};
use super::search::{Level, load_level, skip_of};
use crate::error::{Error, Result};
use crate::path::{VfsPath, check_name};
use crate::search::rules::Skip;
use crate::search::{SearchKind, SearchRun};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// `lstat`, never following a link.
const NOFOLLOW: AtFlags = AtFlags::SYMLINK_NOFOLLOW;
/// Directories queued or read ahead and not yet taken by the walk.
pub const MAX_AHEAD: usize = 128;
/// Threads reading directories ahead of the walk.
pub const PREFETCHERS: usize = 2;

/// A problem found while listing, reported by the walk when it gets there.
pub type Problem = (String, Error);

/// One entry of a directory with every decision that needs no counting
/// made: its logical path, type, skip rule, and the run's name filter.
pub struct Name {
    /// The logical path, or the problem that the name cannot be one.
    pub child: std::result::Result<VfsPath, Problem>,
    /// Its type (`Unknown` only when `stat` failed).
    pub kind: FileType,
    /// `lstat` of the entry when it was needed: for an entry whose type the
    /// directory did not say, and for a file a Glob keeps.
    pub stat: Option<std::result::Result<Stat, Errno>>,
    /// The hidden/ignore rule that skips it, if any.
    pub skip: Option<Skip>,
    /// True when the run's name filter keeps this file (Glob pattern, Grep
    /// `glob` filter).
    pub wanted: bool,
}

/// A directory's handle, ignore rules and entries sorted by name.
pub struct Listing {
    /// The open directory (files are opened beneath it).
    pub fd: Arc<OwnedFd>,
    /// The directory's own ignore rules.
    pub level: Arc<Level>,
    /// Problems of its ignore files.
    pub problems: Vec<Problem>,
    /// Entries other than `.` and `..`, sorted by name bytes.
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
        let mut raw = Vec::new();
        for entry in Dir::read_from(&fd).map_err(|e| errno(path, e))? {
            let entry = entry.map_err(|e| errno(path, e))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                raw.push((name.to_vec(), entry.file_type()));
            }
        }
        raw.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut problems = Vec::new();
        let present = |file: &str| {
            raw.binary_search_by(|n| n.0.as_slice().cmp(file.as_bytes()))
                .is_ok()
        };
        let level = Arc::new(load_level(run, &fd, path, present, &mut problems));
        let mut levels = levels.to_vec();
        levels.push(level.clone());
        let spec = run.spec();
        let names = raw
            .into_iter()
            .map(|(name, kind)| {
                let child = child_path(path, &name);
                let (mut kind, mut stat) = (kind, None);
                if kind == FileType::Unknown {
                    let st = rustix::fs::statat(&fd, OsStr::from_bytes(&name), NOFOLLOW);
                    if let Ok(st) = &st {
                        kind = file_type(st);
                    }
                    stat = Some(st);
                }
                let Ok(child_ref) = &child else {
                    return Name {
                        child,
                        kind,
                        stat,
                        skip: None,
                        wanted: false,
                    };
                };
                let is_dir = kind == FileType::Directory;
                let skip = skip_of(run, &levels, child_ref, is_dir);
                let rel = child_ref.relative_to(&spec.root).unwrap_or_default();
                let wanted = skip.is_none()
                    && match &spec.kind {
                        SearchKind::Glob(glob) => {
                            matches!(kind, FileType::RegularFile | FileType::Symlink)
                                && glob.matcher.is_match(rel)
                        }
                        SearchKind::Grep(grep) => {
                            kind == FileType::RegularFile && grep.accepts(rel)
                        }
                    };
                if wanted && stat.is_none() && matches!(spec.kind, SearchKind::Glob(_)) {
                    stat = Some(rustix::fs::statat(&fd, OsStr::from_bytes(&name), NOFOLLOW));
                }
                Name {
                    child,
                    kind,
                    stat,
                    skip,
                    wanted,
                }
            })
            .collect();
        Ok(Listing {
            fd: Arc::new(fd),
            level,
            problems,
            names,
        })
    }
}

/// The logical path of a name found in `dir`, or the problem (never a
/// mangled name) when the name cannot be one.
fn child_path(dir: &VfsPath, name: &[u8]) -> std::result::Result<VfsPath, Problem> {
    let shown = || format!("{dir}/{}", name.escape_ascii());
    std::str::from_utf8(name)
        .map_err(|_| Error::invalid_path(&shown(), "file name is not valid UTF-8; skipped"))
        .and_then(|n| check_name(n).map(|()| n))
        .and_then(|n| dir.join(n))
        .map_err(|err| (shown(), err))
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
}

/// The shared read-ahead queue of one search.
#[derive(Default)]
pub struct Prefetch {
    state: Mutex<State>,
    /// Signalled when a listing is ready.
    ready: Condvar,
    /// Signalled when work is queued or the prefetch closes.
    work: Condvar,
}

impl Prefetch {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues directory `path` (a child of the directory open as `parent`,
    /// under the ignore rules `levels`) for reading ahead; does nothing when
    /// [`MAX_AHEAD`] are pending.
    pub fn submit(&self, parent: &Arc<OwnedFd>, path: VfsPath, levels: &[Arc<Level>]) {
        let mut state = self.lock();
        if state.closed || state.slots.len() >= MAX_AHEAD || state.slots.contains_key(&path) {
            return;
        }
        state.queue.push(Reverse((path.order_key(), path.clone())));
        state
            .slots
            .insert(path, Slot::Queued(parent.clone(), levels.to_vec()));
        drop(state);
        self.work.notify_one();
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
                    state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
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
                state = self.work.wait(state).unwrap_or_else(|p| p.into_inner());
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
                self.ready.notify_all();
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
