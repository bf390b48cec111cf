//! Object keys of the object tier: how a (namespace, path) becomes an S3
//! key that lists in path order, and back.
//!
//! Layout under the mount's `key_prefix` (docs/object-storage.md § Keys):
//!
//! - `{ns}/f/{path}!`: the **head** of a file, whatever state it is in (live,
//!   deleted, moved away, being moved in); a directory is implied by the
//!   live heads below it. A head is never removed (only conditional puts
//!   decide outcomes), so the terminator `!` keeps a file's key apart from
//!   its name as a directory: a deleted `a` (`f/a!`) never blocks `a/x`
//!   (`f/a/x!`), on stores where a key cannot also be a "directory";
//! - `{ns}/b/{path}!{id}`: the content of a large file version (a **blob**),
//!   uploaded before the head that names it;
//! - `{ns}/v/{path}!{version}`: a **past version** of a file (history);
//! - `{ns}/l/{log}/{seq}`: record `seq` of a server's **change log** `log`;
//! - `{ns}/s/{log}/{seq}`: the **successor mark** of the change at that
//!   position: proof that the change committed (a later change replaced it).
//!
//! Numbers (`id`, `version`, `log`, `seq`) are 16 lower-case hex digits, so
//! keys of one kind list in numeric order.
//!
//! Path segments are encoded so that byte order of keys is path order, as
//! the walk and the one-level listings need: S3 lists keys in byte order, and
//! a path `a` must sort before `a/x` and `a/x` before `a-b` and `a.b` (the
//! order of [`VfsPath::order_key`]). With `/` between segments that needs
//! every byte of an encoded segment to sort above `/` (0x2F): the bytes
//! below it that a segment may hold (space to `.`) and the escape byte `0`
//! itself are written as `0` followed by the byte plus 0x20 (`.` → `0N`,
//! `-` → `0M`, `0` → `0P`). The escape is monotonic and prefix-free, so
//! encoded segments compare as the segments do; the terminator `!` (0x21)
//! sorts below `/` and below every encoded byte, so `a!` < `a/x!` < `ab!`.
//! The encoding also keeps every key clear of what S3-compatible stores
//! rewrite (`//`, `..` segments: versitygw stores `u/../v` as `v`).
//!
//! Errors: a key over S3's 1,024 bytes, or a name whose encoded segment is
//! over [`MAX_SEGMENT_BYTES`] (a file-system backed store keeps each
//! segment as a file name, at most 255 bytes), is INVALID_ARGUMENT naming
//! the path and the limit, before any request.

use crate::error::{Error, Result};
use crate::path::VfsPath;

/// The escape byte: the one unescaped byte that sorts lowest above `/`.
const ESCAPE: u8 = b'0';
/// Added to an escaped byte to make its second byte.
const ESCAPE_SHIFT: u8 = 0x20;
/// Ends a file's segment in head, blob and version keys.
const TERMINATOR: char = '!';
/// S3's longest key.
pub const MAX_KEY_BYTES: usize = 1024;
/// Longest encoded segment: a blob key's last segment adds the terminator
/// and 16 digits, and stores on a file system (versitygw's posix backend)
/// keep each segment as a file name of at most 255 bytes.
pub const MAX_SEGMENT_BYTES: usize = 255 - 17;

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
/// module wrote, e.g. a raw byte it would have escaped).
fn decode_segment(encoded: &str) -> Option<String> {
    let mut out = String::with_capacity(encoded.len());
    let mut chars = encoded.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '0' => {
                let shifted = chars.next()? as u32;
                let byte = u8::try_from(shifted.checked_sub(u32::from(ESCAPE_SHIFT))?).ok()?;
                if !(b' '..=b'.').contains(&byte) && byte != ESCAPE {
                    return None;
                }
                out.push(byte as char);
            }
            ' '..='/' => return None,
            other => out.push(other),
        }
    }
    Some(out)
}

/// A 16-digit hex number as keys hold it.
fn hex(n: u64) -> String {
    format!("{n:016x}")
}

/// The number of a 16-digit hex key segment.
fn unhex(text: &str) -> Option<u64> {
    (text.len() == 16)
        .then(|| u64::from_str_radix(text, 16).ok())
        .flatten()
}

/// Which kind of key of a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// Heads of files.
    Heads,
    /// Contents of large file versions.
    Blobs,
    /// Past versions of files.
    Versions,
    /// The servers' change logs.
    Logs,
    /// Successor marks of changes.
    Successors,
    /// Commit records of changesets.
    Changesets,
}

impl Space {
    fn tag(self) -> &'static str {
        match self {
            Space::Heads => "f",
            Space::Blobs => "b",
            Space::Versions => "v",
            Space::Logs => "l",
            Space::Successors => "s",
            Space::Changesets => "x",
        }
    }
}

/// A change's place in the change logs: the log of one server run and its
/// number there (`seq` 0: no log kept).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Position {
    /// The log (random per server run and namespace; 0: none).
    pub log: u64,
    /// The change's number in it, from 1.
    pub seq: u64,
}

impl Position {
    /// No position: the change was made with no change log kept.
    pub const NONE: Position = Position { log: 0, seq: 0 };

    /// True for a real position.
    pub fn is_some(&self) -> bool {
        self.seq != 0
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
        ObjectKeys {
            mount,
            key_prefix: normal_prefix(key_prefix),
        }
    }

    /// The key every namespace of the mount is below (the key prefix).
    pub fn root(&self) -> &str {
        &self.key_prefix
    }

    /// The namespace a listed namespace key (`{key_prefix}{ns}/`) names.
    pub fn namespace_of(&self, key: &str) -> Option<String> {
        let encoded = key.strip_prefix(&self.key_prefix)?.strip_suffix('/')?;
        decode_segment(encoded)
    }

    /// The key of the space `space` of `namespace` (ending with `/`).
    pub fn space(&self, namespace: &str, space: Space) -> Result<String> {
        let mut key = self.key_prefix.clone();
        push_segment(&mut key, namespace, || format!("namespace {namespace:?}"))?;
        key.push('/');
        key.push_str(space.tag());
        key.push('/');
        Ok(key)
    }

    /// `path` below the mount, encoded, appended to the key of `space`
    /// (the mount root adds nothing).
    fn path_key(&self, namespace: &str, space: Space, path: &VfsPath) -> Result<String> {
        let mut key = self.space(namespace, space)?;
        let rel = path
            .relative_to(&self.mount)
            .ok_or_else(|| Error::NotFound(path.to_string()))?;
        for (i, segment) in rel.split('/').filter(|s| !s.is_empty()).enumerate() {
            if i > 0 {
                key.push('/');
            }
            push_segment(&mut key, segment, || path.to_string())?;
        }
        Ok(key)
    }

    /// The head key of the file `path` (not the mount root).
    pub fn head(&self, namespace: &str, path: &VfsPath) -> Result<String> {
        let mut key = self.path_key(namespace, Space::Heads, path)?;
        key.push(TERMINATOR);
        checked(path, key)
    }

    /// The prefix of every key strictly below the directory `dir` in
    /// `space` (ends with `/`).
    pub fn below(&self, namespace: &str, space: Space, dir: &VfsPath) -> Result<String> {
        let mut key = self.path_key(namespace, space, dir)?;
        if !key.ends_with('/') {
            key.push('/');
        }
        checked(dir, key)
    }

    /// The logical path of a head key (`None`: not a key this module wrote).
    pub fn path(&self, namespace: &str, key: &str) -> Option<VfsPath> {
        let space = self.space(namespace, Space::Heads).ok()?;
        let rel = key.strip_prefix(&space)?.strip_suffix(TERMINATOR)?;
        self.decode_path(rel)
    }

    /// The logical path below the mount that `rel` (encoded segments joined
    /// by `/`) stands for.
    fn decode_path(&self, rel: &str) -> Option<VfsPath> {
        let mut path = self.mount.clone();
        for segment in rel.split('/') {
            path = path.join(&decode_segment(segment)?).ok()?;
        }
        Some(path)
    }

    /// The key of the blob `id` (random, named by a head) of `path`.
    pub fn blob(&self, namespace: &str, path: &VfsPath, id: u64) -> Result<String> {
        let mut key = self.path_key(namespace, Space::Blobs, path)?;
        key.push(TERMINATOR);
        key.push_str(&hex(id));
        checked(path, key)
    }

    /// The file and blob id a blob key belongs to.
    pub fn blob_owner(&self, namespace: &str, key: &str) -> Option<(VfsPath, u64)> {
        let space = self.space(namespace, Space::Blobs).ok()?;
        let (file, id) = key.strip_prefix(&space)?.rsplit_once(TERMINATOR)?;
        Some((self.decode_path(file)?, unhex(id)?))
    }

    /// The prefix of the keys of every past version of `path`.
    pub fn versions(&self, namespace: &str, path: &VfsPath) -> Result<String> {
        let mut key = self.path_key(namespace, Space::Versions, path)?;
        key.push(TERMINATOR);
        checked(path, key)
    }

    /// The key of past version `version` of `path`.
    pub fn version(&self, namespace: &str, path: &VfsPath, version: u64) -> Result<String> {
        let mut key = self.versions(namespace, path)?;
        key.push_str(&hex(version));
        checked(path, key)
    }

    /// The version number of a key listed below [`ObjectKeys::versions`].
    pub fn version_of(listed: &str) -> Option<u64> {
        unhex(listed.rsplit_once(TERMINATOR)?.1)
    }

    /// The prefix of the records of change log `log` (`None`: of every log).
    pub fn log(&self, namespace: &str, log: Option<u64>) -> Result<String> {
        let mut key = self.space(namespace, Space::Logs)?;
        if let Some(log) = log {
            key.push_str(&hex(log));
            key.push('/');
        }
        Ok(key)
    }

    /// The key of the change log record at `at`.
    pub fn record(&self, namespace: &str, at: Position) -> Result<String> {
        let mut key = self.log(namespace, Some(at.log))?;
        key.push_str(&hex(at.seq));
        Ok(key)
    }

    /// The log id of a listed log prefix, or the position of a listed
    /// record (`seq` 0 for a prefix).
    pub fn position_of(&self, namespace: &str, space: Space, key: &str) -> Option<Position> {
        let rel = key.strip_prefix(&self.space(namespace, space).ok()?)?;
        let (log, seq) = rel.split_once('/')?;
        let seq = if seq.is_empty() { 0 } else { unhex(seq)? };
        Some(Position {
            log: unhex(log)?,
            seq,
        })
    }

    /// The prefix of the successor marks of log `log` (`None`: every log).
    pub fn successors(&self, namespace: &str, log: Option<u64>) -> Result<String> {
        let mut key = self.space(namespace, Space::Successors)?;
        if let Some(log) = log {
            key.push_str(&hex(log));
            key.push('/');
        }
        Ok(key)
    }

    /// The key of changeset `id`'s commit record (src/backend/object/changeset.rs).
    pub fn changeset(&self, namespace: &str, id: u64) -> Result<String> {
        let mut key = self.space(namespace, Space::Changesets)?;
        key.push_str(&hex(id));
        Ok(key)
    }

    /// The key of the successor mark of the change at `at`.
    pub fn successor(&self, namespace: &str, at: Position) -> Result<String> {
        let mut key = self.successors(namespace, Some(at.log))?;
        key.push_str(&hex(at.seq));
        Ok(key)
    }

    /// Where a walk of the heads of `namespace` resumes to reach the first
    /// path with order key `>= from` (docs/contract.md order; the walk asks
    /// for the path right after one, `key ++ \0`, or for the first path past
    /// a directory's subtree, `key ++ \1`).
    pub fn seek(&self, namespace: &str, from: &[u8]) -> Result<Seek> {
        let mut below = self.mount.order_key();
        if !self.mount.is_root() {
            below.push(0);
        }
        if from <= below.as_slice() {
            return Ok(Seek::Start);
        }
        let Some(rel) = from.strip_prefix(below.as_slice()) else {
            return Ok(Seek::End);
        };
        let (rel, how) = match rel.split_last() {
            Some((0, rest)) => (rest, After::Key),
            Some((1, rest)) => (rest, After::Subtree),
            _ => (rel, After::Before),
        };
        let mut key = self.space(namespace, Space::Heads)?;
        let text = String::from_utf8_lossy(rel);
        for (i, segment) in text.split('\0').enumerate() {
            if i > 0 {
                key.push('/');
            }
            encode_segment(segment, &mut key);
        }
        Ok(match how {
            // Past the file `key!`; its subtree (`key/…`) still follows.
            After::Key => {
                key.push(TERMINATOR);
                Seek::After(key)
            }
            // Every key of the path and below it continues with `!` or
            // `/`, which sort below the escape byte, and no key continues
            // with a lone escape.
            After::Subtree => {
                key.push(ESCAPE as char);
                Seek::After(key)
            }
            // The file `key!` and its subtree `key/…` both sort at or
            // after `key!`.
            After::Before => {
                key.push(TERMINATOR);
                Seek::AtOrAfter(key)
            }
        })
    }
}

/// `key_prefix` as keys start with it: no leading `/`, a trailing one
/// unless empty.
pub fn normal_prefix(key_prefix: &str) -> String {
    let mut key_prefix = key_prefix.trim_start_matches('/').to_owned();
    if !key_prefix.is_empty() && !key_prefix.ends_with('/') {
        key_prefix.push('/');
    }
    key_prefix
}

/// Appends the encoding of `segment` to `key`, refusing one longer than
/// [`MAX_SEGMENT_BYTES`] encoded (`what` names it in the error).
fn push_segment(key: &mut String, segment: &str, what: impl Fn() -> String) -> Result<()> {
    let start = key.len();
    encode_segment(segment, key);
    let encoded = key.len() - start;
    if encoded > MAX_SEGMENT_BYTES {
        return Err(Error::InvalidArgument(format!(
            "{}: the name {:?} is too long for object storage: its key segment would be \
             {encoded} bytes, and one may hold at most {MAX_SEGMENT_BYTES} (space, the \
             characters !\"#$%&'()*+,-. and 0 take two bytes each)",
            what(),
            crate::error::echo(segment),
        )));
    }
    Ok(())
}

/// `key` when it fits S3's key length; INVALID_ARGUMENT naming `path`
/// otherwise.
fn checked(path: &VfsPath, key: String) -> Result<String> {
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::InvalidArgument(format!(
            "{path}: too long for object storage (its key would be {} bytes; S3 keys hold at \
             most {MAX_KEY_BYTES})",
            key.len()
        )));
    }
    Ok(key)
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
        let paths = [
            "/s3/a.b",
            "/s3/a/x",
            "/s3/a-b/x",
            "/s3/a",
            "/s3/a0",
            "/s3/a 1",
            "/s3/ab",
            "/s3/é",
            "/s3/A",
            "/s3/a!x",
            "/s3/a/0/1",
            "/s3/a/x/y",
        ];
        let mut by_key: Vec<(String, &str)> = paths
            .iter()
            .map(|s| (keys.head("ns", &p(s)).unwrap(), *s))
            .collect();
        by_key.sort();
        let mut by_path = paths.to_vec();
        by_path.sort_by_key(|s| p(s).order_key());
        let sorted: Vec<&str> = by_key.iter().map(|(_, s)| *s).collect();
        assert_eq!(sorted, by_path);
    }

    #[test]
    fn keys_round_trip_and_stay_clear_of_what_stores_rewrite() {
        let keys = ObjectKeys::new(p("/s3"), "");
        for raw in ["/s3/a.b/..x/.y", "/s3/0/00/x-y z", "/s3/日本/file"] {
            let path = p(raw);
            let key = keys.head("n.s", &path).unwrap();
            assert!(!key.contains("//") && !key.split('/').any(|s| s == ".." || s == "."));
            assert_eq!(keys.path("n.s", &key), Some(path));
        }
        assert_eq!(keys.head("ns", &p("/s3/a.md")).unwrap(), "ns/f/a0Nmd!");
        assert_eq!(keys.below("ns", Space::Heads, &p("/s3")).unwrap(), "ns/f/");
        assert_eq!(
            keys.below("ns", Space::Heads, &p("/s3/d")).unwrap(),
            "ns/f/d/"
        );
        assert_eq!(keys.path("ns", "ns/f/a0Z!"), None);
        assert_eq!(keys.path("ns", "ns/f/a.b!"), None, "raw bytes it escapes");
        let blob = keys.blob("n.s", &p("/s3/d/f.bin"), 42).unwrap();
        assert_eq!(keys.blob_owner("n.s", &blob), Some((p("/s3/d/f.bin"), 42)));
        assert_eq!(keys.namespace_of("n0Ns/"), Some("n.s".into()));
        assert_eq!(keys.namespace_of(".agentvfs/"), None);
        let version = keys.version("ns", &p("/s3/d/f"), 7).unwrap();
        assert!(version.starts_with(&keys.versions("ns", &p("/s3/d/f")).unwrap()));
        assert_eq!(ObjectKeys::version_of(&version), Some(7));
        let at = Position { log: 9, seq: 300 };
        let record = keys.record("ns", at).unwrap();
        assert_eq!(keys.position_of("ns", Space::Logs, &record), Some(at));
        let log = keys.log("ns", Some(9)).unwrap();
        assert_eq!(
            keys.position_of("ns", Space::Logs, &log),
            Some(Position { log: 9, seq: 0 })
        );
        let mark = keys.successor("ns", at).unwrap();
        assert_eq!(keys.position_of("ns", Space::Successors, &mark), Some(at));
    }

    #[test]
    fn long_names_and_keys_are_invalid_arguments() {
        let keys = ObjectKeys::new(p("/s3"), "");
        let dashes = format!("/s3/{}", "-".repeat(200));
        let err = keys.head("ns", &p(&dashes)).unwrap_err();
        assert_eq!(err.code(), "INVALID_PARAM", "{err}");
        assert!(err.to_string().contains("400 bytes"), "{err}");
        let fits = format!("/s3/{}", "a".repeat(MAX_SEGMENT_BYTES));
        keys.blob("ns", &p(&fits), u64::MAX).unwrap();
        let long = format!("/s3{}", "/abcdefghi".repeat(110));
        assert!(keys.head("ns", &p(&long)).is_err());
    }

    #[test]
    fn a_deleted_file_and_a_directory_of_its_name_have_distinct_keys() {
        let keys = ObjectKeys::new(p("/s3"), "");
        let file = keys.head("ns", &p("/s3/a")).unwrap();
        let below = keys.below("ns", Space::Heads, &p("/s3/a")).unwrap();
        assert!(!below.starts_with(&file) && !file.starts_with(&below));
    }

    #[test]
    fn seeks_fall_between_the_right_keys() {
        let keys = ObjectKeys::new(p("/s3"), "");
        let key = |s: &str| keys.head("ns", &p(s)).unwrap();
        let seek = |from: &[u8]| keys.seek("ns", from).unwrap();
        // Past /s3/a and everything below it, before /s3/a-b and /s3/a.b.
        let (_, past_a) = p("/s3/a").subtree_range();
        let Seek::After(past) = seek(&past_a) else {
            panic!("past a subtree is After");
        };
        assert!(past.as_str() > key("/s3/a/z").as_str() && past.as_str() > key("/s3/a").as_str());
        assert!(past.as_str() < key("/s3/a-b").as_str() && past.as_str() < key("/s3/a.b").as_str());
        // Right after /s3/a/x: its key, exclusive; its subtree still ahead.
        let mut next = p("/s3/a/x").order_key();
        next.push(0);
        assert_eq!(seek(&next), Seek::After(key("/s3/a/x")));
        assert!(key("/s3/a/x/y").as_str() > key("/s3/a/x").as_str());
        assert_eq!(seek(&p("/s3/a").order_key()), Seek::AtOrAfter(key("/s3/a")));
        assert_eq!(seek(&p("/s3").subtree_range().0), Seek::Start);
        assert_eq!(seek(&p("/t").order_key()), Seek::End);
    }
}
