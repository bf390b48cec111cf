//! Order keys relative to a mount: how a logical path becomes a key of an
//! ordered tier, and back.
//!
//! A tier keeps each file under the [`order_key`] of its path *relative to
//! the mount* (`/memories/notes/a.md` → `notes\0a.md`). Key order is
//! therefore path order (segment by segment, as a directory walk visits
//! paths), a directory's subtree is one key range ([`below`]), and a tier can
//! be mounted at any prefix because the prefix is not part of the key (the
//! Store persists these keys). The mount root is the empty key.
//!
//! Invariants: relative keys never contain a `/` and never start with NUL.

use crate::error::{Error, Result};
use crate::path::{VfsPath, from_order_key, order_key};

/// The key range holding everything strictly below the directory `rel`:
/// `[rel\0, rel\x01)`, or every key (no upper bound) for the mount root.
pub fn below(rel: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    if rel.is_empty() {
        return (Vec::new(), None);
    }
    let mut lo = Vec::with_capacity(rel.len() + 1);
    lo.extend_from_slice(rel);
    lo.push(0);
    (lo, Some(past(rel)))
}

/// The first key after `rel` and everything below it (`rel\x01`): where a
/// scan skipping the subtree of `rel` seeks.
pub fn past(rel: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(rel.len() + 1);
    key.extend_from_slice(rel);
    key.push(1);
    key
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
    fn ranges_below_hold_exactly_the_subtree() {
        assert_eq!(below(b""), (Vec::new(), None));
        let (lo, hi) = below(b"a");
        let hi = hi.unwrap();
        assert!(lo.as_slice() <= &b"a\0x"[..] && &b"a\0x\0y"[..] < hi.as_slice());
        assert!(&b"a-b"[..] >= hi.as_slice());
        assert!(&b"a"[..] < lo.as_slice());
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
