//! Grep over many files in parallel with results in walk order: the piece a
//! tier's walk hands its files to, whatever the tier.
//!
//! Request flow: a tier's search calls [`grep_in_order`] with its walk and a
//! function that opens (or loads) and searches one file. The walk hands each
//! file it keeps to [`Window::push`], in path order; the files are numbered in
//! that order and go to one worker per core (each reusing one
//! [`FileSearcher`]), sixteen at a time; finished files wait in a reorder
//! window and are emitted through the run as soon as every earlier file is
//! done. So results come out in the walk's order, exactly as a one-thread
//! search would emit them.
//!
//! The counts are the one-thread walk's too: a worker counts the files it
//! searches apart ([`FileSearcher::holding_counts`]), and they are added to
//! the run as each file is emitted, in walk order. When the file emitted
//! reaches `max_results`, the walk has already gone past it (up to
//! [`WINDOW`] files), so the run's counts are set back to what they were
//! when the walk pushed that file, plus what its searches and those of the
//! files before it added since; and when the walk spent the visited budget
//! meanwhile, `max_results` becomes the reason the run stopped, as the
//! one-thread walk would have stopped at that file first.
//!
//! Invariants and bounds: at most [`WINDOW`] files are in flight; once
//! finished results waiting for emission exceed [`MAX_BUFFERED_BYTES`],
//! workers pause, except on the file at the head of the window (so emission
//! always progresses). A slow client's back-pressure (the run's bounded
//! channel blocks `emit_file`) thus stops the walk and the workers with server
//! memory bounded by that budget plus one file's results per worker:
//! measured on the Filesystem tier, a client that stopped reading 70 MB of
//! matches grew the server by 160 MB with a 256-file window and no byte
//! budget. A halted run (cancelled, timed out) stops searching files; the
//! ones in flight are then reported empty.

use super::run::FileCounts;
use super::{AbortReason, FileHits, FileSearcher, SearchRun};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

/// Files in flight between the walker and emission. Large enough to keep
/// every worker busy while one slow file holds the head of the window, small
/// enough that the results held back stay a few megabytes.
pub const WINDOW: usize = 256;
/// Files handed to a worker at once. One by one, the channel's wake-ups (a
/// `futex` call or two per file, plus spinning) cost more CPU than ripgrep
/// spends searching a small file; files are still searched and reported one
/// by one, so the reorder window and the gate work per file.
const CHUNK: usize = 16;
/// Bytes of finished, not yet emitted results above which workers pause.
pub const MAX_BUFFERED_BYTES: usize = 8 << 20;
/// How long a paused worker sleeps before looking again (it is also woken
/// whenever results are emitted).
const GATE_POLL: Duration = Duration::from_millis(10);

/// Runs `walk` with a [`Window`] it pushes its files into, in walk order;
/// `grep` runs on the workers, once per file, and returns the file's hits
/// (`None`: nothing to report; failures are the run's soft problems).
/// Returns what `walk` returned, once every pushed file is emitted.
pub fn grep_in_order<T, G, R>(
    run: &SearchRun,
    grep: G,
    walk: impl FnOnce(&mut Window<'_, T>) -> R,
) -> R
where
    T: Send,
    G: Fn(&mut FileSearcher<'_>, &T) -> Option<FileHits> + Sync,
{
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let gate = &Gate::default();
    let grep = &grep;
    std::thread::scope(|scope| {
        let (tasks_tx, tasks_rx) = crossbeam_channel::bounded::<Vec<(u64, T)>>(WINDOW);
        let (done_tx, done_rx) = crossbeam_channel::bounded(WINDOW);
        for _ in 0..workers {
            let (tasks_rx, done_tx) = (tasks_rx.clone(), done_tx.clone());
            scope.spawn(move || {
                // None: the run is not a Grep, and no file is searched.
                let Some(mut searcher) = FileSearcher::new(run).map(FileSearcher::holding_counts)
                else {
                    return;
                };
                for (seq, file) in tasks_rx.iter().flatten() {
                    gate.wait_turn(run, seq);
                    let hits = if run.should_halt() {
                        None
                    } else {
                        grep(&mut searcher, &file)
                    };
                    let bytes = hits.as_ref().map_or(0, hits_bytes);
                    gate.buffered.fetch_add(bytes, Ordering::Relaxed);
                    let counts = searcher.take_counts();
                    if done_tx.send((seq, Done { hits, counts })).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        let mut window = Window {
            run,
            gate,
            tasks: Some(tasks_tx),
            chunk: Vec::with_capacity(CHUNK),
            done: done_rx,
            pending: VecDeque::new(),
            next: 0,
            added: FileCounts::default(),
            limited: false,
        };
        let walked = walk(&mut window);
        window.finish();
        walked
    })
}

/// A file a walk over a path table hands to the window
/// (`src/backend/fs/table_walk.rs`, `src/backend/ordered/walk.rs`): most
/// are searched by the workers, but a file the Grep learns is searched by
/// the walk itself, which holds the Grep's index.
pub enum Task<T> {
    /// To be searched by a worker.
    Search(T),
    /// Searched by the walk: its hits take their place in the window's
    /// order.
    Searched(Mutex<Option<FileHits>>),
}

impl<T> Task<T> {
    /// A file the walk searched, with its hits.
    pub fn searched(hits: Option<FileHits>) -> Task<T> {
        Task::Searched(Mutex::new(hits))
    }

    /// The file's hits: searched now by `search`, unless the walk did.
    pub fn hits(&self, search: impl FnOnce(&T) -> Option<FileHits>) -> Option<FileHits> {
        match self {
            Task::Search(file) => search(file),
            Task::Searched(hits) => hits.lock().unwrap_or_else(PoisonError::into_inner).take(),
        }
    }
}

/// The walk's end of [`grep_in_order`]: files go in with [`Window::push`],
/// results come out through the run in the order they went in.
pub struct Window<'s, T> {
    run: &'s SearchRun,
    gate: &'s Gate,
    tasks: Option<crossbeam_channel::Sender<Vec<(u64, T)>>>,
    /// Files not yet handed to a worker (up to [`CHUNK`]), with their numbers.
    chunk: Vec<(u64, T)>,
    done: crossbeam_channel::Receiver<(u64, Done)>,
    /// Files `next..`, in walk order.
    pending: VecDeque<Slot>,
    /// The number of the file at the head of the window.
    next: u64,
    /// Every count the workers' searches added to the run so far.
    added: FileCounts,
    /// `max_results` stopped the run at a file of this window: the run's
    /// counts are set, and nothing more is added.
    limited: bool,
}

/// A file in the window.
struct Slot {
    /// The run's counts when the walk pushed it.
    counts: FileCounts,
    /// [`Window::added`] then.
    added: FileCounts,
    /// Its search, once finished.
    done: Option<Done>,
}

/// A file's search: its hits (`None`: nothing to report) and what it
/// counted.
struct Done {
    hits: Option<FileHits>,
    counts: FileCounts,
}

impl<T> Window<'_, T> {
    /// Hands the next file in walk order to the workers, first waiting (and
    /// emitting) while [`WINDOW`] files are in flight, then emits every file
    /// finished at the head of the window.
    pub fn push(&mut self, file: T) {
        while self.pending.len() >= WINDOW {
            // Files still gathered here would never finish.
            self.send_chunk();
            if !self.wait_one() {
                return;
            }
        }
        let seq = self.next + self.pending.len() as u64;
        self.pending.push_back(Slot {
            counts: self.run.file_counts(),
            added: self.added,
            done: None,
        });
        self.chunk.push((seq, file));
        if self.chunk.len() >= CHUNK {
            self.send_chunk();
        }
        while let Ok(done) = self.done.try_recv() {
            self.record(done);
        }
        self.emit_ready();
    }

    /// Emits every finished file at the head of the window, adding what
    /// its search counted; sets the run's counts back when one reaches
    /// `max_results` (see the module doc).
    fn emit_ready(&mut self) {
        let mut released = 0;
        while self.pending.front().is_some_and(|slot| slot.done.is_some()) {
            let Some(Slot {
                counts,
                added,
                done: Some(done),
            }) = self.pending.pop_front()
            else {
                break;
            };
            self.next += 1;
            if self.limited {
                released += done.hits.as_ref().map_or(0, hits_bytes);
                continue;
            }
            self.run.add_file_counts(done.counts);
            self.added = self.added.plus(done.counts);
            let Some(hits) = done.hits else {
                continue;
            };
            released += hits_bytes(&hits);
            let open = matches!(self.run.aborted(), None | Some(AbortReason::CountLimit));
            let reached = self.run.limit_reached();
            self.run.emit_file(hits);
            if open && !reached && self.run.limit_reached() {
                self.run.stop_at_limit();
                self.limited = true;
                let since = self.added.minus(added);
                self.run.set_file_counts(counts.plus(since));
            }
        }
        self.gate.release(released, self.next);
    }

    fn record(&mut self, (seq, done): (u64, Done)) {
        let at = (seq - self.next) as usize;
        self.pending[at].done = Some(done);
    }

    /// Waits for one result (false: every worker is gone).
    fn wait_one(&mut self) -> bool {
        match self.done.recv() {
            Ok(done) => {
                self.record(done);
                self.emit_ready();
                true
            }
            Err(_) => false,
        }
    }

    /// Hands the files gathered so far to a worker.
    fn send_chunk(&mut self) {
        if let Some(tasks) = &self.tasks
            && !self.chunk.is_empty()
        {
            // On error the workers are gone; `finish` then stops waiting.
            let _workers_gone = tasks.send(std::mem::replace(
                &mut self.chunk,
                Vec::with_capacity(CHUNK),
            ));
        }
    }

    /// Stops handing out work and emits everything still in flight.
    fn finish(&mut self) {
        self.send_chunk();
        self.tasks = None;
        while !self.pending.is_empty() && self.wait_one() {}
    }
}

/// Pauses workers while too many result bytes wait for emission.
#[derive(Default)]
struct Gate {
    /// Bytes of finished results not yet emitted.
    buffered: AtomicUsize,
    /// Sequence number of the file at the head of the window.
    head: AtomicU64,
    /// Workers waiting in [`Gate::wait_turn`]: emission, which happens per
    /// file, only takes the lock and signals when one waits.
    waiting: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Gate {
    /// Waits until the worker may search file `seq`.
    fn wait_turn(&self, run: &SearchRun, seq: u64) {
        let blocked = || {
            self.buffered.load(Ordering::SeqCst) > MAX_BUFFERED_BYTES
                && seq != self.head.load(Ordering::SeqCst)
                && !run.should_halt()
        };
        if !blocked() {
            return;
        }
        let mut guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        // Counted before the check under the lock, so a release that changes
        // the condition after the check sees the waiter and signals.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        while blocked() {
            guard = match self.wake.wait_timeout(guard, GATE_POLL) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    /// Records that results of `bytes` left and the head moved to `head`.
    fn release(&self, bytes: usize, head: u64) {
        self.buffered.fetch_sub(bytes, Ordering::SeqCst);
        self.head.store(head, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.wake.notify_all();
        }
    }
}

/// Estimated memory of one file's results.
fn hits_bytes(hits: &FileHits) -> usize {
    hits.lines
        .iter()
        .map(|l| l.line.len() + l.matched.len() + std::mem::size_of_val(l))
        .sum()
}
