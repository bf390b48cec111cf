//! Reclaims what no head needs any more (docs/object-storage.md § Orphans):
//! blobs a server uploaded whose head never committed (it was killed in
//! between) or whose deletion failed, and the logs of server runs long
//! gone.
//!
//! A blob is named after its file (`{ns}/b/{path}!{id}`), so the sweep asks
//! that file's head and its past versions whether one names it, never
//! scanning the heads. A blob younger than [`GRACE`] is left alone (its head
//! may be committing right now; an upload slower than half of it is renewed
//! first, see `RENEW_UPLOADS_AFTER`), so an orphan lives at most `GRACE +
//! SWEEP_INTERVAL`. The head is asked before the past versions: a change
//! that replaces the head keeps the past version first, so a blob is never
//! missed between the two. Sweeps of several servers overlap harmlessly.
//! The sweep only lists keys below the mount's key prefix, which its
//! deployment claim keeps clear of every other deployment's (`deployment`).

use super::head::State;
use super::keys::Space;
use super::log;
use super::state::{Store, read_head};
use crate::error::Result;
use futures_util::StreamExt;
use std::time::{Duration, SystemTime};

/// How old a blob must be before the sweep may take it.
pub const GRACE: Duration = Duration::from_secs(3600);
/// How often each server sweeps.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(3600);
/// A change log whose newest record is older than this belongs to a server
/// run long gone (a live server's log is pruned by the server itself): it
/// is deleted, records and successor marks.
pub const DEAD_LOG_AGE: Duration = Duration::from_secs(7 * 86_400);

/// The namespaces below the mount's key prefix.
pub async fn namespaces(store: &Store) -> Result<Vec<String>> {
    let listed = store.client.prefixes_below(store.keys.root()).await?;
    Ok(listed
        .iter()
        .filter_map(|p| store.keys.namespace_of(p))
        .collect())
}

/// True when the head of `path` or one of its past versions names blob
/// `id`.
async fn named(store: &Store, ns: &str, path: &crate::path::VfsPath, id: u64) -> Result<bool> {
    let key = store.keys.head(ns, path)?;
    if let Some(head) = read_head(&store.client, &store.cache, &key).await? {
        let mut bodies = vec![head.clone()];
        if let State::Pending(pending) = &head.state {
            bodies.push(super::head::Head::decode(
                &key,
                pending.new.clone(),
                String::new(),
            )?);
            if let Some(prior) = &pending.prior {
                bodies.push(super::head::Head::decode(
                    &key,
                    prior.clone(),
                    String::new(),
                )?);
            }
        }
        if bodies.iter().any(|h| h.meta.content_blob() == id) {
            return Ok(true);
        }
    }
    for meta in store
        .client
        .objects_below(&store.keys.versions(ns, path)?)
        .await?
    {
        let past = super::history::past(store, meta.location.as_ref()).await?;
        if past.is_some_and(|h| h.meta.content_blob() == id) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// One sweep of every namespace under the mount's key prefix, taking blobs
/// older than `grace` that nothing names and the logs of runs gone for
/// [`DEAD_LOG_AGE`] (never `own_log`); returns the blobs deleted.
pub async fn sweep(store: &Store, grace: Duration, own_log: u64) -> Result<u64> {
    let mut deleted = 0;
    for ns in namespaces(store).await? {
        let blobs = store.keys.space(&ns, Space::Blobs)?;
        let mut listing = store.client.list_after(&blobs, None)?;
        while let Some(meta) = listing.next().await {
            let meta = meta?;
            let age = SystemTime::now()
                .duration_since(meta.last_modified.into())
                .unwrap_or(Duration::ZERO);
            if age < grace {
                continue;
            }
            let key = meta.location.to_string();
            let Some((path, id)) = store.keys.blob_owner(&ns, &key) else {
                continue;
            };
            if !named(store, &ns, &path, id).await? {
                store.client.delete(&key).await?;
                deleted += 1;
                tracing::info!(blob = %key, "deleted an orphan blob");
            }
        }
        for run in log::logs(store, &ns).await? {
            if run == own_log {
                continue;
            }
            let last = log::last_seq(store, &ns, run).await?;
            let Some(newest) = log::record_time(store, &ns, run, last).await? else {
                continue;
            };
            if SystemTime::now()
                .duration_since(newest)
                .unwrap_or(Duration::ZERO)
                > DEAD_LOG_AGE
            {
                let records = log::prune(store, &ns, run, last).await?;
                tracing::info!(log = %format!("{run:016x}"), records, "deleted a gone server run's change log");
            }
        }
    }
    Ok(deleted)
}
