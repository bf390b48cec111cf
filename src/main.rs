//! The `agentvfs` command: parse arguments, then either run one client verb
//! on a single-threaded runtime, or set up tracing, load the configuration,
//! bind, and hand over to [`agentvfs::server::serve`].

use agentvfs::config::{self, Config, TierConfig};
use agentvfs::startup;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// jemalloc, for every allocation of the process (RocksDB's included, as
/// the C `malloc`). With glibc's malloc, a server holding a search index
/// scanned slower than one without, its time going to `_int_malloc` and
/// `malloc_consolidate` over a heap the index had fragmented: an unindexable
/// Grep on a Filesystem mount, measured in pairs, took 1.10-1.14x the
/// scanning server's time; with jemalloc 1.01x, and both a quarter less
/// (docs/performance.md § The allocator: jemalloc).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read at its start (the C symbol `malloc_conf`).
/// Freed pages go back to the system from background threads, within about
/// a second (`dirty_decay_ms`), not inline in the request that freed them:
/// returning each at once doubled the Store's scan time. Blocks of 2 MiB and
/// more (request bodies, whole files) come from an arena that returns them
/// at once (`oversize_threshold`): without it, 12 refused 16 MiB changesets
/// left the server 170 MiB larger, over `tests/it/memory.rs`'s bound.
#[allow(non_upper_case_globals)]
#[unsafe(no_mangle)]
pub static malloc_conf: &[u8; 87] =
    b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,oversize_threshold:2097152\0";

/// What `agentvfs --help` says first.
const ABOUT: &str = "A gRPC file system for AI agents: one path space over four tiers, \
State (per session, in memory), Store (RocksDB), Filesystem (sandboxed real directories) \
and Object (an S3-compatible bucket many servers share), with grants, history and \
streaming search. `serve` runs the server, `mcp` serves MCP on stdio, and every other \
verb is a client of a running server.";

/// The command line.
#[derive(Parser)]
#[command(version, about = ABOUT)]
struct Cli {
    #[command(flatten)]
    connection: agentvfs::cli::Connection,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (embedded default configuration unless --config).
    Serve(ServeArgs),
    /// Serve MCP on stdin/stdout for one local agent, in process, as the
    /// principal --token names (docs/mcp.md).
    Mcp(McpArgs),
    /// Check a configuration file without starting the server.
    Config {
        /// What to do.
        #[command(subcommand)]
        action: ConfigVerb,
    },
    /// Print the completion script of a shell (bash, zsh, fish, elvish,
    /// powershell) to stdout: `agentvfs completions bash > ~/.local/share/bash-completion/completions/agentvfs`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Mount a server directory here with FUSE (docs/mount.md): every shell
    /// tool sees its files; a close commits a changed file as one version.
    Mount(agentvfs::mount::MountArgs),
    /// Client verbs: talk to a running server.
    #[command(flatten)]
    Client(agentvfs::cli::Verb),
}

#[derive(Subcommand)]
enum ConfigVerb {
    /// Validate FILE as `serve --config FILE` would, without starting:
    /// its syntax and values, the data directories and the listener.
    Check {
        /// TOML configuration file.
        file: PathBuf,
    },
}

/// The connection flags, global so a client verb takes them before or
/// after its name: the ids of the ones each other command does not take.
/// Given to such a command (before or after its name) they are an error,
/// not silently ignored, and its `--help` does not list them.
const CLIENT_FLAGS: &[&str] = &["addr", "token", "session", "label", "branch"];
const NOT_TAKEN: &[(&str, &[&str])] = &[
    ("serve", CLIENT_FLAGS),
    ("mcp", &["addr"]),
    ("config", CLIENT_FLAGS),
    ("completions", CLIENT_FLAGS),
];

/// The parser: [`Cli`]'s, with each command of [`NOT_TAKEN`] holding a
/// hidden flag of each id it does not take that refuses any value (a
/// global flag is not copied into a command that has its own of that id).
fn command() -> clap::Command {
    NOT_TAKEN.iter().fold(Cli::command(), |cli, (name, ids)| {
        cli.mut_subcommand(*name, |sub| {
            ids.iter().fold(sub, |sub, id| {
                let refusal =
                    format!("`{name}` does not take --{id}: it is a flag of the client verbs");
                sub.arg(
                    clap::Arg::new(*id)
                        .long(*id)
                        .hide(true)
                        .value_parser(move |_: &str| Err::<String, String>(refusal.clone())),
                )
            })
        })
    })
}

/// The client flag given before a command that does not take it.
fn misplaced_flag(matches: &clap::ArgMatches) -> Option<String> {
    let (name, _) = matches.subcommand()?;
    let (_, ids) = NOT_TAKEN.iter().find(|(n, _)| *n == name)?;
    ids.iter()
        .find(|id| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
        .map(|id| format!("`{name}` does not take --{id}: it is a flag of the client verbs"))
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML configuration file (see agentvfs.example.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Listen address, overriding the configuration.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Directory served by the filesystem mount at /workspace/.
    #[arg(long)]
    root: Option<PathBuf>,
    /// Data directory of the store mount at /memories/.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Allow a non-loopback listener with no principal configured.
    #[arg(long)]
    allow_unauthenticated: bool,
}

#[derive(clap::Args)]
struct McpArgs {
    /// TOML configuration file (see agentvfs.example.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Directory served by the filesystem mount at /workspace/.
    #[arg(long)]
    root: Option<PathBuf>,
    /// Data directory of the store mount at /memories/.
    #[arg(long)]
    data: Option<PathBuf>,
}

/// The configuration in the file at `path`.
fn read_config(path: &Path) -> Result<Config, String> {
    let source = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    config::parse(&path.display().to_string(), &source).map_err(|e| e.to_string())
}

fn load(args: &ServeArgs) -> Result<Config, String> {
    let mut config = match &args.config {
        None => config::embedded_default(),
        Some(path) => read_config(path)?,
    };
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    for mount in &mut config.mounts {
        match &mut mount.tier {
            TierConfig::Filesystem { root, .. } if mount.prefix.as_str() == "/workspace" => {
                if let Some(dir) = &args.root {
                    *root = dir.clone();
                }
            }
            TierConfig::Store { path, .. } if mount.prefix.as_str() == "/memories" => {
                if let Some(dir) = &args.data {
                    *path = dir.clone();
                }
            }
            _ => {}
        }
    }
    Ok(config)
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is
/// called, not when first polled, so a signal sent as soon as the server
/// announces its address is never missed.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>, String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
    let mut int =
        signal(SignalKind::interrupt()).map_err(|e| format!("cannot handle SIGINT: {e}"))?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::info!("shutting down");
    })
}

/// `agentvfs mcp`: the server's tiers in this process, MCP on stdio. The
/// connection's token and session pick the one caller every request acts as.
async fn mcp(args: McpArgs, connection: agentvfs::cli::Connection) -> Result<(), String> {
    let serve_args = ServeArgs {
        config: args.config,
        listen: None,
        root: args.root,
        data: args.data,
        allow_unauthenticated: false,
    };
    let config = load(&serve_args)?;
    startup::check_data_dirs(&config)?;
    startup::raise_open_file_limit();
    let app = startup::build_app(&config)?;
    let authorization = connection.token.map(|token| format!("Bearer {token}"));
    let credentials = agentvfs::service::Credentials {
        authorization: authorization.as_deref(),
        session: connection.session.as_deref(),
        namespace: None,
        label: connection.label.as_deref(),
        branch: connection.branch.as_deref(),
    };
    let caller = agentvfs::service::Caller::identify(&app.auth, credentials)
        .map_err(|e| format!("{e} (pass the principal's token with --token or AGENTVFS_TOKEN)"))?;
    let limits = agentvfs::service::Limits::new(app.limits);
    let service = agentvfs::service::Service::new(app.backend, app.max_file_bytes, limits)
        .with_audit(app.audit);
    let tools = agentvfs::tools::Tools::new(service.clone(), app.tools);
    agentvfs::mcp::stdio::serve(tools, service, caller, &app.mcp).await
}

/// `agentvfs config check FILE`: every check `serve --config FILE` makes
/// before it opens a tier, then a line naming what the file serves.
fn check_config(file: &Path) -> Result<(), String> {
    let config = read_config(file)?;
    startup::check_data_dirs(&config)?;
    startup::check_listener(&config, false)?;
    let mounts: Vec<String> = config.mounts.iter().map(|m| m.prefix.to_string()).collect();
    println!(
        "{}: valid; listens on {}, mounts {}",
        file.display(),
        config.listen,
        mounts.join(", ")
    );
    Ok(())
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    let config = load(&args)?;
    startup::check_listener(&config, args.allow_unauthenticated)?;
    startup::check_data_dirs(&config)?;
    startup::raise_open_file_limit();
    let app = startup::build_app(&config)?;
    let shutdown = shutdown_signal()?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    // Tests and scripts read the first line to learn an ephemeral port; the
    // banner follows in the same write, so a reader that stops after that
    // line never makes a later write fail.
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let banner = format!(
        "agentvfs listening on {addr}\n{}\n",
        startup::banner(&config, addr)
    );
    let mut stdout = std::io::stdout().lock();
    std::io::Write::write_all(&mut stdout, banner.as_bytes())
        .and_then(|()| std::io::Write::flush(&mut stdout))
        .map_err(|e| format!("cannot print the start-up banner: {e}"))?;
    drop(stdout);
    agentvfs::server::serve(listener, app, shutdown)
        .await
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    // Arguments first: `--help`, `--version` and a usage error need no
    // runtime, and client verbs must not pay for what only the server
    // needs (docs/performance.md § The CLI).
    let matches = command().get_matches();
    if let Some(err) = misplaced_flag(&matches) {
        command()
            .error(clap::error::ErrorKind::ArgumentConflict, err)
            .exit();
    }
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
    let result = match cli.command {
        Command::Client(verb) => return client(cli.connection, verb),
        Command::Serve(args) => server(serve(args)),
        Command::Mcp(args) => server(mcp(args, cli.connection)),
        Command::Mount(args) => {
            init_tracing();
            agentvfs::mount::run(cli.connection, args)
        }
        Command::Config {
            action: ConfigVerb::Check { file },
        } => check_config(&file),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut command(), "agentvfs", &mut std::io::stdout());
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("agentvfs: {err}");
            ExitCode::FAILURE
        }
    }
}

/// One client verb: one connection and one call, so one thread is enough.
/// Logging is set up only when `RUST_LOG` asks for it: errors are printed
/// here, and the filter's set-up would otherwise cost every call. The exit
/// status is the verb's (`grep`: 1 when nothing matched, 2 on an error).
fn client(connection: agentvfs::cli::Connection, verb: agentvfs::cli::Verb) -> ExitCode {
    if std::env::var_os("RUST_LOG").is_some() {
        init_tracing();
    }
    let failure = verb.failure_status();
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| format!("cannot start the async runtime: {err}"))
        .and_then(|runtime| runtime.block_on(agentvfs::cli::run(connection, verb)));
    match result {
        Ok(outcome) => ExitCode::from(outcome.exit_status(failure)),
        Err(err) => {
            eprintln!("agentvfs: {err}");
            ExitCode::from(failure)
        }
    }
}

/// `serve` and `mcp`: logging on, and a runtime with a worker per core.
fn server(work: impl Future<Output = Result<(), String>>) -> Result<(), String> {
    init_tracing();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|err| format!("cannot start the async runtime: {err}"))?;
    runtime.block_on(work)
}

/// Logs to stderr, filtered by `RUST_LOG` (default `agentvfs=info`).
fn init_tracing() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "agentvfs=info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
