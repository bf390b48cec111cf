//! Authentication: bearer tokens to principals, and handles minted for
//! sub-agents.
//!
//! Configured principals are fixed at start-up. Handles are created at run
//! time by `CreateHandle`: a new token whose grants are the intersection of the
//! requested grants with its creator's, so a sub-agent can never gain a right.
//! Handles live in memory, expire after their TTL and can be revoked by their
//! creator (or the creator's ancestors). With no configured principal, a
//! request without a token is the local principal, which holds every grant.

use crate::access::{Grant, OpSet, Principal};
use crate::error::{Error, Result};
use rand::Rng;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Lifetime of a handle created with `ttl_seconds = 0`.
pub const DEFAULT_HANDLE_TTL: Duration = Duration::from_secs(3600);
/// Longest lifetime a handle may ask for (30 days).
pub const MAX_HANDLE_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

struct Handle {
    principal: Arc<Principal>,
    expires: SystemTime,
    /// Token of the creator chain, outermost first, for revocation rights.
    ancestors: Vec<String>,
}

/// Token → principal.
pub struct Auth {
    principals: HashMap<String, Arc<Principal>>,
    /// The principal of token-less requests, when no principal is configured.
    anonymous: Option<Arc<Principal>>,
    handles: Mutex<HashMap<String, Handle>>,
}

/// A freshly minted handle.
#[derive(Debug)]
pub struct NewHandle {
    /// Its bearer token.
    pub token: String,
    /// The grants it holds.
    pub grants: Vec<Grant>,
    /// When it stops working.
    pub expires: SystemTime,
}

impl Auth {
    /// Authentication over configured `(token, principal)` pairs; with none,
    /// token-less requests act as [`Principal::local`].
    pub fn new(principals: Vec<(String, Principal)>) -> Auth {
        let anonymous = principals.is_empty().then(|| Arc::new(Principal::local()));
        Auth {
            principals: principals
                .into_iter()
                .map(|(t, p)| (t, Arc::new(p)))
                .collect(),
            anonymous,
            handles: Mutex::new(HashMap::new()),
        }
    }

    /// True when requests need a token.
    pub fn requires_token(&self) -> bool {
        self.anonymous.is_none()
    }

    /// The principal a request's token (if any) names.
    pub fn authenticate(&self, token: Option<&str>) -> Result<Arc<Principal>> {
        let Some(token) = token else {
            return self.anonymous.clone().ok_or_else(|| {
                Error::Unauthenticated("missing 'authorization: Bearer <token>' metadata".into())
            });
        };
        if let Some(p) = self.principals.get(token) {
            return Ok(p.clone());
        }
        let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        match handles.get(token) {
            Some(h) if h.expires > SystemTime::now() => Ok(h.principal.clone()),
            Some(_) => {
                handles.remove(token);
                Err(Error::Unauthenticated("the handle has expired".into()))
            }
            None => Err(Error::Unauthenticated("unknown token".into())),
        }
    }

    /// Mints a handle for `creator` (authenticated by `creator_token`, `None`
    /// for the local principal) holding `requested ∩ creator's grants`.
    pub fn create_handle(
        &self,
        creator: &Principal,
        creator_token: Option<&str>,
        requested: &[Grant],
        ttl: Duration,
    ) -> Result<NewHandle> {
        let ttl = if ttl.is_zero() {
            DEFAULT_HANDLE_TTL
        } else {
            ttl
        };
        if ttl > MAX_HANDLE_TTL {
            return Err(Error::InvalidArgument(format!(
                "ttl_seconds must be at most {}",
                MAX_HANDLE_TTL.as_secs()
            )));
        }
        let grants = intersect(requested, &creator.grants);
        let token = format!("avfs_{}", hex(&rand::rng().random::<[u8; 24]>()));
        let expires = SystemTime::now() + ttl;
        let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        handles.retain(|_, h| h.expires > SystemTime::now());
        let mut ancestors = creator_token
            .and_then(|t| handles.get(t))
            .map(|h| h.ancestors.clone())
            .unwrap_or_default();
        ancestors.extend(creator_token.map(str::to_owned));
        let principal = Principal {
            name: format!("handle of {}", creator.name),
            namespace: creator.namespace.clone(),
            grants: grants.clone(),
        };
        handles.insert(
            token.clone(),
            Handle {
                principal: Arc::new(principal),
                expires,
                ancestors,
            },
        );
        Ok(NewHandle {
            token,
            grants,
            expires,
        })
    }

    /// Revokes a handle created by the caller (or by a handle it created).
    pub fn revoke_handle(&self, caller_token: Option<&str>, token: &str) -> Result<()> {
        let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        let Some(handle) = handles.get(token) else {
            return Err(Error::NotFound("no such handle".into()));
        };
        let allowed = match caller_token {
            Some(caller) => caller == token || handle.ancestors.iter().any(|a| a == caller),
            None => self.anonymous.is_some(),
        };
        if !allowed {
            return Err(Error::PermissionDenied(
                "only the creator of a handle may revoke it".into(),
            ));
        }
        handles.remove(token);
        Ok(())
    }
}

/// The intersection of two grant lists, both read as "prefix-closed" sets of
/// (path, op): a right survives only where both lists allow it.
pub fn intersect(requested: &[Grant], held: &[Grant]) -> Vec<Grant> {
    let mut out: Vec<Grant> = Vec::new();
    for r in requested {
        for h in held {
            let prefix = if r.prefix.is_within(&h.prefix) {
                r.prefix.clone()
            } else if h.prefix.is_within(&r.prefix) {
                h.prefix.clone()
            } else {
                continue;
            };
            let ops = r.ops.intersect(h.ops);
            if ops.is_empty() {
                continue;
            }
            match out.iter_mut().find(|g| g.prefix == prefix) {
                Some(g) => g.ops = g.ops.union(ops),
                None => out.push(Grant { prefix, ops }),
            }
        }
    }
    out.sort_by_key(|g| g.prefix.order_key());
    out
}

/// The seed's markdown lines for an agent's system prompt, one per grant:
/// `/prefix/: ls, stat, read, write, delete`, with each operation named by
/// the verb an agent knows it by ([`verb`]).
pub fn describe(grants: &[Grant]) -> String {
    grants
        .iter()
        .map(|g| {
            let prefix = if g.prefix.is_root() {
                "/".to_owned()
            } else {
                format!("{}/", g.prefix)
            };
            let verbs: Vec<&str> = g.ops.iter().map(verb).collect();
            format!("{prefix}: {}", verbs.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The agent-facing verb of an operation in [`describe`]: `list` is `ls`,
/// `file` is `stat`, `read_file` is `read`, `read_binary` is `download`,
/// `read_re` is `search`; `write` and `delete` keep their names.
pub fn verb(op: crate::access::Op) -> &'static str {
    use crate::access::Op;
    match op {
        Op::List => "ls",
        Op::File => "stat",
        Op::ReadFile => "read",
        Op::ReadBinary => "download",
        Op::ReadRe => "search",
        Op::Write => "write",
        Op::Delete => "delete",
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Operation set from names, for config and requests.
pub fn parse_ops<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<OpSet> {
    names.into_iter().map(crate::access::Op::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Op;
    use crate::path::VfsPath;

    fn grant(prefix: &str, ops: &[Op]) -> Grant {
        Grant {
            prefix: VfsPath::parse(prefix).unwrap(),
            ops: ops.iter().copied().collect(),
        }
    }

    #[test]
    fn intersection_never_gains_a_right() {
        let held = [grant("/a", &[Op::ReadFile]), grant("/a/b", &[Op::Write])];
        let asked = [grant("/", &[Op::ReadFile, Op::Write, Op::Delete])];
        assert_eq!(
            intersect(&asked, &held),
            vec![grant("/a", &[Op::ReadFile]), grant("/a/b", &[Op::Write])]
        );
        assert!(intersect(&[grant("/c", &[Op::ReadFile])], &held).is_empty());
    }

    #[test]
    fn handle_tokens_authenticate_until_revoked() {
        let auth = Auth::new(vec![(
            "t1".into(),
            Principal {
                grants: vec![grant("/w", &[Op::List])],
                ..Principal::local()
            },
        )]);
        assert!(auth.authenticate(None).is_err());
        let creator = auth.authenticate(Some("t1")).unwrap();
        let h = auth
            .create_handle(
                &creator,
                Some("t1"),
                &[grant("/w/x", &[Op::List, Op::Write])],
                Duration::ZERO,
            )
            .unwrap();
        assert_eq!(h.grants, vec![grant("/w/x", &[Op::List])]);
        assert_eq!(auth.authenticate(Some(&h.token)).unwrap().grants, h.grants);
        assert!(auth.revoke_handle(Some("other"), &h.token).is_err());
        auth.revoke_handle(Some("t1"), &h.token).unwrap();
        assert!(auth.authenticate(Some(&h.token)).is_err());
    }

    #[test]
    fn describe_renders_seed_lines() {
        assert_eq!(
            describe(&[
                grant(
                    "/w",
                    &[Op::List, Op::File, Op::ReadFile, Op::Write, Op::Delete]
                ),
                grant("/", &[Op::ReadRe])
            ]),
            "/w/: ls, stat, read, write, delete\n/: search"
        );
    }
}
