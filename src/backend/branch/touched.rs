//! What a branch changed: every path it keeps a base record of, with the
//! ancestor and the branch's side, for its diff, merge and size.

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

    /// Up to `limit` of the paths the branch changed after `after` (all of
    /// them from the start with `None`), in path order, with their
    /// ancestors and the branch's side; and whether more follow. The page
    /// also ends once the contents read pass `max_bytes` (after at least
    /// one file), so what one call holds is bounded whatever the branch
    /// holds.
    pub fn touched(
        &self,
        scope: &Scope,
        after: Option<&VfsPath>,
        limit: usize,
        max_bytes: u64,
    ) -> Result<(Vec<Touched>, bool)> {
        let up = self.record().upper_scope(scope);
        let inner = self.inner();
        let after = after.map(VfsPath::order_key);
        let mut out = Vec::new();
        let mut bytes = 0u64;
        for record in self.records(scope)? {
            let Some(path) = sidecar::based(&record) else {
                continue;
            };
            if after.as_ref().is_some_and(|a| path.order_key() <= *a) {
                continue;
            }
            if out.len() == limit || (!out.is_empty() && bytes > max_bytes) {
                return Ok((out, true));
            }
            let ancestor = match inner.read(&up, &record) {
                Ok((data, _)) => BaseRecord::decode(&record, &data)?,
                Err(Error::NotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            let branch = match inner.read(&up, &path) {
                Ok((data, entry)) => Some((data, entry.version | UPPER_BIT)),
                Err(Error::NotFound(_) | Error::NotDirectory(_) | Error::IsDirectory(_)) => None,
                Err(e) => return Err(e),
            };
            bytes += (ancestor.content.len() + branch.as_ref().map_or(0, |(d, _)| d.len())) as u64;
            out.push(Touched {
                path,
                ancestor,
                branch,
            });
        }
        Ok((out, false))
    }

    /// How many files the branch changed, and the bytes of those it holds.
    pub fn size(&self, scope: &Scope) -> Result<(u64, u64)> {
        let up = self.record().upper_scope(scope);
        let mut bytes = 0;
        let records = self.records(scope)?;
        for record in &records {
            if let Some(path) = sidecar::based(record)
                && let Ok(entry) = self.inner().stat(&up, &path)
            {
                bytes += entry.size;
            }
        }
        Ok((records.len() as u64, bytes))
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
