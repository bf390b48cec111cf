//! What a branch changed: every path it keeps a base record of, with the
//! ancestor and the branch's side, for its diff, merge and size. The paths
//! and the sizes of their sides come from listings and stats, so a caller
//! can check grants and bounds before any content is read.

use super::sidecar::{self, BaseRecord};
use super::{Overlay, UPPER_BIT};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use std::collections::HashMap;

/// One path a branch changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Touched {
    /// The file.
    pub path: VfsPath,
    /// The base's file when the branch first changed it.
    pub ancestor: BaseRecord,
    /// The branch's file now and its version (`None`: the branch has none).
    pub branch: Option<(Vec<u8>, u64)>,
}

/// The sizes of one changed file's sides, from stats (nothing read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sides {
    /// The stored base record: the ancestor's content and a header line,
    /// so at least the ancestor's size.
    pub ancestor: u64,
    /// The branch's file (0: the branch has none).
    pub branch: u64,
}

/// What one directory's listing of a branch's upper scope holds that the
/// walk of its changes visits, keyed in path order.
enum Item {
    /// A directory: its subtree comes at its own key, since `/` sorts as NUL.
    Dir(VfsPath),
    /// A file the branch changed (it keeps a base record of it), and the
    /// size of the branch's side from the same listing (0: none).
    Changed(VfsPath, u64),
}

impl Overlay {
    /// Calls `visit` with every file the branch changed whose order key
    /// is past `after` (all with `None`), in path order, and the size of
    /// the branch's side, until `visit` answers false. Everything comes
    /// from listings of the upper scope, nothing is read or stat'ed, and a
    /// subtree wholly at or before `after` is not listed: a page late in a
    /// diff costs its own files and the listings on the way to them, not
    /// the files before it. It holds one listing per level of the path.
    fn each_changed(
        &self,
        scope: &Scope,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(VfsPath, u64) -> Result<bool>,
    ) -> Result<()> {
        let up = self.record().upper_scope(scope);
        self.walk_changed(&up, &self.record().root, after, visit)
            .map(|_| ())
    }

    /// [`Overlay::each_changed`] below `dir`; false once `visit` stopped.
    fn walk_changed(
        &self,
        up: &Scope,
        dir: &VfsPath,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(VfsPath, u64) -> Result<bool>,
    ) -> Result<bool> {
        let entries = match self.inner().list(up, dir) {
            Err(Error::NotFound(_)) => return Ok(true),
            other => other?,
        };
        let sizes: HashMap<&str, u64> = entries
            .iter()
            .filter(|e| !e.is_directory())
            .map(|e| (e.path.name(), e.size))
            .collect();
        let mut items: Vec<(Vec<u8>, Item)> = Vec::new();
        for entry in &entries {
            if entry.is_directory() {
                if after.is_some_and(|a| entry.path.subtree_range().1.as_slice() <= a) {
                    continue;
                }
                items.push((entry.path.order_key(), Item::Dir(entry.path.clone())));
            } else if let Some(file) = sidecar::based(&entry.path) {
                let key = file.order_key();
                if after.is_some_and(|a| key.as_slice() <= a) {
                    continue;
                }
                let size = sizes.get(file.name()).copied().unwrap_or(0);
                items.push((key, Item::Changed(file, size)));
            }
        }
        drop(sizes);
        items.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, item) in items {
            let go_on = match item {
                Item::Dir(path) => self.walk_changed(up, &path, after, visit)?,
                Item::Changed(path, size) => visit(path, size)?,
            };
            if !go_on {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Every path the branch changed, in path order (from listings:
    /// nothing is read).
    pub fn changed(&self, scope: &Scope) -> Result<Vec<VfsPath>> {
        let mut out = Vec::new();
        self.each_changed(scope, None, &mut |path, _| {
            out.push(path);
            Ok(true)
        })?;
        Ok(out)
    }

    /// The sizes of the sides of `path`, a file the branch changed, from
    /// stats (`None`: the branch no longer keeps it).
    pub fn sides(&self, scope: &Scope, path: &VfsPath) -> Result<Option<Sides>> {
        let up = self.record().upper_scope(scope);
        let ancestor = match self.inner().stat(&up, &sidecar::base(path)?) {
            Ok(entry) => entry.size,
            Err(Error::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let branch = match self.inner().stat(&up, path) {
            Ok(entry) if !entry.is_directory() => entry.size,
            Ok(_) | Err(Error::NotFound(_) | Error::NotDirectory(_)) => 0,
            Err(e) => return Err(e),
        };
        Ok(Some(Sides { ancestor, branch }))
    }

    /// Reads the ancestor and the branch's side of `path`, a file the
    /// branch changed (`None`: the branch no longer keeps it).
    pub fn read_touched(&self, scope: &Scope, path: &VfsPath) -> Result<Option<Touched>> {
        let up = self.record().upper_scope(scope);
        let inner = self.inner();
        let record = sidecar::base(path)?;
        let ancestor = match inner.read(&up, &record) {
            Ok((data, _)) => BaseRecord::decode(&record, &data)?,
            Err(Error::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let branch = match inner.read(&up, path) {
            Ok((data, entry)) => Some((data, entry.version | UPPER_BIT)),
            Err(Error::NotFound(_) | Error::NotDirectory(_) | Error::IsDirectory(_)) => None,
            Err(e) => return Err(e),
        };
        Ok(Some(Touched {
            path: path.clone(),
            ancestor,
            branch,
        }))
    }

    /// Up to `limit` of the paths the branch changed after `after` (all of
    /// them from the start with `None`) that `shown` keeps, in path order,
    /// with their ancestors and the branch's side; and whether more follow.
    /// A path `shown` drops is neither read nor counted. The page also ends
    /// once the contents read pass `max_bytes` (after at least one file),
    /// so what one call holds is bounded whatever the branch holds.
    pub fn touched(
        &self,
        scope: &Scope,
        after: Option<&VfsPath>,
        (limit, max_bytes): (usize, u64),
        shown: &dyn Fn(&VfsPath) -> bool,
    ) -> Result<(Vec<Touched>, bool)> {
        let after = after.map(VfsPath::order_key);
        let mut out = Vec::new();
        let mut bytes = 0u64;
        let mut more = false;
        self.each_changed(scope, after.as_deref(), &mut |path, _| {
            if !shown(&path) {
                return Ok(true);
            }
            if out.len() == limit || (!out.is_empty() && bytes > max_bytes) {
                more = true;
                return Ok(false);
            }
            if let Some(touched) = self.read_touched(scope, &path)? {
                bytes += (touched.ancestor.content.len()
                    + touched.branch.as_ref().map_or(0, |(d, _)| d.len()))
                    as u64;
                out.push(touched);
            }
            Ok(true)
        })?;
        Ok((out, more))
    }

    /// How many of the files the branch changed `shown` keeps, and the
    /// bytes of those it holds, from listings alone (nothing is read or
    /// stat'ed: ListBranches sizes every branch this way).
    pub fn size(&self, scope: &Scope, shown: &dyn Fn(&VfsPath) -> bool) -> Result<(u64, u64)> {
        let (mut files, mut bytes) = (0, 0);
        self.each_changed(scope, None, &mut |path, size| {
            if shown(&path) {
                files += 1;
                bytes += size;
            }
            Ok(true)
        })?;
        Ok((files, bytes))
    }

    /// Deletes everything the branch holds (its files and sidecars, and
    /// on a Filesystem mount its directory).
    pub fn clear(&self, scope: &Scope) -> Result<()> {
        let up = self.record().upper_scope(scope);
        let entries = match self.inner().list(&up, &self.record().root) {
            Err(Error::NotFound(_)) => Vec::new(),
            other => other?,
        };
        for entry in entries {
            match self.inner().delete(&up, &entry.path, None, true) {
                Ok(_) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        self.inner().drop_scope(&up, &self.record().mount)
    }
}
