//! The `Backend` a call made in a branch goes through: the branch's own
//! changes (its upper scope) over the base, as `branch`'s module doc
//! describes. Paths outside the branch's root read the base as it is and
//! cannot be changed from the branch.

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

    /// Applies `intents` as one commit of the upper scope, with the
    /// whiteouts and base records they need; returns each file's result and
    /// the version it replaced.
    fn apply(
        &self,
        scope: &Scope,
        intents: &[Intent],
    ) -> Result<Vec<(FileCommitted, Option<u64>)>> {
        for intent in intents {
            self.check_changeable(&intent.path)?;
        }
        let (up, base) = (self.upper(scope), self.base(scope));
        'attempt: for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt);
            }
            let mut changes = Vec::new();
            let mut reports = Vec::new();
            for intent in intents {
                let path = &intent.path;
                let found = self.find(scope, path)?;
                let current = found.current();
                match intent.expect {
                    Expect::Pre(pre) => pre.check(path, current)?,
                    Expect::Exactly(seen) if seen != current => {
                        return Err(Error::VersionMismatch {
                            path: path.to_string(),
                            expected: seen.unwrap_or(0),
                            actual: current.unwrap_or(0),
                        });
                    }
                    Expect::Exactly(_) => {}
                }
                let upper_version = found.upper.as_ref().map(|e| e.version);
                let report = changes.len();
                match &intent.action {
                    FileAction::Put { .. } => {
                        if (found.upper_dir || found.base_dir)
                            && self.shows_directory(scope, &found, path)?
                        {
                            return Err(Error::IsDirectory(path.to_string()));
                        }
                        if found.upper_dir && self.clear_bookkeeping(&up, path)? {
                            // Only bookkeeping lay below: cleared, read
                            // again. (Empty directories alone, as a
                            // Filesystem tier keeps them, give way to the
                            // file in its commit.)
                            continue 'attempt;
                        }
                        self.check_parents(scope, path)?;
                        changes.push(FileChange {
                            path: path.clone(),
                            expected: upper_version,
                            action: intent.action.clone(),
                        });
                        let whiteout = sidecar::whiteout(path)?;
                        changes.push(match found.whiteout {
                            Some(v) => FileChange {
                                path: whiteout,
                                expected: Some(v),
                                action: FileAction::Delete { moved_to: None },
                            },
                            None => FileChange {
                                path: whiteout,
                                expected: None,
                                action: FileAction::Check,
                            },
                        });
                        reports.push((report, current, false));
                    }
                    FileAction::Delete { .. } => {
                        if current.is_none() {
                            return Err(Error::NotFound(path.to_string()));
                        }
                        let shadow = match upper_version {
                            Some(_) => intent.action.clone(),
                            None => FileAction::Check,
                        };
                        changes.push(FileChange {
                            path: path.clone(),
                            expected: upper_version,
                            action: shadow,
                        });
                        if found.base_file().is_some() {
                            reports.push((changes.len(), current, true));
                            changes.push(FileChange {
                                path: sidecar::whiteout(path)?,
                                expected: None,
                                action: put(Bytes::new()),
                            });
                        } else {
                            reports.push((report, current, true));
                        }
                    }
                    FileAction::Check => {
                        changes.push(FileChange {
                            path: path.clone(),
                            expected: upper_version,
                            action: FileAction::Check,
                        });
                        reports.push((report, current, false));
                    }
                }
                if !found.based && !matches!(intent.action, FileAction::Check) {
                    let record = match found.base_file() {
                        Some(entry) => BaseRecord {
                            version: Some(entry.version),
                            content: self.inner.read(&base, path)?.0,
                        },
                        None => BaseRecord {
                            version: None,
                            content: Vec::new(),
                        },
                    };
                    changes.push(FileChange {
                        path: sidecar::base(path)?,
                        expected: None,
                        action: put(Bytes::from(record.encode())),
                    });
                }
            }
            if let Some(done) = raced(self.inner.commit(&up, &changes))? {
                {
                    return Ok(intents
                        .iter()
                        .zip(reports)
                        .map(|(intent, (at, previous, deleted))| {
                            let result = &done[at];
                            let version = match intent.action {
                                FileAction::Check => previous.unwrap_or(0),
                                _ => tag(result.version),
                            };
                            let committed = FileCommitted {
                                path: intent.path.clone(),
                                version,
                                size: if deleted { 0 } else { result.size },
                                deleted: deleted || result.deleted,
                            };
                            (committed, previous)
                        })
                        .collect());
                }
            }
        }
        Err(lost(&intents[0].path))
    }

    /// Deletes the bookkeeping the upper scope keeps below `dir`, where the
    /// branch shows nothing, so a file can take the directory's place: base
    /// records of files the branch made and deleted (nothing to merge) go.
    /// The deletion of a base's file must be kept for the merge, so its
    /// whiteout or base record refuses (FAILED_PRECONDITION naming it).
    /// True when something was deleted.
    fn clear_bookkeeping(&self, up: &Scope, dir: &VfsPath) -> Result<bool> {
        let inner = self.inner.as_ref();
        let mut stale = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(below) = stack.pop() {
            let entries = match inner.list(up, &below) {
                Err(Error::NotFound(_) | Error::NotDirectory(_)) => continue,
                other => other?,
            };
            for entry in entries {
                if entry.is_directory() {
                    stack.push(entry.path);
                    continue;
                }
                let kept = match sidecar::based(&entry.path) {
                    Some(_) => BaseRecord::decode(&entry.path, &inner.read(up, &entry.path)?.0)?
                        .version
                        .is_some(),
                    None => true,
                };
                if kept {
                    let file = sidecar::based(&entry.path)
                        .or_else(|| sidecar::whited_out(&entry.path))
                        .unwrap_or(entry.path);
                    return Err(Error::Unsupported(format!(
                        "{dir}: the branch deleted the base's file {file} below it and keeps \
                         that deletion until the branch is merged or discarded; a file cannot \
                         take the directory's place in the branch before then"
                    )));
                }
                stale.push(FileChange {
                    path: entry.path,
                    expected: Some(entry.version),
                    action: FileAction::Delete { moved_to: None },
                });
            }
            if stale.len() > MAX_CHANGESET_FILES {
                return Err(Error::TooLarge(format!(
                    "{dir}: the branch keeps over {MAX_CHANGESET_FILES} records below it"
                )));
            }
        }
        if stale.is_empty() {
            return Ok(false);
        }
        raced(inner.commit(up, &stale)).map(|_| true)
    }

    /// Translates the upper scope's change events into the branch's: a
    /// whiteout made is its file's deletion; base records are bookkeeping.
    fn shown_change(mut change: Change) -> Option<Change> {
        if let Some(file) = sidecar::whited_out(&change.path) {
            if change.kind == ChangeKind::Deleted {
                return None;
            }
            change.path = file;
            change.kind = ChangeKind::Deleted;
            change.size = 0;
        } else if sidecar::based(&change.path).is_some() {
            return None;
        }
        change.version = tag(change.version);
        Some(change)
    }

    /// The part of the branch a Watch of `root` covers (`None`: none, it
    /// reads the base's log alone).
    fn watched_branch_root(&self, root: &VfsPath) -> Option<VfsPath> {
        if self.within(root) {
            Some(root.clone())
        } else if self.record.root.is_within(root) {
            Some(self.record.root.clone())
        } else {
            None
        }
    }

    /// Where a Watch in the branch keeps its place in the base's log of the
    /// branch's mount, beside its place in the mount's log of the branch's
    /// own changes: under a name no mount has (mount prefixes may not use
    /// the reserved `.avfs-`, src/config).
    fn base_log_key(&self) -> Result<VfsPath> {
        let mut key = VfsPath::root().join(BASE_LOG_KEY)?;
        for segment in self.record.mount.segments() {
            key = key.join(segment)?;
        }
        Ok(key)
    }

    /// Up to about `max` changes of the base's logs under `root` that the
    /// branch shows: every change outside the branch's root, and inside it
    /// those of files the branch has not changed (it keeps no base record
    /// of them now; a change to a file the branch changed since is not
    /// shown, the branch's own change is). Changes of the branch's mount
    /// name [`Overlay::base_log_key`] as their log, so a cursor taken after
    /// one moves on in the base's log.
    fn base_changes(
        &self,
        scope: &Scope,
        root: &VfsPath,
        cursor: &mut ChangeCursor,
        max: usize,
    ) -> Result<Vec<Change>> {
        let (mount, key) = (&self.record.mount, self.base_log_key()?);
        cursor.swap(mount, &key);
        let read = self.inner.changes(&self.base(scope), root, cursor, max);
        cursor.swap(mount, &key);
        let page = match read {
            Err(Error::Expired { what, oldest }) => {
                let mut from = ChangeCursor::decode(&oldest)?;
                from.swap(mount, &key);
                from.copy_from(cursor, mount);
                return Err(Error::Expired {
                    what,
                    oldest: from.encode(),
                });
            }
            other => other?,
        };
        // Which of the files these changes name inside the branch's root
        // the branch changed: one batch of base record lookups.
        let inside = |path: &VfsPath| self.within(path) && *path != self.record.root;
        let named: BTreeSet<VfsPath> = page
            .iter()
            .filter(|c| c.log == *mount)
            .flat_map(|c| std::iter::once(&c.path).chain(&c.moved_path))
            .filter(|p| inside(p))
            .cloned()
            .collect();
        let up = self.upper(scope);
        let lookups = named
            .iter()
            .map(|p| Ok(FileRead::entry(up.clone(), sidecar::base(p)?)))
            .collect::<Result<Vec<_>>>()?;
        let found = self.inner.read_files(&lookups)?;
        let touched: HashSet<VfsPath> = named
            .into_iter()
            .zip(found)
            .filter_map(|(path, record)| record.map(|_| path))
            .collect();
        let mut out = Vec::with_capacity(page.len());
        for mut change in page {
            if change.log == *mount {
                if touched.contains(&change.path) {
                    continue;
                }
                if change
                    .moved_path
                    .as_ref()
                    .is_some_and(|p| touched.contains(p))
                {
                    // The move's other end is a file the branch changed,
                    // which this change does not show.
                    change.moved_path = None;
                }
                change.log = key.clone();
            }
            out.push(change);
        }
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
    }
}

impl Backend for Overlay {
    fn list(&self, scope: &Scope, dir: &VfsPath) -> Result<Vec<Entry>> {
        self.confirm()?;
        Ok(self.merged_listing(scope, dir, true)?.entries)
    }

    fn stat(&self, scope: &Scope, path: &VfsPath) -> Result<Entry> {
        self.confirm()?;
        if !self.within(path) || *path == self.record.root {
            return self.inner.stat(&self.base(scope), path);
        }
        let found = self.find(scope, path)?;
        if let Some(entry) = found.upper.clone() {
            return Ok(tagged(entry));
        }
        if let Some(entry) = found.base_file() {
            return Ok(entry.clone());
        }
        if (found.upper_dir || found.base_dir) && self.shows_directory(scope, &found, path)? {
            let base = probe(self.inner.as_ref(), &self.base(scope), path)?;
            let upper = probe(self.inner.as_ref(), &self.upper(scope), path)?;
            if let Some(dir) = base.or(upper) {
                return Ok(dir);
            }
        }
        Err(Error::NotFound(path.to_string()))
    }

    fn read(&self, scope: &Scope, path: &VfsPath) -> Result<(Vec<u8>, Entry)> {
        let base = self.base(scope);
        if !self.within(path) || *path == self.record.root {
            self.confirm()?;
            return self.inner.read(&base, path);
        }
        // The branch's file, whether it changed the path, and the base's
        // file (and a cached record's confirmation, unless it is leased) in
        // one go: on the object tier one round trip (docs/performance.md §
        // Branches). A path the branch never changed shows the base's file.
        // It changed the path if it keeps a base record of it; a tier that
        // keeps traces tells that from the branch's read of the file itself
        // (every change of a path in the branch writes or checks the path in
        // its commit, so leaves a trace, before its base record can be
        // seen; a trace alone, as an aborted commit leaves, only costs the
        // second look below).
        let (up, record) = (self.upper(scope), sidecar::base(path)?);
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt);
            }
            let mut reads = vec![
                FileRead::file(up.clone(), path.clone()),
                FileRead::file(base.clone(), path.clone()),
            ];
            let lease = self.lease();
            let check = match lease {
                Some(_) => None,
                None => self.pending_check()?,
            };
            let checking = check.is_some();
            reads.extend(check);
            let sent = Instant::now();
            let (found, based) = match self.inner.read_files_traced(&reads)? {
                Some((found, traces)) => (found, traces[0]),
                None => {
                    reads.push(FileRead::entry(up.clone(), record.clone()));
                    let mut found = self.inner.read_files(&reads)?;
                    let based = found.pop().flatten().is_some();
                    (found, based)
                }
            };
            let mut found = found.into_iter();
            let (upper, below) = (found.next().flatten(), found.next());
            if checking {
                let registered = found.next().flatten();
                self.confirm_with(registered.as_ref().map(|(data, _)| data.as_slice()), sent)?;
            }
            let shown = match (upper, based) {
                (Some((data, entry)), _) => Shown {
                    file: Some((data, tagged(entry))),
                    deleted: false,
                },
                (None, false) => Shown {
                    file: below.flatten(),
                    deleted: false,
                },
                (None, true) => self.read_changed(&up, &base, path, &record)?,
            };
            if !self.ended_within(lease) {
                continue;
            }
            if let Some(file) = shown.file {
                return Ok(file);
            }
            // No file to read: say what is there. A file that appeared
            // since the look is looked at again, a bounded number of times
            // (it once recursed, unbounded, under a writer that kept
            // creating and deleting the file).
            match self.stat(scope, path) {
                Ok(entry) if entry.is_directory() => {
                    return Err(Error::IsDirectory(path.to_string()));
                }
                Ok(_) if !shown.deleted => {}
                Ok(_) => return Err(Error::NotFound(path.to_string())),
                Err(e) => return Err(e),
            }
        }
        Err(Error::Unavailable(format!(
            "{path} in branch {:?} changed between every look of {MAX_ATTEMPTS}; try again",
            self.record.name
        )))
    }

    /// Outside the branch's root, the base's own admitted read. Within it,
    /// the one-round-trip read of both layers ([`Overlay::read`]), admitted
    /// once it is held: a read in a branch holds up to two versions of the
    /// file before its charge (docs/security.md § Memory no principal is
    /// charged for yet).
    fn read_admitted(
        &self,
        scope: &Scope,
        path: &VfsPath,
        admit: &mut crate::backend::Admit<'_>,
    ) -> Result<(Vec<u8>, Entry)> {
        if !self.within(path) || *path == self.record.root {
            self.confirm()?;
            return self.inner.read_admitted(&self.base(scope), path, admit);
        }
        let (data, entry) = self.read(scope, path)?;
        admit(&entry)?;
        Ok((data, entry))
    }

    fn read_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        max_chunk: usize,
    ) -> Result<(Entry, ChunkReader)> {
        self.confirm()?;
        let base = self.base(scope);
        if !self.within(path) || *path == self.record.root {
            return self.inner.read_chunks(&base, path, max_chunk);
        }
        let entry = self.stat(scope, path)?;
        if entry.is_directory() {
            return Err(Error::IsDirectory(path.to_string()));
        }
        match untag(entry.version) {
            Some(_) => {
                let (entry, chunks) =
                    self.inner
                        .read_chunks(&self.upper(scope), path, max_chunk)?;
                Ok((tagged(entry), chunks))
            }
            None => self.inner.read_chunks(&base, path, max_chunk),
        }
    }

    fn write(
        &self,
        scope: &Scope,
        path: &VfsPath,
        data: Vec<u8>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        self.confirm()?;
        let bytes = data.len() as u64;
        let intent = Intent {
            path: path.clone(),
            expect: Expect::Pre(pre),
            action: FileAction::Put {
                data: Bytes::from(data),
                operation: Operation::Write,
                moved_from: None,
            },
        };
        let (done, previous) = self.apply(scope, &[intent])?.remove(0);
        Ok(WriteOutcome {
            path: path.clone(),
            bytes_written: bytes,
            version: done.version,
            created: previous.is_none(),
        })
    }

    fn update(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        self.confirm()?;
        self.check_changeable(path)?;
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt);
            }
            let (data, entry) = self.read(scope, path)?;
            if let Some(expected) = if_version
                && expected != entry.version
            {
                return Err(Error::VersionMismatch {
                    path: path.to_string(),
                    expected,
                    actual: entry.version,
                });
            }
            let new = f(&data)?;
            let bytes = new.len() as u64;
            let intent = Intent {
                path: path.clone(),
                expect: Expect::Exactly(Some(entry.version)),
                action: FileAction::Put {
                    data: Bytes::from(new),
                    operation: Operation::Edit,
                    moved_from: None,
                },
            };
            let Some(mut done) = raced(self.apply(scope, &[intent]))? else {
                continue;
            };
            return Ok(WriteOutcome {
                path: path.clone(),
                bytes_written: bytes,
                version: done.remove(0).0.version,
                created: false,
            });
        }
        Err(lost(path))
    }

    fn delete(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        self.confirm()?;
        if *path != self.record.root {
            self.check_changeable(path)?;
        } else if !recursive && self.inner.mount_of(path).as_ref() == Some(path) {
            // As the mount table answers for its mount points.
            return Err(mount_point_delete(path));
        }
        let entry = self.stat(scope, path)?;
        if !entry.is_directory() {
            let intent = Intent {
                path: path.clone(),
                expect: Expect::Pre(Precondition {
                    create_only: false,
                    if_version,
                }),
                action: FileAction::Delete { moved_to: None },
            };
            self.apply(scope, &[intent])?;
            return Ok(1);
        }
        check_directory_delete(path, if_version, recursive)?;
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt);
            }
            let intents: Vec<Intent> = self
                .files_below(scope, path)?
                .into_iter()
                .map(|e| Intent {
                    path: e.path,
                    expect: Expect::Exactly(Some(e.version)),
                    action: FileAction::Delete { moved_to: None },
                })
                .collect();
            if let Some(done) = raced(self.apply(scope, &intents))? {
                return Ok(done.len() as u64);
            }
        }
        Err(lost(path))
    }

    fn rename(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        self.confirm()?;
        for end in [source, destination] {
            if *end == self.record.mount {
                return Err(unmovable_mount(end));
            }
            if *end == self.record.root {
                return Err(Error::InvalidArgument(format!(
                    "{end} is the root of branch {:?}; a branch's root cannot be moved",
                    self.record.name
                )));
            }
        }
        self.check_changeable(source)?;
        self.check_changeable(destination)?;
        // A racing change of the same files (another Move of the source)
        // reads everything again: the loser then finds what the winner left.
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt);
            }
            let entry = self.stat(scope, source)?;
            if entry.is_directory() && pre.if_version.is_some() {
                return Err(Error::InvalidArgument(
                    "if_version applies to files, not directories".into(),
                ));
            }
            let target = probe(self, scope, destination)?;
            let refusal = match &target {
                Some(t) if t.is_directory() && !entry.is_directory() => {
                    Some(Error::IsDirectory(destination.to_string()))
                }
                Some(_) if pre.create_only || entry.is_directory() => {
                    Some(Error::AlreadyExists(destination.to_string()))
                }
                _ => None,
            };
            if let Some(refusal) = refusal {
                // A refusal stands for one instant holding both ends as
                // seen: the source unchanged since before the destination
                // was looked at. Else the two looks straddled a change.
                if probe(self, scope, source)?.map(|e| e.version) == Some(entry.version) {
                    return Err(refusal);
                }
                continue;
            }
            if !entry.is_directory() {
                let (data, read) = self.read(scope, source)?;
                if let Some(expected) = pre.if_version
                    && expected != read.version
                {
                    return Err(Error::VersionMismatch {
                        path: source.to_string(),
                        expected,
                        actual: read.version,
                    });
                }
                let intents = [
                    Intent {
                        path: source.clone(),
                        expect: Expect::Exactly(Some(read.version)),
                        action: FileAction::Delete {
                            moved_to: Some(destination.clone()),
                        },
                    },
                    Intent {
                        path: destination.clone(),
                        expect: Expect::Exactly(target.map(|t| t.version)),
                        action: FileAction::Put {
                            data: Bytes::from(data),
                            operation: Operation::Move,
                            moved_from: Some(source.clone()),
                        },
                    },
                ];
                let Some(done) = raced(self.apply(scope, &intents))? else {
                    continue;
                };
                return Ok(MoveOutcome {
                    files_moved: 1,
                    version: done[1].0.version,
                });
            }
            let mut intents = Vec::new();
            let mut bytes = 0;
            for file in self.files_below(scope, source)? {
                let (data, read) = self.read(scope, &file.path)?;
                bytes += data.len();
                if bytes > MAX_MOVE_BYTES {
                    return Err(Error::TooLarge(format!(
                        "{source}: a Move in a branch carries at most {MAX_MOVE_BYTES} bytes"
                    )));
                }
                let Some(moved) = file.path.rebase(source, destination) else {
                    continue;
                };
                intents.push(Intent {
                    path: file.path.clone(),
                    expect: Expect::Exactly(Some(read.version)),
                    action: FileAction::Delete {
                        moved_to: Some(moved.clone()),
                    },
                });
                intents.push(Intent {
                    path: moved,
                    expect: Expect::Exactly(None),
                    action: FileAction::Put {
                        data: Bytes::from(data),
                        operation: Operation::Move,
                        moved_from: Some(file.path),
                    },
                });
            }
            let Some(done) = raced(self.apply(scope, &intents))? else {
                continue;
            };
            return Ok(MoveOutcome {
                files_moved: (done.len() / 2) as u64,
                version: 0,
            });
        }
        Err(lost(source))
    }

    fn mount_of(&self, path: &VfsPath) -> Option<VfsPath> {
        self.inner.mount_of(path)
    }

    fn branch_mounts(&self) -> Vec<VfsPath> {
        self.inner.branch_mounts()
    }

    fn branch_record_lease(&self, mount: &VfsPath) -> std::time::Duration {
        self.inner.branch_record_lease(mount)
    }

    fn commit(&self, scope: &Scope, changes: &[FileChange]) -> Result<Vec<FileCommitted>> {
        self.confirm()?;
        let intents: Vec<Intent> = changes
            .iter()
            .map(|c| Intent {
                path: c.path.clone(),
                expect: Expect::Exactly(c.expected),
                action: c.action.clone(),
            })
            .collect();
        Ok(self
            .apply(scope, &intents)?
            .into_iter()
            .map(|(done, _)| done)
            .collect())
    }

    fn search(&self, scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()> {
        self.confirm()?;
        let base = self.base(scope);
        let (lo, hi) = self.record.root.subtree_range();
        if !part.overlaps_dir(&self.record.root) {
            return self.inner.search(&base, run, part);
        }
        if !self.within(&part.top) {
            // The base before the branch's root, the branch, the base after.
            let before = SearchPart {
                top: part.top.clone(),
                lo: part.lo.clone(),
                hi: lo.clone().min(part.hi.clone()),
            };
            if before.lo < before.hi {
                self.inner.search(&base, run, &before)?;
            }
            let inside = SearchPart {
                top: self.record.root.clone(),
                lo: lo.clone().max(part.lo.clone()),
                hi: hi.clone().min(part.hi.clone()),
            };
            sorted::walk(
                run,
                &mut ViewFiles::new(self, scope, inside.top.clone()),
                &inside,
            )?;
            let after = SearchPart {
                top: part.top.clone(),
                lo: hi.max(part.lo.clone()),
                hi: part.hi.clone(),
            };
            if after.lo < after.hi {
                self.inner.search(&base, run, &after)?;
            }
            return Ok(());
        }
        let top = self.stat(scope, &part.top)?;
        let mut files = ViewFiles::new(self, scope, part.top.clone());
        if top.is_directory() {
            sorted::walk(run, &mut files, part)
        } else {
            sorted::search_one(run, &mut files, top)
        }
    }

    fn versions(&self, scope: &Scope, path: &VfsPath) -> Result<Vec<FileVersion>> {
        self.confirm()?;
        let base = self.base(scope);
        if !self.within(path) {
            return self.inner.versions(&base, path);
        }
        let mut out: Vec<FileVersion> = match self.inner.versions(&self.upper(scope), path) {
            Ok(versions) => versions
                .into_iter()
                .map(|mut v| {
                    v.version = tag(v.version);
                    v
                })
                .collect(),
            Err(Error::NotFound(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        // Once the branch changed the file, the base's versions are its past.
        let touched = !out.is_empty();
        match self.inner.versions(&base, path) {
            Ok(versions) => out.extend(versions.into_iter().map(|mut v| {
                v.current &= !touched;
                v
            })),
            Err(e) if !touched => return Err(e),
            Err(_) => {}
        }
        Ok(out)
    }

    fn read_version(
        &self,
        scope: &Scope,
        path: &VfsPath,
        version: u64,
        max_chunk: usize,
    ) -> Result<(FileVersion, ChunkReader)> {
        self.confirm()?;
        if let Some(upper) = untag(version)
            && self.within(path)
        {
            let (mut v, chunks) = self
                .inner
                .read_version(&self.upper(scope), path, upper, max_chunk)
                .map_err(|e| match e {
                    Error::VersionNotFound { path, .. } => Error::VersionNotFound { path, version },
                    other => other,
                })?;
            v.version = tag(v.version);
            return Ok((v, chunks));
        }
        self.inner
            .read_version(&self.base(scope), path, version, max_chunk)
    }

    fn restore(
        &self,
        scope: &Scope,
        path: &VfsPath,
        version: u64,
        if_version: Option<u64>,
    ) -> Result<WriteOutcome> {
        self.confirm()?;
        self.check_changeable(path)?;
        let (found, chunks) = self.read_version(scope, path, version, 1 << 20)?;
        if found.deleted {
            return Err(restore_of_deletion(path, version));
        }
        let mut data = Vec::new();
        for chunk in chunks {
            data.extend_from_slice(&chunk?);
        }
        let bytes = data.len() as u64;
        let intent = Intent {
            path: path.clone(),
            expect: Expect::Pre(Precondition {
                create_only: false,
                if_version,
            }),
            action: FileAction::Put {
                data: Bytes::from(data),
                operation: Operation::Restore,
                moved_from: None,
            },
        };
        let (done, previous) = self.apply(scope, &[intent])?.remove(0);
        Ok(WriteOutcome {
            path: path.clone(),
            bytes_written: bytes,
            version: done.version,
            created: previous.is_none(),
        })
    }

    fn watch_head(&self, scope: &Scope, root: &VfsPath, cursor: &mut ChangeCursor) -> Result<()> {
        self.confirm()?;
        let Some(branch_root) = self.watched_branch_root(root) else {
            return self.inner.watch_head(&self.base(scope), root, cursor);
        };
        self.inner
            .watch_head(&self.upper(scope), &branch_root, cursor)?;
        let key = self.base_log_key()?;
        cursor.swap(&self.record.mount, &key);
        let head = self.inner.watch_head(&self.base(scope), root, cursor);
        cursor.swap(&self.record.mount, &key);
        head
    }

    fn changes(
        &self,
        scope: &Scope,
        root: &VfsPath,
        cursor: &mut ChangeCursor,
        max: usize,
    ) -> Result<Vec<Change>> {
        self.confirm()?;
        let Some(branch_root) = self.watched_branch_root(root) else {
            return self.inner.changes(&self.base(scope), root, cursor, max);
        };
        // The branch's own changes first. The upper log also holds the
        // bookkeeping's changes, which are not shown: read on until the
        // page is full or the log gives out, so a page is as full as the
        // base's would be.
        let up = self.upper(scope);
        let mut out = Vec::new();
        for _ in 0..MAX_CHANGE_READS {
            let ask = max - out.len();
            let page = self.inner.changes(&up, &branch_root, cursor, ask)?;
            let short = page.len() < ask;
            out.extend(page.into_iter().filter_map(Overlay::shown_change));
            if short || out.len() == max {
                break;
            }
        }
        if out.len() < max {
            out.extend(self.base_changes(scope, root, cursor, max - out.len())?);
        }
        Ok(out)
    }

    fn change_signals(&self, root: &VfsPath, out: &mut Vec<watch::Receiver<u64>>) {
        self.inner.change_signals(root, out)
    }
}
