//! Integration tests: each starts the real `agentvfs` binary on an ephemeral
//! loopback port and talks gRPC to it.
//!
//! Modules by topic:
//! - `server`: health, reflection, startup and shutdown;
//! - `cli`: the client verbs of the `agentvfs` command;
//! - `files`: every Filesystem RPC on the State tier, and every error kind;
//! - `search`: Grep and Glob semantics, streaming, budgets, cancellation;
//! - `access`: principals, grants and handles (docs/contract.md § Grants);
//! - `mounts`: the mount table's routing, listing and cross-mount search;
//! - `conformance`: the shared cases of `tests/conformance/` that every client
//!   runs too;
//! - `sandbox`: the Filesystem tier's confinement, one test per attack;
//! - `links`: grants hold through symbolic links; the Filesystem tier's other
//!   hostile-input defences (setuid, time stamps, deep trees, kill -9);
//! - `fs_search`: Grep and Glob over real directories (ignore rules, binary,
//!   size limits, order, budgets, back-pressure);
//! - `tools`: the LLM tools' envelopes, golden texts and an agent loop;
//! - `history`: the change feed (Watch live, resumed across `kill -9`,
//!   expired cursors, grants, slow watchers, changes made on disk) and
//!   version history (retention under load, the History tool);
//! - `store`: the RocksDB tier at /memories: namespaces, crashes, concurrency;
//! - `limits`: streams per principal, searches server-wide, idle timeouts and
//!   oversized messages against stalled and hostile clients;
//! - `object`: the object tier on a real S3 server (versitygw), several
//!   servers sharing one bucket: lost updates, create-only races, stale
//!   versions, `kill -9`, an unreachable store, a wrong bucket or key, the
//!   orphan blob sweep;
//! - `moves`: Move on the State and Store tiers, in-process: every refusal,
//!   versions, memory accounting and atomicity under concurrent moves;
//! - `fs_moves`: Move on the Filesystem tier and the mount table, through
//!   the server: links on either path, races, cross-mount refusals;
//! - `mcp_http`: the MCP endpoint at `/mcp` against hostile HTTP clients
//!   (stalled and oversized bodies, foreign hosts, malformed requests);
//! - `memory`: the memory budget against hostile agents (issue 21): streams
//!   cut and reopened round after round, stalled uploads, unfinished MCP
//!   bodies, concurrent large answers and changesets, connections per
//!   principal, each measured on the server's resident memory;
//! - `modules`: the module graph of `src/` has no cycle;
//! - `mount`: `agentvfs mount` through the kernel's FUSE: shell workloads
//!   against a local directory, freshness, one version per close, conflicts,
//!   grants, random operations against a shadow directory, `kill -9`;
//! - `disclosure`: no answer of any RPC, tool or MCP method shows what its
//!   caller may not see (a property test over random grants);
//! - `copy`: the Copy RPC on every mount, its grants and labels, the
//!   Delete, Move and Copy tools, and the Read tool's media reads;
//! - `rewind`: labels, sessions and changeset ids in Watch and history, and
//!   Rewind: a recorded turn undone byte for byte on the State, Store and
//!   object tiers, conflicts, dry runs and selectors;
//! - `branch_tools`: the branch LLM tools over Invoke and MCP, and handles
//!   bound to a branch.
//! - `search_index`: indexed Grep against the scan on two servers, under
//!   random changes, on the State and Store tiers; the Store's persisted
//!   index under kill -9 and stored faults, and the self-check
//!   (docs/search-index.md).
//! - `search_index_fs`: the same differential on the Filesystem tier, with
//!   the tree changed on disk by this process and kill -9 of the indexing
//!   server.
//! - `search_index_object`: the same differential on the object tier, across
//!   three servers on one bucket.
//! - `search_index_learning`: copies, moves, changesets, restores and
//!   streamed writes teach the index what they commit, on State and the
//!   Store.

#[path = "../support/launch.rs"]
mod launch;
#[path = "../support/s3.rs"]
mod s3;

mod access;
mod apply_patch;
mod audit;
mod branch;
mod branch_tools;
mod changesets;
mod claude_tools;
mod cli;
mod conformance;
mod copy;
mod disclosure;
mod files;
mod fs_moves;
mod fs_search;
mod history;
mod limits;
mod links;
mod mcp_http;
mod memory;
mod modules;
mod mount;
mod mounts;
mod moves;
mod object;
mod rewind;
mod sandbox;
mod search;
mod search_index;
mod search_index_fs;
mod search_index_learning;
mod search_index_object;
mod server;
mod store;
mod tools;
mod util;
