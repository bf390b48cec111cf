//! The Filesystem tier's search index (docs/search-index.md § The
//! Filesystem tier): a Grep skips the files the mount's trigram index rules
//! out, and learns the others as it reads them.
//!
//! Other programs change the served tree without telling agentvfs, so an
//! indexed file is recognised by its metadata, not by a version agentvfs
//! drew: its [`fingerprint`] hashes the device, inode, size, modification
//! and status-change times of an `lstat`. The kernel sets a file's status
//! change time (ctime) to the current time on every change of its content or
//! name, and no call sets it to anything else. Two states of one file that
//! differ in content therefore differ in ctime, unless both changes fell in
//! one tick of the file system's timestamps.
//!
//! Invariants:
//! - A file is learned only when it is [`settled`]: its ctime lies further
//!   in the past, at the `lstat` taken before its content is read, than any
//!   timestamp granularity (`SETTLED_AFTER` in `super::fingerprint`). Any
//!   later change then gets a later ctime, so the fingerprint seen at
//!   learning names exactly the content read after it, and no other state
//!   the file can take.
//! - A file is skipped only when its `lstat`, taken as the Grep reaches it,
//!   gives the fingerprint of a learned state: the file then holds the
//!   content learned, which the index rules out.
//! - Nothing else needs to tell the index about a change: a change is seen
//!   the moment a Grep's `lstat` can see it, whoever made it.
//!
//! What this does not cover (docs/search-index.md): writes through a shared
//! memory mapping (the kernel updates the times at the first write fault
//! only), a clock set back past a file's ctime, and network file systems
//! whose server stamps times from a clock other than this machine's. A Grep
//! that walks the mount's path table (`super::mirror`) takes the metadata
//! from the table inotify keeps instead of an `lstat`, so it also misses a
//! file given a second name outside the mount and changed through it. Such
//! a mount takes `index = false`.

use super::fingerprint::{fingerprint, settled};
use super::mirror::{Levels, Mirror};
use super::sandbox::{Sandbox, file_type};
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::index::file_keeper::FileKeeper;
use crate::search::index::plan::Query;
use crate::search::index::table::PathTable;
use crate::search::index::{IndexSettings, IndexedGrep, Registry, Verdict, trigram};
use rustix::fs::{AtFlags, FileType, Stat};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// Most bytes the Greps of one mount hold at once in files read whole to be
/// learned. A file past this is searched as a stream and left to a later
/// Grep: learning only speeds later Greps up, so running out of room never
/// changes an answer, and never waits. A fixed part of the server's base
/// memory (docs/security.md § Memory), however many Greps run: without it,
/// each of a mount's Grep workers could hold an 8 MiB file beyond every
/// `[limits]` budget, and a Grep waiting on a slow client kept its buffer.
const MAX_LEARNING_BYTES: u64 = 32 << 20;

/// A Grep walks the mirror's table only when the index selects at most
/// this share (1/n) of the files. Both walks search on one worker per
/// core; the table walk saves the listing and the `lstat` of every file
/// (about 2.4 µs a file on the Linux kernel) and pays an open from the
/// mount root per candidate instead of one beneath its directory. On the
/// kernel, `static inline` (14,361 candidates of 78,490) took 175 ms over
/// the table against 225–337 ms over the tree (docs/performance.md § The
/// Filesystem tier's path table); at 1/32, the limit while the table walk
/// searched on one thread, it walked the tree.
const TABLE_MAX_SHARE: u64 = 2;

/// A Grep walks the mirror's table only while the files the mount's index
/// has still to learn are at most this share (1/n) of those it holds. The
/// table walk learns a file on its own thread, as a learned file needs the
/// Grep's index; the tree's walk on every worker. Learning costs about
/// 150 µs a file on the kernel, so the table pays while it learns fewer
/// files than about files × 2.4 / 75 (the listing it saves against the
/// half of each learning it runs alone). Learning Greps thus walk the tree,
/// as they did while the table took only Greps of 1/32 of the files; the
/// cold bench did not tell the two apart beyond its noise
/// (docs/performance.md § The Filesystem table walk on two workers).
const TABLE_MAX_LEARNING_SHARE: u64 = 32;

/// The one file of a mount's persisted index before the files were named
/// by namespace (`FileKeeper`): removed at start, as it is never read.
const OLD_FILE_NAME: &str = "index.avix";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is one call of `IndexedGrep`, which leaves
    // it whole.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The search index of one Filesystem mount.
pub struct FsIndex {
    registry: Registry,
    /// The namespace's key in the registry: the mount's path.
    key: String,
    /// Bytes of the mount's [`LearnBuffer`]s alive now.
    learning: Arc<AtomicU64>,
    /// The mount's path table kept by inotify, when inotify works here.
    mirror: Option<Mirror>,
    /// The most entries one Glob visited walking the tree: a mount only
    /// ever globbed is worth the mirror too (`Registry::wants_table`).
    globbed: AtomicU64,
}

impl FsIndex {
    /// The index of the mount `sandbox` serves, kept across restarts in
    /// `dir` (the server's data directory, never the served tree).
    pub fn new(sandbox: Sandbox, settings: IndexSettings, dir: &Path) -> FsIndex {
        let _ = std::fs::remove_file(dir.join(OLD_FILE_NAME));
        // Without the mirror's table: it is built again after a restart
        // (inotify saw nothing meanwhile), so a saved one would never be
        // walked.
        let keeper = FileKeeper::new(dir.to_owned(), false);
        FsIndex {
            registry: Registry::new(settings, Some(Arc::new(keeper))),
            key: sandbox.mount().to_string(),
            learning: Arc::default(),
            mirror: Mirror::new(sandbox),
            globbed: AtomicU64::new(0),
        }
    }

    /// The mount's path table and ignore rules for a Glob of the whole
    /// directory `top`, current as of now (`Mirror::current`),
    /// when the mount is large enough for the index and its index is on.
    /// `None`: the Glob walks the tree (a first call starts building the
    /// mirror). Nothing is charged to the caller: the mirror is the
    /// mount's, bounded by `MAX_TABLE_FILES`, and the Glob holds its table
    /// only while it walks.
    pub fn glob_table(&self, top: &VfsPath) -> Option<(Arc<PathTable>, Arc<Levels>)> {
        let globbed = self.globbed.load(Relaxed);
        if !self.registry.wants_table(&self.key, globbed) {
            return None;
        }
        self.mirror.as_ref()?.current(top)
    }

    /// Records that a Glob walked the tree and visited `entries`.
    pub fn globbed(&self, entries: u64) {
        self.globbed.fetch_max(entries, Relaxed);
    }

    /// The mount's path table and ignore rules for `grep`, a Grep of the
    /// whole directory `top` the index narrows, current as of now
    /// (`Mirror::current`); kept with the index and charged to the Grep's
    /// principal. `None`: the Grep walks the tree (the mirror not ready,
    /// or no room for the table).
    pub fn table(
        &self,
        top: &VfsPath,
        grep: &mut IndexedGrep,
    ) -> Option<(Arc<PathTable>, Arc<Levels>)> {
        let files = grep.index().files() as u64;
        let learning = grep.index().unlearned_files();
        if grep.selected_files()? > files / TABLE_MAX_SHARE
            || learning > files / TABLE_MAX_LEARNING_SHARE
        {
            return None;
        }
        let (table, levels) = self.mirror.as_ref()?.current(top)?;
        let held = grep.index().table();
        if held.as_ref().is_none_or(|h| h.id() != table.id()) {
            let growth = table.bytes().saturating_sub(held.map_or(0, |h| h.bytes())) as u64;
            if growth > grep.room() {
                return None;
            }
            grep.grew(growth);
            grep.index().keep_table(table.clone());
        }
        Some((table, levels))
    }

    /// The opened file `fd` of a table walk's Grep, read whole to be
    /// learned within the mount's learn buffers ([`LearnBuffer::read`]).
    pub fn read_whole(&self, fd: &OwnedFd, st: &Stat, now: SystemTime) -> Option<LearnBuffer> {
        LearnBuffer::read(&self.learning, fd, st, now)
    }

    /// The index's part in a Grep of `scope` whose matches all satisfy
    /// `plan`; `None` when indexing is off.
    pub fn start(&self, scope: &Scope, plan: &Query) -> Option<SharedGrep> {
        let index = self.registry.get(&self.key, &scope.principal.owner)?;
        let grep = IndexedGrep::start(index, self.registry.settings(), plan);
        Some(SharedGrep {
            active: grep.active(),
            grep: Mutex::new(grep),
            passed: AtomicU64::new(0),
            learning: self.learning.clone(),
        })
    }
}

/// One Grep's use of the index, shared by its file workers.
pub struct SharedGrep {
    grep: Mutex<IndexedGrep>,
    /// The index may rule out or learn files in this Grep: else no file
    /// pays for an `lstat` or the lock, and is only counted in `passed`.
    active: bool,
    /// Files handed to the workers while not `active`.
    passed: AtomicU64,
    /// The mount's bytes in learn buffers, at most [`MAX_LEARNING_BYTES`].
    learning: Arc<AtomicU64>,
}

/// A file read whole to be learned, then searched; its bytes count against
/// the mount's [`MAX_LEARNING_BYTES`] until it is dropped.
pub struct LearnBuffer {
    data: Vec<u8>,
    learning: Arc<AtomicU64>,
}

impl LearnBuffer {
    /// Room for `size` bytes, if the mount's learn buffers leave it.
    fn reserve(learning: &Arc<AtomicU64>, size: u64) -> Option<LearnBuffer> {
        learning
            .fetch_update(Relaxed, Relaxed, |held| {
                (held + size <= MAX_LEARNING_BYTES).then_some(held + size)
            })
            .ok()?;
        Some(LearnBuffer {
            data: vec![0; size as usize],
            learning: learning.clone(),
        })
    }

    /// Reads the opened file `fd` whole, without moving its offset, when
    /// it is settled as of `st` (its `fstat`, taken at `now`, before any
    /// byte is read), small enough to index, and the mount's learn buffers
    /// (`learning`) have room for it. `None` (not settled, too large, no
    /// room, changed size while read, a read failure) leaves the file to
    /// be searched from `fd` as a stream.
    fn read(
        learning: &Arc<AtomicU64>,
        fd: &OwnedFd,
        st: &Stat,
        now: SystemTime,
    ) -> Option<LearnBuffer> {
        let size = st.st_size as u64;
        if !settled(st, now) || size > trigram::MAX_INDEXED_FILE_BYTES as u64 {
            return None;
        }
        let mut buffer = LearnBuffer::reserve(learning, size)?;
        let mut past_end = [0; 1];
        let read = rustix::io::pread(fd, &mut buffer.data, 0).ok()?;
        // A short read or a byte past the size: the file changed meanwhile.
        if read as u64 != size || rustix::io::pread(fd, &mut past_end, size).ok()? != 0 {
            return None;
        }
        Some(buffer)
    }

    /// The file's content.
    pub fn as_slice(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for LearnBuffer {
    fn drop(&mut self) {
        self.learning.fetch_sub(self.data.len() as u64, Relaxed);
    }
}

/// What a worker does with a file before opening it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peek {
    /// The index rules a match out: count the file as searched.
    RuledOut,
    /// Open and search it; with `learn`, read it whole for the index.
    Search {
        /// The index would learn this file.
        learn: bool,
    },
}

impl SharedGrep {
    /// The Grep's use of the index, for a walk on one thread.
    pub fn lock(&self) -> MutexGuard<'_, IndexedGrep> {
        lock(&self.grep)
    }

    /// Decides for the file `path`, named `name` in the directory `dir`, from
    /// its `lstat` now: the file must be a regular one within
    /// `max_file_bytes`, at a state the index learned, for the index to rule
    /// it out. Anything else (a link, a failure, an unknown state) is left
    /// to the normal search, which reports it as the scan does.
    pub fn peek(&self, dir: &OwnedFd, path: &VfsPath, max_file_bytes: u64) -> Peek {
        if !self.active {
            self.passed.fetch_add(1, Relaxed);
            return Peek::Search { learn: false };
        }
        let st = match rustix::fs::statat(dir, path.name(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if file_type(&st) == FileType::RegularFile => st,
            _ => return Peek::Search { learn: false },
        };
        if st.st_size as u64 > max_file_bytes {
            return Peek::Search { learn: false };
        }
        match lock(&self.grep).check(&path.order_key(), fingerprint(&st)) {
            Verdict::Skip => Peek::RuledOut,
            Verdict::Search { learn } => Peek::Search { learn },
        }
    }

    /// Reads the opened file `fd` whole and learns it, when
    /// [`LearnBuffer::read`] can; else `None`, and the file is searched
    /// from `fd` as a stream.
    pub fn read_and_learn(
        &self,
        path: &VfsPath,
        fd: &OwnedFd,
        st: &Stat,
        now: SystemTime,
    ) -> Option<LearnBuffer> {
        let buffer = LearnBuffer::read(&self.learning, fd, st, now)?;
        lock(&self.grep).learn(path.order_key(), fingerprint(st), &buffer.data);
        Some(buffer)
    }

    /// Ends the Grep: what it learned goes into the index.
    pub fn finish(self) {
        let mut grep = self.grep.into_inner().unwrap_or_else(|p| p.into_inner());
        grep.passed(self.passed.into_inner());
        grep.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learn_buffers_take_no_more_than_the_mount_room() {
        let learning = Arc::new(AtomicU64::new(0));
        let half = MAX_LEARNING_BYTES / 2;
        let first = LearnBuffer::reserve(&learning, half).expect("room for half");
        let second = LearnBuffer::reserve(&learning, half).expect("room for the other half");
        assert!(
            LearnBuffer::reserve(&learning, 1).is_none(),
            "the room is full"
        );
        drop(first);
        assert_eq!(learning.load(Relaxed), half);
        let third = LearnBuffer::reserve(&learning, half).expect("a dropped buffer frees its room");
        drop((second, third));
        assert_eq!(learning.load(Relaxed), 0);
    }
}
