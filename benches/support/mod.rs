//! What the benchmarks share: the real `agentvfs` binary serving on a
//! loopback port, killed when dropped (also when a benchmark panics).

#[path = "../../tests/support/launch.rs"]
#[allow(dead_code)] // the benchmarks use only its launch
mod launch;

use std::ffi::OsStr;
use std::path::Path;
use std::process::Child;

/// A running `agentvfs serve`.
pub struct Served {
    child: Child,
    /// `host:port` it listens on.
    pub addr: String,
    /// What it logged lately (`AGENTVFS_BENCH_LOG` sets the filter).
    logs: launch::Logs,
}

impl Served {
    /// `agentvfs serve --listen 127.0.0.1:0` with `args`, run in `cwd`
    /// (the default configuration serves its working directory at
    /// `/workspace`), logging warnings only, or what
    /// `AGENTVFS_BENCH_LOG` asks (`agentvfs=info`; tests/support/launch.rs; its
    /// `AGENTVFS_SERVER_BIN` runs an earlier build for before/after tables).
    #[allow(dead_code)] // each bench compiles this module; `search` sets an environment
    pub fn start<I, S>(args: I, cwd: &Path) -> Served
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Served::start_with_env(args, cwd, Vec::new())
    }

    /// [`Served::start`] with more environment variables (`XDG_DATA_HOME`:
    /// where the default configuration keeps its data).
    pub fn start_with_env<I, S>(args: I, cwd: &Path, env: Vec<(&str, &OsStr)>) -> Served
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut serve: Vec<String> = vec!["serve".into(), "--listen".into(), "127.0.0.1:0".into()];
        serve.extend(
            args.into_iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned()),
        );
        let filter = std::env::var("AGENTVFS_BENCH_LOG").unwrap_or_else(|_| "agentvfs=warn".into());
        let launched = launch::Launch {
            args: serve,
            cwd,
            log_filter: &filter,
            env,
            address_space: None,
        }
        .start();
        Served {
            child: launched.child,
            addr: launched.addr,
            logs: launched.logs,
        }
    }

    /// Takes what the server logged since the last call.
    #[allow(dead_code)] // each bench compiles this module; not every one reads logs
    pub fn take_logs(&self) -> String {
        std::mem::take(&mut *self.logs.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// `http://host:port`, for gRPC clients.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server's process id (to read its memory or CPU use).
    #[allow(dead_code)] // each bench compiles this module; not every one reads these
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // Best effort: the process may already be gone.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` scaled by `AGENTVFS_BENCH_SCALE` (default 1; `0.1` for a quick run),
/// at least `floor`.
#[allow(dead_code)] // each bench compiles this module; not every one scales
pub fn scaled(n: usize, floor: usize) -> usize {
    let scale: f64 = std::env::var("AGENTVFS_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    ((n as f64 * scale) as usize).max(floor)
}

/// Runs `call(client, i)` for every `i < n`, the calls dealt round-robin to
/// `clients` (one task each, so the clients' calls overlap); returns the
/// elapsed time.
#[allow(dead_code)] // each bench compiles this module; not every one calls over gRPC
pub async fn spread_calls<F, Fut>(
    clients: Vec<agentvfs::pb::filesystem_client::FilesystemClient<tonic::transport::Channel>>,
    n: usize,
    call: F,
) -> std::time::Duration
where
    F: Fn(
            agentvfs::pb::filesystem_client::FilesystemClient<tonic::transport::Channel>,
            usize,
        ) -> Fut
        + Clone
        + Send
        + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let callers = clients.len();
    let start = std::time::Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(t, client)| {
            let call = call.clone();
            tokio::spawn(async move {
                for i in (t..n).step_by(callers) {
                    call(client.clone(), i).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("client task");
    }
    start.elapsed()
}

/// Runs per measured row: `AGENTVFS_BENCH_RUNS`, default 5.
#[allow(dead_code)] // each bench compiles this module; not every one repeats rows
pub fn runs() -> usize {
    std::env::var("AGENTVFS_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

/// The median of `xs` (the upper one of an even count).
#[allow(dead_code)] // each bench compiles this module; not every one takes medians
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}
