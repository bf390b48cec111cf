//! Reclaims orphan blobs: content a server uploaded but whose head never
//! committed (it was killed in between) or that a newer version replaced
//! while a delete of it failed. A blob is named after its file
//! (`{ns}/b/{path}/{id}`), so the sweep needs one GET of that file's head per
//! blob, never a scan of the heads.
//!
//! Every server sweeps at start-up and then every [`SWEEP_INTERVAL`]; a blob
//! younger than [`GRACE`] is left alone (its head may be committing right
//! now), so an orphan lives at most `GRACE + SWEEP_INTERVAL`. Sweeps of
//! several servers overlap harmlessly: a delete of a missing key succeeds.

use super::bucket::Client;
use super::cache::ContentCache;
use super::keys::{ObjectKeys, Space};
use super::read_head;
use crate::error::Result;
use futures_util::StreamExt;
use std::time::{Duration, SystemTime};

/// How old a blob must be before the sweep may take it.
pub const GRACE: Duration = Duration::from_secs(3600);
/// How often each server sweeps.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(3600);

/// One sweep of every namespace under the mount's key prefix, taking blobs
/// older than `grace` that no head names; returns the blobs deleted.
pub async fn sweep(
    client: &Client,
    cache: &ContentCache,
    keys: &ObjectKeys,
    grace: Duration,
) -> Result<u64> {
    let mut deleted = 0;
    let root = keys.root();
    let (namespaces, _) = client.list_level(&root).await?;
    for ns_key in namespaces {
        let Some(ns) = keys.namespace_of(&ns_key) else {
            continue;
        };
        let blobs = keys.space(&ns, Space::Blobs);
        let mut listing = client.list_after(&blobs, None)?;
        while let Some(meta) = listing.next().await {
            let meta = meta?;
            let age = SystemTime::now()
                .duration_since(meta.last_modified.into())
                .unwrap_or(Duration::ZERO);
            if age < grace {
                continue;
            }
            let key = meta.location.to_string();
            let Some((path, id)) = keys.blob_owner(&ns, &key) else {
                continue;
            };
            let head_key = keys.key(&ns, Space::Heads, &path)?;
            let named = read_head(client, cache, &head_key)
                .await?
                .is_some_and(|head| head.live && head.meta.content_blob() == id);
            if !named {
                client.delete(&key).await?;
                deleted += 1;
                tracing::info!(blob = %key, "deleted an orphan blob");
            }
        }
    }
    Ok(deleted)
}
