//! The search index on the object tier (docs/search-index.md § The object
//! tier) against the scan, across servers: three real servers on one
//! bucket, one indexing (`index_min_files = 0`), one scanning
//! (`[search] index = false`) and one more that makes half of the changes.
//! Random writes, edits, deletes and moves, made through the indexing
//! server or the other one, interleaved with random Greps: the indexing
//! server's matches and summaries must equal the scanning server's every
//! time, including after files it indexed were changed by another server.
//! Then the indexing server is killed (SIGKILL) at random points of the
//! merges and saves that Greps of new files start, and its answers after
//! each restart must still be equal. Last it is killed after a save and
//! restarted: it loads
//! the index it kept in its data directory, more changes are made through
//! the other server, and its first Greps rule out files it has not read
//! since the restart, with answers still equal. Narrowed Greps walk the
//! namespace's path table, taken once and then advanced by the catalog's
//! changes.

use super::search_index::{
    Op, answer, change, needle_files, paths, random_grep, random_op, random_text, seed,
    skipped_files, without_the_victims_trigrams, writes_and_edits_are_learned,
};
use super::search_index_learning::changes_are_learned;
use crate::util::Server;
use agentvfs::pb;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A server configuration: State at `/`, the object tier at `/shared`
/// under `key_prefix`, and `search`'s `[search]` table.
fn config(search: &str, key_prefix: &str) -> String {
    let bucket = crate::s3::s3().bucket("agentvfs-it");
    format!(
        "{search}\n\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n[[mount]]\n\
         prefix = \"/shared\"\ntier = \"object\"\nbucket = \"{bucket}\"\n\
         key_prefix = \"{key_prefix}\"\npath_style = true\n"
    )
}

#[tokio::test]
async fn indexed_grep_on_the_object_tier_equals_the_scan_across_servers() {
    let seed = seed("object");
    let prefix = format!("idx-{:016x}", rand::random::<u64>());
    let mut indexing = Server::start_with(
        Some(&config(
            "[search]\nindex = true\nindex_min_files = 0",
            &prefix,
        )),
        &[],
    );
    let scanning = Server::start_with(Some(&config("[search]\nindex = false", &prefix)), &[]);
    let other = Server::start_with(Some(&config("[search]\nindex = false", &prefix)), &[]);
    let (mut a, mut scan, mut b) = (indexing.fs().await, scanning.fs().await, other.fs().await);
    let mut rng = StdRng::seed_from_u64(seed);
    let root = "/shared/t";
    for i in 0..120 {
        let op = Op::Write(format!("{root}/bulk/{i:03}.txt"), random_text(&mut rng));
        change(&mut b, &op).await;
    }
    let mut greps = 0;
    for round in 0..25 {
        for _ in 0..rng.random_range(1..5) {
            let op = random_op(&mut rng, root);
            let writer = if rng.random_bool(0.5) { &mut a } else { &mut b };
            change(writer, &op).await;
        }
        for _ in 0..rng.random_range(1..4) {
            let req = random_grep(&mut rng, root);
            let indexed = answer(&mut a, &req).await;
            let scanned = answer(&mut scan, &req).await;
            assert_eq!(indexed, scanned, "seed {seed} round {round}: {req:?}");
            greps += 1;
        }
    }
    assert!(greps > 0);
    // The index did rule files out (the comparison is not scan vs scan).
    let logs = indexing.logs.lock().unwrap().clone();
    assert!(
        skipped_files(&logs) > 0,
        "seed {seed}: the index never skipped a file"
    );
    // Narrowed Greps walked the path table, and brought it up to date
    // with changes made through both servers (docs/search-index.md § The
    // object tier's path table).
    for walked in ["path table taken", "path table advanced"] {
        assert!(logs.contains(walked), "seed {seed}: never {walked}");
    }
    assert!(!scanning.logs.lock().unwrap().contains("search index"));
    let whole = pb::GrepRequest {
        pattern: "zzz_absent".into(),
        path: root.into(),
        literal: true,
        ..Default::default()
    };
    // kill -9 at a random point of the merges and saves that Greps of new
    // files start: whatever was kept (the old copy, the new one or none)
    // is loaded or learned anew, and the answers stay the scan's.
    for crash in 0..3 {
        for i in 0..60 {
            let op = Op::Write(format!("{root}/c{crash}/{i:02}.txt"), random_text(&mut rng));
            change(&mut b, &op).await;
        }
        let indexed = answer(&mut a, &whole).await;
        assert_eq!(indexed, answer(&mut scan, &whole).await, "seed {seed}");
        tokio::time::sleep(std::time::Duration::from_millis(rng.random_range(0..60))).await;
        indexing.crash_and_restart();
        a = indexing.fs().await;
        for req in [whole.clone(), random_grep(&mut rng, root)] {
            let indexed = answer(&mut a, &req).await;
            let scanned = answer(&mut scan, &req).await;
            assert_eq!(indexed, scanned, "seed {seed} crash {crash}: {req:?}");
        }
    }
    // Kept across a crash: a Grep of the whole tree learns new files, and
    // its merge saves the index.
    for i in 0..60 {
        let op = Op::Write(format!("{root}/last/{i:02}.txt"), random_text(&mut rng));
        change(&mut b, &op).await;
    }
    assert_eq!(
        answer(&mut a, &whole).await,
        answer(&mut scan, &whole).await
    );
    let patience = std::time::Duration::from_secs(30);
    assert!(
        indexing
            .wait_for_log("search index persisted", patience)
            .await,
        "seed {seed}: the index was never saved"
    );
    indexing.crash_and_restart();
    let mut a = indexing.fs().await;
    for round in 0..3 {
        for _ in 0..rng.random_range(1..5) {
            change(&mut b, &random_op(&mut rng, root)).await;
        }
        for req in [whole.clone(), random_grep(&mut rng, root)] {
            let indexed = answer(&mut a, &req).await;
            let scanned = answer(&mut scan, &req).await;
            assert_eq!(indexed, scanned, "seed {seed} restarted {round}: {req:?}");
        }
    }
    let logs = indexing.logs.lock().unwrap().clone();
    assert!(
        logs.contains("search index loaded"),
        "seed {seed}: not loaded"
    );
    assert!(
        skipped_files(&logs) > 0,
        "seed {seed}: the loaded index never skipped a file"
    );
}

/// A server alone on a key prefix of its own, indexing every namespace
/// (`index_min_files = 0`), with no self-check.
fn indexing_alone() -> Server {
    let prefix = format!("idx-{:016x}", rand::random::<u64>());
    let search = "[search]\nindex = true\nindex_min_files = 0\nindex_self_check = 0";
    Server::start_with(Some(&config(search, &prefix)), &[])
}

/// A Write and an Edit on the object tier teach the index the version
/// they committed, as on State and the Store (docs/search-index.md
/// § Learning in the write path); so do a Copy, a Move of a file and of a
/// directory, a changeset, a Restore and a small streamed write.
#[tokio::test]
async fn object_writes_and_edits_are_learned_before_any_grep_reads_them() {
    let server = indexing_alone();
    writes_and_edits_are_learned(&server, "/shared/w", 0).await;
    // The namespace's index is in use since the first check: the writes
    // below teach it before any Grep.
    changes_are_learned(&server, "/shared/c", 2, 0).await;
}

/// A narrowed Grep of a directory that holds a small share of the
/// namespace walks the catalog, reading only that directory's heads,
/// instead of taking a path table from every head; a Grep of the whole
/// tree then takes one (docs/search-index.md § The object tier's path
/// table).
#[tokio::test]
async fn a_grep_of_a_small_directory_takes_no_path_table() {
    let server = indexing_alone();
    let mut fs = server.fs().await;
    for i in 0..40 {
        crate::util::write(&mut fs, &format!("/shared/p/big/{i:02}.txt"), "hay\n").await;
    }
    let (expected, small) = needle_files(&mut fs, "/shared/p/small", 8).await;
    for _ in 0..3 {
        let (matches, _) = answer(&mut fs, &small).await.unwrap();
        assert_eq!(paths(matches), expected);
    }
    let logs = server.logs.lock().unwrap().clone();
    assert!(skipped_files(&logs) > 0, "the index never narrowed a Grep");
    assert!(logs.contains("path table not taken for a small directory"));
    assert!(!logs.contains("path table taken"));
    let whole = pb::GrepRequest {
        path: "/shared/p".into(),
        ..small
    };
    for _ in 0..2 {
        let (matches, _) = answer(&mut fs, &whole).await.unwrap();
        assert_eq!(paths(matches), expected);
    }
    let logs = server.logs.lock().unwrap().clone();
    assert!(logs.contains("path table taken"));
}

/// The kept index files below `dir`, recursively.
fn kept_indexes(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(kept_indexes(&path));
        } else if path.extension().is_some_and(|e| e == "avix") {
            out.push(path);
        }
    }
    out
}

/// A bug keeps an object-tier index that decodes but rules out a matching
/// file: one Grep answers wrong, and the self-check (a scan, the indexed
/// run, a scan again, judged when both scans agree) finds it, logs it,
/// switches the namespace's index off and drops its kept copy.
#[tokio::test]
async fn a_wrong_object_index_is_caught_by_the_self_check() {
    let prefix = format!("idx-{:016x}", rand::random::<u64>());
    let search = "[search]\nindex = true\nindex_min_files = 0\nindex_self_check = 1.0";
    let mut server = Server::start_with(Some(&config(search, &prefix)), &[]);
    let mut fs = server.fs().await;
    let (expected, grep) = needle_files(&mut fs, "/shared/c", 120).await;
    for _ in 0..3 {
        let (matches, _) = crate::util::grep_all(&mut fs, grep.clone()).await.unwrap();
        assert_eq!(paths(matches), expected);
    }
    let patience = std::time::Duration::from_secs(20);
    assert!(
        server
            .wait_for_log("search index persisted", patience)
            .await
    );
    server.kill();
    let victim = "/shared/c/007.txt";
    let kept = kept_indexes(server.data_dir());
    assert_eq!(kept.len(), 1, "{kept:?}");
    {
        let bytes = std::fs::read(&kept[0]).unwrap();
        // The keeper's header: the key's length (2 bytes) and the key.
        let header = 2 + u16::from_le_bytes([bytes[0], bytes[1]]) as usize;
        let index = without_the_victims_trigrams(&bytes[header..]);
        let tampered = [&bytes[..header], &index].concat();
        std::fs::write(&kept[0], tampered).unwrap();
    }
    server.crash_and_restart();
    fs = server.fs().await;
    let (matches, _) = crate::util::grep_all(&mut fs, grep.clone()).await.unwrap();
    let wrong: Vec<String> = expected.iter().filter(|p| *p != victim).cloned().collect();
    assert_eq!(paths(matches), wrong, "the tampered index was not used");
    let failed = "search index self-check failed";
    assert!(server.wait_for_log(failed, patience).await);
    let logs = server.logs.lock().unwrap().clone();
    let line = logs.lines().find(|l| l.contains(failed)).unwrap();
    assert!(
        line.contains("WARN") && line.contains("mismatches=1"),
        "{line}"
    );
    for _ in 0..2 {
        let (matches, summary) = crate::util::grep_all(&mut fs, grep.clone()).await.unwrap();
        assert_eq!(paths(matches), expected);
        assert_eq!(summary.files_searched, 120);
    }
    // The index is off: nothing more is narrowed, and the copy is gone.
    let logs = server.logs.lock().unwrap().clone();
    let after = &logs[logs.find(failed).unwrap()..];
    assert!(!after.contains("search index narrowed a grep"), "{after}");
    assert!(kept_indexes(server.data_dir()).is_empty());
}
