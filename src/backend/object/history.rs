//! Version history on the object tier (docs/object-storage.md § History):
//! a change that replaces a head keeps the version it replaced as a past
//! version (`{ns}/v/{path}!{version}`, the head's body as it was), written
//! before the change's put, so a committed change never loses the version
//! before it. Past versions are immutable; the mount's [`Retention`]
//! decides which stay, and after each change the versions it no longer
//! keeps (and their blobs) are deleted in the background. On this tier a
//! version number is the time it was made in µs (`next_version`), which is
//! what "keep within T" is measured by.
//!
//! [`Retention`]: crate::history::Retention

use super::ObjectBackend;
use super::head::Head;
use super::keys::ObjectKeys;
use super::state::Store;
use crate::backend::{ChunkReader, no_history};
use crate::error::{Error, Result};
use crate::history::FileVersion;
use crate::path::VfsPath;
use crate::scope::Scope;
use futures_util::StreamExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Past versions read at once for a listing.
const READ_CONCURRENCY: usize = 16;

/// The time a version of this tier was made: its number is µs since the
/// epoch (or later, when the clock lagged).
fn version_time(version: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(version)
}

/// `head` (of `path`) as a retained version.
fn as_version(path: &VfsPath, head: &Head, current: bool) -> Result<FileVersion> {
    Ok(FileVersion {
        version: head.meta.version,
        size: head.meta.size,
        time: head.meta.modified_time(),
        origin: head.origin(path)?,
        deleted: head.is_deletion(),
        current,
    })
}

/// The past versions of `path` in `ns`, oldest first: each key's number.
async fn past_keys(store: &Store, ns: &str, path: &VfsPath) -> Result<Vec<(u64, String)>> {
    let listed = store
        .client
        .objects_below(&store.keys.versions(ns, path)?)
        .await?;
    Ok(listed
        .into_iter()
        .filter_map(|meta| {
            let key = meta.location.to_string();
            Some((ObjectKeys::version_of(&key)?, key))
        })
        .collect())
}

/// The past version at `key` (`None`: dropped since it was listed).
pub(super) async fn past(store: &Store, key: &str) -> Result<Option<Head>> {
    match store.cache.current(key) {
        Some((etag, body)) => Head::decode(key, body, etag).map(Some),
        None => match store.client.get(key).await? {
            Some(object) => {
                store.cache.put(key, &object.etag, object.bytes.clone());
                Head::decode(key, object.bytes, object.etag).map(Some)
            }
            None => Ok(None),
        },
    }
}

impl ObjectBackend {
    /// ListVersions: the current state (a live file, or the deletion that
    /// ended it) and every retained past version, newest first.
    pub(super) fn list_versions(&self, scope: &Scope, path: &VfsPath) -> Result<Vec<FileVersion>> {
        let ns = self.namespace(scope)?;
        self.history_kept(path)?;
        let key = self.file_key(ns, path)?;
        let (store, ns_owned, shown) = (self.store(), ns.to_owned(), path.clone());
        let (now, pasts) = self.run("reading a file's history", async move {
            let now = store.now(&ns_owned, &key).await?;
            let keys = past_keys(&store, &ns_owned, &shown).await?;
            let store = &store;
            let pasts: Vec<Result<Option<Head>>> =
                futures_util::stream::iter(keys.into_iter().rev())
                    .map(|(_, key)| async move { past(store, &key).await })
                    .buffered(READ_CONCURRENCY)
                    .collect()
                    .await;
            Ok((now, pasts))
        })?;
        let mut out = Vec::new();
        if let Some(state) = &now.state {
            out.push(as_version(path, state, state.is_live())?);
        }
        let mut past = Vec::new();
        for head in pasts {
            if let Some(head) = head?
                && out.iter().all(|v| v.version != head.meta.version)
            {
                past.push(as_version(path, &head, false)?);
            }
        }
        out.extend(self.kept(out.len(), past));
        if out.is_empty() {
            return Err(self.not_a_file(ns, path));
        }
        Ok(out)
    }

    /// The retained `version` of `path`: the current state, or a past one.
    pub(super) fn retained(&self, ns: &str, path: &VfsPath, version: u64) -> Result<Head> {
        self.history_kept(path)?;
        let key = self.file_key(ns, path)?;
        let past_key = self.keys.version(ns, path, version)?;
        let (store, ns_owned) = (self.store(), ns.to_owned());
        let shown = path.clone();
        let (found, newer, listed) = self.run("reading a file's history", async move {
            let now = store.now(&ns_owned, &key).await?;
            let newer = usize::from(now.state.is_some());
            if let Some(state) = now.state.filter(|s| s.meta.version == version) {
                return Ok((Some(state), 0, Vec::new()));
            }
            let listed = past_keys(&store, &ns_owned, &shown).await?;
            Ok((past(&store, &past_key).await?, newer, listed))
        })?;
        let missing = || Error::VersionNotFound {
            path: path.to_string(),
            version,
        };
        let found = found.ok_or_else(missing)?;
        // A past version the retention no longer keeps is gone, whether or
        // not its deletion (in the background) has happened yet.
        let versions: Vec<FileVersion> = listed
            .iter()
            .rev()
            .map(|(v, _)| FileVersion {
                version: *v,
                size: 0,
                time: version_time(*v),
                origin: crate::change::Origin::external(crate::change::Operation::Write),
                deleted: false,
                current: false,
            })
            .collect();
        if !listed.is_empty()
            && !self
                .kept(newer, versions)
                .iter()
                .any(|v| v.version == version)
        {
            return Err(missing());
        }
        Ok(found)
    }

    /// Read or ReadBytes at a version: its metadata and content in pieces
    /// (a deletion has none).
    pub(super) fn read_retained(
        &self,
        scope: &Scope,
        path: &VfsPath,
        version: u64,
        max_chunk: usize,
    ) -> Result<(FileVersion, ChunkReader)> {
        let ns = self.namespace(scope)?;
        let head = self.retained(ns, path, version)?;
        let current = self
            .file(ns, path)?
            .is_some_and(|f| f.meta.version == version);
        let found = as_version(path, &head, current)?;
        if head.is_deletion() {
            return Ok((found, crate::backend::split_chunks(Vec::new(), max_chunk)));
        }
        Ok((found, self.pieces(ns, path, &head, max_chunk)?))
    }

    /// Of a file's past versions `past` (newest first), with `newer`
    /// versions ahead of them, those the retention keeps.
    fn kept(&self, newer: usize, past: Vec<FileVersion>) -> Vec<FileVersion> {
        let times: Vec<(u64, SystemTime)> = past
            .iter()
            .map(|v| (v.version, version_time(v.version)))
            .collect();
        let doomed = self.keep.history.doomed(newer, &times, SystemTime::now());
        past.into_iter()
            .filter(|v| !doomed.contains(&v.version))
            .collect()
    }

    /// FAILED_PRECONDITION on a mount that keeps no history.
    fn history_kept(&self, path: &VfsPath) -> Result<()> {
        if self.keep.history.keeps_history() {
            Ok(())
        } else {
            Err(no_history(path))
        }
    }

    /// Deletes, in the background, the past versions of `path` (and their
    /// blobs) that the mount's retention no longer keeps now that a newer
    /// version exists.
    pub(super) fn prune_history(&self, ns: &str, path: &VfsPath) {
        if !self.keep.history.keeps_history() {
            return;
        }
        let (store, ns, path, retention) =
            (self.store(), ns.to_owned(), path.clone(), self.keep.history);
        let pruned = self.bucket.spawn(async move {
            let head = store.keys.head(&ns, &path)?;
            // A change that lost its race may have kept the version still
            // current as a past one too: never take the current blob.
            let current = store
                .now(&ns, &head)
                .await?
                .state
                .map(|s| s.meta.content_blob());
            let keys = past_keys(&store, &ns, &path).await?;
            let past: Vec<(u64, SystemTime)> = keys
                .iter()
                .rev()
                .map(|(v, _)| (*v, version_time(*v)))
                .collect();
            let doomed = retention.doomed(1, &past, SystemTime::now());
            for (version, key) in keys.iter().filter(|(v, _)| doomed.contains(v)) {
                // The version first, then its blob: a crash in between
                // leaves an orphan blob for the sweep, never a version
                // without its content.
                let named = self::past(&store, key)
                    .await?
                    .map(|h| h.meta.content_blob());
                store.client.delete(key).await?;
                if let Some(blob) = named.filter(|b| *b != 0 && Some(*b) != current) {
                    store
                        .client
                        .delete(&store.keys.blob(&ns, &path, blob)?)
                        .await?;
                }
                tracing::debug!(path = %path, version, "dropped a past version");
            }
            Ok(())
        });
        if let Err(err) = pruned {
            tracing::warn!(cause = %err, "past versions left to the next change");
        }
    }
}
