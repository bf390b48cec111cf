//! Version history: what a retained version of a file is, and which
//! versions a mount keeps (docs/contract.md § Changes and history). A leaf
//! module: the ordered tiers keep versions by these rules, the front ends
//! show them.

use crate::change::Origin;
use crate::entry::{Entry, EntryKind};
use crate::path::VfsPath;
use std::time::{Duration, SystemTime};

/// One retained version of a file: its content's metadata, or a tombstone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileVersion {
    /// The version number (unique in the tier, growing).
    pub version: u64,
    /// Content length (0 for a tombstone).
    pub size: u64,
    /// When the version was made.
    pub time: SystemTime,
    /// Who made it, and how.
    pub origin: Origin,
    /// The file was deleted (or moved away) at this version.
    pub deleted: bool,
    /// This is the file's current content.
    pub current: bool,
}

impl FileVersion {
    /// The entry of this version of the file at `path`, as a Stat would
    /// have shown it (the creation time unknown: its own time).
    pub fn entry(&self, path: VfsPath) -> Entry {
        Entry {
            path,
            kind: EntryKind::File,
            size: self.size,
            modified: self.time,
            created: self.time,
            version: self.version,
            // A past version's bit is applied by Restore, not reported here.
            executable: false,
        }
    }
}

/// Which versions of a file a mount keeps, as backup tools' "keep last N"
/// and "keep within T" rules do: a version is kept while it is among the
/// newest `versions` of its file (the current one counts) or younger than
/// `within`. Space is therefore bounded by `versions` per file plus what was
/// written within `within`. Versions a rule no longer keeps are dropped when
/// their file next changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Versions kept per file, the current one included; 1 keeps no history.
    pub versions: usize,
    /// Also keep every version younger than this (`None`: no such rule).
    pub within: Option<Duration>,
}

impl Retention {
    /// Default versions kept per file.
    pub const DEFAULT_VERSIONS: usize = 10;

    /// The default: the last ten versions of every file.
    pub const DEFAULT: Retention = Retention {
        versions: Retention::DEFAULT_VERSIONS,
        within: None,
    };

    /// True when past versions are kept at all.
    pub fn keeps_history(&self) -> bool {
        self.versions > 1 || self.within.is_some()
    }

    /// Of a file's past versions `(version, time)`, newest first, with
    /// `newer` more versions (the current one, a new tombstone) ahead of
    /// them, the versions to drop at `now`.
    pub fn doomed(&self, newer: usize, past: &[(u64, SystemTime)], now: SystemTime) -> Vec<u64> {
        past.iter()
            .enumerate()
            .filter(|(i, (_, time))| {
                let by_count = newer + i < self.versions;
                let by_age = self.within.is_some_and(|within| {
                    now.duration_since(*time).unwrap_or(Duration::ZERO) < within
                });
                !by_count && !by_age
            })
            .map(|(_, (version, _))| *version)
            .collect()
    }
}

impl Default for Retention {
    fn default() -> Retention {
        Retention::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_versions_and_the_young_ones_are_kept() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let past: Vec<(u64, SystemTime)> = (0..6)
            .map(|i| (10 - i, now - Duration::from_secs(100 * i)))
            .collect();
        let last_three = Retention {
            versions: 3,
            within: None,
        };
        assert_eq!(last_three.doomed(1, &past, now), [8, 7, 6, 5]);
        assert_eq!(last_three.doomed(0, &past, now), [7, 6, 5]);
        let and_young = Retention {
            versions: 3,
            within: Some(Duration::from_secs(250)),
        };
        assert_eq!(and_young.doomed(1, &past, now), [7, 6, 5]);
        let none = Retention {
            versions: 1,
            within: None,
        };
        assert!(!none.keeps_history());
        assert_eq!(none.doomed(1, &past, now).len(), 6);
    }
}
