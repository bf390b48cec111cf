//! `cargo bench --bench object`: the object tier on a real S3 server
//! (versitygw on loopback, `tests/support/s3.rs`), measured side by side in
//! one run and printed as markdown tables.
//!
//! 1. 1 KiB Write, Read and Delete per second from 8 gRPC clients: the
//!    Store tier (RocksDB) through one server; the object tier through one
//!    server (with its history and change log, the default, and without:
//!    what they cost) and through two servers sharing the bucket (clients
//!    split between them). Target: at least 1,000/s through one server.
//!    `AGENTVFS_SERVER_BIN` runs an earlier build for a before/after table
//!    (the rows it cannot configure are left out).
//! 2. Grep over 10,000 objects (~100 MB) through one server: cold (a fresh
//!    server, nothing cached: every head fetched) and warm (the same server
//!    again: list pages and a local scan), against `rg` over the same files
//!    on local disk (warm page cache). Targets: cold at least 1,000 objects/s,
//!    warm at most 1.5× rg's time. Then a selective Grep (one file's line)
//!    once the search index has learned the corpus, against `rg` for the
//!    same pattern: it reads the change logs and its candidates, through
//!    the namespace's path table (docs/search-index.md § The object tier's
//!    path table). Medians of `AGENTVFS_BENCH_RUNS` runs (default 5).
//!
//! Needs versitygw (`scripts/versitygw install`, then `AGENTVFS_VERSITYGW`)
//! and `rg` (`RG=/path/to/rg`, else on the `PATH`).
//! `AGENTVFS_BENCH_SCALE=0.1` shrinks every count for a quick run.

mod s3_served;
mod support;

use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use s3_served::{s3, serve};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{median, runs, scaled, spread_calls};
use tonic::transport::Channel;

/// Concurrent clients of the throughput rows.
const CALLERS: usize = 8;
/// Bytes of each small file.
const SMALL: usize = 1024;
/// Bytes of each file of the Grep corpus.
const GREP_FILE: usize = 10 << 10;
/// Matches `error <digits>`, in one file out of ten.
const PATTERN: &str = "error [0-9]+";
/// Matches one line of one file.
const SELECTIVE: &str = "error 5120\\b";
/// Greps that teach the index the whole corpus before the selective one is
/// timed (each learns at most 16 MiB: `search::index::MAX_LEARN_BYTES`).
const LEARNING_GREPS: usize = 10;
/// Budgets no benchmark reaches.
const UNLIMITED: u64 = 1 << 40;

fn object_mount(prefix: &str) -> String {
    format!(
        "[[mount]]\nprefix = \"/data\"\ntier = \"object\"\nbucket = \"bench\"\nkey_prefix = \"{prefix}\"\npath_style = true\n"
    )
}

/// An object mount keeping no history and no change log.
fn object_mount_bare(prefix: &str) -> String {
    format!(
        "{}history_versions = 1\nchange_log = 0\n",
        object_mount(prefix)
    )
}

fn store_mount(dir: &Path) -> String {
    format!(
        "[[mount]]\nprefix = \"/data\"\ntier = \"store\"\npath = \"{}\"\n",
        dir.display()
    )
}

async fn client(url: &str) -> FilesystemClient<Channel> {
    FilesystemClient::connect(url.to_owned())
        .await
        .expect("connect")
        .max_decoding_message_size(64 << 20)
}

/// Calls per second of `n` calls `call(client, i)` from [`CALLERS`]
/// clients, spread over `urls`.
async fn throughput<F, Fut>(urls: &[String], n: usize, call: F) -> f64
where
    F: Fn(FilesystemClient<Channel>, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let mut clients = Vec::new();
    for t in 0..CALLERS {
        clients.push(client(&urls[t % urls.len()]).await);
    }
    n as f64 / spread_calls(clients, n, call).await.as_secs_f64()
}

/// Write (new files), Write again (rewrites), Read and Delete throughput
/// of `n` small files through `urls`.
async fn small_files(urls: &[String], n: usize) -> [f64; 4] {
    let write_all = |fill: char| {
        let body = fill.to_string().repeat(SMALL);
        throughput(urls, n, move |mut fs, i| {
            let content = body.clone();
            async move {
                let req = pb::WriteRequest {
                    path: format!("/data/small/d{}/f{i}", i % 50),
                    content,
                    ..Default::default()
                };
                fs.write(req).await.expect("write");
            }
        })
    };
    let writes = write_all('x').await;
    let rewrites = write_all('y').await;
    let reads = throughput(urls, n, |mut fs, i| async move {
        let req = pb::ReadRequest {
            path: format!("/data/small/d{}/f{i}", i % 50),
            ..Default::default()
        };
        fs.read(req).await.expect("read");
    })
    .await;
    let deletes = throughput(urls, n, |mut fs, i| async move {
        let req = pb::DeleteRequest {
            path: format!("/data/small/d{}/f{i}", i % 50),
            ..Default::default()
        };
        fs.delete(req).await.expect("delete");
    })
    .await;
    [writes, rewrites, reads, deletes]
}

/// Time to list every key under `prefix` of the bench bucket, page by page,
/// with object_store alone: what any search of the tier pays first.
async fn list_alone(prefix: &str) -> (Duration, usize) {
    use futures_util::TryStreamExt;
    use object_store::ObjectStore;
    let s3 = s3::s3();
    let store = object_store::aws::AmazonS3Builder::new()
        .with_bucket_name("bench")
        .with_endpoint(&s3.endpoint)
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_access_key_id(s3::ACCESS_KEY)
        .with_secret_access_key(s3::SECRET_KEY)
        .build()
        .expect("an S3 client");
    let start = Instant::now();
    let keys: Vec<_> = store
        .list(Some(&object_store::path::Path::from(prefix)))
        .try_collect()
        .await
        .expect("list the corpus");
    (start.elapsed(), keys.len())
}

/// The text of file `i` of the Grep corpus, one in ten with a match.
fn grep_content(i: usize) -> String {
    const WORDS: [&str; 10] = [
        "agent", "memory", "object", "bucket", "result", "tool", "call", "note", "path", "value",
    ];
    let mut out = String::with_capacity(GREP_FILE + 64);
    let mut seed = (i as u64).wrapping_mul(6_364_136_223_846_793_005) | 1;
    while out.len() < GREP_FILE {
        for _ in 0..9 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            out.push_str(WORDS[(seed >> 33) as usize % WORDS.len()]);
            out.push(' ');
        }
        out.push('\n');
    }
    if i.is_multiple_of(10) {
        out.push_str(&format!("error {i}\n"));
    }
    out
}

/// One Grep of `pattern` through `url`: elapsed time and matching lines.
async fn grep(url: &str, pattern: &str) -> (Duration, u64) {
    let mut fs = client(url).await;
    let start = Instant::now();
    let req = pb::GrepRequest {
        pattern: pattern.into(),
        path: "/data/corpus".into(),
        max_visited: UNLIMITED,
        max_duration_ms: UNLIMITED,
        ..Default::default()
    };
    let mut stream = fs.grep(req).await.expect("grep").into_inner();
    let mut matched = 0;
    while let Some(msg) = stream.message().await.expect("grep stream") {
        if let Some(pb::grep_response::Result::Summary(s)) = msg.result {
            matched = s.matched;
        }
    }
    (start.elapsed(), matched)
}

/// `rg` of `pattern` over `dir`: elapsed time and matching lines (count
/// mode).
fn rg(dir: &Path, pattern: &str) -> (Duration, u64) {
    let rg = std::env::var("RG").unwrap_or_else(|_| "rg".into());
    let start = Instant::now();
    let out = Command::new(&rg)
        .args(["-c", "--no-messages", pattern])
        .arg(dir)
        .output()
        .expect("run rg (set RG=/path/to/rg)");
    let elapsed = start.elapsed();
    let matched = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.rsplit(':').next()?.parse::<u64>().ok())
        .sum();
    (elapsed, matched)
}

#[tokio::main]
async fn main() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let s3 = s3::s3();
    s3.bucket("bench");
    let small = scaled(10_000, CALLERS);
    let grep_files = scaled(10_000, CALLERS);

    // 1. Small files.
    let store = serve(
        &tmp.path().join("store-server"),
        &store_mount(&tmp.path().join("store-data")),
    );
    let mut rows = vec![(
        "Store (RocksDB), one server",
        small_files(&[store.url()], small).await,
    )];
    drop(store);
    let one = serve(&tmp.path().join("one"), &object_mount("one"));
    rows.push((
        "object tier (versitygw on loopback), one server",
        small_files(&[one.url()], small).await,
    ));
    drop(one);
    if std::env::var_os("AGENTVFS_SERVER_BIN").is_none() {
        let bare = serve(&tmp.path().join("bare"), &object_mount_bare("bare"));
        rows.push((
            "object tier, one server, no history and no change log",
            small_files(&[bare.url()], small).await,
        ));
        drop(bare);
    }
    let (a, b) = (
        serve(&tmp.path().join("a"), &object_mount("two")),
        serve(&tmp.path().join("b"), &object_mount("two")),
    );
    rows.push((
        "object tier, two servers sharing the bucket",
        small_files(&[a.url(), b.url()], small).await,
    ));
    drop((a, b));

    // 2. Grep: the corpus in the bucket (written through a server) and on disk.
    let disk = tmp.path().join("corpus");
    let loader = serve(&tmp.path().join("loader"), &object_mount("grep"));
    let bytes = grep_files * GREP_FILE;
    throughput(&[loader.url()], grep_files, |mut fs, i| async move {
        let req = pb::WriteRequest {
            path: format!("/data/corpus/d{:02}/f{i:05}.txt", i % 100),
            content: grep_content(i),
            ..Default::default()
        };
        fs.write(req).await.expect("load the corpus");
    })
    .await;
    drop(loader);
    for i in 0..grep_files {
        let dir = disk.join(format!("d{:02}", i % 100));
        std::fs::create_dir_all(&dir).expect("corpus dir");
        std::fs::write(dir.join(format!("f{i:05}.txt")), grep_content(i)).expect("corpus file");
    }
    let (mut cold, mut warm, mut rg_times, mut lists) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut selective, mut rg_selective) = (Vec::new(), Vec::new());
    let (mut counts, mut selective_counts) = ((0, 0), (0, 0));
    rg(&disk, PATTERN); // warm the page cache
    for run in 0..runs() {
        let server = serve(
            &tmp.path().join(format!("grep{run}")),
            &object_mount("grep"),
        );
        let (first, matched) = grep(&server.url(), PATTERN).await;
        cold.push(first.as_secs_f64());
        let (again, _) = grep(&server.url(), PATTERN).await;
        warm.push(again.as_secs_f64());
        let (took, rg_matched) = rg(&disk, PATTERN);
        rg_times.push(took.as_secs_f64());
        for _ in 0..LEARNING_GREPS {
            grep(&server.url(), SELECTIVE).await;
        }
        let (took, matched_one) = grep(&server.url(), SELECTIVE).await;
        selective.push(took.as_secs_f64());
        let (took, rg_matched_one) = rg(&disk, SELECTIVE);
        rg_selective.push(took.as_secs_f64());
        selective_counts = (matched_one, rg_matched_one);
        // The heads of the namespace (the change log and past versions
        // live beside them under other keys).
        let (listed, keys) = list_alone("grep/default/f/").await;
        assert_eq!(keys, grep_files, "every corpus file is one key");
        lists.push(listed.as_secs_f64());
        counts = (matched, rg_matched);
    }
    let (cold, warm, rg_time, list) = (median(cold), median(warm), median(rg_times), median(lists));
    let (selective, rg_selective) = (median(selective), median(rg_selective));

    println!(
        "| 1 KiB files, {CALLERS} gRPC clients ({small} files) | Write new /s | Write again /s | Read /s | Delete /s |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (what, [w, rw, r, d]) in &rows {
        println!("| {what} | {w:.0} | {rw:.0} | {r:.0} | {d:.0} |");
    }
    println!();
    println!(
        "| Grep `{PATTERN}` over {grep_files} objects ({:.0} MB), medians of {} runs | time | objects/s | / rg |",
        bytes as f64 / 1e6,
        runs()
    );
    println!("|---|---:|---:|---:|");
    println!(
        "| object tier, cold (fresh server: every head fetched) | {:.0} ms | {:.0} | {:.2} |",
        cold * 1000.0,
        grep_files as f64 / cold,
        cold / rg_time
    );
    println!(
        "| object tier, warm (cached: list pages and a local scan) | {:.0} ms | {:.0} | {:.2} |",
        warm * 1000.0,
        grep_files as f64 / warm,
        warm / rg_time
    );
    println!(
        "| listing the {grep_files} keys alone (object_store, no agentvfs) | {:.0} ms | {:.0} | {:.2} |",
        list * 1000.0,
        grep_files as f64 / list,
        list / rg_time
    );
    println!(
        "| rg over the same files on local disk | {:.0} ms | {:.0} | 1.00 |",
        rg_time * 1000.0,
        grep_files as f64 / rg_time
    );
    println!();
    println!(
        "| Grep `{SELECTIVE}` (one line), medians of {} runs | time | / rg |",
        runs()
    );
    println!("|---|---:|---:|");
    println!(
        "| object tier, indexed (after {LEARNING_GREPS} Greps learned the corpus) | {:.1} ms | {:.3} |",
        selective * 1000.0,
        selective / rg_selective
    );
    println!(
        "| rg over the same files on local disk | {:.1} ms | 1.000 |",
        rg_selective * 1000.0
    );
    println!(
        "matching lines: agentvfs {} · rg {} ({})",
        selective_counts.0,
        selective_counts.1,
        if selective_counts == (1, 1) {
            "identical"
        } else {
            "DIFFERENT"
        }
    );
    println!();
    println!(
        "matching lines: agentvfs {} · rg {} ({})",
        counts.0,
        counts.1,
        if counts.0 == counts.1 {
            "identical"
        } else {
            "DIFFERENT"
        }
    );
}
