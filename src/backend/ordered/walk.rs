//! The search walk's view of an ordered tier: [`SortedFiles`] over a
//! [`Frozen`] scope, translating the walk's full-path order keys into the
//! tier's relative keys; or over the namespace's path table at the view's
//! log position, so that only the files searched are read from the tier
//! (docs/search-index.md § The path table).

use super::keys::{MountKeys, Seek};
use super::{Cursor, Frozen, file_entry, path_of};
use crate::entry::Entry;
use crate::error::Result;
use crate::search::index::table::PathTable;
use crate::search::sorted::WholeFiles;
use std::sync::Arc;

/// One scan over a frozen scope, fed to `search::sorted`.
pub struct Walk<'a, F: Frozen + 'a> {
    keys: &'a MountKeys,
    files: &'a F,
    cursor: F::Cursor<'a>,
    /// The full order key of the entry `seek` returned last.
    last: Option<Vec<u8>>,
    /// Seeks answered from this table instead of the cursor.
    table: Option<Arc<PathTable>>,
    /// The table's row after the one sought last: most seeks ask for it
    /// (`PathTable::seek_next`).
    next_row: usize,
}

impl<'a, F: Frozen> Walk<'a, F> {
    /// A walk over all of `files`.
    pub fn new(keys: &'a MountKeys, files: &'a F) -> Result<Walk<'a, F>> {
        Ok(Walk {
            keys,
            files,
            cursor: files.scan(b"", true)?,
            last: None,
            table: None,
            next_row: 0,
        })
    }

    /// A walk of `table`, which holds the files of `files` (at its log
    /// position) below the directory walked: content is read from `files`.
    pub fn over_table(
        keys: &'a MountKeys,
        files: &'a F,
        table: Arc<PathTable>,
    ) -> Result<Walk<'a, F>> {
        let mut walk = Walk::new(keys, files)?;
        walk.table = Some(table);
        Ok(walk)
    }
}

impl<F: Frozen> WholeFiles for Walk<'_, F> {
    type Data = F::Data;

    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
        if let Some(table) = &self.table {
            let row = table.seek_next(&mut self.next_row, from);
            return row.map(|row| Ok(row.entry.clone()));
        }
        // The walk asks for "the key right after the last one" for every
        // file; a `next` is far cheaper than a fresh seek.
        let successor = self.last.as_ref().is_some_and(|last| {
            from.len() == last.len() + 1 && from.starts_with(last) && from.ends_with(&[0])
        });
        if successor {
            self.cursor.next();
        } else {
            match self.keys.seek(from) {
                Seek::Start => self.cursor.seek(b""),
                Seek::At(rel) => self.cursor.seek(&rel),
                Seek::End => return None,
            }
        }
        let entry = self
            .cursor
            .current()?
            .and_then(|(key, file)| Ok(file_entry(path_of(self.keys, key, &file)?, &file)));
        if let Ok(entry) = &entry {
            self.last = Some(entry.path.order_key());
        }
        Some(entry)
    }

    fn load(&mut self, entry: &Entry) -> Result<F::Data> {
        let rel = self.keys.rel(&entry.path)?;
        self.files.load(&self.cursor, &entry.path, &rel)
    }
}
