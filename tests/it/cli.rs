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
