//! Key layout of the Store tier: how a (namespace, path) becomes a RocksDB key.
//!
//! - `meta` column family: `namespace id (u32, big-endian)` ++ the path's
//!   order key *relative to the mount* (`notes/a.md` → `notes\0a.md`, see
//!   `ordered::keys`). Key order is therefore path order within a namespace
//!   (segment by segment, as a directory walk visits paths), a namespace is
//!   one key range, a directory's subtree is one key range, and a store can
//!   be mounted at any prefix because the prefix is not part of the key.
//! - `chunks` column family: `blob id (u64, big-endian)` ++ `chunk index (u32,
//!   big-endian)`. A blob id is drawn from the store's generation counter, so
//!   it is unique: a file's chunks are immutable for as long as its metadata
//!   points at them, and a reader that knows the id never sees another
//!   write's bytes.
//!
//! - `versions` column family: `namespace id` ++ relative key ++ `\0\0` ++
//!   `version (u64, big-endian)`: the past versions and tombstones of one
//!   file are one key range ([`versions_of`]), oldest first, ending with the
//!   file's index of them at version [`PAST_INDEX`] (what a change reads
//!   instead of scanning the range, which fills with the deletes of dropped
//!   versions). Relative keys never hold two NULs in a row (path segments
//!   are never empty), so no other file's versions fall in that range.
//! - `log` column family: `namespace id` ++ `change number (u64,
//!   big-endian)`: a namespace's change log in commit order.
//!
//! Invariants: namespace ids are below `u32::MAX`, so `id + 1` is always the
//! exclusive end of a namespace; relative keys never contain a `/` and never
//! start with NUL.

use crate::backend::ordered::keys::below;

/// Bytes of the namespace id that starts every `meta` key; also the length of
/// the `meta` column family's fixed prefix extractor, so bloom filters and
/// iterators are per namespace.
pub const NS_BYTES: usize = 4;
/// Bytes of the blob id that starts every `chunks` key (its prefix extractor).
pub const BLOB_BYTES: usize = 8;

/// A namespace's numeric id (its name is mapped to it once, persistently).
pub type NsId = u32;

/// The `meta` key of a relative key in a namespace.
pub fn meta(ns: NsId, rel: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(NS_BYTES + rel.len());
    key.extend_from_slice(&ns.to_be_bytes());
    key.extend_from_slice(rel);
    key
}

/// The relative key inside a `meta` key.
pub fn rel_of(key: &[u8]) -> &[u8] {
    key.get(NS_BYTES..).unwrap_or_default()
}

/// The `meta` key range `[lo, hi)` holding everything strictly below the
/// directory with relative key `rel` (the whole namespace for the mount root).
pub fn subtree(ns: NsId, rel: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (lo, hi) = below(rel);
    let hi = match hi {
        Some(hi) => meta(ns, &hi),
        None => (ns + 1).to_be_bytes().to_vec(),
    };
    (meta(ns, &lo), hi)
}

/// The version under which a file's index of its past versions is kept: no
/// real version reaches it (versions count writes).
pub const PAST_INDEX: u64 = u64::MAX;

/// The `versions` key of past `version` of a relative key.
pub fn version(ns: NsId, rel: &[u8], version: u64) -> Vec<u8> {
    let mut key = versions_of(ns, rel).0;
    key.extend_from_slice(&version.to_be_bytes());
    key
}

/// The `versions` key range `[lo, hi)` of every past version of `rel`.
pub fn versions_of(ns: NsId, rel: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut lo = meta(ns, rel);
    let mut hi = lo.clone();
    lo.extend_from_slice(&[0, 0]);
    hi.extend_from_slice(&[0, 1]);
    (lo, hi)
}

/// The number a `versions` key ends with (its version) or a `log` key
/// (its change number).
pub fn trailing_u64(key: &[u8]) -> u64 {
    let mut word = [0; 8];
    if let Some(tail) = key.len().checked_sub(8).and_then(|at| key.get(at..)) {
        word.copy_from_slice(tail);
    }
    u64::from_be_bytes(word)
}

/// The `log` key of change `seq` of a namespace.
pub fn log(ns: NsId, seq: u64) -> [u8; NS_BYTES + 8] {
    let mut key = [0; NS_BYTES + 8];
    key[..NS_BYTES].copy_from_slice(&ns.to_be_bytes());
    key[NS_BYTES..].copy_from_slice(&seq.to_be_bytes());
    key
}

/// The `chunks` key of chunk `index` of blob `blob`.
pub fn chunk(blob: u64, index: u32) -> [u8; BLOB_BYTES + 4] {
    let mut key = [0; BLOB_BYTES + 4];
    key[..BLOB_BYTES].copy_from_slice(&blob.to_be_bytes());
    key[BLOB_BYTES..].copy_from_slice(&index.to_be_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtree_ranges_stay_inside_the_namespace_and_directory() {
        let (lo, hi) = subtree(7, b"");
        assert_eq!(
            (lo.as_slice(), hi.as_slice()),
            (&[0, 0, 0, 7][..], &[0, 0, 0, 8][..])
        );
        let (lo, hi) = subtree(7, b"a");
        assert!(lo.as_slice() < meta(7, b"a\0x").as_slice());
        assert!(meta(7, b"a\0x\0y").as_slice() < hi.as_slice());
        assert!(meta(7, b"a-b").as_slice() >= hi.as_slice());
        assert!(meta(7, b"a").as_slice() < lo.as_slice());
    }

    #[test]
    fn a_files_versions_are_one_range_holding_no_other_file() {
        let (lo, hi) = versions_of(7, b"a");
        let inside = version(7, b"a", 9);
        assert!(lo <= inside && inside < hi);
        assert_eq!(trailing_u64(&inside), 9);
        for other in [&b"a\0b"[..], b"a-b", b"ab", b""] {
            let key = version(7, other, 9);
            assert!(key < lo || key >= hi, "{other:?}");
        }
        assert!(log(7, 1) < log(7, 2) && log(7, u64::MAX) < log(8, 0));
    }
}
