//! The `agentvfs` command: parse arguments, set up tracing, load the
//! configuration, bind, and hand over to [`agentvfs::server::serve`].

use agentvfs::config::{self, Config, TierConfig};
use agentvfs::startup;
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// A gRPC file system for AI agents.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (embedded default configuration unless --config).
    Serve(ServeArgs),
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

fn load(args: &ServeArgs) -> Result<Config, String> {
    let mut config = match &args.config {
        None => config::embedded_default(),
        Some(path) => {
            let source =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            config::parse(&path.display().to_string(), &source).map_err(|e| e.to_string())?
        }
    };
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    for mount in &mut config.mounts {
        match &mut mount.tier {
            TierConfig::Filesystem { root } if mount.prefix.as_str() == "/workspace" => {
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

/// Resolves on SIGINT or SIGTERM. The handlers are installed by the caller
/// before it announces the listener, so a signal sent right after startup
/// shuts down cleanly instead of killing the process.
async fn shutdown_signal(mut term: tokio::signal::unix::Signal) {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(cause = %err, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    let config = load(&args)?;
    startup::check_listener(&config, args.allow_unauthenticated)?;
    let app = startup::build_app(&config)?;
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot listen for SIGTERM: {e}"))?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    // Tests and scripts read this line to learn an ephemeral port.
    println!(
        "agentvfs listening on {}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    agentvfs::server::serve(listener, app, shutdown_signal(term))
        .await
        .map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "agentvfs=info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("agentvfs: {err}");
            ExitCode::FAILURE
        }
    }
}
