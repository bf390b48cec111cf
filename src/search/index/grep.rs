//! One Grep's use of a namespace's index ([`IndexedGrep`]): the candidate
//! check per walked file, the files it learns on the way, and what it hands
//! back to the index when it ends (docs/search-index.md § Design and
//! § Exactness).
//!
//! Invariants: a file is skipped ([`Verdict::Skip`]) only when the segment
//! or overlay the Grep checks holds that very version and its trigrams
//! rule the pattern out; a Grep that overlaps a merge follows it to the new
//! segment before it checks again; what it learns stays within
//! `MAX_LEARN_BYTES` and its principal's room, and reaches the index only
//! when the Grep finishes.

use super::*;

/// Greps the indexes of this process have narrowed (skipped files by their
/// trigrams) since it started: the index's hits, for the server's metrics.
static NARROWED: AtomicU64 = AtomicU64::new(0);

/// Greps narrowed by an index since the process started ([`NARROWED`]),
/// for the server's metrics.
pub fn narrowed_greps() -> u64 {
    NARROWED.load(Relaxed)
}

/// What a Grep does with one walked file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The index rules a match out: the file is searched in name only
    /// (counted as searched, never read).
    Skip,
    /// Search it; with `learn`, hand its content to [`IndexedGrep::learn`].
    Search {
        /// The index does not know this version yet.
        learn: bool,
    },
}

/// One Grep's use of a namespace's index: the candidate check per walked
/// file, and the files it learns on the way.
pub struct IndexedGrep {
    index: Arc<NamespaceIndex>,
    /// Set when the index narrows this Grep.
    filter: Option<(Arc<Segment>, Selected)>,
    /// The index's merge count when `filter`'s segment was taken.
    merges: u64,
    query: Query,
    /// Learn unknown files (the namespace is large enough).
    learning: bool,
    learned: Vec<(Vec<u8>, Learned)>,
    /// Bytes learned so far, up to [`MAX_LEARN_BYTES`].
    learned_bytes: u64,
    /// What the index may still grow by for this Grep's principal.
    room: u64,
    /// What this Grep's learning adds to the index.
    grown: u64,
    walked: u64,
    /// Files ruled out without being read.
    skipped: u64,
}

impl IndexedGrep {
    /// Starts a Grep whose matches all satisfy `query` on `index`, which
    /// it may grow by `room` bytes (see [`Registry::get`]).
    pub fn start(
        (index, room): (Arc<NamespaceIndex>, u64),
        settings: IndexSettings,
        query: &Query,
    ) -> IndexedGrep {
        let large = index.walked.load(Relaxed) >= settings.min_files;
        // Read before the segment: a merge between the two makes the Grep
        // follow it once, never miss it.
        let merges = index.merges.load(Relaxed);
        let mut filter = None;
        if large && *query != Query::All {
            let segment = index.segment();
            let selected = segment.select(query);
            let dense = selected
                .count()
                .is_none_or(|n| n as f64 > DENSE_SHARE * segment.len() as f64);
            if !dense || segment.is_empty() {
                filter = Some((segment, selected));
            }
        }
        // A Grep the index does not narrow learns only while the index
        // holds fewer files than the namespace has: once it covers the
        // namespace, such a Grep skips the per-file lookups altogether.
        let covered = index.unlearned_files() == 0;
        let learning = large && (filter.is_some() || !covered);
        IndexedGrep {
            index,
            filter,
            merges,
            query: query.clone(),
            learning,
            learned: Vec::new(),
            learned_bytes: 0,
            room,
            grown: 0,
            walked: 0,
            skipped: 0,
        }
    }

    /// This Grep learning nothing (a self-check's run: it must leave the
    /// index as it found it).
    pub fn without_learning(mut self) -> IndexedGrep {
        self.learning = false;
        self
    }

    /// The namespace's key in its registry.
    pub fn key(&self) -> &str {
        &self.index.key
    }

    /// True when the index narrows this Grep: it may skip files, so walking
    /// the path table instead of the tier pays.
    pub fn narrows(&self) -> bool {
        self.filter.is_some()
    }

    /// How many files of the segment the query selects, when the index
    /// narrows this Grep.
    pub fn selected_files(&self) -> Option<u64> {
        self.filter
            .as_ref()
            .and_then(|(_, selected)| selected.count())
    }

    /// The namespace's index this Grep uses.
    pub fn index(&self) -> &NamespaceIndex {
        &self.index
    }

    /// Bytes the index may still grow by for this Grep's principal.
    pub fn room(&self) -> u64 {
        self.room.saturating_sub(self.grown)
    }

    /// Counts `bytes` the index grew by for this Grep besides what it
    /// learns (a path table taken).
    pub fn grew(&mut self, bytes: u64) {
        self.grown += bytes;
    }

    /// Keeps `next`, a path table advanced from `held`, as the index's
    /// table, charging what it adds to this Grep's principal; `None` when
    /// that does not fit the room left.
    pub fn keep_advanced(&mut self, held: &PathTable, next: PathTable) -> Option<Arc<PathTable>> {
        let growth = next.bytes().saturating_sub(held.bytes()) as u64;
        if growth > self.room() {
            return None;
        }
        self.grew(growth);
        let next = Arc::new(next);
        self.index().keep_table(next.clone());
        Some(next)
    }

    /// True when the index may rule files out or learn them in this Grep;
    /// when false, every [`IndexedGrep::check`] answers "search, do not
    /// learn", and a tier whose check costs a system call (the Filesystem
    /// tier's `lstat`) counts its files with [`IndexedGrep::passed`].
    pub fn active(&self) -> bool {
        self.filter.is_some() || self.learning
    }

    /// Counts `files` the walk passed without a [`IndexedGrep::check`]
    /// (this Grep is not [`IndexedGrep::active`]): they still tell how large
    /// the namespace is.
    pub fn passed(&mut self, files: u64) {
        self.walked += files;
    }

    /// Counts `n` files ruled out in one step, as `n` calls of
    /// [`IndexedGrep::check`] answering [`Verdict::Skip`] would.
    pub fn ruled_out(&mut self, n: u64) {
        self.walked += n;
        self.skipped += n;
    }

    /// The rows of `table` within `rows` this Grep must look at, ascending:
    /// every row [`IndexedGrep::check`] may not answer [`Verdict::Skip`]
    /// for (rows the segment does not hold at their version, rows of docs
    /// selected or always scanned, rows the overlay knows). `None` when the
    /// index does not narrow this Grep, or the join of table and segment
    /// does not fit in the room left.
    pub fn candidates(
        &mut self,
        table: &PathTable,
        rows: std::ops::Range<usize>,
    ) -> Option<Vec<Candidate>> {
        let (segment, selected) = self.filter.as_ref()?;
        let held = lock(&self.index.row_docs)
            .clone()
            .filter(|r| r.joins(table, segment));
        let row_docs = match held {
            Some(held) => held,
            None => {
                let joined = Arc::new(RowDocs::join(table, segment.clone()));
                let bytes = joined.bytes() as u64;
                if bytes > self.room() {
                    return None;
                }
                self.grown += bytes;
                *lock(&self.index.row_docs) = Some(joined.clone());
                self.index.measure();
                joined
            }
        };
        let mut out = row_docs.candidates(selected, rows.clone())?;
        let (lo, hi) = match (rows.start < table.len(), rows.end < table.len()) {
            (false, _) => return Some(out),
            (true, end) => (
                table.row(rows.start).key.to_vec(),
                end.then(|| table.row(rows.end).key.to_vec()),
            ),
        };
        let overlay = lock(&self.index.overlay);
        let known = overlay.range(lo..).map(|(k, _)| k);
        let before = out.len();
        for key in known.take_while(|k| hi.as_ref().is_none_or(|hi| *k < hi)) {
            let row = table.position(key);
            if row < table.len() && *table.row(row).key == **key {
                out.push(Candidate {
                    row: row as u32,
                    selected: false,
                    known: Known::Nothing,
                });
            }
        }
        drop(overlay);
        let checks = (out.len() - before) as u64;
        self.index.overlay_checks.fetch_add(checks, Relaxed);
        // A row both selected and in the overlay keeps `selected: false`
        // (sorted first): the overlay may rule it out.
        out.sort_unstable();
        out.dedup_by_key(|c| c.row);
        Some(out)
    }

    /// The walk's counts for `key`, if the namespace keeps them.
    pub fn passes(&self, key: &PassKey) -> Option<Arc<Passes>> {
        let mut held = lock(&self.index.passes);
        let at = held.iter().position(|p| p.key() == key)?;
        let found = held.remove(at);
        held.insert(0, found.clone());
        Some(found)
    }

    /// Keeps `passes` for later Greps when they fit in the room left, in
    /// place of those of other tables (a table is replaced, not changed;
    /// those of the table it was derived from are kept to be carried over)
    /// and of the least recently used.
    pub fn keep_passes(&mut self, passes: Arc<Passes>) {
        let bytes = passes.bytes() as u64;
        if bytes > self.room() {
            return;
        }
        self.grown += bytes;
        let table = passes.key().table;
        let from = self
            .index
            .table()
            .filter(|t| t.id() == table)
            .and_then(|t| t.derivation().map(|d| d.from));
        let mut held = lock(&self.index.passes);
        held.retain(|p| p.key().table == table || Some(p.key().table) == from);
        held.insert(0, passes);
        held.truncate(MAX_PASSES);
        drop(held);
        self.index.measure();
    }

    /// Decides for the file with order key `key` at `version`.
    pub fn check(&mut self, key: &[u8], version: u64) -> Verdict {
        let verdict = self.decide(key, version);
        self.walked += 1;
        self.skipped += u64::from(verdict == Verdict::Skip);
        verdict
    }

    fn decide(&mut self, key: &[u8], version: u64) -> Verdict {
        if self.filter.is_none() && !self.learning {
            return Verdict::Search { learn: false };
        }
        if let Some((v, trigrams)) = lock(&self.index.overlay).get(key)
            && *v == version
        {
            return match (trigrams, &self.filter) {
                (Some(t), Some(_)) if !self.query.matches_file(t) => Verdict::Skip,
                _ => Verdict::Search { learn: false },
            };
        }
        self.follow_merge();
        let segment = match &self.filter {
            Some((segment, _)) => segment.clone(),
            None if self.learning => self.index.segment(),
            None => return Verdict::Search { learn: false },
        };
        match segment.find(key, version) {
            Some(id) => match &self.filter {
                Some((_, selected)) if !segment.unindexed(id) && !selected.has(id) => Verdict::Skip,
                _ => Verdict::Search { learn: false },
            },
            None => Verdict::Search {
                learn: self.learning
                    && self.learned_bytes < MAX_LEARN_BYTES
                    && self.grown < self.room,
            },
        }
    }

    /// Takes the index's segment, and this Grep's selection in it, when a
    /// merge swapped it in since the Grep took its own. The merge moved the
    /// overlay's files into the new segment, where the Grep's older one
    /// cannot find them: they would be read and learned again, and none of
    /// them skipped (a file found in neither is searched, so answers never
    /// depended on this). Selecting again costs what the Grep's start did,
    /// once per merge the Grep overlaps.
    fn follow_merge(&mut self) {
        let merges = self.index.merges.load(Relaxed);
        if merges == self.merges {
            return;
        }
        self.merges = merges;
        if let Some((segment, selected)) = &mut self.filter {
            let now = self.index.segment();
            *selected = now.select(&self.query);
            *segment = now;
        }
    }

    /// Counts a file the index selected before the walk reached it
    /// ([`Candidate::selected`]): searched, as [`IndexedGrep::check`] would
    /// have decided.
    pub fn count_selected(&mut self) {
        self.walked += 1;
    }

    /// Records the content of a file [`IndexedGrep::check`] asked to learn.
    pub fn learn(&mut self, key: Vec<u8>, version: u64, data: &[u8]) {
        self.learned_bytes += data.len() as u64;
        let trigrams: Option<Arc<Pieces>> = trigram::extract(data).ok().map(Arc::new);
        self.grown += learned_bytes(&key, &trigrams);
        self.learned.push((key, (version, trigrams)));
    }

    /// Ends the Grep: stores what it learned and how large the namespace
    /// looked, and merges the overlay when it has grown, or when this
    /// Grep's learning made the index cover the namespace (so a persisted
    /// copy holds all of it: docs/search-index.md § Persistence).
    pub fn finish(self) {
        let walked = self
            .index
            .walked
            .fetch_max(self.walked, Relaxed)
            .max(self.walked);
        let before = self.index.files() as u64;
        let (narrowed, learned) = (self.filter.is_some(), self.learned.len());
        self.index.add_learned(self.learned);
        // Logged once what it learned is in the index: whoever reads the
        // line (a test, an operator) and then changes a file knows this
        // Grep's older entry cannot land after that change's own.
        if narrowed {
            NARROWED.fetch_add(1, Relaxed);
            tracing::info!(
                walked = self.walked,
                skipped = self.skipped,
                learned,
                overlay = self.index.overlay_files(),
                "search index narrowed a grep"
            );
        }
        let covered_now = before < walked && self.index.files() as u64 >= walked;
        self.index.maybe_merge(covered_now);
    }
}
