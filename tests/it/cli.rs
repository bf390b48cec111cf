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

/// cp copies a file (creating parents); --create-only, a stale
/// --if-version and a copy across mounts fail with their codes.
#[tokio::test]
async fn cp_copies_a_file() {
    let server = Server::start();
    stdout(&agentvfs(&server, &["put", "/docs/a.txt"], b"alpha\n"));
    let copied = stdout(&agentvfs(
        &server,
        &["cp", "/docs/a.txt", "/new/b.txt"],
        b"",
    ));
    assert!(
        copied.starts_with("copied /docs/a.txt to /new/b.txt (6 bytes, version "),
        "{copied}"
    );
    assert_eq!(
        stdout(&agentvfs(&server, &["cat", "/new/b.txt"], b"")),
        "alpha\n"
    );
    let taken = agentvfs(
        &server,
        &["cp", "--create-only", "/docs/a.txt", "/new/b.txt"],
        b"",
    );
    assert!(failure(&taken).contains("[CONFLICT]"));
    let stale = agentvfs(
        &server,
        &["cp", "--if-version", "1", "/docs/a.txt", "/new/b.txt"],
        b"",
    );
    assert!(failure(&stale).contains("[CONFLICT]"));
    let across = agentvfs(&server, &["cp", "/docs/a.txt", "/memories/a.txt"], b"");
    assert!(failure(&across).contains("cannot copy across mounts"));
}

/// `log`, `cat --at`, `diff`, `restore` and `watch --once` show and undo a
/// file's history; `watch` prints one line per change, with its cursor when
/// asked, and resumes from one.
#[tokio::test]
async fn history_verbs_show_and_undo_changes() {
    let server = Server::start();
    stdout(&agentvfs(&server, &["put", "/n.md"], b"one\ntwo\n"));
    stdout(&agentvfs(&server, &["put", "/n.md"], b"one\nthree\n"));
    let log = stdout(&agentvfs(&server, &["log", "/n.md"], b""));
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(
        lines[0].contains(" write by local  10 bytes  (current)"),
        "{log}"
    );
    let version = |line: &str| line[1..line.find(' ').unwrap()].to_owned();
    let (v2, v1) = (version(lines[0]), version(lines[1]));
    assert_eq!(
        stdout(&agentvfs(&server, &["cat", "--at", &v1, "/n.md"], b"")),
        "one\ntwo\n"
    );
    let diff = agentvfs(&server, &["diff", "/n.md", &v1], b"");
    assert!(stdout(&diff).contains("-two\n+three"), "{}", stdout(&diff));
    assert!(
        String::from_utf8_lossy(&diff.stderr)
            .contains(&format!("version {v1} → {v2}: +1 -1 lines"))
    );
    let restored = stdout(&agentvfs(
        &server,
        &["restore", "/n.md", &v1, "--if-version", &v2],
        b"",
    ));
    assert!(
        restored.starts_with(&format!("restored /n.md to version {v1} as version ")),
        "{restored}"
    );
    assert_eq!(
        stdout(&agentvfs(&server, &["cat", "/n.md"], b"")),
        "one\ntwo\n"
    );
    let stale = agentvfs(
        &server,
        &["restore", "/n.md", &v1, "--if-version", &v2],
        b"",
    );
    assert!(String::from_utf8_lossy(&stale.stderr).contains("[CONFLICT]"));
    let watched = stdout(&agentvfs(
        &server,
        &["watch", "/", "--from-start", "--once", "--cursors"],
        b"",
    ));
    let changes: Vec<&str> = watched.lines().collect();
    assert_eq!(changes.len(), 3, "{watched}");
    assert!(changes[0].contains("  created   /n.md  v"), "{watched}");
    assert!(changes[2].contains(" restore by local  c1."), "{watched}");
    let after_first = changes[0].rsplit("  ").next().unwrap();
    let rest = stdout(&agentvfs(
        &server,
        &["watch", "/", "--cursor", after_first, "--once"],
        b"",
    ));
    assert_eq!(rest.lines().count(), 2, "{rest}");
}
