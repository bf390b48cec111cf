//! Integration tests: each starts the real `agentvfs` binary on an ephemeral
//! loopback port and talks gRPC to it.
//!
//! Modules by topic:
//! - `server`: health, reflection, startup and shutdown;
//! - `files`: every Filesystem RPC on the State tier, and every error kind;
//! - `search`: Grep and Glob semantics, streaming, budgets, cancellation;
//! - `sandbox`: the Filesystem tier's confinement, one test per attack;
//! - `fs_search`: Grep and Glob over real directories (ignore rules, binary,
//!   size limits, order, budgets, back-pressure).

mod files;
mod fs_search;
mod sandbox;
mod search;
mod server;
mod util;
