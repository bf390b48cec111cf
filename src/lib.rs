//! agentvfs: a gRPC file system that AI agents can share safely.
//!
//! One logical path space joins four tiers behind a mount table: a
//! per-session scratch area in memory (State), a persistent area on RocksDB
//! (Store), sandboxed real directories (Filesystem) and files in an
//! S3-compatible bucket shared by many servers (Object, docs/object-storage.md).
//! Every call is checked
//! against the caller's grants; Grep and Glob stream results in path order
//! under visited-count and time budgets.
//!
//! # Layout
//!
//! - [`path`]: logical path validation, the one place it happens, and the
//!   order key that makes a subtree one key range;
//! - [`error`]: the domain error and its one mapping to gRPC statuses;
//! - [`entry`], [`scope`]: what a path names, and whose data a call sees;
//! - [`change`], [`history`]: change events, their cursors, retained
//!   versions and which versions a mount keeps (docs/contract.md § Changes
//!   and history);
//! - [`access`], [`auth`]: principals, grants, tokens and handles (docs/contract.md § Grants);
//! - [`backend`]: the backend protocol and its tiers, [`backend::composite`]
//!   being the mount table;
//! - [`search`]: the one Grep/Glob engine every tier feeds;
//! - [`text`]: decoding, cat -n numbering and line windows, edits, regex
//!   windows, the Grep tool's text (docs/contract.md § Text formats);
//! - [`tools`]: the LLM tools (LS, Glob, Grep, Read, Write, Edit, MultiEdit)
//!   answering in the standard envelope, with an output budget;
//! - [`service`]: the application layer, where every call's domain steps
//!   happen once (grants, size limits, edits, admission, blocking work);
//! - [`server`]: tonic services (thin adapters over [`service`]),
//!   interceptor, health, reflection, and the listener that also serves
//!   MCP at `/mcp`;
//! - [`mcp`]: the Model Context Protocol front end (tools and resources,
//!   streamable HTTP and stdio), a third adapter over [`service`];
//! - [`config`], [`startup`]: configuration and turning it into a server;
//! - [`cli`]: the client verbs of the `agentvfs` command (`ls`, `cat`, `grep`, ...);
//! - [`pb`]: the generated protobuf code.
//!
//! A request flows: interceptor (authenticates, attaches the caller) → gRPC
//! adapter (parses the request) → one [`service::Service`] call (checks the
//! grants, runs one `Backend` call on a blocking thread) → back through
//! `From<Error> for Status`. docs/architecture.md draws the layers.

#![deny(missing_docs)]

pub mod access;
pub mod audit;
pub mod auth;
pub mod backend;
pub mod change;
pub mod cli;
pub mod config;
pub mod entry;
pub mod error;
pub mod history;
pub mod mcp;
pub mod metrics;
pub mod mount;
pub mod path;
pub mod pb;
pub mod private_file;
pub mod scope;
pub mod search;
pub mod server;
pub mod service;
pub mod startup;
pub mod text;
pub mod tools;

pub use error::{Error, Result};
pub use path::VfsPath;
