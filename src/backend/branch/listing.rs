//! One directory as a branch shows it, which the overlay makes and a
//! search's walk in the branch keeps (its own module so that neither of
//! the two depends on the other for it).

use crate::entry::Entry;
use crate::path::VfsPath;
use std::collections::HashSet;

/// One directory as the branch shows it, for a search's walk.
pub(super) struct Listing {
    /// The entries shown, in path order (the branch's files tagged).
    pub entries: Vec<Entry>,
    /// The names the branch keeps a base record of (it changed them).
    pub based: HashSet<VfsPath>,
}

impl Listing {
    /// An empty directory's.
    pub fn empty() -> Listing {
        Listing {
            entries: Vec::new(),
            based: HashSet::new(),
        }
    }
}
