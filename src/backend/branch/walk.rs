//! The ordered walk of a search in a branch: the branch's files in path
//! order, found through its merged listings ([`Overlay`]'s `list`), so the
//! shared walk (`search::sorted`) applies the same rules, budgets and order
//! as on an ordered tier.
//!
//! Each seek descends from the top through cached listings: the listings
//! of the directories on the path to the last file found are kept, and a
//! binary search picks the first entry at or after the seek key, so a walk
//! lists each directory once and costs O(log n) per file within one.

use super::Overlay;
use crate::backend::Backend;
use crate::entry::Entry;
use crate::error::Result;
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::sorted::SortedFiles;

/// A branch's files under one directory, for `search::sorted::walk`.
pub struct ViewFiles<'a> {
    overlay: &'a Overlay,
    scope: &'a Scope,
    top: VfsPath,
    /// Listings of the directories from `top` down to the last one entered.
    listings: Vec<(VfsPath, Vec<Entry>)>,
}

impl<'a> ViewFiles<'a> {
    /// The files below `top` as `scope` sees them in the branch.
    pub fn new(overlay: &'a Overlay, scope: &'a Scope, top: VfsPath) -> ViewFiles<'a> {
        ViewFiles {
            overlay,
            scope,
            top,
            listings: Vec::new(),
        }
    }

    /// The listing of `dir`, from the cache when it is on the current path.
    fn listing(&mut self, dir: &VfsPath) -> Result<usize> {
        if let Some(at) = self.listings.iter().position(|(d, _)| d == dir) {
            self.listings.truncate(at + 1);
            return Ok(at);
        }
        self.listings.retain(|(d, _)| dir.is_within(d));
        let entries = self.overlay.list(self.scope, dir)?;
        self.listings.push((dir.clone(), entries));
        Ok(self.listings.len() - 1)
    }

    /// The first file at or after `from` below `dir`.
    fn first_from(&mut self, dir: &VfsPath, from: &[u8]) -> Result<Option<Entry>> {
        let at = self.listing(dir)?;
        let start = self.listings[at]
            .1
            .partition_point(|e| end_key(e).as_slice() <= from);
        let mut index = start;
        loop {
            let Some(entry) = self
                .listings
                .get(at)
                .and_then(|(_, l)| l.get(index))
                .cloned()
            else {
                return Ok(None);
            };
            if entry.is_directory() {
                if let Some(found) = self.first_from(&entry.path, from)? {
                    return Ok(Some(found));
                }
                // The descent replaced deeper listings; ours is still `at`.
                self.listing(dir)?;
            } else if entry.path.order_key().as_slice() >= from {
                return Ok(Some(entry));
            }
            index += 1;
        }
    }
}

/// The first key past an entry and everything below it.
fn end_key(entry: &Entry) -> Vec<u8> {
    if entry.is_directory() {
        entry.path.subtree_range().1
    } else {
        let mut key = entry.path.order_key();
        key.push(0);
        key
    }
}

impl SortedFiles for ViewFiles<'_> {
    type Data = Vec<u8>;

    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
        let top = self.top.clone();
        self.first_from(&top, from).transpose()
    }

    fn load(&mut self, entry: &Entry) -> Result<Vec<u8>> {
        self.overlay
            .read(self.scope, &entry.path)
            .map(|(data, _)| data)
    }
}
