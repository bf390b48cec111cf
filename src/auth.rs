//! Authentication: bearer tokens to principals, and handles minted for
//! sub-agents.
//!
//! Root principals are fixed at start-up: the configured ones, the operator
//! (a random token written to `[access] operator_token_file`) and, in
//! anonymous mode, the local principal of token-less requests. Handles are
//! created at run time by `CreateHandle`: a new token whose grants are the
//! intersection of the requested grants with its creator's, so a sub-agent can
//! never gain a right.
//!
//! Handles form trees under their root principal. Each handle stores only a
//! pointer to its parent (the handle that minted it, none when a root did),
//! its depth and its root, so a chain costs the same per handle at every
//! depth. A handle never outlives its parent: its expiry is capped by the
//! parent's, and revoking a handle removes every descendant under the same
//! lock, so a live handle's whole chain is always live. Chains are at most
//! [`MAX_HANDLE_DEPTH`] deep, a root principal's tree holds at most
//! [`MAX_HANDLES_PER_PRINCIPAL`] live handles and a request at most
//! [`MAX_HANDLE_GRANTS`] grants, so handles cannot exhaust memory.
//!
//! In anonymous mode a handle restricts only what is done with its token: its
//! holder can drop the token and be the local principal. Anonymous mode is for
//! one trusted local user; `[access] anonymous = false` makes tokens the only
//! way in.

use crate::access::{Grant, Principal};
use crate::error::{Error, Result};
use rand::Rng;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

/// Lifetime of a handle created with `ttl_seconds = 0`.
pub const DEFAULT_HANDLE_TTL: Duration = Duration::from_secs(3600);
/// Longest lifetime a handle may ask for (30 days).
pub const MAX_HANDLE_TTL: Duration = Duration::from_secs(30 * 24 * 3600);
/// Deepest handle chain: a root principal's handle is depth 1, a handle it
/// mints depth 2, ... An orchestrator handing work down through a few levels
/// of sub-agents needs far fewer; the bound keeps revocation and ancestry
/// walks short, and refusing depth 9 is a clear signal of a runaway loop.
pub const MAX_HANDLE_DEPTH: usize = 8;
/// Most live handles in one root principal's tree (its handles and theirs,
/// at every depth). Generous for any real fan-out of sub-agents, while the
/// memory of all of them stays bounded (each holds at most
/// [`MAX_HANDLE_GRANTS`] more grants than its parent). Expired handles are
/// swept before counting.
pub const MAX_HANDLES_PER_PRINCIPAL: usize = 1000;
/// Most grants one `CreateHandle` may ask for: a handle is a narrow slice of
/// its creator's rights, and the bound caps the work of the intersection and
/// the memory of each handle.
pub const MAX_HANDLE_GRANTS: usize = 64;

struct Handle {
    principal: Arc<Principal>,
    expires: SystemTime,
    /// Token of the handle that minted this one; `None` when a root did.
    parent: Option<String>,
    /// 1 for a root's handle, one more per level below.
    depth: usize,
    /// Index of its root principal in [`Auth::roots`].
    root: usize,
}

/// The live handles, by token.
#[derive(Default)]
struct Handles(HashMap<String, Handle>);

impl Handles {
    /// True when `ancestor` is the parent of `token`, its grandparent, ...
    /// The walk is at most [`MAX_HANDLE_DEPTH`] steps.
    fn descends_from(&self, token: &str, ancestor: &str) -> bool {
        let parent = |t: &str| self.0.get(t).and_then(|h| h.parent.as_deref());
        let mut next = parent(token);
        while let Some(p) = next {
            if p == ancestor {
                return true;
            }
            next = parent(p);
        }
        false
    }

    /// Drops expired handles. A child expires no later than its parent, so
    /// no live handle loses its parent here.
    fn sweep(&mut self, now: SystemTime) {
        self.0.retain(|_, h| h.expires > now);
    }

    /// Removes `token` and every handle below it.
    fn remove_tree(&mut self, token: &str) {
        let doomed: Vec<String> = self
            .0
            .keys()
            .filter(|t| *t == token || self.descends_from(t, token))
            .cloned()
            .collect();
        for t in doomed {
            self.0.remove(&t);
        }
    }
}

/// Token → principal.
pub struct Auth {
    /// Root principals: configured ones, the operator, the local principal.
    roots: Vec<Arc<Principal>>,
    /// Token of each root that has one → its index in `roots`.
    tokens: HashMap<String, usize>,
    /// Index in `roots` of the principal of token-less requests, in
    /// anonymous mode.
    anonymous: Option<usize>,
    handles: Mutex<Handles>,
}

/// A freshly minted handle.
#[derive(Debug)]
pub struct NewHandle {
    /// Its bearer token.
    pub token: String,
    /// The grants it holds.
    pub grants: Vec<Grant>,
    /// When it stops working: the requested TTL, capped by its parent's
    /// expiry.
    pub expires: SystemTime,
    /// The branch it is bound to (empty: none).
    pub branch: String,
}

/// Who is minting a handle, resolved under the handles lock.
struct Creator {
    principal: Arc<Principal>,
    root: usize,
    /// The creating handle's token and expiry, when a handle creates.
    parent: Option<(String, SystemTime)>,
    depth: usize,
}

impl Auth {
    /// Authentication over configured `(token, principal)` pairs; with
    /// `anonymous`, token-less requests act as [`Principal::local`].
    pub fn new(principals: Vec<(String, Principal)>, anonymous: bool) -> Auth {
        let mut roots = Vec::new();
        let mut tokens = HashMap::new();
        for (token, principal) in principals {
            tokens.insert(token, roots.len());
            roots.push(Arc::new(principal));
        }
        let anonymous = anonymous.then(|| {
            roots.push(Arc::new(Principal::local()));
            roots.len() - 1
        });
        Auth {
            roots,
            tokens,
            anonymous,
            handles: Mutex::new(Handles::default()),
        }
    }

    /// [`Auth::new`] plus, when `operator_token_file` is given (`[access]
    /// operator_token_file`), a fresh random operator token holding every
    /// grant, written to that file (mode 0600, replaced atomically) for the
    /// orchestrator to read; it is never logged.
    pub fn with_operator(
        mut principals: Vec<(String, Principal)>,
        anonymous: bool,
        operator_token_file: Option<&Path>,
    ) -> Result<Auth, String> {
        if let Some(path) = operator_token_file {
            let token = new_token();
            crate::private_file::write(path, &[token.as_bytes()])
                .map_err(|e| format!("access operator_token_file {}: {e}", path.display()))?;
            let operator = Principal {
                name: "operator".into(),
                owner: "operator".into(),
                ..Principal::local()
            };
            principals.push((token, operator));
        }
        Ok(Auth::new(principals, anonymous))
    }

    /// True when requests need a token (anonymous mode is off).
    pub fn requires_token(&self) -> bool {
        self.anonymous.is_none()
    }

    fn lock(&self) -> MutexGuard<'_, Handles> {
        self.handles.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The principal a request's token (if any) names.
    pub fn authenticate(&self, token: Option<&str>) -> Result<Arc<Principal>> {
        let Some(token) = token else {
            return match self.anonymous {
                Some(i) => Ok(self.roots[i].clone()),
                None => Err(Error::Unauthenticated(
                    "missing 'authorization: Bearer <token>' metadata".into(),
                )),
            };
        };
        if let Some(&i) = self.tokens.get(token) {
            return Ok(self.roots[i].clone());
        }
        match self.lock().0.get(token) {
            Some(h) if h.expires > SystemTime::now() => Ok(h.principal.clone()),
            Some(_) => Err(Error::Unauthenticated("the handle has expired".into())),
            None => Err(Error::Unauthenticated("unknown token".into())),
        }
    }

    /// The creator behind `token` (`None`: a token-less request), if it is
    /// still alive.
    fn creator(&self, handles: &Handles, token: Option<&str>, now: SystemTime) -> Result<Creator> {
        let root = |i: usize| Creator {
            principal: self.roots[i].clone(),
            root: i,
            parent: None,
            depth: 1,
        };
        let Some(token) = token else {
            return self.anonymous.map(root).ok_or_else(|| {
                Error::Unauthenticated("missing 'authorization: Bearer <token>' metadata".into())
            });
        };
        if let Some(&i) = self.tokens.get(token) {
            return Ok(root(i));
        }
        match handles.0.get(token) {
            Some(h) if h.expires > now => Ok(Creator {
                principal: h.principal.clone(),
                root: h.root,
                parent: Some((token.to_owned(), h.expires)),
                depth: h.depth + 1,
            }),
            _ => Err(Error::Unauthenticated(
                "the caller's handle was revoked or has expired".into(),
            )),
        }
    }

    /// Mints a handle for the caller presenting `creator_token` (`None`: a
    /// token-less request) holding `requested ∩ the caller's grants`, living
    /// `ttl` (0: [`DEFAULT_HANDLE_TTL`]) but never past the caller's own
    /// expiry, bound to `branch` (empty: unbound). A handle minted by a
    /// bound caller stays bound to the caller's branch ([`bind`]).
    pub fn create_handle(
        &self,
        creator_token: Option<&str>,
        requested: &[Grant],
        ttl: Duration,
        branch: &str,
    ) -> Result<NewHandle> {
        if requested.is_empty() {
            return Err(Error::InvalidArgument(
                "grants must name at least one grant: a handle with no grant could do nothing"
                    .into(),
            ));
        }
        if requested.len() > MAX_HANDLE_GRANTS {
            return Err(Error::InvalidArgument(format!(
                "a handle may ask for at most {MAX_HANDLE_GRANTS} grants, not {}",
                requested.len()
            )));
        }
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
        let now = SystemTime::now();
        let mut handles = self.lock();
        handles.sweep(now);
        let creator = self.creator(&handles, creator_token, now)?;
        if creator.depth > MAX_HANDLE_DEPTH {
            return Err(Error::TooLarge(format!(
                "handle chains are at most {MAX_HANDLE_DEPTH} deep and the caller is a handle at \
                 depth {MAX_HANDLE_DEPTH}: mint from a handle nearer the root"
            )));
        }
        let branch = bind(&creator.principal, branch)?;
        let grants = intersect(requested, &creator.principal.grants);
        if grants.is_empty() {
            return Err(Error::InvalidArgument(
                "none of the requested grants overlaps the caller's grants: the handle would hold \
                 no right"
                    .into(),
            ));
        }
        let root = &self.roots[creator.root];
        let live = handles
            .0
            .values()
            .filter(|h| h.root == creator.root)
            .count();
        if live >= MAX_HANDLES_PER_PRINCIPAL {
            return Err(Error::TooLarge(format!(
                "principal {} already has {MAX_HANDLES_PER_PRINCIPAL} live handles (its own and \
                 its handles' together): revoke some or let them expire",
                root.name
            )));
        }
        let expires = match &creator.parent {
            Some((_, parent_expires)) => (now + ttl).min(*parent_expires),
            None => now + ttl,
        };
        // The name stays short at any depth: it names the handle's own id
        // and the root, not the chain.
        let id = crate::change::new_handle_id();
        let name = match creator.depth {
            1 => format!("handle {id} of {}", root.name),
            depth => format!("handle {id} of {} (depth {depth})", root.name),
        };
        let handle = match creator.principal.handle.as_str() {
            "" => id,
            parent => format!("{parent}/{id}"),
        };
        let principal = Principal {
            name,
            namespace: root.namespace.clone(),
            grants: grants.clone(),
            owner: root.owner.clone(),
            branch: branch.clone(),
            handle,
            audit: false,
        };
        let token = new_token();
        handles.0.insert(
            token.clone(),
            Handle {
                principal: Arc::new(principal),
                expires,
                parent: creator.parent.map(|(t, _)| t),
                depth: creator.depth,
                root: creator.root,
            },
        );
        Ok(NewHandle {
            token,
            grants,
            expires,
            branch,
        })
    }

    /// Revokes a handle and every handle below it. Allowed to the handle
    /// itself, to any handle above it and to its root principal.
    pub fn revoke_handle(&self, caller_token: Option<&str>, token: &str) -> Result<()> {
        let mut handles = self.lock();
        let Some(handle) = handles
            .0
            .get(token)
            .filter(|h| h.expires > SystemTime::now())
        else {
            return Err(Error::NotFound("no such handle".into()));
        };
        let allowed = match caller_token {
            None => self.anonymous == Some(handle.root),
            Some(caller) => {
                caller == token
                    || self.tokens.get(caller) == Some(&handle.root)
                    || handles.descends_from(token, caller)
            }
        };
        if !allowed {
            return Err(Error::PermissionDenied(
                "only the creator of a handle (or a principal or handle above it) may revoke it"
                    .into(),
            ));
        }
        handles.remove_tree(token);
        Ok(())
    }
}

/// The branch a handle minted by `creator` asking for `requested` (empty:
/// none) is bound to: the creator's own when it is bound (asking for
/// another is PERMISSION_DENIED, so a bound handle can never mint its way
/// out of its branch), else the one asked for.
fn bind(creator: &Principal, requested: &str) -> Result<String> {
    if !requested.is_empty() {
        crate::scope::Scope::check_name("branch", requested)?;
    }
    match (creator.branch.as_str(), requested) {
        ("", asked) => Ok(asked.to_owned()),
        (bound, "") => Ok(bound.to_owned()),
        (bound, asked) if bound == asked => Ok(bound.to_owned()),
        (bound, asked) => Err(Error::PermissionDenied(format!(
            "the caller is bound to branch {bound:?}: a handle it mints stays in {bound:?} and \
             cannot be bound to {asked:?}"
        ))),
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

/// The markdown lines (docs/contract.md § Grants) for an agent's system prompt, one per grant:
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

/// A fresh random bearer token (192 bits).
fn new_token() -> String {
    format!("avfs_{}", hex(&rand::rng().random::<[u8; 24]>()))
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

    fn principal(name: &str, grants: Vec<Grant>) -> Principal {
        Principal {
            name: name.into(),
            namespace: "default".into(),
            grants,
            owner: name.into(),
            branch: String::new(),
            handle: String::new(),
            audit: false,
        }
    }

    /// Two principals: `t1` (list and read under /w) and `t2` (everything).
    fn two_principals() -> Auth {
        Auth::new(
            vec![
                (
                    "t1".into(),
                    principal("a", vec![grant("/w", &[Op::List, Op::ReadFile])]),
                ),
                ("t2".into(), principal("b", vec![grant("/", &Op::ALL)])),
            ],
            false,
        )
    }

    fn mint(auth: &Auth, creator: &str) -> Result<NewHandle> {
        auth.create_handle(
            Some(creator),
            &[grant("/w", &[Op::List])],
            Duration::ZERO,
            "",
        )
    }

    #[test]
    fn handle_tokens_authenticate_until_revoked() {
        let auth = two_principals();
        assert!(auth.authenticate(None).is_err());
        let h = auth
            .create_handle(
                Some("t1"),
                &[grant("/w/x", &[Op::List, Op::Write])],
                Duration::ZERO,
                "",
            )
            .unwrap();
        assert_eq!(h.grants, vec![grant("/w/x", &[Op::List])]);
        let p = auth.authenticate(Some(&h.token)).unwrap();
        let id = p.handle.as_str();
        assert_eq!(
            (p.name.clone(), &p.grants),
            (format!("handle {id} of a"), &h.grants)
        );
        assert!(auth.revoke_handle(Some("t2"), &h.token).is_err());
        assert!(auth.revoke_handle(None, &h.token).is_err());
        auth.revoke_handle(Some("t1"), &h.token).unwrap();
        assert!(auth.authenticate(Some(&h.token)).is_err());
    }

    #[test]
    fn revocation_takes_every_descendant_and_nothing_else() {
        let auth = two_principals();
        let h1 = mint(&auth, "t1").unwrap();
        let h2 = mint(&auth, &h1.token).unwrap();
        let h3 = mint(&auth, &h2.token).unwrap();
        let sibling = mint(&auth, "t1").unwrap();
        // A handle may revoke what is below it, never what is above.
        assert!(matches!(
            auth.revoke_handle(Some(&h3.token), &h1.token),
            Err(Error::PermissionDenied(_))
        ));
        assert!(auth.revoke_handle(Some(&sibling.token), &h2.token).is_err());
        auth.revoke_handle(Some("t1"), &h1.token).unwrap();
        for dead in [&h1, &h2, &h3] {
            assert!(auth.authenticate(Some(&dead.token)).is_err());
            assert!(mint(&auth, &dead.token).is_err());
        }
        assert!(auth.authenticate(Some(&sibling.token)).is_ok());
        // Revoking from the middle keeps the part above.
        let g1 = mint(&auth, "t1").unwrap();
        let g2 = mint(&auth, &g1.token).unwrap();
        let g3 = mint(&auth, &g2.token).unwrap();
        auth.revoke_handle(Some(&g1.token), &g2.token).unwrap();
        assert!(auth.authenticate(Some(&g1.token)).is_ok());
        assert!(auth.authenticate(Some(&g3.token)).is_err());
        assert!(matches!(
            auth.revoke_handle(Some("t1"), &g3.token),
            Err(Error::NotFound(_))
        ));
    }

    #[test]
    fn a_child_expires_no_later_than_its_parent() {
        let auth = two_principals();
        let parent = auth
            .create_handle(
                Some("t1"),
                &[grant("/w", &[Op::List])],
                Duration::from_secs(5),
                "",
            )
            .unwrap();
        let child = auth
            .create_handle(
                Some(&parent.token),
                &[grant("/w", &[Op::List])],
                MAX_HANDLE_TTL,
                "",
            )
            .unwrap();
        assert_eq!(child.expires, parent.expires);
        let short = auth
            .create_handle(
                Some(&parent.token),
                &[grant("/w", &[Op::List])],
                Duration::from_secs(1),
                "",
            )
            .unwrap();
        assert!(short.expires < parent.expires);
    }

    #[test]
    fn chains_stop_at_the_depth_limit_with_a_short_name() {
        let auth = two_principals();
        let mut token = "t1".to_owned();
        for _ in 0..MAX_HANDLE_DEPTH {
            token = mint(&auth, &token).unwrap().token;
        }
        let deepest = auth.authenticate(Some(&token)).unwrap();
        // Its lineage names every handle of the chain; its name only its
        // own id and the root.
        let ids: Vec<&str> = deepest.handle.split('/').collect();
        assert_eq!(ids.len(), MAX_HANDLE_DEPTH);
        let own = ids[MAX_HANDLE_DEPTH - 1];
        assert_eq!(
            deepest.name,
            format!("handle {own} of a (depth {MAX_HANDLE_DEPTH})")
        );
        // Budgets (streams, handles) stay those of the root principal.
        assert_eq!(deepest.owner, "a");
        let err = mint(&auth, &token).unwrap_err();
        assert!(matches!(err, Error::TooLarge(_)), "{err}");
        assert!(err.to_string().contains("at most 8 deep"), "{err}");
    }

    #[test]
    fn each_root_principal_has_a_bounded_number_of_live_handles() {
        let auth = two_principals();
        let first = mint(&auth, "t1").unwrap();
        for _ in 1..MAX_HANDLES_PER_PRINCIPAL {
            mint(&auth, "t1").unwrap();
        }
        // The limit covers the whole tree: a handle's handles count too.
        for creator in ["t1", first.token.as_str()] {
            let err = mint(&auth, creator).unwrap_err();
            assert!(matches!(err, Error::TooLarge(_)), "{err}");
            assert!(
                err.to_string().contains("principal a already has 1000"),
                "{err}"
            );
        }
        // Other principals keep their own budget.
        mint(&auth, "t2").unwrap();
        auth.revoke_handle(Some("t1"), &first.token).unwrap();
        mint(&auth, "t1").unwrap();
    }

    #[test]
    fn empty_or_disjoint_grants_are_refused() {
        let auth = two_principals();
        for asked in [
            vec![],
            vec![grant("/elsewhere", &[Op::List])],
            vec![grant("/w", &[Op::Delete])],
        ] {
            let err = auth
                .create_handle(Some("t1"), &asked, Duration::ZERO, "")
                .unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        }
        let many = vec![grant("/w", &[Op::List]); MAX_HANDLE_GRANTS + 1];
        let err = auth
            .create_handle(Some("t1"), &many, Duration::ZERO, "")
            .unwrap_err();
        assert!(err.to_string().contains("at most 64 grants"), "{err}");
    }

    #[test]
    fn a_bound_handle_mints_only_handles_bound_to_its_branch() {
        let auth = two_principals();
        let ask = [grant("/w", &[Op::List])];
        let bound = auth
            .create_handle(Some("t1"), &ask, Duration::ZERO, "feature")
            .unwrap();
        assert_eq!(bound.branch, "feature");
        assert_eq!(
            auth.authenticate(Some(&bound.token)).unwrap().branch,
            "feature"
        );
        for asked in ["", "feature"] {
            let child = auth
                .create_handle(Some(&bound.token), &ask, Duration::ZERO, asked)
                .unwrap();
            assert_eq!(child.branch, "feature", "asked {asked:?}");
        }
        let err = auth
            .create_handle(Some(&bound.token), &ask, Duration::ZERO, "other")
            .unwrap_err();
        assert!(matches!(err, Error::PermissionDenied(_)), "{err}");
        assert!(
            err.to_string().contains("bound to branch \"feature\""),
            "{err}"
        );
        let err = auth
            .create_handle(Some("t1"), &ask, Duration::ZERO, "../x")
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert_eq!(mint(&auth, "t1").unwrap().branch, "");
    }

    #[test]
    fn anonymous_mode_decides_token_less_requests() {
        let open = Auth::new(vec![], true);
        assert_eq!(open.authenticate(None).unwrap().name, "local");
        let h = open
            .create_handle(None, &[grant("/w", &[Op::List])], Duration::ZERO, "")
            .unwrap();
        let handle = open.authenticate(Some(&h.token)).unwrap();
        assert_eq!(handle.name, format!("handle {} of local", handle.handle));
        open.revoke_handle(None, &h.token).unwrap();
        let closed = Auth::new(vec![("op-token".into(), Principal::local())], false);
        assert!(matches!(
            closed.authenticate(None),
            Err(Error::Unauthenticated(_))
        ));
        assert!(
            closed
                .create_handle(None, &[grant("/w", &[Op::List])], Duration::ZERO, "")
                .is_err()
        );
    }

    #[test]
    fn describe_renders_the_contract_lines() {
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
