//! The Filesystem tier's confinement, one test per attack: every request
//! stays beneath the root whatever paths, links, races or odd names it meets;
//! writes are atomic and keep permissions.

use crate::util::{Server, assert_error, glob_all, grep_all, write};
use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tonic::Code;
use tonic::transport::Channel;

const SECRET: &str = "TOP-SECRET outside the root\n";

/// A workspace root and, beside it, an outside directory holding a secret.
struct Tree {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), SECRET).unwrap();
        std::fs::write(root.join("sub/file.txt"), "inside\n").unwrap();
        Tree {
            _tmp: tmp,
            root,
            outside,
        }
    }

    fn serve(&self) -> Server {
        Server::start_with(None, &["--root", self.root.to_str().unwrap()])
    }

    fn link(&self, name: &str, target: &Path) {
        symlink(target, self.root.join(name)).unwrap();
    }
}

async fn read(fs: &mut FilesystemClient<Channel>, path: &str) -> Result<String, tonic::Status> {
    fs.read(pb::ReadRequest {
        path: path.into(),
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner().content)
}

fn write_req(path: &str, content: &str) -> pb::WriteRequest {
    pb::WriteRequest {
        path: path.into(),
        content: content.into(),
        ..Default::default()
    }
}

/// `..` never reaches a backend: path validation rejects it.
#[tokio::test]
async fn dot_dot_is_rejected_by_path_validation() {
    let tree = Tree::new();
    let server = tree.serve();
    let mut fs = server.fs().await;
    let err = read(&mut fs, "/workspace/../outside/secret")
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    let err = read(&mut fs, "/workspace/sub/../../outside/secret")
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
}

/// The root maps to /workspace and answers come back as logical paths.
#[tokio::test]
async fn root_flag_mounts_the_directory_at_workspace_with_logical_paths() {
    let tree = Tree::new();
    let server = tree.serve();
    let mut fs = server.fs().await;
    assert_eq!(
        read(&mut fs, "/workspace/sub/file.txt").await.unwrap(),
        "inside\n"
    );
    let listed = fs
        .list_info(pb::ListInfoRequest {
            path: "/workspace/sub".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let paths: Vec<_> = listed.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["/workspace/sub/file.txt"]);
    let root = tree.root.to_str().unwrap();
    assert!(!format!("{listed:?}").contains(root), "host path leaked");
}

/// Without --root the embedded default mounts the working directory.
#[tokio::test]
async fn default_configuration_mounts_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hi\n").unwrap();
    let server = Server::start_in(dir, None, &[]);
    let mut fs = server.fs().await;
    assert_eq!(read(&mut fs, "/workspace/hello.txt").await.unwrap(), "hi\n");
}

/// Reading through a link to a file outside is PERMISSION_DENIED naming the
/// logical path.
#[tokio::test]
async fn read_never_follows_a_link_out_of_the_root() {
    let tree = Tree::new();
    tree.link("leak", &tree.outside.join("secret"));
    let server = tree.serve();
    let mut fs = server.fs().await;
    let err = read(&mut fs, "/workspace/leak").await.unwrap_err();
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
    assert!(
        err.message().contains("/workspace/leak"),
        "{}",
        err.message()
    );
    assert!(!err.message().contains(tree.outside.to_str().unwrap()));
    let bytes = fs
        .read_bytes(pb::ReadBytesRequest {
            path: "/workspace/leak".into(),
            version: None,
        })
        .await;
    let err = match bytes {
        Err(status) => status,
        Ok(stream) => stream.into_inner().message().await.unwrap_err(),
    };
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
}

/// Writing to a link leading out is refused and the outside file is intact.
#[tokio::test]
async fn write_never_follows_a_link_out_of_the_root() {
    let tree = Tree::new();
    tree.link("leak", &tree.outside.join("secret"));
    let server = tree.serve();
    let mut fs = server.fs().await;
    let err = fs
        .write(write_req("/workspace/leak", "pwned"))
        .await
        .unwrap_err();
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
    assert_eq!(
        std::fs::read_to_string(tree.outside.join("secret")).unwrap(),
        SECRET
    );
    assert!(
        std::fs::symlink_metadata(tree.root.join("leak"))
            .unwrap()
            .is_symlink()
    );
}

/// Editing through a link leading out is refused.
#[tokio::test]
async fn edit_never_follows_a_link_out_of_the_root() {
    let tree = Tree::new();
    tree.link("leak", &tree.outside.join("secret"));
    let server = tree.serve();
    let mut fs = server.fs().await;
    let err = fs
        .edit(pb::EditRequest {
            path: "/workspace/leak".into(),
            old_string: "TOP".into(),
            new_string: "PWNED".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
    assert_eq!(
        std::fs::read_to_string(tree.outside.join("secret")).unwrap(),
        SECRET
    );
}

/// Deleting a link removes the link only; a recursive delete of a directory
/// holding a link to an outside directory leaves that directory intact.
#[tokio::test]
async fn delete_removes_links_never_their_targets() {
    let tree = Tree::new();
    tree.link("leak", &tree.outside.join("secret"));
    symlink(&tree.outside, tree.root.join("sub/outdir")).unwrap();
    let server = tree.serve();
    let mut fs = server.fs().await;
    let del = |path: &str, recursive| pb::DeleteRequest {
        path: path.into(),
        recursive,
        ..Default::default()
    };
    let out = fs
        .delete(del("/workspace/leak", false))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(out.files_deleted, 1);
    let out = fs
        .delete(del("/workspace/sub", true))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(out.files_deleted, 2, "file.txt and the link itself");
    assert!(!tree.root.join("sub").exists());
    assert_eq!(
        std::fs::read_to_string(tree.outside.join("secret")).unwrap(),
        SECRET
    );
}

/// Listing a link to an outside directory is refused; listing its parent
/// shows it as a link without following it.
#[tokio::test]
async fn list_shows_outside_links_but_never_lists_through_them() {
    let tree = Tree::new();
    tree.link("outdir", &tree.outside);
    let server = tree.serve();
    let mut fs = server.fs().await;
    let err = fs
        .list_info(pb::ListInfoRequest {
            path: "/workspace/outdir".into(),
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
    let listed = fs
        .list_info(pb::ListInfoRequest {
            path: "/workspace".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let link = listed
        .entries
        .iter()
        .find(|e| e.path == "/workspace/outdir")
        .expect("link listed");
    assert!(link.is_symlink && !link.is_directory);
}

/// Stat of an outside link describes the link, not the outside file.
#[tokio::test]
async fn stat_describes_an_outside_link_without_following_it() {
    let tree = Tree::new();
    std::fs::write(tree.outside.join("big"), vec![b'x'; 100_000]).unwrap();
    tree.link("leak", &tree.outside.join("big"));
    let server = tree.serve();
    let mut fs = server.fs().await;
    let info = fs
        .stat(pb::StatRequest {
            path: "/workspace/leak".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .info
        .unwrap();
    assert!(info.is_symlink);
    assert_ne!(info.size, 100_000, "the outside file's size leaked");
    let err = fs
        .stat(pb::StatRequest {
            path: "/workspace/leak/x".into(),
        })
        .await
        .unwrap_err();
    assert_ne!(err.code(), Code::Ok);
}

/// Search never follows links: Grep and Glob from the root find nothing of
/// the outside, and a search rooted at an outside link is refused.
#[tokio::test]
async fn search_never_follows_links_out_of_the_root() {
    let tree = Tree::new();
    tree.link("leak", &tree.outside.join("secret"));
    tree.link("outdir", &tree.outside);
    let server = tree.serve();
    let mut fs = server.fs().await;
    let (matches, summary) = grep_all(
        &mut fs,
        pb::GrepRequest {
            pattern: "SECRET|inside".into(),
            path: "/workspace".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let paths: Vec<_> = matches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(paths, ["/workspace/sub/file.txt"]);
    assert_eq!(summary.files_searched, 1);
    let (paths, _) = glob_all(
        &mut fs,
        pb::GlobRequest {
            pattern: "**/secret".into(),
            path: "/workspace".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(paths.is_empty(), "{paths:?}");
    let err = grep_all(
        &mut fs,
        pb::GrepRequest {
            pattern: "SECRET".into(),
            path: "/workspace/outdir".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
}

/// A directory link to the outside in the middle of a path is refused for
/// reads and writes, and nothing is created outside.
#[tokio::test]
async fn symlinked_parent_directory_cannot_be_used_to_escape() {
    let tree = Tree::new();
    tree.link("evil", &tree.outside);
    let server = tree.serve();
    let mut fs = server.fs().await;
    let err = read(&mut fs, "/workspace/evil/secret").await.unwrap_err();
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
    let err = fs
        .write(write_req("/workspace/evil/planted", "x"))
        .await
        .unwrap_err();
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
    let err = fs
        .write(write_req("/workspace/evil/deeper/planted", "x"))
        .await
        .unwrap_err();
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
    let names: Vec<_> = std::fs::read_dir(&tree.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["secret"]);
}

/// An absolute link is refused even when it points back inside the root;
/// a relative link that stays inside is followed.
#[tokio::test]
async fn absolute_links_are_refused_relative_inside_links_are_followed() {
    let tree = Tree::new();
    tree.link("abs", &tree.root.join("sub/file.txt"));
    tree.link("rel", Path::new("sub/file.txt"));
    tree.link("subdir", Path::new("sub"));
    let server = tree.serve();
    let mut fs = server.fs().await;
    let err = read(&mut fs, "/workspace/abs").await.unwrap_err();
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
    assert_eq!(read(&mut fs, "/workspace/rel").await.unwrap(), "inside\n");
    assert_eq!(
        read(&mut fs, "/workspace/subdir/file.txt").await.unwrap(),
        "inside\n"
    );
    let listed = fs
        .list_info(pb::ListInfoRequest {
            path: "/workspace".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let subdir = listed
        .entries
        .iter()
        .find(|e| e.path == "/workspace/subdir")
        .unwrap();
    assert!(subdir.is_symlink);
}

/// Swapping a directory for an outside link in a tight loop while reading
/// and writing through it never reads the secret nor writes outside.
#[tokio::test]
async fn swapping_a_directory_for_a_link_during_operations_never_escapes() {
    let tree = Tree::new();
    let d = tree.root.join("d");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("secret"), "benign\n").unwrap();
    std::fs::write(tree.root.join("benign-secret"), "benign\n").unwrap();
    let server = tree.serve();
    let mut fs = server.fs().await;
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root, outside) = (stop.clone(), tree.root.clone(), tree.outside.clone());
        std::thread::spawn(move || {
            let (d, real, link) = (root.join("d"), root.join("d.real"), root.join("d.link"));
            std::fs::rename(&d, &real).unwrap();
            symlink(&outside, &link).unwrap();
            let (mut swaps, mut recreated) = (0u64, 0u64);
            let mv = |from: &PathBuf, to: &PathBuf| std::fs::rename(from, to).is_ok();
            while !stop.load(Ordering::Relaxed) {
                // Between cycles `d` is parked; a `d` here is one a write
                // recreated, which would block every later rename: set it
                // aside (inside the root) and go on swapping.
                if d.symlink_metadata().is_ok() {
                    recreated += 1;
                    mv(&d, &root.join(format!("recreated{recreated}")));
                }
                if mv(&link, &d) && mv(&d, &link) && mv(&real, &d) && mv(&d, &real) {
                    swaps += 1;
                }
            }
            swaps
        })
    };
    let mut outcomes = [0u32; 3];
    for i in 0..300 {
        match read(&mut fs, "/workspace/d/secret").await {
            Ok(text) => {
                assert_eq!(text, "benign\n", "read escaped the root");
                outcomes[0] += 1;
            }
            Err(e) if e.code() == Code::PermissionDenied => outcomes[1] += 1,
            Err(e) => {
                assert_eq!(e.code(), Code::NotFound, "{e:?}");
                outcomes[2] += 1;
            }
        }
        let planted = format!("/workspace/d/planted{i}");
        let _outcome_is_checked_below = fs.write(write_req(&planted, "x")).await;
    }
    stop.store(true, Ordering::Relaxed);
    assert!(swapper.join().unwrap() > 0);
    let names: Vec<_> = std::fs::read_dir(&tree.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["secret"], "a write escaped: {outcomes:?}");
    assert_eq!(
        std::fs::read_to_string(tree.outside.join("secret")).unwrap(),
        SECRET
    );
}

/// Names that are not UTF-8 are never mangled: list leaves them out, search
/// skips them and reports each as a problem.
#[tokio::test]
async fn non_utf8_names_are_reported_never_mangled() {
    use std::os::unix::ffi::OsStrExt;
    let tree = Tree::new();
    let bad = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(tree.root.join(bad), "needle\n").unwrap();
    std::fs::write(tree.root.join("ok.txt"), "needle\n").unwrap();
    let server = tree.serve();
    let mut fs = server.fs().await;
    let listed = fs
        .list_info(pb::ListInfoRequest {
            path: "/workspace".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let paths: Vec<_> = listed.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["/workspace/ok.txt", "/workspace/sub"]);
    let (matches, summary) = grep_all(
        &mut fs,
        pb::GrepRequest {
            pattern: "needle".into(),
            path: "/workspace".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let paths: Vec<_> = matches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(paths, ["/workspace/ok.txt"]);
    assert_eq!(summary.problems.len(), 1, "{:?}", summary.problems);
    let problem = &summary.problems[0];
    assert_eq!(problem.code, "INVALID_PARAM");
    assert!(problem.path.contains(r"caf\xe9.txt"), "{problem:?}");
    assert!(problem.message.contains("not valid UTF-8"), "{problem:?}");
}

/// A write keeps the file's permission bits, leaves no temporary file, and
/// readers of the host file only ever see a complete old or new content.
#[tokio::test]
async fn writes_are_atomic_and_keep_permissions() {
    let tree = Tree::new();
    let host = tree.root.join("data.txt");
    let a = "a".repeat(1 << 20);
    let b = "b".repeat(1 << 20);
    std::fs::write(&host, &a).unwrap();
    std::fs::set_permissions(&host, std::fs::Permissions::from_mode(0o640)).unwrap();
    let server = tree.serve();
    let mut fs = server.fs().await;
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, host) = (stop.clone(), host.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) {
                let data = std::fs::read(&host).unwrap();
                assert_eq!(data.len(), 1 << 20, "torn write seen");
                assert!(data.iter().all(|&c| c == data[0]), "mixed content seen");
                reads += 1;
            }
            reads
        })
    };
    for i in 0..20 {
        let content = if i % 2 == 0 { &b } else { &a };
        write(&mut fs, "/workspace/data.txt", content).await;
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let mode = std::fs::metadata(&host).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
    let names: Vec<_> = std::fs::read_dir(&tree.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.contains("agentvfs")), "{names:?}");
}

/// Writes create parent directories; versions grow on every write;
/// create_only and stale if_version are refused.
#[tokio::test]
async fn versions_grow_and_conditional_writes_hold_on_real_files() {
    let tree = Tree::new();
    let server = tree.serve();
    let mut fs = server.fs().await;
    let first = write(&mut fs, "/workspace/new/deep/f.txt", "1").await;
    assert!(first.created);
    assert_eq!(
        std::fs::read_to_string(tree.root.join("new/deep/f.txt")).unwrap(),
        "1"
    );
    let mut last = first.version;
    for i in 0..10 {
        let v = write(&mut fs, "/workspace/new/deep/f.txt", &i.to_string())
            .await
            .version;
        assert!(v > last, "version did not grow: {v} after {last}");
        last = v;
    }
    let mut req = write_req("/workspace/new/deep/f.txt", "x");
    req.create_only = true;
    let err = fs.write(req).await.unwrap_err();
    assert_error(&err, Code::AlreadyExists, "CONFLICT");
    let mut req = write_req("/workspace/new/deep/f.txt", "x");
    req.if_version = Some(first.version);
    let err = fs.write(req).await.unwrap_err();
    assert_error(&err, Code::Aborted, "CONFLICT");
    let mut req = write_req("/workspace/new/deep/f.txt", "y");
    req.if_version = Some(last);
    fs.write(req).await.unwrap();
}

/// Concurrent edits of one real file never lose an update.
#[tokio::test]
async fn concurrent_edits_of_a_real_file_lose_nothing() {
    let tree = Tree::new();
    let tokens: Vec<String> = (0..16).map(|i| format!("<{i}>")).collect();
    std::fs::write(tree.root.join("f.txt"), tokens.concat()).unwrap();
    let server = tree.serve();
    let mut edits = Vec::new();
    for token in &tokens {
        let mut fs = server.fs().await;
        let token = token.clone();
        edits.push(tokio::spawn(async move {
            fs.edit(pb::EditRequest {
                path: "/workspace/f.txt".into(),
                old_string: token.clone(),
                new_string: format!("[{token}]"),
                ..Default::default()
            })
            .await
        }));
    }
    for edit in edits {
        edit.await.unwrap().unwrap();
    }
    let text = std::fs::read_to_string(tree.root.join("f.txt")).unwrap();
    let expected: String = tokens.iter().map(|t| format!("[{t}]")).collect();
    assert_eq!(text, expected);
}

/// Makes a directory refuse changes at the OS level for this process: read
/// only for an ordinary user, immutable (`chattr +i`) for root, whom modes
/// do not stop. Undone on drop.
struct Refusing(PathBuf);

impl Refusing {
    fn new(dir: &Path) -> Refusing {
        if rustix::process::geteuid().is_root() {
            let ok = std::process::Command::new("chattr")
                .arg("+i")
                .arg(dir)
                .status()
                .unwrap()
                .success();
            assert!(ok, "chattr +i failed");
        } else {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        Refusing(dir.to_owned())
    }
}

impl Drop for Refusing {
    fn drop(&mut self) {
        if rustix::process::geteuid().is_root() {
            let _best_effort = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.0)
                .status();
        } else {
            let _best_effort =
                std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
        }
    }
}

/// The OS refusing a write or delete is PERMISSION_DENIED naming the logical
/// path, and nothing changes.
#[tokio::test]
async fn os_permission_errors_are_permission_denied() {
    let tree = Tree::new();
    let server = tree.serve();
    let mut fs = server.fs().await;
    let _refusing = Refusing::new(&tree.root.join("sub"));
    let err = fs
        .write(write_req("/workspace/sub/file.txt", "changed"))
        .await
        .unwrap_err();
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
    assert!(
        err.message().contains("/workspace/sub/file.txt"),
        "{}",
        err.message()
    );
    let err = fs
        .delete(pb::DeleteRequest {
            path: "/workspace/sub/file.txt".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::PermissionDenied, "ACCESS_DENIED");
    assert_eq!(
        std::fs::read_to_string(tree.root.join("sub/file.txt")).unwrap(),
        "inside\n"
    );
}
