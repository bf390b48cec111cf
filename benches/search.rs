//! Grep and Glob end to end through the real server and a gRPC client, side by
//! side with ripgrep and fd on the same trees with the same thread count.
//!
//! Run with `cargo bench --bench search` (see README). It generates (once, and
//! keeps under `$AGENTVFS_BENCH_DIR`, default `/tmp/agentvfs-bench`) a tree of
//! 50,000 files / ~500 MB of mixed text with ignore rules, hidden and binary
//! files, and uses a real source tree (`$AGENTVFS_BENCH_REAL`, default the
//! crate sources under `~/.cargo/registry/src`). For every case it checks that
//! the result sets are identical (modulo order), then prints a markdown table
//! of median wall times over `$AGENTVFS_BENCH_RUNS` runs (default 5, after one
//! warm-up), their ratio, the time to the first streamed batch, and the
//! server's peak memory (`VmHWM`). Each case runs a second way too: through
//! the `agentvfs` CLI (`agentvfs grep` / `agentvfs glob`), process start,
//! connection and printing included, as rg and fd are timed.
//! `AGENTVFS_BENCH_ONLY=glob` runs only the cases whose name contains that
//! text.
//!
//! The server keeps its data (the Filesystem mounts' search indexes among
//! it) in `$AGENTVFS_BENCH_DIR/data`, never in the user's data directory,
//! and across runs: a run after another measures the indexes warm, as a
//! server that has served those trees before; the first run, or one with
//! `AGENTVFS_BENCH_COLD=1` (which empties that directory first), measures
//! Greps that still learn the trees (docs/search-index.md). The run says
//! how many indexes it found kept.
//!
//! Both sides are configured alike: two threads (`-j2`; the machine these
//! numbers were taken on has two cores, which the server's workers use), hidden
//! files skipped, `.gitignore` honoured outside git repositories
//! (`--no-require-git`), no global ignore file, and the default
//! ignored names excluded (`-g '!name'` / `-E name`).

mod support;

use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use agentvfs::search::rules::DEFAULT_IGNORED_NAMES;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::Served;
use tonic::transport::Channel;

/// Threads given to rg and fd; the server uses one worker per core.
const THREADS: &str = "2";
/// Files of the generated tree: 50 × 50 directories × 20 files.
const DIRS: usize = 50;
const FILES_PER_DIR: usize = 20;
/// Marks a complete generated tree (hidden, so neither side sees it).
const MARKER: &str = ".agentvfs-bench-v1";

/// How many Filesystem search indexes the server kept in `data`
/// (`agentvfs-journal/<mount>/search-index/*.avix`, src/search/index/file_keeper.rs).
fn kept_indexes(data: &Path) -> usize {
    let dirs = |dir: PathBuf| {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
    };
    dirs(data.join("agentvfs-journal"))
        .flat_map(|mount| dirs(mount.join("search-index")))
        .filter(|file| file.extension().is_some_and(|ext| ext == "avix"))
        .count()
}

/// One search to compare.
struct Case {
    name: &'static str,
    kind: Kind,
}

enum Kind {
    Grep {
        pattern: &'static str,
        literal: bool,
        case_insensitive: bool,
    },
    Glob(&'static str),
}

/// Result set of a run, normalised to logical paths.
type Results = BTreeSet<(String, u64)>;

struct Measured {
    median: Duration,
    first_batch: Option<Duration>,
    results: Results,
}

fn main() {
    let runs = support::runs();
    let base = PathBuf::from(
        std::env::var("AGENTVFS_BENCH_DIR").unwrap_or_else(|_| "/tmp/agentvfs-bench".into()),
    );
    let generated = base.join("generated");
    generate(&generated);
    let data = base.join("data");
    if std::env::var_os("AGENTVFS_BENCH_COLD").is_some() {
        let _ = std::fs::remove_dir_all(&data);
    }
    std::fs::create_dir_all(&data).expect("the bench's data directory");
    let kept = kept_indexes(&data);
    println!(
        "server data: {}, {kept} search indexes kept from earlier runs ({})\n",
        data.display(),
        match kept {
            0 => "the first Greps of each tree learn it",
            _ => "Greps find what earlier runs learned",
        }
    );
    let real = std::env::var("AGENTVFS_BENCH_REAL")
        .map(PathBuf::from)
        .unwrap_or_else(|_| registry_sources());
    let trees = [
        (
            "generated 50k files",
            generated,
            [
                grep_case("rare literal", "ZQXJ_RARE_TOKEN", true, false),
                grep_case("common word", "handler", true, false),
                grep_case("-i regex alternation", "(error|warning)_code", false, true),
            ],
        ),
        (
            "cargo registry src",
            real,
            [
                grep_case("rare literal", "PhantomPinned", true, false),
                grep_case("common word", "return", true, false),
                grep_case("-i regex alternation", "(todo|fixme)", false, true),
            ],
        ),
    ];
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    println!(
        "| tree | case | agentvfs median | rg/fd median | ratio | first batch | results | identical |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---|");
    for (tree, root, greps) in trees {
        let server = Served::start_with_env(
            [OsStr::new("--root"), root.as_os_str()],
            &root,
            vec![("XDG_DATA_HOME", data.as_os_str())],
        );
        let mut client = rt.block_on(connect(&server.url()));
        let glob = Case {
            name: "glob **/*.rs",
            kind: Kind::Glob("**/*.rs"),
        };
        // `AGENTVFS_BENCH_ONLY=glob` (or any part of a case name) runs a subset.
        let only = std::env::var("AGENTVFS_BENCH_ONLY").unwrap_or_default();
        for case in greps
            .iter()
            .chain([&glob])
            .filter(|c| c.name.contains(&only))
        {
            let url = server.url();
            let mut measured = measure(
                runs,
                &mut [
                    Box::new(|| rt.block_on(run_ours(&mut client, &case.kind))),
                    Box::new(|| run_cli(&url, &case.kind)),
                    Box::new(|| run_reference(&root, &case.kind)),
                ],
            );
            let theirs = measured.pop().expect("the reference's");
            let cli = measured.pop().expect("the CLI's");
            let ours = measured.pop().expect("the gRPC client's");
            for (how, ours) in [("", ours), (" (CLI, process start included)", cli)] {
                let identical = ours.results == theirs.results;
                if !identical {
                    report_difference(&ours.results, &theirs.results);
                }
                println!(
                    "| {tree} | {}{how} | {:.1} ms | {:.1} ms | {:.2} | {} | {} | {} |",
                    case.name,
                    ms(ours.median),
                    ms(theirs.median),
                    ours.median.as_secs_f64() / theirs.median.as_secs_f64(),
                    ours.first_batch
                        .map_or("-".into(), |d| format!("{:.1} ms", ms(d))),
                    ours.results.len(),
                    if identical { "yes" } else { "NO" },
                );
            }
        }
        println!(
            "| {tree} | server peak RSS (VmHWM) | {} | | | | | |",
            peak_rss(server.pid())
        );
        drop(server);
    }
}

fn grep_case(name: &'static str, pattern: &'static str, literal: bool, ci: bool) -> Case {
    Case {
        name,
        kind: Kind::Grep {
            pattern,
            literal,
            case_insensitive: ci,
        },
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One run of a search: its wall time, time to its first batch, results.
type Run<'a> = Box<dyn FnMut() -> (Duration, Option<Duration>, Results) + 'a>;

/// One warm-up of each way, then `runs` rounds running each way once in
/// turn, so the machine's load (shared, and it moves) weighs on every way
/// alike; per way the median and the last result set.
fn measure(runs: usize, ways: &mut [Run<'_>]) -> Vec<Measured> {
    let mut results: Vec<Results> = ways.iter_mut().map(|f| f().2).collect();
    let mut times = vec![Vec::new(); ways.len()];
    let mut firsts = vec![Vec::new(); ways.len()];
    for _ in 0..runs {
        for (i, f) in ways.iter_mut().enumerate() {
            let (t, first, r) = f();
            times[i].push(t);
            firsts[i].extend(first);
            results[i] = r;
        }
    }
    times
        .into_iter()
        .zip(firsts)
        .zip(results)
        .map(|((mut times, mut firsts), results)| {
            times.sort();
            firsts.sort();
            Measured {
                median: times[times.len() / 2],
                first_batch: firsts.get(firsts.len() / 2).copied(),
                results,
            }
        })
        .collect()
}

async fn connect(url: &str) -> FilesystemClient<Channel> {
    let channel = Channel::from_shared(url.to_owned())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    FilesystemClient::new(channel).max_decoding_message_size(64 << 20)
}

/// Budgets large enough to never stop these searches.
const MAX_VISITED: u64 = 100_000_000;
const MAX_DURATION_MS: u64 = 600_000;

async fn run_ours(
    client: &mut FilesystemClient<Channel>,
    kind: &Kind,
) -> (Duration, Option<Duration>, Results) {
    // Batches are kept as decoded and turned into a result set after the
    // clock stops, as rg's and fd's output is parsed after theirs.
    let (mut grep_batches, mut glob_batches) = (Vec::new(), Vec::new());
    let start = Instant::now();
    let mut first = None;
    match kind {
        Kind::Grep {
            pattern,
            literal,
            case_insensitive,
        } => {
            let req = pb::GrepRequest {
                pattern: (*pattern).into(),
                path: "/workspace".into(),
                literal: *literal,
                case_insensitive: *case_insensitive,
                max_visited: MAX_VISITED,
                max_duration_ms: MAX_DURATION_MS,
                ..Default::default()
            };
            let mut stream = client.grep(req).await.expect("grep").into_inner();
            while let Some(msg) = stream.message().await.expect("grep stream") {
                match msg.result {
                    Some(pb::grep_response::Result::Batch(b)) => {
                        first.get_or_insert_with(|| start.elapsed());
                        grep_batches.push(b);
                    }
                    Some(pb::grep_response::Result::Summary(s)) => check_summary(&s),
                    None => {}
                }
            }
        }
        Kind::Glob(pattern) => {
            let req = pb::GlobRequest {
                pattern: (*pattern).into(),
                path: "/workspace".into(),
                // fd prints paths only; so does this Glob.
                paths_only: true,
                max_visited: MAX_VISITED,
                max_duration_ms: MAX_DURATION_MS,
                ..Default::default()
            };
            let mut stream = client.glob(req).await.expect("glob").into_inner();
            while let Some(msg) = stream.message().await.expect("glob stream") {
                match msg.result {
                    Some(pb::glob_response::Result::Batch(b)) => {
                        first.get_or_insert_with(|| start.elapsed());
                        glob_batches.push(b);
                    }
                    Some(pb::glob_response::Result::Summary(s)) => check_summary(&s),
                    None => {}
                }
            }
        }
    }
    let elapsed = start.elapsed();
    let grep_results = grep_batches
        .into_iter()
        .flat_map(|b: pb::GrepBatch| b.matches)
        .map(|m| (m.path, m.line_number));
    let glob_results = glob_batches
        .into_iter()
        .flat_map(|b: pb::GlobBatch| b.entries)
        .map(|e| (e.path, 0));
    (elapsed, first, grep_results.chain(glob_results).collect())
}

/// The same search through the `agentvfs` CLI against the server at `url`,
/// end to end as a person or a script runs it: the process's start, its
/// connection and its printing included. Its output is parsed after the
/// clock stops, as rg's and fd's is.
fn run_cli(url: &str, kind: &Kind) -> (Duration, Option<Duration>, Results) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentvfs"));
    let budgets = [
        "--max-visited".to_owned(),
        MAX_VISITED.to_string(),
        "--max-duration-ms".to_owned(),
        MAX_DURATION_MS.to_string(),
    ];
    match kind {
        Kind::Grep {
            pattern,
            literal,
            case_insensitive,
        } => {
            cmd.args(["grep", "--addr", url]).args(&budgets);
            if *literal {
                cmd.arg("-F");
            }
            if *case_insensitive {
                cmd.arg("-i");
            }
            cmd.args(["--", pattern, "/workspace"]);
        }
        Kind::Glob(pattern) => {
            cmd.args(["glob", "--addr", url]).args(&budgets);
            cmd.args(["--", pattern, "/workspace"]);
        }
    }
    let start = Instant::now();
    let out = cmd.output().expect("the agentvfs CLI runs");
    let elapsed = start.elapsed();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("the CLI prints UTF-8");
    let results = match kind {
        // `path:line:text`, the path ending at the first `:<digits>:`.
        Kind::Grep { .. } => text
            .lines()
            .map(|line| {
                let bytes = line.as_bytes();
                (0..bytes.len())
                    .filter(|&i| bytes[i] == b':')
                    .find_map(|i| {
                        let digits = bytes[i + 1..].iter().take_while(|b| b.is_ascii_digit());
                        let n = digits.count();
                        (n > 0 && bytes.get(i + 1 + n) == Some(&b':')).then(|| {
                            (
                                line[..i].to_owned(),
                                line[i + 1..i + 1 + n].parse().unwrap(),
                            )
                        })
                    })
                    .unwrap_or_else(|| panic!("not a grep line: {line}"))
            })
            .collect(),
        Kind::Glob(_) => text.lines().map(|path| (path.to_owned(), 0)).collect(),
    };
    (elapsed, None, results)
}

fn check_summary(s: &pb::SearchSummary) {
    assert_eq!(
        s.aborted_reason(),
        pb::AbortedReason::Unspecified,
        "a budget cut the benchmark short: {s:?}"
    );
}

/// Runs rg or fd configured like the server and parses its output.
fn run_reference(root: &Path, kind: &Kind) -> (Duration, Option<Duration>, Results) {
    let mut cmd;
    match kind {
        Kind::Grep {
            pattern,
            literal,
            case_insensitive,
        } => {
            cmd = Command::new("rg");
            cmd.args(["-j", THREADS, "--no-require-git", "--no-ignore-global"])
                .args(["--no-heading", "--line-number", "--null", "--no-messages"])
                .args(["--color", "never"]);
            for name in DEFAULT_IGNORED_NAMES {
                cmd.arg("-g").arg(format!("!{name}"));
            }
            if *literal {
                cmd.arg("-F");
            }
            if *case_insensitive {
                cmd.arg("-i");
            }
            cmd.arg("-e").arg(pattern).arg(root);
        }
        Kind::Glob(pattern) => {
            cmd = Command::new("fd");
            cmd.args(["-j", THREADS, "--no-require-git", "--no-global-ignore-file"])
                .args(["-t", "f", "-t", "l", "--print0", "--color", "never"]);
            for name in DEFAULT_IGNORED_NAMES {
                cmd.arg("-E").arg(name);
            }
            // fd matches a glob without `/` against the file name: `*.rs`
            // there selects what `**/*.rs` selects here.
            let name_glob = pattern.trim_start_matches("**/");
            cmd.arg("--glob").arg(name_glob).arg(root);
        }
    }
    let start = Instant::now();
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (cargo install ripgrep fd-find)"));
    let elapsed = start.elapsed();
    let logical = |host: &[u8]| {
        let host = String::from_utf8_lossy(host);
        let rel = Path::new(host.as_ref())
            .strip_prefix(root)
            .unwrap_or_else(|_| panic!("{host} outside {}", root.display()));
        format!("/workspace/{}", rel.display())
    };
    let mut results = Results::new();
    match kind {
        Kind::Grep { .. } => {
            for line in out.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                // Lines without a NUL are rg's own notes ("stopped searching
                // binary file after match").
                let Some(nul) = line.iter().position(|&b| b == 0) else {
                    continue;
                };
                let rest = &line[nul + 1..];
                let colon = rest.iter().position(|&b| b == b':').expect("line number");
                let number = std::str::from_utf8(&rest[..colon])
                    .ok()
                    .and_then(|n| n.parse().ok())
                    .expect("line number");
                results.insert((logical(&line[..nul]), number));
            }
        }
        Kind::Glob(_) => {
            for path in out.stdout.split(|&b| b == 0).filter(|p| !p.is_empty()) {
                results.insert((logical(path), 0));
            }
        }
    }
    (elapsed, None, results)
}

fn report_difference(ours: &Results, theirs: &Results) {
    let only_ours: Vec<_> = ours.difference(theirs).take(5).collect();
    let only_theirs: Vec<_> = theirs.difference(ours).take(5).collect();
    eprintln!(
        "result sets differ: {} only in agentvfs (e.g. {only_ours:?}), {} only in the reference \
         (e.g. {only_theirs:?})",
        ours.difference(theirs).count(),
        theirs.difference(ours).count()
    );
}

fn peak_rss(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l["VmHWM:".len()..].trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn registry_sources() -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let src = Path::new(&home).join(".cargo/registry/src");
    std::fs::read_dir(&src)
        .ok()
        .and_then(|mut dirs| dirs.find_map(|d| d.ok().map(|d| d.path())))
        .unwrap_or_else(|| panic!("no crate sources under {}", src.display()))
}

/// splitmix64: a tiny deterministic generator, so every run builds the same tree.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Writes the generated tree unless a complete one is already there.
fn generate(root: &Path) {
    if root.join(MARKER).is_file() {
        return;
    }
    eprintln!("generating {} (once) ...", root.display());
    if root.is_dir() {
        std::fs::remove_dir_all(root).expect("clear old tree");
    }
    let mut rng = Rng(42);
    let syllables = [
        "ka", "lo", "mi", "ren", "sto", "ve", "dra", "qu", "ix", "tor", "pel", "an", "se", "bu",
        "zo", "ny", "gri", "ful", "th", "ow",
    ];
    let words: Vec<String> = (0..4096)
        .map(|_| {
            let n = 1 + rng.below(3);
            (0..n)
                .map(|_| syllables[rng.below(syllables.len() as u64) as usize])
                .collect()
        })
        .collect();
    let exts = ["rs", "py", "md", "txt", "json"];
    let specials = ["Error_Code", "WARNING_CODE", "error_code", "Warning_code"];
    let mut text = String::new();
    for d in 0..DIRS {
        for s in 0..DIRS {
            let dir = root.join(format!("d{d:03}/s{s:02}"));
            std::fs::create_dir_all(&dir).expect("mkdir");
            for f in 0..FILES_PER_DIR {
                text.clear();
                let size = 2_000 + rng.below(16_000) as usize;
                let rare = rng.below(2_500) == 0;
                while text.len() < size {
                    let mut line_len = 0;
                    let target = 30 + rng.below(70) as usize;
                    while line_len < target {
                        let w = &words[rng.below(words.len() as u64) as usize];
                        text.push_str(w);
                        text.push(' ');
                        line_len += w.len() + 1;
                    }
                    if rng.below(64) == 0 {
                        text.push_str("handler ");
                    }
                    if rng.below(1_000) == 0 {
                        text.push_str(specials[rng.below(4) as usize]);
                    }
                    if rare && rng.below(50) == 0 {
                        text.push_str("ZQXJ_RARE_TOKEN");
                    }
                    text.push('\n');
                }
                let name = format!("f{f:02}.{}", exts[(f + s) % exts.len()]);
                std::fs::write(dir.join(name), &text).expect("write");
            }
        }
        // Ignored, hidden and binary files holding matches neither side may
        // report.
        let dir = root.join(format!("d{d:03}"));
        std::fs::write(
            dir.join("trace.log"),
            "handler ZQXJ_RARE_TOKEN error_code\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("generated")).unwrap();
        std::fs::write(dir.join("generated/out.rs"), "handler error_code\n").unwrap();
        std::fs::create_dir_all(dir.join(".hidden")).unwrap();
        std::fs::write(dir.join(".hidden/h.rs"), "handler error_code\n").unwrap();
        std::fs::write(dir.join("blob.bin"), b"\0\x01handler ZQXJ_RARE_TOKEN\n").unwrap();
        std::fs::create_dir_all(dir.join("node_modules/x")).unwrap();
        std::fs::write(dir.join("node_modules/x/i.rs"), "handler\n").unwrap();
    }
    std::fs::write(root.join(".gitignore"), "*.log\ngenerated/\n").unwrap();
    let mut marker = std::fs::File::create(root.join(MARKER)).unwrap();
    writeln!(marker, "complete").unwrap();
}
