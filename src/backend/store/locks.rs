//! Striped path locks: what makes Store writes atomic read-modify-writes.
//!
//! A write, Edit or Delete of a path holds the stripe of the path exclusively
//! and the stripes of all its ancestor directories (mount root included)
//! shared, for the whole read-check-write. So two edits of one file serialize
//! (no lost update), a create of `a` and of `a/b` cannot both succeed (one
//! sees the other), and a recursive delete of `a` (exclusive on `a`) excludes
//! every write below it, while writes to sibling files proceed in parallel.
//! A Move holds the locks of its source and of its destination, taken as
//! one set.
//!
//! Stripes are taken in index order, each once (exclusive when any use of it
//! is), so no two lock sets can deadlock, however many paths each covers. A path hashing to the stripe of an
//! unrelated path only costs a little false sharing, never correctness.
//! `std` locks: nothing awaits while holding them (Backend calls run on
//! blocking threads).

use super::keys::NsId;
use crate::backend::ordered::keys::ancestors;
use std::hash::{BuildHasher, RandomState};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Stripes: enough that unrelated paths rarely share one, few enough to
/// cost nothing (1024 × a few words).
const STRIPES: usize = 1024;

/// A held stripe, released on drop.
pub enum Held<'a> {
    /// Shared: an ancestor directory.
    Shared {
        /// Kept only to be dropped.
        _guard: RwLockReadGuard<'a, ()>,
    },
    /// Exclusive: the path itself.
    Exclusive {
        /// Kept only to be dropped.
        _guard: RwLockWriteGuard<'a, ()>,
    },
}

/// The lock table of one store.
pub struct PathLocks {
    stripes: Box<[RwLock<()>]>,
    hasher: RandomState,
}

impl Default for PathLocks {
    fn default() -> Self {
        PathLocks {
            stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            hasher: RandomState::new(),
        }
    }
}

impl PathLocks {
    fn stripe(&self, ns: NsId, rel: &[u8]) -> usize {
        (self.hasher.hash_one((ns, rel)) % STRIPES as u64) as usize
    }

    /// Locks the paths with relative keys `rels`: exclusive on each, shared
    /// on their ancestors. Held until the returned guards drop.
    pub fn lock(&self, ns: NsId, rels: &[&[u8]]) -> Vec<Held<'_>> {
        let mut wanted: Vec<(usize, bool)> = Vec::new();
        for rel in rels {
            wanted.extend(ancestors(rel).map(|a| (self.stripe(ns, a), false)));
            wanted.push((self.stripe(ns, rel), true));
        }
        // Index order; for a stripe wanted twice, the exclusive use sorts last
        // and wins.
        wanted.sort_unstable();
        wanted.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                earlier.1 |= later.1;
            }
            same
        });
        // The data guarded is `()`: a panic elsewhere while holding a stripe
        // cannot leave anything half-changed, so a poisoned stripe is usable.
        wanted
            .into_iter()
            .map(|(i, exclusive)| {
                let stripe = &self.stripes[i];
                if exclusive {
                    Held::Exclusive {
                        _guard: stripe.write().unwrap_or_else(|p| p.into_inner()),
                    }
                } else {
                    Held::Shared {
                        _guard: stripe.read().unwrap_or_else(|p| p.into_inner()),
                    }
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A writer of `a/b` waits while `a` is held exclusively (as a recursive
    /// delete of `a` holds it), and siblings below one directory do not block
    /// each other.
    #[test]
    fn ancestor_exclusive_lock_blocks_writes_below_but_not_siblings() {
        let locks = Arc::new(PathLocks::default());
        let sibling_a = locks.lock(1, &[&b"d\0x"[..]]);
        let sibling_b = locks.lock(1, &[&b"d\0y"[..]]);
        drop((sibling_a, sibling_b));
        let dir = locks.lock(1, &[&b"d"[..]]);
        let done = Arc::new(AtomicBool::new(false));
        let t = {
            let (locks, done) = (locks.clone(), done.clone());
            std::thread::spawn(move || {
                let _below = locks.lock(1, &[&b"d\0x"[..]]);
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !done.load(Ordering::SeqCst),
            "write below a locked directory must wait"
        );
        drop(dir);
        t.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
    }

    /// Moves lock two paths each; two moves between the same two paths in
    /// opposite directions, over and over, never deadlock.
    #[test]
    fn opposite_moves_never_deadlock() {
        let locks = Arc::new(PathLocks::default());
        let threads: Vec<_> = [(&b"a\0x"[..], &b"b\0y"[..]), (&b"b\0y"[..], &b"a\0x"[..])]
            .into_iter()
            .map(|(from, to)| {
                let locks = locks.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        drop(locks.lock(1, &[from, to]));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
