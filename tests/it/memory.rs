//! Hostile agents, round 2 (issue 21): memory no client can grow without
//! bound. Each test is one attack through the real server, measuring its
//! resident memory (`/proc/PID/status`) against a stated bound:
//!
//! - streams cut for idleness and reopened on new connections, round after
//!   round, for every stream kind (Watch, ReadBytes, Grep, Glob): the cut
//!   resets the call and drops its queue, so the rounds do not add up;
//! - uploads that stall mid-message (WriteBytes) and MCP bodies that never
//!   finish: what a principal's bodies hold is bounded by its memory share;
//! - concurrent unary calls building large answers (Diff): bounded likewise;
//! - concurrent whole-file Reads: each charged before the tier reads the
//!   file, so a refused one holds nothing;
//! - concurrent changesets (Commit) of nearly `changeset_max_bytes` each:
//!   bounded likewise, as each is charged its staged contents;
//! - concurrent Greps over huge one-line files on the Store and a
//!   Filesystem mount: bounded by the room searches share for large files;
//! - a principal's connections are bounded.
//!
//! Every test prints its peak (`peak … MiB`). To measure a build without
//! these limits, run them with `AGENTVFS_SERVER_BIN=<that agentvfs>` and
//! `AGENTVFS_ATTACK_BASELINE=1` (which leaves the new settings out of the
//! configuration); they then fail on their bounds, printing the peaks.

use crate::util::Server;
use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use agentvfs::pb::write_bytes_request::Kind;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::Code;
use tonic::transport::Channel;

/// The agent's token: every right.
const AGENT: &str = "agent-token-0001";
/// A principal that may only list `/pub`.
const LISTER: &str = "lister-token-001";

/// The server of these attacks: the State tier with its change log, a 1 s
/// idle timeout, 32 streams per principal, and a 96 MiB memory share
/// (`extra` adds settings to `[limits]`).
fn config(extra: &str) -> String {
    let limits = if std::env::var_os("AGENTVFS_ATTACK_BASELINE").is_some() {
        String::new()
    } else {
        format!("memory_bytes = 268435456\nmemory_bytes_per_principal = 100663296\n{extra}")
    };
    format!(
        r#"
max_file_bytes = 16777216
[limits]
stream_idle_timeout_seconds = 1
max_streams_per_principal = 32
{limits}

[[mount]]
prefix = "/"
tier = "state"
history_versions = 4

[[principal]]
name = "agent"
token = "{AGENT}"
grants = [{{ prefix = "/", ops = ["list", "file", "read_file", "read_binary", "read_re", "write", "delete"] }}]

[[principal]]
name = "lister"
token = "{LISTER}"
grants = [{{ prefix = "/pub/", ops = ["list"] }}]
"#
    )
}

/// A request of the agent.
fn authed<T>(msg: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {AGENT}").parse().unwrap());
    req
}

/// A Filesystem client on a new connection.
async fn connect(server: &Server) -> FilesystemClient<Channel> {
    FilesystemClient::new(server.channel().await).max_decoding_message_size(64 << 20)
}

/// `n` clients, each on a connection of its own, connected before any
/// call so that the calls made on them arrive together.
async fn connect_many(server: &Server, n: usize) -> Vec<FilesystemClient<Channel>> {
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(connect(server).await);
    }
    clients
}

/// A server of [`config`] holding `files` (path, content), written by the
/// agent.
async fn server_with(files: impl IntoIterator<Item = (String, String)>) -> Server {
    let server = Server::start_with(Some(&config("")), &[]);
    let mut fs = connect(&server).await;
    for (path, content) in files {
        let write = pb::WriteRequest {
            path,
            content,
            ..Default::default()
        };
        fs.write(authed(write)).await.unwrap();
    }
    server
}

/// Resident memory now and at the peak since the last reset, in MiB.
fn memory_mib(server: &Server) -> (u64, u64) {
    (
        server.memory_kib("VmRSS") / 1024,
        server.memory_kib("VmHWM") / 1024,
    )
}

/// How much one attack may grow the server's peak over its resident memory
/// before the attack: the streams of one round (or the bodies one share
/// admits) and the allocator's slack, never what the rounds add up to.
const GROWTH_BOUND_MIB: u64 = 200;

/// The Glob attack's bound: its messages are small, so a round holds less.
const GLOB_BOUND_MIB: u64 = 80;

/// The Diff attack's bound: the Diffs the share admits at once, with the
/// allocator's slack (8 MiB versions).
const DIFF_BOUND_MIB: u64 = 160;

/// Rounds of the cut-and-reopen attack.
const ROUNDS: usize = 6;

/// Runs `ROUNDS` rounds of 32 streams on 4 new connections, opened by
/// `open` and never read; each round waits until the idle timeout has cut
/// them, and keeps every connection and stream open (as the attacker does).
/// Asserts the peak stayed within `bound_mib` of the start.
async fn cut_and_reopen<F, Fut, S>(server: &Server, kind: &str, bound_mib: u64, open: F)
where
    F: Fn(FilesystemClient<Channel>) -> Fut,
    Fut: std::future::Future<Output = Result<S, tonic::Status>>,
{
    let (start, _) = memory_mib(server);
    server.reset_peak_memory();
    let (mut streams, mut clients) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let mut opened = 0;
        for _ in 0..4 {
            let client = connect(server).await;
            for _ in 0..8 {
                // A stream of the last round may still be counted (its cut is
                // under way): the attacker just goes on.
                match open(client.clone()).await {
                    Ok(stream) => {
                        streams.push(stream);
                        opened += 1;
                    }
                    Err(status) => {
                        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}")
                    }
                }
            }
            clients.push(client);
        }
        assert!(opened > 0, "round {round}: every {kind} refused");
        // Past the 1 s idle timeout: the round's streams are cut.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let (now, peak) = memory_mib(server);
        eprintln!("{kind} round {round}: {opened} streams, rss {now} MiB, peak {peak} MiB");
    }
    let (_, peak) = memory_mib(server);
    let growth = peak.saturating_sub(start);
    eprintln!("{kind}: peak {peak} MiB, {growth} MiB over the {start} MiB before the attack");
    assert!(
        growth < bound_mib,
        "{kind}: {ROUNDS} rounds of cut streams grew the server by {growth} MiB \
         (bound {bound_mib} MiB)"
    );
}

/// Watch: 3,000 changes at 1 KiB paths make every watcher's first pages far
/// larger than what HTTP/2 lets through; 6 rounds of 32 watchers that never
/// read.
#[tokio::test]
async fn watch_streams_cut_and_reopened_do_not_add_up() {
    let long = vec!["w".repeat(240); 4].join("/");
    let server = server_with((0..3000).map(|i| (format!("/{long}/{i:05}"), "x".into()))).await;
    cut_and_reopen(
        &server,
        "Watch",
        GROWTH_BOUND_MIB,
        |mut client| async move {
            client
                .watch(authed(pb::WatchRequest {
                    path: "/".into(),
                    ..Default::default()
                }))
                .await
                .map(|r| r.into_inner())
        },
    )
    .await;
}

/// ReadBytes: an 8 MiB file, 6 rounds of 32 downloads that never read.
#[tokio::test]
async fn read_bytes_streams_cut_and_reopened_do_not_add_up() {
    let server = server_with([("/big.bin".into(), "r".repeat(8 << 20))]).await;
    cut_and_reopen(
        &server,
        "ReadBytes",
        GROWTH_BOUND_MIB,
        |mut client| async move {
            client
                .read_bytes(authed(pb::ReadBytesRequest {
                    path: "/big.bin".into(),
                    version: None,
                }))
                .await
                .map(|r| r.into_inner())
        },
    )
    .await;
}

/// Grep: 4 files of 1 MB of matching lines, 6 rounds of 32 searches whose
/// client never reads.
#[tokio::test]
async fn grep_streams_cut_and_reopened_do_not_add_up() {
    let body = "needle in a haystack\n".repeat(50_000);
    let server = server_with((0..4).map(|i| (format!("/hay/{i}.txt"), body.clone()))).await;
    cut_and_reopen(&server, "Grep", GROWTH_BOUND_MIB, |mut client| async move {
        client
            .grep(authed(pb::GrepRequest {
                pattern: "needle".into(),
                path: "/".into(),
                max_duration_ms: 600_000,
                ..Default::default()
            }))
            .await
            .map(|r| r.into_inner())
    })
    .await;
}

/// Glob: 4,000 files with 200-byte names, 6 rounds of 32 listings whose
/// client never reads.
#[tokio::test]
async fn glob_streams_cut_and_reopened_do_not_add_up() {
    let name = "g".repeat(200);
    let server = server_with((0..4000).map(|i| (format!("/glob/{name}{i:05}"), "x".into()))).await;
    cut_and_reopen(&server, "Glob", GLOB_BOUND_MIB, |mut client| async move {
        client
            .glob(authed(pb::GlobRequest {
                pattern: "**".into(),
                path: "/".into(),
                max_duration_ms: 600_000,
                ..Default::default()
            }))
            .await
            .map(|r| r.into_inner())
    })
    .await;
}

/// WriteBytes: 32 uploads, each sending 12 MiB of a message announced as
/// 16 MiB and stalling there. What they hold is the principal's share (96
/// MiB) at most: the rest are refused RESOURCE_EXHAUSTED naming it, and a
/// Stat still answers.
#[tokio::test]
async fn stalled_uploads_hold_at_most_the_principal_share() {
    let server = Server::start_with(Some(&config("")), &[]);
    let (start, _) = memory_mib(&server);
    server.reset_peak_memory();
    let addr = server.url.trim_start_matches("http://").to_owned();
    let mut stalled = Vec::new();
    for i in 0..32 {
        let addr = addr.clone();
        stalled.push(tokio::spawn(async move {
            partial_upload(&addr, &format!("/up/{i}.bin"), 16 << 20, 12 << 20).await
        }));
    }
    let mut answers = Vec::new();
    for upload in stalled {
        answers.push(upload.await.unwrap());
    }
    let (_, peak) = memory_mib(&server);
    let growth = peak.saturating_sub(start);
    eprintln!("WriteBytes: peak {peak} MiB, {growth} MiB over {start} MiB");
    let refused = answers
        .iter()
        .filter(|a| a.contains("memory_bytes_per_principal"))
        .count();
    assert!(refused > 0, "no upload was refused: {answers:?}");
    assert!(
        growth < GROWTH_BOUND_MIB,
        "stalled uploads grew the server by {growth} MiB"
    );
    let mut fs = connect(&server).await;
    fs.stat(authed(pb::StatRequest { path: "/".into() }))
        .await
        .expect("the server still answers");
}

/// A gRPC message as sent on the wire: the 5-byte prefix, then `message`.
fn grpc_frame(message: &[u8], declared: usize) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(&(declared as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// Over raw HTTP/2, a WriteBytes with its header and the first `sent`
/// bytes of a data message announced as `declared` bytes, the stream left
/// open; how the call ended (`grpc-status` and message), within 20 s.
async fn partial_upload(addr: &str, path: &str, declared: usize, sent: usize) -> String {
    use prost::Message;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}/agentvfs.v1.Filesystem/WriteBytes"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {AGENT}"))
        .body(())
        .unwrap();
    let (response, mut send) = client.send_request(request, false).unwrap();
    let header = pb::WriteBytesRequest {
        kind: Some(Kind::Header(pb::WriteBytesHeader {
            path: path.into(),
            ..Default::default()
        })),
    }
    .encode_to_vec();
    let data = pb::WriteBytesRequest {
        kind: Some(Kind::Data(vec![b'u'; declared])),
    }
    .encode_to_vec();
    let mut body = grpc_frame(&header, header.len());
    body.extend(grpc_frame(&data[..sent], data.len()));
    // h2 sends it as the server's window allows; the stream stays open.
    send.send_data(body.into(), false).unwrap();
    let answered = async {
        let response = response.await.map_err(|e| e.to_string())?;
        let (parts, mut body) = response.into_parts();
        let mut status = grpc_status(&parts.headers);
        if status.is_empty() {
            while body.data().await.is_some_and(|d| d.is_ok()) {}
            if let Ok(Some(trailers)) = body.trailers().await {
                status = grpc_status(&trailers);
            }
        }
        Ok::<_, String>(status)
    };
    let outcome = tokio::time::timeout(Duration::from_secs(20), answered).await;
    drop(send);
    match outcome {
        Ok(Ok(status)) => status,
        Ok(Err(reset)) => format!("reset: {reset}"),
        Err(_) => "no answer".into(),
    }
}

/// `grpc-status` and `grpc-message` of `headers`, as text.
fn grpc_status(headers: &http::HeaderMap) -> String {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).unwrap_or("");
    if get("grpc-status").is_empty() {
        return String::new();
    }
    format!("{} {}", get("grpc-status"), get("grpc-message"))
}

/// The head of an MCP POST on HTTP/1.1 with `token`, announcing `length`
/// bytes of body (`None`: chunked).
fn mcp_head(token: &str, length: Option<usize>) -> String {
    let length = length.map_or("transfer-encoding: chunked\r\n".to_owned(), |n| {
        format!("content-length: {n}\r\n")
    });
    format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: LS\r\n{length}\r\n"
    )
}

/// The status line (and what follows, up to 4 KiB) the server sends on
/// `stream` within 10 s.
async fn status_line(stream: &mut TcpStream) -> String {
    let mut buf = vec![0u8; 4096];
    match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
        Ok(Ok(n)) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        _ => String::new(),
    }
}

/// Attack 2: 16 unfinished 100 MiB bodies of a principal allowed only to
/// list `/pub`. Announced, each is over the share and refused unread (413);
/// chunked, the first ones fill the share and the rest are refused as they
/// pass it. Either way the server's memory stays within the bound.
#[tokio::test]
async fn unfinished_mcp_bodies_are_bounded_by_the_share() {
    let server = Server::start_with(Some(&config("")), &[]);
    let addr = server.url.trim_start_matches("http://").to_owned();
    let (start, _) = memory_mib(&server);
    server.reset_peak_memory();
    // Announced: refused before any of it is read.
    let mut announced = TcpStream::connect(&addr).await.unwrap();
    announced
        .write_all(mcp_head(LISTER, Some(100 << 20)).as_bytes())
        .await
        .unwrap();
    let answer = status_line(&mut announced).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("memory_bytes_per_principal"), "{answer}");
    // Chunked: 16 bodies sending 100 MiB each, never finishing.
    let chunk = vec![b' '; 1 << 20];
    let mut senders = Vec::new();
    for _ in 0..16 {
        let addr = addr.clone();
        let chunk = chunk.clone();
        senders.push(tokio::spawn(async move {
            let mut stream = TcpStream::connect(&addr).await.unwrap();
            stream
                .write_all(mcp_head(LISTER, None).as_bytes())
                .await
                .unwrap();
            let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
            for _ in 0..100 {
                if stream.write_all(&framed).await.is_err() {
                    break;
                }
            }
            status_line(&mut stream).await
        }));
    }
    let mut answers = Vec::new();
    for sender in senders {
        answers.push(sender.await.unwrap());
    }
    let (_, peak) = memory_mib(&server);
    let growth = peak.saturating_sub(start);
    eprintln!("MCP bodies: peak {peak} MiB, {growth} MiB over {start} MiB");
    let refused = answers
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 413") || a.starts_with("HTTP/1.1 503"))
        .count();
    assert!(refused > 0, "{answers:?}");
    assert!(
        growth < GROWTH_BOUND_MIB,
        "MCP bodies grew the server by {growth} MiB"
    );
    let mut fs = connect(&server).await;
    fs.stat(authed(pb::StatRequest { path: "/".into() }))
        .await
        .expect("the server still answers");
}

/// Attack 2 on unary calls: 8 concurrent Diffs of two 8 MiB versions. The
/// share admits one at a time; the others are RESOURCE_EXHAUSTED naming it.
#[tokio::test]
async fn concurrent_large_diffs_are_bounded_by_the_share() {
    let server = Server::start_with(Some(&config("")), &[]);
    let mut fs = connect(&server).await;
    for fill in ["a", "b"] {
        let line = format!("{}\n", fill.repeat(99));
        fs.write(authed(pb::WriteRequest {
            path: "/big.txt".into(),
            content: line.repeat(80_000),
            ..Default::default()
        }))
        .await
        .unwrap();
    }
    let (start, _) = memory_mib(&server);
    server.reset_peak_memory();
    let clients = connect_many(&server, 8).await;
    let mut diffs = Vec::new();
    for mut client in clients {
        diffs.push(tokio::spawn(async move {
            client
                .diff(authed(pb::DiffRequest {
                    path: "/big.txt".into(),
                    from_version: 1,
                    to_version: Some(2),
                }))
                .await
        }));
    }
    let (done, refused) = served_or_refused(diffs).await;
    let (_, peak) = memory_mib(&server);
    let growth = peak.saturating_sub(start);
    eprintln!("Diff: {done} done, {refused} refused; peak {peak} MiB, {growth} MiB over {start}");
    assert!(done > 0 && refused > 0, "{done} done, {refused} refused");
    assert!(
        growth < DIFF_BOUND_MIB,
        "8 Diffs grew the server by {growth} MiB"
    );
}

/// How many of `calls` were answered and how many refused; a refusal must
/// be RESOURCE_EXHAUSTED naming the memory budget.
async fn served_or_refused<T>(
    calls: Vec<tokio::task::JoinHandle<Result<T, tonic::Status>>>,
) -> (usize, usize) {
    let (mut done, mut refused) = (0, 0);
    for call in calls {
        match call.await.unwrap() {
            Ok(_) => done += 1,
            Err(status) => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                assert!(status.message().contains("memory_bytes"), "{status:?}");
                refused += 1;
            }
        }
    }
    (done, refused)
}

/// A principal may make calls on `max_connections_per_principal`
/// connections at once; a call on one more is refused naming the limit,
/// another principal is served, and a closed connection gives its place back.
#[tokio::test]
async fn connections_per_principal_are_bounded() {
    let server = Server::start_with(Some(&config("max_connections_per_principal = 3")), &[]);
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut fs = connect(&server).await;
        fs.stat(authed(pb::StatRequest { path: "/".into() }))
            .await
            .unwrap();
        held.push(fs);
    }
    let mut fourth = connect(&server).await;
    let status = fourth
        .stat(authed(pb::StatRequest { path: "/".into() }))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("max_connections_per_principal"),
        "{status:?}"
    );
    let mut other = connect(&server).await;
    let mut req = tonic::Request::new(pb::ListInfoRequest {
        path: "/pub".into(),
    });
    req.metadata_mut()
        .insert("authorization", format!("Bearer {LISTER}").parse().unwrap());
    let listed = other.list_info(req).await;
    assert!(
        listed
            .as_ref()
            .err()
            .is_none_or(|s| s.code() == Code::NotFound),
        "{listed:?}"
    );
    // The same connections keep working; a closed one frees a place.
    held[0]
        .stat(authed(pb::StatRequest { path: "/".into() }))
        .await
        .unwrap();
    drop(held.pop());
    let admitted = async {
        loop {
            let mut fs = connect(&server).await;
            if fs
                .stat(authed(pb::StatRequest { path: "/".into() }))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), admitted)
        .await
        .expect("a closed connection gives its place back");
}

/// The changeset attack's bound: the changesets the share admits at once
/// (each is charged its body and twice its bytes: 2 of 16 MiB in a 96 MiB
/// share), what they leave in RocksDB's memtable, and the allocator's
/// slack (about 125 MiB measured; without the staging charge the share
/// admits 6 and the server grows by about 270 MiB).
const CHANGESET_BOUND_MIB: u64 = 160;

/// Attack 2 on Commit: 12 concurrent changesets of one principal, each
/// carrying nearly `changeset_max_bytes` (16 MiB in 4 files), on a Store
/// mount. The decoded operations and the tier's batch of each are alive
/// together beside the bodies still arriving; the share admits two at a
/// time, the others are RESOURCE_EXHAUSTED naming it, and another
/// principal's changeset is committed meanwhile.
#[tokio::test]
async fn concurrent_huge_changesets_are_bounded_by_the_share() {
    const OTHER: &str = "other-token-0001";
    const CALLS: usize = 12;
    const FILE: usize = (4 << 20) - 64;
    let limits = if std::env::var_os("AGENTVFS_ATTACK_BASELINE").is_some() {
        ""
    } else {
        "memory_bytes = 536870912\nmemory_bytes_per_principal = 100663296\n"
    };
    let config = format!(
        r#"
max_file_bytes = 8388608
[limits]
changeset_max_bytes = 16777216
{limits}
[[mount]]
prefix = "/"
tier = "store"

[[principal]]
name = "agent"
token = "{AGENT}"
grants = [{{ prefix = "/", ops = ["list", "file", "read_file", "write", "delete"] }}]

[[principal]]
name = "other"
token = "{OTHER}"
grants = [{{ prefix = "/other/", ops = ["list", "file", "read_file", "write", "delete"] }}]
"#
    );
    let server = Server::start_with(Some(&config), &[]);
    let changeset = |token: &str, dir: String, files: usize, bytes: usize| {
        let operations = (0..files)
            .map(|f| pb::ChangesetOperation {
                operation: Some(pb::changeset_operation::Operation::Write(
                    pb::WriteRequest {
                        path: format!("{dir}/{f}.txt"),
                        content: "c".repeat(bytes),
                        ..Default::default()
                    },
                )),
            })
            .collect();
        let mut req = tonic::Request::new(pb::CommitRequest { operations });
        req.metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
        req
    };
    // Connected and built first, so the calls arrive together.
    let mut calls = Vec::new();
    for i in 0..CALLS {
        calls.push((
            connect(&server).await,
            changeset(AGENT, format!("/c{i}"), 4, FILE),
        ));
    }
    let mut other = connect(&server).await;
    let (start, _) = memory_mib(&server);
    server.reset_peak_memory();
    let mut commits = Vec::new();
    for (mut client, req) in calls {
        commits.push(tokio::spawn(async move { client.commit(req).await }));
    }
    let served = other
        .commit(changeset(OTHER, "/other".into(), 2, 1024))
        .await;
    let (done, refused) = served_or_refused(commits).await;
    let (_, peak) = memory_mib(&server);
    let growth = peak.saturating_sub(start);
    eprintln!(
        "Commit: {done} done, {refused} refused; peak {peak} MiB, {growth} MiB over {start} MiB"
    );
    served.expect("another principal is served during the attack");
    assert!(refused > 0, "{done} done, {refused} refused");
    assert!(
        growth < CHANGESET_BOUND_MIB,
        "{CALLS} changesets of 16 MiB grew the server by {growth} MiB"
    );
    // Alone, a changeset at the limit is admitted.
    let mut fs = connect(&server).await;
    fs.commit(changeset(AGENT, "/alone".into(), 4, FILE))
        .await
        .expect("one huge changeset fits the share");
}

/// A search's snapshot of a State session: while a Grep whose client
/// stopped reading holds the session's map as it was, writers may replace
/// every node of it, and the old nodes stay alive for the Grep. The State
/// tier holds room for them (`max_total_bytes`) while the Grep runs, so a
/// write that fits without it is refused until the Grep ends.
#[tokio::test]
async fn a_stalled_grep_holds_state_room_for_its_snapshot() {
    let config = format!(
        r#"
max_file_bytes = 16777216
[state]
max_total_bytes = 33554432
[limits]
stream_idle_timeout_seconds = 60

[[mount]]
prefix = "/"
tier = "state"
history_versions = 1

[[principal]]
name = "agent"
token = "{AGENT}"
grants = [{{ prefix = "/", ops = ["list", "file", "read_file", "read_re", "write", "delete"] }}]
"#
    );
    let server = Server::start_with(Some(&config), &[]);
    let mut fs = connect(&server).await;
    let write = |path: String, size: usize| pb::WriteRequest {
        path,
        content: "f".repeat(size),
        ..Default::default()
    };
    // 2,000 files of one 4 KB matching line: 8 MB of matches, far more than
    // the stream's queue and the transport hold.
    let line = format!("needle {}", "x".repeat(4_000));
    for i in 0..2_000 {
        let file = pb::WriteRequest {
            path: format!("/s/f{i:05}"),
            content: line.clone(),
            ..Default::default()
        };
        fs.write(authed(file)).await.unwrap();
    }
    // 512 KiB set aside, then the tier filled to within 256 bytes.
    fs.write(authed(write("/spare".into(), 512 << 10)))
        .await
        .unwrap();
    let mut fillers = 0;
    for size in [1 << 20, 64 << 10, 4 << 10, 256] {
        loop {
            fillers += 1;
            match fs
                .write(authed(write(format!("/fill/{fillers}"), size)))
                .await
            {
                Ok(_) => {}
                Err(status) if status.code() == Code::ResourceExhausted => break,
                Err(status) => panic!("filling: {status:?}"),
            }
        }
    }
    let delete = pb::DeleteRequest {
        path: "/spare".into(),
        ..Default::default()
    };
    fs.delete(authed(delete)).await.unwrap();
    // 448 KiB fit in the room the spare file left.
    let probe = || write("/probe".into(), 448 << 10);
    let remove_probe = pb::DeleteRequest {
        path: "/probe".into(),
        ..Default::default()
    };
    fs.write(authed(probe())).await.unwrap();
    fs.delete(authed(remove_probe.clone())).await.unwrap();

    // A Grep whose client reads one message and then nothing: its search
    // runs until the queue is full and waits there, holding its snapshot.
    let mut reader = connect(&server).await;
    let mut stalled = reader
        .grep(authed(pb::GrepRequest {
            pattern: "needle".into(),
            path: "/s".into(),
            max_duration_ms: 600_000,
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    stalled.message().await.unwrap().expect("a first batch");
    // Its snapshot holds room for every key and pointer of the session's
    // ~2,070 files, about 150 KB: the probe no longer fits.
    let refused = fs.write(authed(probe())).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("State tier"), "{refused:?}");

    // Once the Grep ends (its client gone), the room is back.
    drop((stalled, reader));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match fs.write(authed(probe())).await {
            Ok(_) => break,
            Err(status) if status.code() == Code::ResourceExhausted => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "room not given back"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(status) => panic!("probe: {status:?}"),
        }
    }
}

/// Writes `content` to `path` as the agent, streamed in 1 MiB messages
/// (WriteBytes), as a client writes a file too large for one Write.
async fn upload(fs: &mut FilesystemClient<Channel>, path: &str, content: &[u8]) {
    let header = pb::WriteBytesRequest {
        kind: Some(Kind::Header(pb::WriteBytesHeader {
            path: path.into(),
            ..Default::default()
        })),
    };
    let data = content.chunks(1 << 20).map(|c| pb::WriteBytesRequest {
        kind: Some(Kind::Data(c.to_vec())),
    });
    let messages: Vec<_> = std::iter::once(header).chain(data).collect();
    fs.write_bytes(authed(tokio_stream::iter(messages)))
        .await
        .unwrap_or_else(|s| panic!("upload {path}: {s:?}"));
}

/// The huge-file attack's bound: the searches' room for large files (128
/// MiB, `src/search/room.rs`) and the allocator's slack; without that room
/// the 16 Greps grew the server by 0.9 GiB on the Store and 1.8 GiB on the
/// Filesystem mount (60 MiB files).
const HUGE_FILE_BOUND_MIB: u64 = 200;

/// The server of the huge-file Greps: the Store at `/` and the agent with
/// every right there, `limits` in `[limits]` and `mounts` after the Store's.
fn huge_files_config(limits: &str, mounts: &str) -> String {
    format!(
        r#"
[limits]
{limits}

[[mount]]
prefix = "/"
tier = "store"

{mounts}

[[principal]]
name = "agent"
token = "{AGENT}"
grants = [{{ prefix = "/", ops = ["list", "file", "read_file", "read_re", "write", "delete"] }}]
"#
    )
}

/// Attack 2 on Grep: 16 concurrent Greps over files of one 40 MiB line, on
/// a Store mount (whose files of several chunks a Grep reads whole) and on
/// a Filesystem mount (whose stream's buffer grows to hold the line). Each
/// Grep still finds every match; the server's growth stays within the
/// room searches share for large files, whatever the number of Greps.
#[tokio::test]
async fn concurrent_greps_of_huge_files_are_bounded() {
    const FILES: usize = 2;
    let config = huge_files_config(
        "memory_bytes = 536870912\nmemory_bytes_per_principal = 100663296\n\
         max_searches_per_principal = 16",
        "[[mount]]\nprefix = \"/workspace\"\ntier = \"filesystem\"\nroot = \".\"",
    );
    let server = Server::start_with(Some(&config), &[]);
    let mut line = "a".repeat(40 << 20);
    line.push_str(" needle\n");
    let mut fs = connect(&server).await;
    for i in 0..FILES {
        std::fs::write(server.workdir().join(format!("huge{i}.txt")), &line).unwrap();
        upload(&mut fs, &format!("/store/huge{i}.txt"), line.as_bytes()).await;
    }
    drop(line);
    for root in ["/store", "/workspace"] {
        let (start, _) = memory_mib(&server);
        server.reset_peak_memory();
        let clients = connect_many(&server, 16).await;
        let mut greps = Vec::new();
        for mut client in clients {
            let req = authed(pb::GrepRequest {
                pattern: "needle".into(),
                path: root.into(),
                max_duration_ms: 120_000,
                ..Default::default()
            });
            greps.push(tokio::spawn(async move {
                crate::util::grep_all(&mut client, req).await
            }));
        }
        for grep in greps {
            let (matches, summary) = grep.await.unwrap().expect("Grep answered");
            assert_eq!(matches.len(), FILES, "{root}: {summary:?}");
        }
        let (_, peak) = memory_mib(&server);
        let growth = peak.saturating_sub(start);
        eprintln!("Grep of huge files in {root}: peak {peak} MiB, {growth} MiB over {start} MiB");
        assert!(
            growth < HUGE_FILE_BOUND_MIB,
            "16 Greps of {FILES} huge files in {root} grew the server by {growth} MiB"
        );
    }
}

/// The room for large files is never held by a search waiting on its
/// client: four Greps over a 40 MiB Store file of matching lines whose
/// clients never read (their queues full, each walk waiting to send that
/// file's hits, which alone would take more than the 128 MiB room), then a
/// fifth Grep of the same file, by a client that reads, finishes long
/// before the idle timeout would cut the stalled ones.
#[tokio::test]
async fn a_stalled_grep_holds_no_room_for_large_files() {
    let config = huge_files_config("stream_idle_timeout_seconds = 120", "");
    let server = Server::start_with(Some(&config), &[]);
    let line = format!("needle {}\n", "x".repeat(90));
    let content = line.repeat((40 << 20) / line.len());
    let mut fs = connect(&server).await;
    upload(&mut fs, "/huge.txt", content.as_bytes()).await;
    drop(content);
    let grep = |max_results: u64| {
        authed(pb::GrepRequest {
            pattern: "needle".into(),
            path: "/".into(),
            max_results,
            max_duration_ms: 60_000,
            ..Default::default()
        })
    };
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut client = connect(&server).await;
        let stream = client.grep(grep(10_000_000)).await.unwrap().into_inner();
        stalled.push((client, stream));
    }
    // Their walks fill their queues and wait to send.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = std::time::Instant::now();
    let (matches, summary) = tokio::time::timeout(
        Duration::from_secs(30),
        crate::util::grep_all(&mut fs, grep(10)),
    )
    .await
    .expect("a Grep is not held up by stalled ones")
    .expect("Grep answered");
    eprintln!(
        "Grep beside 4 stalled ones: {:.1} s, {summary:?}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(matches.len(), 10, "{summary:?}");
    drop(stalled);
}

/// The whole-file read attack's bound: the reads one share admits at once
/// (two of a 20 MiB file and their answers) and the allocator's slack.
/// Charged only once read, the 16 reads held 16 × 20 MiB first.
const READ_BOUND_MIB: u64 = 160;

/// Attack 2 on whole-file reads: 16 concurrent Reads of a 20 MiB file, on
/// the Store and on a Filesystem mount, by a principal whose 96 MiB share
/// admits one Read (the file and its answer) and part of another. A Read's file is
/// charged once the tier has found it and before its content is read
/// (`Files::read`), so a refused Read never holds the file: the server
/// grows by what the share admits, not by what the 16 calls ask.
#[tokio::test]
async fn concurrent_reads_of_large_files_are_charged_before_they_are_read() {
    let config = huge_files_config(
        "memory_bytes = 536870912\nmemory_bytes_per_principal = 100663296",
        "[[mount]]\nprefix = \"/workspace\"\ntier = \"filesystem\"\nroot = \".\"",
    );
    let server = Server::start_with(Some(&config), &[]);
    let content = format!("{}\n", "a".repeat(99)).repeat(200_000);
    let mut fs = connect(&server).await;
    std::fs::write(server.workdir().join("large.txt"), &content).unwrap();
    upload(&mut fs, "/store/large.txt", content.as_bytes()).await;
    drop(content);
    for path in ["/store/large.txt", "/workspace/large.txt"] {
        let (start, _) = memory_mib(&server);
        server.reset_peak_memory();
        let clients = connect_many(&server, 16).await;
        let mut reads = Vec::new();
        for mut client in clients {
            let req = authed(pb::ReadRequest {
                path: path.into(),
                limit: 1,
                ..Default::default()
            });
            reads.push(tokio::spawn(async move { client.read(req).await }));
        }
        let (done, refused) = served_or_refused(reads).await;
        let (_, peak) = memory_mib(&server);
        let growth = peak.saturating_sub(start);
        eprintln!(
            "Read of {path}: {done} done, {refused} refused; peak {peak} MiB, {growth} MiB over \
             {start} MiB"
        );
        assert!(
            done > 0 && refused > 0,
            "{path}: {done} done, {refused} refused"
        );
        assert!(
            growth < READ_BOUND_MIB,
            "16 Reads of {path} grew the server by {growth} MiB"
        );
    }
}
