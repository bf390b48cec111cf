//! Who is calling: the principal, its scope and its token, as every front
//! end hands them to the application layer.
//!
//! Each front end reads the same three credentials from its own carrier (gRPC
//! metadata in `server/caller.rs`, HTTP headers in `mcp/http.rs`, the command
//! line for MCP over stdio) and calls [`Caller::identify`], so the rules of
//! who may act as whom are written once:
//!
//! - `authorization: Bearer <token>` names the principal (see [`Auth`]);
//! - the session scopes the State tier (default `default`);
//! - the namespace picks the Store namespace in anonymous mode
//!   (`[access] anonymous`); otherwise every caller, handles included, is
//!   bound to its principal's namespace;
//! - the label (optional) is kept with every change the request makes;
//! - the branch (optional) is where the request reads and writes
//!   (docs/branches.md); a handle bound to a branch works in it whatever
//!   the request says, and naming another is refused.
//!
//! Session and namespace are validated like names ([`Scope::check_name`]) so
//! they can never smuggle a path or a control character into storage keys.
//! Tokens are never logged ([`Secret`]).

use crate::access::Principal;
use crate::audit::{Trail, Who};
use crate::auth::Auth;
use crate::error::{Error, Result};
use crate::scope::Scope;
use crate::service::memory::Account;
use std::sync::Arc;

/// Header (gRPC metadata key) naming the State session.
pub const SESSION_HEADER: &str = "x-agentvfs-session";
/// Header (gRPC metadata key) naming the Store namespace.
pub const NAMESPACE_HEADER: &str = "x-agentvfs-namespace";
/// Header (gRPC metadata key) labelling the request's changes (a tool-call
/// or turn id), kept in history and Watch and selectable by Rewind.
pub const LABEL_HEADER: &str = "x-agentvfs-label";
/// Header (gRPC metadata key) naming the branch the request works in
/// (docs/branches.md).
pub const BRANCH_HEADER: &str = "x-agentvfs-branch";
/// Header (gRPC metadata key) naming the client program, for the audit
/// record's surface: `cli` or `mount` (docs/audit.md § The record).
pub const SURFACE_HEADER: &str = "x-agentvfs-surface";

/// The authenticated caller of one request.
#[derive(Clone, Debug)]
pub struct Caller {
    /// Its rights.
    pub principal: Arc<Principal>,
    /// Whose data it sees.
    pub scope: Scope,
    /// The bearer token it presented (handles record their creator's).
    pub token: Option<Secret>,
    /// What the call holds of its principal's memory share: the transport
    /// sets it ([`Caller::with_account`]); unbounded outside one (stdio).
    pub account: Account,
    /// The notes of the call's audit record (docs/audit.md): the grant
    /// checks of [`super::Files`] name their paths on it.
    pub trail: Trail,
}

/// What a request presents about its caller, as its front end read it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Credentials<'a> {
    /// The `authorization` value, `Bearer <token>`.
    pub authorization: Option<&'a str>,
    /// The State session asked for.
    pub session: Option<&'a str>,
    /// The Store namespace asked for.
    pub namespace: Option<&'a str>,
    /// The label for the request's changes.
    pub label: Option<&'a str>,
    /// The branch the request works in.
    pub branch: Option<&'a str>,
}

impl Caller {
    /// Authenticates `credentials` and builds the caller, or the error that
    /// rejects the request (UNAUTHENTICATED, PERMISSION_DENIED for another
    /// principal's namespace or, for a bound handle, another branch,
    /// INVALID_ARGUMENT for a malformed value).
    pub fn identify(auth: &Auth, credentials: Credentials<'_>) -> Result<Caller> {
        let token = match credentials.authorization {
            None => None,
            Some(value) => Some(value.strip_prefix("Bearer ").ok_or_else(|| {
                Error::Unauthenticated("authorization metadata must be 'Bearer <token>'".into())
            })?),
        };
        let principal = auth.authenticate(token)?;
        let session = credentials.session.unwrap_or("default");
        Scope::check_name("session", session)?;
        // In anonymous mode the caller may pick any namespace (it could drop
        // its token anyway); otherwise it is bound to its principal's.
        let namespace = match credentials.namespace {
            Some(ns) if !auth.requires_token() => ns,
            Some(ns) if ns != principal.namespace => {
                return Err(Error::PermissionDenied(format!(
                    "namespace {ns:?} is not yours: principal {} uses namespace {:?}",
                    principal.name, principal.namespace
                )));
            }
            _ => principal.namespace.as_str(),
        };
        Scope::check_name("namespace", namespace)?;
        if let Some(label) = credentials.label {
            Scope::check_label(label)?;
        }
        if let Some(branch) = credentials.branch {
            Scope::check_name("branch", branch)?;
        }
        let branch = bound_branch(&principal, credentials.branch)?;
        let scope = Scope {
            session: session.to_owned(),
            namespace: namespace.to_owned(),
            principal: principal.clone(),
            label: credentials.label.unwrap_or_default().to_owned(),
            changeset: String::new(),
            branch: branch.to_owned(),
        };
        Ok(Caller {
            principal,
            scope,
            token: token.map(|t| Secret(t.to_owned())),
            account: Account::unbounded(),
            trail: Trail::default(),
        })
    }

    /// The caller recording its call on `trail` (the front end's, opened
    /// for this call), which learns who is calling.
    pub fn with_trail(mut self, trail: Trail) -> Caller {
        trail.identify(Who {
            principal: &self.principal.name,
            handle: &self.principal.handle,
            session: &self.scope.session,
            label: &self.scope.label,
            branch: &self.scope.branch,
        });
        self.trail = trail;
        self
    }

    /// Checks `op` on `path` ([`Principal::check`]), noting the path, and
    /// a refusal's rule, on the call's audit trail.
    pub fn check(&self, path: &crate::path::VfsPath, op: crate::access::Op) -> Result<()> {
        self.trail.touch(path, op);
        self.principal
            .check(path, op)
            .inspect_err(|e| self.trail.deny(&e.to_string()))
    }

    /// Checks `op` on `dir` or below it ([`Principal::check_within`]),
    /// noting it on the call's audit trail.
    pub fn check_within(&self, dir: &crate::path::VfsPath, op: crate::access::Op) -> Result<()> {
        self.trail.touch(dir, op);
        self.principal
            .check_within(dir, op)
            .inspect_err(|e| self.trail.deny(&e.to_string()))
    }

    /// The caller charging `account` (the transport's account of its call)
    /// for what the call holds; `None` keeps the one it has.
    pub fn with_account(mut self, account: Option<&Account>) -> Caller {
        if let Some(account) = account {
            self.account = account.clone();
        }
        self
    }
}

/// The branch a call of `principal` naming `asked` works in: the one it
/// names, or for a principal bound to a branch (a bound handle) that branch
/// whether the call names it or not; naming another is PERMISSION_DENIED
/// (docs/security.md § Handles bound to a branch).
fn bound_branch<'a>(principal: &'a Principal, asked: Option<&'a str>) -> Result<&'a str> {
    match (principal.branch.as_str(), asked) {
        ("", asked) => Ok(asked.unwrap_or_default()),
        (bound, None) => Ok(bound),
        (bound, Some(asked)) if asked == bound => Ok(bound),
        (bound, Some(asked)) => Err(Error::PermissionDenied(format!(
            "{} is bound to branch {bound:?} and cannot work in branch {asked:?}; drop \
             the x-agentvfs-branch header or send {bound:?}",
            principal.name
        ))),
    }
}

/// A bearer token: `Debug` never shows it, so it cannot reach a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}
