//! The branch LLM tools and handles bound to a branch through the real
//! server (docs/tools.md § Branches, docs/security.md § Handles bound to a
//! branch): BranchCreate, BranchList, BranchDiff, BranchMerge and
//! BranchDiscard over `Tools/Invoke` and MCP `tools/call`, each one's
//! happy path and refusals; a merge conflict answered with its three
//! versions and nothing applied; the LLM tools and MCP working in a branch;
//! a handle bound to a branch seeing and changing only its branch, refused
//! elsewhere, and revoked.

use crate::util::{Server, as_token, assert_error};
use agentvfs::pb;
use agentvfs::pb::access_client::AccessClient;
use agentvfs::pb::filesystem_client::FilesystemClient;
use agentvfs::pb::tools_client::ToolsClient;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

/// State at `/`; `admin` holds every grant, `lister` may only list `/p`.
const CONFIG: &str = r#"
[[mount]]
prefix = "/"
tier = "state"

[[principal]]
name = "admin"
token = "admin-token"
grants = [{ prefix = "/", ops = ["list", "file", "read_file", "read_binary", "read_re", "write", "delete"] }]

[[principal]]
name = "lister"
token = "lister-token"
grants = [{ prefix = "/p", ops = ["list"] }]
"#;

const ADMIN: &str = "admin-token";

/// `msg` as `token`, in `branch` when given.
fn request<T>(msg: T, token: &str, branch: Option<&str>) -> Request<T> {
    let mut req = as_token(msg, token);
    if let Some(branch) = branch {
        req.metadata_mut()
            .insert("x-agentvfs-branch", branch.parse().unwrap());
    }
    req
}

/// A caller of the tools: its client, bearer token and branch header.
struct Agent {
    tools: ToolsClient<Channel>,
    token: String,
    branch: Option<String>,
}

impl Agent {
    /// `token` calling the tools of `server`, in `branch` when given.
    async fn new(server: &Server, token: &str, branch: Option<&str>) -> Agent {
        Agent {
            tools: ToolsClient::new(server.channel().await),
            token: token.to_owned(),
            branch: branch.map(str::to_owned),
        }
    }

    /// One tool call through Invoke: the envelope as JSON.
    async fn call(&mut self, name: &str, args: Value) -> Value {
        let msg = pb::InvokeRequest {
            name: name.into(),
            arguments_json: args.to_string(),
            tool_call_id: "call_branch".into(),
        };
        let req = request(msg, &self.token, self.branch.as_deref());
        let r = self
            .tools
            .invoke(req)
            .await
            .expect("Invoke never fails")
            .into_inner();
        serde_json::from_str(&r.envelope_json).unwrap()
    }

    /// [`Agent::call`], which must succeed.
    async fn ok(&mut self, name: &str, args: Value) -> Value {
        let env = self.call(name, args).await;
        assert_eq!(env["status"], "success", "{name}: {env}");
        env
    }
}

/// Asserts an error envelope with `code` whose message contains `needle`.
#[track_caller]
fn tool_error(env: &Value, code: &str, needle: &str) {
    assert_eq!(env["status"], "error", "{env}");
    assert_eq!(env["error"]["code"], code, "{env}");
    let message = env["error"]["message"].as_str().unwrap();
    assert!(message.contains(needle), "{needle:?} not in {env}");
}

async fn write(
    fs: &mut FilesystemClient<Channel>,
    token: &str,
    branch: Option<&str>,
    path: &str,
    content: &str,
) -> Result<u64, Status> {
    let msg = pb::WriteRequest {
        path: path.into(),
        content: content.into(),
        ..Default::default()
    };
    let r = fs.write(request(msg, token, branch)).await?;
    Ok(r.into_inner().version)
}

/// The file's text (Read numbers no lines with `raw`... so ReadBytes).
async fn read(
    fs: &mut FilesystemClient<Channel>,
    token: &str,
    branch: Option<&str>,
    path: &str,
) -> Result<String, Status> {
    let msg = pb::ReadBytesRequest {
        path: path.into(),
        version: None,
    };
    let mut stream = fs
        .read_bytes(request(msg, token, branch))
        .await?
        .into_inner();
    let mut data = Vec::new();
    while let Some(msg) = stream.message().await? {
        data.extend(msg.data);
    }
    Ok(String::from_utf8(data).unwrap())
}

/// Each branch tool's happy path and refusals, and the file tools working
/// in a branch through `x-agentvfs-branch`.
#[tokio::test]
async fn the_branch_tools_fork_list_diff_merge_and_discard() {
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut fs = server.fs().await;
    let mut admin = Agent::new(&server, ADMIN, None).await;
    let mut admin_feat = Agent::new(&server, ADMIN, Some("feat")).await;
    let mut lister = Agent::new(&server, "lister-token", None).await;
    write(&mut fs, ADMIN, None, "/p/a.txt", "one\ntwo\nthree\n")
        .await
        .unwrap();
    write(&mut fs, ADMIN, None, "/p/b.txt", "bee\n")
        .await
        .unwrap();

    let env = admin
        .ok("BranchCreate", json!({"name": "feat", "path": "p"}))
        .await;
    assert_eq!(env["data"]["name"], "feat");
    assert_eq!(env["data"]["root"], "p");
    assert!(
        env["text"]
            .as_str()
            .unwrap()
            .starts_with("Created branch 'feat' of 'p' (copy-on-write: nothing was copied)."),
        "{env}"
    );
    // Refusals: the name taken, a missing directory, a bad name, no grant,
    // a fork made in a branch, an unknown parameter.
    let env = admin
        .call("BranchCreate", json!({"name": "feat", "path": "p"}))
        .await;
    tool_error(&env, "CONFLICT", "A branch named 'feat' already exists.");
    let env = admin
        .call("BranchCreate", json!({"name": "x", "path": "nope"}))
        .await;
    assert_eq!(env["error"]["code"], "NOT_FOUND", "{env}");
    let env = admin
        .call("BranchCreate", json!({"name": "a/b", "path": "p"}))
        .await;
    tool_error(&env, "INVALID_PARAM", "Cannot use branch 'a/b'");
    let env = lister
        .call("BranchCreate", json!({"name": "mine", "path": "p"}))
        .await;
    assert_eq!(env["error"]["code"], "ACCESS_DENIED", "{env}");
    let env = admin_feat
        .call("BranchCreate", json!({"name": "nested", "path": "p"}))
        .await;
    tool_error(&env, "INVALID_PARAM", "branches do not nest");
    let env = admin
        .call("BranchCreate", json!({"name": "y", "root": "p"}))
        .await;
    tool_error(
        &env,
        "INVALID_PARAM",
        "Unknown parameter 'root' for BranchCreate",
    );

    // The file tools in the branch: a new file, a deletion, an edit.
    admin_feat
        .ok("Write", json!({"path": "p/c.txt", "content": "sea\n"}))
        .await;
    admin_feat.ok("Delete", json!({"path": "p/b.txt"})).await;
    let env = admin_feat.call("Read", json!({"path": "p/a.txt"})).await;
    let version = env["stats"]["version"].clone();
    admin_feat.ok("Edit",
        json!({"path": "p/a.txt", "old_string": "two", "new_string": "TWO", "expected_version": version}),
    ).await;
    // The base saw none of it.
    let env = admin.call("LS", json!({"path": "p"})).await;
    let listed = env["data"]["entries"].to_string();
    assert!(
        listed.contains("p/b.txt") && !listed.contains("p/c.txt"),
        "{env}"
    );
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/a.txt").await.unwrap(),
        "one\ntwo\nthree\n"
    );

    let env = admin.ok("BranchList", json!({})).await;
    let branches = env["data"]["branches"].as_array().unwrap();
    assert_eq!(branches.len(), 1, "{env}");
    assert_eq!(branches[0]["name"], "feat");
    assert_eq!(branches[0]["root"], "p");
    assert_eq!(branches[0]["files_changed"], 3, "{env}");
    assert!(
        env["text"]
            .as_str()
            .unwrap()
            .starts_with("1 branch:\nfeat  root 'p'  3 files changed"),
        "{env}"
    );
    let env = lister.call("BranchList", json!({})).await;
    assert_eq!(
        env["data"]["branches"].as_array().unwrap().len(),
        1,
        "{env}"
    );

    // The diff, whole and paged.
    let env = admin.ok("BranchDiff", json!({"name": "feat"})).await;
    assert_eq!(
        env["data"]["files"],
        json!([
            {"path": "p/a.txt", "kind": "changed"},
            {"path": "p/b.txt", "kind": "deleted"},
            {"path": "p/c.txt", "kind": "added"},
        ]),
        "{env}"
    );
    let text = env["text"].as_str().unwrap();
    assert!(
        text.starts_with("Branch 'feat' against its base: 3 files."),
        "{text}"
    );
    for needle in [
        "changed p/a.txt\n",
        "-two\n+TWO\n",
        "deleted p/b.txt\n",
        "-bee",
        "added p/c.txt\n",
        "+sea",
    ] {
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }
    let env = admin
        .call("BranchDiff", json!({"name": "feat", "limit": 2}))
        .await;
    assert_eq!(env["status"], "partial", "{env}");
    assert_eq!(env["data"]["next_after"], "p/b.txt", "{env}");
    assert!(
        env["text"]
            .as_str()
            .unwrap()
            .ends_with("call BranchDiff again with after: 'p/b.txt'.")
    );
    let env = admin
        .call("BranchDiff", json!({"name": "feat", "after": "p/b.txt"}))
        .await;
    assert_eq!(
        env["data"]["files"],
        json!([{"path": "p/c.txt", "kind": "added"}]),
        "{env}"
    );
    assert_eq!(env["data"]["next_after"], Value::Null);
    let env = admin.call("BranchDiff", json!({"name": "nope"})).await;
    tool_error(
        &env,
        "NOT_FOUND",
        "Branch 'nope' does not exist. BranchList shows your branches.",
    );
    let env = admin
        .call("BranchDiff", json!({"name": "feat", "limit": 0}))
        .await;
    tool_error(&env, "INVALID_PARAM", "'limit': must be between 1 and 1000");
    // The lister may not read the files: it sees none of them.
    let env = lister.call("BranchDiff", json!({"name": "feat"})).await;
    assert_eq!(env["data"]["files"], json!([]), "{env}");

    // Merge: refusals first, then the merge, labelled, discarding.
    let env = admin.call("BranchMerge",
        json!({"name": "feat", "resolutions": [{"path": "p/a.txt", "content": "x", "delete": true}]}),
    )
    .await;
    tool_error(
        &env,
        "INVALID_PARAM",
        "Invalid resolutions[0]: give either content",
    );
    let env = lister.call("BranchMerge", json!({"name": "feat"})).await;
    assert_eq!(env["error"]["code"], "ACCESS_DENIED", "{env}");
    let env = admin.call("BranchMerge", json!({"name": "nope"})).await;
    assert_eq!(env["error"]["code"], "NOT_FOUND", "{env}");
    let env = admin
        .ok(
            "BranchMerge",
            json!({"name": "feat", "discard": true, "label": "turn-7"}),
        )
        .await;
    let text = env["text"].as_str().unwrap();
    assert!(
        text.starts_with("Merged branch 'feat' into its base as changeset "),
        "{text}"
    );
    assert!(text.contains("(3 files):\nM p/a.txt (version "), "{text}");
    assert!(text.contains("\nD p/b.txt\nM p/c.txt (version "), "{text}");
    assert!(text.ends_with("\nThe branch was discarded."), "{text}");
    assert_eq!(env["data"]["discarded"], true);
    assert_eq!(env["stats"]["files_merged"], 3);
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/a.txt").await.unwrap(),
        "one\nTWO\nthree\n"
    );
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/c.txt").await.unwrap(),
        "sea\n"
    );
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/b.txt")
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    let env = admin.call("History", json!({"path": "p/c.txt"})).await;
    assert!(
        env["text"].as_str().unwrap().contains("label turn-7"),
        "the label is kept: {env}"
    );

    // Discard: gone after the merge; a kept branch is discarded, the base untouched.
    let env = admin.call("BranchDiscard", json!({"name": "feat"})).await;
    tool_error(&env, "NOT_FOUND", "Branch 'feat' does not exist.");
    admin
        .ok("BranchCreate", json!({"name": "tmp", "path": "p"}))
        .await;
    write(&mut fs, ADMIN, Some("tmp"), "/p/a.txt", "scratch\n")
        .await
        .unwrap();
    let env = lister.call("BranchDiscard", json!({"name": "tmp"})).await;
    assert_eq!(env["error"]["code"], "ACCESS_DENIED", "{env}");
    let env = admin.call("BranchDiscard", json!({"name": "tmp"})).await;
    assert_eq!(
        env["text"], "Discarded branch 'tmp' and its changes; the base is untouched.",
        "{env}"
    );
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/a.txt").await.unwrap(),
        "one\nTWO\nthree\n"
    );
    let env = admin.call("BranchList", json!({})).await;
    assert_eq!(env["text"], "No branches. BranchCreate forks one.", "{env}");
}

/// A merge whose sides overlap answers CONFLICT with the file's three
/// versions and applies nothing, not even the files that merge; a
/// resolution then merges it all.
#[tokio::test]
async fn a_merge_conflict_through_the_tool_shows_three_versions_and_applies_nothing() {
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut fs = server.fs().await;
    let mut admin = Agent::new(&server, ADMIN, None).await;
    write(&mut fs, ADMIN, None, "/p/a.txt", "one\ntwo\nthree\n")
        .await
        .unwrap();
    admin
        .ok("BranchCreate", json!({"name": "b1", "path": "/p"}))
        .await;
    write(
        &mut fs,
        ADMIN,
        Some("b1"),
        "/p/a.txt",
        "one\nTWO in branch\nthree\n",
    )
    .await
    .unwrap();
    write(&mut fs, ADMIN, Some("b1"), "/p/new.txt", "new\n")
        .await
        .unwrap();
    let base_version = write(
        &mut fs,
        ADMIN,
        None,
        "/p/a.txt",
        "one\nTWO on base\nthree\n",
    )
    .await
    .unwrap();

    let env = admin
        .call("BranchMerge", json!({"name": "b1", "discard": true}))
        .await;
    tool_error(
        &env,
        "CONFLICT",
        "Merge of branch 'b1' stopped: 1 conflicting files, and nothing was applied.",
    );
    assert_eq!(
        env["data"]["conflicts"],
        json!([{
            "path": "p/a.txt",
            "base_version": base_version.to_string(),
            "ancestor": "one\ntwo\nthree\n",
            "branch": "one\nTWO in branch\nthree\n",
            "base": "one\nTWO on base\nthree\n",
            "binary": false,
            "clipped": false,
        }]),
        "{env}"
    );
    assert_eq!(env["data"]["applied"], false);
    let text = env["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "CONFLICT p/a.txt (base version {base_version})\n<<<<<<< branch\none\nTWO in branch\nthree\n\
             ||||||| ancestor (the base when the branch first changed it)\none\ntwo\nthree\n\
             =======\none\nTWO on base\nthree\n>>>>>>> base (now)"
        )),
        "{text}"
    );
    // Nothing applied, and the branch is kept.
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/new.txt")
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/a.txt").await.unwrap(),
        "one\nTWO on base\nthree\n"
    );
    assert_eq!(
        read(&mut fs, ADMIN, Some("b1"), "/p/new.txt")
            .await
            .unwrap(),
        "new\n"
    );

    // A resolution of a file twice is refused; one per file merges.
    let twice = json!([{"path": "p/a.txt", "delete": true}, {"path": "/p/a.txt", "content": "x"}]);
    let env = admin
        .call("BranchMerge", json!({"name": "b1", "resolutions": twice}))
        .await;
    tool_error(&env, "INVALID_PARAM", "'p/a.txt' is resolved twice");
    let env = admin.ok("BranchMerge",
        json!({"name": "b1", "resolutions": [{"path": "p/a.txt", "content": "one\nTWO both\nthree\n"}]}),
    ).await;
    assert!(
        env["text"]
            .as_str()
            .unwrap()
            .ends_with("The branch is kept (BranchDiscard deletes it)."),
        "{env}"
    );
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/a.txt").await.unwrap(),
        "one\nTWO both\nthree\n"
    );
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/new.txt").await.unwrap(),
        "new\n"
    );
}

/// Mints a handle as `creator` over `/p`, bound to `branch` (empty: not
/// asked).
async fn mint(
    access: &mut AccessClient<Channel>,
    creator: &str,
    branch: &str,
) -> Result<pb::CreateHandleResponse, Status> {
    let msg = pb::CreateHandleRequest {
        grants: vec![pb::Grant {
            prefix: "/p".into(),
            ops: [
                "list",
                "file",
                "read_file",
                "read_binary",
                "write",
                "delete",
            ]
            .map(String::from)
            .to_vec(),
        }],
        ttl_seconds: 600,
        branch: branch.into(),
    };
    Ok(access
        .create_handle(as_token(msg, creator))
        .await?
        .into_inner())
}

/// A handle bound to a branch works in it with or without the header,
/// sees and changes only it, is refused any other branch, may diff its
/// branch but not fork, merge or discard, mints only handles bound to the
/// same branch, and stops at revocation; its creator then merges.
#[tokio::test]
async fn a_handle_bound_to_a_branch_sees_and_changes_only_its_branch() {
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut fs = server.fs().await;
    let mut admin = Agent::new(&server, ADMIN, None).await;
    let mut access = AccessClient::new(server.channel().await);
    write(&mut fs, ADMIN, None, "/p/a.txt", "base\n")
        .await
        .unwrap();
    for name in ["sub", "other"] {
        admin
            .ok("BranchCreate", json!({"name": name, "path": "p"}))
            .await;
    }
    write(&mut fs, ADMIN, Some("other"), "/p/a.txt", "other's\n")
        .await
        .unwrap();
    let handle = mint(&mut access, ADMIN, "sub").await.unwrap();
    assert_eq!(handle.branch, "sub");
    let token = handle.token.as_str();
    let mut bound = Agent::new(&server, token, None).await;

    // Without the header, and with its own branch named: in the branch.
    write(&mut fs, token, None, "/p/a.txt", "sub's\n")
        .await
        .unwrap();
    write(&mut fs, token, Some("sub"), "/p/new.txt", "new\n")
        .await
        .unwrap();
    assert_eq!(
        read(&mut fs, token, None, "/p/a.txt").await.unwrap(),
        "sub's\n"
    );
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/a.txt").await.unwrap(),
        "base\n"
    );
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/new.txt")
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    assert_eq!(
        read(&mut fs, ADMIN, Some("sub"), "/p/new.txt")
            .await
            .unwrap(),
        "new\n"
    );
    // Another branch: refused, for reads and writes, RPCs and tools alike.
    let refused = read(&mut fs, token, Some("other"), "/p/a.txt")
        .await
        .unwrap_err();
    assert_error(&refused, Code::PermissionDenied, "ACCESS_DENIED");
    assert!(
        refused
            .message()
            .contains("bound to branch \"sub\" and cannot work in branch \"other\""),
        "{refused:?}"
    );
    let refused = write(&mut fs, token, Some("other"), "/p/a.txt", "escape\n")
        .await
        .unwrap_err();
    assert_error(&refused, Code::PermissionDenied, "ACCESS_DENIED");
    assert_eq!(
        read(&mut fs, ADMIN, Some("other"), "/p/a.txt")
            .await
            .unwrap(),
        "other's\n"
    );
    let msg = pb::InvokeRequest {
        name: "Read".into(),
        arguments_json: json!({"path": "p/a.txt"}).to_string(),
        tool_call_id: String::new(),
    };
    let mut tools = ToolsClient::new(server.channel().await);
    let refused = tools
        .invoke(request(msg, token, Some("other")))
        .await
        .unwrap_err();
    assert_error(&refused, Code::PermissionDenied, "ACCESS_DENIED");
    // The tools without the header: in the branch.
    bound
        .ok("Write", json!({"path": "p/tool.txt", "content": "t\n"}))
        .await;
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/tool.txt")
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    assert_eq!(
        read(&mut fs, ADMIN, Some("sub"), "/p/tool.txt")
            .await
            .unwrap(),
        "t\n"
    );
    let env = bound.call("Read", json!({"path": "p/a.txt"})).await;
    assert!(env["text"].as_str().unwrap().contains("\tsub's"), "{env}");

    // Its branch operations: list and diff its own; nothing else.
    let env = bound.call("BranchList", json!({})).await;
    let names: Vec<&Value> = env["data"]["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| &b["name"])
        .collect();
    assert_eq!(names, [&json!("sub")], "{env}");
    let env = bound.call("BranchDiff", json!({"name": "sub"})).await;
    assert_eq!(env["data"]["files"].as_array().unwrap().len(), 3, "{env}");
    let env = bound.call("BranchDiff", json!({"name": "other"})).await;
    tool_error(&env, "ACCESS_DENIED", "may diff only it");
    for (name, args) in [
        ("BranchMerge", json!({"name": "sub"})),
        ("BranchDiscard", json!({"name": "sub"})),
        ("BranchDiscard", json!({"name": "other"})),
        ("BranchCreate", json!({"name": "more", "path": "p"})),
    ] {
        let env = bound.call(name, args).await;
        tool_error(
            &env,
            "ACCESS_DENIED",
            "is bound to branch \"sub\" and may not",
        );
    }
    let msg = pb::MergeBranchRequest {
        name: "sub".into(),
        ..Default::default()
    };
    let refused = fs
        .merge_branch(request(msg, token, None))
        .await
        .unwrap_err();
    assert_error(&refused, Code::PermissionDenied, "ACCESS_DENIED");
    let described = access
        .describe_grants(as_token(pb::DescribeGrantsRequest {}, token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(described.branch, "sub");

    // Its handles stay bound to its branch.
    let child = mint(&mut access, token, "").await.unwrap();
    assert_eq!(child.branch, "sub");
    write(&mut fs, &child.token, None, "/p/child.txt", "c\n")
        .await
        .unwrap();
    assert_eq!(
        read(&mut fs, ADMIN, Some("sub"), "/p/child.txt")
            .await
            .unwrap(),
        "c\n"
    );
    let refused = mint(&mut access, token, "other").await.unwrap_err();
    assert_error(&refused, Code::PermissionDenied, "ACCESS_DENIED");
    let refused = mint(&mut access, ADMIN, "bad/name").await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");

    // Revoked: neither it nor its child works; the creator merges.
    let msg = pb::RevokeHandleRequest {
        token: token.into(),
    };
    access.revoke_handle(as_token(msg, ADMIN)).await.unwrap();
    for dead in [token, child.token.as_str()] {
        let refused = read(&mut fs, dead, None, "/p/a.txt").await.unwrap_err();
        assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    }
    admin
        .ok("BranchMerge", json!({"name": "sub", "discard": true}))
        .await;
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/a.txt").await.unwrap(),
        "sub's\n"
    );
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/child.txt").await.unwrap(),
        "c\n"
    );
}

/// One stateless MCP `tools/call` (the current protocol) as `token` in
/// the gRPC calls' State session, with `branch` as `x-agentvfs-branch`
/// when given: the HTTP status line and the JSON-RPC answer.
pub async fn mcp(
    server: &Server,
    token: &str,
    branch: Option<&str>,
    method: &str,
    params: Value,
) -> (String, Value) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let name = params["name"]
        .as_str()
        .map_or(String::new(), |n| format!("mcp-name: {n}\r\n"));
    let branch = branch.map_or(String::new(), |b| format!("x-agentvfs-branch: {b}\r\n"));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\n\
         x-agentvfs-session: default\r\n{branch}content-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
         mcp-method: {method}\r\n{name}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let addr = server.url.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut raw)).await;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let status = raw.lines().next().unwrap_or_default().to_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let body = match head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        true => dechunk(body),
        false => body.to_owned(),
    };
    let json = body
        .find("{\"jsonrpc\"")
        .and_then(|start| {
            serde_json::Deserializer::from_str(&body[start..])
                .into_iter::<Value>()
                .next()
        })
        .and_then(Result::ok)
        .unwrap_or(Value::Null);
    (status, json)
}

/// A chunked HTTP/1.1 body's content.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The branch tools over MCP: listed with their annotations, called with
/// `tools/call`; a session in a branch through `x-agentvfs-branch`; a bound
/// handle's token keeps MCP in its branch and is refused another.
#[tokio::test]
async fn mcp_calls_the_branch_tools_and_works_in_a_branch() {
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut fs = server.fs().await;
    let mut access = AccessClient::new(server.channel().await);
    write(&mut fs, ADMIN, None, "/p/a.txt", "base\n")
        .await
        .unwrap();

    let (status, listed) = mcp(&server, ADMIN, None, "tools/list", json!({})).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let tools = listed["result"]["tools"].as_array().unwrap();
    let annotations = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} listed"))["annotations"]
            .clone()
    };
    assert_eq!(annotations("BranchList")["readOnlyHint"], true);
    assert_eq!(annotations("BranchDiff")["readOnlyHint"], true);
    assert_eq!(annotations("BranchCreate")["destructiveHint"], false);
    assert_eq!(annotations("BranchMerge")["destructiveHint"], true);
    assert_eq!(annotations("BranchMerge")["idempotentHint"], false);
    assert_eq!(annotations("BranchDiscard")["idempotentHint"], true);

    let call = |name: &str, args: Value| json!({"name": name, "arguments": args});
    let (_, answer) = mcp(
        &server,
        ADMIN,
        None,
        "tools/call",
        call("BranchCreate", json!({"name": "m", "path": "p"})),
    )
    .await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let (_, answer) = mcp(
        &server,
        ADMIN,
        Some("m"),
        "tools/call",
        call("Write", json!({"path": "p/b.txt", "content": "in m\n"})),
    )
    .await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/b.txt")
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    let (_, answer) = mcp(
        &server,
        ADMIN,
        None,
        "tools/call",
        call("BranchDiff", json!({"name": "m"})),
    )
    .await;
    let structured = &answer["result"]["structuredContent"];
    assert_eq!(
        structured["data"]["files"],
        json!([{"path": "p/b.txt", "kind": "added"}]),
        "{answer}"
    );
    let (_, answer) = mcp(
        &server,
        ADMIN,
        None,
        "tools/call",
        call("BranchDiscard", json!({"name": "none"})),
    )
    .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(
        answer["result"]["structuredContent"]["error"]["code"], "NOT_FOUND",
        "{answer}"
    );

    // A bound handle over MCP: in its branch without the header, refused another.
    let handle = mint(&mut access, ADMIN, "m").await.unwrap();
    let (_, answer) = mcp(
        &server,
        &handle.token,
        None,
        "tools/call",
        call("Read", json!({"path": "p/b.txt"})),
    )
    .await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let (_, answer) = mcp(
        &server,
        &handle.token,
        None,
        "tools/call",
        call("Write", json!({"path": "p/c.txt", "content": "c\n"})),
    )
    .await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let (status, answer) = mcp(
        &server,
        &handle.token,
        Some("elsewhere"),
        "tools/call",
        call("Read", json!({"path": "p/b.txt"})),
    )
    .await;
    assert!(status.starts_with("HTTP/1.1 403"), "{status} {answer}");
    let (_, answer) = mcp(
        &server,
        &handle.token,
        None,
        "tools/call",
        call("BranchMerge", json!({"name": "m"})),
    )
    .await;
    assert_eq!(
        answer["result"]["structuredContent"]["error"]["code"], "ACCESS_DENIED",
        "{answer}"
    );

    let (_, answer) = mcp(
        &server,
        ADMIN,
        None,
        "tools/call",
        call("BranchMerge", json!({"name": "m", "discard": true})),
    )
    .await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/b.txt").await.unwrap(),
        "in m\n"
    );
    assert_eq!(read(&mut fs, ADMIN, None, "/p/c.txt").await.unwrap(), "c\n");
}

/// Hostile BranchMerge resolutions through the tool (docs/branches.md
/// § Merge): 100,000 of them, a file outside the branch, a file the branch
/// did not change: each an error naming the problem, nothing applied, the
/// branch kept; the server serves another caller meanwhile.
#[tokio::test]
async fn hostile_branch_merge_resolutions_are_refused() {
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut fs = server.fs().await;
    let mut admin = Agent::new(&server, ADMIN, None).await;
    for (path, content) in [("/p/a.txt", "a\n"), ("/p/b.txt", "b\n"), ("/q.txt", "q\n")] {
        write(&mut fs, ADMIN, None, path, content).await.unwrap();
    }
    admin
        .ok("BranchCreate", json!({"name": "b1", "path": "/p"}))
        .await;
    write(&mut fs, ADMIN, Some("b1"), "/p/a.txt", "branch a\n")
        .await
        .unwrap();

    let many = |count: usize| -> Value {
        let resolutions: Vec<Value> = (0..count)
            .map(|i| json!({"path": format!("p/f{i}.txt"), "content": "x"}))
            .collect();
        json!({"name": "b1", "resolutions": resolutions})
    };
    // 100,000 (8 MB of arguments): refused whole by the Tools service's
    // message bound, the server serving another caller meanwhile.
    let msg = pb::InvokeRequest {
        name: "BranchMerge".into(),
        arguments_json: many(100_000).to_string(),
        tool_call_id: "call_hostile".into(),
    };
    let mut tools = ToolsClient::new(server.channel().await);
    let (refused, served) = tokio::join!(
        tools.invoke(request(msg, ADMIN, None)),
        read(&mut fs, ADMIN, None, "/q.txt")
    );
    let refused = refused.unwrap_err();
    assert_eq!(refused.code(), Code::OutOfRange, "{refused:?}");
    assert!(
        refused.message().contains("message length too large"),
        "{refused:?}"
    );
    assert_eq!(served.unwrap(), "q\n");
    // 2,000, within the message bound: more than a merge carries.
    let env = admin.call("BranchMerge", many(2_000)).await;
    tool_error(
        &env,
        "INVALID_PARAM",
        "2000 resolutions, more than the 1000 files",
    );

    let env = admin
        .call(
            "BranchMerge",
            json!({"name": "b1", "resolutions": [{"path": "q.txt", "content": "x"}]}),
        )
        .await;
    tool_error(&env, "INVALID_PARAM", "/q.txt: outside branch \"b1\"");
    let env = admin
        .call(
            "BranchMerge",
            json!({"name": "b1", "resolutions": [{"path": "p/b.txt", "delete": true}]}),
        )
        .await;
    tool_error(
        &env,
        "INVALID_PARAM",
        "branch \"b1\" did not change that file",
    );

    assert_eq!(read(&mut fs, ADMIN, None, "/p/a.txt").await.unwrap(), "a\n");
    assert_eq!(read(&mut fs, ADMIN, None, "/p/b.txt").await.unwrap(), "b\n");
    assert_eq!(
        read(&mut fs, ADMIN, Some("b1"), "/p/a.txt").await.unwrap(),
        "branch a\n"
    );
}

/// The principals [`grants`] adds to [`CONFIG`]'s `admin` and `lister`:
/// `part` lists and reads `/p/pub` only, `sub` may read, write and delete
/// `/p/sub` only, and `reader` lists and reads `/p`.
const MORE_PRINCIPALS: &str = r#"
[[principal]]
name = "part"
token = "part-token"
grants = [{ prefix = "/p/pub", ops = ["list", "read_file"] }]

[[principal]]
name = "sub"
token = "sub-token"
grants = [{ prefix = "/p/sub", ops = ["list", "file", "read_file", "write", "delete"] }]

[[principal]]
name = "reader"
token = "reader-token"
grants = [{ prefix = "/p", ops = ["list", "read_file"] }]
"#;

/// [`CONFIG`] with [`MORE_PRINCIPALS`]: the grant tests' server.
fn grants() -> String {
    format!("{CONFIG}{MORE_PRINCIPALS}")
}

/// `MergeBranch {name}` (no resolutions) as `token`.
async fn merge_as(
    fs: &mut FilesystemClient<Channel>,
    token: &str,
    name: &str,
) -> Result<pb::MergeBranchResponse, Status> {
    let msg = pb::MergeBranchRequest {
        name: name.into(),
        ..Default::default()
    };
    Ok(fs.merge_branch(as_token(msg, token)).await?.into_inner())
}

/// A merge moves and answers content, so it needs `read_file` on every
/// file the branch changed, checked before anything is read: a principal
/// that may only list the files of a conflict is refused (over gRPC, the
/// BranchMerge tool and MCP) instead of being answered their three
/// versions, and a refusal names only a file the caller may list.
#[tokio::test]
async fn a_merge_shows_and_moves_nothing_the_caller_may_not_read() {
    let server = Server::start_with(Some(&grants()), &[]);
    let mut fs = server.fs().await;
    write(&mut fs, ADMIN, None, "/p/secret.txt", "ancestor secret\n")
        .await
        .unwrap();
    let fork = |name: &str| pb::CreateBranchRequest {
        name: name.into(),
        path: "/p".into(),
    };
    fs.create_branch(as_token(fork("feat"), ADMIN))
        .await
        .unwrap();
    write(
        &mut fs,
        ADMIN,
        Some("feat"),
        "/p/secret.txt",
        "branch secret\n",
    )
    .await
    .unwrap();
    write(&mut fs, ADMIN, None, "/p/secret.txt", "base secret\n")
        .await
        .unwrap();

    let refused = merge_as(&mut fs, "lister-token", "feat").await.unwrap_err();
    assert_error(&refused, Code::PermissionDenied, "ACCESS_DENIED");
    assert!(
        refused.message().contains("'read_file' on /p/secret.txt"),
        "{refused:?}"
    );
    let mut lister = Agent::new(&server, "lister-token", None).await;
    let env = lister.call("BranchMerge", json!({"name": "feat"})).await;
    assert_eq!(env["error"]["code"], "ACCESS_DENIED", "{env}");
    assert!(!env.to_string().contains("secret\\n"), "{env}");
    let call = json!({"name": "BranchMerge", "arguments": {"name": "feat"}});
    let (_, answer) = mcp(&server, "lister-token", None, "tools/call", call).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(!answer.to_string().contains("secret\\n"), "{answer}");

    // A file the caller may not even list is not named.
    fs.create_branch(as_token(fork("mixed"), ADMIN))
        .await
        .unwrap();
    write(&mut fs, ADMIN, Some("mixed"), "/p/pub/a.txt", "a\n")
        .await
        .unwrap();
    write(&mut fs, ADMIN, Some("mixed"), "/p/hidden/h.txt", "h\n")
        .await
        .unwrap();
    let refused = merge_as(&mut fs, "part-token", "mixed").await.unwrap_err();
    assert_error(&refused, Code::PermissionDenied, "ACCESS_DENIED");
    assert!(!refused.message().contains("hidden"), "{refused:?}");
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/pub/a.txt")
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    // The admin, who may read it all, is answered the conflict.
    let merged = merge_as(&mut fs, ADMIN, "feat").await.unwrap();
    assert_eq!(merged.conflicts.len(), 1, "{merged:?}");
}

/// A discard deletes every file the branch changed, whoever wrote it: it
/// needs `delete` on each, and on the branch's root unless the caller's
/// principal forked it. One who may write a subfolder cannot drop the
/// whole branch; a read-only principal may discard the empty branch it
/// forked, not the files others wrote in it.
#[tokio::test]
async fn discarding_a_branch_needs_delete_on_every_file_it_holds() {
    let server = Server::start_with(Some(&grants()), &[]);
    let mut fs = server.fs().await;
    write(&mut fs, ADMIN, None, "/p/sub/seed.txt", "s\n")
        .await
        .unwrap();
    let fork = |fs: &mut FilesystemClient<Channel>, token: &str, name: &str, path: &str| {
        let msg = pb::CreateBranchRequest {
            name: name.into(),
            path: path.into(),
        };
        let req = as_token(msg, token);
        let mut fs = fs.clone();
        async move { fs.create_branch(req).await.map(drop) }
    };
    let discard = |fs: &mut FilesystemClient<Channel>, token: &str, name: &str| {
        let req = as_token(pb::DiscardBranchRequest { name: name.into() }, token);
        let mut fs = fs.clone();
        async move { fs.discard_branch(req).await.map(drop) }
    };
    fork(&mut fs, ADMIN, "work", "/p").await.unwrap();
    write(&mut fs, ADMIN, Some("work"), "/p/sub/a.txt", "a\n")
        .await
        .unwrap();
    write(&mut fs, ADMIN, Some("work"), "/p/top.txt", "others' work\n")
        .await
        .unwrap();
    let refused = discard(&mut fs, "sub-token", "work").await.unwrap_err();
    assert_error(&refused, Code::PermissionDenied, "ACCESS_DENIED");
    assert!(refused.message().contains("'delete' on /p"), "{refused:?}");
    assert_eq!(
        read(&mut fs, ADMIN, Some("work"), "/p/top.txt")
            .await
            .unwrap(),
        "others' work\n"
    );
    let mut sub = Agent::new(&server, "sub-token", None).await;
    let env = sub.call("BranchDiscard", json!({"name": "work"})).await;
    assert_eq!(env["error"]["code"], "ACCESS_DENIED", "{env}");

    // Its own fork, with files it may delete: discarded.
    fork(&mut fs, "sub-token", "mine", "/p/sub").await.unwrap();
    write(&mut fs, ADMIN, Some("mine"), "/p/sub/b.txt", "b\n")
        .await
        .unwrap();
    discard(&mut fs, "sub-token", "mine").await.unwrap();
    // A read-only creator: its empty branch, yes; others' files in it, no.
    fork(&mut fs, "reader-token", "r1", "/p").await.unwrap();
    discard(&mut fs, "reader-token", "r1").await.unwrap();
    fork(&mut fs, "reader-token", "r2", "/p").await.unwrap();
    write(&mut fs, ADMIN, Some("r2"), "/p/x.txt", "x\n")
        .await
        .unwrap();
    let refused = discard(&mut fs, "reader-token", "r2").await.unwrap_err();
    assert!(
        refused.message().contains("'delete' on /p/x.txt"),
        "{refused:?}"
    );
    // A merge asked to discard is refused before it merges.
    let msg = pb::MergeBranchRequest {
        name: "r2".into(),
        discard: true,
        ..Default::default()
    };
    let refused = fs
        .merge_branch(as_token(msg, "reader-token"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    discard(&mut fs, ADMIN, "work").await.unwrap();
    discard(&mut fs, ADMIN, "r2").await.unwrap();
}

/// DiffBranch and ListBranches name only files the caller may list: the
/// page's cursor is a file it shows, a move from a file the caller may not
/// read shows as an addition, and the counts are over the listable files.
#[tokio::test]
async fn a_diff_and_a_listing_name_nothing_the_caller_may_not_list() {
    let server = Server::start_with(Some(&grants()), &[]);
    let mut fs = server.fs().await;
    write(&mut fs, ADMIN, None, "/p/hidden/h1.txt", "moved\n")
        .await
        .unwrap();
    let msg = pb::CreateBranchRequest {
        name: "f".into(),
        path: "/p".into(),
    };
    fs.create_branch(as_token(msg, ADMIN)).await.unwrap();
    let mv = pb::MoveRequest {
        source: "/p/hidden/h1.txt".into(),
        destination: "/p/pub/h1.txt".into(),
        ..Default::default()
    };
    fs.r#move(request(mv, ADMIN, Some("f"))).await.unwrap();
    write(&mut fs, ADMIN, Some("f"), "/p/pub/a.txt", "aa\n")
        .await
        .unwrap();
    write(&mut fs, ADMIN, Some("f"), "/p/q/s.txt", "secret\n")
        .await
        .unwrap();

    let mut shown = Vec::new();
    let mut after = String::new();
    loop {
        let msg = pb::DiffBranchRequest {
            name: "f".into(),
            after: after.clone(),
            limit: 1,
        };
        let page = fs
            .diff_branch(as_token(msg, "part-token"))
            .await
            .unwrap()
            .into_inner();
        for f in &page.files {
            shown.push((f.path.clone(), f.kind.clone(), f.from.clone()));
        }
        assert!(
            page.next_after.is_empty() || page.next_after.starts_with("/p/pub/"),
            "{page:?}"
        );
        if page.next_after.is_empty() {
            break;
        }
        after = page.next_after;
    }
    let added = |p: &str| (p.to_owned(), "added".to_owned(), String::new());
    assert_eq!(shown, [added("/p/pub/a.txt"), added("/p/pub/h1.txt")]);
    // The admin sees the move.
    let msg = pb::DiffBranchRequest {
        name: "f".into(),
        ..Default::default()
    };
    let diff = fs.diff_branch(as_token(msg, ADMIN)).await.unwrap();
    assert!(
        diff.get_ref()
            .files
            .iter()
            .any(|f| f.kind == "moved" && f.from == "/p/hidden/h1.txt"),
        "{diff:?}"
    );

    let listed = fs
        .list_branches(as_token(pb::ListBranchesRequest {}, "part-token"))
        .await
        .unwrap()
        .into_inner();
    let f = &listed.branches[0];
    assert_eq!((f.files_changed, f.bytes), (2, 9), "{f:?}");
    let listed = fs
        .list_branches(as_token(pb::ListBranchesRequest {}, ADMIN))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.branches[0].files_changed, 4, "{listed:?}");
}

/// A principal keeps at most `max_branches_per_principal` branches, its
/// handles' included (RESOURCE_EXHAUSTED naming the key); another
/// principal still forks, and a discard makes room.
#[tokio::test]
async fn a_principal_keeps_at_most_max_branches_per_principal() {
    let config = format!("[limits]\nmax_branches_per_principal = 3\n{}", grants());
    let server = Server::start_with(Some(config.as_str()), &[]);
    let mut fs = server.fs().await;
    let mut access = AccessClient::new(server.channel().await);
    write(&mut fs, ADMIN, None, "/p/a.txt", "a\n")
        .await
        .unwrap();
    let fork = |name: &str| pb::CreateBranchRequest {
        name: name.into(),
        path: "/p".into(),
    };
    for i in 0..3 {
        fs.create_branch(as_token(fork(&format!("r{i}")), "reader-token"))
            .await
            .unwrap();
    }
    let refused = fs
        .create_branch(as_token(fork("r3"), "reader-token"))
        .await
        .unwrap_err();
    assert_error(&refused, Code::ResourceExhausted, "INVALID_PARAM");
    let info = refused.get_details_error_info().unwrap();
    assert_eq!(
        info.metadata.get("limit").map(String::as_str),
        Some("max_branches_per_principal"),
        "{refused:?}"
    );
    let msg = pb::CreateHandleRequest {
        grants: vec![pb::Grant {
            prefix: "/p".into(),
            ops: vec!["list".into(), "read_file".into()],
        }],
        ttl_seconds: 600,
        branch: String::new(),
    };
    let handle = access
        .create_handle(as_token(msg, "reader-token"))
        .await
        .unwrap()
        .into_inner()
        .token;
    let refused = fs
        .create_branch(as_token(fork("h0"), &handle))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    fs.create_branch(as_token(fork("a0"), ADMIN)).await.unwrap();
    fs.discard_branch(as_token(
        pb::DiscardBranchRequest { name: "r0".into() },
        "reader-token",
    ))
    .await
    .unwrap();
    fs.create_branch(as_token(fork("h0"), &handle))
        .await
        .unwrap();
}

/// The typed tool RPCs take every version the tools show: a file a branch
/// changed has a version with bit 63 set, which their fields (`uint64`)
/// carry exactly (issue 51, F13).
#[tokio::test]
async fn the_typed_tool_rpcs_change_a_file_a_branch_changed() {
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut fs = server.fs().await;
    let mut admin = Agent::new(&server, ADMIN, None).await;
    write(&mut fs, ADMIN, None, "/p/a.txt", "one\n")
        .await
        .unwrap();
    admin
        .ok("BranchCreate", json!({"name": "feat", "path": "p"}))
        .await;
    let version = write(&mut fs, ADMIN, Some("feat"), "/p/a.txt", "two\n")
        .await
        .unwrap();
    assert!(
        version >= 1 << 63,
        "a branch's version has bit 63 set: {version}"
    );
    let mut tools = ToolsClient::new(server.channel().await);
    let edit = pb::EditToolRequest {
        path: "p/a.txt".into(),
        old_string: "two".into(),
        new_string: "three".into(),
        expected_version: Some(version),
        ..Default::default()
    };
    let answer = tools
        .edit_tool(request(edit, ADMIN, Some("feat")))
        .await
        .unwrap()
        .into_inner();
    let env: Value = serde_json::from_str(&answer.envelope_json).unwrap();
    assert_eq!(env["status"], "success", "{env}");
    let edited: u64 = env["stats"]["version"].as_str().unwrap().parse().unwrap();
    let write_tool = pb::WriteToolRequest {
        path: "p/a.txt".into(),
        content: "four\n".into(),
        expected_version: Some(edited),
        ..Default::default()
    };
    let answer = tools
        .write_tool(request(write_tool, ADMIN, Some("feat")))
        .await
        .unwrap()
        .into_inner();
    let env: Value = serde_json::from_str(&answer.envelope_json).unwrap();
    assert_eq!(env["status"], "success", "{env}");
    assert_eq!(
        read(&mut fs, ADMIN, Some("feat"), "/p/a.txt")
            .await
            .unwrap(),
        "four\n"
    );
    assert_eq!(
        read(&mut fs, ADMIN, None, "/p/a.txt").await.unwrap(),
        "one\n"
    );
}
