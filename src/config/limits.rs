//! The `[limits]` section: bounds on streams, searches, memory and
//! connections that keep stalled or hostile clients from holding the
//! server's threads and memory; every value is checked against its range.

use super::ConfigError;
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

/// Default `max_streams_per_connection`: HTTP/2 streams (calls) one
/// connection may have open at once.
pub const DEFAULT_MAX_STREAMS_PER_CONNECTION: u32 = 128;
/// Default `max_streams_per_principal`: ReadBytes, WriteBytes, Grep and Glob
/// streams one principal may have running at once.
pub const DEFAULT_MAX_STREAMS_PER_PRINCIPAL: u64 = 32;
/// Default `max_concurrent_searches`: Grep and Glob runs (Filesystem and
/// Tools services together) at once, server-wide.
pub const DEFAULT_MAX_CONCURRENT_SEARCHES: u64 = 16;
/// Most `max_concurrent_searches`: a Filesystem search may use up to four
/// threads, and tokio's blocking pool (512 threads) must keep room for every
/// unary call.
pub const MAX_CONCURRENT_SEARCHES: u64 = 64;
/// Default `stream_idle_timeout_seconds`: how long a stream may wait on its
/// client before it is cut.
pub const DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS: u64 = 30;

/// Default `memory_bytes`: bytes held for calls in flight on the whole
/// server (a quarter of a 4 GiB machine).
pub const DEFAULT_MEMORY_BYTES: u64 = 1 << 30;
/// Default `memory_bytes_per_principal`: a principal's share of it, room for
/// one Read of the largest default file (64 MiB, numbered) with some to spare.
pub const DEFAULT_MEMORY_BYTES_PER_PRINCIPAL: u64 = 256 << 20;
/// Default `max_connections`: connections open at once on the server.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 1024;
/// Default `max_connections_per_principal`: connections one principal may
/// have made calls on at once (an HTTP/1.1 MCP client opens one per call
/// in flight).
pub const DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL: u64 = 32;
/// Default `http2_window_bytes`: what a client may send on a stream, and on
/// a connection, before the server has taken it (hyper's default).
pub const DEFAULT_HTTP2_WINDOW_BYTES: u64 = 1 << 20;
/// Default `http2_send_buffer_bytes`: what HTTP/2 buffers per stream for a
/// client that has not granted room for it yet.
pub const DEFAULT_HTTP2_SEND_BUFFER_BYTES: u64 = 256 << 10;

/// The `[limits]` section: bounds that keep stalled or hostile clients from
/// holding the server's threads and memory (see `agentvfs.example.toml`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitsConfig {
    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`: calls one connection may
    /// have open at once (the client queues the rest).
    pub max_streams_per_connection: u32,
    /// ReadBytes, WriteBytes, Grep and Glob streams one principal may have
    /// running at once; more are refused with RESOURCE_EXHAUSTED. A handle
    /// counts against the principal that minted it.
    pub max_streams_per_principal: usize,
    /// Searches running at once on the whole server; more are refused with
    /// RESOURCE_EXHAUSTED. Each holds a blocking thread (and a Filesystem
    /// search up to three more), so this keeps threads free for other calls.
    pub max_concurrent_searches: usize,
    /// The longest a stream waits on its client (the next WriteBytes
    /// message, room for the next ReadBytes, Grep or Glob message) before it
    /// is aborted and its resources are freed; also how long a response
    /// may wait for the client to take its next piece before the call is
    /// reset.
    pub stream_idle_timeout: Duration,
    /// Bytes held for calls in flight on the whole server: request bodies
    /// being received, stream queues with their HTTP/2 buffers, answers
    /// being built and sent (`src/service/memory.rs`).
    pub memory_bytes: u64,
    /// The most of `memory_bytes` one principal's calls may hold at once.
    pub memory_bytes_per_principal: u64,
    /// Connections open at once; more are closed as they arrive.
    pub max_connections: usize,
    /// Connections one principal may have made calls on at once; a call on
    /// one more is refused with RESOURCE_EXHAUSTED.
    pub max_connections_per_principal: usize,
    /// HTTP/2 receive window of a stream and of a connection: request data
    /// the server lets a client send ahead of what it has taken.
    pub http2_window_bytes: u32,
    /// HTTP/2 send buffer of a stream: response data queued beyond what the
    /// client has granted room for.
    pub http2_send_buffer_bytes: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_streams_per_connection: DEFAULT_MAX_STREAMS_PER_CONNECTION,
            max_streams_per_principal: DEFAULT_MAX_STREAMS_PER_PRINCIPAL as usize,
            max_concurrent_searches: DEFAULT_MAX_CONCURRENT_SEARCHES as usize,
            stream_idle_timeout: Duration::from_secs(DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS),
            memory_bytes: DEFAULT_MEMORY_BYTES,
            memory_bytes_per_principal: DEFAULT_MEMORY_BYTES_PER_PRINCIPAL,
            max_connections: DEFAULT_MAX_CONNECTIONS as usize,
            max_connections_per_principal: DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL as usize,
            http2_window_bytes: DEFAULT_HTTP2_WINDOW_BYTES as u32,
            http2_send_buffer_bytes: DEFAULT_HTTP2_SEND_BUFFER_BYTES as usize,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    max_streams_per_connection: Option<Spanned<u64>>,
    max_streams_per_principal: Option<Spanned<u64>>,
    max_concurrent_searches: Option<Spanned<u64>>,
    stream_idle_timeout_seconds: Option<Spanned<u64>>,
    memory_bytes: Option<Spanned<u64>>,
    memory_bytes_per_principal: Option<Spanned<u64>>,
    max_connections: Option<Spanned<u64>>,
    max_connections_per_principal: Option<Spanned<u64>>,
    http2_window_bytes: Option<Spanned<u64>>,
    http2_send_buffer_bytes: Option<Spanned<u64>>,
}

/// Validates `[limits]`: every value must lie in its range.
pub(super) fn parse_limits(
    raw: Option<&RawLimits>,
    max_file_bytes: u64,
    at: &dyn Fn(usize, String) -> ConfigError,
) -> Result<LimitsConfig, ConfigError> {
    let at_least =
        |field: Option<&Spanned<u64>>, name: &str, min: u64, max: u64, default| match field {
            None => Ok(default),
            Some(v) if (min..=max).contains(v.get_ref()) => Ok(*v.get_ref()),
            Some(v) => Err(at(
                v.span().start,
                format!("limits {name} must be between {min} and {max}"),
            )),
        };
    let value = |field: Option<&Spanned<u64>>, name: &str, max: u64, default: u64| {
        at_least(field, name, 1, max, default)
    };
    // A share must hold one whole message (a chunk, a batch, a small file),
    // so neither may go below 1 MiB.
    // By default a share holds one Read of the largest file (the data, the
    // numbered answer) with room to spare, and the server four shares.
    let share_default = DEFAULT_MEMORY_BYTES_PER_PRINCIPAL.max(max_file_bytes.saturating_mul(4));
    let memory_field = raw.and_then(|r| r.memory_bytes.as_ref());
    let memory_bytes = at_least(
        memory_field,
        "memory_bytes",
        1 << 20,
        1 << 50,
        DEFAULT_MEMORY_BYTES.max(share_default.saturating_mul(4)),
    )?;
    let share_field = raw.and_then(|r| r.memory_bytes_per_principal.as_ref());
    let memory_bytes_per_principal = at_least(
        share_field,
        "memory_bytes_per_principal",
        1 << 20,
        1 << 50,
        share_default.min(memory_bytes),
    )?;
    if memory_bytes_per_principal > memory_bytes {
        let start = share_field.or(memory_field).map_or(0, |v| v.span().start);
        return Err(at(
            start,
            format!(
                "limits memory_bytes_per_principal ({memory_bytes_per_principal}) must not exceed \
                 memory_bytes ({memory_bytes})"
            ),
        ));
    }
    Ok(LimitsConfig {
        max_streams_per_connection: value(
            raw.and_then(|r| r.max_streams_per_connection.as_ref()),
            "max_streams_per_connection",
            u64::from(u32::MAX),
            u64::from(DEFAULT_MAX_STREAMS_PER_CONNECTION),
        )? as u32,
        max_streams_per_principal: value(
            raw.and_then(|r| r.max_streams_per_principal.as_ref()),
            "max_streams_per_principal",
            1 << 20,
            DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
        )? as usize,
        max_concurrent_searches: value(
            raw.and_then(|r| r.max_concurrent_searches.as_ref()),
            "max_concurrent_searches",
            MAX_CONCURRENT_SEARCHES,
            DEFAULT_MAX_CONCURRENT_SEARCHES,
        )? as usize,
        stream_idle_timeout: Duration::from_secs(value(
            raw.and_then(|r| r.stream_idle_timeout_seconds.as_ref()),
            "stream_idle_timeout_seconds",
            24 * 3600,
            DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS,
        )?),
        memory_bytes,
        memory_bytes_per_principal,
        max_connections: value(
            raw.and_then(|r| r.max_connections.as_ref()),
            "max_connections",
            1 << 20,
            DEFAULT_MAX_CONNECTIONS,
        )? as usize,
        max_connections_per_principal: value(
            raw.and_then(|r| r.max_connections_per_principal.as_ref()),
            "max_connections_per_principal",
            1 << 20,
            DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL,
        )? as usize,
        // HTTP/2 allows windows up to 2^31 - 1; below 64 KiB (the
        // protocol's default) a connection only slows down.
        http2_window_bytes: at_least(
            raw.and_then(|r| r.http2_window_bytes.as_ref()),
            "http2_window_bytes",
            64 << 10,
            (1 << 31) - 1,
            DEFAULT_HTTP2_WINDOW_BYTES,
        )? as u32,
        http2_send_buffer_bytes: at_least(
            raw.and_then(|r| r.http2_send_buffer_bytes.as_ref()),
            "http2_send_buffer_bytes",
            16 << 10,
            1 << 30,
            DEFAULT_HTTP2_SEND_BUFFER_BYTES,
        )? as usize,
    })
}
