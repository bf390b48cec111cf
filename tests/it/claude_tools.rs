//! Claude's memory and text-editor tools through the real server: where
//! their files live (the Store mount at /memories, the Filesystem mount at
//! /workspace), that concurrent edits are atomic, and that they stay inside
//! the project root. Their texts are compared with
//! Anthropic's reference implementation by the Python client's differential
//! test (clients/python/tests/test_claude_tools.py).

use crate::util::{Server, write};
use agentvfs::pb;
use agentvfs::pb::tools_client::ToolsClient;
use serde_json::{Value, json};
use tonic::transport::Channel;

async fn invoke(tools: &mut ToolsClient<Channel>, name: &str, args: Value) -> Value {
    let response = tools
        .invoke(pb::InvokeRequest {
            name: name.into(),
            arguments_json: args.to_string(),
            tool_call_id: "call_claude".into(),
        })
        .await
        .expect("Invoke never fails")
        .into_inner();
    serde_json::from_str(&response.envelope_json).expect("envelope_json is JSON")
}

async fn text(tools: &mut ToolsClient<Channel>, name: &str, args: Value) -> String {
    let envelope = invoke(tools, name, args).await;
    assert_eq!(envelope["status"], "success", "{envelope}");
    envelope["text"].as_str().unwrap().to_owned()
}

async fn error(tools: &mut ToolsClient<Channel>, name: &str, args: Value) -> (String, String) {
    let envelope = invoke(tools, name, args).await;
    assert_eq!(envelope["status"], "error", "{envelope}");
    let e = &envelope["error"];
    (
        e["code"].as_str().unwrap().to_owned(),
        e["message"].as_str().unwrap().to_owned(),
    )
}

/// The memory tool's /memories is the Store mount of the default
/// configuration: it outlives the State session, and other RPCs see it.
#[tokio::test]
async fn memories_live_on_the_store_mount() {
    let server = Server::start();
    let mut tools = ToolsClient::new(server.channel().await);
    let created = text(
        &mut tools,
        "memory",
        json!({"command": "create", "path": "/memories/prefs.md", "file_text": "- tea\n"}),
    )
    .await;
    assert_eq!(created, "File created successfully at: /memories/prefs.md");
    let mut fs = server.fs().await;
    let stat = fs
        .stat(pb::StatRequest {
            path: "/memories/prefs.md".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stat.info.unwrap().size, 6);
    let view = text(
        &mut tools,
        "memory",
        json!({"command": "view", "path": "/memories"}),
    )
    .await;
    assert_eq!(
        view,
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden \
         items:\n0B\t/memories\n6B\t/memories/prefs.md"
    );
}

/// Twenty concurrent inserts into one memory file all land: each is one
/// atomic read-modify-write, never a lost update.
#[tokio::test]
async fn concurrent_inserts_are_atomic() {
    let server = Server::start();
    let channel = server.channel().await;
    let mut tools = ToolsClient::new(channel.clone());
    text(
        &mut tools,
        "memory",
        json!({"command": "create", "path": "/memories/log.md", "file_text": "end\n"}),
    )
    .await;
    let calls = (0..20).map(|i| {
        let mut tools = ToolsClient::new(channel.clone());
        async move {
            text(
                &mut tools,
                "memory",
                json!({"command": "insert", "path": "/memories/log.md", "insert_line": 0, "insert_text": format!("entry {i}")}),
            )
            .await
        }
    });
    for done in futures_util::future::join_all(calls).await {
        assert_eq!(done, "The file /memories/log.md has been edited.");
    }
    let mut fs = server.fs().await;
    let content = fs
        .read(pb::ReadRequest {
            path: "/memories/log.md".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .content;
    let mut lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.pop(), Some("end"));
    lines.sort_by_key(|l| l[6..].parse::<u32>().unwrap());
    let expected: Vec<String> = (0..20).map(|i| format!("entry {i}")).collect();
    assert_eq!(lines, expected);
}

/// The text editor works on the Filesystem mount (/workspace), the real
/// directory the server was started in.
#[tokio::test]
async fn the_editor_edits_real_files_under_workspace() {
    let server = Server::start();
    std::fs::write(
        server.workdir().join("main.go"),
        "package main\n\tfunc main() {}\n",
    )
    .unwrap();
    let mut tools = ToolsClient::new(server.channel().await);
    let editor = "str_replace_based_edit_tool";
    let edited = text(
        &mut tools,
        editor,
        json!({"command": "str_replace", "path": "/workspace/main.go", "old_str": "\tfunc main() {}", "new_str": "func main() {\n\tprintln(1)\n}"}),
    )
    .await;
    assert_eq!(
        edited,
        "The file /workspace/main.go has been edited. Here's the result of running `cat -n` on a \
         snippet of /workspace/main.go:\n     1\tpackage main\n     2\tfunc main() {\n     3\t\tprintln(1)\n     4\t}\n     5\t\nReview the \
         changes and make sure they are as expected. Edit the file again if necessary."
    );
    // Tabs are kept, unlike the reference demo, which expands them.
    let on_disk = std::fs::read_to_string(server.workdir().join("main.go")).unwrap();
    assert_eq!(on_disk, "package main\nfunc main() {\n\tprintln(1)\n}\n");
    let listing = text(
        &mut tools,
        editor,
        json!({"command": "view", "path": "/workspace/"}),
    )
    .await;
    assert!(
        listing.starts_with(
            "Here's the files and directories up to 2 levels deep in /workspace/, excluding hidden items:\n/workspace/\n"
        ),
        "{listing}"
    );
    assert!(listing.contains("\n/workspace/main.go\n"), "{listing}");
}

/// Both tools stay inside the project root, and a bad argument is an
/// INVALID_PARAM envelope naming it.
#[tokio::test]
async fn root_and_bad_arguments_are_envelopes() {
    let config = r#"
[tools]
root = "/project"

[[mount]]
prefix = "/"
tier = "state"
"#;
    let server = Server::start_with(Some(config), &[]);
    let mut tools = ToolsClient::new(server.channel().await);
    let mut fs = server.fs().await;
    write(&mut fs, "/secret.txt", "s\n").await;
    let editor = "str_replace_based_edit_tool";
    let (code, message) = error(
        &mut tools,
        editor,
        json!({"command": "view", "path": "/secret.txt"}),
    )
    .await;
    assert_eq!(code, "ACCESS_DENIED");
    assert_eq!(
        message,
        "Access denied. Path must be within the project root."
    );
    let (code, message) = error(
        &mut tools,
        "memory",
        json!({"command": "view", "path": "/memories"}),
    )
    .await;
    assert_eq!(code, "ACCESS_DENIED");
    assert_eq!(
        message,
        "Access denied. The memory directory is outside the project root."
    );
    let cases = [
        (
            json!({"command": "view", "path": "/project/a", "view_range": "1-2"}),
            "Invalid `view_range`. It should be a list of two integers.",
        ),
        (
            json!({"command": "view", "path": "/project/a", "max_characters": 0}),
            "max_characters must be an integer >= 1.",
        ),
        (
            json!({"command": "insert", "path": "/project/a", "insert_line": 0, "insert_text": "a", "new_str": "b"}),
            "Pass the text to insert as insert_text or as new_str, not both.",
        ),
        (
            json!({"command": "view", "path": "/project/a", "old": 1}),
            "Unknown parameter 'old' for str_replace_based_edit_tool. Valid parameters: command, \
             path, file_text, view_range, old_str, new_str, insert_line, insert_text, max_characters.",
        ),
    ];
    for (args, expected) in cases {
        let (code, message) = error(&mut tools, editor, args.clone()).await;
        assert_eq!(
            (code.as_str(), message.as_str()),
            ("INVALID_PARAM", expected),
            "{args}"
        );
    }
}

/// A directory view stops after 10,000 entries with a note, and the output
/// budget then saves the whole view and shows its head and tail.
#[tokio::test]
async fn directory_views_are_bounded() {
    let server = Server::start();
    let mut fs = server.fs().await;
    for i in 0..10_003 {
        write(&mut fs, &format!("/big/f{i:05}"), "").await;
    }
    let mut tools = ToolsClient::new(server.channel().await);
    let envelope = invoke(
        &mut tools,
        "str_replace_based_edit_tool",
        json!({"command": "view", "path": "/big"}),
    )
    .await;
    let text = envelope["text"].as_str().unwrap();
    assert!(text.contains("\n/big/f00000\n/big/f00001\n"), "{text}");
    assert!(
        text.contains(
            "\n/big/f09999\n[Truncated: more than 10000 entries; view a subdirectory to see the rest.]"
        ),
        "{text}"
    );
    assert!(!text.contains("/big/f10000"), "{text}");
}

/// The address space the servers of the huge-text tests run in
/// (`RLIMIT_AS`): an allocation past it aborts the server, as a container's
/// memory limit would. The idle server starts within it: it reserves about
/// 250 MiB of address space (`VmSize` of `/proc/PID/status`; jemalloc, RocksDB
/// and the threads' stacks).
pub const TEXT_ADDRESS_SPACE: u64 = 2 << 30;

/// A file of 48 MiB of empty lines: one line a byte, the worst case for
/// anything that holds a file's lines.
pub fn empty_lines() -> String {
    "\n".repeat(48 << 20)
}

/// A server in [`TEXT_ADDRESS_SPACE`] that accepts files of 64 MiB, with a
/// memory budget of 512 MiB for calls in flight (a principal's share the
/// default: four times the largest file, 256 MiB), and the default mounts.
pub fn huge_text_server() -> Server {
    let config = "max_file_bytes = 67108864\n\
                  [limits]\nmemory_bytes = 536870912\n\
                  [[mount]]\nprefix = \"/\"\ntier = \"state\"\n\
                  [[mount]]\nprefix = \"/memories\"\ntier = \"store\"\n\
                  [[mount]]\nprefix = \"/workspace\"\ntier = \"filesystem\"\nroot = \".\"\n";
    let dir = tempfile::tempdir().expect("temp dir");
    Server::start_limited(dir, Some(config), &[], Some(TEXT_ADDRESS_SPACE))
}

/// Resident memory now and at the peak since the last reset, in MiB.
pub fn memory_mib(server: &Server) -> (u64, u64) {
    (
        server.memory_kib("VmRSS") / 1024,
        server.memory_kib("VmHWM") / 1024,
    )
}

/// Runs the tool calls `calls` at once, each on its own connection, and
/// checks each was served or refused for memory (RESOURCE_EXHAUSTED's
/// INVALID_PARAM naming the budget) or for a bound `allowed` names; answers
/// how many were served.
pub async fn served_or_refused(server: &Server, calls: Vec<(&str, Value)>, allowed: &str) -> usize {
    let mut running = Vec::new();
    for (name, args) in calls {
        let mut tools =
            ToolsClient::new(server.channel().await).max_decoding_message_size(256 << 20);
        let name = name.to_owned();
        running.push(tokio::spawn(async move {
            let envelope = invoke(&mut tools, &name, args.clone()).await;
            (name, args, envelope)
        }));
    }
    let mut served = 0;
    for call in running {
        let (name, args, envelope) = call.await.expect("the call answered");
        if envelope["status"] == "success" {
            served += 1;
            continue;
        }
        let message = envelope["error"]["message"].as_str().unwrap_or_default();
        assert!(
            envelope["error"]["code"] == "INVALID_PARAM"
                && (message.contains("memory_bytes") || message.contains(allowed)),
            "{name} {args}: {envelope}"
        );
    }
    served
}

/// Issue 51 F2: views and inserts of a file of 48 MiB of empty lines, eight
/// at once, by Claude's text editor and memory tools, in a server limited
/// to 2 GiB of address space. Each call is served or refused for memory
/// (the memory tool's view for its line limit), and the server stays up.
/// The tools split the file into vectors of its lines (16 to 48 bytes a
/// line, uncharged): two such views took a 4 GiB server down.
#[tokio::test]
async fn views_and_inserts_of_a_file_of_empty_lines_keep_the_server_up() {
    let server = huge_text_server();
    let content = empty_lines();
    std::fs::write(server.workdir().join("empty.txt"), &content).unwrap();
    let mut fs = server.fs().await;
    let request = pb::WriteRequest {
        path: "/memories/empty.txt".into(),
        content,
        ..Default::default()
    };
    fs.write(request).await.expect("write the memory file");
    write(&mut fs, "/small.txt", "still here\n").await;
    let (start, _) = memory_mib(&server);
    server.reset_peak_memory();

    let editor = "str_replace_based_edit_tool";
    let mut views = Vec::new();
    for i in 0..8 {
        views.push(match i % 4 {
            0 | 1 => (
                editor,
                json!({"command": "view", "path": "/workspace/empty.txt"}),
            ),
            2 => (
                editor,
                json!({"command": "view", "path": "/workspace/empty.txt", "view_range": [1, 100]}),
            ),
            _ => (
                "memory",
                json!({"command": "view", "path": "/memories/empty.txt"}),
            ),
        });
    }
    let served = served_or_refused(&server, views, "maximum line limit").await;
    eprintln!("views of 48 MiB of empty lines: {served} of 8 served");

    let mut inserts = Vec::new();
    for i in 0..8 {
        inserts.push(if i % 2 == 0 {
            (
                editor,
                json!({"command": "insert", "path": "/workspace/empty.txt", "insert_line": i, "insert_text": "x"}),
            )
        } else {
            (
                "memory",
                json!({"command": "insert", "path": "/memories/empty.txt", "insert_line": i, "insert_text": "x"}),
            )
        });
    }
    let served = served_or_refused(&server, inserts, "memory_bytes").await;
    eprintln!("inserts into 48 MiB of empty lines: {served} of 8 served");

    let (_, peak) = memory_mib(&server);
    eprintln!(
        "views and inserts: peak {peak} MiB, {} MiB over {start} MiB",
        peak.saturating_sub(start)
    );
    let read = crate::util::read_text(&mut server.fs().await, "/small.txt").await;
    assert_eq!(read.content, "still here\n");
}
