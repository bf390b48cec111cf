//! The path table of a namespace brought to a Grep's frozen view
//! (docs/search-index.md § The path table).
//!
//! Invariants: a table is only ever handed to a walk at the very log
//! position of the view it walks; it gets there either by a scan of that
//! view, or from an earlier position of the same log by looking up, in the
//! view, every path the log records as changed in between (a path no record
//! names did not change). Anything else (no log kept, another epoch, records
//! trimmed, too many changes, a path the view cannot answer for) takes the
//! table again by a scan, or gives up for the tier's own walk.

use super::OrderedTier;
use crate::backend::ordered::{Cursor, Engine, Frozen, file_entry, path_of};
use crate::change::LogPosition;
use crate::error::Result;
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::index::IndexedGrep;
use crate::search::index::table::{MAX_TABLE_FILES, PathTable, Row};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Most logged changes replayed onto a table; beyond, it is taken again.
const MAX_REPLAY: usize = 16_384;

impl<E: Engine> OrderedTier<E> {
    /// The path table of `scope` holding every file below `top` (`rel`) at
    /// the log position of `files`, or `None` when the tier's walk must do
    /// (a table taken anew must fit in the room `grep`'s principal has).
    pub(super) fn path_table<F: Frozen>(
        &self,
        scope: &Scope,
        files: &F,
        (top, rel): (&VfsPath, &[u8]),
        grep: &mut IndexedGrep,
    ) -> Result<Option<Arc<PathTable>>> {
        if self.engine.keep().changes == 0 {
            return Ok(None);
        }
        let bounds = files.log_bounds()?;
        let at = LogPosition {
            epoch: bounds.epoch,
            seq: bounds.head,
        };
        let (lo, hi) = top.subtree_range();
        let held = grep.index().table().filter(|t| t.covers(&lo, &hi));
        if let Some(held) = held {
            if held.at() == at {
                return Ok(Some(held));
            }
            if let Some(next) = self.replay(scope, files, &held, at, (&lo, &hi))? {
                let Some(next) = grep.keep_advanced(&held, next) else {
                    return Ok(None);
                };
                tracing::info!(
                    files = next.len(),
                    from = held.at().seq,
                    to = at.seq,
                    "search index path table replayed"
                );
                return Ok(Some(next));
            }
        }
        let mut rows = Vec::new();
        let mut bytes = 0;
        let mut cursor = files.scan(rel, true)?;
        while let Some(item) = cursor.current() {
            if rows.len() == MAX_TABLE_FILES || bytes > grep.room() {
                return Ok(None);
            }
            let (key, file) = item?;
            let row = Row::of(file_entry(path_of(&self.keys, key, &file)?, &file));
            bytes += row.bytes() as u64;
            rows.push(row);
            cursor.next();
        }
        let taken = Arc::new(PathTable::new(at, (lo, hi), rows));
        tracing::info!(files = taken.len(), "search index path table taken");
        grep.grew(bytes);
        grep.index().keep_table(taken.clone());
        Ok(Some(taken))
    }

    /// `held` moved to `at` by the log records in between, each changed
    /// path looked up in `files` (which holds the keys `[lo, hi)`); `None`
    /// when the log cannot say what changed.
    fn replay<F: Frozen>(
        &self,
        scope: &Scope,
        files: &F,
        held: &PathTable,
        at: LogPosition,
        (lo, hi): (&[u8], &[u8]),
    ) -> Result<Option<PathTable>> {
        let from = held.at();
        if from.epoch != at.epoch || from.seq > at.seq {
            return Ok(None);
        }
        // Records numbered up to `at.seq` never change, so a later read of
        // the log gives the same ones, unless it was trimmed past `from`.
        let read = self.engine.read_log(scope, Some(from.seq), MAX_REPLAY)?;
        if read.bounds.epoch != at.epoch || read.bounds.trimmed > from.seq {
            return Ok(None);
        }
        let complete =
            read.entries.len() < MAX_REPLAY || read.entries.last().is_some_and(|e| e.seq >= at.seq);
        if !complete {
            return Ok(None);
        }
        let mut changes = BTreeMap::new();
        for logged in read.entries.iter().filter(|e| e.seq <= at.seq) {
            let path = self.keys.path(&logged.rel)?;
            let key = path.order_key();
            if !held.holds_key(&key) {
                continue;
            }
            if key.as_slice() < lo || hi <= key.as_slice() {
                // In the table but outside what this view holds.
                return Ok(None);
            }
            let row = match files.get(&logged.rel)? {
                Some(file) => Some(Row::of(file_entry(
                    path_of(&self.keys, &logged.rel, &file)?,
                    &file,
                ))),
                None => None,
            };
            changes.insert(key, row);
        }
        Ok(Some(held.advance(at, changes)))
    }
}
