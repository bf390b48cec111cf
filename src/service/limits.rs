//! The server's bounds on streams and searches (`[limits]` in the config).
//!
//! A stream that waits on its client must not hold server resources without
//! a bound, or a few hundred stalled clients exhaust tokio's blocking pool
//! (512 threads) and every other call stalls behind them. So:
//! - each principal may run at most `max_streams_per_principal` ReadBytes,
//!   WriteBytes, Grep and Glob streams at once ([`Limits::stream`]); a handle
//!   counts against the principal that minted it;
//! - the whole server runs at most `max_concurrent_searches` searches
//!   ([`Limits::search`]), well below the blocking pool's size, and one
//!   principal at most `max_searches_per_principal` of them: a search whose
//!   client stopped reading keeps its slot until the idle timeout cuts it,
//!   so without a share one principal's stalled Greps could take every
//!   slot, round after round, and refuse everyone else's searches;
//! - a stream waiting on its client longer than the idle timeout is cut and
//!   gives its permits back.
//!
//! The memory the calls hold is bounded by the [`MemoryBudget`] kept here
//! (`super::memory`).
//!
//! Over a limit a call is refused at once with RESOURCE_EXHAUSTED naming the
//! limit, rather than queued: a queue would only move the stall elsewhere.
//! A permit is held by the work that uses the resource (the search thread,
//! the ReadBytes producer, the WriteBytes handler), not by the response
//! stream, so a client that never reads again cannot keep it.

use crate::access::Principal;
use crate::error::{Error, Result};
use crate::service::memory::MemoryBudget;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Default `max_streams_per_connection`: HTTP/2 streams (calls) one
/// connection may have open at once.
pub const DEFAULT_MAX_STREAMS_PER_CONNECTION: u32 = 128;
/// Default `max_streams_per_principal`: ReadBytes, WriteBytes, Grep and Glob
/// streams one principal may have running at once.
pub const DEFAULT_MAX_STREAMS_PER_PRINCIPAL: u64 = 32;
/// Default `max_concurrent_searches`: Grep and Glob runs (Filesystem and
/// Tools services together) at once, server-wide.
pub const DEFAULT_MAX_CONCURRENT_SEARCHES: u64 = 16;
/// Default `max_searches_per_principal`: half the server's searches, so one
/// principal whose clients stall can never refuse every other principal's.
pub const DEFAULT_MAX_SEARCHES_PER_PRINCIPAL: u64 = DEFAULT_MAX_CONCURRENT_SEARCHES / 2;
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
/// Default `max_branches_per_principal`: branches one principal (with its
/// handles) may keep in a namespace; each is a record every ListBranches
/// of the namespace reads and answers.
pub const DEFAULT_MAX_BRANCHES_PER_PRINCIPAL: u64 = 100;
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
    /// Searches one principal may run at once (within
    /// `max_concurrent_searches`); more are refused with RESOURCE_EXHAUSTED.
    /// A handle counts against the principal that minted it.
    pub max_searches_per_principal: usize,
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
    /// The bounds of one changeset (`changeset_max_operations`,
    /// `changeset_max_bytes`, `changeset_timeout_ms`).
    pub changeset: super::ChangesetLimits,
    /// Branches one principal (with its handles) may keep in a namespace;
    /// a fork past it is refused with RESOURCE_EXHAUSTED
    /// (docs/branches.md § Fork).
    pub max_branches_per_principal: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_streams_per_connection: DEFAULT_MAX_STREAMS_PER_CONNECTION,
            max_streams_per_principal: DEFAULT_MAX_STREAMS_PER_PRINCIPAL as usize,
            max_concurrent_searches: DEFAULT_MAX_CONCURRENT_SEARCHES as usize,
            max_searches_per_principal: DEFAULT_MAX_SEARCHES_PER_PRINCIPAL as usize,
            stream_idle_timeout: Duration::from_secs(DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS),
            memory_bytes: DEFAULT_MEMORY_BYTES,
            memory_bytes_per_principal: DEFAULT_MEMORY_BYTES_PER_PRINCIPAL,
            max_connections: DEFAULT_MAX_CONNECTIONS as usize,
            max_connections_per_principal: DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL as usize,
            http2_window_bytes: DEFAULT_HTTP2_WINDOW_BYTES as u32,
            http2_send_buffer_bytes: DEFAULT_HTTP2_SEND_BUFFER_BYTES as usize,
            changeset: super::ChangesetLimits::default(),
            max_branches_per_principal: DEFAULT_MAX_BRANCHES_PER_PRINCIPAL as usize,
        }
    }
}

/// The bounds and their current use, shared by every service.
#[derive(Clone)]
pub struct Limits {
    config: LimitsConfig,
    searches: Arc<Semaphore>,
    /// Streams running per principal.
    streams: PerPrincipal,
    /// Searches running per principal.
    searches_by_principal: PerPrincipal,
    memory: MemoryBudget,
}

/// How many of something each principal holds now, by `Principal::owner`
/// (absent at zero).
#[derive(Clone, Default)]
struct PerPrincipal(Arc<Mutex<HashMap<String, usize>>>);

impl PerPrincipal {
    /// How many are held now, by every principal together.
    fn total(&self) -> usize {
        let counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        counts.values().sum()
    }

    /// One more for `principal`'s owner, or RESOURCE_EXHAUSTED naming
    /// `limit` when it holds `max` of `what` already.
    fn take(
        &self,
        principal: &Principal,
        (max, limit): (usize, &'static str),
        what: &str,
    ) -> Result<PrincipalSlot> {
        let owner = principal.owner.as_str();
        let mut counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(owner.to_owned()).or_default();
        if *count >= max {
            return Err(Error::OverLimit {
                limit,
                message: format!(
                    "principal {owner:?} already runs {max} {what}, the server's {limit}; \
                     finish or cancel one first"
                ),
            });
        }
        *count += 1;
        Ok(PrincipalSlot {
            counts: self.clone(),
            owner: owner.to_owned(),
        })
    }
}

/// One thing counted for its principal; dropping it gives it back.
struct PrincipalSlot {
    counts: PerPrincipal,
    owner: String,
}

impl Drop for PrincipalSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = counts.get_mut(&self.owner) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.owner);
            }
        }
    }
}

/// One admitted stream of a principal; dropping it gives the slot back.
#[must_use = "the stream is admitted only while the permit lives"]
pub struct StreamPermit {
    _slot: PrincipalSlot,
}

/// A client sent nothing for the idle timeout while the server waited on
/// it ([`Limits::from_client`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientIdle {
    /// The idle timeout, in seconds (`stream_idle_timeout_seconds`).
    pub seconds: u64,
}

/// One admitted search, of the server and of its principal; dropping it
/// gives both slots back.
#[must_use = "the search is admitted only while the permit lives"]
pub struct SearchPermit {
    _server: OwnedSemaphorePermit,
    _principal: PrincipalSlot,
}

impl Limits {
    /// Fresh bounds from the configuration.
    pub fn new(config: LimitsConfig) -> Limits {
        Limits {
            config,
            searches: Arc::new(Semaphore::new(config.max_concurrent_searches)),
            streams: PerPrincipal::default(),
            searches_by_principal: PerPrincipal::default(),
            memory: MemoryBudget::new(config.memory_bytes, config.memory_bytes_per_principal),
        }
    }

    /// The bounds of one changeset.
    pub fn changeset(&self) -> super::ChangesetLimits {
        self.config.changeset
    }

    /// The memory budget of calls in flight.
    pub fn memory(&self) -> &MemoryBudget {
        &self.memory
    }

    /// The configured bounds.
    pub fn config(&self) -> &LimitsConfig {
        &self.config
    }

    /// How long a stream may wait on its client.
    pub fn idle_timeout(&self) -> Duration {
        self.config.stream_idle_timeout
    }

    /// Waits at most the idle timeout for what a client sends next (an
    /// upload's next message, the rest of an MCP request body): the one
    /// bound on the server's waits on a client's request, as the transport's
    /// is on a client taking an answer (`src/server/transport.rs`). The
    /// caller words the refusal for its protocol.
    pub async fn from_client<F: Future>(
        &self,
        next: F,
    ) -> std::result::Result<F::Output, ClientIdle> {
        let idle = self.idle_timeout();
        tokio::time::timeout(idle, next)
            .await
            .map_err(|_| ClientIdle {
                seconds: idle.as_secs(),
            })
    }

    /// Streams running now (ReadBytes, WriteBytes, Grep, Glob, Watch), of
    /// every principal: the permits [`Limits::stream`] has handed out and
    /// not yet taken back, read by the server's metrics.
    pub fn open_streams(&self) -> usize {
        self.streams.total()
    }

    /// Admits one more stream of `principal`, or refuses it
    /// (RESOURCE_EXHAUSTED) when it already runs its maximum.
    pub fn stream(&self, principal: &Principal) -> Result<StreamPermit> {
        let max = self.config.max_streams_per_principal;
        let slot = self.streams.take(
            principal,
            (max, "max_streams_per_principal"),
            "streams (ReadBytes, WriteBytes, Grep, Glob, Watch)",
        )?;
        Ok(StreamPermit { _slot: slot })
    }

    /// Admits one more search of `principal`, or refuses it
    /// (RESOURCE_EXHAUSTED) when the server or the principal runs its
    /// maximum. The server's bound is asked first: a principal's share may
    /// equal the server's (docs/configuration.md), and a full server is what
    /// everyone's next search meets.
    pub fn search(&self, principal: &Principal) -> Result<SearchPermit> {
        let server = self
            .searches
            .clone()
            .try_acquire_owned()
            .map_err(|_| Error::OverLimit {
                limit: "max_concurrent_searches",
                message: format!(
                    "the server already runs {} searches, its max_concurrent_searches; retry \
                     shortly",
                    self.config.max_concurrent_searches
                ),
            })?;
        let max = self.config.max_searches_per_principal;
        let slot = self.searches_by_principal.take(
            principal,
            (max, "max_searches_per_principal"),
            "searches (Grep, Glob)",
        )?;
        Ok(SearchPermit {
            _server: server,
            _principal: slot,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(name: &str, owner: &str) -> Principal {
        Principal {
            name: name.into(),
            owner: owner.into(),
            ..Principal::local()
        }
    }

    #[test]
    fn streams_are_counted_per_root_principal_and_given_back_on_drop() {
        let limits = Limits::new(LimitsConfig {
            max_streams_per_principal: 2,
            ..LimitsConfig::default()
        });
        let first = limits.stream(&principal("reader", "reader")).unwrap();
        let _second = limits
            .stream(&principal("handle of reader (depth 2)", "reader"))
            .unwrap();
        let err = limits
            .stream(&principal("handle of reader", "reader"))
            .err()
            .unwrap();
        assert_eq!(err.grpc_code(), tonic::Code::ResourceExhausted);
        assert!(
            err.to_string().contains("max_streams_per_principal"),
            "{err}"
        );
        let _other = limits.stream(&principal("agent", "agent")).unwrap();
        drop(first);
        let _again = limits.stream(&principal("reader", "reader")).unwrap();
    }

    #[test]
    fn searches_are_bounded_server_wide() {
        let limits = Limits::new(LimitsConfig {
            max_concurrent_searches: 1,
            ..LimitsConfig::default()
        });
        let held = limits.search(&principal("a", "a")).unwrap();
        let err = limits.search(&principal("b", "b")).err().unwrap();
        assert!(err.to_string().contains("max_concurrent_searches"), "{err}");
        drop(held);
        assert!(limits.search(&principal("b", "b")).is_ok());
    }

    /// One principal's searches (its handles' included) take at most its
    /// share of the server's; a refusal for the server takes none of it.
    #[test]
    fn searches_are_bounded_per_root_principal() {
        let limits = Limits::new(LimitsConfig {
            max_concurrent_searches: 3,
            max_searches_per_principal: 2,
            ..LimitsConfig::default()
        });
        let first = limits.search(&principal("reader", "reader")).unwrap();
        let _second = limits
            .search(&principal("handle of reader", "reader"))
            .unwrap();
        let err = limits.search(&principal("reader", "reader")).err().unwrap();
        assert_eq!(err.grpc_code(), tonic::Code::ResourceExhausted);
        assert!(
            err.to_string().contains("max_searches_per_principal"),
            "{err}"
        );
        let _other = limits.search(&principal("agent", "agent")).unwrap();
        let err = limits.search(&principal("agent", "agent")).err().unwrap();
        assert!(err.to_string().contains("max_concurrent_searches"), "{err}");
        drop(first);
        let _again = limits.search(&principal("agent", "agent")).unwrap();
        let err = limits.search(&principal("reader", "reader")).err().unwrap();
        assert!(err.to_string().contains("max_concurrent_searches"), "{err}");
    }
}
