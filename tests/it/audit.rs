//! The audit log (docs/audit.md) through the real server: one record per
//! call on every surface, denials naming their rule, no content at the
//! default level, tampering named by `agentvfs audit verify`, the store
//! out of the mounts' reach, and every acknowledged change's record
//! surviving kill -9.

use crate::util::{Server, as_token};
use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

const TOKEN: &str = "agent-token-0001";
/// Content and Grep pattern that must never reach the store.
const SENTINEL: &str = "SENTINEL-7f3a9c-never-logged";

/// A State root, one principal granted everything below `/work` only, the
/// audit on (its directory the default one, in the server's data
/// directory) with a checkpoint every 4 records.
fn config(extra: &str) -> String {
    format!(
        r#"
[[mount]]
prefix = "/"
tier = "state"
[[principal]]
name = "agent"
token = "{TOKEN}"
grants = [{{ prefix = "/work", ops = ["list", "file", "read_binary", "read_file", "read_re", "write", "delete"] }}]
[audit]
enabled = true
checkpoint_records = 4
{extra}
"#
    )
}

fn audit_dir(server: &Server) -> PathBuf {
    server.data_dir().join("agentvfs-audit")
}

/// The segment files of the store at `dir`, oldest first.
fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("segment-"))
        .collect();
    names.sort();
    names
}

/// Every record in the store, in order.
fn records(dir: &Path) -> Vec<Value> {
    segment_files(dir)
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).expect("a record is JSON"))
                .collect::<Vec<Value>>()
        })
        .collect()
}

/// The records once at least `count` are there (reads are written a
/// moment after they are answered).
async fn at_least(dir: &Path, count: usize) -> Vec<Value> {
    for _ in 0..200 {
        let found = records(dir);
        if found.len() >= count {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("fewer than {count} records: {:#?}", records(dir));
}

fn agentvfs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .args(args)
        .env_remove("AGENTVFS_TOKEN")
        .output()
        .expect("run agentvfs")
}

/// Writes `/work/f000.txt`, `/work/f001.txt`, ... (`count` files, each
/// holding its number) as the agent, stopping at the first refused.
async fn write_numbered(
    fs: &mut FilesystemClient<Channel>,
    count: u64,
) -> Result<(), tonic::Status> {
    for i in 0..count {
        let write = pb::WriteRequest {
            path: format!("/work/f{i:03}.txt"),
            content: format!("{i}"),
            ..Default::default()
        };
        fs.write(as_token(write, TOKEN)).await?;
    }
    Ok(())
}

/// One stateless MCP `tools/call` over HTTP, with a `_meta.toolCallId`.
async fn mcp_call(server: &Server, tool: &str, arguments: Value, call_id: &str) -> String {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "toolCallId": call_id,
        }},
    })
    .to_string();
    let addr = server.url.trim_start_matches("http://");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
         mcp-method: tools/call\r\nmcp-name: {tool}\r\nauthorization: Bearer {TOKEN}\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all((head + &body).as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer))
        .await
        .expect("the MCP answer within 10 s")
        .unwrap();
    answer
}

fn field<'a>(record: &'a Value, name: &str) -> &'a str {
    record[name].as_str().unwrap_or_default()
}

/// A read through gRPC `Read`, the MCP `Read` tool (with its tool-call
/// id) and the CLI gives one record each, with its surface; Stat,
/// ListInfo, Grep and Glob each give a read-class record; a read and a
/// write outside the grant are recorded as denied naming the rule; the
/// sentinel, as content and as a Grep pattern, is nowhere in the store;
/// and the chain verifies.
#[tokio::test]
async fn every_surface_records_its_calls_and_denials_name_their_rule() {
    let rule = "[[audit.rule]]\nprefix = \"/work/req\"\nlevel = \"request\"\n";
    let server = Server::start_with(Some(&config(rule)), &[]);
    let mut fs = server.fs().await;
    let file = "/work/notes.txt";
    let write = pb::WriteRequest {
        path: file.into(),
        content: format!("{SENTINEL}\n"),
        ..Default::default()
    };
    let written = fs.write(as_token(write, TOKEN)).await.unwrap().into_inner();
    let read = pb::ReadRequest {
        path: file.into(),
        ..Default::default()
    };
    fs.read(as_token(read, TOKEN)).await.unwrap();
    let answer = mcp_call(
        &server,
        "Read",
        serde_json::json!({"path": file}),
        "call-42",
    )
    .await;
    assert!(answer.contains(SENTINEL), "the MCP Read answered: {answer}");
    let cat = agentvfs(&["--addr", &server.url, "--token", TOKEN, "cat", file]);
    assert!(
        cat.status.success(),
        "{}",
        String::from_utf8_lossy(&cat.stderr)
    );
    let stat = pb::StatRequest { path: file.into() };
    fs.stat(as_token(stat, TOKEN)).await.unwrap();
    let list = pb::ListInfoRequest {
        path: "/work".into(),
    };
    fs.list_info(as_token(list, TOKEN)).await.unwrap();
    let grep = pb::GrepRequest {
        pattern: SENTINEL.into(),
        path: "/work".into(),
        ..Default::default()
    };
    let mut hits = fs.grep(as_token(grep, TOKEN)).await.unwrap().into_inner();
    while hits.message().await.unwrap().is_some() {}
    let glob = pb::GlobRequest {
        pattern: "**".into(),
        path: "/work".into(),
        ..Default::default()
    };
    let mut found = fs.glob(as_token(glob, TOKEN)).await.unwrap().into_inner();
    while found.message().await.unwrap().is_some() {}
    // Below /work/req a rule keeps the request: the pattern is recorded.
    let there = pb::WriteRequest {
        path: "/work/req/x.txt".into(),
        content: "x\n".into(),
        ..Default::default()
    };
    fs.write(as_token(there, TOKEN)).await.unwrap();
    let kept = pb::GrepRequest {
        pattern: "kept-pattern".into(),
        path: "/work/req".into(),
        ..Default::default()
    };
    let mut hits = fs.grep(as_token(kept, TOKEN)).await.unwrap().into_inner();
    while hits.message().await.unwrap_or(None).is_some() {}
    let denied_read = pb::ReadRequest {
        path: "/secret/plan.txt".into(),
        ..Default::default()
    };
    let refused = fs.read(as_token(denied_read, TOKEN)).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    let denied_write = pb::WriteRequest {
        path: "/secret/plan.txt".into(),
        content: "x".into(),
        ..Default::default()
    };
    fs.write(as_token(denied_write, TOKEN)).await.unwrap_err();

    let dir = audit_dir(&server);
    // A read's record reaches the store up to a moment after a later
    // change's (docs/audit.md § Storage): wait for the last read's too.
    let mut all = at_least(&dir, 12).await;
    for _ in 0..200 {
        let denied_read = |r: &Value| {
            field(r, "operation") == "Filesystem/Read" && field(r, "result") == "denied"
        };
        if all.iter().any(denied_read) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        all = records(&dir);
    }
    let on_file: Vec<&Value> = all
        .iter()
        .filter(|r| r["paths"] == serde_json::json!([file]))
        .collect();
    let reads: Vec<(&str, &str, &str)> = on_file
        .iter()
        .filter(|r| field(r, "class") == "data_read")
        .map(|r| {
            (
                field(r, "surface"),
                field(r, "operation"),
                field(r, "tool_call_id"),
            )
        })
        .collect();
    assert_eq!(reads.len(), 3, "one read per surface: {reads:?}");
    assert!(
        reads.contains(&("grpc", "Filesystem/Read", "")),
        "{reads:?}"
    );
    assert!(
        reads.contains(&("mcp", "tool/Read", "call-42")),
        "{reads:?}"
    );
    assert!(reads.iter().any(|r| r.0 == "cli"), "{reads:?}");
    let write_record = on_file
        .iter()
        .find(|r| field(r, "operation") == "Filesystem/Write")
        .expect("the write's record");
    assert_eq!(field(write_record, "class"), "data_write");
    assert_eq!(write_record["version_after"], written.version);
    assert_eq!(write_record["bytes"], SENTINEL.len() + 1);
    assert_eq!(field(write_record, "principal"), "agent");
    for (operation, class) in [
        ("Filesystem/Stat", "metadata_read"),
        ("Filesystem/ListInfo", "metadata_read"),
        ("Filesystem/Grep", "data_read"),
        ("Filesystem/Glob", "metadata_read"),
    ] {
        let record = all
            .iter()
            .find(|r| field(r, "operation") == operation)
            .unwrap_or_else(|| panic!("no record of {operation}"));
        assert_eq!(field(record, "class"), class, "{record}");
        assert_eq!(field(record, "result"), "ok", "{record}");
    }
    for (operation, op) in [
        ("Filesystem/Read", "read_file"),
        ("Filesystem/Write", "write"),
    ] {
        let record = all
            .iter()
            .find(|r| field(r, "operation") == operation && field(r, "result") == "denied")
            .unwrap_or_else(|| panic!("no denied {operation}"));
        assert_eq!(
            field(record, "rule"),
            format!("permission denied: no grant allows '{op}' on /secret/plan.txt")
        );
        assert_eq!(record["paths"], serde_json::json!(["/secret/plan.txt"]));
    }
    let requests: Vec<&str> = all.iter().filter_map(|r| r["request"].as_str()).collect();
    assert_eq!(
        requests,
        ["kept-pattern"],
        "only the rule's path keeps its request"
    );
    let mut seqs: Vec<u64> = all.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    seqs.sort();
    assert_eq!(seqs, expected, "sequence numbers are gap-free");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(
            text.matches(SENTINEL).count(),
            0,
            "{} holds the sentinel",
            path.display()
        );
    }
    let verified = agentvfs(&["audit", "verify", "--dir", &dir.display().to_string()]);
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );
}

/// The store after a flipped byte, a deleted record, two records swapped
/// or a cut tail: `agentvfs audit verify` names record 3 each time.
#[tokio::test]
async fn verify_names_the_first_tampered_record() {
    let mut server = Server::start_with(Some(&config("")), &[]);
    write_numbered(&mut server.fs().await, 12).await.unwrap();
    let dir = audit_dir(&server);
    at_least(&dir, 12).await;
    server.kill();
    let verify = |dir: &Path| agentvfs(&["audit", "verify", "--dir", &dir.display().to_string()]);
    assert!(verify(&dir).status.success());
    let segment = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("segment-"))
        .unwrap();
    let original = std::fs::read_to_string(&segment).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    let flip = |line: &str| line.replacen("f002.txt", "f002.tyt", 1);
    let cases: [(&str, Vec<String>); 4] = [
        (
            "flipped byte",
            lines
                .iter()
                .enumerate()
                .map(|(i, l)| if i == 2 { flip(l) } else { l.to_string() })
                .collect(),
        ),
        (
            "deleted record",
            lines
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != 2)
                .map(|(_, l)| l.to_string())
                .collect(),
        ),
        ("swapped records", {
            let mut swapped: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            swapped.swap(2, 3);
            swapped
        }),
        (
            "cut tail",
            lines.iter().take(2).map(|l| l.to_string()).collect(),
        ),
    ];
    for (case, tampered) in cases {
        assert_ne!(
            tampered.join("\n"),
            lines.join("\n"),
            "{case} changed nothing"
        );
        std::fs::write(&segment, tampered.join("\n") + "\n").unwrap();
        let out = verify(&dir);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{case}: verify passed");
        assert!(stderr.contains(": record 3 ("), "{case}: {stderr}");
    }
    std::fs::write(&segment, &original).unwrap();
    assert!(verify(&dir).status.success());
}

/// No mount reaches the store: a Filesystem mount whose root holds the
/// audit directory is refused at the configuration check, and a link in
/// a served directory pointing into the store reads nothing, the attempt
/// recorded.
#[tokio::test]
async fn the_store_is_out_of_every_mount_s_reach() {
    let outer = tempfile::tempdir().unwrap();
    let served = outer.path().join("served");
    std::fs::create_dir(&served).unwrap();
    let file = outer.path().join("agentvfs.toml");
    std::fs::write(
        &file,
        format!(
            "[[mount]]\nprefix = \"/\"\ntier = \"filesystem\"\nroot = \"{}\"\n[audit]\n\
             enabled = true\ndir = \"{}\"\n",
            outer.path().display(),
            served.join("audit").display()
        ),
    )
    .unwrap();
    let out = agentvfs(&["config", "check", &file.display().to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("[audit] dir"), "{stderr}");
    assert!(stderr.contains("overlap"), "{stderr}");

    let audit = outer.path().join("audit");
    let server = Server::start_with(
        Some(&format!(
            "[[mount]]\nprefix = \"/\"\ntier = \"filesystem\"\nroot = \"{}\"\n[audit]\n\
             enabled = true\ndir = \"{}\"\n",
            served.display(),
            audit.display()
        )),
        &[],
    );
    std::os::unix::fs::symlink(audit.join("key"), served.join("key")).unwrap();
    std::os::unix::fs::symlink(&audit, served.join("log")).unwrap();
    let mut fs = server.fs().await;
    for path in ["/key", "/log/key"] {
        let read = pb::ReadRequest {
            path: path.into(),
            ..Default::default()
        };
        let refused = fs.read(read).await.unwrap_err();
        assert_ne!(refused.code(), tonic::Code::Ok);
    }
    let all = at_least(&audit, 2).await;
    for path in ["/key", "/log/key"] {
        let record = all
            .iter()
            .find(|r| r["paths"] == serde_json::json!([path]))
            .unwrap_or_else(|| panic!("no record of the attempt on {path}"));
        assert_ne!(field(record, "result"), "ok", "{record}");
    }
}

/// kill -9 while writes run: after the restart every write the server
/// acknowledged has its record, and the chain verifies.
#[tokio::test]
async fn every_acknowledged_write_has_its_record_after_kill_9() {
    let mut server = Server::start_with(Some(&config("checkpoint_seconds = 1")), &[]);
    let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (mut fs, acknowledged) = (server.fs().await, acknowledged.clone());
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let path = format!("/work/w{w}/f{i}.txt");
                let write = pb::WriteRequest {
                    path: path.clone(),
                    content: "x".into(),
                    ..Default::default()
                };
                match fs.write(as_token(write, TOKEN)).await {
                    Ok(done) => acknowledged
                        .lock()
                        .unwrap()
                        .push((path, done.into_inner().version)),
                    Err(_) => return,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    server.crash_and_restart();
    for writer in writers {
        writer.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() > 20,
        "only {} writes",
        acknowledged.len()
    );
    let dir = audit_dir(&server);
    let all = records(&dir);
    for (path, version) in &acknowledged {
        assert!(
            all.iter().any(|r| r["paths"] == serde_json::json!([path])
                && field(r, "result") == "ok"
                && r["version_after"] == *version),
            "the acknowledged write of {path} has no record"
        );
    }
    let out = agentvfs(&["audit", "verify", "--dir", &dir.display().to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// QueryAudit and VerifyAudit need the audit right: an agent is refused
/// (and its attempt recorded); an auditor's every filter returns what a
/// tally of the calls made expects, pages resume without repeats or
/// gaps, and `agentvfs audit --json` exports the same records.
#[tokio::test]
async fn queries_need_the_audit_right_and_match_a_tally() {
    const AUDITOR: &str = "auditor-token-0001";
    const OTHER: &str = "other-token-0001";
    let extra = format!(
        "[[principal]]\nname = \"auditor\"\ntoken = \"{AUDITOR}\"\naudit = true\n\
         grants = [{{ prefix = \"/\", ops = [\"list\", \"file\", \"read_file\", \"write\"] }}]\n\
         [[principal]]\nname = \"other\"\ntoken = \"{OTHER}\"\n\
         grants = [{{ prefix = \"/work/b\", ops = [\"read_file\", \"write\"] }}]\n"
    );
    // The principals follow [audit] in the file: they are tables of their own.
    let server = Server::start_with(Some(&(config("") + &extra)), &[]);
    let mut fs = server.fs().await;
    let mut tally = std::collections::BTreeMap::<(&str, &str, &str), u64>::new();
    for i in 0..30u64 {
        let (token, who, path) = match i % 3 {
            0 => (TOKEN, "agent", format!("/work/a{i}.txt")),
            1 => (AUDITOR, "auditor", format!("/work/b/x{i}.txt")),
            _ => (OTHER, "other", format!("/work/b/y{i}.txt")),
        };
        let write = pb::WriteRequest {
            path: path.clone(),
            content: "x".into(),
            ..Default::default()
        };
        fs.write(as_token(write, token)).await.unwrap();
        *tally.entry((who, "Filesystem/Write", "ok")).or_default() += 1;
        let read = pb::ReadRequest {
            path: if i % 5 == 0 { "/secret".into() } else { path },
            ..Default::default()
        };
        let denied = i % 5 == 0 && who != "auditor";
        let outcome = fs.read(as_token(read, token)).await;
        let result = match (denied, outcome) {
            (true, Err(s)) if s.code() == tonic::Code::PermissionDenied => "denied",
            (false, Ok(_)) => "ok",
            (true, Err(s)) if s.code() == tonic::Code::NotFound => "not_found",
            (false, Err(s)) if s.code() == tonic::Code::NotFound => "not_found",
            other => panic!("unexpected {other:?}"),
        };
        *tally.entry((who, "Filesystem/Read", result)).or_default() += 1;
    }
    let channel = server.channel().await;
    let mut log = pb::audit_log_client::AuditLogClient::new(channel);
    let refused = log
        .query_audit(as_token(pb::QueryAuditRequest::default(), TOKEN))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    assert!(refused.message().contains("audit right"), "{refused:?}");
    let query = |req: pb::QueryAuditRequest| {
        let mut log = log.clone();
        async move {
            let mut pages = log
                .query_audit(as_token(req, AUDITOR))
                .await
                .unwrap()
                .into_inner();
            let mut records = Vec::new();
            while let Some(page) = pages.message().await.unwrap() {
                records.extend(
                    page.records
                        .iter()
                        .map(|l| serde_json::from_str::<Value>(l).unwrap()),
                );
            }
            records
        }
    };
    for ((who, operation, result), count) in &tally {
        let found = query(pb::QueryAuditRequest {
            principal: who.to_string(),
            operation: operation.to_string(),
            result: result.to_string(),
            ..Default::default()
        })
        .await;
        assert_eq!(found.len() as u64, *count, "{who} {operation} {result}");
    }
    let attempt = query(pb::QueryAuditRequest {
        principal: "agent".into(),
        operation: "AuditLog/QueryAudit".into(),
        result: "denied".into(),
        ..Default::default()
    })
    .await;
    assert_eq!(attempt.len(), 1, "the agent's refused query is recorded");
    assert_eq!(field(&attempt[0], "class"), "admin");
    let writes = query(pb::QueryAuditRequest {
        class: "data_write".into(),
        path_prefix: "/work/b".into(),
        ..Default::default()
    })
    .await;
    assert_eq!(writes.len(), 20);
    let mut after = 0;
    let mut paged = Vec::new();
    loop {
        let page = query(pb::QueryAuditRequest {
            after_seq: after,
            page_size: 7,
            ..Default::default()
        })
        .await;
        let Some(last) = page.last() else { break };
        after = last["seq"].as_u64().unwrap();
        paged.extend(page.into_iter().map(|r| r["seq"].as_u64().unwrap()));
    }
    let seqs: Vec<u64> = (1..=paged.len() as u64).collect();
    assert_eq!(paged, seqs, "pages neither repeat nor skip");
    let verified = log
        .verify_audit(as_token(pb::VerifyAuditRequest {}, AUDITOR))
        .await
        .unwrap()
        .into_inner();
    assert!(verified.ok, "{verified:?}");
    let out = Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .args(["--addr", &server.url, "--token", AUDITOR, "audit", "--json"])
        .args(["--principal", "other"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exported = String::from_utf8(out.stdout).unwrap();
    let expected: u64 = tally
        .iter()
        .filter(|((w, _, _), _)| *w == "other")
        .map(|(_, c)| c)
        .sum();
    assert_eq!(exported.lines().count() as u64, expected);
}

/// `GET /metrics` over HTTP/1.1 (with `token` when given): the status
/// line and the body.
async fn scrape(server: &Server, token: Option<&str>) -> (String, String) {
    let addr = server.url.trim_start_matches("http://");
    let authorization = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
    let request = format!(
        "GET /metrics HTTP/1.1\r\nhost: 127.0.0.1\r\n{authorization}connection: close\r\n\r\n"
    );
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer))
        .await
        .expect("the metrics within 10 s")
        .unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    (
        head.lines().next().unwrap_or_default().to_owned(),
        body.to_owned(),
    )
}

/// The value of the sample of `name` whose labels include `labels`
/// (0 when there is none), from the text format parsed by a Prometheus
/// parser.
fn sample(body: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .expect("the text format parses");
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            prometheus_parse::Value::Histogram(ref buckets) => {
                buckets.last().map_or(0.0, |b| b.count)
            }
            prometheus_parse::Value::Summary(_) => 0.0,
        })
        .sum()
}

/// `/metrics` follows the listener's rules (a token, as every call needs
/// here) and parses as the Prometheus text format; its counters move by
/// the calls the test makes: reads, their bytes and latencies, a denial,
/// and the audit records written.
#[tokio::test]
async fn metrics_parse_and_move_with_the_calls() {
    let server = Server::start_with(Some(&config("")), &[]);
    let (status, body) = scrape(&server, None).await;
    assert!(status.contains(" 401 "), "{status}: {body}");
    let (status, before) = scrape(&server, Some(TOKEN)).await;
    assert!(status.contains(" 200 "), "{status}");
    let mut fs = server.fs().await;
    let content = "twelve bytes";
    let write = pb::WriteRequest {
        path: "/work/m.txt".into(),
        content: content.into(),
        ..Default::default()
    };
    fs.write(as_token(write, TOKEN)).await.unwrap();
    for _ in 0..3 {
        let read = pb::ReadRequest {
            path: "/work/m.txt".into(),
            ..Default::default()
        };
        fs.read(as_token(read, TOKEN)).await.unwrap();
    }
    let denied = pb::ReadRequest {
        path: "/secret".into(),
        ..Default::default()
    };
    fs.read(as_token(denied, TOKEN)).await.unwrap_err();
    at_least(&audit_dir(&server), 5).await;
    let (_, after) = scrape(&server, Some(TOKEN)).await;
    let read_ok = [
        ("surface", "grpc"),
        ("operation", "Filesystem/Read"),
        ("result", "ok"),
    ];
    let moved = |name: &str, labels: &[(&str, &str)]| {
        sample(&after, name, labels) - sample(&before, name, labels)
    };
    assert_eq!(moved("agentvfs_calls_total", &read_ok), 3.0);
    assert_eq!(
        moved(
            "agentvfs_calls_total",
            &[("operation", "Filesystem/Read"), ("result", "denied")]
        ),
        1.0
    );
    assert_eq!(
        moved(
            "agentvfs_call_duration_seconds",
            &[("operation", "Filesystem/Read")]
        ),
        4.0
    );
    assert_eq!(
        moved("agentvfs_bytes_read_total", &[]),
        3.0 * content.len() as f64
    );
    assert_eq!(
        moved("agentvfs_bytes_written_total", &[]),
        content.len() as f64
    );
    assert!(moved("agentvfs_audit_records", &[]) >= 5.0, "{after}");
}

/// Scrapes `server` until `holds` is true of the metrics (a Grep's end
/// is counted a moment after its client has the answer), at most 10 s;
/// the last scrape.
async fn scrape_until(server: &Server, holds: impl Fn(&str) -> bool) -> String {
    for _ in 0..200 {
        let (status, body) = scrape(server, Some(TOKEN)).await;
        assert!(status.contains(" 200 "), "{status}");
        if holds(&body) {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the metrics never showed it: {}",
        scrape(server, Some(TOKEN)).await.1
    );
}

/// The gauges read at scrape time show what is open now: a Watch stream
/// held open counts as a stream and holds memory charged to its
/// principal (one labelled series per principal, at most 10), the gRPC
/// channel as a connection, an MCP session as a session; a narrowed Grep
/// moves the index's hits, and the index it learned has a size.
#[tokio::test]
async fn metrics_show_what_is_open_now_and_the_index() {
    let search = "[search]\nindex = true\nindex_min_files = 0\nindex_self_check = 0";
    let server = Server::start_with(Some(&config(search)), &[]);
    let (_, before) = scrape(&server, Some(TOKEN)).await;
    assert_eq!(
        sample(&before, "agentvfs_open_streams", &[]),
        0.0,
        "{before}"
    );
    assert_eq!(
        sample(&before, "agentvfs_mcp_sessions", &[]),
        0.0,
        "{before}"
    );
    let mut fs = server.fs().await;
    write_numbered(&mut fs, 20).await.unwrap();
    let watch = pb::WatchRequest {
        path: "/work".into(),
        from_now: true,
        ..Default::default()
    };
    let _watching = fs.watch(as_token(watch, TOKEN)).await.unwrap().into_inner();
    crate::mcp_http::open_session(&server, TOKEN).await.unwrap();
    let narrowed = "agentvfs_search_index_narrowed_greps_total";
    let hits_before = sample(&before, narrowed, &[]);
    for _ in 0..2 {
        let grep = pb::GrepRequest {
            pattern: "needle".into(),
            path: "/work".into(),
            ..Default::default()
        };
        let (matches, _) = crate::util::grep_all(&mut fs, as_token(grep, TOKEN))
            .await
            .unwrap();
        assert!(matches.is_empty());
    }
    let now = scrape_until(&server, |m| sample(m, narrowed, &[]) > hits_before).await;
    assert!(sample(&now, "agentvfs_open_streams", &[]) >= 1.0, "{now}");
    // The gRPC channel, and the scrape's own.
    assert!(
        sample(&now, "agentvfs_open_connections", &[]) >= 2.0,
        "{now}"
    );
    assert!(sample(&now, "agentvfs_mcp_sessions", &[]) >= 1.0, "{now}");
    assert!(
        sample(&now, "agentvfs_search_index_bytes", &[]) > 0.0,
        "{now}"
    );
    let by_principal = "agentvfs_memory_in_use_bytes_by_principal";
    assert!(
        sample(&now, by_principal, &[("principal", "agent")]) > 0.0,
        "the Watch stream's charge: {now}"
    );
    let series = now
        .lines()
        .filter(|l| l.starts_with(&format!("{by_principal}{{")))
        .count();
    assert!((1..=10).contains(&series), "{now}");
}

/// Retention (docs/audit.md § Retention): 4 KiB segments and a 16 KiB
/// store; a burst of 200 writes closes dozens of segments and the oldest
/// are dropped while it runs, so the store keeps a few segments whose
/// first record is far past 1. Verification passes from the signed anchor,
/// and a byte flipped in a kept segment still fails it, naming the record.
#[tokio::test]
async fn verification_passes_after_old_segments_expire() {
    let retention = "segment_bytes = 4096\nretention_bytes = 16384";
    let mut server = Server::start_with(Some(&config(retention)), &[]);
    let writes = 200;
    write_numbered(&mut server.fs().await, writes)
        .await
        .unwrap();
    server.kill();
    let dir = audit_dir(&server);
    let kept = records(&dir);
    let segments = segment_files(&dir);
    let first_seq = kept[0]["seq"].as_u64().unwrap();
    let last_seq = kept.last().unwrap()["seq"].as_u64().unwrap();
    assert!(last_seq >= writes, "every write was recorded: {last_seq}");
    assert!(first_seq > 1, "the oldest segments were dropped");
    assert!(
        (kept.len() as u64) < writes / 2,
        "{} records kept of {last_seq}",
        kept.len()
    );
    let held: u64 = segments
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(held <= 16384 + 4096 + 1024, "{held} bytes in {segments:?}");
    assert!(dir.join("anchor.json").exists());
    // The first kept segment starts right after the anchor's record.
    let first_name = segments[0].file_name().unwrap().to_string_lossy();
    assert!(
        first_name.contains(&format!("{first_seq:020}")),
        "{first_name}"
    );
    let verify = |dir: &Path| agentvfs(&["audit", "verify", "--dir", &dir.display().to_string()]);
    let out = verify(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A flipped byte in the third record of the first kept segment.
    let segment = &segments[0];
    let original = std::fs::read_to_string(segment).unwrap();
    let tampered: Vec<String> = original
        .lines()
        .enumerate()
        .map(|(i, l)| match i {
            2 => l.replacen("/work/f", "/work/g", 1),
            _ => l.to_owned(),
        })
        .collect();
    assert_ne!(tampered.join("\n") + "\n", original, "a byte flipped");
    std::fs::write(segment, tampered.join("\n") + "\n").unwrap();
    let out = verify(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "verify passed a flipped byte");
    let third = kept[2]["seq"].as_u64().unwrap();
    assert!(stderr.contains(&format!(": record {third} (")), "{stderr}");
}

/// A server whose audit log, under failure mode `mode`, has 4 KiB
/// segments, the next ones on a disk that is always full (each a link to
/// `/dev/full`, so a record written after the first roll-over fails with
/// ENOSPC); then up to 100 writes, stopping at the first refused: the
/// server, and that refusal.
async fn audit_on_a_full_disk(mode: &str) -> (Server, Option<tonic::Status>) {
    let extra = format!("segment_bytes = 4096\nfailure = \"{mode}\"");
    let server = Server::start_with(Some(&config(&extra)), &[]);
    let dir = audit_dir(&server);
    for seq in 2..=200u64 {
        let next = dir.join(format!("segment-{seq:020}.jsonl"));
        std::os::unix::fs::symlink("/dev/full", next).unwrap();
    }
    let refused = write_numbered(&mut server.fs().await, 100).await.err();
    (server, refused)
}

/// The status gRPC health gives `service` on `server`.
async fn health_of(server: &Server, service: &str) -> ServingStatus {
    let mut health = HealthClient::new(server.channel().await);
    let request = HealthCheckRequest {
        service: service.into(),
    };
    health.check(request).await.unwrap().into_inner().status()
}

/// The failure mode is reported where an operator looks (docs/audit.md §
/// Failure mode): the `serving` line names it, `/metrics` has it as
/// `agentvfs_audit_failure_mode{mode}`. Under `fail_closed`, a record that
/// cannot be written (a full disk) refuses its write UNAVAILABLE and every
/// call after it, `agentvfs_audit_failed` turns 1 and gRPC health turns
/// NOT_SERVING for the server and each service; under `drop_and_count`
/// every write is served, the lost records counted, health SERVING.
#[tokio::test]
async fn health_and_metrics_report_the_audit_failure_mode() {
    let (closed, refused) = audit_on_a_full_disk("fail_closed").await;
    let refused = refused.expect("a write refused once its record cannot be written");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("fail_closed"), "{refused:?}");
    let logs = closed.logs.lock().unwrap().clone();
    let banner = logs
        .lines()
        .find(|l| l.contains("serving") && l.contains("audit_failure"))
        .expect("the serving line names the failure mode");
    assert!(banner.contains("fail_closed"), "{banner}");
    let mut fs = closed.fs().await;
    let read = pb::ReadRequest {
        path: "/work/f000.txt".into(),
        ..Default::default()
    };
    let after = fs.read(as_token(read, TOKEN)).await.unwrap_err();
    assert_eq!(after.code(), tonic::Code::Unavailable, "{after:?}");
    for service in ["", "agentvfs.v1.Filesystem", "agentvfs.v1.AuditLog"] {
        assert_eq!(
            health_of(&closed, service).await,
            ServingStatus::NotServing,
            "{service:?}"
        );
    }
    let (_, metrics) = scrape(&closed, Some(TOKEN)).await;
    let mode = |m: &str, name: &str| sample(m, "agentvfs_audit_failure_mode", &[("mode", name)]);
    assert_eq!(mode(&metrics, "fail_closed"), 1.0, "{metrics}");
    assert_eq!(mode(&metrics, "drop_and_count"), 0.0, "{metrics}");
    assert_eq!(sample(&metrics, "agentvfs_audit_failed", &[]), 1.0);

    let (dropping, refused) = audit_on_a_full_disk("drop_and_count").await;
    assert!(refused.is_none(), "{refused:?}");
    assert_eq!(health_of(&dropping, "").await, ServingStatus::Serving);
    let (_, metrics) = scrape(&dropping, Some(TOKEN)).await;
    assert_eq!(mode(&metrics, "drop_and_count"), 1.0, "{metrics}");
    assert_eq!(sample(&metrics, "agentvfs_audit_failed", &[]), 0.0);
    assert!(sample(&metrics, "agentvfs_audit_dropped_records", &[]) >= 1.0);
}

/// The object tier's requests (the test process's versitygw): a write,
/// a read and a read of a missing file on an object mount move
/// `agentvfs_object_requests_total` by method and outcome (PUTs and GETs
/// `ok`, the missing key's 404 `answered`, never retried) and its latency
/// histogram.
#[tokio::test]
async fn metrics_count_the_object_tier_s_requests() {
    let bucket = crate::s3::s3().bucket("agentvfs-it");
    let prefix = format!("metrics-{:016x}", rand::random::<u64>());
    let config = format!(
        "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n[[mount]]\nprefix = \"/shared\"\n\
         tier = \"object\"\nbucket = \"{bucket}\"\nkey_prefix = \"{prefix}\"\npath_style = true\n"
    );
    let server = Server::start_with(Some(&config), &[]);
    let (status, before) = scrape(&server, None).await;
    assert!(status.contains(" 200 "), "{status}");
    let mut fs = server.fs().await;
    crate::util::write(&mut fs, "/shared/m.txt", "object").await;
    crate::util::read_text(&mut fs, "/shared/m.txt").await;
    let missing = pb::ReadRequest {
        path: "/shared/missing.txt".into(),
        ..Default::default()
    };
    let refused = fs.read(missing).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::NotFound);
    let (_, after) = scrape(&server, None).await;
    let requests = "agentvfs_object_requests_total";
    let moved = |name: &str, labels: &[(&str, &str)]| {
        sample(&after, name, labels) - sample(&before, name, labels)
    };
    assert!(
        moved(requests, &[("method", "PUT"), ("outcome", "ok")]) >= 1.0,
        "{after}"
    );
    assert!(
        moved(requests, &[("method", "GET"), ("outcome", "ok")]) >= 1.0,
        "{after}"
    );
    assert!(
        moved(requests, &[("outcome", "answered")]) >= 1.0,
        "{after}"
    );
    assert!(
        moved("agentvfs_object_request_duration_seconds", &[]) >= 3.0,
        "{after}"
    );
}
