//! Attribution and Rewind through the real server (docs/changesets.md §
//! Attribution, § Rewind): each change keeps its session, label and
//! changeset in Watch and history; a recorded turn, rewound by its label,
//! leaves the tree byte-for-byte as it was before the turn on the State,
//! Store and object tiers; a dry run changes nothing; a later change by
//! someone else blocks the rewind unless forced; a mount without history
//! rewinds only what the turn created.

use crate::util::{Server, assert_error};
use agentvfs::pb;
use agentvfs::pb::changeset_operation::Operation;
use agentvfs::pb::filesystem_client::FilesystemClient;
use agentvfs::pb::rewind_request::Selector;
use std::collections::BTreeMap;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

/// `msg` sent under `label` (the `x-agentvfs-label` header).
fn labelled<T>(msg: T, label: &str) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut()
        .insert("x-agentvfs-label", label.parse().unwrap());
    req
}

async fn write(fs: &mut FilesystemClient<Channel>, label: &str, path: &str, content: &str) {
    let req = pb::WriteRequest {
        path: path.into(),
        content: content.into(),
        ..Default::default()
    };
    fs.write(labelled(req, label))
        .await
        .unwrap_or_else(|s| panic!("write {path}: {s:?}"));
}

/// Every file under `root` and its bytes: the tree a rewind must restore.
async fn tree(fs: &mut FilesystemClient<Channel>, root: &str) -> BTreeMap<String, Vec<u8>> {
    let req = pb::GlobRequest {
        pattern: "**".into(),
        path: root.into(),
        ..Default::default()
    };
    let (entries, _) = crate::util::glob_entries(fs, req).await.unwrap();
    let mut out = BTreeMap::new();
    for entry in entries.into_iter().filter(|e| !e.is_directory) {
        let req = pb::ReadBytesRequest {
            path: entry.path.clone(),
            version: None,
        };
        let mut stream = fs.read_bytes(req).await.unwrap().into_inner();
        let mut data = Vec::new();
        while let Some(msg) = stream.message().await.unwrap() {
            data.extend(msg.data);
        }
        out.insert(entry.path, data);
    }
    out
}

async fn rewind(
    fs: &mut FilesystemClient<Channel>,
    path: &str,
    selector: Selector,
    dry_run: bool,
    force: bool,
) -> Result<pb::RewindResponse, Status> {
    let req = pb::RewindRequest {
        path: path.into(),
        selector: Some(selector),
        dry_run,
        force,
    };
    fs.rewind(req).await.map(|r| r.into_inner())
}

/// Every change under `root` the logs still hold, as Watch sends them,
/// message by message.
async fn changes(fs: &mut FilesystemClient<Channel>, root: &str) -> Vec<Vec<pb::ChangeEvent>> {
    let req = pb::WatchRequest {
        path: root.into(),
        stop_at_head: true,
        ..Default::default()
    };
    let mut stream = fs.watch(req).await.unwrap().into_inner();
    let mut out = Vec::new();
    while let Some(msg) = stream.message().await.unwrap() {
        if !msg.events.is_empty() {
            out.push(msg.events);
        }
    }
    out
}

fn op(operation: Operation) -> pb::ChangesetOperation {
    pb::ChangesetOperation {
        operation: Some(operation),
    }
}

/// One agent's turn under `root`, labelled `label`: writes, an edit, a
/// delete, a move and a changeset of several files.
async fn turn(fs: &mut FilesystemClient<Channel>, root: &str, label: &str) {
    write(fs, label, &format!("{root}/a.md"), "a changed\n").await;
    write(fs, label, &format!("{root}/new.md"), "made in the turn\n").await;
    let edit = pb::EditRequest {
        path: format!("{root}/dir/c.md"),
        old_string: "c".into(),
        new_string: "C".into(),
        replace_all: true,
        ..Default::default()
    };
    fs.edit(labelled(edit, label)).await.unwrap();
    let delete = pb::DeleteRequest {
        path: format!("{root}/b.md"),
        ..Default::default()
    };
    fs.delete(labelled(delete, label)).await.unwrap();
    let moved = pb::MoveRequest {
        source: format!("{root}/dir/d.md"),
        destination: format!("{root}/moved/d.md"),
        ..Default::default()
    };
    fs.r#move(labelled(moved, label)).await.unwrap();
    let commit = pb::CommitRequest {
        operations: vec![
            op(Operation::Write(pb::WriteRequest {
                path: format!("{root}/a.md"),
                content: "a changed twice\n".into(),
                ..Default::default()
            })),
            op(Operation::Delete(pb::DeleteRequest {
                path: format!("{root}/new.md"),
                ..Default::default()
            })),
            op(Operation::Write(pb::WriteRequest {
                path: format!("{root}/also-new.md"),
                content: "x".repeat(5000),
                ..Default::default()
            })),
        ],
    };
    fs.commit(labelled(commit, label)).await.unwrap();
}

/// Seeds `root`, records a turn, and checks that a dry run changes
/// nothing and that the rewind brings back the tree before the turn, byte
/// for byte, as one changeset whose events arrive in one Watch message.
async fn a_turn_rewinds_exactly(fs: &mut FilesystemClient<Channel>, root: &str) {
    for (name, content) in [
        ("a.md", "a\n"),
        ("b.md", "b\n"),
        ("dir/c.md", "c c c\n"),
        ("dir/d.md", "d\n"),
    ] {
        write(fs, "seed", &format!("{root}/{name}"), content).await;
    }
    let before = tree(fs, root).await;
    turn(fs, root, "turn-7").await;
    let after = tree(fs, root).await;
    assert_ne!(before, after, "{root}: the turn changed nothing");

    let dry = rewind(fs, root, Selector::Label("turn-7".into()), true, false)
        .await
        .unwrap();
    assert_eq!(
        tree(fs, root).await,
        after,
        "{root}: a dry run changed files"
    );
    assert!(dry.changeset.is_empty());
    for needle in ["-a changed twice", "+a\n", "+b\n", "-CCC"] {
        let needle = needle.replace("CCC", "C C C");
        assert!(
            dry.diff.contains(&needle),
            "{root}: {needle:?} not in\n{}",
            dry.diff
        );
    }
    let paths: Vec<&str> = dry.files.iter().map(|f| f.path.as_str()).collect();
    let expected: Vec<String> = [
        "a.md",
        "also-new.md",
        "b.md",
        "dir/c.md",
        "dir/d.md",
        "moved/d.md",
    ]
    .iter()
    .map(|p| format!("{root}/{p}"))
    .collect();
    assert_eq!(paths, expected, "{root}: the files a rewind changes");

    let done = rewind(fs, root, Selector::Label("turn-7".into()), false, false)
        .await
        .unwrap();
    assert_eq!(
        tree(fs, root).await,
        before,
        "{root}: not the tree before the turn"
    );
    assert!(done.changeset.starts_with("cs-"), "{done:?}");
    assert!(
        done.files.iter().all(|f| f.version > 0 || f.deleted),
        "{done:?}"
    );

    // The rewind's own changes: one changeset, delivered in one message.
    let messages = changes(fs, root).await;
    let with_rewind: Vec<&Vec<pb::ChangeEvent>> = messages
        .iter()
        .filter(|m| m.iter().any(|e| e.changeset == done.changeset))
        .collect();
    assert_eq!(
        with_rewind.len(),
        1,
        "{root}: the rewind split over messages"
    );
    let rewound: Vec<&pb::ChangeEvent> = with_rewind[0]
        .iter()
        .filter(|e| e.changeset == done.changeset)
        .collect();
    assert_eq!(rewound.len(), done.files.len());
    // The turn's changes keep their label, session and changeset.
    let labelled: Vec<&pb::ChangeEvent> = messages
        .iter()
        .flatten()
        .filter(|e| e.label == "turn-7")
        .collect();
    assert!(labelled.len() >= 9, "{root}: {labelled:?}");
    assert!(labelled.iter().all(|e| e.session == "default"));
    assert!(labelled.iter().any(|e| e.changeset.starts_with("cs-")));
    // A second rewind of the same label would undo the rewind: the files
    // changed since by it are a conflict.
    let again = rewind(fs, root, Selector::Label("turn-7".into()), false, false)
        .await
        .unwrap_err();
    assert_error(&again, Code::Aborted, "CONFLICT");
}

#[tokio::test]
async fn a_recorded_turn_rewinds_to_the_tree_before_it_on_state_and_store() {
    let server = Server::start();
    let mut fs = server.fs().await;
    a_turn_rewinds_exactly(&mut fs, "/scratch").await;
    a_turn_rewinds_exactly(&mut fs, "/memories/notes").await;
}

#[tokio::test]
async fn a_recorded_turn_rewinds_to_the_tree_before_it_on_the_object_tier() {
    let bucket = crate::s3::s3().bucket("agentvfs-it");
    let config = format!(
        "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n[[mount]]\nprefix = \"/shared\"\n\
         tier = \"object\"\nbucket = \"{bucket}\"\nkey_prefix = \"rw-{:016x}\"\n\
         path_style = true\n",
        rand::random::<u64>()
    );
    let server = Server::start_with(Some(&config), &[]);
    let mut fs = server.fs().await;
    a_turn_rewinds_exactly(&mut fs, "/shared/work").await;
}

#[tokio::test]
async fn a_later_change_by_someone_else_blocks_the_rewind_unless_forced() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "seed", "/memories/x.md", "one\n").await;
    write(&mut fs, "seed", "/memories/y.md", "why\n").await;
    write(&mut fs, "agent-a", "/memories/x.md", "two\n").await;
    write(&mut fs, "agent-a", "/memories/y.md", "why not\n").await;
    write(&mut fs, "agent-b", "/memories/x.md", "three\n").await;

    let refused = rewind(
        &mut fs,
        "/memories",
        Selector::Label("agent-a".into()),
        false,
        false,
    )
    .await
    .unwrap_err();
    assert_error(&refused, Code::Aborted, "CONFLICT");
    assert!(refused.message().contains("/memories/x.md"), "{refused:?}");
    assert!(refused.message().contains("force"), "{refused:?}");
    let untouched = tree(&mut fs, "/memories").await;
    assert_eq!(untouched["/memories/x.md"], b"three\n");
    assert_eq!(
        untouched["/memories/y.md"], b"why not\n",
        "a refused rewind applied"
    );

    rewind(
        &mut fs,
        "/memories",
        Selector::Label("agent-a".into()),
        false,
        true,
    )
    .await
    .unwrap();
    let forced = tree(&mut fs, "/memories").await;
    assert_eq!(forced["/memories/x.md"], b"one\n");
    assert_eq!(forced["/memories/y.md"], b"why\n");
}

#[tokio::test]
async fn rewinds_by_changeset_cursor_session_and_their_bad_forms() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "seed", "/memories/k.md", "kept\n").await;
    // By changeset: only that commit's changes.
    let commit = pb::CommitRequest {
        operations: vec![op(Operation::Write(pb::WriteRequest {
            path: "/memories/k.md".into(),
            content: "committed\n".into(),
            ..Default::default()
        }))],
    };
    let id = fs.commit(commit).await.unwrap().into_inner().changeset;
    assert!(id.starts_with("cs-"), "{id}");
    rewind(&mut fs, "/memories", Selector::Changeset(id), false, false)
        .await
        .unwrap();
    assert_eq!(
        tree(&mut fs, "/memories").await["/memories/k.md"],
        b"kept\n"
    );

    // Since a cursor: everything after it.
    let head = pb::WatchRequest {
        path: "/memories".into(),
        from_now: true,
        ..Default::default()
    };
    let mut stream = fs.watch(head).await.unwrap().into_inner();
    let cursor = stream.message().await.unwrap().unwrap().cursor;
    drop(stream);
    let before = tree(&mut fs, "/memories").await;
    write(&mut fs, "x", "/memories/k.md", "later\n").await;
    write(&mut fs, "y", "/memories/l.md", "later too\n").await;
    rewind(
        &mut fs,
        "/memories",
        Selector::SinceCursor(cursor),
        false,
        false,
    )
    .await
    .unwrap();
    assert_eq!(tree(&mut fs, "/memories").await, before);

    // By session, on the State tier: one session's scratch files only.
    let mut other = Request::new(pb::WriteRequest {
        path: "/scratch/s.md".into(),
        content: "other session\n".into(),
        ..Default::default()
    });
    other
        .metadata_mut()
        .insert("x-agentvfs-session", "s2".parse().unwrap());
    fs.write(other).await.unwrap();
    write(&mut fs, "z", "/memories/by-default.md", "default session\n").await;
    let done = rewind(
        &mut fs,
        "/memories",
        Selector::Session("default".into()),
        true,
        false,
    )
    .await
    .unwrap();
    assert!(
        done.files
            .iter()
            .any(|f| f.path == "/memories/by-default.md")
    );

    // Nothing to undo is an empty answer, not an error.
    let none = rewind(
        &mut fs,
        "/memories",
        Selector::Label("never-used".into()),
        false,
        false,
    )
    .await
    .unwrap();
    assert!(
        none.files.is_empty() && none.changeset.is_empty(),
        "{none:?}"
    );

    // Bad forms: no selector, a bad label, a foreign cursor, two mounts.
    let req = pb::RewindRequest {
        path: "/memories".into(),
        ..Default::default()
    };
    assert_error(
        &fs.rewind(req).await.unwrap_err(),
        Code::InvalidArgument,
        "INVALID_PARAM",
    );
    let bad = rewind(
        &mut fs,
        "/",
        Selector::Label("no spaces".into()),
        false,
        false,
    )
    .await;
    assert_error(&bad.unwrap_err(), Code::InvalidArgument, "INVALID_PARAM");
    let bad = rewind(
        &mut fs,
        "/",
        Selector::SinceCursor("nope".into()),
        false,
        false,
    )
    .await;
    assert_error(&bad.unwrap_err(), Code::InvalidArgument, "INVALID_PARAM");
    write(&mut fs, "both", "/scratch/one.md", "1\n").await;
    write(&mut fs, "both", "/memories/two.md", "2\n").await;
    let spans = rewind(&mut fs, "/", Selector::Label("both".into()), false, false)
        .await
        .unwrap_err();
    assert_error(&spans, Code::InvalidArgument, "INVALID_PARAM");
    assert!(spans.message().contains("mounts"), "{spans:?}");
}

#[tokio::test]
async fn labels_are_bounded_and_kept_in_history() {
    let server = Server::start();
    let mut fs = server.fs().await;
    for bad in ["has space", "ünïcode", &"x".repeat(129)] {
        let req = pb::WriteRequest {
            path: "/memories/l.md".into(),
            content: "x".into(),
            ..Default::default()
        };
        let mut req = Request::new(req);
        if let Ok(value) = bad.parse() {
            req.metadata_mut().insert("x-agentvfs-label", value);
            let refused = fs.write(req).await.unwrap_err();
            assert_error(&refused, Code::InvalidArgument, "INVALID_PARAM");
            assert!(refused.message().contains("label"), "{refused:?}");
        }
    }
    let longest = "toolu_01".to_owned() + &"A".repeat(120);
    write(&mut fs, &longest, "/memories/l.md", "labelled\n").await;
    let versions = fs
        .list_versions(pb::ListVersionsRequest {
            path: "/memories/l.md".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .versions;
    assert_eq!(versions[0].label, longest);
    assert_eq!(versions[0].session, "default");
}

#[tokio::test]
async fn a_mount_without_history_rewinds_only_what_the_turn_created() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "seed", "/workspace/kept.md", "kept\n").await;
    write(&mut fs, "t1", "/workspace/made.md", "made\n").await;
    rewind(
        &mut fs,
        "/workspace",
        Selector::Label("t1".into()),
        false,
        false,
    )
    .await
    .unwrap();
    let files = tree(&mut fs, "/workspace").await;
    assert!(!files.contains_key("/workspace/made.md"), "{files:?}");
    write(&mut fs, "t2", "/workspace/kept.md", "changed\n").await;
    let refused = rewind(
        &mut fs,
        "/workspace",
        Selector::Label("t2".into()),
        false,
        false,
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(
        refused.message().contains("no version history"),
        "{refused:?}"
    );
    assert_eq!(
        tree(&mut fs, "/workspace").await["/workspace/kept.md"],
        b"changed\n"
    );
}

/// Calls tool `name` with `args` under `header_label` (when given); the
/// envelope as JSON.
async fn tool(
    server: &Server,
    name: &str,
    args: serde_json::Value,
    header_label: Option<&str>,
) -> serde_json::Value {
    let mut tools = agentvfs::pb::tools_client::ToolsClient::new(server.channel().await);
    let req = pb::InvokeRequest {
        name: name.into(),
        arguments_json: args.to_string(),
        tool_call_id: String::new(),
    };
    let req = match header_label {
        Some(label) => labelled(req, label),
        None => Request::new(req),
    };
    let reply = tools.invoke(req).await.unwrap().into_inner();
    serde_json::from_str(&reply.envelope_json).unwrap()
}

#[tokio::test]
async fn the_tools_that_change_files_take_a_label_and_history_shows_it() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let args =
        serde_json::json!({"path": "/memories/t.md", "content": "one\n", "label": "toolu_01abc"});
    let wrote = tool(&server, "Write", args, Some("turn-1")).await;
    assert_eq!(wrote["status"], "success", "{wrote}");
    // The argument wins over the header; the header applies without it.
    let args = serde_json::json!({"path": "/memories/t.md", "old_string": "one", "new_string": "two", "expected_version": wrote["stats"]["version"]});
    let edited = tool(&server, "Edit", args, Some("turn-1")).await;
    assert_eq!(edited["status"], "success", "{edited}");
    let listed = tool(
        &server,
        "History",
        serde_json::json!({"path": "/memories/t.md"}),
        None,
    )
    .await;
    let versions = &listed["data"]["versions"];
    assert_eq!(versions[0]["label"], "turn-1", "{listed}");
    assert_eq!(versions[1]["label"], "toolu_01abc", "{listed}");
    assert_eq!(versions[1]["session"], "default", "{listed}");
    assert!(
        listed["text"]
            .as_str()
            .unwrap()
            .contains("label toolu_01abc"),
        "{listed}"
    );

    let bad = serde_json::json!({"path": "/memories/t.md", "content": "x", "label": "two words"});
    let refused = tool(&server, "Write", bad, None).await;
    assert_eq!(refused["error"]["code"], "INVALID_PARAM", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'label'"),
        "{refused}"
    );
    // A tool that changes nothing takes no label.
    let ls = tool(
        &server,
        "LS",
        serde_json::json!({"path": "/memories", "label": "x"}),
        None,
    )
    .await;
    assert_eq!(ls["error"]["code"], "INVALID_PARAM", "{ls}");
    // Rewinding the tool call's label undoes its write only.
    rewind(
        &mut fs,
        "/memories",
        Selector::Label("turn-1".into()),
        false,
        false,
    )
    .await
    .unwrap();
    assert_eq!(tree(&mut fs, "/memories").await["/memories/t.md"], b"one\n");
}

#[tokio::test]
async fn a_rewind_is_bounded_like_a_changeset() {
    let server = Server::start_with(Some(crate::changesets::SMALL_CHANGESETS), &[]);
    let mut fs = server.fs().await;
    // More files than a changeset may change: refused before anything.
    for i in 0..4 {
        write(&mut fs, "many", &format!("/memories/m{i}.md"), "x\n").await;
    }
    let refused = rewind(
        &mut fs,
        "/memories",
        Selector::Label("many".into()),
        false,
        false,
    )
    .await
    .unwrap_err();
    assert_error(&refused, Code::ResourceExhausted, "INVALID_PARAM");
    assert!(
        refused.message().contains("more than 3 files"),
        "{refused:?}"
    );
    assert_eq!(
        tree(&mut fs, "/memories").await.len(),
        4,
        "a refused rewind applied"
    );
    // More bytes to bring back than a changeset may carry.
    write(&mut fs, "seed", "/memories/big.md", &"b".repeat(2000)).await;
    write(&mut fs, "big", "/memories/big.md", "small\n").await;
    let refused = rewind(
        &mut fs,
        "/memories",
        Selector::Label("big".into()),
        true,
        false,
    )
    .await
    .unwrap_err();
    assert_error(&refused, Code::ResourceExhausted, "INVALID_PARAM");
    assert!(refused.message().contains("1024 bytes"), "{refused:?}");
}

/// A changeset that edits a file and moves it (an apply_patch update with
/// a move) rewinds to the file as it was before the edit, at its old path:
/// the destination's version holds the edited text, not the one to bring
/// back.
#[tokio::test]
async fn an_edit_then_move_rewinds_to_the_text_before_the_edit() {
    let server = Server::start();
    let mut fs = server.fs().await;
    for root in ["/scratch/em", "/memories/em"] {
        write(&mut fs, "seed", &format!("{root}/one.txt"), "one\ntwo\n").await;
        let commit = pb::CommitRequest {
            operations: vec![
                op(Operation::Edit(pb::EditRequest {
                    path: format!("{root}/one.txt"),
                    old_string: "two".into(),
                    new_string: "three".into(),
                    ..Default::default()
                })),
                op(Operation::Move(pb::MoveRequest {
                    source: format!("{root}/one.txt"),
                    destination: format!("{root}/moved.txt"),
                    ..Default::default()
                })),
            ],
        };
        let changeset = fs.commit(commit).await.unwrap().into_inner().changeset;
        let after = tree(&mut fs, root).await;
        assert_eq!(
            after.get(&format!("{root}/moved.txt")).map(Vec::as_slice),
            Some(&b"one\nthree\n"[..])
        );
        rewind(&mut fs, root, Selector::Changeset(changeset), false, false)
            .await
            .unwrap();
        let back = tree(&mut fs, root).await;
        let expected = BTreeMap::from([(format!("{root}/one.txt"), b"one\ntwo\n".to_vec())]);
        assert_eq!(back, expected, "{root}");
    }
}

/// A handle's token in a request.
fn as_handle<T>(msg: T, token: &str) -> Request<T> {
    crate::util::as_token(msg, token)
}

/// Attack: sub-agents of one principal, each with its own handle. Every
/// handle was recorded by its principal's name (`handle of local`), so
/// rewinding one sub-agent's handle undid its sibling's acknowledged writes
/// too, and missed those of the handles it minted. A handle is recorded as
/// itself (its lineage of ids); a Rewind by the handle a change shows
/// undoes that handle's changes and its own handles', never a sibling's.
#[tokio::test]
async fn rewind_by_handle_undoes_only_that_handle_and_its_own() {
    use agentvfs::pb::access_client::AccessClient;
    let server = Server::start();
    let mut fs = server.fs().await;
    let mut access = AccessClient::new(server.channel().await);
    let every = vec![pb::Grant {
        prefix: "/team".into(),
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
    }];
    let mint = |token: Option<String>| {
        let mut req = Request::new(pb::CreateHandleRequest {
            grants: every.clone(),
            ..Default::default()
        });
        if let Some(token) = token {
            req = as_handle(req.into_inner(), &token);
        }
        req
    };
    let first = access.create_handle(mint(None)).await.unwrap().into_inner();
    let sibling = access.create_handle(mint(None)).await.unwrap().into_inner();
    let minted = access
        .create_handle(mint(Some(first.token.clone())))
        .await
        .unwrap()
        .into_inner();
    write(&mut fs, "base", "/team/shared.md", "before\n").await;
    for (token, path, content) in [
        (&first.token, "/team/first.md", "first\n"),
        (&minted.token, "/team/minted.md", "minted\n"),
        (
            &sibling.token,
            "/team/sibling.md",
            "sibling's acknowledged write\n",
        ),
        (&first.token, "/team/shared.md", "changed by first\n"),
    ] {
        let req = pb::WriteRequest {
            path: path.into(),
            content: content.into(),
            ..Default::default()
        };
        fs.write(as_handle(req, token)).await.unwrap();
    }
    let recorded = |path: &str| {
        let req = pb::ListVersionsRequest { path: path.into() };
        let mut fs = fs.clone();
        async move {
            let versions = fs.list_versions(req).await.unwrap().into_inner().versions;
            versions[0].handle.clone()
        }
    };
    let (by_first, by_sibling) = (
        recorded("/team/first.md").await,
        recorded("/team/sibling.md").await,
    );
    assert_ne!(by_first, by_sibling, "siblings are recorded apart");
    let described = access
        .describe_grants(as_handle(pb::DescribeGrantsRequest {}, &first.token))
        .await
        .unwrap()
        .into_inner();
    assert!(
        described.principal.contains(&by_first),
        "{} names the handle the changes show, {by_first}",
        described.principal
    );
    let out = rewind(&mut fs, "/team", Selector::Handle(by_first), false, false)
        .await
        .unwrap();
    let rewound: Vec<&str> = out.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        rewound,
        ["/team/first.md", "/team/minted.md", "/team/shared.md"]
    );
    let after = tree(&mut fs, "/team").await;
    let expected: BTreeMap<String, Vec<u8>> = [
        ("/team/shared.md", "before\n"),
        ("/team/sibling.md", "sibling's acknowledged write\n"),
    ]
    .into_iter()
    .map(|(path, content)| (path.to_owned(), content.as_bytes().to_vec()))
    .collect();
    assert_eq!(after, expected);
}
