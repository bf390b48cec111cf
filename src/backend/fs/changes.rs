//! The Filesystem tier's change log (docs/contract.md § Changes and
//! history): the changes agentvfs makes, recorded as they commit, and,
//! best effort, the changes other programs make on disk, marked external.
//!
//! The log is in memory ([`MemoryLog`]): its epoch changes when the server
//! restarts, so a cursor of an earlier run is refused with the oldest cursor
//! still available rather than read against the new log. agentvfs' own
//! changes are recorded under the path's lock, right after the rename or
//! unlink that commits them, so one path's changes are logged in commit
//! order.
//!
//! Changes on disk are followed through `notify` (inotify on Linux) from the
//! first Watch of the mount on, for the life of the server: watching a large
//! tree costs a walk and a descriptor per directory, which a mount nobody
//! watches should not pay. The watch never follows a symbolic link, so no
//! event names anything outside the root, and an event's file is looked at
//! through the sandbox ([`Sandbox::parent`], no link in any component). What
//! is reported, per file: created (a new name), modified (closed after a
//! write), deleted (removed or renamed away); a file already gone again when
//! its event is read is reported with size and version 0. What is not: agentvfs' own
//! temporary files (named, and unnamed ones, which inotify reports as `#`
//! and an inode number), and its own changes, whose events arrive within
//! [`OWN_CHANGE_WINDOW`] of its record of them (a change by another program
//! to the same file in that window is missed too: best effort); directories
//! themselves; the files inside a directory another program moves. Events
//! the kernel drops (its queue overflowed) are lost.

use crate::backend::memory_log::MemoryLog;
use crate::backend::no_change_log;
use crate::change::{Change, ChangeCursor, ChangeKind, LogPosition, Operation, Origin};
use crate::error::Result;
use crate::path::VfsPath;
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind, EventKindMask, RecursiveMode, Watcher};
use rustix::fs::{AtFlags, FileType};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;

use super::sandbox::{self, Links, Sandbox, file_type};

/// How long after agentvfs records a change of a path the disk's events
/// for that path are taken as its own.
pub const OWN_CHANGE_WINDOW: Duration = Duration::from_secs(2);

/// Paths remembered as changed by agentvfs before old ones are forgotten.
const MAX_OWN_CHANGES: usize = 4096;

/// The events asked of the kernel: the kinds [`FsChanges::on_disk_event`]
/// reports, and nothing else. notify asks for every open (`IN_OPEN`) by
/// default, and every write (`IN_MODIFY`): on a watched mount each file a
/// Grep opened was an event for the watcher's thread to read, name and
/// drop, and a Grep over 31,595 files took 0.32 s instead of 0.22 s, with
/// 40% more of the server's CPU (docs/performance.md § The change log's
/// disk watcher).
const WATCHED_EVENTS: EventKindMask = EventKindMask::CREATE
    .union(EventKindMask::REMOVE)
    .union(EventKindMask::MODIFY_NAME)
    .union(EventKindMask::ACCESS_CLOSE);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves its value whole (a push, an insert).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One Filesystem mount's change log.
pub struct FsChanges {
    sandbox: Arc<Sandbox>,
    /// The root on the host, as notify reports paths.
    host_root: PathBuf,
    /// Changes kept.
    capacity: usize,
    log: Mutex<MemoryLog<Change>>,
    /// Bumped after every change logged; shared by every branch of one
    /// mount (`super::scopes`), so one receiver wakes on all of them.
    changed: Arc<watch::Sender<u64>>,
    /// Logical paths agentvfs changed, and when.
    own: Mutex<HashMap<VfsPath, Instant>>,
    /// The disk watcher, once a Watch started it.
    disk: Mutex<Option<notify::RecommendedWatcher>>,
}

/// A change agentvfs made, as [`FsChanges::record_all`] takes it: the
/// path, the kind, (version, size), who made it and the other end of a move.
pub type OwnChange = (VfsPath, ChangeKind, (u64, u64), Origin, Option<VfsPath>);

impl FsChanges {
    /// The log of the mount of `sandbox` whose root is `host_root`,
    /// keeping `capacity` changes, bumping `changed` after each.
    pub fn new(
        sandbox: Arc<Sandbox>,
        host_root: &Path,
        capacity: usize,
        changed: Arc<watch::Sender<u64>>,
    ) -> Arc<FsChanges> {
        Arc::new(FsChanges {
            sandbox,
            host_root: std::path::absolute(host_root).unwrap_or_else(|_| host_root.into()),
            capacity,
            log: Mutex::new(MemoryLog::new()),
            changed,
            own: Mutex::new(HashMap::new()),
            disk: Mutex::new(None),
        })
    }

    /// How many changes the log keeps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn mount(&self) -> &VfsPath {
        self.sandbox.mount()
    }

    /// Appends a change of the file at `path` and wakes the watchers.
    #[allow(clippy::too_many_arguments)]
    fn push(
        &self,
        path: &VfsPath,
        kind: ChangeKind,
        version: u64,
        size: u64,
        origin: Origin,
        external: bool,
        moved_path: Option<VfsPath>,
    ) {
        let change = (path.clone(), kind, (version, size), origin, moved_path);
        self.append(external, vec![change]);
    }

    /// Marks `path` (a file, or a directory and everything below it) as
    /// about to be changed by agentvfs: the disk's events for it within
    /// [`OWN_CHANGE_WINDOW`] are its own. Called before the change, so an
    /// event that arrives first is still recognised.
    pub fn expect(&self, path: &VfsPath) {
        let mut own = lock(&self.own);
        if own.len() >= MAX_OWN_CHANGES {
            own.retain(|_, at| at.elapsed() < OWN_CHANGE_WINDOW);
        }
        own.insert(path.clone(), Instant::now());
    }

    /// Records a change agentvfs made to the file at `path`.
    pub fn record(
        &self,
        path: &VfsPath,
        kind: ChangeKind,
        version: u64,
        size: u64,
        origin: Origin,
        moved_path: Option<VfsPath>,
    ) {
        self.push(path, kind, version, size, origin, false, moved_path);
    }

    /// Records the changes of one changeset agentvfs made, next to each
    /// other in the log (a watcher receives them together): path, kind,
    /// (version, size), origin and the other end of a move.
    pub fn record_all(&self, changes: Vec<OwnChange>) {
        self.append(false, changes);
    }

    /// Appends `changes` next to each other and wakes the watchers once;
    /// `external`: made on disk by others.
    fn append(&self, external: bool, changes: Vec<OwnChange>) {
        let mut log = lock(&self.log);
        for (path, kind, (version, size), origin, moved_path) in changes {
            log.push(|seq| Change {
                log: self.mount().clone(),
                shard: 0,
                seq,
                path,
                kind,
                version,
                size,
                time: SystemTime::now(),
                origin,
                external,
                moved_path,
            });
        }
        log.trim(self.capacity);
        drop(log);
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Sets `cursor`'s position in this log to its head.
    pub fn head(&self, cursor: &mut ChangeCursor) {
        let bounds = lock(&self.log).bounds();
        let head = LogPosition {
            epoch: bounds.epoch,
            seq: bounds.head,
        };
        cursor.set(self.mount(), head);
    }

    /// Up to `max` changes under `root` after `cursor`'s position (from the
    /// oldest held when it has none), moving it past every change read.
    pub fn read(
        &self,
        root: &VfsPath,
        cursor: &mut ChangeCursor,
        max: usize,
    ) -> Result<Vec<Change>> {
        let mount = self.mount().clone();
        let position = cursor.get(&mount);
        let (bounds, changes) = {
            let log = lock(&self.log);
            let bounds = log.bounds();
            if let Some(position) = position {
                bounds.check(&mount, cursor, position, self.capacity)?;
            }
            (bounds, log.read(position.map(|p| p.seq), max))
        };
        let mut at = LogPosition {
            epoch: bounds.epoch,
            seq: position.map_or(bounds.trimmed, |p| p.seq),
        };
        let mut out = Vec::new();
        for change in changes {
            at.seq = change.seq;
            if change.path.is_within(root) {
                out.push(change);
            }
        }
        cursor.set(&mount, at);
        Ok(out)
    }

    /// A receiver that changes after every change logged.
    pub fn signal(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Starts following changes other programs make on disk, once; a
    /// failure (no inotify, too many directories for the user's watch
    /// limit) is logged and leaves the log to agentvfs' own changes.
    pub fn follow_disk(self: &Arc<FsChanges>) {
        let mut disk = lock(&self.disk);
        if disk.is_some() {
            return;
        }
        let weak: Weak<FsChanges> = Arc::downgrade(self);
        let handler = move |event: notify::Result<notify::Event>| {
            let Some(changes) = weak.upgrade() else {
                return;
            };
            match event {
                Ok(event) => changes.on_disk_event(event),
                Err(err) => tracing::warn!(mount = %changes.mount(), cause = %err,
                    "a change on disk was lost"),
            }
        };
        let config = notify::Config::default()
            .with_follow_symlinks(false)
            .with_event_kinds(WATCHED_EVENTS);
        let started = notify::RecommendedWatcher::new(handler, config).and_then(|mut watcher| {
            watcher.watch(&self.host_root, RecursiveMode::Recursive)?;
            Ok(watcher)
        });
        match started {
            Ok(watcher) => {
                tracing::info!(mount = %self.mount(), "following changes on disk");
                *disk = Some(watcher);
            }
            Err(err) => tracing::warn!(mount = %self.mount(), cause = %err,
                "cannot follow changes on disk; Watch reports agentvfs' own changes only"),
        }
    }

    /// The logical path of a host path notify reported, when it names a
    /// file agentvfs could name (and is not one of its temporary files).
    fn logical(&self, host: &Path) -> Option<VfsPath> {
        let rel = host.strip_prefix(&self.host_root).ok()?;
        let name = rel.file_name()?.to_str()?;
        // agentvfs' temporary files: named ones, and the unnamed ones
        // (`O_TMPFILE`), which inotify reports as `#` and their inode.
        let unnamed = name
            .strip_prefix('#')
            .is_some_and(|inode| !inode.is_empty() && inode.bytes().all(|b| b.is_ascii_digit()));
        if unnamed || (name.starts_with(".agentvfs-") && name.ends_with(".tmp")) {
            return None;
        }
        self.mount().join_relative(rel.to_str()?).ok()
    }

    /// True when agentvfs changed `path`, or a directory above it, within
    /// [`OWN_CHANGE_WINDOW`].
    fn is_own(&self, path: &VfsPath) -> bool {
        let own = lock(&self.own);
        let mut at = path.clone();
        loop {
            if own
                .get(&at)
                .is_some_and(|when| when.elapsed() < OWN_CHANGE_WINDOW)
            {
                return true;
            }
            if at == *self.mount() || at.is_root() {
                return false;
            }
            at = at.parent();
        }
    }

    /// The version and size of the non-directory at `path`, looked at with
    /// no link in any component: `(0, 0)` when it is already gone again (the
    /// event is still reported: something was there), `None` for a
    /// directory.
    fn file_now(&self, path: &VfsPath) -> Option<(u64, u64)> {
        let Ok((dir, name)) = self.sandbox.parent(path, Links::Refuse) else {
            return Some((0, 0));
        };
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if file_type(&st) == FileType::Directory => None,
            Ok(st) => Some((sandbox::version(&st), st.st_size as u64)),
            Err(_) => Some((0, 0)),
        }
    }

    /// Logs what one disk event did to files.
    fn on_disk_event(&self, event: notify::Event) {
        let emit = |path: &VfsPath, kind: ChangeKind, operation: Operation| {
            if self.is_own(path) {
                return;
            }
            let (version, size) = match kind {
                ChangeKind::Deleted => (0, 0),
                _ => match self.file_now(path) {
                    Some(now) => now,
                    None => return,
                },
            };
            let origin = Origin::external(operation);
            self.push(path, kind, version, size, origin, true, None);
        };
        let (kind, operation) = match event.kind {
            EventKind::Create(_) => (ChangeKind::Created, Operation::Write),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {
                (ChangeKind::Created, Operation::Move)
            }
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => {
                (ChangeKind::Modified, Operation::Write)
            }
            EventKind::Remove(_) => (ChangeKind::Deleted, Operation::Delete),
            EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
                (ChangeKind::Deleted, Operation::Move)
            }
            // A rename inside the tree also arrives as its two halves
            // (`From`, `To`), reported above; the pair adds nothing new.
            _ => return,
        };
        // Paths are resolved only for the kinds reported: most events (a
        // write's `Modify(Data)`) are not.
        for path in event.paths.iter().filter_map(|p| self.logical(p)) {
            emit(&path, kind, operation);
        }
    }
}

/// The change log of a Filesystem mount, when it keeps one.
pub fn log_of<'a>(
    changes: &'a Option<Arc<FsChanges>>,
    root: &VfsPath,
) -> Result<&'a Arc<FsChanges>> {
    changes.as_ref().ok_or_else(|| no_change_log(root))
}
