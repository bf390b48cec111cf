//! The change feed and version history through the server
//! (docs/contract.md § Changes and history): a Watch that follows commits,
//! resumes across a `kill -9` of a Store server with exactly the
//! acknowledged writes it had not seen, refuses an expired cursor naming the
//! oldest one, shows a caller only what it may list, cuts a watcher that
//! stops reading, keeps sessions apart; changes made on disk reported as
//! external; retention bounded under 100,000 writes; the History tool.

use crate::util::{Server, assert_error, with_session, write};
use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::transport::Channel;
use tonic::{Code, Request, Streaming};
use tonic_types::StatusExt;

/// State at `/`, a Store at `/memories` in the server's working directory.
const STORE: &str = "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n\
                     [[mount]]\nprefix = \"/memories\"\ntier = \"store\"\npath = \"store\"\n";

/// A Watch request.
fn watch_req(path: &str, cursor: &str, from_now: bool, stop_at_head: bool) -> pb::WatchRequest {
    pb::WatchRequest {
        path: path.into(),
        cursor: cursor.into(),
        from_now,
        stop_at_head,
    }
}

/// Every event of a Watch that stops at the head, and its last cursor.
async fn catch_up(
    fs: &mut FilesystemClient<Channel>,
    req: impl tonic::IntoRequest<pb::WatchRequest>,
) -> Result<(Vec<pb::ChangeEvent>, String), tonic::Status> {
    let mut stream = fs.watch(req).await?.into_inner();
    let mut events = Vec::new();
    let mut cursor = String::new();
    while let Some(msg) = stream.message().await? {
        events.extend(msg.events);
        cursor = msg.cursor;
    }
    Ok((events, cursor))
}

/// The next events of a following Watch, at least `n` of them, within 10 s.
async fn next_events(stream: &mut Streaming<pb::WatchResponse>, n: usize) -> Vec<pb::ChangeEvent> {
    let mut events = Vec::new();
    while events.len() < n {
        let msg = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("an event within 10 s")
            .expect("the stream goes on")
            .expect("a message");
        events.extend(msg.events);
    }
    events
}

fn kind(e: &pb::ChangeEvent) -> pb::ChangeKind {
    pb::ChangeKind::try_from(e.kind).unwrap_or(pb::ChangeKind::Unspecified)
}

/// A Watch from now sees each change as it commits, in order, with its
/// version, size, principal and operation.
#[tokio::test]
async fn a_watch_follows_changes_as_they_commit() {
    let server = Server::start_with(Some(STORE), &[]);
    let mut fs = server.fs().await;
    write(&mut fs, "/memories/before.md", "old").await;
    let mut stream = fs
        .watch(watch_req("/memories", "", true, false))
        .await
        .unwrap()
        .into_inner();
    let mut other = server.fs().await;
    let w = write(&mut other, "/memories/a.md", "alpha\n").await;
    let e = other
        .edit(pb::EditRequest {
            path: "/memories/a.md".into(),
            old_string: "alpha".into(),
            new_string: "beta".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    other
        .delete(pb::DeleteRequest {
            path: "/memories/a.md".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let events = next_events(&mut stream, 3).await;
    let seen: Vec<(pb::ChangeKind, &str, &str)> = events
        .iter()
        .map(|e| (kind(e), e.path.as_str(), e.operation.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (pb::ChangeKind::Created, "/memories/a.md", "write"),
            (pb::ChangeKind::Modified, "/memories/a.md", "edit"),
            (pb::ChangeKind::Deleted, "/memories/a.md", "delete"),
        ]
    );
    assert_eq!((events[0].version, events[0].size), (w.version, 6));
    assert_eq!((events[1].version, events[1].size), (e.version, 5));
    assert!(events[2].version > e.version);
    assert!(
        events
            .iter()
            .all(|e| e.principal == "local" && !e.cursor.is_empty())
    );
}

/// One acknowledged write: its path, version and writer's sequence.
type Acked = (String, u64);

/// A watcher follows a Store while 4 writers write; the server is killed
/// with `kill -9` and started again; resuming from the watcher's last cursor
/// yields exactly the acknowledged writes it had not seen, each once, each
/// writer's in the order it wrote them, and nothing that was not committed.
#[tokio::test]
async fn a_watch_resumes_after_kill_9_with_exactly_the_unseen_acknowledged_writes() {
    let mut server = Server::start_with(Some(STORE), &[]);
    let mut fs = server.fs().await;
    let mut stream = fs
        .watch(watch_req("/memories", "", true, false))
        .await
        .unwrap()
        .into_inner();
    // The watcher takes its first few hundred changes, then falls silent
    // (as a slow or disconnected client would), so a backlog of changes it
    // has not seen builds up before the crash.
    let seen: Arc<Mutex<(Vec<Acked>, String)>> = Arc::default();
    let watcher = {
        let seen = seen.clone();
        tokio::spawn(async move {
            while let Ok(Some(msg)) = stream.message().await {
                let mut seen = seen.lock().unwrap();
                seen.0
                    .extend(msg.events.into_iter().map(|e| (e.path, e.version)));
                seen.1 = msg.cursor;
                if seen.0.len() >= 300 {
                    return;
                }
            }
        })
    };
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (acked, url) = (acked.clone(), server.url.clone());
            tokio::spawn(async move {
                let channel = Channel::from_shared(url).unwrap().connect().await.unwrap();
                let mut fs = FilesystemClient::new(channel);
                for i in 0.. {
                    let path = format!("/memories/w{w}/f{i:06}");
                    let req = pb::WriteRequest {
                        path: path.clone(),
                        content: format!("writer {w} write {i}\n"),
                        ..Default::default()
                    };
                    match fs.write(req).await {
                        Ok(out) => acked.lock().unwrap().push((path, out.into_inner().version)),
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    // Let the writers and the watcher run, then crash in the middle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.crash_and_restart();
    for w in writers {
        w.await.unwrap();
    }
    watcher.await.unwrap();
    let (seen, cursor) = seen.lock().unwrap().clone();
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 100,
        "only {} writes before the crash",
        acked.len()
    );
    assert!(
        !seen.is_empty() && !cursor.is_empty(),
        "the watcher saw nothing"
    );

    let mut fs = server.fs().await;
    let (resumed, _) = catch_up(&mut fs, watch_req("/memories", &cursor, false, true))
        .await
        .unwrap();
    let resumed: Vec<Acked> = resumed.into_iter().map(|e| (e.path, e.version)).collect();
    let seen_set: BTreeSet<&Acked> = seen.iter().collect();
    let resumed_set: BTreeSet<&Acked> = resumed.iter().collect();
    assert_eq!(resumed_set.len(), resumed.len(), "an event came twice");
    assert!(
        seen_set.is_disjoint(&resumed_set),
        "events seen before the crash came again"
    );
    let unseen: Vec<&Acked> = acked.iter().filter(|a| !seen_set.contains(a)).collect();
    assert!(unseen.len() > 100, "only {} writes to resume", unseen.len());
    for write in &unseen {
        assert!(
            resumed_set.contains(write),
            "acknowledged {write:?} never came"
        );
    }
    // Extra events are writes that committed while their reply was lost to
    // the crash: each must be in the store, as it says.
    for (path, version) in resumed.iter().filter(|r| !acked.contains(r)) {
        let stat = fs
            .stat(pb::StatRequest { path: path.clone() })
            .await
            .unwrap_or_else(|s| panic!("{path} was announced but is missing: {s:?}"))
            .into_inner();
        assert_eq!(stat.info.unwrap().version, *version, "{path}");
    }
    // Each writer's writes come in the order it made them.
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    for (path, _) in &resumed {
        let (writer, file) = path.rsplit_once('/').unwrap();
        if let Some(before) = last.insert(writer.to_owned(), file.to_owned()) {
            assert!(
                before.as_str() < file,
                "{writer}: {file} came after {before}"
            );
        }
    }
    eprintln!(
        "kill -9 resume: {} acknowledged, {} seen before the crash, {} resumed ({} unseen \
         acknowledged, {} committed without an acknowledgement)",
        acked.len(),
        seen.len(),
        resumed.len(),
        unseen.len(),
        resumed.len() - unseen.len()
    );
}

/// A cursor older than what the log keeps is FAILED_PRECONDITION naming
/// the oldest cursor still available, which then resumes.
#[tokio::test]
async fn an_expired_cursor_names_the_oldest_one_still_available() {
    let config = "[[mount]]\nprefix = \"/\"\ntier = \"state\"\nchange_log = 3\n";
    let server = Server::start_with(Some(config), &[]);
    let mut fs = server.fs().await;
    write(&mut fs, "/a", "1").await;
    let (_, cursor) = catch_up(&mut fs, watch_req("/", "", false, true))
        .await
        .unwrap();
    for name in ["b", "c", "d", "e", "f"] {
        write(&mut fs, &format!("/{name}"), "x").await;
    }
    let status = catch_up(&mut fs, watch_req("/", &cursor, false, true))
        .await
        .unwrap_err();
    assert_error(&status, Code::FailedPrecondition, "INVALID_PARAM");
    assert!(
        status.message().contains("keeps its last 3 changes"),
        "{}",
        status.message()
    );
    let oldest = status.get_details_error_info().unwrap().metadata["oldest_cursor"].clone();
    assert!(status.message().contains(&oldest), "{}", status.message());
    let (events, _) = catch_up(&mut fs, watch_req("/", &oldest, false, true))
        .await
        .unwrap();
    let paths: Vec<&str> = events.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["/d", "/e", "/f"]);
    // A cursor and from_now together, or a forged cursor, are refused.
    let both = catch_up(&mut fs, watch_req("/", &oldest, true, true)).await;
    assert_error(&both.unwrap_err(), Code::InvalidArgument, "INVALID_PARAM");
    let forged = catch_up(&mut fs, watch_req("/", "c1.!!", false, true)).await;
    assert_error(&forged.unwrap_err(), Code::InvalidArgument, "INVALID_PARAM");
}

fn authed<T>(msg: T, token: &str) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

/// A watcher sees only the changes at paths it may list: a move from a
/// visible directory into a hidden one shows the deletion without naming
/// where the file went; a Watch of a path it may not list is refused.
#[tokio::test]
async fn a_watcher_sees_only_what_it_may_list() {
    let config = format!(
        "{STORE}\n[[principal]]\nname = \"writer\"\ntoken = \"writer-token\"\n\
         grants = [{{ prefix = \"/\", ops = [\"list\", \"file\", \"read_file\", \"read_binary\", \"write\", \"delete\"] }}]\n\n\
         [[principal]]\nname = \"reader\"\ntoken = \"reader-token\"\n\
         grants = [{{ prefix = \"/memories/public\", ops = [\"list\"] }}]\n"
    );
    let server = Server::start_with(Some(&config), &[]);
    let mut fs = server.fs().await;
    for path in [
        "/memories/public/a",
        "/memories/private/b",
        "/memories/public/x",
    ] {
        let req = pb::WriteRequest {
            path: path.into(),
            content: "x".into(),
            ..Default::default()
        };
        fs.write(authed(req, "writer-token")).await.unwrap();
    }
    let req = pb::MoveRequest {
        source: "/memories/public/x".into(),
        destination: "/memories/private/y".into(),
        ..Default::default()
    };
    fs.r#move(authed(req, "writer-token")).await.unwrap();
    let (events, _) = catch_up(
        &mut fs,
        authed(watch_req("/memories", "", false, true), "reader-token"),
    )
    .await
    .unwrap();
    let seen: Vec<(&str, pb::ChangeKind, &str)> = events
        .iter()
        .map(|e| (e.path.as_str(), kind(e), e.moved_path.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("/memories/public/a", pb::ChangeKind::Created, ""),
            ("/memories/public/x", pb::ChangeKind::Created, ""),
            ("/memories/public/x", pb::ChangeKind::Deleted, ""),
        ]
    );
    assert_eq!(events[0].principal, "writer");
    let denied = catch_up(
        &mut fs,
        authed(
            watch_req("/memories/private", "", false, true),
            "reader-token",
        ),
    )
    .await;
    assert_error(
        &denied.unwrap_err(),
        Code::PermissionDenied,
        "ACCESS_DENIED",
    );
}

/// A State session's log is its own: a watcher in another session sees
/// none of its changes.
#[tokio::test]
async fn state_sessions_keep_their_own_logs() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let req = pb::WriteRequest {
        path: "/scratch.md".into(),
        content: "mine".into(),
        ..Default::default()
    };
    fs.write(with_session(req, "one")).await.unwrap();
    let (mine, _) = catch_up(
        &mut fs,
        with_session(watch_req("/", "", false, true), "one"),
    )
    .await
    .unwrap();
    let (theirs, _) = catch_up(
        &mut fs,
        with_session(watch_req("/", "", false, true), "two"),
    )
    .await
    .unwrap();
    assert_eq!(mine.len(), 1);
    assert!(theirs.is_empty(), "{theirs:?}");
}

/// A watcher that stops reading is reset after the idle timeout (its
/// queued messages dropped: CANCELLED once it reads again); the last cursor
/// it read yields exactly the rest. The server keeps answering others
/// meanwhile.
#[tokio::test]
async fn a_watcher_that_stops_reading_is_cut_and_can_resume() {
    let config = format!("{STORE}\n[limits]\nstream_idle_timeout_seconds = 1\n");
    let server = Server::start_with(Some(&config), &[]);
    let mut fs = server.fs().await;
    let mut stream = fs
        .watch(watch_req("/memories", "", true, false))
        .await
        .unwrap()
        .into_inner();
    // Enough changes to fill every buffer between the watcher and us: the
    // client's HTTP/2 window (2 MiB by default), the server's send buffer
    // and the queued messages take a few MiB; 6,000 events of ~1 KiB paths
    // are more.
    let long = vec!["n".repeat(240); 4].join("/");
    let total = 6000;
    let mut writers = Vec::new();
    for w in 0..4 {
        let url = server.url.clone();
        let long = long.clone();
        writers.push(tokio::spawn(async move {
            let channel = Channel::from_shared(url).unwrap().connect().await.unwrap();
            let mut fs = FilesystemClient::new(channel);
            for i in (w..total).step_by(4) {
                write(&mut fs, &format!("/memories/{long}/{i:05}"), "x").await;
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = Instant::now();
    fs.stat(pb::StatRequest {
        path: "/memories".into(),
    })
    .await
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    // Now read: what was queued, then the cut.
    let mut got = Vec::new();
    let mut last_cursor = String::new();
    let status = loop {
        match stream.message().await {
            Ok(Some(msg)) => {
                got.extend(msg.events.into_iter().map(|e| e.path));
                last_cursor = msg.cursor;
            }
            Ok(None) => panic!("the stream ended without being cut"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
    assert!(got.len() < total, "nothing was cut: {} events", got.len());
    // The last message's cursor covers what we read: from it, the rest
    // comes exactly once.
    let (rest, _) = catch_up(&mut fs, watch_req("/memories", &last_cursor, false, true))
        .await
        .unwrap();
    let mut all = got.clone();
    all.extend(rest.into_iter().map(|e| e.path));
    let unique: BTreeSet<&String> = all.iter().collect();
    assert_eq!((all.len(), unique.len()), (total, total));
}

/// Changes made on disk by another program are reported as external,
/// once the mount is watched; agentvfs' own changes are reported once,
/// never again as external.
#[tokio::test]
async fn changes_made_on_disk_are_reported_as_external() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let (_, start) = catch_up(&mut fs, watch_req("/workspace", "", true, true))
        .await
        .unwrap();
    let dir = server.workdir().to_owned();
    std::fs::write(dir.join("by-hand.txt"), "one").unwrap();
    std::fs::write(dir.join("by-hand.txt"), "two, longer").unwrap();
    std::fs::rename(dir.join("by-hand.txt"), dir.join("renamed.txt")).unwrap();
    std::fs::remove_file(dir.join("renamed.txt")).unwrap();
    write(&mut fs, "/workspace/own.txt", "agentvfs").await;
    // Give the kernel's events time to arrive, then read everything.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (events, _) = catch_up(&mut fs, watch_req("/workspace", &start, false, true))
        .await
        .unwrap();
    let external: Vec<(&str, pb::ChangeKind)> = events
        .iter()
        .filter(|e| e.external)
        .map(|e| (e.path.as_str(), kind(e)))
        .collect();
    assert!(
        external.contains(&("/workspace/by-hand.txt", pb::ChangeKind::Created)),
        "{external:?}"
    );
    assert!(
        external.contains(&("/workspace/by-hand.txt", pb::ChangeKind::Modified)),
        "{external:?}"
    );
    assert!(
        external.contains(&("/workspace/renamed.txt", pb::ChangeKind::Deleted)),
        "{external:?}"
    );
    assert!(
        events
            .iter()
            .filter(|e| e.external)
            .all(|e| e.principal.is_empty())
    );
    let own: Vec<&pb::ChangeEvent> = events
        .iter()
        .filter(|e| e.path == "/workspace/own.txt")
        .collect();
    assert_eq!(own.len(), 1, "{own:?}");
    assert!(!own[0].external && own[0].principal == "local");
}

/// The disk watcher a Watch starts asks the kernel only for the events it
/// reports: no open, read or close-after-reading. Every file a Grep opened on
/// a watched mount used to be an event for the watcher to read and drop, a
/// third more of the Grep's time (src/backend/fs/changes.rs,
/// `WATCHED_EVENTS`). The kernel lists each inotify watch, with its mask, in
/// the descriptor's `fdinfo`.
#[tokio::test]
async fn the_disk_watcher_asks_for_no_open_or_read_events() {
    const IN_ACCESS: u32 = 0x1;
    const IN_CLOSE_NOWRITE: u32 = 0x10;
    const IN_OPEN: u32 = 0x20;
    let server = Server::start();
    let dir = server.workdir().to_owned();
    std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
    let mut fs = server.fs().await;
    catch_up(&mut fs, watch_req("/workspace", "", true, true))
        .await
        .unwrap();
    let masks: Vec<u32> = std::fs::read_dir(format!("/proc/{}/fdinfo", server.pid()))
        .unwrap()
        .filter_map(|fd| std::fs::read_to_string(fd.ok()?.path()).ok())
        .flat_map(|info| {
            info.lines()
                .filter(|line| line.starts_with("inotify wd:"))
                .filter_map(|line| {
                    let mask = line
                        .split_whitespace()
                        .find_map(|f| f.strip_prefix("mask:"))?;
                    u32::from_str_radix(mask, 16).ok()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    // The workspace, `sub` and `sub/deeper`, at least.
    assert!(masks.len() >= 3, "inotify watches: {masks:x?}");
    for mask in &masks {
        assert_eq!(
            mask & (IN_ACCESS | IN_CLOSE_NOWRITE | IN_OPEN),
            0,
            "a watch asks for reads: {masks:x?}"
        );
    }
}

/// 100,000 writes to 100 Store files with `history_versions = 5` keep at
/// most 5 versions of each, the newest, and the store stays small.
#[tokio::test]
async fn history_stays_bounded_under_100_000_writes() {
    let config = "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n\
                  [[mount]]\nprefix = \"/memories\"\ntier = \"store\"\npath = \"store\"\n\
                  history_versions = 5\nchange_log = 10000\n";
    let server = Server::start_with(Some(config), &[]);
    let (files, writes, clients) = (100usize, 100_000usize, 8usize);
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let url = server.url.clone();
            tokio::spawn(async move {
                let channel = Channel::from_shared(url).unwrap().connect().await.unwrap();
                let mut fs = FilesystemClient::new(channel);
                for i in (c..writes).step_by(clients) {
                    let content = format!("write {i} {}\n", "x".repeat(100));
                    write(&mut fs, &format!("/memories/f{:03}", i % files), &content).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = started.elapsed();
    let mut fs = server.fs().await;
    for f in 0..files {
        let path = format!("/memories/f{f:03}");
        let versions = fs
            .list_versions(pb::ListVersionsRequest { path: path.clone() })
            .await
            .unwrap()
            .into_inner()
            .versions;
        assert_eq!(versions.len(), 5, "{path}");
        assert!(versions[0].current);
        assert!(versions.windows(2).all(|v| v[0].version > v[1].version));
    }
    let bytes = dir_bytes(&server.workdir().join("store"));
    eprintln!(
        "retention: {writes} writes of 113 bytes to {files} files in {:.1} s; every file keeps \
         5 versions; the store's directory holds {:.1} MiB",
        elapsed.as_secs_f64(),
        bytes as f64 / (1 << 20) as f64
    );
    // 100 files × 5 versions × ~200 bytes plus RocksDB's write-ahead log
    // and unflushed memtable of the writes: far below the 11 MB written.
    assert!(bytes < 64 << 20, "{bytes} bytes");
}

/// Bytes of the files below `dir`.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => dir_bytes(&e.path()),
                    _ => e.metadata().map_or(0, |m| m.len()),
                })
                .sum()
        })
        .unwrap_or(0)
}

/// The History tool lists, diffs and restores through Tools/Invoke, in the
/// envelope a model reads.
#[tokio::test]
async fn the_history_tool_lists_diffs_and_restores() {
    let server = Server::start_with(Some(STORE), &[]);
    let mut fs = server.fs().await;
    let v1 = write(&mut fs, "/memories/notes.md", "alpha\nbeta\n")
        .await
        .version;
    let v2 = write(&mut fs, "/memories/notes.md", "alpha\ngamma\n")
        .await
        .version;
    let mut tools = agentvfs::pb::tools_client::ToolsClient::new(server.channel().await);
    let mut invoke = async |args: serde_json::Value| {
        let reply = tools
            .invoke(pb::InvokeRequest {
                name: "History".into(),
                arguments_json: args.to_string(),
                tool_call_id: "call-1".into(),
            })
            .await
            .unwrap()
            .into_inner();
        serde_json::from_str::<serde_json::Value>(&reply.envelope_json).unwrap()
    };
    let listed = invoke(serde_json::json!({"path": "/memories/notes.md"})).await;
    assert_eq!(listed["status"], "success", "{listed}");
    let text = listed["text"].as_str().unwrap();
    assert!(
        text.starts_with("2 versions of 'memories/notes.md' retained, newest first:\n\nv"),
        "{text}"
    );
    assert!(
        text.contains(&format!("v{v2}  ")) && text.contains("(current)"),
        "{text}"
    );
    assert_eq!(listed["data"]["versions"][1]["version"], v1.to_string());
    let diff =
        invoke(serde_json::json!({"path": "/memories/notes.md", "action": "diff", "version": v1}))
            .await;
    let text = diff["text"].as_str().unwrap();
    assert!(text.contains("-beta\n+gamma"), "{text}");
    let stale = invoke(serde_json::json!({"path": "/memories/notes.md", "action": "restore", "version": v1, "expected_version": v1})).await;
    assert_eq!(stale["error"]["code"], "CONFLICT", "{stale}");
    let restored = invoke(serde_json::json!({"path": "/memories/notes.md", "action": "restore", "version": v1, "expected_version": v2})).await;
    assert_eq!(restored["status"], "success", "{restored}");
    let read = fs
        .read(pb::ReadRequest {
            path: "/memories/notes.md".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.content, "alpha\nbeta\n");
    let bad = invoke(serde_json::json!({"path": "/memories/notes.md", "action": "undo"})).await;
    assert_eq!(bad["error"]["code"], "INVALID_PARAM", "{bad}");
}

/// SIGTERM ends a following Watch with UNAVAILABLE naming the cursor to
/// resume from, and the server exits instead of waiting on the watcher.
#[tokio::test]
async fn shutdown_ends_a_following_watch() {
    let mut server = Server::start_with(Some(STORE), &[]);
    let mut fs = server.fs().await;
    let mut stream = fs
        .watch(watch_req("/memories", "", true, false))
        .await
        .unwrap()
        .into_inner();
    // The first message carries the starting cursor, before any change.
    let first = stream.message().await.unwrap().unwrap();
    assert!(first.events.is_empty() && first.cursor.starts_with("c1."));
    let pid = server.pid().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("the watch ended without a status"),
                Err(status) => return status,
            }
        }
    })
    .await
    .expect("the watch ends within 10 s");
    assert_error(&status, Code::Unavailable, "INTERNAL_ERROR");
    assert!(
        status
            .message()
            .contains(&format!("resume from cursor {}", first.cursor)),
        "{}",
        status.message()
    );
    let exited = tokio::task::spawn_blocking(move || server.wait())
        .await
        .unwrap();
    assert!(exited.success(), "{exited:?}");
}

/// SIGTERM while a watcher has stopped reading (its stream's buffers full
/// of events): the server does not wait on it for the idle timeout.
#[tokio::test]
async fn shutdown_never_waits_on_a_watcher_that_stopped_reading() {
    let mut server = Server::start_with(Some(STORE), &[]);
    let mut watching = server.fs().await;
    let mut stream = watching
        .watch(watch_req("/memories", "", true, false))
        .await
        .unwrap()
        .into_inner();
    stream.message().await.unwrap().unwrap();
    // About 4 MB of events that nobody reads.
    let mut fs = server.fs().await;
    let body = "x".repeat(100);
    for i in 0..20_000 {
        write(&mut fs, &format!("/memories/{:0200}", i % 100), &body).await;
    }
    let pid = server.pid().to_string();
    let start = Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let exited = tokio::task::spawn_blocking(move || server.wait())
        .await
        .unwrap();
    assert!(exited.success(), "{exited:?}");
    // The idle timeout is 30 s; the shutdown grace 5 s.
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "the server took {:?} to stop",
        start.elapsed()
    );
    drop(stream);
}
