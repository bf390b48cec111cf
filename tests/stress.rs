//! Stress test: one real server, ~16 concurrent clients, a bounded time of
//! mixed load over every RPC of `proto/agentvfs/v1/*.proto` and MCP at `/mcp`,
//! a good share of it hostile. Afterwards the server must still answer, its memory must have
//! stayed under a stated bound, no acknowledged write may be lost and no
//! response may show a byte from outside the sandbox.
//!
//! `cargo test --release --test stress` (a `harness = false` target; `cargo
//! test --release` runs it too). Knobs, all optional:
//! - `AGENTVFS_STRESS_SECONDS` (default 25): how long the load runs; the whole
//!   target takes about 10 s more (start-up, final checks);
//! - `AGENTVFS_STRESS_WORKERS` (default 16): concurrent clients;
//! - `AGENTVFS_STRESS_SEED`: the random seed (printed in the summary);
//! - `AGENTVFS_STRESS_SKIP`: comma-separated request kinds to leave out (the
//!   names of the per-kind table), to look past a known failure.
//!
//! The server runs with `RLIMIT_DATA` at [`DATA_LIMIT_MIB`] so a runaway
//! allocation aborts it instead of exhausting a shared machine; the bound the
//! test enforces on resident memory is [`RSS_BOUND_MIB`].
//!
//! Every request has a client-side deadline ([`DEADLINE`]), so a hung server
//! shows as faults, never as a hung test. Faults are answers UNAVAILABLE,
//! UNKNOWN or CANCELLED (transport failures) and client-side timeouts;
//! INTERNAL answers are counted apart, and any one fails the test; the
//! first of either is printed for each kind. When the server dies or crosses the memory bound, the report
//! names the requests in flight at that moment, those started just before
//! and those whose client gave up while the server may still run them.

#[path = "support/launch.rs"]
mod launch;

use agentvfs::pb;
use agentvfs::pb::access_client::AccessClient;
use agentvfs::pb::filesystem_client::FilesystemClient;
use agentvfs::pb::tools_client::ToolsClient;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

/// The bound on the server's resident memory the test enforces.
const RSS_BOUND_MIB: u64 = 1024;
/// The server's data segment limit: a runaway allocation aborts it here.
const DATA_LIMIT_MIB: u64 = 2048;
/// Client-side deadline of every request.
const DEADLINE: Duration = Duration::from_secs(8);
/// Largest file the server accepts (the configuration below).
const MAX_FILE_BYTES: usize = 4 << 20;
/// Token of the principal every worker acts as.
const TOKEN: &str = "stress-agent-token";
/// Token of a principal that may only read `/workspace`.
const READER_TOKEN: &str = "stress-reader-token";
/// Token of the attacker: reads `/workspace`, and cuts and reopens streams
/// round after round ([`cut_and_reopen`]).
const ATTACKER_TOKEN: &str = "stress-attacker-token";
/// The server's idle timeout: the attacker's rounds last a little longer.
const IDLE_SECONDS: u64 = 3;
/// Text that only exists outside the Filesystem mount's root.
const SECRET: &str = "AGENTVFS-STRESS-SECRET";
/// How often the server's memory is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Every request kind: name, hostile, weight. The name is what the per-kind
/// table, the failure report and `AGENTVFS_STRESS_SKIP` use.
const KINDS: &[(&str, bool, u32)] = &[
    ("list_info", false, 4),
    ("stat", false, 4),
    ("read", false, 5),
    ("read_bytes", false, 3),
    ("write_own", false, 8),
    ("write_bytes_own", false, 4),
    ("edit_own", false, 6),
    ("multi_edit_own", false, 4),
    ("write_delete_scratch", false, 3),
    ("read_re", false, 3),
    ("grep", false, 3),
    ("glob", false, 3),
    ("list_tools", false, 2),
    ("invoke", false, 3),
    ("typed_tools", false, 6),
    ("handle_roundtrip", false, 2),
    ("describe_grants", false, 2),
    ("huge_path", true, 3),
    ("dotdot_nul_control_path", true, 3),
    ("link_escape_read", true, 4),
    ("link_escape_write", true, 2),
    ("huge_regex", true, 2),
    ("edit_replace_all_bomb", true, 1),
    ("multi_edit_bomb", true, 1),
    ("tool_edit_bomb", true, 1),
    ("grep_abandoned", true, 2),
    ("read_bytes_abandoned", true, 2),
    ("write_bytes_stall", true, 1),
    ("write_bytes_drop", true, 2),
    ("oversized_message", true, 1),
    ("deep_tree", true, 1),
    ("bogus_token", true, 3),
    ("chained_handle", true, 2),
    ("handle_many_grants", true, 1),
    ("hostile_invoke", true, 3),
    ("hostile_glob", true, 2),
    ("hostile_search_args", true, 2),
    ("mcp_call", false, 4),
    ("mcp_hostile", true, 3),
];

fn main() {
    // `cargo test FILTER` passes the filter to every target: run only when it
    // selects this one. `--list` is how test runners enumerate tests.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("stress: test");
        return;
    }
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-'))
        && !"stress".contains(filter.as_str())
    {
        return;
    }
    let settings = Settings::from_env();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let failures = runtime.block_on(run(settings));
    if !failures.is_empty() {
        eprintln!("stress FAILED:");
        for f in &failures {
            eprintln!("  - {f}");
        }
        std::process::exit(1);
    }
}

/// The knobs of one run.
struct Settings {
    seconds: u64,
    workers: usize,
    seed: u64,
    skip: Vec<String>,
}

impl Settings {
    fn from_env() -> Settings {
        let num = |key: &str, default: u64| {
            std::env::var(key)
                .ok()
                .map(|v| {
                    v.parse()
                        .unwrap_or_else(|_| panic!("{key}={v:?} is not a number"))
                })
                .unwrap_or(default)
        };
        let skip: Vec<String> = std::env::var("AGENTVFS_STRESS_SKIP")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        for s in &skip {
            assert!(
                KINDS.iter().any(|(k, _, _)| k == s),
                "AGENTVFS_STRESS_SKIP names unknown kind {s:?}"
            );
        }
        Settings {
            seconds: num("AGENTVFS_STRESS_SECONDS", 25),
            workers: num("AGENTVFS_STRESS_WORKERS", 16) as usize,
            seed: num("AGENTVFS_STRESS_SEED", rand::rng().random()),
            skip,
        }
    }
}

// ---------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------

/// The directories of one run: the server's working directory, the
/// Filesystem mount's root inside it, and a directory outside that root.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        let ws = root.join("ws");
        let outside = root.join("outside");
        for d in [
            ws.join("src"),
            ws.join("own"),
            ws.join("scratch"),
            outside.clone(),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(ws.join("a.txt"), "hello\nworld\n").unwrap();
        std::fs::write(
            ws.join("src/lib.rs"),
            "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n".repeat(50),
        )
        .unwrap();
        let line = "the quick brown fox jumps over the lazy dog 0123456789\n";
        std::fs::write(ws.join("big.txt"), line.repeat((3 << 20) / line.len())).unwrap();
        std::fs::write(root.join("secret.txt"), format!("{SECRET}\n")).unwrap();
        std::fs::write(outside.join("passwd"), format!("root:x:0:0:{SECRET}\n")).unwrap();
        let link = |target: &Path, name: &str| std::os::unix::fs::symlink(target, ws.join(name));
        link(&outside, "out").unwrap();
        link(&outside.join("passwd"), "passwd").unwrap();
        link(Path::new(".."), "up").unwrap();
        link(Path::new("../secret.txt"), "secret_link").unwrap();
        link(Path::new("loop"), "loop").unwrap();
        link(Path::new("/etc"), "etc").unwrap();
        link(Path::new("/nonexistent/x"), "dangling").unwrap();
        // Writes and deletes may replace or remove a link itself (inside the
        // root, which is fine), so they get their own copies of the links.
        link(&outside, "w_out").unwrap();
        link(&outside.join("passwd"), "w_passwd").unwrap();
        link(Path::new(".."), "w_up").unwrap();
        link(Path::new("../secret.txt"), "w_secret_link").unwrap();
        link(Path::new("/nonexistent/x"), "w_dangling").unwrap();
        Fixture { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn config(&self) -> String {
        let all = r#"["list", "file", "read_file", "read_binary", "read_re", "write", "delete"]"#;
        format!(
            r#"listen = "127.0.0.1:0"
max_file_bytes = {MAX_FILE_BYTES}

[state]
max_total_bytes = 268435456

[limits]
stream_idle_timeout_seconds = {IDLE_SECONDS}

[[mount]]
prefix = "/"
tier = "state"

[[mount]]
prefix = "/memories"
tier = "store"
path = {store:?}

[[mount]]
prefix = "/workspace"
tier = "filesystem"
root = {ws:?}

[[principal]]
name = "agent"
token = "{TOKEN}"
grants = [{{ prefix = "/", ops = {all} }}]

[[principal]]
name = "reader"
token = "{READER_TOKEN}"
grants = [{{ prefix = "/workspace", ops = ["list", "file", "read_file"] }}]

[[principal]]
name = "attacker"
token = "{ATTACKER_TOKEN}"
grants = [{{ prefix = "/workspace", ops = ["list", "file", "read_file", "read_binary", "read_re"] }}]
"#,
            store = self.root().join("store").display().to_string(),
            ws = self.root().join("ws").display().to_string(),
        )
    }

    /// What must still hold outside the sandbox after the run.
    fn escapes_on_disk(&self) -> Vec<String> {
        let mut out = Vec::new();
        for must in ["secret.txt", "outside/passwd"] {
            if !self.root().join(must).exists() {
                out.push(format!(
                    "{must} outside the root was deleted through the server"
                ));
            }
        }
        for entry in [self.root(), &self.root().join("outside")] {
            for e in std::fs::read_dir(entry).unwrap().flatten() {
                if e.file_name().to_string_lossy().contains("pwned") {
                    out.push(format!(
                        "{} was written outside the root",
                        e.path().display()
                    ));
                }
            }
        }
        out
    }
}

/// A running `agentvfs serve`, killed on drop.
struct Server {
    child: Arc<Mutex<Child>>,
    pid: u32,
    url: String,
    /// The last lines the server wrote to stderr.
    logs: launch::Logs,
}

impl Server {
    fn start(fixture: &Fixture) -> Server {
        let config = fixture.root().join("agentvfs.toml");
        std::fs::write(&config, fixture.config()).unwrap();
        let data = fixture.root().join("data");
        let launched = launch::Launch {
            args: vec![
                "serve".into(),
                "--config".into(),
                config.display().to_string(),
            ],
            cwd: fixture.root(),
            log_filter: "agentvfs=warn",
            // Its journal and indexes stay in the fixture.
            env: vec![("XDG_DATA_HOME", data.as_os_str())],
            address_space: None,
        }
        .start();
        let pid = launched.child.id();
        let limit = DATA_LIMIT_MIB << 20;
        rustix::process::prlimit(
            rustix::process::Pid::from_raw(pid as i32),
            rustix::process::Resource::Data,
            rustix::process::Rlimit {
                current: Some(limit),
                maximum: Some(limit),
            },
        )
        .expect("limit the server's data segment");
        Server {
            url: format!("http://{}", launched.addr),
            pid,
            child: Arc::new(Mutex::new(launched.child)),
            logs: launched.logs,
        }
    }

    /// `Some(status)` once the process has exited.
    fn exited(&self) -> Option<std::process::ExitStatus> {
        self.child.lock().unwrap().try_wait().ok().flatten()
    }

    /// One field of `/proc/PID/status` in MiB (`VmRSS`, `VmHWM`).
    fn memory_mib(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let line = status.lines().find(|l| l.starts_with(field))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024)
    }

    async fn channel(&self) -> Channel {
        Channel::from_shared(self.url.clone())
            .unwrap()
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .expect("connect to the server")
    }

    /// Health/Check and a Stat, each answered within 5 s.
    async fn answers(&self) -> Result<(), String> {
        let limit = Duration::from_secs(5);
        let channel = tokio::time::timeout(limit, async {
            Channel::from_shared(self.url.clone())
                .unwrap()
                .connect()
                .await
        })
        .await
        .map_err(|_| "connect timed out".to_owned())?
        .map_err(|e| format!("connect: {e}"))?;
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
        let check = tokio::time::timeout(
            limit,
            health.check(tonic_health::pb::HealthCheckRequest::default()),
        )
        .await
        .map_err(|_| "Health/Check timed out".to_owned())?
        .map_err(|s| format!("Health/Check: {s}"))?;
        let serving = tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
        if check.into_inner().status != serving {
            return Err("Health/Check is not SERVING".into());
        }
        let mut fs = FilesystemClient::new(channel);
        tokio::time::timeout(
            limit,
            fs.stat(authed(
                pb::StatRequest {
                    path: "/workspace/a.txt".into(),
                },
                "final",
            )),
        )
        .await
        .map_err(|_| "Stat timed out".to_owned())?
        .map_err(|s| format!("Stat: {s}"))?;
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A request as the `agent` principal in `session`.
fn authed<T>(msg: T, session: &str) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    req.metadata_mut()
        .insert("x-agentvfs-session", session.parse().unwrap());
    req
}

/// The head of an MCP POST to `/mcp` with a `body_len`-byte body.
fn mcp_head(host: &str, token: Option<&str>, session: &str, tool: &str, body_len: usize) -> String {
    let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {host}\r\n{auth}x-agentvfs-session: {session}\r\n\
         content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: {tool}\r\n\
         content-length: {body_len}\r\n\r\n"
    )
}

/// Sends `raw` on a fresh connection to `addr` and reads the answer: its
/// text on 2xx, a refusal on 4xx, a fault (UNAVAILABLE) on 5xx or a broken
/// connection. With `give_up`, the client leaves that long after sending
/// instead (a stalled or abandoned request), which is never a fault.
async fn mcp_exchange(
    addr: String,
    raw: Vec<u8>,
    give_up: Option<Duration>,
) -> Result<String, Status> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .map_err(|e| Status::unavailable(format!("connect: {e}")))?;
    if let Err(e) = stream.write_all(&raw).await {
        // The server may close a connection whose request it refused early.
        return match give_up {
            Some(_) => Ok(String::new()),
            None => Err(Status::unavailable(format!("send: {e}"))),
        };
    }
    if let Some(wait) = give_up {
        tokio::time::sleep(wait).await;
        return Ok(String::new());
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 << 10];
    loop {
        let n = stream
            .read(&mut buf)
            .await
            .map_err(|e| Status::unavailable(format!("receive: {e}")))?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            });
            if length.is_some_and(|len| body.len() >= len) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&answer).into_owned();
    match text.get(9..12).and_then(|code| code.parse::<u16>().ok()) {
        Some(200..=299) => Ok(text),
        Some(400..=499) => Err(Status::invalid_argument(
            text.chars().take(160).collect::<String>(),
        )),
        _ => Err(Status::unavailable(format!(
            "MCP answered {:?}",
            text.chars().take(160).collect::<String>()
        ))),
    }
}

// ---------------------------------------------------------------------------
// Shared bookkeeping
// ---------------------------------------------------------------------------

#[derive(Default)]
struct KindStats {
    requests: u64,
    faults: u64,
    internal: u64,
    max_ms: u128,
}

/// What every worker and the memory monitor share.
struct Shared {
    start: Instant,
    stop: AtomicBool,
    stats: Mutex<BTreeMap<&'static str, KindStats>>,
    /// The kind each worker is running now.
    in_flight: Mutex<Vec<Option<&'static str>>>,
    /// The last requests started: (time, kind).
    recent: Mutex<VecDeque<(Instant, &'static str)>>,
    /// The last client-side timeouts: (time, kind). The server may still be
    /// working on them, so they belong in a failure's attribution.
    timeouts: Mutex<VecDeque<(Instant, &'static str)>>,
    /// The first fault or INTERNAL answer of each kind.
    first_faults: Mutex<BTreeMap<&'static str, String>>,
    /// Responses that showed bytes from outside the sandbox.
    escapes: Mutex<Vec<String>>,
    /// Memory crossings and the server's death, with their attribution.
    events: Mutex<Vec<String>>,
}

impl Shared {
    fn began(&self, worker: usize, kind: &'static str) {
        self.in_flight.lock().unwrap()[worker] = Some(kind);
        let mut recent = self.recent.lock().unwrap();
        if recent.len() == 256 {
            recent.pop_front();
        }
        recent.push_back((Instant::now(), kind));
    }

    /// The requests in flight and the kinds started in the last two seconds.
    fn attribution(&self) -> String {
        let flying: Vec<&str> = self
            .in_flight
            .lock()
            .unwrap()
            .iter()
            .flatten()
            .copied()
            .collect();
        let mut lately: BTreeMap<&str, u32> = BTreeMap::new();
        let since = Instant::now() - Duration::from_secs(2);
        for (t, kind) in self.recent.lock().unwrap().iter() {
            if *t >= since {
                *lately.entry(*kind).or_default() += 1;
            }
        }
        let mut timed_out: BTreeMap<&str, u32> = BTreeMap::new();
        let since = Instant::now() - 2 * DEADLINE;
        for (t, kind) in self.timeouts.lock().unwrap().iter() {
            if *t >= since {
                *timed_out.entry(*kind).or_default() += 1;
            }
        }
        format!(
            "in flight: {flying:?}; started in the last 2 s: {lately:?}; \
             timed out client-side (server may still run them) in the last {} s: {timed_out:?}",
            2 * DEADLINE.as_secs()
        )
    }

    fn event(&self, what: String) {
        let line = format!("t={:.1}s {what}", self.start.elapsed().as_secs_f64());
        eprintln!("stress: {line}");
        self.events.lock().unwrap().push(line);
    }

    fn escape(&self, kind: &str, what: &str) {
        self.escapes.lock().unwrap().push(format!("{kind}: {what}"));
    }
}

/// How a request ended.
enum Outcome<T> {
    Ok(T),
    /// The server answered with an error that is not a fault.
    Refused(Status),
    /// A transport failure, a client-side timeout or an INTERNAL answer: the
    /// request may or may not have taken effect.
    Fault,
}

fn is_fault(code: Code) -> bool {
    matches!(code, Code::Unavailable | Code::Unknown | Code::Cancelled)
}

// ---------------------------------------------------------------------------
// Workers
// ---------------------------------------------------------------------------

/// Acknowledged content of a path one worker owns; `None` once a request on
/// it ended in a fault (it may or may not have been applied).
type Owned = HashMap<(String, String), Option<Vec<u8>>>;

struct Worker {
    id: usize,
    session: String,
    rng: StdRng,
    shared: Arc<Shared>,
    fs: FilesystemClient<Channel>,
    tools: ToolsClient<Channel>,
    access: AccessClient<Channel>,
    /// `host:port` of the server, for MCP over plain HTTP/1.1.
    addr: String,
    kinds: Vec<(&'static str, u32)>,
    /// (session, path) → acknowledged content.
    owned: Owned,
    /// The last handle of this worker's CreateHandle chain.
    chain: Option<String>,
    chain_depth: u64,
}

impl Worker {
    async fn new(
        id: usize,
        server: &Server,
        shared: Arc<Shared>,
        seed: u64,
        skip: &[String],
    ) -> Worker {
        let channel = server.channel().await;
        let big = 64 << 20;
        Worker {
            id,
            session: format!("w{id}"),
            rng: StdRng::seed_from_u64(seed.wrapping_add(id as u64)),
            shared,
            fs: FilesystemClient::new(channel.clone()).max_decoding_message_size(big),
            tools: ToolsClient::new(channel.clone()).max_decoding_message_size(big),
            access: AccessClient::new(channel).max_decoding_message_size(big),
            addr: server.url.trim_start_matches("http://").to_owned(),
            kinds: KINDS
                .iter()
                .filter(|(k, _, _)| !skip.iter().any(|s| s == k))
                .map(|(k, _, w)| (*k, *w))
                .collect(),
            owned: HashMap::new(),
            chain: None,
            chain_depth: 0,
        }
    }

    fn req<T>(&self, msg: T) -> Request<T> {
        authed(msg, &self.session)
    }

    /// Runs one request under the deadline and records its outcome.
    async fn call<T>(
        &self,
        kind: &'static str,
        fut: impl Future<Output = Result<T, Status>>,
    ) -> Outcome<T> {
        self.shared.began(self.id, kind);
        let started = Instant::now();
        let result = tokio::time::timeout(DEADLINE, fut).await;
        self.shared.in_flight.lock().unwrap()[self.id] = None;
        let mut stats = self.shared.stats.lock().unwrap();
        let s = stats.entry(kind).or_default();
        s.requests += 1;
        s.max_ms = s.max_ms.max(started.elapsed().as_millis());
        match result {
            Ok(Ok(v)) => Outcome::Ok(v),
            Ok(Err(status)) if is_fault(status.code()) || status.code() == Code::Internal => {
                if status.code() == Code::Internal {
                    s.internal += 1;
                } else {
                    s.faults += 1;
                }
                let mut message = status.message().to_owned();
                message.truncate(160);
                self.shared
                    .first_faults
                    .lock()
                    .unwrap()
                    .entry(kind)
                    .or_insert_with(|| format!("{:?}: {message}", status.code()));
                Outcome::Fault
            }
            Ok(Err(status)) => Outcome::Refused(status),
            Err(_) => {
                s.faults += 1;
                let mut timeouts = self.shared.timeouts.lock().unwrap();
                if timeouts.len() == 256 {
                    timeouts.pop_front();
                }
                timeouts.push_back((Instant::now(), kind));
                Outcome::Fault
            }
        }
    }

    async fn run(mut self, until: Instant) -> Worker {
        let total: u32 = self.kinds.iter().map(|(_, w)| w).sum();
        while Instant::now() < until && !self.shared.stop.load(Ordering::Relaxed) {
            let mut pick = self.rng.random_range(0..total);
            let kind = self
                .kinds
                .iter()
                .find(|(_, w)| {
                    if pick < *w {
                        true
                    } else {
                        pick -= w;
                        false
                    }
                })
                .map(|(k, _)| *k)
                .expect("weights cover the range");
            self.one(kind).await;
        }
        self
    }

    /// A path this worker owns: one of a few files in each tier.
    fn own_path(&mut self) -> String {
        let tier = ["", "/memories", "/workspace"][self.rng.random_range(0..3)];
        format!(
            "{tier}/own/w{}/f{}.txt",
            self.id,
            self.rng.random_range(0..4)
        )
    }

    /// A scratch path of this worker (never checked for lost writes).
    fn scratch(&mut self, name: &str) -> String {
        let tier = ["", "/memories", "/workspace"][self.rng.random_range(0..3)];
        format!("{tier}/scratch/w{}/{name}", self.id)
    }

    fn content(&mut self) -> String {
        let filler = "lorem ipsum dolor é ".repeat(self.rng.random_range(0..400));
        format!(
            "owner w{} nonce {}\nversion 0\n{filler}\n",
            self.id,
            self.rng.random::<u32>()
        )
    }

    fn ack(&mut self, path: &str, outcome: &Outcome<()>, content: Option<Vec<u8>>) {
        let key = (self.session.clone(), path.to_owned());
        match outcome {
            Outcome::Ok(()) => {
                self.owned.insert(key, content);
            }
            Outcome::Fault => {
                self.owned.insert(key, None);
            }
            Outcome::Refused(_) => {}
        }
    }

    /// The acknowledged content of `path`, when known.
    fn known(&self, path: &str) -> Option<String> {
        self.owned
            .get(&(self.session.clone(), path.to_owned()))
            .cloned()
            .flatten()
            .and_then(|b| String::from_utf8(b).ok())
    }

    /// Checks a response for bytes from outside the sandbox.
    fn scan(&self, kind: &str, text: &str) {
        if text.contains(SECRET) {
            self.shared
                .escape(kind, &format!("a response showed {SECRET}: {:.200}", text));
        }
    }

    async fn one(&mut self, kind: &'static str) {
        match kind {
            "list_info" => {
                let path = ["/", "/workspace", "/memories", "/own", "/workspace/src"]
                    [self.rng.random_range(0..5)];
                let req = self.req(pb::ListInfoRequest { path: path.into() });
                let mut fs = self.fs.clone();
                self.call(kind, fs.list_info(req)).await;
            }
            "stat" => {
                let path = self.own_path();
                let req = self.req(pb::StatRequest { path });
                let mut fs = self.fs.clone();
                self.call(kind, fs.stat(req)).await;
            }
            "read" => {
                let path = if self.rng.random_bool(0.5) {
                    self.own_path()
                } else {
                    "/workspace/src/lib.rs".into()
                };
                let (offset, limit, numbered) = (
                    self.rng.random_range(0..5),
                    self.rng.random_range(0..50),
                    self.rng.random(),
                );
                let req = self.req(pb::ReadRequest {
                    path,
                    offset,
                    limit,
                    numbered,
                    version: None,
                });
                let mut fs = self.fs.clone();
                self.call(kind, fs.read(req)).await;
            }
            "read_bytes" => {
                let path = self.own_path();
                let mut fs = self.fs.clone();
                let req = self.req(pb::ReadBytesRequest {
                    path,
                    version: None,
                });
                self.call(kind, async move { read_all(&mut fs, req).await.map(drop) })
                    .await;
            }
            "write_own" => {
                let path = self.own_path();
                let content = self.content();
                let req = self.req(pb::WriteRequest {
                    path: path.clone(),
                    content: content.clone(),
                    ..Default::default()
                });
                let mut fs = self.fs.clone();
                let outcome = self
                    .call(kind, async move { fs.write(req).await.map(drop) })
                    .await;
                self.ack(&path, &outcome, Some(content.into_bytes()));
            }
            "write_bytes_own" => {
                let path = self.own_path();
                let content = self.content().into_bytes();
                let mut msgs = vec![header(&path)];
                for piece in content.chunks(self.rng.random_range(1..4096)) {
                    msgs.push(pb::WriteBytesRequest {
                        kind: Some(pb::write_bytes_request::Kind::Data(piece.to_vec())),
                    });
                }
                let req = self.req(tokio_stream::iter(msgs));
                let mut fs = self.fs.clone();
                let outcome = self
                    .call(kind, async move { fs.write_bytes(req).await.map(drop) })
                    .await;
                self.ack(&path, &outcome, Some(content));
            }
            "edit_own" | "multi_edit_own" => {
                let path = self.own_path();
                let Some(old) = self.known(&path) else {
                    return Box::pin(self.one("write_own")).await;
                };
                let version: u64 = old
                    .lines()
                    .nth(1)
                    .and_then(|l| l.strip_prefix("version "))
                    .and_then(|v| v.parse().ok())
                    .expect("owned content has a version line");
                let (from, to) = (
                    format!("\nversion {version}\n"),
                    format!("\nversion {}\n", version + 1),
                );
                let mut expected = old.replacen(&from, &to, 1);
                let mut fs = self.fs.clone();
                let outcome = if kind == "edit_own" {
                    let req = self.req(pb::EditRequest {
                        path: path.clone(),
                        old_string: from,
                        new_string: to,
                        ..Default::default()
                    });
                    self.call(kind, async move { fs.edit(req).await.map(drop) })
                        .await
                } else {
                    let owner = format!("owner w{} nonce", self.id);
                    let renamed = format!("owner w{} Nonce", self.id);
                    let (a, b) = if old.contains(&owner) {
                        (owner, renamed)
                    } else {
                        (renamed, owner)
                    };
                    expected = expected.replacen(&a, &b, 1);
                    let edit = |old_string: String, new_string: String| pb::EditOperation {
                        old_string,
                        new_string,
                        replace_all: false,
                    };
                    let req = self.req(pb::MultiEditRequest {
                        path: path.clone(),
                        edits: vec![edit(from, to), edit(a, b)],
                        if_version: None,
                    });
                    self.call(kind, async move { fs.multi_edit(req).await.map(drop) })
                        .await
                };
                if let Outcome::Refused(status) = &outcome {
                    // The worker is the only writer: its own edit must apply.
                    self.shared
                        .event(format!("{kind} on {path} refused: {status:?}"));
                    self.owned.insert((self.session.clone(), path), None);
                    return;
                }
                self.ack(&path, &outcome, Some(expected.into_bytes()));
            }
            "write_delete_scratch" => {
                let path = self.scratch("tmp.txt");
                let mut fs = self.fs.clone();
                let write = self.req(pb::WriteRequest {
                    path: path.clone(),
                    content: "scratch\n".into(),
                    ..Default::default()
                });
                let recursive = self.rng.random();
                let delete = self.req(pb::DeleteRequest {
                    path,
                    recursive,
                    ..Default::default()
                });
                let mut fs2 = fs.clone();
                self.call(kind, fs.write(write)).await;
                self.call(kind, fs2.delete(delete)).await;
            }
            "read_re" => {
                let overlap = Some(self.rng.random_range(0..3));
                let req = self.req(pb::ReadReRequest {
                    path: "/workspace/src/lib.rs".into(),
                    pattern: r"fn \w+".into(),
                    overlap,
                });
                let mut fs = self.fs.clone();
                self.call(kind, fs.read_re(req)).await;
            }
            "grep" => {
                let root = ["/", "/workspace", "/memories", "/own"][self.rng.random_range(0..4)];
                let req = self.req(pb::GrepRequest {
                    pattern: "version|fn".into(),
                    path: root.into(),
                    max_results: 200,
                    ..Default::default()
                });
                let mut fs = self.fs.clone();
                let shared = self.shared.clone();
                self.call(kind, async move {
                    let mut s = fs.grep(req).await?.into_inner();
                    while let Some(m) = s.message().await? {
                        if let Some(pb::grep_response::Result::Batch(b)) = m.result {
                            for m in b.matches {
                                if m.line.contains(SECRET) {
                                    shared.escape(kind, &m.path);
                                }
                            }
                        }
                    }
                    Ok(())
                })
                .await;
            }
            "glob" => {
                let pattern = ["**/*.txt", "*", "**/*.rs", "own/**"][self.rng.random_range(0..4)];
                let req = self.req(pb::GlobRequest {
                    pattern: pattern.into(),
                    path: "/".into(),
                    max_results: 500,
                    ..Default::default()
                });
                let mut fs = self.fs.clone();
                self.call(kind, async move {
                    let mut s = fs.glob(req).await?.into_inner();
                    while s.message().await?.is_some() {}
                    Ok(())
                })
                .await;
            }
            "list_tools" => {
                let req = self.req(pb::ListToolsRequest {});
                let mut tools = self.tools.clone();
                self.call(kind, tools.list_tools(req)).await;
            }
            "invoke" => {
                let (name, args) = [
                    ("LS", r#"{"path": "/workspace"}"#),
                    ("Read", r#"{"path": "/workspace/a.txt"}"#),
                    ("Glob", r#"{"pattern": "**/*.rs"}"#),
                    ("Grep", r#"{"pattern": "fn", "path": "/workspace"}"#),
                ][self.rng.random_range(0..4)];
                let tool_call_id = format!("call-{}", self.rng.random::<u16>());
                let req = self.req(pb::InvokeRequest {
                    name: name.into(),
                    arguments_json: args.into(),
                    tool_call_id,
                });
                let mut tools = self.tools.clone();
                self.call(kind, tools.invoke(req)).await;
            }
            "typed_tools" => self.typed_tools(kind).await,
            "mcp_call" => self.mcp_call(kind).await,
            "handle_roundtrip" => {
                let req = self.req(pb::CreateHandleRequest {
                    grants: vec![pb::Grant {
                        prefix: "/workspace".into(),
                        ops: vec!["read_file".into(), "list".into()],
                    }],
                    ttl_seconds: 60,
                    branch: String::new(),
                });
                let mut access = self.access.clone();
                let Outcome::Ok(handle) = self.call(kind, access.create_handle(req)).await else {
                    return;
                };
                let token = handle.into_inner().token;
                let mut read = Request::new(pb::ReadRequest {
                    path: "/workspace/a.txt".into(),
                    ..Default::default()
                });
                read.metadata_mut()
                    .insert("authorization", format!("Bearer {token}").parse().unwrap());
                let mut fs = self.fs.clone();
                self.call(kind, fs.read(read)).await;
                let revoke = self.req(pb::RevokeHandleRequest { token });
                self.call(kind, access.revoke_handle(revoke)).await;
            }
            "describe_grants" => {
                let req = self.req(pb::DescribeGrantsRequest {});
                let mut access = self.access.clone();
                self.call(kind, access.describe_grants(req)).await;
            }
            _ => self.hostile(kind).await,
        }
    }

    /// One call of one typed tool RPC, on the worker's scratch area.
    async fn typed_tools(&mut self, kind: &'static str) {
        let mut t = self.tools.clone();
        let id = format!("typed-{}", self.id);
        let scratch = self.scratch("tool.txt");
        match self.rng.random_range(0..7) {
            0 => {
                let req = self.req(pb::LsToolRequest {
                    path: Some("/workspace".into()),
                    tool_call_id: id,
                    ..Default::default()
                });
                self.call(kind, t.ls_tool(req)).await;
            }
            1 => {
                let req = self.req(pb::GlobToolRequest {
                    pattern: "**/*.txt".into(),
                    tool_call_id: id,
                    ..Default::default()
                });
                self.call(kind, t.glob_tool(req)).await;
            }
            2 => {
                let req = self.req(pb::GrepToolRequest {
                    pattern: "fox".into(),
                    path: Some("/workspace".into()),
                    output_mode: Some("content".into()),
                    tool_call_id: id,
                    ..Default::default()
                });
                self.call(kind, t.grep_tool(req)).await;
            }
            3 => {
                let req = self.req(pb::ReadToolRequest {
                    path: "/workspace/big.txt".into(),
                    limit: Some(3000),
                    tool_call_id: id,
                    ..Default::default()
                });
                self.call(kind, t.read_tool(req)).await;
            }
            4 => {
                let req = self.req(pb::WriteToolRequest {
                    path: scratch,
                    content: "one\ntwo\n".into(),
                    tool_call_id: id,
                    ..Default::default()
                });
                self.call(kind, t.write_tool(req)).await;
            }
            5 => {
                let req = self.req(pb::EditToolRequest {
                    path: scratch,
                    old_string: "one".into(),
                    new_string: "uno".into(),
                    tool_call_id: id,
                    ..Default::default()
                });
                self.call(kind, t.edit_tool(req)).await;
            }
            _ => {
                let req = self.req(pb::MultiEditToolRequest {
                    path: scratch,
                    edits: vec![pb::ToolEdit {
                        old_string: "two".into(),
                        new_string: "dos".into(),
                        replace_all: Some(true),
                    }],
                    tool_call_id: id,
                    ..Default::default()
                });
                self.call(kind, t.multi_edit_tool(req)).await;
            }
        }
    }

    /// A path an attacker would send.
    fn hostile_path(&mut self) -> String {
        match self.rng.random_range(0..10) {
            0 => format!("/{}", "a".repeat(16 << 10)),
            1 => format!("/{}", "d/".repeat(8 << 10)),
            2 => "/workspace/../../etc/passwd".into(),
            3 => "/../".into(),
            4 => "/workspace/a.txt\0.png".into(),
            5 => "/workspace/\u{1}\u{7f}\n\r".into(),
            6 => "//workspace//a.txt".into(),
            7 => "workspace/a.txt".into(),
            8 => "/workspace/a.txt/".repeat(300),
            _ => "/workspace/\u{202e}txt.exe".into(),
        }
    }

    /// One MCP `tools/call` (the current protocol's stateless request) over
    /// plain HTTP/1.1 at `/mcp`, some of them through links out of the root.
    async fn mcp_call(&mut self, kind: &'static str) {
        let scratch = format!("/workspace/scratch/w{}/mcp.txt", self.id);
        let (tool, args) = [
            ("Read", r#"{"path": "/workspace/a.txt"}"#.to_owned()),
            ("Read", r#"{"path": "/workspace/passwd"}"#.to_owned()),
            ("Read", r#"{"path": "/workspace/secret_link"}"#.to_owned()),
            ("LS", r#"{"path": "/workspace/out"}"#.to_owned()),
            // The pattern must not spell the secret: arguments are echoed.
            (
                "Grep",
                r#"{"pattern": "STRESS-S[E]CRET", "path": "/workspace"}"#.to_owned(),
            ),
            (
                "Glob",
                r#"{"pattern": "**/*", "path": "/workspace/up"}"#.to_owned(),
            ),
            (
                "Write",
                format!(r#"{{"path": "{scratch}", "content": "mcp"}}"#),
            ),
        ][self.rng.random_range(0..7)]
        .clone();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{args},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        );
        let head = mcp_head("127.0.0.1", Some(TOKEN), &self.session, tool, body.len());
        let raw = [head.into_bytes(), body.into_bytes()].concat();
        let exchange = mcp_exchange(self.addr.clone(), raw, None);
        if let Outcome::Ok(answer) = self.call(kind, exchange).await {
            self.scan(kind, &answer);
        }
    }

    /// MCP over HTTP as a hostile client sends it: bodies that stall or
    /// never end, garbage, a foreign `Host`, bad tokens, half a request.
    async fn mcp_hostile(&mut self, kind: &'static str) {
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let (raw, give_up) = match self.rng.random_range(0..6) {
            // A body that stalls: the client leaves before the server's timeout.
            0 => {
                let head = mcp_head("127.0.0.1", Some(TOKEN), &self.session, "LS", 4096);
                let wait = Duration::from_millis(self.rng.random_range(0..300));
                ([head.as_bytes(), b"{\"jsonrpc\""].concat(), Some(wait))
            }
            // A body declared far over the limit, cut off after 256 KiB.
            1 => {
                let head = mcp_head("127.0.0.1", Some(TOKEN), &self.session, "LS", 1 << 30);
                (
                    [head.into_bytes(), vec![b'['; 256 << 10]].concat(),
                    Some(Duration::ZERO),
                )
            }
            2 => {
                let garbage: Vec<u8> = (0..self.rng.random_range(1..2048))
                    .map(|_| self.rng.random())
                    .collect();
                let head = mcp_head("127.0.0.1", Some(TOKEN), &self.session, "LS", garbage.len());
                ([head.into_bytes(), garbage].concat(), None)
            }
            3 => {
                let head = mcp_head("evil.example", Some(TOKEN), &self.session, "LS", call.len());
                ([head.as_bytes(), call.as_bytes()].concat(), None)
            }
            4 => {
                let token = ["", "x", READER_TOKEN][self.rng.random_range(0..3)];
                let token = (!token.is_empty()).then(|| format!("{token}x"));
                let head = mcp_head(
                    "127.0.0.1",
                    token.as_deref(),
                    &self.session,
                    "LS",
                    call.len(),
                );
                ([head.as_bytes(), call.as_bytes()].concat(), None)
            }
            // Half a request line, then gone.
            _ => (
                b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-le".to_vec(),
                Some(Duration::ZERO),
            ),
        };
        let exchange = mcp_exchange(self.addr.clone(), raw, give_up);
        if let Outcome::Ok(answer) = self.call(kind, exchange).await {
            self.scan(kind, &answer);
        }
    }

    async fn hostile(&mut self, kind: &'static str) {
        let mut fs = self.fs.clone();
        match kind {
            "mcp_hostile" => self.mcp_hostile(kind).await,
            "huge_path" | "dotdot_nul_control_path" => {
                let path = if kind == "huge_path" {
                    ["/", "/workspace/", "/memories/"][self.rng.random_range(0..3)].to_owned()
                        + &"x/".repeat(self.rng.random_range(2000..8200))
                } else {
                    self.hostile_path()
                };
                match self.rng.random_range(0..6) {
                    0 => {
                        let req = self.req(pb::StatRequest { path });
                        self.call(kind, fs.stat(req)).await;
                    }
                    1 => {
                        let req = self.req(pb::ReadRequest {
                            path,
                            ..Default::default()
                        });
                        self.call(kind, fs.read(req)).await;
                    }
                    2 => {
                        let req = self.req(pb::WriteRequest {
                            path,
                            content: "x".into(),
                            ..Default::default()
                        });
                        self.call(kind, fs.write(req)).await;
                    }
                    3 => {
                        let req = self.req(pb::DeleteRequest {
                            path,
                            recursive: true,
                            ..Default::default()
                        });
                        self.call(kind, fs.delete(req)).await;
                    }
                    4 => {
                        let req = self.req(pb::ListInfoRequest { path });
                        self.call(kind, fs.list_info(req)).await;
                    }
                    _ => {
                        let req = self.req(pb::GlobRequest {
                            pattern: "**".into(),
                            path,
                            ..Default::default()
                        });
                        self.call(kind, async move {
                            let mut s = fs.glob(req).await?.into_inner();
                            while s.message().await?.is_some() {}
                            Ok(())
                        })
                        .await;
                    }
                }
            }
            "link_escape_read" => {
                let path = [
                    "/workspace/out/passwd",
                    "/workspace/passwd",
                    "/workspace/up/secret.txt",
                    "/workspace/secret_link",
                    "/workspace/loop",
                    "/workspace/etc/hostname",
                    "/workspace/dangling",
                    "/workspace/up",
                    "/workspace/out",
                ][self.rng.random_range(0..9)];
                // Every one of these links leads out of the root (or nowhere):
                // reading through one must fail.
                let followed = |what: &str| format!("{what} through the link {path} succeeded");
                match self.rng.random_range(0..6) {
                    0 => {
                        let req = self.req(pb::ReadRequest {
                            path: path.into(),
                            ..Default::default()
                        });
                        if let Outcome::Ok(r) = self.call(kind, fs.read(req)).await {
                            self.scan(kind, &r.into_inner().content);
                            self.shared.escape(kind, &followed("Read"));
                        }
                    }
                    1 => {
                        let req = self.req(pb::ReadBytesRequest {
                            path: path.into(),
                            version: None,
                        });
                        if let Outcome::Ok(data) = self.call(kind, read_all(&mut fs, req)).await {
                            self.scan(kind, &String::from_utf8_lossy(&data));
                            let shown = format!(
                                "ReadBytes ({} bytes: {:?})",
                                data.len(),
                                String::from_utf8_lossy(&data[..data.len().min(40)])
                            );
                            self.shared.escape(kind, &followed(&shown));
                        }
                    }
                    2 => {
                        let req = self.req(pb::ReadReRequest {
                            path: path.into(),
                            pattern: ".+".into(),
                            overlap: None,
                        });
                        if let Outcome::Ok(r) = self.call(kind, fs.read_re(req)).await {
                            self.scan(kind, &r.into_inner().matches.concat());
                            self.shared.escape(kind, &followed("ReadRe"));
                        }
                    }
                    3 => {
                        let req = self.req(pb::ListInfoRequest { path: path.into() });
                        if let Outcome::Ok(r) = self.call(kind, fs.list_info(req)).await {
                            let names: Vec<String> =
                                r.into_inner().entries.into_iter().map(|e| e.path).collect();
                            // A link may be listed as itself, never its target's entries.
                            if names.iter().any(|n| n != path) {
                                self.shared
                                    .escape(kind, &format!("{}: {names:?}", followed("ListInfo")));
                            }
                        }
                    }
                    4 => {
                        let req = self.req(pb::GrepRequest {
                            pattern: SECRET.into(),
                            path: "/workspace".into(),
                            include_hidden: true,
                            include_ignored: true,
                            ..Default::default()
                        });
                        let shared = self.shared.clone();
                        self.call(kind, async move {
                            let mut s = fs.grep(req).await?.into_inner();
                            while let Some(m) = s.message().await? {
                                if let Some(pb::grep_response::Result::Batch(b)) = m.result
                                    && let Some(m) = b.matches.first()
                                {
                                    shared.escape(
                                        kind,
                                        &format!("Grep found the secret in {}", m.path),
                                    );
                                }
                            }
                            Ok(())
                        })
                        .await;
                    }
                    _ => {
                        let req = self.req(pb::ReadToolRequest {
                            path: path.into(),
                            tool_call_id: "escape".into(),
                            ..Default::default()
                        });
                        let mut t = self.tools.clone();
                        if let Outcome::Ok(r) = self.call(kind, t.read_tool(req)).await {
                            self.scan(kind, &r.into_inner().envelope_json);
                        }
                    }
                }
            }
            "link_escape_write" => {
                let path = [
                    "/workspace/w_up/pwned.txt",
                    "/workspace/w_out/pwned.txt",
                    "/workspace/w_passwd",
                    "/workspace/w_secret_link",
                    "/workspace/w_up/secret.txt",
                    "/workspace/w_dangling",
                ][self.rng.random_range(0..6)];
                match self.rng.random_range(0..4) {
                    0 => {
                        let req = self.req(pb::WriteRequest {
                            path: path.into(),
                            content: "pwned\n".into(),
                            ..Default::default()
                        });
                        self.call(kind, fs.write(req)).await;
                    }
                    1 => {
                        let req = self.req(pb::DeleteRequest {
                            path: path.into(),
                            recursive: true,
                            ..Default::default()
                        });
                        self.call(kind, fs.delete(req)).await;
                    }
                    2 => {
                        let req = self.req(pb::EditRequest {
                            path: path.into(),
                            old_string: SECRET.into(),
                            new_string: "pwned".into(),
                            ..Default::default()
                        });
                        self.call(kind, fs.edit(req)).await;
                    }
                    _ => {
                        let req = self.req(tokio_stream::iter(vec![header(path)]));
                        self.call(kind, fs.write_bytes(req)).await;
                    }
                }
            }
            "huge_regex" => {
                let pattern = [
                    r"\p{L}{5000}",
                    "(a*)*b",
                    r"(?:\w+\s*){1000}{1000}",
                    ".{65535}",
                    r"[\s\S]*x[\s\S]*y[\s\S]*z",
                ][self.rng.random_range(0..5)];
                match self.rng.random_range(0..3) {
                    0 => {
                        let req = self.req(pb::GrepRequest {
                            pattern: pattern.into(),
                            path: "/".into(),
                            ..Default::default()
                        });
                        self.call(kind, async move {
                            let mut s = fs.grep(req).await?.into_inner();
                            while s.message().await?.is_some() {}
                            Ok(())
                        })
                        .await;
                    }
                    1 => {
                        let req = self.req(pb::ReadReRequest {
                            path: "/workspace/big.txt".into(),
                            pattern: pattern.into(),
                            overlap: Some(u64::MAX),
                        });
                        self.call(kind, fs.read_re(req)).await;
                    }
                    _ => {
                        let req = self.req(pb::GrepToolRequest {
                            pattern: pattern.into(),
                            path: Some("/workspace".into()),
                            output_mode: Some("content".into()),
                            tool_call_id: "regex".into(),
                            ..Default::default()
                        });
                        let mut t = self.tools.clone();
                        self.call(kind, t.grep_tool(req)).await;
                    }
                }
            }
            "edit_replace_all_bomb" | "multi_edit_bomb" | "tool_edit_bomb" => {
                // 1 MiB of `a`, every `a` replaced by 8 KiB: an 8 GiB result
                // unless the size limit is checked before it is built.
                let path = self.scratch("bomb.txt");
                let write = self.req(pb::WriteRequest {
                    path: path.clone(),
                    content: "a".repeat(1 << 20),
                    ..Default::default()
                });
                let mut fs2 = fs.clone();
                if !matches!(self.call(kind, fs2.write(write)).await, Outcome::Ok(_)) {
                    return;
                }
                let new = "b".repeat(8 << 10);
                match kind {
                    "edit_replace_all_bomb" => {
                        let req = self.req(pb::EditRequest {
                            path,
                            old_string: "a".into(),
                            new_string: new,
                            replace_all: true,
                            ..Default::default()
                        });
                        self.call(kind, fs.edit(req)).await;
                    }
                    "multi_edit_bomb" => {
                        let req = self.req(pb::MultiEditRequest {
                            path,
                            edits: vec![pb::EditOperation {
                                old_string: "a".into(),
                                new_string: new,
                                replace_all: true,
                            }],
                            if_version: None,
                        });
                        self.call(kind, fs.multi_edit(req)).await;
                    }
                    _ => {
                        let req = self.req(pb::EditToolRequest {
                            path,
                            old_string: "a".into(),
                            new_string: new,
                            replace_all: Some(true),
                            tool_call_id: "bomb".into(),
                            ..Default::default()
                        });
                        let mut t = self.tools.clone();
                        self.call(kind, t.edit_tool(req)).await;
                    }
                }
            }
            "grep_abandoned" => {
                let req = self.req(pb::GrepRequest {
                    pattern: "o".into(),
                    path: "/".into(),
                    include_hidden: true,
                    include_ignored: true,
                    before_context: 5,
                    after_context: 5,
                    ..Default::default()
                });
                let read_one = self.rng.random_bool(0.5);
                self.call(kind, async move {
                    let mut s = fs.grep(req).await?.into_inner();
                    if read_one {
                        s.message().await?;
                    }
                    Ok(()) // dropped unread
                })
                .await;
            }
            "read_bytes_abandoned" => {
                let req = self.req(pb::ReadBytesRequest {
                    path: "/workspace/big.txt".into(),
                    version: None,
                });
                let read_one = self.rng.random_bool(0.5);
                self.call(kind, async move {
                    let mut s = fs.read_bytes(req).await?.into_inner();
                    if read_one {
                        s.message().await?;
                    }
                    Ok(())
                })
                .await;
            }
            "write_bytes_stall" | "write_bytes_drop" => {
                // A header, then nothing: held open for a while, then the
                // call is dropped (the stream is reset, never finished).
                let path = self.scratch("stalled.bin");
                let (tx, rx) = tokio::sync::mpsc::channel(4);
                tx.send(header(&path)).await.unwrap();
                let hold = if kind == "write_bytes_stall" {
                    Duration::from_millis(self.rng.random_range(1000..5000))
                } else {
                    Duration::from_millis(self.rng.random_range(0..50))
                };
                let req = self.req(ReceiverStream::new(rx));
                self.call(kind, async move {
                    match tokio::time::timeout(hold, fs.write_bytes(req)).await {
                        Ok(answer) => answer.map(drop),
                        Err(_) => Ok(()), // dropped on purpose
                    }
                })
                .await;
                drop(tx);
            }
            "oversized_message" => match self.rng.random_range(0..3) {
                0 => {
                    // Over the largest message the server decodes.
                    let path = self.scratch("huge.txt");
                    let req = self.req(pb::WriteRequest {
                        path,
                        content: "x".repeat(10 << 20),
                        ..Default::default()
                    });
                    self.call(kind, fs.write(req)).await;
                }
                1 => {
                    // Over max_file_bytes, within one message.
                    let path = self.scratch("huge.txt");
                    let req = self.req(pb::WriteRequest {
                        path,
                        content: "x".repeat(MAX_FILE_BYTES + 1),
                        ..Default::default()
                    });
                    self.call(kind, fs.write(req)).await;
                }
                _ => {
                    // Over max_file_bytes in 1 MiB pieces.
                    let mut msgs = vec![header(&self.scratch("huge.bin"))];
                    for _ in 0..5 {
                        msgs.push(pb::WriteBytesRequest {
                            kind: Some(pb::write_bytes_request::Kind::Data(vec![b'x'; 1 << 20])),
                        });
                    }
                    let req = self.req(tokio_stream::iter(msgs));
                    self.call(kind, fs.write_bytes(req)).await;
                }
            },
            "deep_tree" => {
                let tier = ["", "/memories", "/workspace"][self.rng.random_range(0..3)];
                let dir = format!("{tier}/deep/w{}", self.id);
                let depth = self.rng.random_range(100..2000);
                let path = format!("{dir}/{}f.txt", "d/".repeat(depth));
                let write = self.req(pb::WriteRequest {
                    path,
                    content: "deep\n".into(),
                    ..Default::default()
                });
                let mut fs2 = fs.clone();
                self.call(kind, fs2.write(write)).await;
                let glob = self.req(pb::GlobRequest {
                    pattern: "**/*.txt".into(),
                    path: format!("{tier}/deep"),
                    ..Default::default()
                });
                let mut fs3 = fs.clone();
                self.call(kind, async move {
                    let mut s = fs3.glob(glob).await?.into_inner();
                    while s.message().await?.is_some() {}
                    Ok(())
                })
                .await;
                if self.rng.random_bool(0.5) {
                    let delete = self.req(pb::DeleteRequest {
                        path: dir,
                        recursive: true,
                        ..Default::default()
                    });
                    self.call(kind, fs.delete(delete)).await;
                }
            }
            "bogus_token" => {
                let mut req = Request::new(pb::StatRequest {
                    path: "/workspace/a.txt".into(),
                });
                let value = match self.rng.random_range(0..5) {
                    0 => "Bearer nope".to_owned(),
                    1 => format!("Bearer {}", "t".repeat(16 << 10)),
                    2 => TOKEN.to_owned(),
                    3 => "Bearer ".to_owned(),
                    _ => format!("Bearer {READER_TOKEN}x"),
                };
                req.metadata_mut()
                    .insert("authorization", value.parse().unwrap());
                if self.rng.random_bool(0.3) {
                    req.metadata_mut()
                        .insert("x-agentvfs-session", "../../etc".parse().unwrap());
                }
                if let Outcome::Ok(_) = self.call(kind, fs.stat(req)).await {
                    self.shared.escape(kind, "a bogus token was accepted");
                }
            }
            "chained_handle" => {
                // Each handle mints the next one: the chain only grows.
                let mut req = Request::new(pb::CreateHandleRequest {
                    grants: vec![pb::Grant {
                        prefix: "/".into(),
                        ops: vec!["read_file".into(), "write".into(), "list".into()],
                    }],
                    ttl_seconds: 30 * 24 * 3600,
                    branch: String::new(),
                });
                let token = self.chain.clone().unwrap_or_else(|| TOKEN.to_owned());
                req.metadata_mut()
                    .insert("authorization", format!("Bearer {token}").parse().unwrap());
                let mut access = self.access.clone();
                match self.call(kind, access.create_handle(req)).await {
                    Outcome::Ok(r) => {
                        self.chain = Some(r.into_inner().token);
                        self.chain_depth += 1;
                    }
                    _ => self.chain = None,
                }
            }
            "handle_many_grants" => {
                let grants = (0..20_000)
                    .map(|i| pb::Grant {
                        prefix: format!("/g/{i}"),
                        ops: vec!["read_file".into(); 8],
                    })
                    .collect();
                let req = self.req(pb::CreateHandleRequest {
                    grants,
                    ttl_seconds: u64::MAX,
                    branch: String::new(),
                });
                let mut access = self.access.clone();
                self.call(kind, access.create_handle(req)).await;
                let req = self.req(pb::CreateHandleRequest {
                    grants: (0..20_000)
                        .map(|i| pb::Grant {
                            prefix: format!("/g/{i}"),
                            ops: vec!["read_file".into()],
                        })
                        .collect(),
                    ttl_seconds: 60,
                    branch: String::new(),
                });
                self.call(kind, access.create_handle(req)).await;
                let req = self.req(pb::RevokeHandleRequest {
                    token: "avfs_bogus".into(),
                });
                self.call(kind, access.revoke_handle(req)).await;
            }
            "hostile_invoke" => {
                let (name, args) = match self.rng.random_range(0..8) {
                    0 => ("Read".to_owned(), "{".repeat(100_000)),
                    1 => ("Read".to_owned(), format!("[{}]", "[".repeat(50_000))),
                    2 => ("Nope".to_owned(), "{}".to_owned()),
                    3 => (
                        "Read".to_owned(),
                        r#"{"path": "../../../../etc/passwd"}"#.to_owned(),
                    ),
                    4 => (
                        "LS".to_owned(),
                        r#"{"path": "/workspace/up", "limit": -1, "offset": 9223372036854775807}"#
                            .to_owned(),
                    ),
                    5 => (
                        "Grep".to_owned(),
                        r#"{"pattern": "(", "context": 9223372036854775807}"#.to_owned(),
                    ),
                    6 => ("x".repeat(1 << 20), "null".to_owned()),
                    _ => (
                        "Write".to_owned(),
                        format!(
                            r#"{{"path": "/scratch/w{}/t.txt", "content": "{}"}}"#,
                            self.id,
                            "\\u0000".repeat(1000)
                        ),
                    ),
                };
                let tool_call_id = match self.rng.random_range(0..3) {
                    0 => "../../../etc/passwd".to_owned(),
                    1 => "x".repeat(16 << 10),
                    _ => "\0\n/..".to_owned(),
                };
                let req = self.req(pb::InvokeRequest {
                    name,
                    arguments_json: args,
                    tool_call_id,
                });
                let mut t = self.tools.clone();
                if let Outcome::Ok(r) = self.call(kind, t.invoke(req)).await {
                    self.scan(kind, &r.into_inner().envelope_json);
                }
            }
            "hostile_glob" => {
                let pattern = match self.rng.random_range(0..5) {
                    0 => format!("{}a{}", "{".repeat(2000), "}".repeat(2000)),
                    1 => "**/".repeat(500) + "*",
                    2 => "[".into(),
                    3 => "*".repeat(16 << 10),
                    _ => format!(
                        "{{{}}}",
                        (0..5000)
                            .map(|i| i.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                };
                let req = self.req(pb::GlobRequest {
                    pattern,
                    path: "/".into(),
                    include_hidden: true,
                    include_ignored: true,
                    ..Default::default()
                });
                self.call(kind, async move {
                    let mut s = fs.glob(req).await?.into_inner();
                    while s.message().await?.is_some() {}
                    Ok(())
                })
                .await;
            }
            "hostile_search_args" => match self.rng.random_range(0..4) {
                0 => {
                    let req = self.req(pb::GrepRequest {
                        pattern: "o".into(),
                        path: "/workspace".into(),
                        before_context: u32::MAX,
                        after_context: u32::MAX,
                        max_results: u64::MAX,
                        max_visited: u64::MAX,
                        max_duration_ms: u64::MAX,
                        max_count_per_file: u64::MAX,
                        ..Default::default()
                    });
                    self.call(kind, async move {
                        let mut s = fs.grep(req).await?.into_inner();
                        while s.message().await?.is_some() {}
                        Ok(())
                    })
                    .await;
                }
                1 => {
                    let req = self.req(pb::ReadRequest {
                        path: "/workspace/big.txt".into(),
                        offset: u64::MAX,
                        limit: u64::MAX,
                        numbered: true,
                        version: None,
                    });
                    self.call(kind, fs.read(req)).await;
                }
                2 => {
                    let req = self.req(pb::ReadRequest {
                        path: "/workspace/big.txt".into(),
                        offset: 0,
                        limit: 0,
                        numbered: true,
                        version: None,
                    });
                    self.call(kind, fs.read(req)).await;
                }
                _ => {
                    let req = self.req(pb::LsToolRequest {
                        path: Some("/".into()),
                        offset: Some(i64::MIN),
                        limit: Some(i64::MAX),
                        ignore: vec!["**".repeat(1000); 100],
                        tool_call_id: "ls".into(),
                        ..Default::default()
                    });
                    let mut t = self.tools.clone();
                    self.call(kind, t.ls_tool(req)).await;
                }
            },
            other => unreachable!("unknown kind {other}"),
        }
    }
}

fn header(path: &str) -> pb::WriteBytesRequest {
    pb::WriteBytesRequest {
        kind: Some(pb::write_bytes_request::Kind::Header(
            pb::WriteBytesHeader {
                path: path.into(),
                ..Default::default()
            },
        )),
    }
}

/// A whole ReadBytes stream.
async fn read_all(
    fs: &mut FilesystemClient<Channel>,
    req: Request<pb::ReadBytesRequest>,
) -> Result<Vec<u8>, Status> {
    let mut s = fs.read_bytes(req).await?.into_inner();
    let mut data = Vec::new();
    while let Some(m) = s.message().await? {
        data.extend(m.data);
    }
    Ok(data)
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

/// Samples the server's memory every [`SAMPLE_EVERY`] and watches for its
/// death until `stop`; returns the peak VmRSS in MiB.
async fn monitor(server: Arc<Server>, shared: Arc<Shared>, done: Arc<AtomicBool>) -> u64 {
    let mut peak = 0;
    let mut over = false;
    while !done.load(Ordering::Relaxed) {
        if let Some(status) = server.exited() {
            shared.event(format!(
                "the server exited ({status}); {}",
                shared.attribution()
            ));
            shared.stop.store(true, Ordering::Relaxed);
            break;
        }
        if let Some(rss) = server.memory_mib("VmRSS:") {
            peak = peak.max(rss);
            if rss > RSS_BOUND_MIB && !over {
                over = true;
                shared.event(format!(
                    "VmRSS {rss} MiB crossed the {RSS_BOUND_MIB} MiB bound; {}",
                    shared.attribution()
                ));
            }
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    peak
}

/// Reads back every acknowledged write; returns (checked, lost, examples).
async fn verify(server: &Server, owned: &Owned, durable_only: bool) -> (u64, u64, Vec<String>) {
    let mut fs = FilesystemClient::new(server.channel().await).max_decoding_message_size(64 << 20);
    let (mut checked, mut lost, mut examples) = (0, 0, Vec::new());
    for ((session, path), expected) in owned {
        let Some(expected) = expected else { continue };
        if durable_only && !(path.starts_with("/memories/") || path.starts_with("/workspace/")) {
            continue;
        }
        checked += 1;
        let req = authed(
            pb::ReadBytesRequest {
                path: path.clone(),
                version: None,
            },
            session,
        );
        let got = tokio::time::timeout(DEADLINE, read_all(&mut fs, req)).await;
        let problem = match got {
            Ok(Ok(data)) if &data == expected => continue,
            Ok(Ok(data)) => format!("{} bytes instead of {}", data.len(), expected.len()),
            Ok(Err(status)) => format!("{:?}: {}", status.code(), status.message()),
            Err(_) => "read timed out".into(),
        };
        lost += 1;
        if examples.len() < 5 {
            examples.push(format!("{path} (session {session}): {problem}"));
        }
    }
    (checked, lost, examples)
}

async fn run(settings: Settings) -> Vec<String> {
    let fixture = Fixture::new();
    let server = Arc::new(Server::start(&fixture));
    let shared = Arc::new(Shared {
        start: Instant::now(),
        stop: AtomicBool::new(false),
        stats: Mutex::new(BTreeMap::new()),
        in_flight: Mutex::new(vec![None; settings.workers]),
        recent: Mutex::new(VecDeque::new()),
        timeouts: Mutex::new(VecDeque::new()),
        first_faults: Mutex::new(BTreeMap::new()),
        escapes: Mutex::new(Vec::new()),
        events: Mutex::new(Vec::new()),
    });
    let done = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(monitor(server.clone(), shared.clone(), done.clone()));
    let until = Instant::now() + Duration::from_secs(settings.seconds);
    let mut handles = Vec::new();
    for id in 0..settings.workers {
        let w = Worker::new(id, &server, shared.clone(), settings.seed, &settings.skip).await;
        handles.push(tokio::spawn(w.run(until)));
    }
    let attacker = tokio::spawn(cut_and_reopen(server.url.clone(), until));
    let mut owned = Owned::new();
    let mut chain = 0;
    for h in handles {
        let w = h.await.expect("worker panicked");
        chain = chain.max(w.chain_depth);
        owned.extend(w.owned);
    }
    let attack = attacker.await.expect("attacker panicked");
    println!("stress: attacker {attack}");
    let elapsed = shared.start.elapsed();

    let mut failures = Vec::new();
    let alive = server.exited().is_none();
    let answering = if alive {
        server.answers().await
    } else {
        Err("the server died".into())
    };
    done.store(true, Ordering::Relaxed);
    let peak = sampler.await.unwrap();
    let hwm = server.memory_mib("VmHWM:");
    let (checked, lost, examples, state_dropped) = if answering.is_ok() {
        let (c, l, e) = verify(&server, &owned, false).await;
        (c, l, e, 0)
    } else {
        // State lives in memory and dies with the process; the durable tiers
        // must still hold every acknowledged write after a restart.
        let logs = server.logs.lock().unwrap().clone();
        let last: Vec<&str> = logs.lines().rev().take(40).collect();
        let last: Vec<&str> = last.into_iter().rev().collect();
        eprintln!("stress: last server log lines:\n  {}", last.join("\n  "));
        drop(server);
        let restarted = Server::start(&fixture);
        let (c, l, e) = verify(&restarted, &owned, true).await;
        let state = owned
            .iter()
            .filter(|((_, p), v)| {
                v.is_some() && !p.starts_with("/memories/") && !p.starts_with("/workspace/")
            })
            .count();
        (c, l, e, state)
    };

    let stats = shared.stats.lock().unwrap();
    let hostile: u64 = stats
        .iter()
        .filter(|(k, _)| KINDS.iter().any(|(n, h, _)| n == *k && *h))
        .map(|(_, s)| s.requests)
        .sum();
    let requests: u64 = stats.values().map(|s| s.requests).sum();
    let faults: u64 = stats.values().map(|s| s.faults).sum();
    let internal: u64 = stats.values().map(|s| s.internal).sum();
    println!("stress: per kind (requests / faults / internal / slowest ms):");
    for (kind, s) in stats.iter() {
        println!(
            "  {kind:<26} {:>7} {:>6} {:>6} {:>7}",
            s.requests, s.faults, s.internal, s.max_ms
        );
    }
    for e in shared.events.lock().unwrap().iter() {
        println!("stress: event {e}");
    }
    for (kind, e) in shared.first_faults.lock().unwrap().iter() {
        println!("stress: first fault or INTERNAL answer of {kind}: {e}");
    }
    for e in &examples {
        println!("stress: lost write {e}");
    }
    let escapes = shared.escapes.lock().unwrap().clone();
    let escapes_on_disk = fixture.escapes_on_disk();
    let state_note = if state_dropped > 0 {
        format!(" (+{state_dropped} State files gone with the process)")
    } else {
        String::new()
    };
    println!(
        "stress: {requests} requests ({hostile} hostile, {faults} faults, {internal} internal) from {} clients in {:.1} s, \
         peak RSS {peak} MiB (VmHWM {}, bound {RSS_BOUND_MIB} MiB), lost writes {lost} of {checked} checked{state_note}, \
         handle chain depth {chain}, sandbox escapes {}, server {} (seed {})",
        settings.workers,
        elapsed.as_secs_f64(),
        hwm.map_or("n/a".to_owned(), |h| format!("{h} MiB")),
        escapes.len() + escapes_on_disk.len(),
        match &answering {
            Ok(()) => "answering".to_owned(),
            Err(e) => format!("NOT answering: {e}"),
        },
        settings.seed,
    );
    if let Err(e) = answering {
        failures.push(format!("server not answering at the end: {e}"));
    }
    if peak > RSS_BOUND_MIB || hwm.is_some_and(|h| h > RSS_BOUND_MIB) {
        failures.push(format!(
            "memory over the {RSS_BOUND_MIB} MiB bound (peak VmRSS {peak} MiB)"
        ));
    }
    if lost > 0 {
        failures.push(format!("{lost} acknowledged writes lost"));
    }
    // An INTERNAL answer is a server fault whatever the request was: hostile
    // input gets a named error, never this (the last one found was a deep
    // walk running out of descriptors; docs/security.md § What holds).
    if internal > 0 {
        failures.push(format!(
            "{internal} INTERNAL answers (the first of each kind is printed above)"
        ));
    }
    failures.extend(escapes.into_iter().map(|e| format!("sandbox escape: {e}")));
    failures.extend(
        escapes_on_disk
            .into_iter()
            .map(|e| format!("sandbox escape: {e}")),
    );
    failures.extend(
        shared
            .events
            .lock()
            .unwrap()
            .iter()
            .map(|e| format!("event: {e}")),
    );
    failures
}

/// `msg` as a request of the attacker.
fn attacker<T>(msg: T) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {ATTACKER_TOKEN}").parse().unwrap(),
    );
    req
}

/// The cut-and-reopen attack of issue 21, beside the workers: round after
/// round until `until`, 4 new connections each opening 8 streams it never
/// reads (Watch, ReadBytes of the 3 MiB file, Grep and Glob over
/// `/workspace`), plus 2 MCP bodies that never finish; each round waits past
/// the idle timeout, and the connections of the last 6 rounds stay open.
/// Refusals (RESOURCE_EXHAUSTED, HTTP 413/503) are the defence working.
/// Returns a summary line.
async fn cut_and_reopen(url: String, until: Instant) -> String {
    use tokio::io::AsyncWriteExt;
    let (mut rounds, mut opened, mut refused) = (0, 0, 0);
    let mut held: VecDeque<Vec<Box<dyn std::any::Any + Send>>> = VecDeque::new();
    let addr = url.trim_start_matches("http://").to_owned();
    while Instant::now() + Duration::from_secs(IDLE_SECONDS + 1) < until {
        let mut round: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
        for c in 0..4 {
            let Ok(channel) = Channel::from_shared(url.clone()).unwrap().connect().await else {
                continue;
            };
            let mut fs = FilesystemClient::new(channel);
            for _ in 0..8 {
                let root = "/workspace".to_owned();
                let answer: Result<Box<dyn std::any::Any + Send>, Status> = match c {
                    0 => fs
                        .watch(attacker(pb::WatchRequest {
                            path: root,
                            ..Default::default()
                        }))
                        .await
                        .map(|r| Box::new(r.into_inner()) as _),
                    1 => fs
                        .read_bytes(attacker(pb::ReadBytesRequest {
                            path: "/workspace/big.txt".into(),
                            version: None,
                        }))
                        .await
                        .map(|r| Box::new(r.into_inner()) as _),
                    2 => fs
                        .grep(attacker(pb::GrepRequest {
                            pattern: "fox".into(),
                            path: root,
                            max_duration_ms: 600_000,
                            ..Default::default()
                        }))
                        .await
                        .map(|r| Box::new(r.into_inner()) as _),
                    _ => fs
                        .glob(attacker(pb::GlobRequest {
                            pattern: "**".into(),
                            path: root,
                            max_duration_ms: 600_000,
                            ..Default::default()
                        }))
                        .await
                        .map(|r| Box::new(r.into_inner()) as _),
                };
                match answer {
                    Ok(stream) => {
                        opened += 1;
                        round.push(stream);
                    }
                    Err(_) => refused += 1,
                }
            }
            round.push(Box::new(fs));
        }
        for _ in 0..2 {
            let Ok(mut stream) = tokio::net::TcpStream::connect(&addr).await else {
                continue;
            };
            let head = mcp_head("127.0.0.1", Some(ATTACKER_TOKEN), "attack", "LS", 8 << 20);
            let body = vec![b' '; 6 << 20];
            if stream.write_all(head.as_bytes()).await.is_ok()
                && stream.write_all(&body).await.is_ok()
            {
                opened += 1;
            } else {
                refused += 1;
            }
            round.push(Box::new(stream));
        }
        held.push_back(round);
        if held.len() > 6 {
            held.pop_front();
        }
        rounds += 1;
        tokio::time::sleep(Duration::from_secs(IDLE_SECONDS + 1)).await;
    }
    format!("{rounds} cut-and-reopen rounds, {opened} streams and bodies opened, {refused} refused")
}
