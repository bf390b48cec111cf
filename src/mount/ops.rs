//! The mount's operations, one async function per file system call, over
//! the server's gRPC API (docs/mount.md § Semantics). `fuse.rs` hands each
//! kernel request to one of these on the async runtime.

use super::grants::Grants;
use super::inodes::{self, Inodes, ROOT};
use super::open_file::{Committed, OpenFile};
use super::remote::{Failure, Remote};
use super::staging::Budget;
use crate::pb;
use fuser::{Errno, FileAttr, FileType, INodeNo};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What the mount was asked to do (`agentvfs mount` flags).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Refuse every change with EROFS.
    pub read_only: bool,
    /// Commit over another writer's version instead of failing (EIO).
    pub overwrite: bool,
}

/// One entry of a directory listing.
#[derive(Clone, Debug)]
pub struct Listed {
    /// Inode number.
    pub ino: u64,
    /// File or directory.
    pub kind: FileType,
    /// Name in the directory.
    pub name: String,
}

/// The state of a running mount.
pub struct Mount {
    remote: Remote,
    /// Path ↔ inode numbers and kept directories.
    pub inodes: Inodes,
    settings: Settings,
    budget: Arc<Budget>,
    files: Mutex<HashMap<u64, Arc<OpenFile>>>,
    dirs: Mutex<HashMap<u64, Arc<Vec<Listed>>>>,
    next_handle: AtomicU64,
    /// Permission bits set with chmod, by inode: a directory's, and a
    /// file's bits the server does not keep (it keeps the executable bit).
    modes: Mutex<HashMap<u64, u16>>,
    grants: Grants,
    uid: u32,
    gid: u32,
    /// Directories the server last described, by inode, with their time:
    /// a directory's attributes (which the kernel asks for after every
    /// create and unlink in it) are answered without a round trip; a name
    /// that changes kind is dropped here by the Watch (docs/mount.md §
    /// Freshness).
    known_dirs: Mutex<HashMap<u64, SystemTime>>,
    /// This mount's own changes not yet seen on the Watch, by path: the
    /// version a commit made, 0 for a delete. Their events would only make
    /// the kernel forget what it already knows.
    own: Mutex<HashMap<String, u64>>,
}

/// Own changes remembered at most: past it (a Watch that broke, events
/// never seen) they are forgotten, and their events invalidate as others'.
const MAX_OWN_CHANGES: usize = 4096;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A server time; an implied directory has none, and shows as now.
fn time(ts: Option<&prost_types::Timestamp>) -> SystemTime {
    match ts {
        Some(t) if t.seconds > 0 => {
            UNIX_EPOCH + Duration::new(t.seconds as u64, t.nanos.max(0) as u32)
        }
        _ => SystemTime::now(),
    }
}

impl Mount {
    /// A mount of `root` (a logical directory) through `remote`.
    pub fn new(
        remote: Remote,
        root: &str,
        settings: Settings,
        budget: Arc<Budget>,
        grants: Grants,
    ) -> Mount {
        Mount {
            remote,
            inodes: Inodes::new(root),
            settings,
            budget,
            files: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            modes: Mutex::new(HashMap::new()),
            grants,
            uid: rustix::process::getuid().as_raw(),
            gid: rustix::process::getgid().as_raw(),
            known_dirs: Mutex::new(HashMap::new()),
            own: Mutex::new(HashMap::new()),
        }
    }

    /// Remembers a change this mount made to `path`: the `version` a
    /// commit made, 0 for a delete.
    fn made(&self, path: &str, version: u64) {
        self.touched(path);
        let mut own = lock(&self.own);
        if own.len() >= MAX_OWN_CHANGES {
            own.clear();
        }
        own.insert(path.to_owned(), version);
    }

    /// An entry of `path`'s directory was added, removed or renamed through
    /// the mount: the directory's time as the mount answers it moves to
    /// now, as the server's would.
    fn touched(&self, path: &str) {
        let parent = inodes::split(path).and_then(|(parent, _)| self.inodes.known(parent));
        if let Some(ino) = parent
            && let Some(time) = lock(&self.known_dirs).get_mut(&ino)
        {
            *time = SystemTime::now();
        }
    }

    /// True when a Watch event (of `path`, at `version`, a deletion or
    /// not) is this mount's own change, which needs no invalidation; each
    /// is recognized once. Any other event of a path drops what the mount
    /// knows of its kind.
    pub fn own_change(&self, path: &str, version: u64, deleted: bool) -> bool {
        let mut own = lock(&self.own);
        let ours = match own.get(path) {
            Some(&0) => deleted,
            Some(&made) => !deleted && made == version,
            None => false,
        };
        if ours {
            own.remove(path);
        } else if let Some(ino) = self.inodes.known(path) {
            lock(&self.known_dirs).remove(&ino);
        }
        ours
    }

    /// The path of `name` in the directory `parent`; EINVAL (or the
    /// inode table's errno) when it names no path of the mount.
    fn child_path(&self, parent: u64, name: &std::ffi::OsStr) -> Result<String, Failure> {
        self.inodes
            .child(parent, name)
            .map_err(|e| Failure::local(e, "bad name"))
    }

    fn writable(&self) -> Result<(), Failure> {
        match self.settings.read_only {
            true => Err(Failure::local(Errno::EROFS, "mounted --read-only")),
            false => Ok(()),
        }
    }

    /// EACCES unless the grants allow `op` on `path`.
    fn granted(&self, op: &str, path: &str) -> Result<(), Failure> {
        match self.grants.allow(op, path) {
            true => Ok(()),
            false => Err(Failure::local(
                Errno::EACCES,
                format!("no {op} grant on {path}"),
            )),
        }
    }

    /// The attributes of `ino`; `executable` is a file's bit as the server
    /// (or a handle holding changes) has it.
    fn attr(
        &self,
        ino: u64,
        kind: FileType,
        (size, executable): (u64, bool),
        modified: SystemTime,
        created: SystemTime,
    ) -> FileAttr {
        let kept = lock(&self.modes).get(&ino).copied();
        let perm = match kind {
            FileType::Directory => kept.unwrap_or(0o755),
            // The bits chmod set, while they agree with the server's bit
            // (another writer may have changed it since).
            _ => match kept {
                Some(bits) if (bits & 0o100 != 0) == executable => bits,
                _ if executable => 0o755,
                _ => 0o644,
            },
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: modified,
            mtime: modified,
            ctime: modified,
            crtime: created,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn attr_of(&self, ino: u64, info: &pb::FileInfo) -> FileAttr {
        let kind = match info.is_directory {
            true => FileType::Directory,
            false => FileType::RegularFile,
        };
        let modified = time(info.modified_time.as_ref());
        let created = time(info.created_time.as_ref());
        match info.is_directory {
            true => lock(&self.known_dirs).insert(ino, modified),
            false => lock(&self.known_dirs).remove(&ino),
        };
        self.attr(ino, kind, (info.size, info.executable), modified, created)
    }

    fn dir_attr(&self, ino: u64) -> FileAttr {
        let now = SystemTime::now();
        self.attr(ino, FileType::Directory, (0, false), now, now)
    }

    /// The attributes of an unlinked file open in `handles`: what they
    /// hold, and no link left (`fstat` of an unlinked file says 0).
    fn held_attr(&self, ino: u64, handles: &[Arc<OpenFile>]) -> FileAttr {
        let now = SystemTime::now();
        let (size, modified, executable) = handles
            .iter()
            .find_map(|f| f.held_attr())
            .unwrap_or((0, now, false));
        let held = (size, executable);
        let mut attr = self.attr(ino, FileType::RegularFile, held, modified, modified);
        attr.nlink = 0;
        attr
    }

    /// The open files of `ino`.
    fn handles_of(&self, ino: u64) -> Vec<Arc<OpenFile>> {
        lock(&self.files)
            .values()
            .filter(|f| f.ino == ino)
            .cloned()
            .collect()
    }

    /// The attributes of `path` (inode `ino`): from a handle holding
    /// uncommitted changes, else from the server, else a kept directory.
    async fn attr_at(&self, ino: u64, path: &str) -> Result<FileAttr, Failure> {
        let handles = self.handles_of(ino);
        // Of several handles with changes, the one changed last.
        let pending = handles
            .iter()
            .filter_map(|f| f.pending_attr())
            .max_by_key(|&(_, modified, _)| modified);
        if let Some((size, modified, executable)) = pending {
            let pending = (size, executable);
            return Ok(self.attr(ino, FileType::RegularFile, pending, modified, modified));
        }
        match self.remote.stat(path).await {
            Ok(info) => Ok(self.attr_of(ino, &info)),
            Err(f)
                if f.errno == Errno::ENOENT && (ino == ROOT || self.inodes.is_local_dir(path)) =>
            {
                Ok(self.dir_attr(ino))
            }
            // Unlinked while open (fstat of the handle): what it holds.
            Err(f) if f.errno == Errno::ENOENT && !handles.is_empty() => {
                Ok(self.held_attr(ino, &handles))
            }
            Err(f) => Err(f),
        }
    }

    /// `lookup`: the attributes of `name` in `parent`.
    pub async fn lookup(&self, parent: u64, name: &std::ffi::OsStr) -> Result<FileAttr, Failure> {
        let path = self.child_path(parent, name)?;
        // A name the server does not know yet is looked up without a number.
        let ino = match self.inodes.known(&path) {
            Some(ino) => ino,
            None => {
                let info = match self.remote.stat(&path).await {
                    Ok(info) => Some(info),
                    Err(f) if f.errno == Errno::ENOENT => None,
                    Err(f) => return Err(f),
                };
                match info {
                    Some(info) => return Ok(self.attr_of(self.inodes.ino(&path), &info)),
                    None if self.inodes.is_local_dir(&path) => {
                        return Ok(self.dir_attr(self.inodes.ino(&path)));
                    }
                    None => return Err(Failure::local(Errno::ENOENT, "")),
                }
            }
        };
        self.attr_at(ino, &path).await
    }

    /// `getattr`.
    pub async fn getattr(&self, ino: u64) -> Result<FileAttr, Failure> {
        let known_dir = lock(&self.known_dirs).get(&ino).copied();
        if let Some(modified) = known_dir {
            let attr = (0, false);
            return Ok(self.attr(ino, FileType::Directory, attr, modified, modified));
        }
        match self.inodes.path(ino) {
            Ok(path) => self.attr_at(ino, &path).await,
            // Unlinked but open: the handle answers.
            Err(errno) => {
                let handles = self.handles_of(ino);
                if handles.is_empty() {
                    return Err(Failure::local(errno, ""));
                }
                Ok(self.held_attr(ino, &handles))
            }
        }
    }

    /// `setattr`: mode (a file's executable bit stored on the server, the
    /// other bits kept by the mount), owner (only the mount's), size
    /// (through a handle, or a commit of its own), times (ignored).
    pub async fn setattr(
        &self,
        ino: u64,
        mode: Option<u32>,
        owner: (Option<u32>, Option<u32>),
        size: Option<u64>,
        handle: Option<u64>,
    ) -> Result<FileAttr, Failure> {
        let path = self.inodes.path(ino);
        if mode.is_some() || size.is_some() {
            self.writable()?;
        }
        if owner.0.is_some_and(|u| u != self.uid) || owner.1.is_some_and(|g| g != self.gid) {
            return Err(Failure::local(
                Errno::EPERM,
                "chown: files belong to the mount's owner",
            ));
        }
        if let Some(mode) = mode {
            self.chmod(ino, path.as_deref().ok(), mode).await?;
        }
        if let Some(len) = size {
            self.granted("write", path.as_deref().unwrap_or_default())?;
            let open = handle.and_then(|fh| lock(&self.files).get(&fh).cloned());
            match open {
                Some(file) => {
                    let path = path.clone().unwrap_or_default();
                    file.truncate(&self.remote, &path, len).await?;
                }
                None => {
                    let path = path.clone().map_err(|e| Failure::local(e, ""))?;
                    self.settle_created(ino, &path).await?;
                    let file = OpenFile::existing(ino, Arc::clone(&self.budget));
                    file.truncate(&self.remote, &path, len).await?;
                    self.commit(&file, &path).await?;
                }
            }
        }
        self.getattr(ino).await
    }

    /// A chmod of `ino` (at `path`, `None` when unlinked): its bits kept,
    /// and a file's executable bit carried by the commit of a handle
    /// holding changes, or set on the server (a directory's stays here).
    async fn chmod(&self, ino: u64, path: Option<&str>, mode: u32) -> Result<(), Failure> {
        let executable = mode & 0o100 != 0;
        let handles = self.handles_of(ino);
        // Every handle holding changes takes the bit (not only the first).
        let mut carried = false;
        for file in &handles {
            carried |= file.chmod(executable);
        }
        let on_server = path.filter(|p| ino != ROOT && !carried && !self.inodes.is_local_dir(p));
        if let Some(path) = on_server {
            self.granted("write", path)?;
            match self.remote.set_executable(path, executable).await {
                Ok(set) => {
                    // Same content, new version: handles based on the old
                    // one commit over the new one.
                    for file in &handles {
                        file.renumbered(set.previous_version, set.version);
                    }
                }
                Err(f) if f.errno == Errno::EISDIR => {}
                Err(f) => return Err(f),
            }
        }
        lock(&self.modes).insert(ino, (mode & 0o7777) as u16);
        Ok(())
    }

    /// `opendir`: a handle on a listing taken now (server and kept
    /// directories), so `readdir` pages through one view.
    pub async fn opendir(&self, ino: u64) -> Result<u64, Failure> {
        let path = self.inodes.path(ino).map_err(|e| Failure::local(e, ""))?;
        let entries = match self.remote.list(&path).await {
            Ok(entries) => entries,
            Err(f)
                if f.errno == Errno::ENOENT && (ino == ROOT || self.inodes.is_local_dir(&path)) =>
            {
                Vec::new()
            }
            Err(f) => return Err(f),
        };
        let parent =
            inodes::split(&path).map_or(ROOT, |(p, _)| self.inodes.known(p).unwrap_or(ROOT));
        let mut listed = vec![
            Listed {
                ino,
                kind: FileType::Directory,
                name: ".".into(),
            },
            Listed {
                ino: parent,
                kind: FileType::Directory,
                name: "..".into(),
            },
        ];
        let mut names = std::collections::HashSet::new();
        for e in entries {
            let Some((_, name)) = inodes::split(&e.path) else {
                continue;
            };
            let kind = if e.is_directory {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            names.insert(name.to_owned());
            listed.push(Listed {
                ino: self.inodes.ino(&e.path),
                kind,
                name: name.to_owned(),
            });
        }
        for name in self.inodes.local_children(&path) {
            if names.insert(name.clone()) {
                let ino = self.inodes.ino(&inodes::join(&path, &name));
                listed.push(Listed {
                    ino,
                    kind: FileType::Directory,
                    name,
                });
            }
        }
        // Files created here and not yet committed.
        let pending: Vec<u64> = lock(&self.files)
            .values()
            .filter(|f| f.is_new())
            .map(|f| f.ino)
            .collect();
        for ino in pending {
            if let Ok(p) = self.inodes.path(ino)
                && let Some((dir, name)) = inodes::split(&p)
                && dir == path
                && names.insert(name.to_owned())
            {
                listed.push(Listed {
                    ino,
                    kind: FileType::RegularFile,
                    name: name.to_owned(),
                });
            }
        }
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        lock(&self.dirs).insert(fh, Arc::new(listed));
        Ok(fh)
    }

    /// The listing of directory handle `fh`.
    pub fn listing(&self, fh: u64) -> Option<Arc<Vec<Listed>>> {
        lock(&self.dirs).get(&fh).cloned()
    }

    /// `releasedir`.
    pub fn releasedir(&self, fh: u64) {
        lock(&self.dirs).remove(&fh);
    }

    fn register(&self, file: Arc<OpenFile>) -> u64 {
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        lock(&self.files).insert(fh, file);
        fh
    }

    fn handle(&self, fh: u64) -> Result<Arc<OpenFile>, Failure> {
        lock(&self.files)
            .get(&fh)
            .cloned()
            .ok_or(Failure::local(Errno::EBADF, "no such handle"))
    }

    /// `open`: a handle reading one version; O_TRUNC empties it at once.
    pub async fn open(&self, ino: u64, write: bool, truncate: bool) -> Result<u64, Failure> {
        if write {
            self.writable()?;
        }
        let path = self.inodes.path(ino).map_err(|e| Failure::local(e, ""))?;
        if write {
            self.granted("write", &path)?;
        }
        self.settle_created(ino, &path).await?;
        let file = match write && truncate {
            true => {
                let info = self.remote.stat(&path).await?;
                OpenFile::truncated(ino, &info, Arc::clone(&self.budget))
            }
            false => OpenFile::existing(ino, Arc::clone(&self.budget)),
        };
        Ok(self.register(file))
    }

    /// `create`: a new file, seen by the mount at once and committed on
    /// its first flush; an existing one is opened (EEXIST with O_EXCL).
    pub async fn create(
        &self,
        parent: u64,
        name: &std::ffi::OsStr,
        mode: u32,
        exclusive: bool,
        truncate: bool,
    ) -> Result<(FileAttr, u64), Failure> {
        self.writable()?;
        let path = self.child_path(parent, name)?;
        self.granted("write", &path)?;
        let existing = match self.remote.stat(&path).await {
            Ok(info) => Some(info),
            Err(f) if f.errno == Errno::ENOENT => None,
            Err(f) => return Err(f),
        };
        let ino = self.inodes.ino(&path);
        let file = match existing {
            Some(_) if exclusive => return Err(Failure::local(Errno::EEXIST, "")),
            Some(info) if info.is_directory => return Err(Failure::local(Errno::EISDIR, "")),
            Some(info) if truncate => OpenFile::truncated(ino, &info, Arc::clone(&self.budget)),
            Some(_) => OpenFile::existing(ino, Arc::clone(&self.budget)),
            None => {
                lock(&self.modes).insert(ino, (mode & 0o7777) as u16);
                let executable = mode & 0o100 != 0;
                OpenFile::created(ino, executable, Arc::clone(&self.budget))
            }
        };
        let fh = self.register(file);
        Ok((self.attr_at(ino, &path).await?, fh))
    }

    /// Commits the handles that created `ino` at `path` and have not
    /// committed yet, so the file is on the server before another handle
    /// reads, replaces or truncates it (else that one finds nothing there).
    async fn settle_created(&self, ino: u64, path: &str) -> Result<(), Failure> {
        for file in self.handles_of(ino) {
            if file.is_new() {
                self.commit(&file, path).await?;
            }
        }
        Ok(())
    }

    /// `read`.
    pub async fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Failure> {
        let file = self.handle(fh)?;
        let path = self.inodes.path(file.ino).unwrap_or_default();
        file.read(&self.remote, &path, offset, u64::from(size))
            .await
    }

    /// `write`: staged in the handle until its flush.
    pub async fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<(), Failure> {
        self.writable()?;
        let file = self.handle(fh)?;
        let path = self.inodes.path(file.ino).unwrap_or_default();
        file.write(&self.remote, &path, offset, data).await
    }

    async fn commit(&self, file: &Arc<OpenFile>, path: &str) -> Result<Committed, Failure> {
        let committed = file
            .commit(&self.remote, path, self.settings.overwrite)
            .await?;
        if let Committed::Version(version) = committed {
            // Its parents exist on the server now, or stay kept.
            tracing::debug!("mount: committed {path}: version {version}");
            self.made(path, version);
        }
        Ok(committed)
    }

    /// `flush` and `fsync`: commit the handle when it changed.
    pub async fn flush(&self, fh: u64) -> Result<(), Failure> {
        let file = self.handle(fh)?;
        let Ok(path) = self.inodes.path(file.ino) else {
            return Ok(()); // unlinked: nothing to commit
        };
        self.commit(&file, &path).await.map(|_| ())
    }

    /// `release`: the last commit, then the handle goes.
    pub async fn release(&self, fh: u64) -> Result<(), Failure> {
        let result = self.flush(fh).await;
        lock(&self.files).remove(&fh);
        result
    }

    /// Makes the open handles of `path` keep their bytes and stop
    /// committing: it is about to be unlinked or replaced.
    async fn detach(&self, path: &str) -> Result<(), Failure> {
        let Some(ino) = self.inodes.known(path) else {
            return Ok(());
        };
        for file in self.handles_of(ino) {
            file.keep(&self.remote, path).await?;
            file.unlink();
        }
        Ok(())
    }

    /// `unlink`: Delete; open handles keep reading what they had.
    pub async fn unlink(&self, parent: u64, name: &std::ffi::OsStr) -> Result<(), Failure> {
        self.writable()?;
        let path = self.child_path(parent, name)?;
        self.granted("delete", &path)?;
        let pending_new = self
            .inodes
            .known(&path)
            .is_some_and(|ino| self.handles_of(ino).iter().any(|f| f.is_new()));
        self.detach(&path).await?;
        match self.remote.delete(&path, false).await {
            Ok(()) => self.made(&path, 0),
            // Created and never committed: nothing on the server.
            Err(f) if f.errno == Errno::ENOENT && pending_new => {}
            Err(f) => return Err(f),
        }
        self.inodes.remove(&path);
        self.keep_parent(&path);
        Ok(())
    }

    /// Keeps the parent of `path` listed after its last entry leaves.
    fn keep_parent(&self, path: &str) {
        if let Some((parent, _)) = inodes::split(path) {
            self.inodes.keep_dir(parent);
        }
    }

    /// `mkdir`: kept by the mount until a file lands in it (State, Store
    /// and object tiers have no empty directories; docs/mount.md).
    pub async fn mkdir(&self, parent: u64, name: &std::ffi::OsStr) -> Result<FileAttr, Failure> {
        self.writable()?;
        let path = self.child_path(parent, name)?;
        self.granted("write", &path)?;
        match self.remote.stat(&path).await {
            Ok(_) => return Err(Failure::local(Errno::EEXIST, "")),
            Err(f) if f.errno == Errno::ENOENT => {}
            Err(f) => return Err(f),
        }
        if self.inodes.is_local_dir(&path) {
            return Err(Failure::local(Errno::EEXIST, ""));
        }
        self.inodes.keep_dir(&path);
        self.touched(&path);
        Ok(self.dir_attr(self.inodes.ino(&path)))
    }

    /// `rmdir`: only an empty directory.
    pub async fn rmdir(&self, parent: u64, name: &std::ffi::OsStr) -> Result<(), Failure> {
        self.writable()?;
        let path = self.child_path(parent, name)?;
        if !self.inodes.local_children(&path).is_empty() {
            return Err(Failure::local(Errno::ENOTEMPTY, ""));
        }
        match self.remote.list(&path).await {
            Ok(entries) if !entries.is_empty() => return Err(Failure::local(Errno::ENOTEMPTY, "")),
            // An empty directory the tier keeps (Filesystem).
            Ok(_) => self.remote.delete(&path, true).await?,
            Err(f) if f.errno == Errno::ENOENT && self.inodes.is_local_dir(&path) => {}
            Err(f) => return Err(f),
        }
        if let Some(ino) = self.inodes.known(&path) {
            lock(&self.known_dirs).remove(&ino);
        }
        self.touched(&path);
        self.inodes.drop_dir(&path);
        self.inodes.remove(&path);
        self.keep_parent(&path);
        Ok(())
    }

    /// `rename`: Move, atomic when it replaces a file; a directory only
    /// the mount keeps moves in the mount.
    pub async fn rename(
        &self,
        from: (u64, &std::ffi::OsStr),
        to: (u64, &std::ffi::OsStr),
        no_replace: bool,
    ) -> Result<(), Failure> {
        self.writable()?;
        let source = self.child_path(from.0, from.1)?;
        let destination = self.child_path(to.0, to.1)?;
        if source == destination {
            return Ok(());
        }
        self.granted("delete", &source)?;
        self.granted("write", &destination)?;
        // Changes still in handles land first, so they move too.
        if let Some(ino) = self.inodes.known(&source) {
            for file in self.handles_of(ino) {
                self.commit(&file, &source).await?;
            }
        }
        let source_info = match self.remote.stat(&source).await {
            Ok(info) => Some(info),
            Err(f) if f.errno == Errno::ENOENT => None,
            Err(f) => return Err(f),
        };
        let local_dir = self.inodes.is_local_dir(&destination);
        if local_dir && !self.inodes.local_children(&destination).is_empty() {
            return Err(Failure::local(Errno::ENOTEMPTY, ""));
        }
        match source_info {
            None if self.inodes.is_local_dir(&source) => {
                self.may_replace_with_dir(&destination, local_dir, no_replace)
                    .await?;
            }
            None => return Err(Failure::local(Errno::ENOENT, "")),
            Some(info) => {
                if info.is_directory && local_dir {
                    // POSIX: a directory replaces an empty one.
                    self.inodes.drop_dir(&destination);
                }
                self.detach(&destination).await?;
                let inside = match info.is_directory {
                    true => self.commit_inside(&source).await?,
                    false => Vec::new(),
                };
                let moved = self
                    .remote
                    .rename(&source, &destination, no_replace)
                    .await?;
                for (file, path, base) in inside {
                    let new_path = format!("{destination}{}", &path[source.len()..]);
                    if let Ok(info) = self.remote.stat(&new_path).await {
                        file.renumbered(base, info.version);
                    }
                }
                // A moved file has a new version: its open handles commit
                // over that one, not the one they read.
                if let Some(ino) = self.inodes.known(&source)
                    && moved != 0
                {
                    for file in self.handles_of(ino) {
                        file.renumbered(info.version, moved);
                    }
                }
            }
        }
        self.inodes.rename(&source, &destination);
        self.touched(&source);
        self.touched(&destination);
        self.keep_parent(&source);
        Ok(())
    }

    /// Whether a directory the mount keeps may move to `destination`
    /// (`kept`: a directory the mount keeps too): EEXIST under
    /// `RENAME_NOREPLACE` when something is there, ENOTDIR over a file,
    /// ENOTEMPTY over a directory with entries; POSIX lets it replace only
    /// an empty directory.
    async fn may_replace_with_dir(
        &self,
        destination: &str,
        kept: bool,
        no_replace: bool,
    ) -> Result<(), Failure> {
        let there = match self.remote.stat(destination).await {
            Ok(info) => Some(info),
            Err(f) if f.errno == Errno::ENOENT => None,
            Err(f) => return Err(f),
        };
        if no_replace && (kept || there.is_some()) {
            return Err(Failure::local(Errno::EEXIST, ""));
        }
        match there {
            Some(info) if !info.is_directory => Err(Failure::local(Errno::ENOTDIR, "")),
            Some(_) if !self.remote.list(destination).await?.is_empty() => {
                Err(Failure::local(Errno::ENOTEMPTY, ""))
            }
            _ => Ok(()),
        }
    }

    /// Commits the open files under directory `dir`, about to move; each
    /// with its path and the version it is now based on.
    async fn commit_inside(&self, dir: &str) -> Result<Vec<(Arc<OpenFile>, String, u64)>, Failure> {
        let files: Vec<Arc<OpenFile>> = lock(&self.files).values().cloned().collect();
        let mut inside = Vec::new();
        for file in files {
            let Ok(path) = self.inodes.path(file.ino) else {
                continue;
            };
            if path != dir && inodes::within(&path, dir) {
                self.commit(&file, &path).await?;
                if let Some(base) = file.base() {
                    inside.push((file, path, base));
                }
            }
        }
        Ok(inside)
    }

    /// `statfs`: the mount's view of space: large and mostly free, as the
    /// server's limits are per file (`max_file_bytes`) rather than a disk.
    pub fn statfs(&self) -> (u64, u64, u64, u64, u64, u32, u32, u32) {
        let blocks = 1 << 30; // 4 TiB of 4 KiB blocks
        let files = lock(&self.files).len() as u64;
        (
            blocks,
            blocks / 2,
            blocks / 2,
            1 << 32,
            (1 << 32) - files,
            4096,
            255,
            4096,
        )
    }
}
