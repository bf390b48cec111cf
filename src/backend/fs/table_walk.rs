//! A narrowed Grep on a Filesystem mount over the mirror's path table
//! (docs/search-index.md § The Filesystem tier's path table): the walk
//! that jumps from candidate to candidate (`crate::search::bulk`), given
//! this tier's rules.
//!
//! - The ignore files: each path is judged by the rules of the directories
//!   above it, kept with the table, as the tree's walk judges it.
//! - Candidates are opened beneath the mount root with no link followed,
//!   and searched as a stream, as the tree's walk searches them (binary
//!   detection differs for a slice: `crate::search::grep`).
//! - A candidate is learned only in the state the table names (its
//!   fingerprint at the `fstat` before the read) and when that state is
//!   settled (`super::fingerprint::settled`): the same rule as the tree's walk.

use super::fingerprint::{fingerprint, settled};
use super::mirror::Levels;
use super::sandbox::{READ_FLAGS, Sandbox, errno, file_type, modified};
use crate::entry::Entry;
use crate::error::{Error, Result};
use crate::search::ignore_rules::{Level, skip_of};
use crate::search::index::table::PathTable;
use crate::search::index::{IndexedGrep, trigram};
use crate::search::rules::Skip;
use crate::search::sorted::SortedFiles;
use crate::search::{FileSearcher, SearchPart, SearchRun, bulk};
use rustix::fs::{FileType, OFlags};
use rustix::io::Errno;
use std::io::Read;
use std::sync::Arc;
use std::time::SystemTime;

/// Runs the Grep `run` (files up to `max_file_bytes`) over `part` of the
/// mount's `table`, narrowed by `grep`.
pub fn search(
    (run, max_file_bytes): (&SearchRun, u64),
    part: &SearchPart,
    sandbox: &Sandbox,
    (table, levels): (&PathTable, &Levels),
    grep: &mut IndexedGrep,
) -> Result<()> {
    let mut files = TableFiles {
        table,
        levels,
        sandbox,
        max_file_bytes,
    };
    bulk::walk_table(run, &mut files, part, grep, table)
}

/// The mount's files as a table gives them.
struct TableFiles<'a> {
    table: &'a PathTable,
    levels: &'a Levels,
    sandbox: &'a Sandbox,
    /// Most bytes of a file read: the Grep's size limit.
    max_file_bytes: u64,
}

/// A candidate's content, read whole.
struct Loaded {
    bytes: Vec<u8>,
    /// Its modification time at the read.
    modified: SystemTime,
    /// It is the settled state the table names: the index may learn it.
    learnable: bool,
}

impl AsRef<[u8]> for Loaded {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl TableFiles<'_> {
    /// The rules of the directories above `path` (from the mount root
    /// down) that have ignore files.
    fn levels_above(&self, path: &str) -> Vec<Arc<Level>> {
        let mount = self.sandbox.mount().as_str();
        let mut out = Vec::new();
        if let Some(level) = self.levels.get(mount) {
            out.push(level.clone());
        }
        let from = if mount == "/" { 1 } else { mount.len() + 1 };
        for (i, _) in path.match_indices('/').filter(|(i, _)| *i >= from) {
            if let Some(level) = self.levels.get(&path[..i]) {
                out.push(level.clone());
            }
        }
        out
    }
}

impl SortedFiles for TableFiles<'_> {
    type Data = Loaded;

    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
        self.table.seek(from).map(|row| Ok(row.entry.clone()))
    }

    fn load(&mut self, entry: &Entry) -> Result<Loaded> {
        let path = &entry.path;
        // Before the `fstat`: the state read must have settled by then.
        let now = SystemTime::now();
        let flags = READ_FLAGS | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let fd = self.sandbox.open_exact(path, flags).map_err(|e| match e {
            Errno::NOENT => Error::NotFound(path.to_string()),
            e => errno(path, e),
        })?;
        let st = rustix::fs::fstat(&fd).map_err(|e| errno(path, e))?;
        if file_type(&st) != FileType::RegularFile {
            // Replaced by a directory since the fence: nothing to search,
            // as the tree's walk finds nothing in it.
            return Err(Error::NotFound(path.to_string()));
        }
        let size = st.st_size as u64;
        let mut bytes = Vec::with_capacity(size.min(self.max_file_bytes) as usize);
        std::fs::File::from(fd)
            .take(self.max_file_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(path.as_str(), e))?;
        let learnable = fingerprint(&st) == entry.version
            && settled(&st, now)
            && bytes.len() as u64 == size
            && size <= trigram::MAX_INDEXED_FILE_BYTES as u64;
        Ok(Loaded {
            bytes,
            modified: modified(&st),
            learnable,
        })
    }

    fn search_file(
        &mut self,
        run: &SearchRun,
        searcher: &mut FileSearcher<'_>,
        (entry, key): (&Entry, &[u8]),
        learn: Option<&mut IndexedGrep>,
    ) {
        match self.load(entry) {
            Ok(loaded) => {
                if let Some(index) = learn.filter(|_| loaded.learnable) {
                    index.learn(key.to_vec(), entry.version, &loaded.bytes);
                }
                let data = loaded.bytes.as_slice();
                if let Some(hits) = searcher.search_reader(&entry.path, loaded.modified, data) {
                    run.emit_file(hits);
                }
            }
            // Removed since the fence, as the tree's walk finds a file
            // removed since its listing: nothing to report.
            Err(Error::NotFound(_)) => {}
            Err(err) => run.problem(entry.path.as_str(), err),
        }
    }

    fn skip(&mut self, run: &SearchRun, path: &crate::path::VfsPath, is_dir: bool) -> Option<Skip> {
        // A search that includes ignored files reads no ignore file.
        let levels = match run.spec().include_ignored {
            true => Vec::new(),
            false => self.levels_above(path.as_str()),
        };
        skip_of(run, &levels, path.as_str(), is_dir)
    }
}
