//! The search walk for tiers whose files live in one ordered key space (State
//! in a `BTreeMap`, Store in RocksDB); their side of it is
//! `backend::ordered` (its `walk` module implements [`SortedFiles`]).
//!
//! Keys are [`VfsPath::order_key`]s, so key order is path order and a subtree is
//! one key range. Directories are implied by file paths: the walk notices each
//! directory when it meets its first file, applies the hidden/ignore rules to
//! it, and prunes a skipped directory with one seek past its range instead of
//! reading what lies below it. Cost is therefore O(results walked), never a scan
//! of the whole namespace.

use super::index::passes::Known;
use super::index::{IndexedGrep, Verdict};
use super::room::{self, Held};
use super::rules::{self, Skip};
use super::{FileHits, FileSearcher, SearchKind, SearchPart, SearchRun};
use crate::entry::{Entry, EntryKind};
use crate::error::{Error, Result};
use crate::path::VfsPath;

/// A tier's ordered file set, as the walk needs it.
pub trait SortedFiles {
    /// The first file whose order key is `>= from`, if any.
    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>>;

    /// Reads the file `entry` (order key `key`) returned by `seek` and
    /// searches it, handing its content to `learn` first when given. A
    /// tier that reads a file whole implements [`WholeFiles`] instead; the
    /// Filesystem tier's table walk searches as its scan does, as a
    /// stream, and reads whole only a file it learns
    /// (`src/backend/fs/table_walk.rs`). `known`: what the index knows of
    /// this very version's content ([`FileSearcher::search_slice`]).
    fn search_file(
        &mut self,
        run: &SearchRun,
        searcher: &mut FileSearcher<'_>,
        file: (&Entry, &[u8]),
        learn: Option<&mut IndexedGrep>,
        known: Known,
    );

    /// Why the search's rules skip `path` (a directory when `is_dir`): the
    /// shared hidden/default-ignore name rules, which are all an ordered
    /// tier has; a branch of a Filesystem mount adds its ignore files.
    fn skip(&mut self, run: &SearchRun, path: &VfsPath, is_dir: bool) -> Option<Skip>;

    /// What a Glob asking for metadata lists for `entry`, returned by
    /// `seek`; `None` when it is gone. `entry` itself by default; the
    /// Filesystem tier's table holds the index's fingerprint, not the
    /// tier's version, so its walk takes the file's `lstat` here, as its
    /// tree's walk does (`src/backend/fs/table_walk.rs`).
    fn glob_entry(&mut self, _run: &SearchRun, entry: Entry) -> Option<Entry> {
        Some(entry)
    }
}

/// The ordered file set of a tier that reads a file whole to search it
/// (State, the Store, the object tier, a branch's view): a
/// [`SortedFiles`] whose files are searched as slices.
pub trait WholeFiles {
    /// File contents: shared, owned, or lent by the walk until its next
    /// step.
    type Data<'w>: AsRef<[u8]>
    where
        Self: 'w;

    /// [`SortedFiles::seek`].
    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>>;

    /// Whether [`WholeFiles::load`] copies a file's content into memory
    /// of its own (a Store file of several chunks, an object's blob), so a
    /// search holds room for a large one first (`super::room`); State
    /// lends what it already holds.
    const LOAD_COPIES: bool = true;

    /// The content of a file returned by `seek`.
    fn load(&mut self, entry: &Entry) -> Result<Self::Data<'_>>;

    /// [`SortedFiles::skip`]: the shared name rules unless the tier has
    /// more.
    fn skip(&mut self, run: &SearchRun, path: &VfsPath, _is_dir: bool) -> Option<Skip> {
        let spec = run.spec();
        rules::skip_name(path.name(), spec.include_hidden, spec.include_ignored)
    }
}

impl<W: WholeFiles> SortedFiles for W {
    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
        WholeFiles::seek(self, from)
    }

    fn search_file(
        &mut self,
        run: &SearchRun,
        searcher: &mut FileSearcher<'_>,
        (entry, key): (&Entry, &[u8]),
        learn: Option<&mut IndexedGrep>,
        known: Known,
    ) {
        // The room and the content go before the hits are sent, which
        // may wait on the client.
        let hits = {
            let Some(_room) = hold_for_load::<W>(run, entry) else {
                return;
            };
            let loaded = self.load(entry);
            let learn = learn.map(|index| (index, key));
            search_whole(run, searcher, (entry, known), loaded, learn)
        };
        if let Some(hits) = hits {
            run.emit_file(hits);
        }
    }

    fn skip(&mut self, run: &SearchRun, path: &VfsPath, is_dir: bool) -> Option<Skip> {
        WholeFiles::skip(self, run, path, is_dir)
    }
}

/// The room `entry`'s content takes while `W` holds it loaded, to keep
/// until it is searched; `None` when the run must stop first
/// (`super::room`).
pub fn hold_for_load<W: WholeFiles>(run: &SearchRun, entry: &Entry) -> Option<Held> {
    room::hold(run, if W::LOAD_COPIES { entry.size } else { 0 })
}

/// Searches the file `entry` whose content `loaded` read (`known`: what
/// the index knows of it), handing the content first to `learn`, the Grep's
/// index and the file's order key, when given; a failed read is the run's
/// soft problem.
pub fn search_whole(
    run: &SearchRun,
    searcher: &mut FileSearcher<'_>,
    (entry, known): (&Entry, Known),
    loaded: Result<impl AsRef<[u8]>>,
    learn: Option<(&mut IndexedGrep, &[u8])>,
) -> Option<FileHits> {
    match loaded {
        Ok(data) => {
            if let Some((index, key)) = learn {
                index.learn(key.to_vec(), entry.version, data.as_ref());
            }
            searcher.search_slice(&entry.path, entry.modified, data.as_ref(), known)
        }
        Err(err) => {
            run.problem(entry.path.as_str(), err);
            None
        }
    }
}

/// Walks every file of `part` in path order and feeds the run. The caller has
/// checked that `part.top` is a directory.
pub fn walk<S: SortedFiles>(run: &SearchRun, files: &mut S, part: &SearchPart) -> Result<()> {
    walk_indexed(run, files, part, None)
}

/// [`walk`] with a Grep narrowed by the tier's search index: a file the
/// index rules out is counted as searched without being read, which is what
/// searching it would count (the index holds no binary file), so results and
/// summary stay the scan's (docs/search-index.md § Exactness).
pub fn walk_indexed<S: SortedFiles>(
    run: &SearchRun,
    files: &mut S,
    part: &SearchPart,
    index: Option<&mut IndexedGrep>,
) -> Result<()> {
    let (cursor, end) = part_range(part);
    let from = Resume {
        cursor,
        dirs: Vec::new(),
    };
    walk_live(run, files, &end, from, index)
}

/// The order keys `[from, end)` the walk of `part` covers.
pub(crate) fn part_range(part: &SearchPart) -> (Vec<u8>, Vec<u8>) {
    let (start, end) = part.top.subtree_range();
    (start.max(part.lo.clone()), end.min(part.hi.clone()))
}

/// What the walk counts as it passes entries: the live run, or a tally
/// taking a path table's counts once (`search::bulk`), so both count by the
/// same rules.
pub(crate) trait Tally {
    /// True when the walk must stop.
    fn stopped(&mut self) -> bool;
    /// Counts a visited entry; false when the walk must stop.
    fn visit(&mut self) -> bool;
    /// Counts an entry the rules skip.
    fn skipped(&mut self, skip: Skip);
    /// The walk reached the file with order key `key` (within its range).
    fn reached(&mut self, _key: &[u8]) {}
}

impl Tally for &SearchRun {
    fn stopped(&mut self) -> bool {
        self.should_stop()
    }

    fn visit(&mut self) -> bool {
        SearchRun::visit(self)
    }

    fn skipped(&mut self, skip: Skip) {
        match skip {
            Skip::Hidden => self.skipped_hidden(),
            Skip::Ignored => self.skipped_ignored(),
        }
    }
}

/// Where a walk goes on from: the order key it seeks next and the
/// directories (relative to the root) it has entered, outermost first.
pub(crate) struct Resume {
    pub cursor: Vec<u8>,
    pub dirs: Vec<String>,
}

/// The walk from `from` to `end` into the run, narrowed by `index`.
pub(crate) fn walk_live<S: SortedFiles>(
    run: &SearchRun,
    files: &mut S,
    end: &[u8],
    from: Resume,
    mut index: Option<&mut IndexedGrep>,
) -> Result<()> {
    let mut searcher = FileSearcher::new(run);
    walk_from(run, files, &mut { run }, end, from, |files, _, file| {
        visit_file(run, files, searcher.as_mut(), file, index.as_deref_mut())
    })
}

/// The walk itself: seeks each file from `from` to `end`, enters its
/// directories (counting them, pruning a skipped one with one seek past
/// its range), counts the file, and hands each file the rules keep to
/// `file`.
pub(crate) fn walk_from<S: SortedFiles, T: Tally>(
    run: &SearchRun,
    files: &mut S,
    tally: &mut T,
    end: &[u8],
    from: Resume,
    mut file: impl FnMut(&mut S, &mut T, Visit<'_>) -> Result<()>,
) -> Result<()> {
    let root = &run.spec().root;
    let Resume {
        mut cursor,
        mut dirs,
    } = from;
    while !tally.stopped() {
        let entry = match files.seek(&cursor) {
            None => break,
            Some(Err(err)) => return Err(err),
            Some(Ok(entry)) => entry,
        };
        let key = entry.path.order_key();
        if key.as_slice() >= end {
            break;
        }
        let Some(rel) = entry.path.relative_to(root).map(str::to_owned) else {
            break;
        };
        tally.reached(&key);
        let mut parts: Vec<&str> = rel.split('/').collect();
        parts.pop();
        let common = dirs.iter().zip(&parts).take_while(|(a, b)| a == b).count();
        dirs.truncate(common);
        let mut pruned = None;
        // The directory above `dir`, joined once per directory entered.
        let mut above: Option<VfsPath> = None;
        for dir in parts.iter().skip(common) {
            if !tally.visit() {
                return Ok(());
            }
            let path = match above.take() {
                Some(above) => above,
                None => root.join_relative(&parts[..common].join("/"))?,
            }
            .join(dir)?;
            if count_skip(tally, files.skip(run, &path, true)) {
                pruned = Some(path);
                break;
            }
            dirs.push((*dir).to_owned());
            above = Some(path);
        }
        if let Some(dir) = pruned {
            cursor = dir.subtree_range().1;
            continue;
        }
        // A row of a directory is an empty one (a Filesystem table's:
        // `src/backend/fs/mirror/`): visited and judged as a directory.
        let is_dir = entry.is_directory();
        if !tally.visit() || count_skip(tally, files.skip(run, &entry.path, is_dir)) {
            cursor = key;
            cursor.push(0);
            continue;
        }
        let visit = Visit {
            rel: &rel,
            key: &key,
            entry,
            selected: false,
            known: Known::Nothing,
        };
        file(files, tally, visit)?;
        cursor = key;
        cursor.push(0);
    }
    Ok(())
}

/// A walked file.
pub(crate) struct Visit<'a> {
    /// Its path relative to the search root.
    pub rel: &'a str,
    /// Its order key.
    pub key: &'a [u8],
    pub entry: Entry,
    /// The index's segment holds the file at this version and selected
    /// it: it is searched without asking the index again (a lookup by key
    /// per candidate was a tenth of a selective Grep on the kernel).
    pub selected: bool,
    /// What the index knows of its content (`Candidate::known`).
    pub known: Known,
}

/// Searches a single file given as the search root (Grep on a file path).
pub fn search_one<S: SortedFiles>(run: &SearchRun, files: &mut S, entry: Entry) -> Result<()> {
    let SearchKind::Grep(_) = run.spec().kind else {
        return Err(Error::NotDirectory(entry.path.to_string()));
    };
    if run.visit() {
        let name = entry.path.name().to_owned();
        let key = entry.path.order_key();
        let file = Visit {
            rel: &name,
            key: &key,
            entry,
            selected: false,
            known: Known::Nothing,
        };
        visit_file(run, files, FileSearcher::new(run).as_mut(), file, None)?;
    }
    Ok(())
}

/// Does with a walked file what the run asks: a Glob emits it when it
/// matches, a Grep searches it unless filtered, too large or ruled out by
/// `index`.
pub(crate) fn visit_file<S: SortedFiles>(
    run: &SearchRun,
    files: &mut S,
    searcher: Option<&mut FileSearcher<'_>>,
    file: Visit<'_>,
    index: Option<&mut IndexedGrep>,
) -> Result<()> {
    let Visit {
        rel,
        key,
        entry,
        selected,
        known,
    } = file;
    match &run.spec().kind {
        // A row of an empty directory (a Filesystem table's) is visited,
        // never listed: the tree's Glob lists files and links.
        SearchKind::Glob(_) if entry.is_directory() => {}
        SearchKind::Glob(glob) if glob.matcher.is_match(rel) => {
            let entry = match run.paths_only() {
                true => Some(entry),
                false => files.glob_entry(run, entry),
            };
            if let Some(entry) = entry {
                run.emit_entry(entry);
            }
        }
        SearchKind::Glob(_) => {}
        // Grep never follows a link (a Filesystem mount's), as the tier's
        // own walk skips them, and an empty directory holds nothing.
        SearchKind::Grep(_) if entry.kind != EntryKind::File => {}
        SearchKind::Grep(_) => {
            // `FileSearcher::new` is Some for every Grep run.
            let Some(searcher) = searcher else {
                return Ok(());
            };
            if searcher.wants(rel, entry.size) {
                let learn = match index {
                    Some(index) if selected => {
                        index.count_selected();
                        None
                    }
                    Some(index) => match index.check(key, entry.version) {
                        Verdict::Skip => {
                            searcher.searched_unread();
                            return Ok(());
                        }
                        Verdict::Search { learn: true } => Some(index),
                        Verdict::Search { learn: false } => None,
                    },
                    None => None,
                };
                files.search_file(run, searcher, (&entry, key), learn, known);
            }
        }
    }
    Ok(())
}

/// Counts a skip, if any; true when there was one.
fn count_skip<T: Tally>(tally: &mut T, skip: Option<Skip>) -> bool {
    match skip {
        Some(skip) => tally.skipped(skip),
        None => return false,
    }
    true
}
