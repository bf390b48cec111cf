//! The caller's view of the files: every tier call behind the grant it
//! needs (docs/contract.md § Grants), so a front end composing several steps
//! cannot skip a check. It runs on a blocking thread ([`super::Service::run`]).

use crate::access::Op;
use crate::backend::{
    Backend, ChunkReader, MoveOutcome, Precondition, UpdateFn, WriteOutcome, check_move_paths,
};
use crate::entry::{Entry, EntryKind};
use crate::error::{Error, Result};
use crate::path::VfsPath;

use super::Caller;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One caller's grant-checked, synchronous access to the backend.
pub struct Files<'a> {
    backend: &'a dyn Backend,
    caller: &'a Caller,
    max_file_bytes: u64,
    abandoned: Abandoned,
}

/// Set when the caller of a running call has gone (its future was dropped:
/// the client reset the stream or disconnected), so that the call's long
/// loops stop at their next step instead of working on for no one.
#[derive(Clone, Default)]
pub struct Abandoned(Arc<AtomicBool>);

impl Abandoned {
    /// Marks the call abandoned.
    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// True once the call is abandoned.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

impl<'a> Files<'a> {
    /// The view of `caller` over `backend`, refusing files over `max_file_bytes`.
    pub fn new(backend: &'a dyn Backend, caller: &'a Caller, max_file_bytes: u64) -> Files<'a> {
        Files {
            backend,
            caller,
            max_file_bytes,
            abandoned: Abandoned::default(),
        }
    }

    /// The same view, stopping at [`Files::go_on`] once `abandoned` is set.
    pub(super) fn abandoned_with(mut self, abandoned: Abandoned) -> Files<'a> {
        self.abandoned = abandoned;
        self
    }

    /// Fails once the caller has gone: a long operation (a merge, a rewind's
    /// plan, a changeset's staging, a patch's matching) asks before each
    /// step, and stops working for no one. Only ever asked before a commit
    /// point, so stopping changes nothing.
    pub fn go_on(&self) -> Result<()> {
        if self.abandoned.is_set() {
            return Err(Error::Unavailable(
                "the caller went away before the call finished; nothing was changed".into(),
            ));
        }
        Ok(())
    }

    /// Largest file a write may produce.
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    /// The backend, for the service's other modules (each checks grants
    /// before every call).
    pub(super) fn backend(&self) -> &dyn Backend {
        self.backend
    }

    /// The caller.
    pub(super) fn caller(&self) -> &Caller {
        self.caller
    }

    /// The caller's scope.
    pub(super) fn scope(&self) -> &crate::scope::Scope {
        &self.caller.scope
    }

    /// Checks one grant (PERMISSION_DENIED naming the path and the operation).
    pub fn check(&self, path: &VfsPath, op: Op) -> Result<()> {
        self.caller.check(path, op)
    }

    /// True when the caller holds `op` on `path` (for answers that show more
    /// to a caller who may see more, as Write's diff).
    pub fn may(&self, path: &VfsPath, op: Op) -> bool {
        self.caller.principal.check(path, op).is_ok()
    }

    /// Checks `op` on `dir` or on some path below it
    /// ([`crate::access::Principal::check_within`]).
    pub fn check_within(&self, dir: &VfsPath, op: Op) -> Result<()> {
        self.caller.check_within(dir, op)
    }

    /// One directory level (`list` grant). A caller granted only prefixes
    /// below `dir` sees the entries leading to or lying in them.
    pub fn list(&self, dir: &VfsPath) -> Result<Vec<Entry>> {
        let visible = self.caller.principal.granted_within(dir, Op::List);
        self.caller.trail.touch(dir, Op::List);
        if visible.is_empty() {
            self.check(dir, Op::List)?;
        }
        let mut entries = self.backend.list(&self.caller.scope, dir)?;
        if visible != [dir.clone()] {
            entries.retain(|e| {
                visible
                    .iter()
                    .any(|p| p.is_within(&e.path) || e.path.is_within(p))
            });
        }
        Ok(entries)
    }

    /// Metadata of one path, under the grant `op` that justifies looking
    /// (`file` for Stat; Write's existence check holds `write`).
    pub fn stat(&self, path: &VfsPath, op: Op) -> Result<Entry> {
        self.check(path, op)?;
        self.backend.stat(&self.caller.scope, path)
    }

    /// A whole file, under the grant `op` of the reading call (`read_file`,
    /// `read_re`): its size is checked against the limit and charged to the
    /// caller's memory once the tier has found the file, before its content
    /// is read ([`crate::backend::Backend::read_admitted`]).
    pub fn read(&self, path: &VfsPath, op: Op) -> Result<(Vec<u8>, Entry)> {
        self.check(path, op)?;
        let (data, entry) = self
            .backend
            .read_admitted(&self.caller.scope, path, &mut |entry| {
                Error::check_file_size(path, entry.size, self.max_file_bytes)?;
                self.charge(entry.size, "reading the file")
            })?;
        self.caller.trail.versions(Some(entry.version), None);
        self.caller.trail.bytes(data.len() as u64);
        Ok((data, entry))
    }

    /// Charges `bytes` the call is about to hold (an answer before it is
    /// built) to the caller's memory account, or refuses them
    /// (RESOURCE_EXHAUSTED naming the limit; `what` names them). They stay
    /// charged until the call's response is sent (`super::memory`).
    pub fn charge(&self, bytes: u64, what: &str) -> Result<()> {
        self.caller.account.charge(bytes, what)
    }

    /// Gives back `bytes` charged for something the call no longer holds
    /// (one file's diff of several).
    pub fn release(&self, bytes: u64) {
        self.caller.account.release(bytes);
    }

    /// A file's metadata and content in pieces (`read_binary` grant).
    pub fn read_chunks(&self, path: &VfsPath, max_chunk: usize) -> Result<(Entry, ChunkReader)> {
        self.check(path, Op::ReadBinary)?;
        self.backend
            .read_chunks(&self.caller.scope, path, max_chunk)
    }

    /// Creates or replaces a file (`write` grant, size limit).
    pub fn write(&self, path: &VfsPath, data: Vec<u8>, pre: Precondition) -> Result<WriteOutcome> {
        self.check(path, Op::Write)?;
        Error::check_file_size(path, data.len() as u64, self.max_file_bytes)?;
        let written = self.backend.write(&self.caller.scope, path, data, pre)?;
        self.caller.trail.versions(None, Some(written.version));
        self.caller.trail.bytes(written.bytes_written);
        Ok(written)
    }

    /// Atomically replaces a file's content with `f(current)` (`read_file`
    /// and `write` grants: the caller sees what it changes).
    pub fn update(
        &self,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        self.check(path, Op::ReadFile)?;
        self.check(path, Op::Write)?;
        let written = self
            .backend
            .update(&self.caller.scope, path, if_version, f)?;
        self.caller.trail.versions(None, Some(written.version));
        self.caller.trail.bytes(written.bytes_written);
        Ok(written)
    }

    /// Deletes a file or, when `recursive`, a directory tree (`delete` grant).
    pub fn delete(&self, path: &VfsPath, if_version: Option<u64>, recursive: bool) -> Result<u64> {
        self.check(path, Op::Delete)?;
        self.backend
            .delete(&self.caller.scope, path, if_version, recursive)
    }

    /// Checks that the caller may read every byte of `path` as stored
    /// (`read_file` and `read_binary`): an operation that carries data
    /// elsewhere (Copy, Move, Restore, Rewind, a changeset's Move) needs
    /// the right to read what it carries, or it would hand the caller bytes
    /// a read refuses (docs/contract.md § Grants).
    pub fn check_may_take(&self, path: &VfsPath) -> Result<()> {
        self.check(path, Op::ReadFile)?;
        self.check(path, Op::ReadBinary)
    }

    /// Moves a file or a directory tree: `write` and `delete` on the source,
    /// `write` on the destination, the right to read what it moves
    /// ([`Files::check_may_take`]), then the path checks, then one atomic
    /// tier step (docs/contract.md § Move).
    pub fn rename(
        &self,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        self.check(source, Op::Write)?;
        self.check(source, Op::Delete)?;
        self.check(destination, Op::Write)?;
        self.check_may_take(source)?;
        check_move_paths(source, destination)?;
        self.backend
            .rename(&self.caller.scope, source, destination, pre)
    }

    /// Copies one file (docs/contract.md § Copy): the right to read it
    /// ([`Files::check_may_take`]), `write` on the destination, then the
    /// paths, then the
    /// source's kind and size (a directory is IS_DIRECTORY, a file over the
    /// size limit RESOURCE_EXHAUSTED, both before any work), charged to the
    /// caller's memory as a read of it would be, then one tier step.
    pub fn copy(
        &self,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        self.check_may_take(source)?;
        self.check(destination, Op::Write)?;
        if source == destination {
            return Err(Error::InvalidArgument(format!(
                "source and destination are the same path: {source}"
            )));
        }
        let entry = self.backend.stat(&self.caller.scope, source)?;
        if entry.is_directory() {
            return Err(Error::IsDirectory(format!(
                "{source} (Copy copies one file; copy a directory's files one by one)"
            )));
        }
        Error::check_file_size(source, entry.size, self.max_file_bytes)?;
        self.charge(entry.size, "copying the file")?;
        self.backend
            .copy(&self.caller.scope, source, destination, pre)
    }

    /// Sets or clears a file's executable bit (`write` grant) as a new
    /// version with the same content (docs/contract.md § The executable
    /// bit); answers the version whose content was carried and the version
    /// after (the same when the bit already was so). The content goes from
    /// the current version to the new one in pieces, charged to the caller
    /// as a read of it.
    pub fn set_executable(
        &self,
        path: &VfsPath,
        executable: bool,
        if_version: Option<u64>,
    ) -> Result<(u64, u64)> {
        self.check(path, Op::Write)?;
        let scope = &self.caller.scope;
        for _ in 0..SET_EXECUTABLE_ATTEMPTS {
            let entry = self.backend.stat(scope, path)?;
            match entry.kind {
                EntryKind::File => {}
                EntryKind::Directory => return Err(Error::IsDirectory(path.to_string())),
                EntryKind::Symlink { .. } => {
                    return Err(Error::PermissionDenied(format!(
                        "{path} is a symbolic link; it has no executable bit of its own"
                    )));
                }
            }
            Precondition::if_version(if_version).check(path, Some(entry.version))?;
            if entry.executable == executable {
                return Ok((entry.version, entry.version));
            }
            self.charge(entry.size, "carrying the file to its new version")?;
            let (found, mut pieces) =
                self.backend
                    .read_chunks(scope, path, SET_EXECUTABLE_PIECE)?;
            let pre = Precondition {
                create_only: false,
                if_version: Some(found.version),
                executable: Some(executable),
            };
            let written = if found.version == entry.version {
                self.backend.write_chunks(scope, path, pre, &mut pieces)
            } else {
                Err(Error::VersionMismatch {
                    path: path.to_string(),
                    expected: entry.version,
                    actual: found.version,
                })
            };
            self.release(entry.size);
            match written {
                Ok(outcome) => return Ok((entry.version, outcome.version)),
                // Changed between the look and the write: the caller named
                // no version, so look again.
                Err(Error::VersionMismatch { .. }) if if_version.is_none() => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::Unavailable(format!(
            "{path}: setting its executable bit lost {SET_EXECUTABLE_ATTEMPTS} races with other \
             writers; try again"
        )))
    }
}

/// Tries of [`Files::set_executable`] against concurrent writers.
const SET_EXECUTABLE_ATTEMPTS: usize = 8;
/// Pieces [`Files::set_executable`] carries content in: one ReadBytes
/// message's worth.
const SET_EXECUTABLE_PIECE: usize = 1 << 20;
