//! A narrowed Grep over a namespace's path table in O(candidates) rather
//! than O(files) (docs/search-index.md § The path table).
//!
//! The walk over a table is a pure function of the table, the search root,
//! the rules (hidden, ignored), the glob and the size limit, until a budget
//! stops it. So its counts are taken once per such combination by running
//! the walk itself in a counting mode ([`Passes`], kept by the namespace's
//! index), and a Grep then jumps from candidate row to candidate row (the
//! rows the index cannot rule out), adding the counts of the rows between
//! in one step, and visits each candidate with the normal code.
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
use super::index::passes::{Counts, PassKey, Passes};
use super::index::table::PathTable;
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
    let spec = run.spec();
    let key = PassKey {
        table: table.id(),
        root: spec.root.as_str().to_owned(),
        lo: cursor.clone(),
        hi: end.clone(),
        hidden: spec.include_hidden,
        ignored: spec.include_ignored,
        glob: grep
            .file_filter
            .as_ref()
            .map_or_else(String::new, |f| f.glob().to_owned()),
        max_file_bytes: grep.max_file_bytes,
    };
    let passes = match index.passes(&key) {
        Some(passes) => passes,
        None => {
            let from = Resume {
                cursor,
                dirs: Vec::new(),
            };
            let counting = (grep, key, rows.start..rows.end);
            let passes = Arc::new(count(run, files, table, counting, (from, &end))?);
            tracing::info!(
                rows = passes.rows().len(),
                bytes = passes.bytes(),
                "search index walk counts taken"
            );
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
    for &row in &candidates {
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
        let Some(rel) = found.entry.path.relative_to(&spec.root) else {
            return Ok(());
        };
        let visit = Visit {
            rel,
            key: &found.key,
            entry: found.entry.clone(),
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

/// The walk's counts over the rows `rows` of `table` (which `files` walks),
/// taken by the walk itself from `from` to `end` with nothing searched.
fn count<S: SortedFiles>(
    run: &SearchRun,
    files: &mut S,
    table: &PathTable,
    (grep, key, rows): (&GrepOptions, PassKey, std::ops::Range<usize>),
    (from, end): (Resume, &[u8]),
) -> Result<Passes> {
    let mut counter = Counter {
        table,
        grep,
        passes: Passes::start(key, rows.start),
        total: Counts::default(),
        row: rows.start,
    };
    walk_from(run, files, &mut counter, end, from, |_, counter, visit| {
        counter.file(&visit);
        Ok(())
    })?;
    let Counter { passes, total, .. } = counter;
    Ok(passes.finish(rows.end, total))
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

impl Counter<'_> {
    /// What the Grep does with the file of the row reached last, as
    /// `visit_file` decides it (links are never searched).
    fn file(&mut self, visit: &Visit<'_>) {
        if matches!(visit.entry.kind, EntryKind::Symlink { .. }) {
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

    impl SortedFiles for TableFiles {
        type Data = Vec<u8>;

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

    fn random_tree(rng: &mut StdRng, version: &mut u64) -> TableFiles {
        let mut files = std::collections::BTreeMap::new();
        for _ in 0..rng.random_range(1..120) {
            let dir = DIRS[rng.random_range(0..DIRS.len())];
            let name = NAMES[rng.random_range(0..NAMES.len())];
            let path = format!("/t/{dir}{}{name}", rng.random_range(0..5));
            let text = TEXTS[rng.random_range(0..TEXTS.len())].repeat(rng.random_range(1..4));
            let path = VfsPath::parse(&path).unwrap();
            files.insert(path.order_key(), (path, text));
        }
        let mut rows = Vec::new();
        let mut data = HashMap::new();
        for (path, text) in files.into_values() {
            *version += 1;
            rows.push(Row::of(Entry {
                path: path.clone(),
                kind: EntryKind::File,
                size: text.len() as u64,
                modified: SystemTime::UNIX_EPOCH,
                created: SystemTime::UNIX_EPOCH,
                version: *version,
            }));
            data.insert(path.as_str().to_owned(), text);
        }
        let at = LogPosition { epoch: 1, seq: 1 };
        let range = VfsPath::parse("/t").unwrap().subtree_range();
        TableFiles {
            table: Arc::new(PathTable::new(at, range, rows)),
            data,
        }
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
            let (spec, _) = random_spec(&mut rng, 0);
            let all = SearchSpec {
                include_hidden: true,
                include_ignored: true,
                max_visited: u64::MAX,
                max_results: 0,
                ..spec
            };
            for _ in 0..2 {
                let SearchKind::Grep(grep) = &all.kind else {
                    unreachable!()
                };
                let mut g =
                    IndexedGrep::start(registry.get("ns", "p").unwrap(), settings(), &grep.plan);
                let _learned = answer(all.clone(), |run| {
                    walk_indexed(
                        run,
                        &mut files,
                        &SearchPart::whole(VfsPath::parse("/t").unwrap()),
                        Some(&mut g),
                    )
                });
                g.finish();
            }
            registry.get("ns", "p").unwrap().0.merge();
            for _ in 0..8 {
                let (spec, part) = random_spec(&mut rng, files.table.len());
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
}
