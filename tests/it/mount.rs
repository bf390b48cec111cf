//! `agentvfs mount` through the kernel's real FUSE (docs/mount.md): the
//! real server, the real `agentvfs mount` process, and shell tools and
//! system calls on the mounted directory. Every test prints why and
//! passes when /dev/fuse is absent (a container without FUSE).

use crate::util::Server;
use agentvfs::pb;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::Request;

const OWNER: &str = "owner-token-0001";
const AGENT: &str = "agent-token-0001";

/// Three tiers and two principals: the owner may do anything; the agent
/// may change `team/` and only read `shared/`, on the Store and on the
/// Filesystem tier, and sees nothing else.
const CONFIG: &str = r#"
[[mount]]
prefix = "/"
tier = "state"

[[mount]]
prefix = "/memories"
tier = "store"

[[mount]]
prefix = "/workspace"
tier = "filesystem"
root = "."

[[principal]]
name = "owner"
token = "owner-token-0001"
grants = [{ prefix = "/", ops = ["list", "file", "read_binary", "read_file", "read_re", "write", "delete"] }]

[[principal]]
name = "agent"
token = "agent-token-0001"
grants = [
  { prefix = "/memories/team/", ops = ["list", "file", "read_binary", "read_file", "read_re", "write", "delete"] },
  { prefix = "/memories/shared/", ops = ["list", "file", "read_binary", "read_file"] },
  { prefix = "/workspace/team/", ops = ["list", "file", "read_binary", "read_file", "read_re", "write", "delete"] },
  { prefix = "/workspace/shared/", ops = ["list", "file", "read_binary", "read_file"] },
]
"#;

/// False, with the reason printed, when the kernel offers no FUSE here.
fn fuse_available() -> bool {
    let there = Path::new("/dev/fuse").exists();
    if !there {
        eprintln!("mount test skipped: /dev/fuse is absent (no FUSE in this container)");
    }
    there
}

/// A running `agentvfs mount`, ended (and checked gone from
/// /proc/mounts) on drop.
struct Mounted {
    child: Child,
    dir: tempfile::TempDir,
    logs: Arc<Mutex<String>>,
}

/// True when `dir` is a mount point in /proc/mounts.
fn mounted_at(dir: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let dir = dir.to_str().unwrap();
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(dir))
}

/// `agentvfs --addr URL [--token T] mount EXTRA... LOGICAL DIR`: the
/// mount once it printed its line, or its exit status and stderr.
fn try_mount(
    server: &Server,
    token: Option<&str>,
    extra: &[&str],
    logical: &str,
) -> Result<Mounted, (Option<i32>, String)> {
    try_mount_in(tempfile::tempdir().unwrap(), server, token, extra, logical)
}

/// [`try_mount`] on `dir`/m (created unless there).
fn try_mount_in(
    dir: tempfile::TempDir,
    server: &Server,
    token: Option<&str>,
    extra: &[&str],
    logical: &str,
) -> Result<Mounted, (Option<i32>, String)> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentvfs"));
    cmd.args(["--addr", &server.url]);
    if let Some(token) = token {
        cmd.args(["--token", token]);
    }
    cmd.arg("mount")
        .args(["--cache-dir", dir.path().to_str().unwrap()])
        .args(extra)
        .arg(logical)
        .arg(dir.path().join("m"))
        .env(
            "RUST_LOG",
            std::env::var("AGENTVFS_MOUNT_LOG").unwrap_or("agentvfs=info".into()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let _ = std::fs::create_dir(dir.path().join("m"));
    let mut child = cmd.spawn().expect("spawn agentvfs mount");
    let logs: Arc<Mutex<String>> = Arc::default();
    let stderr = child.stderr.take().unwrap();
    let sink = logs.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut logs = sink.lock().unwrap();
            logs.push_str(&line);
            logs.push('\n');
        }
    });
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if !line.starts_with("agentvfs: mounted ") {
        let status = child.wait().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        return Err((status.code(), logs.lock().unwrap().clone()));
    }
    Ok(Mounted { child, dir, logs })
}

/// A mount that must start.
fn mount(server: &Server, token: &str, extra: &[&str], logical: &str) -> Mounted {
    try_mount(server, Some(token), extra, logical)
        .unwrap_or_else(|(code, err)| panic!("mount failed ({code:?}): {err}"))
}

impl Mounted {
    /// The mounted directory.
    fn path(&self) -> PathBuf {
        self.dir.path().join("m")
    }

    /// What the mount logged.
    fn logs(&self) -> String {
        self.logs.lock().unwrap().clone()
    }

    /// SIGTERM, then its exit status, within 10 s.
    fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.exited()
    }

    /// Its exit status, once it exits within 10 s.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() && self.stop().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let path = self.path();
        if mounted_at(&path) {
            let _ = Command::new("fusermount3").arg("-uz").arg(&path).status();
            if !std::thread::panicking() {
                panic!("{} still mounted after the mount exited", path.display());
            }
        }
    }
}

/// What differs by nature between a run in the mount and one in a local
/// directory: git's index keeps inode numbers and times, a clone records
/// the absolute path it came from, and git's config records whether the
/// directory takes symbolic links (the mount refuses them, docs/mount.md).
fn differs_by_nature(rel: &str) -> bool {
    rel.ends_with(".git/index") || rel.ends_with(".git/config") || rel.contains("clone/.git/logs")
}

/// Every file and directory under `root`: relative path → (content, or
/// `None` for a directory; executable bit), but for what
/// [`differs_by_nature`].
fn tree(root: &Path) -> BTreeMap<String, (Option<Vec<u8>>, bool)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            if differs_by_nature(&rel) {
                continue;
            }
            let meta = std::fs::metadata(&path).unwrap();
            let exec = meta.permissions().mode() & 0o100 != 0;
            if meta.is_dir() {
                stack.push(path);
                out.insert(rel, (None, exec));
            } else {
                out.insert(rel, (Some(std::fs::read(&path).unwrap()), exec));
            }
        }
    }
    out
}

/// The differences between two trees, one line each (at most 20).
fn differences(
    a: &BTreeMap<String, (Option<Vec<u8>>, bool)>,
    b: &BTreeMap<String, (Option<Vec<u8>>, bool)>,
) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| match (a.get(k), b.get(k)) {
            (Some(x), Some(y)) if x.1 != y.1 => format!("{k}: executable {} vs {}", x.1, y.1),
            (Some(_), Some(_)) => format!("{k}: content differs"),
            (Some(_), None) => format!("{k}: only in the mount"),
            _ => format!("{k}: only in the local directory"),
        })
        .take(20)
        .collect()
}

/// The workload of the differential test: git, a build script with the
/// executable bit, tar, pytest and grep, printing what each reports.
const WORKLOAD: &str = r#"
set -e
export GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 PYTHONDONTWRITEBYTECODE=1
mkdir -p proj/src proj/tests proj/.git-hooks-unused
printf 'def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a  # needle\n' > proj/src/calc.py
printf 'import sys, os\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))\nimport calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n\n\ndef test_neg():\n    assert calc.neg(2) == -2\n\n\ndef test_fails():\n    assert calc.add(1, 1) == 3\n' > proj/tests/test_calc.py
printf 'needle one\nhay\nneedle two\n' > proj/src/notes.txt
printf '#!/bin/sh\nset -e\nmkdir -p out\ncat src/calc.py src/notes.txt > out/bundle.txt\necho built\n' > proj/build.sh
chmod +x proj/build.sh
cd proj
git init -q -b main .
git add -A
git commit -q -m init
./build.sh
printf '\n# changed\n' >> src/calc.py
git status --porcelain
git add -A
git commit -q -m second
git fsck --full --no-progress
git log --format='%H %s'
cd ..
git clone -q proj clone
git -C clone status --porcelain
git -C clone log --format=%H
tar cf proj.tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner proj/src proj/tests proj/build.sh
mkdir untar
tar xf proj.tar -C untar
cmp proj/src/calc.py untar/proj/src/calc.py
(cd proj && python3 -m pytest -q -p no:cacheprovider tests 2>&1 | grep -Eo '[0-9]+ (passed|failed)' || true)
grep -rc needle proj/src | sort
"#;

/// Runs the workload in `dir`; its stdout.
fn run_workload(dir: &Path) -> String {
    let out = Command::new("bash")
        .args(["-c", WORKLOAD])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "workload failed in {}: {}\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Matching lines of `pattern` under `path`, as the Grep RPC counts them.
async fn grep_count(server: &Server, path: &str, pattern: &str) -> usize {
    let req = as_owner(pb::GrepRequest {
        pattern: pattern.into(),
        path: path.into(),
        ..Default::default()
    });
    let (matches, _) = crate::util::grep_all(&mut server.fs().await, req)
        .await
        .unwrap();
    matches.iter().filter(|m| !m.is_context).count()
}

fn as_owner<T>(msg: T) -> Request<T> {
    crate::util::as_token(msg, OWNER)
}

/// Writes `content` to `path` as the owner; the new version.
async fn put(server: &Server, path: &str, content: &str) -> u64 {
    let req = as_owner(pb::WriteRequest {
        path: path.into(),
        content: content.into(),
        ..Default::default()
    });
    let written = server.fs().await.write(req).await;
    written
        .unwrap_or_else(|s| panic!("write {path}: {s:?}"))
        .into_inner()
        .version
}

/// The bytes of `path` as the owner reads them over gRPC.
async fn get(server: &Server, path: &str) -> Vec<u8> {
    let req = as_owner(pb::ReadBytesRequest {
        path: path.into(),
        version: None,
    });
    let mut stream = server
        .fs()
        .await
        .read_bytes(req)
        .await
        .unwrap()
        .into_inner();
    let mut out = Vec::new();
    while let Some(chunk) = stream.message().await.unwrap() {
        out.extend(chunk.data);
    }
    out
}

/// The retained versions of `path`.
async fn versions(server: &Server, path: &str) -> usize {
    let req = as_owner(pb::ListVersionsRequest { path: path.into() });
    let listed = server.fs().await.list_versions(req).await.unwrap();
    listed.into_inner().versions.len()
}

/// git, tar, pytest, a build script and grep give the same trees, bytes
/// and executable bits, and print the same, in a Store mount, in a
/// Filesystem mount and in a local directory; grep's counts are the Grep
/// RPC's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_match_a_local_directory() {
    if !fuse_available() {
        return;
    }
    let server = Server::start_with(Some(CONFIG), &[]);
    let local = tempfile::tempdir().unwrap();
    let expected = run_workload(local.path());
    assert!(
        expected.contains("2 passed") && expected.contains("1 failed"),
        "{expected}"
    );
    let expected_tree = tree(local.path());
    // `grep` stands in for rg, which this machine may not have.
    let local_needles: usize = expected
        .lines()
        .filter_map(|l| {
            l.strip_prefix("proj/src/")?
                .split_once(':')?
                .1
                .parse::<usize>()
                .ok()
        })
        .sum();
    for logical in ["/memories/w", "/workspace/w"] {
        put(&server, &format!("{logical}/.keep"), "").await;
        let m = mount(&server, OWNER, &[], logical);
        let started = Instant::now();
        std::fs::remove_file(m.path().join(".keep")).unwrap();
        let got = tokio::task::block_in_place(|| run_workload(&m.path()));
        eprintln!("workload on {logical}: {:?}", started.elapsed());
        assert_eq!(
            got,
            expected,
            "output differs on {logical}; log: {}",
            m.logs()
        );
        let diff = differences(&tree(&m.path()), &expected_tree);
        assert!(diff.is_empty(), "{logical} differs from local: {diff:#?}");
        let counted = grep_count(&server, &format!("{logical}/proj/src"), "needle").await;
        assert_eq!(counted, local_needles, "Grep RPC vs grep on {logical}");
    }
}

/// Polls until `path` on the mount has `want`'s size (stat, which the
/// kernel answers from its cache while the TTL lasts) and reads `want`;
/// how long it took.
fn visible_within(path: &Path, want: &[u8], limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        let size = std::fs::metadata(path).map(|m| m.len()).ok();
        if size == Some(want.len() as u64) && std::fs::read(path).ok().as_deref() == Some(want) {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// A gRPC Write shows on the mount within 1 s (Watch invalidations, not
/// only the TTL), even over a file the kernel caches; a `cp` onto the
/// mount is one new version and one Watch event, readable over gRPC at
/// once, and carries the mount's label.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_surface_agrees() {
    if !fuse_available() {
        return;
    }
    let server = Server::start_with(Some(CONFIG), &[]);
    put(&server, "/memories/s/a.txt", "one").await;
    let m = mount(&server, OWNER, &["--label", "turn-1"], "/memories/s");
    let a = m.path().join("a.txt");
    assert_eq!(std::fs::read(&a).unwrap(), b"one");
    let mut latencies = Vec::new();
    for round in 0..5 {
        let content = format!("round {round}{}", ".".repeat(round));
        put(&server, "/memories/s/a.txt", &content).await;
        let took = tokio::task::block_in_place(|| {
            visible_within(&a, content.as_bytes(), Duration::from_secs(1))
        });
        latencies.push(took.unwrap_or_else(|| panic!("round {round} not visible within 1 s")));
    }
    eprintln!("gRPC write → visible on the mount: {latencies:?}");
    // Watch invalidations, not the 1 s TTL, make it typically fast.
    latencies.sort();
    assert!(
        latencies[2] < Duration::from_millis(250),
        "median {:?}: {latencies:?}",
        latencies[2]
    );
    // A deleted file leaves at once, not when its name's TTL ends.
    assert!(a.exists());
    let delete = as_owner(pb::DeleteRequest {
        path: "/memories/s/a.txt".into(),
        ..Default::default()
    });
    server.fs().await.delete(delete).await.unwrap();
    let started = Instant::now();
    while a.exists() && started.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(2));
    }
    eprintln!("gRPC delete → gone from the mount: {:?}", started.elapsed());
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
    // A new file shows too, in a new directory, though the kernel has
    // just been told (and caches for its TTL) that neither exists.
    for new in ["new.txt", "sub/deeper/new.txt"] {
        assert!(!m.path().join(new).exists());
        put(&server, &format!("/memories/s/{new}"), "fresh").await;
        let took = tokio::task::block_in_place(|| {
            visible_within(&m.path().join(new), b"fresh", Duration::from_secs(1))
        });
        let took = took.unwrap_or_else(|| panic!("{new} did not show within 1 s"));
        eprintln!("gRPC create of {new} → visible on the mount: {took:?}");
        assert!(took < Duration::from_millis(250), "{new}: {took:?}");
    }

    let mut watch = watch_from_now(&server, "/memories/s").await;
    let source = tempfile::NamedTempFile::new().unwrap();
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(source.path(), &big).unwrap();
    let status = Command::new("cp")
        .arg(source.path())
        .arg(m.path().join("copied.bin"))
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(get(&server, "/memories/s/copied.bin").await, big);
    assert_eq!(versions(&server, "/memories/s/copied.bin").await, 1);
    let events = settled_events(&mut watch).await;
    assert_eq!(events.len(), 1, "one cp, one event: {events:?}");
    assert_eq!(events[0].path, "/memories/s/copied.bin");
    assert_eq!(events[0].principal, "owner");
    assert_eq!(events[0].label, "turn-1");

    // A directory replaced by a file elsewhere shows as the file, though
    // the mount answers a directory's attributes itself.
    put(&server, "/memories/s/kind/inner.txt", "in").await;
    let kind = m.path().join("kind");
    assert!(std::fs::metadata(&kind).unwrap().is_dir());
    let delete = as_owner(pb::DeleteRequest {
        path: "/memories/s/kind".into(),
        recursive: true,
        ..Default::default()
    });
    server.fs().await.delete(delete).await.unwrap();
    put(&server, "/memories/s/kind", "now a file").await;
    let took = tokio::task::block_in_place(|| {
        visible_within(&kind, b"now a file", Duration::from_secs(1))
    });
    assert!(
        took.is_some(),
        "the directory turned file did not show within 1 s"
    );
    assert!(std::fs::metadata(&kind).unwrap().is_file());
}

/// A Watch of `path` from now, as the owner.
async fn watch_from_now(server: &Server, path: &str) -> tonic::Streaming<pb::WatchResponse> {
    let req = as_owner(pb::WatchRequest {
        path: path.into(),
        from_now: true,
        ..Default::default()
    });
    server.fs().await.watch(req).await.unwrap().into_inner()
}

/// The events `watch` sends until it has sent one (within 5 s) and then
/// nothing more for 500 ms.
async fn settled_events(watch: &mut tonic::Streaming<pb::WatchResponse>) -> Vec<pb::ChangeEvent> {
    let mut events = Vec::new();
    let started = Instant::now();
    loop {
        let wait = match events.is_empty() {
            true => Duration::from_secs(5).saturating_sub(started.elapsed()),
            false => Duration::from_millis(500),
        };
        match tokio::time::timeout(wait, watch.message()).await {
            Ok(Ok(Some(message))) => events.extend(message.events),
            _ => return events,
        }
    }
}

/// A writer in a process of its own: opens `path` (O_RDWR, or O_WRONLY
/// and O_TRUNC), writes `data` at 0, says so, waits for a line on stdin,
/// then ends with `fsync` and `close` (or `close` alone) and prints the
/// errno of the first that failed, or `ok`. A process of its own, since
/// any fork of this multi-threaded test binary closes a copy of each of
/// its descriptors, and every close is a flush, so a commit.
const WRITER: &str = r#"
import os, sys
path, mode, data, end = sys.argv[1:5]
flags = os.O_RDWR if mode == "rdwr" else os.O_WRONLY | os.O_TRUNC
fd = os.open(path, flags)
os.pwrite(fd, data.encode(), 0)
print("written", flush=True)
sys.stdin.readline()
try:
    if end == "fsync":
        os.fsync(fd)
    os.close(fd)
    print("ok", flush=True)
except OSError as e:
    print(e.errno, flush=True)
"#;

/// Runs [`WRITER`] on `path`, calling `meanwhile` between its write and
/// its end; what it printed last.
async fn write_around<F: std::future::Future<Output = ()>>(
    path: &Path,
    args: [&str; 3],
    meanwhile: F,
) -> String {
    let mut child = Command::new("python3")
        .args(["-c", WRITER])
        .arg(path)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "written");
    meanwhile.await;
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"go\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    child.wait().unwrap();
    line.trim().to_owned()
}

/// A close (fsync, close) of a file someone else changed since it was
/// opened fails with EIO and keeps their content, and the log names both
/// versions; with --on-conflict overwrite the last writer wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_close_fails_with_eio() {
    if !fuse_available() {
        return;
    }
    let server = Server::start_with(Some(CONFIG), &[]);
    let opened_at = put(&server, "/memories/c/f.txt", "base").await;
    let m = mount(&server, OWNER, &[], "/memories/c");
    let f = m.path().join("f.txt");
    let mut theirs = 0;
    let fsync = write_around(&f, ["rdwr", "mine", "fsync"], async {
        theirs = put(&server, "/memories/c/f.txt", "theirs").await;
    })
    .await;
    assert_eq!(fsync, libc::EIO.to_string(), "fsync: {}", m.logs());
    assert_eq!(get(&server, "/memories/c/f.txt").await, b"theirs");
    let logs = m.logs();
    assert!(
        logs.contains(&format!(
            "conflict on /memories/c/f.txt: opened at version {opened_at}, the server has version {theirs}"
        )),
        "{logs}"
    );
    // close(2) itself reports it.
    let close = write_around(&f, ["rdwr", "again", "close"], async {
        put(&server, "/memories/c/f.txt", "theirs again").await;
    })
    .await;
    assert_eq!(close, libc::EIO.to_string(), "close: {}", m.logs());
    assert_eq!(get(&server, "/memories/c/f.txt").await, b"theirs again");

    let last = mount(
        &server,
        OWNER,
        &["--on-conflict", "overwrite"],
        "/memories/c",
    );
    let f = last.path().join("f.txt");
    let overwrite = write_around(&f, ["trunc", "last writer", "fsync"], async {
        put(&server, "/memories/c/f.txt", "overwritten").await;
    })
    .await;
    assert_eq!(overwrite, "ok");
    assert_eq!(get(&server, "/memories/c/f.txt").await, b"last writer");
}

/// The agent's grants hold on Store and Filesystem mounts: what it may
/// not see is absent, a write under a read-only grant fails and changes
/// nothing, its own writes carry its name; `--read-only` refuses every
/// change; a path it may not see cannot be mounted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_hold_on_the_mount() {
    if !fuse_available() {
        return;
    }
    let server = Server::start_with(Some(CONFIG), &[]);
    for tier in ["/memories", "/workspace"] {
        put(&server, &format!("{tier}/secret/s.txt"), "secret").await;
        put(&server, &format!("{tier}/shared/r.txt"), "read me").await;
        put(&server, &format!("{tier}/team/t.txt"), "team").await;
        let shared = mount(&server, AGENT, &[], &format!("{tier}/shared"));
        let r = shared.path().join("r.txt");
        assert_eq!(std::fs::read(&r).unwrap(), b"read me");
        let err = std::fs::write(&r, "changed").unwrap_err();
        assert!(
            matches!(err.raw_os_error(), Some(libc::EACCES | libc::EROFS)),
            "{tier}: write under a read-only grant: {err}"
        );
        let err = std::fs::write(shared.path().join("new.txt"), "x").unwrap_err();
        assert!(
            matches!(err.raw_os_error(), Some(libc::EACCES | libc::EROFS)),
            "{err}"
        );
        assert!(std::fs::remove_file(&r).is_err());
        assert_eq!(
            get(&server, &format!("{tier}/shared/r.txt")).await,
            b"read me"
        );
        assert!(!shared.path().join("new.txt").exists());

        let team = mount(&server, AGENT, &[], &format!("{tier}/team"));
        let mut watch = watch_from_now(&server, &format!("{tier}/team")).await;
        std::fs::write(team.path().join("mine.txt"), "agent's").unwrap();
        let mine = format!("{tier}/team/mine.txt");
        assert_eq!(get(&server, &mine).await, b"agent's");
        let events = settled_events(&mut watch).await;
        assert!(
            events.len() == 1 && events[0].path == mine && events[0].principal == "agent",
            "{tier}: {events:?}"
        );

        let (code, err) = try_mount(&server, Some(AGENT), &[], &format!("{tier}/secret"))
            .err()
            .unwrap_or_else(|| panic!("{tier}/secret mounted for the agent"));
        assert_eq!(code, Some(1));
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(&format!("{tier}/secret")), "{err}");

        let ro = mount(&server, OWNER, &["--read-only"], &format!("{tier}/team"));
        let err = std::fs::write(ro.path().join("t.txt"), "no").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
        let err = std::fs::create_dir(ro.path().join("d")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
        assert_eq!(std::fs::read(ro.path().join("t.txt")).unwrap(), b"team");
    }
}

/// Start-up refusals are one line naming the problem, exit status 1; an
/// unmount with fusermount3 ends the mount with status 0 and nothing left
/// in /proc/mounts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mount_refusals_and_unmount() {
    if !fuse_available() {
        return;
    }
    let server = Server::start_with(Some(CONFIG), &[]);
    put(&server, "/memories/u/f.txt", "x").await;
    for (token, path, says) in [
        (Some("wrong-token-0001"), "/memories/u", "access denied"),
        (Some(OWNER), "/memories/missing", "/memories/missing"),
        (Some(OWNER), "/memories/u/f.txt", "not a directory"),
    ] {
        let (code, err) = try_mount(&server, token, &[], path).err().expect("refused");
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{says:?} not in {err}");
    }
    let mut m = mount(&server, OWNER, &[], "/memories/u");
    let busy = Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .args([
            "--addr",
            &server.url,
            "--token",
            OWNER,
            "mount",
            "/memories/u",
        ])
        .arg(m.path())
        .output()
        .unwrap();
    assert_eq!(busy.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("busy"),
        "{busy:?}"
    );
    let unmounted = Command::new("fusermount3")
        .arg("-u")
        .arg(m.path())
        .status()
        .unwrap();
    assert!(unmounted.success());
    // The directory is mounted again at once: the first mount's exit must
    // not unmount the second.
    let dir = std::mem::replace(&mut m.dir, tempfile::tempdir().unwrap());
    let again = try_mount_in(dir, &server, Some(OWNER), &[], "/memories/u").unwrap();
    let status = m.exited().expect("the mount exits after an unmount");
    assert!(status.success(), "{status:?}: {}", m.logs());
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        mounted_at(&again.path()),
        "the first mount's exit unmounted the second"
    );
    assert_eq!(std::fs::read(again.path().join("f.txt")).unwrap(), b"x");
    drop(again);
    // And after SIGTERM.
    let mut m = mount(&server, OWNER, &[], "/memories/u");
    let status = m.stop().expect("the mount exits on SIGTERM");
    assert!(status.success(), "{status:?}");
    assert!(!mounted_at(&m.path()));
}

/// Thousands of seeded random operations (pwrite at random offsets,
/// truncate, pread, rename, unlink, mkdir, reopen) on a Store mount and on
/// a shadow local directory: every read and the final trees agree byte
/// for byte. `AGENTVFS_MOUNT_FSX_SEED` and `_OPS` replay or lengthen it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_operations_match_a_shadow_directory() {
    if !fuse_available() {
        return;
    }
    let seed: u64 = std::env::var("AGENTVFS_MOUNT_FSX_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(52);
    let ops: usize = std::env::var("AGENTVFS_MOUNT_FSX_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let server = Server::start_with(Some(CONFIG), &[]);
    put(&server, "/memories/fsx/.keep", "").await;
    let m = mount(&server, OWNER, &["--file-memory", "65536"], "/memories/fsx");
    std::fs::remove_file(m.path().join(".keep")).unwrap();
    let shadow = tempfile::tempdir().unwrap();
    let roots = [m.path(), shadow.path().to_path_buf()];
    let started = Instant::now();
    tokio::task::block_in_place(|| fsx(&roots, seed, ops));
    eprintln!(
        "fsx: {ops} operations (seed {seed}) in {:?}",
        started.elapsed()
    );
    let diff = differences(&tree(&roots[0]), &tree(&roots[1]));
    assert!(
        diff.is_empty(),
        "seed {seed}: the mount differs: {diff:#?}\n{}",
        m.logs()
    );
}

/// The random operations of [`random_operations_match_a_shadow_directory`],
/// each done on both roots with the same outcome.
fn fsx(roots: &[PathBuf; 2], seed: u64, ops: usize) {
    const NAMES: [&str; 6] = ["a", "b", "c", "d/e", "d/f", "g/h/i"];
    let mut rng = StdRng::seed_from_u64(seed);
    // Open handles on both sides, by name: (mount's, shadow's).
    let mut open: BTreeMap<&str, [std::fs::File; 2]> = BTreeMap::new();
    for step in 0..ops {
        let name = NAMES[rng.random_range(0..NAMES.len())];
        let paths = roots.clone().map(|r| r.join(name));
        let what = rng.random_range(0..100);
        let context = format!("seed {seed} step {step}: op {what} on {name}");
        match what {
            // Open (creating it), or write through the open handle.
            0..=34 => {
                if !open.contains_key(name) {
                    let files = paths.clone().map(|p| {
                        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                        std::fs::OpenOptions::new()
                            .read(true)
                            .write(true)
                            .create(true)
                            .truncate(false)
                            .open(&p)
                    });
                    let [a, b] = files;
                    match (a, b) {
                        (Ok(a), Ok(b)) => {
                            open.insert(name, [a, b]);
                        }
                        (a, b) => panic!("{context}: open: {a:?} vs {b:?}"),
                    }
                }
                let offset = rng.random_range(0..200_000u64);
                let len = rng.random_range(1..70_000usize);
                let byte = rng.random::<u8>();
                let data = vec![byte; len];
                for f in &open[name] {
                    f.write_all_at(&data, offset)
                        .unwrap_or_else(|e| panic!("{context}: {e}"));
                }
            }
            // Read back through the handle.
            35..=49 => {
                if let Some(files) = open.get(name) {
                    let offset = rng.random_range(0..250_000u64);
                    let len = rng.random_range(1..100_000usize);
                    let reads = files.each_ref().map(|f| {
                        let mut buf = vec![0; len];
                        let n = f.read_at(&mut buf, offset).unwrap();
                        buf.truncate(n);
                        buf
                    });
                    assert!(reads[0] == reads[1], "{context}: pread differs");
                }
            }
            // Truncate through the handle.
            50..=57 => {
                if let Some(files) = open.get(name) {
                    let len = rng.random_range(0..150_000u64);
                    for f in files {
                        f.set_len(len).unwrap_or_else(|e| panic!("{context}: {e}"));
                    }
                }
            }
            // Close (commit).
            58..=74 => close(&mut open, name, &context),
            // Read the whole file by path.
            // Read the whole file by path, when no handle holds uncommitted
            // writes (a close is a commit: docs/mount.md).
            75..=84 if !open.contains_key(name) => {
                let reads = paths
                    .clone()
                    .map(|p| std::fs::read(p).map_err(|e| e.kind()));
                assert!(reads[0] == reads[1], "{context}: read differs");
            }
            // Rename to another name (closing handles on both first).
            85..=91 => {
                let to = NAMES[rng.random_range(0..NAMES.len())];
                if to == name || to.starts_with(&format!("{name}/")) {
                    continue;
                }
                close(&mut open, name, &context);
                close(&mut open, to, &context);
                let results = roots.clone().map(|r| {
                    let target = r.join(to);
                    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                    std::fs::rename(r.join(name), target).map_err(|e| e.kind())
                });
                assert!(
                    results[0] == results[1],
                    "{context}: rename to {to}: {results:?}"
                );
            }
            // Unlink (open handles keep reading).
            92..=96 => {
                let results = paths
                    .clone()
                    .map(|p| std::fs::remove_file(p).map_err(|e| e.kind()));
                assert!(results[0] == results[1], "{context}: unlink: {results:?}");
                if let Some(files) = open.remove(name) {
                    let reads = files.each_ref().map(|f| {
                        let mut buf = vec![0; 4096];
                        let n = f.read_at(&mut buf, 0).unwrap();
                        buf.truncate(n);
                        buf
                    });
                    assert!(reads[0] == reads[1], "{context}: read after unlink differs");
                }
            }
            // mkdir of an empty directory.
            _ => {
                let dir = format!("empty{}", rng.random_range(0..3));
                let results = roots
                    .clone()
                    .map(|r| std::fs::create_dir(r.join(&dir)).map_err(|e| e.kind()));
                assert!(
                    results[0] == results[1],
                    "{context}: mkdir {dir}: {results:?}"
                );
            }
        }
    }
    for (_, files) in std::mem::take(&mut open) {
        for f in files {
            f.sync_all().unwrap();
        }
    }
}

/// Commits and closes the handles open on `name`, if any.
fn close(open: &mut BTreeMap<&str, [std::fs::File; 2]>, name: &str, context: &str) {
    if let Some(files) = open.remove(name) {
        for f in files {
            f.sync_all()
                .unwrap_or_else(|e| panic!("{context}: fsync: {e}"));
        }
    }
}

/// One operation on the mount, run on a thread of its own.
type Op = Box<dyn Fn() -> std::io::Result<()> + Send>;

/// A free loopback port, so a restarted server listens where the mount
/// connects.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `kill -9` of the server: no operation on the mount hangs (each fails
/// within 5 s, with EIO or ENOTCONN), and they work again once the server
/// is back on its address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_fails_operations_without_hanging() {
    if !fuse_available() {
        return;
    }
    let listen = format!("127.0.0.1:{}", free_port());
    let mut server = Server::start_with(Some(CONFIG), &["--listen", &listen]);
    put(&server, "/memories/k/f.txt", "before").await;
    let m = mount(&server, OWNER, &[], "/memories/k");
    assert_eq!(std::fs::read(m.path().join("f.txt")).unwrap(), b"before");
    server.kill();
    let root = m.path();
    let ops: Vec<(&str, Op)> = vec![
        (
            "create",
            Box::new({
                let p = root.join("new.txt");
                move || std::fs::write(&p, "x")
            }),
        ),
        (
            "stat",
            Box::new({
                let p = root.join("other.txt");
                move || std::fs::metadata(&p).map(|_| ())
            }),
        ),
        (
            "list",
            Box::new({
                let p = root.clone();
                move || std::fs::read_dir(&p).map(|_| ())
            }),
        ),
        (
            "read",
            Box::new({
                let p = root.join("f.txt");
                move || {
                    std::fs::File::open(&p)?
                        .read_to_end(&mut Vec::new())
                        .map(|_| ())
                }
            }),
        ),
    ];
    for (what, op) in ops {
        let started = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(op()));
        let result = rx
            .recv_timeout(Duration::from_secs(7))
            .unwrap_or_else(|_| panic!("{what} hung with the server dead"));
        let err = result.expect_err(what);
        assert!(
            matches!(err.raw_os_error(), Some(libc::EIO | libc::ENOTCONN)),
            "{what}: {err}"
        );
        eprintln!(
            "{what} with the server dead: {err} after {:?}",
            started.elapsed()
        );
    }
    server.crash_and_restart();
    let back = tokio::task::block_in_place(|| {
        visible_within(&m.path().join("f.txt"), b"before", Duration::from_secs(10))
    });
    assert!(back.is_some(), "reads do not work again: {}", m.logs());
    std::fs::write(m.path().join("after.txt"), "after").unwrap();
    assert_eq!(get(&server, "/memories/k/after.txt").await, b"after");
}

/// `--branch` mounts a branch: what the shell changes there lands in the
/// branch, not its base; `--session` mounts a State session's files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branch_and_session_mounts() {
    if !fuse_available() {
        return;
    }
    let server = Server::start_with(Some(CONFIG), &[]);
    put(&server, "/memories/proj/a.txt", "base").await;
    let fork = as_owner(pb::CreateBranchRequest {
        name: "try-1".into(),
        path: "/memories/proj".into(),
    });
    server.fs().await.create_branch(fork).await.unwrap();
    let m = mount(&server, OWNER, &["--branch", "try-1"], "/memories/proj");
    assert_eq!(std::fs::read(m.path().join("a.txt")).unwrap(), b"base");
    std::fs::write(m.path().join("a.txt"), "in the branch").unwrap();
    std::fs::write(m.path().join("b.txt"), "new").unwrap();
    assert_eq!(get(&server, "/memories/proj/a.txt").await, b"base");
    let mut in_branch = as_owner(pb::ReadBytesRequest {
        path: "/memories/proj/a.txt".into(),
        version: None,
    });
    in_branch
        .metadata_mut()
        .insert("x-agentvfs-branch", "try-1".parse().unwrap());
    let mut stream = server
        .fs()
        .await
        .read_bytes(in_branch)
        .await
        .unwrap()
        .into_inner();
    let mut data = Vec::new();
    while let Some(chunk) = stream.message().await.unwrap() {
        data.extend(chunk.data);
    }
    assert_eq!(data, b"in the branch");

    let mut seed = as_owner(pb::WriteRequest {
        path: "/scratch/s.txt".into(),
        content: "session's".into(),
        ..Default::default()
    });
    seed.metadata_mut()
        .insert("x-agentvfs-session", "s1".parse().unwrap());
    server.fs().await.write(seed).await.unwrap();
    let s = mount(&server, OWNER, &["--session", "s1"], "/scratch");
    assert_eq!(std::fs::read(s.path().join("s.txt")).unwrap(), b"session's");
    std::fs::write(s.path().join("t.txt"), "more").unwrap();
    let other = try_mount(&server, Some(OWNER), &["--session", "s2"], "/scratch");
    assert!(other.is_err(), "another session sees no /scratch");
}

/// The semantics table of docs/mount.md: empty directories, an unlinked
/// file read through its open handle, stable inode numbers (a rename
/// carries them), `statfs`, and the refusals (chown EPERM, symlink and
/// hard link EPERM, xattrs ENOTSUP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posix_semantics_of_the_table() {
    use std::os::unix::fs::MetadataExt;
    if !fuse_available() {
        return;
    }
    let server = Server::start_with(Some(CONFIG), &[]);
    put(&server, "/memories/p/f.txt", "kept open").await;
    let m = mount(&server, OWNER, &[], "/memories/p");
    let root = m.path();

    std::fs::create_dir(root.join("empty")).unwrap();
    assert!(root.join("empty").is_dir());
    let names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.contains(&"empty".to_owned()), "{names:?}");
    std::fs::write(root.join("empty/x"), "x").unwrap();
    let err = std::fs::remove_dir(root.join("empty")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTEMPTY), "{err}");
    std::fs::remove_file(root.join("empty/x")).unwrap();
    assert!(
        root.join("empty").is_dir(),
        "emptied through the mount, it stays"
    );
    std::fs::remove_dir(root.join("empty")).unwrap();
    assert!(!root.join("empty").exists());

    let f = root.join("f.txt");
    let ino = std::fs::metadata(&f).unwrap().ino();
    let open = std::fs::File::open(&f).unwrap();
    std::fs::rename(&f, root.join("g.txt")).unwrap();
    assert_eq!(std::fs::metadata(root.join("g.txt")).unwrap().ino(), ino);
    std::fs::remove_file(root.join("g.txt")).unwrap();
    let mut kept = String::new();
    std::io::Read::read_to_string(&mut &open, &mut kept).unwrap();
    assert_eq!(kept, "kept open");

    // Written, renamed while open, written again: one file, no conflict.
    let mut w = std::fs::File::create(root.join("tmp")).unwrap();
    std::io::Write::write_all(&mut w, b"first ").unwrap();
    std::fs::rename(root.join("tmp"), root.join("final")).unwrap();
    std::io::Write::write_all(&mut w, b"second").unwrap();
    w.sync_all().unwrap();
    drop(w);
    assert_eq!(get(&server, "/memories/p/final").await, b"first second");
    // The same inside a directory renamed while the file is open.
    std::fs::create_dir(root.join("dir")).unwrap();
    let mut w = std::fs::File::create(root.join("dir/f")).unwrap();
    std::io::Write::write_all(&mut w, b"before ").unwrap();
    w.sync_all().unwrap(); // on the server: the rename is a Move
    std::fs::rename(root.join("dir"), root.join("moved")).unwrap();
    std::io::Write::write_all(&mut w, b"after").unwrap();
    w.sync_all().unwrap();
    drop(w);
    assert_eq!(get(&server, "/memories/p/moved/f").await, b"before after");

    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let c = std::ffi::CString::new(root.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string and a zeroed statvfs to fill.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    assert!(st.f_blocks > 0 && st.f_bavail > 0 && st.f_bavail <= st.f_blocks);
    assert!(st.f_namemax >= 255);

    std::fs::write(root.join("h.txt"), "h").unwrap();
    let h = root.join("h.txt");
    let refusals = [
        (
            "chown",
            Command::new("chown").arg("1:1").arg(&h).output().unwrap(),
        ),
        (
            "symlink",
            Command::new("ln")
                .arg("-s")
                .arg("h.txt")
                .arg(root.join("l"))
                .output()
                .unwrap(),
        ),
        (
            "link",
            Command::new("ln")
                .arg(&h)
                .arg(root.join("hard"))
                .output()
                .unwrap(),
        ),
        (
            "setfattr",
            Command::new("python3")
                .args([
                    "-c",
                    "import os,sys; os.setxattr(sys.argv[1], 'user.a', b'1')",
                ])
                .arg(&h)
                .output()
                .unwrap(),
        ),
    ];
    for (what, out) in refusals {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what} succeeded");
        assert!(
            err.contains("Operation not permitted") || err.contains("Operation not supported"),
            "{what}: {err}"
        );
    }
    // chown to the mount's owner is no change, and allowed.
    let own = Command::new("chown").arg("0:0").arg(&h).status().unwrap();
    assert!(own.success());
}

/// The executable bit of a file, as the server answers it over gRPC.
async fn executable(server: &Server, path: &str) -> bool {
    let req = as_owner(pb::StatRequest { path: path.into() });
    let stat = server.fs().await.stat(req).await;
    let stat = stat.unwrap_or_else(|s| panic!("stat {path}: {s:?}"));
    stat.into_inner().info.unwrap().executable
}

/// The mode bits of a file on the mount.
fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The executable bit is stored on the server, on the Store and on the
/// Filesystem tier (docs/mount.md § POSIX): `chmod +x` on the mount shows
/// over gRPC and after a remount; a gRPC write that sets it makes a script
/// the mount runs; a chmod between a handle's writes and its close goes
/// with that one commit (no conflict, one version); `chmod -x` clears it;
/// and a chmod needs a write grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_executable_bit_is_stored_on_the_server() {
    if !fuse_available() {
        return;
    }
    let server = Server::start_with(Some(CONFIG), &[]);
    for logical in ["/memories/x", "/workspace/x"] {
        put(&server, &format!("{logical}/.keep"), "").await;
        let m = mount(&server, OWNER, &[], logical);
        let root = m.path();
        std::fs::write(root.join("build.sh"), "#!/bin/sh\necho built\n").unwrap();
        assert_eq!(mode(&root.join("build.sh")), 0o644, "{logical}");
        assert!(!executable(&server, &format!("{logical}/build.sh")).await);
        let chmod = Command::new("chmod")
            .arg("+x")
            .arg(root.join("build.sh"))
            .status();
        assert!(chmod.unwrap().success());
        assert!(
            executable(&server, &format!("{logical}/build.sh")).await,
            "{logical}: chmod +x reached the server"
        );
        let ran = Command::new(root.join("build.sh")).output().unwrap();
        assert_eq!(ran.stdout, b"built\n", "{logical}");

        // Set over gRPC: the mount shows it and runs the script.
        let req = as_owner(pb::WriteRequest {
            path: format!("{logical}/tool.sh"),
            content: "#!/bin/sh\necho tool\n".into(),
            executable: Some(true),
            ..Default::default()
        });
        server.fs().await.write(req).await.unwrap();
        let tool = root.join("tool.sh");
        let shown = tokio::task::block_in_place(|| {
            visible_within(&tool, b"#!/bin/sh\necho tool\n", Duration::from_secs(1))
        });
        assert!(shown.is_some(), "{logical}: the gRPC write shows");
        assert_eq!(mode(&tool), 0o755, "{logical}");
        assert_eq!(Command::new(&tool).output().unwrap().stdout, b"tool\n");

        // Written, chmod'ed through the handle, closed: one commit.
        let script = "import os,sys\nf=open(sys.argv[1],'w')\nf.write('#!/bin/sh\\necho late\\n')\n\
             f.flush()\nos.fchmod(f.fileno(), 0o755)\nf.close()\n";
        let late = root.join("late.sh");
        let py = Command::new("python3")
            .args(["-c", script])
            .arg(&late)
            .status();
        assert!(py.unwrap().success(), "{logical}; log: {}", m.logs());
        assert!(executable(&server, &format!("{logical}/late.sh")).await);
        if logical.starts_with("/memories") {
            // (The Filesystem tier keeps no history to count.)
            assert_eq!(versions(&server, &format!("{logical}/late.sh")).await, 1);
        }
        assert_eq!(Command::new(&late).output().unwrap().stdout, b"late\n");

        let chmod = Command::new("chmod").arg("-x").arg(&tool).status();
        assert!(chmod.unwrap().success());
        assert!(!executable(&server, &format!("{logical}/tool.sh")).await);
        assert_eq!(
            get(&server, &format!("{logical}/tool.sh")).await,
            b"#!/bin/sh\necho tool\n"
        );
        drop(m);

        // A new mount has no memory of the old one's chmods.
        let again = mount(&server, OWNER, &[], logical);
        assert_eq!(mode(&again.path().join("build.sh")), 0o755, "{logical}");
        assert_eq!(mode(&again.path().join("tool.sh")), 0o644, "{logical}");
    }
    // A read-only grant refuses a chmod, and nothing changes.
    put(&server, "/memories/shared/ro.sh", "#!/bin/sh\n").await;
    let m = mount(&server, AGENT, &[], "/memories/shared");
    let out = Command::new("chmod")
        .arg("+x")
        .arg(m.path().join("ro.sh"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Permission denied") || err.contains("Read-only"),
        "{err}"
    );
    assert!(!executable(&server, "/memories/shared/ro.sh").await);
}

/// What pjdfstest found (docs/mount.md § pjdfstest), on a Store and a
/// Filesystem mount: a name longer than 255 bytes is ENAMETOOLONG; an
/// unlinked open file has no link left; a file created and still open is
/// there for a second open, which may read, replace or truncate it, and
/// `stat` reports the size of the handle changed last; a directory the
/// mount keeps does not replace a file or a directory with entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_pjdfstest_found() {
    use std::os::unix::fs::MetadataExt;
    if !fuse_available() {
        return;
    }
    let server = Server::start_with(Some(CONFIG), &[]);
    for tier in ["/memories", "/workspace"] {
        put(&server, &format!("{tier}/pjd/seed.txt"), "seed").await;
        let m = mount(&server, OWNER, &[], &format!("{tier}/pjd"));
        let root = m.path();

        let long = root.join("n".repeat(256));
        let err = std::fs::write(&long, "x").unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(libc::ENAMETOOLONG),
            "{tier}: {err}"
        );
        let err = std::fs::create_dir(&long).unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(libc::ENAMETOOLONG),
            "{tier}: {err}"
        );
        std::fs::write(root.join("n".repeat(255)), "x").unwrap();

        let open = std::fs::File::open(root.join("seed.txt")).unwrap();
        std::fs::remove_file(root.join("seed.txt")).unwrap();
        assert_eq!(open.metadata().unwrap().nlink(), 0, "{tier}: unlinked");

        // Created, still open and never written: a second open finds it.
        let created = std::fs::File::create_new(root.join("new")).unwrap();
        assert_eq!(std::fs::read(root.join("new")).unwrap(), b"", "{tier}");
        std::fs::write(root.join("new"), "replaced").unwrap();
        assert_eq!(get(&server, &format!("{tier}/pjd/new")).await, b"replaced");
        created.set_len(23456).unwrap();
        assert_eq!(std::fs::metadata(root.join("new")).unwrap().len(), 23456);
        let later = std::fs::OpenOptions::new()
            .write(true)
            .open(root.join("new"))
            .unwrap();
        later.set_len(1).unwrap();
        assert_eq!(
            std::fs::metadata(root.join("new")).unwrap().len(),
            1,
            "{tier}: the handle changed last"
        );
        drop(later);
        drop(created);

        std::fs::create_dir(root.join("kept")).unwrap();
        std::fs::create_dir(root.join("full")).unwrap();
        std::fs::write(root.join("full/f"), "f").unwrap();
        let err = std::fs::rename(root.join("kept"), root.join("full")).unwrap_err();
        assert!(
            matches!(err.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST)),
            "{tier}: {err}"
        );
        let err = std::fs::rename(root.join("kept"), root.join("new")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR), "{tier}: {err}");
        assert_eq!(std::fs::read(root.join("full/f")).unwrap(), b"f", "{tier}");
        assert!(root.join("kept").is_dir(), "{tier}");
    }
}

/// A mount of the object tier (the test process's versitygw): a file
/// written through the mount is read back over gRPC, a `chmod +x` is
/// stored and the script runs, a large `cp` is one version, and a rename
/// and an unlink reach the bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_tier_mount_reads_writes_and_keeps_the_executable_bit() {
    if !fuse_available() {
        return;
    }
    let bucket = crate::s3::s3().bucket("agentvfs-it");
    let prefix = format!("mount-{:016x}", rand::random::<u64>());
    let config = format!(
        "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n[[mount]]\nprefix = \"/shared\"\n\
         tier = \"object\"\nbucket = \"{bucket}\"\nkey_prefix = \"{prefix}\"\npath_style = true\n"
    );
    let server = Server::start_with(Some(&config), &[]);
    let m = try_mount(&server, None, &[], "/shared")
        .unwrap_or_else(|(code, err)| panic!("mount failed ({code:?}): {err}"));
    let root = m.path();
    std::fs::write(root.join("run.sh"), "#!/bin/sh\necho object\n").unwrap();
    let chmod = Command::new("chmod")
        .arg("+x")
        .arg(root.join("run.sh"))
        .status();
    assert!(chmod.unwrap().success());
    let stat = pb::StatRequest {
        path: "/shared/run.sh".into(),
    };
    let info = server
        .fs()
        .await
        .stat(stat)
        .await
        .unwrap()
        .into_inner()
        .info
        .unwrap();
    assert!(info.executable, "{info:?}");
    let ran = Command::new(root.join("run.sh")).output().unwrap();
    assert_eq!(ran.stdout, b"object\n", "log: {}", m.logs());

    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
    let source = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(source.path(), &big).unwrap();
    let cp = Command::new("cp")
        .arg(source.path())
        .arg(root.join("big.bin"))
        .status();
    assert!(cp.unwrap().success());
    let read = pb::ReadBytesRequest {
        path: "/shared/big.bin".into(),
        version: None,
    };
    let mut stream = server
        .fs()
        .await
        .read_bytes(read)
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    while let Some(chunk) = stream.message().await.unwrap() {
        got.extend(chunk.data);
    }
    assert!(got == big, "{} bytes back of {}", got.len(), big.len());

    std::fs::rename(root.join("big.bin"), root.join("moved.bin")).unwrap();
    std::fs::remove_file(root.join("run.sh")).unwrap();
    let list = pb::ListInfoRequest {
        path: "/shared".into(),
    };
    let listed = server
        .fs()
        .await
        .list_info(list)
        .await
        .unwrap()
        .into_inner();
    let names: Vec<&str> = listed.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(names, ["/shared/moved.bin"]);
}
