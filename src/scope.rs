//! Whose data a call sees and whose rights apply. A leaf module: the tiers
//! read it, the front ends build it, the configuration validates names with
//! it.

use crate::access::Principal;
use crate::error::{Error, Result};
use std::sync::Arc;

/// Longest session or namespace name.
pub const MAX_SCOPE_NAME: usize = 128;

/// Whose data a call sees and whose rights apply: the State tier is scoped by
/// session, the Store tier by namespace, and the Filesystem tier follows a
/// symbolic link only where the principal's grants hold for the link's
/// target as they do for the path that named it (see `fs::sandbox`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    /// The `x-agentvfs-session` of the request (`default` when absent).
    pub session: String,
    /// The principal's Store namespace (`default` when not configured).
    pub namespace: String,
    /// The caller, whose grants decide which links may be followed.
    pub principal: Arc<Principal>,
}

impl Default for Scope {
    /// The local principal's default session and namespace (every right).
    fn default() -> Self {
        Scope {
            session: "default".into(),
            namespace: "default".into(),
            principal: Arc::new(Principal::local()),
        }
    }
}

impl Scope {
    /// Validates a session or namespace name (`kind` says which): 1–128 of
    /// letters, digits and `-_.@+:~`, so a name can never smuggle a path or a
    /// control character into storage keys.
    pub fn check_name(kind: &str, name: &str) -> Result<()> {
        let ok_char = |c: char| c.is_ascii_alphanumeric() || "-_.@+:~".contains(c);
        if name.is_empty() || name.len() > MAX_SCOPE_NAME || !name.chars().all(ok_char) {
            return Err(Error::InvalidArgument(format!(
                "invalid {kind} name {name:?}: use 1-{MAX_SCOPE_NAME} letters, digits or -_.@+:~"
            )));
        }
        Ok(())
    }
}
