//! Who is calling: the interceptor that turns request metadata into a
//! [`Caller`] every handler reads.
//!
//! `authorization`, `x-agentvfs-session`, `x-agentvfs-namespace` and
//! `x-agentvfs-label` and `x-agentvfs-branch` are the
//! [`Credentials`]; [`Caller::identify`] applies the rules
//! (`service/caller.rs`).

use crate::audit::Trail;
use crate::auth::Auth;
use crate::error::{Error, Result};
use crate::service::{
    Account, BRANCH_HEADER, Caller, Credentials, LABEL_HEADER, NAMESPACE_HEADER, SESSION_HEADER,
};
use std::sync::Arc;
use tonic::{Request, Status};

fn header<'a, T>(req: &'a Request<T>, key: &str) -> Result<Option<&'a str>> {
    match req.metadata().get(key) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(Some)
            .map_err(|_| Error::InvalidArgument(format!("metadata {key} is not printable ASCII"))),
    }
}

/// Builds the [`Caller`] of a request from its metadata, or the status
/// that rejects it.
pub fn identify<T>(auth: &Auth, req: &Request<T>) -> Result<Caller> {
    let credentials = Credentials {
        authorization: header(req, "authorization")?,
        session: header(req, SESSION_HEADER)?,
        namespace: header(req, NAMESPACE_HEADER)?,
        label: header(req, LABEL_HEADER)?,
        branch: header(req, BRANCH_HEADER)?,
    };
    Caller::identify(auth, credentials)
}

/// The tonic interceptor: attaches the [`Caller`], charging the memory
/// account the transport opened for the call and noting on the audit
/// trail [`super::audited::Audited`] opened for it, or rejects the request.
pub fn interceptor(
    auth: Arc<Auth>,
) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |mut req: Request<()>| {
        let trail = req.extensions().get::<Trail>().cloned().unwrap_or_default();
        let caller = identify(&auth, &req)?
            .with_account(req.extensions().get::<Account>())
            .with_trail(trail);
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
