//! The object tier's path table (docs/search-index.md § The object tier's
//! path table): every file of a namespace with its head's metadata, as of
//! one position of the namespace's catalog (`super::catalog`), so that a
//! narrowed Grep reads the heads of its candidates only, not of every file.
//!
//! Invariants:
//! - a row is the entry of the head the catalog's ETag names for its key
//!   (or, for a key whose ETag the catalog does not know, the head read by
//!   the search that made the row); a key the catalog trusts keeps its
//!   ETag until a change of the key is numbered after the table's position;
//! - so a table at position *p* is brought to the catalog a search sees by
//!   reading again the heads of the keys changed after *p* and of every key
//!   whose ETag is unknown ([`Fresh::changed`]); a key neither names has the
//!   head its row came from;
//! - anything else (no table held, another epoch, changes forgotten) takes
//!   the table again from every head, through the content cache.
//!
//! A candidate's head is read again when it is searched; when its version
//! is no longer the row's (the head changed since the catalog was read),
//! the file is searched as it is now, with nothing known of it and nothing
//! learned, as the bucket's listing walk would have found it. The room a
//! large file takes (`crate::search::room`) is held for the size of the
//! head read then, never the row's.

use super::catalog::{Fresh, Snapshot};
use super::head::Head;
use super::keys::Space;
use super::read::read_blob;
use super::state::listed_file;
use super::{FETCH_CONCURRENCY, ObjectBackend};
use crate::backend::ordered::file_entry;
use crate::entry::Entry;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::search::index::IndexedGrep;
use crate::search::index::passes::Known;
use crate::search::index::table::{MAX_TABLE_FILES, PathTable, Row};
use crate::search::rules::{self, Skip};
use crate::search::sorted::{SortedFiles, search_whole};
use crate::search::{FileSearcher, SearchRun, room};
use futures_util::StreamExt;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

/// A Grep takes a new table when its directory holds at least a
/// `1 / TAKE_SHARE` share of the namespace's files
/// ([`ObjectBackend::worth_taking`]): so the first narrowed Grep reads at
/// most four times the heads the catalog's walk would have read.
const TAKE_SHARE: usize = 4;

impl ObjectBackend {
    /// The table `grep`'s index holds for the whole mount, if any: the
    /// catalog is asked what changed since its position
    /// ([`ObjectBackend::path_table`]).
    pub(super) fn held_table(&self, grep: &IndexedGrep) -> Option<Arc<PathTable>> {
        let (lo, hi) = self.keys.mount.subtree_range();
        grep.index().table().filter(|t| t.covers(&lo, &hi))
    }

    /// The path table of `ns` at the catalog `fresh`, brought there from
    /// `held` (asked about when `fresh` was read) or taken anew for a Grep
    /// of the directory `top`; `None` when the catalog's own walk must do
    /// (a directory too small to take a table for, no room for the table,
    /// too many files).
    pub(super) fn path_table(
        &self,
        (ns, top): (&str, &VfsPath),
        fresh: &Fresh,
        held: Option<Arc<PathTable>>,
        grep: &mut IndexedGrep,
    ) -> Result<Option<Arc<PathTable>>> {
        let replayable = held.filter(|h| h.at().epoch == fresh.at.epoch);
        if let (Some(held), Some(changed)) = (replayable, &fresh.changed) {
            let mut changes = BTreeMap::new();
            for (key, row) in self.rows(ns, &fresh.keys, Heads::Changed(changed.clone()))? {
                let same = match (held.seek(&key), &row) {
                    (Some(was), Some(is)) => was.key == is.key && was.entry == is.entry,
                    (Some(was), None) => *was.key != *key,
                    (None, row) => row.is_none(),
                };
                if !same {
                    changes.insert(key, row);
                }
            }
            if changes.is_empty() {
                return Ok(Some(held));
            }
            let next = held.advance(fresh.at, changes);
            let Some(next) = grep.keep_advanced(&held, next) else {
                return Ok(None);
            };
            tracing::info!(
                files = next.len(),
                from = held.at().seq,
                to = fresh.at.seq,
                "search index path table advanced"
            );
            return Ok(Some(next));
        }
        if fresh.keys.len() > MAX_TABLE_FILES || !self.worth_taking(ns, &fresh.keys, top)? {
            return Ok(None);
        }
        let (lo, hi) = self.keys.mount.subtree_range();
        let mut rows = Vec::with_capacity(fresh.keys.len());
        let mut bytes = 0;
        for (_, row) in self.rows(ns, &fresh.keys, Heads::All)? {
            let Some(row) = row else { continue };
            bytes += row.bytes() as u64;
            if bytes > grep.room() {
                return Ok(None);
            }
            rows.push(row);
        }
        let taken = Arc::new(PathTable::new(fresh.at, (lo, hi), rows));
        tracing::info!(files = taken.len(), "search index path table taken");
        grep.grew(bytes);
        grep.index().keep_table(taken.clone());
        Ok(Some(taken))
    }

    /// Whether a Grep of the directory `top` takes a new table: only when
    /// at least 1/[`TAKE_SHARE`] of the namespace's files (`catalog`) lie
    /// below it. Taking a table reads every head of the namespace, where
    /// the catalog's walk reads only those below `top`, so the first Grep
    /// of a small directory would otherwise pay for the whole namespace
    /// (after a restart, a request per head). Counted in key order up to
    /// the share, so the count costs at most what the walk reads anyway.
    fn worth_taking(&self, ns: &str, catalog: &Snapshot, top: &VfsPath) -> Result<bool> {
        let prefix = self.keys.below(ns, Space::Heads, top)?;
        let needed = catalog.len().div_ceil(TAKE_SHARE);
        let below = catalog
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(&prefix))
            .take(needed)
            .count();
        if below < needed {
            tracing::debug!(
                below,
                files = catalog.len(),
                "search index path table not taken for a small directory"
            );
        }
        Ok(below >= needed)
    }

    /// The row each head key `heads` names holds now, by its path's order
    /// key (`None`: no file there), in key order: read through the content
    /// cache at the ETag `catalog` names, [`FETCH_CONCURRENCY`] at once.
    /// What a read teaches the catalog is handed back to it, as the
    /// catalog's walk does (`super::walk`).
    fn rows(
        &self,
        ns: &str,
        catalog: &Snapshot,
        heads: Heads,
    ) -> Result<Vec<(Vec<u8>, Option<Row>)>> {
        let (store, catalogs) = (self.store(), self.catalogs.clone());
        let (tier_keys, ns, catalog) = (self.keys.clone(), ns.to_owned(), catalog.clone());
        self.run("reading the heads of a path table", async move {
            // Borrowed from the catalog (every key of it when a table is
            // taken) rather than cloned.
            let asked: Vec<(&str, Option<&super::catalog::Known>)> = match &heads {
                Heads::Changed(keys) => keys.iter().map(|k| (k.as_str(), catalog.get(k))).collect(),
                Heads::All => catalog
                    .iter()
                    .map(|(k, known)| (k.as_str(), Some(known)))
                    .collect(),
            };
            // Made lazily, so only the reads in flight exist at once. By
            // index: a closure taking the borrowed pairs themselves trips
            // rustc's higher-ranked `Send` check (rust-lang/rust#64552).
            let (store, catalogs, ns, asked) = (&store, &catalogs, &ns, &asked);
            let reads = (0..asked.len()).filter_map(|i| {
                let (key, known) = asked[i];
                let path = tier_keys.path(ns, key)?;
                Some(async move {
                    let etag = known.and_then(|k| k.etag.as_deref());
                    let file = listed_file(store, ns, key, etag).await?;
                    if let Some(known) = known {
                        match &file {
                            Some(file) if !file.etag.is_empty() => {
                                catalogs.learn(ns, key, known.generation, Some(file.etag.clone()))
                            }
                            Some(_) => {}
                            None => catalogs.learn(ns, key, known.generation, None),
                        }
                    }
                    let order = path.order_key();
                    let row = file.map(|head| Row::of(file_entry(path, &head.meta)));
                    Ok::<_, Error>((order, row))
                })
            });
            let mut rows = Vec::new();
            let mut read = futures_util::stream::iter(reads).buffered(FETCH_CONCURRENCY);
            while let Some(row) = read.next().await {
                rows.push(row?);
            }
            Ok(rows)
        })
    }
}

/// The heads [`ObjectBackend::rows`] reads.
enum Heads {
    /// These keys: those changed since a table's position.
    Changed(Vec<String>),
    /// Every key of the catalog: a table taken anew.
    All,
}

/// A walk over a path table: seeks are answered from the table, and each
/// file searched has its head read again (see the module's comment).
pub struct TableWalk<'a> {
    tier: &'a ObjectBackend,
    ns: &'a str,
    /// The catalog the table was brought to: the ETags heads are read at.
    catalog: &'a Snapshot,
    table: &'a PathTable,
    /// The row after the one sought last (`PathTable::seek_next`).
    next_row: usize,
}

impl<'a> TableWalk<'a> {
    /// A walk of `table`, at the catalog `catalog` of namespace `ns`.
    pub fn new(
        tier: &'a ObjectBackend,
        ns: &'a str,
        catalog: &'a Snapshot,
        table: &'a PathTable,
    ) -> TableWalk<'a> {
        TableWalk {
            tier,
            ns,
            catalog,
            table,
            next_row: 0,
        }
    }

    /// The head of `path` now (`None`: no file there), through the cache
    /// at the ETag the catalog names.
    fn head(&self, path: &VfsPath) -> Result<Option<Head>> {
        let key = self.tier.keys.head(self.ns, path)?;
        let etag = self.catalog.get(&key).and_then(|k| k.etag.clone());
        let (store, ns) = (self.tier.store(), self.ns.to_owned());
        self.tier.run("reading a file's head", async move {
            listed_file(&store, &ns, &key, etag.as_deref()).await
        })
    }

    /// The content of the file whose head is `head`.
    fn content(&self, path: &VfsPath, head: &Head) -> Result<bytes::Bytes> {
        if let Some(inline) = head.inline(path)? {
            return Ok(inline);
        }
        let key = self.tier.keys.blob(self.ns, path, head.meta.blob)?;
        let (client, cache) = (self.tier.bucket.client(), self.tier.cache.clone());
        let (shown, version) = (path.to_string(), head.meta.version);
        self.tier.run("reading a file's content", async move {
            read_blob(&client, &cache, &key, &shown, version).await
        })
    }
}

impl SortedFiles for TableWalk<'_> {
    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
        let row = self.table.seek_next(&mut self.next_row, from)?;
        Some(Ok(row.entry.clone()))
    }

    fn search_file(
        &mut self,
        run: &SearchRun,
        searcher: &mut FileSearcher<'_>,
        (entry, key): (&Entry, &[u8]),
        learn: Option<&mut IndexedGrep>,
        known: Known,
    ) {
        let hits = {
            let head = match self.head(&entry.path) {
                Ok(Some(head)) => head,
                // Deleted since the catalog was read: searched as empty.
                Ok(None) => return,
                Err(err) => return run.problem(entry.path.as_str(), err),
            };
            let now = file_entry(entry.path.clone(), &head.meta);
            // Room for the version read now, not the table's: another
            // server may have replaced a small file with one of
            // `max_file_bytes` since the table was advanced.
            let Some(_room) = room::hold(run, now.size) else {
                return;
            };
            let loaded = self.content(&entry.path, &head);
            if now.version == entry.version {
                let learn = learn.map(|index| (index, key));
                search_whole(run, searcher, (entry, known), loaded, learn)
            } else {
                search_whole(run, searcher, (&now, Known::Nothing), loaded, None)
            }
        };
        if let Some(hits) = hits {
            run.emit_file(hits);
        }
    }

    fn skip(&mut self, run: &SearchRun, path: &VfsPath, _is_dir: bool) -> Option<Skip> {
        let spec = run.spec();
        rules::skip_name(path.name(), spec.include_hidden, spec.include_ignored)
    }
}
