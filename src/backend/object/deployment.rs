//! Deployments that cannot collide (docs/object-storage.md § Sharing a
//! bucket): every deployment (the servers mounting one bucket with one
//! `key_prefix`) claims its prefix in a registry at the bucket's root,
//! `.agentvfs-deployments/p{hex of the prefix}`, by a conditional put; a
//! start-up whose prefix lies inside or around another deployment's is
//! refused naming both, since each would see the other's keys (and its
//! orphan sweep would take the other's blobs).
//!
//! The registry's name holds a `.`, which the key encoding always escapes in
//! a namespace (`keys`), so it never reads as a namespace of a deployment
//! at the bucket's root. A prefix that already holds objects but was never
//! claimed (an earlier agentvfs format, or another program's data) is
//! refused too, rather than read as heads.

use super::bucket::{Client, Put};
use crate::error::{Error, Result};
use bytes::Bytes;

/// The registry's key prefix at the bucket's root.
pub const REGISTRY: &str = ".agentvfs-deployments/";

/// The claim key of `key_prefix` (normalized: empty, or ending with `/`).
fn claim_key(key_prefix: &str) -> String {
    let hex: String = key_prefix.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{REGISTRY}p{hex}")
}

/// The prefix a claim key names.
fn claimed_prefix(key: &str) -> Option<String> {
    let hex = key.strip_prefix(REGISTRY)?.strip_prefix('p')?;
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// Every deployment's prefix claimed in the bucket.
async fn claims(client: &Client) -> Result<Vec<String>> {
    let listed = client.objects_below(REGISTRY).await?;
    Ok(listed
        .iter()
        .filter_map(|m| claimed_prefix(m.location.as_ref()))
        .collect())
}

/// The error when `ours` and `other` nest.
fn collision(bucket: &str, ours: &str, other: &str) -> Error {
    let (inner, outer) = if ours.len() > other.len() {
        (ours, other)
    } else {
        (other, ours)
    };
    Error::InvalidArgument(format!(
        "{bucket}: key_prefix {ours:?} collides with the deployment at key_prefix {other:?} \
         ({inner:?} lies inside {outer:?}, so each would see the other's files and sweep its \
         blobs); give each deployment a prefix outside every other's"
    ))
}

/// Claims `key_prefix` (normalized) for this deployment, or fails naming
/// the deployment it would collide with. Servers of one deployment share
/// the claim.
pub async fn claim(client: &Client, bucket: &str, key_prefix: &str) -> Result<()> {
    let nests = |other: &str| {
        other != key_prefix && (other.starts_with(key_prefix) || key_prefix.starts_with(other))
    };
    let existing = claims(client).await?;
    if let Some(other) = existing.iter().find(|o| nests(o)) {
        return Err(collision(bucket, key_prefix, other));
    }
    if !existing.iter().any(|o| o == key_prefix) {
        let foreign = client.page(key_prefix, None, 2, false).await?;
        if foreign
            .objects
            .iter()
            .any(|m| !m.location.as_ref().starts_with(REGISTRY))
        {
            return Err(Error::InvalidArgument(format!(
                "{bucket}: key_prefix {key_prefix:?} already holds objects that no agentvfs \
                 deployment claimed (written by an agentvfs before deployment claims, or by \
                 another program); use an empty prefix"
            )));
        }
        let body = Bytes::from(format!(
            "agentvfs deployment, object format 2, key_prefix {key_prefix:?}\n"
        ));
        put_claim(client, &claim_key(key_prefix), body).await?;
        // Two nested deployments claiming at once both see the other now.
        if let Some(other) = claims(client).await?.iter().find(|o| nests(o)) {
            return Err(collision(bucket, key_prefix, other));
        }
    }
    Ok(())
}

/// Tries to put the claim at `key` this many times when the store does not
/// answer.
const CLAIM_ATTEMPTS: u32 = 6;

/// Puts the claim at `key` unless it exists. The store's client retries
/// only requests that never left; a conditional put whose connection broke
/// after sending is not retried there, since its outcome is unknown. Here
/// it is safe to: the body is the same for every server of a deployment,
/// and a claim that exists already (this server's lost attempt, or another
/// server's) is the outcome asked for. Without this, one reset connection
/// at start-up refused the server (`scripts/test-linearizability`'s
/// `object-proxy` run with seed 530688111).
async fn put_claim(client: &Client, key: &str, body: Bytes) -> Result<()> {
    let mut pause = std::time::Duration::from_millis(50);
    let mut attempt = 1;
    loop {
        match client.put(key, body.clone(), Put::Create).await {
            Ok(_) => return Ok(()),
            Err(Error::Unavailable(why)) if attempt < CLAIM_ATTEMPTS => {
                tracing::warn!(
                    key,
                    attempt,
                    "claiming the key prefix failed, retrying: {why}"
                );
                tokio::time::sleep(pause).await;
                pause *= 2;
                attempt += 1;
            }
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_keys_round_trip() {
        for prefix in ["", "x/", "team-a/prod/"] {
            assert_eq!(claimed_prefix(&claim_key(prefix)).as_deref(), Some(prefix));
        }
        assert_eq!(claimed_prefix("other/key"), None);
    }
}
