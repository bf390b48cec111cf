//! The search index on the Filesystem tier (docs/search-index.md § The
//! Filesystem tier) against the scan: two real servers over one real
//! directory, one indexing (`index_min_files = 0`), one scanning
//! (`[search] index = false`). The test process, another program to both,
//! changes the tree on disk behind their backs: new files, rewrites of the
//! same size (the change metadata must still tell), appends, truncations,
//! deletes, renames of files and directories; the indexing server makes
//! changes of its own too. Pauses let files settle so the index learns
//! them, and rewrites right after a Grep learned a file change what the
//! index holds. The indexing server is killed with SIGKILL while Greps
//! learn, merge and persist, and restarted on its persisted index. Every
//! Grep's matches and summary must equal the scanning server's.
//!
//! Narrowed Greps with few candidates walk the mount's path table, which
//! inotify keeps (src/backend/fs/mirror/): so the changes also make empty
//! directories, links and a pipe (no table while it exists), and the
//! watcher's events are lost for real now and then (the server stopped
//! while more changes are made than the kernel queues), after which the
//! mirror is built again while Greps walk the tree.
//!
//! One part of a summary is compared only for Greps that ran to the end:
//! when a budget stops a Grep on this tier, the files its parallel workers
//! had finished by then are counted (searched, binary, too large), which
//! depends on timing with or without the index (two scans differ there
//! too); and when a Grep with `max_results` stops, so does how far the
//! walk got (visited, hidden, ignored) and whether the result limit or the
//! visited budget came first. Matches and `matched` are compared always.

use super::search_index::{
    Op, change, glob_answer, random_glob, random_grep, random_path, random_text, seed,
    skipped_files,
};
use crate::util::Server;
use agentvfs::pb;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a file must rest before the index learns it, with a margin
/// (`SETTLED_AFTER` in src/backend/fs/fingerprint.rs).
const SETTLE: Duration = Duration::from_millis(1_100);

/// A Grep's answer as `search_index::answer` gives it, with the counts that
/// depend on the workers' timing cleared when a budget stopped the Grep.
async fn answer(
    fs: &mut pb::filesystem_client::FilesystemClient<tonic::transport::Channel>,
    req: &pb::GrepRequest,
) -> Result<(Vec<pb::GrepMatch>, pb::SearchSummary), (tonic::Code, String)> {
    let mut answer = super::search_index::answer(fs, req).await;
    if let Ok((_, summary)) = &mut answer
        && summary.aborted_reason != pb::AbortedReason::Unspecified as i32
    {
        summary.files_searched = 0;
        summary.skipped_binary = 0;
        summary.skipped_too_large = 0;
        // Which budget stops first, and where, races when results count.
        if req.max_results > 0 {
            summary.aborted_reason = pb::AbortedReason::Limit as i32;
            summary.visited = 0;
            summary.skipped_hidden = 0;
            summary.skipped_ignored = 0;
        }
    }
    answer
}

fn config(search: &str, root: &Path) -> String {
    format!(
        "[search]\n{search}\n\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n\
         [[mount]]\nprefix = \"/w\"\ntier = \"filesystem\"\nroot = \"{}\"\n",
        root.display()
    )
}

/// The files below `dir`, recursively.
fn files_below(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => out.extend(files_below(&path)),
            Ok(t) if t.is_file() => out.push(path),
            _ => {}
        }
    }
    out.sort();
    out
}

/// Removes every pipe below `dir` (one moves with its directory).
fn remove_pipes(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        match entry.file_type() {
            Ok(t) if t.is_dir() => remove_pipes(&entry.path()),
            Ok(t) if std::os::unix::fs::FileTypeExt::is_fifo(&t) => {
                let _ = std::fs::remove_file(entry.path());
            }
            _ => {}
        }
    }
}

/// One change made on disk by this process, as another program would.
fn change_on_disk(rng: &mut StdRng, disk: &Path) {
    let files = files_below(disk);
    let pick = |rng: &mut StdRng| files.get(rng.random_range(0..files.len().max(1))).cloned();
    let on_disk = |logical: String| disk.join(logical.trim_start_matches("/w/t/"));
    match rng.random_range(0..13) {
        0..=2 => {
            let path = on_disk(random_path(rng, "/w/t"));
            let _ = std::fs::create_dir_all(path.parent().unwrap());
            let _ = std::fs::write(&path, random_text(rng));
        }
        3..=4 => {
            // Same size, other content: only the times tell.
            if let Some(path) = pick(rng)
                && let Ok(old) = std::fs::read(&path)
            {
                let new: Vec<u8> = old
                    .iter()
                    .map(|b| match b {
                        b'a'..=b'y' => b + 1,
                        b'z' => b'n',
                        other => *other,
                    })
                    .collect();
                let _ = std::fs::write(&path, new);
            }
        }
        5 => {
            if let Some(path) = pick(rng) {
                let mut file = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .unwrap();
                let _ = std::io::Write::write_all(&mut file, b"appended needle line\n");
            }
        }
        6 => {
            if let Some(path) = pick(rng) {
                let _ = std::fs::remove_file(path);
            }
        }
        7 => {
            if let Some(path) = pick(rng) {
                let to = on_disk(random_path(rng, "/w/t"));
                let _ = std::fs::create_dir_all(to.parent().unwrap());
                let _ = std::fs::rename(path, to);
            }
        }
        8 => {
            // A whole directory moves, or goes.
            let dirs = ["d1", "d2", "d1/sub", "d2/deep", ".hidden", "node_modules"];
            let from = disk.join(dirs[rng.random_range(0..dirs.len())]);
            if rng.random_bool(0.3) {
                let _ = std::fs::remove_dir_all(from);
            } else {
                let to = disk.join(dirs[rng.random_range(0..dirs.len())]);
                let _ = std::fs::rename(from, to);
            }
        }
        9 => {
            if let Some(path) = pick(rng) {
                let _ = std::fs::File::create(path);
            }
        }
        10 => {
            // An empty directory: the walk visits it, the table holds a
            // row for it (src/backend/fs/mirror/).
            let path = on_disk(random_path(rng, "/w/t"));
            let _ = std::fs::create_dir_all(path);
        }
        11 => {
            // A link: visited, never searched.
            let path = on_disk(random_path(rng, "/w/t"));
            let _ = std::fs::create_dir_all(path.parent().unwrap());
            let _ = std::os::unix::fs::symlink("../bulk/000.txt", path);
        }
        _ => {
            // A pipe comes or goes: the table is not used while the tree
            // holds one (the tree's walk visits it; a table has no row).
            let fifo = disk.join("d1/pipe");
            if std::fs::remove_file(&fifo).is_err() {
                let _ = std::fs::create_dir_all(disk.join("d1"));
                let _ = rustix::fs::mknodat(
                    rustix::fs::CWD,
                    &fifo,
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(0o600),
                    0,
                );
            }
        }
    }
}

/// Loses the indexing server's watcher events for real: the server is
/// stopped (SIGSTOP) while more changes are made than the kernel queues
/// for one inotify instance (`/proc/sys/fs/inotify/max_queued_events`),
/// then resumed. Its mirror sees the overflow and is built again.
fn overflow_watch(server: u32, disk: &Path) {
    let queued: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(16_384);
    let pid = rustix::process::Pid::from_raw(server as i32).expect("a pid");
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).expect("SIGSTOP");
    // Stopped: state `T` in /proc (a thread woken just then would drain).
    let stat = format!("/proc/{server}/stat");
    while !std::fs::read_to_string(&stat).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('T'))
    }) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // In a directory watched already: a directory made now would have no
    // watch to report to.
    let files: Vec<std::fs::File> = (0..2)
        .map(|i| std::fs::File::create(disk.join(format!("churn{i}.log"))).unwrap())
        .collect();
    // Alternating files: the kernel merges only an event equal to the
    // last one queued.
    // Twice what the queue holds: whatever was read before the stop.
    for n in 0..2 * queued {
        let _ = std::os::unix::fs::FileExt::write_at(&files[n % 2], b"churn\n", 0);
    }
    drop(files);
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).expect("SIGCONT");
}

/// Rewrites a few files as fast as it can, the same size each time,
/// alternating text with and without the word `quartz` (in no other
/// file, so the index narrows its Greps and learns), until `stop`: many
/// of the rewrites fall within one tick of the file system's clock.
fn hammer(disk: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let hot = disk.join("hot");
    std::fs::create_dir_all(&hot).unwrap();
    std::thread::spawn(move || {
        let mut n: u64 = 0;
        while !stop.load(Ordering::Relaxed) {
            let text = if n.is_multiple_of(2) {
                "a quartz\n"
            } else {
                "a quarts\n"
            };
            let _ = std::fs::write(hot.join(format!("{}.txt", n % 3)), text);
            n += 1;
        }
    })
}

#[tokio::test]
async fn indexed_grep_on_the_filesystem_tier_equals_the_scan_under_outside_changes() {
    let seed = seed("filesystem");
    let rounds: usize = std::env::var("AGENTVFS_INDEX_SOAK")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(24);
    let served = tempfile::tempdir().unwrap();
    let disk = served.path().join("t");
    std::fs::create_dir_all(&disk).unwrap();
    let mut indexing = Server::start_with(
        Some(&config(
            "index_min_files = 0\nindex_self_check = 0",
            served.path(),
        )),
        &[],
    );
    let scanning = Server::start_with(Some(&config("index = false", served.path())), &[]);
    let (mut a, mut scan) = (indexing.fs().await, scanning.fs().await);
    let mut rng = StdRng::seed_from_u64(seed);
    let root = "/w/t";
    // Enough files for the overlay to pass a merge.
    for i in 0..300 {
        let path = disk.join(format!("bulk/{i:03}.txt"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, random_text(&mut rng)).unwrap();
    }
    let mut logs = String::new();
    let mut greps = 0;
    let mut overflowed = false;
    for round in 0..rounds {
        if round % 3 == 0 {
            // Let what changed settle, so the next Greps learn it.
            tokio::time::sleep(SETTLE).await;
        }
        for _ in 0..rng.random_range(1..5) {
            change_on_disk(&mut rng, &disk);
        }
        if rng.random_ratio(1, 3) {
            let op = Op::Write(random_path(&mut rng, root), random_text(&mut rng));
            change(&mut a, &op).await;
        }
        for _ in 0..rng.random_range(1..4) {
            let req = random_grep(&mut rng, root);
            let indexed = answer(&mut a, &req).await;
            let scanned = answer(&mut scan, &req).await;
            assert_eq!(indexed, scanned, "seed {seed} round {round}: {req:?}");
            greps += 1;
            let glob = random_glob(&mut rng, root);
            let indexed = glob_answer(&mut a, &glob).await;
            let scanned = glob_answer(&mut scan, &glob).await;
            assert_eq!(indexed, scanned, "seed {seed} round {round}: {glob:?}");
            // Change files the Grep may just have learned, at once.
            if rng.random_ratio(1, 2) {
                change_on_disk(&mut rng, &disk);
                let indexed = answer(&mut a, &req).await;
                let scanned = answer(&mut scan, &req).await;
                assert_eq!(indexed, scanned, "seed {seed} round {round}: {req:?}");
            }
        }
        if round % 4 == 2 {
            // Greps (learning) while files change within clock ticks; then
            // the final state must be searched, not what was learned.
            let stop = Arc::new(AtomicBool::new(false));
            let writer = hammer(&disk, stop.clone());
            let hot = pb::GrepRequest {
                pattern: "quartz".into(),
                path: format!("{root}/hot"),
                ..Default::default()
            };
            for _ in 0..20 {
                let _ = answer(&mut a, &hot).await;
            }
            stop.store(true, Ordering::Relaxed);
            writer.join().unwrap();
            let indexed = answer(&mut a, &hot).await;
            assert_eq!(
                indexed,
                answer(&mut scan, &hot).await,
                "seed {seed} round {round}"
            );
        }
        if round % 8 == 5 {
            // A Grep the index narrows to no file asks for the mirror;
            // once it is built, its events are lost, and the next such
            // Grep finds that out.
            let none = pb::GrepRequest {
                pattern: "zzz_absent".into(),
                path: root.into(),
                literal: true,
                ..Default::default()
            };
            let patience = Duration::from_secs(30);
            // With no pipe and every file settled and learned, it selects
            // no file, so it walks the table: whatever the random Greps
            // selected before.
            remove_pipes(&disk);
            tokio::time::sleep(SETTLE).await;
            let _ = answer(&mut a, &none).await;
            assert!(
                indexing
                    .wait_for_log("search index mirror built", patience)
                    .await,
                "seed {seed}: the mirror was never built"
            );
            let indexed = answer(&mut a, &none).await;
            assert_eq!(indexed, answer(&mut scan, &none).await, "seed {seed}");
            // A Glob of the whole tree walks the table too, paths only or
            // with each entry's metadata.
            let every = pb::GlobRequest {
                pattern: "**".into(),
                path: root.into(),
                paths_only: true,
                ..Default::default()
            };
            for paths_only in [true, false] {
                let every = pb::GlobRequest {
                    paths_only,
                    ..every.clone()
                };
                let indexed = glob_answer(&mut a, &every).await;
                assert_eq!(indexed, glob_answer(&mut scan, &every).await, "seed {seed}");
            }
            overflow_watch(indexing.pid(), &disk);
            let indexed = answer(&mut a, &none).await;
            assert_eq!(indexed, answer(&mut scan, &none).await, "seed {seed}");
            let indexed = glob_answer(&mut a, &every).await;
            assert_eq!(indexed, glob_answer(&mut scan, &every).await, "seed {seed}");
            assert!(
                indexing
                    .wait_for_log("search index mirror lost events", patience)
                    .await,
                "seed {seed}: the lost events went unseen"
            );
            overflowed = true;
        }
        if round % 8 == 7 {
            // A Grep of the whole tree learns and merges; crash at a random
            // point of the merge and the save, then go on from what was kept.
            let whole = pb::GrepRequest {
                pattern: "needle".into(),
                path: root.into(),
                ..Default::default()
            };
            let indexed = answer(&mut a, &whole).await;
            assert_eq!(indexed, answer(&mut scan, &whole).await, "seed {seed}");
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..60))).await;
            logs.push_str(&indexing.logs.lock().unwrap());
            indexing.crash_and_restart();
            a = indexing.fs().await;
        }
    }
    assert!(greps > 0);
    logs.push_str(&indexing.logs.lock().unwrap());
    // The index did rule files out (the comparison is not scan vs scan),
    // was merged, persisted and loaded again after a crash.
    assert!(
        skipped_files(&logs) > 0,
        "seed {seed}: the index never skipped a file"
    );
    // The mirror was built, walked, lost events and was built again.
    assert!(overflowed, "seed {seed}: no round lost the mirror's events");
    for step in [
        "search index merged",
        "search index persisted",
        "search index loaded",
        "search index mirror built",
        "search index walk counts",
        "search index mirror lost events",
        "glob walked the mirror's table",
    ] {
        assert!(logs.contains(step), "seed {seed}: no {step}");
    }
    assert!(!scanning.logs.lock().unwrap().contains("search index"));
}

/// A Grep that walks the mount's table holds no candidate whole unless it
/// learns it: a 48 MiB file, too large to index and so a candidate of every
/// narrowed Grep, is searched as a stream, as the tree's walk searches it
/// (src/backend/fs/grep_file.rs). Reading it whole raised the server's
/// peak by the file's size at each such Grep.
#[tokio::test]
async fn a_table_walk_streams_a_large_candidate() {
    let served = tempfile::tempdir().unwrap();
    let disk = served.path().join("t");
    for i in 0..100 {
        let path = disk.join(format!("small/{i:03}.txt"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("small file {i}\n")).unwrap();
    }
    std::fs::write(
        disk.join("large.log"),
        "a line of the log\n".repeat(48 << 16),
    )
    .unwrap();
    tokio::time::sleep(SETTLE).await;
    let server = Server::start_with(
        Some(&config(
            "index_min_files = 0\nindex_self_check = 0",
            served.path(),
        )),
        &[],
    );
    let mut fs = server.fs().await;
    let absent = pb::GrepRequest {
        pattern: "zzz_absent".into(),
        path: "/w/t".into(),
        literal: true,
        ..Default::default()
    };
    // Learns the small files and asks for the mirror.
    let (matches, first) = answer(&mut fs, &absent).await.unwrap();
    assert!(matches.is_empty());
    assert!(
        server
            .wait_for_log("search index mirror built", Duration::from_secs(30))
            .await
    );
    let before = server.memory_kib("VmHWM");
    let (matches, walked) = answer(&mut fs, &absent).await.unwrap();
    assert_eq!((matches, walked), (Vec::new(), first));
    assert!(
        server
            .logs
            .lock()
            .unwrap()
            .contains("search index walk counts"),
        "the Grep did not walk the table"
    );
    let grown_kib = server.memory_kib("VmHWM").saturating_sub(before);
    assert!(
        grown_kib < 24 * 1024,
        "the server's peak grew by {grown_kib} KiB for a 48 MiB candidate"
    );
}
