//! Copy through the server (issue 26): the `Filesystem/Copy` RPC on the
//! State, Store and Filesystem mounts of the default table (contents,
//! guards, refusals with their codes, grants, labels), the Delete, Move
//! and Copy tools' envelopes, and the Read tool's media reads (images and
//! PDFs by their magic bytes, base64 with the MIME type, bounded).

use crate::util::{Server, as_token, assert_error, read_text as read, write};
use agentvfs::pb;
use agentvfs::pb::tools_client::ToolsClient;
use base64::Engine as _;
use serde_json::{Value, json};
use tonic::transport::Channel;
use tonic::{Code, Request};

/// `msg` with a bearer `token` and, when given, a `label`.
fn request<T>(msg: T, token: Option<&str>, label: Option<&str>) -> Request<T> {
    let mut req = match token {
        Some(token) => as_token(msg, token),
        None => Request::new(msg),
    };
    if let Some(label) = label {
        req.metadata_mut()
            .insert("x-agentvfs-label", label.parse().unwrap());
    }
    req
}

/// State at `/` and the server's working directory at `/workspace`.
const MOUNTS: &str = r#"
[[mount]]
prefix = "/"
tier = "state"

[[mount]]
prefix = "/workspace"
tier = "filesystem"
root = "."
"#;

/// A principal `admin` (token `admin-token`) holding every grant on `/`.
const ADMIN: &str = r#"
[[principal]]
name = "admin"
token = "admin-token"
grants = [{ prefix = "/", ops = ["list", "file", "read_file", "read_binary", "read_re", "write", "delete"] }]
"#;

fn copy_request(source: &str, destination: &str) -> pb::CopyRequest {
    pb::CopyRequest {
        source: source.into(),
        destination: destination.into(),
        ..Default::default()
    }
}

/// One tool call through Invoke: the envelope as JSON.
async fn tool(
    tools: &mut ToolsClient<Channel>,
    token: Option<&str>,
    name: &str,
    args: Value,
) -> Value {
    let msg = pb::InvokeRequest {
        name: name.into(),
        arguments_json: args.to_string(),
        tool_call_id: "call_copy".into(),
    };
    let r = tools
        .invoke(request(msg, token, None))
        .await
        .expect("Invoke never fails")
        .into_inner();
    serde_json::from_str(&r.envelope_json).unwrap()
}

/// Asserts an error envelope with `code` and exactly `message`.
#[track_caller]
fn tool_error(env: &Value, code: &str, message: &str) {
    assert_eq!(env["status"], "error", "{env}");
    assert_eq!(env["error"]["code"], code, "{env}");
    assert_eq!(env["error"]["message"], message, "{env}");
}

/// Asserts a success envelope with exactly `text`.
#[track_caller]
fn tool_text(env: &Value, text: &str) {
    assert_eq!(env["status"], "success", "{env}");
    assert_eq!(env["text"], text, "{env}");
}

/// Copy on each mount of the default table (State at /, Store at
/// /memories, the working directory at /workspace): the copy has the
/// source's content under a version of its own, the source is unchanged,
/// create_only and if_version guard the destination, and the refusals
/// answer with their codes before anything is written.
#[tokio::test]
async fn copy_copies_a_file_on_every_mount() {
    let server = Server::start();
    let mut fs = server.fs().await;
    for base in ["/c", "/memories/c", "/workspace/c"] {
        let src = format!("{base}/a.txt");
        let dst = format!("{base}/deep/b.txt");
        let written = write(&mut fs, &src, "alpha\n").await;
        let out = fs
            .copy(copy_request(&src, &dst))
            .await
            .unwrap_or_else(|s| panic!("copy on {base}: {s:?}"))
            .into_inner();
        assert_eq!(
            (out.source.as_str(), out.destination.as_str()),
            (src.as_str(), dst.as_str())
        );
        assert_eq!(out.bytes_written, 6);
        assert!(out.created);
        let copied = read(&mut fs, &dst).await;
        assert_eq!(copied.content, "alpha\n");
        assert_eq!(copied.version, out.version);
        assert_eq!(read(&mut fs, &src).await.version, written.version);

        let mut guarded = copy_request(&src, &dst);
        guarded.create_only = true;
        let err = fs.copy(guarded).await.unwrap_err();
        assert_error(&err, Code::AlreadyExists, "CONFLICT");
        let mut stale = copy_request(&src, &dst);
        stale.if_version = Some(out.version + 1);
        let err = fs.copy(stale).await.unwrap_err();
        assert_error(&err, Code::Aborted, "CONFLICT");
        write(&mut fs, &src, "beta\n").await;
        let mut current = copy_request(&src, &dst);
        current.if_version = Some(out.version);
        let again = fs.copy(current).await.unwrap().into_inner();
        assert!(!again.created && again.version > out.version);
        assert_eq!(read(&mut fs, &dst).await.content, "beta\n");

        let err = fs.copy(copy_request(&src, &src)).await.unwrap_err();
        assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
        assert_eq!(
            err.message(),
            format!("source and destination are the same path: {src}")
        );
        let err = fs
            .copy(copy_request(base, &format!("{base}2")))
            .await
            .unwrap_err();
        assert_error(&err, Code::FailedPrecondition, "IS_DIRECTORY");
        let missing = format!("{base}/missing");
        let err = fs.copy(copy_request(&missing, &dst)).await.unwrap_err();
        assert_error(&err, Code::NotFound, "NOT_FOUND");
    }
    // The Filesystem tier's copy is a file on disk.
    let on_disk = std::fs::read_to_string(server.workdir().join("c/deep/b.txt")).unwrap();
    assert_eq!(on_disk, "beta\n");
    // Across mounts: refused naming both paths and both mounts.
    let err = fs
        .copy(copy_request("/c/a.txt", "/memories/x.txt"))
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    assert!(
        err.message()
            .ends_with("cannot copy across mounts: /c/a.txt is on /, /memories/x.txt on /memories"),
        "{}",
        err.message()
    );
}

/// Copy needs `read_file` and `read_binary` on the source and `write` on
/// the destination; the copy carries the request's label into history.
#[tokio::test]
async fn copy_checks_grants_and_keeps_the_label() {
    let copier = r#"
[[principal]]
name = "copier"
token = "copier-token"
grants = [
  { prefix = "/src", ops = ["read_file", "read_binary"] },
  { prefix = "/dst", ops = ["write", "file"] },
  { prefix = "/secret", ops = ["file"] },
]
"#;
    let config = format!("max_file_bytes = 1000\n{MOUNTS}{ADMIN}{copier}");
    let server = Server::start_with(Some(&config), &[]);
    let mut fs = server.fs().await;
    let admin = Some("admin-token");
    for (path, content) in [("/src/a", "a\n"), ("/secret/s", "s\n"), ("/dst/x", "x\n")] {
        let msg = pb::WriteRequest {
            path: path.into(),
            content: content.into(),
            ..Default::default()
        };
        fs.write(request(msg, admin, None)).await.unwrap();
    }
    let copier = Some("copier-token");
    let denied = [
        ("/secret/s", "/dst/s"),
        ("/src/a", "/src/b"),
        ("/dst/x", "/dst/y"),
    ];
    for (source, destination) in denied {
        let err = fs
            .copy(request(copy_request(source, destination), copier, None))
            .await
            .unwrap_err();
        assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
    }
    let out = fs
        .copy(request(
            copy_request("/src/a", "/dst/a"),
            copier,
            Some("turn-7"),
        ))
        .await
        .unwrap()
        .into_inner();
    let versions = fs
        .list_versions(request(
            pb::ListVersionsRequest {
                path: "/dst/a".into(),
            },
            copier,
            None,
        ))
        .await
        .unwrap()
        .into_inner()
        .versions;
    assert_eq!(versions[0].version, out.version);
    assert_eq!(versions[0].label, "turn-7");
    assert_eq!(versions[0].operation, "write");
    // Bounded: a file on disk over max_file_bytes is refused before any
    // work, naming its size and the limit.
    std::fs::write(server.workdir().join("big"), "y".repeat(1001)).unwrap();
    let err = fs
        .copy(request(
            copy_request("/workspace/big", "/workspace/big2"),
            admin,
            None,
        ))
        .await
        .unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
    assert!(
        err.message()
            .contains("/workspace/big: 1001 bytes exceeds the file size limit of 1000 bytes"),
        "{}",
        err.message()
    );
    assert!(!server.workdir().join("big2").exists());
}

/// The Delete, Move and Copy tools: texts, data, refusals, labels.
#[tokio::test]
async fn delete_move_and_copy_tools() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let mut tools = ToolsClient::new(server.channel().await);
    write(&mut fs, "/t/docs/a.md", "hello\n").await;

    let env = tool(
        &mut tools,
        None,
        "Copy",
        json!({"source": "t/docs/a.md", "destination": "t/docs/b.md", "label": "turn-1"}),
    )
    .await;
    tool_text(&env, "Copied 't/docs/a.md' to 't/docs/b.md' (6 bytes).");
    assert_eq!(env["data"]["created"], true);
    assert_eq!(read(&mut fs, "/t/docs/b.md").await.content, "hello\n");
    let history = tool(&mut tools, None, "History", json!({"path": "t/docs/b.md"})).await;
    assert_eq!(
        history["data"]["versions"][0]["label"], "turn-1",
        "{history}"
    );
    let env = tool(
        &mut tools,
        None,
        "Copy",
        json!({"source": "t/docs/a.md", "destination": "t/docs/b.md"}),
    )
    .await;
    tool_error(
        &env,
        "CONFLICT",
        "Path 't/docs/b.md' already exists. Pass overwrite: true to replace it, or choose another destination.",
    );
    let env = tool(
        &mut tools,
        None,
        "Copy",
        json!({"source": "t/docs/a.md", "destination": "t/docs/b.md", "overwrite": true}),
    )
    .await;
    tool_text(
        &env,
        "Copied over 't/docs/a.md' to 't/docs/b.md' (6 bytes).",
    );
    let env = tool(
        &mut tools,
        None,
        "Copy",
        json!({"source": "t/docs", "destination": "t/other"}),
    )
    .await;
    assert_eq!(env["error"]["code"], "IS_DIRECTORY", "{env}");
    let env = tool(
        &mut tools,
        None,
        "Copy",
        json!({"source": "t/docs/a.md", "destination": "memories/a.md"}),
    )
    .await;
    tool_error(
        &env,
        "INVALID_PARAM",
        "Cannot do that: cannot copy across mounts: /t/docs/a.md is on /, /memories/a.md on /memories.",
    );
    let env = tool(
        &mut tools,
        None,
        "Copy",
        json!({"source": "t/nothing", "destination": "t/x"}),
    )
    .await;
    tool_error(&env, "NOT_FOUND", "Path 't/nothing' does not exist.");

    let env = tool(
        &mut tools,
        None,
        "Move",
        json!({"source": "t/docs/b.md", "destination": "t/archive/b.md"}),
    )
    .await;
    tool_text(&env, "Moved 't/docs/b.md' to 't/archive/b.md'.");
    assert_eq!(env["stats"]["files_moved"], 1);
    let env = tool(
        &mut tools,
        None,
        "Move",
        json!({"source": "t/docs/a.md", "destination": "t/archive/b.md"}),
    )
    .await;
    assert_eq!(env["error"]["code"], "CONFLICT", "{env}");
    let env = tool(&mut tools, None, "Move", json!({"source": "t/docs/a.md", "destination": "t/archive/b.md", "overwrite": true, "expected_version": 999})).await;
    assert_eq!(
        env["error"]["code"], "CONFLICT",
        "a stale expected_version: {env}"
    );
    let env = tool(
        &mut tools,
        None,
        "Move",
        json!({"source": "t/archive", "destination": "t/old"}),
    )
    .await;
    tool_text(&env, "Moved directory 't/archive' to 't/old' (1 files).");

    let env = tool(&mut tools, None, "Delete", json!({"path": "t/old"})).await;
    tool_error(
        &env,
        "IS_DIRECTORY",
        "Path 't/old' is a directory. Pass recursive: true to delete it and everything in it.",
    );
    let env = tool(
        &mut tools,
        None,
        "Delete",
        json!({"path": "t/old", "recursive": true}),
    )
    .await;
    tool_text(&env, "Deleted directory 't/old' (1 files).");
    let env = tool(&mut tools, None, "Delete", json!({"path": "t/docs/a.md"})).await;
    tool_text(&env, "Deleted 't/docs/a.md'.");
    assert_eq!(env["stats"]["files_deleted"], 1);
    let env = tool(&mut tools, None, "Delete", json!({"path": "t/docs/a.md"})).await;
    tool_error(&env, "NOT_FOUND", "Path 't/docs/a.md' does not exist.");
    let env = tool(&mut tools, None, "Delete", json!({"path": "."})).await;
    tool_error(
        &env,
        "INVALID_PARAM",
        "Refusing to delete the project root; delete the files or directories in it.",
    );
    let env = tool(
        &mut tools,
        None,
        "Delete",
        json!({"path": "t", "recursive": "yes"}),
    )
    .await;
    assert_eq!(env["error"]["code"], "INVALID_PARAM", "{env}");
}

/// The changing tools check the grants the RPCs check.
#[tokio::test]
async fn delete_move_and_copy_tools_check_grants() {
    let reader = r#"
[[principal]]
name = "reader"
token = "reader-token"
grants = [{ prefix = "/", ops = ["list", "file", "read_file", "read_binary"] }, { prefix = "/mine", ops = ["write"] }]
"#;
    let config = format!("{MOUNTS}{ADMIN}{reader}");
    let server = Server::start_with(Some(&config), &[]);
    let mut tools = ToolsClient::new(server.channel().await);
    let admin = Some("admin-token");
    let env = tool(
        &mut tools,
        admin,
        "Write",
        json!({"path": "a.txt", "content": "a\n"}),
    )
    .await;
    assert_eq!(env["status"], "success", "{env}");
    let reader = Some("reader-token");
    for (name, args) in [
        ("Delete", json!({"path": "a.txt"})),
        (
            "Move",
            json!({"source": "a.txt", "destination": "mine/a.txt"}),
        ),
        ("Copy", json!({"source": "a.txt", "destination": "b.txt"})),
    ] {
        let env = tool(&mut tools, reader, name, args).await;
        assert_eq!(env["error"]["code"], "ACCESS_DENIED", "{name}: {env}");
    }
    let env = tool(
        &mut tools,
        reader,
        "Copy",
        json!({"source": "a.txt", "destination": "mine/a.txt"}),
    )
    .await;
    tool_text(&env, "Copied 'a.txt' to 'mine/a.txt' (2 bytes).");
}

/// A principal `taker` with a write-only drop box (`/inbox`), files it may
/// read only as text (`/text`) or only as bytes (`/bin`), and a folder it
/// may read and write (`/out`).
const TAKER: &str = r#"
[[principal]]
name = "taker"
token = "taker-token"
grants = [
  { prefix = "/inbox", ops = ["list", "file", "write", "delete"] },
  { prefix = "/text", ops = ["list", "file", "read_file", "write", "delete"] },
  { prefix = "/bin", ops = ["list", "file", "read_binary", "write", "delete"] },
  { prefix = "/out", ops = ["list", "file", "read_file", "read_binary", "write", "delete"] },
]
"#;

/// Attack: data moved to where the caller may read it. Copy needed only
/// `read_file` on its source, so bytes ReadBytes refuses were copied out;
/// Move needed no read grant, so a write-only drop box was emptied into a
/// readable folder; Restore, Rewind and a Commit's move wrote back or
/// carried bytes the caller could not read. Each now needs `read_file` and
/// `read_binary` on what it carries: PERMISSION_DENIED through the RPCs and
/// the tools, and nothing changed.
#[tokio::test]
async fn moving_or_copying_data_needs_the_right_to_read_it() {
    use agentvfs::pb::changeset_operation::Operation;
    use agentvfs::pb::rewind_request::Selector;
    let config = format!("{MOUNTS}{ADMIN}{TAKER}");
    let server = Server::start_with(Some(&config), &[]);
    let mut fs = server.fs().await;
    let mut tools = ToolsClient::new(server.channel().await);
    let (admin, taker) = (Some("admin-token"), Some("taker-token"));
    for (path, content, label) in [
        ("/inbox/secret", "drop\n", "one"),
        ("/text/blob", "bytes\n", "one"),
        ("/text/blob", "changed\n", "two"),
        ("/bin/blob", "bytes\n", "one"),
        ("/bin/blob", "changed\n", "two"),
    ] {
        let msg = pb::WriteRequest {
            path: path.into(),
            content: content.into(),
            ..Default::default()
        };
        let who = if path.starts_with("/inbox") {
            taker
        } else {
            admin
        };
        fs.write(request(msg, who, Some(label))).await.unwrap();
    }
    let denied = |err: tonic::Status, what: &str| {
        assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
        assert!(err.message().contains("read_"), "{what}: {}", err.message());
    };
    for source in ["/inbox/secret", "/text/blob"] {
        let err = fs
            .copy(request(copy_request(source, "/out/copy"), taker, None))
            .await
            .unwrap_err();
        denied(err, "copy");
        let msg = pb::MoveRequest {
            source: source.into(),
            destination: "/out/moved".into(),
            ..Default::default()
        };
        let err = fs.r#move(request(msg, taker, None)).await.unwrap_err();
        denied(err, "move");
        let moved = Operation::Move(pb::MoveRequest {
            source: source.into(),
            destination: "/out/moved".into(),
            ..Default::default()
        });
        let msg = pb::CommitRequest {
            operations: vec![pb::ChangesetOperation {
                operation: Some(moved),
            }],
        };
        let err = fs.commit(request(msg, taker, None)).await.unwrap_err();
        denied(err, "commit");
        for (name, args) in [
            (
                "Copy",
                json!({"source": source, "destination": "/out/copy"}),
            ),
            (
                "Move",
                json!({"source": source, "destination": "/out/moved"}),
            ),
        ] {
            let env = tool(&mut tools, taker, name, args).await;
            assert_eq!(env["error"]["code"], "ACCESS_DENIED", "{name}: {env}");
        }
    }
    // Restore and Rewind write old bytes back where the caller may write.
    let versions = fs
        .list_versions(request(
            pb::ListVersionsRequest {
                path: "/text/blob".into(),
            },
            admin,
            None,
        ))
        .await
        .unwrap()
        .into_inner()
        .versions;
    let old = versions.last().unwrap().version;
    let msg = pb::RestoreRequest {
        path: "/text/blob".into(),
        version: old,
        if_version: None,
    };
    denied(
        fs.restore(request(msg, taker, None)).await.unwrap_err(),
        "restore",
    );
    let env = tool(
        &mut tools,
        taker,
        "History",
        json!({"path": "/text/blob", "action": "restore", "version": old}),
    )
    .await;
    assert_eq!(env["error"]["code"], "ACCESS_DENIED", "History: {env}");
    let msg = pb::RewindRequest {
        path: "/bin".into(),
        selector: Some(Selector::Label("two".into())),
        ..Default::default()
    };
    denied(
        fs.rewind(request(msg, taker, None)).await.unwrap_err(),
        "rewind",
    );
    // Nothing changed.
    let text = |path: &str| {
        let msg = pb::ReadRequest {
            path: path.into(),
            ..Default::default()
        };
        let (req, mut fs) = (request(msg, admin, None), fs.clone());
        async move { fs.read(req).await.map(|r| r.into_inner().content) }
    };
    assert_eq!(text("/inbox/secret").await.unwrap(), "drop\n");
    assert_eq!(text("/text/blob").await.unwrap(), "changed\n");
    assert_eq!(text("/bin/blob").await.unwrap(), "changed\n");
    for gone in ["/out/copy", "/out/moved"] {
        let err = text(gone).await.unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{gone}");
    }
}

/// A 1x1 PNG.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89\0\0\0\rIDATx\x9cc\xf8\xff\xff?\0\x05\xfe\x02\xfe\xa7\x35\x81\x84\0\0\0\0IEND\xaeB`\x82";

/// Read of an image or a PDF answers its bytes in base64 with the MIME
/// type its magic bytes give (whatever its name); a text named `.png`
/// stays text; other binaries stay refused; past the bound the error
/// names the size and the bound; the bytes need `read_binary`.
#[tokio::test]
async fn read_answers_images_and_pdfs_in_base64() {
    let texts = r#"
[[principal]]
name = "texts"
token = "texts-token"
grants = [{ prefix = "/", ops = ["list", "file", "read_file"] }]
"#;
    let config = format!("{MOUNTS}{ADMIN}{texts}");
    let server = Server::start_with(Some(&config), &[]);
    let dir = server.workdir();
    let pdf = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n".to_vec();
    let gif = b"GIF89a\x01\0\x01\0\0\0\0;".to_vec();
    let webp =
        b"RIFF\x1a\0\0\0WEBPVP8L\x0d\0\0\0/\0\0\0\x10\x07\x10\x11\x11\x88\x88\xfe\x07\0".to_vec();
    let jpeg = b"\xff\xd8\xff\xe0\0\x10JFIF\0\x01\x01\0\0\x01\0\x01\0\0\xff\xd9".to_vec();
    let files: [(&str, &[u8], &str, &str); 5] = [
        ("picture", PNG, "image/png", "image"),
        ("photo.jpg", &jpeg, "image/jpeg", "image"),
        ("anim.gif", &gif, "image/gif", "image"),
        ("pic.webp", &webp, "image/webp", "image"),
        ("doc.pdf", &pdf, "application/pdf", "document"),
    ];
    for (name, bytes, _, _) in &files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    std::fs::write(dir.join("fake.png"), "not an image\n").unwrap();
    std::fs::write(dir.join("blob.bin"), b"\0\x01\x02binary").unwrap();
    let mut big = PNG.to_vec();
    big.resize((5 << 20) + 1, 0);
    std::fs::write(dir.join("big.png"), &big).unwrap();

    let mut tools = ToolsClient::new(server.channel().await);
    let admin = Some("admin-token");
    for (name, bytes, mime, kind) in &files {
        let path = format!("workspace/{name}");
        let env = tool(&mut tools, admin, "Read", json!({"path": path})).await;
        tool_text(
            &env,
            &format!(
                "Read {kind} '{path}' ({mime}, {} bytes); its content is in data.data, base64.",
                bytes.len()
            ),
        );
        assert_eq!(env["data"]["mime_type"], *mime);
        assert_eq!(env["data"]["type"], *kind);
        assert_eq!(env["data"]["encoding"], "base64");
        assert_eq!(env["data"]["logical_path"], format!("/{path}"));
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(env["data"]["data"].as_str().unwrap())
            .unwrap();
        assert_eq!(&decoded, bytes);
        assert_eq!(env["stats"]["file_size_bytes"], bytes.len());
        let version = env["stats"]["version"].as_str().unwrap();
        assert!(version.parse::<u64>().unwrap() > 0, "{version}");
    }
    let env = tool(
        &mut tools,
        admin,
        "Read",
        json!({"path": "workspace/fake.png"}),
    )
    .await;
    assert_eq!(env["status"], "success", "{env}");
    assert!(
        env["text"].as_str().unwrap().ends_with("1\tnot an image"),
        "{env}"
    );
    let env = tool(
        &mut tools,
        admin,
        "Read",
        json!({"path": "workspace/blob.bin"}),
    )
    .await;
    assert_eq!(env["error"]["code"], "BINARY_FILE", "{env}");
    let env = tool(
        &mut tools,
        admin,
        "Read",
        json!({"path": "workspace/big.png"}),
    )
    .await;
    tool_error(
        &env,
        "INVALID_PARAM",
        "Cannot read 'workspace/big.png': /workspace/big.png is 5242881 bytes of image/png, over \
         the 5242880-byte limit of a media read.",
    );
    let env = tool(
        &mut tools,
        Some("texts-token"),
        "Read",
        json!({"path": "workspace/picture"}),
    )
    .await;
    tool_error(
        &env,
        "ACCESS_DENIED",
        "Permission denied accessing 'workspace/picture'.",
    );
}

/// On the State tier a copy shares its source's bytes: eight copies of a
/// 16 MiB file grow the server's resident memory by far less than one
/// file's size (byte copies would hold 128 MiB more), and each copy is
/// still a file of its own once written.
#[tokio::test]
async fn state_copies_share_their_bytes() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let big = "y".repeat(16 << 20);
    write(&mut fs, "/share/big", &big).await;
    drop(big);
    let before = server.memory_kib("VmRSS");
    for i in 0..8 {
        fs.copy(copy_request("/share/big", &format!("/share/copy{i}")))
            .await
            .unwrap();
    }
    let grown = server.memory_kib("VmRSS").saturating_sub(before);
    assert!(
        grown < 16 << 10,
        "8 copies of 16 MiB grew the server by {grown} KiB"
    );
    write(&mut fs, "/share/copy3", "changed\n").await;
    assert_eq!(read(&mut fs, "/share/copy3").await.content, "changed\n");
    let original = read(&mut fs, "/share/big").await;
    assert_eq!(original.content.len(), 16 << 20);
}

/// SetExecutable is a change of the file: it needs `write` on it, a
/// refusal changes nothing, and it is recorded with the caller's label
/// (docs/contract.md § The executable bit).
#[tokio::test]
async fn set_executable_needs_write_and_keeps_the_label() {
    let reader = r#"
[[principal]]
name = "reader"
token = "reader-token"
grants = [{ prefix = "/", ops = ["list", "file", "read_file", "read_binary"] }]
"#;
    let config = format!("{MOUNTS}{ADMIN}{reader}");
    let server = Server::start_with(Some(&config), &[]);
    let mut fs = server.fs().await;
    let admin = Some("admin-token");
    let msg = pb::WriteRequest {
        path: "/bin/run.sh".into(),
        content: "#!/bin/sh\n".into(),
        ..Default::default()
    };
    let written = fs.write(request(msg, admin, None)).await.unwrap();
    let set = |executable| pb::SetExecutableRequest {
        path: "/bin/run.sh".into(),
        executable,
        if_version: None,
    };
    let err = fs
        .set_executable(request(set(true), Some("reader-token"), None))
        .await
        .unwrap_err();
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
    let stat = |token| {
        request(
            pb::StatRequest {
                path: "/bin/run.sh".into(),
            },
            token,
            None,
        )
    };
    let info = fs
        .stat(stat(admin))
        .await
        .unwrap()
        .into_inner()
        .info
        .unwrap();
    assert_eq!(
        (info.executable, info.version),
        (false, written.into_inner().version)
    );
    let out = fs
        .set_executable(request(set(true), admin, Some("turn-9")))
        .await
        .unwrap()
        .into_inner();
    assert!(out.changed && out.version > out.previous_version, "{out:?}");
    let info = fs
        .stat(stat(admin))
        .await
        .unwrap()
        .into_inner()
        .info
        .unwrap();
    assert!(info.executable);
    let listed = pb::ListVersionsRequest {
        path: "/bin/run.sh".into(),
    };
    let versions = fs
        .list_versions(request(listed, admin, None))
        .await
        .unwrap()
        .into_inner()
        .versions;
    assert_eq!(versions[0].version, out.version);
    assert_eq!(versions[0].label, "turn-9");
}
