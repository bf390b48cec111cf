//! The tier a case runs against, built as `src/startup.rs` builds the
//! server's, and the helpers every case shares.
//!
//! A [`Tier`] owns its backend and the temporary directories behind it (the
//! Store's RocksDB directory, the Filesystem tier's root), so they live as
//! long as the case. Cases work below [`Tier::base`], a directory of the
//! mount under test that does not exist until a case writes below it.

use agentvfs::VfsPath;
use agentvfs::backend::branch::Overlay;
use agentvfs::backend::composite::{CompositeBackend, Mount};
use agentvfs::backend::fs::FsBackend;
use agentvfs::backend::object::{
    BucketOptions, Credentials, ObjectBackend, ObjectOptions, RENEW_UPLOADS_AFTER,
};
use agentvfs::backend::state::{StateBackend, StateLimits};
use agentvfs::backend::store::{StoreBackend, StoreOptions};
use agentvfs::backend::{
    Backend, Keep, MoveOutcome, Precondition, UpdateFn, WriteOutcome, check_move_paths,
};
use agentvfs::change::{Change, ChangeCursor, ChangeKind};
use agentvfs::entry::Entry;
use agentvfs::error::{Error, Result};
use agentvfs::history::FileVersion;
use agentvfs::scope::Scope;
use agentvfs::search::{
    Budgets, EVENT_CHANNEL_CAPACITY, GrepRequest, Hit, LineHit, SearchEvent, SearchPart, SearchRun,
    SearchSpec, Summary,
};
use agentvfs::service::{Account, Caller, Files};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

/// Largest file of every tier in the suite: the server's default
/// `max_file_bytes` (64 MiB).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// How long a search waits for the suite to take its events; the suite
/// reads them as fast as they come, so this only bounds a broken search.
const SEARCH_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the default configuration (`src/default.toml`) mounts each tier;
/// the suite mounts them at the same places.
const STATE_MOUNT: &str = "/";
const STORE_MOUNT: &str = "/memories";
const FS_MOUNT: &str = "/workspace";
/// Where the suite mounts the object tier (a bucket of the test process's
/// versitygw, `tests/support/s3.rs`, under a key prefix of its own per case).
const OBJECT_MOUNT: &str = "/shared";

/// The name of the directory, below the mount, in which a case works.
const BASE_NAME: &str = "case";

/// Which kind of tier a case runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// In memory, per session (src/backend/state/).
    State,
    /// RocksDB, per namespace (src/backend/store/).
    Store,
    /// A real directory (src/backend/fs/).
    Filesystem,
    /// An S3 bucket (src/backend/object/), on a real S3 server.
    Object,
}

/// How a case reaches its tier: alone, or through the mount table holding
/// all three kinds (the case then works in the mount of `Kind`).
#[derive(Clone, Copy, Debug)]
pub enum Setup {
    /// The tier on its own, called directly.
    Single(Kind),
    /// A Composite mounting State, Store and Filesystem as the default
    /// configuration does; the case works in the mount of this kind.
    Composite(Kind),
    /// The tier on its own, every call made in a branch forked at its
    /// mount root (docs/branches.md): the overlay over the tier.
    Branch(Kind),
    /// The Composite, every call made in a branch forked at the root of
    /// the mount of this kind.
    CompositeBranch(Kind),
}

/// A backend under test, the scope its calls use and where a case works.
pub struct Tier {
    /// What the case calls: the tier itself or the mount table.
    pub backend: Arc<dyn Backend>,
    /// The default session and namespace of the local principal.
    pub scope: Scope,
    /// The kind of tier owning [`Tier::base`].
    pub kind: Kind,
    /// True when [`Tier::backend`] is the mount table, which answers for
    /// its mount points itself.
    pub composite: bool,
    /// True when every call is made in a branch forked at the mount root
    /// before the case starts ([`Setup::Branch`]): versions of the files
    /// the case writes carry `UPPER_BIT`, and history and changes are the
    /// branch's (docs/branches.md § Working in a branch).
    pub branch: bool,
    /// The mount root of the tier owning [`Tier::base`].
    pub mount: VfsPath,
    /// The directory below which a case works (`{mount}/case`), missing
    /// until the case writes below it.
    pub base: VfsPath,
    /// Mount points directly below [`Tier::mount`] that a listing of it
    /// shows (the Composite's `/memories` and `/workspace` below its State
    /// mount at `/`).
    pub mount_points: Vec<VfsPath>,
    /// Directories are real (Filesystem): they stay when their last file
    /// goes. Otherwise they are implied by the files below them and vanish
    /// with the last one (State, Store).
    pub explicit_directories: bool,
    /// Search honours `.ignore` and `.gitignore` files (the Filesystem
    /// tier, as ripgrep does: src/backend/fs/search.rs). Elsewhere they are
    /// files like any other.
    pub honours_ignore_files: bool,
    /// A rewrite keeps the file's `created` time. The Filesystem tier knows
    /// no creation time and reports the modification time (src/entry.rs).
    pub keeps_created: bool,
    /// Versions come from one counter per tier (State, Store), or from the
    /// clock in µs pushed past the file's own (object tier: on one server a
    /// later change reads a later clock), so every moved file gets a
    /// version above every version handed out before. The
    /// Filesystem tier's versions come from each file's own times
    /// (src/backend/fs/sandbox.rs `version`): a moved file's version grows
    /// past its own and past the file it replaces, and the files inside a
    /// moved directory keep theirs, their content being unchanged.
    pub tier_wide_versions: bool,
    /// The tier keeps past versions and tombstones (State, Store, object);
    /// the Filesystem tier keeps none: every history call is
    /// FAILED_PRECONDITION (src/backend/mod.rs `no_history`).
    pub keeps_history: bool,
    /// The tier keeps a change log (every tier).
    pub keeps_change_log: bool,
    /// The tier applies changesets (`Backend::commit`): every tier.
    pub takes_changesets: bool,
    /// The Store's data directory and the Filesystem tier's root, removed
    /// when the case ends.
    _dirs: Vec<tempfile::TempDir>,
}

/// A parsed logical path; the suite only writes valid ones.
pub fn vpath(raw: &str) -> VfsPath {
    VfsPath::parse(raw).unwrap_or_else(|e| panic!("{raw}: {e}"))
}

/// A fresh tier of `kind` mounted at its default prefix, with the
/// directories that must outlive it.
fn open(kind: Kind) -> (Mount, Option<tempfile::TempDir>) {
    let (backend, tier, dir): (Arc<dyn Backend>, &'static str, _) = match kind {
        Kind::State => {
            let limits = StateLimits {
                max_total_bytes: 1 << 30,
                max_file_bytes: MAX_FILE_BYTES,
                idle_ttl: Duration::from_secs(3600),
                max_sessions: 64,
            };
            let state = StateBackend::new(vpath(STATE_MOUNT), limits, Keep::DEFAULT);
            (Arc::new(state), "state", None)
        }
        Kind::Store => {
            let dir = tempfile::tempdir().expect("temp dir for the store");
            let options = StoreOptions {
                sync: false,
                max_file_bytes: MAX_FILE_BYTES,
                keep: Keep::DEFAULT,
            };
            let store = StoreBackend::open(vpath(STORE_MOUNT), dir.path(), options)
                .expect("open the store");
            (Arc::new(store), "store", Some(dir))
        }
        Kind::Object => {
            let s3 = crate::s3::s3();
            let options = ObjectOptions {
                bucket: BucketOptions {
                    bucket: s3.bucket("contract"),
                    endpoint: Some(s3.endpoint.clone()),
                    region: None,
                    path_style: true,
                    timeout: Duration::from_secs(60),
                    request_timeout: Duration::from_secs(20),
                },
                // Every case in a key space of its own.
                key_prefix: format!("case-{:016x}", rand::random::<u64>()),
                max_file_bytes: MAX_FILE_BYTES,
                cache_bytes: 64 << 20,
                credentials: Some(Credentials {
                    access_key_id: crate::s3::ACCESS_KEY.into(),
                    secret_access_key: crate::s3::SECRET_KEY.into(),
                    session_token: None,
                }),
                renew_uploads_after: RENEW_UPLOADS_AFTER,
                keep: Keep::DEFAULT,
            };
            let object =
                ObjectBackend::open(vpath(OBJECT_MOUNT), options).expect("open the object tier");
            (Arc::new(object), "object", None)
        }
        Kind::Filesystem => {
            // The served root and, beside it, the changeset journal with
            // the branches' directory in it, as `src/startup.rs` opens it.
            let dir = tempfile::tempdir().expect("temp dir for the filesystem root");
            let root = dir.path().join("root");
            std::fs::create_dir(&root).expect("the filesystem root");
            let journal = dir.path().join("journal");
            let fs = FsBackend::open(vpath(FS_MOUNT), &root, MAX_FILE_BYTES, 1000)
                .and_then(|fs| fs.with_journal(&journal))
                .and_then(|fs| fs.with_branches(&journal.join("branches")))
                .expect("open the filesystem root");
            (Arc::new(fs), "filesystem", Some(dir))
        }
    };
    let prefix = vpath(match kind {
        Kind::State => STATE_MOUNT,
        Kind::Store => STORE_MOUNT,
        Kind::Filesystem => FS_MOUNT,
        Kind::Object => OBJECT_MOUNT,
    });
    let mount = Mount {
        prefix,
        backend,
        tier,
    };
    (mount, dir)
}

impl Tier {
    /// Builds the backend of `setup` on fresh storage.
    pub fn new(setup: Setup) -> Tier {
        let (kind, composite, branch) = match setup {
            Setup::Single(kind) => (kind, false, false),
            Setup::Composite(kind) => (kind, true, false),
            Setup::Branch(kind) => (kind, false, true),
            Setup::CompositeBranch(kind) => (kind, true, true),
        };
        let mut dirs = Vec::new();
        let (backend, mount, mount_points): (Arc<dyn Backend>, _, _) = if composite {
            let mut mounts = Vec::new();
            let mut kinds = vec![Kind::State, Kind::Store, Kind::Filesystem];
            if kind == Kind::Object {
                kinds.push(Kind::Object);
            }
            for each in kinds {
                let (mount, dir) = open(each);
                mounts.push(mount);
                dirs.extend(dir);
            }
            let table = CompositeBackend::new(mounts).expect("mount table");
            let mount = table
                .mounts()
                .iter()
                .find(|m| m.tier == tier_name(kind))
                .map(|m| m.prefix.clone())
                .expect("the kind is mounted");
            let below: Vec<VfsPath> = table
                .mounts()
                .iter()
                .filter(|m| m.prefix != mount && m.prefix.parent() == mount)
                .map(|m| m.prefix.clone())
                .collect();
            (Arc::new(table), mount, below)
        } else {
            let (m, dir) = open(kind);
            dirs.extend(dir);
            (m.backend, m.prefix, Vec::new())
        };
        let (backend, scope) = match branch {
            true => fork(backend, &mount),
            false => (backend, Scope::default()),
        };
        let base = mount.join(BASE_NAME).expect("base path");
        Tier {
            backend,
            scope,
            kind,
            composite,
            branch,
            mount,
            base,
            mount_points,
            // In a branch directories are implied by files and a Move
            // writes the moved files anew, on every tier (docs/branches.md
            // § What differs from the base).
            explicit_directories: kind == Kind::Filesystem && !branch,
            honours_ignore_files: kind == Kind::Filesystem,
            keeps_created: kind != Kind::Filesystem,
            tier_wide_versions: kind != Kind::Filesystem || branch,
            keeps_history: kind != Kind::Filesystem,
            keeps_change_log: true,
            takes_changesets: true,
            _dirs: dirs,
        }
    }

    /// `rel` below the base (`""`: the base itself).
    pub fn path(&self, rel: &str) -> VfsPath {
        self.base
            .join_relative(rel)
            .unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// Writes `data` at `rel` with no precondition; the write must succeed.
    pub fn write(&self, rel: &str, data: impl Into<Vec<u8>>) -> WriteOutcome {
        let path = self.path(rel);
        self.backend
            .write(&self.scope, &path, data.into(), Precondition::default())
            .unwrap_or_else(|e| panic!("write {path}: {e}"))
    }

    /// Writes `data` at `rel` under `pre`.
    pub fn write_pre(
        &self,
        rel: &str,
        data: impl Into<Vec<u8>>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        self.backend
            .write(&self.scope, &self.path(rel), data.into(), pre)
    }

    /// Reads the file at `rel`.
    pub fn try_read(&self, rel: &str) -> Result<(Vec<u8>, Entry)> {
        self.backend.read(&self.scope, &self.path(rel))
    }

    /// The content of the file at `rel`, which must exist.
    pub fn content(&self, rel: &str) -> Vec<u8> {
        self.try_read(rel)
            .unwrap_or_else(|e| panic!("read {}: {e}", self.path(rel)))
            .0
    }

    /// Metadata of `rel`.
    pub fn stat(&self, rel: &str) -> Result<Entry> {
        self.backend.stat(&self.scope, &self.path(rel))
    }

    /// The version of the file at `rel`, which must exist.
    pub fn version(&self, rel: &str) -> u64 {
        self.stat(rel)
            .unwrap_or_else(|e| panic!("stat {}: {e}", self.path(rel)))
            .version
    }

    /// One directory level of `rel`.
    pub fn list(&self, rel: &str) -> Result<Vec<Entry>> {
        self.backend.list(&self.scope, &self.path(rel))
    }

    /// The names in the directory `rel`, in listing order, directories
    /// ending with `/`; the listing must succeed.
    pub fn names(&self, rel: &str) -> Vec<String> {
        let dir = self.path(rel);
        let entries = self.list(rel).unwrap_or_else(|e| panic!("list {dir}: {e}"));
        entries
            .iter()
            .map(|e| {
                assert_eq!(e.path.parent(), dir, "{} listed in {dir}", e.path);
                let slash = if e.is_directory() { "/" } else { "" };
                format!("{}{slash}", e.path.name())
            })
            .collect()
    }

    /// Deletes `rel`.
    pub fn delete(&self, rel: &str, if_version: Option<u64>, recursive: bool) -> Result<u64> {
        self.backend
            .delete(&self.scope, &self.path(rel), if_version, recursive)
    }

    /// Runs an atomic read-modify-write of `rel`.
    pub fn update(
        &self,
        rel: &str,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        self.backend
            .update(&self.scope, &self.path(rel), if_version, f)
    }

    /// Moves `source` to `destination` (both below the base) as the
    /// service does: [`check_move_paths`] first, then the tier.
    pub fn rename(
        &self,
        source: &str,
        destination: &str,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        self.rename_paths(&self.path(source), &self.path(destination), pre)
    }

    /// The retained versions of `rel`, newest first.
    pub fn versions(&self, rel: &str) -> Result<Vec<FileVersion>> {
        self.backend.versions(&self.scope, &self.path(rel))
    }

    /// Retained `version` of `rel`: its metadata and whole content.
    pub fn read_version(&self, rel: &str, version: u64) -> Result<(FileVersion, Vec<u8>)> {
        let (found, pieces) =
            self.backend
                .read_version(&self.scope, &self.path(rel), version, 1 << 16)?;
        let mut data = Vec::new();
        for piece in pieces {
            data.extend_from_slice(&piece?);
        }
        Ok((found, data))
    }

    /// Restores `version` of `rel`.
    pub fn restore(
        &self,
        rel: &str,
        version: u64,
        if_version: Option<u64>,
    ) -> Result<WriteOutcome> {
        self.backend
            .restore(&self.scope, &self.path(rel), version, if_version)
    }

    /// A cursor at the head of every log under the base.
    pub fn head(&self) -> ChangeCursor {
        let mut cursor = ChangeCursor::default();
        self.backend
            .watch_head(&self.scope, &self.base, &mut cursor)
            .unwrap_or_else(|e| panic!("watch head of {}: {e}", self.base));
        cursor
    }

    /// Up to `max` changes under the base after `cursor`, moving it.
    pub fn changes(&self, cursor: &mut ChangeCursor, max: usize) -> Result<Vec<Change>> {
        self.backend.changes(&self.scope, &self.base, cursor, max)
    }

    /// Every change under the base after `cursor` (read a few at a time),
    /// as `(kind, path relative to the base)`.
    pub fn drain(&self, cursor: &mut ChangeCursor) -> Vec<(ChangeKind, String)> {
        let mut out = Vec::new();
        loop {
            let before = cursor.clone();
            let page = self
                .changes(cursor, 3)
                .unwrap_or_else(|e| panic!("changes: {e}"));
            if page.is_empty() && before == *cursor {
                return out;
            }
            out.extend(page.into_iter().map(|c| (c.kind, self.rel(&c.path))));
        }
    }

    /// `path` relative to the base.
    pub fn rel(&self, path: &VfsPath) -> String {
        path.relative_to(&self.base)
            .unwrap_or_else(|| panic!("{path} is not below {}", self.base))
            .to_owned()
    }

    /// [`Tier::rename`] with whole logical paths.
    pub fn rename_paths(
        &self,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        check_move_paths(source, destination)?;
        self.backend.rename(&self.scope, source, destination, pre)
    }

    /// A Glob of `pattern` from `rel`.
    pub fn glob(&self, rel: &str, pattern: &str, budgets: Budgets) -> Searched {
        let spec = SearchSpec::glob(self.path(rel), pattern, false, budgets).expect("glob spec");
        self.search(spec)
    }

    /// A Grep of `request` from `rel`.
    pub fn grep(&self, rel: &str, request: GrepRequest<'_>, budgets: Budgets) -> Searched {
        let spec = SearchSpec::grep(self.path(rel), request, budgets).expect("grep spec");
        self.search(spec)
    }

    /// Runs `spec` the way src/server/search_stream.rs does: a
    /// [`SearchRun`] on its own thread over a channel of
    /// [`EVENT_CHANNEL_CAPACITY`], one `Backend::search` over the whole
    /// subtree of the root, then `finish`; the events are taken as they
    /// come.
    pub fn search(&self, spec: SearchSpec) -> Searched {
        let (tx, mut rx) = tokio::sync::mpsc::channel(EVENT_CHANNEL_CAPACITY);
        let backend = self.backend.clone();
        let scope = self.scope.clone();
        let searcher = std::thread::spawn(move || {
            let part = SearchPart::whole(spec.root.clone());
            let run = SearchRun::new(spec, tx, SEARCH_IDLE_TIMEOUT);
            let outcome = backend.search(&scope, &run, &part);
            run.finish(outcome);
        });
        let mut hits = Vec::new();
        let mut end = None;
        while let Some(event) = rx.blocking_recv() {
            assert!(end.is_none(), "an event after the last one: {event:?}");
            match event {
                SearchEvent::Batch(batch) => hits.extend(batch),
                SearchEvent::Summary(summary) => end = Some(Ok(summary)),
                SearchEvent::Failed(err) => end = Some(Err(err)),
            }
        }
        searcher.join().expect("the search thread");
        Searched {
            base: self.base.clone(),
            hits,
            end: end.expect("a search ends with a summary or a failure"),
        }
    }
}

/// The name of the branch every case of a [`Setup::Branch`] works in.
const BRANCH_NAME: &str = "contract";

/// Forks the mount root `mount` of `backend` into a branch as the service
/// does (`Files::create_branch`, docs/branches.md § Fork), by the local
/// principal in the default scope, and answers the overlay every call of
/// the case goes through, with the scope naming the branch.
fn fork(backend: Arc<dyn Backend>, mount: &VfsPath) -> (Arc<dyn Backend>, Scope) {
    let scope = Scope::default();
    let caller = Caller {
        principal: scope.principal.clone(),
        scope: scope.clone(),
        token: None,
        account: Account::unbounded(),
        trail: Default::default(),
    };
    let record = Files::new(backend.as_ref(), &caller, MAX_FILE_BYTES)
        .create_branch(BRANCH_NAME, mount, usize::MAX)
        .unwrap_or_else(|e| panic!("fork {mount}: {e}"));
    let scope = Scope {
        branch: BRANCH_NAME.into(),
        ..scope
    };
    (Arc::new(Overlay::new(backend, record)), scope)
}

/// The name `src/startup.rs` gives a tier of `kind` in the mount table.
fn tier_name(kind: Kind) -> &'static str {
    match kind {
        Kind::State => "state",
        Kind::Store => "store",
        Kind::Filesystem => "filesystem",
        Kind::Object => "object",
    }
}

/// Everything one search sent.
pub struct Searched {
    base: VfsPath,
    /// The results, in the order they came.
    pub hits: Vec<Hit>,
    /// The summary, or the error that ended the search.
    pub end: Result<Summary, Error>,
}

impl Searched {
    /// The summary; the search must have ended with one.
    pub fn summary(&self) -> &Summary {
        match &self.end {
            Ok(summary) => summary,
            Err(err) => panic!("the search failed: {err}"),
        }
    }

    /// Paths of the results relative to the base, in the order they came
    /// (a Grep file split over several pieces appears once per piece).
    pub fn paths(&self) -> Vec<String> {
        self.hits
            .iter()
            .map(|hit| {
                let path = match hit {
                    Hit::Entry(e) => &e.path,
                    Hit::Path { path, .. } => path,
                    Hit::File(f) => &f.path,
                };
                path.relative_to(&self.base)
                    .unwrap_or_else(|| panic!("{path} found outside {}", self.base))
                    .to_owned()
            })
            .collect()
    }

    /// Grep's results per file (relative path, lines), the pieces of one
    /// file joined.
    pub fn files(&self) -> Vec<(String, Vec<LineHit>)> {
        let mut out: Vec<(String, Vec<LineHit>)> = Vec::new();
        for (hit, rel) in self.hits.iter().zip(self.paths()) {
            let Hit::File(file) = hit else {
                panic!("a Grep sent {hit:?}");
            };
            match out.last_mut() {
                Some((last, lines)) if *last == rel => lines.extend(file.lines.iter().cloned()),
                _ => out.push((rel, file.lines.clone())),
            }
        }
        out
    }
}

/// A matching line of Grep output.
pub fn matched(line_number: u64, line: &str, matched: &str) -> LineHit {
    LineHit {
        line_number,
        line: line.into(),
        matched: matched.into(),
        is_context: false,
    }
}

/// A context line of Grep output.
pub fn context(line_number: u64, line: &str) -> LineHit {
    LineHit {
        line_number,
        line: line.into(),
        matched: String::new(),
        is_context: true,
    }
}

/// Asserts that `result` failed with the gRPC `code` and exactly `message`
/// (the error's text, which the status carries).
#[track_caller]
pub fn expect_err<T: Debug>(result: Result<T>, code: Code, message: &str) {
    match result {
        Ok(value) => panic!("expected {code:?} {message:?}, got Ok({value:?})"),
        Err(err) => {
            assert_eq!(
                (err.grpc_code(), err.to_string().as_str()),
                (code, message),
                "{err:?}"
            );
        }
    }
}

/// No precondition.
pub fn any() -> Precondition {
    Precondition::default()
}

/// `create_only`.
pub fn create_only() -> Precondition {
    Precondition {
        create_only: true,
        ..Precondition::default()
    }
}

/// `if_version`.
pub fn if_version(version: u64) -> Precondition {
    Precondition::if_version(Some(version))
}

/// `size` bytes of a pattern that never repeats at a power-of-two period,
/// so a piece reassembled in the wrong place shows.
pub fn pattern(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i % 251) as u8).collect()
}
