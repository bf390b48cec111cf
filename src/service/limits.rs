//! The server's bounds on streams and searches (`[limits]` in the config).
//!
//! A stream that waits on its client must not hold server resources without
//! a bound, or a few hundred stalled clients exhaust tokio's blocking pool
//! (512 threads) and every other call stalls behind them. So:
//! - each principal may run at most `max_streams_per_principal` ReadBytes,
//!   WriteBytes, Grep and Glob streams at once ([`Limits::stream`]); a handle
//!   counts against the principal that minted it;
//! - the whole server runs at most `max_concurrent_searches` searches
//!   ([`Limits::search`]), well below the blocking pool's size;
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
use crate::config::LimitsConfig;
use crate::error::{Error, Result};
use crate::service::memory::MemoryBudget;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bounds and their current use, shared by every service.
#[derive(Clone)]
pub struct Limits {
    config: LimitsConfig,
    searches: Arc<Semaphore>,
    /// Streams running per principal (by `Principal::owner`); absent at zero.
    streams: Arc<Mutex<HashMap<String, usize>>>,
    memory: MemoryBudget,
}

/// One admitted stream of a principal; dropping it gives the slot back.
#[must_use = "the stream is admitted only while the permit lives"]
pub struct StreamPermit {
    streams: Arc<Mutex<HashMap<String, usize>>>,
    owner: String,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = streams.get_mut(&self.owner) {
            *count -= 1;
            if *count == 0 {
                streams.remove(&self.owner);
            }
        }
    }
}

/// One admitted search; dropping it gives the slot back.
pub type SearchPermit = OwnedSemaphorePermit;

impl Limits {
    /// Fresh bounds from the configuration.
    pub fn new(config: LimitsConfig) -> Limits {
        Limits {
            config,
            searches: Arc::new(Semaphore::new(config.max_concurrent_searches)),
            streams: Arc::default(),
            memory: MemoryBudget::new(config.memory_bytes, config.memory_bytes_per_principal),
        }
    }

    /// The bounds of one changeset.
    pub fn changeset(&self) -> super::ChangesetLimits {
        super::ChangesetLimits::default()
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

    /// Admits one more stream of `principal`, or refuses it
    /// (RESOURCE_EXHAUSTED) when it already runs its maximum.
    pub fn stream(&self, principal: &Principal) -> Result<StreamPermit> {
        let owner = principal.owner.as_str();
        let max = self.config.max_streams_per_principal;
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let count = streams.entry(owner.to_owned()).or_default();
        if *count >= max {
            return Err(Error::OverLimit {
                limit: "max_streams_per_principal",
                message: format!(
                    "principal {owner:?} already runs {max} streams (ReadBytes, WriteBytes, \
                     Grep, Glob, Watch), the server's max_streams_per_principal; finish or \
                     cancel one first"
                ),
            });
        }
        *count += 1;
        Ok(StreamPermit {
            streams: self.streams.clone(),
            owner: owner.to_owned(),
        })
    }

    /// Admits one more search, or refuses it (RESOURCE_EXHAUSTED) when the
    /// server runs its maximum.
    pub fn search(&self) -> Result<SearchPermit> {
        self.searches
            .clone()
            .try_acquire_owned()
            .map_err(|_| Error::OverLimit {
                limit: "max_concurrent_searches",
                message: format!(
                    "the server already runs {} searches, its max_concurrent_searches; retry \
                     shortly",
                    self.config.max_concurrent_searches
                ),
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
        let held = limits.search().unwrap();
        let err = limits.search().err().unwrap();
        assert!(err.to_string().contains("max_concurrent_searches"), "{err}");
        drop(held);
        assert!(limits.search().is_ok());
    }
}
