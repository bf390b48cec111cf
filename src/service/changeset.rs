//! Changesets: several file operations of one mount applied all or nothing
//! (docs/changesets.md).
//!
//! A changeset is staged, then committed:
//!
//! 1. every operation's grants are checked, and its size against the
//!    bounds, before any file is read;
//! 2. the operations run in order over the files as the changeset read them
//!    (each file read once, at its first use), each seeing what the ones
//!    before it did; an operation that fails names itself, and nothing is
//!    written;
//! 3. the tier applies each touched file's final state in one atomic step,
//!    on condition that every file is still at the version staging read
//!    ([`Backend::commit`]). When another change came in between, staging
//!    starts over from fresh reads (at most [`MAX_ATTEMPTS`] times), so
//!    the changeset applies as if alone, and an `if_version` is checked
//!    against what is really replaced.
//!
//! Preconditions: `if_version` and `create_only` are checked against the
//! file as the operations before it left it. A file an earlier operation of
//! the changeset changed has no version yet, so `if_version` on it is
//! INVALID_ARGUMENT.

use super::{Files, TextEdit};
use crate::access::Op;
use crate::backend::changeset::spans_mounts;
use crate::backend::{Backend, FileAction, FileChange, FileCommitted, Precondition};
use crate::change::Operation;
use crate::error::{Error, Result, echo};
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::text::{self, EditSpec, patch::Hunk};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Times a changeset is staged again when a file changed under it before
/// it could commit (within `changeset_timeout_ms`); past them it is
/// UNAVAILABLE: nothing was applied, and trying again may succeed.
pub const MAX_ATTEMPTS: usize = 32;

/// One operation of a changeset, as a front end decodes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChangeOp {
    /// Create or replace a file.
    Write {
        /// The file.
        path: VfsPath,
        /// Its new content (shared by staging and the tier, not copied).
        data: Bytes,
        /// `create_only` / `if_version`.
        pre: Precondition,
    },
    /// String replacements in a text file (one: Edit; several: MultiEdit).
    Edit {
        /// The file.
        path: VfsPath,
        /// The replacements, each matched against the text before any.
        edits: Vec<TextEdit>,
        /// The version the file must be at.
        if_version: Option<u64>,
    },
    /// apply_patch hunks on a text file (`crate::text::patch`).
    Patch {
        /// The file.
        path: VfsPath,
        /// The hunks, in file order.
        hunks: Vec<Hunk>,
    },
    /// Delete a file.
    Delete {
        /// The file.
        path: VfsPath,
        /// The version the file must be at.
        if_version: Option<u64>,
    },
    /// Move a file; `pre.if_version` applies to the source, `create_only`
    /// to the destination.
    Move {
        /// Where the file is.
        source: VfsPath,
        /// Where it goes (replacing a file there unless `create_only`).
        destination: VfsPath,
        /// The conditions.
        pre: Precondition,
    },
}

impl ChangeOp {
    /// The operation's name in errors.
    fn describe(&self) -> String {
        match self {
            ChangeOp::Write { path, .. } => format!("write of {path}"),
            ChangeOp::Edit { path, .. } => format!("edit of {path}"),
            ChangeOp::Patch { path, .. } => format!("update of {path}"),
            ChangeOp::Delete { path, .. } => format!("delete of {path}"),
            ChangeOp::Move {
                source,
                destination,
                ..
            } => format!("move of {source} to {destination}"),
        }
    }

    /// Every path it names, with the grants it needs there.
    fn grants(&self) -> Vec<(&VfsPath, Op)> {
        match self {
            ChangeOp::Write { path, .. } => vec![(path, Op::Write)],
            ChangeOp::Edit { path, .. } | ChangeOp::Patch { path, .. } => {
                vec![(path, Op::ReadFile), (path, Op::Write)]
            }
            ChangeOp::Delete { path, .. } => vec![(path, Op::Delete)],
            ChangeOp::Move {
                source,
                destination,
                ..
            } => vec![
                (source, Op::ReadFile),
                (source, Op::ReadBinary),
                (source, Op::Write),
                (source, Op::Delete),
                (destination, Op::Write),
            ],
        }
    }

    /// Bytes the operation carries (content and replacement text).
    fn bytes(&self) -> u64 {
        let edits =
            |edits: &[TextEdit]| -> usize { edits.iter().map(|e| e.old.len() + e.new.len()).sum() };
        let hunks = |hunks: &[Hunk]| -> usize {
            hunks
                .iter()
                .flat_map(|h| h.old.iter().chain(&h.new))
                .map(|l| l.len() + 1)
                .sum()
        };
        (match self {
            ChangeOp::Write { data, .. } => data.len(),
            ChangeOp::Edit { edits: e, .. } => edits(e),
            ChangeOp::Patch { hunks: h, .. } => hunks(h),
            ChangeOp::Delete { .. } | ChangeOp::Move { .. } => 0,
        }) as u64
    }
}

/// The bounds of one changeset (`[limits]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangesetLimits {
    /// Most operations.
    pub max_operations: usize,
    /// Most bytes the operations carry, all together.
    pub max_bytes: u64,
    /// Longest time staging may take, all attempts together.
    pub timeout: Duration,
}

impl Default for ChangesetLimits {
    /// A thousand operations, 64 MiB, 30 s: a large refactor fits, and one
    /// changeset holds a tier's locks for a bounded time.
    fn default() -> ChangesetLimits {
        ChangesetLimits {
            max_operations: 1000,
            max_bytes: 64 << 20,
            timeout: Duration::from_secs(30),
        }
    }
}

/// What a committed changeset did, file by file in path order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// Each file the changeset changed.
    pub files: Vec<FileCommitted>,
    /// The changeset's id, kept with each of its changes.
    pub changeset: String,
}

/// A new changeset id: `cs-` and 16 random hex digits, so ids drawn by
/// servers sharing an object bucket do not collide (2^-64 per pair).
fn new_changeset_id() -> String {
    format!("cs-{:016x}", rand::random::<u64>())
}

/// A file as staging sees it.
#[derive(Debug)]
struct Staged {
    /// The version read (`None`: no file).
    read: Option<u64>,
    /// Its content now: `None` when absent; `Some(None)` when present but
    /// not read yet (a write or delete needs only the version).
    content: Option<Option<Bytes>>,
    /// The operations changed it.
    changed: bool,
    /// How its last change came about.
    operation: Operation,
    /// The file it was moved from, when the move is its last change.
    moved_from: Option<VfsPath>,
    /// Where it went, when a move took it away last.
    moved_to: Option<VfsPath>,
    /// Its executable bit now (off when absent): read with its version,
    /// set by a write that names it, carried by a move.
    executable: bool,
}

/// One staging of a changeset over the files.
struct Stage<'f, 'a> {
    files: &'f Files<'a>,
    staged: BTreeMap<VfsPath, Staged>,
    deadline: Instant,
}

impl Stage<'_, '_> {
    /// Refuses to go on past the changeset's deadline, or once its caller
    /// has gone ([`Files::go_on`]): staging changes nothing until the
    /// commit, so stopping here is always safe.
    fn check_time(&self) -> Result<()> {
        self.files.go_on()?;
        if Instant::now() > self.deadline {
            return Err(Error::OverLimit {
                limit: "changeset_timeout_ms",
                message: "the changeset took too long to stage; split it".into(),
            });
        }
        Ok(())
    }

    /// The staged state of `path`, reading its version on first use.
    fn look(&mut self, path: &VfsPath) -> Result<&mut Staged> {
        if !self.staged.contains_key(path) {
            let scope = self.files.scope();
            let (read, executable) = match self.files.backend().stat(scope, path) {
                Ok(entry) if entry.is_directory() => {
                    return Err(Error::IsDirectory(path.to_string()));
                }
                Ok(entry) => (Some(entry.version), entry.executable),
                Err(Error::NotFound(_)) => (None, false),
                Err(e) => return Err(e),
            };
            let staged = Staged {
                read,
                content: read.map(|_| None),
                changed: false,
                operation: Operation::Write,
                moved_from: None,
                moved_to: None,
                executable,
            };
            self.staged.insert(path.clone(), staged);
        }
        Ok(self.staged.get_mut(path).expect("staged above"))
    }

    /// The staged content of `path` (NOT_FOUND when absent), reading it on
    /// first use.
    fn content(&mut self, path: &VfsPath) -> Result<Bytes> {
        let files = self.files;
        let staged = self.look(path)?;
        match &staged.content {
            None => Err(Error::NotFound(path.to_string())),
            Some(Some(data)) => Ok(data.clone()),
            Some(None) => {
                let (data, entry) =
                    files
                        .backend()
                        .read_admitted(files.scope(), path, &mut |entry| {
                            files.charge(entry.size, "reading a file of the changeset")
                        })?;
                if Some(entry.version) != staged.read {
                    // Changed since its version was read: stage again.
                    return Err(crate::backend::changeset::stale(
                        path,
                        staged.read,
                        Some(entry.version),
                    ));
                }
                let data = Bytes::from(data);
                staged.content = Some(Some(data.clone()));
                Ok(data)
            }
        }
    }

    /// Checks `pre` against the staged state of `path`.
    fn check(&mut self, path: &VfsPath, pre: Precondition) -> Result<()> {
        let staged = self.look(path)?;
        let exists = staged.content.is_some();
        if pre.create_only && exists {
            return Err(Error::AlreadyExists(path.to_string()));
        }
        if let Some(expected) = pre.if_version {
            if staged.changed {
                return Err(Error::InvalidArgument(format!(
                    "if_version {expected} on {path}, which an earlier operation of the \
                     changeset changed; only a file's first operation may carry if_version"
                )));
            }
            pre.check(path, exists.then_some(staged.read).flatten())?;
        }
        Ok(())
    }

    /// Makes `data` the staged content of `path` (`None`: deleted).
    fn set(&mut self, path: &VfsPath, data: Option<Bytes>, operation: Operation) {
        let staged = self.staged.get_mut(path).expect("looked at first");
        // A deleted file's bit goes with it; a file written there is new.
        staged.executable &= data.is_some();
        staged.content = data.map(Some);
        staged.changed = true;
        staged.operation = operation;
        staged.moved_from = None;
        staged.moved_to = None;
    }

    fn text(&mut self, path: &VfsPath) -> Result<String> {
        let data = self.content(path)?;
        text::decode_strict(path.as_str(), &data)?;
        Ok(String::from_utf8(data.into()).expect("checked as UTF-8"))
    }

    fn apply(&mut self, op: &ChangeOp) -> Result<()> {
        self.check_time()?;
        let max = self.files.max_file_bytes();
        match op {
            ChangeOp::Write { path, data, pre } => {
                self.check(path, *pre)?;
                self.set(path, Some(data.clone()), Operation::Write);
                let staged = self.staged.get_mut(path).expect("set");
                staged.executable = pre.executable.unwrap_or(staged.executable);
            }
            ChangeOp::Edit {
                path,
                edits,
                if_version,
            } => {
                self.check(path, Precondition::if_version(*if_version))?;
                let old = self.text(path)?;
                let specs: Vec<EditSpec<'_>> = edits.iter().map(TextEdit::spec).collect();
                let (new, _) = text::apply_edits(&old, &specs, max)?;
                self.set(path, Some(new.into_bytes().into()), Operation::Edit);
            }
            ChangeOp::Patch { path, hunks } => {
                // Matched in place: the staged bytes are not copied.
                let data = self.content(path)?;
                let old = text::decode_strict(path.as_str(), &data)?;
                let files = self.files;
                let costs = text::Costs {
                    charge: &|bytes, what| files.charge(bytes, what),
                    alive: &|| self.check_time(),
                };
                let new = match text::patch::apply_hunks(old, hunks, &costs)? {
                    Ok(new) => new,
                    Err(mismatch) => return Err(hunk_error(&mismatch)),
                };
                Error::check_file_size(path, new.len() as u64, max)?;
                self.set(path, Some(new.into_bytes().into()), Operation::Edit);
            }
            ChangeOp::Delete { path, if_version } => {
                self.check(path, Precondition::if_version(*if_version))?;
                if self.look(path)?.content.is_none() {
                    return Err(Error::NotFound(path.to_string()));
                }
                self.set(path, None, Operation::Delete);
            }
            ChangeOp::Move {
                source,
                destination,
                pre,
            } => {
                crate::backend::check_move_paths(source, destination)?;
                self.check(source, Precondition::if_version(pre.if_version))?;
                let data = self.content(source)?;
                self.check(
                    destination,
                    Precondition {
                        create_only: pre.create_only,
                        if_version: None,
                        ..Precondition::default()
                    },
                )?;
                let executable = self.staged[source].executable;
                self.set(source, None, Operation::Move);
                self.set(destination, Some(data), Operation::Move);
                self.staged.get_mut(destination).expect("set").executable = executable;
                self.staged.get_mut(source).expect("set").moved_to = Some(destination.clone());
                self.staged.get_mut(destination).expect("set").moved_from = Some(source.clone());
            }
        }
        Ok(())
    }

    /// Every file staging read, as a check of the version read: committed
    /// (one atomic step of the tier, changing nothing), it proves the files
    /// held those versions together at one instant, so a refusal judged on
    /// them is the answer of that instant.
    fn checks(&self) -> Vec<FileChange> {
        self.staged
            .iter()
            .map(|(path, staged)| FileChange {
                path: path.clone(),
                expected: staged.read,
                action: FileAction::Check,
            })
            .collect()
    }

    /// The tier's view of the staged files, in path order.
    fn changes(self) -> Vec<FileChange> {
        self.staged
            .into_iter()
            .map(|(path, staged)| {
                let action = match (staged.changed, staged.content) {
                    (false, _) => FileAction::Check,
                    (true, None) if staged.read.is_none() => FileAction::Check,
                    (true, None) => FileAction::Delete {
                        moved_to: staged.moved_to,
                    },
                    (true, Some(data)) => FileAction::Put {
                        data: data.expect("a changed file's content is staged"),
                        operation: staged.operation,
                        moved_from: staged.moved_from,
                        executable: Some(staged.executable),
                    },
                };
                FileChange {
                    path,
                    expected: staged.read,
                    action,
                }
            })
            .collect()
    }
}

/// The error of a hunk that does not match.
fn hunk_error(mismatch: &text::patch::HunkMismatch) -> Error {
    let what = if mismatch.anchor {
        "its @@ line"
    } else {
        "its lines"
    };
    Error::InvalidArgument(format!(
        "hunk {} (patch line {}) does not match: {what} are not in the file: {:?}",
        mismatch.hunk + 1,
        mismatch.patch_line,
        echo(&mismatch.missing)
    ))
}

/// Refuses a changeset over its bounds, or whose paths cannot be staged
/// together, before any work; returns the bytes its operations carry.
fn check_shape(ops: &[ChangeOp], limits: &ChangesetLimits, backend: &dyn Backend) -> Result<u64> {
    if ops.is_empty() {
        return Err(Error::InvalidArgument(
            "a changeset needs at least one operation".into(),
        ));
    }
    let max_ops = limits
        .max_operations
        .min(crate::backend::changeset::MAX_CHANGESET_FILES);
    if ops.len() > max_ops {
        return Err(Error::OverLimit {
            limit: "changeset_max_operations",
            message: format!(
                "the changeset has {} operations, over the limit of {max_ops}",
                ops.len()
            ),
        });
    }
    let bytes: u64 = ops.iter().map(ChangeOp::bytes).sum();
    if bytes > limits.max_bytes {
        return Err(Error::OverLimit {
            limit: "changeset_max_bytes",
            message: format!(
                "the changeset carries {bytes} bytes, over the limit of {}",
                limits.max_bytes
            ),
        });
    }
    let mut paths: Vec<&VfsPath> = ops
        .iter()
        .flat_map(|op| op.grants())
        .map(|(p, _)| p)
        .collect();
    paths.sort();
    paths.dedup();
    if let Some(first) = paths.first() {
        let first_mount = backend.mount_of(first);
        for path in &paths[1..] {
            let mount = backend.mount_of(path);
            if mount != first_mount
                && let Some(first_mount) = &first_mount
            {
                return Err(spans_mounts(first, first_mount, path, mount.as_ref()));
            }
        }
    }
    // Sorted, a path's descendants follow it directly.
    for pair in paths.windows(2) {
        if pair[1].is_within(pair[0]) {
            return Err(Error::InvalidArgument(format!(
                "a changeset cannot change both {} and {}, which lies below it",
                pair[0], pair[1]
            )));
        }
    }
    Ok(bytes)
}

/// The error of operation `index`, naming it (`operation_index` metadata).
fn at_operation(err: Error, index: usize, op: &ChangeOp) -> Error {
    err.with_context(
        format!("operation {index} ({}) failed", op.describe()),
        [("operation_index", index.to_string())],
    )
}

impl Files<'_> {
    /// Applies `ops` as one changeset (see the module doc): every grant is
    /// checked first, then the operations are staged and committed in one
    /// atomic tier step, or nothing changes.
    pub fn commit(&self, ops: &[ChangeOp], limits: &ChangesetLimits) -> Result<Committed> {
        let bytes = check_shape(ops, limits, self.backend())?;
        // The request body is charged by the transport. Staged writes share
        // it, but an edit's or patch's result and every file staging reads
        // are new copies (about the changeset's bytes again), and the tier's
        // batch is one more. Charged here, they count against the caller's
        // share until the answer is sent, so concurrent changesets cannot
        // pin several times it (tests/it/memory.rs).
        self.charge(bytes.saturating_mul(2), "staging the changeset")?;
        for (index, op) in ops.iter().enumerate() {
            for (path, grant) in op.grants() {
                self.check(path, grant)
                    .map_err(|e| at_operation(e, index, op))?;
            }
        }
        let deadline = Instant::now() + limits.timeout;
        let scope = Scope {
            changeset: new_changeset_id(),
            ..self.scope().clone()
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut stage = Stage {
                files: self,
                staged: BTreeMap::new(),
                deadline,
            };
            let (mut stale, mut refused) = (None, None);
            for (index, op) in ops.iter().enumerate() {
                match stage.apply(op) {
                    Ok(()) => {}
                    Err(e @ Error::VersionMismatch { .. }) if is_stale(&e, op) => {
                        stale = Some(e);
                        break;
                    }
                    Err(e) => {
                        refused = Some(at_operation(e, index, op));
                        break;
                    }
                }
            }
            let result = match (stale, refused) {
                (Some(e), _) => Err(e),
                // A refusal is judged on files read one after the other: it
                // is the answer only if they all still are as read.
                (None, Some(refusal)) => self
                    .backend()
                    .commit(&scope, &stage.checks())
                    .and(Err(refusal)),
                (None, None) => self.backend().commit(&scope, &stage.changes()),
            };
            match result {
                Ok(files) => {
                    let changeset = scope.changeset;
                    return Ok(Committed { files, changeset });
                }
                Err(Error::VersionMismatch { .. })
                    if attempt < MAX_ATTEMPTS && Instant::now() < deadline =>
                {
                    stage_again_pause(attempt);
                }
                Err(Error::VersionMismatch { .. }) => {
                    return Err(Error::Unavailable(format!(
                        "the changeset lost {attempt} races with other changes of its files; \
                         try again"
                    )));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// True when a `VersionMismatch` met while staging `op` is a file changing
/// under the changeset (stage again), not the operation's own `if_version`
/// failing (the answer).
fn is_stale(err: &Error, op: &ChangeOp) -> bool {
    let Error::VersionMismatch { expected, .. } = err else {
        return false;
    };
    let asked = match op {
        ChangeOp::Write { pre, .. } | ChangeOp::Move { pre, .. } => pre.if_version,
        ChangeOp::Edit { if_version, .. } | ChangeOp::Delete { if_version, .. } => *if_version,
        ChangeOp::Patch { .. } => None,
    };
    asked != Some(*expected)
}

/// A short pause before staging again, longer each time, so changesets
/// racing for the same files do not stay in step.
fn stage_again_pause(attempt: usize) {
    let micros = 200u64 << attempt.min(6);
    let jitter = rand::random_range(0..micros);
    std::thread::sleep(Duration::from_micros(micros + jitter));
}
