//! `agentvfs mount`: a FUSE client of a running server, so every shell
//! tool sees the granted, versioned files the gRPC API serves
//! (docs/mount.md). A front end that talks to the server only over gRPC,
//! with the connection flags of every client verb.
//!
//! [`run`] checks what it needs (FUSE, the mount point, the token, the
//! path), mounts, prints one line, and serves until SIGINT, SIGTERM or an
//! unmount. The pieces: [`fuse`] takes the kernel's calls, [`ops`] does
//! each one over [`remote`], [`open_file`] keeps an open file's snapshot
//! and writes in [`staging`], [`inodes`] numbers paths, and [`watch`]
//! pushes others' changes to the kernel.

mod fuse;
mod grants;
mod inodes;
mod open_file;
mod ops;
mod remote;
mod staging;
mod watch;

use crate::cli::Connection;
use crate::cli::connect;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// FUSE threads reading the kernel's requests.
const FUSE_THREADS: usize = 4;

/// What to do when a commit finds that someone else changed the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnConflict {
    /// The close fails with EIO and the other writer's content stays.
    Fail,
    /// Last writer wins.
    Overwrite,
}

/// `agentvfs mount` arguments.
#[derive(Clone, Debug, clap::Args)]
pub struct MountArgs {
    /// Refuse every change (EROFS).
    #[arg(long)]
    pub read_only: bool,
    /// A close whose file someone else changed since it was opened fails
    /// (EIO, their content kept) or overwrites it.
    #[arg(long, value_enum, default_value = "fail")]
    pub on_conflict: OnConflict,
    /// Where open files spill their bytes past the memory bound (default:
    /// $XDG_CACHE_HOME/agentvfs/mount, else ~/.cache/agentvfs/mount).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Bytes one open file keeps in memory before spilling to the cache
    /// directory.
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20)]
    pub file_memory: u64,
    /// Bytes all open files together keep in memory.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    pub memory: u64,
    /// The server's directory to mount (a logical path, e.g. /workspace).
    pub logical_path: String,
    /// Where to mount it: an existing, empty, unmounted directory.
    pub mountpoint: PathBuf,
}

/// The cache directory: as given, else under XDG_CACHE_HOME or ~/.cache.
fn cache_dir(args: &MountArgs) -> Result<PathBuf, String> {
    let dir = match &args.cache_dir {
        Some(dir) => dir.clone(),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
            .ok_or("no cache directory: set --cache-dir, XDG_CACHE_HOME or HOME")?
            .join("agentvfs/mount"),
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create the cache directory {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The checks that need no server: FUSE is there, the mount point is a
/// directory nothing is mounted on.
fn check_local(mountpoint: &Path) -> Result<PathBuf, String> {
    if !Path::new("/dev/fuse").exists() {
        return Err(
            "FUSE is not available: /dev/fuse is missing (load the fuse module, or give \
                    the container --device /dev/fuse)"
                .into(),
        );
    }
    let shown = mountpoint.display();
    let dir = mountpoint
        .canonicalize()
        .map_err(|e| format!("mount point {shown}: {e}"))?;
    if !dir.is_dir() {
        return Err(format!("mount point {shown} is not a directory"));
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let busy = mounts
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .any(|point| Path::new(&point.replace("\\040", " ")) == dir);
    if busy {
        return Err(format!(
            "mount point {shown} is busy: something is already mounted there"
        ));
    }
    Ok(dir)
}

/// Mounts `args.logical_path` at `args.mountpoint` and serves until a
/// signal or an unmount; the error is the one line to print.
pub fn run(conn: Connection, args: MountArgs) -> Result<(), String> {
    let mountpoint = check_local(&args.mountpoint)?;
    let budget = Arc::new(staging::Budget::new(
        args.file_memory,
        args.memory,
        cache_dir(&args)?,
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let root = args.logical_path.trim_end_matches('/').to_owned();
    let root = if root.is_empty() {
        "/".to_owned()
    } else {
        root
    };
    let (remote, grants) = runtime.block_on(connect_remote(&conn, &root))?;
    let settings = ops::Settings {
        read_only: args.read_only,
        overwrite: args.on_conflict == OnConflict::Overwrite,
    };
    let mount = Arc::new(ops::Mount::new(
        remote.clone(),
        &root,
        settings,
        budget,
        grants,
    ));
    let kernel = fuse::Kernel::new(Arc::clone(&mount), runtime.handle().clone());
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName(format!("agentvfs:{root}")),
        fuser::MountOption::Subtype("agentvfs".into()),
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
        if args.read_only {
            fuser::MountOption::RO
        } else {
            fuser::MountOption::RW
        },
    ];
    config.n_threads = Some(FUSE_THREADS);
    config.clone_fd = true;
    let session = fuser::Session::new(kernel, &mountpoint, &config)
        .map_err(|e| format!("cannot mount on {}: {e}", mountpoint.display()))?;
    let notifier = session.notifier();
    let background = session
        .spawn()
        .map_err(|e| format!("cannot start the FUSE threads: {e}"))?;
    runtime.block_on(async {
        watch::start(remote, root.clone(), Arc::clone(&mount), notifier);
    });
    // Handled from before the ready line, so a signal right after it
    // unmounts rather than kills.
    let signals = runtime.block_on(async { Signals::new() })?;
    let mode = if args.read_only {
        "read-only"
    } else {
        "read-write"
    };
    println!(
        "agentvfs: mounted {root} at {} ({mode}); Ctrl-C or fusermount3 -u to unmount",
        mountpoint.display()
    );
    let signalled = runtime.block_on(signals.wait(&background));
    if signalled {
        background
            .umount_and_join()
            .map_err(|e| format!("the FUSE session failed: {e}"))?;
    } else {
        // Unmounted by someone else, and the FUSE threads are done. Dropping
        // the session would unmount its path again: whatever was mounted
        // there since (seen: the next `agentvfs mount` of the directory).
        std::mem::forget(background);
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}

/// SIGINT and SIGTERM, handled.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Handles SIGINT and SIGTERM from now on.
    fn new() -> Result<Signals, String> {
        use tokio::signal::unix::{SignalKind, signal};
        let term =
            signal(SignalKind::terminate()).map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
        let int =
            signal(SignalKind::interrupt()).map_err(|e| format!("cannot handle SIGINT: {e}"))?;
        Ok(Signals { term, int })
    }

    /// Waits for a signal (true) or for the session to end by an unmount
    /// (false).
    async fn wait(mut self, background: &fuser::BackgroundSession) -> bool {
        loop {
            tokio::select! {
                _ = self.term.recv() => return true,
                _ = self.int.recv() => return true,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {
                    if background.guard.is_finished() {
                        return false;
                    }
                }
            }
        }
    }
}

/// Connects, checks that the token is good and `root` a directory it may
/// list, and asks for the token's grants.
async fn connect_remote(
    conn: &Connection,
    root: &str,
) -> Result<(remote::Remote, grants::Grants), String> {
    let (endpoint, url) = connect::endpoint(conn)?;
    let channel = endpoint
        .connect_timeout(Duration::from_secs(2))
        .http2_keep_alive_interval(Duration::from_secs(2))
        .keep_alive_timeout(Duration::from_secs(2))
        .keep_alive_while_idle(true)
        .connect()
        .await
        .map_err(|e| format!("cannot connect to {url}: {}", connect::connect_error(&e)))?;
    let headers = connect::headers(conn, "mount")?;
    let mut access =
        crate::pb::access_client::AccessClient::with_interceptor(channel.clone(), headers.clone());
    let remote = remote::Remote::new(connect::filesystem(channel, headers));
    let info = remote.stat(root).await.map_err(|f| match f.errno {
        fuser::Errno::EACCES => format!(
            "{root}: access denied ({}); check --token and the principal's grants",
            f.why
        ),
        fuser::Errno::ENOENT => format!("{root}: no such directory on the server, or not granted"),
        _ => format!("{root}: {}", f.why),
    })?;
    if !info.is_directory {
        return Err(format!(
            "{root} is a file, not a directory: mount a directory"
        ));
    }
    remote
        .list(root)
        .await
        .map_err(|f| format!("{root}: cannot list it: {}", f.why))?;
    let request = crate::pb::DescribeGrantsRequest {};
    let described = remote::bounded("DescribeGrants", access.describe_grants(request)).await;
    let grants = grants::Grants::new(described.ok().map(|d| d.into_inner().grants));
    Ok((remote, grants))
}
