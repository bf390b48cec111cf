//! Rewind: undo a chosen set of changes as one changeset
//! (docs/changesets.md § Rewind).
//!
//! 1. The change logs under the path are read from their oldest retained
//!    change (or just after a cursor) to their head. The selected changes
//!    are those of one State session, handle, label or changeset, or all of
//!    them after the cursor. Only changes at paths the caller may list
//!    count, as in a Watch.
//! 2. Each file with a selected change goes back to its state just before
//!    the first of them: absent when that change created it, else the
//!    newest retained version older than it. History drops the oldest
//!    versions first, so that version is the one the change replaced, or
//!    none is retained and the rewind is FAILED_PRECONDITION naming the
//!    file (on a mount without history, only created files can go back).
//! 3. A change not selected that came after the first selected one at the
//!    same file would be undone too: without `force` it is a conflict
//!    (ABORTED, CONFLICT) naming the file and that change, and nothing
//!    applies.
//! 4. The files' states are committed as one changeset (`Files::commit`),
//!    each guarded by the version the log showed last, so a change that
//!    lands after the log was read fails the guard instead of being undone
//!    unseen.

use super::Files;
use super::changeset::{ChangeOp, ChangesetLimits};
use crate::access::Op;
use crate::backend::Precondition;
use crate::change::{Change, ChangeCursor, ChangeKind, Origin};
use crate::error::{Error, Result, echo};
use crate::path::VfsPath;
use crate::text::diff::{self, DiffCaps};
use std::collections::BTreeMap;
use std::time::Instant;

/// Changes read from the logs per page.
const LOG_PAGE: usize = 1024;

/// Which changes a rewind undoes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    /// Those made in this State session.
    Session(String),
    /// Those made through this handle (its id, or a lineage as change
    /// records show it) and the handles it minted.
    Handle(String),
    /// Those made under this label.
    Label(String),
    /// Those of this changeset.
    Changeset(String),
    /// Every change committed after this cursor.
    Since(ChangeCursor),
}

impl Selector {
    /// True when the change made by `origin` is one to undo.
    fn selects(&self, origin: &Origin) -> bool {
        match self {
            Selector::Session(session) => origin.session == *session,
            Selector::Handle(handle) => origin.made_through(handle),
            Selector::Label(label) => origin.label == *label,
            Selector::Changeset(id) => origin.changeset == *id,
            Selector::Since(_) => true,
        }
    }
}

/// What a rewind does (or would do) to one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RewoundFile {
    /// The file.
    pub path: VfsPath,
    /// Its version before the rewind (0: it does not exist).
    pub from_version: u64,
    /// The version whose content it gets back (0: it is deleted).
    pub to_version: u64,
    /// Its version after the rewind (0 in a dry run, or when deleted on a
    /// tier without history).
    pub version: u64,
}

/// A rewind's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rewound {
    /// Every file changed (or, in a dry run, to change), in path order.
    pub files: Vec<RewoundFile>,
    /// A dry run's unified diff from the files now to the rewound files.
    pub diff: String,
    /// The changeset that applied the rewind (empty when none did).
    pub changeset: String,
}

/// One file a rewind changes.
struct Planned {
    /// The file.
    path: VfsPath,
    /// Its version now (`None`: absent).
    current: Option<u64>,
    /// Where its content comes back from (`None`: it is deleted): a
    /// version of the file itself, or, for a file moved away, the version
    /// its destination got from the move.
    source: Option<(VfsPath, u64)>,
    /// The `if_version` guarding it.
    guard: Option<u64>,
}

/// What the logs say: each file with a selected change, and where each
/// selected move's file arrived (source and destination → the log's index
/// of the arrival and the version it made), as a moved-away file's
/// history ends at its tombstone and its content lives on at the
/// destination.
#[derive(Default)]
struct LogRead {
    touched: BTreeMap<VfsPath, Touched>,
    arrivals: BTreeMap<(VfsPath, VfsPath), Vec<(usize, u64)>>,
}

/// What the log says about one file with a selected change.
struct Touched {
    /// The first selected change: the file goes back to before it.
    first: Change,
    /// Its index among the changes read.
    first_index: usize,
    /// The file's last change: the version it is at now.
    last: Change,
    /// The first change not selected after `first`, which a rewind would
    /// undo too.
    intruder: Option<Change>,
}

impl Touched {
    /// The version the file is at, per the log (`None`: it does not exist).
    fn current(&self) -> Option<u64> {
        (self.last.kind != ChangeKind::Deleted).then_some(self.last.version)
    }

    /// The `if_version` that guards the file's rewind: its version per the
    /// log (0: absent), or none when the log does not know it (a change
    /// made on disk outside agentvfs is logged with version 0).
    fn guard(&self) -> Option<u64> {
        match (self.last.kind, self.last.version) {
            (ChangeKind::Deleted, _) => Some(0),
            (_, 0) => None,
            (_, version) => Some(version),
        }
    }
}

impl Files<'_> {
    /// Undoes the changes under `root` that `selector` picks, as one
    /// changeset (see the module doc); `dry_run` only answers what would
    /// change, with its diff. Bounded by the changeset `limits`: the files
    /// changed, the bytes brought back and the time, log reading included.
    pub fn rewind(
        &self,
        root: &VfsPath,
        selector: &Selector,
        dry_run: bool,
        force: bool,
        limits: &ChangesetLimits,
    ) -> Result<Rewound> {
        self.check_within(root, Op::List)?;
        let deadline = Instant::now() + limits.timeout;
        let log = self.read_log(root, selector, limits, deadline)?;
        self.check_one_mount(&log.touched)?;
        let mut plan: Vec<Planned> = Vec::with_capacity(log.touched.len());
        for (path, file) in &log.touched {
            if let Some(intruder) = file.intruder.as_ref().filter(|_| !force) {
                return Err(conflict(path, file, intruder));
            }
            let source = self.content_before(path, file, &log.arrivals)?;
            if source.is_some() || file.current().is_some() {
                plan.push(Planned {
                    path: path.clone(),
                    current: file.current(),
                    source,
                    guard: file.guard(),
                });
            }
        }
        let mut bytes = 0u64;
        let mut contents = Vec::with_capacity(plan.len());
        for planned in &plan {
            self.go_on()?;
            let data = match &planned.source {
                None => None,
                Some((from, version)) => {
                    // It writes these bytes back: the caller must be
                    // allowed to read them (docs/contract.md § Grants).
                    self.check_may_take(from)?;
                    let (data, _) = self.read_version(from, *version, Op::ReadBinary)?;
                    self.charge(data.len() as u64, "the rewind's contents")?;
                    bytes += data.len() as u64;
                    if bytes > limits.max_bytes {
                        return Err(Error::OverLimit {
                            limit: "changeset_max_bytes",
                            message: format!(
                                "the rewind would bring back more than {} bytes; rewind a \
                                 smaller path",
                                limits.max_bytes
                            ),
                        });
                    }
                    Some(data)
                }
            };
            contents.push(data);
        }
        let files = plan
            .iter()
            .map(|planned| RewoundFile {
                path: planned.path.clone(),
                from_version: planned.current.unwrap_or(0),
                to_version: planned.source.as_ref().map_or(0, |(_, version)| *version),
                version: 0,
            })
            .collect::<Vec<_>>();
        if dry_run {
            let diff = self.rewind_diff(&plan, &contents)?;
            return Ok(Rewound {
                files,
                diff,
                changeset: String::new(),
            });
        }
        if plan.is_empty() {
            return Ok(Rewound::default());
        }
        let ops = plan
            .into_iter()
            .zip(contents)
            .map(|(planned, data)| {
                let (path, if_version) = (planned.path, planned.guard);
                match data {
                    Some(data) => ChangeOp::Write {
                        path,
                        data: data.into(),
                        pre: Precondition::if_version(if_version),
                    },
                    None => ChangeOp::Delete { path, if_version },
                }
            })
            .collect::<Vec<_>>();
        let committed = self.commit(&ops, limits)?;
        let versions: BTreeMap<_, _> = committed
            .files
            .iter()
            .map(|f| (f.path.clone(), f.version))
            .collect();
        let files = files
            .into_iter()
            .map(|mut f| {
                f.version = versions.get(&f.path).copied().unwrap_or(0);
                f
            })
            .collect();
        Ok(Rewound {
            files,
            diff: String::new(),
            changeset: committed.changeset,
        })
    }

    /// Reads the logs under `root` to their head: every file the caller may
    /// list with a selected change, and what came after.
    fn read_log(
        &self,
        root: &VfsPath,
        selector: &Selector,
        limits: &ChangesetLimits,
        deadline: Instant,
    ) -> Result<LogRead> {
        let mut cursor = match selector {
            Selector::Since(cursor) => cursor.clone(),
            _ => ChangeCursor::default(),
        };
        let mut read = LogRead::default();
        let too_many = |what: &str| Error::OverLimit {
            limit: "changeset_max_operations",
            message: format!(
                "the rewind would change more than {} {what}; rewind a smaller path",
                limits.max_operations
            ),
        };
        let (mut index, mut moves) = (0usize, 0usize);
        loop {
            let page = self
                .backend()
                .changes(self.scope(), root, &mut cursor, LOG_PAGE)?;
            if page.is_empty() {
                return Ok(read);
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout(format!(
                    "the rewind read the change log under {root} for {} ms without reaching \
                     its head ([limits] changeset_timeout_ms)",
                    limits.timeout.as_millis()
                )));
            }
            for change in page {
                index += 1;
                if !self.may(&change.path, Op::List) {
                    continue;
                }
                let selected = selector.selects(&change.origin);
                if let Some(from) = change.moved_path.as_ref().filter(|_| selected)
                    && change.kind != ChangeKind::Deleted
                {
                    moves += 1;
                    if moves > 2 * limits.max_operations {
                        return Err(too_many("moves"));
                    }
                    let key = (from.clone(), change.path.clone());
                    read.arrivals
                        .entry(key)
                        .or_default()
                        .push((index, change.version));
                }
                match read.touched.get_mut(&change.path) {
                    Some(file) => {
                        if !selected && file.intruder.is_none() {
                            file.intruder = Some(change.clone());
                        }
                        file.last = change;
                    }
                    None if selected => {
                        if read.touched.len() == limits.max_operations {
                            return Err(too_many("files"));
                        }
                        let file = Touched {
                            first: change.clone(),
                            first_index: index,
                            last: change.clone(),
                            intruder: None,
                        };
                        read.touched.insert(change.path, file);
                    }
                    None => {}
                }
            }
        }
    }

    /// INVALID_ARGUMENT when the files lie on more than one mount: a
    /// changeset is atomic within one mount only.
    fn check_one_mount(&self, touched: &BTreeMap<VfsPath, Touched>) -> Result<()> {
        let mut mounts = touched.keys().filter_map(|p| self.backend().mount_of(p));
        let Some(first) = mounts.next() else {
            return Ok(());
        };
        match mounts.find(|m| *m != first) {
            None => Ok(()),
            Some(other) => Err(Error::InvalidArgument(format!(
                "the changes to rewind lie on mounts {first} and {other}, and a rewind is one \
                 changeset of one mount; rewind one mount's path at a time"
            ))),
        }
    }

    /// Where the content `path` had just before its first selected change
    /// is kept (`None`: there was no file).
    fn content_before(
        &self,
        path: &VfsPath,
        file: &Touched,
        arrivals: &BTreeMap<(VfsPath, VfsPath), Vec<(usize, u64)>>,
    ) -> Result<Option<(VfsPath, u64)>> {
        let first = &file.first;
        if first.kind == ChangeKind::Created {
            return Ok(None);
        }
        // Moved away: the content is the file's own version before the
        // move where its history keeps one (a move that also edited, as an
        // apply_patch update with a move, made the destination's content
        // from it); else the version the move made at its destination, which
        // a plain move carried over unchanged (the two halves are logged side
        // by side).
        if let Some(to) = first
            .moved_path
            .as_ref()
            .filter(|_| first.kind == ChangeKind::Deleted)
        {
            if let Ok(Some(before)) = self.version_before(path, first) {
                return Ok(Some((path.clone(), before)));
            }
            if let Some(arrived) = arrivals.get(&(path.clone(), to.clone()))
                && let Some((_, version)) = arrived
                    .iter()
                    .min_by_key(|(index, _)| index.abs_diff(file.first_index))
            {
                return Ok(Some((to.clone(), *version)));
            }
        }
        self.version_before(path, first)
            .map(|v| v.map(|v| (path.clone(), v)))
    }

    /// The version `path` had just before `first` (`None`: no file).
    fn version_before(&self, path: &VfsPath, first: &Change) -> Result<Option<u64>> {
        let versions = self.versions(path).map_err(|e| match e.kind() {
            Error::Unsupported(_) => Error::Unsupported(format!(
                "cannot rewind {path}: its mount keeps no version history, so only files the \
                 rewound changes created can be rewound"
            )),
            _ => e,
        })?;
        match versions.iter().find(|v| v.version < first.version) {
            Some(before) if before.deleted => Ok(None),
            Some(before) => Ok(Some(before.version)),
            None => Err(Error::Unsupported(format!(
                "cannot rewind {path}: the version before v{} is no longer retained",
                first.version
            ))),
        }
    }

    /// A dry run's diff: each file from now to its rewound content, within
    /// the whole-diff caps altogether.
    fn rewind_diff(&self, plan: &[Planned], contents: &[Option<Vec<u8>>]) -> Result<String> {
        let mut out = String::new();
        for (planned, target) in plan.iter().zip(contents) {
            let path = &planned.path;
            let room = DiffCaps::WHOLE.bytes.saturating_sub(out.len());
            if room == 0 {
                out.push_str("\n… (diff cut: too large)");
                break;
            }
            let now = match planned.current {
                Some(_) => self.read(path, Op::ReadBinary)?.0,
                None => Vec::new(),
            };
            let then = target.as_deref().unwrap_or_default();
            // The current content, the diff's line tables and its text:
            // about three times the texts, as the Diff RPC charges, held
            // while this file is diffed.
            let working = 3 * (now.len() + then.len()) as u64;
            self.charge(working, "the rewind's diff")?;
            // As the Diff RPC shows a path: `--- a/memories/x.md`.
            let shown = path.as_str().trim_start_matches('/');
            let text = match (std::str::from_utf8(&now), std::str::from_utf8(then)) {
                (Ok(now), Ok(then)) => {
                    let caps = DiffCaps {
                        lines: DiffCaps::WHOLE.lines,
                        bytes: room,
                    };
                    diff::unified(shown, now, then, caps).text
                }
                _ => format!("Binary files a/{shown} and b/{shown} differ"),
            };
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&text);
            self.release(working);
        }
        Ok(out)
    }
}

/// The conflict of a file that `intruder`, a change not selected, changed
/// after the selected ones began.
fn conflict(path: &VfsPath, file: &Touched, intruder: &Change) -> Error {
    let by = match intruder.origin.principal.as_str() {
        "" => "outside agentvfs".to_owned(),
        who => format!("by {}", echo(who)),
    };
    Error::VersionMismatch {
        path: path.to_string(),
        expected: file.first.version,
        actual: file.last.version,
    }
    .with_context(
        format!(
            "cannot rewind {path}: v{} ({}) was made {by} after the changes to rewind; \
             pass force to undo it too",
            intruder.version,
            intruder.origin.operation.as_str()
        ),
        [("conflict_version", intruder.version.to_string())],
    )
}
