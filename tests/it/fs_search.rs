//! Grep and Glob over real directories through gRPC: ignore and hidden rules
//! with their counts, binary and size limits, context, path order across the
//! parallel workers, budgets, cancellation, back-pressure and early first
//! batches.

use crate::util::{Server, assert_error, glob_all, glob_entries, grep_all, write};
use agentvfs::pb::{self, AbortedReason};
use std::path::Path;
use std::time::{Duration, Instant};
use tonic::Code;

fn serve(root: &Path) -> Server {
    Server::start_with(None, &["--root", root.to_str().unwrap()])
}

fn put(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn glob(pattern: &str) -> pb::GlobRequest {
    pb::GlobRequest {
        pattern: pattern.into(),
        path: "/workspace".into(),
        ..Default::default()
    }
}

fn grep(pattern: &str) -> pb::GrepRequest {
    pb::GrepRequest {
        pattern: pattern.into(),
        path: "/workspace".into(),
        ..Default::default()
    }
}

/// A tree exercising every skip rule: hidden names, the default list of docs/contract.md § Glob and Grep,
/// `.gitignore` with a negation, and a deeper `.ignore` that beats a deeper
/// `.gitignore` negation (ripgrep's precedence).
fn rules_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    put(r, ".gitignore", "*.log\nbuild-out/\n!keep.log\n");
    put(r, ".env", "x\n");
    put(r, ".hidden/y.rs", "x\n");
    put(r, "a.log", "x\n");
    put(r, "keep.log", "x\n");
    put(r, "build-out/z.rs", "x\n");
    put(r, "node_modules/m.rs", "x\n");
    put(r, "src/x.rs", "x\n");
    put(r, "sub/.ignore", "*.rs\n");
    put(r, "sub/.gitignore", "!q.rs\n");
    put(r, "sub/q.rs", "x\n");
    put(r, "sub/r.txt", "x\n");
    dir
}

/// By default hidden entries and ignored entries are skipped and counted
/// separately; every skip is visible in the summary.
#[tokio::test]
async fn ignore_and_hidden_rules_skip_and_count() {
    let dir = rules_tree();
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let (paths, s) = glob_all(&mut fs, glob("**/*")).await.unwrap();
    assert_eq!(
        paths,
        [
            "/workspace/keep.log",
            "/workspace/src/x.rs",
            "/workspace/sub/r.txt"
        ]
    );
    assert_eq!(s.skipped_hidden, 5, "{s:?}");
    assert_eq!(s.skipped_ignored, 4, "{s:?}");
    let (matches, s) = grep_all(&mut fs, grep("x")).await.unwrap();
    assert_eq!(matches.len(), 3);
    assert_eq!((s.skipped_hidden, s.skipped_ignored), (5, 4));
}

/// include_hidden walks hidden entries but still applies ignore rules.
#[tokio::test]
async fn include_hidden_walks_hidden_entries() {
    let dir = rules_tree();
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let mut req = glob("**/*");
    req.include_hidden = true;
    let (paths, s) = glob_all(&mut fs, req).await.unwrap();
    assert_eq!(
        paths,
        [
            "/workspace/.env",
            "/workspace/.gitignore",
            "/workspace/.hidden/y.rs",
            "/workspace/keep.log",
            "/workspace/src/x.rs",
            "/workspace/sub/.gitignore",
            "/workspace/sub/.ignore",
            "/workspace/sub/r.txt"
        ]
    );
    assert_eq!((s.skipped_hidden, s.skipped_ignored), (0, 4));
}

/// include_ignored walks ignored entries (ignore files and the default list)
/// but still skips hidden ones.
#[tokio::test]
async fn include_ignored_walks_ignored_entries() {
    let dir = rules_tree();
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let mut req = glob("**/*.{rs,log}");
    req.include_ignored = true;
    let (paths, s) = glob_all(&mut fs, req).await.unwrap();
    assert_eq!(
        paths,
        [
            "/workspace/a.log",
            "/workspace/build-out/z.rs",
            "/workspace/keep.log",
            "/workspace/node_modules/m.rs",
            "/workspace/src/x.rs",
            "/workspace/sub/q.rs"
        ]
    );
    assert_eq!((s.skipped_hidden, s.skipped_ignored), (5, 0));
}

/// Ignore files above the search root still apply when searching a subtree.
#[tokio::test]
async fn ignore_files_above_the_search_root_apply() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), ".gitignore", "secret.txt\n");
    put(dir.path(), "a/b/secret.txt", "needle\n");
    put(dir.path(), "a/b/open.txt", "needle\n");
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let mut req = grep("needle");
    req.path = "/workspace/a/b".into();
    let (matches, s) = grep_all(&mut fs, req).await.unwrap();
    let paths: Vec<_> = matches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(paths, ["/workspace/a/b/open.txt"]);
    assert_eq!(s.skipped_ignored, 1);
}

/// Rules of a nested ignore file are relative to its own directory: an
/// anchored rule (`/x`) or one with a `/` inside matches only there, an
/// unanchored name at any depth below it, and nothing outside it.
#[tokio::test]
async fn nested_ignore_rules_are_relative_to_their_directory() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    put(
        r,
        "sub/.gitignore",
        "/top.txt
deep/x.txt
any.txt
",
    );
    for file in [
        "top.txt",
        "any.txt",
        "sub/top.txt",
        "sub/a/top.txt",
        "sub/deep/x.txt",
        "sub/a/deep/x.txt",
        "sub/any.txt",
        "sub/a/any.txt",
    ] {
        put(r, file, "x\n");
    }
    let server = serve(r);
    let mut fs = server.fs().await;
    let (paths, s) = glob_all(&mut fs, glob("**/*.txt")).await.unwrap();
    assert_eq!(
        paths,
        [
            "/workspace/any.txt",
            "/workspace/sub/a/deep/x.txt",
            "/workspace/sub/a/top.txt",
            "/workspace/top.txt",
        ]
    );
    assert_eq!(s.skipped_ignored, 4, "{s:?}");
    // The same rules when the search starts below the ignore file.
    let mut req = glob("**/*.txt");
    req.path = "/workspace/sub/a".into();
    let (paths, _) = glob_all(&mut fs, req).await.unwrap();
    assert_eq!(
        paths,
        ["/workspace/sub/a/deep/x.txt", "/workspace/sub/a/top.txt"]
    );
}

/// Compiled ignore files are reused across searches, yet an edited ignore
/// file takes effect on the next search.
#[tokio::test]
async fn an_edited_ignore_file_applies_to_the_next_search() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "a/.gitignore", "*.log\n");
    put(dir.path(), "a/x.log", "x\n");
    put(dir.path(), "a/y.txt", "x\n");
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let (paths, _) = glob_all(&mut fs, glob("**/*.*")).await.unwrap();
    assert_eq!(paths, ["/workspace/a/y.txt"]);
    put(dir.path(), "a/.gitignore", "*.txt\n");
    let (paths, _) = glob_all(&mut fs, glob("**/*.*")).await.unwrap();
    assert_eq!(paths, ["/workspace/a/x.log"]);
}

/// `paths_only` returns the same paths in the same order, without metadata;
/// links stay marked as links.
#[tokio::test]
async fn glob_paths_only_returns_the_same_paths_without_metadata() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "a.rs", "12345");
    put(dir.path(), "src/b.rs", "x");
    std::os::unix::fs::symlink("a.rs", dir.path().join("link.rs")).unwrap();
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let (full, _) = glob_entries(&mut fs, glob("**/*.rs")).await.unwrap();
    let mut req = glob("**/*.rs");
    req.paths_only = true;
    let (bare, _) = glob_entries(&mut fs, req).await.unwrap();
    let paths = |e: &[pb::FileInfo]| e.iter().map(|e| e.path.clone()).collect::<Vec<_>>();
    assert_eq!(paths(&bare), paths(&full));
    assert_eq!(
        paths(&bare),
        [
            "/workspace/a.rs",
            "/workspace/link.rs",
            "/workspace/src/b.rs"
        ]
    );
    assert_eq!(full[0].size, 5);
    assert!(full[0].modified_time.is_some());
    for e in &bare {
        assert_eq!((e.size, e.version), (0, 0), "{e:?}");
        assert!(
            e.modified_time.is_none() && e.created_time.is_none(),
            "{e:?}"
        );
    }
    let links: Vec<bool> = bare.iter().map(|e| e.is_symlink).collect();
    assert_eq!(links, [false, true, false]);
}

/// Glob semantics of docs/contract.md § Glob and Grep: `*` stays in one directory, `**/x` matches at
/// depth zero, patterns are relative to the search path.
#[tokio::test]
async fn glob_semantics_on_real_directories() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "main.rs", "");
    put(dir.path(), "src/lib.rs", "");
    put(dir.path(), "src/deep/mod.rs", "");
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let (paths, _) = glob_all(&mut fs, glob("*.rs")).await.unwrap();
    assert_eq!(paths, ["/workspace/main.rs"]);
    let (paths, _) = glob_all(&mut fs, glob("**/*.rs")).await.unwrap();
    assert_eq!(
        paths,
        [
            "/workspace/main.rs",
            "/workspace/src/deep/mod.rs",
            "/workspace/src/lib.rs"
        ]
    );
    let mut req = glob("*.rs");
    req.path = "/workspace/src".into();
    let (paths, _) = glob_all(&mut fs, req).await.unwrap();
    assert_eq!(paths, ["/workspace/src/lib.rs"]);
}

/// Binary files and files over the size limit are skipped and counted, never
/// searched.
#[tokio::test]
async fn binary_and_oversized_files_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "text.txt", "needle\n");
    put(dir.path(), "blob.bin", b"needle\0\x01\x02needle\n");
    let big = std::fs::File::create(dir.path().join("huge.txt")).unwrap();
    // Sparse: the size check happens before any byte is read.
    big.set_len(agentvfs::search::DEFAULT_MAX_GREP_FILE_BYTES + 1)
        .unwrap();
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let (matches, s) = grep_all(&mut fs, grep("needle")).await.unwrap();
    let paths: Vec<_> = matches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(paths, ["/workspace/text.txt"]);
    assert_eq!((s.skipped_binary, s.skipped_too_large), (1, 1), "{s:?}");
    assert_eq!(s.files_searched, 1);
}

/// As in ripgrep, a file whose NUL byte comes after the first 64 KiB buffer
/// still reports the lines matched in the buffers before it, and is counted
/// as binary, not as searched (ripgrep's `sherlock-nul.txt` case), also
/// after files with lines longer than the read buffer.
#[tokio::test]
async fn late_nul_reports_earlier_matches_and_counts_binary() {
    let dir = tempfile::tempdir().unwrap();
    let filler = "filler line of text\n".repeat(5_000);
    // Searched first: lines longer than the 64 KiB buffer make a reused
    // searcher's buffer grow, which must not change how the next file reads.
    for i in 0..8 {
        put(dir.path(), &format!("a{i}.txt"), "x".repeat(300_000));
    }
    put(
        dir.path(),
        "late.txt",
        format!("needle one\n{filler}needle two\n\0needle three\n"),
    );
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let (matches, s) = grep_all(&mut fs, grep("needle")).await.unwrap();
    let got: Vec<_> = matches.iter().map(|m| m.line_number).collect();
    assert_eq!(got, [1]);
    assert_eq!((s.skipped_binary, s.files_searched), (1, 8), "{s:?}");
}

/// Literal, case-insensitive, glob filter, context lines, per-file limit and
/// a single file as the search root.
#[tokio::test]
async fn grep_options_on_real_files() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "a.rs", "one\nTwo a.b\nthree\nfour\ntwo x\n");
    put(dir.path(), "b.txt", "two\n");
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let mut req = grep("two");
    req.case_insensitive = true;
    req.glob = "*.rs".into();
    req.before_context = 1;
    req.after_context = 1;
    let (matches, _) = grep_all(&mut fs, req).await.unwrap();
    let got: Vec<_> = matches
        .iter()
        .map(|m| (m.line_number, m.is_context, m.r#match.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (1, true, ""),
            (2, false, "Two"),
            (3, true, ""),
            (4, true, ""),
            (5, false, "two")
        ]
    );
    let mut req = grep("a.b");
    req.literal = true;
    req.path = "/workspace/a.rs".into();
    let (matches, _) = grep_all(&mut fs, req).await.unwrap();
    assert_eq!(matches.len(), 1);
    let mut req = grep("(?i)two");
    req.max_count_per_file = 1;
    let (matches, _) = grep_all(&mut fs, req).await.unwrap();
    let got: Vec<_> = matches
        .iter()
        .map(|m| (m.path.as_str(), m.line_number))
        .collect();
    assert_eq!(got, [("/workspace/a.rs", 2), ("/workspace/b.txt", 1)]);
}

/// Results of many files searched in parallel come out in path order
/// (segment by segment), each file's lines in line order.
#[tokio::test]
async fn parallel_grep_emits_in_path_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    for d in ["a", "a-b", "a.b", "b"] {
        for i in 0..150 {
            // Files of very different sizes finish out of order.
            let filler = "filler line\n".repeat(if i % 7 == 0 { 20_000 } else { 1 });
            put(
                dir.path(),
                &format!("{d}/f{i:03}.txt"),
                format!("hit 1\n{filler}hit 2\n"),
            );
            let lines = 2 + filler.lines().count() as u64;
            expected.push((format!("/workspace/{d}/f{i:03}.txt"), 1));
            expected.push((format!("/workspace/{d}/f{i:03}.txt"), lines));
        }
    }
    put(dir.path(), "a/z/deeper.txt", "hit\n");
    expected.insert(300, ("/workspace/a/z/deeper.txt".into(), 1));
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let (matches, s) = grep_all(&mut fs, grep("^hit")).await.unwrap();
    let got: Vec<_> = matches
        .into_iter()
        .map(|m| (m.path, m.line_number))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(s.matched_files, 601);
}

/// Search from `/` spans the State tier and the /workspace mount as one
/// path-ordered stream.
#[tokio::test]
async fn search_from_root_spans_state_and_filesystem_in_order() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "w.txt", "needle\n");
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    write(&mut fs, "/a.txt", "needle\n").await;
    write(&mut fs, "/z.txt", "needle\n").await;
    let mut req = grep("needle");
    req.path = "/".into();
    let (matches, _) = grep_all(&mut fs, req).await.unwrap();
    let paths: Vec<_> = matches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(paths, ["/a.txt", "/workspace/w.txt", "/z.txt"]);
}

/// A tree of `n` files, each with `lines` matching lines.
fn wide_tree(files: usize, lines: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let body = "match me please, a line of moderate length\n".repeat(lines);
    for i in 0..files {
        put(dir.path(), &format!("d{:02}/f{i:05}.txt", i % 50), &body);
    }
    dir
}

/// max_visited, max_results and the time budget each stop the search and
/// say so in the summary; a budget spent before any result is TIMEOUT.
#[tokio::test]
async fn budgets_stop_the_search_and_are_reported() {
    let dir = wide_tree(400, 3);
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let mut req = grep("match");
    req.max_visited = 30;
    let (_, s) = grep_all(&mut fs, req).await.unwrap();
    assert_eq!(s.aborted_reason(), AbortedReason::CountLimit);
    assert_eq!(s.visited, 30);
    let mut req = grep("match");
    req.max_results = 7;
    let (matches, s) = grep_all(&mut fs, req).await.unwrap();
    assert_eq!(matches.len(), 7);
    assert_eq!(s.aborted_reason(), AbortedReason::Limit);
    let mut req = glob("**/*.txt");
    req.max_results = 5;
    let (paths, s) = glob_all(&mut fs, req).await.unwrap();
    assert_eq!(paths.len(), 5);
    assert_eq!(s.aborted_reason(), AbortedReason::Limit);
    let mut req = grep("no such text anywhere");
    req.max_visited = 10;
    let err = grep_all(&mut fs, req).await.unwrap_err();
    assert_error(&err, Code::DeadlineExceeded, "TIMEOUT");
}

/// The time budget stops a long search.
#[tokio::test]
async fn time_budget_stops_a_long_search() {
    let dir = wide_tree(2000, 200);
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let mut req = grep("match");
    req.max_duration_ms = 1;
    let started = Instant::now();
    match grep_all(&mut fs, req).await {
        Ok((_, s)) => assert_eq!(s.aborted_reason(), AbortedReason::TimeLimit),
        Err(err) => assert_error(&err, Code::DeadlineExceeded, "TIMEOUT"),
    }
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// `max_results` bounds the memory of one file's search, not only what is
/// sent: one match asked of an 8 MiB file whose 4 million lines all match
/// (it took 500 MB when every line was collected before the cut).
#[tokio::test]
async fn max_results_stops_inside_a_file() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "a.txt", "a\n".repeat(4 << 20));
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let before = server.memory_kib("VmHWM");
    let (matches, summary) = grep_all(
        &mut fs,
        pb::GrepRequest {
            max_results: 1,
            ..grep("a")
        },
    )
    .await
    .unwrap();
    assert_eq!((matches.len(), summary.matched), (1, 1));
    assert_eq!(summary.aborted_reason(), AbortedReason::Limit);
    let grown_kib = server.memory_kib("VmHWM").saturating_sub(before);
    assert!(
        grown_kib < 64 * 1024,
        "the server's peak grew by {grown_kib} KiB for one match"
    );
}

/// One file's results are bounded however many lines match: past
/// MAX_FILE_HITS_BYTES the rest of the file is left out and named in the
/// summary's problems, and the results already found are still sent.
#[tokio::test]
async fn one_files_results_are_capped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "a.txt", "a\n".repeat(4 << 20));
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let (matches, summary) = grep_all(&mut fs, grep("a")).await.unwrap();
    assert!(
        !matches.is_empty() && matches.len() < 1 << 20,
        "{} matches",
        matches.len()
    );
    assert_eq!(summary.problems.len(), 1, "{:?}", summary.problems);
    let problem = &summary.problems[0];
    assert_eq!(
        (problem.path.as_str(), problem.code.as_str()),
        ("/workspace/a.txt", "INVALID_PARAM")
    );
    assert!(
        problem.message.contains("max_count_per_file"),
        "{problem:?}"
    );
}

/// A client that stops reading holds the search back: server memory stays
/// bounded far below the output's size; dropping the stream then cancels the
/// search within moments.
#[tokio::test]
async fn slow_reader_back_pressure_bounds_memory_and_cancel_stops_work() {
    // 400 files × 4000 lines × ~45 bytes: ~70 MB of matches to send.
    let dir = wide_tree(400, 4000);
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let before = server.memory_kib("VmRSS");
    let mut req = grep("match");
    req.max_duration_ms = 60_000;
    let mut stream = fs.grep(req).await.unwrap().into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert!(matches!(
        first.result,
        Some(pb::grep_response::Result::Batch(_))
    ));
    // Let the producer run into the full channel and window.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let grown_kib = server.memory_kib("VmRSS").saturating_sub(before);
    assert!(
        grown_kib < 40 * 1024,
        "server grew by {grown_kib} KiB while the client was not reading"
    );
    let dropped = Instant::now();
    drop(stream);
    assert!(
        server
            .wait_for_log("cancelled", Duration::from_secs(5))
            .await,
        "search did not stop after the client left"
    );
    assert!(
        dropped.elapsed() < Duration::from_secs(1),
        "{:?}",
        dropped.elapsed()
    );
}

/// The first batch arrives long before a big search ends.
#[tokio::test]
async fn first_batch_arrives_before_the_search_ends() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "a/first.txt", "needle\n");
    let filler = "nothing to see on this line at all\n".repeat(3000);
    for i in 0..1500 {
        put(dir.path(), &format!("b/{:02}/f{i}.txt", i % 30), &filler);
    }
    put(dir.path(), "c/last.txt", "needle\n");
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let started = Instant::now();
    // No literal to prefilter on: the regex engine reads every byte, so the
    // search lasts long enough to tell early streaming from a final flush.
    let pattern = "needle|[a-z]{3}[0-9]{2}[a-z]q";
    let mut stream = fs.grep(grep(pattern)).await.unwrap().into_inner();
    let mut first = None;
    let mut total = 0;
    while let Some(msg) = stream.message().await.unwrap() {
        match msg.result.unwrap() {
            pb::grep_response::Result::Batch(b) => {
                first.get_or_insert(started.elapsed());
                total += b.matches.len();
            }
            pb::grep_response::Result::Summary(s) => {
                assert_eq!(s.matched, 2);
            }
        }
    }
    let end = started.elapsed();
    let first = first.expect("a batch");
    assert_eq!(total, 2);
    assert!(
        first * 3 < end,
        "first batch at {first:?}, search ended at {end:?}"
    );
}

/// A tree of more directories than the walk reads ahead (nested, with names
/// whose byte order differs from numeric order, hidden and ignored
/// directories among them); returns it and its `.txt` files in path order.
fn many_dirs_tree() -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for a in ["a", "a-b", "a.b", "b"] {
        for b in 0..13 {
            for c in 0..5 {
                for f in [1, 10, 2] {
                    let rel = format!("{a}/{b}/{c}/f{f}.txt");
                    put(dir.path(), &rel, "hit\n");
                    files.push(rel);
                }
            }
            put(dir.path(), &format!("{a}/{b}/.hidden/x.txt"), "hit\n");
            put(dir.path(), &format!("{a}/{b}/node_modules/x.txt"), "hit\n");
        }
    }
    // Path order: segment by segment, by bytes.
    files.sort_by(|x, y| x.split('/').cmp(y.split('/')));
    let paths = files.iter().map(|f| format!("/workspace/{f}")).collect();
    (dir, paths)
}

/// With directories listed ahead by worker threads (more directories than
/// the read-ahead bound), Glob and Grep still emit in path order, identically
/// on every run, and count every skipped directory.
#[tokio::test]
async fn parallel_walk_over_many_directories_emits_in_path_order() {
    let (dir, expected) = many_dirs_tree();
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    for _ in 0..3 {
        let (paths, s) = glob_all(&mut fs, glob("**/*.txt")).await.unwrap();
        assert_eq!(paths, expected);
        assert_eq!((s.skipped_hidden, s.skipped_ignored), (52, 52), "{s:?}");
        let (matches, s) = grep_all(&mut fs, grep("hit")).await.unwrap();
        let paths: Vec<_> = matches.into_iter().map(|m| m.path).collect();
        assert_eq!(paths, expected);
        assert_eq!((s.skipped_hidden, s.skipped_ignored), (52, 52), "{s:?}");
    }
}

/// max_visited counts entries in path order even though workers list
/// directories ahead: each budget gives exactly that many visited entries
/// and the same results, a prefix of the full result list.
#[tokio::test]
async fn visited_budget_is_deterministic_with_the_parallel_walk() {
    let (dir, expected) = many_dirs_tree();
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    for budget in [50, 333, 700] {
        let mut first = None;
        for _ in 0..3 {
            let mut req = glob("**/*.txt");
            req.max_visited = budget;
            let (paths, s) = glob_all(&mut fs, req).await.unwrap();
            assert_eq!(s.visited, budget);
            assert_eq!(s.aborted_reason(), AbortedReason::CountLimit);
            assert!(!paths.is_empty() && paths.len() < expected.len());
            assert_eq!(paths, expected[..paths.len()]);
            let mut req = grep("hit");
            req.max_visited = budget;
            let (matches, s) = grep_all(&mut fs, req).await.unwrap();
            assert_eq!(s.visited, budget);
            let grepped: Vec<_> = matches.into_iter().map(|m| m.path).collect();
            assert_eq!(grepped, paths);
            assert_eq!(*first.get_or_insert_with(|| paths.clone()), paths);
        }
    }
}

/// A walk holds a bounded number of directories open, however deep the
/// tree: a Glob of a tree 1,000 levels deep whose client stops reading once
/// the walk is at the bottom held 1,000 descriptors, and a few such Globs
/// could take the server's whole descriptor limit from every other request
/// (src/backend/fs/search.rs, `MAX_OPEN_LEVELS`). Closed directories are
/// opened again on the way back up: a file listed after the subdirectory at
/// every level is still found, in order.
/// Levels of [`deep_tree`].
const DEEP_TREE_LEVELS: usize = 1000;

/// Builds a tree [`DEEP_TREE_LEVELS`] deep in `root`: at every level `a.txt`
/// (listed before the subdirectory `d`) and `e.txt` (after it), and 3,000
/// files at the bottom, whose 2 KB paths stall a Glob whose client stops
/// reading while its walk is at the bottom. Returns every file's logical
/// path, in walk order.
fn deep_tree(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut rel = String::new();
    for level in 0..DEEP_TREE_LEVELS {
        for name in ["a.txt", "e.txt"] {
            files.push(format!("{rel}{name}"));
        }
        if level + 1 < DEEP_TREE_LEVELS {
            rel.push_str("d/");
        }
    }
    files.extend((0..3000).map(|i| format!("{rel}f{i:04}.txt")));
    for file in &files {
        put(root, file, "x\n");
    }
    let mut paths: Vec<String> = files.iter().map(|f| format!("/workspace/{f}")).collect();
    paths.sort_by_key(|p| agentvfs::path::VfsPath::parse(p).unwrap().order_key());
    paths
}

/// A Glob of [`deep_tree`] whose client read one message and stopped: its
/// walk is at the bottom, waiting to send.
async fn stalled_deep_glob(server: &Server) -> tonic::Streaming<pb::GlobResponse> {
    let mut fs = server.fs().await;
    let mut stream = fs.glob(glob("**/*.txt")).await.unwrap().into_inner();
    stream.message().await.unwrap().unwrap();
    stream
}

#[tokio::test]
async fn a_deep_walk_holds_few_descriptors_and_finds_everything() {
    let dir = tempfile::tempdir().unwrap();
    let expected = deep_tree(dir.path());
    let server = serve(dir.path());
    let mut fs = server.fs().await;
    let (found, summary) = glob_all(&mut fs, glob("**/*.txt")).await.unwrap();
    assert_eq!(summary.aborted_reason, AbortedReason::Unspecified as i32);
    assert_eq!(found.len(), expected.len());
    assert!(
        found == expected,
        "a Glob of the deep tree lost or reordered files"
    );

    let descriptors = || {
        std::fs::read_dir(format!("/proc/{}/fd", server.pid()))
            .unwrap()
            .count()
    };
    let before = descriptors();
    // Six Globs whose clients read one message and stop: each walk stalls
    // at the bottom, on the results it cannot send.
    let mut stalled = Vec::new();
    for _ in 0..6 {
        stalled.push(stalled_deep_glob(&server).await);
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let held = descriptors().saturating_sub(before);
    assert!(
        held < 6 * 150,
        "six stalled Globs of a tree {DEEP_TREE_LEVELS} deep hold {held} descriptors"
    );
}

/// A directory whose handle a deep walk closed, swapped for another while
/// the walk is below it, stops the walk there: on the way back up the
/// directory at that path is not the one the walk left, so what it had not
/// yet listed (`e.txt`, which the new directory holds too) is not reported
/// from the stranger, the swap is a problem of the summary, and the levels
/// above go on as before.
#[tokio::test]
async fn a_directory_swapped_under_a_deep_walk_is_not_walked() {
    const SWAPPED: usize = 10;
    let dir = tempfile::tempdir().unwrap();
    deep_tree(dir.path());
    let server = serve(dir.path());
    let mut stream = stalled_deep_glob(&server).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let swapped = "d/".repeat(SWAPPED);
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::rename(dir.path().join(&swapped), elsewhere.path().join("old")).unwrap();
    put(dir.path(), &format!("{swapped}e.txt"), "stranger\n");
    let mut found = Vec::new();
    let mut summary = None;
    while let Some(msg) = stream.message().await.unwrap() {
        match msg.result.expect("result set") {
            pb::glob_response::Result::Batch(b) => {
                found.extend(b.entries.into_iter().map(|e| e.path))
            }
            pb::glob_response::Result::Summary(s) => summary = Some(s),
        }
    }
    let summary = summary.expect("a summary");
    let e_txt = |level: usize| format!("/workspace/{}e.txt", "d/".repeat(level));
    for level in 0..SWAPPED {
        assert!(found.contains(&e_txt(level)), "{} missing", e_txt(level));
    }
    assert!(
        !found.contains(&e_txt(SWAPPED)),
        "the walk listed the directory swapped in"
    );
    let swapped_path = format!("/workspace/{}", swapped.trim_end_matches('/'));
    assert!(
        summary.problems.iter().any(|p| p.path == swapped_path),
        "no problem for {swapped_path}: {:?}",
        summary
            .problems
            .iter()
            .map(|p| &p.path)
            .take(5)
            .collect::<Vec<_>>()
    );
}
