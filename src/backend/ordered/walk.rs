//! The search walk's view of an ordered tier: [`SortedFiles`] over a
//! [`Frozen`] scope, translating the walk's full-path order keys into the
//! tier's relative keys; or over the namespace's path table at the view's
//! log position, so that only the files searched are read from the tier
//! (docs/search-index.md § The path table), with the candidates read and
//! searched by the window's workers ([`search_table`]).

use super::keys::{MountKeys, Seek};
use super::{Cursor, Frozen, file_entry, path_of};
use crate::entry::Entry;
use crate::error::Result;
use crate::path::VfsPath;
use crate::search::index::IndexedGrep;
use crate::search::index::passes::Known;
use crate::search::index::table::PathTable;
use crate::search::rules::Skip;
use crate::search::sorted::{SortedFiles, WholeFiles, hold_for_load, search_whole};
use crate::search::window::{self, Task, Window};
use crate::search::{FileSearcher, SearchPart, SearchRun, bulk};
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
    type Data<'w>
        = F::Data<'w>
    where
        Self: 'w;

    const LOAD_COPIES: bool = F::LOAD_COPIES;

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

    fn load(&mut self, entry: &Entry) -> Result<F::Data<'_>> {
        let rel = self.keys.rel(&entry.path)?;
        self.files.load(Some(&self.cursor), &entry.path, &rel)
    }
}

/// The largest candidate a worker reads whole. A file is read whole to be
/// searched here (up to `max_file_bytes`, 64 MiB by default), so workers
/// reading large files at once would hold one such file each; larger
/// candidates are read and searched by the walk, one at a time, as before
/// the workers. 1 MiB is the Store's chunk; most source files are far
/// smaller, so nearly every candidate still goes to a worker.
const MAX_WORKER_FILE_BYTES: u64 = 1 << 20;

/// Runs the Grep `run` over `part` of `table`, narrowed by `grep`, with
/// `walk` over that table. The walk stays on this thread; the candidates
/// it needs no index for are read and searched by the window's workers,
/// one per core, and come out in walk order (`crate::search::window`). A
/// selective regex has hundreds of candidates on the kernel, and on the
/// Store each is a RocksDB lookup and a block to decompress: on one
/// thread they were most of its time (docs/performance.md § Candidates on
/// the window's workers).
pub fn search_table<F: Frozen + Sync>(
    run: &SearchRun,
    walk: Walk<'_, F>,
    part: &SearchPart,
    grep: &mut IndexedGrep,
    table: &PathTable,
) -> Result<()> {
    let (keys, files) = (walk.keys, walk.files);
    let search = |searcher: &mut FileSearcher<'_>, task: &Task<(Entry, Known)>| {
        task.hits(|(entry, known)| {
            let loaded = keys
                .rel(&entry.path)
                .and_then(|rel| files.load(None, &entry.path, &rel));
            search_whole(run, searcher, (entry, *known), loaded, None)
        })
    };
    window::grep_in_order(run, search, |window| {
        let mut files = TableFiles { walk, window };
        bulk::walk_table(run, &mut files, part, grep, table)
    })
}

/// A walk over a table whose candidates go to the window.
struct TableFiles<'a, 'w, 's, F: Frozen> {
    walk: Walk<'a, F>,
    window: &'w mut Window<'s, Task<(Entry, Known)>>,
}

impl<F: Frozen> SortedFiles for TableFiles<'_, '_, '_, F> {
    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
        WholeFiles::seek(&mut self.walk, from)
    }

    /// A candidate the Grep learns, or one over
    /// [`MAX_WORKER_FILE_BYTES`], is read and searched here, as the Grep's
    /// index is this thread's; any other goes to a worker.
    fn search_file(
        &mut self,
        run: &SearchRun,
        searcher: &mut FileSearcher<'_>,
        (entry, key): (&Entry, &[u8]),
        learn: Option<&mut IndexedGrep>,
        known: Known,
    ) {
        // A large file is read here too, so a Grep holds one whole file
        // at a time beyond the workers' small ones, as the walk alone did.
        let task = match learn {
            None if entry.size <= MAX_WORKER_FILE_BYTES => Task::Search((entry.clone(), known)),
            learn => {
                let Some(_room) = hold_for_load::<Walk<'_, F>>(run, entry) else {
                    return;
                };
                let loaded = self.walk.load(entry);
                let learn = learn.map(|grep| (grep, key));
                let hits = search_whole(run, searcher, (entry, known), loaded, learn);
                Task::searched(hits)
            }
        };
        self.window.push(task);
    }

    fn skip(&mut self, run: &SearchRun, path: &VfsPath, is_dir: bool) -> Option<Skip> {
        WholeFiles::skip(&mut self.walk, run, path, is_dir)
    }
}
