//! A change log kept in memory: the last records of a State session or of a
//! Filesystem mount, numbered in the order they are pushed (commit order:
//! the owner pushes while it holds the lock that orders its changes).
//!
//! Numbers start at 1 and have no gaps, so a position is an index; the log
//! keeps at most the capacity its owner trims it to and remembers the last
//! number it dropped. Its epoch is drawn at random when it is made, so a
//! cursor of an earlier log (a restarted server, a session created again)
//! is never read against this one.

use crate::change::LogBounds;
use std::collections::VecDeque;

/// The last records of one change log.
#[derive(Debug)]
pub struct MemoryLog<T> {
    epoch: u64,
    head: u64,
    records: VecDeque<T>,
}

impl<T: Clone> Default for MemoryLog<T> {
    fn default() -> Self {
        MemoryLog::new()
    }
}

impl<T: Clone> MemoryLog<T> {
    /// An empty log under a fresh epoch.
    pub fn new() -> MemoryLog<T> {
        MemoryLog {
            epoch: rand::random::<u64>().max(1),
            head: 0,
            records: VecDeque::new(),
        }
    }

    /// Where the log stands.
    pub fn bounds(&self) -> LogBounds {
        LogBounds {
            epoch: self.epoch,
            trimmed: self.head - self.records.len() as u64,
            head: self.head,
        }
    }

    /// Appends the record `make` builds for the next number; returns it.
    pub fn push(&mut self, make: impl FnOnce(u64) -> T) -> u64 {
        self.head += 1;
        self.records.push_back(make(self.head));
        self.head
    }

    /// The `n` oldest records (those the next trim to `len() - n` drops).
    pub fn oldest(&self, n: usize) -> impl Iterator<Item = &T> {
        self.records.iter().take(n)
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when no record is held.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Drops the oldest records beyond `capacity`.
    pub fn trim(&mut self, capacity: usize) {
        while self.records.len() > capacity {
            self.records.pop_front();
        }
    }

    /// Up to `max` records after number `after` (`None`: from the oldest
    /// held), in order.
    pub fn read(&self, after: Option<u64>, max: usize) -> Vec<T> {
        let trimmed = self.bounds().trimmed;
        let after = after.unwrap_or(trimmed).max(trimmed);
        let skip = usize::try_from(after - trimmed).unwrap_or(usize::MAX);
        self.records.iter().skip(skip).take(max).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_numbered_read_after_a_position_and_trimmed() {
        let mut log = MemoryLog::new();
        for i in 0..5 {
            assert_eq!(log.push(|seq| (seq, i)), i + 1);
        }
        assert_eq!(log.read(Some(3), 10), [(4, 3), (5, 4)]);
        log.trim(2);
        let bounds = log.bounds();
        assert_eq!((bounds.trimmed, bounds.head, log.len()), (3, 5, 2));
        assert_eq!(log.read(None, 10), [(4, 3), (5, 4)]);
        assert_eq!(log.read(Some(1), 1), [(4, 3)]);
        assert!(log.read(Some(5), 10).is_empty());
        assert_ne!(bounds.epoch, 0);
    }
}
