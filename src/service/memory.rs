//! The server's memory budget: the bytes held for requests and responses
//! in flight, server-wide and per principal (`[limits] memory_bytes` and
//! `memory_bytes_per_principal`).
//!
//! Every call has an [`Account`] of its principal (a handle counts against
//! the principal that minted it). What the call is about to hold is charged
//! to it before the memory is taken: request bodies as they arrive (the
//! server's transport, `src/server/transport.rs`), each stream's queue and
//! HTTP/2 buffers when the stream starts, and answers before they are built
//! ([`super::Files::charge`]). A charge that would take the principal past
//! its share, or the server past its total, is refused with
//! RESOURCE_EXHAUSTED naming the limit, and nothing is held: the caller's
//! other calls and everyone else's go on. What an account holds comes back
//! when the call ends, that is when the last clone of the account is
//! dropped (the transport keeps one until the response is sent or reset).
//!
//! The figures are what the server counts, not what the allocator sees: a
//! charge is the largest size of the thing held (a message, a queue of
//! them), so the resident memory of the process stays below the total plus
//! a fixed base.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The server-wide budget and its per-principal shares. Cloning is cheap.
#[derive(Clone)]
pub struct MemoryBudget(Arc<Budget>);

struct Budget {
    total: u64,
    share: u64,
    used: Mutex<Used>,
}

/// What is charged now: in all, and per principal (absent at zero).
#[derive(Default)]
struct Used {
    total: u64,
    by_owner: HashMap<String, u64>,
}

impl MemoryBudget {
    /// A budget of `total` bytes, of which one principal may hold `share`.
    pub fn new(total: u64, share: u64) -> MemoryBudget {
        MemoryBudget(Arc::new(Budget {
            total,
            share: share.min(total),
            used: Mutex::default(),
        }))
    }

    /// A budget that refuses nothing (one local caller, as MCP over stdio).
    pub fn unbounded() -> MemoryBudget {
        MemoryBudget::new(u64::MAX, u64::MAX)
    }

    /// A fresh, empty account of the principal `owner` (see
    /// [`crate::access::Principal::owner`]).
    pub fn account(&self, owner: &str) -> Account {
        Account(Arc::new(Ledger {
            budget: self.clone(),
            owner: owner.to_owned(),
            held: Mutex::new(0),
        }))
    }

    /// Bytes charged now, server-wide and to `owner`.
    pub fn in_use(&self, owner: &str) -> (u64, u64) {
        let used = self.0.used.lock().unwrap_or_else(|p| p.into_inner());
        (used.total, used.by_owner.get(owner).copied().unwrap_or(0))
    }

    /// The `n` principals charged the most now, largest first (ties by
    /// name), with their bytes: the top of the per-principal ledger, so a
    /// metric shows who holds the budget with a bounded label set.
    pub fn top(&self, n: usize) -> Vec<(String, u64)> {
        let used = self.0.used.lock().unwrap_or_else(|p| p.into_inner());
        let mut owners: Vec<(String, u64)> = used
            .by_owner
            .iter()
            .map(|(owner, bytes)| (owner.clone(), *bytes))
            .collect();
        drop(used);
        owners.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        owners.truncate(n);
        owners
    }

    /// Refuses `bytes` more for `owner` when they would cross its share or
    /// the total; `charge` applies them.
    fn take(&self, owner: &str, bytes: u64, what: &str, charge: bool) -> Result<()> {
        let budget = &self.0;
        let mut used = budget.used.lock().unwrap_or_else(|p| p.into_inner());
        let mine = used.by_owner.get(owner).copied().unwrap_or(0);
        if mine.saturating_add(bytes) > budget.share {
            return Err(Error::OverLimit {
                limit: "memory_bytes_per_principal",
                message: format!(
                    "{what} needs {bytes} bytes, which would take principal {owner:?} past its \
                     memory share of {} bytes (memory_bytes_per_principal; its calls in flight \
                     hold {mine}); retry when they have finished, or ask for less",
                    budget.share
                ),
            });
        }
        if used.total.saturating_add(bytes) > budget.total {
            return Err(Error::OverLimit {
                limit: "memory_bytes",
                message: format!(
                    "{what} needs {bytes} bytes, which would take the server past its memory \
                     budget of {} bytes for calls in flight (memory_bytes); retry shortly",
                    budget.total
                ),
            });
        }
        if charge && bytes > 0 {
            used.total += bytes;
            *used.by_owner.entry(owner.to_owned()).or_default() += bytes;
        }
        Ok(())
    }

    /// Gives back `bytes` charged to `owner`.
    fn give_back(&self, owner: &str, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut used = self.0.used.lock().unwrap_or_else(|p| p.into_inner());
        used.total = used.total.saturating_sub(bytes);
        if let Some(mine) = used.by_owner.get_mut(owner) {
            *mine = mine.saturating_sub(bytes);
            if *mine == 0 {
                used.by_owner.remove(owner);
            }
        }
    }
}

/// What one call holds of its principal's share. Clones share the account;
/// everything charged to it comes back when the last clone is dropped.
#[derive(Clone)]
pub struct Account(Arc<Ledger>);

struct Ledger {
    budget: MemoryBudget,
    owner: String,
    held: Mutex<u64>,
}

impl Drop for Ledger {
    fn drop(&mut self) {
        let held = *self.held.get_mut().unwrap_or_else(|p| p.into_inner());
        self.budget.give_back(&self.owner, held);
    }
}

impl Account {
    /// An account that refuses nothing (a caller outside any transport).
    pub fn unbounded() -> Account {
        MemoryBudget::unbounded().account("")
    }

    /// Charges `bytes` that the call is about to hold (`what` names them in
    /// a refusal), or refuses them (RESOURCE_EXHAUSTED naming the limit)
    /// when they would take the principal past its share or the server past
    /// its total.
    pub fn charge(&self, bytes: u64, what: &str) -> Result<()> {
        let ledger = &self.0;
        let mut held = ledger.held.lock().unwrap_or_else(|p| p.into_inner());
        ledger.budget.take(&ledger.owner, bytes, what, true)?;
        *held += bytes;
        Ok(())
    }

    /// Refuses `bytes` the way [`Account::charge`] would, without charging
    /// them: a request that announces its size is refused before any of it
    /// is received.
    pub fn check(&self, bytes: u64, what: &str) -> Result<()> {
        self.0.budget.take(&self.0.owner, bytes, what, false)
    }

    /// Gives back `bytes` the call no longer holds (at most what it holds).
    pub fn release(&self, bytes: u64) {
        let ledger = &self.0;
        let mut held = ledger.held.lock().unwrap_or_else(|p| p.into_inner());
        let bytes = bytes.min(*held);
        *held -= bytes;
        ledger.budget.give_back(&ledger.owner, bytes);
    }
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = *self.0.held.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("Account")
            .field("owner", &self.0.owner)
            .field("held", &held)
            .finish()
    }
}

/// A request body refused by the budget as it arrived (the error of the
/// body the transport meters, `src/server/transport.rs`): tonic finds the
/// status in the error's source, `/mcp` reads the domain error.
#[derive(Debug)]
pub struct BodyRefused {
    /// The refusal (RESOURCE_EXHAUSTED naming the limit).
    pub error: Error,
    status: tonic::Status,
}

impl BodyRefused {
    /// The refusal `error`, with its gRPC status.
    pub fn new(error: Error) -> BodyRefused {
        let status = tonic::Status::from(error.clone());
        BodyRefused { error, status }
    }
}

impl std::fmt::Display for BodyRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for BodyRefused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_principals_are_the_largest_first_and_at_most_n() {
        let budget = MemoryBudget::new(1000, 1000);
        let (a, b, c) = (
            budget.account("a"),
            budget.account("b"),
            budget.account("c"),
        );
        a.charge(10, "x").unwrap();
        b.charge(30, "x").unwrap();
        c.charge(30, "x").unwrap();
        assert_eq!(
            budget.top(2),
            [("b".to_owned(), 30), ("c".to_owned(), 30)],
            "ties by name"
        );
        drop((b, c));
        assert_eq!(budget.top(10), [("a".to_owned(), 10)]);
    }

    #[test]
    fn a_share_and_the_total_are_enforced_and_given_back_on_drop() {
        let budget = MemoryBudget::new(100, 60);
        let a = budget.account("a");
        a.charge(50, "a body").unwrap();
        let err = a.charge(20, "a Read answer").unwrap_err();
        assert_eq!(err.grpc_code(), tonic::Code::ResourceExhausted);
        assert!(
            err.to_string().contains("memory_bytes_per_principal"),
            "{err}"
        );
        assert!(err.to_string().contains("a Read answer"), "{err}");
        let b = budget.account("b");
        b.charge(45, "a body").unwrap();
        let err = b.charge(10, "a body").unwrap_err();
        assert!(err.to_string().contains("(memory_bytes)"), "{err}");
        assert_eq!(budget.in_use("a"), (95, 50));
        let clone = a.clone();
        drop(a);
        assert_eq!(budget.in_use("a"), (95, 50), "a clone still holds it");
        clone.release(20);
        assert_eq!(budget.in_use("a"), (75, 30));
        drop(clone);
        assert_eq!(budget.in_use("a"), (45, 0));
        assert!(b.check(15, "x").is_ok());
        assert!(b.check(16, "x").is_err());
        assert_eq!(budget.in_use("b"), (45, 45), "a check charges nothing");
    }
}
