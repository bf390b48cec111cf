//! `cargo bench --bench index`: Grep with the search index (docs/search-index.md)
//! against the same Grep scanning and against `rg`, on a source tree loaded
//! into the State and Store tiers of two servers (one with
//! `[search] index = false`), printed as a markdown table.
//!
//! Corpus: `AGENTVFS_INDEX_CORPUS=DIR`, else Debian's `linux-source-6.1`
//! (installed with `apt-get` when missing and unpacked once under the target
//! directory). Only UTF-8 files up to 1 MiB are loaded (Write takes text);
//! `rg` searches the same files from a copy on disk, which both servers also
//! serve as a Filesystem mount.
//!
//! `AGENTVFS_BENCH_TIERS` (comma-separated: `state`, `store`, `filesystem`;
//! default all) picks the tiers loaded, searched and restarted.
//!
//! Rows (`AGENTVFS_BENCH_RUNS` runs per query and side, default 5): per
//! query class, Grep p50/p95 over gRPC indexed and scanning, and `rg`
//! on the same files; hits and summaries are compared (they must be equal).
//! `AGENTVFS_BENCH_QUERIES=1` also prints each query's p50s and hit count
//! to stderr, to tell which queries set a class's median, each followed by
//! what the indexed server logged meanwhile (`AGENTVFS_BENCH_LOG` sets its
//! filter, e.g. `agentvfs=info`; warnings only by default);
//! `AGENTVFS_BENCH_HOLD=SECONDS` keeps the loaded servers up that long
//! after the tables, for profiling by hand.
//! The servers' self-check is off and the learning Greps are followed by a
//! wait until the indexed server is idle, so no background merge or check
//! shares the cores with the measured Greps.
//! Then the cold start of the Store and of the Filesystem mount: the
//! indexed server restarted on its persisted index (docs/search-index.md
//! § Persistence, § The Filesystem tier), timed from the start of the
//! process to the first selective Grep answered, against the same restart
//! of the unindexed server (same files, no persisted index). Then the index built in-process from the corpus: size against
//! the corpus and build speed on one core.

mod support;

use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use agentvfs::search::index::segment::{Doc, Segment};
use agentvfs::search::index::{MAX_LEARN_BYTES, trigram};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::Served;
use tonic::transport::Channel;

/// Largest file loaded.
const MAX_FILE: u64 = 1 << 20;
/// Budgets that never cut a benchmark short.
const UNLIMITED: u64 = 1 << 40;
/// Results a Grep stops at: dense queries over the whole kernel would
/// otherwise hold gigabytes of matching lines in the client (both sides stop
/// at the same result, so they still do the same work).
const MAX_RESULTS: u64 = 100_000;

/// (class, pattern, literal, case_insensitive).
const QUERIES: &[(&str, &str, bool, bool)] = &[
    ("selective literal", "hello world", true, false),
    ("selective literal", "EXPORT_SYMBOL_GPL(kvm_", true, false),
    ("selective literal", "frobnicate", true, false),
    ("selective literal", "This is the Linux kernel", true, false),
    ("selective literal", "unreachable_code_here", true, false),
    ("selective literal", "MODULE_AUTHOR(\"Linus", true, false),
    ("selective literal", "deadbeefcafe", true, false),
    ("selective literal", "struct serde_json", true, false),
    ("selective regex", r"fn\s+parse_[a-z]+_header", false, false),
    (
        "selective regex",
        r"kmalloc_array\([a-z_]+, sizeof",
        false,
        false,
    ),
    (
        "selective regex",
        r"(spin|mutex)_lock_irqsave_nested",
        false,
        false,
    ),
    ("selective regex", r"0x[dD][eE][aA][dD]", false, false),
    (
        "selective regex",
        r"CONFIG_[A-Z_]+_DEBUG_FS\b",
        false,
        false,
    ),
    (
        "selective regex",
        r"impl\s+Drop\s+for\s+Served",
        false,
        false,
    ),
    ("-i", "hello world", false, true),
    ("-i", "copyright holder", false, true),
    ("-i", "frobnicate", false, true),
    ("-i", "Panic_On_Oops", false, true),
    ("-i", "undefined behaviour", false, true),
    ("-i", "todo: remove", false, true),
    ("medium", "static inline", true, false),
    ("medium", "#include <linux/slab.h>", true, false),
    ("medium", r"pub fn new\(", false, false),
    ("medium", "GPL-2.0", true, false),
    ("medium", "unsafe", true, false),
    ("dense", "return", true, false),
    ("dense", "the", true, false),
    ("unindexable", r"\w+\(\)", false, false),
    ("unindexable", "[{}]", false, false),
    ("unindexable", "x", false, false),
];

/// The corpus directory: given, or linux-source-6.1 unpacked once.
fn corpus() -> PathBuf {
    if let Ok(dir) = std::env::var("AGENTVFS_INDEX_CORPUS") {
        return PathBuf::from(dir);
    }
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let out = Path::new(&target).join("index-corpus");
    let tree = out.join("linux-source-6.1");
    if tree.is_dir() {
        return tree;
    }
    let tarball = Path::new("/usr/src/linux-source-6.1.tar.xz");
    if !tarball.exists() {
        let ok = Command::new("apt-get")
            .args(["install", "-y", "linux-source-6.1"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "apt-get install linux-source-6.1 failed; set AGENTVFS_INDEX_CORPUS"
        );
    }
    std::fs::create_dir_all(&out).expect("corpus dir");
    let ok = Command::new("tar")
        .arg("-xf")
        .arg(tarball)
        .arg("-C")
        .arg(&out)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "unpacking {} failed", tarball.display());
    tree
}

/// (relative path, text) of every loadable file, in path order.
fn load_files(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file()
                && entry.metadata().is_ok_and(|m| m.len() <= MAX_FILE)
                && let Ok(text) = std::fs::read_to_string(&path)
                && let Ok(rel) = path.strip_prefix(root)
                && let Some(rel) = rel.to_str()
                && agentvfs::VfsPath::parse(&format!("/{rel}")).is_ok()
            {
                out.push((rel.to_owned(), text));
            }
        }
    }
    out.sort();
    out
}

async fn client(served: &Served) -> FilesystemClient<Channel> {
    FilesystemClient::connect(served.url())
        .await
        .expect("connect")
        .max_decoding_message_size(256 << 20)
}

/// A server with the index on or off: State at `/`, a Store at
/// `/memories`, and a Filesystem mount of the corpus's copy on disk at `/fs`
/// (journal and index in the server's own directory).
fn server(dir: &Path, name: &str, index: bool) -> Served {
    let home = dir.join(name);
    std::fs::create_dir_all(&home).unwrap();
    let config = format!(
        "max_file_bytes = 67108864\n[state]\nmax_total_bytes = 17179869184\n\
         [search]\nindex = {index}\nindex_self_check = 0\n\
         [[mount]]\nprefix = \"/\"\ntier = \"state\"\n\
         [[mount]]\nprefix = \"/memories\"\ntier = \"store\"\npath = {:?}\n\
         [[mount]]\nprefix = \"/fs\"\ntier = \"filesystem\"\nroot = {:?}\npath = {:?}\n",
        home.join("store"),
        dir.join("disk"),
        home.join("journal")
    );
    let file = home.join("agentvfs.toml");
    std::fs::write(&file, config).unwrap();
    Served::start([std::ffi::OsStr::new("--config"), file.as_os_str()], &home)
}

async fn load(served: &Served, root: &str, files: &[(String, String)]) {
    let clients = futures_util::future::join_all((0..8).map(|_| client(served))).await;
    let files = std::sync::Arc::new(files.to_vec());
    let root = root.to_owned();
    support::spread_calls(clients, files.len(), move |mut fs, i| {
        let files = files.clone();
        let root = root.clone();
        async move {
            let (rel, text) = &files[i];
            fs.write(pb::WriteRequest {
                path: format!("{root}/{rel}"),
                content: text.clone(),
                ..Default::default()
            })
            .await
            .expect("write");
        }
    })
    .await;
}

/// One Grep's matches, summary (elapsed zeroed) and time.
async fn grep(
    fs: &mut FilesystemClient<Channel>,
    root: &str,
    q: &(&str, &str, bool, bool),
) -> (Vec<pb::GrepMatch>, pb::SearchSummary, Duration) {
    let start = Instant::now();
    let req = pb::GrepRequest {
        pattern: q.1.into(),
        path: root.into(),
        literal: q.2,
        case_insensitive: q.3,
        max_visited: UNLIMITED,
        max_results: MAX_RESULTS,
        max_duration_ms: 600_000,
        include_hidden: true,
        include_ignored: true,
        ..Default::default()
    };
    let mut stream = fs.grep(req).await.expect("grep").into_inner();
    let mut matches = Vec::new();
    let mut summary = None;
    while let Some(msg) = stream.message().await.expect("grep stream") {
        match msg.result.expect("result") {
            pb::grep_response::Result::Batch(b) => matches.extend(b.matches),
            pb::grep_response::Result::Summary(s) => summary = Some(s),
        }
    }
    let mut summary = summary.expect("summary");
    summary.elapsed_ms = 0;
    (matches, summary, start.elapsed())
}

/// A Filesystem Grep stopped by `max_results` counts the files its
/// parallel workers had finished by then, and how far its walk got, which
/// depends on timing with or without the index (tests/it/search_index_fs.rs
/// compares the same way): those counts are cleared before comparing.
fn parallel_counts_cleared(summary: &mut pb::SearchSummary) {
    if summary.aborted_reason == pb::AbortedReason::Limit as i32 {
        summary.visited = 0;
        summary.files_searched = 0;
        summary.skipped_binary = 0;
        summary.skipped_too_large = 0;
        summary.skipped_hidden = 0;
        summary.skipped_ignored = 0;
    }
}

fn rg(dir: &Path, q: &(&str, &str, bool, bool)) -> Duration {
    let start = Instant::now();
    let mut cmd = Command::new("rg");
    cmd.args(["-n", "--hidden", "--no-ignore", "-uu", "--no-messages"]);
    if q.2 {
        cmd.arg("-F");
    }
    if q.3 {
        cmd.arg("-i");
    }
    cmd.arg("-e")
        .arg(q.1)
        .arg(dir)
        .stdout(std::process::Stdio::null());
    cmd.status()
        .unwrap_or_else(|e| panic!("cannot run rg: {e} (cargo install ripgrep)"));
    start.elapsed()
}

/// A restart timed: from the process's start to serving, to the first
/// Grep's answer, and the second Grep's own time.
struct ColdStart {
    ready: Duration,
    first: Duration,
    second: Duration,
    answer: (Vec<pb::GrepMatch>, pb::SearchSummary),
}

/// Starts the server of `name` (index on) and answers `q` twice under
/// `root`.
async fn cold_start(
    dir: &Path,
    name: &str,
    root: &str,
    q: &(&str, &str, bool, bool),
) -> (Served, ColdStart) {
    let start = Instant::now();
    let served = server(dir, name, true);
    let mut fs = client(&served).await;
    let ready = start.elapsed();
    let (matches, summary, _) = grep(&mut fs, root, q).await;
    let first = start.elapsed();
    let (_, _, second) = grep(&mut fs, root, q).await;
    let answer = (matches, summary);
    (
        served,
        ColdStart {
            ready,
            first,
            second,
            answer,
        },
    )
}

/// Waits (up to 10 minutes) until none of the processes `pids` runs a
/// background thread of the search index (merges, self-checks:
/// `search-index-*`) and each used under 5% of a core, for three seconds in
/// a row. (CPU use alone does not tell on a loaded machine, where a merge of
/// low priority gets next to none.) Both servers are waited for: after a
/// load, RocksDB compacts in the background, and the scanning server's
/// compactions took the cores from the first measured Greps of both (a
/// Store `frobnicate` at 27.6 ms in the first class, 2.6 ms as `-i` later).
async fn wait_idle(pids: &[u32]) {
    let start = Instant::now();
    let mut quiet = 0;
    // Three quiet seconds in a row: a learning Grep's last bookkeeping
    // can start a merge a second after the one before it ended (seen in a
    // State run, whose last merge then ran during the measured Greps).
    while quiet < 3 && start.elapsed() < Duration::from_secs(600) {
        let before: Vec<u64> = pids.iter().map(|&pid| cpu_ticks(pid)).collect();
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Clock ticks are 1/100 s on Linux.
        let idle = pids
            .iter()
            .zip(before)
            .all(|(&pid, before)| cpu_ticks(pid) - before < 5 && !indexing(pid));
        quiet = if idle { quiet + 1 } else { 0 };
    }
    eprintln!(
        "waited {:.0} s for the servers to go idle",
        start.elapsed().as_secs_f64()
    );
}

/// True while the process `pid` runs a thread of the search index.
fn indexing(pid: u32) -> bool {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("comm"))
            .is_ok_and(|name| name.starts_with("search-index"))
    })
}

/// CPU time (user and system, in clock ticks) the process `pid` used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 12th and 13th of them (proc(5)).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields
        .get(11..13)
        .map_or(0, |f| f.iter().filter_map(|t| t.parse::<u64>().ok()).sum())
}

fn pct(mut xs: Vec<f64>, p: f64) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[((xs.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let source = corpus();
    let files = load_files(&source);
    let bytes: usize = files.iter().map(|(_, t)| t.len()).sum();
    println!(
        "corpus: {} ({} files, {:.0} MB loadable)\n",
        source.display(),
        files.len(),
        bytes as f64 / 1e6
    );
    let tmp = tempfile::tempdir().expect("temp dir");
    // rg searches exactly the loaded files.
    let disk = tmp.path().join("disk");
    for (rel, text) in &files {
        let path = disk.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    // The index built in-process: size and build speed on one core.
    let start = Instant::now();
    let docs: Vec<Doc> = files
        .iter()
        .enumerate()
        .map(|(i, (rel, text))| Doc {
            key: agentvfs::path::order_key(&format!("/c/{rel}")),
            version: i as u64,
            trigrams: trigram::extract(text.as_bytes()).ok(),
        })
        .collect();
    let unindexed = docs.iter().filter(|d| d.trigrams.is_none()).count();
    let segment = Segment::build(docs);
    let build = start.elapsed();

    let only = std::env::var("AGENTVFS_BENCH_TIERS").unwrap_or_default();
    let chosen = |tag: &str| only.is_empty() || only.split(',').any(|t| t == tag);
    // (tier, its tag, the root searched).
    let tiers: Vec<(&str, &str)> = [
        ("State", "state", "/c"),
        ("Store", "store", "/memories/c"),
        ("Filesystem", "filesystem", "/fs"),
    ]
    .into_iter()
    .filter(|(_, tag, _)| chosen(tag))
    .map(|(tier, _, root)| (tier, root))
    .collect();
    let indexed = server(tmp.path(), "indexed", true);
    let scanned = server(tmp.path(), "scanned", false);
    let start = Instant::now();
    // The Filesystem mount serves the copy on disk: nothing to load.
    for (_, root) in tiers.iter().filter(|(_, root)| *root != "/fs") {
        load(&indexed, root, &files).await;
        load(&scanned, root, &files).await;
    }
    println!(
        "loaded both servers in {:.1} s\n",
        start.elapsed().as_secs_f64()
    );

    println!(
        "| tier | class | queries | indexed p50 ms | indexed p95 ms | scan p50 ms | rg p50 ms | scan / indexed | rg / indexed | equal |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let per_query = std::env::var_os("AGENTVFS_BENCH_QUERIES").is_some();
    let mut a = client(&indexed).await;
    let mut b = client(&scanned).await;
    for &(tier, root) in &tiers {
        // The first Grep records the namespace's size, the next ones learn
        // it (MAX_LEARN_BYTES each); the merge follows in the background.
        // A few more than that: a Grep over the Filesystem mount's table
        // learns only files whose state has settled, so with two too few
        // the first measured Grep learned the last 1,257 files and the
        // others checked them one by one while the merge they started ran.
        for _ in 0..(bytes as u64 / MAX_LEARN_BYTES + 6) {
            grep(&mut a, root, &QUERIES[0]).await;
        }
        // The last merges of a kernel-sized index run for tens of seconds
        // at low priority on a busy machine, and until they land the
        // learned files are checked one by one: measured Greps wait for
        // the server to go idle.
        wait_idle(&[indexed.pid(), scanned.pid()]).await;
        let classes = [
            "selective literal",
            "selective regex",
            "-i",
            "medium",
            "dense",
            "unindexable",
        ];
        for class in classes {
            let (mut ti, mut ts, mut tr) = (Vec::new(), Vec::new(), Vec::new());
            let mut equal = true;
            let mut n = 0;
            for q in QUERIES.iter().filter(|q| q.0 == class) {
                n += 1;
                let (mut qi, mut qs, mut hits) = (Vec::new(), Vec::new(), 0);
                for run in 0..support::runs() {
                    // Each server goes first in every other run, so
                    // neither always follows the client's freeing of the
                    // last pair's answers (docs/performance.md § Pinned
                    // reads, the block cache, and what the unindexable gap
                    // is).
                    let ((ma, mut sa, da), (mb, mut sb, db)) = if run % 2 == 0 {
                        let first = grep(&mut a, root, q).await;
                        (first, grep(&mut b, root, q).await)
                    } else {
                        let first = grep(&mut b, root, q).await;
                        (grep(&mut a, root, q).await, first)
                    };
                    hits = ma.len();
                    qi.push(ms(da));
                    if root == "/fs" {
                        parallel_counts_cleared(&mut sa);
                        parallel_counts_cleared(&mut sb);
                    }
                    if ma != mb || sa != sb {
                        eprintln!("{root} {:?}: indexed {sa:?} scan {sb:?}", q.1);
                        equal = false;
                    }
                    qs.push(ms(db));
                }
                if per_query {
                    eprintln!(
                        "{tier} {:?}: indexed p50 {:.1} ms, scan p50 {:.1} ms, {hits} hits",
                        q.1,
                        pct(qi.clone(), 0.5),
                        pct(qs.clone(), 0.5)
                    );
                    eprint!("{}", indexed.take_logs());
                }
                ti.extend(qi);
                ts.extend(qs);
                for _ in 0..3 {
                    tr.push(ms(rg(&disk, q)));
                }
            }
            let (i50, i95, s50, r50) = (
                pct(ti.clone(), 0.5),
                pct(ti, 0.95),
                pct(ts, 0.5),
                pct(tr, 0.5),
            );
            println!(
                "| {tier} | {class} | {n} | {i50:.1} | {i95:.1} | {s50:.1} | {r50:.1} | {:.1}× | {:.1}× | {} |",
                s50 / i50,
                r50 / i50,
                if equal { "yes" } else { "NO" }
            );
        }
    }
    // `AGENTVFS_BENCH_HOLD=SECONDS`: keep the loaded servers up that long,
    // for profiling them by hand.
    if let Some(hold) = std::env::var("AGENTVFS_BENCH_HOLD")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        eprintln!(
            "holding for {hold} s: indexed {}, scanned {}",
            indexed.url(),
            scanned.url()
        );
        tokio::time::sleep(Duration::from_secs(hold)).await;
    }
    // Cold start: both servers restarted (kill -9, as a crash), the
    // indexed one on its persisted index, the other with none.
    drop((a, b, indexed, scanned));
    let q = &QUERIES[2];
    println!(
        "\nCold start, selective Grep {:?} (ms from the process's start):\n\n\
         | tier | restart | serving | first Grep answered | second Grep alone | equal |\n\
         |---|---|---|---|---|---|",
        q.1
    );
    // The Store's index is persisted at each merge; the Filesystem mount's
    // too, and re-validated by each file's metadata as the Grep reaches it.
    for &(tier, root) in tiers.iter().filter(|(tier, _)| *tier != "State") {
        let (indexed, warm) = cold_start(tmp.path(), "indexed", root, q).await;
        let (scanned, cold) = cold_start(tmp.path(), "scanned", root, q).await;
        let equal = if warm.answer == cold.answer {
            "yes"
        } else {
            "NO"
        };
        for (name, c) in [
            ("on the persisted index", &warm),
            ("no persisted index", &cold),
        ] {
            println!(
                "| {tier} | {name} | {:.0} | {:.0} | {:.1} | {equal} |",
                ms(c.ready),
                ms(c.first),
                ms(c.second)
            );
        }
        drop((indexed, scanned));
    }
    println!(
        "\nindex built in-process: {} files ({} always scanned), {:.0} MB postings and path table \
         = {:.2}× the corpus, {:.0} MB/s on one core",
        segment.len(),
        unindexed,
        segment.bytes() as f64 / 1e6,
        segment.bytes() as f64 / bytes as f64,
        bytes as f64 / 1e6 / build.as_secs_f64()
    );
}
