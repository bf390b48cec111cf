//! Grants hold for the object a request actually reaches: symbolic links in
//! a Filesystem mount never carry a principal past its grants, for any
//! operation, search included, and writes never go through a link at all.
//! Plus the Filesystem tier's other hostile-input defences: setuid bits,
//! absurd time stamps, sockets, deep trees, interrupted writes and the Store
//! data directory's place.

use crate::util::{Server, assert_error, glob_all, grep_all};
use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use agentvfs::pb::tools_client::ToolsClient;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

const PRIVATE: &str = "private: not for the agent\n";
const AGENT: &str = "agent-token-0001";
const ADMIN: &str = "admin-token-0001";

/// A served directory where `pub/` is the agent's and the rest is not, with
/// links from `pub/` out to the rest and one link that stays inside `pub/`.
struct Tree {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        std::fs::create_dir_all(root.join("pub/inner")).unwrap();
        std::fs::create_dir_all(root.join("privdir")).unwrap();
        std::fs::write(root.join("private.txt"), PRIVATE).unwrap();
        std::fs::write(root.join("privdir/f.txt"), PRIVATE).unwrap();
        std::fs::write(root.join("pub/inner/own.txt"), "the agent's own\n").unwrap();
        symlink("..", root.join("pub/up")).unwrap();
        symlink("../private.txt", root.join("pub/sec")).unwrap();
        symlink("../privdir", root.join("pub/dir")).unwrap();
        symlink("inner/own.txt", root.join("pub/ok")).unwrap();
        symlink("inner", root.join("pub/okdir")).unwrap();
        Tree { _tmp: tmp, root }
    }

    fn serve(&self) -> Server {
        let config = format!(
            r#"
[[mount]]
prefix = "/"
tier = "state"

[[mount]]
prefix = "/workspace"
tier = "filesystem"
root = {:?}

[[principal]]
name = "admin"
token = "{ADMIN}"
grants = [{{ prefix = "/", ops = ["list", "file", "read_binary", "read_file", "read_re", "write", "delete"] }}]

[[principal]]
name = "agent"
token = "{AGENT}"
grants = [{{ prefix = "/workspace/pub", ops = ["list", "file", "read_binary", "read_file", "read_re", "write", "delete"] }}]
"#,
            self.root.to_str().unwrap()
        );
        Server::start_with(Some(&config), &[])
    }

    /// Every file outside `pub/` still holds what it held, and nothing new
    /// appeared there.
    fn assert_untouched(&self) {
        assert_eq!(
            std::fs::read_to_string(self.root.join("private.txt")).unwrap(),
            PRIVATE
        );
        let names: Vec<_> = std::fs::read_dir(self.root.join("privdir"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["f.txt"]);
        assert_eq!(
            std::fs::read_to_string(self.root.join("privdir/f.txt")).unwrap(),
            PRIVATE
        );
    }
}

fn agent<T>(msg: T) -> Request<T> {
    as_token(msg, AGENT)
}

fn as_token<T>(msg: T, token: &str) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

#[track_caller]
fn denied<T: std::fmt::Debug>(result: Result<T, Status>) {
    match result {
        Err(status) => assert_error(&status, Code::PermissionDenied, "ACCESS_DENIED"),
        Ok(answer) => panic!("expected PERMISSION_DENIED, got {answer:?}"),
    }
}

async fn read(fs: &mut FilesystemClient<Channel>, path: &str) -> Result<String, Status> {
    let req = pb::ReadRequest {
        path: path.into(),
        ..Default::default()
    };
    fs.read(agent(req)).await.map(|r| r.into_inner().content)
}

async fn read_bytes(fs: &mut FilesystemClient<Channel>, path: &str) -> Result<Vec<u8>, Status> {
    let req = pb::ReadBytesRequest {
        path: path.into(),
        version: None,
    };
    let mut stream = fs.read_bytes(agent(req)).await?.into_inner();
    let mut out = Vec::new();
    while let Some(msg) = stream.message().await? {
        out.extend(msg.data);
    }
    Ok(out)
}

async fn write(fs: &mut FilesystemClient<Channel>, path: &str) -> Result<(), Status> {
    let req = pb::WriteRequest {
        path: path.into(),
        content: "overwritten by the agent\n".into(),
        ..Default::default()
    };
    fs.write(agent(req)).await.map(|_| ())
}

/// Reads, stats, listings and searches through links that lead out of the
/// granted directory are refused; a link that stays inside it works.
#[tokio::test]
async fn links_never_read_past_the_grant() {
    let tree = Tree::new();
    let server = tree.serve();
    let mut fs = server.fs().await;
    for path in [
        "/workspace/pub/sec",
        "/workspace/pub/up/private.txt",
        "/workspace/pub/dir/f.txt",
        "/workspace/pub/up/pub/up/private.txt",
    ] {
        denied(read(&mut fs, path).await);
        denied(read_bytes(&mut fs, path).await);
        let re = pb::ReadReRequest {
            path: path.into(),
            pattern: "private".into(),
            ..Default::default()
        };
        denied(fs.read_re(agent(re)).await);
    }
    let stat = |path: &str| agent(pb::StatRequest { path: path.into() });
    denied(fs.stat(stat("/workspace/pub/up/private.txt")).await);
    denied(fs.stat(stat("/workspace/pub/dir/f.txt")).await);
    for dir in ["/workspace/pub/up", "/workspace/pub/dir"] {
        let list = pb::ListInfoRequest { path: dir.into() };
        denied(fs.list_info(agent(list)).await);
        let grep = pb::GrepRequest {
            pattern: "private".into(),
            path: dir.into(),
            ..Default::default()
        };
        denied(grep_all(&mut fs, agent(grep)).await);
        let glob = pb::GlobRequest {
            pattern: "**/*".into(),
            path: dir.into(),
            ..Default::default()
        };
        denied(glob_all(&mut fs, agent(glob)).await);
    }
    // A search of the granted directory never follows a link out of it.
    let grep = pb::GrepRequest {
        pattern: "private|own".into(),
        path: "/workspace/pub".into(),
        ..Default::default()
    };
    let (matches, _) = grep_all(&mut fs, agent(grep)).await.unwrap();
    let paths: Vec<_> = matches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(paths, ["/workspace/pub/inner/own.txt"]);
    // Links that stay inside the grant are followed as before.
    assert_eq!(
        read(&mut fs, "/workspace/pub/ok").await.unwrap(),
        "the agent's own\n"
    );
    assert_eq!(
        read(&mut fs, "/workspace/pub/okdir/own.txt").await.unwrap(),
        "the agent's own\n"
    );
    // The admin, granted everywhere, still reads through the links.
    let req = pb::ReadRequest {
        path: "/workspace/pub/sec".into(),
        ..Default::default()
    };
    let content = fs.read(as_token(req, ADMIN)).await.unwrap().into_inner();
    assert_eq!(content.content, PRIVATE);
}

/// The same through the Tools service: the tools reach files through the
/// same tier, so the same rule holds.
#[tokio::test]
async fn tools_never_read_past_the_grant() {
    let tree = Tree::new();
    let server = tree.serve();
    let mut tools = ToolsClient::new(server.channel().await);
    for (tool, args) in [
        ("Read", r#"{"path": "/workspace/pub/sec"}"#),
        ("LS", r#"{"path": "/workspace/pub/up"}"#),
        (
            "Grep",
            r#"{"pattern": "private", "path": "/workspace/pub/dir"}"#,
        ),
        ("Glob", r#"{"pattern": "*", "path": "/workspace/pub/up"}"#),
    ] {
        let req = pb::InvokeRequest {
            name: tool.into(),
            arguments_json: args.into(),
            tool_call_id: "t1".into(),
        };
        let envelope = tools.invoke(agent(req)).await.unwrap().into_inner();
        let json: serde_json::Value = serde_json::from_str(&envelope.envelope_json).unwrap();
        assert_eq!(json["status"], "error", "{tool} {args}: {json}");
        assert_eq!(
            json["error"]["code"], "ACCESS_DENIED",
            "{tool} {args}: {json}"
        );
        assert!(!envelope.envelope_json.contains("not for the agent"));
    }
}

/// Writes, edits and deletes never go through a link in any component,
/// not even one that stays inside the grant; deleting a link removes the
/// link itself.
#[tokio::test]
async fn writes_never_go_through_links() {
    let tree = Tree::new();
    let server = tree.serve();
    let mut fs = server.fs().await;
    for path in [
        "/workspace/pub/sec",
        "/workspace/pub/up/private.txt",
        "/workspace/pub/dir/f.txt",
        "/workspace/pub/dir/new.txt",
        "/workspace/pub/up/privdir/new.txt",
        "/workspace/pub/okdir/new.txt",
    ] {
        denied(write(&mut fs, path).await);
        let edit = pb::EditRequest {
            path: path.into(),
            old_string: "private".into(),
            new_string: "public".into(),
            ..Default::default()
        };
        denied(fs.edit(agent(edit)).await);
    }
    for path in ["/workspace/pub/up/private.txt", "/workspace/pub/dir/f.txt"] {
        let delete = pb::DeleteRequest {
            path: path.into(),
            ..Default::default()
        };
        denied(fs.delete(agent(delete)).await);
    }
    let delete = pb::DeleteRequest {
        path: "/workspace/pub/up/privdir".into(),
        recursive: true,
        ..Default::default()
    };
    denied(fs.delete(agent(delete)).await);
    let stream = tokio_stream::iter([pb::WriteBytesRequest {
        kind: Some(pb::write_bytes_request::Kind::Header(
            pb::WriteBytesHeader {
                path: "/workspace/pub/dir/upload.bin".into(),
                ..Default::default()
            },
        )),
    }]);
    denied(fs.write_bytes(agent(stream)).await);
    tree.assert_untouched();
    assert!(!tree.root.join("pub/inner/new.txt").exists());
    // Deleting the link itself is the agent's right; the target stays.
    let delete = pb::DeleteRequest {
        path: "/workspace/pub/sec".into(),
        ..Default::default()
    };
    fs.delete(agent(delete)).await.unwrap();
    assert!(!tree.root.join("pub/sec").exists());
    tree.assert_untouched();
}

/// A link swapped back and forth between a target inside the grant and one
/// outside it while the agent reads through it: every read returns the
/// agent's own file or is refused, never the private one.
#[tokio::test]
async fn swapping_a_link_target_never_reads_past_the_grant() {
    let tree = Tree::new();
    let server = tree.serve();
    let mut fs = server.fs().await;
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root) = (stop.clone(), tree.root.clone());
        std::thread::spawn(move || {
            let link = root.join("pub/flip");
            let (good, bad) = (root.join("pub/flip.good"), root.join("pub/flip.bad"));
            symlink("inner/own.txt", &good).unwrap();
            symlink("../private.txt", &bad).unwrap();
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Hard links of the two links, renamed over `flip` in turn.
                for from in [&good, &bad] {
                    let staged = root.join("pub/flip.staged");
                    let _ = std::fs::remove_file(&staged);
                    let target = std::fs::read_link(from).unwrap();
                    symlink(target, &staged).unwrap();
                    std::fs::rename(&staged, &link).unwrap();
                }
                swaps += 1;
            }
            swaps
        })
    };
    let (mut own, mut refused) = (0, 0);
    for _ in 0..400 {
        match read(&mut fs, "/workspace/pub/flip").await {
            Ok(text) => {
                assert_eq!(text, "the agent's own\n", "a read got past the grant");
                own += 1;
            }
            Err(status) if status.code() == Code::PermissionDenied => refused += 1,
            Err(status) => assert_eq!(status.code(), Code::NotFound, "{status:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert!(swapper.join().unwrap() > 0);
    assert!(own > 0 && refused > 0, "own {own}, refused {refused}");
}

/// Rewriting a setuid file never leaves a setuid file behind, and (when
/// the server may, as root) the file keeps its owner.
#[tokio::test]
async fn replacing_a_file_drops_setuid_and_keeps_the_owner() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("tool");
    std::fs::write(&file, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o6755)).unwrap();
    let root_run = rustix::process::geteuid().is_root();
    if root_run {
        let nobody = Some(rustix::fs::Uid::from_raw(65534));
        rustix::fs::chown(&file, nobody, Some(rustix::fs::Gid::from_raw(65534))).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o6755)).unwrap();
    }
    let server = Server::start_with(None, &["--root", tmp.path().to_str().unwrap()]);
    let mut fs = server.fs().await;
    crate::util::write(&mut fs, "/workspace/tool", "#!/bin/sh\necho replaced\n").await;
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o755, "mode {:o}", meta.mode());
    if root_run {
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    }
}

/// A file whose time stamp is far outside the protobuf range is listed and
/// stat'ed with a clamped time instead of breaking the listing.
#[tokio::test]
async fn absurd_time_stamps_are_clamped() {
    // tmpfs stores any time stamp; ext4 clamps to years 1901-2446.
    let tmp = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let file = tmp.path().join("old.txt");
    std::fs::write(&file, "x").unwrap();
    let min = rustix::fs::Timespec {
        tv_sec: i64::MIN,
        tv_nsec: 0,
    };
    let times = rustix::fs::Timestamps {
        last_access: min,
        last_modification: min,
    };
    let set = rustix::fs::utimensat(rustix::fs::CWD, &file, &times, rustix::fs::AtFlags::empty());
    let stored = std::fs::metadata(&file).unwrap().mtime();
    if set.is_err() || stored >= -62_135_596_800 {
        // The file system refuses or clamps such a time: nothing to defend.
        eprintln!("skipped: this file system keeps no time stamp before year 1");
        return;
    }
    let server = Server::start_with(None, &["--root", tmp.path().to_str().unwrap()]);
    let mut fs = server.fs().await;
    let list = pb::ListInfoRequest {
        path: "/workspace".into(),
    };
    let listed = fs.list_info(list).await.unwrap().into_inner();
    let seconds = listed.entries[0].modified_time.unwrap().seconds;
    assert!(seconds >= -62_135_596_800, "{seconds}");
    let stat = pb::StatRequest {
        path: "/workspace/old.txt".into(),
    };
    fs.stat(stat).await.unwrap();
}

/// Reading a socket is INVALID_ARGUMENT naming what it is, not an internal
/// error.
#[tokio::test]
async fn reading_a_socket_is_invalid_argument() {
    let tmp = tempfile::tempdir().unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(tmp.path().join("sock")).unwrap();
    let server = Server::start_with(None, &["--root", tmp.path().to_str().unwrap()]);
    let mut fs = server.fs().await;
    for result in [
        fs.read(pb::ReadRequest {
            path: "/workspace/sock".into(),
            ..Default::default()
        })
        .await
        .map(|_| ()),
        fs.read_bytes(pb::ReadBytesRequest {
            path: "/workspace/sock".into(),
            version: None,
        })
        .await
        .map(|_| ()),
    ] {
        let status = result.unwrap_err();
        assert_error(&status, Code::InvalidArgument, "INVALID_PARAM");
        assert!(
            status.message().contains("not a regular file"),
            "{status:?}"
        );
    }
}

/// Creates `depth` nested directories `d` below `dir` (no path is ever
/// longer than one name) with a file at the bottom.
fn deep_tree(dir: &Path, depth: usize) {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut fd = rustix::fs::open(dir, flags, Mode::empty()).unwrap();
    for _ in 0..depth {
        rustix::fs::mkdirat(&fd, "d", Mode::from_raw_mode(0o755)).unwrap();
        fd = rustix::fs::openat(&fd, "d", flags, Mode::empty()).unwrap();
    }
    let file = rustix::fs::openat(
        &fd,
        "leaf",
        OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .unwrap();
    drop(file);
}

/// A recursive Delete of a tree 100,000 levels deep removes it (it used to
/// recurse on the stack, one descriptor per level, and abort the process).
#[tokio::test]
async fn deleting_a_very_deep_tree_works() {
    // On tmpfs where there is one: ext4 takes minutes for 100,000 rmdirs.
    let tmp = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    std::fs::create_dir(tmp.path().join("deep")).unwrap();
    deep_tree(&tmp.path().join("deep"), 100_000);
    let server = Server::start_with(None, &["--root", tmp.path().to_str().unwrap()]);
    let mut fs = server.fs().await;
    let deleted = fs
        .delete(pb::DeleteRequest {
            path: "/workspace/deep".into(),
            recursive: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.files_deleted, 1);
    assert!(!tmp.path().join("deep").exists());
}

/// The temporary files of Filesystem writes whose server is killed mid-way
/// never stay behind.
#[tokio::test]
async fn a_killed_write_leaves_no_temporary_file() {
    let tmp = tempfile::tempdir().unwrap();
    let mut server = Server::start_with(None, &["--root", tmp.path().to_str().unwrap()]);
    let mut fs = server.fs().await;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let upload = tokio::spawn(async move {
        fs.write_bytes(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
    });
    tx.send(pb::WriteBytesRequest {
        kind: Some(pb::write_bytes_request::Kind::Header(
            pb::WriteBytesHeader {
                path: "/workspace/big.bin".into(),
                ..Default::default()
            },
        )),
    })
    .await
    .unwrap();
    for _ in 0..8 {
        tx.send(pb::WriteBytesRequest {
            kind: Some(pb::write_bytes_request::Kind::Data(vec![7; 1 << 20])),
        })
        .await
        .unwrap();
    }
    // Let the server take the pieces, then kill it mid-upload.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    server.kill();
    drop(tx);
    let _ = upload.await;
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The embedded default keeps the Store's database outside the served
/// directory, and a configuration that puts it inside one is refused.
#[tokio::test]
async fn the_store_never_lives_inside_a_served_directory() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let list = pb::ListInfoRequest {
        path: "/workspace".into(),
    };
    let listed = fs.list_info(list).await.unwrap().into_inner();
    assert!(listed.entries.is_empty(), "{:?}", listed.entries);
    // The Store works, and nothing of it shows in the served directory.
    crate::util::write(&mut fs, "/memories/note.md", "kept\n").await;
    let listed = fs
        .list_info(pb::ListInfoRequest {
            path: "/workspace".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(listed.entries.is_empty(), "{:?}", listed.entries);

    let tmp = tempfile::tempdir().unwrap();
    let config = format!(
        "[[mount]]\nprefix = \"/memories\"\ntier = \"store\"\npath = {:?}\n\n\
         [[mount]]\nprefix = \"/workspace\"\ntier = \"filesystem\"\nroot = {:?}\n",
        tmp.path().join("data/store").to_str().unwrap(),
        tmp.path().to_str().unwrap()
    );
    let path = tmp.path().join("bad.toml");
    std::fs::write(&path, config).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mount /memories: data directory") && err.contains("lies inside"),
        "{err}"
    );
}

/// Large transfers stream through the Filesystem tier: eight stalled
/// downloads of a 64 MiB file and one 64 MiB upload each hold a few pieces,
/// never the whole file (before: 527 MB for the eight downloads).
#[tokio::test]
async fn large_transfers_never_hold_whole_files() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("big.bin"), vec![1u8; 64 << 20]).unwrap();
    let server = Server::start_with(None, &["--root", tmp.path().to_str().unwrap()]);
    server.reset_peak_memory();
    let before = server.memory_kib("VmHWM");
    let mut stalled = Vec::new();
    for _ in 0..8 {
        let req = pb::ReadBytesRequest {
            path: "/workspace/big.bin".into(),
            version: None,
        };
        // One connection each: a stalled stream holds its connection's
        // flow-control window, which the next stream's answer would need.
        let mut fs = server.fs().await;
        let mut stream = fs.read_bytes(req).await.unwrap().into_inner();
        // The first piece arrives; the rest waits for a reader that never comes.
        stream.message().await.unwrap().unwrap();
        stalled.push(stream);
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let pieces = (0..64).map(|_| pb::WriteBytesRequest {
        kind: Some(pb::write_bytes_request::Kind::Data(vec![2; 1 << 20])),
    });
    let header = pb::WriteBytesRequest {
        kind: Some(pb::write_bytes_request::Kind::Header(
            pb::WriteBytesHeader {
                path: "/workspace/up.bin".into(),
                ..Default::default()
            },
        )),
    };
    let upload = tokio_stream::iter(std::iter::once(header).chain(pieces));
    let mut fs = server.fs().await;
    let written = fs.write_bytes(upload).await.unwrap().into_inner();
    assert_eq!(written.bytes_written, 64 << 20);
    let grown_mib = server.memory_kib("VmHWM").saturating_sub(before) / 1024;
    assert!(grown_mib < 64, "peak memory grew {grown_mib} MiB");
    drop(stalled);
}

/// The text of an ignore file above the caller's grants (its invalid rules)
/// never reaches the caller's Grep summary; a caller who may read it sees
/// the problem as before.
#[tokio::test]
async fn ungranted_ignore_file_problems_stay_out_of_the_summary() {
    let tree = Tree::new();
    std::fs::write(tree.root.join(".gitignore"), "secret-rule-{unclosed\n").unwrap();
    let server = tree.serve();
    let mut fs = server.fs().await;
    let grep = || pb::GrepRequest {
        pattern: "own".into(),
        path: "/workspace/pub".into(),
        ..Default::default()
    };
    let (_, admin) = grep_all(&mut fs, as_token(grep(), ADMIN)).await.unwrap();
    let shown = format!("{:?}", admin.problems);
    assert!(shown.contains("/workspace/.gitignore"), "{shown}");
    let (matches, summary) = grep_all(&mut fs, agent(grep())).await.unwrap();
    assert_eq!(matches.len(), 1);
    let shown = format!("{:?}", summary.problems);
    assert!(!shown.contains("secret-rule"), "{shown}");
    assert!(summary.problems.is_empty(), "{shown}");
}
