//! The resources one MCP session subscribed to (`resources/subscribe`,
//! `subscriptions/listen`), checked against the caller's grants and bounded
//! per session and per principal (docs/mcp.md § Subscriptions).
//!
//! A [`Subscriptions`] is the set a session's change feed
//! ([`super::feed`]) reads; the [`Ledger`], shared by every session of the
//! server, counts each principal's subscriptions so that one principal
//! cannot hold them all by opening sessions.
//!
//! What a session keeps is bounded in bytes and charged: a URI is at most
//! [`MAX_URI_BYTES`](super::resources::MAX_URI_BYTES) (longer ones are refused before anything is kept), and
//! each kept URI is charged to the principal's memory share
//! (`[limits] memory_bytes_per_principal`) for as long as the session keeps
//! it, through an [`Account`] of the session's own (docs/security.md).

use super::resources::{SCHEME, check_uri_length, parse_uri, uri_of};
use crate::access::Op;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::service::{Account, Caller};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// The bounds of subscriptions (`[mcp] max_subscriptions_per_session`,
/// `max_subscriptions_per_principal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscriptionBounds {
    /// Resources one session (or one `subscriptions/listen`) may watch.
    pub per_session: usize,
    /// Resources one principal may watch over all its sessions.
    pub per_principal: usize,
}

/// Subscriptions held per principal (by `Principal::owner`) over every
/// session of the server; absent at zero.
#[derive(Clone, Default)]
pub struct Ledger(Arc<Mutex<HashMap<String, usize>>>);

impl Ledger {
    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives back `n` of `owner`'s subscriptions.
    fn release(&self, owner: &str, n: usize) {
        let mut counts = self.counts();
        if let Some(count) = counts.get_mut(owner) {
            *count = count.saturating_sub(n);
            if *count == 0 {
                counts.remove(owner);
            }
        }
    }
}

/// What a subscription request named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subscribed {
    /// A file (or a path where one may appear), by its canonical URI (one
    /// file is one subscription however its URI was spelled): notified
    /// when it changes.
    File { uri: String, path: VfsPath },
    /// A URI of another scheme: accepted, as the specification lets any
    /// URI be subscribed, but no change of agentvfs ever names it.
    Foreign(String),
}

impl Subscribed {
    /// What `uri` names. A URI longer than
    /// [`MAX_URI_BYTES`](super::resources::MAX_URI_BYTES) (of any
    /// scheme) or a malformed `agentvfs://` one is INVALID_ARGUMENT naming
    /// the problem.
    pub fn parse(uri: &str) -> Result<Subscribed> {
        check_uri_length(uri)?;
        if !uri.starts_with(SCHEME) {
            return Ok(Subscribed::Foreign(uri.to_owned()));
        }
        let path = parse_uri(uri)?;
        Ok(Subscribed::File {
            uri: uri_of(&path),
            path,
        })
    }

    /// Refuses (PERMISSION_DENIED) a file `caller` may not list: the grant
    /// under which Watch shows a change.
    pub fn check(&self, caller: &Caller) -> Result<()> {
        match self {
            Subscribed::File { path, .. } => caller.principal.check(path, Op::List),
            Subscribed::Foreign(_) => Ok(()),
        }
    }

    /// The URI as the set keeps it.
    fn key(&self) -> &str {
        match self {
            Subscribed::File { uri, .. } | Subscribed::Foreign(uri) => uri,
        }
    }
}

/// Bytes charged for one kept URI beyond its own: the set's node and the
/// string's header, rounded up.
const ENTRY_OVERHEAD_BYTES: u64 = 64;

/// The URIs one session watches, counted against its principal in the
/// ledger, and their bytes charged to its memory share, until dropped.
pub struct Subscriptions {
    ledger: Ledger,
    bounds: SubscriptionBounds,
    owner: String,
    /// The session's own account: what it keeps is charged here, and
    /// given back when the session (this set) is dropped.
    account: Account,
    uris: Arc<Mutex<BTreeSet<String>>>,
}

impl Subscriptions {
    /// An empty set of `owner`'s, charging what it keeps to `account` (an
    /// account of `owner`'s that lives as long as the set).
    pub fn new(
        ledger: Ledger,
        bounds: SubscriptionBounds,
        owner: &str,
        account: Account,
    ) -> Subscriptions {
        Subscriptions {
            ledger,
            bounds,
            owner: owner.to_owned(),
            account,
            uris: Arc::default(),
        }
    }

    /// The set the change feed reads (canonical URIs).
    pub fn uris(&self) -> Arc<Mutex<BTreeSet<String>>> {
        self.uris.clone()
    }

    fn set(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.uris.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `subscribed` (again is a no-op), or refuses it
    /// (RESOURCE_EXHAUSTED naming the bound) past either bound or past the
    /// principal's memory share.
    pub fn add(&self, subscribed: &Subscribed) -> Result<()> {
        let mut set = self.set();
        if set.contains(subscribed.key()) {
            return Ok(());
        }
        if set.len() >= self.bounds.per_session {
            return Err(Error::OverLimit {
                limit: "max_subscriptions_per_session",
                message: format!(
                    "this MCP session already watches {} resources ([mcp] \
                     max_subscriptions_per_session); unsubscribe from one first",
                    self.bounds.per_session
                ),
            });
        }
        let mut counts = self.ledger.counts();
        if counts.get(&self.owner).copied().unwrap_or(0) >= self.bounds.per_principal {
            return Err(Error::OverLimit {
                limit: "max_subscriptions_per_principal",
                message: format!(
                    "principal {:?} already watches {} resources over its MCP sessions ([mcp] \
                     max_subscriptions_per_principal); unsubscribe from one first",
                    self.owner, self.bounds.per_principal
                ),
            });
        }
        self.account
            .charge(kept_bytes(subscribed.key()), "an MCP resource subscription")?;
        *counts.entry(self.owner.clone()).or_default() += 1;
        set.insert(subscribed.key().to_owned());
        Ok(())
    }

    /// Removes `subscribed`; true when it was there.
    pub fn remove(&self, subscribed: &Subscribed) -> bool {
        let removed = self.set().remove(subscribed.key());
        if removed {
            self.ledger.release(&self.owner, 1);
            self.account.release(kept_bytes(subscribed.key()));
        }
        removed
    }
}

/// What keeping `uri` in the set is charged.
fn kept_bytes(uri: &str) -> u64 {
    uri.len() as u64 + ENTRY_OVERHEAD_BYTES
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        let held = self.set().len();
        self.ledger.release(&self.owner, held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::resources::MAX_URI_BYTES;
    use crate::service::MemoryBudget;

    fn file(uri: &str) -> Subscribed {
        Subscribed::parse(uri).unwrap()
    }

    #[test]
    fn bounds_per_session_and_per_principal_are_given_back() {
        let ledger = Ledger::default();
        let bounds = SubscriptionBounds {
            per_session: 2,
            per_principal: 3,
        };
        let one = Subscriptions::new(ledger.clone(), bounds, "p", Account::unbounded());
        one.add(&file("agentvfs:///a")).unwrap();
        one.add(&file("agentvfs:///a")).unwrap();
        one.add(&file("agentvfs:///b")).unwrap();
        let refused = one.add(&file("agentvfs:///c")).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("max_subscriptions_per_session")
        );
        let two = Subscriptions::new(ledger.clone(), bounds, "p", Account::unbounded());
        two.add(&file("agentvfs:///c")).unwrap();
        let refused = two.add(&file("agentvfs:///d")).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("max_subscriptions_per_principal")
        );
        // Another principal has its own count.
        Subscriptions::new(ledger.clone(), bounds, "q", Account::unbounded())
            .add(&file("agentvfs:///d"))
            .unwrap();
        assert!(one.remove(&file("agentvfs:///a")));
        assert!(!one.remove(&file("agentvfs:///a")));
        two.add(&file("agentvfs:///d")).unwrap();
        drop(one);
        drop(two);
        assert!(ledger.counts().is_empty());
    }

    #[test]
    fn kept_uris_are_charged_to_the_principal_until_dropped() {
        let budget = MemoryBudget::new(1 << 20, 1 << 20);
        let bounds = SubscriptionBounds {
            per_session: 8,
            per_principal: 8,
        };
        let set = Subscriptions::new(Ledger::default(), bounds, "p", budget.account("p"));
        let uri = format!("test://{}", "x".repeat(1000));
        set.add(&Subscribed::parse(&uri).unwrap()).unwrap();
        assert_eq!(budget.in_use("p").1, kept_bytes(&uri));
        set.add(&file("agentvfs:///a")).unwrap();
        assert!(set.remove(&Subscribed::parse(&uri).unwrap()));
        assert_eq!(budget.in_use("p").1, kept_bytes("agentvfs:///a"));
        drop(set);
        assert_eq!(budget.in_use("p"), (0, 0));
        // Past the share, nothing is kept.
        let small = MemoryBudget::new(1 << 20, 100);
        let set = Subscriptions::new(Ledger::default(), bounds, "p", small.account("p"));
        let refused = set.add(&Subscribed::parse(&uri).unwrap()).unwrap_err();
        assert!(
            refused.to_string().contains("memory_bytes_per_principal"),
            "{refused}"
        );
        assert!(set.uris().lock().unwrap().is_empty());
        // A URI longer than any path's is refused before it is parsed.
        let huge = format!("test://{}", "x".repeat(MAX_URI_BYTES));
        let refused = Subscribed::parse(&huge).unwrap_err().to_string();
        assert!(
            refused.contains(&format!("longer than {MAX_URI_BYTES} bytes")),
            "{refused}"
        );
    }

    #[test]
    fn uris_are_canonical_and_other_schemes_are_foreign() {
        assert_eq!(file("agentvfs:///a%62").key(), "agentvfs:///ab");
        assert_eq!(
            Subscribed::parse("test://watched").unwrap(),
            Subscribed::Foreign("test://watched".into())
        );
        let bad = Subscribed::parse("agentvfs://host/x").unwrap_err();
        assert!(bad.to_string().contains("must be absolute"), "{bad}");
    }
}
