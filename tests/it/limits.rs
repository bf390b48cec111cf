//! The server's `[limits]` against stalled and hostile clients: streams per
//! principal, searches server-wide, the idle timeout that cuts a stream
//! waiting on its client, and oversized messages (RESOURCE_EXHAUSTED).
//!
//! Each test uses small limits so a few hundred stalled streams are cheap;
//! before these limits every stalled stream pinned a blocking thread forever
//! and, at tokio's 512, unrelated calls stopped answering.

use crate::util::{Server, assert_error, grep_all, write};
use agentvfs::pb;
use agentvfs::pb::write_bytes_request::Kind;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

/// State tier at `/`, 8 streams per principal, a 1 s idle timeout.
const SMALL_LIMITS: &str = r#"
[limits]
max_streams_per_principal = 8
stream_idle_timeout_seconds = 1

[[mount]]
prefix = "/"
tier = "state"
"#;

/// Generous bound for a call that must not wait on stalled streams.
const ANSWERS_WITHIN: Duration = Duration::from_secs(10);

fn grep(pattern: &str) -> pb::GrepRequest {
    pb::GrepRequest {
        pattern: pattern.into(),
        path: "/".into(),
        max_duration_ms: 600_000,
        ..Default::default()
    }
}

/// Asserts a refusal over a configured limit.
#[track_caller]
fn assert_over_limit(status: &tonic::Status, limit: &str) {
    assert_error(status, Code::ResourceExhausted, "INVALID_PARAM");
    assert!(status.message().contains(limit), "{status:?}");
}

/// Asserts that an unrelated Stat, on its own connection, answers.
async fn assert_stat_answers(server: &Server, path: &str) {
    let mut other = server.fs().await;
    let stat = other.stat(pb::StatRequest { path: path.into() });
    let answer = tokio::time::timeout(ANSWERS_WITHIN, stat).await;
    assert!(answer.expect("Stat timed out").is_ok());
}

/// Files whose matches (about 8 MB per Grep) far exceed what the channel
/// and the HTTP/2 windows hold, so a Grep whose client does not read stalls.
async fn haystack(server: &Server) {
    let mut fs = server.fs().await;
    let body = "needle in a haystack\n".repeat(50_000);
    for i in 0..4 {
        write(&mut fs, &format!("/hay/{i}.txt"), &body).await;
    }
}

/// Occurrences of `needle` in the server's log.
fn log_count(server: &Server, needle: &str) -> usize {
    server.logs.lock().unwrap().matches(needle).count()
}

/// 300 Greps whose client never reads: 8 are admitted and the rest refused
/// RESOURCE_EXHAUSTED, other calls still answer, and after the idle timeout
/// the stalled searches are reset (their threads end) and a new Grep runs.
#[tokio::test]
async fn stalled_grep_streams_are_bounded_and_cut() {
    let server = Server::start_with(Some(SMALL_LIMITS), &[]);
    haystack(&server).await;
    let mut fs = server.fs().await;
    let (mut held, mut refused) = (Vec::new(), 0);
    for _ in 0..300 {
        match fs.grep(grep("needle")).await {
            Ok(stream) => held.push(stream.into_inner()),
            Err(status) => {
                assert_over_limit(&status, "max_streams_per_principal");
                refused += 1;
            }
        }
    }
    assert_eq!((held.len(), refused), (8, 292));
    assert_stat_answers(&server, "/hay/0.txt").await;
    let cut = "call reset, its queued data dropped";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while log_count(&server, cut) < 8 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        log_count(&server, cut),
        8,
        "{}",
        server.logs.lock().unwrap()
    );
    assert!(
        server
            .wait_for_log("aborted=\"cancelled\"", ANSWERS_WITHIN)
            .await
    );
    let (matches, _) = grep_all(
        &mut server.fs().await,
        pb::GrepRequest {
            max_results: 1,
            ..grep("needle")
        },
    )
    .await
    .expect("a new Grep is admitted once the stalled ones are cut");
    assert_eq!(matches.len(), 1);
    drop(held);
}

/// The search limit is server-wide: with `max_concurrent_searches = 2`, a
/// third Grep is refused while two stalled ones run, and admitted once the
/// idle timeout cut them.
#[tokio::test]
async fn concurrent_searches_are_bounded_server_wide() {
    let config = SMALL_LIMITS.replace("[limits]", "[limits]\nmax_concurrent_searches = 2");
    let server = Server::start_with(Some(&config), &[]);
    haystack(&server).await;
    let mut fs = server.fs().await;
    let held = [
        fs.grep(grep("needle")).await.unwrap(),
        fs.grep(grep("needle")).await.unwrap(),
    ];
    let status = fs.grep(grep("needle")).await.unwrap_err();
    assert_over_limit(&status, "max_concurrent_searches");
    assert_stat_answers(&server, "/hay/0.txt").await;
    let admitted = async {
        loop {
            let mut fresh = server.fs().await;
            match grep_all(&mut fresh, grep("absent-word")).await {
                Err(status) if status.code() == Code::ResourceExhausted => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => return other,
            }
        }
    };
    let outcome = tokio::time::timeout(Duration::from_secs(60), admitted).await;
    let (matches, _) = outcome
        .expect("the stalled searches were never cut")
        .unwrap();
    assert!(matches.is_empty());
    drop(held);
}

/// Two principals, each allowed every operation below `/`.
const TWO_PRINCIPALS: &str = r#"
[[principal]]
name = "stalling"
token = "stalling-token-0001"
grants = [{ prefix = "/", ops = ["list", "file", "read_file", "read_re", "write", "delete"] }]

[[principal]]
name = "other"
token = "other-token-00001"
grants = [{ prefix = "/", ops = ["list", "file", "read_file", "read_re", "write", "delete"] }]
"#;

/// `msg` sent with `token`.
fn as_principal<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    let bearer = format!("Bearer {token}").parse().unwrap();
    req.metadata_mut().insert("authorization", bearer);
    req
}

/// A principal whose Grep clients never read cannot take every search slot:
/// with 4 slots and 2 per principal, its third stalled Grep is refused
/// naming `max_searches_per_principal`, and another principal's Greps still
/// run while the stalled ones hold their slots (the idle timeout, 120 s,
/// is not reached). Before the share, its 4 stalled Greps took all 4 slots
/// and the other principal was refused `max_concurrent_searches`.
#[tokio::test]
async fn one_principal_cannot_take_every_search_slot() {
    let config = SMALL_LIMITS
        .replace(
            "[limits]",
            "[limits]\nmax_concurrent_searches = 4\nmax_searches_per_principal = 2",
        )
        .replace(
            "stream_idle_timeout_seconds = 1",
            "stream_idle_timeout_seconds = 120",
        )
        + TWO_PRINCIPALS;
    let server = Server::start_with(Some(&config), &[]);
    let mut fs = server.fs().await;
    let body = "needle in a haystack\n".repeat(50_000);
    for i in 0..4 {
        let req = pb::WriteRequest {
            path: format!("/hay/{i}.txt"),
            content: body.clone(),
            ..Default::default()
        };
        fs.write(as_principal("stalling-token-0001", req))
            .await
            .unwrap();
    }
    let mine = pb::WriteRequest {
        path: "/mine/a.txt".into(),
        content: "a needle\n".into(),
        ..Default::default()
    };
    fs.write(as_principal("other-token-00001", mine))
        .await
        .unwrap();
    let (mut held, mut refused) = (Vec::new(), 0);
    for _ in 0..4 {
        match fs
            .grep(as_principal("stalling-token-0001", grep("needle")))
            .await
        {
            Ok(stream) => held.push(stream.into_inner()),
            Err(status) => {
                assert_over_limit(&status, "max_searches_per_principal");
                refused += 1;
            }
        }
    }
    assert_eq!((held.len(), refused), (2, 2));
    let mut other = server.fs().await;
    for _ in 0..3 {
        let mine = pb::GrepRequest {
            path: "/mine".into(),
            ..grep("needle")
        };
        let req = as_principal("other-token-00001", mine);
        let answer = tokio::time::timeout(ANSWERS_WITHIN, grep_all(&mut other, req)).await;
        let (matches, summary) = answer
            .expect("the other principal's Grep timed out")
            .expect("the other principal's Grep was refused");
        assert_eq!(
            (matches.len(), summary.files_searched),
            (1, 1),
            "{summary:?}"
        );
    }
    drop(held);
}

/// A header-only upload (the client then sends nothing).
fn header(path: &str) -> pb::WriteBytesRequest {
    pb::WriteBytesRequest {
        kind: Some(Kind::Header(pb::WriteBytesHeader {
            path: path.into(),
            ..Default::default()
        })),
    }
}

/// 300 WriteBytes that send their header and stall: 8 are admitted, the rest
/// refused RESOURCE_EXHAUSTED; the 8 are aborted after the idle timeout with
/// DEADLINE_EXCEEDED naming it, nothing is written, and uploads work again.
#[tokio::test]
async fn stalled_uploads_are_bounded_and_aborted() {
    let server = Server::start_with(Some(SMALL_LIMITS), &[]);
    let fs = server.fs().await;
    let mut senders = Vec::new();
    let mut calls = Vec::new();
    for i in 0..300 {
        let (tx, rx) = mpsc::channel(1);
        tx.send(header(&format!("/up/{i}.bin"))).await.unwrap();
        senders.push(tx);
        let mut fs = fs.clone();
        calls.push(tokio::spawn(async move {
            fs.write_bytes(ReceiverStream::new(rx)).await
        }));
    }
    assert_stat_answers(&server, "/").await;
    let (mut refused, mut aborted) = (0, 0);
    for call in calls {
        let outcome = tokio::time::timeout(Duration::from_secs(60), call).await;
        let status = outcome
            .expect("a stalled upload was never aborted")
            .unwrap();
        let status = status.expect_err("an upload without data cannot succeed");
        if status.code() == Code::ResourceExhausted {
            assert_over_limit(&status, "max_streams_per_principal");
            refused += 1;
        } else {
            assert_error(&status, Code::DeadlineExceeded, "TIMEOUT");
            assert!(
                status.message().contains("stream_idle_timeout_seconds"),
                "{status:?}"
            );
            aborted += 1;
        }
    }
    assert_eq!((aborted, refused), (8, 292));
    let mut fs = server.fs().await;
    let listed = fs.list_info(pb::ListInfoRequest { path: "/".into() }).await;
    let listed = listed.unwrap().into_inner().entries;
    assert!(listed.iter().all(|e| e.path != "/up"), "{listed:?}");
    let (tx, rx) = mpsc::channel(2);
    tx.send(header("/up/ok.bin")).await.unwrap();
    tx.send(pb::WriteBytesRequest {
        kind: Some(Kind::Data(b"data".to_vec())),
    })
    .await
    .unwrap();
    drop(tx);
    let written = fs.write_bytes(ReceiverStream::new(rx)).await.unwrap();
    assert_eq!(written.into_inner().bytes_written, 4);
    drop(senders);
}

/// ReadBytes whose client stops reading: no thread waits on it, the
/// download is reset after the idle timeout (its queue dropped, its permit
/// back), and the client then gets CANCELLED after the data it had received.
#[tokio::test]
async fn stalled_downloads_are_bounded_and_cut() {
    let server = Server::start_with(Some(SMALL_LIMITS), &[]);
    let mut fs = server.fs().await;
    write(&mut fs, "/big.txt", &"x".repeat(8 << 20)).await;
    let read = || pb::ReadBytesRequest {
        path: "/big.txt".into(),
        version: None,
    };
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(fs.read_bytes(read()).await.unwrap().into_inner());
    }
    let status = fs.read_bytes(read()).await.unwrap_err();
    assert_over_limit(&status, "max_streams_per_principal");
    assert_stat_answers(&server, "/big.txt").await;
    let admitted = async {
        loop {
            match fs.read_bytes(read()).await {
                Err(status) if status.code() == Code::ResourceExhausted => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => return other,
            }
        }
    };
    let outcome = tokio::time::timeout(Duration::from_secs(60), admitted).await;
    outcome
        .expect("the stalled downloads were never cut")
        .unwrap();
    let mut stalled = held.swap_remove(0);
    // The others' unread data holds the connection's HTTP/2 window.
    drop(held);
    let mut received = 0;
    let end = loop {
        match stalled.message().await {
            Ok(Some(chunk)) => received += chunk.data.len(),
            Ok(None) => break None,
            Err(status) => break Some(status),
        }
    };
    let status = end.expect("a cut download must not end as if complete");
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
    assert!(received < 8 << 20, "{received} bytes");
}

/// A request message over the server's decoding limit answers
/// RESOURCE_EXHAUSTED with an ErrorInfo (tonic's own answer was
/// OUT_OF_RANGE), for a unary Write and for a WriteBytes message.
#[tokio::test]
async fn oversized_messages_are_resource_exhausted() {
    // Messages may hold 2 × 1 KiB + 1 MiB of framing room.
    let config = "max_file_bytes = 1024\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n";
    let server = Server::start_with(Some(config), &[]);
    let mut fs = server.fs().await;
    let big = "x".repeat(2 << 20);
    let status = fs
        .write(pb::WriteRequest {
            path: "/big.txt".into(),
            content: big.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&status, Code::ResourceExhausted, "INVALID_PARAM");
    assert!(status.message().contains("size limit"), "{status:?}");
    let (tx, rx) = mpsc::channel(2);
    tx.send(header("/big.bin")).await.unwrap();
    tx.send(pb::WriteBytesRequest {
        kind: Some(Kind::Data(big.into_bytes())),
    })
    .await
    .unwrap();
    drop(tx);
    let status = fs.write_bytes(ReceiverStream::new(rx)).await.unwrap_err();
    assert_error(&status, Code::ResourceExhausted, "INVALID_PARAM");
    assert!(status.message().contains("size limit"), "{status:?}");
}
