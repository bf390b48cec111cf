//! The MCP endpoint at `/mcp` against hostile HTTP clients, one test per
//! attack (the protocol itself is tested through the official MCP SDK in
//! tests/mcp_client/). Each test ends by checking that the same listener
//! still answers MCP and gRPC.

use crate::util::Server;
use agentvfs::pb;
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

/// True once a response with a content-length has all of its body.
fn response_complete(raw: &[u8]) -> bool {
    let text = String::from_utf8_lossy(raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
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
