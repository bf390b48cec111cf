//! The Filesystem tier's path table, kept fresh by inotify
//! (docs/search-index.md § The Filesystem tier's path table): every
//! directory of the mount, its entries and each file's metadata, so that a
//! narrowed Grep walks a table instead of listing every directory and
//! taking every file's `lstat`.
//!
//! Invariants:
//! - A directory is watched before it is listed: a change made after its
//!   listing queues an event, a change made before is in the listing.
//! - The kernel queues an event inside the system call that makes the
//!   change, and one inotify instance has one queue, in order. So the
//!   [`Mirror::current`] fence, which drains that queue under the lock the
//!   drain thread also reads it under, sees every change that ended before
//!   it began, and lists again each directory one names before answering.
//! - A lost event (the kernel's queue overflowed) or a failed relisting of
//!   the mount root drops the whole mirror: it is built again in the
//!   background while Greps walk the tree itself.
//! - A table is only handed out when every directory listed cleanly (no
//!   unreadable entry, no name that is not a logical path, no device, pipe
//!   or socket, no bad ignore file): those the tree's own walk reports, and
//!   walking it is how they stay reported.
//!
//! `listing` reads one directory; this file keeps the mirror fresh.
//!
//! What inotify does not report is in the module docs of
//! `src/backend/fs/index.rs` and in docs/search-index.md: writes through a
//! shared memory mapping, and a file given a second name outside the mount
//! (a hard link) and changed through it.

use super::sandbox::{DIR_FLAGS, Sandbox};
mod listing;

use listing::{Child, Dir, levels_of, list, rows_of};

use crate::change::LogPosition;
use crate::path::VfsPath;
use crate::search::ignore_rules::{Level, is_ignore_file};
use crate::search::index::table::{MAX_TABLE_FILES, PathTable, Row};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{AtFlags, OFlags};
use rustix::io::Errno;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

/// What a directory's watch reports: every change of its entries' names,
/// contents and metadata, and its own removal.
const WATCHED: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR);

/// Most directories a fence lists again: past this many changed since the
/// last Grep, the mirror is built again in the background as after lost
/// events, and Greps walk the tree meanwhile, instead of one Grep relisting
/// them all while it holds the lock every Grep of the mount needs.
const MAX_FENCE_DIRS: usize = 1024;

/// The rules of the ignore files of every directory that has some, by the
/// directory's logical path: what the walk over a table needs to judge
/// each path as the tree's own walk would.
pub type Levels = HashMap<Box<str>, Arc<Level>>;

/// One Filesystem mount's mirror; see the module doc.
pub struct Mirror {
    inner: Arc<Inner>,
}

struct Inner {
    /// Its own handle of the mount root.
    sandbox: Sandbox,
    inotify: OwnedFd,
    state: Mutex<State>,
}

/// Where the mirror is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not asked for yet: nothing is watched.
    Cold,
    /// Being built on a background thread.
    Building,
    Ready,
    /// Given up for the life of the process (logged): no inotify, the
    /// watch limit reached, or more files than a table holds.
    Off,
}

struct State {
    phase: Phase,
    /// Every directory mirrored, by the order key of its path.
    dirs: BTreeMap<Vec<u8>, Dir>,
    /// The directory of each watch.
    wds: HashMap<i32, Vec<u8>>,
    /// Watches with events not yet handled.
    dirty: HashSet<i32>,
    /// Watches the kernel removed (their directory deleted), not yet
    /// handled: the fence forgets their directories before it relists, so
    /// one made again under the same name is watched anew even when it got
    /// the old one's inode number (ext4 gives it back at once).
    unwatched: HashSet<i32>,
    /// An event was lost: the mirror must be built again.
    overflowed: bool,
    /// Directories whose listing had a problem.
    troubled: usize,
    /// Entries of all directories: bounded by [`MAX_TABLE_FILES`].
    entries: usize,
    table: Option<Arc<PathTable>>,
    levels: Arc<Levels>,
    /// The table's position: a number per build, a step per change.
    at: LogPosition,
}

/// Why a build or relisting stopped: the mirror is off.
struct Stop(String);

/// The changes of one fence: each key's new row, or `None` when gone.
type Changes = BTreeMap<Vec<u8>, Option<Row>>;

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|poisoned| {
        // A panic midway may have left the mirror half changed: it is
        // built again, as after lost events.
        m.clear_poison();
        let mut state = poisoned.into_inner();
        state.overflowed = true;
        state
    })
}

impl Mirror {
    /// The mirror of `sandbox`'s tree, cold until first asked for.
    pub fn new(sandbox: Sandbox) -> Option<Mirror> {
        let inotify = match inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) {
            Ok(fd) => fd,
            Err(err) => {
                tracing::warn!(%err, "no inotify: Filesystem Greps walk the tree");
                return None;
            }
        };
        // A table of another process (a persisted index's) never shares
        // an epoch with this one's.
        let state = State::empty(Phase::Cold, rand::random());
        let inner = Arc::new(Inner {
            sandbox,
            inotify,
            state: Mutex::new(state),
        });
        Some(Mirror { inner })
    }

    /// The table of the whole mount and its ignore rules, current as of
    /// now (the fence: every change that ended before this call is in it),
    /// when the mirror is ready, every directory listed cleanly and `top`
    /// is a directory of it (reached without a link). Else `None`: the
    /// caller walks the tree; a first call starts building the mirror, a
    /// lost event starts building it again.
    pub fn current(&self, top: &VfsPath) -> Option<(Arc<PathTable>, Arc<Levels>)> {
        let inner = &self.inner;
        let mut state = lock(&inner.state);
        match state.phase {
            Phase::Cold => {
                state.phase = Phase::Building;
                drop(state);
                Inner::start(inner, true);
                return None;
            }
            Phase::Building | Phase::Off => return None,
            Phase::Ready => {}
        }
        inner.drain(&mut state);
        if !state.overflowed {
            let started = Instant::now();
            let dirty = state.dirty.len();
            match inner.refresh(&mut state) {
                Ok(()) if dirty > 0 => tracing::debug!(
                    dirty,
                    elapsed_us = started.elapsed().as_micros() as u64,
                    "search index mirror refreshed"
                ),
                Ok(()) => {}
                Err(Stop(why)) => {
                    state.off(&inner.inotify, &why);
                    return None;
                }
            }
        }
        if state.overflowed {
            tracing::info!("search index mirror lost events: built again");
            state.reset(&inner.inotify);
            state.phase = Phase::Building;
            drop(state);
            Inner::start(inner, false);
            return None;
        }
        if state.troubled > 0 || !state.dirs.contains_key(&top.order_key()) {
            return None;
        }
        Some((state.table.clone()?, state.levels.clone()))
    }
}

impl Inner {
    /// Builds the mirror on a background thread of low priority; `first`
    /// also starts the thread that drains the watches' events (named apart
    /// from the index's `search-index-*` threads, which do work and end:
    /// this one waits for the life of the mount).
    fn start(inner: &Arc<Inner>, first: bool) {
        let builder = inner.clone();
        let drainer = Arc::downgrade(inner);
        let started = std::thread::Builder::new()
            .name("search-index-mirror".into())
            .spawn(move || {
                crate::search::index::lower_priority();
                builder.build();
            })
            .and_then(|_| match first {
                true => std::thread::Builder::new()
                    .name("mirror-events".into())
                    .spawn(move || drain_forever(drainer))
                    .map(drop),
                false => Ok(()),
            });
        if let Err(err) = started {
            lock(&inner.state).off(&inner.inotify, &format!("no thread: {err}"));
        }
    }

    /// Builds the whole mirror and installs it.
    fn build(&self) {
        let started = Instant::now();
        let mount = self.sandbox.mount().clone();
        let mut built = State::empty(Phase::Ready, 0);
        let mut ignored = Changes::new();
        let grown = self.add_tree(&mut built, &mount, &mut ignored);
        let mut state = lock(&self.state);
        if state.phase != Phase::Building || grown.is_err() {
            // Given up meanwhile, or now: its watches go.
            built.reset(&self.inotify);
            if let Err(Stop(why)) = grown {
                state.off(&self.inotify, &why);
            }
            return;
        }
        let mut rows: Vec<Row> = built
            .dirs
            .values()
            .flat_map(|d| rows_of(&mount, d))
            .collect();
        rows.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        let at = LogPosition {
            epoch: state.at.epoch.wrapping_add(1),
            seq: 0,
        };
        let table = PathTable::new(at, mount.subtree_range(), rows);
        tracing::info!(
            dirs = built.dirs.len(),
            files = table.len(),
            troubled = built.troubled,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "search index mirror built"
        );
        state.dirs = built.dirs;
        state.wds = built.wds;
        state.troubled = built.troubled;
        state.entries = built.entries;
        state.levels = Arc::new(levels_of(&state.dirs));
        state.table = Some(Arc::new(table));
        state.at = at;
        state.phase = Phase::Ready;
        // Events of the build's watches drained meanwhile stay in `dirty`
        // and are handled by the next fence.
    }

    /// Reads every event queued now and records the watches they name.
    fn drain(&self, state: &mut State) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 16 << 10];
        let mut reader = inotify::Reader::new(&self.inotify, &mut buf);
        loop {
            match reader.next() {
                Ok(event) => {
                    let flags = event.events();
                    if flags.contains(ReadFlags::QUEUE_OVERFLOW)
                        || flags.contains(ReadFlags::UNMOUNT)
                    {
                        state.overflowed = true;
                    } else if flags.contains(ReadFlags::IGNORED) {
                        // A watch removed: by the mirror (it forgot the
                        // watch first), or with its directory.
                        state.unwatched.insert(event.wd());
                    } else if event.wd() >= 0 {
                        state.dirty.insert(event.wd());
                    }
                }
                Err(Errno::INTR) => {}
                // `AGAIN`: the queue is empty. Anything else: nothing more
                // can be read now.
                Err(_) => return,
            }
        }
    }

    /// Lists again every directory an event named, parents first, and
    /// moves the table to the result.
    fn refresh(&self, state: &mut State) -> Result<(), Stop> {
        if state.dirty.is_empty() && state.unwatched.is_empty() {
            return Ok(());
        }
        let mut changes = Changes::new();
        // Directories whose watch went with them: forgotten, and their
        // parents listed again.
        let mut keys = Vec::new();
        for wd in std::mem::take(&mut state.unwatched) {
            let Some(path) = state
                .wds
                .get(&wd)
                .and_then(|key| state.dirs.get(key))
                .map(|d| d.path.clone())
            else {
                continue;
            };
            if path == *self.sandbox.mount() {
                state.overflowed = true;
                return Ok(());
            }
            self.drop_tree(state, &path.order_key(), &mut changes);
            keys.push(path.parent().order_key());
        }
        // Watches no longer known (their directories dropped) are gone.
        keys.extend(
            std::mem::take(&mut state.dirty)
                .into_iter()
                .filter_map(|wd| state.wds.get(&wd).cloned()),
        );
        if keys.len() > MAX_FENCE_DIRS {
            // Cheaper built again in the background than relisted by a
            // Grep that holds the lock meanwhile.
            state.overflowed = true;
            return Ok(());
        }
        keys.sort_unstable();
        keys.dedup();
        let mut relisted_rules_changed = false;
        for key in keys {
            let Some(path) = state.dirs.get(&key).map(|d| d.path.clone()) else {
                continue;
            };
            relisted_rules_changed |= self.relist(state, &path, &mut changes)?;
            if state.overflowed {
                return Ok(());
            }
        }
        let Some(old) = state.table.clone() else {
            return Ok(());
        };
        // Rows listed again as they were are no change.
        changes.retain(|key, row| {
            let held = old.seek(key).filter(|r| *r.key == **key);
            match (held, row) {
                (Some(held), Some(row)) => held.entry != row.entry,
                (held, None) => held.is_some(),
                (None, Some(_)) => true,
            }
        });
        if changes.is_empty() && !relisted_rules_changed {
            return Ok(());
        }
        if state.entries > MAX_TABLE_FILES {
            return Err(Stop(format!("more than {MAX_TABLE_FILES} entries")));
        }
        // An ignore file changed: what the rules skip may change anywhere
        // below it, so counts over the old table cannot be carried over.
        // A rewrite that kept the file's size within one tick of the clock
        // leaves its row as it was: the rules read again tell.
        let rules_changed = relisted_rules_changed
            || changes.keys().any(|key| {
                let name = key.rsplit(|b| *b == 0).next().unwrap_or(key);
                std::str::from_utf8(name).is_ok_and(is_ignore_file)
            });
        state.at.seq += 1;
        let next = old.advance(state.at, changes);
        let next = if rules_changed {
            state.levels = Arc::new(levels_of(&state.dirs));
            next.without_derivation()
        } else {
            next
        };
        state.table = Some(Arc::new(next));
        Ok(())
    }

    /// Lists the mirrored directory `path` again: its rows, the subtrees
    /// of directories that came or went, its rules. True when its rules
    /// changed (a directory that came or went shows in its rows).
    fn relist(
        &self,
        state: &mut State,
        path: &VfsPath,
        changes: &mut Changes,
    ) -> Result<bool, Stop> {
        let key = path.order_key();
        let opened = self
            .sandbox
            .open_exact(path, DIR_FLAGS | OFlags::NOFOLLOW)
            .and_then(|fd| rustix::fs::fstat(&fd).map(|st| (fd, st)));
        let same = |st: &rustix::fs::Stat| {
            state
                .dirs
                .get(&key)
                .is_some_and(|d| d.id == (st.st_dev, st.st_ino))
        };
        let fd = match opened {
            Ok((fd, st)) if same(&st) => fd,
            // Gone, or another directory now: its parent's event brings
            // the new one, if any.
            _ if *path == *self.sandbox.mount() => {
                state.overflowed = true;
                return Ok(false);
            }
            _ => {
                self.drop_tree(state, &key, changes);
                return Ok(false);
            }
        };
        let listed = list(&fd, path);
        let old = state.dirs.get(&key).expect("listed above");
        for row in rows_of(self.sandbox.mount(), old) {
            changes.insert(row.key.into_vec(), None);
        }
        // Subdirectories gone, or replaced by another directory.
        let mut added = Vec::new();
        for (name, child) in &listed.children {
            if let Child::Dir = child {
                let sub = path.join(name).expect("a listed name joins");
                let sub_key = sub.order_key();
                let known = state.dirs.get(&sub_key).map(|d| d.id);
                let now = rustix::fs::statat(&fd, &**name, AtFlags::SYMLINK_NOFOLLOW)
                    .ok()
                    .map(|st| (st.st_dev, st.st_ino));
                if known.is_none() || known != now {
                    added.push(sub);
                }
            }
        }
        let gone: Vec<Vec<u8>> = old
            .children
            .iter()
            .filter(|(name, child)| {
                matches!(child, Child::Dir)
                    && !matches!(listed.children.get(*name), Some(Child::Dir))
            })
            .map(|(name, _)| path.join(name).expect("a listed name joins").order_key())
            .collect();
        for sub in gone
            .iter()
            .cloned()
            .chain(added.iter().map(|s| s.order_key()))
        {
            self.drop_tree(state, &sub, changes);
        }
        let dir = state.dirs.get_mut(&key).expect("listed above");
        state.troubled -= usize::from(dir.troubled);
        state.troubled += usize::from(listed.troubled);
        state.entries -= dir.children.len();
        state.entries += listed.children.len();
        let rules_changed = !dir.level.same_rules(&listed.level);
        dir.children = listed.children;
        dir.level = listed.level;
        dir.troubled = listed.troubled;
        for row in rows_of(self.sandbox.mount(), dir) {
            changes.insert(row.key.to_vec(), Some(row));
        }
        for sub in added {
            self.add_tree(state, &sub, changes)?;
        }
        Ok(rules_changed)
    }

    /// Watches and lists the directory `top` and everything below it into
    /// `state`, recording their rows in `changes`.
    fn add_tree(
        &self,
        state: &mut State,
        top: &VfsPath,
        changes: &mut Changes,
    ) -> Result<(), Stop> {
        let mut pending = vec![top.clone()];
        while let Some(path) = pending.pop() {
            let Ok(fd) = self.sandbox.open_exact(&path, DIR_FLAGS | OFlags::NOFOLLOW) else {
                // Gone already, or not a directory now: its parent's event
                // lists it again.
                continue;
            };
            let st = rustix::fs::fstat(&fd).map_err(|e| Stop(format!("fstat {path}: {e}")))?;
            // Watched before it is listed.
            let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            let wd = match inotify::add_watch(&self.inotify, proc_path, WATCHED) {
                Ok(wd) => wd,
                Err(Errno::NOENT | Errno::NOTDIR) => continue,
                Err(err) => return Err(Stop(format!("cannot watch {path}: {err}"))),
            };
            let key = path.order_key();
            // The same directory watched under another name: it moved
            // there, and that name is stale.
            if let Some(stale) = state.wds.remove(&wd)
                && stale != key
            {
                self.drop_tree(state, &stale, changes);
            }
            self.drop_tree(state, &key, changes);
            let listed = list(&fd, &path);
            for (name, child) in &listed.children {
                if let Child::Dir = child {
                    pending.push(path.join(name).expect("a listed name joins"));
                }
            }
            let dir = Dir {
                path,
                wd,
                id: (st.st_dev, st.st_ino),
                children: listed.children,
                level: listed.level,
                troubled: listed.troubled,
            };
            for row in rows_of(self.sandbox.mount(), &dir) {
                changes.insert(row.key.to_vec(), Some(row));
            }
            state.troubled += usize::from(dir.troubled);
            state.entries += dir.children.len();
            state.wds.insert(wd, key.clone());
            state.dirs.insert(key, dir);
            if state.entries > MAX_TABLE_FILES {
                return Err(Stop(format!("more than {MAX_TABLE_FILES} entries")));
            }
        }
        Ok(())
    }

    /// Forgets the directory at `key` and everything below it, recording
    /// their rows as gone and removing their watches.
    fn drop_tree(&self, state: &mut State, key: &[u8], changes: &mut Changes) {
        let mut end = key.to_vec();
        end.push(1);
        let below: Vec<Vec<u8>> = state
            .dirs
            .range(key.to_vec()..end)
            .filter(|(k, _)| k.as_slice() == key || k.get(key.len()) == Some(&0))
            .map(|(k, _)| k.clone())
            .collect();
        for k in below {
            let Some(dir) = state.dirs.remove(&k) else {
                continue;
            };
            for row in rows_of(self.sandbox.mount(), &dir) {
                changes.insert(row.key.into_vec(), None);
            }
            state.troubled -= usize::from(dir.troubled);
            state.entries -= dir.children.len();
            if state.wds.get(&dir.wd) == Some(&k) {
                state.wds.remove(&dir.wd);
                // Already gone when the directory was removed.
                let _ = inotify::remove_watch(&self.inotify, dir.wd);
            }
        }
    }
}

impl State {
    /// A mirror of nothing, in `phase`, its tables of epoch `epoch`.
    fn empty(phase: Phase, epoch: u64) -> State {
        State {
            phase,
            dirs: BTreeMap::new(),
            wds: HashMap::new(),
            dirty: HashSet::new(),
            unwatched: HashSet::new(),
            overflowed: false,
            troubled: 0,
            entries: 0,
            table: None,
            levels: Arc::default(),
            at: LogPosition { epoch, seq: 0 },
        }
    }

    /// Forgets everything and removes every watch.
    fn reset(&mut self, inotify: &OwnedFd) {
        for wd in self.wds.keys() {
            let _ = inotify::remove_watch(inotify, *wd);
        }
        self.dirs.clear();
        self.wds.clear();
        self.dirty.clear();
        self.unwatched.clear();
        self.overflowed = false;
        self.troubled = 0;
        self.entries = 0;
        self.table = None;
        self.levels = Arc::default();
    }

    /// Gives the mirror up for the life of the process.
    fn off(&mut self, inotify: &OwnedFd, why: &str) {
        tracing::warn!(
            why,
            "search index mirror off: Filesystem Greps walk the tree"
        );
        self.reset(inotify);
        self.phase = Phase::Off;
    }
}

/// Waits for events and records them, until the mirror is dropped; the
/// fence reads what is left under the same lock, so no event is in hand
/// outside it.
fn drain_forever(inner: Weak<Inner>) {
    let second = rustix::event::Timespec {
        tv_sec: 1,
        tv_nsec: 0,
    };
    loop {
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let mut fds = [rustix::event::PollFd::new(
            &inner.inotify,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&second)) {
            Ok(0) | Err(Errno::INTR) => continue,
            Ok(_) => inner.drain(&mut lock(&inner.state)),
            Err(err) => {
                lock(&inner.state).off(&inner.inotify, &format!("poll: {err}"));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::EntryKind;
    use rustix::fs::FileType;
    use std::path::Path;

    /// A mirror of `dir` at `/m`, built at once, with no thread draining
    /// its events: only the fence of [`Mirror::current`] reads them.
    fn built(dir: &Path) -> Mirror {
        let mount = VfsPath::parse("/m").unwrap();
        let mirror = Mirror::new(Sandbox::open(mount, dir).unwrap()).unwrap();
        lock(&mirror.inner.state).phase = Phase::Building;
        mirror.inner.build();
        mirror
    }

    /// What a table holds, row by row.
    fn rows(table: &PathTable) -> Vec<(String, EntryKind, u64, u64)> {
        (0..table.len())
            .map(|i| {
                let e = &table.row(i).entry;
                (e.path.to_string(), e.kind, e.size, e.version)
            })
            .collect()
    }

    #[test]
    fn the_fence_sees_every_change_made_before_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let files = [
            ("a/x.txt", "one"),
            ("a/b/y.txt", "two"),
            ("c/z.txt", "three"),
            ("k/kk.txt", "k"),
        ];
        for (path, text) in files {
            std::fs::create_dir_all(dir.join(path).parent().unwrap()).unwrap();
            std::fs::write(dir.join(path), text).unwrap();
        }
        std::fs::write(dir.join(".gitignore"), "*.log\n").unwrap();
        let mirror = built(dir);
        let mount = VfsPath::parse("/m").unwrap();
        let changes: Vec<fn(&Path)> = vec![
            |d| std::fs::write(d.join("a/new.txt"), "new").unwrap(),
            // Same size, other content: only the times tell.
            |d| std::fs::write(d.join("a/x.txt"), "eno").unwrap(),
            |d| std::fs::remove_file(d.join("c/z.txt")).unwrap(),
            |d| std::fs::rename(d.join("a/b"), d.join("c/moved")).unwrap(),
            |d| std::fs::create_dir_all(d.join("e/f")).unwrap(),
            |d| std::os::unix::fs::symlink("x.txt", d.join("a/link")).unwrap(),
            |d| std::fs::write(d.join("c/moved/deep.txt"), "d").unwrap(),
            |d| std::fs::write(d.join(".gitignore"), "*.tmp\n").unwrap(),
            |d| std::fs::remove_dir_all(d.join("c")).unwrap(),
            |d| std::fs::write(d.join("e/f/g.txt"), "g").unwrap(),
            // Another directory under a known name, between two fences.
            |d| {
                std::fs::remove_dir_all(d.join("e/f")).unwrap();
                std::fs::rename(d.join("k"), d.join("e/f")).unwrap();
            },
            |d| std::fs::write(d.join("e/f/kk.txt"), "changed").unwrap(),
        ];
        let mut seq = 0;
        for (i, change) in changes.iter().enumerate() {
            change(dir);
            let (table, _) = mirror.current(&mount).expect("ready");
            let fresh = built(dir);
            let (expected, _) = fresh.current(&mount).expect("ready");
            assert_eq!(rows(&table), rows(&expected), "after change {i}");
            assert!(table.at().seq > seq, "change {i} made a new table");
            seq = table.at().seq;
        }
        // The rules changed (change 7): nothing carries over.
        let (table, levels) = mirror.current(&mount).unwrap();
        assert!(levels.contains_key("/m"));
        assert_eq!(table.at().seq, seq, "no change, no new table");
    }

    /// A rewrite of an ignore file that leaves its metadata as it was (two
    /// rewrites of one size within one tick of a coarse clock, on a kernel
    /// without fine-grained timestamps: this one has them, so the test
    /// gives the mirror a table that already holds the new metadata) is
    /// still seen: the rules read again are compared.
    #[test]
    fn an_ignore_file_rewritten_with_its_row_unchanged_changes_the_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("a1.txt"), "a").unwrap();
        std::fs::write(dir.join(".gitignore"), "a*\n").unwrap();
        let mirror = built(dir);
        let mount = VfsPath::parse("/m").unwrap();
        let (_, before) = mirror.current(&mount).expect("ready");
        std::fs::write(dir.join(".gitignore"), "b*\n").unwrap();
        let (rows_now, expected) = built(dir).current(&mount).expect("ready");
        lock(&mirror.inner.state).table = Some(rows_now);
        let (_, levels) = mirror.current(&mount).expect("ready");
        assert!(!before["/m"].same_rules(&expected["/m"]));
        assert!(
            levels["/m"].same_rules(&expected["/m"]),
            "the rules of the old text were kept"
        );
    }

    /// A directory removed and made again between two fences may get the
    /// removed one's inode number (ext4 gives it back at once here), and
    /// its watch went with the removed one: it is watched anew, so what
    /// changes in it later is seen.
    #[test]
    fn a_directory_made_again_under_its_old_inode_number_is_watched_again() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("a/sub")).unwrap();
        std::fs::write(dir.join("a/sub/x.txt"), "x").unwrap();
        let mirror = built(dir);
        let mount = VfsPath::parse("/m").unwrap();
        let ino = std::fs::metadata(dir.join("a/sub")).unwrap().ino();
        std::fs::remove_dir_all(dir.join("a/sub")).unwrap();
        std::fs::create_dir_all(dir.join("a/sub")).unwrap();
        std::fs::write(dir.join("a/sub/y.txt"), "y").unwrap();
        let reused = std::fs::metadata(dir.join("a/sub")).unwrap().ino() == ino;
        mirror.current(&mount).expect("ready");
        std::fs::write(dir.join("a/sub/z.txt"), "z").unwrap();
        let (table, _) = mirror.current(&mount).expect("ready");
        let (expected, _) = built(dir).current(&mount).expect("ready");
        assert_eq!(
            rows(&table),
            rows(&expected),
            "inode number reused: {reused}"
        );
    }

    #[test]
    fn more_changed_directories_than_a_fence_lists_build_the_mirror_again() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        for i in 0..=MAX_FENCE_DIRS {
            std::fs::create_dir_all(dir.join(format!("d{i}"))).unwrap();
        }
        let mirror = built(dir);
        let mount = VfsPath::parse("/m").unwrap();
        assert!(mirror.current(&mount).is_some());
        for i in 0..=MAX_FENCE_DIRS {
            std::fs::write(dir.join(format!("d{i}/f.txt")), "f").unwrap();
        }
        assert!(
            mirror.current(&mount).is_none(),
            "built again, not relisted"
        );
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        let table = loop {
            if let Some((table, _)) = mirror.current(&mount) {
                break table;
            }
            assert!(Instant::now() < deadline, "never built again");
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let (expected, _) = built(dir).current(&mount).unwrap();
        assert_eq!(rows(&table), rows(&expected));
        assert_eq!(table.len(), MAX_FENCE_DIRS + 1);
    }

    #[test]
    fn a_pipe_or_an_unlisted_top_gives_no_table() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::write(dir.join("a/x.txt"), "x").unwrap();
        std::os::unix::fs::symlink("a", dir.join("to_a")).unwrap();
        let mirror = built(dir);
        let mount = VfsPath::parse("/m").unwrap();
        assert!(mirror.current(&mount).is_some());
        assert!(mirror.current(&VfsPath::parse("/m/a").unwrap()).is_some());
        // Reached through a link: the tree's walk follows it, a table
        // holds no row below it.
        assert!(
            mirror
                .current(&VfsPath::parse("/m/to_a").unwrap())
                .is_none()
        );
        let fifo = dir.join("a/pipe");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(mirror.current(&mount).is_none(), "a pipe: no table");
        std::fs::remove_file(&fifo).unwrap();
        assert!(
            mirror.current(&mount).is_some(),
            "the pipe gone: a table again"
        );
    }
}
