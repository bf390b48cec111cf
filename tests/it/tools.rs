//! The Tools service through the real server: golden texts of every tool's
//! success, partial and error envelopes, grants and the project root, the
//! output budget, and a scripted agent loop driven by ListTools' schemas.
//!
//! Every envelope any test sees goes through [`validate`], which checks the
//! protocol (docs/contract.md § The tool envelope): only the allowed top-level keys, `error`
//! present exactly when status is "error", a code from docs/contract.md's list,
//! `data.truncated` only with status "partial", `stats.time_ms` present,
//! `context.cwd` / `context.params_input` present, and the protobuf envelope
//! agreeing with the JSON one.

use crate::util::{Server, write};
use agentvfs::pb;
use agentvfs::pb::tools_client::ToolsClient;
use serde_json::{Value, json};
use tonic::Request;
use tonic::transport::Channel;

const CODES: &[&str] = &[
    "INVALID_PARAM",
    "NOT_FOUND",
    "ACCESS_DENIED",
    "CONFLICT",
    "IS_DIRECTORY",
    "BINARY_FILE",
    "TIMEOUT",
    "INTERNAL_ERROR",
];

/// Checks one envelope against the protocol; panics naming the breach.
#[track_caller]
fn validate(json_text: &str, proto: &pb::Envelope) -> Value {
    let v: Value = serde_json::from_str(json_text).expect("envelope_json is JSON");
    let o = v.as_object().expect("envelope is an object");
    let keys: Vec<&str> = o.keys().map(String::as_str).collect();
    let status = o["status"].as_str().expect("status is a string");
    let expected: &[&str] = if status == "error" {
        &["status", "data", "text", "stats", "context", "error"]
    } else {
        &["status", "data", "text", "stats", "context"]
    };
    assert_eq!(keys, expected, "top-level keys of {json_text}");
    assert!(
        ["success", "partial", "error"].contains(&status),
        "{json_text}"
    );
    assert!(o["data"].is_object() && o["stats"].is_object() && o["context"].is_object());
    assert!(o["text"].is_string());
    if status == "error" {
        let code = o["error"]["code"].as_str().expect("error.code");
        assert!(CODES.contains(&code), "unknown code {code}");
        assert!(o["error"]["message"].is_string());
        assert_eq!(
            proto.error.as_ref().map(|e| e.code.as_str()),
            Some(code),
            "proto error"
        );
    } else {
        assert!(proto.error.is_none());
    }
    if o["data"].get("truncated") == Some(&Value::Bool(true)) {
        assert_eq!(status, "partial", "truncated implies partial: {json_text}");
    }
    assert!(o["stats"]["time_ms"].is_u64(), "stats.time_ms: {json_text}");
    assert!(o["context"]["cwd"].is_string(), "context.cwd: {json_text}");
    assert!(o["context"]["params_input"].is_object());
    assert_eq!(proto.status, status);
    assert_eq!(proto.text, o["text"].as_str().unwrap());
    let stats = proto.stats.as_ref().expect("proto stats");
    assert!(stats.fields.contains_key("time_ms"));
    v
}

/// Times vary: `12ms` becomes `Tms`.
fn golden(text: &str) -> String {
    regex::Regex::new(r"\d+ms")
        .unwrap()
        .replace_all(text, "Tms")
        .into_owned()
}

/// A tools client that validates every envelope it receives.
struct Agent {
    tools: ToolsClient<Channel>,
    token: Option<String>,
}

impl Agent {
    async fn new(server: &Server) -> Agent {
        Agent {
            tools: ToolsClient::new(server.channel().await),
            token: None,
        }
    }

    fn request<T>(&self, msg: T) -> Request<T> {
        let mut req = Request::new(msg);
        if let Some(token) = &self.token {
            req.metadata_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        req
    }

    async fn raw(&mut self, name: &str, arguments_json: &str, id: &str) -> Value {
        let req = self.request(pb::InvokeRequest {
            name: name.into(),
            arguments_json: arguments_json.into(),
            tool_call_id: id.into(),
        });
        let r = self
            .tools
            .invoke(req)
            .await
            .expect("Invoke never fails")
            .into_inner();
        validate(&r.envelope_json, r.envelope.as_ref().expect("envelope"))
    }

    async fn call(&mut self, name: &str, args: Value) -> Value {
        self.raw(name, &args.to_string(), "call_test").await
    }

    /// Calls and returns the text, asserting the status.
    async fn text(&mut self, name: &str, args: Value, status: &str) -> String {
        let env = self.call(name, args).await;
        assert_eq!(env["status"], status, "{env}");
        golden(env["text"].as_str().unwrap())
    }

    /// Calls, expects an error with `code`, returns its message.
    async fn error(&mut self, name: &str, args: Value, code: &str) -> String {
        let env = self.call(name, args).await;
        assert_eq!(env["status"], "error", "{env}");
        assert_eq!(env["error"]["code"], code, "{env}");
        assert_eq!(env["text"], env["error"]["message"]);
        env["error"]["message"].as_str().unwrap().to_owned()
    }

    /// [`Agent::expect_error`] for each `(args, code, message)`.
    async fn expect_errors(&mut self, name: &str, cases: &[(Value, &str, &str)]) {
        for (args, code, message) in cases {
            self.expect_error(name, args.clone(), code, message).await;
        }
    }

    /// Calls, expects an error with `code` and exactly `message`.
    async fn expect_error(
        &mut self,
        name: &str,
        args: Value,
        code: &str,
        message: impl AsRef<str>,
    ) {
        let context = format!("{name} {args}");
        assert_eq!(
            self.error(name, args, code).await,
            message.as_ref(),
            "{context}"
        );
    }

    async fn version(&mut self, path: &str) -> u64 {
        let env = self.call("Read", json!({"path": path})).await;
        version_of(&env["stats"]["version"])
    }
}

/// A version as the envelopes show it: a string of decimal digits
/// (docs/tools.md § Versions).
#[track_caller]
fn version_of(shown: &Value) -> u64 {
    shown
        .as_str()
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("a version is a string of digits, not {shown}"))
}

async fn start() -> (Server, Agent) {
    let server = Server::start();
    let agent = Agent::new(&server).await;
    (server, agent)
}

/// ListTools gives the tools in order, each with a description and a
/// JSON Schema object whose required parameters are among its properties.
#[tokio::test]
async fn list_tools_describes_every_tool_with_a_json_schema() {
    let (_server, mut agent) = start().await;
    let tools = agent
        .tools
        .list_tools(pb::ListToolsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tools;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "LS",
            "Glob",
            "Grep",
            "Read",
            "Write",
            "Edit",
            "MultiEdit",
            "History",
            "ApplyPatch",
            "memory",
            "str_replace_based_edit_tool",
            "Delete",
            "Move",
            "Copy",
            "BranchCreate",
            "BranchList",
            "BranchDiff",
            "BranchMerge",
            "BranchDiscard"
        ]
    );
    for t in &tools {
        assert!(t.description.len() > 40, "{} needs a description", t.name);
        let schema: Value = serde_json::from_str(&t.parameters_json_schema).unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        let props = schema["properties"].as_object().unwrap();
        for r in schema["required"].as_array().unwrap() {
            assert!(props.contains_key(r.as_str().unwrap()), "{}: {r}", t.name);
        }
    }
    let ls: Value = serde_json::from_str(&tools[0].parameters_json_schema).unwrap();
    assert_eq!(ls["properties"]["path"]["default"], ".");
    assert_eq!(ls["properties"]["limit"]["default"], 100);
    assert_eq!(ls["required"], json!([]));
    let glob: Value = serde_json::from_str(&tools[1].parameters_json_schema).unwrap();
    assert_eq!(glob["required"], json!(["pattern"]));
    assert_eq!(glob["properties"]["limit"]["default"], 50);
}

async fn ls_fixture(server: &Server) {
    let mut fs = server.fs().await;
    for path in [
        "/ls/b.txt",
        "/ls/A.md",
        "/ls/sub/x.rs",
        "/ls/Zdir/y",
        "/ls/.env",
        "/ls/node_modules/m.js",
        "/ls/debug.log",
    ] {
        write(&mut fs, path, "x\n").await;
    }
}

/// LS text line for line (docs/contract.md § LS): totals, directories first with `/`,
/// names sorted ignoring case, hidden/ignored entries counted, data and stats.
#[tokio::test]
async fn ls_lists_directories_first_with_the_contract_text() {
    let (server, mut agent) = start().await;
    ls_fixture(&server).await;
    let env = agent.call("LS", json!({"path": "ls"})).await;
    assert_eq!(env["status"], "success");
    assert_eq!(
        env["text"],
        "Listed 5 entries in 'ls'\n(Total: 5 items - 2 dirs, 3 files, 0 links)\n\
         [Skipped: 2 hidden or ignored entries (.*, .git, node_modules, ...). Use include_hidden=true to show them.]\n\n\
         ls/sub/\nls/Zdir/\nls/A.md\nls/b.txt\nls/debug.log"
    );
    assert_eq!(
        env["data"]["entries"][0],
        json!({"path": "ls/sub", "type": "dir"})
    );
    assert_eq!(env["data"]["truncated"], false);
    assert_eq!(
        env["stats"],
        json!({"time_ms": env["stats"]["time_ms"], "total_entries": 5, "dirs": 2, "files": 3, "links": 0, "returned": 5})
    );
    assert_eq!(
        env["context"],
        json!({"cwd": ".", "params_input": {"path": "ls"}, "path_resolved": "ls"})
    );
    let all = agent
        .text(
            "LS",
            json!({"path": "/ls/", "include_hidden": true}),
            "success",
        )
        .await;
    assert!(
        all.contains("ls/node_modules/\n")
            && all.ends_with("ls/.env\nls/A.md\nls/b.txt\nls/debug.log"),
        "{all}"
    );
    let filtered = agent
        .text(
            "LS",
            json!({"path": "ls", "ignore": ["*.log", "ls/sub/**", "sub"]}),
            "success",
        )
        .await;
    assert_eq!(
        filtered,
        "Listed 3 entries in 'ls'\n(Total: 3 items - 1 dirs, 2 files, 0 links)\n\
         [Skipped: 2 hidden or ignored entries (.*, .git, node_modules, ...). Use include_hidden=true to show them.]\n\
         [Skipped: 2 entries matching the ignore patterns.]\n\nls/Zdir/\nls/A.md\nls/b.txt"
    );
}

/// LS pages with offset/limit: partial, the Truncated line and the next offset.
#[tokio::test]
async fn ls_paginates_with_truncated_note_and_next_offset() {
    let (server, mut agent) = start().await;
    ls_fixture(&server).await;
    let env = agent.call("LS", json!({"path": "ls", "limit": 2})).await;
    assert_eq!(env["status"], "partial");
    assert_eq!(env["data"]["truncated"], true);
    assert_eq!(
        env["text"],
        "Listed 2 entries in 'ls'\n(Total: 5 items - 2 dirs, 3 files, 0 links)\n\
         [Truncated: Showing 0-2 of 5. 3 more items available.]\nUse offset=2 to view next page.\n\
         [Skipped: 2 hidden or ignored entries (.*, .git, node_modules, ...). Use include_hidden=true to show them.]\n\n\
         ls/sub/\nls/Zdir/"
    );
    let last = agent
        .text(
            "LS",
            json!({"path": "ls", "offset": 4, "limit": 2}),
            "success",
        )
        .await;
    assert!(
        last.starts_with("Listed 1 entries in 'ls'\n") && last.ends_with("\n\nls/debug.log"),
        "{last}"
    );
}

/// LS errors with docs/contract.md § LS's codes and messages.
#[tokio::test]
async fn ls_errors_use_seed_codes_and_messages() {
    let (server, mut agent) = start().await;
    ls_fixture(&server).await;
    agent
        .expect_errors(
            "LS",
            &[
                (
                    json!({"path": "nope"}),
                    "NOT_FOUND",
                    "Path 'nope' does not exist.",
                ),
                (
                    json!({"path": "ls/b.txt"}),
                    "INVALID_PARAM",
                    "'ls/b.txt' is a file, not a directory. Use 'Read' tool to view its content.",
                ),
                (
                    json!({"path": "../etc"}),
                    "ACCESS_DENIED",
                    "Access denied. Path must be within the project root.",
                ),
                (
                    json!({"limit": "ten"}),
                    "INVALID_PARAM",
                    "offset/limit/ignore must be valid types.",
                ),
                (
                    json!({"ignore": "*.log"}),
                    "INVALID_PARAM",
                    "offset/limit/ignore must be valid types.",
                ),
            ],
        )
        .await;
    assert!(
        agent
            .error("LS", json!({"limit": 500}), "INVALID_PARAM")
            .await
            .starts_with("offset/limit/ignore must be valid types. limit must be an integer between 1 and 200")
    );
    agent
        .expect_error("LS", json!({"path": ".", "recursive": true}), "INVALID_PARAM", "Unknown parameter 'recursive' for LS. Valid parameters: path, offset, limit, include_hidden, ignore.")
        .await;
}

async fn glob_fixture(server: &Server) {
    let mut fs = server.fs().await;
    for path in [
        "/g/src/main.py",
        "/g/src/utils/io.py",
        "/g/top.py",
        "/g/.hidden.py",
        "/g/node_modules/dep.py",
        "/g/notes.md",
    ] {
        write(&mut fs, path, "x\n").await;
    }
}

/// Glob text line for line (docs/contract.md § Glob and Grep): `*` stays in one segment, `**`
/// crosses, hidden and ignored skips are counted with the parameter to use.
#[tokio::test]
async fn glob_matches_with_seed_text_and_segment_rules() {
    let (server, mut agent) = start().await;
    glob_fixture(&server).await;
    let env = agent
        .call("Glob", json!({"pattern": "**/*.py", "path": "g"}))
        .await;
    assert_eq!(env["status"], "success");
    assert_eq!(
        golden(env["text"].as_str().unwrap()),
        "Found 3 files matching '**/*.py' in 'g'\n(Scanned 8 items in Tms)\n\
         [Skipped: 1 ignored entries (.git, node_modules, target, dist, ...). Use include_ignored=true to include them.]\n\
         [Skipped: 1 hidden entries (names starting with '.'). Use include_hidden=true to include them.]\n\n\
         g/src/main.py\ng/src/utils/io.py\ng/top.py"
    );
    assert_eq!(
        env["data"],
        json!({"paths": ["g/src/main.py", "g/src/utils/io.py", "g/top.py"], "truncated": false})
    );
    assert_eq!(env["stats"]["matched"], 3);
    assert_eq!(env["stats"]["visited"], 8);
    assert_eq!(
        env["context"],
        json!({"cwd": ".", "params_input": {"pattern": "**/*.py", "path": "g"}, "path_resolved": "g", "pattern_normalized": "**/*.py"})
    );
    let flat = agent
        .text("Glob", json!({"pattern": "./*.py", "path": "g"}), "success")
        .await;
    assert!(
        flat.starts_with("Found 1 files matching './*.py' in 'g'")
            && flat.ends_with("\n\ng/top.py"),
        "{flat}"
    );
    let all = agent
        .call("Glob", json!({"pattern": "**/*.py", "path": "g", "include_hidden": true, "include_ignored": true}))
        .await;
    assert_eq!(all["data"]["paths"].as_array().unwrap().len(), 5);
    assert_eq!(
        agent
            .text("Glob", json!({"pattern": "*.rs", "path": "g"}), "success")
            .await,
        "No files found matching '*.rs' in 'g'\n(Scanned 8 items in Tms)\n\
         [Skipped: 1 ignored entries (.git, node_modules, target, dist, ...). Use include_ignored=true to include them.]\n\
         [Skipped: 1 hidden entries (names starting with '.'). Use include_hidden=true to include them.]"
    );
}

/// Glob cut by limit is partial with data.truncated and a Truncated note.
#[tokio::test]
async fn glob_limit_truncates_as_partial() {
    let (server, mut agent) = start().await;
    glob_fixture(&server).await;
    let env = agent
        .call(
            "Glob",
            json!({"pattern": "**/*.py", "path": "g", "limit": 2}),
        )
        .await;
    assert_eq!(env["status"], "partial");
    assert_eq!(env["data"]["truncated"], true);
    assert!(env["data"].get("aborted_reason").is_none());
    let text = golden(env["text"].as_str().unwrap());
    assert!(
        text.starts_with("Found 2 files matching '**/*.py' in 'g'\n(Scanned ")
            && text.contains("\n[Truncated: Showing first 2 matches. Narrow pattern or path.]\n")
            && text.ends_with("\n\ng/src/main.py\ng/src/utils/io.py"),
        "{text}"
    );
}

/// Glob errors with docs/contract.md § Glob and Grep's codes and messages.
#[tokio::test]
async fn glob_errors_use_seed_codes_and_messages() {
    let (server, mut agent) = start().await;
    glob_fixture(&server).await;
    agent
        .expect_error(
            "Glob",
            json!({"path": "g"}),
            "INVALID_PARAM",
            "Missing required parameter 'pattern'.",
        )
        .await;
    for limit in [json!(0), json!(201), json!("5")] {
        agent
            .expect_error(
                "Glob",
                json!({"pattern": "*", "limit": limit}),
                "INVALID_PARAM",
                "limit must be an integer between 1 and 200.",
            )
            .await;
    }
    agent
        .expect_errors(
            "Glob",
            &[
                (
                    json!({"pattern": "*", "path": "missing"}),
                    "NOT_FOUND",
                    "Search root 'missing' does not exist.",
                ),
                (
                    json!({"pattern": "*", "path": "g/top.py"}),
                    "INVALID_PARAM",
                    "Search root 'g/top.py' is not a directory.",
                ),
                (
                    json!({"pattern": "*", "path": "/../x"}),
                    "ACCESS_DENIED",
                    "Access denied. Path must be within project root.",
                ),
            ],
        )
        .await;
}

/// Grep sorts by modification time (newest first), renders the three
/// modes, context lines and the Truncated note, and reports ignored files.
#[tokio::test]
async fn grep_sorts_by_mtime_and_renders_every_mode() {
    let (server, mut agent) = start().await;
    let mut fs = server.fs().await;
    write(&mut fs, "/r/old.rs", "fn old() {}\n// TODO old\n").await;
    write(
        &mut fs,
        "/r/a/new.rs",
        "one\n// todo new\nthree\n// TODO again\n",
    )
    .await;
    write(&mut fs, "/r/node_modules/x.js", "// TODO dep\n").await;
    let env = agent
        .call("Grep", json!({"pattern": "todo", "path": "r"}))
        .await;
    assert_eq!(env["status"], "success");
    assert_eq!(
        golden(env["text"].as_str().unwrap()),
        "Found 3 matches in 2 files for 'todo' in 'r'\n(Sorted by mtime desc. Took Tms)\n\
         [Skipped: 1 ignored entries (.git, node_modules, target, dist, ...). Use include_ignored=true to include them.]\n\n\
         r/a/new.rs\nr/old.rs"
    );
    assert_eq!(
        env["data"]["matches"],
        json!([
            {"file": "r/a/new.rs", "line": 2, "text": "// todo new"},
            {"file": "r/a/new.rs", "line": 4, "text": "// TODO again"},
            {"file": "r/old.rs", "line": 2, "text": "// TODO old"}
        ])
    );
    assert_eq!(env["stats"]["matched_files"], 2);
    assert_eq!(env["stats"]["matched_lines"], 3);
    let content = agent
        .text("Grep", json!({"pattern": "TODO", "path": "r", "case_sensitive": true, "output_mode": "content"}), "success")
        .await;
    assert!(
        content.ends_with("\n\nr/a/new.rs:4:// TODO again\nr/old.rs:2:// TODO old"),
        "{content}"
    );
    let count = agent
        .text("Grep", json!({"pattern": "todo", "path": "r", "output_mode": "count", "include_ignored": true}), "success")
        .await;
    assert!(
        count.ends_with("\n\nr/node_modules/x.js:1\nr/a/new.rs:2\nr/old.rs:1"),
        "newest first: {count}"
    );
    let ctx = agent
        .text(
            "Grep",
            json!({"pattern": "todo new", "path": "r", "output_mode": "content", "context": 1}),
            "success",
        )
        .await;
    assert!(
        ctx.ends_with("\n\nr/a/new.rs-1-one\nr/a/new.rs:2:// todo new\nr/a/new.rs-3-three"),
        "{ctx}"
    );
    let cut = agent
        .call(
            "Grep",
            json!({"pattern": "todo", "path": "r", "limit": 1, "output_mode": "content"}),
        )
        .await;
    assert_eq!(cut["status"], "partial");
    assert_eq!(cut["data"]["truncated"], true);
    assert_eq!(
        golden(cut["text"].as_str().unwrap()),
        "Found 3 matches in 2 files for 'todo' in 'r'\n(Sorted by mtime desc. Took Tms)\n\
         [Truncated: Showing first 1 matches. Narrow pattern or path.]\n\
         [Skipped: 1 ignored entries (.git, node_modules, target, dist, ...). Use include_ignored=true to include them.]\n\n\
         r/a/new.rs:2:// todo new"
    );
    let only_rs = agent
        .call("Grep", json!({"pattern": "old", "include": "*.rs"}))
        .await;
    assert_eq!(only_rs["data"]["matches"].as_array().unwrap().len(), 2);
}

/// Grep with no match, a bad regex, a bad mode and a missing path.
#[tokio::test]
async fn grep_errors_and_no_match_text() {
    let (server, mut agent) = start().await;
    write(&mut server.fs().await, "/r/a.txt", "alpha\n").await;
    assert_eq!(
        agent
            .text("Grep", json!({"pattern": "zeta", "path": "r"}), "success")
            .await,
        "No matches found for 'zeta' in 'r'\n(Sorted by mtime desc. Took Tms)"
    );
    assert!(
        agent
            .error("Grep", json!({"pattern": "a("}), "INVALID_PARAM")
            .await
            .starts_with("Invalid regex pattern: ")
    );
    agent
        .expect_errors(
            "Grep",
            &[
                (
                    json!({"pattern": "a", "output_mode": "lines"}),
                    "INVALID_PARAM",
                    "output_mode must be one of files_with_matches, content, count; got 'lines'.",
                ),
                (
                    json!({"pattern": "a", "limit": 1001}),
                    "INVALID_PARAM",
                    "limit must be an integer between 1 and 1000.",
                ),
                (
                    json!({"pattern": "a", "path": "nope"}),
                    "NOT_FOUND",
                    "Path 'nope' does not exist.",
                ),
            ],
        )
        .await;
}

/// Read numbers lines, pages with a Truncated note, and reports the version.
#[tokio::test]
async fn read_numbers_lines_and_pages() {
    let (server, mut agent) = start().await;
    let mut fs = server.fs().await;
    let w = write(&mut fs, "/doc.txt", "one\ntwo\nthree\nfour\nfive\n").await;
    let env = agent
        .call(
            "Read",
            json!({"path": "doc.txt", "start_line": 2, "limit": 2}),
        )
        .await;
    assert_eq!(env["status"], "partial");
    assert_eq!(
        env["text"],
        "Read 2 lines from 'doc.txt' (Lines 2-3).\n\
         [Truncated: Showing 2 of 5 lines. Use start_line=4 to continue (2 lines remaining).]\n\n     2\ttwo\n     3\tthree"
    );
    assert_eq!(env["stats"]["total_lines"], 5);
    assert_eq!(env["stats"]["file_size_bytes"], 24);
    assert_eq!(env["stats"]["version"], w.version.to_string());
    assert!(env["stats"]["file_mtime_ms"].as_u64().unwrap() > 1_600_000_000_000);
    assert_eq!(
        agent
            .text(
                "Read",
                json!({"path": "/doc.txt", "start_line": 4}),
                "success"
            )
            .await,
        "Read 2 lines from 'doc.txt' (Lines 4-5).\n\n     4\tfour\n     5\tfive"
    );
    write(&mut fs, "/empty.txt", "").await;
    assert_eq!(
        agent
            .text("Read", json!({"path": "empty.txt"}), "success")
            .await,
        "Read 0 lines from 'empty.txt' (file is empty)."
    );
}

/// Read's errors: missing, directory, binary, past the end, bad limit; and
/// invalid UTF-8 read with replacement as partial with a warning.
#[tokio::test]
async fn read_errors_and_lossy_text() {
    let (server, mut agent) = start().await;
    let mut fs = server.fs().await;
    write(&mut fs, "/d/doc.txt", "a\nb\n").await;
    write(&mut fs, "/bin.dat", "MZ\0\0\u{1}").await;
    agent
        .expect_errors(
            "Read",
            &[
                (
                    json!({"path": "d/none.txt"}),
                    "NOT_FOUND",
                    "File 'd/none.txt' does not exist.",
                ),
                (
                    json!({"path": "d"}),
                    "IS_DIRECTORY",
                    "Path 'd' is a directory. Use LS to explore it.",
                ),
                (
                    json!({"path": "bin.dat"}),
                    "BINARY_FILE",
                    "File 'bin.dat' appears to be binary. Cannot read as text.",
                ),
                (
                    json!({"path": "d/doc.txt", "start_line": 5}),
                    "INVALID_PARAM",
                    "start_line (5) exceeds file length (2 lines). Valid range: 1 to 2.",
                ),
                (
                    json!({"path": "d/doc.txt", "limit": 2001}),
                    "INVALID_PARAM",
                    "limit must be an integer between 1 and 2000.",
                ),
                (
                    json!({"path": "d/doc.txt", "start_line": 0}),
                    "INVALID_PARAM",
                    "start_line must be an integer >= 1.",
                ),
            ],
        )
        .await;
    let chunks = vec![
        pb::WriteBytesRequest {
            kind: Some(pb::write_bytes_request::Kind::Header(
                pb::WriteBytesHeader {
                    path: "/latin1.txt".into(),
                    ..Default::default()
                },
            )),
        },
        pb::WriteBytesRequest {
            kind: Some(pb::write_bytes_request::Kind::Data(b"caf\xe9\n".to_vec())),
        },
    ];
    fs.write_bytes(tokio_stream::iter(chunks)).await.unwrap();
    let lossy = agent
        .text("Read", json!({"path": "latin1.txt"}), "partial")
        .await;
    assert_eq!(
        lossy,
        "Read 1 lines from 'latin1.txt' (Lines 1-1).\n[Warning: File is not valid UTF-8; invalid bytes \
         are shown as U+FFFD. Edit and MultiEdit cannot change it; Write replaces it whole.]\n\n     1\tcaf\u{fffd}"
    );
}

/// Write creates freely, refuses to overwrite without the version it read or
/// with a stale one, shows a diff, and a dry run changes nothing.
#[tokio::test]
async fn write_creates_and_overwrites_only_the_version_read() {
    let (_server, mut agent) = start().await;
    let env = agent
        .call("Write", json!({"path": "w/new.txt", "content": "a\nb\n"}))
        .await;
    assert_eq!(env["status"], "success");
    assert_eq!(env["text"], "Created 'w/new.txt' (2 lines, 4 bytes).");
    assert_eq!(env["data"]["operation"], "create");
    assert_eq!(env["data"]["applied"], true);
    assert_eq!(
        env["data"]["diff_preview"],
        "--- a/w/new.txt\n+++ b/w/new.txt\n@@ -0,0 +1,2 @@\n+a\n+b"
    );
    let created = version_of(&env["stats"]["version"]);
    agent
        .expect_error("Write", json!({"path": "w/new.txt", "content": "x\n"}), "CONFLICT", "File 'w/new.txt' already exists. Read it first and pass the version from Read's stats as expected_version to overwrite it.")
        .await;
    let dry = agent
        .text("Write", json!({"path": "w/new.txt", "content": "a\nc\n", "expected_version": created, "dry_run": true}), "success")
        .await;
    assert_eq!(
        dry,
        "[Dry Run] Would update 'w/new.txt' (+1/-1 lines, 4 bytes).\n\n--- a/w/new.txt\n+++ b/w/new.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c"
    );
    assert_eq!(
        agent.version("w/new.txt").await,
        created,
        "dry run wrote nothing"
    );
    let updated = agent
        .call(
            "Write",
            json!({"path": "w/new.txt", "content": "a\nc\n", "expected_version": created}),
        )
        .await;
    assert!(
        updated["text"]
            .as_str()
            .unwrap()
            .starts_with("Updated 'w/new.txt' (+1/-1 lines, 4 bytes).\n\n--- a/w/new.txt")
    );
    assert_eq!(updated["data"]["operation"], "update");
    let now = version_of(&updated["stats"]["version"]);
    assert!(now > created);
    agent
        .expect_error("Write", json!({"path": "w/new.txt", "content": "z\n", "expected_version": created}), "CONFLICT", format!(
            "File has been modified since you read it (you read version {created}, it is now version {now}). Read 'w/new.txt' again and retry with the version from Read's stats."
        ))
        .await;
    assert_eq!(
        agent
            .text(
                "Write",
                json!({"path": "w/x.txt", "content": "", "dry_run": true}),
                "success"
            )
            .await,
        "[Dry Run] Would create 'w/x.txt' (0 lines, 0 bytes)."
    );
    agent
        .expect_errors(
            "Write",
            &[
                (
                    json!({"path": "w", "content": "x", "expected_version": 0}),
                    "IS_DIRECTORY",
                    "Path 'w' is a directory. Use LS to explore it; write to a file path.",
                ),
                (
                    json!({"path": "w/y.txt"}),
                    "INVALID_PARAM",
                    "Missing required parameter 'content'.",
                ),
            ],
        )
        .await;
}

/// Edit replaces a unique string, shows the diff and the new version; a
/// stale version is a CONFLICT; CRLF files stay CRLF.
#[tokio::test]
async fn edit_replaces_and_keeps_crlf() {
    let (server, mut agent) = start().await;
    let mut fs = server.fs().await;
    write(
        &mut fs,
        "/e/main.rs",
        "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n",
    )
    .await;
    let v = agent.version("e/main.rs").await;
    let env = agent
        .call("Edit", json!({"path": "e/main.rs", "old_string": "let x = 1;", "new_string": "let x = 2;", "expected_version": v}))
        .await;
    assert_eq!(env["status"], "success");
    assert_eq!(
        env["text"],
        "Edited 'e/main.rs' (+1/-1 lines, 50 bytes).\n\n--- a/e/main.rs\n+++ b/e/main.rs\n@@ -1,4 +1,4 @@\n fn main() {\n-    let x = 1;\n+    let x = 2;\n     println!(\"{x}\");\n }"
    );
    assert_eq!(env["data"]["replacements"], 1);
    let v2 = version_of(&env["stats"]["version"]);
    agent
        .expect_error("Edit", json!({"path": "e/main.rs", "old_string": "x = 2", "new_string": "x = 3", "expected_version": v}), "CONFLICT", format!("File has been modified since you read it (you read version {v}, it is now version {v2}). Read 'e/main.rs' again and retry with the version from Read's stats."))
        .await;

    write(&mut fs, "/e/win.txt", "one\r\ntwo\r\nthree\r\n").await;
    let v = agent.version("e/win.txt").await;
    agent
        .text("Edit", json!({"path": "e/win.txt", "old_string": "one\ntwo", "new_string": "1\n2\n2b", "expected_version": v}), "success")
        .await;
    let raw = fs
        .read(pb::ReadRequest {
            path: "/e/win.txt".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .content;
    assert_eq!(raw, "1\r\n2\r\n2b\r\nthree\r\n");
}

/// Edit's errors: a missed old_string shows the closest region and what
/// differs; several matches ask for context; empty and identical strings and
/// a missing version are refused before touching the file.
#[tokio::test]
async fn edit_explains_what_differs_when_old_string_is_missing() {
    let (server, mut agent) = start().await;
    let mut fs = server.fs().await;
    write(
        &mut fs,
        "/e/main.rs",
        "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\nlet x = 1;\n",
    )
    .await;
    let v = agent.version("e/main.rs").await;
    let edit = |old: &str, extra: Value| {
        let mut args = json!({"path": "e/main.rs", "old_string": old, "new_string": "y", "expected_version": v});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        args
    };
    agent
        .expect_error("Edit", edit("\tprintln!(\"{x}\");\n}", json!({})), "INVALID_PARAM", "old_string not found in file. It differs only in indentation (leading whitespace: check spaces vs tabs and depth).\n\
         Closest match (lines 3-4, 88% similar):\n     3\t    println!(\"{x}\");\n     4\t}\n\
         Copy old_string exactly from the file (whitespace and indentation included, without the line-number prefix) and retry.")
        .await;
    assert!(
        agent
            .error("Edit", edit("    let z = 1;", json!({})), "INVALID_PARAM")
            .await
            .starts_with("old_string not found in file. First difference at line 1, column 9 of old_string: old_string has \"z\" where the file has \"x\".\nClosest match (line 2, ")
    );
    agent
        .expect_error("Edit", edit("let x = 1;", json!({})), "INVALID_PARAM", "old_string matches 2 times in file. It must be unique. Include more surrounding context (2-5 lines) to make it unique, or set replace_all to replace every occurrence. Matches start at lines 2, 5.")
        .await;
    let all = agent
        .call(
            "Edit",
            edit("let x = 1;", json!({"replace_all": true, "dry_run": true})),
        )
        .await;
    assert_eq!(all["data"]["replacements"], 2);
    assert_eq!(all["data"]["applied"], false);
    assert!(
        all["text"]
            .as_str()
            .unwrap()
            .starts_with("[Dry Run] Would edit 'e/main.rs' (+2/-2 lines, ")
    );
    assert_eq!(agent.version("e/main.rs").await, v, "dry run wrote nothing");
    agent
        .expect_errors(
            "Edit",
            &[
                (
                    edit("", json!({})),
                    "INVALID_PARAM",
                    "old_string must not be empty. To create a file use Write.",
                ),
                (
                    edit("y", json!({})),
                    "INVALID_PARAM",
                    "No changes to make: old_string and new_string are exactly the same.",
                ),
            ],
        )
        .await;
    agent
        .expect_error("Edit", json!({"path": "e/main.rs", "old_string": "a", "new_string": "b"}), "INVALID_PARAM", "Missing required parameter 'expected_version'. Read 'e/main.rs' first and pass the version from Read's stats.")
        .await;
    agent
        .expect_error("Edit", json!({"path": "e/none.rs", "old_string": "a", "new_string": "b", "expected_version": 1}), "NOT_FOUND", "File 'e/none.rs' does not exist. Use Write to create it.")
        .await;
}

/// MultiEdit applies every edit against the original text or none:
/// data.failed_index names the failing edit and the file is unchanged.
#[tokio::test]
async fn multi_edit_is_all_or_nothing_with_failed_index() {
    let (server, mut agent) = start().await;
    write(&mut server.fs().await, "/m.txt", "alpha beta gamma\n").await;
    let v = agent.version("m.txt").await;
    let failing = agent
        .call(
            "MultiEdit",
            json!({"path": "m.txt", "expected_version": v, "edits": [
                {"old_string": "alpha", "new_string": "A"},
                {"old_string": "delta", "new_string": "D"}
            ]}),
        )
        .await;
    assert_eq!(failing["status"], "error");
    assert_eq!(failing["data"], json!({"failed_index": 1}));
    assert!(
        failing["text"]
            .as_str()
            .unwrap()
            .starts_with("edits[1]: old_string not found in file.")
    );
    let overlap = agent
        .call(
            "MultiEdit",
            json!({"path": "m.txt", "expected_version": v, "edits": [
                {"old_string": "alpha beta", "new_string": "x"},
                {"old_string": "beta gamma", "new_string": "y"}
            ]}),
        )
        .await;
    assert_eq!(overlap["error"]["code"], "INVALID_PARAM");
    assert_eq!(overlap["data"]["failed_index"], 1);
    assert_eq!(
        overlap["text"],
        "edits[1]: edit 1 overlaps edit 0 in the original text; merge them into one edit"
    );
    assert_eq!(
        agent.version("m.txt").await,
        v,
        "failed MultiEdits wrote nothing"
    );
    let ok = agent
        .call(
            "MultiEdit",
            json!({"path": "m.txt", "expected_version": v, "edits": [
                {"old_string": "alpha", "new_string": "beta"},
                {"old_string": "beta", "new_string": "BETA"}
            ]}),
        )
        .await;
    assert_eq!(ok["status"], "success");
    assert_eq!(ok["data"]["replacements"], 2);
    assert_eq!(
        agent
            .text("Read", json!({"path": "m.txt"}), "success")
            .await,
        "Read 1 lines from 'm.txt' (Lines 1-1).\n\n     1\tbeta BETA gamma"
    );
    agent
        .expect_error(
            "MultiEdit",
            json!({"path": "m.txt", "expected_version": v, "edits": []}),
            "INVALID_PARAM",
            "Missing required parameter 'edits': give at least one {old_string, new_string} edit.",
        )
        .await;
}

/// Malformed JSON, a non-object and an unknown tool are INVALID_PARAM
/// envelopes, never failed RPCs.
#[tokio::test]
async fn malformed_arguments_and_unknown_tools_are_envelopes() {
    let (_server, mut agent) = start().await;
    let env = agent.raw("LS", "{\"path\": ", "c1").await;
    assert_eq!(env["error"]["code"], "INVALID_PARAM");
    assert!(
        env["text"]
            .as_str()
            .unwrap()
            .starts_with("Malformed arguments: arguments_json is not valid JSON (")
    );
    let env = agent.raw("LS", "[1]", "c2").await;
    assert_eq!(
        env["text"],
        "Malformed arguments: arguments_json must be a JSON object, e.g. {\"path\": \".\"}."
    );
    let env = agent.raw("Bash", "{}", "c3").await;
    assert_eq!(env["error"]["code"], "INVALID_PARAM");
    assert_eq!(
        env["text"],
        "Unknown tool 'Bash'. Available tools: LS, Glob, Grep, Read, Write, Edit, MultiEdit, \
         History, ApplyPatch, memory, str_replace_based_edit_tool, Delete, Move, Copy, \
         BranchCreate, BranchList, BranchDiff, BranchMerge, BranchDiscard."
    );
    let env = agent.raw("LS", "", "c4").await;
    assert_eq!(env["status"], "success", "empty arguments mean defaults");
}

/// A result over the output budget is saved whole under the configured
/// prefix; the envelope is partial, says where, and shows head and tail.
#[tokio::test]
async fn large_results_are_saved_and_previewed() {
    let config = "[tools]\nmax_output_lines = 200\nmax_output_bytes = 8192\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n";
    let server = Server::start_with(Some(config), &[]);
    let mut agent = Agent::new(&server).await;
    let content: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
    let mut fs = server.fs().await;
    write(&mut fs, "/big.txt", &content).await;
    let env = agent
        .raw(
            "Read",
            r#"{"path": "big.txt", "limit": 1000}"#,
            "call/../42",
        )
        .await;
    assert_eq!(env["status"], "partial");
    assert_eq!(
        env["data"]["full_result_path"],
        "large_tool_results/call____42"
    );
    let text = env["text"].as_str().unwrap();
    assert!(
        text.len() <= 8192 && text.lines().count() <= 200,
        "{} bytes",
        text.len()
    );
    assert!(text.starts_with(
        "[Output too large: 1002 lines / 15940 bytes exceeds the limit of 200 lines / 8192 bytes. \
         Full result saved to 'large_tool_results/call____42'. Read it with start_line/limit to page through it, or Grep it.]\n\n\
         Read 1000 lines from 'big.txt' (Lines 1-1000).\n\n     1\tline 1\n"
    ), "{text}");
    assert!(text.contains(" lines omitted] ...\n\n"), "{text}");
    assert!(text.ends_with("  1000\tline 1000"), "{text}");
    let saved = agent
        .call(
            "Read",
            json!({"path": "large_tool_results/call____42", "limit": 3}),
        )
        .await;
    assert_eq!(saved["stats"]["total_lines"], 1002);
    assert!(saved["text"].as_str().unwrap().ends_with(
        "     1\tRead 1000 lines from 'big.txt' (Lines 1-1000).\n     2\t\n     3\t     1\tline 1"
    ));
}

/// Tools act for the caller: a missing grant is an ACCESS_DENIED envelope,
/// LS of a partly visible directory shows only what leads to grants, and the
/// project root confines and relativises paths.
#[tokio::test]
async fn tools_check_grants_and_confine_paths_to_the_root() {
    let config = r#"
[tools]
root = "/proj"

[[mount]]
prefix = "/"
tier = "state"

[[principal]]
name = "admin"
token = "admin-token"
grants = [{ prefix = "/", ops = ["list", "file", "read_file", "read_binary", "read_re", "write", "delete"] }]

[[principal]]
name = "reader"
token = "reader-token"
grants = [{ prefix = "/proj/docs", ops = ["list", "read_file", "read_re"] }]
"#;
    let server = Server::start_with(Some(config), &[]);
    let mut admin = Agent::new(&server).await;
    admin.token = Some("admin-token".into());
    for (path, content) in [("docs/a.md", "hello\n"), ("src/main.rs", "fn main() {}\n")] {
        admin
            .text(
                "Write",
                json!({"path": path, "content": content}),
                "success",
            )
            .await;
    }
    admin
        .text(
            "Write",
            json!({"path": "/outside.txt", "content": "x"}),
            "error",
        )
        .await;
    assert_eq!(
        admin
            .error("Read", json!({"path": "/outside.txt"}), "ACCESS_DENIED")
            .await,
        "Access denied. Path must be within the project root."
    );
    let ls = admin.call("LS", json!({"path": "/proj"})).await;
    assert_eq!(
        ls["data"]["entries"],
        json!([{"path": "docs", "type": "dir"}, {"path": "src", "type": "dir"}])
    );
    assert_eq!(ls["context"]["path_resolved"], ".");

    let mut reader = Agent::new(&server).await;
    reader.token = Some("reader-token".into());
    assert_eq!(
        reader
            .error(
                "Write",
                json!({"path": "docs/b.md", "content": "x"}),
                "ACCESS_DENIED"
            )
            .await,
        "Permission denied accessing 'docs/b.md'."
    );
    assert_eq!(
        reader
            .error("Read", json!({"path": "src/main.rs"}), "ACCESS_DENIED")
            .await,
        "Permission denied accessing 'src/main.rs'."
    );
    let visible = reader.call("LS", json!({})).await;
    assert_eq!(
        visible["data"]["entries"],
        json!([{"path": "docs", "type": "dir"}])
    );
    let found = reader.call("Grep", json!({"pattern": "hello|main"})).await;
    assert_eq!(
        found["data"]["matches"],
        json!([{"file": "docs/a.md", "line": 1, "text": "hello"}])
    );
}

/// The typed RPCs answer exactly like Invoke with the same arguments.
#[tokio::test]
async fn typed_rpcs_answer_like_invoke() {
    let (server, mut agent) = start().await;
    ls_fixture(&server).await;
    let typed = agent
        .tools
        .ls_tool(pb::LsToolRequest {
            path: Some("ls".into()),
            limit: Some(2),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let typed = validate(&typed.envelope_json, typed.envelope.as_ref().unwrap());
    let invoked = agent.call("LS", json!({"path": "ls", "limit": 2})).await;
    assert_eq!(typed["text"], invoked["text"]);
    assert_eq!(typed["data"], invoked["data"]);
    assert_eq!(typed["context"], invoked["context"]);
    let read = agent
        .tools
        .read_tool(pb::ReadToolRequest {
            path: "ls/b.txt".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let read = validate(&read.envelope_json, read.envelope.as_ref().unwrap());
    assert_eq!(
        read["text"],
        "Read 1 lines from 'ls/b.txt' (Lines 1-1).\n\n     1\tx"
    );
    let edit = agent
        .tools
        .multi_edit_tool(pb::MultiEditToolRequest {
            path: "ls/b.txt".into(),
            edits: vec![pb::ToolEdit {
                old_string: "x".into(),
                new_string: "y".into(),
                replace_all: None,
            }],
            expected_version: Some(version_of(&read["stats"]["version"])),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let edit = validate(&edit.envelope_json, edit.envelope.as_ref().unwrap());
    assert_eq!(edit["status"], "success");
}

/// Checks a model's arguments against a parameters schema (the subset
/// ListTools uses: types, required, enum, bounds, no extra properties).
fn conforms(schema: &Value, value: &Value) -> Result<(), String> {
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let is = |t: &str| match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    };
    if !types.is_empty() && !types.iter().any(|t| is(t)) {
        return Err(format!("{value} is not {types:?}"));
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        return Err(format!("{value} not in {allowed:?}"));
    }
    if let (Some(min), Some(v)) = (schema["minimum"].as_i64(), value.as_i64())
        && v < min
    {
        return Err(format!("{v} < {min}"));
    }
    if let (Some(max), Some(v)) = (schema["maximum"].as_i64(), value.as_i64())
        && v > max
    {
        return Err(format!("{v} > {max}"));
    }
    if let Some(o) = value.as_object() {
        for r in schema["required"].as_array().into_iter().flatten() {
            if !o.contains_key(r.as_str().unwrap()) {
                return Err(format!("missing {r}"));
            }
        }
        for (k, v) in o {
            match schema["properties"].get(k) {
                Some(s) => conforms(s, v)?,
                None if schema["additionalProperties"] == false => {
                    return Err(format!("unexpected {k}"));
                }
                None => {}
            }
        }
    }
    if let Some(items) = value.as_array() {
        for item in items {
            conforms(&schema["items"], item)?;
        }
    }
    Ok(())
}

/// An agent loop with no glue code: ListTools' schemas check every scripted
/// model tool call, each call goes through Invoke, and the next call is built
/// from the envelopes the model got back (versions from Read, paths from
/// Glob, line numbers from Grep).
#[tokio::test]
async fn agent_loop_drives_tools_from_list_tools_schemas() {
    let (_server, mut agent) = start().await;
    let specs = agent
        .tools
        .list_tools(pb::ListToolsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tools;
    let schema = |name: &str| -> Value {
        let spec = specs.iter().find(|s| s.name == name).expect("tool listed");
        serde_json::from_str(&spec.parameters_json_schema).unwrap()
    };
    let mut transcript: Vec<(String, Value)> = Vec::new();
    let mut step = |name: &str, args: Value| {
        conforms(&schema(name), &args).unwrap_or_else(|e| panic!("{name} {args}: {e}"));
        transcript.push((name.to_owned(), args.clone()));
        (name.to_owned(), args)
    };

    // 1. The model creates a small project.
    let (n, a) = step(
        "Write",
        json!({"path": "app/src/lib.rs", "content": "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n"}),
    );
    assert_eq!(agent.call(&n, a).await["status"], "success");
    let (n, a) = step(
        "Write",
        json!({"path": "app/README.md", "content": "# app\nAdds numbers.\n"}),
    );
    assert_eq!(agent.call(&n, a).await["status"], "success");
    // 2. It explores.
    let (n, a) = step("LS", json!({"path": "app"}));
    let ls = agent.call(&n, a).await;
    assert_eq!(ls["data"]["entries"][0]["path"], "app/src");
    let (n, a) = step("Glob", json!({"pattern": "**/*.rs", "path": "app"}));
    let glob = agent.call(&n, a).await;
    let file = glob["data"]["paths"][0].as_str().unwrap().to_owned();
    assert_eq!(file, "app/src/lib.rs");
    let (n, a) = step(
        "Grep",
        json!({"pattern": "a - b", "output_mode": "content"}),
    );
    let grep = agent.call(&n, a).await;
    let line = grep["data"]["matches"][0]["line"].as_u64().unwrap();
    assert_eq!(line, 2);
    // 3. It reads around the bug, then fixes it with the version it read.
    let (n, a) = step(
        "Read",
        json!({"path": file, "start_line": line, "limit": 1}),
    );
    let read = agent.call(&n, a).await;
    assert_eq!(read["status"], "partial");
    let version = read["stats"]["version"].clone();
    let (n, a) = step(
        "Edit",
        json!({"path": file, "old_string": "a - b", "new_string": "a + b", "expected_version": version}),
    );
    let edit = agent.call(&n, a).await;
    assert_eq!(edit["status"], "success", "{edit}");
    // 4. A second change through MultiEdit, chained on Edit's new version.
    let (n, a) = step(
        "MultiEdit",
        json!({"path": file, "expected_version": edit["stats"]["version"], "edits": [
            {"old_string": "pub fn add", "new_string": "/// Adds.\npub fn add"},
            {"old_string": "a + b", "new_string": "a.wrapping_add(b)"}
        ]}),
    );
    assert_eq!(agent.call(&n, a).await["status"], "success");
    let (n, a) = step("Read", json!({"path": file}));
    assert_eq!(
        agent.call(&n, a).await["text"],
        "Read 4 lines from 'app/src/lib.rs' (Lines 1-4).\n\n     1\t/// Adds.\n     2\tpub fn add(a: i32, b: i32) -> i32 {\n     3\t    a.wrapping_add(b)\n     4\t}"
    );
    assert_eq!(transcript.len(), 9);
    // A call the model got wrong never reaches Invoke unchecked: the schema
    // catches it here, and the server would answer INVALID_PARAM.
    assert!(conforms(&schema("Read"), &json!({"path": "x", "start_line": 0})).is_err());
    assert!(conforms(&schema("Glob"), &json!({"path": "x"})).is_err());
}

/// The contract's visited budget (20,000 entries): Glob with early results is
/// partial with `aborted_reason: count_limit`; a Grep that finds nothing
/// before the budget runs out is a TIMEOUT error telling the model to narrow.
#[tokio::test]
async fn search_budgets_make_partial_results_or_timeout_errors() {
    let (server, mut agent) = start().await;
    let channel = server.channel().await;
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let channel = channel.clone();
            tokio::spawn(async move {
                let mut fs = pb::filesystem_client::FilesystemClient::new(channel);
                for i in (w..20_000).step_by(8) {
                    write(
                        &mut fs,
                        &format!("/many/d{:02}/f{i:05}.txt", i / 1000),
                        "x\n",
                    )
                    .await;
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let env = agent
        .call("Glob", json!({"pattern": "**/f0000?.txt", "path": "many"}))
        .await;
    assert_eq!(env["status"], "partial", "{env}");
    assert_eq!(env["data"]["aborted_reason"], "count_limit");
    assert_eq!(env["data"]["truncated"], false);
    assert_eq!(env["stats"]["visited"], 20_000);
    assert_eq!(
        golden(env["text"].as_str().unwrap()),
        "Found 10 files matching '**/f0000?.txt' in 'many'\n(Scanned 20000 items in Tms)\n\
         [Partial: Scanned the maximum of 20000 items. Results are incomplete.]\n\n\
         many/d00/f00000.txt\nmany/d00/f00001.txt\nmany/d00/f00002.txt\nmany/d00/f00003.txt\n\
         many/d00/f00004.txt\nmany/d00/f00005.txt\nmany/d00/f00006.txt\nmany/d00/f00007.txt\n\
         many/d00/f00008.txt\nmany/d00/f00009.txt"
    );
    agent
        .expect_error(
            "Grep",
            json!({"pattern": "zzz", "path": "many"}),
            "TIMEOUT",
            "Search for 'zzz' in 'many' scanned the maximum of 20000 items before finding any \
             result. Narrow the path or the pattern.",
        )
        .await;
}

/// Edit's and MultiEdit's `replace_all` whose result would be 8 GiB is
/// refused before it is built with the size and the limit, and the tools
/// keep answering.
#[tokio::test]
async fn edit_replace_all_bomb_is_refused_before_it_is_built() {
    let (server, mut agent) = start().await;
    let mut fs = server.fs().await;
    write(&mut fs, "/bomb.txt", &"a".repeat(1 << 20)).await;
    let v = agent.version("bomb.txt").await;
    let huge = "b".repeat(8 << 10);
    agent
        .expect_error(
            "Edit",
            json!({"path": "bomb.txt", "old_string": "a", "new_string": huge, "replace_all": true, "expected_version": v}),
            "INVALID_PARAM",
            "Cannot write 'bomb.txt': the edited file would be 8589934592 bytes, over the file \
             size limit of 67108864 bytes.",
        )
        .await;
    let edits = json!([{"old_string": "a", "new_string": huge, "replace_all": true}]);
    agent
        .error(
            "MultiEdit",
            json!({"path": "bomb.txt", "edits": edits, "expected_version": v}),
            "INVALID_PARAM",
        )
        .await;
    assert_eq!(agent.version("bomb.txt").await, v, "nothing was written");
}

/// Write replacing an 80,000-line file answers with a capped, summarised
/// diff (diffing it line by line took 25 s of CPU) and exact counts.
#[tokio::test]
async fn write_of_a_huge_replacement_answers_with_a_bounded_summary() {
    let (server, mut agent) = start().await;
    let mut fs = server.fs().await;
    let old: String = (0..80_000).map(|i| format!("old line {i}\n")).collect();
    write(&mut fs, "/huge.txt", &old).await;
    let v = agent.version("huge.txt").await;
    let new: String = (0..80_000).map(|i| format!("new line {i}\n")).collect();
    let env = agent
        .call(
            "Write",
            json!({"path": "huge.txt", "content": new, "expected_version": v}),
        )
        .await;
    assert_eq!(env["status"], "success", "{}", env["text"]);
    let text = env["text"].as_str().unwrap();
    assert!(text.len() < 16 << 10, "{} bytes", text.len());
    assert!(
        text.starts_with("Updated 'huge.txt' (+80000/-80000 lines, "),
        "{text}"
    );
    assert!(text.contains("\n[Diff summarised: "), "{text}");
    assert_eq!(env["stats"]["lines_added"], 80_000);
}

/// A missing 800-line old_string in a 20,000-line file still gets its
/// closest region (found by the linear ranking, built after the update
/// released the file).
#[tokio::test]
async fn edit_hint_for_a_long_missing_old_string() {
    let (server, mut agent) = start().await;
    let mut fs = server.fs().await;
    let line = |i: usize| format!("    let value_{i} = compute({i});\n");
    let file: String = (0..20_000).map(line).collect();
    write(&mut fs, "/long.rs", &file).await;
    let v = agent.version("long.rs").await;
    let old = (5_000..5_800)
        .map(line)
        .collect::<String>()
        .replace("compute(5400)", "compute(5401)");
    let message = agent
        .error(
            "Edit",
            json!({"path": "long.rs", "old_string": old, "new_string": "x", "expected_version": v}),
            "INVALID_PARAM",
        )
        .await;
    assert!(
        message.contains("Closest match (lines 5001-5800"),
        "{message}"
    );
}

/// Tool errors quote raw input capped: a 16 KiB path comes back as its
/// first 256 characters and its length.
#[tokio::test]
async fn tool_errors_echo_input_capped() {
    let (_server, mut agent) = start().await;
    let message = agent
        .error(
            "Read",
            json!({"path": "p".repeat(16 << 10)}),
            "INVALID_PARAM",
        )
        .await;
    assert!(message.len() < 2048, "{} bytes", message.len());
    assert!(
        message.ends_with("… (16384 bytes)': path is longer than 4096 bytes."),
        "{message}"
    );
    let message = agent
        .error("B".repeat(16 << 10).as_str(), json!({}), "INVALID_PARAM")
        .await;
    assert!(message.len() < 2048, "{} bytes", message.len());
}
