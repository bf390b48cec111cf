//! Branches (docs/branches.md): a named, copy-on-write fork of a subtree of
//! one mount, worked in with `x-agentvfs-branch` and merged back as one
//! changeset.
//!
//! Model: a branch is an overlay over its base. Forking writes one record
//! ([`Registry`]), whatever the subtree holds, so it costs the same for ten
//! files as for a million. The branch's own changes live in the same tier as
//! the base, in a scope of their own (the *upper* scope: a State session and
//! a Store or object namespace no caller can name; on a Filesystem mount, a
//! directory of the server's data directory, `src/backend/fs/scopes.rs`);
//! reads of what the branch has not changed fall through to the base as it
//! is now.
//!
//! Beside each file the branch changed, the upper scope keeps two sidecars
//! under names callers cannot write in a branch ([`RESERVED_PREFIX`]):
//! - a *whiteout* (`.avfs-wh.NAME`): the branch deleted the base's `NAME`;
//! - a *base record* (`.avfs-base.NAME`): the base's `NAME` when the branch
//!   first changed it (its version and content, or that it did not exist),
//!   the common ancestor of a three-way merge.
//!
//! Every change in a branch is one `Backend::commit` of the upper scope
//! holding the file and its sidecars, so it is atomic on every tier that
//! takes changesets, with the tier's own compare-and-set: two writers of one
//! branch serialize exactly as on the base.
//!
//! Versions: a file the branch changed shows its upper version with
//! [`UPPER_BIT`] set, so its versions keep growing past the base's and an
//! `if_version` read on the base can never match a branch version by chance.
//!
//! Files: `record` (the registry of branches), `overlay` (the `Backend`
//! that serves calls made in a branch), `sidecar` (the sidecar names and
//! the base record's format), `touched` (what a branch changed, for diff,
//! merge and size), `walk` (the ordered walk a search in a branch takes),
//! `listing` (one directory as the branch shows it, for that walk).

mod listing;
mod overlay;
mod record;
mod sidecar;
mod touched;
mod walk;

pub use overlay::Overlay;
pub use record::{BranchRecord, RecordCache, Registry, no_branch};
pub use sidecar::{BaseRecord, RESERVED_PREFIX, is_reserved};
pub use touched::{Sides, Touched};

/// Set in the version of every file a branch changed (see the module doc).
pub const UPPER_BIT: u64 = 1 << 63;
