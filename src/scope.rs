//! Whose data a call sees and whose rights apply. A leaf module: the tiers
//! read it, the front ends build it, the configuration validates names with
//! it.

use crate::access::Principal;
use crate::error::{Error, Result};
use std::sync::Arc;

/// Longest session or namespace name.
pub const MAX_SCOPE_NAME: usize = 128;

/// What the names of the scopes agentvfs keeps for itself start with.
pub const INTERNAL_SCOPE: char = '!';

/// Longest label (`x-agentvfs-label`).
pub const MAX_LABEL: usize = 128;

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
    /// The caller's label for what it changes (`x-agentvfs-label`, a tool's
    /// `label` argument; empty: none), kept with every change it makes so
    /// history, Watch and Rewind can name one turn or tool call.
    pub label: String,
    /// The changeset the call's changes belong to (empty outside one), kept
    /// with each of them like the label.
    pub changeset: String,
    /// The branch the call works in (`x-agentvfs-branch`; empty: the base),
    /// docs/branches.md.
    pub branch: String,
}

impl Default for Scope {
    /// The local principal's default session and namespace (every right).
    fn default() -> Self {
        Scope {
            session: "default".into(),
            namespace: "default".into(),
            principal: Arc::new(Principal::local()),
            label: String::new(),
            changeset: String::new(),
            branch: String::new(),
        }
    }
}

impl Scope {
    /// Validates a session or namespace name (`kind` says which): 1–128 of
    /// letters, digits and `-_.@+:~`, so a name can never smuggle a path or a
    /// control character into storage keys.
    pub fn check_name(kind: &str, name: &str) -> Result<()> {
        check_chars(&format!("{kind} name"), name, MAX_SCOPE_NAME, "-_.@+:~")
    }

    /// Validates a name a tier keys its storage by: a caller's name
    /// ([`Scope::check_name`]), or one of the scopes agentvfs keeps for
    /// itself (a branch's changes, the registry of branches), which start
    /// with [`INTERNAL_SCOPE`], a character no caller can send.
    pub fn check_stored_name(kind: &str, name: &str) -> Result<()> {
        match name.strip_prefix(INTERNAL_SCOPE) {
            Some(internal) => check_chars(
                &format!("internal {kind} name"),
                internal,
                3 * MAX_SCOPE_NAME,
                "-_.@+:~",
            ),
            None => Scope::check_name(kind, name),
        }
    }

    /// Validates a change label: 1-128 of letters, digits and `-_.@+:~/#=`,
    /// which holds tool-call ids (`toolu_01…`, `call_…`), UUIDs and
    /// `turn/7`-style names, and keeps labels printable in every log line
    /// and safe in every stored record.
    pub fn check_label(label: &str) -> Result<()> {
        check_chars("label", label, MAX_LABEL, "-_.@+:~/#=")
    }
}

/// `value` is 1 to `max` bytes of ASCII letters, digits and `punctuation`,
/// else INVALID_ARGUMENT naming `what` and the rule.
fn check_chars(what: &str, value: &str, max: usize, punctuation: &str) -> Result<()> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || punctuation.contains(c);
    if value.is_empty() || value.len() > max || !value.chars().all(ok_char) {
        return Err(Error::InvalidArgument(format!(
            "invalid {what} {value:?}: use 1-{max} letters, digits or {punctuation}"
        )));
    }
    Ok(())
}
