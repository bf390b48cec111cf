//! The one launcher of the real `agentvfs` binary for the integration
//! tests (`tests/it/util.rs`), the stress test (`tests/stress.rs`) and the
//! benchmarks (`benches/support`): it starts `agentvfs` with the given
//! arguments, waits for its `agentvfs listening on HOST:PORT` line, and keeps
//! what it writes to stderr.
//!
//! `AGENTVFS_SERVER_BIN` runs another build instead of this one's (an
//! earlier commit's binary, for before/after numbers).

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// Bytes of stderr kept: past it the older half goes.
const KEPT_LOG_BYTES: usize = 32 << 20;

/// What a server wrote to stderr (its last [`KEPT_LOG_BYTES`]), a line
/// ending with `\n` each.
pub type Logs = Arc<Mutex<String>>;

/// A started server process (not killed on drop: each user decides).
pub struct Launched {
    /// The process.
    pub child: Child,
    /// `host:port` it listens on.
    pub addr: String,
    /// What it wrote to stderr so far, line by line.
    pub logs: Logs,
}

/// How to start one server.
pub struct Launch<'a> {
    /// The arguments after the binary (`serve ...`).
    pub args: Vec<String>,
    /// Its working directory.
    pub cwd: &'a Path,
    /// `RUST_LOG` for it.
    pub log_filter: &'a str,
    /// More environment variables.
    pub env: Vec<(&'a str, &'a OsStr)>,
    /// Its address space limit in bytes (`RLIMIT_AS`, set in the child
    /// before it runs the binary), as a deployment's memory limit would
    /// be: past it every allocation fails and the process aborts.
    pub address_space: Option<u64>,
}

impl Launch<'_> {
    /// Starts the server and waits until it listens; panics with its stderr
    /// when it does not start.
    pub fn start(self) -> Launched {
        let bin = std::env::var("AGENTVFS_SERVER_BIN");
        let mut cmd = Command::new(bin.as_deref().unwrap_or(env!("CARGO_BIN_EXE_agentvfs")));
        cmd.args(&self.args)
            .current_dir(self.cwd)
            .env("RUST_LOG", self.log_filter)
            .envs(self.env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(bytes) = self.address_space {
            use std::os::unix::process::CommandExt;
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            // SAFETY: setrlimit is async-signal-safe and touches only the
            // child, between fork and exec; `limit` is a plain copy.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = cmd.spawn().expect("spawn agentvfs");
        let logs: Logs = Arc::default();
        let stderr = child.stderr.take().expect("piped stderr");
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut logs = sink.lock().unwrap();
                if logs.len() > KEPT_LOG_BYTES {
                    let mut cut = logs.len() / 2;
                    while !logs.is_char_boundary(cut) {
                        cut += 1;
                    }
                    logs.drain(..cut);
                }
                logs.push_str(&line);
                logs.push('\n');
            }
        });
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("read the listening line");
        let Some(addr) = line.trim().strip_prefix("agentvfs listening on ") else {
            let _ = child.wait();
            // The stderr thread has read everything once the process ended.
            std::thread::sleep(std::time::Duration::from_millis(50));
            panic!(
                "server did not start: {line:?}; stderr: {}",
                logs.lock().unwrap()
            );
        };
        Launched {
            addr: addr.to_owned(),
            child,
            logs,
        }
    }
}
