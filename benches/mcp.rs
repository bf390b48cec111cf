//! `cargo bench --bench mcp`: one small tool call over MCP (streamable HTTP
//! at `/mcp`) against the same call through gRPC `Tools/Invoke`, side by side
//! in one run against one server, printed as a markdown table.
//!
//! 1. Latency: one caller, one call at a time, each call timed; the ratio of
//!    the medians says what MCP's JSON-RPC over HTTP/1.1 costs on top of
//!    gRPC (target: at most 1.5×, docs/mcp.md § Performance).
//! 2. Throughput: 8 callers, each on its own connection, calling for a fixed
//!    time; calls per second of each transport.
//!
//! The call is the Read tool on a 10-line file: small enough that the
//! transport, not the tool, is what is measured. The MCP client is a plain
//! HTTP/1.1 keep-alive connection sending the current protocol's stateless
//! request (what the official SDKs send once they have discovered the
//! server), so no client library's overhead is counted on either side.

mod support;

use agentvfs::pb;
use agentvfs::pb::tools_client::ToolsClient;
use std::ffi::OsStr;
use std::time::{Duration, Instant};
use support::Served;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader as AsyncBufReader};
use tokio::net::TcpStream;

/// Calls timed one by one in the latency rows, per transport (after warm-up).
const LATENCY_CALLS: usize = 2_000;
/// Concurrent callers in the throughput rows.
const CALLERS: usize = 8;
/// How long each throughput row runs.
const THROUGHPUT_TIME: Duration = Duration::from_secs(3);
/// The tool and arguments of the measured call.
const TOOL: &str = "Read";
const ARGUMENTS: &str = r#"{"path":"/workspace/small.txt"}"#;

/// One transport's caller: makes the measured call once.
trait Caller {
    fn call(&mut self) -> impl std::future::Future<Output = ()> + Send;
}

/// gRPC `Tools/Invoke` on one HTTP/2 connection.
struct Grpc(ToolsClient<tonic::transport::Channel>);

impl Grpc {
    async fn connect(url: &str) -> Grpc {
        Grpc(
            ToolsClient::connect(url.to_owned())
                .await
                .expect("connect gRPC"),
        )
    }
}

impl Caller for Grpc {
    async fn call(&mut self) {
        let envelope = self
            .0
            .invoke(pb::InvokeRequest {
                name: TOOL.into(),
                arguments_json: ARGUMENTS.into(),
                tool_call_id: String::new(),
            })
            .await
            .expect("Invoke")
            .into_inner()
            .envelope
            .expect("an envelope");
        assert_eq!(envelope.status, "success", "{envelope:?}");
    }
}

/// MCP `tools/call` on one HTTP/1.1 keep-alive connection.
struct Mcp {
    stream: AsyncBufReader<TcpStream>,
    request: Vec<u8>,
    body: Vec<u8>,
}

impl Mcp {
    async fn connect(addr: &str) -> Mcp {
        let stream = TcpStream::connect(addr).await.expect("connect MCP");
        stream.set_nodelay(true).expect("nodelay");
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{TOOL}","arguments":{ARGUMENTS},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        );
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
             mcp-method: tools/call\r\nmcp-name: {TOOL}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        Mcp {
            stream: AsyncBufReader::new(stream),
            request: request.into_bytes(),
            body: Vec::new(),
        }
    }
}

impl Caller for Mcp {
    async fn call(&mut self) {
        self.stream
            .get_mut()
            .write_all(&self.request)
            .await
            .expect("send");
        let mut length = None;
        let mut status = String::new();
        self.stream.read_line(&mut status).await.expect("status");
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line).await.expect("header");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = Some(value.trim().parse::<usize>().expect("a length"));
            }
        }
        let length = length.expect("a JSON answer has a content-length");
        self.body.resize(length, 0);
        self.stream.read_exact(&mut self.body).await.expect("body");
        assert!(
            memchr::memmem::find(&self.body, br#""isError":false"#).is_some(),
            "{}",
            String::from_utf8_lossy(&self.body)
        );
    }
}

/// The median of per-call latencies over [`LATENCY_CALLS`] calls.
async fn median_latency(caller: &mut impl Caller) -> Duration {
    for _ in 0..200 {
        caller.call().await;
    }
    let mut times = Vec::with_capacity(LATENCY_CALLS);
    for _ in 0..LATENCY_CALLS {
        let start = Instant::now();
        caller.call().await;
        times.push(start.elapsed());
    }
    times.sort();
    times[times.len() / 2]
}

/// Calls per second of [`CALLERS`] callers calling for [`THROUGHPUT_TIME`].
async fn throughput<C: Caller + Send + 'static>(callers: Vec<C>) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = callers
        .into_iter()
        .map(|mut caller| {
            tokio::spawn(async move {
                let mut calls = 0u64;
                while start.elapsed() < THROUGHPUT_TIME {
                    caller.call().await;
                    calls += 1;
                }
                calls
            })
        })
        .collect();
    let mut calls = 0;
    for task in tasks {
        calls += task.await.expect("caller task");
    }
    calls as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let tmp = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(tmp.path().join("served")).expect("served dir");
    let text: String = (1..=10)
        .map(|i| format!("line {i} of a small file\n"))
        .collect();
    std::fs::write(tmp.path().join("served/small.txt"), text).expect("small file");
    let served = tmp.path().join("served");
    let data = tmp.path().join("data");
    let server = Served::start(
        [
            OsStr::new("--root"),
            served.as_os_str(),
            OsStr::new("--data"),
            data.as_os_str(),
        ],
        tmp.path(),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (addr, url) = (server.addr.clone(), server.url());
    let (grpc_latency, mcp_latency, grpc_rate, mcp_rate) = rt.block_on(async move {
        // Alternate the transports so drift on a shared machine hits both.
        let (mut grpc, mut mcp) = (Grpc::connect(&url).await, Mcp::connect(&addr).await);
        let grpc_latency = median_latency(&mut grpc).await;
        let mcp_latency = median_latency(&mut mcp).await;
        let mut grpc_callers = Vec::new();
        let mut mcp_callers = Vec::new();
        for _ in 0..CALLERS {
            grpc_callers.push(Grpc::connect(&url).await);
            mcp_callers.push(Mcp::connect(&addr).await);
        }
        let grpc_rate = throughput(grpc_callers).await;
        let mcp_rate = throughput(mcp_callers).await;
        (grpc_latency, mcp_latency, grpc_rate, mcp_rate)
    });
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    println!("| measurement | gRPC Invoke | MCP over HTTP | MCP / gRPC |");
    println!("|---|---:|---:|---:|");
    println!(
        "| {TOOL} of a 10-line file, median latency, 1 caller ({LATENCY_CALLS} calls) | {:.0} µs | {:.0} µs | {:.2}× |",
        micros(grpc_latency),
        micros(mcp_latency),
        micros(mcp_latency) / micros(grpc_latency)
    );
    println!(
        "| {TOOL} of a 10-line file, calls/s, {CALLERS} callers ({}s) | {:.0} | {:.0} | {:.2}× |",
        THROUGHPUT_TIME.as_secs(),
        grpc_rate,
        mcp_rate,
        mcp_rate / grpc_rate
    );
}
