//! `cargo bench --bench history`: what version history, the change feed
//! and the audit log cost, measured side by side in one run and printed as
//! markdown tables.
//!
//! 1. Store write throughput with history and the change log on (the
//!    default: 10 versions per file, 100,000 changes) and off
//!    (`history_versions = 1`, `change_log = 0`): in-process through
//!    `StoreBackend` with 8 threads, and through the real server with 8 gRPC
//!    clients. Each run rewrites 1 KiB files (100 of them), so every write
//!    keeps the version it replaces and drops one past the retention.
//!    Target: on at most 15% slower than off. Runs alternate on/off and the
//!    medians are compared.
//! 2. Write-to-event latency: one client writes files one after another
//!    while a watcher follows the Store through the server; the latency is
//!    from sending the Write to receiving its event. p50 and p99 over 2,000
//!    writes. Target: p99 under 10 ms.
//! 3. The audit log (docs/audit.md) at its default `metadata` level, on
//!    against off, through the real server with 8 gRPC clients: 1 KiB
//!    Writes (each record of a change on disk before the answer) and 1 KiB
//!    Reads of the same Store. Target (issue 54): on ≥ 0.9× off for both.
//!
//! `AGENTVFS_BENCH_ONLY=audit` measures only the audit log's rows,
//! `AGENTVFS_BENCH_RUNS` sets the runs per row (default 5),
//! `AGENTVFS_BENCH_SCALE` shrinks the write counts.

mod support;

use agentvfs::VfsPath;
use agentvfs::backend::store::{StoreBackend, StoreOptions};
use agentvfs::backend::{Backend, Keep, Precondition};
use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use agentvfs::scope::Scope;
use std::path::Path;
use std::time::Instant;
use support::{Served, median, runs, scaled, spread_calls};
use tonic::transport::Channel;

/// Concurrent writers in the throughput rows.
const CALLERS: usize = 8;
/// Files the throughput rows rewrite.
const FILES: usize = 100;
/// Size of each write.
const FILE_BYTES: usize = 1024;

fn content(i: usize) -> Vec<u8> {
    let line = format!("write {i} ");
    line.repeat(FILE_BYTES / line.len() + 1).as_bytes()[..FILE_BYTES].to_vec()
}

/// Writes per second of `n` rewrites by [`CALLERS`] threads into a fresh
/// store keeping `keep`.
fn in_process(dir: &Path, keep: Keep, n: usize) -> f64 {
    let options = StoreOptions {
        sync: false,
        max_file_bytes: 64 << 20,
        keep,
    };
    let store =
        StoreBackend::open(VfsPath::parse("/memories").unwrap(), dir, options).expect("open store");
    let scope = Scope::default();
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..CALLERS {
            let (store, scope) = (&store, &scope);
            s.spawn(move || {
                for i in (t..n).step_by(CALLERS) {
                    let path = VfsPath::parse(&format!("/memories/f{}", i % FILES)).unwrap();
                    store
                        .write(scope, &path, content(i), Precondition::default())
                        .expect("write");
                }
            });
        }
    });
    n as f64 / start.elapsed().as_secs_f64()
}

/// The server with a Store at `/memories` keeping `keep`, run in `dir`,
/// its audit log on (in `dir`) when `audit`.
fn serve(dir: &Path, keep: Keep, audit: bool) -> Served {
    let mut config = format!(
        "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n[[mount]]\nprefix = \"/memories\"\n\
         tier = \"store\"\npath = \"store\"\nhistory_versions = {}\nchange_log = {}\n",
        keep.history.versions, keep.changes
    );
    if audit {
        config.push_str(&format!(
            "\n[audit]\nenabled = true\ndir = \"{}\"\n",
            dir.join("audit").display()
        ));
    }
    std::fs::write(dir.join("agentvfs.toml"), config).expect("write config");
    Served::start(["--config", "agentvfs.toml"], dir)
}

async fn client(served: &Served) -> FilesystemClient<Channel> {
    FilesystemClient::connect(served.url())
        .await
        .expect("connect")
}

/// Writes per second of `n` rewrites by [`CALLERS`] gRPC clients.
async fn through_server(dir: &Path, keep: Keep, n: usize) -> f64 {
    let served = serve(dir, keep, false);
    let mut clients = Vec::new();
    for _ in 0..CALLERS {
        clients.push(client(&served).await);
    }
    let elapsed = spread_calls(clients, n, |mut fs, i| async move {
        let req = pb::WriteRequest {
            path: format!("/memories/f{}", i % FILES),
            content: String::from_utf8(content(i)).expect("ASCII"),
            ..Default::default()
        };
        fs.write(req).await.expect("write");
    })
    .await;
    n as f64 / elapsed.as_secs_f64()
}

/// Milliseconds from sending each of `n` writes to receiving its event.
async fn latencies(dir: &Path, n: usize) -> Vec<f64> {
    let served = serve(dir, Keep::DEFAULT, false);
    let mut watcher = client(&served).await;
    let mut stream = watcher
        .watch(pb::WatchRequest {
            path: "/memories".into(),
            from_now: true,
            ..Default::default()
        })
        .await
        .expect("watch")
        .into_inner();
    let mut writer = client(&served).await;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let path = format!("/memories/latency/f{i}");
        let sent = Instant::now();
        let req = pb::WriteRequest {
            path: path.clone(),
            content: "x".into(),
            ..Default::default()
        };
        writer.write(req).await.expect("write");
        'wait: loop {
            let msg = stream.message().await.expect("watch").expect("a message");
            if msg.events.iter().any(|e| e.path == path) {
                out.push(sent.elapsed().as_secs_f64() * 1000.0);
                break 'wait;
            }
        }
    }
    out
}

/// Writes and Reads per second of `n` calls each by [`CALLERS`] gRPC
/// clients, with the audit log on or off.
async fn audited(dir: &Path, audit: bool, n: usize) -> (f64, f64) {
    let served = serve(dir, Keep::DEFAULT, audit);
    let mut clients = Vec::new();
    for _ in 0..CALLERS {
        clients.push(client(&served).await);
    }
    let write = |mut fs: FilesystemClient<Channel>, i: usize| async move {
        let req = pb::WriteRequest {
            path: format!("/memories/f{}", i % FILES),
            content: String::from_utf8(content(i)).expect("ASCII"),
            ..Default::default()
        };
        fs.write(req).await.expect("write");
    };
    let wrote = spread_calls(clients.clone(), n, write).await;
    let read = |mut fs: FilesystemClient<Channel>, i: usize| async move {
        let req = pb::ReadRequest {
            path: format!("/memories/f{}", i % FILES),
            ..Default::default()
        };
        fs.read(req).await.expect("read");
    };
    let read = spread_calls(clients, n, read).await;
    (
        n as f64 / wrote.as_secs_f64(),
        n as f64 / read.as_secs_f64(),
    )
}

fn percentile(xs: &[f64], p: f64) -> f64 {
    let mut xs = xs.to_vec();
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[((xs.len() as f64 * p) as usize).min(xs.len() - 1)]
}

#[tokio::main]
async fn main() {
    let runs = runs();
    let writes = scaled(40_000, CALLERS);
    let grpc_writes = scaled(20_000, CALLERS);
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = |name: String| {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).expect("dir");
        d
    };
    let audit_calls = scaled(10_000, CALLERS);
    let (mut audit_off, mut audit_on) = (vec![], vec![]);
    for run in 0..runs {
        audit_off.push(audited(&dir(format!("aoff{run}")), false, audit_calls).await);
        audit_on.push(audited(&dir(format!("aon{run}")), true, audit_calls).await);
    }
    print_audited(audit_calls, &audit_off, &audit_on);
    if std::env::var("AGENTVFS_BENCH_ONLY").is_ok_and(|o| o == "audit") {
        return;
    }
    let (mut on, mut off, mut on_grpc, mut off_grpc) = (vec![], vec![], vec![], vec![]);
    for run in 0..runs {
        // Alternate so drift (other load, a warming cache) hits both.
        off.push(in_process(&dir(format!("off{run}")), Keep::NOTHING, writes));
        on.push(in_process(&dir(format!("on{run}")), Keep::DEFAULT, writes));
        off_grpc.push(through_server(&dir(format!("goff{run}")), Keep::NOTHING, grpc_writes).await);
        on_grpc.push(through_server(&dir(format!("gon{run}")), Keep::DEFAULT, grpc_writes).await);
    }
    let latency = latencies(&dir("latency".into()), scaled(2000, CALLERS)).await;
    let (p50, p99) = (percentile(&latency, 0.5), percentile(&latency, 0.99));
    let (on, off, on_grpc, off_grpc) = (median(on), median(off), median(on_grpc), median(off_grpc));
    println!("| measurement | history and feed off | on | on / off |");
    println!("|---|---:|---:|---:|");
    println!(
        "| Write 1 KiB, StoreBackend in-process, {CALLERS} threads ({writes} rewrites of {FILES} files) | {off:.0} ops/s | {on:.0} ops/s | {:.2} |",
        on / off
    );
    println!(
        "| Write 1 KiB, server over gRPC, {CALLERS} clients ({grpc_writes} rewrites) | {off_grpc:.0} ops/s | {on_grpc:.0} ops/s | {:.2} |",
        on_grpc / off_grpc
    );
    println!();
    println!(
        "| write-to-event latency over gRPC ({} writes) | p50 | p99 |",
        latency.len()
    );
    println!("|---|---:|---:|");
    println!("| Write acknowledged → its event received by a Watch | {p50:.2} ms | {p99:.2} ms |");
}

/// The audit log's table: Writes and Reads per second, off and on.
fn print_audited(calls: usize, off: &[(f64, f64)], on: &[(f64, f64)]) {
    println!(
        "| server over gRPC, {CALLERS} clients, {calls} calls, medians | audit off | audit on (metadata) | on / off |"
    );
    println!("|---|---:|---:|---:|");
    for (name, pick) in [
        (
            "Write 1 KiB",
            (|r: &(f64, f64)| r.0) as fn(&(f64, f64)) -> f64,
        ),
        ("Read 1 KiB", |r: &(f64, f64)| r.1),
    ] {
        let off = median(off.iter().map(pick).collect());
        let on = median(on.iter().map(pick).collect());
        println!(
            "| {name} | {off:.0} ops/s | {on:.0} ops/s | {:.2} |",
            on / off
        );
    }
    println!();
}
