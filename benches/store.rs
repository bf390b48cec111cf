//! `cargo bench --bench store`: the Store tier measured side by side in one
//! run, printed as a markdown table.
//!
//! 1. Small-file Write and Read throughput: RocksDB alone in-process, the
//!    `StoreBackend` in-process, and the real server through gRPC, each with
//!    the same number of concurrent callers; the ratios say what the tier and
//!    gRPC cost on top of RocksDB.
//! 2. Grep over 100,000 stored files through the server vs `rg` over the same
//!    files on disk (warm page cache, best of three runs each).
//! 3. ListInfo of a 10-entry directory in a store of 100 files vs one of
//!    1,000,000 files: the range-scan property, in time.
//! 4. Stat of a directory after 0, 1,000 and 5,000 files were created and
//!    deleted in it, and the create + stat + unlink loop that deletes them:
//!    the cost must not grow with the deletes (docs/performance-notes.md
//!    § Deleted files under a directory).
//!
//! `AGENTVFS_BENCH_SCALE=0.1` shrinks every file count for a quick run;
//! `cargo bench --bench store -- deletes` runs only the sections named
//! (`throughput`, `grep`, `list`, `deletes`).

mod support;

use agentvfs::VfsPath;
use agentvfs::backend::store::{StoreBackend, StoreOptions};
use agentvfs::backend::{Backend, Keep, Precondition};
use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use agentvfs::scope::Scope;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Served, scaled, spread_calls};
use tonic::transport::Channel;

/// Concurrent callers in the throughput rows (threads in-process, gRPC
/// clients over their own connections).
const CALLERS: usize = 8;
/// Size of each small file.
const SMALL_FILE_BYTES: usize = 1024;
/// Matches `error <digits>`, present in one file out of ten.
const GREP_PATTERN: &str = "error [0-9]+";
/// Largest limits, so budgets never cut a benchmark short.
const UNLIMITED: u64 = 1 << 40;

/// The server under measurement with its Store at `data`. The default
/// config serves the working directory at /workspace, and the server refuses
/// a data directory inside a served one: run it in an empty sibling of the
/// data directory.
fn serve_store(data: &Path) -> Served {
    let served = data
        .parent()
        .expect("data dirs are inside a temp dir")
        .join("served");
    std::fs::create_dir_all(&served).expect("create the served directory");
    Served::start([OsStr::new("--data"), data.as_os_str()], &served)
}

/// A Filesystem client of `served`.
async fn client(served: &Served) -> FilesystemClient<Channel> {
    FilesystemClient::connect(served.url())
        .await
        .expect("connect")
        .max_decoding_message_size(64 << 20)
}

fn open_store(dir: &Path) -> StoreBackend {
    let options = StoreOptions {
        sync: false,
        max_file_bytes: 64 << 20,
        keep: Keep::DEFAULT,
    };
    StoreBackend::open(VfsPath::parse("/memories").unwrap(), dir, options).expect("open store")
}

/// Runs `f(i)` for every `i < n` on [`CALLERS`] threads; returns elapsed time.
fn parallel(n: usize, f: impl Fn(usize) + Sync) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..CALLERS {
            let f = &f;
            s.spawn(move || (t..n).step_by(CALLERS).for_each(f));
        }
    });
    start.elapsed()
}

/// Runs `f(client, i)` for every `i < n` from [`CALLERS`] gRPC clients.
async fn parallel_grpc<F, Fut>(served: &Served, n: usize, f: F) -> Duration
where
    F: Fn(FilesystemClient<Channel>, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let mut clients = Vec::new();
    for _ in 0..CALLERS {
        clients.push(client(served).await);
    }
    spread_calls(clients, n, f).await
}

fn small_path(i: usize) -> String {
    format!("/memories/small/d{}/f{i}.txt", i % 100)
}

fn small_content(i: usize) -> String {
    let line = format!("small file {i} ");
    line.repeat(SMALL_FILE_BYTES / line.len() + 1)[..SMALL_FILE_BYTES].to_owned()
}

/// Text of file `i` of the Grep corpus: ~1.3 KiB of lines, one file in ten
/// holding one `error N` line.
fn grep_content(i: usize) -> String {
    const WORDS: [&str; 12] = [
        "agent", "memory", "store", "plan", "result", "tool", "call", "note", "path", "value",
        "index", "batch",
    ];
    let mut seed = i as u64 * 6_364_136_223_846_793_005 + 1_442_695_040_888_963_407;
    let mut out = String::new();
    for line in 0..24 {
        for _ in 0..8 {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            out.push_str(WORDS[(seed >> 33) as usize % WORDS.len()]);
            out.push(' ');
        }
        if i.is_multiple_of(10) && line == 12 {
            out.push_str(&format!("error {i}"));
        }
        out.push('\n');
    }
    out
}

fn grep_rel(i: usize) -> String {
    format!("g{}/f{i}.txt", i / 1000)
}

/// A table row.
struct Row {
    what: String,
    value: String,
    note: String,
}

fn row(
    rows: &mut Vec<Row>,
    what: impl Into<String>,
    value: impl Into<String>,
    note: impl Into<String>,
) {
    let row = Row {
        what: what.into(),
        value: value.into(),
        note: note.into(),
    };
    eprintln!("  {} = {} {}", row.what, row.value, row.note);
    rows.push(row);
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> (Duration, T)) -> (Duration, T) {
    let mut best = f();
    for _ in 1..runs {
        let next = f();
        if next.0 < best.0 {
            best = next;
        }
    }
    best
}

fn throughput(rows: &mut Vec<Row>, rt: &tokio::runtime::Runtime, tmp: &Path) {
    let n = scaled(20_000, CALLERS);
    eprintln!("small files: {n} × {SMALL_FILE_BYTES} B, {CALLERS} callers");
    let scope = Scope::default();

    // RocksDB alone: one put (WAL on, no fsync) and one get per file.
    let raw_dir = tmp.join("raw");
    let (raw_write, raw_read) = {
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        let db = rocksdb::DB::open(&opts, &raw_dir).expect("open raw RocksDB");
        let w = parallel(n, |i| {
            db.put(small_path(i), small_content(i)).expect("put");
        });
        let r = parallel(n, |i| {
            assert!(db.get(small_path(i)).expect("get").is_some());
        });
        (w, r)
    };

    let store_dir = tmp.join("inproc");
    let (store_write, store_read) = {
        let store = open_store(&store_dir);
        let w = parallel(n, |i| {
            let path = VfsPath::parse(&small_path(i)).unwrap();
            let data = small_content(i).into_bytes();
            store
                .write(&scope, &path, data, Precondition::default())
                .expect("write");
        });
        let r = parallel(n, |i| {
            let path = VfsPath::parse(&small_path(i)).unwrap();
            store.read(&scope, &path).expect("read");
        });
        (w, r)
    };

    let served = serve_store(&tmp.join("grpc"));
    let (grpc_write, grpc_read) = rt.block_on(async {
        let w = parallel_grpc(&served, n, |mut fs, i| async move {
            fs.write(pb::WriteRequest {
                path: small_path(i),
                content: small_content(i),
                ..Default::default()
            })
            .await
            .expect("gRPC write");
        })
        .await;
        let r = parallel_grpc(&served, n, |mut fs, i| async move {
            fs.read(pb::ReadRequest {
                path: small_path(i),
                ..Default::default()
            })
            .await
            .expect("gRPC read");
        })
        .await;
        (w, r)
    });
    drop(served);

    for (op, raw, store, grpc) in [
        ("Write", raw_write, store_write, grpc_write),
        ("Read", raw_read, store_read, grpc_read),
    ] {
        row(
            rows,
            format!("{op} 1 KiB: RocksDB alone, in-process"),
            format!("{:.0} ops/s", rate(n, raw)),
            "",
        );
        row(
            rows,
            format!("{op} 1 KiB: StoreBackend, in-process"),
            format!("{:.0} ops/s", rate(n, store)),
            format!(
                "{:.2}× RocksDB's time",
                store.as_secs_f64() / raw.as_secs_f64()
            ),
        );
        row(
            rows,
            format!("{op} 1 KiB: agentvfs server over gRPC"),
            format!("{:.0} ops/s", rate(n, grpc)),
            format!(
                "{:.2}× in-process StoreBackend's time",
                grpc.as_secs_f64() / store.as_secs_f64()
            ),
        );
    }
}

async fn grep_count(served: &Served) -> u64 {
    let mut fs = client(served).await;
    let mut stream = fs
        .grep(pb::GrepRequest {
            pattern: GREP_PATTERN.into(),
            path: "/memories".into(),
            max_visited: UNLIMITED,
            max_duration_ms: UNLIMITED,
            ..Default::default()
        })
        .await
        .expect("grep")
        .into_inner();
    let mut matches = 0;
    while let Some(msg) = stream.message().await.expect("grep stream") {
        match msg.result {
            Some(pb::grep_response::Result::Batch(b)) => matches += b.matches.len() as u64,
            Some(pb::grep_response::Result::Summary(s)) => {
                assert!(s.aborted_reason == 0, "grep aborted")
            }
            None => {}
        }
    }
    matches
}

fn grep_vs_rg(rows: &mut Vec<Row>, rt: &tokio::runtime::Runtime, tmp: &Path) {
    let n = scaled(100_000, CALLERS);
    eprintln!("grep: {n} files");
    let tree = tmp.join("tree");
    let data = tmp.join("grepstore");
    {
        let store = open_store(&data);
        let scope = Scope::default();
        parallel(n, |i| {
            let rel = grep_rel(i);
            let content = grep_content(i);
            let file = tree.join(&rel);
            std::fs::create_dir_all(file.parent().unwrap()).expect("mkdir");
            std::fs::write(&file, &content).expect("write file");
            let path = VfsPath::parse(&format!("/memories/{rel}")).unwrap();
            store
                .write(&scope, &path, content.into_bytes(), Precondition::default())
                .expect("write");
        });
    }
    let bytes: u64 = (0..n).map(|i| grep_content(i).len() as u64).sum();
    let served = serve_store(&data);
    let (store_time, store_matches) = best_of(3, || {
        let start = Instant::now();
        let matches = rt.block_on(grep_count(&served));
        (start.elapsed(), matches)
    });
    drop(served);
    let rg = std::env::var("RG").unwrap_or_else(|_| "rg".into());
    let (rg_time, rg_matches) = best_of(3, || {
        let start = Instant::now();
        let out = Command::new(&rg)
            .args(["-n", "--no-heading", GREP_PATTERN])
            .arg(&tree)
            .output()
            .expect("run rg (cargo install ripgrep, or set RG=path)");
        (
            start.elapsed(),
            out.stdout.iter().filter(|b| **b == b'\n').count() as u64,
        )
    });
    assert_eq!(store_matches, rg_matches, "both must find the same lines");
    let version = Command::new(&rg).arg("--version").output().map(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    });
    row(
        rows,
        format!(
            "Grep {n} stored files ({} MB): agentvfs over gRPC",
            bytes / 1_000_000
        ),
        format!("{:.0} ms", store_time.as_secs_f64() * 1e3),
        format!("{store_matches} matching lines"),
    );
    row(
        rows,
        format!(
            "Grep the same {n} files on disk: {}",
            version.unwrap_or_default()
        ),
        format!("{:.0} ms", rg_time.as_secs_f64() * 1e3),
        format!(
            "agentvfs/rg = {:.2}",
            store_time.as_secs_f64() / rg_time.as_secs_f64()
        ),
    );
}

/// Fills a store with `total` files, 10 of them in `/memories/target`.
fn fill(dir: &Path, total: usize) -> Duration {
    let store = open_store(dir);
    let scope = Scope::default();
    parallel(total, |i| {
        let path = if i < 10 {
            format!("/memories/target/f{i}")
        } else {
            format!("/memories/other{}/f{i}", i % 1000)
        };
        let path = VfsPath::parse(&path).unwrap();
        store
            .write(&scope, &path, b"x".to_vec(), Precondition::default())
            .expect("write");
    })
}

fn list_scaling(rows: &mut Vec<Row>, rt: &tokio::runtime::Runtime, tmp: &Path) {
    const LISTS: u32 = 2000;
    let big = scaled(1_000_000, CALLERS);
    for total in [100, big] {
        let dir = tmp.join(format!("list{total}"));
        let load = fill(&dir, total);
        eprintln!("list: loaded {total} files in {load:?}");
        let inproc = {
            let store = open_store(&dir);
            let target = VfsPath::parse("/memories/target").unwrap();
            let start = Instant::now();
            for _ in 0..LISTS {
                assert_eq!(
                    store.list(&Scope::default(), &target).expect("list").len(),
                    10
                );
            }
            start.elapsed() / LISTS
        };
        let served = serve_store(&dir);
        let grpc = rt.block_on(async {
            let mut fs = client(&served).await;
            let start = Instant::now();
            for _ in 0..LISTS {
                let r = fs
                    .list_info(pb::ListInfoRequest {
                        path: "/memories/target".into(),
                    })
                    .await
                    .expect("list");
                assert_eq!(r.into_inner().entries.len(), 10);
            }
            start.elapsed() / LISTS
        });
        row(
            rows,
            format!("ListInfo of 10 entries among {total} files"),
            format!(
                "{:.1} µs gRPC, {:.1} µs in-process",
                grpc.as_secs_f64() * 1e6,
                inproc.as_secs_f64() * 1e6
            ),
            format!("store loaded at {:.0} files/s", rate(total, load)),
        );
    }
}

/// One create + Stat of the directory + unlink of `/memories/d/f{i}`, as a
/// mount's `create; stat; unlink` loop makes them.
fn cycle(store: &StoreBackend, i: usize) {
    let scope = Scope::default();
    let file = VfsPath::parse(&format!("/memories/d/f{i}")).unwrap();
    store
        .write(&scope, &file, b"x".to_vec(), Precondition::default())
        .expect("create");
    store.stat(&scope, &file.parent()).expect("stat");
    store.delete(&scope, &file, None, false).expect("unlink");
}

/// Stat of `/memories/d` after `deleted` files were created and deleted in
/// it (its one live file, `zz`, sorts after them all, so the seek for the
/// first key below the directory passes every deleted key): the time per
/// Stat, the point tombstones one Stat skips (RocksDB's perf context), and
/// the rate of the last 1,000 create + stat + unlink cycles.
fn stat_after_deletes(rows: &mut Vec<Row>, tmp: &Path) {
    const STATS: u32 = 1000;
    let dir = VfsPath::parse("/memories/d").unwrap();
    let live = VfsPath::parse("/memories/d/zz").unwrap();
    for deleted in [0, scaled(1000, 100), scaled(5000, 500)] {
        let store = open_store(&tmp.join(format!("deletes{deleted}")));
        let scope = Scope::default();
        store
            .write(&scope, &live, b"x".to_vec(), Precondition::default())
            .expect("write");
        let tail = deleted.min(1000);
        (0..deleted - tail).for_each(|i| cycle(&store, i));
        let start = Instant::now();
        (deleted - tail..deleted).for_each(|i| cycle(&store, i));
        let cycles = start.elapsed();
        rocksdb::perf::set_perf_stats(rocksdb::perf::PerfStatsLevel::EnableCount);
        let mut perf = rocksdb::perf::PerfContext::default();
        perf.reset();
        store.stat(&scope, &dir).expect("stat");
        let skipped = perf.metric(rocksdb::perf::PerfMetric::InternalDeleteSkippedCount);
        rocksdb::perf::set_perf_stats(rocksdb::perf::PerfStatsLevel::Disable);
        let start = Instant::now();
        for _ in 0..STATS {
            store.stat(&scope, &dir).expect("stat");
        }
        let stat = start.elapsed() / STATS;
        let loop_rate = if tail == 0 {
            "no cycles".to_string()
        } else {
            format!(
                "last {tail} create + stat + unlink at {:.0}/s",
                rate(tail, cycles)
            )
        };
        row(
            rows,
            format!("Stat of a directory after {deleted} files deleted in it"),
            format!(
                "{:.1} µs in-process, {skipped} tombstones skipped",
                stat.as_secs_f64() * 1e6
            ),
            loop_rate,
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; other arguments name the sections to
    // run (all when none is named).
    let named: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let runs = |section: &str| named.is_empty() || named.iter().any(|n| n == section);
    let tmp = tempfile::tempdir().expect("temp dir");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut rows = Vec::new();
    if runs("throughput") {
        throughput(&mut rows, &rt, tmp.path());
    }
    if runs("grep") {
        grep_vs_rg(&mut rows, &rt, tmp.path());
    }
    if runs("list") {
        list_scaling(&mut rows, &rt, tmp.path());
    }
    if runs("deletes") {
        stat_after_deletes(&mut rows, tmp.path());
    }
    println!("| measurement | result | note |");
    println!("| --- | --- | --- |");
    for r in rows {
        println!("| {} | {} | {} |", r.what, r.value, r.note);
    }
}
