//! One file's Grep on the Filesystem tier, the same for the tree's walk
//! (`super::search`) and the table walk (`super::table_walk`), so that
//! both report a file alike: only a regular file within the Grep's size
//! limit at its `fstat` is searched, always as a stream, and only a file
//! the index learns is read whole first (into a [`LearnBuffer`], which the
//! mount's learn buffers bound).

use super::index::LearnBuffer;
use super::sandbox::{file_type, modified};
use crate::path::VfsPath;
use crate::search::{FileHits, FileSearcher};
use rustix::fs::{FileType, Stat};
use std::os::fd::OwnedFd;

/// Searches the opened file `fd`, whose `fstat` is `st`; `read_whole` may
/// read it whole for the index first, and then that copy is searched.
/// Either way it is searched as a stream, as the scan searches it (binary
/// detection differs for a slice: `crate::search::grep`). `within`: the
/// index knows every match of this very file lies in its first so many
/// pieces, so it is read no further
/// (`crate::search::FileSearcher::search_reader_within`).
pub fn search_opened(
    searcher: &mut FileSearcher<'_>,
    path: &VfsPath,
    (fd, st): (OwnedFd, &Stat),
    read_whole: impl FnOnce(&OwnedFd) -> Option<LearnBuffer>,
    within: Option<u32>,
) -> Option<FileHits> {
    if file_type(st) != FileType::RegularFile || !searcher.within_size(st.st_size as u64) {
        return None;
    }
    let modified = modified(st);
    if let Some(data) = read_whole(&fd) {
        let size = data.as_slice().len() as u64;
        return searcher.search_reader(path, modified, size, data.as_slice());
    }
    let (size, file) = (st.st_size as u64, std::fs::File::from(fd));
    match within {
        Some(pieces) => searcher.search_reader_within(path, modified, size, file, pieces),
        None => searcher.search_reader(path, modified, size, file),
    }
}
