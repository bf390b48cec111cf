//! Directory listings read ahead of the ordered search walk by worker threads.
//!
//! Request flow: `fs::search::search` starts [`PREFETCHERS`] threads running
//! [`Prefetch::work`]; the ordered walk (one thread, path order) calls
//! [`Prefetch::submit`] for the subdirectories it will enter and
//! [`Prefetch::take`] when it enters one. A worker opens the directory beneath
//! its parent's handle (`O_NOFOLLOW`, so confinement is the walk's own) and
//! builds its [`Listing`]: sorted names, types resolved, and for a Glob the
//! `lstat` of every file the pattern matches (emission needs size and times).
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
//! Performance: Glob spent its time on one thread (getdents, sort, one
//! `lstat` per match) while fd walks on two; moving those to workers leaves
//! the walk with rule checks and emission only.

use super::sandbox::{DIR_FLAGS, errno};
use crate::error::Result;
use crate::path::VfsPath;
use crate::search::{SearchKind, SearchRun};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Directories queued or read ahead and not yet taken by the walk.
pub const MAX_AHEAD: usize = 128;
/// Threads reading directories ahead of the walk.
pub const PREFETCHERS: usize = 2;

/// One entry of a directory, as the walk needs it.
pub struct Name {
    /// The raw file name.
    pub name: Vec<u8>,
    /// Its type (`Unknown` only when `stat` failed).
    pub kind: FileType,
    /// `lstat` of the entry when it was needed: for an entry whose type the
    /// directory did not say, and for a file a Glob matches.
    pub stat: Option<std::result::Result<Stat, Errno>>,
}

/// A directory's handle and its entries sorted by name.
pub struct Listing {
    /// The open directory (files are opened beneath it).
    pub fd: Arc<OwnedFd>,
    /// Entries other than `.` and `..`, sorted by name bytes.
    pub names: Vec<Name>,
}

impl Listing {
    /// Reads the directory open as `fd` at `path` for `run`.
    pub fn read(run: &SearchRun, fd: OwnedFd, path: &VfsPath) -> Result<Listing> {
        let mut names = Vec::new();
        for entry in Dir::read_from(&fd).map_err(|e| errno(path, e))? {
            let entry = entry.map_err(|e| errno(path, e))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(Name {
                    name: name.to_vec(),
                    kind: entry.file_type(),
                    stat: None,
                });
            }
        }
        names.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let glob = match &run.spec().kind {
            SearchKind::Glob(glob) => Some(glob),
            SearchKind::Grep(_) => None,
        };
        let root = &run.spec().root;
        for n in &mut names {
            let wanted = match n.kind {
                FileType::Unknown => true,
                FileType::RegularFile | FileType::Symlink => glob.is_some_and(|g| {
                    std::str::from_utf8(&n.name)
                        .ok()
                        .and_then(|name| path.join(name).ok())
                        .is_some_and(|child| {
                            g.matcher
                                .is_match(child.relative_to(root).unwrap_or_default())
                        })
                }),
                _ => false,
            };
            if wanted {
                let name = OsStr::from_bytes(&n.name);
                let st = rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW);
                if let (FileType::Unknown, Ok(st)) = (n.kind, &st) {
                    n.kind = super::sandbox::file_type(st);
                }
                n.stat = Some(st);
            }
        }
        Ok(Listing {
            fd: Arc::new(fd),
            names,
        })
    }
}

/// Where a submitted directory is.
enum Slot {
    /// Waiting for a worker; the parent handle to open it beneath.
    Queued(Arc<OwnedFd>),
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

    /// Queues directory `path` (a child of the directory open as `parent`)
    /// for reading ahead; does nothing when [`MAX_AHEAD`] are pending.
    pub fn submit(&self, parent: &Arc<OwnedFd>, path: VfsPath) {
        let mut state = self.lock();
        if state.closed || state.slots.len() >= MAX_AHEAD || state.slots.contains_key(&path) {
            return;
        }
        state.queue.push(Reverse((path.order_key(), path.clone())));
        state.slots.insert(path, Slot::Queued(parent.clone()));
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
                Some(Slot::Queued(_)) => {
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
            let Slot::Queued(parent) = std::mem::replace(slot, Slot::Running) else {
                continue;
            };
            drop(state);
            let flags = DIR_FLAGS | OFlags::NOFOLLOW;
            let listing = rustix::fs::openat(&*parent, path.name(), flags, Mode::empty())
                .map_err(|e| errno(&path, e))
                .and_then(|fd| Listing::read(run, fd, &path));
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
