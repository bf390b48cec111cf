//! Filesystem/Commit through the real server (docs/changesets.md): the
//! operations of one changeset in order, all or nothing, on each default
//! mount; the failing operation named; mounts, grants and bounds checked
//! before any work; and kill -9 at random points of changesets on the Store,
//! Filesystem and object tiers, every changeset found whole or absent
//! afterwards and none acknowledged lost.

use crate::util::{Server, assert_error};
use agentvfs::pb;
use agentvfs::pb::changeset_operation::Operation;
use agentvfs::pb::filesystem_client::FilesystemClient;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

fn write(path: &str, content: &str) -> pb::ChangesetOperation {
    op(Operation::Write(pb::WriteRequest {
        path: path.into(),
        content: content.into(),
        ..Default::default()
    }))
}

fn edit(path: &str, old: &str, new: &str) -> pb::ChangesetOperation {
    op(Operation::Edit(pb::EditRequest {
        path: path.into(),
        old_string: old.into(),
        new_string: new.into(),
        ..Default::default()
    }))
}

fn delete(path: &str) -> pb::ChangesetOperation {
    op(Operation::Delete(pb::DeleteRequest {
        path: path.into(),
        ..Default::default()
    }))
}

fn moved(source: &str, destination: &str) -> pb::ChangesetOperation {
    op(Operation::Move(pb::MoveRequest {
        source: source.into(),
        destination: destination.into(),
        ..Default::default()
    }))
}

fn op(operation: Operation) -> pb::ChangesetOperation {
    pb::ChangesetOperation {
        operation: Some(operation),
    }
}

async fn commit(
    fs: &mut FilesystemClient<Channel>,
    operations: Vec<pb::ChangesetOperation>,
) -> Result<pb::CommitResponse, Status> {
    fs.commit(pb::CommitRequest { operations })
        .await
        .map(|r| r.into_inner())
}

async fn read(fs: &mut FilesystemClient<Channel>, path: &str) -> Result<String, Status> {
    fs.read(pb::ReadRequest {
        path: path.into(),
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner().content)
}

/// The `operation_index` of a refused changeset.
fn failed_operation(status: &Status) -> Option<String> {
    status
        .get_details_error_info()
        .and_then(|info| info.metadata.get("operation_index").cloned())
}

#[tokio::test]
async fn operations_apply_in_order_on_every_default_mount() {
    let server = Server::start();
    let mut fs = server.fs().await;
    for mount in ["", "/memories", "/workspace"] {
        let p = |rel: &str| format!("{mount}/cs/{rel}");
        commit(
            &mut fs,
            vec![write(&p("old"), "gone soon"), write(&p("m"), "moving")],
        )
        .await
        .unwrap();
        let answer = commit(
            &mut fs,
            vec![
                write(&p("a.txt"), "hello world"),
                edit(&p("a.txt"), "world", "changesets"),
                delete(&p("old")),
                moved(&p("m"), &p("deep/moved")),
                write(&p("old"), "again"),
            ],
        )
        .await
        .unwrap_or_else(|e| panic!("{mount}: {e:?}"));
        let touched: Vec<(String, bool)> = answer
            .files
            .iter()
            .map(|f| (f.path.clone(), f.deleted))
            .collect();
        assert_eq!(
            touched,
            [
                (p("a.txt"), false),
                (p("deep/moved"), false),
                (p("m"), true),
                (p("old"), false),
            ],
            "{mount}"
        );
        assert_eq!(
            read(&mut fs, &p("a.txt")).await.unwrap(),
            "hello changesets"
        );
        assert_eq!(read(&mut fs, &p("deep/moved")).await.unwrap(), "moving");
        assert_eq!(read(&mut fs, &p("old")).await.unwrap(), "again");
        let status = read(&mut fs, &p("m")).await.unwrap_err();
        assert_eq!(status.code(), Code::NotFound, "{mount}");
    }
}

#[tokio::test]
async fn a_failing_operation_is_named_and_nothing_changes() {
    let server = Server::start();
    let mut fs = server.fs().await;
    for mount in ["", "/memories", "/workspace"] {
        let p = |rel: &str| format!("{mount}/fail/{rel}");
        commit(&mut fs, vec![write(&p("keep"), "original")])
            .await
            .unwrap();
        let status = commit(
            &mut fs,
            vec![
                write(&p("new"), "x"),
                edit(&p("keep"), "original", "changed"),
                edit(&p("keep"), "no such text", "y"),
            ],
        )
        .await
        .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{mount}: {status:?}");
        assert_eq!(
            failed_operation(&status).as_deref(),
            Some("2"),
            "{status:?}"
        );
        assert!(
            status
                .message()
                .starts_with(&format!("operation 2 (edit of {}) failed", p("keep"))),
            "{status:?}"
        );
        assert_eq!(read(&mut fs, &p("keep")).await.unwrap(), "original");
        assert_eq!(
            read(&mut fs, &p("new")).await.unwrap_err().code(),
            Code::NotFound
        );
        // A stale if_version: the conflict names both versions.
        let status = commit(
            &mut fs,
            vec![
                write(&p("new"), "x"),
                op(Operation::Write(pb::WriteRequest {
                    path: p("keep"),
                    content: "y".into(),
                    if_version: Some(424_242),
                    ..Default::default()
                })),
            ],
        )
        .await
        .unwrap_err();
        assert_error(&status, Code::Aborted, "CONFLICT");
        assert_eq!(failed_operation(&status).as_deref(), Some("1"));
        assert!(
            status.message().contains("expected version 424242, found"),
            "{status:?}"
        );
    }
}

/// State at `/`, a Store at `/memories`, and changesets of at most 3
/// operations and 1 KiB (Rewind's bounds too, tests/it/rewind.rs).
pub const SMALL_CHANGESETS: &str = r#"
[limits]
changeset_max_operations = 3
changeset_max_bytes = 1024

[[mount]]
prefix = "/"
tier = "state"

[[mount]]
prefix = "/memories"
tier = "store"
"#;

#[tokio::test]
async fn shape_mounts_and_limits_are_checked_before_any_work() {
    let server = Server::start_with(Some(SMALL_CHANGESETS), &[]);
    let mut fs = server.fs().await;
    let cases = [
        (vec![], Code::InvalidArgument, "at least one operation"),
        (
            // The mounts are checked before staging: the edit of a missing
            // file would otherwise answer first.
            vec![write("/a", "1"), edit("/memories/b", "x", "y")],
            Code::InvalidArgument,
            "a changeset changes files of one mount: /a is on /, /memories/b on /memories",
        ),
        (
            vec![write("/d", "1"), write("/d/e", "2")],
            Code::InvalidArgument,
            "cannot change both /d and /d/e",
        ),
        (
            vec![
                write("/1", ""),
                write("/2", ""),
                write("/3", ""),
                write("/4", ""),
            ],
            Code::ResourceExhausted,
            "4 operations, over the limit of 3",
        ),
        (
            vec![write("/big", &"x".repeat(2000))],
            Code::ResourceExhausted,
            "2000 bytes, over the limit of 1024",
        ),
        (
            vec![op(Operation::Delete(pb::DeleteRequest {
                path: "/tree".into(),
                recursive: true,
                ..Default::default()
            }))],
            Code::InvalidArgument,
            "recursive is not allowed",
        ),
        (
            vec![
                write("/w", "1"),
                op(Operation::Write(pb::WriteRequest {
                    path: "/w".into(),
                    content: "2".into(),
                    if_version: Some(5),
                    ..Default::default()
                })),
            ],
            Code::InvalidArgument,
            "only a file's first operation may carry if_version",
        ),
        (
            vec![pb::ChangesetOperation { operation: None }],
            Code::InvalidArgument,
            "operation 0 is malformed",
        ),
    ];
    for (operations, code, needle) in cases {
        let shown = format!("{operations:?}");
        let status = commit(&mut fs, operations).await.unwrap_err();
        assert_eq!(status.code(), code, "{shown}: {status:?}");
        assert!(status.message().contains(needle), "{shown}: {status:?}");
    }
    for path in ["/a", "/d", "/1", "/w"] {
        assert_eq!(
            read(&mut fs, path).await.unwrap_err().code(),
            Code::NotFound
        );
    }
}

#[tokio::test]
async fn every_grant_is_checked_before_anything_is_read() {
    let config = r#"
[[mount]]
prefix = "/"
tier = "state"

[[principal]]
name = "writer"
token = "writer-token-0001"
grants = [{ prefix = "/mine/", ops = ["list", "file", "read_file", "write", "delete"] }]
"#;
    let server = Server::start_with(Some(config), &[]);
    let mut fs = server.fs().await;
    let mut request = Request::new(pb::CommitRequest {
        operations: vec![write("/mine/ok", "1"), moved("/mine/ok", "/theirs/x")],
    });
    request
        .metadata_mut()
        .insert("authorization", "Bearer writer-token-0001".parse().unwrap());
    let status = fs.commit(request).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert_eq!(failed_operation(&status).as_deref(), Some("1"));
    let mut request = Request::new(pb::ReadRequest {
        path: "/mine/ok".into(),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("authorization", "Bearer writer-token-0001".parse().unwrap());
    assert_eq!(fs.read(request).await.unwrap_err().code(), Code::NotFound);
}

/// Kill -9 at random points while a client commits changesets that each
/// rewrite every file of a set with one generation number; after each
/// restart every file holds the same generation (no changeset half
/// applied), and it is at least the last one acknowledged (none lost).
async fn crash_trials(mut server: Server, mount: &str, trials: usize) {
    const FILES: usize = 6;
    let mut last_acked = 0u64;
    let mut generation = 0u64;
    for trial in 0..trials {
        let mut fs = server.fs().await;
        // The kill comes from another thread while the client commits, so
        // it lands at a random point of the server's work on a changeset.
        let pid = rustix::process::Pid::from_raw(server.pid() as i32).expect("a pid");
        let delay = std::time::Duration::from_micros(rand::random_range(0..30_000));
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        });
        loop {
            generation += 1;
            let operations = (0..FILES)
                .map(|i| {
                    write(
                        &format!("{mount}/crash/f{i}"),
                        &format!("gen {generation}\n"),
                    )
                })
                .collect();
            if commit(&mut fs, operations).await.is_err() {
                break;
            }
            last_acked = generation;
        }
        killer.join().expect("the killer thread");
        server.crash_and_restart();
        let mut fs = server.fs().await;
        let mut seen = Vec::new();
        for i in 0..FILES {
            match read(&mut fs, &format!("{mount}/crash/f{i}")).await {
                Ok(content) => seen.push(content),
                Err(status) if status.code() == Code::NotFound => seen.push(String::new()),
                Err(status) => panic!("{mount} trial {trial}: {status:?}"),
            }
        }
        assert!(
            seen.iter().all(|s| *s == seen[0]),
            "{mount} trial {trial}: a changeset half applied: {seen:?}"
        );
        let found: u64 = seen[0]
            .trim()
            .strip_prefix("gen ")
            .map_or(0, |n| n.parse().unwrap());
        assert!(
            found >= last_acked,
            "{mount} trial {trial}: generation {last_acked} was acknowledged, {found} found"
        );
    }
}

/// `AGENTVFS_CRASH_TRIALS` (default 200) kill -9 trials per tier.
fn trials() -> usize {
    std::env::var("AGENTVFS_CRASH_TRIALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200)
}

#[tokio::test]
async fn store_changesets_survive_kill_9_whole_or_not_at_all() {
    crash_trials(Server::start(), "/memories", trials()).await;
}

#[tokio::test]
async fn filesystem_changesets_survive_kill_9_whole_or_not_at_all() {
    crash_trials(Server::start(), "/workspace", trials()).await;
}

#[tokio::test]
async fn object_changesets_survive_kill_9_whole_or_not_at_all() {
    let bucket = crate::s3::s3().bucket("agentvfs-it");
    let config = format!(
        "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n[[mount]]\nprefix = \"/shared\"\n\
         tier = \"object\"\nbucket = \"{bucket}\"\nkey_prefix = \"cs-{:016x}\"\n\
         path_style = true\n",
        rand::random::<u64>()
    );
    crash_trials(Server::start_with(Some(&config), &[]), "/shared", trials()).await;
}

/// A Filesystem mount at `/workspace` serving the working directory, its
/// journal in `journal` (`None`: the default, in the data directory).
fn filesystem_config(journal: Option<&std::path::Path>) -> String {
    let path = journal.map_or(String::new(), |p| format!("path = \"{}\"\n", p.display()));
    format!(
        "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n[[mount]]\nprefix = \"/workspace\"\n\
         tier = \"filesystem\"\nroot = \".\"\n{path}"
    )
}

/// A directory on another file system than the working directory's (a
/// tmpfs), for a journal whose staged files cannot be renamed into the
/// served tree; `None` where there is none.
fn other_file_system() -> Option<tempfile::TempDir> {
    tempfile::tempdir_in("/dev/shm").ok()
}

/// Attack: a caller that may write a directory lists it again and again
/// while changesets commit into it, and deletes every file it sees that is
/// not one of the changeset's. The Filesystem tier staged each new content
/// as a named temporary file in the target's directory: deleting one made
/// the Commit half apply, answer NOT_FOUND, and recovery at the next start
/// kept the tear. Staged files now live in the journal (and a copy into a
/// served directory on another file system is named for two system calls
/// only, then copied again if it vanished): every Commit applies whole,
/// and so does every changeset after a restart. With the journal in the
/// data directory and on another file system.
#[tokio::test]
async fn a_deleter_of_what_it_sees_cannot_tear_a_filesystem_changeset() {
    const FILES: usize = 6;
    const COMMITS: u64 = 150;
    let elsewhere = other_file_system();
    let mut journals = vec![None];
    journals.extend(elsewhere.as_ref().map(|d| Some(d.path())));
    for journal in journals {
        let mut server = Server::start_with(Some(&filesystem_config(journal)), &[]);
        let names: Vec<String> = (0..FILES)
            .map(|i| format!("/workspace/torn/f{i}"))
            .collect();
        let mut fs = server.fs().await;
        let mut deleter = server.fs().await;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let ours = names.clone();
        let deletions = tokio::spawn(async move {
            let mut deleted = 0u64;
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                let req = pb::ListInfoRequest {
                    path: "/workspace/torn".into(),
                };
                let Ok(listed) = deleter.list_info(req).await else {
                    tokio::task::yield_now().await;
                    continue;
                };
                for entry in listed.into_inner().entries {
                    if ours.contains(&entry.path) {
                        continue;
                    }
                    let req = pb::DeleteRequest {
                        path: entry.path,
                        ..Default::default()
                    };
                    if deleter.delete(req).await.is_ok() {
                        deleted += 1;
                    }
                }
            }
            deleted
        });
        for generation in 1..=COMMITS {
            let operations = names
                .iter()
                .map(|path| write(path, &format!("gen {generation}\n")))
                .collect();
            if let Err(status) = commit(&mut fs, operations).await {
                panic!("{journal:?}: commit {generation} failed: {status:?}");
            }
            for path in &names {
                let content = read(&mut fs, path).await.unwrap();
                assert_eq!(
                    content,
                    format!("gen {generation}\n"),
                    "{journal:?}: {path}"
                );
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let deleted = deletions.await.unwrap();
        // In the data directory, nothing staged is in sight at all.
        if journal.is_none() {
            assert_eq!(deleted, 0, "the deleter found files to delete");
        }
        server.crash_and_restart();
        let mut fs = server.fs().await;
        for path in &names {
            let content = read(&mut fs, path).await.unwrap();
            assert_eq!(content, format!("gen {COMMITS}\n"), "{journal:?}: {path}");
        }
    }
}

#[tokio::test]
async fn filesystem_changesets_with_the_journal_on_another_file_system_survive_kill_9() {
    let Some(journal) = other_file_system() else {
        eprintln!("no /dev/shm: the journal cannot lie on another file system here");
        return;
    };
    let config = filesystem_config(Some(journal.path()));
    crash_trials(
        Server::start_with(Some(&config), &[]),
        "/workspace",
        trials() / 4,
    )
    .await;
}
