//! A narrowed Grep over a namespace's path table in O(candidates) rather
//! than O(files) (docs/search-index.md § The path table).
//!
//! The walk over a table is a pure function of the table, the search root,
//! the rules (hidden, ignored), the glob and the size limit, until a budget
//! stops it. So its counts are taken once per such combination by running
//! the walk itself in a counting mode ([`Passes`], kept by the namespace's
//! index), and a Grep then jumps from candidate row to candidate row (the
//! rows the index cannot rule out), adding the counts of the rows between
//! in one step, and visits each candidate with the normal code. When the
//! table was advanced by the log from one whose counts are kept, they are
//! carried over instead, walking only the rows next to each change
//! ([`carry`] says why that is exact).
//!
//! Invariants:
//! - a candidate reaches the index in the walk, so no directory above it
//!   is skipped and the walk has entered every one of them after it: the
//!   walk can go on entry by entry from the row after it;
//! - a run of rows whose visits would pass `max_visited` is walked entry
//!   by entry from its start, so the walk stops where it always does;
//! - budgets other than `max_visited` are checked before every run: a
//!   run adds no results, so `max_results` cannot be reached within one,
//!   and a time budget or a cancellation stops at the next candidate.

use super::index::IndexedGrep;
use super::index::passes::{Candidate, Counts, PassKey, Passes};
use super::index::table::{Derivation, PathTable, Row};
use super::rules::Skip;
use super::sorted::{
    Resume, SortedFiles, Tally, Visit, part_range, visit_file, walk_from, walk_indexed, walk_live,
};
use super::{Admit, FileSearcher, GrepOptions, SearchKind, SearchPart, SearchRun};
use crate::entry::EntryKind;
use crate::error::Result;
use std::sync::Arc;

/// Walks `part` of `table` for a Grep `index` narrows; `files` answers the
/// walk's seeks from that very table and reads the files searched.
pub fn walk_table<S: SortedFiles>(
    run: &SearchRun,
    files: &mut S,
    part: &SearchPart,
    index: &mut IndexedGrep,
    table: &PathTable,
) -> Result<()> {
    let SearchKind::Grep(grep) = &run.spec().kind else {
        return walk_indexed(run, files, part, Some(index));
    };
    let (cursor, end) = part_range(part);
    let rows = table.position(&cursor)..table.position(&end);
    let Some(candidates) = index.candidates(table, rows.clone()) else {
        return walk_indexed(run, files, part, Some(index));
    };
    let key = pass_key(run, grep, table, (&cursor, &end));
    let passes = match index.passes(&key) {
        Some(passes) => passes,
        None => {
            let earlier = table.derivation().and_then(|derived| {
                let key = PassKey {
                    table: derived.from,
                    ..key.clone()
                };
                index.passes(&key)
            });
            let passes = Arc::new(walk_counts(
                run,
                files,
                table,
                (grep, key),
                earlier.as_deref(),
            )?);
            index.keep_passes(passes.clone());
            passes
        }
    };
    let mut jump = Jump {
        run,
        table,
        passes: &passes,
        from: rows.start,
        after: None,
    };
    let mut searcher = FileSearcher::new(run);
    for &Candidate {
        row,
        selected,
        known,
    } in &candidates
    {
        let row = row as usize;
        if !passes.reaches_index(row) {
            continue;
        }
        if run.should_stop() {
            return Ok(());
        }
        if !jump.pass_to(row, index) {
            return jump.walk_rest(files, &end, index);
        }
        let found = table.row(row);
        let Some(rel) = found.entry.path.relative_to(&run.spec().root) else {
            return Ok(());
        };
        let visit = Visit {
            rel,
            key: &found.key,
            entry: found.entry.clone(),
            selected,
            known,
        };
        visit_file(run, files, searcher.as_mut(), visit, Some(index))?;
        jump.from = row + 1;
        jump.after = Some(row);
    }
    if run.should_stop() {
        return Ok(());
    }
    if !jump.pass_to(rows.end, index) {
        return jump.walk_rest(files, &end, index);
    }
    Ok(())
}

/// Where a Grep's jumps over a table are.
struct Jump<'a> {
    run: &'a SearchRun,
    table: &'a PathTable,
    passes: &'a Passes,
    /// The first row not passed yet.
    from: usize,
    /// The candidate visited last: the walk has entered its directories.
    after: Option<usize>,
}

impl Jump<'_> {
    /// Counts the rows from `self.from` up to `to` (exclusive) and, when
    /// `to` is a row, the directories and file the walk visits reaching
    /// it; false (nothing counted) when that passes the visited budget.
    fn pass_to(&mut self, to: usize, index: &mut IndexedGrep) -> bool {
        let before = self.passes.before(to);
        let mut passed = before.since(&self.passes.before(self.from));
        if to < self.passes.rows().end {
            passed.visited += self.passes.before(to + 1).visited - before.visited;
        }
        let visited = self.run.visited() + u64::from(passed.visited);
        if visited > self.run.spec().max_visited {
            return false;
        }
        self.run.count_passed(&passed);
        index.ruled_out(passed.checked.into());
        true
    }

    /// The walk, entry by entry, from `self.from` to `end`.
    fn walk_rest<S: SortedFiles>(
        &self,
        files: &mut S,
        end: &[u8],
        index: &mut IndexedGrep,
    ) -> Result<()> {
        let root = &self.run.spec().root;
        let dirs = match self.after {
            Some(row) => {
                let rel = self.table.row(row).entry.path.relative_to(root);
                let mut parts: Vec<String> = rel
                    .into_iter()
                    .flat_map(|r| r.split('/'))
                    .map(str::to_owned)
                    .collect();
                parts.pop();
                parts
            }
            None => Vec::new(),
        };
        let from = Resume {
            cursor: self.table.row(self.from).key.to_vec(),
            dirs,
        };
        walk_live(self.run, files, end, from, Some(index))
    }
}

/// What the walk's counts of a Grep over `table` from `cursor` to `end`
/// depend on.
fn pass_key(
    run: &SearchRun,
    grep: &GrepOptions,
    table: &PathTable,
    (cursor, end): (&[u8], &[u8]),
) -> PassKey {
    let spec = run.spec();
    PassKey {
        table: table.id(),
        root: spec.root.as_str().to_owned(),
        lo: cursor.to_vec(),
        hi: end.to_vec(),
        hidden: spec.include_hidden,
        ignored: spec.include_ignored,
        glob: grep
            .file_filter
            .as_ref()
            .map_or_else(String::new, |f| f.glob().to_owned()),
        max_file_bytes: grep.max_file_bytes,
    }
}

/// The walk's counts for `key`: carried over from `earlier` (the counts
/// over the table `table` was derived from) when given, else taken anew.
fn walk_counts<S: SortedFiles>(
    run: &SearchRun,
    files: &mut S,
    table: &PathTable,
    (grep, key): (&GrepOptions, PassKey),
    earlier: Option<&Passes>,
) -> Result<Passes> {
    let rows = table.position(&key.lo)..table.position(&key.hi);
    let end = key.hi.clone();
    // Carried over only from the counts over the very table this one was
    // derived from.
    let derived = table.derivation();
    let from = earlier
        .zip(derived)
        .filter(|(e, d)| e.key().table == d.from);
    match from {
        Some(from) => {
            let passes = carry(run, files, table, (grep, key, rows), from, &end)?;
            tracing::info!(
                rows = passes.rows().len(),
                "search index walk counts carried"
            );
            Ok(passes)
        }
        None => {
            let from = Resume {
                cursor: key.lo.clone(),
                dirs: Vec::new(),
            };
            let passes = count(run, files, table, (grep, key, rows), (from, &end))?;
            tracing::info!(
                rows = passes.rows().len(),
                bytes = passes.bytes(),
                "search index walk counts taken"
            );
            Ok(passes)
        }
    }
}

/// The walk's counts over the rows `rows` of `table` (which `files` walks),
/// taken by the walk itself from `from` to `end` with nothing searched.
fn count<S: SortedFiles>(
    run: &SearchRun,
    files: &mut S,
    table: &PathTable,
    (grep, key, rows): (&GrepOptions, PassKey, std::ops::Range<usize>),
    (from, end): (Resume, &[u8]),
) -> Result<Passes> {
    let mut counter = Counter::new(table, grep, key, rows.start);
    counter.walk(run, files, from, end)?;
    Ok(counter.finish(rows.end))
}

/// The walk's counts over the rows `rows` of `table`, carried over from
/// `earlier` (the same counts over the table `table` was derived from):
/// only the rows next to a change are walked again.
///
/// Why that is exact: what the walk counts as it passes a row depends on
/// that row and the one before it only. Whether the walk reaches the row
/// (or prunes it with a directory entered at an earlier row), which of its
/// directories it enters (those not entered after the row before) and what
/// the rules say of them and of the file are functions of the two paths:
/// the walk's state after any row is that row's directories up to the
/// first one the rules skip. So a row whose path and predecessor are
/// unchanged counts what it counted before, and the rows walked again are
/// each changed row and the row after each change. Each such window is
/// walked from the last row before it that the walk reaches (so no pruned
/// directory is entered twice), with the directories entered after the row
/// before that; the other rows' sums are the earlier ones, moved by what
/// the windows before them changed.
fn carry<S: SortedFiles>(
    run: &SearchRun,
    files: &mut S,
    table: &PathTable,
    (grep, key, rows): (&GrepOptions, PassKey, std::ops::Range<usize>),
    (earlier, derived): (&Passes, &Derivation),
    end: &[u8],
) -> Result<Passes> {
    let windows = windows(table, derived, &key, rows.clone(), earlier);
    let mut counter = Counter::new(table, grep, key, rows.start);
    let mut shift = rows.start as isize - earlier.rows().start as isize;
    for window in windows {
        counter.copy(earlier, window.start, shift);
        if window.start < window.stop {
            counter.row = window.start;
            let dirs = match window.start > rows.start {
                true => entered_after(run, files, table.row(window.start - 1))?,
                false => Vec::new(),
            };
            let from = Resume {
                cursor: table.row(window.start).key.to_vec(),
                dirs,
            };
            let stop = match window.stop < rows.end {
                true => table.row(window.stop).key.to_vec(),
                false => end.to_vec(),
            };
            counter.walk(run, files, from, &stop)?;
            counter.passes.fill_to(window.stop - 1, counter.total);
        }
        shift = window.shift;
    }
    counter.copy(earlier, rows.end, shift);
    Ok(counter.finish(rows.end))
}

/// Rows of a table walked again by [`carry`]: `[start, stop)`, and the
/// row index shift (this table's minus the earlier one's) after them.
struct Window {
    start: usize,
    stop: usize,
    shift: isize,
}

/// The windows of [`carry`], in row order: each changed row and the row
/// after each change (`stop`), from the last row before them the walk
/// reaches (`start`); windows that meet are one.
fn windows(
    table: &PathTable,
    derived: &Derivation,
    key: &PassKey,
    rows: std::ops::Range<usize>,
    earlier: &Passes,
) -> Vec<Window> {
    let mut shift = rows.start as isize - earlier.rows().start as isize;
    let mut windows: Vec<Window> = Vec::new();
    let within = |k: &[u8]| key.lo.as_slice() <= k && k < key.hi.as_slice();
    for change in derived.changes.iter().filter(|c| within(&c.key)) {
        let at = table.position(&change.key);
        let stop = (at + usize::from(change.is) + 1).min(rows.end);
        let before = shift;
        shift += isize::from(change.is) - isize::from(change.was);
        if let Some(last) = windows.last_mut()
            && at <= last.stop
        {
            last.stop = last.stop.max(stop);
            last.shift = shift;
            continue;
        }
        // Back to the last row the walk reaches; the rows passed are
        // unchanged, as is the row before each, so the earlier walk
        // tells.
        let floor = windows.last().map_or(rows.start, |w| w.stop);
        let mut start = at;
        let reached = loop {
            if start == floor {
                break floor == rows.start;
            }
            start -= 1;
            if earlier.is_reached((start as isize - before) as usize) {
                break true;
            }
        };
        match (reached, windows.last_mut()) {
            (false, Some(last)) => {
                last.stop = stop;
                last.shift = shift;
            }
            _ => windows.push(Window { start, stop, shift }),
        }
    }
    windows
}

/// The directories the walk has entered after passing `row`: the row's
/// own, up to the first one the rules skip.
fn entered_after<S: SortedFiles>(run: &SearchRun, files: &mut S, row: &Row) -> Result<Vec<String>> {
    let root = &run.spec().root;
    let Some(rel) = row.entry.path.relative_to(root) else {
        return Ok(Vec::new());
    };
    let mut parts: Vec<&str> = rel.split('/').collect();
    parts.pop();
    let mut entered = Vec::new();
    let mut path = root.clone();
    for part in parts {
        path = path.join(part)?;
        if files.skip(run, &path, true).is_some() {
            break;
        }
        entered.push(part.to_owned());
    }
    Ok(entered)
}

/// The counting mode's tally: adds up, never stops.
struct Counter<'a> {
    table: &'a PathTable,
    grep: &'a GrepOptions,
    passes: Passes,
    total: Counts,
    /// The row reached last.
    row: usize,
}

impl<'a> Counter<'a> {
    /// Counts over `table` from row `first` on, for `key`.
    fn new(table: &'a PathTable, grep: &'a GrepOptions, key: PassKey, first: usize) -> Self {
        Counter {
            table,
            grep,
            passes: Passes::start(key, first),
            total: Counts::default(),
            row: first,
        }
    }

    /// The sums, ended at row `end` (exclusive).
    fn finish(self, end: usize) -> Passes {
        self.passes.finish(end, self.total)
    }

    /// The counting walk from `from` to `end`.
    fn walk<S: SortedFiles>(
        &mut self,
        run: &SearchRun,
        files: &mut S,
        from: Resume,
        end: &[u8],
    ) -> Result<()> {
        walk_from(run, files, self, end, from, |_, counter, visit| {
            counter.file(&visit);
            Ok(())
        })
    }

    /// Records the rows from the next one up to `to` (exclusive) as they
    /// were in `earlier`, whose row index is this table's minus `shift`
    /// for them (see [`carry`]).
    fn copy(&mut self, earlier: &Passes, to: usize, shift: isize) {
        let old = |row: usize| (row as isize - shift) as usize;
        let from = self.passes.next_row();
        let then = earlier.before(old(from));
        let now = self.total;
        self.passes
            .carry(earlier, (old(from), old(to)), (then, now));
        self.total = earlier.before(old(to)).since(&then).plus(&now);
    }

    /// What the Grep does with the file of the row reached last, as
    /// `visit_file` decides it (links and empty directories are never
    /// searched).
    fn file(&mut self, visit: &Visit<'_>) {
        if visit.entry.kind != EntryKind::File {
            return;
        }
        match self.grep.admits(visit.rel, visit.entry.size) {
            Admit::Filtered => {}
            Admit::TooLarge => self.total.too_large += 1,
            Admit::Searched => {
                self.total.checked += 1;
                self.passes.checks(self.row);
            }
        }
    }
}

impl Tally for Counter<'_> {
    fn stopped(&mut self) -> bool {
        false
    }

    fn visit(&mut self) -> bool {
        self.total.visited += 1;
        true
    }

    fn skipped(&mut self, skip: Skip) {
        match skip {
            Skip::Hidden => self.total.hidden += 1,
            Skip::Ignored => self.total.ignored += 1,
        }
    }

    fn reached(&mut self, key: &[u8]) {
        while *self.table.row(self.row).key < *key {
            self.row += 1;
        }
        self.passes.reached(self.row, self.total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::LogPosition;
    use crate::entry::Entry;
    use crate::path::VfsPath;
    use crate::search::index::table::Row;
    use crate::search::index::{IndexSettings, Registry};
    use crate::search::sorted::WholeFiles;
    use crate::search::{Budgets, GrepRequest, Hit, SearchEvent, SearchSpec, Summary};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;
    use std::time::{Duration, SystemTime};

    /// A tree held in a path table, as the ordered tiers' walk sees it.
    struct TableFiles {
        table: Arc<PathTable>,
        data: HashMap<String, String>,
    }

    impl WholeFiles for TableFiles {
        type Data<'w> = Vec<u8>;

        fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
            self.table.seek(from).map(|row| Ok(row.entry.clone()))
        }

        fn load(&mut self, entry: &Entry) -> Result<Vec<u8>> {
            Ok(self.data[entry.path.as_str()].clone().into_bytes())
        }
    }

    const DIRS: &[&str] = &["", "a/", "a/b/", ".h/", "node_modules/", "c/.d/e/", "c/"];
    const NAMES: &[&str] = &["x.rs", "y.txt", ".z.rs", "w", "v.md"];
    const TEXTS: &[&str] = &["needle here\n", "nothing\n", "hay\nneedle\n", "more hay\n"];

    fn random_path(rng: &mut StdRng) -> VfsPath {
        let dir = DIRS[rng.random_range(0..DIRS.len())];
        let name = NAMES[rng.random_range(0..NAMES.len())];
        VfsPath::parse(&format!("/t/{dir}{}{name}", rng.random_range(0..5))).unwrap()
    }

    fn random_text(rng: &mut StdRng) -> String {
        TEXTS[rng.random_range(0..TEXTS.len())].repeat(rng.random_range(1..4))
    }

    fn row(path: VfsPath, text: &str, version: u64) -> Row {
        Row::of(Entry {
            path,
            kind: EntryKind::File,
            size: text.len() as u64,
            modified: SystemTime::UNIX_EPOCH,
            created: SystemTime::UNIX_EPOCH,
            version,
            executable: false,
        })
    }

    fn random_tree(rng: &mut StdRng, version: &mut u64) -> TableFiles {
        let mut files = std::collections::BTreeMap::new();
        for _ in 0..rng.random_range(1..120) {
            let path = random_path(rng);
            files.insert(path.order_key(), (path, random_text(rng)));
        }
        let mut rows = Vec::new();
        let mut data = HashMap::new();
        for (path, text) in files.into_values() {
            *version += 1;
            rows.push(row(path.clone(), &text, *version));
            data.insert(path.as_str().to_owned(), text);
        }
        let at = LogPosition { epoch: 1, seq: 1 };
        let range = VfsPath::parse("/t").unwrap().subtree_range();
        TableFiles {
            table: Arc::new(PathTable::new(at, range, rows)),
            data,
        }
    }

    /// Advances the table by a few random writes (new paths and old
    /// ones) and deletes, as the log would.
    fn change(rng: &mut StdRng, files: &mut TableFiles, version: &mut u64) {
        let mut changes = std::collections::BTreeMap::new();
        for _ in 0..rng.random_range(1..6) {
            if rng.random_ratio(1, 3) && !files.table.is_empty() {
                let old = files.table.row(rng.random_range(0..files.table.len()));
                files.data.remove(old.entry.path.as_str());
                changes.insert(old.key.to_vec(), None);
            } else {
                let (path, text) = (random_path(rng), random_text(rng));
                *version += 1;
                let new = row(path.clone(), &text, *version);
                files.data.insert(path.as_str().to_owned(), text);
                changes.insert(new.key.to_vec(), Some(new));
            }
        }
        let at = files.table.at();
        let next = LogPosition {
            seq: at.seq + 1,
            ..at
        };
        files.table = Arc::new(files.table.advance(next, changes));
    }

    fn settings() -> IndexSettings {
        IndexSettings {
            min_files: 0,
            self_check_per_million: 0,
            ..IndexSettings::default()
        }
    }

    /// Runs `spec` over `part` with `walk`, and answers its hits and
    /// summary (elapsed time zeroed).
    fn answer(
        spec: SearchSpec,
        walk: impl FnOnce(&SearchRun) -> Result<()>,
    ) -> (Vec<Hit>, std::result::Result<Summary, String>) {
        let (tx, mut rx) = tokio::sync::mpsc::channel(100_000);
        let run = SearchRun::new(spec, tx, Duration::from_secs(1));
        let outcome = walk(&run);
        run.finish(outcome);
        let (mut hits, mut summary) = (Vec::new(), None);
        while let Ok(event) = rx.try_recv() {
            match event {
                SearchEvent::Batch(batch) => hits.extend(batch),
                SearchEvent::Summary(mut s) => {
                    s.elapsed = Duration::ZERO;
                    summary = Some(Ok(s));
                }
                // Its message holds the elapsed time: digits left out.
                SearchEvent::Failed(err) => {
                    let message = err.to_string();
                    summary = Some(Err(message.replace(|c: char| c.is_ascii_digit(), "")));
                }
            }
        }
        (hits, summary.expect("a summary or an error"))
    }

    fn random_spec(rng: &mut StdRng, rows: usize) -> (SearchSpec, SearchPart) {
        let root = ["/t", "/t/a", "/t/c"][rng.random_range(0..3)];
        let glob = ["", "*.rs", "a/**", "*.{rs,md}"][rng.random_range(0..4)];
        let budgets = Budgets {
            max_visited: match rng.random_range(0..3) {
                0 => 0,
                _ => rng.random_range(1..rows as u64 * 2 + 3),
            },
            max_results: [0, 0, 2][rng.random_range(0..3)],
            include_hidden: rng.random_ratio(1, 3),
            include_ignored: rng.random_ratio(1, 3),
            ..Budgets::default()
        };
        let request = GrepRequest {
            pattern: ["needle", "nothing", "zzz"][rng.random_range(0..3)],
            glob,
            ..GrepRequest::default()
        };
        let root = VfsPath::parse(root).unwrap();
        let mut spec = SearchSpec::grep(root.clone(), request, budgets).unwrap();
        if let SearchKind::Grep(grep) = &mut spec.kind {
            grep.max_file_bytes = [u64::MAX, 20, 12][rng.random_range(0..3)];
        }
        (spec, SearchPart::whole(root))
    }

    /// A Grep for `pattern` of every file below `/t`.
    fn everything(pattern: &str) -> SearchSpec {
        let budgets = Budgets {
            include_hidden: true,
            include_ignored: true,
            max_visited: u64::MAX,
            ..Budgets::default()
        };
        let request = GrepRequest {
            pattern,
            ..GrepRequest::default()
        };
        SearchSpec::grep(VfsPath::parse("/t").unwrap(), request, budgets).unwrap()
    }

    /// Greps every file of `files` through `registry`'s index `times`
    /// times: the first learns them all.
    fn learn_all(registry: &Registry, files: &mut TableFiles, times: usize) {
        let all = everything("needle");
        for _ in 0..times {
            let SearchKind::Grep(grep) = &all.kind else {
                unreachable!()
            };
            let mut g =
                IndexedGrep::start(registry.get("ns", "p").unwrap(), settings(), &grep.plan);
            let _learned = answer(all.clone(), |run| {
                walk_indexed(
                    run,
                    files,
                    &SearchPart::whole(VfsPath::parse("/t").unwrap()),
                    Some(&mut g),
                )
            });
            g.finish();
        }
    }

    /// An overlay that stopped growing (too small to merge for its size)
    /// is merged once narrowed Greps have checked as many of its files one
    /// by one as the segment holds, and no sooner.
    #[test]
    fn an_overlay_that_stopped_growing_is_merged_after_enough_checks() {
        let seed: u64 = rand::random();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut version = 0;
        let mut files = random_tree(&mut rng, &mut version);
        while files.table.len() < 40 {
            files = random_tree(&mut rng, &mut version);
        }
        let registry = Registry::new(settings(), None);
        // One Grep: a second one could learn again what the merge that
        // the first one started takes out of the overlay meanwhile.
        learn_all(&registry, &mut files, 1);
        let index = registry.get("ns", "p").unwrap().0;
        // Learning every file started a merge.
        let start = std::time::Instant::now();
        while index.overlay_files() > 0 && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let merged = index.files();
        assert_eq!(merged, files.table.len(), "seed {seed}");
        // New versions of a few files, learned into the overlay.
        let mut changes = std::collections::BTreeMap::new();
        for i in [0, files.table.len() / 2, files.table.len() - 1] {
            let old = files.table.row(i);
            version += 1;
            let text = "needle again\n".to_owned();
            changes.insert(
                old.key.to_vec(),
                Some(row(old.entry.path.clone(), &text, version)),
            );
            files.data.insert(old.entry.path.as_str().to_owned(), text);
        }
        let at = files.table.at();
        let next = LogPosition {
            seq: at.seq + 1,
            ..at
        };
        files.table = Arc::new(files.table.advance(next, changes));
        let spec = everything("needle");
        let part = SearchPart::whole(VfsPath::parse("/t").unwrap());
        let SearchKind::Grep(grep) = &spec.kind else {
            unreachable!()
        };
        let narrowed = |files: &mut TableFiles| {
            let table = files.table.clone();
            let mut g =
                IndexedGrep::start(registry.get("ns", "p").unwrap(), settings(), &grep.plan);
            let (_, summary) = answer(spec.clone(), |run| {
                walk_table(run, files, &part, &mut g, &table)
            });
            assert!(summary.is_ok(), "seed {seed}: {summary:?}");
            g.finish();
        };
        narrowed(&mut files);
        assert_eq!(index.overlay_files(), 3, "seed {seed}: the three learned");
        // Each narrowed Grep checks the three one by one: the overlay is
        // merged once that adds up to the MERGE_MIN_FILES (256) the
        // segment's size is raised to.
        // A Grep that overlaps the merge may learn again a file the merge
        // took from the overlay (the segment it started on holds the old
        // version): that file is checked until the next merge, so under
        // load this takes up to twice as many Greps (CI: 200 were too few).
        let mut greps = 1;
        while index.overlay_files() > 0 && greps < 1000 {
            narrowed(&mut files);
            greps += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        let start = std::time::Instant::now();
        while index.files() > merged && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            index.files(),
            merged,
            "seed {seed}: merged after {greps} Greps"
        );
        assert!(
            greps >= 256 / 3,
            "seed {seed}: merged after only {greps} Greps"
        );
    }

    /// The jumps over a table count exactly what the walk entry by entry
    /// counts, on random trees, roots, rules, globs, size limits and
    /// visited budgets (stopping inside runs of ruled-out rows), with the
    /// counts taken once and reused.
    #[test]
    fn jumping_counts_what_the_walk_counts() {
        let seed: u64 = rand::random();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut version = 0;
        let mut jumped = 0;
        for _ in 0..60 {
            let mut files = random_tree(&mut rng, &mut version);
            let registry = Registry::new(settings(), None);
            // Learn every file, then merge: later Greps are narrowed.
            learn_all(&registry, &mut files, 2);
            registry.get("ns", "p").unwrap().0.merge();
            let mut last = None;
            for _ in 0..12 {
                // Changes between Greps of one spec: the counts are
                // carried over to the newer table.
                if rng.random_ratio(1, 2) {
                    change(&mut rng, &mut files, &mut version);
                }
                let (spec, part) = match last.take().filter(|_| rng.random_ratio(1, 2)) {
                    Some(again) => again,
                    None => random_spec(&mut rng, files.table.len()),
                };
                last = Some((spec.clone(), part.clone()));
                let SearchKind::Grep(grep) = &spec.kind else {
                    unreachable!()
                };
                let start = |g: &Registry| {
                    IndexedGrep::start(g.get("ns", "p").unwrap(), settings(), &grep.plan)
                        .without_learning()
                };
                let walked = answer(spec.clone(), |run| {
                    let mut g = start(&registry);
                    walk_indexed(run, &mut files, &part, Some(&mut g))
                });
                let table = files.table.clone();
                let by_jumps = answer(spec.clone(), |run| {
                    let mut g = start(&registry);
                    jumped += u64::from(g.narrows());
                    walk_table(run, &mut files, &part, &mut g, &table)
                });
                assert_eq!(walked, by_jumps, "seed {seed}: {spec:?}");
                let scanned = answer(spec.clone(), |run| {
                    walk_indexed(run, &mut files, &part, None)
                });
                assert_eq!(scanned, by_jumps, "seed {seed}: {spec:?}");
            }
        }
        assert!(jumped > 0, "seed {seed}: no Grep was narrowed");
    }

    /// Counts carried over from an older table, walking only the rows
    /// next to each change, equal the counts the walk takes anew, over
    /// chains of random changes, roots, rules, globs and size limits.
    #[test]
    fn carried_counts_equal_counts_taken_anew() {
        let seed: u64 = rand::random();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut version = 0;
        for _ in 0..200 {
            let mut files = random_tree(&mut rng, &mut version);
            let (spec, part) = random_spec(&mut rng, 0);
            let (tx, _rx) = tokio::sync::mpsc::channel(1);
            let run = SearchRun::new(spec.clone(), tx, Duration::from_secs(1));
            let SearchKind::Grep(grep) = &spec.kind else {
                unreachable!()
            };
            let (cursor, end) = part_range(&part);
            let counts = |files: &mut TableFiles, earlier: Option<&Passes>| {
                let table = files.table.clone();
                let key = pass_key(&run, grep, &table, (&cursor, &end));
                walk_counts(&run, files, &table, (grep, key), earlier).unwrap()
            };
            let mut earlier = counts(&mut files, None);
            for step in 0..5 {
                change(&mut rng, &mut files, &mut version);
                let carried = counts(&mut files, Some(&earlier));
                let anew = counts(&mut files, None);
                assert_eq!(carried, anew, "seed {seed}, step {step}: {spec:?}");
                earlier = carried;
            }
        }
    }
}
