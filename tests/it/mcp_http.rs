//! The MCP endpoint at `/mcp` against hostile HTTP clients, one test per
//! attack (the protocol itself is tested through the official MCP SDK in
//! tests/mcp_client/). Each test ends by checking that the same listener
//! still answers MCP and gRPC.

use crate::util::Server;
use agentvfs::pb;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Small limits so the bounds are reached quickly: 1 MiB files (so about
/// 3 MiB messages) and a 1 s idle timeout.
const CONFIG: &str = r#"
max_file_bytes = 1048576
[limits]
stream_idle_timeout_seconds = 1
[[mount]]
prefix = "/"
tier = "state"
"#;

/// A stateless `tools/call` of LS (the current protocol's request shape).
const LS_CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"LS","arguments":{"path":"."},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

fn addr(server: &Server) -> String {
    server.url.trim_start_matches("http://").to_owned()
}

/// The request head of a POST to `/mcp` with `body_len` bytes to follow.
fn head(host: &str, body_len: usize) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
         mcp-method: tools/call\r\nmcp-name: LS\r\ncontent-length: {body_len}\r\n\r\n"
    )
}

/// Everything the server sends until it closes or goes quiet for 10 s.
async fn answer(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                out.extend_from_slice(&buf[..n]);
                if out.windows(4).any(|w| w == b"\r\n\r\n") && response_complete(&out) {
                    break;
                }
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// True once a response with a content-length has all of its body, or a
/// response that has none (202, 204) has its head.
fn response_complete(raw: &[u8]) -> bool {
    let text = String::from_utf8_lossy(raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    if head.starts_with("HTTP/1.1 202") || head.starts_with("HTTP/1.1 204") {
        return true;
    }
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .is_some_and(|len| body.len() >= len)
}

/// One well-formed MCP call on a fresh connection: the status line and body.
async fn call(server: &Server) -> String {
    let mut stream = TcpStream::connect(addr(server)).await.unwrap();
    let request = head("127.0.0.1", LS_CALL.len()) + LS_CALL;
    stream.write_all(request.as_bytes()).await.unwrap();
    answer(&mut stream).await
}

/// The listener still serves MCP and gRPC.
async fn still_serves(server: &Server) {
    let answer = call(server).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""isError":false"#), "{answer}");
    let mut fs = server.fs().await;
    fs.list_info(pb::ListInfoRequest { path: "/".into() })
        .await
        .expect("gRPC on the same listener");
}

#[tokio::test]
async fn a_body_that_stalls_is_answered_408_and_dropped() {
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
    let request = head("127.0.0.1", 1000) + "{\"jsonrpc\":";
    stream.write_all(request.as_bytes()).await.unwrap();
    let answer = answer(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("stream_idle_timeout_seconds"), "{answer}");
    still_serves(&server).await;
}

#[tokio::test]
async fn a_body_over_the_message_limit_is_refused_413() {
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
    let declared = 64 << 20;
    stream
        .write_all(head("127.0.0.1", declared).as_bytes())
        .await
        .unwrap();
    // Send more than the limit (about 3 MiB), not all that was declared; the
    // server may close as soon as it has seen enough.
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..8 {
        if stream.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let answer = answer(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    still_serves(&server).await;
}

#[tokio::test]
async fn a_foreign_host_is_refused() {
    // DNS rebinding: a page on evil.example resolving to 127.0.0.1.
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
    let request = head("evil.example", LS_CALL.len()) + LS_CALL;
    stream.write_all(request.as_bytes()).await.unwrap();
    let answer = answer(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    still_serves(&server).await;
}

#[tokio::test]
async fn malformed_requests_get_errors_naming_the_problem() {
    let server = Server::start_with(Some(CONFIG), &[]);
    // JSON that does not parse is a JSON-RPC parse error naming the problem;
    // well-formed JSON-RPC that is wrong is an error object.
    let cases: [(&str, &str, &str); 4] = [
        ("{not json", "HTTP/1.1 400", "-32700"),
        ("\u{0}\u{1}\u{2}", "HTTP/1.1 400", "not JSON"),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"LS","arguments":"."}}"#,
            "HTTP/1.1 ",
            "\"error\"",
        ),
        (r#"[1,2,3]"#, "HTTP/1.1 4", ""),
    ];
    for (body, status, needle) in cases {
        let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
        let request = head("127.0.0.1", body.len()) + body;
        stream.write_all(request.as_bytes()).await.unwrap();
        let answer = answer(&mut stream).await;
        assert!(answer.starts_with(status), "{body:?}: {answer}");
        assert!(answer.contains(needle), "{body:?}: {answer}");
    }
    // Credentials in headers that are not text are refused before the SDK.
    let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
    let mut request = head("127.0.0.1", LS_CALL.len()).into_bytes();
    let at = request.len() - 2;
    request.splice(at..at, b"x-agentvfs-session: \xff\xfe\r\n".iter().copied());
    request.extend_from_slice(LS_CALL.as_bytes());
    stream.write_all(&request).await.unwrap();
    let answer = answer(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("x-agentvfs-session"), "{answer}");
    still_serves(&server).await;
}

#[tokio::test]
async fn http_is_off_when_configured_so() {
    let config = format!("{CONFIG}[mcp]\nhttp = false\n");
    let server = Server::start_with(Some(&config), &[]);
    let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
    let request = head("127.0.0.1", LS_CALL.len()) + LS_CALL;
    stream.write_all(request.as_bytes()).await.unwrap();
    // gRPC only speaks HTTP/2: an HTTP/1.1 request gets no MCP answer.
    let answer = answer(&mut stream).await;
    assert!(!answer.contains("jsonrpc"), "{answer}");
    let mut fs = server.fs().await;
    fs.list_info(pb::ListInfoRequest { path: "/".into() })
        .await
        .expect("gRPC still served");
}

/// Two principals for the session tests: one allowed only to list `/pub`,
/// one with every right; 4 sessions on the server, 2 per principal.
const SESSIONS_CONFIG: &str = r#"
[mcp]
max_sessions = 4
max_sessions_per_principal = 2
[[mount]]
prefix = "/"
tier = "state"
[[principal]]
name = "lister"
token = "lister-token-001"
grants = [{ prefix = "/pub/", ops = ["list"] }]
[[principal]]
name = "agent"
token = "agent-token-0001"
grants = [{ prefix = "/", ops = ["list", "file", "read_file", "write"] }]
[[principal]]
name = "reader"
token = "reader-token-001"
grants = [{ prefix = "/pub/", ops = ["list"] }]
"#;

/// An MCP request of the session-based protocol as `token`, in `session`
/// when given; the raw answer.
async fn session_request(
    server: &Server,
    token: &str,
    session: Option<&str>,
    extra_headers: &str,
    body: &str,
) -> String {
    let mut stream = TcpStream::connect(addr(server)).await.unwrap();
    let session = session.map_or(String::new(), |s| format!("mcp-session-id: {s}\r\n"));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\n{session}\
         {extra_headers}content-type: application/json\r\naccept: application/json, \
         text/event-stream\r\nmcp-protocol-version: 2025-06-18\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    answer(&mut stream).await
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"attack","version":"1"}}}"#;
const LIST_TOOLS: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

/// Opens a session as `token`: its id, or the refusal.
pub(crate) async fn open_session(server: &Server, token: &str) -> Result<String, String> {
    let answer = session_request(server, token, None, "", INITIALIZE).await;
    if !answer.starts_with("HTTP/1.1 200") {
        return Err(answer);
    }
    let id = answer.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("mcp-session-id")
            .then(|| v.trim().to_owned())
    });
    let id = id.ok_or(answer.clone())?;
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    session_request(server, token, Some(&id), "", initialized).await;
    Ok(id)
}

/// Attack 3: a list-only principal opens sessions without ever ending
/// them (as most MCP clients do). Past its share of 2 (not the server's 4),
/// each new session ends its least recently used one, which then answers
/// 404 (the spec's signal to initialize again); its other sessions and the
/// other principals' are untouched. A principal under its share facing a
/// pool full of others' sessions is refused 503 naming `max_sessions`.
#[tokio::test]
async fn a_principal_past_its_share_ends_its_least_recently_used_session() {
    let server = Server::start_with(Some(SESSIONS_CONFIG), &[]);
    let lister = "lister-token-001";
    let used = |answer: &str| answer.starts_with("HTTP/1.1 200");
    let gone = |answer: &str| answer.starts_with("HTTP/1.1 404");
    let kept = open_session(&server, lister).await.unwrap();
    let agents = open_session(&server, "agent-token-0001").await.unwrap();
    for round in 0..3 {
        let older = open_session(&server, lister).await.unwrap();
        // `kept` is used now, so `older` is the least recently used.
        let reply = session_request(&server, lister, Some(&kept), "", LIST_TOOLS).await;
        assert!(used(&reply), "round {round}: {reply}");
        let newest = open_session(&server, lister)
            .await
            .expect("a session past the share");
        let reply = session_request(&server, lister, Some(&older), "", LIST_TOOLS).await;
        assert!(
            gone(&reply),
            "round {round}: the least recently used lives: {reply}"
        );
        for live in [&kept, &newest] {
            let reply = session_request(&server, lister, Some(live), "", LIST_TOOLS).await;
            assert!(used(&reply), "round {round}: {reply}");
        }
        // `kept` used last again: the next round's session ends `newest`.
        let reply = session_request(&server, lister, Some(&kept), "", LIST_TOOLS).await;
        assert!(used(&reply), "round {round}: {reply}");
    }
    let reply = session_request(&server, "agent-token-0001", Some(&agents), "", LIST_TOOLS).await;
    assert!(
        used(&reply),
        "the agent's session survived the lister's: {reply}"
    );
    // The pool: the lister's 2, the agent's 2; a third principal is refused.
    open_session(&server, "agent-token-0001").await.unwrap();
    let refusal = open_session(&server, "reader-token-001").await.unwrap_err();
    assert!(refusal.starts_with("HTTP/1.1 503"), "{refusal}");
    assert!(refusal.contains("max_sessions"), "{refusal}");
    // Closing one gives the pool its place back.
    let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {lister}\r\n\
         mcp-session-id: {kept}\r\nmcp-protocol-version: 2025-06-18\r\ncontent-length: 0\r\n\r\n"
    );
    stream.write_all(delete.as_bytes()).await.unwrap();
    let closed = answer(&mut stream).await;
    assert!(closed.starts_with("HTTP/1.1 204"), "{closed}");
    assert!(open_session(&server, "reader-token-001").await.is_ok());
}

/// Attack 5: a session belongs to the principal that opened it (another
/// presenting its id gets 404, as for an unknown session, and cannot close
/// it), and a browser `Origin` other than the allowed ones is refused 403.
#[tokio::test]
async fn sessions_are_bound_to_their_principal_and_origin_is_checked() {
    let server = Server::start_with(Some(SESSIONS_CONFIG), &[]);
    let agents = open_session(&server, "agent-token-0001").await.unwrap();
    let foreign = session_request(&server, "lister-token-001", Some(&agents), "", LIST_TOOLS).await;
    assert!(foreign.starts_with("HTTP/1.1 404"), "{foreign}");
    let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer lister-token-001\r\n\
         mcp-session-id: {agents}\r\nmcp-protocol-version: 2025-06-18\r\ncontent-length: 0\r\n\r\n"
    );
    stream.write_all(delete.as_bytes()).await.unwrap();
    let closed = answer(&mut stream).await;
    assert!(closed.starts_with("HTTP/1.1 404"), "{closed}");
    let own = session_request(&server, "agent-token-0001", Some(&agents), "", LIST_TOOLS).await;
    assert!(own.starts_with("HTTP/1.1 200"), "{own}");
    assert!(own.contains("MultiEdit"), "{own}");
    // Origin: a page elsewhere is refused, one of this machine passes.
    let evil = "origin: http://evil.example\r\n";
    let refused =
        session_request(&server, "agent-token-0001", Some(&agents), evil, LIST_TOOLS).await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    let local = "origin: http://localhost:3000\r\n";
    let passed = session_request(
        &server,
        "agent-token-0001",
        Some(&agents),
        local,
        LIST_TOOLS,
    )
    .await;
    assert!(passed.starts_with("HTTP/1.1 200"), "{passed}");
}

/// The longest URI a subscription may name: `agentvfs://` and the longest
/// path (4,096 bytes), every byte percent-encoded (`src/mcp/resources.rs`).
const MAX_URI_BYTES: usize = "agentvfs://".len() + 3 * 4096;

/// A `resources/subscribe` of `uri` in a session, as JSON-RPC request `id`.
fn subscribe(id: u32, uri: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"resources/subscribe","params":{{"uri":"{uri}"}}}}"#
    )
}

/// Attack 6 (issue 51, F3): a list-only principal subscribes again and
/// again with huge URIs, each of which a session used to keep whole for its
/// life (12 of 48 MiB pinned 580 MiB). Each is refused with a JSON-RPC
/// error naming the bound before anything is kept, a URI at the bound is
/// kept (and charged), and the server's peak memory grows by less than
/// `BOUND_MIB` over the whole attack, where the 12 URIs alone are 480 MiB.
#[tokio::test]
async fn huge_subscription_uris_are_refused_and_nothing_is_kept() {
    const URI_MIB: usize = 40;
    const BOUND_MIB: u64 = 200;
    // The default message limit (129 MiB), so the bodies are accepted.
    let server = Server::start_with(Some(SESSIONS_CONFIG), &[]);
    let session = open_session(&server, "lister-token-001").await.unwrap();
    let at_bound = format!("test://{}", "x".repeat(MAX_URI_BYTES - "test://".len()));
    let kept = session_request(
        &server,
        "lister-token-001",
        Some(&session),
        "",
        &subscribe(2, &at_bound),
    )
    .await;
    assert!(kept.starts_with("HTTP/1.1 200"), "{kept}");
    assert!(
        !kept.contains("\"error\""),
        "a URI at the bound is kept: {kept}"
    );
    let before_kib = server.memory_kib("VmHWM");
    let huge = format!("test://{}", "x".repeat(URI_MIB << 20));
    let mut answers = Vec::new();
    for id in 0..12 {
        // Twelve different URIs: a session keeps each once.
        let body = subscribe(10 + id, &format!("{huge}{id}"));
        let answer = session_request(&server, "lister-token-001", Some(&session), "", &body).await;
        answers.push(answer.chars().take(2000).collect::<String>());
    }
    let grown_mib = server.memory_kib("VmHWM").saturating_sub(before_kib) / 1024;
    eprintln!(
        "12 subscriptions of {URI_MIB} MiB URIs: peak memory grew by {grown_mib} MiB (bound \
         {BOUND_MIB} MiB)"
    );
    for refused in &answers {
        assert!(
            refused.contains(&format!("longer than {MAX_URI_BYTES} bytes")),
            "the refusal names the bound: {refused}"
        );
    }
    assert!(
        grown_mib < BOUND_MIB,
        "peak memory grew by {grown_mib} MiB (bound {BOUND_MIB} MiB)"
    );
    let over = format!("{at_bound}x");
    let refused = session_request(
        &server,
        "lister-token-001",
        Some(&session),
        "",
        &subscribe(30, &over),
    )
    .await;
    assert!(
        refused.contains(&format!("longer than {MAX_URI_BYTES} bytes")),
        "{refused}"
    );
    // The session, and the server, still serve.
    let listed = session_request(&server, "lister-token-001", Some(&session), "", LIST_TOOLS).await;
    assert!(
        listed.starts_with("HTTP/1.1 200") && listed.contains("MultiEdit"),
        "{listed}"
    );
}

/// State at `/`, the server's working directory at `/workspace` (the
/// Filesystem tier, whose versions are nanosecond times past 2^53), and an
/// `admin` holding every grant.
const VERSIONS_CONFIG: &str = r#"
[[mount]]
prefix = "/"
tier = "state"
[[mount]]
prefix = "/workspace"
tier = "filesystem"
root = "."
[[principal]]
name = "admin"
token = "admin-token"
grants = [{ prefix = "/", ops = ["list", "file", "read_file", "write", "delete"] }]
"#;

/// One MCP `tools/call` of `name` as the admin, in `branch` when given:
/// the envelope (`structuredContent`).
async fn tool(server: &Server, branch: Option<&str>, name: &str, args: Value) -> Value {
    let params = json!({"name": name, "arguments": args});
    let (status, answer) =
        crate::branch_tools::mcp(server, "admin-token", branch, "tools/call", params).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status} {answer}");
    answer["result"]["structuredContent"].clone()
}

/// The `stats.version` of a Read of `path`, as MCP gave it, after checking
/// that it is a string of digits that survives a reader parsing numbers as
/// doubles (JavaScript's `JSON.parse`).
async fn read_version(server: &Server, branch: Option<&str>, path: &str) -> (Value, u64) {
    let envelope = tool(server, branch, "Read", json!({"path": path})).await;
    assert_eq!(envelope["status"], "success", "{envelope}");
    let version = envelope["stats"]["version"].clone();
    let exact = match &version {
        Value::String(digits) => digits.parse::<u64>().expect("a version is decimal digits"),
        other => panic!("stats.version is {other}, not a string of digits: {envelope}"),
    };
    (version, exact)
}

/// Issue 51, F13: the tools change a file a branch changed. Its version has
/// bit 63 set; it used to pass through the tools' JSON as a number that the
/// arguments read as a signed integer and clamped, so every Edit, Write,
/// MultiEdit and Delete with the `expected_version` a Read had just given
/// answered CONFLICT. Versions are now strings of digits, accepted back as
/// given (and as exact JSON integers).
#[tokio::test]
async fn tools_over_mcp_change_files_a_branch_changed() {
    let server = Server::start_with(Some(VERSIONS_CONFIG), &[]);
    let base = tool(
        &server,
        None,
        "Write",
        json!({"path": "p/base.txt", "content": "base\n"}),
    )
    .await;
    assert_eq!(base["status"], "success", "{base}");
    let created = tool(
        &server,
        None,
        "BranchCreate",
        json!({"name": "f", "path": "p"}),
    )
    .await;
    assert_eq!(created["status"], "success", "{created}");
    let branch = Some("f");
    for name in ["a", "b", "c", "d"] {
        let path = format!("p/{name}.txt");
        let written = tool(
            &server,
            branch,
            "Write",
            json!({"path": path, "content": "one two\n"}),
        )
        .await;
        assert_eq!(written["status"], "success", "{written}");
    }
    let changes: [(&str, &str, Value); 4] = [
        (
            "Edit",
            "p/a.txt",
            json!({"old_string": "one", "new_string": "ONE"}),
        ),
        ("Write", "p/b.txt", json!({"content": "rewritten\n"})),
        (
            "MultiEdit",
            "p/c.txt",
            json!({"edits": [{"old_string": "one", "new_string": "1"}, {"old_string": "two", "new_string": "2"}]}),
        ),
        ("Delete", "p/d.txt", json!({})),
    ];
    for (name, path, mut args) in changes {
        let (version, exact) = read_version(&server, branch, path).await;
        assert!(
            exact >> 63 == 1,
            "a branch's version has bit 63 set: {exact}"
        );
        args["path"] = json!(path);
        args["expected_version"] = version;
        let changed = tool(&server, branch, name, args).await;
        assert_eq!(changed["status"], "success", "{name} after Read: {changed}");
        if name != "Delete" {
            let shown = &changed["stats"]["version"];
            assert!(
                shown.as_str().and_then(|s| s.parse::<u64>().ok()).is_some(),
                "{changed}"
            );
        }
    }
    // The same version as an exact JSON integer is accepted; as a float
    // that lost its digits, refused naming the remedy.
    let (_, exact) = read_version(&server, branch, "p/a.txt").await;
    let lossy = tool(
        &server,
        branch,
        "Edit",
        json!({"path": "p/a.txt", "old_string": "ONE", "new_string": "one", "expected_version": exact as f64}),
    )
    .await;
    assert_eq!(lossy["error"]["code"], "INVALID_PARAM", "{lossy}");
    assert!(
        lossy["error"]["message"]
            .as_str()
            .unwrap()
            .contains("as a string"),
        "{lossy}"
    );
    let integer = tool(
        &server,
        branch,
        "Edit",
        json!({"path": "p/a.txt", "old_string": "ONE", "new_string": "one", "expected_version": exact}),
    )
    .await;
    assert_eq!(integer["status"], "success", "{integer}");
    // History lists the branch's versions as strings, and takes them back.
    let history = tool(&server, branch, "History", json!({"path": "p/a.txt"})).await;
    let oldest = history["data"]["versions"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["version"]
        .clone();
    assert!(oldest.is_string(), "{history}");
    let diff = tool(
        &server,
        branch,
        "History",
        json!({"path": "p/a.txt", "action": "diff", "version": oldest}),
    )
    .await;
    assert_eq!(diff["data"]["from_version"], oldest, "{diff}");
}

/// A Filesystem mount's versions (nanosecond times, past 2^53) round-trip
/// through MCP exactly: Read shows a string, Edit takes it back, and the
/// new version shown is the one the next Read shows.
#[tokio::test]
async fn filesystem_versions_round_trip_exactly_over_mcp() {
    let server = Server::start_with(Some(VERSIONS_CONFIG), &[]);
    let written = tool(
        &server,
        None,
        "Write",
        json!({"path": "/workspace/n.txt", "content": "alpha\n"}),
    )
    .await;
    assert_eq!(written["status"], "success", "{written}");
    let (version, exact) = read_version(&server, None, "/workspace/n.txt").await;
    assert!(
        exact > 1 << 53,
        "a Filesystem version is past 2^53: {exact}"
    );
    assert_eq!(
        written["stats"]["version"], version,
        "Write and Read show the same version"
    );
    let edited = tool(
        &server,
        None,
        "Edit",
        json!({"path": "/workspace/n.txt", "old_string": "alpha", "new_string": "beta", "expected_version": version}),
    )
    .await;
    assert_eq!(edited["status"], "success", "{edited}");
    let (now, _) = read_version(&server, None, "/workspace/n.txt").await;
    assert_eq!(edited["stats"]["version"], now, "{edited}");
}
