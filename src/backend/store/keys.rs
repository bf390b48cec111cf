//! Key layout of the Store tier: how a (namespace, path) becomes a RocksDB key.
//!
//! - `meta` column family: `namespace id (u32, big-endian)` ++ the path's
//!   [`order_key`] *relative to the mount* (`notes/a.md` → `notes\0a.md`). Key
//!   order is therefore path order within a namespace (segment by segment, as
//!   a directory walk visits paths), a namespace is one key range, a
//!   directory's subtree is one key range, and a store can be mounted at any
//!   prefix because the prefix is not part of the key.
//! - `chunks` column family: `blob id (u64, big-endian)` ++ `chunk index (u32,
//!   big-endian)`. A blob id is drawn from the store's generation counter, so
//!   it is unique: a file's chunks are immutable for as long as its metadata
//!   points at them, and a reader that knows the id never sees another
//!   write's bytes.
//!
//! Invariants: namespace ids are below `u32::MAX`, so `id + 1` is always the
//! exclusive end of a namespace; relative keys never contain a `/` and never
//! start with NUL.

use crate::error::{Error, Result};
use crate::path::{VfsPath, from_order_key, order_key};

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
    if rel.is_empty() {
        return (ns.to_be_bytes().to_vec(), (ns + 1).to_be_bytes().to_vec());
    }
    let mut lo = meta(ns, rel);
    lo.push(0);
    let mut hi = lo.clone();
    if let Some(last) = hi.last_mut() {
        *last = 1;
    }
    (lo, hi)
}

/// The relative keys of every proper ancestor directory of `rel`, outermost
/// first, starting with the mount root (`""`).
pub fn ancestors(rel: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::once(&rel[..0]).chain(
        rel.iter()
            .enumerate()
            .filter(|(_, b)| **b == 0)
            .map(move |(i, _)| &rel[..i]),
    )
}

/// The `chunks` key of chunk `index` of blob `blob`.
pub fn chunk(blob: u64, index: u32) -> [u8; BLOB_BYTES + 4] {
    let mut key = [0; BLOB_BYTES + 4];
    key[..BLOB_BYTES].copy_from_slice(&blob.to_be_bytes());
    key[BLOB_BYTES..].copy_from_slice(&index.to_be_bytes());
    key
}

/// Where a full-path order key (as the search engine and the mount table use
/// them) falls relative to a mount's keys.
#[derive(Debug, PartialEq, Eq)]
pub enum Seek {
    /// Before every path below the mount.
    Start,
    /// At this relative key.
    At(Vec<u8>),
    /// After every path below the mount.
    End,
}

/// Translates between logical paths and relative keys for one mount prefix.
#[derive(Clone, Debug)]
pub struct MountKeys {
    /// The mount prefix.
    pub mount: VfsPath,
    /// The order key every path strictly below the mount starts with
    /// (`\0memories\0` for `/memories`, `\0` for `/`).
    below: Vec<u8>,
}

impl MountKeys {
    /// The translation for `mount`.
    pub fn new(mount: VfsPath) -> MountKeys {
        let mut below = mount.order_key();
        if !mount.is_root() {
            below.push(0);
        }
        MountKeys { mount, below }
    }

    /// The relative key of `path` (empty for the mount itself).
    pub fn rel(&self, path: &VfsPath) -> Result<Vec<u8>> {
        match path.relative_to(&self.mount) {
            Some(rel) => Ok(order_key(rel)),
            // The mount table only routes paths within the mount here.
            None => Err(Error::NotFound(path.to_string())),
        }
    }

    /// The logical path of a relative key read back from storage.
    pub fn path(&self, rel: &[u8]) -> Result<VfsPath> {
        self.mount.join_relative(&from_order_key(rel))
    }

    /// Where the full order key `full` lies among this mount's keys.
    pub fn seek(&self, full: &[u8]) -> Seek {
        if full <= self.below.as_slice() {
            Seek::Start
        } else if let Some(rel) = full.strip_prefix(self.below.as_slice()) {
            Seek::At(rel.to_vec())
        } else {
            Seek::End
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> VfsPath {
        VfsPath::parse(s).unwrap()
    }

    #[test]
    fn relative_keys_round_trip_and_keep_path_order() {
        let keys = MountKeys::new(p("/memories"));
        let mut paths = vec!["/memories/a-b/x", "/memories/a/x/y", "/memories/a.b"];
        paths.sort_by_key(|s| keys.rel(&p(s)).unwrap());
        assert_eq!(
            paths,
            ["/memories/a/x/y", "/memories/a-b/x", "/memories/a.b"]
        );
        let rel = keys.rel(&p("/memories/a/x")).unwrap();
        assert_eq!(rel, b"a\0x");
        assert_eq!(keys.path(&rel).unwrap(), p("/memories/a/x"));
        assert!(keys.rel(&p("/memories")).unwrap().is_empty());
        assert!(keys.rel(&p("/memories-old/x")).is_err());
    }

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
    fn ancestors_start_at_the_mount_root() {
        let got: Vec<&[u8]> = ancestors(b"a\0b\0c").collect();
        assert_eq!(got, [&b""[..], b"a", b"a\0b"]);
        assert_eq!(ancestors(b"").count(), 1);
    }

    #[test]
    fn full_keys_map_onto_mount_keys() {
        let keys = MountKeys::new(p("/memories"));
        assert_eq!(keys.seek(&p("/").order_key()), Seek::Start);
        assert_eq!(keys.seek(&p("/memories").order_key()), Seek::Start);
        assert_eq!(
            keys.seek(&p("/memories/a/b").order_key()),
            Seek::At(b"a\0b".to_vec())
        );
        assert_eq!(keys.seek(&p("/zeta").order_key()), Seek::End);
        assert_eq!(keys.seek(&p("/memories-old").order_key()), Seek::End);
        let root = MountKeys::new(VfsPath::root());
        assert_eq!(root.seek(&p("/a").order_key()), Seek::At(b"a".to_vec()));
        assert_eq!(root.seek(b""), Seek::Start);
    }
}
