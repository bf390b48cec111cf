//! The object tier: persistent, namespaced files in an S3-compatible
//! bucket, shared by every agentvfs server that mounts it
//! (docs/object-storage.md).
//!
//! Where it sits: the mount table routes calls for its prefix here, on a
//! blocking thread; each call composes its S3 requests through [`Bucket`]
//! (`object_store`'s S3 client on the tier's own runtime, every call bounded
//! by the mount's timeout).
//!
//! Model (see `keys`, `head`): a file is a **head** object, never removed,
//! holding its state (live, deleted, moved away, absent, or the destination
//! of a Move in flight) and, when live, its record (`backend::record`:
//! version, size, times, who made it, and the content when at most 64 KiB);
//! larger content is a **blob** the head names, uploaded before the head
//! commits. Directories are implied by the live heads below them.
//!
//! Invariants, across every server on the bucket:
//! - every outcome is decided by one conditional put of a head on the ETag
//!   read (`If-None-Match` where no head was): `create_only`, `if_version`,
//!   deletes, moves and edits hold across servers, a change never erases
//!   one it did not see, and nothing rests on `DELETE` honouring a
//!   precondition (stores differ there); only keys no writer can race are
//!   deleted (`commit`, `moves`, `delete`);
//! - a head's bytes hold its version and a random fence, so its ETag names
//!   exactly one state (an ETag alone repeats when content does);
//! - versions only grow: a new version is `max(floor + 1, now in µs)`, the
//!   floor being every version the head has held or would hold;
//! - a Move commits by one put of its source's head; until then its
//!   destination reads as it was, and a move that fails leaves both as they
//!   were (`moves`);
//! - with a change log (`log`), a change's record, the successor mark of
//!   the change it replaces and the past version it replaces are written
//!   before its head's put, so an acknowledged change always has them;
//! - a blob is written before the head that names it and never changed.
//!
//! Files by protocol: `commit` (how any head changes), `changeset`
//! (several heads at once, decided by one record), `write` (Write,
//! WriteBytes, Edit, Restore), `delete`, `moves`, `read` (reads and
//! listings), `walk` (search), `history`, `log` (the change feed),
//! `state` (what a path holds, a move in flight resolved), `sweep`
//! (orphans), `deployment` (bucket sharing), `head` and `keys` (formats),
//! `bucket` (S3), `metered` (its requests counted), `cache`.
//!
//! Errors: as the other tiers' for file semantics (docs/contract.md);
//! UNAVAILABLE or DEADLINE_EXCEEDED naming the store when it cannot be
//! reached or is too slow (`bucket`).

mod bucket;
mod cache;
mod catalog;
mod changeset;
mod check;
mod commit;
mod credentials;
mod delete;
mod deployment;
mod head;
mod history;
mod keys;
mod log;
mod metered;
mod moves;
mod read;
mod state;
mod sweep;
mod table;
mod walk;
mod write;

pub use bucket::BucketOptions;
pub use cache::DEFAULT_CACHE_BYTES;
pub use credentials::{Credentials, parse as parse_credentials};
pub use keys::ObjectKeys;

use super::record::nanos;
use super::{
    Backend, ChunkReader, ChunkSource, Keep, MoveOutcome, Precondition, UpdateFn, WriteOutcome,
    backoff,
};
use crate::change::{Change, ChangeCursor, LogPosition, Operation, Origin};
use crate::entry::Entry;
use crate::error::{Error, Result};
use crate::history::FileVersion;
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::index::check::{IndexUse, spawn_check};
use crate::search::index::file_keeper::FileKeeper;
use crate::search::index::persist::Keeper;
use crate::search::index::written::{StreamCopy, WriteLearning};
use crate::search::index::{IndexSettings, Registry};
use crate::search::{SearchPart, SearchRun};
use bucket::Bucket;
use cache::ContentCache;
use futures_util::{StreamExt, TryStreamExt};
use state::Store;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Heads fetched at once for a listing or a search.
const FETCH_CONCURRENCY: usize = 32;
/// Keys of a directory tree a recursive delete or a directory move holds
/// at once (one S3 list page).
const TREE_PAGE: usize = 1000;
/// Most attempts of one read-modify-write that keeps losing races.
const MAX_ATTEMPTS: u32 = 200;
/// Bytes per piece when a blob is read for ReadBytes.
const BLOB_PIECE_BYTES: u64 = 1 << 20;
/// How often a server with watchers looks for other servers' changes.
const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// How long a server trusts a branch record it confirmed, for Reads in the
/// branch ([`Backend::branch_record_lease`]): a Read in a branch then sends
/// one GET fewer (docs/performance.md § Branches), at the price of every
/// discard on this tier waiting this long.
const BRANCH_RECORD_LEASE: Duration = Duration::from_millis(500);

/// Settings of an object mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectOptions {
    /// The bucket and how to reach it.
    pub bucket: BucketOptions,
    /// Prepended to every key: several deployments can share a bucket, at
    /// prefixes that do not nest.
    pub key_prefix: String,
    /// Largest file accepted.
    pub max_file_bytes: u64,
    /// Bytes of the per-server content cache.
    pub cache_bytes: u64,
    /// Keys to sign with; `None`: the standard AWS environment variables,
    /// else the AWS files (`credentials`).
    pub credentials: Option<Credentials>,
    /// An upload that took longer is copied to a fresh blob before its head
    /// commits ([`RENEW_UPLOADS_AFTER`] in a server).
    pub renew_uploads_after: Duration,
    /// History and change log kept.
    pub keep: Keep,
}

/// S3 dates a multipart object from the start of its upload: a blob that
/// took half the sweep's grace to upload is renewed (copied, so dated now)
/// before its head commits, or the sweep could take it first.
pub const RENEW_UPLOADS_AFTER: Duration = Duration::from_secs(sweep::GRACE.as_secs() / 2);

/// The S3-backed, per-namespace tier. A clone shares everything (a
/// self-check walks one on its own thread).
#[derive(Clone)]
pub struct ObjectBackend {
    keys: ObjectKeys,
    bucket: Arc<Bucket>,
    cache: Arc<ContentCache>,
    max_file_bytes: u64,
    renew_uploads_after: Duration,
    keep: Keep,
    /// This server run's change logs (`None`: the mount keeps none).
    log: Option<Arc<log::LogWriter>>,
    /// What readers of the logs share.
    feed: Arc<log::Feed>,
    /// What searches know of each namespace's keys between them.
    catalogs: Arc<catalog::Catalogs>,
    /// The search index of each namespace (docs/search-index.md § The
    /// object tier).
    index: Arc<Registry>,
}

/// The version after `floor`: larger than it, and than the clock in µs.
fn next_version(floor: u64) -> u64 {
    (floor + 1).max(nanos(SystemTime::now()) / 1_000)
}

/// A random blob id (never 0, which marks inline content).
fn blob_id() -> u64 {
    rand::random::<u64>().max(1)
}

impl ObjectBackend {
    /// Opens the object tier of `options` mounted at `mount`: checks that
    /// the bucket answers and accepts the credentials, and claims the key
    /// prefix (a wrong bucket or key, or a prefix nested in another
    /// deployment's, fails here, at start-up, not at the first call).
    pub fn open(mount: VfsPath, options: ObjectOptions) -> Result<ObjectBackend> {
        let credentials = match options.credentials {
            Some(given) => Some(given),
            None => credentials::from_files()?,
        };
        let bucket = Arc::new(Bucket::open(&options.bucket, credentials.as_ref())?);
        let keys = ObjectKeys::new(mount.clone(), &options.key_prefix);
        let client = bucket.client();
        let (name, prefix) = (options.bucket.bucket.clone(), keys.root().to_owned());
        bucket
            .run("checking the bucket", async move {
                deployment::claim(&client, &name, &prefix).await
            })
            .map_err(|e| match e.kind() {
                Error::Unavailable(why) | Error::Timeout(why) => Error::Unavailable(why.clone()),
                other => other.clone(),
            })?;
        tracing::info!(mount = %mount, bucket = bucket.shown(), "opened object store");
        let tier = ObjectBackend {
            keys,
            bucket,
            cache: Arc::new(ContentCache::new(options.cache_bytes)),
            max_file_bytes: options.max_file_bytes,
            renew_uploads_after: options.renew_uploads_after,
            keep: options.keep,
            log: (options.keep.changes > 0)
                .then(|| Arc::new(log::LogWriter::new(options.keep.changes))),
            feed: Arc::new(log::Feed::default()),
            // A change's record and its head's put are at most one call
            // apart (each bounded by the mount's deadline, and a request
            // sent just before it by the request timeout), plus clock skew.
            catalogs: Arc::new(catalog::Catalogs::new(
                options.bucket.timeout + options.bucket.request_timeout + Duration::from_secs(10),
            )),
            index: Arc::new(Registry::new(IndexSettings::default(), None)),
        };
        tier.sweep_now_and_then()?;
        tier.poll_while_watched()?;
        Ok(tier)
    }

    /// The tier with its search index set up as `[search]` says, each
    /// namespace's kept across restarts in a file of `dir` (the server's
    /// data directory) when given: docs/search-index.md § Persistence in
    /// files.
    pub fn with_search_index(
        mut self,
        settings: IndexSettings,
        dir: Option<&std::path::Path>,
    ) -> ObjectBackend {
        // Without the path table: its position is in a catalog of this
        // process (`catalog::Fresh::at`), so a saved one would never be
        // walked.
        let keeper =
            dir.map(|dir| Arc::new(FileKeeper::new(dir.to_owned(), false)) as Arc<dyn Keeper>);
        self.index = Arc::new(Registry::new(settings, keeper));
        self
    }

    /// What the namespace `ns`'s search index may learn of `data`, about
    /// to be written, with a copy of `data` for it to learn once the write
    /// commits ([`WriteOutcome::teach`]): taken before the upload consumes
    /// `data`, for small files only, so the copy costs little beside the
    /// PUT, and none where nothing learns.
    fn copy_to_learn(&self, ns: &str, data: &[u8]) -> Option<(WriteLearning<'_>, Vec<u8>)> {
        let learning = self.index.write_learning(ns)?;
        learning
            .takes(data.len() as u64)
            .then(|| (learning, data.to_vec()))
    }

    /// The tier's view of its bucket for futures it runs.
    fn store(&self) -> Store {
        Store {
            client: self.bucket.client(),
            cache: self.cache.clone(),
            keys: self.keys.clone(),
        }
    }

    /// This run's log id (0: no log kept).
    fn own_log(&self) -> u64 {
        self.log.as_ref().map_or(0, |log| log.id())
    }

    /// Sweeps orphans in the background, now and every
    /// [`sweep::SWEEP_INTERVAL`]; the task ends with the tier.
    fn sweep_now_and_then(&self) -> Result<()> {
        let (store, own) = (self.store(), self.own_log());
        self.bucket.spawn::<()>(async move {
            loop {
                match sweep::sweep(&store, sweep::GRACE, own).await {
                    Ok(0) => {}
                    Ok(deleted) => tracing::info!(deleted, "swept orphan blobs"),
                    Err(err) => tracing::warn!(cause = %err, "the orphan sweep failed"),
                }
                tokio::time::sleep(sweep::SWEEP_INTERVAL).await;
            }
        })?;
        Ok(())
    }

    /// Wakes this server's watchers every [`POLL_INTERVAL`] while there are
    /// any, so they see what other servers wrote (this server's own changes
    /// wake them at once).
    fn poll_while_watched(&self) -> Result<()> {
        if self.log.is_none() {
            return Ok(());
        }
        let feed = Arc::downgrade(&self.feed);
        self.bucket.spawn::<()>(async move {
            loop {
                tokio::time::sleep(POLL_INTERVAL).await;
                let Some(feed) = feed.upgrade() else {
                    return Ok(());
                };
                if feed.watched() {
                    feed.bump();
                }
            }
        })?;
        Ok(())
    }

    /// Sweeps once, now, taking orphan blobs older than `grace`; returns
    /// how many it deleted.
    pub fn sweep_orphans(&self, grace: Duration) -> Result<u64> {
        let (store, own) = (self.store(), self.own_log());
        self.run("sweeping orphan blobs", async move {
            sweep::sweep(&store, grace, own).await
        })
    }

    /// The keys of `ns` from its catalog, brought up to date with the change
    /// logs, with what changed after `since` (`None`: no change log, or too
    /// many keys: list the bucket).
    fn fresh_catalog(
        &self,
        ns: &str,
        since: Option<LogPosition>,
    ) -> Result<Option<catalog::Fresh>> {
        if self.log.is_none() {
            return Ok(None);
        }
        let (store, catalogs, ns) = (self.store(), self.catalogs.clone(), ns.to_owned());
        self.run("reading the change logs", async move {
            catalogs.fresh(&store, &ns, since).await
        })
    }

    /// Prunes this run's log of `ns` through record `through`, in the
    /// background.
    fn prune_log(&self, ns: &str, through: u64) {
        let (store, ns, own) = (self.store(), ns.to_owned(), self.own_log());
        let pruned = self
            .bucket
            .spawn(async move { log::prune(&store, &ns, own, through).await.map(|_| ()) });
        if let Err(err) = pruned {
            tracing::warn!(cause = %err, "the change log is left to the next prune");
        }
    }

    fn namespace<'s>(&self, scope: &'s Scope) -> Result<&'s str> {
        Scope::check_stored_name("namespace", &scope.namespace)?;
        Ok(&scope.namespace)
    }

    /// The head key of a file to change: the mount root is a directory.
    fn file_key(&self, ns: &str, path: &VfsPath) -> Result<String> {
        if path == &self.keys.mount {
            return Err(Error::IsDirectory(path.to_string()));
        }
        self.keys.head(ns, path)
    }

    /// Runs one S3 step on the tier's runtime (see [`Bucket::run`]).
    fn run<T: Send + 'static>(
        &self,
        what: &str,
        work: impl std::future::Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        self.bucket.run(what, work)
    }
}

impl ObjectBackend {
    /// The heads of `reads`, fetched at once: each file, and whether a head
    /// with no file is there (a trace, [`Backend::read_files_traced`]).
    fn read_heads(&self, reads: &[super::FileRead]) -> Result<super::TracedReads> {
        let mut asked = Vec::with_capacity(reads.len());
        for super::FileRead { scope, path, .. } in reads {
            let ns = self.namespace(scope)?.to_owned();
            let key = (path != &self.keys.mount)
                .then(|| self.keys.head(&ns, path))
                .transpose()?;
            asked.push((ns, key));
        }
        let store = self.store();
        let keys: Vec<(String, Option<String>)> = asked.clone();
        let heads = self.run("reading files", async move {
            let store = &store;
            // At most FETCH_CONCURRENCY requests at once, in order: a
            // Watch page in a branch looks up a base record per change.
            futures_util::stream::iter(keys)
                .map(|(ns, key)| async move {
                    match key {
                        Some(key) => {
                            let now = store.now(&ns, &key).await?;
                            let trace = now.head.is_some() && now.file().is_none();
                            Ok((now.file().cloned(), trace))
                        }
                        None => Ok((None, false)),
                    }
                })
                .buffered(FETCH_CONCURRENCY)
                .try_collect::<Vec<_>>()
                .await
        })?;
        let mut out = Vec::with_capacity(reads.len());
        let mut traces = Vec::with_capacity(reads.len());
        for ((read, (ns, _)), (head, trace)) in reads.iter().zip(&asked).zip(heads) {
            traces.push(trace);
            let path = &read.path;
            out.push(match head {
                Some(file) => Some((
                    match read.content {
                        true => self.content(ns, path, &file)?.to_vec(),
                        false => Vec::new(),
                    },
                    super::ordered::file_entry(path.clone(), &file.meta),
                )),
                None => None,
            });
        }
        Ok((out, traces))
    }
}

impl Backend for ObjectBackend {
    fn list(&self, scope: &Scope, dir: &VfsPath) -> Result<Vec<Entry>> {
        self.list_dir(self.namespace(scope)?, dir)
    }

    fn stat(&self, scope: &Scope, path: &VfsPath) -> Result<Entry> {
        let ns = self.namespace(scope)?;
        match self.file(ns, path)? {
            Some(file) => Ok(super::ordered::file_entry(path.clone(), &file.meta)),
            None => self.lookup_missing(ns, path),
        }
    }

    fn read(&self, scope: &Scope, path: &VfsPath) -> Result<(Vec<u8>, Entry)> {
        self.read_admitted(scope, path, &mut |_| Ok(()))
    }

    /// The head, admitted, then its content (inline, or the blob through
    /// the content cache).
    fn read_admitted(
        &self,
        scope: &Scope,
        path: &VfsPath,
        admit: &mut super::Admit<'_>,
    ) -> Result<(Vec<u8>, Entry)> {
        let ns = self.namespace(scope)?;
        let Some(file) = self.file(ns, path)? else {
            return Err(self.not_a_file(ns, path));
        };
        let entry = super::ordered::file_entry(path.clone(), &file.meta);
        admit(&entry)?;
        let data = self.content(ns, path, &file)?;
        Ok((data.to_vec(), entry))
    }

    /// The heads in one round trip (their GETs at once), then the blobs
    /// of the large files found.
    fn read_files(&self, reads: &[super::FileRead]) -> Result<super::FilesRead> {
        Ok(self.read_heads(reads)?.0)
    }

    fn read_files_traced(&self, reads: &[super::FileRead]) -> Result<Option<super::TracedReads>> {
        self.read_heads(reads).map(Some)
    }

    fn read_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        max_chunk: usize,
    ) -> Result<(Entry, ChunkReader)> {
        let ns = self.namespace(scope)?;
        let Some(file) = self.file(ns, path)? else {
            return Err(self.not_a_file(ns, path));
        };
        let entry = super::ordered::file_entry(path.clone(), &file.meta);
        Ok((entry, self.pieces(ns, path, &file, max_chunk)?))
    }

    fn write(
        &self,
        scope: &Scope,
        path: &VfsPath,
        data: Vec<u8>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        Error::check_file_size(path, data.len() as u64, self.max_file_bytes)?;
        let ns = self.namespace(scope)?;
        self.file_key(ns, path)?;
        let origin = Origin::of(scope, Operation::Write);
        let (learning, copy) = self.copy_to_learn(ns, &data).unzip();
        let content = self.new_content(ns, path, data)?;
        let outcome = self.put_content(scope, path, pre, content, &origin)?;
        outcome.teach(learning, copy);
        Ok(outcome)
    }

    fn write_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<WriteOutcome> {
        let ns = self.namespace(scope)?;
        self.file_key(ns, path)?;
        // Fail before taking in megabytes when a condition cannot hold; the
        // commit checks again.
        if pre != Precondition::default() {
            pre.check(path, self.file(ns, path)?.map(|f| f.meta.version))?;
        }
        let learning = self.index.write_learning(ns);
        let mut copying = StreamCopy::new(pieces, learning.as_ref());
        let content = self.upload(ns, path, &mut copying)?;
        let copied = copying.whole();
        let origin = Origin::of(scope, Operation::Write);
        let outcome = self.put_content(scope, path, pre, content, &origin)?;
        outcome.teach(learning, copied);
        Ok(outcome)
    }

    fn update(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        self.edit(scope, path, if_version, f)
    }

    fn delete(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        self.remove(scope, path, if_version, recursive)
    }

    fn rename(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        self.move_path(scope, source, destination, pre)
    }

    fn commit(
        &self,
        scope: &Scope,
        changes: &[super::FileChange],
    ) -> Result<Vec<super::FileCommitted>> {
        self.commit_changes(scope, changes)
    }

    fn branch_mounts(&self) -> Vec<VfsPath> {
        vec![self.keys.mount.clone()]
    }

    fn branch_record_lease(&self, _mount: &VfsPath) -> Duration {
        BRANCH_RECORD_LEASE
    }

    fn search(&self, scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()> {
        let (outcome, narrowed) = self.search_with(scope, run, part, IndexUse::Request);
        if let Some(key) = narrowed {
            spawn_check(self, (&self.index, key), (scope, run.spec(), part));
        }
        outcome
    }

    fn versions(&self, scope: &Scope, path: &VfsPath) -> Result<Vec<FileVersion>> {
        self.list_versions(scope, path)
    }

    fn read_version(
        &self,
        scope: &Scope,
        path: &VfsPath,
        version: u64,
        max_chunk: usize,
    ) -> Result<(FileVersion, ChunkReader)> {
        self.read_retained(scope, path, version, max_chunk)
    }

    fn restore(
        &self,
        scope: &Scope,
        path: &VfsPath,
        version: u64,
        if_version: Option<u64>,
    ) -> Result<WriteOutcome> {
        self.restore_version(scope, path, version, if_version)
    }

    fn watch_head(&self, scope: &Scope, root: &VfsPath, cursor: &mut ChangeCursor) -> Result<()> {
        if self.log.is_none() {
            return Err(super::no_change_log(root));
        }
        let (store, ns) = (self.store(), self.namespace(scope)?.to_owned());
        let heads = self.run("reading the change logs", async move {
            let mut heads = std::collections::BTreeMap::new();
            for run in log::logs(&store, &ns).await? {
                heads.insert(run, log::last_seq(&store, &ns, run).await?);
            }
            Ok(heads)
        })?;
        cursor.set_shards(&self.keys.mount, heads);
        Ok(())
    }

    fn changes(
        &self,
        scope: &Scope,
        root: &VfsPath,
        cursor: &mut ChangeCursor,
        max: usize,
    ) -> Result<Vec<Change>> {
        if self.log.is_none() {
            return Err(super::no_change_log(root));
        }
        let (store, ns, feed) = (
            self.store(),
            self.namespace(scope)?.to_owned(),
            self.feed.clone(),
        );
        let mut positions = cursor.shards(&self.keys.mount);
        let given = cursor.clone();
        let (changes, positions) = self.run("reading the change logs", async move {
            let changes =
                log::read_changes(&feed, &store, &ns, &given, &mut positions, max).await?;
            Ok((changes, positions))
        })?;
        cursor.set_shards(&self.keys.mount, positions);
        Ok(changes
            .into_iter()
            .filter(|c| c.path.is_within(root))
            .collect())
    }

    fn change_signals(&self, _root: &VfsPath, out: &mut Vec<tokio::sync::watch::Receiver<u64>>) {
        if self.log.is_some() {
            out.push(self.feed.subscribe());
        }
    }
}
