//! Starting the real `agentvfs` binary on an ephemeral loopback port, and
//! small helpers to talk to it.

use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

/// A running server process, killed on drop.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Everything the server wrote to stderr so far.
    pub logs: Arc<Mutex<String>>,
    /// The `serve` arguments it was started with (a restart reuses them).
    args: Vec<String>,
    /// The server's working directory (holds relative data paths); removed
    /// when the server is dropped.
    dir: tempfile::TempDir,
    /// Its user data directory (the default Store's home); removed on drop.
    data: tempfile::TempDir,
    /// Its address-space limit in bytes, if any (a restart keeps it).
    address_space: Option<u64>,
}

impl Server {
    /// The embedded default configuration, listening on port 0.
    pub fn start() -> Server {
        Server::start_with(None, &[])
    }

    /// A server with `config` (TOML, `listen` forced to port 0 unless given)
    /// and extra `serve` arguments.
    pub fn start_with(config: Option<&str>, args: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        Server::start_in(dir, config, args)
    }

    /// Like [`Server::start_with`] in an existing working directory.
    pub fn start_in(dir: tempfile::TempDir, config: Option<&str>, args: &[&str]) -> Server {
        Server::start_limited(dir, config, args, None)
    }

    /// Like [`Server::start_in`], the server's address space limited to
    /// `address_space` bytes (`RLIMIT_AS`): an allocation past it aborts
    /// the server, as a container's memory limit would.
    pub fn start_limited(
        dir: tempfile::TempDir,
        config: Option<&str>,
        args: &[&str],
        address_space: Option<u64>,
    ) -> Server {
        let mut serve: Vec<String> = vec!["serve".into()];
        if let Some(config) = config {
            let path = dir.path().join("agentvfs.toml");
            std::fs::write(&path, config).expect("write config");
            serve.push("--config".into());
            serve.push(path.display().to_string());
        }
        if !args.contains(&"--listen") && !config.is_some_and(|c| c.contains("listen")) {
            serve.extend(["--listen".into(), "127.0.0.1:0".into()]);
        }
        serve.extend(args.iter().map(|a| a.to_string()));
        // The default Store data directory is the user's; each test server
        // keeps its own, outside its working directory (which the default
        // configuration serves at /workspace).
        let data = tempfile::tempdir().expect("temp dir");
        let (child, url, logs) = spawn(dir.path(), data.path(), &serve, address_space);
        Server {
            child,
            url,
            logs,
            args: serve,
            dir,
            data,
            address_space,
        }
    }

    /// The server's working directory (what the default configuration
    /// serves at /workspace).
    pub fn workdir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Its user data directory (`XDG_DATA_HOME`: the default Store's
    /// home, the Filesystem mounts' journals and branches).
    pub fn data_dir(&self) -> &std::path::Path {
        self.data.path()
    }

    /// Kills the server with SIGKILL (as a crash would) and starts it again
    /// with the same arguments, working directory and data directory, on a
    /// new port.
    pub fn crash_and_restart(&mut self) {
        self.kill();
        let (child, url, logs) = spawn(
            self.dir.path(),
            self.data.path(),
            &self.args,
            self.address_space,
        );
        self.child = child;
        self.url = url;
        self.logs = logs;
    }

    /// A connected Filesystem client.
    pub async fn fs(&self) -> FilesystemClient<Channel> {
        FilesystemClient::new(self.channel().await).max_decoding_message_size(256 << 20)
    }

    /// A connected channel.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.url.clone())
            .unwrap()
            .connect()
            .await
            .expect("connect")
    }

    /// Waits until the server's log contains `needle`.
    pub async fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if self.logs.lock().unwrap().contains(needle) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit on its own.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        self.child.wait().expect("wait for agentvfs")
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A memory figure of the server in KiB, from `/proc/PID/status`:
    /// `VmRSS` (resident now) or `VmHWM` (resident at the peak).
    pub fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status
            .lines()
            .find(|l| {
                l.strip_prefix(field)
                    .is_some_and(|rest| rest.starts_with(':'))
            })
            .unwrap_or_else(|| panic!("no {field} in /proc status"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Resets the server's `VmHWM` to its current resident memory, so the
    /// next `memory_kib("VmHWM")` is the peak since now.
    pub fn reset_peak_memory(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").expect("reset VmHWM");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `agentvfs` with `args` in `dir`, its user data in `data`; returns
/// the process, its URL and its captured stderr.
fn spawn(
    dir: &std::path::Path,
    data: &std::path::Path,
    args: &[String],
    address_space: Option<u64>,
) -> (Child, String, Arc<Mutex<String>>) {
    let mut env: Vec<(&str, &std::ffi::OsStr)> = vec![("XDG_DATA_HOME", data.as_os_str())];
    // An object mount without an endpoint reaches the test process's S3
    // server, as a deployment's would reach AWS_ENDPOINT_URL.
    let config = dir.join("agentvfs.toml");
    if std::fs::read_to_string(&config).is_ok_and(|c| c.contains("tier = \"object\"")) {
        let s3 = crate::s3::s3();
        env.extend([
            ("AWS_ENDPOINT_URL", s3.endpoint.as_ref()),
            ("AWS_ACCESS_KEY_ID", crate::s3::ACCESS_KEY.as_ref()),
            ("AWS_SECRET_ACCESS_KEY", crate::s3::SECRET_KEY.as_ref()),
            ("AWS_ALLOW_HTTP", "true".as_ref()),
        ]);
    }
    let launched = crate::launch::Launch {
        args: args.to_vec(),
        cwd: dir,
        log_filter: "agentvfs=debug",
        env,
        address_space,
    }
    .start();
    (
        launched.child,
        format!("http://{}", launched.addr),
        launched.logs,
    )
}

/// A request carrying a session header (and a token when given).
pub fn with_session<T>(msg: T, session: &str) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut()
        .insert("x-agentvfs-session", session.parse().unwrap());
    req
}

/// Asserts a status has `code` and an ErrorInfo whose reason is `reason`.
#[track_caller]
pub fn assert_error(status: &Status, code: Code, reason: &str) {
    assert_eq!(status.code(), code, "unexpected status: {status:?}");
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    assert_eq!(info.reason, reason, "unexpected reason in {status:?}");
    assert_eq!(info.domain, "agentvfs");
}

/// Writes a text file.
pub async fn write(
    fs: &mut FilesystemClient<Channel>,
    path: &str,
    content: &str,
) -> pb::WriteResponse {
    fs.write(pb::WriteRequest {
        path: path.into(),
        content: content.into(),
        ..Default::default()
    })
    .await
    .unwrap_or_else(|s| panic!("write {path}: {s:?}"))
    .into_inner()
}

/// Everything a Grep stream sends: the matches and the final summary.
pub async fn grep_all(
    fs: &mut FilesystemClient<Channel>,
    req: impl tonic::IntoRequest<pb::GrepRequest>,
) -> Result<(Vec<pb::GrepMatch>, pb::SearchSummary), Status> {
    let mut stream = fs.grep(req).await?.into_inner();
    let mut matches = Vec::new();
    while let Some(msg) = stream.message().await? {
        match msg.result.expect("result set") {
            pb::grep_response::Result::Batch(b) => matches.extend(b.matches),
            pb::grep_response::Result::Summary(s) => {
                assert!(stream.message().await?.is_none(), "summary must be last");
                return Ok((matches, s));
            }
        }
    }
    panic!("grep stream ended without a summary")
}

/// The paths a Glob stream sends, and its summary.
pub async fn glob_all(
    fs: &mut FilesystemClient<Channel>,
    req: impl tonic::IntoRequest<pb::GlobRequest>,
) -> Result<(Vec<String>, pb::SearchSummary), Status> {
    let (entries, summary) = glob_entries(fs, req).await?;
    Ok((entries.into_iter().map(|e| e.path).collect(), summary))
}

/// Runs a Glob to its end: every entry in order, and the summary.
pub async fn glob_entries(
    fs: &mut FilesystemClient<Channel>,
    req: impl tonic::IntoRequest<pb::GlobRequest>,
) -> Result<(Vec<pb::FileInfo>, pb::SearchSummary), Status> {
    let mut stream = fs.glob(req).await?.into_inner();
    let mut paths = Vec::new();
    while let Some(msg) = stream.message().await? {
        match msg.result.expect("result set") {
            pb::glob_response::Result::Batch(b) => paths.extend(b.entries),
            pb::glob_response::Result::Summary(s) => {
                assert!(stream.message().await?.is_none(), "summary must be last");
                return Ok((paths, s));
            }
        }
    }
    panic!("glob stream ended without a summary")
}

/// A request carrying the bearer `token`.
pub fn as_token<T>(msg: T, token: &str) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

/// Reads a text file whole (it must exist).
pub async fn read_text(fs: &mut FilesystemClient<Channel>, path: &str) -> pb::ReadResponse {
    fs.read(pb::ReadRequest {
        path: path.into(),
        ..Default::default()
    })
    .await
    .unwrap_or_else(|s| panic!("read {path}: {s:?}"))
    .into_inner()
}
