//! A narrowed Grep, or a Glob, on a Filesystem mount over the
//! mirror's path table (docs/search-index.md § The Filesystem tier's path
//! table): for a Grep the walk that jumps from candidate to candidate
//! (`crate::search::bulk`), for a Glob the ordered tiers' walk
//! (`crate::search::sorted`), given this tier's rules.
//!
//! - The ignore files: each path is judged by the rules of the directories
//!   above it, kept with the table, as the tree's walk judges it.
//! - Candidates are opened beneath the mount root with no link followed,
//!   and searched as the tree's walk searches them
//!   (`super::grep_file::search_opened`): as a stream, and read whole only
//!   to be learned, within the mount's learn buffers. The window's workers
//!   search them (one per core) in walk order; a candidate the Grep learns
//!   is searched by the walk itself, which holds the Grep's index.
//! - A candidate is learned only in the state the table names (its
//!   fingerprint at the `fstat` before the read) and when that state is
//!   settled (`super::fingerprint::settled`): the same rule as the tree's walk.

use super::fingerprint::fingerprint;
use super::grep_file::search_opened;
use super::index::FsIndex;
use super::mirror::Levels;
use super::sandbox::{DIR_FLAGS, Links, READ_FLAGS, Sandbox, errno, glob_entry};
use crate::entry::{Entry, EntryKind};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::search::ignore_rules::{Level, skip_of};
use crate::search::index::IndexedGrep;
use crate::search::index::passes::Known;
use crate::search::index::table::PathTable;
use crate::search::rules::Skip;
use crate::search::sorted::{self, SortedFiles};
use crate::search::window::{self, Task, Window};
use crate::search::{FileHits, FileSearcher, SearchPart, SearchRun, bulk};
use rustix::fs::{AtFlags, OFlags};
use rustix::io::Errno;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::SystemTime;

/// Runs the Grep `run` over `part` of the mount's `table`, narrowed by
/// `grep`, the Grep's use of the mount's `index`. The walk stays on this
/// thread; the candidates it needs no index for are searched by the
/// window's workers, one per core, and come out in walk order
/// (`crate::search::window`), as the tree's walk searches its files. On
/// the kernel a selective regex has hundreds of candidates (1,244 for
/// `fn\s+parse_[a-z]+_header`): on one thread they were most of its time.
pub fn search(
    run: &SearchRun,
    part: &SearchPart,
    sandbox: &Sandbox,
    (table, levels): (&PathTable, &Levels),
    (index, grep): (&FsIndex, &mut IndexedGrep),
) -> Result<()> {
    let rows = TableRows::new(table, levels, sandbox);
    let search = |searcher: &mut FileSearcher<'_>, task: &Task<Candidate>| {
        task.hits(|(path, known)| search_candidate(run, searcher, sandbox, (path, *known), None))
    };
    window::grep_in_order(run, search, |window| {
        let mut files = TableFiles {
            rows,
            window,
            index,
        };
        bulk::walk_table(run, &mut files, part, grep, table)
    })
}

/// Runs the Glob `run` over `part` of the mount's `table`: no directory is
/// listed, and a file's `lstat` is taken only for an entry listed with its
/// metadata; the rows are judged by the rules the tree's walk applies, so
/// entries and summary are its own.
pub fn glob(
    run: &SearchRun,
    part: &SearchPart,
    sandbox: &Sandbox,
    (table, levels): (&PathTable, &Levels),
) -> Result<()> {
    let mut rows = TableRows::new(table, levels, sandbox);
    let walked = sorted::walk(run, &mut rows, part);
    tracing::debug!(
        rows = table.len(),
        visited = run.visited(),
        "glob walked the mirror's table"
    );
    walked
}

/// A candidate for a window's worker: its path, and the state the table
/// names with what the index knows of it.
type Candidate = (VfsPath, (u64, Known));

/// What a candidate the Grep learns needs to be learned.
struct Learn<'a> {
    /// The mount's index: its learn buffers bound the files read whole.
    index: &'a FsIndex,
    grep: &'a mut IndexedGrep,
    key: &'a [u8],
}

/// Opens the candidate `path` beneath the mount root with no link
/// followed and searches it as the tree's walk searches its files; with
/// `learn`, reads it whole first when it is in the state the table names
/// (`version`), and reads no further than `known` says when it is.
fn search_candidate(
    run: &SearchRun,
    searcher: &mut FileSearcher<'_>,
    sandbox: &Sandbox,
    (path, (version, known)): (&VfsPath, (u64, Known)),
    learn: Option<Learn<'_>>,
) -> Option<FileHits> {
    // Before the `fstat`: the state read must have settled by then.
    let now = SystemTime::now();
    let flags = READ_FLAGS | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    let opened = sandbox
        .open_exact(path, flags)
        .and_then(|fd| rustix::fs::fstat(&fd).map(|st| (fd, st)));
    let (fd, st) = match opened {
        Ok(opened) => opened,
        // Removed since the fence, as the tree's walk finds a file
        // removed since its listing: nothing to report.
        Err(Errno::NOENT) => return None,
        Err(e) => {
            run.problem(path.as_str(), errno(path, e));
            return None;
        }
    };
    let named = fingerprint(&st) == version;
    let within = match known {
        Known::MatchesWithin(pieces) if named => Some(pieces),
        _ => None,
    };
    let learn = learn.filter(|_| named);
    let read_whole = |fd: &OwnedFd| {
        let learn = learn?;
        let data = learn.index.read_whole(fd, &st, now)?;
        let key = learn.key.to_vec();
        learn.grep.learn(key, version, data.as_slice());
        Some(data)
    };
    search_opened(searcher, path, (fd, &st), read_whole, within)
}

/// The mount's files as a table gives them, for a Grep: the rows, and the
/// window its candidates go to.
struct TableFiles<'a, 'w, 's> {
    rows: TableRows<'a>,
    window: &'w mut Window<'s, Task<Candidate>>,
    index: &'a FsIndex,
}

impl SortedFiles for TableFiles<'_, '_, '_> {
    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
        self.rows.seek(from)
    }

    fn search_file(
        &mut self,
        run: &SearchRun,
        searcher: &mut FileSearcher<'_>,
        (entry, key): (&Entry, &[u8]),
        learn: Option<&mut IndexedGrep>,
        known: Known,
    ) {
        let task = match learn {
            Some(grep) => {
                let learn = Learn {
                    index: self.index,
                    grep,
                    key,
                };
                let sandbox = self.rows.sandbox;
                let candidate = (&entry.path, (entry.version, known));
                let hits = search_candidate(run, searcher, sandbox, candidate, Some(learn));
                Task::searched(hits)
            }
            None => Task::Search((entry.path.clone(), (entry.version, known))),
        };
        self.window.push(task);
    }

    fn skip(&mut self, run: &SearchRun, path: &VfsPath, is_dir: bool) -> Option<Skip> {
        self.rows.skip(run, path, is_dir)
    }
}

/// The mount's rows with the rules of their directories: what a Glob
/// walks, and what a Grep's walk seeks and judges.
struct TableRows<'a> {
    table: &'a PathTable,
    levels: &'a Levels,
    sandbox: &'a Sandbox,
    /// The row after the last one sought: most seeks ask for it.
    next_row: usize,
    /// The directory whose paths were judged last, and the rules above
    /// them: rows come by directory, and looking the rules up again for
    /// each (a hash per level) was a tenth of a Glob.
    last_dir: (String, Vec<Arc<Level>>),
    /// The directory of the entry a Glob described last, opened beneath
    /// the mount root with no link followed.
    described_dir: Option<(VfsPath, OwnedFd)>,
}

impl<'a> TableRows<'a> {
    fn new(table: &'a PathTable, levels: &'a Levels, sandbox: &'a Sandbox) -> TableRows<'a> {
        TableRows {
            table,
            levels,
            sandbox,
            next_row: 0,
            last_dir: (String::new(), Vec::new()),
            described_dir: None,
        }
    }

    /// The opened directory of `path`, opened once for the rows of one
    /// directory; `None` when it went since the fence (nothing to report,
    /// as the tree's walk finds a file gone since its listing).
    fn directory_of(&mut self, run: &SearchRun, path: &VfsPath) -> Option<&OwnedFd> {
        let parent = path.parent();
        if self
            .described_dir
            .as_ref()
            .is_none_or(|(dir, _)| *dir != parent)
        {
            self.described_dir = match self.sandbox.open_at(&parent, DIR_FLAGS, Links::Refuse) {
                Ok(fd) => Some((parent, fd)),
                Err(Error::NotFound(_)) => None,
                Err(err) => {
                    run.problem(path.as_str(), err);
                    None
                }
            };
        }
        self.described_dir.as_ref().map(|(_, fd)| fd)
    }

    /// The rules of the directories above `path` (from the mount root
    /// down) that have ignore files.
    fn levels_above(&mut self, path: &str) -> &[Arc<Level>] {
        let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
        if self.last_dir.0 != dir || self.last_dir.0.is_empty() {
            let levels = self.levels_of(path);
            self.last_dir = (dir.to_owned(), levels);
        }
        &self.last_dir.1
    }

    /// [`TableRows::levels_above`], looked up.
    fn levels_of(&self, path: &str) -> Vec<Arc<Level>> {
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

impl SortedFiles for TableRows<'_> {
    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
        let row = self.table.seek_next(&mut self.next_row, from);
        row.map(|row| Ok(row.entry.clone()))
    }

    /// Never called: the rows alone serve a Glob, which searches no file.
    fn search_file(
        &mut self,
        _run: &SearchRun,
        _searcher: &mut FileSearcher<'_>,
        _file: (&Entry, &[u8]),
        _learn: Option<&mut IndexedGrep>,
        _known: Known,
    ) {
    }

    fn glob_entry(&mut self, run: &SearchRun, entry: Entry) -> Option<Entry> {
        let link = matches!(entry.kind, EntryKind::Symlink { .. });
        let dir = self.directory_of(run, &entry.path)?;
        match rustix::fs::statat(dir, entry.path.name(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Some(glob_entry(entry.path, &st, link)),
            Err(Errno::NOENT) => None,
            Err(e) => {
                run.problem(entry.path.as_str(), errno(&entry.path, e));
                None
            }
        }
    }

    fn skip(&mut self, run: &SearchRun, path: &VfsPath, is_dir: bool) -> Option<Skip> {
        // A search that includes ignored files reads no ignore file.
        let levels = match run.spec().include_ignored {
            true => &[],
            false => self.levels_above(path.as_str()),
        };
        skip_of(run, levels, path.as_str(), is_dir)
    }
}
