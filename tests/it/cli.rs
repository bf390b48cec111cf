//! The `agentvfs` client verbs against a real server.

use crate::util::Server;
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn agentvfs(server: &Server, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .arg("--addr")
        .arg(&server.url)
        .args(args)
        .env_remove("AGENTVFS_TOKEN")
        .env_remove("AGENTVFS_SESSION")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agentvfs");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// put, cat, ls, grep and glob work end to end; grep prints ripgrep-style
/// lines and its summary on stderr; a failure exits non-zero with the code.
#[tokio::test]
async fn client_verbs_round_trip() {
    let server = Server::start();
    stdout(&agentvfs(
        &server,
        &["put", "/docs/a.txt"],
        b"hello\nworld\n",
    ));
    assert_eq!(
        stdout(&agentvfs(&server, &["cat", "-n", "/docs/a.txt"], b"")),
        "     1\thello\n     2\tworld"
    );
    assert!(stdout(&agentvfs(&server, &["ls", "/docs"], b"")).contains("/docs/a.txt"));
    let grep = agentvfs(&server, &["grep", "-i", "WORLD", "/docs"], b"");
    assert_eq!(stdout(&grep), "/docs/a.txt:2:world\n");
    assert!(String::from_utf8_lossy(&grep.stderr).contains("1 matched"));
    assert_eq!(
        stdout(&agentvfs(&server, &["glob", "**/*.txt"], b"")),
        "/docs/a.txt\n"
    );
    assert_eq!(
        stdout(&agentvfs(&server, &["get", "/docs/a.txt"], b"")),
        "hello\nworld\n"
    );
    let missing = agentvfs(&server, &["cat", "/docs/missing"], b"");
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("[NOT_FOUND]"));
}

/// The version `put` printed: `PATH (N bytes, version V)`.
fn put_version(out: &str) -> &str {
    out.trim_end()
        .rsplit_once("version ")
        .and_then(|(_, v)| v.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no version in {out:?}"))
}

/// The stderr of a verb that must fail.
fn failure(out: &Output) -> String {
    assert!(!out.status.success(), "succeeded: {:?}", out.stdout);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// mv moves a file (with --if-version) and a directory tree; --create-only,
/// a stale --if-version and a move across mounts fail with their codes.
#[tokio::test]
async fn mv_moves_files_and_trees() {
    let server = Server::start();
    let put = stdout(&agentvfs(&server, &["put", "/docs/a.txt"], b"alpha\n"));
    let v1 = put_version(&put).to_owned();
    stdout(&agentvfs(&server, &["put", "/docs/b.txt"], b"beta\n"));

    let taken = agentvfs(
        &server,
        &["mv", "--create-only", "/docs/a.txt", "/docs/b.txt"],
        b"",
    );
    assert!(failure(&taken).contains("[CONFLICT]"));
    stdout(&agentvfs(&server, &["put", "/docs/a.txt"], b"alpha 2\n"));
    let stale = agentvfs(
        &server,
        &["mv", "--if-version", &v1, "/docs/a.txt", "/x.txt"],
        b"",
    );
    assert!(failure(&stale).contains("[CONFLICT]"));
    let across = agentvfs(&server, &["mv", "/docs/a.txt", "/memories/a.txt"], b"");
    assert!(failure(&across).contains("cannot move across mounts"));

    let current = stdout(&agentvfs(&server, &["put", "/docs/a.txt"], b"alpha 3\n"));
    let v3 = put_version(&current).to_owned();
    let moved = stdout(&agentvfs(
        &server,
        &["mv", "--if-version", &v3, "/docs/a.txt", "/archive/a.txt"],
        b"",
    ));
    assert!(
        moved.starts_with("moved /docs/a.txt to /archive/a.txt (1 files, version "),
        "{moved}"
    );
    assert_eq!(
        stdout(&agentvfs(&server, &["cat", "/archive/a.txt"], b"")),
        "alpha 3\n"
    );
    assert!(failure(&agentvfs(&server, &["cat", "/docs/a.txt"], b"")).contains("[NOT_FOUND]"));

    stdout(&agentvfs(&server, &["put", "/docs/sub/c.txt"], b"gamma\n"));
    assert_eq!(
        stdout(&agentvfs(&server, &["mv", "/docs", "/old/docs"], b"")),
        "moved /docs to /old/docs (2 files)\n"
    );
    assert_eq!(
        stdout(&agentvfs(&server, &["glob", "**/*.txt", "/old"], b"")),
        "/old/docs/b.txt\n/old/docs/sub/c.txt\n"
    );
}
