//! Room for the large file contents searches hold in memory, one bound for
//! the whole server.
//!
//! A Grep reads some files whole before it searches them (a Store file of
//! several chunks, an object's blob), and searches others as a stream whose
//! buffer grows to hold the longest line (the Filesystem tier). Either way
//! one file can cost up to `max_file_bytes` (64 MiB by default), or twice
//! that for a stream, and the server runs up to 16 Greps at once, each with
//! a worker per core: measured before this bound, 16 Greps over 60 MiB
//! one-line files grew the server by 0.9 GiB on the Store and 1.8 GiB on a
//! Filesystem mount (`tests/it/memory.rs`,
//! `concurrent_greps_of_huge_files_are_bounded`).
//!
//! So a search holds room here for a file over [`FREE_BYTES`] before it
//! reads it, and gives it back when the file is searched. When the room is
//! taken, the search waits: every holder is searching one file, on its own
//! CPU, and never waits on its client while it holds room (a file's
//! results are collected first, then sent), so the wait is bounded by
//! other searches' work, and a search whose budget runs out while waiting
//! stops. A single file larger than the room takes all of it, alone.
//! Smaller files are not counted: each worker holds at most one, so they
//! are bounded by the number of workers.

use super::SearchRun;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

/// The bytes of large files all searches hold at once: two files at the
/// default `max_file_bytes`.
const ROOM_BYTES: u64 = 128 << 20;

/// A file up to this size is read or streamed without holding room: 1 MiB
/// is the Store's chunk and larger than nearly every source file, so
/// ordinary searches never touch the lock.
const FREE_BYTES: u64 = 1 << 20;

/// How often a waiting search checks its own budgets.
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// The bytes held now, and the signal that some were given back.
struct Room {
    held: Mutex<u64>,
    freed: Condvar,
}

static ROOM: Room = Room {
    held: Mutex::new(0),
    freed: Condvar::new(),
};

/// Room held for one file's content; given back on drop.
#[must_use = "the room is given back when this is dropped"]
pub struct Held {
    bytes: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        // A poisoned lock guards a plain count, updated in one step.
        let mut held = ROOM.held.lock().unwrap_or_else(PoisonError::into_inner);
        *held -= self.bytes;
        drop(held);
        ROOM.freed.notify_all();
    }
}

/// Waits for room to hold `bytes` of one file for `run`. `None` when the
/// run must stop first (its time budget, its client gone): the caller
/// leaves the file, as the run ends anyway.
pub fn hold(run: &SearchRun, bytes: u64) -> Option<Held> {
    if bytes <= FREE_BYTES {
        return Some(Held { bytes: 0 });
    }
    let want = bytes.min(ROOM_BYTES);
    let mut held = ROOM.held.lock().unwrap_or_else(PoisonError::into_inner);
    while *held + want > ROOM_BYTES {
        if run.should_stop() {
            return None;
        }
        held = ROOM
            .freed
            .wait_timeout(held, WAIT_SLICE)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    *held += want;
    Some(Held { bytes: want })
}
