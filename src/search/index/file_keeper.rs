//! Keeps each namespace's index in a file of a directory in the server's
//! data directory, never in the user's tree (docs/search-index.md
//! § Persistence in files): a Filesystem mount's, and each namespace's of
//! an object-tier mount. Servers of one directory share the files: each
//! copy is exact by itself (by metadata on the Filesystem tier, by versions
//! on the object tier), so whichever was saved last serves them all.
//!
//! A file is named by a hash of the namespace's key and begins with the
//! key itself, so a load never takes another namespace's index, even on a
//! hash collision. Mode 0600: an index tells which trigrams each file
//! holds.

use super::persist::{Keeper, Kept};
use crate::error::{Error, Result};
use std::io::Read;
use std::path::PathBuf;

/// The suffix of a kept index's file name.
const SUFFIX: &str = "avix";

/// A [`Keeper`] over one directory, one file per namespace.
pub struct FileKeeper {
    dir: PathBuf,
    /// [`Keeper::keeps_table`].
    keeps_table: bool,
}

impl FileKeeper {
    /// Keeps indexes in `dir` (made at the first save), with the path
    /// table when `keeps_table`. Removes what saves cut short by a crash
    /// left there.
    pub fn new(dir: PathBuf, keeps_table: bool) -> FileKeeper {
        crate::private_file::remove_stale_temporaries(&dir, SUFFIX, STALE_AFTER);
        FileKeeper { dir, keeps_table }
    }

    /// The file of `key`.
    fn path(&self, key: &str) -> PathBuf {
        let hash = stable_hash(key.as_bytes());
        self.dir.join(format!("{hash:016x}.{SUFFIX}"))
    }

    fn io_error(&self, what: &str, key: &str, err: std::io::Error) -> Error {
        let path = self.path(key);
        Error::Internal(format!("{what} {}: {err}", path.display()))
    }
}

/// How long a save's temporary file goes unwritten before it counts as
/// left by a crash: a save writes without pause, so one of another server
/// sharing the directory is never this old.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

/// FNV-1a of `bytes`: the same in every build (unlike std's hasher), so
/// it can name files that outlive the process (also the default data
/// directories of `crate::config`).
pub fn stable_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The bytes a file starts with: the key's length (2 bytes, little
/// endian) and the key.
fn header(key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + key.len());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out
}

impl Keeper for FileKeeper {
    fn load(&self, key: &str, limit: u64) -> Result<Kept> {
        let file = match std::fs::File::open(self.path(key)) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Kept::Nothing),
            Err(err) => return Err(self.io_error("cannot open the search index", key, err)),
        };
        let header = header(key);
        let length = file
            .metadata()
            .map_err(|err| self.io_error("cannot read the search index", key, err))?
            .len()
            .saturating_sub(header.len() as u64);
        if length > limit {
            return Ok(Kept::Over(length));
        }
        // Bounded again: the file may have grown since its length was read.
        let mut file = file.take(header.len() as u64 + limit);
        let mut start = vec![0; header.len()];
        let mut bytes = Vec::with_capacity(length as usize);
        let read = file
            .read_exact(&mut start)
            .and_then(|()| file.read_to_end(&mut bytes));
        match read {
            // Another namespace's (a hash collision), or cut short: none
            // for this one, and the next save replaces it.
            Ok(_) if start != header => Ok(Kept::Nothing),
            Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => Ok(Kept::Nothing),
            Ok(_) => Ok(Kept::Bytes(bytes)),
            Err(err) => Err(self.io_error("cannot read the search index", key, err)),
        }
    }

    fn save(&self, key: &str, bytes: &[u8]) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .and_then(|()| crate::private_file::write(&self.path(key), &[&header(key), bytes]))
            .map_err(|e| self.io_error("cannot save the search index", key, e))
    }

    fn forget(&self, key: &str) -> Result<()> {
        match std::fs::remove_file(self.path(key)) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                Err(self.io_error("cannot drop the search index", key, err))
            }
            _ => Ok(()),
        }
    }

    fn keeps_table(&self) -> bool {
        self.keeps_table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_namespace_reads_back_only_its_own_copy() {
        let dir = tempfile::tempdir().unwrap();
        let keeper = FileKeeper::new(dir.path().join("idx"), true);
        let load = |key| keeper.load(key, 1 << 20).unwrap();
        assert_eq!(load("a"), Kept::Nothing);
        keeper.save("a", b"index of a").unwrap();
        keeper.save("b", b"index of b").unwrap();
        assert_eq!(load("a"), Kept::Bytes(b"index of a".to_vec()));
        assert_eq!(load("b"), Kept::Bytes(b"index of b".to_vec()));
        // A file holding another key, as a hash collision would leave it.
        std::fs::copy(keeper.path("b"), keeper.path("c")).unwrap();
        assert_eq!(load("c"), Kept::Nothing);
        keeper.forget("a").unwrap();
        assert_eq!(load("a"), Kept::Nothing);
        keeper.forget("a").unwrap();
    }

    #[test]
    fn a_save_cut_short_long_ago_is_removed_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let idx = dir.path().join("idx");
        std::fs::create_dir_all(&idx).unwrap();
        let old = idx.join(".0123456789abcdef.avix.00000000000000aa.tmp");
        let fresh = idx.join(".0123456789abcdef.avix.00000000000000bb.tmp");
        let other = idx.join(".unrelated.tmp");
        for path in [&old, &fresh, &other] {
            std::fs::write(path, b"part of an index").unwrap();
        }
        let long_ago = std::time::SystemTime::now() - 2 * STALE_AFTER;
        for path in [&old, &other] {
            let file = std::fs::File::options().write(true).open(path).unwrap();
            file.set_modified(long_ago).unwrap();
        }
        let _keeper = FileKeeper::new(idx, true);
        assert!(!old.exists());
        // Another server's save in progress, and what is not a save's.
        assert!(fresh.exists() && other.exists());
    }

    #[test]
    fn a_copy_over_the_limit_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let keeper = FileKeeper::new(dir.path().join("idx"), true);
        keeper.save("b", b"index of b").unwrap();
        assert_eq!(keeper.load("b", 9).unwrap(), Kept::Over(10));
        assert_eq!(
            keeper.load("b", 10).unwrap(),
            Kept::Bytes(b"index of b".to_vec())
        );
    }
}
