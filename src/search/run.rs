//! One execution of a search: budgets, counters, and the output stream.
//!
//! A `SearchRun` is shared (`&SearchRun`, `Sync`) by every thread of a search.
//! Counters are atomics; the output is a bounded channel, so a slow client
//! blocks the producer instead of growing server memory.
//!
//! Batching: results are sent many per message, because each gRPC message costs
//! far more than one match (docs/performance.md § Streaming through tonic: ~200 ns per match end to end). A
//! batch is flushed at [`MAX_BATCH_ITEMS`] or [`MAX_BATCH_BYTES`] (clients reject
//! messages over 4 MiB by default), after [`MAX_BATCH_AGE`], or when the
//! channel is empty (the consumer is waiting): at once for the first batch, so
//! the first results arrive in milliseconds rather than after a timer, and
//! later ones after a minimum age that starts at [`MIN_BATCH_AGE`] and doubles
//! with every batch sent, up to [`MAX_BATCH_AGE`]. Without that minimum a fast
//! consumer drains every message at once and each result travels alone: a Glob
//! of 10,000 paths took 3.4× as long as `fd`, its time going to thread
//! wake-ups. With a fixed 1 ms minimum the same Glob still sent ~650 small
//! batches, each waking the runtime, h2 and the client; doubling keeps the
//! first results as quick and sends ~15. A batch whose producer found nothing
//! more to add is flushed by [`SearchRun::should_stop`], which every walker
//! calls per entry.
//!
//! Message size: a batch holds at most [`MAX_BATCH_BYTES`] of results (plus
//! one result when a single one is larger), so a file with many matches goes
//! out as several `Hit::File` pieces of the same path, in line order, across
//! messages.
//!
//! A send never waits on the client without a bound: a batch waits for room
//! at most until the time budget ends (the search then stops with
//! `time_limit`, that batch dropped) or the idle timeout passes (the client
//! stopped reading: the search stops as `cancelled` and sends nothing more).
//! The last batch and the summary wait at most the idle timeout. So a client
//! that stops reading holds a search thread for a bounded time, never forever.

use super::index::passes::Counts;
use super::{AbortReason, FileHits, Hit, SearchKind, SearchSpec, Summary};
use crate::entry::{Entry, EntryKind};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use std::pin::pin;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Messages in flight between a search and its gRPC stream; with h2's own
/// buffers on top this bounds a search's output memory to a few batches.
pub const EVENT_CHANNEL_CAPACITY: usize = 4;
/// Most results in one batch.
pub const MAX_BATCH_ITEMS: usize = 2048;
/// Most payload bytes in one batch, far below gRPC's default 4 MiB cap.
pub const MAX_BATCH_BYTES: usize = 256 << 10;
/// Longest a result waits in a partial batch while the consumer is busy.
pub const MAX_BATCH_AGE: Duration = Duration::from_millis(20);
/// How long the second batch's results wait for company before they go to a
/// waiting consumer; the first batch does not wait and each later one waits
/// twice as long as the one before, up to [`MAX_BATCH_AGE`].
pub const MIN_BATCH_AGE: Duration = Duration::from_millis(1);
/// `SearchRun::pending_since` when no batch is pending.
const NOTHING_PENDING: u64 = u64::MAX;

/// Why an event could not be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unsent {
    /// The consumer went away.
    Closed,
    /// No room before the deadline.
    TimedOut,
}

/// What a search sends to its consumer.
#[derive(Debug)]
pub enum SearchEvent {
    /// Results, in path order.
    Batch(Vec<Hit>),
    /// The last event of a search that ran.
    Summary(Summary),
    /// The last event of a search that could not run (or found nothing before
    /// its budget ran out).
    Failed(Error),
}

#[derive(Default)]
struct Counters {
    visited: AtomicU64,
    matched: AtomicU64,
    matched_files: AtomicU64,
    files_searched: AtomicU64,
    skipped_ignored: AtomicU64,
    skipped_hidden: AtomicU64,
    skipped_binary: AtomicU64,
    skipped_too_large: AtomicU64,
}

/// What a search counts per entry and file, besides results: the walk's
/// visits and skips, and the searches of files. A window of workers
/// (`super::window`) counts its files' searches apart and adds them in
/// walk order, and sets these back when `max_results` stops the run at a
/// file its walk had passed, so that the summary is the one-thread walk's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileCounts {
    pub visited: u64,
    pub files_searched: u64,
    pub skipped_ignored: u64,
    pub skipped_hidden: u64,
    pub skipped_binary: u64,
    pub skipped_too_large: u64,
}

impl FileCounts {
    /// Each count of `self` plus that of `other`.
    pub fn plus(self, other: FileCounts) -> FileCounts {
        FileCounts {
            visited: self.visited + other.visited,
            files_searched: self.files_searched + other.files_searched,
            skipped_ignored: self.skipped_ignored + other.skipped_ignored,
            skipped_hidden: self.skipped_hidden + other.skipped_hidden,
            skipped_binary: self.skipped_binary + other.skipped_binary,
            skipped_too_large: self.skipped_too_large + other.skipped_too_large,
        }
    }

    /// Each count of `self` less that of `other` (never below zero).
    pub fn minus(self, other: FileCounts) -> FileCounts {
        FileCounts {
            visited: self.visited.saturating_sub(other.visited),
            files_searched: self.files_searched.saturating_sub(other.files_searched),
            skipped_ignored: self.skipped_ignored.saturating_sub(other.skipped_ignored),
            skipped_hidden: self.skipped_hidden.saturating_sub(other.skipped_hidden),
            skipped_binary: self.skipped_binary.saturating_sub(other.skipped_binary),
            skipped_too_large: self
                .skipped_too_large
                .saturating_sub(other.skipped_too_large),
        }
    }
}

struct Pending {
    hits: Vec<Hit>,
    items: usize,
    bytes: usize,
    since: Instant,
}

/// One running search; see the module doc.
pub struct SearchRun {
    spec: SearchSpec,
    started: Instant,
    counters: Counters,
    /// 0 while running, else `AbortReason as u8 + 1`; the first reason wins.
    stop: AtomicU8,
    problems: Mutex<Vec<(String, Error)>>,
    pending: Mutex<Pending>,
    /// Nanoseconds after `started` at which the pending batch began
    /// ([`NOTHING_PENDING`] when empty): lets `should_stop` see a batch due
    /// for sending without taking the lock.
    pending_since: AtomicU64,
    /// Batches sent so far.
    batches_sent: AtomicU32,
    tx: mpsc::Sender<SearchEvent>,
    /// The longest one send waits for the consumer to make room.
    idle_timeout: Duration,
}

impl SearchRun {
    /// Starts a run whose events go to `tx`; a send finding no room for
    /// `idle_timeout` means the client stopped reading (see the module doc).
    pub fn new(
        spec: SearchSpec,
        tx: mpsc::Sender<SearchEvent>,
        idle_timeout: Duration,
    ) -> SearchRun {
        let now = Instant::now();
        SearchRun {
            spec,
            started: now,
            counters: Counters::default(),
            stop: AtomicU8::new(0),
            problems: Mutex::new(Vec::new()),
            pending: Mutex::new(Pending {
                hits: Vec::new(),
                items: 0,
                bytes: 0,
                since: now,
            }),
            pending_since: AtomicU64::new(NOTHING_PENDING),
            batches_sent: AtomicU32::new(0),
            tx,
            idle_timeout,
        }
    }

    /// The request this run executes.
    pub fn spec(&self) -> &SearchSpec {
        &self.spec
    }

    /// Records why the search stops; later reasons are ignored.
    pub fn abort(&self, reason: AbortReason) {
        let _first_wins = self
            .stop
            .compare_exchange(0, reason as u8 + 1, Relaxed, Relaxed);
    }

    /// Makes `max_results` the reason the search stopped, also over a
    /// spent visited budget: a window's walk (`super::window`) may spend
    /// that budget past the file that reached `max_results`, where a
    /// one-thread walk stops first. Other reasons stay.
    pub fn stop_at_limit(&self) {
        let limit = AbortReason::Limit as u8 + 1;
        let count_limit = AbortReason::CountLimit as u8 + 1;
        let _other_reason_stays = self.stop.fetch_update(Relaxed, Relaxed, |stop| {
            (stop == 0 || stop == count_limit).then_some(limit)
        });
    }

    /// True when the results sent reached `max_results`.
    pub fn limit_reached(&self) -> bool {
        self.counters.matched.load(Relaxed) >= self.spec.max_results
    }

    /// The reason the search stopped, if it did.
    pub fn aborted(&self) -> Option<AbortReason> {
        match self.stop.load(Relaxed) {
            0 => None,
            1 => Some(AbortReason::Limit),
            2 => Some(AbortReason::CountLimit),
            3 => Some(AbortReason::TimeLimit),
            _ => Some(AbortReason::Cancelled),
        }
    }

    /// True when the search must stop: a budget ran out or the client left.
    /// Cheap enough to call on every entry (atomic loads, a clock read); also
    /// sends a pending batch that has waited long enough (see the module doc).
    /// Never call it while holding the pending lock.
    pub fn should_stop(&self) -> bool {
        if self.stop.load(Relaxed) != 0 {
            return true;
        }
        let elapsed = self.started.elapsed();
        if self.tx.is_closed() {
            self.abort(AbortReason::Cancelled);
        } else if elapsed >= self.spec.max_duration {
            self.abort(AbortReason::TimeLimit);
        } else {
            let since = self.pending_since.load(Relaxed);
            if since != NOTHING_PENDING {
                let age = Duration::from_nanos((elapsed.as_nanos() as u64).saturating_sub(since));
                if self.due(age) {
                    let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                    if self.due(pending.since.elapsed()) {
                        self.flush(&mut pending);
                    }
                }
            }
            return false;
        }
        true
    }

    /// True when a batch begun `age` ago should be sent now.
    fn due(&self, age: Duration) -> bool {
        let consumer_waiting = self.tx.capacity() == self.tx.max_capacity();
        let min_age = match self.batches_sent.load(Relaxed) {
            0 => Duration::ZERO,
            sent => MIN_BATCH_AGE
                .saturating_mul(1 << (sent - 1).min(16))
                .min(MAX_BATCH_AGE),
        };
        (consumer_waiting && age >= min_age) || age >= MAX_BATCH_AGE
    }

    /// True when work already admitted must be dropped too: the client left,
    /// time ran out or `max_results` was reached. A spent visited budget only
    /// stops admitting entries: files visited within it are still searched,
    /// also when parallel workers get to them after the walk stopped.
    pub fn should_halt(&self) -> bool {
        self.should_stop() && self.aborted() != Some(AbortReason::CountLimit)
    }

    /// Counts one visited entry; false (and the search stops) when the
    /// visited budget is spent or another budget ran out.
    pub fn visit(&self) -> bool {
        if self.should_stop() {
            return false;
        }
        let visited = self.counters.visited.fetch_add(1, Relaxed) + 1;
        if visited > self.spec.max_visited {
            self.counters.visited.fetch_sub(1, Relaxed);
            self.abort(AbortReason::CountLimit);
            return false;
        }
        true
    }

    /// Entries visited so far.
    pub fn visited(&self) -> u64 {
        self.counters.visited.load(Relaxed)
    }

    /// Counts in one step what the walk counts passing a run of entries
    /// known not to be searched for content (docs/search-index.md § The
    /// path table): the caller has checked that `passed.visited` stays
    /// within the visited budget.
    pub fn count_passed(&self, passed: &Counts) {
        self.add_file_counts(FileCounts {
            visited: passed.visited.into(),
            files_searched: passed.checked.into(),
            skipped_ignored: passed.ignored.into(),
            skipped_hidden: passed.hidden.into(),
            skipped_binary: 0,
            skipped_too_large: passed.too_large.into(),
        });
    }

    /// Counts an entry left out by ignore rules.
    pub fn skipped_ignored(&self) {
        self.counters.skipped_ignored.fetch_add(1, Relaxed);
    }

    /// Counts an entry left out for being hidden.
    pub fn skipped_hidden(&self) {
        self.counters.skipped_hidden.fetch_add(1, Relaxed);
    }

    /// The run's [`FileCounts`] so far.
    pub fn file_counts(&self) -> FileCounts {
        let c = &self.counters;
        FileCounts {
            visited: c.visited.load(Relaxed),
            files_searched: c.files_searched.load(Relaxed),
            skipped_ignored: c.skipped_ignored.load(Relaxed),
            skipped_hidden: c.skipped_hidden.load(Relaxed),
            skipped_binary: c.skipped_binary.load(Relaxed),
            skipped_too_large: c.skipped_too_large.load(Relaxed),
        }
    }

    /// Adds `counts` to the run's (counted apart by a window's worker).
    pub fn add_file_counts(&self, counts: FileCounts) {
        // Most adds count one file: the counters left as they are cost no
        // atomic write.
        self.each_count(counts, |count, n| {
            if n > 0 {
                count.fetch_add(n, Relaxed);
            }
        });
    }

    /// Sets the run's [`FileCounts`] to `counts`: a window's, once
    /// `max_results` stopped the run at a file its walk had passed. Only
    /// the thread that walks and emits may call it, and no worker counts
    /// into the run meanwhile.
    pub fn set_file_counts(&self, counts: FileCounts) {
        self.each_count(counts, |count, n| count.store(n, Relaxed));
    }

    /// Applies `apply` to each of the run's [`FileCounts`] counters with
    /// the matching count of `counts`.
    fn each_count(&self, counts: FileCounts, apply: impl Fn(&AtomicU64, u64)) {
        let c = &self.counters;
        apply(&c.visited, counts.visited);
        apply(&c.files_searched, counts.files_searched);
        apply(&c.skipped_ignored, counts.skipped_ignored);
        apply(&c.skipped_hidden, counts.skipped_hidden);
        apply(&c.skipped_binary, counts.skipped_binary);
        apply(&c.skipped_too_large, counts.skipped_too_large);
    }

    /// Records a soft error (an unreadable file, a failing mount); the search
    /// goes on and the summary lists it.
    pub fn problem(&self, path: impl Into<String>, err: Error) {
        let mut problems = self.problems.lock().unwrap_or_else(|p| p.into_inner());
        problems.push((path.into(), err));
    }

    /// Emits a path found by Glob, reduced to [`Hit::Path`] when the Glob is
    /// `paths_only`. Call in path order.
    pub fn emit_entry(&self, entry: Entry) {
        if self.paths_only() {
            let symlink = matches!(entry.kind, EntryKind::Symlink { .. });
            return self.emit_path(entry.path, symlink);
        }
        if self.take_results(1).0 == 0 {
            return;
        }
        let bytes = entry.path.as_str().len() + 32;
        self.push(Hit::Entry(entry), 1, bytes);
    }

    /// Emits a path found by a `paths_only` Glob. Call in path order.
    pub fn emit_path(&self, path: VfsPath, symlink: bool) {
        if self.take_results(1).0 == 0 {
            return;
        }
        let bytes = path.as_str().len() + 8;
        self.push(Hit::Path { path, symlink }, 1, bytes);
    }

    /// True for a Glob whose results carry no metadata.
    pub fn paths_only(&self) -> bool {
        matches!(&self.spec.kind, SearchKind::Glob(glob) if glob.paths_only)
    }

    /// Emits one file's Grep output. Call in path order. Lines beyond
    /// `max_results` are cut, and so is the context after the match that
    /// reaches it: a file's collection stops at that match when the run's
    /// remaining results are known exactly (the ordered tiers), so the
    /// Filesystem tier's workers, which may collect further while earlier
    /// files are still being emitted, must not send more.
    pub fn emit_file(&self, mut hits: FileHits) {
        let matching = hits.lines.iter().filter(|l| !l.is_context).count() as u64;
        if matching == 0 {
            return;
        }
        let (granted, spent) = self.take_results(matching);
        if granted == 0 {
            return;
        }
        if granted < matching || spent {
            let mut seen = 0;
            let cut = hits
                .lines
                .iter()
                .position(|l| {
                    seen += u64::from(!l.is_context);
                    seen > granted
                })
                .unwrap_or(hits.lines.len());
            hits.lines.truncate(cut);
            while hits.lines.last().is_some_and(|l| l.is_context) {
                hits.lines.pop();
            }
        }
        self.counters.matched_files.fetch_add(1, Relaxed);
        // Pieces of at most MAX_BATCH_BYTES, so no message carries a whole
        // file of matches (clients reject messages over 4 MiB).
        let per_line = hits.path.as_str().len() + 16;
        let mut piece = Vec::new();
        let mut bytes = 0;
        for line in std::mem::take(&mut hits.lines) {
            let size = line.line.len() + line.matched.len() + per_line;
            if !piece.is_empty() && bytes + size > MAX_BATCH_BYTES {
                self.push_piece(&hits, std::mem::take(&mut piece), bytes);
                bytes = 0;
            }
            piece.push(line);
            bytes += size;
        }
        self.push_piece(&hits, piece, bytes);
    }

    fn push_piece(&self, file: &FileHits, lines: Vec<super::LineHit>, bytes: usize) {
        let items = lines.len();
        let piece = FileHits {
            path: file.path.clone(),
            modified: file.modified,
            lines,
        };
        self.push(Hit::File(piece), items, bytes);
    }

    /// Results still allowed under `max_results`: a file's matcher stops
    /// collecting there, since more could never be sent.
    pub fn remaining_results(&self) -> u64 {
        self.spec
            .max_results
            .saturating_sub(self.counters.matched.load(Relaxed))
    }

    /// Reserves up to `wanted` results under `max_results`, and tells
    /// whether these reached the limit; on reaching it the search stops
    /// with [`AbortReason::Limit`].
    fn take_results(&self, wanted: u64) -> (u64, bool) {
        let max = self.spec.max_results;
        let (mut granted, mut spent) = (0, false);
        // The closure always returns Some, so fetch_update cannot fail.
        let _always_ok = self
            .counters
            .matched
            .fetch_update(Relaxed, Relaxed, |have| {
                granted = wanted.min(max.saturating_sub(have));
                spent = granted > 0 && have + granted >= max;
                Some(have + granted)
            });
        if self.counters.matched.load(Relaxed) >= max {
            self.abort(AbortReason::Limit);
        }
        (granted, spent)
    }

    fn push(&self, hit: Hit, items: usize, bytes: usize) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.bytes + bytes > MAX_BATCH_BYTES {
            self.flush(&mut pending);
        }
        if pending.hits.is_empty() {
            pending.since = Instant::now();
            let since = pending.since.duration_since(self.started).as_nanos() as u64;
            self.pending_since.store(since, Relaxed);
        }
        pending.hits.push(hit);
        pending.items += items;
        pending.bytes += bytes;
        if pending.items >= MAX_BATCH_ITEMS
            || pending.bytes >= MAX_BATCH_BYTES
            || self.due(pending.since.elapsed())
        {
            self.flush(&mut pending);
        }
    }

    fn flush(&self, pending: &mut Pending) {
        if pending.hits.is_empty() {
            return;
        }
        let hits = std::mem::take(&mut pending.hits);
        pending.items = 0;
        pending.bytes = 0;
        self.pending_since.store(NOTHING_PENDING, Relaxed);
        if self.aborted() == Some(AbortReason::Cancelled) {
            return; // Nobody takes it.
        }
        self.batches_sent.fetch_add(1, Relaxed);
        let budget_end = self.started + self.spec.max_duration;
        let idle_end = Instant::now() + self.idle_timeout;
        match self.send(SearchEvent::Batch(hits), budget_end.min(idle_end)) {
            Ok(()) => {}
            Err(Unsent::TimedOut) if budget_end <= idle_end => self.abort(AbortReason::TimeLimit),
            Err(unsent) => self.client_gone(unsent),
        }
    }

    /// Stops the search because its client left or stopped reading.
    fn client_gone(&self, unsent: Unsent) {
        if unsent == Unsent::TimedOut {
            tracing::info!(
                idle_ms = self.idle_timeout.as_millis() as u64,
                "search client stopped reading; cutting the search"
            );
        }
        self.abort(AbortReason::Cancelled);
    }

    /// Sends `event`, waiting for room in the channel until `deadline` at
    /// most: the thread parks and the receiver wakes it when it takes a
    /// message or goes away.
    fn send(&self, event: SearchEvent, deadline: Instant) -> Result<(), Unsent> {
        struct Unpark(std::thread::Thread);
        impl futures_util::task::ArcWake for Unpark {
            fn wake_by_ref(this: &Arc<Self>) {
                this.0.unpark();
            }
        }
        let waker = futures_util::task::waker(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut reserve = pin!(self.tx.reserve());
        loop {
            match reserve.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(permit)) => {
                    permit.send(event);
                    return Ok(());
                }
                Poll::Ready(Err(_closed)) => return Err(Unsent::Closed),
                Poll::Pending => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Unsent::TimedOut);
            }
            // A spurious wake-up only polls again.
            std::thread::park_timeout(deadline - now);
        }
    }

    /// Ends the run: flushes the last batch and sends the summary, or the
    /// error that kept the search from producing anything.
    pub fn finish(self, outcome: Result<()>) {
        // The last events wait for the client at most the idle timeout, also
        // when the time budget is spent: the summary reports it.
        let deadline = Instant::now() + self.idle_timeout;
        let event = match outcome {
            Err(err) => SearchEvent::Failed(err),
            Ok(()) => {
                let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                let hits = std::mem::take(&mut pending.hits);
                drop(pending);
                if !hits.is_empty()
                    && self.aborted() != Some(AbortReason::Cancelled)
                    && let Err(unsent) = self.send(SearchEvent::Batch(hits), deadline)
                {
                    self.client_gone(unsent);
                }
                let summary = self.summary();
                tracing::info!(
                    visited = summary.visited,
                    matched = summary.matched,
                    elapsed_ms = summary.elapsed.as_millis() as u64,
                    aborted = summary.aborted.map_or("none", AbortReason::as_str),
                    "search finished"
                );
                match summary.aborted {
                    Some(reason @ (AbortReason::TimeLimit | AbortReason::CountLimit))
                        if summary.matched == 0 =>
                    {
                        SearchEvent::Failed(Error::Timeout(format!(
                            "search stopped ({}) after visiting {} entries in {} ms without a \
                             result; narrow the path or pattern, or raise max_visited / \
                             max_duration_ms",
                            reason.as_str(),
                            summary.visited,
                            summary.elapsed.as_millis()
                        )))
                    }
                    _ => SearchEvent::Summary(summary),
                }
            }
        };
        if self.aborted() == Some(AbortReason::Cancelled) || self.send(event, deadline).is_err() {
            tracing::debug!("search client left before the summary");
        }
    }

    /// The counters so far.
    fn summary(&self) -> Summary {
        let c = &self.counters;
        let problems =
            std::mem::take(&mut *self.problems.lock().unwrap_or_else(|p| p.into_inner()));
        Summary {
            visited: c.visited.load(Relaxed),
            matched: c.matched.load(Relaxed),
            matched_files: c.matched_files.load(Relaxed),
            files_searched: c.files_searched.load(Relaxed),
            skipped_ignored: c.skipped_ignored.load(Relaxed),
            skipped_hidden: c.skipped_hidden.load(Relaxed),
            skipped_binary: c.skipped_binary.load(Relaxed),
            skipped_too_large: c.skipped_too_large.load(Relaxed),
            elapsed: self.started.elapsed(),
            aborted: self.aborted(),
            problems,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{Budgets, GrepRequest, LineHit};
    use std::time::SystemTime;

    fn line(n: u64, is_context: bool) -> LineHit {
        LineHit {
            line_number: n,
            line: format!("line {n}"),
            matched: if is_context {
                String::new()
            } else {
                "line".into()
            },
            is_context,
        }
    }

    /// The context after the match that reaches `max_results` is cut
    /// whether the file's collection stopped there (the ordered tiers) or
    /// went on (a Filesystem worker that collected before earlier files
    /// were emitted), so the answer does not depend on timing.
    #[test]
    fn the_context_after_the_last_allowed_match_is_cut() {
        let budgets = Budgets {
            max_results: 2,
            ..Budgets::default()
        };
        let request = GrepRequest {
            pattern: "line",
            ..GrepRequest::default()
        };
        let root = VfsPath::parse("/t").unwrap();
        let spec = SearchSpec::grep(root, request, budgets).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let run = SearchRun::new(spec, tx, Duration::from_secs(1));
        let file = |name: &str, lines: Vec<LineHit>| FileHits {
            path: VfsPath::parse(&format!("/t/{name}")).unwrap(),
            modified: SystemTime::UNIX_EPOCH,
            lines,
        };
        // Under the limit: its context stays.
        run.emit_file(file("a", vec![line(1, false), line(2, true)]));
        // Reaches it exactly: the context after is cut.
        run.emit_file(file("b", vec![line(1, false), line(2, true)]));
        run.finish(Ok(()));
        let mut lines = Vec::new();
        while let Ok(event) = rx.try_recv() {
            if let SearchEvent::Batch(batch) = event {
                for hit in batch {
                    if let Hit::File(f) = hit {
                        lines.extend(f.lines.iter().map(|l| (f.path.to_string(), l.line_number)));
                    }
                }
            }
        }
        let want = [("/t/a", 1), ("/t/a", 2), ("/t/b", 1)];
        let want: Vec<(String, u64)> = want.iter().map(|(p, n)| (p.to_string(), *n)).collect();
        assert_eq!(lines, want);
    }
}
