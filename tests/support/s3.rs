//! A real S3 server on loopback for the tests: versitygw with its posix
//! backend (docs/object-storage.md), started once per test process on a
//! free port over a temporary directory, and killed with the process.
//!
//! The binary comes from `AGENTVFS_VERSITYGW` (scripts/test installs it and
//! sets it, `scripts/versitygw install`), else `versitygw` on the `PATH`.
//! Without it the object tier's tests fail, saying how to get it: they
//! never pass without running.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The root access key of the test server.
pub const ACCESS_KEY: &str = "agentvfs-test";
/// The root secret of the test server.
pub const SECRET_KEY: &str = "agentvfs-test-secret";

/// The running test server.
pub struct S3 {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// Its data directory (a bucket is a directory in it).
    pub data: PathBuf,
    _dir: tempfile::TempDir,
}

impl S3 {
    /// Creates the bucket `name` (a directory of the posix backend); a
    /// bucket that exists is left as it is.
    pub fn bucket(&self, name: &str) -> String {
        std::fs::create_dir_all(self.data.join(name)).expect("create a bucket");
        name.to_owned()
    }
}

fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("AGENTVFS_VERSITYGW") {
        return PathBuf::from(path);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("versitygw"))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "the object tier's tests need versitygw, a real S3 server: run scripts/test, or \
                 scripts/versitygw install and set AGENTVFS_VERSITYGW to the path it prints"
            )
        })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn wait_until_listening(port: u16, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("versitygw exited at start-up: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("versitygw did not listen on port {port} within 20 s");
}

/// Starts versitygw on `port` over `data`, dying with the thread that
/// called this (the kernel's parent-death signal follows the thread).
pub fn start(data: &Path, port: u16) -> Child {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(binary());
    // --keep-alive: without it versitygw closes every connection after one
    // response (docs/object-storage.md).
    cmd.args([
        "--port",
        &format!("127.0.0.1:{port}"),
        "--quiet",
        "--keep-alive",
        "posix",
    ])
    .arg(data)
    .env("ROOT_ACCESS_KEY", ACCESS_KEY)
    .env("ROOT_SECRET_KEY", SECRET_KEY)
    .stdout(Stdio::null())
    .stderr(Stdio::inherit());
    // SAFETY: prctl only sets a flag of the child between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("start versitygw");
    wait_until_listening(port, &mut child);
    child
}

/// The test process's S3 server, started at the first call.
pub fn s3() -> &'static S3 {
    static SERVER: OnceLock<S3> = OnceLock::new();
    SERVER.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir for versitygw");
        let data = dir.path().to_owned();
        let port = free_port();
        // Started from a thread that lives as long as the process, which
        // the server then dies with (test threads end with their test).
        let (started, ready) = std::sync::mpsc::channel();
        let keeper_data = data.clone();
        std::thread::spawn(move || {
            let mut child = start(&keeper_data, port);
            let _ = started.send(());
            // Waits for the server for the rest of the process (it only ends
            // when it fails; the tests then fail talking to it).
            let _ = child.wait();
        });
        ready.recv().expect("versitygw started");
        // The bucket tests/conformance/object.json's configuration names.
        std::fs::create_dir_all(data.join("agentvfs")).expect("create the bucket");
        S3 {
            endpoint: format!("http://127.0.0.1:{port}"),
            data,
            _dir: dir,
        }
    })
}
