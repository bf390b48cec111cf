//! Object keys of the object tier: how a (namespace, path) becomes an S3
//! key that lists in path order, and back.
//!
//! Layout under the mount's `key_prefix` (docs/object-storage.md):
//!
//! - `{namespace}/f/{path}`: the head of a live file (its record, see
//!   `record`); a directory is implied by the heads below it;
//! - `{namespace}/b/{path}/{version}`: the content of a large file version,
//!   uploaded before the head that points at it is committed;
//! - `{namespace}/t/{path}`: the tombstone of a deleted file (its last
//!   version), so versions keep growing across a delete and a re-create.
//!
//! Path segments are encoded so that byte order of keys is path order, as
//! the walk and the one-level listings need: S3 lists keys in byte order, and
//! a path `a` must sort before `a/x` and `a/x` before `a-b` and `a.b` (the
//! order of [`VfsPath::order_key`]). With `/` between segments that needs
//! every byte of an encoded segment to sort above `/` (0x2F): the bytes
//! below it that a segment may hold (space to `.`) and the escape byte `0`
//! itself are written as `0` followed by the byte plus 0x20 (`.` → `0N`,
//! `-` → `0M`, `0` → `0P`). The escape is monotonic and prefix-free, so
//! encoded segments compare as the segments do; names are otherwise kept
//! readable. The encoding also keeps every key clear of what S3-compatible
//! stores rewrite (`//`, `..` segments: versitygw stores `u/../v` as `v`).
//!
//! Errors: a key over S3's 1,024 bytes is INVALID_ARGUMENT naming the path.

use crate::error::{Error, Result};
use crate::path::VfsPath;

/// The escape byte: the one unescaped byte that sorts lowest above `/`.
const ESCAPE: u8 = b'0';
/// Added to an escaped byte to make its second byte.
const ESCAPE_SHIFT: u8 = 0x20;
/// S3's longest key.
pub const MAX_KEY_BYTES: usize = 1024;

/// Appends the encoding of one path segment to `out`.
fn encode_segment(segment: &str, out: &mut String) {
    for ch in segment.chars() {
        match ch {
            ' '..='.' | '0' => {
                out.push(ESCAPE as char);
                // Space to `0` shift into `@` to `P`: plain ASCII.
                out.push((ch as u8 + ESCAPE_SHIFT) as char);
            }
            other => out.push(other),
        }
    }
}

/// The segment an encoded segment stands for (`None`: not one this
/// module wrote).
fn decode_segment(encoded: &str) -> Option<String> {
    let mut out = String::with_capacity(encoded.len());
    let mut chars = encoded.chars();
    while let Some(ch) = chars.next() {
        if ch == ESCAPE as char {
            let shifted = chars.next()? as u32;
            let byte = u8::try_from(shifted.checked_sub(u32::from(ESCAPE_SHIFT))?).ok()?;
            if !(b' '..=b'.').contains(&byte) && byte != ESCAPE {
                return None;
            }
            out.push(byte as char);
        } else {
            out.push(ch);
        }
    }
    Some(out)
}

/// Which kind of key of a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// Heads of live files.
    Heads,
    /// Contents of large file versions.
    Blobs,
    /// Tombstones of deleted files.
    Tombstones,
}

impl Space {
    fn tag(self) -> &'static str {
        match self {
            Space::Heads => "f",
            Space::Blobs => "b",
            Space::Tombstones => "t",
        }
    }
}

/// Keys of one mount: the bucket's `key_prefix` and the mount's prefix.
#[derive(Clone, Debug)]
pub struct ObjectKeys {
    /// The logical mount prefix.
    pub mount: VfsPath,
    /// Prepended to every key (empty, or ending with `/`).
    key_prefix: String,
}

impl ObjectKeys {
    /// Keys for `mount` under `key_prefix` (a `/` is added when missing).
    pub fn new(mount: VfsPath, key_prefix: &str) -> ObjectKeys {
        let mut key_prefix = key_prefix.trim_start_matches('/').to_owned();
        if !key_prefix.is_empty() && !key_prefix.ends_with('/') {
            key_prefix.push('/');
        }
        ObjectKeys { mount, key_prefix }
    }

    /// The key every namespace of the mount is below (the key prefix).
    pub fn root(&self) -> String {
        self.key_prefix.clone()
    }

    /// The namespace a listed namespace key (`{key_prefix}{ns}`) names.
    pub fn namespace_of(&self, key: &str) -> Option<String> {
        let encoded = key.strip_prefix(&self.key_prefix)?.trim_end_matches('/');
        decode_segment(encoded)
    }

    /// The file and blob id a blob key (`{ns}/b/{path}/{id}`) belongs to.
    pub fn blob_owner(&self, namespace: &str, key: &str) -> Option<(VfsPath, u64)> {
        let rel = key.strip_prefix(&self.space(namespace, Space::Blobs))?;
        let (file, id) = rel.rsplit_once('/')?;
        let mut path = self.mount.clone();
        for segment in file.split('/') {
            path = path.join(&decode_segment(segment)?).ok()?;
        }
        Some((path, id.parse().ok()?))
    }

    /// The key of the space `space` of `namespace` (ending with `/`).
    pub fn space(&self, namespace: &str, space: Space) -> String {
        let mut key = self.key_prefix.clone();
        encode_segment(namespace, &mut key);
        key.push('/');
        key.push_str(space.tag());
        key.push('/');
        key
    }

    /// The key of `path` in `space` (the mount root: the space's key
    /// without its final `/`). Too long for S3: INVALID_ARGUMENT.
    pub fn key(&self, namespace: &str, space: Space, path: &VfsPath) -> Result<String> {
        let mut key = self.space(namespace, space);
        let rel = path
            .relative_to(&self.mount)
            .ok_or_else(|| Error::NotFound(path.to_string()))?;
        if rel.is_empty() {
            key.pop();
        }
        for (i, segment) in rel.split('/').filter(|s| !s.is_empty()).enumerate() {
            if i > 0 {
                key.push('/');
            }
            encode_segment(segment, &mut key);
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(Error::InvalidArgument(format!(
                "{path}: too long for object storage (its key would be {} bytes; S3 keys hold \
                 at most {MAX_KEY_BYTES})",
                key.len()
            )));
        }
        Ok(key)
    }

    /// The prefix of every key strictly below the directory `dir` in
    /// `space` (ends with `/`).
    pub fn below(&self, namespace: &str, space: Space, dir: &VfsPath) -> Result<String> {
        let mut key = self.key(namespace, space, dir)?;
        if !key.ends_with('/') {
            key.push('/');
        }
        Ok(key)
    }

    /// The logical path of a key of `space` (`None`: not a key this module
    /// wrote there).
    pub fn path(&self, namespace: &str, space: Space, key: &str) -> Option<VfsPath> {
        let rel = key.strip_prefix(&self.space(namespace, space))?;
        let mut path = self.mount.clone();
        for segment in rel.split('/') {
            path = path.join(&decode_segment(segment)?).ok()?;
        }
        Some(path)
    }

    /// The key of the blob `id` (random, named by the head) of `path`.
    pub fn blob(&self, namespace: &str, path: &VfsPath, id: u64) -> Result<String> {
        let mut key = self.key(namespace, Space::Blobs, path)?;
        key.push('/');
        // Zero-padded: every id the same width, so `blob_owner` parses it back.
        key.push_str(&format!("{id:020}"));
        Ok(key)
    }

    /// Where a walk of the heads of `namespace` resumes to reach the first
    /// path with order key `>= from` (docs/contract.md order; the walk asks
    /// for the path right after one, `key ++ \0`, or for the first path past
    /// a directory's subtree, `key ++ \1`).
    pub fn seek(&self, namespace: &str, from: &[u8]) -> Seek {
        let mut below = self.mount.order_key();
        if !self.mount.is_root() {
            below.push(0);
        }
        if from <= below.as_slice() {
            return Seek::Start;
        }
        let Some(rel) = from.strip_prefix(below.as_slice()) else {
            return Seek::End;
        };
        let (rel, how) = match rel.split_last() {
            Some((0, rest)) => (rest, After::Key),
            Some((1, rest)) => (rest, After::Subtree),
            _ => (rel, After::Before),
        };
        let mut key = self.space(namespace, Space::Heads);
        let text = String::from_utf8_lossy(rel);
        for (i, segment) in text.split('\0').enumerate() {
            if i > 0 {
                key.push('/');
            }
            encode_segment(segment, &mut key);
        }
        match how {
            After::Key => Seek::After(key),
            // Every key below `key` continues with `/`, which sorts below
            // the escape byte, and no key is `key` followed by a lone escape.
            After::Subtree => {
                key.push(ESCAPE as char);
                Seek::After(key)
            }
            After::Before => Seek::AtOrAfter(key),
        }
    }
}

/// How an order key relates to the path it names.
enum After {
    /// Just after the path (`key ++ \0`).
    Key,
    /// Past the path's subtree (`key ++ \1`).
    Subtree,
    /// At the path itself.
    Before,
}

/// Where a walk of a namespace's heads resumes (see [`ObjectKeys::seek`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seek {
    /// At the first head.
    Start,
    /// At the first head whose key is greater than this one.
    After(String),
    /// At the first head whose key is this one or greater.
    AtOrAfter(String),
    /// Past every head of the mount.
    End,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> VfsPath {
        VfsPath::parse(s).unwrap()
    }

    #[test]
    fn keys_list_in_path_order() {
        let keys = ObjectKeys::new(p("/s3"), "team/");
        let mut paths = vec![
            "/s3/a.b",
            "/s3/a/x",
            "/s3/a-b/x",
            "/s3/a",
            "/s3/a0",
            "/s3/a 1",
            "/s3/ab",
            "/s3/a/",
            "/s3/é",
            "/s3/A",
            "/s3/a!x",
            "/s3/a/0/1",
        ];
        paths.dedup();
        let mut by_key: Vec<(String, &str)> = paths
            .iter()
            .map(|s| (keys.key("ns", Space::Heads, &p(s)).unwrap(), *s))
            .collect();
        by_key.sort();
        let mut by_path = paths.clone();
        by_path.sort_by_key(|s| p(s).order_key());
        by_path.dedup_by_key(|s| p(s));
        let sorted: Vec<&str> = by_key.iter().map(|(_, s)| *s).collect();
        let mut expected: Vec<&str> = by_path;
        expected.dedup_by_key(|s| p(s));
        let mut got = sorted.clone();
        got.dedup_by_key(|s| p(s));
        assert_eq!(got, expected);
    }

    #[test]
    fn keys_round_trip_and_stay_clear_of_what_stores_rewrite() {
        let keys = ObjectKeys::new(p("/s3"), "");
        for raw in ["/s3/a.b/..x/.", "/s3/0/00/x-y z", "/s3/日本/file"] {
            let Ok(path) = VfsPath::parse(raw) else {
                continue;
            };
            let key = keys.key("n.s", Space::Heads, &path).unwrap();
            assert!(!key.contains("//") && !key.split('/').any(|s| s == ".." || s == "."));
            assert_eq!(keys.path("n.s", Space::Heads, &key), Some(path));
        }
        assert_eq!(
            keys.key("ns", Space::Heads, &p("/s3/a.md")).unwrap(),
            "ns/f/a0Nmd"
        );
        assert_eq!(keys.below("ns", Space::Heads, &p("/s3")).unwrap(), "ns/f/");
        assert_eq!(
            keys.below("ns", Space::Heads, &p("/s3/d")).unwrap(),
            "ns/f/d/"
        );
        assert_eq!(keys.path("ns", Space::Heads, "ns/f/a0Z"), None);
        let blob = keys.blob("n.s", &p("/s3/d/f.bin"), 42).unwrap();
        assert_eq!(keys.blob_owner("n.s", &blob), Some((p("/s3/d/f.bin"), 42)));
        assert_eq!(keys.namespace_of("n0Ns"), Some("n.s".into()));
        let long = format!("/s3{}", "/abcdefghi".repeat(110));
        assert!(keys.key("ns", Space::Heads, &p(&long)).is_err());
    }

    #[test]
    fn seeks_fall_between_the_right_keys() {
        let keys = ObjectKeys::new(p("/s3"), "");
        let key = |s: &str| keys.key("ns", Space::Heads, &p(s)).unwrap();
        // Past /s3/a and everything below it, before /s3/a-b and /s3/a.b.
        let (_, past_a) = p("/s3/a").subtree_range();
        let Seek::After(seek) = keys.seek("ns", &past_a) else {
            panic!("past a subtree is After");
        };
        assert!(seek.as_str() > key("/s3/a/z").as_str());
        assert!(seek.as_str() < key("/s3/a-b").as_str() && seek.as_str() < key("/s3/a.b").as_str());
        // Right after /s3/a/x: its key, exclusive.
        let mut next = p("/s3/a/x").order_key();
        next.push(0);
        assert_eq!(keys.seek("ns", &next), Seek::After(key("/s3/a/x")));
        assert_eq!(
            keys.seek("ns", &p("/s3/a").order_key()),
            Seek::AtOrAfter(key("/s3/a"))
        );
        assert_eq!(keys.seek("ns", &p("/s3").subtree_range().0), Seek::Start);
        assert_eq!(keys.seek("ns", &p("/t").order_key()), Seek::End);
    }
}
