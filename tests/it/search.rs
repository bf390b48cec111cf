//! Grep and Glob through gRPC: semantics, order, streaming, budgets and
//! cancellation (State tier).

use crate::util::{Server, assert_error, glob_all, glob_entries, grep_all, write};
use agentvfs::pb::filesystem_client::FilesystemClient;
use agentvfs::pb::{self, AbortedReason};
use agentvfs::search::{MAX_LINE_BYTES, REGEX_SIZE_LIMIT};
use std::time::Duration;
use tonic::Code;

fn grep(pattern: &str, path: &str) -> pb::GrepRequest {
    pb::GrepRequest {
        pattern: pattern.into(),
        path: path.into(),
        ..Default::default()
    }
}

fn glob(pattern: &str, path: &str) -> pb::GlobRequest {
    pb::GlobRequest {
        pattern: pattern.into(),
        path: path.into(),
        ..Default::default()
    }
}

/// Grep finds regex matches in path order (segment by segment), with line
/// numbers and the matched text, and ends with a summary.
#[tokio::test]
async fn grep_streams_matches_in_path_order() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/p/b.txt", "x\nfoo1\n").await;
    write(&mut fs, "/p/a/z.txt", "foo2\n").await;
    write(&mut fs, "/p/a-b.txt", "foo3 foo\n").await;
    let (matches, summary) = grep_all(&mut fs, grep(r"foo\d", "/p")).await.unwrap();
    let got: Vec<(&str, u64, &str)> = matches
        .iter()
        .map(|m| (m.path.as_str(), m.line_number, m.r#match.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("/p/a/z.txt", 1, "foo2"),
            ("/p/a-b.txt", 1, "foo3"),
            ("/p/b.txt", 2, "foo1")
        ]
    );
    assert_eq!(matches[1].line, "foo3 foo");
    assert_eq!(
        (
            summary.matched,
            summary.matched_files,
            summary.files_searched
        ),
        (3, 3, 3)
    );
    assert_eq!(summary.aborted_reason(), AbortedReason::Unspecified);
}

/// literal, case_insensitive, glob filter and context lines.
#[tokio::test]
async fn grep_options() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/o/a.rs", "one\nA.B\ntwo\nthree\n").await;
    write(&mut fs, "/o/b.md", "a.b\n").await;
    let (m, _) = grep_all(
        &mut fs,
        pb::GrepRequest {
            literal: true,
            ..grep("A.B", "/o")
        },
    )
    .await
    .unwrap();
    assert_eq!(m.len(), 1);
    let (m, _) = grep_all(
        &mut fs,
        pb::GrepRequest {
            literal: true,
            case_insensitive: true,
            ..grep("a.b", "/o")
        },
    )
    .await
    .unwrap();
    assert_eq!(m.len(), 2);
    let (m, _) = grep_all(
        &mut fs,
        pb::GrepRequest {
            glob: "*.rs".into(),
            case_insensitive: true,
            ..grep("a.b", "/o")
        },
    )
    .await
    .unwrap();
    assert_eq!(
        m.iter().map(|m| m.path.as_str()).collect::<Vec<_>>(),
        ["/o/a.rs"]
    );
    let (m, _) = grep_all(
        &mut fs,
        pb::GrepRequest {
            before_context: 1,
            after_context: 1,
            ..grep("A.B", "/o/a.rs")
        },
    )
    .await
    .unwrap();
    let lines: Vec<(u64, bool)> = m.iter().map(|m| (m.line_number, m.is_context)).collect();
    assert_eq!(lines, [(1, true), (2, false), (3, true)]);
}

/// An invalid regex is INVALID_ARGUMENT "Invalid regex pattern: …".
#[tokio::test]
async fn grep_invalid_regex() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let err = grep_all(&mut fs, grep("(unclosed", "/")).await.unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    assert!(
        err.message().starts_with("Invalid regex pattern: "),
        "{}",
        err.message()
    );
}

/// Binary files, hidden and ignored entries are skipped and counted.
#[tokio::test]
async fn grep_skips_and_counts_binary_hidden_ignored() {
    use pb::write_bytes_request::Kind;
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/k/seen.txt", "needle\n").await;
    write(&mut fs, "/k/.hidden.txt", "needle\n").await;
    write(&mut fs, "/k/node_modules/x.txt", "needle\n").await;
    let msgs = vec![
        pb::WriteBytesRequest {
            kind: Some(Kind::Header(pb::WriteBytesHeader {
                path: "/k/bin.dat".into(),
                ..Default::default()
            })),
        },
        pb::WriteBytesRequest {
            kind: Some(Kind::Data(b"needle\0\x01".to_vec())),
        },
    ];
    fs.write_bytes(tokio_stream::iter(msgs)).await.unwrap();
    let (m, s) = grep_all(&mut fs, grep("needle", "/k")).await.unwrap();
    assert_eq!(
        m.iter().map(|m| m.path.as_str()).collect::<Vec<_>>(),
        ["/k/seen.txt"]
    );
    assert_eq!(
        (s.skipped_binary, s.skipped_hidden, s.skipped_ignored),
        (1, 1, 1)
    );
    let (m, _) = grep_all(
        &mut fs,
        pb::GrepRequest {
            include_hidden: true,
            include_ignored: true,
            ..grep("needle", "/k")
        },
    )
    .await
    .unwrap();
    assert_eq!(m.len(), 3);
}

/// Glob per docs/contract.md § Glob and Grep: relative to path, `*`/`?` never cross `/`, `**`
/// does, `**/x` matches `x`, `{a,b}` alternates.
#[tokio::test]
async fn glob_semantics() {
    let server = Server::start();
    let mut fs = server.fs().await;
    for p in [
        "/g/main.rs",
        "/g/src/lib.rs",
        "/g/src/deep/mod.rs",
        "/g/README.md",
        "/g/foo",
    ] {
        write(&mut fs, p, "x").await;
    }
    let paths = |pattern: &'static str| {
        let mut fs = fs.clone();
        async move { glob_all(&mut fs, glob(pattern, "/g")).await.unwrap().0 }
    };
    assert_eq!(paths("*.rs").await, ["/g/main.rs"]);
    assert_eq!(
        paths("**/*.rs").await,
        ["/g/main.rs", "/g/src/deep/mod.rs", "/g/src/lib.rs"]
    );
    assert_eq!(paths("src/*.rs").await, ["/g/src/lib.rs"]);
    assert_eq!(paths("**/foo").await, ["/g/foo"]);
    assert_eq!(paths("{README.md,foo}").await, ["/g/README.md", "/g/foo"]);
    assert_eq!(paths("s?c/lib.rs").await, ["/g/src/lib.rs"]);
    let err = glob_all(&mut fs, glob("*", "/missing")).await.unwrap_err();
    assert_error(&err, Code::NotFound, "NOT_FOUND");
}

/// `paths_only` on the State tier: the same paths, no size, times or version.
#[tokio::test]
async fn glob_paths_only_drops_metadata() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/g/a.rs", "12345").await;
    write(&mut fs, "/g/b/c.rs", "x").await;
    let mut req = glob("**/*.rs", "/g");
    req.paths_only = true;
    let (entries, _) = glob_entries(&mut fs, req).await.unwrap();
    let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["/g/a.rs", "/g/b/c.rs"]);
    for e in &entries {
        assert_eq!((e.size, e.version, e.is_symlink), (0, 0, false), "{e:?}");
        assert!(
            e.modified_time.is_none() && e.created_time.is_none(),
            "{e:?}"
        );
    }
}

/// Many matches arrive batched (many per message), and max_results stops the
/// search with aborted_reason LIMIT.
#[tokio::test]
async fn results_are_batched_and_limited() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let body: String = (0..5000).map(|i| format!("hit {i}\n")).collect();
    write(&mut fs, "/big.txt", &body).await;
    let mut stream = fs.grep(grep("hit", "/")).await.unwrap().into_inner();
    let mut messages = 0;
    let mut matches = 0;
    while let Some(msg) = stream.message().await.unwrap() {
        if let Some(pb::grep_response::Result::Batch(b)) = msg.result {
            messages += 1;
            matches += b.matches.len();
        }
    }
    assert_eq!(matches, 5000);
    assert!(messages < 50, "{messages} messages for 5000 matches");
    let (m, s) = grep_all(
        &mut fs,
        pb::GrepRequest {
            max_results: 10,
            ..grep("hit", "/")
        },
    )
    .await
    .unwrap();
    assert_eq!((m.len(), s.matched), (10, 10));
    assert_eq!(s.aborted_reason(), AbortedReason::Limit);
}

/// max_visited stops with COUNT_LIMIT; with no result yet it is
/// DEADLINE_EXCEEDED/TIMEOUT (docs/contract.md § Glob and Grep: a budget spent without results).
#[tokio::test]
async fn visited_budget() {
    let server = Server::start();
    let mut fs = server.fs().await;
    for i in 0..30 {
        write(&mut fs, &format!("/v/f{i:02}.txt"), "match\n").await;
    }
    let (m, s) = grep_all(
        &mut fs,
        pb::GrepRequest {
            max_visited: 10,
            ..grep("match", "/v")
        },
    )
    .await
    .unwrap();
    assert_eq!(s.aborted_reason(), AbortedReason::CountLimit);
    assert_eq!(s.visited, 10);
    assert_eq!(m.len(), 10);
    let err = grep_all(
        &mut fs,
        pb::GrepRequest {
            max_visited: 10,
            ..grep("absent", "/v")
        },
    )
    .await
    .unwrap_err();
    assert_error(&err, Code::DeadlineExceeded, "TIMEOUT");
    let (paths, s) = glob_all(
        &mut fs,
        pb::GlobRequest {
            max_visited: 5,
            ..glob("*.txt", "/v")
        },
    )
    .await
    .unwrap();
    assert_eq!(
        (paths.len(), s.aborted_reason()),
        (5, AbortedReason::CountLimit)
    );
}

/// The time budget stops a long search with TIME_LIMIT and what it found.
#[tokio::test]
async fn time_budget() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let body = "needle in a haystack line\n".repeat(1_500_000);
    write(&mut fs, "/hay/1.txt", &body).await;
    write(&mut fs, "/hay/2.txt", &body).await;
    let req = pb::GrepRequest {
        max_duration_ms: 1,
        ..grep("needle", "/hay")
    };
    let (m, s) = grep_all(&mut fs, req).await.unwrap();
    assert_eq!(s.aborted_reason(), AbortedReason::TimeLimit);
    assert!(!m.is_empty() && (m.len() as u64) < 3_000_000);
}

/// A client that goes away stops the search (the server logs it cancelled).
#[tokio::test]
async fn cancelled_stream_stops_the_search() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let body = "needle\n".repeat(200_000);
    for i in 0..8 {
        write(&mut fs, &format!("/c/{i}.txt"), &body).await;
    }
    let req = pb::GrepRequest {
        max_duration_ms: 60_000,
        ..grep("needle", "/c")
    };
    let mut stream = fs.grep(req).await.unwrap().into_inner();
    assert!(stream.message().await.unwrap().is_some());
    drop(stream);
    assert!(
        server
            .wait_for_log("aborted=\"cancelled\"", Duration::from_secs(5))
            .await,
        "search did not stop: {}",
        server.logs.lock().unwrap()
    );
}

/// A file with 200,000 matching lines goes out in messages of bounded size,
/// all accepted by a client with gRPC's default 4 MiB limit (it was one
/// message of about 7 MB).
#[tokio::test]
async fn one_files_matches_span_bounded_messages() {
    use prost::Message;
    let server = Server::start();
    let mut fs = server.fs().await;
    let body: String = (0..200_000).map(|i| format!("{i}\n")).collect();
    write(&mut fs, "/many/matches.txt", &body).await;
    let mut default_client = FilesystemClient::new(server.channel().await);
    let mut stream = default_client
        .grep(grep(r"\d", "/many"))
        .await
        .unwrap()
        .into_inner();
    let (mut matches, mut largest, mut summary) = (0, 0, None);
    while let Some(msg) = stream.message().await.unwrap() {
        largest = largest.max(msg.encoded_len());
        match msg.result.unwrap() {
            pb::grep_response::Result::Batch(b) => {
                assert!(b.matches.iter().all(|m| m.path == "/many/matches.txt"));
                matches += b.matches.len();
            }
            pb::grep_response::Result::Summary(s) => summary = Some(s),
        }
    }
    assert_eq!(matches, 200_000);
    assert!(largest < 1 << 20, "a message of {largest} bytes");
    let summary = summary.expect("summary");
    assert_eq!((summary.matched, summary.matched_files), (200_000, 1));
    assert!(summary.problems.is_empty(), "{:?}", summary.problems);
}

/// One matching 8 MiB line is cut at MAX_LINE_BYTES with a marker naming its
/// length, instead of making an 8 MiB message.
#[tokio::test]
async fn a_long_matching_line_is_cut() {
    use prost::Message;
    let server = Server::start();
    let mut fs = server.fs().await;
    let line = format!("needle{}", "x".repeat(8 << 20));
    write(&mut fs, "/long.txt", &format!("{line}\nneedle\n")).await;
    let mut stream = fs.grep(grep("needle", "/")).await.unwrap().into_inner();
    let mut matches = Vec::new();
    while let Some(msg) = stream.message().await.unwrap() {
        assert!(msg.encoded_len() < 1 << 20, "{} bytes", msg.encoded_len());
        if let Some(pb::grep_response::Result::Batch(b)) = msg.result {
            matches.extend(b.matches);
        }
    }
    assert_eq!(matches.len(), 2);
    let cut = &matches[0];
    assert_eq!(cut.r#match, "needle");
    assert_eq!(
        cut.line.len(),
        MAX_LINE_BYTES + "… [line truncated: 8388614 bytes]".len()
    );
    assert!(cut.line.starts_with("needlexxx"));
    assert!(
        cut.line.ends_with("… [line truncated: 8388614 bytes]"),
        "{}",
        &cut.line[MAX_LINE_BYTES - 8..]
    );
    assert_eq!(matches[1].line, "needle");
}

/// A regex whose compiled form is huge (`\p{L}{5000}`) is refused by the size
/// limit as INVALID_ARGUMENT, for Grep and ReadRe, while other calls answer.
#[tokio::test]
async fn huge_regex_is_refused_by_the_size_limit() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/r.txt", "text\n").await;
    let pattern = r"\p{L}{5000}";
    let greps: Vec<_> = (0..4)
        .map(|_| {
            let mut fs = fs.clone();
            tokio::spawn(async move { grep_all(&mut fs, grep(pattern, "/")).await })
        })
        .collect();
    let stat = fs.stat(pb::StatRequest {
        path: "/r.txt".into(),
    });
    assert!(stat.await.is_ok());
    for grep in greps {
        let err = grep.await.unwrap().unwrap_err();
        assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
        // Refused by our limit, not after seconds by grep-regex's 100 MiB.
        let limit = format!("size limit of {REGEX_SIZE_LIMIT}");
        assert!(err.message().ends_with(&limit), "{err:?}");
    }
    let err = fs
        .read_re(pb::ReadReRequest {
            path: "/r.txt".into(),
            pattern: pattern.into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
}
