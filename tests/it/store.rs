//! The Store tier at `/memories`: RPC semantics on RocksDB, namespaces,
//! persistence across restarts and crashes, concurrency, large files, the
//! data-directory lock, and the range-scan property.

use crate::util::{Server, assert_error, glob_all, grep_all, read_text, write};
use agentvfs::pb;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_stream::StreamExt;
use tonic::{Code, Request};

/// A request in the Store namespace `ns`.
fn in_ns<T>(msg: T, ns: &str) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut()
        .insert("x-agentvfs-namespace", ns.parse().unwrap());
    req
}

/// A server whose store lives in `data` (kept by the caller across restarts).
fn start_on(data: &std::path::Path, config: Option<&str>) -> Server {
    Server::start_with(config, &["--data", data.to_str().unwrap()])
}

/// A config with a store at /memories in `data` and a file size limit.
fn store_config(data: &std::path::Path, max_file_bytes: u64) -> String {
    format!(
        "max_file_bytes = {max_file_bytes}\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\
         [[mount]]\nprefix = \"/memories\"\ntier = \"store\"\npath = {:?}\n",
        data.to_str().unwrap()
    )
}

/// Write, Read, Stat, ListInfo, Edit, MultiEdit, Glob, Grep and Delete behave
/// on the Store exactly as the contract says, with versions and times.
#[tokio::test]
async fn every_rpc_works_on_the_store() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let w = write(&mut fs, "/memories/notes/a.md", "alpha\nbeta\ngamma\n").await;
    assert!(w.created && w.version > 0);
    write(&mut fs, "/memories/notes/sub/b.md", "beta again\n").await;
    write(&mut fs, "/memories/notes-old.md", "old\n").await;

    let r = fs
        .read(pb::ReadRequest {
            path: "/memories/notes/a.md".into(),
            offset: 1,
            limit: 1,
            numbered: true,
            version: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.content.as_str(), r.total_lines, r.version),
        ("     2\tbeta", 3, w.version)
    );

    let info = fs
        .stat(pb::StatRequest {
            path: "/memories/notes/a.md".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .info
        .unwrap();
    assert_eq!(
        (info.size, info.version, info.is_directory),
        (17, w.version, false)
    );
    assert!(info.created_time.is_some() && info.modified_time.is_some());
    let dir = fs
        .stat(pb::StatRequest {
            path: "/memories/notes".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(dir.info.unwrap().is_directory);

    let listed: Vec<(String, bool)> = fs
        .list_info(pb::ListInfoRequest {
            path: "/memories".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .entries
        .into_iter()
        .map(|e| (e.path, e.is_directory))
        .collect();
    assert_eq!(
        listed,
        [
            ("/memories/notes".to_string(), true),
            ("/memories/notes-old.md".to_string(), false)
        ]
    );

    let e = fs
        .edit(pb::EditRequest {
            path: "/memories/notes/a.md".into(),
            old_string: "beta".into(),
            new_string: "BETA".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(e.version > w.version);
    let m = fs
        .multi_edit(pb::MultiEditRequest {
            path: "/memories/notes/a.md".into(),
            edits: vec![
                pb::EditOperation {
                    old_string: "alpha".into(),
                    new_string: "ALPHA".into(),
                    ..Default::default()
                },
                pb::EditOperation {
                    old_string: "gamma".into(),
                    new_string: "GAMMA".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(m.replacements_made, 2);
    let after = read_text(&mut fs, "/memories/notes/a.md").await;
    assert_eq!(after.content, "ALPHA\nBETA\nGAMMA\n");
    let again = fs
        .stat(pb::StatRequest {
            path: "/memories/notes/a.md".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .info
        .unwrap();
    assert_eq!(
        again.created_time, info.created_time,
        "edits keep the creation time"
    );

    let (paths, _) = glob_all(
        &mut fs,
        pb::GlobRequest {
            pattern: "**/*.md".into(),
            path: "/memories".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        paths,
        [
            "/memories/notes/a.md",
            "/memories/notes/sub/b.md",
            "/memories/notes-old.md"
        ]
    );
    let (matches, summary) = grep_all(
        &mut fs,
        pb::GrepRequest {
            pattern: "(?i)beta".into(),
            path: "/memories/notes".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let found: Vec<(&str, u64)> = matches
        .iter()
        .map(|m| (m.path.as_str(), m.line_number))
        .collect();
    assert_eq!(
        found,
        [("/memories/notes/a.md", 2), ("/memories/notes/sub/b.md", 1)]
    );
    assert_eq!(summary.files_searched, 2);

    let err = fs
        .delete(pb::DeleteRequest {
            path: "/memories/notes".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::FailedPrecondition, "IS_DIRECTORY");
    let d = fs
        .delete(pb::DeleteRequest {
            path: "/memories/notes".into(),
            recursive: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(d.files_deleted, 2);
    let err = fs
        .read(pb::ReadRequest {
            path: "/memories/notes/a.md".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::NotFound, "NOT_FOUND");
    // A write below a file, and a write over a directory, are refused.
    let err = fs
        .write(pb::WriteRequest {
            path: "/memories/notes-old.md/x".into(),
            content: "x".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::FailedPrecondition, "INVALID_PARAM");
    write(&mut fs, "/memories/d/x", "x").await;
    let err = fs
        .write(pb::WriteRequest {
            path: "/memories/d".into(),
            content: "x".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::FailedPrecondition, "IS_DIRECTORY");
}

/// Two namespaces never see each other's files, and an invalid namespace
/// name is rejected with a message naming the rule.
#[tokio::test]
async fn namespaces_are_isolated_and_validated() {
    let server = Server::start();
    let mut fs = server.fs().await;
    fs.write(in_ns(
        pb::WriteRequest {
            path: "/memories/secret.txt".into(),
            content: "alice's secret".into(),
            ..Default::default()
        },
        "alice",
    ))
    .await
    .unwrap();
    fs.write(in_ns(
        pb::WriteRequest {
            path: "/memories/secret.txt".into(),
            content: "bob's".into(),
            ..Default::default()
        },
        "bob",
    ))
    .await
    .unwrap();
    let alice = fs
        .read(in_ns(
            pb::ReadRequest {
                path: "/memories/secret.txt".into(),
                ..Default::default()
            },
            "alice",
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(alice.content, "alice's secret");
    let err = fs
        .read(in_ns(
            pb::ReadRequest {
                path: "/memories/secret.txt".into(),
                ..Default::default()
            },
            "carol",
        ))
        .await
        .unwrap_err();
    assert_error(&err, Code::NotFound, "NOT_FOUND");
    let carol = fs
        .list_info(in_ns(
            pb::ListInfoRequest {
                path: "/memories".into(),
            },
            "carol",
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(carol.entries.is_empty());
    let mut stream = fs
        .grep(in_ns(
            pb::GrepRequest {
                pattern: "secret".into(),
                path: "/memories".into(),
                ..Default::default()
            },
            "bob",
        ))
        .await
        .unwrap()
        .into_inner();
    let mut bob_hits = 0;
    while let Some(msg) = stream.next().await {
        if let Some(pb::grep_response::Result::Batch(b)) = msg.unwrap().result {
            bob_hits += b.matches.len();
        }
    }
    assert_eq!(bob_hits, 0, "bob's grep must not reach alice's file");

    let err = fs
        .read(in_ns(
            pb::ReadRequest {
                path: "/memories/secret.txt".into(),
                ..Default::default()
            },
            "../alice",
        ))
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    assert!(
        err.message().contains("invalid namespace name"),
        "{}",
        err.message()
    );
}

/// Files, versions and times survive a clean restart on the same data
/// directory, and versions keep growing after it.
// Multi-threaded: the dropped client's connection must be closed by the
// runtime while this test blocks waiting for the server to exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_persist_across_a_clean_restart() {
    let data = tempfile::tempdir().unwrap();
    let mut server = start_on(data.path(), None);
    let mut fs = server.fs().await;
    let w = write(&mut fs, "/memories/keep.txt", "kept\n").await;
    fs.delete(pb::DeleteRequest {
        path: "/memories/keep.txt".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let w2 = write(&mut fs, "/memories/keep.txt", "kept again\n").await;
    assert!(
        w2.version > w.version,
        "versions grow across delete + recreate"
    );
    drop(fs);
    let pid = server.pid().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert!(server.wait().success());

    let server = start_on(data.path(), None);
    let mut fs = server.fs().await;
    let r = read_text(&mut fs, "/memories/keep.txt").await;
    assert_eq!(
        (r.content.as_str(), r.version),
        ("kept again\n", w2.version)
    );
    let w3 = write(&mut fs, "/memories/new.txt", "x").await;
    assert!(w3.version > w2.version, "versions grow across restarts");
}

/// The deterministic content of file `k` of writer `task` in the crash test:
/// various sizes, some inline, some chunked (several 1 MiB chunks).
fn crash_content(task: usize, k: usize) -> String {
    let len = match k % 20 {
        7 => 200 << 10,
        13 => (2 << 20) + 12_345,
        _ => 50 + (k * 37) % 3000,
    };
    let unit = format!("{task}:{k};");
    unit.repeat(len / unit.len() + 1)[..len].to_string()
}

/// Under concurrent writes, SIGKILL of the server loses no acknowledged
/// write, and after a restart on the same directory every file holds exactly
/// one complete content (nothing half-written is visible).
#[tokio::test]
async fn acknowledged_writes_survive_sigkill_under_load() {
    const WRITERS: usize = 6;
    let data = tempfile::tempdir().unwrap();
    let mut server = start_on(data.path(), None);
    let acked: Arc<Mutex<Vec<(usize, usize)>>> = Arc::default();
    let mut tasks = Vec::new();
    for task in 0..WRITERS {
        let (mut fs, acked) = (server.fs().await, acked.clone());
        tasks.push(tokio::spawn(async move {
            for k in 0.. {
                let req = pb::WriteRequest {
                    path: format!("/memories/crash/w{task}/f{k}"),
                    content: crash_content(task, k),
                    ..Default::default()
                };
                match fs.write(req).await {
                    Ok(_) => acked.lock().unwrap().push((task, k)),
                    Err(_) => return,
                }
            }
        }));
    }
    // Let the load run until enough writes (chunked ones included) landed.
    while acked.lock().unwrap().len() < 150 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.kill();
    for t in tasks {
        t.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();

    let server = start_on(data.path(), None);
    let mut fs = server.fs().await;
    let (paths, _) = glob_all(
        &mut fs,
        pb::GlobRequest {
            pattern: "**".into(),
            path: "/memories/crash".into(),
            max_visited: 1_000_000,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut present = HashMap::new();
    for path in paths.iter().filter(|p| p.contains("/f")) {
        let (task, k) = path
            .strip_prefix("/memories/crash/w")
            .and_then(|rest| rest.split_once("/f"))
            .map(|(t, k)| (t.parse().unwrap(), k.parse().unwrap()))
            .unwrap();
        let r = read_text(&mut fs, path).await;
        assert!(
            r.content == crash_content(task, k),
            "{path} is not intact after the crash"
        );
        present.insert((task, k), ());
    }
    for key in &acked {
        assert!(
            present.contains_key(key),
            "acknowledged write {key:?} was lost"
        );
    }
    assert!(present.len() >= acked.len());
}

/// N clients × M edits of one file at once: every edit lands (no lost
/// update), so the final content holds all N×M lines.
#[tokio::test]
async fn concurrent_edits_of_one_file_lose_no_update() {
    const CLIENTS: usize = 8;
    const EDITS: usize = 25;
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/memories/counter.txt", "END").await;
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let mut fs = server.fs().await;
        tasks.push(tokio::spawn(async move {
            for e in 0..EDITS {
                fs.edit(pb::EditRequest {
                    path: "/memories/counter.txt".into(),
                    old_string: "END".into(),
                    new_string: format!("c{c}-e{e}\nEND"),
                    ..Default::default()
                })
                .await
                .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let content = read_text(&mut fs, "/memories/counter.txt").await.content;
    let mut lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.pop(), Some("END"));
    lines.sort_unstable();
    let mut want: Vec<String> = (0..CLIENTS)
        .flat_map(|c| (0..EDITS).map(move |e| format!("c{c}-e{e}")))
        .collect();
    want.sort_unstable();
    assert_eq!(lines, want);
}

/// `create_only` on an existing file is ALREADY_EXISTS and a stale
/// `if_version` is ABORTED, for Write, Edit and Delete; the matching version
/// succeeds.
#[tokio::test]
async fn conditional_writes_conflict_with_the_right_codes() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let w = write(&mut fs, "/memories/c.txt", "one").await;
    let err = fs
        .write(pb::WriteRequest {
            path: "/memories/c.txt".into(),
            content: "two".into(),
            create_only: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::AlreadyExists, "CONFLICT");
    let err = fs
        .write(pb::WriteRequest {
            path: "/memories/c.txt".into(),
            content: "two".into(),
            if_version: Some(w.version + 100),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::Aborted, "CONFLICT");
    let err = fs
        .edit(pb::EditRequest {
            path: "/memories/c.txt".into(),
            old_string: "one".into(),
            new_string: "two".into(),
            if_version: Some(w.version + 1),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::Aborted, "CONFLICT");
    let err = fs
        .delete(pb::DeleteRequest {
            path: "/memories/c.txt".into(),
            if_version: Some(w.version + 1),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::Aborted, "CONFLICT");
    let ok = fs
        .write(pb::WriteRequest {
            path: "/memories/c.txt".into(),
            content: "two".into(),
            if_version: Some(w.version),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ok.version > w.version && !ok.created);
    let created = fs
        .write(pb::WriteRequest {
            path: "/memories/fresh.txt".into(),
            content: "x".into(),
            if_version: Some(0),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(created.created);
}

/// The configured file size limit is enforced with RESOURCE_EXHAUSTED for
/// Write, WriteBytes and an Edit that would grow the file past it.
#[tokio::test]
async fn file_size_limit_is_resource_exhausted() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with(Some(&store_config(data.path(), 1000)), &[]);
    let mut fs = server.fs().await;
    let err = fs
        .write(pb::WriteRequest {
            path: "/memories/big.txt".into(),
            content: "x".repeat(1001),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
    assert!(err.message().contains("1000"), "{}", err.message());
    let stream = tokio_stream::iter(vec![
        pb::WriteBytesRequest {
            kind: Some(pb::write_bytes_request::Kind::Header(
                pb::WriteBytesHeader {
                    path: "/memories/big.bin".into(),
                    ..Default::default()
                },
            )),
        },
        pb::WriteBytesRequest {
            kind: Some(pb::write_bytes_request::Kind::Data(vec![0; 600])),
        },
        pb::WriteBytesRequest {
            kind: Some(pb::write_bytes_request::Kind::Data(vec![0; 600])),
        },
    ]);
    let err = fs.write_bytes(stream).await.unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
    write(&mut fs, "/memories/grow.txt", &"x".repeat(900)).await;
    let err = fs
        .edit(pb::EditRequest {
            path: "/memories/grow.txt".into(),
            old_string: "x".into(),
            new_string: "yy".into(),
            replace_all: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
}

/// A 100 MB file goes in through WriteBytes and out through ReadBytes in
/// pieces of at most 1 MiB, byte for byte, and a line window of it reads
/// through Read.
#[tokio::test]
async fn hundred_megabyte_file_streams_in_chunks() {
    const SIZE: usize = 100_000_000;
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with(Some(&store_config(data.path(), 128 << 20)), &[]);
    let mut fs = server.fs().await;
    // Lines "line N\n" up to SIZE bytes.
    let mut content = Vec::with_capacity(SIZE + 32);
    let mut n = 0u64;
    while content.len() < SIZE {
        content.extend_from_slice(format!("line {n}\n").as_bytes());
        n += 1;
    }
    content.truncate(SIZE);
    let mut msgs = vec![pb::WriteBytesRequest {
        kind: Some(pb::write_bytes_request::Kind::Header(
            pb::WriteBytesHeader {
                path: "/memories/huge.txt".into(),
                ..Default::default()
            },
        )),
    }];
    msgs.extend(content.chunks(1 << 20).map(|c| pb::WriteBytesRequest {
        kind: Some(pb::write_bytes_request::Kind::Data(c.to_vec())),
    }));
    let w = fs
        .write_bytes(tokio_stream::iter(msgs))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(w.bytes_written, SIZE as u64);

    let mut stream = fs
        .read_bytes(pb::ReadBytesRequest {
            path: "/memories/huge.txt".into(),
            version: None,
        })
        .await
        .unwrap()
        .into_inner();
    let mut offset = 0;
    let mut pieces = 0;
    while let Some(msg) = stream.next().await {
        let msg = msg.unwrap();
        assert!(
            msg.data.len() <= 1 << 20,
            "piece of {} bytes",
            msg.data.len()
        );
        assert_eq!(
            msg.info.is_some(),
            pieces == 0,
            "info comes with the first piece only"
        );
        assert!(
            msg.data == content[offset..offset + msg.data.len()],
            "piece {pieces} differs"
        );
        offset += msg.data.len();
        pieces += 1;
    }
    assert_eq!((offset, pieces), (SIZE, SIZE.div_ceil(1 << 20)));

    let r = fs
        .read(pb::ReadRequest {
            path: "/memories/huge.txt".into(),
            offset: 1_000_000,
            limit: 2,
            numbered: false,
            version: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.content, "line 1000000\nline 1000001\n");
    assert_eq!(r.size, SIZE as u64);
}

/// A second server on the same data directory exits at once with a message
/// naming the directory and the reason.
#[tokio::test]
async fn second_server_on_the_same_directory_fails_fast() {
    let data = tempfile::tempdir().unwrap();
    let _first = start_on(data.path(), None);
    let started = std::time::Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(data.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "mount /memories: data directory {} is in use by another agentvfs server",
            data.path().display()
        )),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "must fail fast, not wait"
    );
}

/// Listing a directory of 10 entries reads only those entries' keys, however
/// many files surround it: a subdirectory of 500 files is skipped with one
/// seek, and 2,000 files in sibling directories before and after are never
/// touched (the server logs `keys_read` of every Store list).
#[tokio::test]
async fn listing_is_a_range_scan_independent_of_other_files() {
    let server = Server::start();
    let mut tasks = Vec::new();
    for w in 0..5 {
        let mut fs = server.fs().await;
        tasks.push(tokio::spawn(async move {
            for i in 0..500 {
                let path = match w {
                    0 => format!("/memories/a-before/{i}"),
                    1 => format!("/memories/small/sub/{i}"),
                    2 => format!("/memories/small-after/{i}"),
                    3 => format!("/memories/smallest/{i}"),
                    _ => format!("/memories/{i}"),
                };
                write(&mut fs, &path, "x").await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut fs = server.fs().await;
    for i in 0..9 {
        write(&mut fs, &format!("/memories/small/f{i}"), "x").await;
    }
    let entries = fs
        .list_info(pb::ListInfoRequest {
            path: "/memories/small".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .entries;
    assert_eq!(entries.len(), 10);
    let needle = "store list dir=/memories/small entries=10 keys_read=";
    assert!(server.wait_for_log(needle, Duration::from_secs(5)).await);
    let logs = server.logs.lock().unwrap().clone();
    let keys_read: u64 = logs
        .lines()
        .find_map(|l| l.split(needle).nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert_eq!(keys_read, 10, "one key per entry, nothing else");
}

/// `sync = true` on the mount opens the store in fsync-every-write mode and
/// writes still round-trip (power-loss durability cannot be shown here; the
/// mode is confirmed by the server's startup log).
#[tokio::test]
async fn sync_switch_fsyncs_every_write() {
    let data = tempfile::tempdir().unwrap();
    let config = store_config(data.path(), 1 << 20)
        .replace("tier = \"store\"\n", "tier = \"store\"\nsync = true\n");
    let server = Server::start_with(Some(&config), &[]);
    assert!(
        server
            .wait_for_log("sync=true", Duration::from_secs(5))
            .await
    );
    let mut fs = server.fs().await;
    let w = write(&mut fs, "/memories/durable.txt", "fsynced\n").await;
    let r = read_text(&mut fs, "/memories/durable.txt").await;
    assert_eq!((r.content.as_str(), r.version), ("fsynced\n", w.version));
}

/// A Grep from `/` spans the State root and the Store mount as one
/// path-ordered stream, and a Grep naming one stored file searches just it.
#[tokio::test]
async fn grep_from_root_spans_state_and_store_in_path_order() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/a.txt", "needle in state\n").await;
    write(&mut fs, "/memories/m.txt", "needle in store\n").await;
    write(&mut fs, "/memories/other.txt", "needle again\n").await;
    write(&mut fs, "/z.txt", "needle last\n").await;
    let (matches, _) = grep_all(
        &mut fs,
        pb::GrepRequest {
            pattern: "needle".into(),
            path: "/".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let paths: Vec<&str> = matches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(
        paths,
        ["/a.txt", "/memories/m.txt", "/memories/other.txt", "/z.txt"]
    );
    let (one, summary) = grep_all(
        &mut fs,
        pb::GrepRequest {
            pattern: "needle".into(),
            path: "/memories/m.txt".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!((one.len(), summary.files_searched), (1, 1));
    assert_eq!(one[0].line, "needle in store");
}

/// An upload cut short by SIGKILL after some chunks were stored leaves no
/// file behind, and its chunks are removed at the next start.
#[tokio::test]
async fn upload_cut_short_by_a_crash_leaves_nothing_behind() {
    let data = tempfile::tempdir().unwrap();
    let mut server = start_on(data.path(), None);
    let mut fs = server.fs().await;
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tx.send(pb::WriteBytesRequest {
        kind: Some(pb::write_bytes_request::Kind::Header(
            pb::WriteBytesHeader {
                path: "/memories/upload.bin".into(),
                ..Default::default()
            },
        )),
    })
    .await
    .unwrap();
    for _ in 0..3 {
        tx.send(pb::WriteBytesRequest {
            kind: Some(pb::write_bytes_request::Kind::Data(vec![7; 1 << 20])),
        })
        .await
        .unwrap();
    }
    // The stream stays open: the upload can only be ended by the crash.
    let upload = tokio::spawn(async move {
        fs.write_bytes(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
    });
    assert!(
        server
            .wait_for_log(
                "stored upload chunk path=/memories/upload.bin",
                Duration::from_secs(10)
            )
            .await
    );
    server.kill();
    assert!(
        upload.await.unwrap().is_err(),
        "the upload was never acknowledged"
    );
    drop(tx);

    let server = start_on(data.path(), None);
    assert!(
        server
            .wait_for_log(
                "removed unfinished uploads count=1",
                Duration::from_secs(10)
            )
            .await
    );
    let mut fs = server.fs().await;
    let err = fs
        .stat(pb::StatRequest {
            path: "/memories/upload.bin".into(),
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::NotFound, "NOT_FOUND");
}

/// A multi-chunk WriteBytes with a stale `if_version` is ABORTED and leaves
/// the file as it was; with the right version it replaces it.
#[tokio::test]
async fn large_upload_checks_its_version_and_replaces_atomically() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let w = write(&mut fs, "/memories/big.bin", "small original").await;
    let upload = |if_version: u64, byte: u8| {
        let mut msgs = vec![pb::WriteBytesRequest {
            kind: Some(pb::write_bytes_request::Kind::Header(
                pb::WriteBytesHeader {
                    path: "/memories/big.bin".into(),
                    if_version: Some(if_version),
                    ..Default::default()
                },
            )),
        }];
        msgs.extend((0..3).map(|_| pb::WriteBytesRequest {
            kind: Some(pb::write_bytes_request::Kind::Data(vec![byte; 1 << 20])),
        }));
        tokio_stream::iter(msgs)
    };
    let err = fs
        .write_bytes(upload(w.version + 1, b'a'))
        .await
        .unwrap_err();
    assert_error(&err, Code::Aborted, "CONFLICT");
    assert_eq!(
        read_text(&mut fs, "/memories/big.bin").await.content,
        "small original"
    );
    let ok = fs
        .write_bytes(upload(w.version, b'b'))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.bytes_written, 3 << 20);
    let r = read_text(&mut fs, "/memories/big.bin").await;
    assert_eq!((r.size, r.version), (3 << 20, ok.version));
    assert!(r.content.bytes().all(|b| b == b'b'));
}
