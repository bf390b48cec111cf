//! Version history for every front end (docs/contract.md § Changes and
//! history): listing a file's retained versions, reading one, restoring
//! one, and the unified diff between two. Grants: ListVersions needs
//! `file`; reading a version needs what reading the file needs; a diff
//! `read_file`; a restore `read_file` and `write` (the caller sees what it
//! writes back).

use super::Files;
use crate::access::Op;
use crate::backend::{ChunkReader, WriteOutcome};
use crate::error::{Error, Result};
use crate::history::FileVersion;
use crate::path::VfsPath;
use crate::text::{self, diff};

/// Pieces a whole version is gathered from.
const VERSION_PIECE_BYTES: usize = 1 << 20;

/// A diff between two versions of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionDiff {
    /// The older side.
    pub from_version: u64,
    /// The newer side.
    pub to_version: u64,
    /// The unified diff and its counts.
    pub diff: diff::DiffPreview,
}

/// The error of a version that is a tombstone, where content was needed.
fn deletion(path: &VfsPath, version: u64) -> Error {
    Error::InvalidArgument(format!(
        "version {version} of {path} is a deletion: it has no content"
    ))
}

impl Files<'_> {
    /// The retained versions of the file at `path`, newest first (`file`
    /// grant).
    pub fn versions(&self, path: &VfsPath) -> Result<Vec<FileVersion>> {
        self.check(path, Op::File)?;
        self.backend().versions(self.scope(), path)
    }

    /// A retained version's metadata and its content in pieces of at most
    /// `max_chunk` bytes, under the grant `op` of the reading call. A
    /// tombstone is INVALID_ARGUMENT: it has no content.
    pub fn read_version_chunks(
        &self,
        path: &VfsPath,
        version: u64,
        op: Op,
        max_chunk: usize,
    ) -> Result<(FileVersion, ChunkReader)> {
        self.check(path, op)?;
        let (found, pieces) =
            self.backend()
                .read_version(self.scope(), path, version, max_chunk)?;
        if found.deleted {
            return Err(deletion(path, version));
        }
        Ok((found, pieces))
    }

    /// A retained version whole, under the grant `op` of the reading call.
    pub fn read_version(
        &self,
        path: &VfsPath,
        version: u64,
        op: Op,
    ) -> Result<(Vec<u8>, FileVersion)> {
        let (found, pieces) = self.read_version_chunks(path, version, op, VERSION_PIECE_BYTES)?;
        let data = self.gather(path, found.size, pieces)?;
        Ok((data, found))
    }

    /// Writes retained `version` back as the file's newest version
    /// (`read_file`, `read_binary` and `write` grants: it writes back bytes
    /// the caller must be allowed to read), `if_version` checked against
    /// the current one (0: the file must not exist).
    pub fn restore(
        &self,
        path: &VfsPath,
        version: u64,
        if_version: Option<u64>,
    ) -> Result<WriteOutcome> {
        self.check_may_take(path)?;
        self.check(path, Op::Write)?;
        self.backend()
            .restore(self.scope(), path, version, if_version)
    }

    /// A version's pieces gathered whole, its recorded `size` charged to
    /// the caller's memory share first.
    fn gather(&self, path: &VfsPath, size: u64, pieces: ChunkReader) -> Result<Vec<u8>> {
        Error::check_file_size(path, size, self.max_file_bytes())?;
        self.charge(size, "reading a version")?;
        self.collect(path, size, pieces)
    }

    /// A version's pieces gathered whole (`size`: its recorded size), what
    /// arrives checked against the file size limit.
    fn collect(&self, path: &VfsPath, size: u64, pieces: ChunkReader) -> Result<Vec<u8>> {
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        for piece in pieces {
            data.extend_from_slice(&piece?);
            Error::check_file_size(path, data.len() as u64, self.max_file_bytes())?;
        }
        Ok(data)
    }

    /// Retained `version` of `path` for a diff, not yet read: its record,
    /// its pieces, and the bytes it holds (a tombstone none).
    fn diff_side(&self, path: &VfsPath, version: u64) -> Result<(FileVersion, ChunkReader, u64)> {
        let (found, pieces) =
            self.backend()
                .read_version(self.scope(), path, version, VERSION_PIECE_BYTES)?;
        let size = if found.deleted { 0 } else { found.size };
        Error::check_file_size(path, size, self.max_file_bytes())?;
        Ok((found, pieces, size))
    }

    /// The text of a diff's side: a tombstone is empty.
    fn side_text(&self, path: &VfsPath, side: (FileVersion, ChunkReader, u64)) -> Result<String> {
        let (found, pieces, size) = side;
        let data = if found.deleted {
            Vec::new()
        } else {
            self.collect(path, size, pieces)?
        };
        let shown = format!("{path} (version {})", found.version);
        Ok(text::decode(&shown, &data)?.text.into_owned())
    }

    /// The unified diff of the file at `path` from `from` to `to` (`None`:
    /// its newest retained version, the current content or a tombstone),
    /// bounded by `caps` (`read_file` grant). A tombstone compares as an
    /// empty file; a binary side is BINARY_FILE.
    pub fn diff(
        &self,
        path: &VfsPath,
        from: u64,
        to: Option<u64>,
        caps: diff::DiffCaps,
    ) -> Result<VersionDiff> {
        self.check(path, Op::ReadFile)?;
        let to = match to {
            Some(to) => to,
            None => self
                .backend()
                .versions(self.scope(), path)?
                .first()
                .map(|newest| newest.version)
                .ok_or_else(|| Error::NotFound(path.to_string()))?,
        };
        let (old, new) = (self.diff_side(path, from)?, self.diff_side(path, to)?);
        // Both texts, then the diff's line tables and its answer (about
        // three times the texts, measured on 120,000-line versions), charged
        // at once before anything is read: charged in steps, concurrent
        // diffs past the share each held a part and none could finish.
        self.charge(4 * (old.2 + new.2), "the diff")?;
        let (old, new) = (self.side_text(path, old)?, self.side_text(path, new)?);
        let shown = path.as_str().trim_start_matches('/');
        Ok(VersionDiff {
            from_version: from,
            to_version: to,
            diff: diff::unified(shown, &old, &new, caps),
        })
    }
}
