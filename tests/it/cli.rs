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
        "     1\thello\n     2\tworld\n"
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
        moved.starts_with("moved /docs/a.txt to /archive/a.txt (1 file, version "),
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

/// Runs the binary with `args` only (no `--addr` added), returning its
/// output.
fn agentvfs_raw(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .args(args)
        .env_remove("AGENTVFS_ADDR")
        .env_remove("AGENTVFS_TOKEN")
        .env_remove("AGENTVFS_SESSION")
        .output()
        .expect("run agentvfs")
}

/// The exit status and the text of stdout and stderr.
fn ended(out: &Output) -> (Option<i32>, String, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `cat -n` numbers like cat -n and ends as the file does; an empty or
/// blank file prints its bytes, not the sentence the Read call gives a model.
#[tokio::test]
async fn cat_prints_files_as_they_are() {
    let server = Server::start();
    for (path, content) in [
        ("/a.txt", "hello\nworld\n"),
        ("/b.txt", "no\nfinal newline"),
        ("/empty.txt", ""),
        ("/blank.txt", "  \n\t\n"),
    ] {
        stdout(&agentvfs(&server, &["put", path], content.as_bytes()));
    }
    let cat = |args: &[&str]| stdout(&agentvfs(&server, args, b""));
    assert_eq!(
        cat(&["cat", "-n", "/a.txt"]),
        "     1\thello\n     2\tworld\n"
    );
    assert_eq!(
        cat(&["cat", "-n", "/b.txt"]),
        "     1\tno\n     2\tfinal newline"
    );
    assert_eq!(cat(&["cat", "/empty.txt"]), "");
    assert_eq!(cat(&["cat", "-n", "/empty.txt"]), "");
    assert_eq!(cat(&["cat", "/blank.txt"]), "  \n\t\n");
    assert_eq!(
        cat(&["cat", "-n", "/blank.txt"]),
        "     1\t  \n     2\t\t\n"
    );
}

/// grep exits 0 when a line matched, 1 when none did and 2 on an error,
/// like grep and rg; a bad regex is reported with the user's pattern; a
/// search a budget cut short exits 2 naming the flag to raise, unless
/// --allow-partial.
#[tokio::test]
async fn grep_exit_status_is_rg_s() {
    let server = Server::start();
    for name in ["a", "b", "c", "d"] {
        stdout(&agentvfs(
            &server,
            &["put", &format!("/s/{name}.txt")],
            b"x marks\n",
        ));
    }
    let grep = |args: &[&str]| ended(&agentvfs(&server, args, b""));
    assert_eq!(grep(&["grep", "marks", "/s"]).0, Some(0));
    let (status, out, _) = grep(&["grep", "nowhere", "/s"]);
    assert_eq!((status, out.as_str()), (Some(1), ""));
    let (status, _, err) = grep(&["grep", "x", "/missing"]);
    assert_eq!(status, Some(2), "{err}");
    let (status, _, err) = grep(&["grep", "a(b", "/s"]);
    assert_eq!(status, Some(2), "{err}");
    assert!(
        err.contains("a(b") && err.contains("unclosed group"),
        "{err}"
    );
    assert!(!err.contains("(?"), "{err}");
    let (status, _, err) = grep(&["grep", "x", "/s", "--max-visited", "2"]);
    assert_eq!(status, Some(2), "{err}");
    assert!(err.contains("raise it with --max-visited"), "{err}");
    assert!(!err.contains("ABORTED_REASON"), "{err}");
    let partial = grep(&["grep", "x", "/s", "--max-visited", "2", "--allow-partial"]);
    assert_ne!(partial.0, Some(2), "{}", partial.2);
}

/// stat prints one readable field per line, or JSON; ls of a file shows
/// the file and ls alone lists `/`; rm's refusal names the -r flag and
/// counts are singular for one.
#[tokio::test]
async fn stat_ls_and_rm_read_like_the_tools() {
    let server = Server::start();
    stdout(&agentvfs(&server, &["put", "/docs/a.txt"], b"hello\n"));
    let stat = stdout(&agentvfs(&server, &["stat", "/docs/a.txt"], b""));
    assert!(
        stat.starts_with("path: /docs/a.txt\ntype: file\nsize: 6 bytes\n"),
        "{stat}"
    );
    assert!(!stat.contains('{'), "{stat}");
    let json = stdout(&agentvfs(&server, &["stat", "--json", "/docs/a.txt"], b""));
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (json["type"].as_str(), json["size"].as_u64()),
        (Some("file"), Some(6))
    );

    let one = stdout(&agentvfs(&server, &["ls", "/docs/a.txt"], b""));
    assert_eq!(one, "         6  /docs/a.txt\n");
    assert!(stdout(&agentvfs(&server, &["ls"], b"")).contains("/docs/\n"));

    let refused = failure(&agentvfs(&server, &["rm", "/docs"], b""));
    assert!(refused.contains("pass -r "), "{refused}");
    assert_eq!(
        stdout(&agentvfs(&server, &["rm", "/docs/a.txt"], b"")),
        "deleted /docs/a.txt (1 file)\n"
    );
    let put = stdout(&agentvfs(&server, &["put", "/one.txt"], b"x"));
    assert!(put.starts_with("/one.txt (1 byte, version "), "{put}");
}

/// --json prints one JSON object per record on ls, stat, log, watch,
/// branch list and grep.
#[tokio::test]
async fn record_verbs_print_json() {
    let server = Server::start();
    stdout(&agentvfs(&server, &["put", "/docs/a.txt"], b"hello\n"));
    stdout(&agentvfs(
        &server,
        &["branch", "create", "b1", "/docs"],
        b"",
    ));
    for (args, key) in [
        (&["ls", "--json", "/docs"][..], "path"),
        (&["stat", "--json", "/docs/a.txt"], "version"),
        (&["log", "--json", "/docs/a.txt"], "current"),
        (&["watch", "--json", "--from-start", "--once"], "cursor"),
        (&["branch", "list", "--json"], "root"),
        (&["grep", "--json", "hello", "/docs"], "line_number"),
    ] {
        let out = stdout(&agentvfs(&server, args, b""));
        assert!(!out.is_empty(), "{args:?} printed nothing");
        for line in out.lines() {
            let record: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{args:?}: {e}: {line}"));
            assert!(record.get(key).is_some(), "{args:?}: no {key} in {line}");
        }
    }
}

/// A watch the server's shutdown ends says so and names the cursor to
/// resume from once, as the flag that takes it.
#[tokio::test]
async fn watch_across_shutdown_names_the_cursor_once() {
    use std::io::BufRead;
    let server = Server::start();
    stdout(&agentvfs(&server, &["put", "/w.txt"], b"x"));
    let mut watch = Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .args(["--addr", &server.url, "watch", "/", "--from-start"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let seen = lines.next().unwrap().unwrap();
    assert!(seen.contains("/w.txt"), "{seen}");
    let pid = server.pid().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = watch.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("shutting down"), "{err}");
    assert_eq!(err.matches("cursor").count(), 1, "{err}");
    assert!(err.contains("resume with --cursor "), "{err}");
}

/// An upload over the server's file size limit names the file's size and
/// the setting, max_file_bytes.
#[tokio::test]
async fn oversized_put_names_size_and_setting() {
    let config = "max_file_bytes = 1000\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n";
    let server = Server::start_with(Some(config), &[]);
    let err = failure(&agentvfs(&server, &["put", "/big"], &[b'x'; 2500]));
    assert!(err.contains("2500 bytes"), "{err}");
    assert!(err.contains("max_file_bytes of 1000 bytes"), "{err}");
}

/// --addr takes grpcurl's host:port; a refused connection says so.
#[tokio::test]
async fn addr_without_scheme_and_refused_connection() {
    let server = Server::start();
    let host_port = server.url.trim_start_matches("http://");
    let (status, _, err) = ended(&agentvfs_raw(&["ls", "--addr", host_port, "/"]));
    assert_eq!(status, Some(0), "{err}");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (status, _, err) = ended(&agentvfs_raw(&[
        "--addr",
        &format!("127.0.0.1:{port}"),
        "ls",
    ]));
    assert_eq!(status, Some(1));
    assert!(err.contains("connection refused"), "{err}");
}

/// `serve --help` and `mcp --help` list only their own flags; a client flag
/// given to serve, before or after it, is refused; the top-level help
/// names the object tier.
#[test]
fn serve_and_mcp_take_only_their_flags() {
    let (_, help, _) = ended(&agentvfs_raw(&["serve", "--help"]));
    assert!(help.contains("--listen"), "{help}");
    for flag in ["--addr", "--token", "--session", "--label", "--branch"] {
        assert!(!help.contains(flag), "serve --help lists {flag}: {help}");
    }
    let (_, help, _) = ended(&agentvfs_raw(&["mcp", "--help"]));
    assert!(
        help.contains("--token") && !help.contains("--addr"),
        "{help}"
    );
    for args in [
        &["serve", "--addr", "127.0.0.1:1"][..],
        &["--token", "t", "serve"],
        &["mcp", "--addr", "127.0.0.1:1"],
    ] {
        let (status, _, err) = ended(&agentvfs_raw(args));
        assert_eq!(status, Some(2), "{args:?}: {err}");
        assert!(
            err.contains("is a flag of the client verbs"),
            "{args:?}: {err}"
        );
    }
    let (_, help, _) = ended(&agentvfs_raw(&["--help"]));
    assert!(help.contains("Object (an S3-compatible bucket"), "{help}");
}

/// `config check` validates a file without starting: the example file
/// passes, a bad one is refused with its line.
#[test]
fn config_check_validates_without_starting() {
    let data = tempfile::tempdir().unwrap();
    let check = |file: &str| {
        Command::new(env!("CARGO_BIN_EXE_agentvfs"))
            .args(["config", "check", file])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("XDG_DATA_HOME", data.path())
            .output()
            .unwrap()
    };
    let (status, out, err) = ended(&check("agentvfs.example.toml"));
    assert_eq!(status, Some(0), "{err}");
    assert!(out.contains("valid"), "{out}");
    let bad = data.path().join("bad.toml");
    std::fs::write(&bad, "[[mount]]\nprefix = \"/\"\ntier = \"floppy\"\n").unwrap();
    let (status, _, err) = ended(&check(bad.to_str().unwrap()));
    assert_eq!(status, Some(1));
    assert!(err.contains("bad.toml:3: unknown tier"), "{err}");
    let empty = data.path().join("empty.toml");
    std::fs::write(&empty, "listen = \"127.0.0.1:1\"\n").unwrap();
    let (status, _, err) = ended(&check(empty.to_str().unwrap()));
    assert_eq!(status, Some(1));
    assert!(err.contains("no [[mount]]"), "{err}");
    // Every per-principal limit is a share of its server-wide pair (and a
    // session's subscriptions of its principal's): one set above its pair
    // is refused at its line, naming both keys.
    let mount = "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n";
    for (section, share, whole, small) in [
        ("mcp", "max_sessions_per_principal", "max_sessions", 4),
        (
            "mcp",
            "max_subscriptions_per_session",
            "max_subscriptions_per_principal",
            4,
        ),
        (
            "limits",
            "max_searches_per_principal",
            "max_concurrent_searches",
            4,
        ),
        (
            "limits",
            "max_connections_per_principal",
            "max_connections",
            4,
        ),
        (
            "limits",
            "memory_bytes_per_principal",
            "memory_bytes",
            1 << 20,
        ),
        (
            "search",
            "index_bytes_per_principal",
            "index_bytes",
            1 << 20,
        ),
    ] {
        let pair = data.path().join("pair.toml");
        let big = 2 * small;
        let text = format!("[{section}]\n{whole} = {small}\n{share} = {big}\n{mount}");
        std::fs::write(&pair, text).unwrap();
        let (status, _, err) = ended(&check(pair.to_str().unwrap()));
        assert_eq!(status, Some(1), "{share}: {err}");
        let expected =
            format!("pair.toml:3: {section} {share} ({big}) must not exceed {whole} ({small})");
        assert!(err.contains(&expected), "{share}: {err}");
        // Its pair alone, below the share's default, caps the default.
        let text = format!("[{section}]\n{whole} = {small}\n{mount}");
        std::fs::write(&pair, text).unwrap();
        let (status, _, err) = ended(&check(pair.to_str().unwrap()));
        assert_eq!(status, Some(0), "{whole} = {small}: {err}");
    }
}

/// `completions SHELL` prints a completion script for bash, zsh and fish.
#[test]
fn completions_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let (status, script, err) = ended(&agentvfs_raw(&["completions", shell]));
        assert_eq!(status, Some(0), "{shell}: {err}");
        assert!(
            script.contains("agentvfs") && script.contains("max-visited"),
            "{shell}"
        );
    }
}
