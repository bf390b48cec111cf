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

use super::{FileHits, FileSearcher, SearchRun};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
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
                let Some(mut searcher) = FileSearcher::new(run) else {
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
                    if done_tx.send((seq, hits)).is_err() {
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
        };
        let walked = walk(&mut window);
        window.finish();
        walked
    })
}

/// The walk's end of [`grep_in_order`]: files go in with [`Window::push`],
/// results come out through the run in the order they went in.
pub struct Window<'s, T> {
    run: &'s SearchRun,
    gate: &'s Gate,
    tasks: Option<crossbeam_channel::Sender<Vec<(u64, T)>>>,
    /// Files not yet handed to a worker (up to [`CHUNK`]), with their numbers.
    chunk: Vec<(u64, T)>,
    done: crossbeam_channel::Receiver<(u64, Option<FileHits>)>,
    /// Results of files `next..`, `None` while a file is in flight.
    pending: VecDeque<Option<Option<FileHits>>>,
    /// The number of the file at the head of the window.
    next: u64,
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
        self.pending.push_back(None);
        self.chunk.push((seq, file));
        if self.chunk.len() >= CHUNK {
            self.send_chunk();
        }
        while let Ok(done) = self.done.try_recv() {
            self.record(done);
        }
        self.emit_ready();
    }

    /// Emits every finished file at the head of the window.
    fn emit_ready(&mut self) {
        let mut released = 0;
        while let Some(Some(_)) = self.pending.front() {
            if let Some(Some(Some(hits))) = self.pending.pop_front() {
                released += hits_bytes(&hits);
                self.run.emit_file(hits);
            }
            self.next += 1;
        }
        self.gate.release(released, self.next);
    }

    fn record(&mut self, (seq, hits): (u64, Option<FileHits>)) {
        let at = (seq - self.next) as usize;
        self.pending[at] = Some(hits);
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
