//! The ordered walk of a search in a branch: the branch's files in path
//! order, found through its merged listings ([`Overlay`]'s `list`), so the
//! shared walk (`search::sorted`) applies the same rules, budgets and order
//! as on an ordered tier.
//!
//! Each seek descends from the top through cached listings: the listings
//! of the directories on the path to the last file found are kept, and a
//! binary search picks the first entry at or after the seek key, so a walk
//! lists each directory once (the base's, then the branch's:
//! `Overlay::merged_listing`) and costs O(log n) per file within one. A
//! file's content is one read of the layer its directory's listing found
//! it in (`Overlay::read_listed`), the torn-look checks of a full Read
//! only where the branch keeps a base record of it or it changed since.
//!
//! On a Filesystem mount the walk applies the `.ignore` and `.gitignore`
//! files of every directory from the mount root down, as the tier's own
//! walk does, read through the branch (a file the branch wrote, changed or
//! deleted as the branch has it) and matched by the search engine's rules
//! ([`ignore_rules`], which the tier's walk uses too), so skips and counts
//! are the base's for the same tree.

use super::Overlay;
use super::listing::Listing;
use crate::backend::Backend;
use crate::entry::Entry;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::SearchRun;
use crate::search::ignore_rules::{self, Level, level_of, read_text, skip_of};
use crate::search::rules::Skip;
use crate::search::sorted::WholeFiles;
use std::cmp::Ordering;
use std::sync::Arc;

/// A branch's files under one directory, for `search::sorted::walk`.
pub struct ViewFiles<'a> {
    overlay: &'a Overlay,
    scope: &'a Scope,
    top: VfsPath,
    /// Listings of the directories from `top` down to the last one entered.
    listings: Vec<(VfsPath, Listing)>,
    /// The ignore rules in force, on a mount that has ignore files.
    ignore: Option<IgnoreFiles>,
}

/// The ignore rules of the directories from the mount root down to the
/// last one a skip was asked below.
struct IgnoreFiles {
    mount: VfsPath,
    dirs: Vec<VfsPath>,
    /// By `dirs` index.
    levels: Vec<Arc<Level>>,
}

impl<'a> ViewFiles<'a> {
    /// The files below `top` as `scope` sees them in the branch.
    pub fn new(overlay: &'a Overlay, scope: &'a Scope, top: VfsPath) -> ViewFiles<'a> {
        let ignore = overlay
            .inner()
            .ignore_files_root(&top)
            .map(|mount| IgnoreFiles {
                mount,
                dirs: Vec::new(),
                levels: Vec::new(),
            });
        ViewFiles {
            overlay,
            scope,
            top,
            listings: Vec::new(),
            ignore,
        }
    }

    /// Puts in force the ignore rules of the directories from the mount
    /// root down to `dir`, reading those not read yet through the branch.
    fn enter_levels(&mut self, run: &SearchRun, dir: &VfsPath) {
        let Some(ignore) = &mut self.ignore else {
            return;
        };
        while ignore.dirs.last().is_some_and(|d| !dir.is_within(d)) {
            ignore.dirs.pop();
            ignore.levels.pop();
        }
        loop {
            let next = match ignore.dirs.last() {
                Some(last) if last == dir => return,
                Some(last) => {
                    let rel = dir.relative_to(last).unwrap_or_default();
                    match last.join(rel.split('/').next().unwrap_or(rel)) {
                        Ok(next) => next,
                        Err(_) => return,
                    }
                }
                None if dir.is_within(&ignore.mount) => ignore.mount.clone(),
                None => return,
            };
            // The walk has listed the directories it is in: no read for a
            // file their listing lacks (most directories have none).
            let listed = self.listings.iter().find(|(d, _)| *d == next);
            let mut problems = Vec::new();
            let level = level_of(run, &next, &mut problems, |_, path| {
                let data = match listed {
                    Some((_, listing)) => match listing.entries.iter().find(|e| e.path == *path) {
                        Some(entry) => self.overlay.read_listed(self.scope, listing, entry)?,
                        None => return Ok(None),
                    },
                    None => self.overlay.read(self.scope, path)?.0,
                };
                read_text(path, data.as_slice()).map(Some)
            });
            ignore_rules::report(run, self.scope, problems, !next.is_within(&self.top));
            ignore.dirs.push(next);
            ignore.levels.push(Arc::new(level));
        }
    }

    /// The listing of `dir`, from the cache when it is on the current path
    /// (the deeper listings kept: the next seek descends through them
    /// again). A directory gone since its parent was listed, or holding
    /// only the branch's bookkeeping, lists empty.
    fn listing(&mut self, dir: &VfsPath) -> Result<usize> {
        if let Some(at) = self.listings.iter().position(|(d, _)| d == dir) {
            return Ok(at);
        }
        self.listings.retain(|(d, _)| dir.is_within(d));
        let listing = match self.overlay.merged_listing(self.scope, dir, false) {
            Err(Error::NotFound(_)) if *dir != self.top => Listing::empty(),
            other => other?,
        };
        self.listings.push((dir.clone(), listing));
        Ok(self.listings.len() - 1)
    }

    /// The first file at or after `from` below `dir`.
    fn first_from(&mut self, dir: &VfsPath, from: &[u8]) -> Result<Option<Entry>> {
        let at = self.listing(dir)?;
        let start = self.listings[at]
            .1
            .entries
            .partition_point(|e| before(e, from));
        let mut index = start;
        loop {
            let Some(entry) = self
                .listings
                .get(at)
                .and_then(|(_, l)| l.entries.get(index))
                .cloned()
            else {
                return Ok(None);
            };
            if entry.is_directory() {
                if let Some(found) = self.first_from(&entry.path, from)? {
                    return Ok(Some(found));
                }
            } else if compare_key(&entry, None, from) != Ordering::Less {
                return Ok(Some(entry));
            }
            index += 1;
        }
    }
}

/// How the key of `entry`, followed by `suffix`, compares with `key`,
/// without building it: an order key is the path with `/` as NUL
/// (`VfsPath::order_key`).
fn compare_key(entry: &Entry, suffix: Option<u8>, key: &[u8]) -> Ordering {
    let bytes = entry.path.as_str().bytes();
    let own = bytes.map(|b| if b == b'/' { 0 } else { b }).chain(suffix);
    own.cmp(key.iter().copied())
}

/// True when `entry` and everything below it lie before `key`: the first
/// key past a directory's subtree is its key and 1
/// (`VfsPath::subtree_range`), past a file its key and 0.
fn before(entry: &Entry, key: &[u8]) -> bool {
    let past = if entry.is_directory() { 1 } else { 0 };
    compare_key(entry, Some(past), key) != Ordering::Greater
}

impl WholeFiles for ViewFiles<'_> {
    type Data<'w>
        = Vec<u8>
    where
        Self: 'w;

    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
        let top = self.top.clone();
        self.first_from(&top, from).transpose()
    }

    fn load(&mut self, entry: &Entry) -> Result<Vec<u8>> {
        let parent = entry.path.parent();
        match self.listings.iter().find(|(d, _)| *d == parent) {
            Some((_, listing)) => self.overlay.read_listed(self.scope, listing, entry),
            None => self
                .overlay
                .read(self.scope, &entry.path)
                .map(|(data, _)| data),
        }
    }

    fn skip(&mut self, run: &SearchRun, path: &VfsPath, is_dir: bool) -> Option<Skip> {
        self.enter_levels(run, &path.parent());
        let levels = self.ignore.as_ref().map_or(&[][..], |i| &i.levels[..]);
        skip_of(run, levels, path.as_str(), is_dir)
    }
}
