//! Logical paths: the one place where a path from a caller is validated.
//!
//! Every path that reaches a backend, a grant check or a mount lookup is a
//! [`VfsPath`], and the only way to make one from caller input is
//! [`VfsPath::parse`]. The rules (docs/contract.md § Paths) are purely textual: a path
//! is absolute POSIX (`/workspace/src/main.rs`), never trimmed or case-folded
//! (`/a` and `/a ` are different paths), and it is rejected, not repaired, when it
//! is empty, relative, contains `..` or `.` segments, `//`, a backslash, a glob
//! wildcard (`*`, `?`), or a control character (NUL included). One trailing `/`
//! is accepted and dropped, so `/dir` and `/dir/` name the same directory.
//!
//! # Example
//! ```
//! use agentvfs::VfsPath;
//! let p = VfsPath::parse("/workspace/src/").unwrap();
//! assert_eq!(p.as_str(), "/workspace/src");
//! assert!(VfsPath::parse("/workspace/../etc").is_err());
//! ```

use crate::error::{Error, Result};
use std::fmt;

/// Longest accepted path in bytes (Linux's PATH_MAX), so no tier meets a path it
/// cannot store.
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest accepted segment in bytes (Linux's NAME_MAX).
pub const MAX_SEGMENT_BYTES: usize = 255;

/// A validated, normalised absolute logical path.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VfsPath(String);

impl VfsPath {
    /// The root `/`.
    pub fn root() -> Self {
        VfsPath("/".to_owned())
    }

    /// Validates caller input; see the module doc for the rules.
    pub fn parse(raw: &str) -> Result<Self> {
        let bad = |reason: &str| Err(Error::invalid_path(raw, reason));
        if raw.is_empty() {
            return bad("path is empty");
        }
        if !raw.starts_with('/') {
            return bad("path must be absolute (start with '/')");
        }
        if raw.len() > MAX_PATH_BYTES {
            return bad("path is longer than 4096 bytes");
        }
        if let Some(c) = raw.chars().find(|c| c.is_control()) {
            return bad(&format!(
                "path contains control character U+{:04X}",
                c as u32
            ));
        }
        if raw.contains('\\') {
            return bad("path contains a backslash");
        }
        if raw.contains(['*', '?']) {
            return bad("path contains a wildcard ('*' or '?')");
        }
        if raw.contains("//") {
            return bad("path contains an empty segment ('//')");
        }
        let trimmed = if raw.len() > 1 {
            raw.strip_suffix('/').unwrap_or(raw)
        } else {
            raw
        };
        for segment in trimmed.split('/').skip(1) {
            match segment {
                "" if trimmed == "/" => {}
                "." | ".." => return bad("path contains a '.' or '..' segment"),
                s if s.len() > MAX_SEGMENT_BYTES => {
                    return bad("path has a segment longer than 255 bytes");
                }
                _ => {}
            }
        }
        Ok(VfsPath(trimmed.to_owned()))
    }

    /// The path as text, without trailing slash (except the root).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for `/`.
    pub fn is_root(&self) -> bool {
        self.0 == "/"
    }

    /// The segments, root having none.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|s| !s.is_empty())
    }

    /// The last segment (empty for the root).
    pub fn name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or("")
    }

    /// The parent directory (the root is its own parent).
    pub fn parent(&self) -> VfsPath {
        match self.0.rfind('/') {
            Some(0) | None => VfsPath::root(),
            Some(i) => VfsPath(self.0[..i].to_owned()),
        }
    }

    /// True when `name` is a plain segment that [`VfsPath::join`] accepts
    /// without parsing the joined path again (no `/`, `\\`, wildcard or
    /// control character, not `.` or `..`, within the length limits). Every
    /// valid name is plain, except under paths near [`MAX_PATH_BYTES`].
    pub fn joins_plainly(&self, name: &str) -> bool {
        !matches!(name, "" | "." | "..")
            && name.len() <= MAX_SEGMENT_BYTES
            && self.0.len() + 1 + name.len() <= MAX_PATH_BYTES
            && !name.contains(['/', '\\', '*', '?'])
            && !name.chars().any(char::is_control)
    }

    /// Appends one segment, which must be a valid file name (no `/`).
    pub fn join(&self, name: &str) -> Result<VfsPath> {
        // Fast path (the search walk joins every entry it visits): `self` is
        // valid already, so a plain name only needs its own checks;
        // re-parsing the whole path cost ~3% of a Glob's CPU. Anything
        // unusual takes the full parse below for its exact error.
        if self.joins_plainly(name) {
            let mut joined = String::with_capacity(self.0.len() + 1 + name.len());
            joined.push_str(if self.is_root() { "" } else { &self.0 });
            joined.push('/');
            joined.push_str(name);
            return Ok(VfsPath(joined));
        }
        if self.is_root() {
            VfsPath::parse(&format!("/{name}"))
        } else {
            VfsPath::parse(&format!("{}/{name}", self.0))
        }
        .and_then(|p| {
            if name.contains('/') || name.is_empty() {
                Err(Error::invalid_path(
                    name,
                    "file name is empty or contains '/'",
                ))
            } else {
                Ok(p)
            }
        })
    }

    /// Appends a relative path (`a/b`) made of valid segments.
    pub fn join_relative(&self, rel: &str) -> Result<VfsPath> {
        if rel.is_empty() {
            return Ok(self.clone());
        }
        if self.is_root() {
            VfsPath::parse(&format!("/{rel}"))
        } else {
            VfsPath::parse(&format!("{}/{rel}", self.0))
        }
    }

    /// True when `self` is `dir` or lies below it, on segment boundaries:
    /// `/memories` contains `/memories/x` but not `/memories-old/x`.
    pub fn is_within(&self, dir: &VfsPath) -> bool {
        dir.is_root()
            || self.0 == dir.0
            || (self.0.starts_with(&dir.0) && self.0.as_bytes()[dir.0.len()] == b'/')
    }

    /// The part of `self` below `dir` (`a/b` for `/d/a/b` in `/d`), empty when
    /// equal, `None` when `self` is not within `dir`.
    pub fn relative_to(&self, dir: &VfsPath) -> Option<&str> {
        if !self.is_within(dir) {
            None
        } else if dir.is_root() {
            Some(&self.0[1..])
        } else if self.0.len() == dir.0.len() {
            Some("")
        } else {
            Some(&self.0[dir.0.len() + 1..])
        }
    }

    /// Rebases `self` from within `from` onto `to` (mount prefix stripping and
    /// restoring), never producing `//`.
    pub fn rebase(&self, from: &VfsPath, to: &VfsPath) -> Option<VfsPath> {
        let rel = self.relative_to(from)?;
        if rel.is_empty() {
            Some(to.clone())
        } else if to.is_root() {
            Some(VfsPath(format!("/{rel}")))
        } else {
            Some(VfsPath(format!("{}/{rel}", to.0)))
        }
    }

    /// The sort key that orders paths segment by segment (`/a/x` before
    /// `/a-b/x`, as a directory walk visits them): `/` becomes NUL, which sorts
    /// below every character a segment may contain.
    pub fn order_key(&self) -> Vec<u8> {
        order_key(&self.0)
    }

    /// The order-key range `[start, end)` holding everything strictly below
    /// this directory: a subtree is one key range because `/` sorts as NUL.
    pub fn subtree_range(&self) -> (Vec<u8>, Vec<u8>) {
        let mut start = self.order_key();
        if !self.is_root() {
            start.push(0);
        }
        let mut end = start.clone();
        if let Some(last) = end.last_mut() {
            *last = 1;
        }
        (start, end)
    }
}

/// See [`VfsPath::order_key`]; also works on relative paths.
pub fn order_key(path: &str) -> Vec<u8> {
    path.bytes()
        .map(|b| if b == b'/' { 0 } else { b })
        .collect()
}

/// Inverse of [`order_key`].
pub fn from_order_key(key: &[u8]) -> String {
    let bytes: Vec<u8> = key.iter().map(|&b| if b == 0 { b'/' } else { b }).collect();
    // Keys are only ever made from valid strings by `order_key`.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Checks one file name found on a real disk or in storage: non-empty, no `/`,
/// no control characters, not `.`/`..`. Names failing it are reported, never
/// mangled into another name.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '*', '?']) {
        return Err(Error::invalid_path(name, "not a valid file name"));
    }
    if name.chars().any(|c| c.is_control()) {
        return Err(Error::invalid_path(
            name,
            "file name contains a control character",
        ));
    }
    Ok(())
}

impl fmt::Display for VfsPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for VfsPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `join`'s fast path accepts and rejects exactly what parsing the joined
    /// text does, from the root and from a deeper directory.
    #[test]
    fn join_agrees_with_parse() {
        let long = "x".repeat(256);
        let names = [
            "a",
            "a b",
            "Ünï",
            ".env",
            "",
            ".",
            "..",
            "a/b",
            "a\\b",
            "a*",
            "a?",
            "a\nb",
            "a\0",
            &long[..255],
            &long,
        ];
        for dir in ["/", "/w/deep"] {
            let dir = VfsPath::parse(dir).unwrap();
            for name in names {
                let joined = dir.join(name).map(|p| p.as_str().to_owned());
                let prefix = if dir.is_root() { "" } else { dir.as_str() };
                let parsed = VfsPath::parse(&format!("{prefix}/{name}"))
                    .ok()
                    .filter(|_| !name.is_empty() && !name.contains('/'))
                    .map(|p| p.as_str().to_owned());
                assert_eq!(joined.ok(), parsed, "{dir} + {name:?}");
            }
        }
    }

    #[test]
    fn accepts_and_normalises_trailing_slash() {
        assert_eq!(VfsPath::parse("/").unwrap().as_str(), "/");
        assert_eq!(VfsPath::parse("/a/b/").unwrap().as_str(), "/a/b");
        assert_eq!(VfsPath::parse("/a ").unwrap().as_str(), "/a ");
        assert_eq!(VfsPath::parse("/Ünï cødé/x.txt").unwrap().name(), "x.txt");
    }

    #[test]
    fn rejects_every_path_rule_violation() {
        for bad in [
            "", "a", "a/b", "./a", "/a/../b", "/..", "/a/.", "/a//b", "//", "/a\\b", "/a\0b",
            "/a\nb", "/a\tb", "/a\x7fb", "/a*", "/a?b",
        ] {
            assert!(VfsPath::parse(bad).is_err(), "{bad:?} must be rejected");
        }
        assert!(VfsPath::parse(&format!("/{}", "x".repeat(256))).is_err());
    }

    #[test]
    fn segment_boundaries() {
        let mem = VfsPath::parse("/memories").unwrap();
        assert!(VfsPath::parse("/memories/x").unwrap().is_within(&mem));
        assert!(VfsPath::parse("/memories").unwrap().is_within(&mem));
        assert!(!VfsPath::parse("/memories-old/x").unwrap().is_within(&mem));
        assert_eq!(
            VfsPath::parse("/memories/a/b").unwrap().relative_to(&mem),
            Some("a/b")
        );
        let rebased = VfsPath::parse("/memories/a")
            .unwrap()
            .rebase(&mem, &VfsPath::root());
        assert_eq!(rebased.unwrap().as_str(), "/a");
        let back = VfsPath::parse("/a")
            .unwrap()
            .rebase(&VfsPath::root(), &mem)
            .unwrap();
        assert_eq!(back.as_str(), "/memories/a");
    }

    #[test]
    fn order_key_sorts_segment_by_segment() {
        let mut paths = vec!["/a-b/x", "/a/x", "/a/x/y", "/a.b"];
        paths.sort_by_key(|p| order_key(p));
        assert_eq!(paths, vec!["/a/x", "/a/x/y", "/a-b/x", "/a.b"]);
        assert_eq!(from_order_key(&order_key("/a/b")), "/a/b");
    }

    #[test]
    fn parent_and_join() {
        let p = VfsPath::parse("/a/b").unwrap();
        assert_eq!(p.parent().as_str(), "/a");
        assert_eq!(p.parent().parent().as_str(), "/");
        assert_eq!(VfsPath::root().join("x").unwrap().as_str(), "/x");
        assert!(p.join("..").is_err());
        assert!(p.join("a/b").is_err());
    }
}
