//! The object tier: persistent, namespaced files in an S3-compatible
//! bucket, shared by every agentvfs server that mounts it
//! (docs/object-storage.md).
//!
//! Where it sits: the mount table routes calls for its prefix here, on a
//! blocking thread; each call composes its S3 requests through [`Bucket`]
//! (`object_store`'s S3 client on the tier's own runtime, every call bounded
//! by the mount's timeout).
//!
//! Model (see `keys`): a file is a small **head** object holding its record
//! (`backend::record`: version, size, times, who made it, and the content
//! when it is at most 64 KiB); larger content is a **blob** object the head
//! names, uploaded in parts before the head is committed. Directories are
//! implied by the heads below them. A deleted file leaves a **tombstone**
//! with its last version.
//!
//! Invariants, across every server on the bucket:
//! - a head's bytes hold its version, so its ETag names exactly one version
//!   (an ETag alone repeats when content does: A → B → A);
//! - versions only grow: a new version is `max(previous + 1, now in µs)`,
//!   the previous being the file's, its tombstone's or a move marker's;
//! - every change of a head is a conditional request on the ETag it read
//!   (`If-None-Match: *` to create, `If-Match` to replace or delete), so
//!   `create_only` and `if_version` hold across servers, and Write, Edit and
//!   MultiEdit are read-modify-write loops that retry a lost race (re-running
//!   the edit on the new content) and never lose an update;
//! - a blob is written before the head that names it and never changed, so
//!   a failed or interrupted upload leaves no file (its parts are aborted,
//!   its blob left to the cleanup of docs/object-storage.md);
//! - a Move creates the destination, then claims the source with a
//!   conditional write of a move marker (one claimant wins; a loser removes
//!   its destination again), then deletes the marker by its ETag: a crash in
//!   between leaves the file at both paths, never at neither; a marker left
//!   behind reads as no file. A directory moves file by file;
//! - a recursive delete deletes file by file (each by its ETag).
//!
//! Performance decisions: listings and searches read heads through the
//! content cache (`cache`), keyed by what the listing says (key and ETag),
//! so a repeated listing or search costs its list pages; a search fetches the
//! heads ahead of the walk, many at once (`walk`). A one-level listing is one
//! delimited list request per 1,000 entries; a search lists its range page
//! by page (start-after), never the bucket.
//!
//! Errors: as the other tiers' for file semantics (docs/contract.md);
//! UNAVAILABLE or DEADLINE_EXCEEDED naming the store when it cannot be
//! reached or is too slow (`bucket`).

mod bucket;
mod cache;
mod credentials;
mod keys;
mod sweep;
mod walk;

pub use bucket::BucketOptions;
pub use cache::DEFAULT_CACHE_BYTES;
pub use credentials::{Credentials, parse as parse_credentials};
pub use keys::{ObjectKeys, Space};

use super::ordered;
use super::record::{self, INLINE_MAX_BYTES, Meta};
use super::{
    Backend, ChunkReader, ChunkSource, MoveOutcome, Precondition, UpdateFn, WriteOutcome,
    check_directory_delete, split_chunks,
};
use crate::change::{Operation, Origin};
use crate::entry::Entry;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::{SearchPart, SearchRun};
use bucket::{Bucket, Client, Put};
use bytes::Bytes;
use cache::ContentCache;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Heads fetched at once for a listing or a search.
const FETCH_CONCURRENCY: usize = 32;
/// Keys of a directory tree a recursive delete or a directory move holds
/// at once (one S3 list page).
const TREE_PAGE: usize = 1000;
/// Most attempts of one read-modify-write that keeps losing races.
const MAX_ATTEMPTS: u32 = 200;
/// Bytes per piece when a blob is read for ReadBytes or a copy.
const BLOB_PIECE_BYTES: u64 = 1 << 20;

/// Settings of an object mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectOptions {
    /// The bucket and how to reach it.
    pub bucket: BucketOptions,
    /// Prepended to every key: several mounts (or deployments) can share a
    /// bucket.
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
}

/// S3 dates a multipart object from the start of its upload: a blob that
/// took half the sweep's grace to upload is renewed (copied, so dated now)
/// before its head commits, or the sweep could take it first.
pub const RENEW_UPLOADS_AFTER: Duration = Duration::from_secs(sweep::GRACE.as_secs() / 2);

/// The S3-backed, per-namespace tier.
pub struct ObjectBackend {
    keys: ObjectKeys,
    bucket: Arc<Bucket>,
    cache: Arc<ContentCache>,
    max_file_bytes: u64,
    renew_uploads_after: Duration,
}

/// A file's head as read from the store.
#[derive(Clone, Debug)]
struct Head {
    /// Its ETag: the condition of the next change.
    etag: String,
    /// Its record.
    meta: Meta,
    /// The whole record (origin, inline content).
    raw: Bytes,
    /// False for a move marker or a tombstone left in place: no file.
    live: bool,
}

impl Head {
    /// The inline content (live heads of small files).
    fn inline(&self, path: &VfsPath) -> Result<Option<Bytes>> {
        if !self.meta.inline {
            return Ok(None);
        }
        let (_, content) = record::decode(path, &self.raw)?;
        Ok(Some(self.raw.slice_ref(content)))
    }
}

/// The version after `floor`: larger than it, and than the clock in µs.
fn next_version(floor: u64) -> u64 {
    (floor + 1).max(record::nanos(SystemTime::now()) / 1_000)
}

/// A random blob id (never 0, which marks inline content).
fn blob_id() -> u64 {
    rand::random::<u64>().max(1)
}

/// A file's head as a write reads it, and the outcome of its new-file
/// checks (the floor of a new version) when they were run alongside.
type HeadForWrite = (Option<Head>, Option<Result<u64>>);

/// Reads the head at `key` through `cache`: the store answers (a deleted
/// file is gone for every server), with only an ETag when the cached body is
/// still the current one.
async fn read_head(client: &Client, cache: &ContentCache, key: &str) -> Result<Option<Head>> {
    let cached = cache.current(key);
    let etag = cached.as_ref().map(|(etag, _)| etag.as_str());
    let (raw, etag) = match (client.get_unless(key, etag).await?, cached) {
        (None, _) => {
            cache.remove(key);
            return Ok(None);
        }
        (Some(Some(object)), _) => {
            cache.put(key, &object.etag, object.bytes.clone());
            (object.bytes, object.etag)
        }
        (Some(None), Some((etag, raw))) => (raw, etag),
        (Some(None), None) => {
            return Err(Error::Internal(format!(
                "{key}: the store answered 304 to a GET without If-None-Match"
            )));
        }
    };
    decode_head(key, raw, etag).map(Some)
}

/// A head from its body and ETag.
fn decode_head(key: &str, raw: Bytes, etag: String) -> Result<Head> {
    let (meta, _) = record::decode(&key, &raw)?;
    let live = !record::is_tombstone(&raw);
    Ok(Head {
        etag,
        meta,
        raw,
        live,
    })
}

/// The head of a listed object, from the cache when the listing's ETag is
/// the cached one, else from the store (`None`: gone since the listing).
async fn listed_head(
    client: &Client,
    cache: &ContentCache,
    key: &str,
    etag: Option<&str>,
) -> Result<Option<Head>> {
    if let Some(etag) = etag
        && let Some(raw) = cache.get(key, etag)
    {
        return decode_head(key, raw, etag.to_owned()).map(Some);
    }
    read_head(client, cache, key).await
}

/// `keep(path, head)` for each live file among listed heads, in listing
/// order: their heads fetched [`FETCH_CONCURRENCY`] at a time through the
/// cache, each turned into what the caller keeps as it arrives (a listing
/// keeps entries, not bodies).
async fn live_heads<T>(
    client: &Client,
    cache: &ContentCache,
    keys: &ObjectKeys,
    ns: &str,
    listed: Vec<object_store::ObjectMeta>,
    keep: impl Fn(VfsPath, Head) -> T,
) -> Result<Vec<T>> {
    let keep = &keep;
    let kept: Vec<Result<Option<T>>> = futures_util::stream::iter(listed)
        .map(|meta| async move {
            let key = meta.location.to_string();
            let head = listed_head(client, cache, &key, meta.e_tag.as_deref()).await?;
            Ok(match (keys.path(ns, Space::Heads, &key), head) {
                (Some(path), Some(head)) if head.live => Some(keep(path, head)),
                _ => None,
            })
        })
        .buffered(FETCH_CONCURRENCY)
        .collect()
        .await;
    kept.into_iter().filter_map(Result::transpose).collect()
}

impl ObjectBackend {
    /// Opens the object tier of `options` mounted at `mount`, checking that
    /// the bucket answers and accepts the credentials (a wrong bucket or key
    /// fails here, at start-up, not at the first call).
    pub fn open(mount: VfsPath, options: ObjectOptions) -> Result<ObjectBackend> {
        let credentials = match options.credentials {
            Some(given) => Some(given),
            None => credentials::from_files()?,
        };
        let bucket = Arc::new(Bucket::open(&options.bucket, credentials.as_ref())?);
        let keys = ObjectKeys::new(mount.clone(), &options.key_prefix);
        let client = bucket.client();
        let probe = keys.space("default", Space::Heads);
        bucket
            .run("checking the bucket", async move {
                client.first_below(&probe).await.map(|_| ())
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
        };
        tier.sweep_now_and_then()?;
        Ok(tier)
    }

    /// Sweeps orphan blobs in the background, now and every
    /// [`sweep::SWEEP_INTERVAL`] (see `sweep`); the task ends with the tier.
    fn sweep_now_and_then(&self) -> Result<()> {
        let (client, cache, keys) = (self.bucket.client(), self.cache.clone(), self.keys.clone());
        self.bucket.spawn::<()>(async move {
            loop {
                match sweep::sweep(&client, &cache, &keys, sweep::GRACE).await {
                    Ok(0) => {}
                    Ok(deleted) => tracing::info!(deleted, "swept orphan blobs"),
                    Err(err) => tracing::warn!(cause = %err, "the orphan blob sweep failed"),
                }
                tokio::time::sleep(sweep::SWEEP_INTERVAL).await;
            }
        })?;
        Ok(())
    }

    /// Sweeps once, now, taking orphan blobs older than `grace`; returns
    /// how many it deleted.
    pub fn sweep_orphans(&self, grace: Duration) -> Result<u64> {
        let (client, cache, keys) = (self.bucket.client(), self.cache.clone(), self.keys.clone());
        self.run("sweeping orphan blobs", async move {
            sweep::sweep(&client, &cache, &keys, grace).await
        })
    }

    fn namespace<'s>(&self, scope: &'s Scope) -> Result<&'s str> {
        Scope::check_name("namespace", &scope.namespace)?;
        Ok(&scope.namespace)
    }

    fn head_key(&self, scope: &Scope, path: &VfsPath) -> Result<String> {
        self.keys.key(self.namespace(scope)?, Space::Heads, path)
    }

    /// The key of a file to change: the mount root is a directory.
    fn file_key(&self, scope: &Scope, path: &VfsPath) -> Result<String> {
        if path == &self.keys.mount {
            return Err(Error::IsDirectory(path.to_string()));
        }
        self.head_key(scope, path)
    }

    /// Runs one S3 step on the tier's runtime (see [`Bucket::run`]).
    fn run<T: Send + 'static>(
        &self,
        what: &str,
        work: impl std::future::Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        self.bucket.run(what, work)
    }

    /// The head of `path`, if any.
    fn head(&self, scope: &Scope, path: &VfsPath) -> Result<Option<Head>> {
        self.head_at(&self.head_key(scope, path)?)
    }

    /// The head at `key`, if any.
    fn head_at(&self, key: &str) -> Result<Option<Head>> {
        let (client, cache, key) = (self.bucket.client(), self.cache.clone(), key.to_owned());
        self.run("reading a file", async move {
            read_head(&client, &cache, &key).await
        })
    }

    /// The head of `path` as this server's cache last saw it, without asking
    /// the store: possibly stale, so only a conditional put may rely on it
    /// (a stale ETag makes the put fail, and the caller reads the store).
    fn cached_head(&self, scope: &Scope, path: &VfsPath) -> Result<Option<Head>> {
        let key = self.head_key(scope, path)?;
        let Some((etag, raw)) = self.cache.current(&key) else {
            return Ok(None);
        };
        decode_head(&key, raw, etag).map(Some)
    }

    /// What `path`, which holds no live file, is: a directory (something
    /// below it, or the mount root) or nothing.
    fn lookup_missing(&self, scope: &Scope, path: &VfsPath) -> Result<Entry> {
        if path == &self.keys.mount {
            return Ok(Entry::directory(path.clone(), UNIX_EPOCH));
        }
        let prefix = self
            .keys
            .below(self.namespace(scope)?, Space::Heads, path)?;
        let client = self.bucket.client();
        let first = self.run("looking up a directory", async move {
            client.first_below(&prefix).await
        })?;
        match first {
            Some(meta) => Ok(Entry::directory(path.clone(), meta.last_modified.into())),
            None => Err(Error::NotFound(path.to_string())),
        }
    }

    /// Why `path`, which holds no live file, cannot be read as one.
    fn not_a_file(&self, scope: &Scope, path: &VfsPath) -> Error {
        match self.lookup_missing(scope, path) {
            Ok(_) => Error::IsDirectory(path.to_string()),
            Err(e) => e,
        }
    }

    /// The whole content of `head` (inline, or its blob).
    fn content(&self, scope: &Scope, path: &VfsPath, head: &Head) -> Result<Bytes> {
        if let Some(inline) = head.inline(path)? {
            return Ok(inline);
        }
        let key = self
            .keys
            .blob(self.namespace(scope)?, path, head.meta.blob)?;
        let (client, cache) = (self.bucket.client(), self.cache.clone());
        let shown = path.to_string();
        let version = head.meta.version;
        self.run("reading a file's content", async move {
            read_blob(&client, &cache, &key, &shown, version).await
        })
    }

    /// The checks of a new file at `path` (the mount root excluded): not a
    /// directory (nothing below it), no parent a file; and the floor of its
    /// version (a tombstone's).
    fn new_file_checks(&self, ns: &str, path: &VfsPath) -> Result<u64> {
        let checks = self.new_file_checks_async(ns, path)?;
        self.run("checking a new file's place", checks)
    }

    /// [`ObjectBackend::new_file_checks`] as a future on the tier's runtime.
    fn new_file_checks_async(
        &self,
        ns: &str,
        path: &VfsPath,
    ) -> Result<impl std::future::Future<Output = Result<u64>> + Send + 'static> {
        let below = self.keys.below(ns, Space::Heads, path)?;
        let tomb = self.keys.key(ns, Space::Tombstones, path)?;
        let mut parents = Vec::new();
        let mut dir = path.parent();
        while dir != self.keys.mount && dir.is_within(&self.keys.mount) {
            parents.push((dir.clone(), self.keys.key(ns, Space::Heads, &dir)?));
            dir = dir.parent();
        }
        // The nearest file above is the one named, as the other tiers do:
        // check the outermost first.
        parents.reverse();
        let (client, cache, shown) = (self.bucket.client(), self.cache.clone(), path.clone());
        Ok(async move {
            let below_check = client.first_below(&below);
            let tomb_check = client.get(&tomb);
            let parent_checks = futures_util::future::try_join_all(
                parents
                    .iter()
                    .map(|(_, key)| read_head(&client, &cache, key)),
            );
            let (below, tomb, heads) =
                futures_util::try_join!(below_check, tomb_check, parent_checks)?;
            if below.is_some() {
                return Err(Error::IsDirectory(shown.to_string()));
            }
            for ((dir, _), head) in parents.iter().zip(&heads) {
                if head.as_ref().is_some_and(|h| h.live) {
                    return Err(Error::NotDirectory(dir.to_string()));
                }
            }
            let floor = match tomb {
                Some(object) => {
                    decode_head("tombstone", object.bytes, object.etag)?
                        .meta
                        .version
                }
                None => 0,
            };
            Ok(floor)
        })
    }

    /// The head of `path` and, with nothing cached for it (most likely a new
    /// file), the outcome of its new-file checks, read at the same time: one
    /// round trip less for a create, a few wasted reads for a file another
    /// server wrote.
    fn head_for_write(&self, ns: &str, path: &VfsPath, key: &str) -> Result<HeadForWrite> {
        if self.cache.etag(key).is_some() {
            return Ok((self.head_at(key)?, None));
        }
        let checks = self.new_file_checks_async(ns, path)?;
        let (client, cache, key) = (self.bucket.client(), self.cache.clone(), key.to_owned());
        self.run("reading a file", async move {
            let (head, checks) = futures_util::join!(read_head(&client, &cache, &key), checks);
            Ok((head?, Some(checks)))
        })
    }

    /// Commits `content` at `path` under `pre` as a change by `origin`: the
    /// read-check-write loop of Write, WriteBytes and Restore. An
    /// unconditional write that loses a race reads again and retries.
    /// Returns the outcome and the blob of the live file it replaced (0:
    /// none, or inline).
    fn commit(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        content: NewContent,
        origin: &Origin,
    ) -> Result<(WriteOutcome, u64)> {
        let ns = self.namespace(scope)?.to_owned();
        let key = self.file_key(scope, path)?;
        let size = content.size();
        for attempt in 0..MAX_ATTEMPTS {
            // A rewrite of a file this server last wrote or read costs one
            // request: its cached head, put with `If-Match`. A stale cache
            // fails the put (or the check) and the store is read.
            let cached = match attempt {
                0 => self
                    .cached_head(scope, path)?
                    .filter(|h| h.live && pre.check(path, Some(h.meta.version)).is_ok()),
                _ => None,
            };
            let (current, checks) = match cached {
                Some(head) => (Some(head), None),
                None => self.head_for_write(&ns, path, &key)?,
            };
            let live = current.as_ref().filter(|h| h.live);
            pre.check(path, live.map(|h| h.meta.version))?;
            let mut floor = current.as_ref().map_or(0, |h| h.meta.version);
            if live.is_none() {
                let checked = match checks {
                    Some(checked) => checked?,
                    None => self.new_file_checks(&ns, path)?,
                };
                floor = floor.max(checked);
            }
            let version = next_version(floor);
            let mode = match &current {
                Some(head) => Put::Replace(head.etag.clone()),
                None => Put::Create,
            };
            let created = live.map(|h| h.meta.created);
            if self.put_head(&key, version, created, &content, origin, mode)? {
                let outcome = WriteOutcome {
                    path: path.clone(),
                    bytes_written: size,
                    version,
                    created: live.is_none(),
                };
                return Ok((outcome, live.map_or(0, |h| h.meta.content_blob())));
            }
            // Lost a race: the file changed (or appeared) since it was read.
            if pre.create_only || pre.if_version.is_some() {
                let now = self.head(scope, path)?.filter(|h| h.live);
                if pre.create_only && now.is_some() {
                    return Err(Error::AlreadyExists(path.to_string()));
                }
                let actual = now.map_or(0, |h| h.meta.version);
                pre.check(path, Some(actual).filter(|v| *v > 0))?;
            }
            backoff(attempt);
        }
        Err(Error::Unavailable(format!(
            "{path}: gave up after {MAX_ATTEMPTS} writes lost races with other writers"
        )))
    }

    /// Stores a streamed write's pieces: gathered when small, else uploaded
    /// as a blob in parts as they arrive (never whole in memory).
    fn upload(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<NewContent> {
        let mut head = Vec::new();
        while head.len() <= INLINE_MAX_BYTES {
            match pieces.next() {
                None => return Ok(NewContent::Inline(Bytes::from(head))),
                Some(piece) => {
                    head.extend_from_slice(&piece?);
                    Error::check_file_size(path, head.len() as u64, self.max_file_bytes)?;
                }
            }
        }
        let id = blob_id();
        let ns = self.namespace(scope)?;
        let key = self.keys.blob(ns, path, id)?;
        let started = std::time::Instant::now();
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let client = self.bucket.client();
        let uploading = self
            .bucket
            .spawn(async move { client.upload(&key, rx).await })?;
        let mut size = head.len() as u64;
        let mut feed = || -> Result<()> {
            tx.blocking_send(Ok(Bytes::from(std::mem::take(&mut head))))
                .map_err(|_| Error::Internal("the upload stopped".into()))?;
            for piece in &mut *pieces {
                let piece = piece.and_then(|data| {
                    size += data.len() as u64;
                    Error::check_file_size(path, size, self.max_file_bytes).map(|()| data)
                });
                match piece {
                    Ok(data) => {
                        if tx.blocking_send(Ok(Bytes::from(data))).is_err() {
                            break;
                        }
                    }
                    Err(err) => {
                        let _ = tx.blocking_send(Err(err.clone()));
                        return Err(err);
                    }
                }
            }
            Ok(())
        };
        let fed = feed();
        drop(tx);
        let uploaded = self.run("uploading a file", async move {
            uploading
                .await
                .map_err(|e| Error::Internal(format!("upload task: {e}")))?
        });
        fed?;
        let size = uploaded?;
        if started.elapsed() < self.renew_uploads_after {
            return Ok(NewContent::Blob { id, size });
        }
        // See RENEW_UPLOADS_AFTER: a copy is dated now.
        let fresh = blob_id();
        let fresh_key = self.keys.blob(ns, path, fresh)?;
        let client = self.bucket.client();
        let old_key = self.keys.blob(ns, path, id)?;
        self.run("renewing a slow upload", async move {
            client.copy(&old_key, &fresh_key).await?;
            client.delete(&old_key).await
        })?;
        Ok(NewContent::Blob { id: fresh, size })
    }

    /// Puts the head of `version` of a file holding `content` at `key` under
    /// `mode` (the conditional request), created at `created` (`None`: now),
    /// and caches it; false when the condition failed (a lost race).
    fn put_head(
        &self,
        key: &str,
        version: u64,
        created: Option<u64>,
        content: &NewContent,
        origin: &Origin,
        mode: Put,
    ) -> Result<bool> {
        let now = record::nanos(SystemTime::now());
        let inline = match content {
            NewContent::Inline(data) => Some(data.as_ref()),
            NewContent::Blob { .. } => None,
        };
        let meta = Meta {
            version,
            size: content.size(),
            created: created.unwrap_or(now),
            modified: now,
            inline: inline.is_some(),
            blob: content.blob(),
        };
        let body = Bytes::from(record::encode(&meta, origin, inline));
        let (client, cache, key) = (self.bucket.client(), self.cache.clone(), key.to_owned());
        let etag = self.run("writing a file", async move {
            let etag = client.put(&key, body.clone(), mode).await?;
            if let Some(etag) = &etag {
                cache.put(&key, etag, body);
            }
            Ok(etag)
        })?;
        Ok(etag.is_some())
    }

    /// `data` as a new version's content: inline when small, else uploaded
    /// as a blob.
    fn new_content(&self, scope: &Scope, path: &VfsPath, data: Vec<u8>) -> Result<NewContent> {
        if data.len() <= INLINE_MAX_BYTES {
            return Ok(NewContent::Inline(Bytes::from(data)));
        }
        self.upload(scope, path, &mut std::iter::once(Ok(data)))
    }

    /// Deletes the blob `id` of `path` (left to the cleanup when it fails).
    fn forget_blob(&self, ns: &str, path: &VfsPath, id: u64) {
        if id == 0 {
            return;
        }
        let Ok(key) = self.keys.blob(ns, path, id) else {
            return;
        };
        let client = self.bucket.client();
        if let Err(err) = self.run("deleting a blob", async move { client.delete(&key).await }) {
            tracing::warn!(path = %path, cause = %err, "a blob is left for the cleanup");
        }
    }

    /// Deletes the file whose head is `head` at `path`, by its ETag: its
    /// tombstone (holding the next version) first, then the head. `Ok(false)`
    /// when the file changed since `head` was read.
    fn delete_head(&self, ns: &str, path: &VfsPath, head: &Head, origin: &Origin) -> Result<bool> {
        let key = self.keys.key(ns, Space::Heads, path)?;
        let tomb_key = self.keys.key(ns, Space::Tombstones, path)?;
        let version = next_version(head.meta.version);
        let tomb = Bytes::from(record::encode_tombstone(&Meta::tombstone(version), origin));
        let (client, cache, etag) = (self.bucket.client(), self.cache.clone(), head.etag.clone());
        let deleted = self.run("deleting a file", async move {
            client.put(&tomb_key, tomb, Put::Overwrite).await?;
            let deleted = client.delete_if(&key, &etag).await?;
            cache.remove(&key);
            Ok(deleted)
        })?;
        if deleted {
            self.forget_blob(ns, path, head.meta.content_blob());
        }
        Ok(deleted)
    }

    /// Calls `each` with every live file below the directory `dir`, in key
    /// order, with its head: one page of [`TREE_PAGE`] keys (and their heads)
    /// in memory at a time, whatever the tree's size. A page's listing
    /// starts after the last key of the one before.
    fn for_files_below(
        &self,
        ns: &str,
        dir: &VfsPath,
        mut each: impl FnMut(VfsPath, Head) -> Result<()>,
    ) -> Result<()> {
        let prefix = self.keys.below(ns, Space::Heads, dir)?;
        let mut after: Option<String> = None;
        loop {
            let (client, cache, keys, ns) = (
                self.bucket.client(),
                self.cache.clone(),
                self.keys.clone(),
                ns.to_owned(),
            );
            let (prefix, offset) = (prefix.clone(), after.clone());
            let (last, files) = self.run("listing a directory tree", async move {
                let listed: Vec<_> = client
                    .list_after(&prefix, offset.as_deref())?
                    .take(TREE_PAGE)
                    .collect()
                    .await;
                let metas = listed.into_iter().collect::<Result<Vec<_>>>()?;
                let last = metas.last().map(|meta| meta.location.to_string());
                let files = live_heads(&client, &cache, &keys, &ns, metas, |p, h| (p, h)).await?;
                Ok((last, files))
            })?;
            for (path, head) in files {
                each(path, head)?;
            }
            match last {
                Some(last) => after = Some(last),
                None => return Ok(()),
            }
        }
    }

    /// Moves the file `head` at `source` to `destination` (checked by the
    /// caller): creates the destination, claims the source with a move
    /// marker (one claimant wins), deletes the marker. `Ok(None)` when the
    /// source changed or moved meanwhile (nothing changed by this call).
    fn move_file(
        &self,
        ns: &str,
        (source, head): (&VfsPath, &Head),
        destination: &VfsPath,
        replaced: Option<&Head>,
        create_only: bool,
        origin: &Origin,
    ) -> Result<Option<u64>> {
        let src_key = self.keys.key(ns, Space::Heads, source)?;
        let dst_key = self.keys.key(ns, Space::Heads, destination)?;
        let floor = head
            .meta
            .version
            .max(replaced.map_or(0, |r| r.meta.version));
        let version = next_version(floor);
        // The content goes with the file: inline in the record, or a copy
        // of the blob under the destination (each blob belongs to one head).
        let blob = match head.meta.content_blob() {
            0 => 0,
            from => {
                let id = blob_id();
                let (from, to) = (
                    self.keys.blob(ns, source, from)?,
                    self.keys.blob(ns, destination, id)?,
                );
                let client = self.bucket.client();
                self.run("copying a file's content", async move {
                    client.copy(&from, &to).await
                })?;
                id
            }
        };
        let meta = Meta {
            version,
            blob,
            ..head.meta
        };
        let inline = head.inline(source)?;
        let body = Bytes::from(record::encode(&meta, origin, inline.as_deref()));
        let mode = match (replaced, create_only) {
            (Some(r), false) => Put::Replace(r.etag.clone()),
            _ => Put::Create,
        };
        let marker_meta = Meta {
            version: next_version(version),
            size: 0,
            inline: true,
            blob: 0,
            ..head.meta
        };
        let marker = Bytes::from(record::encode_tombstone(&marker_meta, origin));
        let (client, cache, src_etag) =
            (self.bucket.client(), self.cache.clone(), head.etag.clone());
        let shown = destination.to_string();
        let outcome = self.run("moving a file", async move {
            let Some(dst_etag) = client.put(&dst_key, body, mode).await? else {
                return Err(Error::AlreadyExists(shown));
            };
            match client.put(&src_key, marker, Put::Replace(src_etag)).await? {
                Some(marker_etag) => {
                    // The marker is this mover's: delete it by its ETag.
                    client.delete_if(&src_key, &marker_etag).await?;
                    cache.remove(&src_key);
                    Ok(true)
                }
                None => {
                    // Another change or move of the source won: take the
                    // destination back (only as this mover wrote it).
                    client.delete_if(&dst_key, &dst_etag).await?;
                    Ok(false)
                }
            }
        });
        match outcome {
            Ok(true) => {
                self.forget_blob(ns, source, head.meta.content_blob());
                if let Some(r) = replaced {
                    self.forget_blob(ns, destination, r.meta.content_blob());
                }
                Ok(Some(version))
            }
            Ok(false) => {
                self.forget_blob(ns, destination, blob);
                Ok(None)
            }
            Err(err) => {
                self.forget_blob(ns, destination, blob);
                Err(err)
            }
        }
    }
}

/// New content of a file.
enum NewContent {
    /// Small: inside the head.
    Inline(Bytes),
    /// Uploaded as the blob `id`.
    Blob {
        /// Its id.
        id: u64,
        /// Its size.
        size: u64,
    },
}

impl NewContent {
    fn size(&self) -> u64 {
        match self {
            NewContent::Inline(data) => data.len() as u64,
            NewContent::Blob { size, .. } => *size,
        }
    }

    /// The blob holding it (0: inline).
    fn blob(&self) -> u64 {
        match self {
            NewContent::Inline(_) => 0,
            NewContent::Blob { id, .. } => *id,
        }
    }
}

/// Sleeps a little more after each lost race (up to ~20 ms, jittered), so
/// contending writers spread out.
fn backoff(attempt: u32) {
    let max = 1u64 << attempt.min(4);
    let ms = rand::random_range(0..=max);
    std::thread::sleep(Duration::from_millis(ms));
}

/// The content of the blob at `key` (file `shown`, `version`), from the
/// cache when there (a blob never changes).
async fn read_blob(
    client: &Client,
    cache: &ContentCache,
    key: &str,
    shown: &str,
    version: u64,
) -> Result<Bytes> {
    if let Some((_, data)) = cache.current(key) {
        return Ok(data);
    }
    match client.get(key).await? {
        Some(object) => {
            cache.put(key, &object.etag, object.bytes.clone());
            Ok(object.bytes)
        }
        None => Err(Error::VersionMismatch {
            path: shown.to_owned(),
            expected: version,
            actual: 0,
        }
        .with_context(
            "the file changed while it was being read; read it again",
            [],
        )),
    }
}

impl Backend for ObjectBackend {
    fn list(&self, scope: &Scope, dir: &VfsPath) -> Result<Vec<Entry>> {
        let ns = self.namespace(scope)?.to_owned();
        let prefix = self.keys.below(&ns, Space::Heads, dir)?;
        let (client, cache, keys) = (self.bucket.client(), self.cache.clone(), self.keys.clone());
        let listed = self.run("listing a directory", async move {
            let (dirs, objects) = client.list_level(&prefix).await?;
            let files = live_heads(&client, &cache, &keys, &ns, objects, |path, head| {
                ordered::file_entry(path, &head.meta)
            })
            .await?;
            let mut entries = Vec::new();
            for dir_key in dirs {
                if let Some(path) = keys.path(&ns, Space::Heads, &dir_key) {
                    entries.push(Entry::directory(path, UNIX_EPOCH));
                }
            }
            entries.extend(files);
            Ok(entries)
        })?;
        if listed.is_empty() && dir != &self.keys.mount {
            // Nothing below: a file (NotDirectory) or nothing at all.
            return match self.head(scope, dir)? {
                Some(head) if head.live => Err(Error::NotDirectory(dir.to_string())),
                _ => Err(Error::NotFound(dir.to_string())),
            };
        }
        let mut entries = listed;
        entries.sort_by_key(|e| e.path.order_key());
        Ok(entries)
    }

    fn stat(&self, scope: &Scope, path: &VfsPath) -> Result<Entry> {
        if path != &self.keys.mount
            && let Some(head) = self.head(scope, path)?.filter(|h| h.live)
        {
            return Ok(ordered::file_entry(path.clone(), &head.meta));
        }
        self.lookup_missing(scope, path)
    }

    fn read(&self, scope: &Scope, path: &VfsPath) -> Result<(Vec<u8>, Entry)> {
        if path != &self.keys.mount
            && let Some(head) = self.head(scope, path)?.filter(|h| h.live)
        {
            let data = self.content(scope, path, &head)?;
            return Ok((data.to_vec(), ordered::file_entry(path.clone(), &head.meta)));
        }
        Err(self.not_a_file(scope, path))
    }

    fn read_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        max_chunk: usize,
    ) -> Result<(Entry, ChunkReader)> {
        if path != &self.keys.mount
            && let Some(head) = self.head(scope, path)?.filter(|h| h.live)
        {
            let entry = ordered::file_entry(path.clone(), &head.meta);
            if let Some(inline) = head.inline(path)? {
                return Ok((entry, split_chunks(inline.to_vec(), max_chunk)));
            }
            let key = self
                .keys
                .blob(self.namespace(scope)?, path, head.meta.blob)?;
            let reader = BlobReader {
                bucket: self.bucket.clone(),
                key,
                shown: path.to_string(),
                version: head.meta.version,
                size: head.meta.size,
                at: 0,
                piece: (max_chunk as u64).clamp(1, BLOB_PIECE_BYTES),
            };
            return Ok((entry, Box::new(reader)));
        }
        Err(self.not_a_file(scope, path))
    }

    fn write(
        &self,
        scope: &Scope,
        path: &VfsPath,
        data: Vec<u8>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        Error::check_file_size(path, data.len() as u64, self.max_file_bytes)?;
        self.file_key(scope, path)?;
        let origin = Origin::of(&scope.principal, Operation::Write);
        let content = self.new_content(scope, path, data)?;
        self.commit_or_forget(scope, path, pre, content, &origin)
    }

    fn write_chunks(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<WriteOutcome> {
        self.file_key(scope, path)?;
        // Fail before taking in megabytes when a condition cannot hold; the
        // commit checks again.
        if pre != Precondition::default() {
            let current = self.head(scope, path)?.filter(|h| h.live);
            pre.check(path, current.map(|h| h.meta.version))?;
        }
        let content = self.upload(scope, path, pieces)?;
        let origin = Origin::of(&scope.principal, Operation::Write);
        self.commit_or_forget(scope, path, pre, content, &origin)
    }

    fn update(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        let key = self.file_key(scope, path)?;
        let ns = self.namespace(scope)?.to_owned();
        let origin = Origin::of(&scope.principal, Operation::Edit);
        for attempt in 0..MAX_ATTEMPTS {
            let Some(head) = self.head(scope, path)?.filter(|h| h.live) else {
                return Err(self.not_a_file(scope, path));
            };
            Precondition {
                create_only: false,
                if_version,
            }
            .check(path, Some(head.meta.version))?;
            let old = self.content(scope, path, &head)?;
            let new = f(&old)?;
            Error::check_file_size(path, new.len() as u64, self.max_file_bytes)?;
            let content = self.new_content(scope, path, new)?;
            let version = next_version(head.meta.version);
            let created = Some(head.meta.created);
            let mode = Put::Replace(head.etag.clone());
            if self.put_head(&key, version, created, &content, &origin, mode)? {
                self.forget_blob(&ns, path, head.meta.content_blob());
                return Ok(WriteOutcome {
                    path: path.clone(),
                    bytes_written: content.size(),
                    version,
                    created: false,
                });
            }
            // Another writer changed the file: edit its new content.
            self.forget_blob(&ns, path, content.blob());
            backoff(attempt);
        }
        Err(Error::Unavailable(format!(
            "{path}: gave up after {MAX_ATTEMPTS} edits lost races with other writers"
        )))
    }

    fn delete(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        let ns = self.namespace(scope)?.to_owned();
        let origin = Origin::of(&scope.principal, Operation::Delete);
        if path != &self.keys.mount {
            for attempt in 0..MAX_ATTEMPTS {
                let Some(head) = self.head(scope, path)?.filter(|h| h.live) else {
                    break;
                };
                Precondition {
                    create_only: false,
                    if_version,
                }
                .check(path, Some(head.meta.version))?;
                if self.delete_head(&ns, path, &head, &origin)? {
                    return Ok(1);
                }
                backoff(attempt);
            }
        }
        self.lookup_missing(scope, path)?;
        check_directory_delete(path, if_version, recursive)?;
        let mut deleted = 0;
        self.for_files_below(&ns, path, |file, head| {
            // A file changed since the listing is deleted as it is now.
            let mut head = Some(head);
            while let Some(current) = head.take() {
                if self.delete_head(&ns, &file, &current, &origin)? {
                    deleted += 1;
                } else {
                    head = self.head(scope, &file)?.filter(|h| h.live);
                }
            }
            Ok(())
        })?;
        Ok(deleted)
    }

    fn rename(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        for path in [source, destination] {
            if path == &self.keys.mount {
                return Err(super::unmovable_mount(path));
            }
        }
        let ns = self.namespace(scope)?.to_owned();
        let origin = Origin::of(&scope.principal, Operation::Move);
        for attempt in 0..MAX_ATTEMPTS {
            let head = self.head(scope, source)?.filter(|h| h.live);
            let source_is_dir = match &head {
                Some(head) => {
                    Precondition {
                        create_only: false,
                        if_version: pre.if_version,
                    }
                    .check(source, Some(head.meta.version))?;
                    false
                }
                None => {
                    self.lookup_missing(scope, source)?;
                    if pre.if_version.is_some() {
                        return Err(Error::InvalidArgument(
                            "if_version applies to files, not directories".into(),
                        ));
                    }
                    true
                }
            };
            // The destination: no parent a file, and free (only a file
            // replaces a file, unless create_only).
            let replaced = self.head(scope, destination)?.filter(|h| h.live);
            if replaced.is_none() {
                self.new_file_checks(&ns, destination)
                    .map_err(|e| match e {
                        Error::IsDirectory(_) if source_is_dir || pre.create_only => {
                            Error::AlreadyExists(destination.to_string())
                        }
                        Error::IsDirectory(_) => Error::IsDirectory(destination.to_string()),
                        other => other,
                    })?;
            } else if pre.create_only || source_is_dir {
                return Err(Error::AlreadyExists(destination.to_string()));
            }
            let Some(head) = head else {
                return self.move_tree(&ns, source, destination, &origin);
            };
            match self.move_file(
                &ns,
                (source, &head),
                destination,
                replaced.as_ref(),
                pre.create_only,
                &origin,
            )? {
                Some(version) => {
                    return Ok(MoveOutcome {
                        files_moved: 1,
                        version,
                    });
                }
                None => {
                    // The source changed or moved since it was read: look
                    // again (a missing source is NOT_FOUND then).
                    backoff(attempt);
                }
            }
        }
        Err(Error::Unavailable(format!(
            "{source}: gave up after {MAX_ATTEMPTS} moves lost races with other writers"
        )))
    }

    fn search(&self, scope: &Scope, run: &SearchRun, part: &SearchPart) -> Result<()> {
        let ns = self.namespace(scope)?.to_owned();
        let root = &part.top;
        if root != &self.keys.mount
            && let Some(head) = self.head(scope, root)?.filter(|h| h.live)
        {
            let entry = ordered::file_entry(root.clone(), &head.meta);
            let mut files = walk::Walk::new(self, ns, part)?.for_run(run);
            return crate::search::sorted::search_one(run, &mut files, entry);
        }
        self.lookup_missing(scope, root)?;
        let mut files = walk::Walk::new(self, ns, part)?.for_run(run);
        crate::search::sorted::walk(run, &mut files, part)
    }
}

impl ObjectBackend {
    /// Commits `content`, removing its blob again when the commit fails.
    fn commit_or_forget(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        content: NewContent,
        origin: &Origin,
    ) -> Result<WriteOutcome> {
        let blob = content.blob();
        let ns = self.namespace(scope)?;
        match self.commit(scope, path, pre, content, origin) {
            Ok((outcome, replaced)) => {
                self.forget_blob(ns, path, replaced);
                Ok(outcome)
            }
            Err(err) => {
                self.forget_blob(ns, path, blob);
                Err(err)
            }
        }
    }

    /// Moves every file of the directory `source` below `destination`
    /// (which holds nothing), file by file.
    fn move_tree(
        &self,
        ns: &str,
        source: &VfsPath,
        destination: &VfsPath,
        origin: &Origin,
    ) -> Result<MoveOutcome> {
        let mut files_moved = 0;
        self.for_files_below(ns, source, |file, head| {
            let Some(to) = file.rebase(source, destination) else {
                return Ok(());
            };
            if self
                .move_file(ns, (&file, &head), &to, None, true, origin)?
                .is_some()
            {
                files_moved += 1;
            }
            Ok(())
        })?;
        if files_moved == 0 {
            return Err(Error::NotFound(source.to_string()));
        }
        Ok(MoveOutcome {
            files_moved,
            version: 0,
        })
    }
}

/// A blob read piece by piece as ReadBytes asks (never whole in memory).
struct BlobReader {
    bucket: Arc<Bucket>,
    key: String,
    shown: String,
    version: u64,
    size: u64,
    at: u64,
    piece: u64,
}

impl Iterator for BlobReader {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Result<Vec<u8>>> {
        if self.at >= self.size {
            return None;
        }
        let end = (self.at + self.piece).min(self.size);
        let (client, key) = (self.bucket.client(), self.key.clone());
        let range = self.at..end;
        let piece = self.bucket.run("reading a file's content", async move {
            client.get_range(&key, range).await
        });
        self.at = match &piece {
            Ok(Some(_)) => end,
            _ => u64::MAX,
        };
        Some(match piece {
            Ok(Some(bytes)) => Ok(bytes.to_vec()),
            Ok(None) => Err(Error::VersionMismatch {
                path: self.shown.clone(),
                expected: self.version,
                actual: 0,
            }
            .with_context(
                "the file changed while it was being read; read it again",
                [],
            )),
            Err(err) => Err(err),
        })
    }
}
