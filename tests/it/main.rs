//! Integration tests: each starts the real `agentvfs` binary on an ephemeral
//! loopback port and talks gRPC to it.
//!
//! Modules by topic:
//! - `server`: health, reflection, startup and shutdown;
//! - `files`: every Filesystem RPC on the State tier, and every error kind;
//! - `search`: Grep and Glob semantics, streaming, budgets, cancellation;
//! - `store`: the RocksDB tier at /memories: namespaces, crashes, concurrency.

mod files;
mod search;
mod server;
mod store;
mod util;
