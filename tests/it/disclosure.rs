//! Answers show only what the caller may see: a property test over random
//! grants on a random tree (docs/security.md § Answers show only what the
//! caller may see).
//!
//! One server holds a random tree on the Store: directories and files with
//! unique names, each version of each file carrying a unique sentinel, a
//! labelled turn, and a branch with an edit, a move, an added file and a
//! conflict with its base. Principals with random grants then call every
//! RPC that answers names or content, the LLM tools over `Tools/Invoke`,
//! and MCP over HTTP, on every path of the tree, in and out of the branch.
//! Every answer and every error, decoded (bytes fields included), must
//! name no path the principal may not name and carry no content it may not
//! read, apart from the names its own request carried. The rules are
//! computed here from the grants, independently of the server's code:
//! - a name is visible when some right is granted on the path, or `list`
//!   on a path below it (a visible path shows its directories too);
//! - content is visible with `read_file`, `read_binary` or `read_re` on
//!   its file.
//!
//! Four seeds run by default (a second each); `AGENTVFS_DISCLOSURE_SEED`
//! runs one other tree with other grants. The seed is printed with every
//! failure.

use crate::conformance::{Runner, Scope};
use crate::util::Server;
use agentvfs::pb::FILE_DESCRIPTOR_SET;
use base64::Engine;
use prost_reflect::DescriptorPool;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const OPS: [&str; 7] = [
    "list",
    "file",
    "read_binary",
    "read_file",
    "read_re",
    "write",
    "delete",
];
const READS: [&str; 3] = ["read_file", "read_binary", "read_re"];
const ADMIN: &str = "admin-token-0001";
const BRANCH: &str = "feature";
/// Random principals per seed.
const PRINCIPALS: usize = 12;

/// A grant: a prefix and the operations on it.
type Grant = (String, Vec<&'static str>);

/// The tree the admin builds, drawn from the seed before the server
/// starts (the principals' grants are drawn over it).
#[derive(Default)]
struct Tree {
    /// Every directory and file, as absolute logical paths.
    paths: BTreeSet<String>,
    /// Each sentinel, and the files whose content carries it.
    sentinels: BTreeMap<String, Vec<String>>,
    /// The files, in the order they are written.
    files: Vec<String>,
    /// The writes, in order: (path, content, label, branch).
    writes: Vec<(String, String, Option<&'static str>, Option<&'static str>)>,
    /// The branch's root, and the move made in it.
    branch_root: String,
    moved: (String, String),
}

fn token(rng: &mut StdRng, kind: char) -> String {
    format!("{kind}{:08x}", rng.random::<u32>())
}

/// `path` lies at or below `prefix`.
fn within(path: &str, prefix: &str) -> bool {
    prefix == "/"
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn ops_on<'g>(grants: &'g [Grant], path: &str) -> BTreeSet<&'g str> {
    grants
        .iter()
        .filter(|(prefix, _)| within(path, prefix))
        .flat_map(|(_, ops)| ops.iter().copied())
        .collect()
}

fn may_name(grants: &[Grant], path: &str) -> bool {
    !ops_on(grants, path).is_empty()
        || grants
            .iter()
            .any(|(prefix, ops)| ops.contains(&"list") && within(prefix, path))
}

/// The names of the components of the paths `grants` make visible.
fn visible_names(tree: &Tree, grants: &[Grant]) -> BTreeSet<String> {
    tree.paths
        .iter()
        .filter(|p| may_name(grants, p))
        .flat_map(|p| p.split('/').filter(|c| !c.is_empty()).map(str::to_owned))
        .collect()
}

impl Tree {
    /// Draws a tree: files in directories, a second version of some under
    /// label `turn-2`; a branch of the first directory with an edit of its
    /// first file, a move of its second and an added file; then the base
    /// changes the first file too, so a merge conflicts there.
    fn draw(rng: &mut StdRng) -> Tree {
        let mut tree = Tree::default();
        for _ in 0..3 {
            let dir = format!("/{}", token(rng, 'd'));
            tree.paths.insert(dir.clone());
            for _ in 0..3 {
                tree.files.push(format!("{dir}/{}.txt", token(rng, 'f')));
            }
        }
        tree.files.push(format!("/{}.txt", token(rng, 'f')));
        let files = tree.files.clone();
        for file in &files {
            tree.paths.insert(file.clone());
            tree.add(rng, file, "second line", None, None);
        }
        for file in files.iter().step_by(2) {
            tree.add(rng, file, "second line\nthird line", Some("turn-2"), None);
        }
        let root = files[0].rsplit_once('/').unwrap().0.to_owned();
        tree.add(rng, &files[0], "in the branch", None, Some(BRANCH));
        let moved = format!("{root}/{}.txt", token(rng, 'f'));
        tree.paths.insert(moved.clone());
        for holders in tree.sentinels.values_mut() {
            if holders.contains(&files[1]) {
                holders.push(moved.clone());
            }
        }
        let added = format!("{root}/{}.txt", token(rng, 'f'));
        tree.paths.insert(added.clone());
        tree.add(rng, &added, "added", None, Some(BRANCH));
        tree.add(rng, &files[0], "on the base", None, None);
        tree.branch_root = root;
        tree.moved = (files[1].clone(), moved);
        tree
    }

    /// A write of `path` whose content carries a new sentinel.
    fn add(
        &mut self,
        rng: &mut StdRng,
        path: &str,
        rest: &str,
        label: Option<&'static str>,
        branch: Option<&'static str>,
    ) {
        let sentinel = token(rng, 'S');
        let content = format!("{sentinel}\n{rest}\n");
        self.sentinels.insert(sentinel, vec![path.to_owned()]);
        self.writes.push((path.to_owned(), content, label, branch));
    }

    /// Builds the tree on the server, as the admin. The writes in the
    /// branch come after it is forked, the move after them.
    async fn build(&self, runner: &Runner) {
        let mut forked = false;
        for (path, content, label, branch) in &self.writes {
            if branch.is_some() && !forked {
                forked = true;
                let request = json!({"name": BRANCH, "path": self.branch_root});
                let created = call(runner, ADMIN, None, "Filesystem.CreateBranch", request).await;
                assert!(created.is_ok(), "CreateBranch: {created:?}");
                let (from, to) = &self.moved;
                let request = json!({"source": from, "destination": to});
                let moved = call(runner, ADMIN, Some(BRANCH), "Filesystem.Move", request).await;
                assert!(moved.is_ok(), "Move in the branch: {moved:?}");
            }
            write(runner, path, content, *label, *branch).await;
        }
    }
}

async fn write(runner: &Runner, path: &str, text: &str, label: Option<&str>, branch: Option<&str>) {
    let scope = Scope {
        session: "disclosure",
        namespace: None,
        token: ADMIN,
        label,
        branch,
    };
    let request = json!({"path": path, "content": text});
    let answer = runner.call("Filesystem.Write", request, &scope, None).await;
    assert!(matches!(answer, Ok(Ok(_))), "Write {path}: {answer:?}");
}

/// One call by name as `token`, in `branch` when given: the answer or the
/// error, as JSON.
async fn call(
    runner: &Runner,
    token: &str,
    branch: Option<&str>,
    method: &str,
    request: Value,
) -> Result<Value, Value> {
    let scope = Scope {
        session: "disclosure",
        namespace: None,
        token,
        label: None,
        branch,
    };
    runner
        .call(method, request, &scope, None)
        .await
        .unwrap_or_else(|broken| panic!("{method}: {broken}"))
}

/// A stateless MCP request as `token`: the raw HTTP answer.
async fn mcp(server: &Server, token: &str, method: &str, params: Value) -> String {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let name = params["name"]
        .as_str()
        .or(params["uri"].as_str())
        .map_or(String::new(), |n| format!("mcp-name: {n}\r\n"));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         mcp-protocol-version: 2026-07-28\r\nmcp-method: {method}\r\n{name}\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let addr = server.url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    tokio::time::timeout(std::time::Duration::from_secs(30), read)
        .await
        .expect("MCP answers within 30 s")
        .expect("MCP answer");
    String::from_utf8_lossy(&answer).into_owned()
}

/// Every text an answer holds: its strings, and what its base64 strings
/// (bytes fields) decode to.
fn texts(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
            if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(s) {
                out.push_str(&String::from_utf8_lossy(&bytes));
                out.push('\n');
            }
        }
        Value::Array(items) => items.iter().for_each(|v| texts(v, out)),
        Value::Object(fields) => fields.iter().for_each(|(k, v)| {
            out.push_str(k);
            out.push('\n');
            texts(v, out);
        }),
        other => {
            out.push_str(&other.to_string());
            out.push('\n');
        }
    }
}

/// The calls one principal makes: (what, method or MCP method, request,
/// branch).
fn calls(tree: &Tree) -> Vec<(String, Value, Option<&'static str>)> {
    let mut out = Vec::new();
    let mut push = |method: &str, request: Value, branch: Option<&'static str>| {
        out.push((method.to_owned(), request, branch));
    };
    for branch in [None, Some(BRANCH)] {
        push("Filesystem.ListInfo", json!({"path": "/"}), branch);
        push(
            "Filesystem.Glob",
            json!({"pattern": "**", "path": "/"}),
            branch,
        );
        push(
            "Filesystem.Grep",
            json!({"pattern": "S[0-9a-f]", "path": "/"}),
            branch,
        );
        for path in &tree.paths {
            push("Filesystem.ListInfo", json!({"path": path}), branch);
            push("Filesystem.Stat", json!({"path": path}), branch);
            push("Filesystem.Read", json!({"path": path}), branch);
            push("Filesystem.ReadBytes", json!({"path": path}), branch);
            push(
                "Filesystem.ReadRe",
                json!({"path": path, "pattern": "S"}),
                branch,
            );
        }
    }
    for path in &tree.paths {
        push("Filesystem.ListVersions", json!({"path": path}), None);
        push(
            "Filesystem.Diff",
            json!({"path": path, "from_version": 1}),
            None,
        );
    }
    push(
        "Filesystem.Watch",
        json!({"path": "/", "stop_at_head": true}),
        None,
    );
    push("Filesystem.ListBranches", json!({}), None);
    push(
        "Filesystem.DiffBranch",
        json!({"name": BRANCH, "limit": 1}),
        None,
    );
    push("Filesystem.DiffBranch", json!({"name": BRANCH}), None);
    push("Filesystem.MergeBranch", json!({"name": BRANCH}), None);
    push(
        "Filesystem.Rewind",
        json!({"path": "/", "label": "turn-2", "dry_run": true}),
        None,
    );
    let tool = |name: &str, args: Value| json!({"name": name, "arguments_json": args.to_string()});
    push("Tools.Invoke", tool("LS", json!({"path": "."})), None);
    push("Tools.Invoke", tool("Glob", json!({"pattern": "**"})), None);
    push(
        "Tools.Invoke",
        tool(
            "Grep",
            json!({"pattern": "S[0-9a-f]", "output_mode": "content"}),
        ),
        None,
    );
    push("Tools.Invoke", tool("BranchList", json!({})), None);
    push(
        "Tools.Invoke",
        tool("BranchDiff", json!({"name": BRANCH})),
        None,
    );
    push(
        "Tools.Invoke",
        tool("BranchMerge", json!({"name": BRANCH})),
        None,
    );
    for path in &tree.paths {
        let rel = path.trim_start_matches('/');
        push(
            "Tools.Invoke",
            tool("Read", json!({"file_path": rel})),
            None,
        );
        push("Tools.Invoke", tool("History", json!({"path": rel})), None);
        push(
            "Tools.Invoke",
            tool(
                "str_replace_based_edit_tool",
                json!({"command": "view", "path": path}),
            ),
            None,
        );
    }
    out
}

/// The grants of a random principal: one to three, on the root, a
/// directory or a file, each with a random non-empty set of operations.
fn random_grants(tree: &Tree, rng: &mut StdRng) -> Vec<Grant> {
    let paths: Vec<&String> = tree.paths.iter().collect();
    (0..rng.random_range(1..=3))
        .map(|_| {
            let prefix = match rng.random_range(0..12) {
                0 => "/".to_owned(),
                1 => tree.branch_root.clone(),
                _ => paths[rng.random_range(0..paths.len())].clone(),
            };
            // Narrow rights, so most principals may see some of the tree
            // and not the rest: one or two operations per grant.
            let mut ops: Vec<&str> = (0..rng.random_range(1..=2))
                .map(|_| OPS[rng.random_range(0..OPS.len())])
                .collect();
            ops.dedup();
            (prefix, ops)
        })
        .collect()
}

fn config(principals: &[(String, Vec<Grant>)]) -> String {
    let mut config = String::from(
        "[[mount]]\nprefix = \"/\"\ntier = \"store\"\n\n[[principal]]\nname = \"admin\"\n\
         token = \"admin-token-0001\"\nnamespace = \"shared\"\n\
         grants = [{ prefix = \"/\", ops = [\"list\", \"file\", \"read_binary\", \"read_file\", \
         \"read_re\", \"write\", \"delete\"] }]\n",
    );
    for (i, (_, grants)) in principals.iter().enumerate() {
        let grants: Vec<String> = grants
            .iter()
            .map(|(prefix, ops)| format!("{{ prefix = {prefix:?}, ops = {ops:?} }}"))
            .collect();
        config.push_str(&format!(
            "\n[[principal]]\nname = \"p{i}\"\ntoken = \"p{i}-token-0001\"\n\
             namespace = \"shared\"\ngrants = [{}]\n",
            grants.join(", ")
        ));
    }
    config
}

#[tokio::test]
async fn no_answer_shows_what_its_caller_may_not_see() {
    let seeds: Vec<u64> = match std::env::var("AGENTVFS_DISCLOSURE_SEED") {
        Ok(seed) => vec![seed.parse().expect("AGENTVFS_DISCLOSURE_SEED is a number")],
        Err(_) => (51..55).collect(),
    };
    for seed in seeds {
        let failures = shown_to_whom_it_may_not(seed).await;
        assert!(
            failures.is_empty(),
            "seed {seed}: {} answers show what their caller may not see:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// Draws the tree and the principals of `seed`, makes every call, and
/// answers each answer that shows what its caller may not see.
async fn shown_to_whom_it_may_not(seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let tree = Tree::draw(&mut rng);
    let principals: Vec<(String, Vec<Grant>)> = (0..PRINCIPALS)
        .map(|i| (format!("p{i}-token-0001"), random_grants(&tree, &mut rng)))
        .collect();
    let server = Server::start_with(Some(&config(&principals)), &[]);
    let runner = Runner {
        pool: DescriptorPool::decode(FILE_DESCRIPTOR_SET).expect("descriptor set"),
        channel: server.channel().await,
        token: ADMIN.into(),
    };
    tree.build(&runner).await;
    let mut failures = Vec::new();
    for (token, grants) in &principals {
        let names = visible_names(&tree, grants);
        let hidden_names: Vec<String> = tree
            .paths
            .iter()
            .flat_map(|p| p.split('/').filter(|c| !c.is_empty()).map(str::to_owned))
            .filter(|n| !names.contains(n))
            .collect();
        let hidden_content: Vec<&String> = tree
            .sentinels
            .iter()
            .filter(|(_, holders)| {
                !holders.iter().any(|file| {
                    let ops = ops_on(grants, file);
                    READS.iter().any(|op| ops.contains(op))
                })
            })
            .map(|(sentinel, _)| sentinel)
            .collect();
        let mut answers = Vec::new();
        for (method, request, branch) in calls(&tree) {
            let answer = call(&runner, token, branch, &method, request.clone()).await;
            let answer = answer.unwrap_or_else(|error| error);
            answers.push((
                format!("{method} {request} (branch {branch:?})"),
                request,
                answer,
            ));
        }
        for (method, params) in [
            ("resources/list", json!({})),
            (
                "tools/call",
                json!({"name": "LS", "arguments": {"path": "."}}),
            ),
        ] {
            let raw = mcp(&server, token, method, params.clone()).await;
            answers.push((format!("MCP {method}"), params, Value::String(raw)));
        }
        for path in &tree.paths {
            let params = json!({"uri": format!("agentvfs://{path}")});
            let raw = mcp(&server, token, "resources/read", params.clone()).await;
            answers.push((
                format!("MCP resources/read {path}"),
                params,
                Value::String(raw),
            ));
        }
        for (what, request, answer) in answers {
            let mut shown = String::new();
            texts(&answer, &mut shown);
            let asked = request.to_string();
            for name in hidden_names.iter().filter(|n| !asked.contains(n.as_str())) {
                if shown.contains(name.as_str()) {
                    failures.push(format!(
                        "{token} {grants:?}: {what} names {name}, which it may not see: {answer}"
                    ));
                }
            }
            for sentinel in hidden_content.iter().filter(|s| shown.contains(s.as_str())) {
                failures.push(format!(
                    "{token} {grants:?}: {what} carries {sentinel} of {:?}, which it may not \
                     read: {answer}",
                    tree.sentinels[*sentinel]
                ));
            }
        }
    }
    failures
}
