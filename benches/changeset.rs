//! `cargo bench --bench changeset`: one changeset of 100 small files
//! (Filesystem/Commit) against the same 100 files as single Writes, over
//! gRPC, on the Store and on the object tier (versitygw on loopback,
//! `tests/support/s3.rs`), side by side in one run as medians of several
//! rounds; and the server's peak memory while it commits one large
//! changeset. Printed as markdown tables.
//!
//! Needs versitygw (`scripts/versitygw install`, then `AGENTVFS_VERSITYGW`).
//! `AGENTVFS_BENCH_SCALE=0.1` shrinks the rounds for a quick run.

#[path = "../tests/support/s3.rs"]
#[allow(dead_code)] // the bench uses the server, not every helper
mod s3;
mod support;

use agentvfs::pb;
use agentvfs::pb::changeset_operation::Operation;
use agentvfs::pb::filesystem_client::FilesystemClient;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Served, scaled};
use tonic::transport::Channel;

/// Files per changeset (and single Writes per round).
const FILES: usize = 100;
/// Bytes of each.
const FILE_BYTES: usize = 1024;
/// Files of the large changeset, and their size: 48 MiB in one call.
const LARGE_FILES: usize = 768;
const LARGE_FILE_BYTES: usize = 64 << 10;

/// A server with State at `/` and `mount` (one `[[mount]]` at `/data`), run
/// in `dir`, reaching the test S3 server.
fn serve(dir: &Path, mount: &str) -> Served {
    std::fs::create_dir_all(dir).expect("server dir");
    let config = format!(
        "[limits]\nchangeset_max_bytes = 67108864\n\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n{mount}"
    );
    std::fs::write(dir.join("agentvfs.toml"), config).expect("config");
    let s3 = s3::s3();
    // SAFETY: set before any thread of this benchmark reads the environment.
    unsafe {
        std::env::set_var("AWS_ENDPOINT_URL", &s3.endpoint);
        std::env::set_var("AWS_ACCESS_KEY_ID", s3::ACCESS_KEY);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", s3::SECRET_KEY);
        std::env::set_var("AWS_ALLOW_HTTP", "true");
    }
    Served::start(["--config", "agentvfs.toml"], dir)
}

async fn client(served: &Served) -> FilesystemClient<Channel> {
    FilesystemClient::connect(served.url())
        .await
        .expect("connect")
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(128 << 20)
}

fn write(path: String, bytes: usize, round: usize) -> pb::WriteRequest {
    let mut content = format!("round {round} ");
    content.extend(std::iter::repeat_n(
        'x',
        bytes.saturating_sub(content.len()),
    ));
    pb::WriteRequest {
        path,
        content,
        ..Default::default()
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Median time of 100 single Writes and of one Commit of the same 100
/// files, over `rounds` rounds (each round rewrites the files).
async fn small_files(fs: &mut FilesystemClient<Channel>, rounds: usize) -> (Duration, Duration) {
    let (mut singles, mut commits) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let start = Instant::now();
        for i in 0..FILES {
            let req = write(format!("/data/single/f{i:03}"), FILE_BYTES, round);
            fs.write(req).await.expect("write");
        }
        singles.push(start.elapsed());
        let operations = (0..FILES)
            .map(|i| pb::ChangesetOperation {
                operation: Some(Operation::Write(write(
                    format!("/data/batch/f{i:03}"),
                    FILE_BYTES,
                    round,
                ))),
            })
            .collect();
        let start = Instant::now();
        fs.commit(pb::CommitRequest { operations })
            .await
            .expect("commit");
        commits.push(start.elapsed());
    }
    (median(singles), median(commits))
}

/// The server's peak resident memory growth (KiB) while it commits one
/// changeset of [`LARGE_FILES`] files of [`LARGE_FILE_BYTES`].
async fn large_changeset(served: &Served) -> (u64, Duration) {
    let status = || std::fs::read_to_string(format!("/proc/{}/status", served.pid())).unwrap();
    let field = |name: &str| -> u64 {
        status()
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let mut fs = client(served).await;
    let before = field("VmRSS:");
    let operations = (0..LARGE_FILES)
        .map(|i| pb::ChangesetOperation {
            operation: Some(Operation::Write(write(
                format!("/data/large/f{i:04}"),
                LARGE_FILE_BYTES,
                0,
            ))),
        })
        .collect();
    let start = Instant::now();
    fs.commit(pb::CommitRequest { operations })
        .await
        .expect("large commit");
    let took = start.elapsed();
    (field("VmHWM:").saturating_sub(before), took)
}

#[tokio::main]
async fn main() {
    let tmp = tempfile::tempdir().expect("temp dir");
    s3::s3().bucket("bench-changeset");
    let rounds = scaled(11, 3);
    let store_mount = |dir: &Path| {
        format!(
            "[[mount]]\nprefix = \"/data\"\ntier = \"store\"\npath = \"{}\"\n",
            dir.display()
        )
    };
    let object_mount = "[[mount]]\nprefix = \"/data\"\ntier = \"object\"\nbucket = \"bench-changeset\"\n\
                        key_prefix = \"cs\"\npath_style = true\n";
    let tiers = [
        (
            "Store (RocksDB)",
            store_mount(&tmp.path().join("store-data")),
        ),
        ("object tier (versitygw)", object_mount.to_owned()),
    ];
    println!(
        "\n| {FILES} files of {FILE_BYTES} B over gRPC | 100 Writes (median) | one Commit (median) | Commit speed-up |"
    );
    println!("| --- | --- | --- | --- |");
    let mut large = Vec::new();
    for (name, mount) in &tiers {
        let served = serve(&tmp.path().join(name.replace(' ', "-")), mount);
        let mut fs = client(&served).await;
        let (single, commit) = small_files(&mut fs, rounds).await;
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {:.1}x |",
            single.as_secs_f64() * 1e3,
            commit.as_secs_f64() * 1e3,
            single.as_secs_f64() / commit.as_secs_f64()
        );
        large.push((name, large_changeset(&served).await));
    }
    let mib = (LARGE_FILES * LARGE_FILE_BYTES) >> 20;
    println!(
        "\n| one changeset of {LARGE_FILES} files, {mib} MiB | time | server peak memory growth |"
    );
    println!("| --- | --- | --- |");
    for (name, (kib, took)) in large {
        println!(
            "| {name} | {:.0} ms | {} MiB |",
            took.as_secs_f64() * 1e3,
            kib >> 10
        );
    }
}
