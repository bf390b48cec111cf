//! What a branch changed: every path it keeps a base record of, with the
//! ancestor and the branch's side, for its diff, merge and size. The paths
//! and the sizes of their sides come from listings and stats, so a caller
//! can check grants and bounds before any content is read.

use super::sidecar::{self, BaseRecord};
use super::{Overlay, UPPER_BIT};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;

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

impl Overlay {
    /// The base records of the branch below its root, in path order.
    fn records(&self, scope: &Scope) -> Result<Vec<VfsPath>> {
        let up = self.record().upper_scope(scope);
        let inner = self.inner();
        let mut out = Vec::new();
        let mut stack = vec![self.record().root.clone()];
        while let Some(dir) = stack.pop() {
            let entries = match inner.list(&up, &dir) {
                Err(Error::NotFound(_)) => continue,
                other => other?,
            };
            for entry in entries {
                if entry.is_directory() {
                    stack.push(entry.path);
                } else if sidecar::based(&entry.path).is_some() {
                    out.push(entry.path);
                }
            }
        }
        out.sort_by_key(|p| sidecar::based(p).map(|f| f.order_key()));
        Ok(out)
    }

    /// Every path the branch changed, in path order (from a listing:
    /// nothing is read).
    pub fn changed(&self, scope: &Scope) -> Result<Vec<VfsPath>> {
        Ok(self
            .records(scope)?
            .iter()
            .filter_map(sidecar::based)
            .collect())
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
        for path in self.changed(scope)? {
            if after.as_ref().is_some_and(|a| path.order_key() <= *a) || !shown(&path) {
                continue;
            }
            if out.len() == limit || (!out.is_empty() && bytes > max_bytes) {
                return Ok((out, true));
            }
            let Some(touched) = self.read_touched(scope, &path)? else {
                continue;
            };
            bytes += (touched.ancestor.content.len()
                + touched.branch.as_ref().map_or(0, |(d, _)| d.len())) as u64;
            out.push(touched);
        }
        Ok((out, false))
    }

    /// How many of the files the branch changed `shown` keeps, and the
    /// bytes of those it holds.
    pub fn size(&self, scope: &Scope, shown: &dyn Fn(&VfsPath) -> bool) -> Result<(u64, u64)> {
        let up = self.record().upper_scope(scope);
        let (mut files, mut bytes) = (0, 0);
        for path in self.changed(scope)?.iter().filter(|p| shown(p)) {
            files += 1;
            if let Ok(entry) = self.inner().stat(&up, path) {
                bytes += entry.size;
            }
        }
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
