//! The trigram index that narrows a Grep's candidate files
//! (docs/search-index.md).
//!
//! One [`NamespaceIndex`] per tier namespace (a State session, a Store
//! namespace), kept by the tier in a [`Registry`]. It holds an immutable
//! [`segment::Segment`] and a small overlay of files learned since; both
//! record, per path, the *version* of the content they indexed. A walked
//! file is skipped without being read only when the index holds that very
//! version and its trigrams rule the pattern out; any other file (changed
//! since, unknown, or one the index cannot hold) is searched as before. Since
//! a tier draws a new version for every change of a path, a changed path
//! never matches a stale entry: it is dirty the moment the change is
//! visible, in the same snapshot the walk reads.
//!
//! Layout:
//! - `trigram`: what a file contributes, or why it is always scanned;
//! - `plan`: pattern -> trigram query;
//! - `segment`: the immutable doc table and posting lists;
//! - `table`: the namespace's path table a narrowed Grep walks instead of
//!   the tier (docs/search-index.md § The path table);
//! - `passes`: what lets a narrowed Grep jump from candidate to candidate
//!   over the table, counting the rows between in one step;
//! - `persist`: an index as bytes, kept by a tier across restarts
//!   (docs/search-index.md § Persistence);
//! - `codec`: the integers and byte strings those bytes are made of;
//! - `written`: what a change teaches the index as it commits
//!   (docs/search-index.md § Learning in the write path);
//! - `grep`: one Grep's use of the index.

pub mod check;
pub mod codec;
pub mod file_keeper;
mod grep;
pub mod passes;
pub mod persist;
pub mod plan;
pub mod postings;
pub mod segment;
pub mod table;
pub mod trigram;
pub mod written;

pub use grep::{IndexedGrep, Verdict, narrowed_greps};
use passes::{Candidate, Known, PassKey, Passes, RowDocs};
use persist::{Keeper, Kept};
use plan::Query;
use segment::{Doc, Segment, Selected};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use table::PathTable;
use trigram::Pieces;

/// Default of `[search] index_min_files`: a namespace whose Greps walked
/// fewer files is searched without the index (docs/performance.md §
/// Indexed search has the measurement behind it).
pub const DEFAULT_MIN_FILES: u64 = 2_000;
/// Most namespaces indexed per tier; the least recently used goes first.
pub const MAX_INDEXES: usize = 64;
/// A selection of more than this share of the indexed files is not worth
/// the lookups: the Grep scans as if there were no index.
const DENSE_SHARE: f64 = 0.75;
/// The overlay is merged into a new segment once it holds this many files
/// and an eighth of the segment.
const MERGE_MIN_FILES: usize = 256;
/// Most bytes one Grep learns: trigram extraction runs at about 54 MB/s a
/// core (docs/performance.md § Indexed search), so learning adds at most
/// ~0.3 s to a Grep; a large namespace is learned over several Greps.
pub const MAX_LEARN_BYTES: u64 = 16 << 20;

/// Default of `[search] index_bytes_per_principal`: what the indexes one
/// principal's Greps made may hold together (docs/search-index.md §
/// Memory); the index of the Linux sources (947 MB) holds about 140 MB.
pub const DEFAULT_BYTES_PER_PRINCIPAL: u64 = 512 << 20;
/// Default of `[search] index_bytes`: what the indexes of every tier of
/// the server may hold together (docs/search-index.md § Memory), beside
/// the 1 GiB `[limits] memory_bytes` of calls in flight on the 4 GiB
/// machine the defaults fit (docs/security.md § Every limit).
pub const DEFAULT_BYTES: u64 = 1 << 30;
/// Bytes the search indexes of every tier of this server hold together,
/// each adding its measured size ([`Measured`]): what `[search]
/// index_bytes` bounds. One per process, as the server is (like the search
/// room, `crate::search::room`).
static HELD: AtomicU64 = AtomicU64::new(0);

/// Bytes the search indexes of every tier hold now ([`HELD`]), for the
/// server's metrics.
pub fn held_bytes() -> u64 {
    HELD.load(Relaxed)
}
/// What one learned file costs beyond its key and trigrams (its overlay
/// entry).
const LEARNED_OVERHEAD_BYTES: u64 = 32;
/// Most sets of [`Passes`] a namespace keeps (least recently used dropped):
/// one per search root, rule set, glob and size limit in use.
const MAX_PASSES: usize = 8;
/// Default of `[search] index_self_check`, in parts per million: one
/// narrowed Grep in a hundred is checked against a scan.
pub const DEFAULT_SELF_CHECK_PER_MILLION: u32 = 10_000;

/// Whether and from what size a tier indexes its namespaces
/// (`[search]` in the configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexSettings {
    /// `[search] index`.
    pub enabled: bool,
    /// `[search] index_min_files`.
    pub min_files: u64,
    /// `[search] index_bytes_per_principal`.
    pub bytes_per_principal: u64,
    /// `[search] index_bytes`: the indexes of every tier together.
    pub bytes: u64,
    /// `[search] index_self_check`, in parts per million (0 to 1,000,000).
    pub self_check_per_million: u32,
}

impl Default for IndexSettings {
    fn default() -> IndexSettings {
        IndexSettings {
            enabled: true,
            min_files: DEFAULT_MIN_FILES,
            bytes_per_principal: DEFAULT_BYTES_PER_PRINCIPAL,
            bytes: DEFAULT_BYTES,
            self_check_per_million: DEFAULT_SELF_CHECK_PER_MILLION,
        }
    }
}

/// An index's size when it last changed, counted in the server's total
/// ([`HELD`]) from its first measure until it is dropped.
#[derive(Default)]
struct Measured(AtomicU64);

impl Measured {
    /// Records `bytes` as the size now, moving the server's total by the
    /// change (each swap adds what it replaced's difference, so concurrent
    /// measures still sum to the last size).
    fn set(&self, bytes: u64) {
        let old = self.0.swap(bytes, Relaxed);
        HELD.fetch_add(bytes, Relaxed);
        HELD.fetch_sub(old, Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

impl Drop for Measured {
    fn drop(&mut self) {
        HELD.fetch_sub(self.get(), Relaxed);
    }
}

/// Lowers the calling thread's OS priority to the lowest (nice 19), for
/// background work (merges, self-checks) that must not slow requests.
/// Best effort: a failure only leaves the priority as it was.
pub fn lower_priority() {
    // SAFETY: gettid and setpriority take no pointers; on Linux,
    // PRIO_PROCESS with a thread id changes only that thread.
    let failed = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19) != 0
    };
    if failed {
        tracing::debug!("could not lower a background thread's priority");
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update below is a single insert or swap: a panic cannot leave
    // half of one behind.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The indexes of one tier, by namespace.
pub struct Registry {
    settings: IndexSettings,
    indexes: Mutex<HashMap<String, (Arc<NamespaceIndex>, u64)>>,
    uses: AtomicU64,
    /// Where the tier keeps its indexes across restarts (Store), if it does.
    keeper: Option<Arc<dyn Keeper>>,
    /// Held while a persisted index is loaded and put in place: Greps
    /// racing to one unloaded namespace read and decode it once, and loads
    /// (each up to a principal's share) never add up in memory.
    loading: Mutex<()>,
    /// A self-check is running (at most one per tier).
    checking: AtomicBool,
    /// Self-checks that found the index and the scan disagreeing.
    mismatches: AtomicU64,
}

impl Registry {
    /// An empty registry with these settings, keeping its indexes in
    /// `keeper` when given.
    pub fn new(settings: IndexSettings, keeper: Option<Arc<dyn Keeper>>) -> Registry {
        Registry {
            settings,
            indexes: Mutex::new(HashMap::new()),
            uses: AtomicU64::new(0),
            keeper,
            loading: Mutex::new(()),
            checking: AtomicBool::new(false),
            mismatches: AtomicU64::new(0),
        }
    }

    /// The persisted index of `key`, if one is kept, fits in `room` and
    /// decodes; one that does not decode is dropped (docs/search-index.md
    /// § Persistence).
    fn load(&self, key: &str, room: u64) -> Option<persist::Saved> {
        let keeper = self.keeper.as_ref()?;
        let started = std::time::Instant::now();
        let bytes = match keeper.load(key, room) {
            Ok(Kept::Bytes(bytes)) => bytes,
            Ok(Kept::Nothing) => return None,
            Ok(Kept::Over(bytes)) => {
                tracing::info!(
                    namespace = key,
                    bytes,
                    room,
                    "persisted search index not loaded: over the principal's share or the \
                     server's index_bytes"
                );
                return None;
            }
            Err(err) => {
                tracing::warn!(namespace = key, %err, "could not read the persisted search index");
                return None;
            }
        };
        let read = started.elapsed();
        match persist::decode(&bytes) {
            Ok(saved) => {
                tracing::info!(
                    namespace = key,
                    bytes = bytes.len(),
                    read_ms = read.as_millis() as u64,
                    decode_ms = (started.elapsed() - read).as_millis() as u64,
                    "persisted search index read"
                );
                Some(saved)
            }
            Err(why) => {
                tracing::warn!(
                    namespace = key,
                    why,
                    "persisted search index dropped: it does not decode"
                );
                if let Err(err) = keeper.forget(key) {
                    tracing::warn!(namespace = key, %err, "could not drop the persisted search index");
                }
                None
            }
        }
    }

    /// The index of the namespace `key` (created when missing, made by the
    /// principal `owner`), with the bytes a Grep of `owner` may still add to
    /// it; `None` when indexing is off.
    ///
    /// An index is charged to the principal whose Grep made it: together,
    /// the indexes a principal made hold at most `bytes_per_principal`, and
    /// the indexes of every tier of the server at most `bytes`, so Greps
    /// stop growing them there (they still search, and use what is
    /// indexed), and no index already built is touched.
    pub fn get(&self, key: &str, owner: &str) -> Option<(Arc<NamespaceIndex>, u64)> {
        if !self.settings.enabled {
            return None;
        }
        let use_no = self.uses.fetch_add(1, Relaxed);
        let known = lock(&self.indexes).contains_key(key);
        // Read outside the registry's lock: Greps of loaded namespaces go
        // on. The load lock is kept until the index is in place, so a Grep
        // that waited on it finds the index known and loads nothing.
        let mut loading = None;
        let saved = if known {
            None
        } else {
            let guard = lock(&self.loading);
            let loaded_meanwhile = lock(&self.indexes).contains_key(key);
            let saved = match loaded_meanwhile {
                true => None,
                false => self.load(key, self.room_of(owner)),
            };
            loading = Some(guard);
            saved
        };
        let mut indexes = lock(&self.indexes);
        if !indexes.contains_key(key) && indexes.len() >= MAX_INDEXES {
            let oldest = indexes
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                indexes.remove(&oldest);
            }
        }
        let entry = indexes.entry(key.to_owned()).or_insert_with(|| {
            let index = NamespaceIndex {
                owner: owner.to_owned(),
                key: key.to_owned(),
                keeper: self.keeper.clone(),
                ..NamespaceIndex::default()
            };
            if let Some(saved) = saved {
                index.walked.store(saved.walked, Relaxed);
                *index.segment.write().unwrap_or_else(|p| p.into_inner()) = saved.segment;
                *lock(&index.table) = saved.table;
                index.measure();
                tracing::info!(
                    namespace = key,
                    files = index.files(),
                    at = index.table().map_or(0, |t| t.at().seq),
                    "search index loaded"
                );
            }
            (Arc::new(index), use_no)
        });
        entry.1 = use_no;
        let index = entry.0.clone();
        if index.off.load(Relaxed) {
            return None;
        }
        drop(indexes);
        drop(loading);
        Some((index, self.room_of(owner)))
    }

    /// The index of `namespace` when Greps use it: indexing is on, and the
    /// namespace has an index that is on and large enough.
    fn used_index(&self, namespace: &str) -> Option<Arc<NamespaceIndex>> {
        if !self.settings.enabled {
            return None;
        }
        let index = lock(&self.indexes).get(namespace).map(|(i, _)| i.clone())?;
        let used =
            !index.off.load(Relaxed) && index.walked.load(Relaxed) >= self.settings.min_files;
        used.then_some(index)
    }

    /// Whether a walk of `namespace` that is not a Grep (a Filesystem
    /// mount's Glob) should use the namespace's path table: indexing is on,
    /// no self-check switched the namespace's index off, and its Greps, or
    /// the caller's own walks (the most `entries` one visited), reached
    /// `index_min_files`. A namespace only ever globbed is large too, but
    /// its Globs do not count as the files a Grep walked (which tells when
    /// the index covers the namespace).
    pub fn wants_table(&self, namespace: &str, entries: u64) -> bool {
        if !self.settings.enabled {
            return false;
        }
        let walked = match lock(&self.indexes).get(namespace) {
            Some((index, _)) if index.off.load(Relaxed) => return false,
            Some((index, _)) => index.walked.load(Relaxed),
            None => 0,
        };
        walked.max(entries) >= self.settings.min_files
    }

    /// What the indexes made by `owner` may still grow by: the room left
    /// in its share, and in the server's.
    fn room_of(&self, owner: &str) -> u64 {
        let held: u64 = lock(&self.indexes)
            .values()
            .filter(|(i, _)| i.owner == owner)
            .map(|(i, _)| i.size.get())
            .sum();
        let share = self.settings.bytes_per_principal.saturating_sub(held);
        share.min(self.settings.bytes.saturating_sub(HELD.load(Relaxed)))
    }

    /// True when a Grep that `index` narrowed is picked for a self-check
    /// (sampled at `index_self_check`) and no other check runs: the caller
    /// then runs it and calls [`Registry::checked`].
    pub fn start_check(&self) -> bool {
        let per_million = self.settings.self_check_per_million;
        per_million > 0
            && rand::random_range(0..1_000_000) < per_million
            && !self.checking.swap(true, Relaxed)
    }

    /// Ends the self-check [`Registry::start_check`] began; with
    /// `mismatch`, the index of `key` and the scan disagreed: logged,
    /// counted, and that index switched off (its persisted copy dropped)
    /// until the server restarts.
    pub fn checked(&self, key: &str, mismatch: Option<String>) {
        if let Some(what) = mismatch {
            if let Some((index, _)) = lock(&self.indexes).get(key) {
                index.off.store(true, Relaxed);
            }
            if let Some(keeper) = &self.keeper
                && let Err(err) = keeper.forget(key)
            {
                tracing::warn!(namespace = key, %err, "could not drop the persisted search index");
            }
            let mismatches = self.mismatches.fetch_add(1, Relaxed) + 1;
            tracing::warn!(
                namespace = key,
                mismatches,
                what,
                "search index self-check failed: the index is off for this namespace"
            );
        }
        self.checking.store(false, Relaxed);
    }

    /// The settings the registry runs with.
    pub fn settings(&self) -> IndexSettings {
        self.settings
    }
}

/// A file learned since the segment was built: its version and trigrams
/// (`None`: always scanned).
type Learned = (u64, Option<Arc<Pieces>>);

/// What the overlay holds for a file learned under `key`.
fn learned_bytes(key: &[u8], trigrams: &Option<Arc<Pieces>>) -> u64 {
    key.len() as u64 + LEARNED_OVERHEAD_BYTES + trigrams.as_ref().map_or(0, |t| t.bytes())
}

/// The index of one namespace; see the module doc.
#[derive(Default)]
pub struct NamespaceIndex {
    segment: RwLock<Arc<Segment>>,
    overlay: Mutex<BTreeMap<Vec<u8>, Learned>>,
    /// Most files one Grep of this namespace walked: decides whether the
    /// namespace is large enough to index.
    walked: AtomicU64,
    merging: AtomicBool,
    /// Segments merges have swapped in: a Grep that took an older one
    /// follows ([`IndexedGrep::check`]), as the merge moved the overlay's
    /// files out of its sight.
    merges: AtomicU64,
    /// A merge asked for with `now` while one ran: the running one merges
    /// again when done, so the request is not lost.
    merge_again: AtomicBool,
    /// Overlay files narrowed Greps have had to check one by one since the
    /// last merge began (see [`NamespaceIndex::maybe_merge`]).
    overlay_checks: AtomicU64,
    /// The path table narrowed Greps walk, at the newest log position one
    /// of them brought it to.
    table: Mutex<Option<Arc<PathTable>>>,
    /// The principal it is charged to (whose Grep made it).
    owner: String,
    /// [`NamespaceIndex::bytes`] when it last changed.
    size: Measured,
    /// Its namespace's key in the registry (and its keeper).
    key: String,
    /// Where each merge saves it, if the tier keeps indexes.
    keeper: Option<Arc<dyn Keeper>>,
    /// Switched off by a failed self-check: Greps scan.
    off: AtomicBool,
    /// The table's rows joined with the segment, for the pair last used.
    row_docs: Mutex<Option<Arc<RowDocs>>>,
    /// The walk's counts over the table, most recently used first.
    passes: Mutex<Vec<Arc<Passes>>>,
}

impl NamespaceIndex {
    fn segment(&self) -> Arc<Segment> {
        self.segment
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Files held: segment plus overlay (stale versions included).
    pub fn files(&self) -> usize {
        self.segment().len() + lock(&self.overlay).len()
    }

    /// About how many files a Grep of the whole namespace would still
    /// learn: how many more the most one Grep walked than it holds (0 when
    /// it covers the namespace; files changed since they were learned are
    /// not counted).
    pub fn unlearned_files(&self) -> u64 {
        self.walked
            .load(Relaxed)
            .saturating_sub(self.files() as u64)
    }

    /// Files learned since the segment was built: checked one by one
    /// until the next merge.
    pub fn overlay_files(&self) -> usize {
        lock(&self.overlay).len()
    }

    /// Approximate bytes held.
    pub fn bytes(&self) -> usize {
        let overlay: usize = lock(&self.overlay)
            .iter()
            .map(|(k, (_, t))| learned_bytes(k, t) as usize)
            .sum();
        let table = self.table().map_or(0, |t| t.bytes());
        let row_docs = lock(&self.row_docs).as_ref().map_or(0, |r| r.bytes());
        let passes: usize = lock(&self.passes).iter().map(|p| p.bytes()).sum();
        self.segment().bytes() + overlay + table + row_docs + passes
    }

    /// The path table, if one was taken.
    pub fn table(&self) -> Option<Arc<PathTable>> {
        lock(&self.table).clone()
    }

    /// Keeps `table` unless the one held is of the same log and newer.
    pub fn keep_table(&self, table: Arc<PathTable>) {
        let mut held = lock(&self.table);
        let newer = held
            .as_ref()
            .is_some_and(|h| h.at().epoch == table.at().epoch && h.at().seq > table.at().seq);
        if !newer {
            // The counts over the table replaced are of use only to carry
            // them over to a table derived from it.
            let from = table.derivation().map(|d| d.from);
            lock(&self.passes)
                .retain(|p| p.key().table == table.id() || Some(p.key().table) == from);
            *held = Some(table);
        }
        drop(held);
        self.measure();
    }

    /// Puts files learned into the overlay, replacing what it knew of them.
    fn add_learned(&self, learned: Vec<(Vec<u8>, Learned)>) {
        if learned.is_empty() {
            return;
        }
        let mut overlay = lock(&self.overlay);
        for (key, learned) in learned {
            overlay.insert(key, learned);
        }
        drop(overlay);
        self.measure();
    }

    /// Records what it holds now, for its principal's share and the
    /// server's; logged with what every index holds (`server_bytes`).
    fn measure(&self) {
        let bytes = self.bytes() as u64;
        self.size.set(bytes);
        let server_bytes = HELD.load(Relaxed);
        tracing::debug!(owner = %self.owner, bytes, server_bytes, "search index size");
    }

    /// Merges the overlay into a new segment on a background thread of
    /// low priority (one merge at a time) when it has grown, with `now`
    /// when it holds anything, or once narrowed Greps have checked as many
    /// overlay files one by one as the segment holds files. That last rule
    /// bounds what an overlay that stopped growing costs: a merge costs
    /// about one step per file of the segment, and checking an overlay file
    /// about one, so the checks never cost more than the merge that ends
    /// them. (Without it, an overlay of up to an eighth of the segment
    /// stayed until more files were learned, and every narrowed Grep on
    /// the kernel checked its 9,000 files: 60 ms instead of 13.)
    fn maybe_merge(self: &Arc<Self>, now: bool) {
        let overlay = lock(&self.overlay).len();
        let segment = self.segment().len();
        let grown = overlay >= MERGE_MIN_FILES && overlay >= segment / 8;
        let checked = self.overlay_checks.load(Relaxed) >= segment.max(MERGE_MIN_FILES) as u64;
        if overlay == 0 || !(grown || now || checked) {
            return;
        }
        if self.merging.swap(true, Relaxed) {
            if now {
                self.merge_again.store(true, Relaxed);
            }
            return;
        }
        let index = self.clone();
        let spawned = std::thread::Builder::new()
            .name("search-index-merge".into())
            .spawn(move || {
                lower_priority();
                loop {
                    index.merge();
                    index.merging.store(false, Relaxed);
                    // A request made during the merge, or between its end
                    // and the store, is taken here, unless another merge
                    // has begun meanwhile.
                    if !index.merge_again.swap(false, Relaxed) || index.merging.swap(true, Relaxed)
                    {
                        break;
                    }
                }
            });
        if let Err(err) = spawned {
            tracing::warn!(%err, "could not start a search index merge");
            self.merging.store(false, Relaxed);
        }
    }

    /// Builds segment + overlay into one segment and swaps it in; files
    /// learned meanwhile stay in the overlay. The old segment's files that
    /// the path table held now says are gone, or holds at a newer version,
    /// are left out: nothing would ever match them again, and a namespace
    /// whose files are rewritten and deleted would otherwise grow its index
    /// without end. Leaving a file out costs at worst learning it again
    /// (a file made after the table was taken); the index only narrows.
    pub fn merge(&self) {
        let started = std::time::Instant::now();
        let old = self.segment();
        self.overlay_checks.store(0, Relaxed);
        let taken: BTreeMap<Vec<u8>, Learned> = lock(&self.overlay).clone();
        let table = self.table();
        let mut dropped = 0;
        let current = |key: &[u8], version: u64| {
            let outdated = table.as_ref().is_some_and(|t| t.outdates(key, version));
            dropped += u64::from(outdated);
            !outdated
        };
        let learned = taken
            .iter()
            .map(|(key, (version, trigrams))| Doc {
                key: key.clone(),
                version: *version,
                trigrams: trigrams.as_ref().map(|t| Pieces::clone(t)),
            })
            .collect();
        let merged = Arc::new(old.merge(current, learned));
        let mut overlay = lock(&self.overlay);
        *self.segment.write().unwrap_or_else(|p| p.into_inner()) = merged.clone();
        // Under the overlay's lock, before its files leave it: a Grep that
        // misses one there sees this count moved.
        self.merges.fetch_add(1, Relaxed);
        overlay.retain(|key, (version, _)| taken.get(key).is_none_or(|(v, _)| v != version));
        drop(overlay);
        self.measure();
        tracing::info!(
            files = merged.len(),
            dropped,
            bytes = merged.bytes(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "search index merged"
        );
        self.save(merged);
    }

    /// Hands `segment` and the path table held now to the tier's keeper
    /// (docs/search-index.md § Persistence).
    fn save(&self, segment: Arc<Segment>) {
        let Some(keeper) = &self.keeper else {
            return;
        };
        if self.off.load(Relaxed) {
            return;
        }
        let started = std::time::Instant::now();
        let saved = persist::Saved {
            walked: self.walked.load(Relaxed),
            segment,
            table: self.table().filter(|_| keeper.keeps_table()),
        };
        let bytes = persist::encode(&saved);
        match keeper.save(&self.key, &bytes) {
            Ok(()) => tracing::info!(
                namespace = %self.key,
                bytes = bytes.len(),
                at = saved.table.map_or(0, |t| t.at().seq),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "search index persisted"
            ),
            Err(err) => {
                tracing::warn!(namespace = %self.key, %err, "could not persist the search index")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn settings(min_files: u64) -> IndexSettings {
        IndexSettings {
            enabled: true,
            min_files,
            bytes_per_principal: u64::MAX,
            bytes: u64::MAX,
            self_check_per_million: 0,
        }
    }

    /// Runs one Grep over `files` (key, version, text) and returns the keys
    /// it would search.
    fn grep(
        index: &Arc<NamespaceIndex>,
        files: &[(&str, u64, &str)],
        pattern: &str,
    ) -> Vec<String> {
        let query = plan::plan(pattern, false, false);
        let mut g = IndexedGrep::start((index.clone(), u64::MAX), settings(2), &query);
        let mut searched = Vec::new();
        for (key, version, text) in files {
            match g.check(key.as_bytes(), *version) {
                Verdict::Skip => {}
                Verdict::Search { learn } => {
                    if learn {
                        g.learn(key.as_bytes().to_vec(), *version, text.as_bytes());
                    }
                    searched.push((*key).to_owned());
                }
            }
        }
        g.finish();
        searched
    }

    #[test]
    fn learns_then_narrows_and_a_new_version_is_searched_again() {
        let index = Arc::new(NamespaceIndex::default());
        let files = [
            ("a", 1, "hello world"),
            ("b", 2, "goodbye"),
            ("c", 3, "bin\0ary"),
        ];
        // First Grep: namespace size unknown, nothing learned.
        assert_eq!(grep(&index, &files, "hello"), ["a", "b", "c"]);
        // Second: learns everything, still searches everything.
        assert_eq!(grep(&index, &files, "hello"), ["a", "b", "c"]);
        // Third: narrowed; the binary file is always searched.
        assert_eq!(grep(&index, &files, "hello"), ["a", "c"]);
        index.merge();
        assert_eq!(index.segment().len(), 3);
        assert_eq!(grep(&index, &files, "goodbye"), ["b", "c"]);
        // b changed (new version): searched although its old text had no match.
        let changed = [
            ("a", 1, "hello world"),
            ("b", 9, "hello"),
            ("c", 3, "bin\0ary"),
        ];
        assert_eq!(grep(&index, &changed, "hello"), ["a", "b", "c"]);
        assert_eq!(grep(&index, &changed, "goodbye"), ["c"]);
        // A pattern with no trigram is never narrowed.
        assert_eq!(grep(&index, &changed, "h.*"), ["a", "b", "c"]);
    }

    #[test]
    fn a_grep_that_overlaps_a_merge_follows_it() {
        let index = Arc::new(NamespaceIndex::default());
        let files = [
            ("a", 1, "hello world"),
            ("b", 2, "goodbye"),
            ("c", 3, "more"),
        ];
        grep(&index, &files, "hello");
        grep(&index, &files, "hello");
        assert_eq!(index.overlay_files(), 3);
        // The Grep takes the empty segment; the merge then moves the
        // overlay's three files into a new one.
        let query = plan::plan("hello", false, false);
        let mut g = IndexedGrep::start((index.clone(), u64::MAX), settings(2), &query);
        index.merge();
        assert_eq!(index.overlay_files(), 0);
        let verdicts: Vec<Verdict> = files
            .iter()
            .map(|(k, v, _)| g.check(k.as_bytes(), *v))
            .collect();
        // Without following it, all three were unknown: searched, learned.
        assert_eq!(
            verdicts,
            [
                Verdict::Search { learn: false },
                Verdict::Skip,
                Verdict::Skip
            ]
        );
    }

    #[test]
    fn a_merge_drops_what_the_path_table_says_is_gone_or_rewritten() {
        use crate::change::LogPosition;
        use crate::entry::{Entry, EntryKind};
        use crate::path::VfsPath;
        let row = |path: &str, version| {
            table::Row::of(Entry {
                path: VfsPath::parse(path).unwrap(),
                kind: EntryKind::File,
                size: 1,
                modified: std::time::SystemTime::UNIX_EPOCH,
                created: std::time::SystemTime::UNIX_EPOCH,
                version,
                executable: false,
            })
        };
        let index = Arc::new(NamespaceIndex::default());
        let key = |path: &str| VfsPath::parse(path).unwrap().order_key();
        // Learned: /d/a v1, /d/b v2, /d/c v3, /d/n v8, and /e/x v4 outside
        // the table's range.
        for (path, version) in [
            ("/d/a", 1),
            ("/d/b", 2),
            ("/d/c", 3),
            ("/d/n", 8),
            ("/e/x", 4),
        ] {
            let trigrams = Arc::new(trigram::extract(b"text").unwrap());
            lock(&index.overlay).insert(key(path), (version, Some(trigrams)));
        }
        index.merge();
        assert_eq!(index.segment().len(), 5);
        // Now /d/a is unchanged, /d/b was rewritten (v9), /d/c deleted, and
        // /d/n is at a version newer than the table's (learned later).
        let d = VfsPath::parse("/d").unwrap();
        let at = LogPosition { epoch: 1, seq: 5 };
        let rows = vec![row("/d/a", 1), row("/d/b", 9), row("/d/n", 7)];
        index.keep_table(Arc::new(PathTable::new(at, d.subtree_range(), rows)));
        index.merge();
        let seg = index.segment();
        let kept: Vec<Vec<u8>> = (0..seg.len()).map(|i| seg.key(i).to_vec()).collect();
        assert_eq!(kept, [key("/d/a"), key("/d/n"), key("/e/x")]);
    }

    #[test]
    fn one_grep_learns_at_most_its_byte_budget() {
        let index = Arc::new(NamespaceIndex::default());
        // The largest file the index holds.
        let big = "a".repeat(trigram::MAX_INDEXED_FILE_BYTES);
        let files = [
            ("a", 1, big.as_str()),
            ("b", 2, big.as_str()),
            ("c", 3, big.as_str()),
        ];
        grep(&index, &files, "needle");
        grep(&index, &files, "needle");
        // 8 MiB, then 16 MiB: the budget is spent before the third file.
        assert_eq!(index.files(), 2);
        grep(&index, &files, "needle");
        // That Grep made the index cover the namespace: a merge follows.
        while index.merging.load(Relaxed) {
            std::thread::yield_now();
        }
        assert_eq!(index.files(), 3);
        assert!(grep(&index, &files, "needle").is_empty());
    }

    #[test]
    fn the_registry_is_bounded_and_can_be_off() {
        let off = Registry::new(
            IndexSettings {
                enabled: false,
                ..settings(0)
            },
            None,
        );
        assert!(off.get("x", "p").is_none());
        let on = Registry::new(settings(0), None);
        let first = on.get("ns0", "p").unwrap().0;
        for i in 1..=MAX_INDEXES {
            on.get(&format!("ns{i}"), "p");
        }
        assert_eq!(lock(&on.indexes).len(), MAX_INDEXES);
        assert!(!Arc::ptr_eq(&first, &on.get("ns0", "p").unwrap().0));
    }

    #[test]
    fn a_principal_grows_its_indexes_up_to_its_share_only() {
        let registry = Registry::new(
            IndexSettings {
                bytes_per_principal: 1_000,
                ..settings(0)
            },
            None,
        );
        let files: Vec<(String, u64, String)> = (0..50)
            .map(|i| {
                (
                    format!("f{i:02}"),
                    i,
                    format!("text number {i} of many words"),
                )
            })
            .collect();
        let files: Vec<(&str, u64, &str)> = files
            .iter()
            .map(|(k, v, t)| (k.as_str(), *v, t.as_str()))
            .collect();
        for _ in 0..3 {
            let (index, room) = registry.get("a", "p").unwrap();
            let query = plan::plan("needle", false, false);
            let mut g = IndexedGrep::start((index, room), settings(0), &query);
            for (key, version, text) in &files {
                if let Verdict::Search { learn: true } = g.check(key.as_bytes(), *version) {
                    g.learn(key.as_bytes().to_vec(), *version, text.as_bytes());
                }
            }
            g.finish();
        }
        let (index, room) = registry.get("a", "p").unwrap();
        let held = index.bytes() as u64;
        // One file's entry at most past the share; learning stopped there.
        assert!((1_000..1_300).contains(&held), "{held}");
        assert_eq!(room, 0);
        assert!(lock(&index.overlay).len() < files.len());
        // Another principal's index has its own share.
        assert_eq!(registry.get("b", "q").unwrap().1, 1_000);
    }
}
