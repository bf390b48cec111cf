//! Many threads on one tier: no lost update, one winner per race, no torn
//! read (src/backend/mod.rs: `update` is an atomic read-modify-write).

use crate::harness::{Tier, create_only, if_version};
use agentvfs::error::Error;
use std::collections::BTreeSet;

/// Threads in every race.
const THREADS: usize = 8;

/// 8 threads × 50 `update`s incrementing one counter lose none, and each
/// thread sees its versions grow.
pub fn concurrent_updates_lose_nothing(t: &Tier) {
    const ROUNDS: usize = 50;
    t.write("counter", "0");
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                let mut last = 0;
                for _ in 0..ROUNDS {
                    let w = t
                        .update("counter", None, &mut |c| {
                            let n: u64 = std::str::from_utf8(c).unwrap().parse().unwrap();
                            Ok((n + 1).to_string().into_bytes())
                        })
                        .unwrap();
                    assert!(w.version > last, "{} after {last}", w.version);
                    last = w.version;
                }
            });
        }
    });
    assert_eq!(
        t.content("counter"),
        (THREADS * ROUNDS).to_string().as_bytes()
    );
}

/// Of 8 `create_only` writes racing for one new path exactly one wins;
/// the others are AlreadyExists and the file holds the winner's content.
pub fn one_create_only_writer_wins(t: &Tier) {
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| s.spawn(move || t.write_pre("race/f", format!("writer {i}"), create_only())))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners: Vec<usize> = (0..THREADS).filter(|&i| results[i].is_ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for result in &results {
        if let Err(err) = result {
            assert_eq!(*err, Error::AlreadyExists(t.path("race/f").to_string()));
        }
    }
    assert_eq!(
        t.content("race/f"),
        format!("writer {}", winners[0]).as_bytes()
    );
}

/// Of 8 writes with the same `if_version` exactly one wins; the others
/// are VersionMismatch against the winner's version.
pub fn one_if_version_writer_wins(t: &Tier) {
    let v = t.write("f", "start").version;
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| s.spawn(move || t.write_pre("f", format!("writer {i}"), if_version(v))))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    let winner = won[0].version;
    for result in &results {
        if let Err(err) = result {
            let expected = Error::VersionMismatch {
                path: t.path("f").to_string(),
                expected: v,
                actual: winner,
            };
            assert_eq!(*err, expected);
        }
    }
    assert_eq!(t.version("f"), winner);
}

/// Readers racing a writer that swaps a 200 KiB file between two contents
/// always read one content whole, with its own size.
pub fn readers_never_see_a_torn_file(t: &Tier) {
    const SIZE: usize = 200 << 10;
    t.write("f", vec![b'a'; SIZE]);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..40 {
                let byte = if i % 2 == 0 { b'b' } else { b'a' };
                t.write("f", vec![byte; SIZE]);
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..40 {
                    let (data, entry) = t.try_read("f").unwrap();
                    assert_eq!((data.len(), entry.size), (SIZE, SIZE as u64));
                    assert!(
                        data.iter().all(|b| *b == data[0]),
                        "a read mixed two writes"
                    );
                }
            });
        }
    });
}

/// 8 threads each writing 20 files into one new directory tree (whose
/// parents they all create at once) all land.
pub fn concurrent_writes_into_new_directories_all_land(t: &Tier) {
    std::thread::scope(|s| {
        for i in 0..THREADS {
            s.spawn(move || {
                for j in 0..20 {
                    t.write(&format!("tree/shared/{}/f{i}-{j}", j % 4), "x");
                }
            });
        }
    });
    let mut all = BTreeSet::new();
    for dir in 0..4 {
        for name in t.names(&format!("tree/shared/{dir}")) {
            all.insert(format!("{dir}/{name}"));
        }
    }
    assert_eq!(all.len(), THREADS * 20);
}
