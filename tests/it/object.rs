//! The object tier through the server, on a real S3 server (the test
//! process's versitygw, `tests/support/s3.rs`), with several agentvfs
//! servers sharing one bucket (docs/object-storage.md): concurrent editors
//! spread across servers lose no update, create-only races have one winner,
//! a stale `if_version` is CONFLICT on every server, a `kill -9` in the middle
//! of writes loses no acknowledged write and shows no half-written file; an
//! unreachable or slow store answers UNAVAILABLE or DEADLINE_EXCEEDED within
//! the call's deadline, a wrong bucket or key stops the start-up naming
//! the mount, and the sweep reclaims orphan blobs and only those.

use crate::s3::s3;
use crate::util::{Server, assert_error, grep_all, write};
use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::Code;
use tonic::transport::Channel;

/// The bucket of these tests (not the conformance cases', which claim all
/// of theirs with an empty key_prefix: a deployment nested in it is refused).
const BUCKET: &str = "agentvfs-it";

/// A configuration mounting the bucket `bucket` at `/shared` under a key
/// prefix of its own (so tests never see each other's files), State at `/`.
fn config(bucket: &str, key_prefix: &str, extra: &str) -> String {
    format!(
        "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n[[mount]]\nprefix = \"/shared\"\n\
         tier = \"object\"\nbucket = \"{bucket}\"\nkey_prefix = \"{key_prefix}\"\n\
         path_style = true\n{extra}"
    )
}

/// Two servers on one bucket and key prefix.
fn two_servers() -> (Server, Server) {
    let bucket = s3().bucket(BUCKET);
    let prefix = format!("it-{:016x}", rand::random::<u64>());
    let cfg = config(&bucket, &prefix, "");
    (
        Server::start_with(Some(&cfg), &[]),
        Server::start_with(Some(&cfg), &[]),
    )
}

async fn connect(url: &str) -> FilesystemClient<Channel> {
    let channel = Channel::from_shared(url.to_owned())
        .unwrap()
        .connect()
        .await
        .unwrap();
    FilesystemClient::new(channel).max_decoding_message_size(256 << 20)
}

/// 8 editors, four on each of two servers, append 200 lines to one file
/// with Edit (a read-modify-write each): every line is there, once.
#[tokio::test]
async fn editors_on_two_servers_lose_no_update() {
    let (a, b) = two_servers();
    let mut fs = a.fs().await;
    write(&mut fs, "/shared/log.md", "start\n").await;
    let tasks: Vec<_> = (0..8)
        .map(|e| {
            let url = if e % 2 == 0 {
                a.url.clone()
            } else {
                b.url.clone()
            };
            tokio::spawn(async move {
                let mut fs = connect(&url).await;
                for i in 0..25 {
                    let line = format!("editor {e} line {i}\n");
                    fs.multi_edit(pb::MultiEditRequest {
                        path: "/shared/log.md".into(),
                        edits: vec![pb::EditOperation {
                            old_string: "start\n".into(),
                            new_string: format!("start\n{line}"),
                            replace_all: false,
                        }],
                        if_version: None,
                    })
                    .await
                    .unwrap_or_else(|s| panic!("editor {e} line {i}: {s:?}"));
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    for server in [&a, &b] {
        let content = server
            .fs()
            .await
            .read(pb::ReadRequest {
                path: "/shared/log.md".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .content;
        let lines: BTreeSet<&str> = content
            .lines()
            .filter(|l| l.starts_with("editor"))
            .collect();
        assert_eq!(lines.len(), 200, "{} lines", content.lines().count());
        assert_eq!(content.lines().count(), 201);
    }
}

/// 16 create-only writes of one path, split across two servers: exactly
/// one wins, the others are ALREADY_EXISTS, and the file is the winner's.
#[tokio::test]
async fn create_only_races_across_servers_have_one_winner() {
    let (a, b) = two_servers();
    for round in 0..5 {
        let path = format!("/shared/race{round}");
        let tasks: Vec<_> = (0..16)
            .map(|w| {
                let url = if w % 2 == 0 {
                    a.url.clone()
                } else {
                    b.url.clone()
                };
                let path = path.clone();
                tokio::spawn(async move {
                    let mut fs = connect(&url).await;
                    let req = pb::WriteRequest {
                        path,
                        content: format!("writer {w}"),
                        create_only: true,
                        if_version: None,
                        executable: None,
                    };
                    (w, fs.write(req).await)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                (w, Ok(_)) => winners.push(w),
                (_, Err(status)) => assert_error(&status, Code::AlreadyExists, "CONFLICT"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        let content = a
            .fs()
            .await
            .read(pb::ReadRequest {
                path: path.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .content;
        assert_eq!(content, format!("writer {}", winners[0]));
    }
}

/// A version read on one server and changed on the other is stale on both:
/// Write, Edit and Delete with it are CONFLICT, and nothing changes.
#[tokio::test]
async fn a_stale_if_version_is_conflict_on_every_server() {
    let (a, b) = two_servers();
    let (mut fa, mut fb) = (a.fs().await, b.fs().await);
    let v1 = write(&mut fa, "/shared/f.md", "one\n").await.version;
    let v2 = write(&mut fb, "/shared/f.md", "two\n").await.version;
    assert!(v2 > v1);
    for fs in [&mut fa, &mut fb] {
        let stale = fs
            .write(pb::WriteRequest {
                path: "/shared/f.md".into(),
                content: "lost\n".into(),
                create_only: false,
                if_version: Some(v1),
                executable: None,
            })
            .await
            .unwrap_err();
        assert_error(&stale, Code::Aborted, "CONFLICT");
        assert!(
            stale
                .message()
                .contains(&format!("expected version {v1}, found {v2}"))
        );
        let edit = fs
            .edit(pb::EditRequest {
                path: "/shared/f.md".into(),
                old_string: "two".into(),
                new_string: "lost".into(),
                if_version: Some(v1),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_error(&edit, Code::Aborted, "CONFLICT");
        let delete = fs
            .delete(pb::DeleteRequest {
                path: "/shared/f.md".into(),
                if_version: Some(v1),
                recursive: false,
            })
            .await
            .unwrap_err();
        assert_error(&delete, Code::Aborted, "CONFLICT");
    }
    // The same content again (A → B → A) is a new version: the first one's
    // if_version still does not match.
    let v3 = write(&mut fa, "/shared/f.md", "one\n").await.version;
    assert!(v3 > v2);
    let again = fb
        .write(pb::WriteRequest {
            path: "/shared/f.md".into(),
            content: "lost\n".into(),
            create_only: false,
            if_version: Some(v1),
            executable: None,
        })
        .await
        .unwrap_err();
    assert_error(&again, Code::Aborted, "CONFLICT");
    // A deleted file is gone for every server.
    fa.delete(pb::DeleteRequest {
        path: "/shared/f.md".into(),
        if_version: Some(v3),
        recursive: false,
    })
    .await
    .unwrap();
    let gone = fb
        .stat(pb::StatRequest {
            path: "/shared/f.md".into(),
        })
        .await
        .unwrap_err();
    assert_error(&gone, Code::NotFound, "NOT_FOUND");
}

/// A search on one server after another server rewrote a file finds what
/// the store holds now: the search cache answers only for the ETag the
/// listing gives, and a write from the cache's stale head is refused by the
/// store and retried from what it holds.
#[tokio::test]
async fn a_server_never_searches_or_writes_from_a_stale_cache() {
    let (a, b) = two_servers();
    let (mut fa, mut fb) = (a.fs().await, b.fs().await);
    let lines = |matches: Vec<pb::GrepMatch>| -> Vec<String> {
        matches.into_iter().map(|m| m.line).collect()
    };
    let grep = |pattern: &str| pb::GrepRequest {
        pattern: pattern.into(),
        path: "/shared".into(),
        ..Default::default()
    };
    write(&mut fa, "/shared/notes.md", "alpha one\n").await;
    let (found, _) = grep_all(&mut fa, grep("alpha")).await.unwrap();
    assert_eq!(lines(found), ["alpha one"]);
    let v2 = write(&mut fb, "/shared/notes.md", "alpha two\n")
        .await
        .version;
    let (found, _) = grep_all(&mut fa, grep("alpha")).await.unwrap();
    assert_eq!(
        lines(found),
        ["alpha two"],
        "server A searched its stale cache"
    );
    // A rewrites from its cached head (version 1): the store refuses it and
    // the write lands on version 2, as a version above it.
    let v3 = write(&mut fa, "/shared/notes.md", "alpha three\n")
        .await
        .version;
    assert!(v3 > v2, "version {v3} after {v2}");
    let read = fb
        .read(pb::ReadRequest {
            path: "/shared/notes.md".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.content, "alpha three\n");
    // A stale cached version is never reported as a conflict.
    let v4 = fb
        .write(pb::WriteRequest {
            path: "/shared/notes.md".into(),
            content: "alpha four\n".into(),
            if_version: Some(v3),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .version;
    let v5 = fa
        .write(pb::WriteRequest {
            path: "/shared/notes.md".into(),
            content: "alpha five\n".into(),
            if_version: Some(v4),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .version;
    assert!(v5 > v4);
}

/// Writers on one server, which is killed with `kill -9` in the middle of
/// them: every write it acknowledged is readable, as acknowledged, through
/// the other server, and no file is half written (small files inline, and
/// 200 KiB files whose content is a blob committed before its head).
#[tokio::test]
async fn a_killed_server_loses_no_acknowledged_write() {
    let (mut a, b) = two_servers();
    let acked: Arc<Mutex<Vec<(String, u64, usize)>>> = Arc::default();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (url, acked) = (a.url.clone(), acked.clone());
            tokio::spawn(async move {
                let mut fs = connect(&url).await;
                for i in 0.. {
                    let size = file_size(i);
                    let path = format!("/shared/w{w}/f{i:05}");
                    let req = pb::WriteRequest {
                        path: path.clone(),
                        content: content(w, i, size),
                        ..Default::default()
                    };
                    match fs.write(req).await {
                        Ok(out) => {
                            acked
                                .lock()
                                .unwrap()
                                .push((path, out.into_inner().version, size))
                        }
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    a.kill();
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 20,
        "only {} writes before the kill",
        acked.len()
    );
    let mut fs = b.fs().await;
    for (path, version, size) in &acked {
        let read = fs
            .read(pb::ReadRequest {
                path: path.clone(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|s| panic!("{path} acknowledged but unreadable: {s:?}"))
            .into_inner();
        assert_eq!(read.version, *version, "{path}");
        assert_eq!(read.content.len(), *size, "{path}");
    }
    // Every file there (acknowledged or not) is whole.
    let (entries, _) = crate::util::glob_entries(
        &mut fs,
        pb::GlobRequest {
            pattern: "**".into(),
            path: "/shared".into(),
            max_visited: 1_000_000,
            max_duration_ms: 60_000,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for entry in &entries {
        let read = fs
            .read(pb::ReadRequest {
                path: entry.path.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let name = entry.path.rsplit('/').next().unwrap();
        let w: usize = entry.path.split("/w").nth(1).unwrap()[..1].parse().unwrap();
        let i: usize = name[1..].parse().unwrap();
        assert_eq!(read.content, content(w, i, file_size(i)), "{}", entry.path);
    }
    eprintln!(
        "object kill -9: {} writes acknowledged, {} files found whole through the other server",
        acked.len(),
        entries.len()
    );
}

/// The size of a writer's `i`th file: every third is 200 KiB (a blob), the
/// others 100 bytes (inline).
fn file_size(i: usize) -> usize {
    if i.is_multiple_of(3) { 200 << 10 } else { 100 }
}

/// The content writer `w` gives its `i`th file: `size` bytes naming both.
fn content(w: usize, i: usize, size: usize) -> String {
    let line = format!("writer {w} file {i}\n");
    line.repeat(size / line.len() + 1)[..size].to_owned()
}

/// A store that stops answering (versitygw stopped under a running
/// server) makes calls fail with UNAVAILABLE or DEADLINE_EXCEEDED naming
/// it, within the mount's deadline; never a hang.
#[tokio::test]
async fn an_unreachable_store_answers_unavailable_within_the_deadline() {
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(data.path().join("gone")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut store = crate::s3::start(data.path(), port);
    let cfg = config(
        "gone",
        "p",
        &format!(
            "endpoint = \"http://127.0.0.1:{port}\"\ntimeout_seconds = 3\nrequest_timeout_seconds = 1\n"
        ),
    );
    let server = Server::start_with(Some(&cfg), &[]);
    let mut fs = server.fs().await;
    write(&mut fs, "/shared/a", "x").await;
    store.kill().unwrap();
    store.wait().unwrap();
    let started = Instant::now();
    let status = fs
        .read(pb::ReadRequest {
            path: "/shared/a".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(status.code(), Code::Unavailable | Code::DeadlineExceeded),
        "{status:?}"
    );
    assert!(
        status.message().contains("object store"),
        "{}",
        status.message()
    );
    assert!(took < Duration::from_secs(8), "took {took:?}");
    // The rest of the server answers meanwhile.
    write(&mut fs, "/scratch", "state still works").await;
}

/// A wrong bucket, or a key the store refuses, stops the start-up at once
/// with a message naming the mount.
#[test]
fn a_wrong_bucket_or_key_stops_the_start_up_naming_the_mount() {
    let s3 = s3();
    for (bucket, extra, why) in [
        ("no-such-bucket", String::new(), "NoSuchBucket"),
        (
            BUCKET,
            format!("endpoint = \"{}\"\n", s3.endpoint),
            "credentials",
        ),
    ] {
        s3.bucket(BUCKET);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("agentvfs.toml"),
            config(bucket, "p", &extra),
        )
        .unwrap();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_agentvfs"));
        cmd.args([
            "serve",
            "--config",
            "agentvfs.toml",
            "--listen",
            "127.0.0.1:0",
        ])
        .current_dir(dir.path())
        .env("AWS_ENDPOINT_URL", &s3.endpoint);
        if why == "credentials" {
            cmd.env("AWS_ACCESS_KEY_ID", "wrong-key")
                .env("AWS_SECRET_ACCESS_KEY", "wrong-secret");
        } else {
            cmd.env("AWS_ACCESS_KEY_ID", crate::s3::ACCESS_KEY)
                .env("AWS_SECRET_ACCESS_KEY", crate::s3::SECRET_KEY);
        }
        let started = Instant::now();
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("mount /shared"), "{stderr}");
        assert!(stderr.contains(why), "{why}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }
}

/// The object tier in process on the test S3 server, under a key prefix of
/// its own, and a plain S3 client on the same bucket to look at its keys.
struct InProcess {
    tier: agentvfs::backend::object::ObjectBackend,
    key_prefix: String,
    store: object_store::aws::AmazonS3,
    runtime: tokio::runtime::Runtime,
}

impl InProcess {
    fn open(renew_uploads_after: Duration) -> InProcess {
        use agentvfs::VfsPath;
        use agentvfs::backend::object::{BucketOptions, Credentials, ObjectBackend, ObjectOptions};
        let s3 = s3();
        let bucket = s3.bucket(BUCKET);
        let key_prefix = format!("inproc-{:016x}", rand::random::<u64>());
        let tier = ObjectBackend::open(
            VfsPath::parse("/shared").unwrap(),
            ObjectOptions {
                bucket: BucketOptions {
                    bucket: bucket.clone(),
                    endpoint: Some(s3.endpoint.clone()),
                    region: None,
                    path_style: true,
                    timeout: Duration::from_secs(30),
                    request_timeout: Duration::from_secs(10),
                },
                key_prefix: key_prefix.clone(),
                max_file_bytes: 64 << 20,
                cache_bytes: 16 << 20,
                credentials: Some(Credentials {
                    access_key_id: crate::s3::ACCESS_KEY.into(),
                    secret_access_key: crate::s3::SECRET_KEY.into(),
                    session_token: None,
                }),
                renew_uploads_after,
                keep: agentvfs::backend::Keep::DEFAULT,
            },
        )
        .unwrap();
        let store = object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(&bucket)
            .with_endpoint(&s3.endpoint)
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_access_key_id(crate::s3::ACCESS_KEY)
            .with_secret_access_key(crate::s3::SECRET_KEY)
            .build()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        InProcess {
            tier,
            key_prefix,
            store,
            runtime,
        }
    }

    /// Writes `content` at `path` as the local principal.
    fn write(&self, path: &str, content: &[u8]) {
        use agentvfs::backend::{Backend, Precondition};
        let path = agentvfs::VfsPath::parse(path).unwrap();
        let scope = agentvfs::scope::Scope::default();
        self.tier
            .write(&scope, &path, content.to_vec(), Precondition::default())
            .unwrap();
    }

    /// The content at `path`.
    fn read(&self, path: &str) -> Vec<u8> {
        use agentvfs::backend::Backend;
        let path = agentvfs::VfsPath::parse(path).unwrap();
        self.tier
            .read(&agentvfs::scope::Scope::default(), &path)
            .unwrap()
            .0
    }

    /// The blob keys (`{ns}/b/{path}!{id}`) and their ETags, in key order.
    fn blobs(&self) -> Vec<(String, String)> {
        use futures_util::TryStreamExt;
        use object_store::ObjectStore;
        let prefix = object_store::path::Path::from(self.key_prefix.as_str());
        let listed: Vec<_> = self
            .runtime
            .block_on(self.store.list(Some(&prefix)).try_collect())
            .unwrap();
        let mut blobs: Vec<(String, String)> = listed
            .into_iter()
            .map(|meta| (meta.location.to_string(), meta.e_tag.unwrap_or_default()))
            .filter(|(key, _)| key.contains("/b/"))
            .collect();
        blobs.sort();
        blobs
    }

    fn blob_keys(&self) -> Vec<String> {
        self.blobs().into_iter().map(|(key, _)| key).collect()
    }

    /// Puts `body` at `key` directly, as a server killed in the middle of a
    /// write leaves it.
    fn put_raw(&self, key: &str, body: Vec<u8>) {
        use object_store::ObjectStoreExt;
        self.runtime
            .block_on(
                self.store
                    .put(&object_store::path::Path::from(key), body.into()),
            )
            .unwrap();
    }
}

/// A blob no head names (its server was killed between uploading a large
/// file's content and committing its head) is deleted by the sweep once it
/// is older than the grace period; the blobs heads name are kept, and so is
/// an orphan younger than the grace period.
#[test]
fn the_sweep_deletes_orphan_blobs_and_keeps_live_ones() {
    let t = InProcess::open(agentvfs::backend::object::RENEW_UPLOADS_AFTER);
    let content = vec![b'x'; 300 << 10];
    t.write("/shared/big/data.bin", &content);
    // The large file's content is one blob, `{ns}/b/{path}!{id}`.
    let live = t.blob_keys();
    assert_eq!(live.len(), 1, "one blob for the large file: {live:?}");
    let (file, _) = live[0].rsplit_once('!').unwrap();
    let orphan = format!("{file}!{:016x}", 999_999);
    t.put_raw(&orphan, vec![b'o'; 1000]);
    let mut both = vec![live[0].clone(), orphan.clone()];
    both.sort();
    assert_eq!(t.blob_keys(), both);

    assert_eq!(t.tier.sweep_orphans(Duration::from_secs(3600)).unwrap(), 0);
    assert_eq!(
        t.blob_keys().len(),
        2,
        "an orphan younger than the grace stays"
    );
    assert_eq!(t.tier.sweep_orphans(Duration::ZERO).unwrap(), 1);
    assert_eq!(t.blob_keys(), live, "the orphan went, the live blob stayed");
    assert_eq!(t.read("/shared/big/data.bin"), content);
    assert_eq!(t.tier.sweep_orphans(Duration::ZERO).unwrap(), 0);
}

/// A slow upload is renewed before its head commits: its blob is a copy
/// (one ETag of the whole content, where a multipart upload's ETag ends in
/// `-{parts}`), the upload itself is deleted, and the file reads back whole.
#[test]
fn a_slow_upload_is_renewed_before_its_head_commits() {
    let content: Vec<u8> = (0..700u32 << 10).map(|i| (i % 251) as u8).collect();
    let quick = InProcess::open(agentvfs::backend::object::RENEW_UPLOADS_AFTER);
    quick.write("/shared/big.bin", &content);
    let blobs = quick.blobs();
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    assert!(blobs[0].1.contains('-'), "a multipart ETag: {blobs:?}");

    let slow = InProcess::open(Duration::ZERO);
    slow.write("/shared/big.bin", &content);
    let blobs = slow.blobs();
    assert_eq!(
        blobs.len(),
        1,
        "the upload was deleted after its copy: {blobs:?}"
    );
    assert!(!blobs[0].1.contains('-'), "a copy's ETag: {blobs:?}");
    assert_eq!(slow.read("/shared/big.bin"), content);
    assert_eq!(slow.tier.sweep_orphans(Duration::ZERO).unwrap(), 0);
}

/// What a watcher received: each change's path, kind and version, and the
/// cursor after the last message.
#[derive(Default)]
struct Received {
    events: Vec<(String, pb::ChangeKind, u64)>,
    cursor: String,
}

/// Follows a Watch of `/shared` on `url` from `cursor` (from now when
/// empty) into `into` until the stream breaks or `until` says stop.
async fn follow(url: &str, cursor: &str, into: &Arc<Mutex<Received>>, until: Instant) {
    let Ok(mut fs) = Channel::from_shared(url.to_owned())
        .unwrap()
        .connect()
        .await
        .map(FilesystemClient::new)
    else {
        return;
    };
    let req = pb::WatchRequest {
        path: "/shared".into(),
        cursor: cursor.into(),
        from_now: cursor.is_empty(),
        stop_at_head: false,
    };
    let Ok(stream) = fs.watch(req).await else {
        return;
    };
    let mut stream = stream.into_inner();
    while Instant::now() < until {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.message()).await {
            Ok(Ok(Some(msg))) => {
                let mut got = into.lock().unwrap();
                for e in msg.events {
                    let kind = pb::ChangeKind::try_from(e.kind).unwrap();
                    got.events.push((e.path, kind, e.version));
                }
                got.cursor = msg.cursor;
            }
            _ => return,
        }
    }
}

/// A watcher on server B sees what writers on server A change; server A is
/// killed with SIGKILL in the middle of the writes, and B is killed and
/// restarted too, its watcher resuming from the last cursor it got. Every
/// acknowledged write is delivered exactly once, each file's changes in the
/// order of its versions, and every change delivered happened (it is among
/// the file's versions): none was delivered for a write that never
/// committed (docs/object-storage.md § The change log).
#[tokio::test]
async fn a_watcher_on_another_server_gets_every_acknowledged_write_once_across_kill_9() {
    let (mut a, mut b) = two_servers();
    let got: Arc<Mutex<Received>> = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    let watcher = {
        let (url, got) = (b.url.clone(), got.clone());
        tokio::spawn(async move { follow(&url, "", &got, deadline).await })
    };
    // Let the watch start before the writes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let acked: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (url, acked) = (a.url.clone(), acked.clone());
            tokio::spawn(async move {
                let mut fs = connect(&url).await;
                for i in 0.. {
                    // Five files per writer, rewritten: each file's changes
                    // must arrive in version order.
                    let path = format!("/shared/w{w}/f{}", i % 5);
                    let req = pb::WriteRequest {
                        path: path.clone(),
                        content: format!("writer {w} write {i}"),
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
    tokio::time::sleep(Duration::from_millis(700)).await;
    // B restarts while the watcher follows it: the watcher resumes there.
    b.crash_and_restart();
    watcher.await.unwrap();
    let cursor = got.lock().unwrap().cursor.clone();
    assert!(!cursor.is_empty(), "the watch gave a cursor before B went");
    let resumed = {
        let (url, got) = (b.url.clone(), got.clone());
        tokio::spawn(async move { follow(&url, &cursor, &got, deadline).await })
    };
    tokio::time::sleep(Duration::from_millis(800)).await;
    a.kill();
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 20,
        "only {} writes before the kill",
        acked.len()
    );
    // Wait for every acknowledged write, then past the time after which
    // a change A left undecided is settled (log::UNDECIDED_GRACE).
    let want: BTreeSet<(String, u64)> = acked.iter().cloned().collect();
    let all_in = Instant::now() + Duration::from_secs(30);
    loop {
        let seen: BTreeSet<(String, u64)> = got
            .lock()
            .unwrap()
            .events
            .iter()
            .map(|(p, _, v)| (p.clone(), *v))
            .collect();
        if want.is_subset(&seen) || Instant::now() > all_in {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(7)).await;
    resumed.abort();
    let events = got.lock().unwrap().events.clone();
    let mut delivered: Vec<(String, u64)> =
        events.iter().map(|(p, _, v)| (p.clone(), *v)).collect();
    let total = delivered.len();
    delivered.sort();
    delivered.dedup();
    assert_eq!(delivered.len(), total, "a change was delivered twice");
    let delivered: BTreeSet<(String, u64)> = delivered.into_iter().collect();
    let missing: Vec<_> = want.difference(&delivered).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged writes never delivered: {missing:?}",
        missing.len()
    );
    // Each file's changes in version order.
    let mut last: std::collections::HashMap<&str, u64> = Default::default();
    for (path, _, version) in &events {
        let before = last.insert(path, *version).unwrap_or(0);
        assert!(
            *version > before,
            "{path}: version {version} after {before}"
        );
    }
    // The changes delivered beyond the acknowledged ones were in flight at
    // the kill; each really committed: it is among the file's versions.
    let mut fs = b.fs().await;
    let extra: Vec<&(String, u64)> = delivered.difference(&want).collect();
    assert!(
        extra.len() <= 4,
        "more unacknowledged changes than writers: {extra:?}"
    );
    for (path, version) in &extra {
        let versions = fs
            .list_versions(pb::ListVersionsRequest { path: path.clone() })
            .await
            .unwrap()
            .into_inner()
            .versions;
        assert!(
            versions.iter().any(|v| v.version == *version),
            "{path} version {version} was delivered but is not among its versions"
        );
    }
    eprintln!(
        "object watch across kill -9: {} writes acknowledged, {} changes delivered once each \
         ({} in flight at the kill)",
        acked.len(),
        total,
        extra.len()
    );
}

/// The standard error of a server with an object mount on `bucket` at
/// `key_prefix` that must refuse to start.
fn refused_start(bucket: &str, key_prefix: &str) -> String {
    let s3 = s3();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentvfs.toml"),
        config(bucket, key_prefix, ""),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .args(["serve", "--config", "agentvfs.toml"])
        .current_dir(dir.path())
        .env("AWS_ENDPOINT_URL", &s3.endpoint)
        .env("AWS_ACCESS_KEY_ID", crate::s3::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", crate::s3::SECRET_KEY)
        .env("AWS_ALLOW_HTTP", "true")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a server at {key_prefix:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Two deployments whose key prefixes nest would see each other's keys
/// (and one's sweep would take the other's blobs): the second to start is
/// refused, naming both prefixes; a prefix holding objects nobody claimed
/// is refused too; a prefix beside the first starts.
#[test]
fn a_deployment_nested_in_another_is_refused_naming_both() {
    let s3 = s3();
    let bucket = s3.bucket(&format!("nest-{:08x}", rand::random::<u32>()));
    let outer = "team";
    let first = Server::start_with(Some(&config(&bucket, outer, "")), &[]);
    drop(first);
    for (prefix, other) in [("team/inner", "team/"), ("", "team/")] {
        let stderr = refused_start(&bucket, prefix);
        let ours = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        assert!(
            stderr.contains(&format!(
                "key_prefix {ours:?} collides with the deployment at key_prefix {other:?}"
            )),
            "{stderr}"
        );
    }
    // Objects under a prefix nobody claimed (another program's, or an
    // earlier agentvfs's): refused rather than read as heads.
    std::fs::create_dir_all(s3.data.join(&bucket).join("legacy")).unwrap();
    std::fs::write(s3.data.join(&bucket).join("legacy/notes.txt"), "x").unwrap();
    let stderr = refused_start(&bucket, "legacy");
    assert!(
        stderr.contains("already holds objects that no agentvfs deployment claimed"),
        "{stderr}"
    );
    // Beside it (not nested): fine.
    let beside = Server::start_with(Some(&config(&bucket, "team2", "")), &[]);
    drop(beside);
}

/// A name whose key would be too long for the store is INVALID_ARGUMENT
/// naming the limit (it was UNAVAILABLE, "store unavailable", which tells a
/// client to retry forever); the server keeps serving.
#[tokio::test]
async fn a_name_too_long_for_a_key_is_an_invalid_argument() {
    let (a, _b) = two_servers();
    let mut fs = a.fs().await;
    let long = format!("/shared/{}", "-".repeat(200));
    let err = fs
        .write(pb::WriteRequest {
            path: long,
            content: "x".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    assert!(
        err.message().contains("400 bytes") && err.message().contains("at most 238"),
        "{}",
        err.message()
    );
    write(&mut fs, "/shared/ok.txt", "fine").await;
}

/// A repeated search on one server (its catalog built by the first, then
/// kept fresh from the change logs, not by listing the bucket) finds
/// exactly what the bucket holds after another server rewrote, deleted,
/// moved and created files, round after round, each search right after
/// the other server's last acknowledged change (docs/object-storage.md §
/// Warm searches).
#[tokio::test]
async fn a_warm_search_sees_every_change_another_server_made() {
    let (a, b) = two_servers();
    let (mut fa, mut fb) = (a.fs().await, b.fs().await);
    // The model: path → whether it holds the needle.
    let mut model: std::collections::BTreeMap<String, bool> = Default::default();
    for i in 0..40 {
        let path = format!("/shared/d{}/f{i:02}", i % 4);
        write(&mut fb, &path, &format!("needle {i}\n")).await;
        model.insert(path, true);
    }
    let grep = || pb::GrepRequest {
        pattern: "needle".into(),
        path: "/shared".into(),
        ..Default::default()
    };
    let mut rng = rand::rng();
    for round in 0..6 {
        let (found, _) = grep_all(&mut fa, grep()).await.unwrap();
        let got: BTreeSet<String> = found.into_iter().map(|m| m.path).collect();
        let want: BTreeSet<String> = model
            .iter()
            .filter(|(_, has)| **has)
            .map(|(p, _)| p.clone())
            .collect();
        assert_eq!(
            got, want,
            "round {round}: the search on A missed B's changes"
        );
        // B changes a few files in every way.
        let paths: Vec<String> = model.keys().cloned().collect();
        for _ in 0..6 {
            let path = &paths[rand::Rng::random_range(&mut rng, 0..paths.len())];
            if !model.contains_key(path) {
                continue;
            }
            match rand::Rng::random_range(&mut rng, 0..4) {
                0 => {
                    let has = !model[path];
                    let text = if has { "needle again\n" } else { "nothing\n" };
                    write(&mut fb, path, text).await;
                    model.insert(path.clone(), has);
                }
                1 => {
                    fb.delete(pb::DeleteRequest {
                        path: path.clone(),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                    model.remove(path);
                }
                2 => {
                    let to = format!("{path}-moved{round}");
                    fb.r#move(pb::MoveRequest {
                        source: path.clone(),
                        destination: to.clone(),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                    let has = model.remove(path).unwrap();
                    model.insert(to, has);
                }
                _ => {
                    let to = format!("/shared/new/r{round}-{}", rand::random::<u16>());
                    write(&mut fb, &to, "needle new\n").await;
                    model.insert(to, true);
                }
            }
        }
    }
}

/// A TCP proxy in front of the test S3 server that holds back each request
/// whose request line `delay` names by the time it gives, so a test can
/// open a window between two requests of one server: the port it listens on.
async fn delaying_proxy(delay: impl Fn(&str) -> Option<Duration> + Send + Sync + 'static) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = s3().endpoint.trim_start_matches("http://").to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let delay = Arc::new(delay);
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            let (upstream, delay) = (upstream.clone(), delay.clone());
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                    return;
                };
                let (mut client_rd, mut client_wr) = client.into_split();
                let (mut server_rd, mut server_wr) = server.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut server_rd, &mut client_wr).await;
                });
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    let n = match client_rd.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    // The client sends one request at a time: a chunk that
                    // opens with a request line starts one.
                    let line = String::from_utf8_lossy(&buf[..n.min(1024)]);
                    let line = line.lines().next().unwrap_or_default();
                    if let Some(pause) = delay(line) {
                        tokio::time::sleep(pause).await;
                    }
                    if server_wr.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                let _ = server_wr.shutdown().await;
            });
        }
    });
    port
}

/// True when the request line `line` is `method` on the head of the file
/// `name` (right below the mount).
fn on_head(line: &str, method: &str, name: &str) -> bool {
    line.starts_with(&format!("{method} "))
        && (line.contains(&format!("/f/{name}!")) || line.contains(&format!("/f/{name}%21")))
}

/// A read that took a Move's pending destination head before the move was
/// finished, and read its source only after the source changed again (a
/// write there first finishes the move), sees the moved file: "the source
/// is no longer the move's" is no proof that the move did not commit while
/// the destination has moved on (the linearizability checker found the
/// destination read as it was before the move, after a read of the source
/// had shown the move committed). The window is opened by proxies: server A
/// (the mover) is slow to put the destination's head, so its move commits
/// and then stays pending; server B (the reader) is slow to read the source.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_of_a_moves_destination_never_predates_its_commit() {
    let bucket = s3().bucket(BUCKET);
    let prefix = format!("it-{:016x}", rand::random::<u64>());
    let slow_dst_put =
        delaying_proxy(|line| on_head(line, "PUT", "dst").then_some(Duration::from_millis(600)))
            .await;
    let slow_src_get =
        delaying_proxy(|line| on_head(line, "GET", "src").then_some(Duration::from_millis(600)))
            .await;
    let via = |port: u16| {
        config(
            &bucket,
            &prefix,
            &format!("endpoint = \"http://127.0.0.1:{port}\"\n"),
        )
    };
    let a = Server::start_with(Some(&via(slow_dst_put)), &[]);
    let b = Server::start_with(Some(&via(slow_src_get)), &[]);
    let c = Server::start_with(Some(&config(&bucket, &prefix, "")), &[]);
    let (mut fa, mut fb, mut fc) = (a.fs().await, b.fs().await, c.fs().await);
    write(&mut fc, "/shared/dst", "old\n").await;
    write(&mut fc, "/shared/src", "moved\n").await;
    let mover = tokio::spawn(async move {
        fa.r#move(pb::MoveRequest {
            source: "/shared/src".into(),
            destination: "/shared/dst".into(),
            ..Default::default()
        })
        .await
    });
    // The move has committed once its source reads as gone (its pending
    // destination head still waits on A's proxy).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let read = fc
            .read(pb::ReadRequest {
                path: "/shared/src".into(),
                ..Default::default()
            })
            .await;
        match read {
            Err(status) if status.code() == Code::NotFound => break,
            Ok(_) => assert!(Instant::now() < deadline, "the move never committed"),
            Err(status) => panic!("reading the source: {status:?}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // B takes the pending head, and waits for the source.
    let reader = tokio::spawn(async move {
        fb.read(pb::ReadRequest {
            path: "/shared/dst".into(),
            ..Default::default()
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    // The source written again (its write finishes the move first).
    write(&mut fc, "/shared/src", "again\n").await;
    let seen = reader.await.unwrap().expect("reading the destination");
    assert_eq!(
        seen.into_inner().content,
        "moved\n",
        "a read begun after the move was seen committed"
    );
    mover.await.unwrap().expect("the move");
    let dst = fc
        .read(pb::ReadRequest {
            path: "/shared/dst".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(dst.into_inner().content, "moved\n");
}
