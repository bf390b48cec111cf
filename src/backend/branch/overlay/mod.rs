//! The `Backend` a call made in a branch goes through: the branch's own
//! changes (its upper scope) over the base, as `branch`'s module doc
//! describes. Paths outside the branch's root read the base as it is and
//! cannot be changed from the branch.

mod apply;
mod backend;

use super::listing::Listing;
use super::sidecar::{self, BaseRecord};
use super::walk::ViewFiles;
use super::{BranchRecord, RecordCache, Registry, UPPER_BIT, no_branch};
use crate::backend::changeset::{FileAction, FileChange, FileCommitted, MAX_CHANGESET_FILES};
use crate::backend::{
    Backend, ChunkReader, FileRead, MoveOutcome, Precondition, UpdateFn, WriteOutcome, backoff,
    check_directory_delete, mount_point_delete, restore_of_deletion, unmovable_mount,
};
use crate::change::{Change, ChangeCursor, ChangeKind, Operation};
use crate::entry::{Entry, EntryKind};
use crate::error::{Error, Result};
use crate::history::FileVersion;
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::{SearchPart, SearchRun, sorted};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tokio::sync::watch;

/// Times a change in a branch is tried against racing writers of the same
/// files before it answers UNAVAILABLE (each retry after a jittered
/// `backoff`, as the object tier's own loops).
const MAX_ATTEMPTS: u32 = 200;
/// Most reads of the upper log one page of a branch's changes takes (each
/// shown change comes with at most two of bookkeeping).
const MAX_CHANGE_READS: usize = 4;
/// The first name of the key a Watch in a branch keeps its place in the
/// base's log under (see [`Overlay::base_log_key`]).
const BASE_LOG_KEY: &str = ".avfs-base-log";
/// Most bytes one Move of a directory in a branch carries (it copies the
/// files it moves into the branch).
const MAX_MOVE_BYTES: usize = 256 << 20;

/// A branch over the backend holding its mount.
pub struct Overlay {
    inner: Arc<dyn Backend>,
    record: BranchRecord,
    /// For a record taken from a cache: how this call may use it.
    cached: Option<Kept>,
}

/// A record taken from a [`RecordCache`], and what this call knows of it.
struct Kept {
    cache: Arc<RecordCache>,
    /// Set once the registry confirmed the record in this call (every call
    /// confirms it first, a Read with the reads of the file's layers,
    /// unless the record is leased).
    confirmed: OnceLock<()>,
    /// The end of the record's lease, when its tier leases records
    /// ([`Backend::branch_record_lease`]): until then a Read may use it
    /// unconfirmed, if the Read ends before it.
    lease_end: Option<Instant>,
    /// Set once this call found the lease over.
    lease_spent: OnceLock<()>,
}

/// The version a file the branch changed shows.
fn tag(version: u64) -> u64 {
    version | UPPER_BIT
}

/// The upper scope's version behind a shown one (`None`: a base version).
fn untag(version: u64) -> Option<u64> {
    (version & UPPER_BIT != 0).then_some(version & !UPPER_BIT)
}

fn tagged(mut entry: Entry) -> Entry {
    if !entry.is_directory() {
        entry.version = tag(entry.version);
    }
    entry
}

/// The entry at a path, with "nothing there" as `None`.
fn probe(backend: &dyn Backend, scope: &Scope, path: &VfsPath) -> Result<Option<Entry>> {
    match backend.stat(scope, path) {
        Ok(entry) => Ok(Some(entry)),
        Err(Error::NotFound(_) | Error::NotDirectory(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// True when a look at a path that found neither the branch's file nor
/// its whiteout, and the base's file at `base_version`, was torn, `kept`
/// being the branch's base record of the path (stored at `record`): the
/// record says the base had that very file when the branch first changed
/// the path, and from then on the branch holds a file or a whiteout there
/// (each change writes one of them in the same commit; a whiteout is left
/// out only where the base has no file), so the look's separate reads
/// straddled a change and must be taken again (docs/linearizability.md §
/// Branch runs). A base file of another version is one the base made
/// since: shown, not torn.
fn torn(record: &VfsPath, kept: &[u8], base_version: u64) -> Result<bool> {
    Ok(BaseRecord::decode(record, kept)?.version == Some(base_version))
}

/// What `look` finds, taken again after a `backoff` while it says it was
/// torn (the last of `MAX_ATTEMPTS` looks is answered as it is).
fn untorn<T>(mut look: impl FnMut() -> Result<(T, bool)>) -> Result<T> {
    let (mut found, mut torn) = look()?;
    let mut attempt = 1;
    while torn && attempt < MAX_ATTEMPTS {
        backoff(attempt);
        (found, torn) = look()?;
        attempt += 1;
    }
    Ok(found)
}

/// What one file path is, layer by layer.
struct Found {
    /// The branch's file there.
    upper: Option<Entry>,
    /// The branch holds a directory there.
    upper_dir: bool,
    /// The version of the branch's whiteout of the base's file.
    whiteout: Option<u64>,
    /// The branch keeps a base record of the path.
    based: bool,
    /// The base's file there (hidden when whited out).
    base: Option<Entry>,
    /// The base holds a directory there.
    base_dir: bool,
}

impl Found {
    /// The base's file, unless the branch deleted it.
    fn base_file(&self) -> Option<&Entry> {
        self.base.as_ref().filter(|_| self.whiteout.is_none())
    }

    /// The version of the file the branch shows (`None`: no file).
    fn current(&self) -> Option<u64> {
        match &self.upper {
            Some(e) => Some(tag(e.version)),
            None => self.base_file().map(|e| e.version),
        }
    }

    /// The executable bit of the file the branch shows (off: no file).
    fn executable(&self) -> bool {
        self.upper
            .as_ref()
            .or(self.base_file())
            .is_some_and(|e| e.executable)
    }

    /// `action` as the branch's layer commits it: a Put that keeps the
    /// replaced file's executable bit names the bit the branch shows, since
    /// the layer itself may not hold the file it replaces.
    fn settled(&self, action: &FileAction) -> FileAction {
        match action {
            FileAction::Put {
                data,
                operation,
                moved_from,
                executable: None,
            } => FileAction::Put {
                data: data.clone(),
                operation: *operation,
                moved_from: moved_from.clone(),
                executable: Some(self.executable()),
            },
            other => other.clone(),
        }
    }
}

/// The file a Read in the branch shows at a path.
struct Shown {
    /// Its content and metadata (`None`: no file).
    file: Option<(Vec<u8>, Entry)>,
    /// The branch deleted the base's file there.
    deleted: bool,
}

/// One file's part of a change made in the branch.
struct Intent {
    path: VfsPath,
    expect: Expect,
    action: FileAction,
}

/// What the file must be at for the change to go on.
enum Expect {
    /// A caller's `create_only` / `if_version`.
    Pre(Precondition),
    /// Exactly this version, as read (`None`: no file).
    Exactly(Option<u64>),
}

impl Overlay {
    /// The branch `record` over `inner`, the backend holding its mount.
    pub fn new(inner: Arc<dyn Backend>, record: BranchRecord) -> Overlay {
        Overlay {
            inner,
            record,
            cached: None,
        }
    }

    /// The branch `record`, as `cache` keeps it, over `inner`: the
    /// registry confirms the record in the first call made (and it is
    /// forgotten when it no longer holds: the branch was discarded, or
    /// forked again, by this server or another).
    pub fn cached(
        inner: Arc<dyn Backend>,
        record: BranchRecord,
        cache: Arc<RecordCache>,
        lease_end: Option<Instant>,
    ) -> Overlay {
        Overlay {
            inner,
            record,
            cached: Some(Kept {
                cache,
                confirmed: OnceLock::new(),
                lease_end,
                lease_spent: OnceLock::new(),
            }),
        }
    }

    /// The registry's read confirming a cached record still pending.
    fn pending_check(&self) -> Result<Option<FileRead>> {
        match &self.cached {
            Some(kept) if kept.confirmed.get().is_none() => {
                Registry::record_read(&self.record).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// The end of the lease a Read may use the record under instead of
    /// confirming it: `None` when the record is not leased, is confirmed
    /// in this call already, or its lease is over.
    fn lease(&self) -> Option<Instant> {
        let kept = self.cached.as_ref()?;
        if kept.confirmed.get().is_some() || kept.lease_spent.get().is_some() {
            return None;
        }
        kept.lease_end.filter(|end| Instant::now() < *end)
    }

    /// True when a Read that used the lease ending at `lease` (if any) ended
    /// within it: every read it made was then answered before any discard
    /// of the branch cleared its changes, since a discard waits a whole
    /// lease after removing the record (docs/branches.md § Discard).
    /// Otherwise the lease is spent, and the Read must be taken again,
    /// confirming the record.
    fn ended_within(&self, lease: Option<Instant>) -> bool {
        match (lease, &self.cached) {
            (Some(end), Some(kept)) if Instant::now() >= end => {
                let _ = kept.lease_spent.set(());
                false
            }
            _ => true,
        }
    }

    /// Confirms a cached record with `found`, what the registry holds now
    /// as a read sent at `sent` found it (NOT_FOUND when the branch is
    /// gone; UNAVAILABLE, to be tried again, when it was forked again
    /// since), and renews its lease from `sent`.
    fn confirm_with(&self, found: Option<&[u8]>, sent: Instant) -> Result<()> {
        let Some(kept) = &self.cached else {
            return Ok(());
        };
        let cache = &kept.cache;
        if Registry::confirms(&self.record, found)? {
            let _ = kept.confirmed.set(());
            let lease = self.inner.branch_record_lease(&self.record.mount);
            if !lease.is_zero() {
                cache.put(&self.record, Some(sent + lease));
            }
            return Ok(());
        }
        cache.forget(&self.record.namespace, &self.record.name);
        match found {
            None => Err(no_branch(&self.record.name)),
            Some(_) => Err(Error::Unavailable(format!(
                "branch {:?} was discarded and forked again while this call began; try again",
                self.record.name
            ))),
        }
    }

    /// Confirms a cached record before a call uses it.
    fn confirm(&self) -> Result<()> {
        let Some(check) = self.pending_check()? else {
            return Ok(());
        };
        let sent = Instant::now();
        let found = self.inner.read_files(&[check])?.pop().flatten();
        self.confirm_with(found.as_ref().map(|(data, _)| data.as_slice()), sent)
    }

    /// The branch served.
    pub fn record(&self) -> &BranchRecord {
        &self.record
    }

    /// The backend holding the branch's mount.
    pub(super) fn inner(&self) -> &dyn Backend {
        self.inner.as_ref()
    }

    /// True when `path` lies in the branch: below its root and on its
    /// mount (a branch forked at `/` does not reach the mounts below it).
    fn within(&self, path: &VfsPath) -> bool {
        path.is_within(&self.record.root)
            && self
                .inner
                .mount_of(path)
                .is_none_or(|mount| mount == self.record.mount)
    }

    fn upper(&self, scope: &Scope) -> Scope {
        self.record.upper_scope(scope)
    }

    fn base(&self, scope: &Scope) -> Scope {
        self.record.base_scope(scope)
    }

    /// Refuses a change to `path` from the branch unless it lies in the
    /// branch and may be a file there.
    fn check_changeable(&self, path: &VfsPath) -> Result<()> {
        if *path == self.record.root {
            // The root is a directory of the base (a fork needs one).
            return Err(Error::IsDirectory(path.to_string()));
        }
        if !self.within(path) {
            return Err(Error::InvalidArgument(format!(
                "{path} is outside branch {:?}, which forks {}: a call in a branch changes \
                 only files below its root",
                self.record.name, self.record.root
            )));
        }
        sidecar::check_writable(path)
    }

    /// Every layer's view of the file path `path` (below the root), taken
    /// again while it is torn (see [`torn`]).
    fn find(&self, scope: &Scope, path: &VfsPath) -> Result<Found> {
        let (up, record) = (self.upper(scope), sidecar::base(path)?);
        untorn(|| {
            let found = self.find_once(scope, path)?;
            let torn = match &found {
                Found {
                    upper: None,
                    upper_dir: false,
                    whiteout: None,
                    based: true,
                    base: Some(entry),
                    ..
                } => {
                    let kept = self
                        .inner
                        .read_files(&[FileRead::file(up.clone(), record.clone())]);
                    match kept?.pop().flatten() {
                        Some((kept, _)) => torn(&record, &kept, entry.version)?,
                        None => false,
                    }
                }
                _ => false,
            };
            Ok((found, torn))
        })
    }

    /// The file the branch shows at `path`, which it changed (it keeps the
    /// base record `record` of it): its own, or the base's unless it deleted
    /// that. One batch of reads, taken again while
    /// torn (see [`torn`]).
    fn read_changed(
        &self,
        up: &Scope,
        base: &Scope,
        path: &VfsPath,
        record: &VfsPath,
    ) -> Result<Shown> {
        let reads = [
            FileRead::file(up.clone(), path.clone()),
            FileRead::entry(up.clone(), sidecar::whiteout(path)?),
            FileRead::file(base.clone(), path.clone()),
            FileRead::file(up.clone(), record.clone()),
        ];
        untorn(|| {
            let mut found = self.inner.read_files(&reads)?.into_iter();
            let mut next = || found.next().flatten();
            let (upper, whiteout, below, kept) = (next(), next(), next(), next());
            if let Some((data, entry)) = upper {
                let file = Some((data, tagged(entry)));
                return Ok((
                    Shown {
                        file,
                        deleted: false,
                    },
                    false,
                ));
            }
            if whiteout.is_some() {
                return Ok((
                    Shown {
                        file: None,
                        deleted: true,
                    },
                    false,
                ));
            }
            let torn = match (&below, &kept) {
                (Some((_, entry)), Some((kept, _))) => torn(record, kept, entry.version)?,
                _ => false,
            };
            let file = below;
            Ok((
                Shown {
                    file,
                    deleted: false,
                },
                torn,
            ))
        })
    }

    /// One look at every layer of `path`: separate reads, so possibly torn.
    fn find_once(&self, scope: &Scope, path: &VfsPath) -> Result<Found> {
        let (up, base) = (self.upper(scope), self.base(scope));
        let inner = self.inner.as_ref();
        let upper = probe(inner, &up, path)?;
        let whiteout = probe(inner, &up, &sidecar::whiteout(path)?)?.map(|e| e.version);
        let based = probe(inner, &up, &sidecar::base(path)?)?.is_some();
        let below = probe(inner, &base, path)?;
        Ok(Found {
            upper_dir: upper.as_ref().is_some_and(Entry::is_directory),
            upper: upper.filter(|e| !e.is_directory()),
            whiteout,
            based,
            base_dir: below.as_ref().is_some_and(Entry::is_directory),
            base: below.filter(|e| !e.is_directory()),
        })
    }

    /// True when the branch shows a directory at `dir`.
    fn shows_directory(&self, scope: &Scope, found: &Found, dir: &VfsPath) -> Result<bool> {
        if !found.upper_dir {
            return Ok(found.base_dir);
        }
        self.shows_entries(scope, dir)
    }

    /// True when the branch lists something in `dir` (a directory of the
    /// upper scope holding only bookkeeping shows nothing).
    fn shows_entries(&self, scope: &Scope, dir: &VfsPath) -> Result<bool> {
        match self.list(scope, dir) {
            Ok(entries) => Ok(!entries.is_empty()),
            Err(Error::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Refuses a file at `path` when one of its parents (below the root) is a
    /// file in the branch, or a symbolic link (a Filesystem mount's: a write
    /// never goes through one there, so a branch's would not merge) or one
    /// the caller may not follow.
    fn check_parents(&self, scope: &Scope, path: &VfsPath) -> Result<()> {
        let mut dir = path.parent();
        while dir != self.record.root && self.within(&dir) {
            match self.stat(scope, &dir) {
                Ok(entry) if entry.is_directory() => {}
                Ok(Entry {
                    kind: EntryKind::Symlink { .. },
                    ..
                }) => {
                    return Err(Error::PermissionDenied(format!(
                        "{path}: {dir} is a symbolic link, which a write never goes through"
                    )));
                }
                Ok(_) => return Err(Error::NotDirectory(dir.to_string())),
                Err(e @ Error::PermissionDenied(_)) => return Err(e),
                Err(_) => {}
            }
            dir = dir.parent();
        }
        Ok(())
    }

    /// What the branch shows in `dir` (the base's listing outside the
    /// branch's root or mount): one listing of
    /// the base's directory, then one of the branch's, merged. The base is
    /// listed first, so a name the branch's listing shows no change of was
    /// untouched by the branch from the base's listing until the branch's:
    /// a base file listed with it is one the branch showed then (what
    /// [`Overlay::read_listed`] relies on). With `prune`, a directory of the
    /// branch holding only bookkeeping is left out, as `list` answers; a
    /// search's walk passes `false` and finds no file below it instead.
    pub(super) fn merged_listing(
        &self,
        scope: &Scope,
        dir: &VfsPath,
        prune: bool,
    ) -> Result<Listing> {
        let below = self.inner.list(&self.base(scope), dir);
        if !self.within(dir) {
            return Ok(Listing {
                entries: below?,
                based: HashSet::new(),
            });
        }
        let upper = match self.inner.list(&self.upper(scope), dir) {
            Ok(entries) => Some(entries),
            Err(Error::NotFound(_) | Error::NotDirectory(_)) => None,
            Err(e) => return Err(e),
        };
        let below = match below {
            Ok(entries) => Some(entries),
            Err(Error::NotFound(_)) => None,
            Err(Error::NotDirectory(_)) if upper.is_none() => {
                return match self.stat(scope, dir) {
                    Ok(_) => Err(Error::NotDirectory(dir.to_string())),
                    Err(e) => Err(e),
                };
            }
            Err(Error::NotDirectory(_)) => None,
            Err(e) => return Err(e),
        };
        if upper.is_none() && below.is_none() {
            return match self.stat(scope, dir) {
                Ok(_) => Err(Error::NotDirectory(dir.to_string())),
                Err(e) => Err(e),
            };
        }
        let base_lists = below.is_some();
        let upper = upper.unwrap_or_default();
        let whiteouts: HashSet<VfsPath> = upper
            .iter()
            .filter_map(|e| sidecar::whited_out(&e.path))
            .collect();
        let based: HashSet<VfsPath> = upper
            .iter()
            .filter_map(|e| sidecar::based(&e.path))
            .collect();
        let mut shown: BTreeMap<Vec<u8>, Entry> = BTreeMap::new();
        for entry in below.unwrap_or_default() {
            if entry.is_directory() || !whiteouts.contains(&entry.path) {
                shown.insert(entry.path.order_key(), entry);
            }
        }
        let mut merged_dirs = Vec::new();
        for entry in upper {
            if sidecar::is_reserved(entry.path.name()) {
                continue;
            }
            if entry.is_directory() {
                merged_dirs.push(entry.path.clone());
                shown.entry(entry.path.order_key()).or_insert(entry);
            } else {
                shown.insert(entry.path.order_key(), tagged(entry));
            }
        }
        for dir in merged_dirs.into_iter().filter(|_| prune) {
            // A mount below the branch's root lists as the mount table
            // shows it.
            if self.within(&dir) && !self.shows_entries(scope, &dir)? {
                shown.remove(&dir.order_key());
            }
        }
        if shown.is_empty() && !base_lists && *dir != self.record.root {
            // The upper scope holds only bookkeeping here (the files the
            // branch made below are gone): no directory, as on the base.
            return Err(Error::NotFound(dir.to_string()));
        }
        Ok(Listing {
            entries: shown.into_values().collect(),
            based,
        })
    }

    /// The content of `entry`, a file of `listing` (as
    /// [`Overlay::merged_listing`] gave it): one read of the layer the
    /// listing found it in, where that read shows what the branch showed
    /// at the listing or shows now (the branch's own file; the base's file
    /// at the listed version, of a name the branch had not changed). Else,
    /// the file changed since or the branch keeps a base record of it, a
    /// full [`Backend::read`] with its torn-look checks.
    pub(super) fn read_listed(
        &self,
        scope: &Scope,
        listing: &Listing,
        entry: &Entry,
    ) -> Result<Vec<u8>> {
        let path = &entry.path;
        let upper = untag(entry.version).is_some();
        if upper || !listing.based.contains(path) {
            let layer = match upper {
                true => self.upper(scope),
                false => self.base(scope),
            };
            let read = FileRead::file(layer, path.clone());
            if let Some((data, found)) = self.inner.read_files(&[read])?.pop().flatten()
                && (upper || found.version == entry.version)
            {
                return Ok(data);
            }
        }
        self.read(scope, path).map(|(data, _)| data)
    }

    /// Every file the branch shows below `dir`, in path order.
    fn files_below(&self, scope: &Scope, dir: &VfsPath) -> Result<Vec<Entry>> {
        let mut out = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(dir) = stack.pop() {
            let entries = self.list(scope, &dir)?;
            for entry in entries.into_iter().rev() {
                if entry.is_directory() {
                    stack.push(entry.path);
                } else {
                    out.push(entry);
                }
            }
            if out.len() > MAX_CHANGESET_FILES / 3 {
                return Err(Error::TooLarge(format!(
                    "{dir}: a change in a branch touches at most {} files at once",
                    MAX_CHANGESET_FILES / 3
                )));
            }
        }
        out.sort_by_key(|e| e.path.order_key());
        Ok(out)
    }
}

/// `Ok(None)` when `result` lost a race with another writer (the caller
/// reads again and retries), else the result.
fn raced<T>(result: Result<T>) -> Result<Option<T>> {
    match result {
        Ok(done) => Ok(Some(done)),
        Err(Error::VersionMismatch { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The error of a change in a branch that lost every race it ran.
fn lost(path: &VfsPath) -> Error {
    Error::Unavailable(format!(
        "a change of {path} in a branch lost {MAX_ATTEMPTS} races with other writers of the \
         same files; try again"
    ))
}

/// A sidecar's write.
fn put(data: Bytes) -> FileAction {
    FileAction::Put {
        data,
        operation: Operation::Write,
        moved_from: None,
        executable: None,
    }
}
