//! A changeset on the Filesystem tier: an intent journal in the server's data
//! directory, never in the served one (docs/changesets.md § Tiers).
//!
//! Protocol, under the locks of every path of the changeset (taken in
//! stripe order, so changesets cannot deadlock; reads and stats of those
//! paths wait on them):
//!
//! 1. check: every file is at the version the changeset saw;
//! 2. prepare: the journal records the intent (each path, and the name of
//!    the staged file its new content goes to), then each new content is
//!    written to its staged file in the journal's directory, given the old
//!    file's owner and mode and its new version's time stamp, and fsynced;
//!    then the journal's directory is fsynced, and every staged file is
//!    proven present (the name still holds the file written);
//! 3. commit point: the journal's record becomes `commit` (written to a
//!    new file, fsynced, renamed over the record, directory fsynced);
//! 4. apply: each staged file is renamed over its path, each deleted path
//!    unlinked; the directories are fsynced, each once however many of the
//!    changeset's files it holds; the record is removed.
//!
//! The staged files live in the server's data directory, where no caller
//! can name them: a caller that may write a target's directory cannot
//! delete or replace one (before, they were named files in the target's
//! directory, and deleting one tore the changeset). Where the journal lies
//! on another file system than a target (a rename fails with `EXDEV`), the
//! apply copies the staged file into an unnamed file (`O_TMPFILE`) of the
//! target's directory, names it and renames it over the path at once, as a
//! single write does (`super::write`); a caller that deletes that name in
//! the window of two system calls only makes the apply copy again, from
//! the staged file, which stays until the file is in place.
//!
//! A crash before the commit point leaves no file changed (the staged
//! files are removed at the next start; directories the prepare created
//! may stay, empty); after it, the next start finishes the apply: a staged
//! file still there is put in place, one gone was. So every changeset is
//! wholly applied or wholly absent ([`FsBackend::recover`]).
//!
//! Several servers on one directory share its journal: a record is locked
//! (`flock`) by the server applying it, and a starting server finishes or
//! undoes only the records no live server holds.
//!
//! Readers through agentvfs see all of a changeset or none of it: a read
//! or stat holds its path's lock shared, and the changeset holds every
//! path's exclusively from its check to its last rename. A search walks
//! without locks and may see part of one; so may a process reading the
//! directory directly.

use super::FsBackend;
use super::sandbox::{self, Links, errno, file_type};
use super::tree::identity;
use super::write::{keep_owner_and_mode, set_executable_bit};
use crate::backend::changeset::stale;
use crate::backend::{FileAction, FileChange, FileCommitted};
use crate::change::{ChangeKind, Operation, Origin};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use rustix::fd::OwnedFd;
use rustix::fs::FlockOperation;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat, Timestamps};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Mode of a new file before the umask, as a single write creates it.
const NEW_FILE_MODE: u32 = 0o666;

/// The intent journal of one Filesystem mount: a directory of records,
/// one per changeset being applied.
pub struct Journal {
    dir: PathBuf,
    /// The directory, open for the `*at` calls on staged files.
    staging: OwnedFd,
}

/// A changeset's record in the journal.
#[derive(Serialize, Deserialize, Debug)]
struct Intent {
    /// Past the commit point: the changeset must be applied.
    committed: bool,
    /// Every file the changeset changes.
    entries: Vec<IntentEntry>,
}

/// One file of a changeset's record.
#[derive(Serialize, Deserialize, Debug)]
struct IntentEntry {
    /// The file's logical path.
    path: String,
    /// The staged file (in the journal's directory) holding its new
    /// content; `None` (and no `temp`): the file is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    staged: Option<String>,
    /// A temporary file in the path's directory holding its new content:
    /// only in records of servers that staged there, which a start still
    /// finishes or undoes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    temp: Option<String>,
}

/// Most times the apply copies a staged file into a target's directory on
/// another file system when the name it gave the copy vanished before its
/// rename (see the module doc): each try leaves that name in place for two
/// system calls only.
const INSTALL_TRIES: usize = 64;

impl Journal {
    /// The journal kept in `dir`, created when missing.
    pub fn open(dir: &Path) -> Result<Journal> {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::Internal(format!("cannot create the journal {}: {e}", dir.display()))
        })?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let staging = rustix::fs::open(dir, flags, Mode::empty()).map_err(|e| {
            Error::Internal(format!("cannot open the journal {}: {e}", dir.display()))
        })?;
        Ok(Journal {
            dir: dir.to_owned(),
            staging,
        })
    }

    fn record_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.intent"))
    }

    /// The name of the `n`th staged file of changeset `id`.
    fn staged_name(id: &str, n: usize) -> String {
        format!("{id}.{n}.staged")
    }

    fn failed(&self, what: &str, e: impl std::fmt::Display) -> Error {
        Error::Internal(format!(
            "journal {}: cannot {what}: {e}",
            self.dir.display()
        ))
    }

    /// Writes the record of `id` whole, durably: a new file, locked,
    /// written and fsynced, then renamed over the old record and the
    /// directory fsynced. The returned file holds the lock that tells a
    /// server starting on the same directory that the changeset is alive.
    fn write(&self, id: &str, intent: &Intent) -> Result<File> {
        use std::io::Write as _;
        let text = serde_json::to_vec(intent).expect("an intent serializes");
        let fresh = self.dir.join(format!("{id}.new"));
        let mut file = File::create(&fresh).map_err(|e| self.failed("write", e))?;
        rustix::fs::flock(&file, FlockOperation::LockExclusive)
            .map_err(|e| self.failed("lock", e))?;
        file.write_all(&text)
            .and_then(|()| file.sync_all())
            .map_err(|e| self.failed("write", e))?;
        std::fs::rename(&fresh, self.record_path(id)).map_err(|e| self.failed("commit", e))?;
        self.sync()?;
        Ok(file)
    }

    fn sync(&self) -> Result<()> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.failed("sync", e))
    }

    /// Removes the record of `id`: its changeset is done (or undone).
    fn remove(&self, id: &str) -> Result<()> {
        match std::fs::remove_file(self.record_path(id)) {
            Ok(()) => self.sync(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.failed("remove a record", e)),
        }
    }

    /// `path` opened and locked, when no live server holds it and it is
    /// still the file at `path` once locked (a record is replaced by
    /// renaming a locked file over it).
    fn orphan(&self, path: &Path) -> Result<Option<File>> {
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.failed("open a record", e)),
        };
        match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
            Err(e) => return Err(self.failed("lock a record", e)),
        }
        let held = file
            .metadata()
            .map_err(|e| self.failed("stat a record", e))?;
        match std::fs::metadata(path) {
            Ok(now) if now.ino() == held.ino() && now.dev() == held.dev() => Ok(Some(file)),
            _ => Ok(None),
        }
    }

    /// Every record a changeset left when its server stopped, by id, each
    /// with its file (locked: this server now finishes or undoes it).
    /// Records of changesets still running elsewhere are left alone.
    fn pending(&self) -> Result<Vec<(String, Intent, File)>> {
        let mut out = Vec::new();
        let entries = std::fs::read_dir(&self.dir).map_err(|e| self.failed("list", e))?;
        for entry in entries {
            let path = entry.map_err(|e| self.failed("list", e))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if let Some(id) = name.strip_suffix(".new") {
                // A record being rewritten when its server stopped: the
                // old one (if any) holds.
                if self.orphan(&path)?.is_some() {
                    tracing::info!(id, "dropping a half-written journal record");
                    std::fs::remove_file(&path).map_err(|e| self.failed("clean", e))?;
                }
            } else if let Some(id) = name.strip_suffix(".intent")
                && let Some(file) = self.orphan(&path)?
            {
                let text = std::fs::read(&path).map_err(|e| self.failed("read", e))?;
                let intent = serde_json::from_slice(&text)
                    .map_err(|e| self.failed(&format!("read {}", path.display()), e))?;
                out.push((id.to_owned(), intent, file));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// One file of a changeset while it is applied.
struct Prepared {
    /// Index of its change.
    index: usize,
    /// Its parent directory.
    dir: OwnedFd,
    /// The file holding its new content (staged in the journal's
    /// directory, then in place), and its staged name.
    staged: Option<(OwnedFd, String)>,
    /// Its size after the changeset.
    size: u64,
}

/// Fsyncs the directory of every prepared file, each directory once
/// however many of the changeset's files it holds (a merge of 100 files of
/// one directory syncs it once, not 100 times: docs/performance.md
/// § Branches).
fn sync_dirs<'a>(
    prepared: impl IntoIterator<Item = &'a Prepared>,
    changes: &[FileChange],
) -> Result<()> {
    let mut synced = HashSet::new();
    for file in prepared {
        let path = &changes[file.index].path;
        if synced.insert(identity(path, &file.dir)?) {
            rustix::fs::fsync(&file.dir).map_err(|e| errno(path, e))?;
        }
    }
    Ok(())
}

/// Unlinks `name` in `dir`, a file already gone being fine.
fn remove(dir: &OwnedFd, name: &str) -> rustix::io::Result<()> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

impl FsBackend {
    /// Finishes or undoes what changesets left in the journal when the
    /// server stopped (see the module doc). Runs before the tier serves.
    pub(super) fn recover(&self, journal: &Journal) -> Result<()> {
        let staging = &journal.staging;
        for (id, intent, _held) in journal.pending()? {
            tracing::info!(
                id,
                committed = intent.committed,
                files = intent.entries.len(),
                "recovering a changeset"
            );
            for entry in &intent.entries {
                let path = VfsPath::parse(&entry.path)?;
                if let Some(staged) = &entry.staged {
                    self.recover_staged(&path, staging, staged, intent.committed)?;
                    continue;
                }
                let (dir, name) = match self.sandbox.parent(&path, Links::Refuse) {
                    Ok(found) => found,
                    // Never prepared this far: nothing to finish or undo.
                    Err(Error::NotFound(_)) => continue,
                    Err(e) => return Err(e),
                };
                let done = match (&entry.temp, intent.committed) {
                    (Some(temp), true) => {
                        match rustix::fs::renameat(&dir, temp.as_str(), &dir, name) {
                            // Renamed before the stop.
                            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
                            Err(e) => Err(e),
                        }
                    }
                    (Some(temp), false) => remove(&dir, temp),
                    (None, true) => remove(&dir, name),
                    (None, false) => Ok(()),
                };
                done.map_err(|e| errno(&path, e))?;
                rustix::fs::fsync(&dir).map_err(|e| errno(&path, e))?;
            }
            rustix::fs::fsync(staging).map_err(|e| journal.failed("sync", e))?;
            journal.remove(&id)?;
        }
        Ok(())
    }

    /// Recovers one file staged as `staged` in `staging`: past the commit
    /// point, a staged file still there is put in place (one gone was);
    /// before it, the staged file is removed.
    fn recover_staged(
        &self,
        path: &VfsPath,
        staging: &OwnedFd,
        staged: &str,
        committed: bool,
    ) -> Result<()> {
        if !committed {
            return remove(staging, staged).map_err(|e| errno(path, e));
        }
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(staging, staged, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(()),
            Err(e) => return Err(errno(path, e)),
        };
        let (dir, name) = self.sandbox.parent_creating(path)?;
        self.install(path, staging, staged, fd, &dir, name)?;
        rustix::fs::fsync(&dir).map_err(|e| errno(path, e))
    }

    /// Puts the staged file `staged` (open as `fd`) of `staging` in place
    /// of `name` in `dir`: renamed there, or, where the two lie on
    /// different file systems, copied into an unnamed file of `dir` that is
    /// named and renamed at once, and the staged file removed (see the
    /// module doc). Answers the file now at the path.
    fn install(
        &self,
        path: &VfsPath,
        staging: &OwnedFd,
        staged: &str,
        fd: OwnedFd,
        dir: &OwnedFd,
        name: &str,
    ) -> Result<OwnedFd> {
        match rustix::fs::renameat(staging, staged, dir, name) {
            Ok(()) => return Ok(fd),
            Err(rustix::io::Errno::XDEV) => {}
            Err(e) => return Err(errno(path, e)),
        }
        let placed = self.install_copy(path, &fd, dir, name)?;
        remove(staging, staged).map_err(|e| errno(path, e))?;
        Ok(placed)
    }

    /// Copies the staged file `staged` (its content, owner, mode and time
    /// stamp) into a new file of `dir` and renames it over `name`, again
    /// from the start when its temporary name vanished before the rename.
    fn install_copy(
        &self,
        path: &VfsPath,
        staged: &OwnedFd,
        dir: &OwnedFd,
        name: &str,
    ) -> Result<OwnedFd> {
        use std::io::{Seek as _, SeekFrom};
        let os = |e| errno(path, e);
        let st = rustix::fs::fstat(staged).map_err(os)?;
        for _ in 0..INSTALL_TRIES {
            let mut temp = self.create_temp(path, dir)?;
            let mut from = File::from(rustix::io::dup(staged).map_err(os)?);
            let mut to = File::from(rustix::io::dup(&temp.fd).map_err(os)?);
            from.seek(SeekFrom::Start(0))
                .and_then(|_| std::io::copy(&mut from, &mut to))
                .map_err(|e| {
                    Error::Internal(format!("{path}: cannot copy its staged file: {e}"))
                })?;
            keep_owner_and_mode(path, &temp.fd, &st)?;
            let stamp = sandbox::timespec(sandbox::nanos(sandbox::modified(&st)));
            let times = Timestamps {
                last_access: stamp,
                last_modification: stamp,
            };
            rustix::fs::futimens(&temp.fd, &times).map_err(os)?;
            rustix::fs::fsync(&temp.fd).map_err(os)?;
            let named = self.name_temp(path, &mut temp)?;
            match rustix::fs::renameat(dir, named.as_str(), dir, name) {
                Ok(()) => return temp.placed().map_err(os),
                // Its name was deleted before the rename: copy again.
                Err(rustix::io::Errno::NOENT) => {
                    tracing::warn!(path = %path, "a changeset's file vanished before its rename; copying it again");
                }
                Err(e) => return Err(os(e)),
            }
        }
        Err(Error::Internal(format!(
            "{path}: the changeset's copy was deleted before its rename {INSTALL_TRIES} times; \
             the next start finishes the changeset"
        )))
    }

    /// The regular file at `path` now, if any, with its directory (`None`
    /// when its parent is missing, so no file is there either). On a tier
    /// serving a branch's changes, where directories are implied by the
    /// files below them as on every other tier's branch (docs/branches.md
    /// § What differs from the base), a directory there holding only empty
    /// directories is removed first: a file may take its place.
    fn found(&self, path: &VfsPath) -> Result<(Option<OwnedFd>, Option<Stat>)> {
        match self.sandbox.parent(path, Links::Refuse) {
            Ok((dir, name)) => {
                let st = match self.current(path, &dir, name) {
                    Err(Error::IsDirectory(_)) if self.serves_internal => {
                        let cname = std::ffi::CString::new(name)
                            .map_err(|_| Error::InvalidArgument(format!("{path}: a NUL byte")))?;
                        super::tree::remove_empty_tree(&dir, &cname, path)?;
                        self.current(path, &dir, name)?
                    }
                    other => other?,
                };
                Ok((Some(dir), st))
            }
            Err(Error::NotFound(_)) => Ok((None, None)),
            Err(e) => Err(e),
        }
    }

    /// Writes `data` to the new staged file `staged` in `staging` for
    /// `path`, stamped with the version after `old`'s and given its owner
    /// and mode, with the executable bit `executable` where it names one.
    fn prepare_staged(
        &self,
        path: &VfsPath,
        staging: &OwnedFd,
        staged: &str,
        (data, executable): (&[u8], Option<bool>),
        old: Option<&Stat>,
    ) -> Result<OwnedFd> {
        let os = |e| errno(path, e);
        let flags =
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(
            staging,
            staged,
            flags,
            Mode::from_raw_mode(NEW_FILE_MODE as _),
        )
        .map_err(os)?;
        sandbox::write_all(&fd, data).map_err(os)?;
        if let Some(old) = old {
            keep_owner_and_mode(path, &fd, old)?;
        }
        set_executable_bit(path, &fd, executable)?;
        let floor = old.map_or(0, sandbox::version) + 1;
        let ts = sandbox::timespec(sandbox::nanos(SystemTime::now()).max(floor));
        let times = Timestamps {
            last_access: ts,
            last_modification: ts,
        };
        rustix::fs::futimens(&fd, &times).map_err(os)?;
        rustix::fs::fsync(&fd).map_err(os)?;
        Ok(fd)
    }

    /// Proves every staged file present before the commit point: its name
    /// in `staging` still holds the very file written.
    fn check_staged(
        &self,
        staging: &OwnedFd,
        prepared: &[Prepared],
        changes: &[FileChange],
    ) -> Result<()> {
        for file in prepared {
            let Some((fd, staged)) = &file.staged else {
                continue;
            };
            let path = &changes[file.index].path;
            let held = rustix::fs::fstat(fd).map_err(|e| errno(path, e))?;
            let named = rustix::fs::statat(staging, staged.as_str(), AtFlags::SYMLINK_NOFOLLOW);
            match named {
                Ok(st) if (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino) => {}
                _ => {
                    return Err(Error::Internal(format!(
                        "the changeset's staged content of {path} is no longer in its journal; \
                         nothing was changed"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Applies `changes` (distinct paths, none below another) through the
    /// journal, or nothing (see the module doc).
    pub(super) fn commit_changes(
        &self,
        scope: &Scope,
        changes: &[FileChange],
    ) -> Result<Vec<FileCommitted>> {
        let Some(journal) = &self.journal else {
            let path = changes
                .first()
                .map_or(String::new(), |c| c.path.to_string());
            return Err(Error::Unsupported(format!(
                "the mount of {path} does not take changesets (it has no journal)"
            )));
        };
        let mut stripes: Vec<usize> = changes.iter().map(|c| Self::stripe(&c.path)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let _locks: Vec<_> = stripes.iter().map(|s| self.lock_stripe(*s)).collect();
        // 1. Check.
        let mut olds = Vec::with_capacity(changes.len());
        let mut sizes = Vec::with_capacity(changes.len());
        for change in changes {
            let path = &change.path;
            if path == self.sandbox.mount() {
                return Err(Error::IsDirectory(path.to_string()));
            }
            if let FileAction::Put { data, .. } = &change.action {
                Error::check_file_size(path, data.len() as u64, self.max_file_bytes)?;
            }
            let (dir, st) = self.found(path)?;
            let actual = st.as_ref().map(sandbox::version);
            if actual != change.expected {
                return Err(stale(path, change.expected, actual));
            }
            sizes.push(st.as_ref().map_or(0, |st| st.st_size as u64));
            olds.push((dir, st));
        }
        if changes
            .iter()
            .all(|c| matches!(c.action, FileAction::Check))
        {
            // Only checks: they held together under the locks.
            return self.outcomes(scope, changes, &[], &sizes);
        }
        // 2. Prepare.
        let staging = &journal.staging;
        let id = format!("{:016x}", rand::random::<u64>());
        let mut intent = Intent {
            committed: false,
            entries: Vec::new(),
        };
        for (n, change) in changes.iter().enumerate() {
            let staged = match change.action {
                FileAction::Put { .. } => Some(Journal::staged_name(&id, n)),
                FileAction::Delete { .. } => None,
                FileAction::Check => continue,
            };
            intent.entries.push(IntentEntry {
                path: change.path.to_string(),
                staged,
                temp: None,
            });
        }
        let mut _held = journal.write(&id, &intent)?;
        let mut prepared: Vec<Prepared> = Vec::with_capacity(changes.len());
        let made = (|| -> Result<()> {
            for (index, (change, (dir, old))) in changes.iter().zip(olds).enumerate() {
                let path = &change.path;
                match &change.action {
                    FileAction::Put {
                        data, executable, ..
                    } => {
                        let dir = match dir {
                            Some(dir) => dir,
                            None => self.sandbox.parent_creating(path)?.0,
                        };
                        let staged = Journal::staged_name(&id, index);
                        let content = (&data[..], *executable);
                        let fd =
                            self.prepare_staged(path, staging, &staged, content, old.as_ref())?;
                        prepared.push(Prepared {
                            index,
                            dir,
                            staged: Some((fd, staged)),
                            size: data.len() as u64,
                        });
                    }
                    FileAction::Delete { .. } => prepared.push(Prepared {
                        index,
                        dir: dir.ok_or_else(|| stale(path, change.expected, None))?,
                        staged: None,
                        size: 0,
                    }),
                    FileAction::Check => {}
                }
            }
            // The staged files' names, durable before the commit point: the
            // next start takes a committed record's missing staged file for
            // one already in place.
            rustix::fs::fsync(staging).map_err(|e| journal.failed("sync", e))?;
            self.check_staged(staging, &prepared, changes)
        })();
        if let Err(e) = made {
            self.undo(staging, &prepared, changes);
            journal.remove(&id)?;
            return Err(e);
        }
        // 3. The commit point.
        intent.committed = true;
        match journal.write(&id, &intent) {
            Ok(held) => _held = held,
            Err(e) => {
                self.undo(staging, &prepared, changes);
                journal.remove(&id)?;
                return Err(e);
            }
        }
        // 4. Apply. On an error the record stays: the next start finishes
        // the apply.
        for file in &mut prepared {
            let path = &changes[file.index].path;
            self.expect(path);
            let name = path.name();
            match file.staged.take() {
                Some((fd, staged)) => {
                    let placed = self.install(path, staging, &staged, fd, &file.dir, name)?;
                    file.staged = Some((placed, staged));
                }
                None => remove(&file.dir, name).map_err(|e| errno(path, e))?,
            }
        }
        sync_dirs(&prepared, changes)?;
        journal.remove(&id)?;
        self.outcomes(scope, changes, &prepared, &sizes)
    }

    /// Removes the staged files of a changeset that did not commit.
    fn undo(&self, staging: &OwnedFd, prepared: &[Prepared], changes: &[FileChange]) {
        for file in prepared {
            if let Some((_, staged)) = &file.staged
                && let Err(e) = remove(staging, staged)
            {
                let path = &changes[file.index].path;
                tracing::warn!(path = %path, cause = %e, "cannot remove a changeset's staged file");
            }
        }
    }

    /// What the applied changeset did to each file, logged together.
    fn outcomes(
        &self,
        scope: &Scope,
        changes: &[FileChange],
        prepared: &[Prepared],
        sizes: &[u64],
    ) -> Result<Vec<FileCommitted>> {
        let mut done: Vec<FileCommitted> = changes
            .iter()
            .zip(sizes)
            .map(|(c, size)| FileCommitted {
                path: c.path.clone(),
                version: c.expected.unwrap_or(0),
                size: *size,
                deleted: c.expected.is_none(),
            })
            .collect();
        let mut logged = Vec::with_capacity(prepared.len());
        for file in prepared {
            let change = &changes[file.index];
            let out = &mut done[file.index];
            match (&file.staged, &change.action) {
                (
                    Some((fd, _)),
                    FileAction::Put {
                        operation,
                        moved_from,
                        ..
                    },
                ) => {
                    let st = rustix::fs::fstat(fd).map_err(|e| errno(&change.path, e))?;
                    debug_assert_eq!(file_type(&st), FileType::RegularFile);
                    out.version = sandbox::version(&st);
                    out.size = file.size;
                    out.deleted = false;
                    let kind = match change.expected {
                        Some(_) => ChangeKind::Modified,
                        None => ChangeKind::Created,
                    };
                    let origin = Origin::of(scope, *operation);
                    let stamp = (out.version, out.size);
                    logged.push((change.path.clone(), kind, stamp, origin, moved_from.clone()));
                }
                (_, FileAction::Delete { moved_to }) => {
                    (out.version, out.size, out.deleted) = (0, 0, true);
                    let operation = match moved_to {
                        Some(_) => Operation::Move,
                        None => Operation::Delete,
                    };
                    let origin = Origin::of(scope, operation);
                    let kind = ChangeKind::Deleted;
                    logged.push((change.path.clone(), kind, (0, 0), origin, moved_to.clone()));
                }
                _ => {}
            }
        }
        if let Some(log) = &self.changes {
            log.record_all(logged);
        }
        Ok(done)
    }
}
