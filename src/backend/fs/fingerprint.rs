//! What names one state of a real file, for the Filesystem tier's search
//! index (docs/search-index.md § The Filesystem tier): its [`fingerprint`],
//! and whether that state has [`settled`] so that no later state can carry
//! the same fingerprint. The index, the mirror and the table walk all key
//! files by it.

use rustix::fs::Stat;
use std::time::{Duration, SystemTime};

/// How long ago a file must have last changed to be learned, when its
/// times carry nanoseconds: the file system's granularity (ext4, xfs,
/// btrfs: the kernel's coarse clock, at most 10 ms behind; exFAT: 10 ms)
/// with a wide margin.
const SETTLED_AFTER: Duration = Duration::from_secs(1);

/// The same when neither time carries nanoseconds, as on file systems that
/// keep whole seconds (ext3's small inodes) or two (FAT).
const SETTLED_AFTER_COARSE: Duration = Duration::from_secs(3);

/// The fingerprint of a file's state: device, inode, size, and both times
/// to the nanosecond, mixed into 64 bits (a stable function: persisted
/// indexes compare it across restarts).
pub fn fingerprint(st: &Stat) -> u64 {
    let fields = [
        st.st_dev,
        st.st_ino,
        st.st_size as u64,
        st.st_mtime as u64,
        st.st_mtime_nsec,
        st.st_ctime as u64,
        st.st_ctime_nsec,
    ];
    fields
        .into_iter()
        .fold(0x9e37_79b9_7f4a_7c15, |h, f| mix(h ^ f))
}

/// splitmix64's finaliser: every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// True when the file whose `stat` was taken at `now` last changed long
/// enough before that no later change can carry the same ctime.
pub fn settled(st: &Stat, now: SystemTime) -> bool {
    let coarse = st.st_ctime_nsec == 0 && st.st_mtime_nsec == 0;
    let margin = if coarse {
        SETTLED_AFTER_COARSE
    } else {
        SETTLED_AFTER
    };
    let ctime = super::sandbox::time(st.st_ctime, st.st_ctime_nsec);
    ctime + margin < now
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn stat_of(path: &Path) -> Stat {
        rustix::fs::lstat(path).unwrap()
    }

    #[test]
    fn a_change_of_size_or_time_changes_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "one").unwrap();
        let first = fingerprint(&stat_of(&file));
        assert_eq!(first, fingerprint(&stat_of(&file)));
        std::fs::write(&file, "three").unwrap();
        assert_ne!(first, fingerprint(&stat_of(&file)));
    }

    #[test]
    fn a_file_just_written_is_not_settled_until_later() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let st = stat_of(&file);
        assert!(!settled(&st, SystemTime::now()));
        assert!(settled(&st, SystemTime::now() + SETTLED_AFTER_COARSE * 2));
    }
}
