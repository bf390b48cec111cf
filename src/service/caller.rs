//! Who is calling: the principal, its scope and its token, as every front
//! end hands them to the application layer. The gRPC interceptor builds it
//! from request metadata (`server/caller.rs`); the Tools and any future
//! adapter pass it through unchanged.

use crate::access::Principal;
use crate::scope::Scope;
use std::sync::Arc;

/// The authenticated caller of one request.
#[derive(Clone, Debug)]
pub struct Caller {
    /// Its rights.
    pub principal: Arc<Principal>,
    /// Whose data it sees.
    pub scope: Scope,
    /// The bearer token it presented (handles record their creator's).
    pub token: Option<Secret>,
}

/// A bearer token: `Debug` never shows it, so it cannot reach a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}
