//! Who is calling: the interceptor that turns request metadata into a
//! [`Caller`] every handler reads.
//!
//! - `authorization: Bearer <token>` names the principal (see [`Auth`]);
//! - `x-agentvfs-session` scopes the State tier (default `default`);
//! - `x-agentvfs-namespace` picks the Store namespace in anonymous mode
//!   (`[access] anonymous`); otherwise every caller, handles included, is
//!   bound to its principal's namespace.
//!
//! Header values are validated like names ([`Scope::check_name`]) so they can
//! never smuggle a path or a control character into storage keys. Tokens are
//! never logged.

use crate::auth::Auth;
use crate::error::{Error, Result};
use crate::scope::Scope;
use crate::service::{Caller, Secret};
use std::sync::Arc;
use tonic::{Request, Status};

/// Metadata key of the session.
pub const SESSION_HEADER: &str = "x-agentvfs-session";
/// Metadata key of the namespace.
pub const NAMESPACE_HEADER: &str = "x-agentvfs-namespace";

fn header<'a, T>(req: &'a Request<T>, key: &str) -> Result<Option<&'a str>> {
    match req.metadata().get(key) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(Some)
            .map_err(|_| Error::InvalidArgument(format!("metadata {key} is not printable ASCII"))),
    }
}

/// Builds the [`Caller`] of a request, or the status that rejects it.
pub fn identify<T>(auth: &Auth, req: &Request<T>) -> Result<Caller> {
    let token = match header(req, "authorization")? {
        None => None,
        Some(value) => Some(value.strip_prefix("Bearer ").ok_or_else(|| {
            Error::Unauthenticated("authorization metadata must be 'Bearer <token>'".into())
        })?),
    };
    let principal = auth.authenticate(token)?;
    let session = header(req, SESSION_HEADER)?.unwrap_or("default");
    Scope::check_name("session", session)?;
    // In anonymous mode the caller may pick any namespace (it could drop its
    // token anyway); otherwise it is bound to its principal's.
    let namespace = match header(req, NAMESPACE_HEADER)? {
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
    let scope = Scope {
        session: session.to_owned(),
        namespace: namespace.to_owned(),
        principal: principal.clone(),
    };
    Ok(Caller {
        principal,
        scope,
        token: token.map(|t| Secret(t.to_owned())),
    })
}

/// The tonic interceptor: attaches the [`Caller`] or rejects the request.
pub fn interceptor(
    auth: Arc<Auth>,
) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |mut req: Request<()>| {
        let caller = identify(&auth, &req)?;
        req.extensions_mut().insert(caller);
        Ok(req)
    }
}

/// The [`Caller`] the interceptor attached.
pub fn caller<T>(req: &Request<T>) -> Result<Caller> {
    req.extensions().get::<Caller>().cloned().ok_or_else(|| {
        Error::Internal("request reached a service without passing the interceptor".into())
    })
}
