//! Branches in the application layer (docs/branches.md): fork, list, diff,
//! merge and discard, with their grants and bounds. The tier side (the
//! overlay a call in a branch goes through, the registry) is
//! `backend::branch`.

use super::changeset::{ChangeOp, ChangesetLimits, Committed};
use super::{Caller, Files};
use crate::access::Op;
use crate::backend::Precondition;
use crate::backend::branch::{BranchRecord, Overlay, RecordCache, Registry, Touched};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::text::diff::{DiffCaps, unified};
use crate::text::merge::merge3;
use bytes::Bytes;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Most files one page of a branch's diff holds.
pub const MAX_DIFF_PAGE: usize = 1000;
/// Most bytes of unified diff one page of a branch's diff holds; the page
/// ends early rather than pass it.
const MAX_DIFF_PAGE_BYTES: usize = 4 << 20;
/// What one listed branch's answer holds besides its name, root and
/// creator (its times, counts and encoding), charged before it is built.
const LISTED_BRANCH_BYTES: usize = 64;

/// A branch as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchInfo {
    /// Its name.
    pub name: String,
    /// The subtree it forks.
    pub root: VfsPath,
    /// When it was forked.
    pub created: SystemTime,
    /// Who forked it.
    pub creator: String,
    /// Files it changed.
    pub files: u64,
    /// Bytes of the files it holds.
    pub bytes: u64,
}

/// How a file differs between a branch and its base now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffKind {
    /// Only the branch has it.
    Added,
    /// Both have it, with different content.
    Changed,
    /// Only the base has it.
    Deleted,
    /// The branch moved it (from [`BranchFileDiff::from`]).
    Moved,
}

impl DiffKind {
    /// Its name in answers.
    pub fn as_str(self) -> &'static str {
        match self {
            DiffKind::Added => "added",
            DiffKind::Changed => "changed",
            DiffKind::Deleted => "deleted",
            DiffKind::Moved => "moved",
        }
    }
}

/// One file of a branch's diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchFileDiff {
    /// The file (for a move, where it is in the branch).
    pub path: VfsPath,
    /// How it differs.
    pub kind: DiffKind,
    /// For a move: where it was.
    pub from: Option<VfsPath>,
    /// The unified diff from the base to the branch, as the Diff RPC
    /// writes it (capped at 1 MiB; `Binary files a/… and b/… differ` for
    /// binary content).
    pub diff: String,
}

/// One page of a branch's diff.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BranchDiff {
    /// The files, in path order.
    pub files: Vec<BranchFileDiff>,
    /// Where the next page starts (`None`: this was the last).
    pub next_after: Option<VfsPath>,
}

/// How a conflicting file should merge, as the caller decides it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The file becomes this content.
    Content(Bytes),
    /// The file is deleted.
    Delete,
}

impl Resolution {
    /// The bytes it carries.
    pub fn bytes(&self) -> u64 {
        match self {
            Resolution::Content(data) => data.len() as u64,
            Resolution::Delete => 0,
        }
    }
}

/// A file that changed on both sides in ways that do not merge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The file.
    pub path: VfsPath,
    /// The base's content at the fork (`None`: no file).
    pub ancestor: Option<Vec<u8>>,
    /// The branch's content (`None`: deleted in the branch).
    pub branch: Option<Vec<u8>>,
    /// The base's content now (`None`: deleted in the base).
    pub base: Option<Vec<u8>>,
    /// The base's version now (0: none), the guard a resolution is
    /// applied under.
    pub base_version: u64,
}

/// What a merge did, or would have done.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Merged {
    /// The changeset applied (empty when nothing was).
    pub changeset: String,
    /// The files it changed in the base.
    pub files: Vec<crate::backend::FileCommitted>,
    /// The files that did not merge: when any is left unresolved, nothing
    /// was applied.
    pub conflicts: Vec<Conflict>,
    /// The branch was discarded after the merge.
    pub discarded: bool,
}

/// A discarded branch: its record is removed; its changes are cleared
/// after `wait`, the lease other servers may still read them under
/// ([`crate::backend::Backend::branch_record_lease`]).
pub struct Discarding {
    /// How long to wait before clearing.
    pub wait: Duration,
    /// The branch whose changes are still to clear (`None`: cleared).
    overlay: Option<Overlay>,
}

impl Discarding {
    /// Deletes the discarded branch's changes, for `scope`'s caller.
    pub fn clear(&self, scope: &Scope) -> Result<()> {
        match &self.overlay {
            Some(overlay) => overlay.clear(scope),
            None => Ok(()),
        }
    }
}

/// The branch a caller names: the overlay its calls go through. A record
/// `records` keeps is used at once and confirmed by the call's first read
/// (`Overlay::cached`); otherwise the registry is read first.
pub(super) fn overlay(
    backend: &Arc<dyn crate::backend::Backend>,
    caller: &Caller,
    records: &Arc<RecordCache>,
) -> Result<Overlay> {
    let scope = &caller.scope;
    Scope::check_name("branch", &scope.branch)?;
    if let Some((record, lease_end)) = records.get(&scope.namespace, &scope.branch) {
        return Ok(Overlay::cached(
            backend.clone(),
            record,
            records.clone(),
            lease_end,
        ));
    }
    let sent = Instant::now();
    let overlay = overlay_named(backend, scope, &scope.branch)?;
    let lease = backend.branch_record_lease(&overlay.record().mount);
    records.put(overlay.record(), (!lease.is_zero()).then(|| sent + lease));
    Ok(overlay)
}

fn overlay_named(
    backend: &Arc<dyn crate::backend::Backend>,
    scope: &Scope,
    name: &str,
) -> Result<Overlay> {
    Scope::check_name("branch", name)?;
    let record = Registry::new(backend.as_ref()).get(&scope.namespace, name)?;
    Ok(Overlay::new(backend.clone(), record))
}

/// The caller working on the base of a branch (for a merge).
fn on_base(caller: &Caller, record: &BranchRecord) -> Caller {
    Caller {
        scope: record.base_scope(&caller.scope),
        ..caller.clone()
    }
}

/// The base's file now: its content and version, `admit`ted before its
/// content is held ([`crate::backend::Backend::read_admitted`]).
fn base_now(
    backend: &dyn crate::backend::Backend,
    scope: &Scope,
    path: &VfsPath,
    admit: &mut crate::backend::Admit<'_>,
) -> Result<Option<(Vec<u8>, u64)>> {
    match backend.read_admitted(scope, path, admit) {
        Ok((data, entry)) => Ok(Some((data, entry.version))),
        Err(Error::NotFound(_) | Error::NotDirectory(_) | Error::IsDirectory(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What a merge does to one file.
enum Step {
    /// Nothing: both sides agree, or the branch did not change it.
    Keep,
    /// The file becomes this (`None`: deleted), guarded by the base's
    /// version now.
    Take(Option<Vec<u8>>),
    /// The file becomes the branch's (deleted where the branch has none).
    Branch,
    /// The sides do not merge.
    Conflict,
}

impl Files<'_> {
    /// Forks the directory `root` into the branch `name` (read grant on
    /// the subtree; the mount must take branches), unless the caller's
    /// principal already holds `max_branches` branches of its namespace
    /// (RESOURCE_EXHAUSTED naming `max_branches_per_principal`).
    pub fn create_branch(
        &self,
        name: &str,
        root: &VfsPath,
        max_branches: usize,
    ) -> Result<BranchRecord> {
        Scope::check_name("branch", name)?;
        self.refuse_bound("create branches")?;
        let scope = self.scope();
        if !scope.branch.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "branches do not nest: this call works in branch {:?}; fork from the base",
                scope.branch
            )));
        }
        self.check(root, Op::ReadFile)?;
        let backend = self.backend();
        let mount = backend
            .mount_of(root)
            .or_else(|| {
                backend
                    .branch_mounts()
                    .into_iter()
                    .find(|m| root.is_within(m))
            })
            .ok_or_else(|| Error::NotFound(root.to_string()))?;
        if !backend.branch_mounts().contains(&mount) {
            return Err(Error::Unsupported(format!(
                "{root} is on the mount {mount}, which does not take branches (State, Store, \
                 object and Filesystem mounts with a changeset journal do; docs/branches.md)"
            )));
        }
        if !backend.stat(scope, root)?.is_directory() {
            return Err(Error::NotDirectory(format!(
                "{root} (a branch forks a directory)"
            )));
        }
        let principal = &self.caller().principal;
        let registry = Registry::new(backend);
        let held = registry
            .list(&scope.namespace)?
            .iter()
            .filter(|r| r.owner == principal.owner)
            .count();
        if held >= max_branches {
            return Err(Error::OverLimit {
                limit: "max_branches_per_principal",
                message: format!(
                    "principal {:?} already has {held} branches in namespace {:?}, the \
                     server's max_branches_per_principal ({max_branches}); merge or discard \
                     one first",
                    principal.owner, scope.namespace
                ),
            });
        }
        let record = BranchRecord {
            name: name.to_owned(),
            root: root.clone(),
            mount,
            session: scope.session.clone(),
            namespace: scope.namespace.clone(),
            created: SystemTime::now(),
            creator: principal.name.clone(),
            owner: principal.owner.clone(),
            fork: format!("{:016x}", rand::random::<u64>()),
        };
        registry.create(&record)?;
        Ok(record)
    }

    /// Refuses `what` to a caller bound to a branch (a bound handle): it
    /// works in its branch and may diff it, while forking, merging and
    /// discarding stay with the unbound caller that handed it out
    /// (docs/security.md § Handles bound to a branch).
    fn refuse_bound(&self, what: &str) -> Result<()> {
        let principal = &self.caller().principal;
        match principal.branch.as_str() {
            "" => Ok(()),
            bound => Err(Error::PermissionDenied(format!(
                "{} is bound to branch {bound:?} and may not {what}: the caller that minted \
                 it forks, merges and discards",
                principal.name
            ))),
        }
    }

    /// Refuses a caller without `op` on one of `paths`, the files branch
    /// `name` changed, before anything of them is read: PERMISSION_DENIED
    /// naming the first such file the caller may list, and naming none when
    /// it may list none of them (an answer never shows what the caller may
    /// not read: docs/security.md). `why` says what needs the grant.
    fn check_every(&self, name: &str, paths: &[VfsPath], op: Op, why: &str) -> Result<()> {
        let refused: Vec<&VfsPath> = paths.iter().filter(|p| !self.may(p, op)).collect();
        if refused.is_empty() {
            return Ok(());
        }
        Err(Error::PermissionDenied(
            match refused.iter().find(|p| self.may(p, Op::List)) {
                Some(path) => format!(
                    "no grant allows '{op}' on {path}, which branch {name:?} changed: {why}"
                ),
                None => {
                    format!("branch {name:?} changed files on which no grant allows '{op}': {why}")
                }
            },
        ))
    }

    /// Refuses to discard the branch of `overlay`, which changed `changed`,
    /// to a caller that could not delete each of those files, or that
    /// neither forked it (its principal's) nor may delete its whole root:
    /// a discard deletes every file the branch holds, whoever wrote it
    /// (docs/branches.md § List and discard).
    fn check_discard(&self, overlay: &Overlay, changed: &[VfsPath]) -> Result<()> {
        let record = overlay.record();
        let principal = &self.caller().principal;
        if record.owner != principal.owner && !self.may(&record.root, Op::Delete) {
            return Err(Error::PermissionDenied(format!(
                "no grant allows 'delete' on {}, the root of branch {:?}, which {} did not \
                 fork: discarding another's branch needs 'delete' on its root",
                record.root, record.name, principal.name
            )));
        }
        self.check_every(
            &record.name,
            changed,
            Op::Delete,
            "discarding a branch deletes every file it changed, so it needs 'delete' on each",
        )
    }

    /// The caller's branches (those of its namespace) whose root it may
    /// list, with the files it changed that the caller may list and their
    /// bytes; a bound handle's own only. The answer is charged to the
    /// caller's memory share before it is built.
    pub fn list_branches(
        &self,
        backend: &Arc<dyn crate::backend::Backend>,
    ) -> Result<Vec<BranchInfo>> {
        let scope = self.scope();
        let bound = &self.caller().principal.branch;
        let records: Vec<BranchRecord> = Registry::new(backend.as_ref())
            .list(&scope.namespace)?
            .into_iter()
            .filter(|r| {
                self.check_within(&r.root, Op::List).is_ok()
                    && (bound.is_empty() || *bound == r.name)
            })
            .collect();
        let answer: usize = records
            .iter()
            .map(|r| LISTED_BRANCH_BYTES + r.name.len() + r.root.as_str().len() + r.creator.len())
            .sum();
        self.charge(answer as u64, "listing the branches")?;
        let listable = |path: &VfsPath| self.may(path, Op::List);
        let mut out = Vec::with_capacity(records.len());
        for record in records {
            let overlay = Overlay::new(backend.clone(), record);
            let (files, bytes) = overlay.size(scope, &listable)?;
            let record = overlay.record();
            out.push(BranchInfo {
                name: record.name.clone(),
                root: record.root.clone(),
                created: record.created,
                creator: record.creator.clone(),
                files,
                bytes,
            });
        }
        Ok(out)
    }

    /// Discards the branch `name` (`delete` on every file it changed, and
    /// its fork or `delete` on its root): removes its record, so that it is
    /// gone at once for every later call, and answers what is left to do,
    /// clearing its changes once the record's lease is over
    /// (docs/branches.md § Discard).
    pub fn discard_branch(
        &self,
        backend: &Arc<dyn crate::backend::Backend>,
        name: &str,
    ) -> Result<Discarding> {
        self.refuse_bound("discard branches")?;
        let overlay = overlay_named(backend, self.scope(), name)?;
        self.check_discard(&overlay, &overlay.changed(self.scope())?)?;
        let registry = Registry::new(backend.as_ref());
        if overlay.record().fork.is_empty() {
            // A record written before forks had ids: its scope is the one
            // a new fork of its name would use, so it is cleared first.
            overlay.clear(self.scope())?;
            registry.remove(overlay.record())?;
            return Ok(Discarding {
                wait: Duration::ZERO,
                overlay: None,
            });
        }
        registry.remove(overlay.record())?;
        Ok(Discarding {
            wait: backend.branch_record_lease(&overlay.record().mount),
            overlay: Some(overlay),
        })
    }

    /// One page of the files branch `name` changed, against its base now:
    /// at most `limit` files after `after`, of those the caller may list and
    /// read. The others are neither read nor counted, and the page's
    /// `next_after` is always a file it shows, so nothing of them shows
    /// (docs/branches.md § Diff).
    pub fn diff_branch(
        &self,
        backend: &Arc<dyn crate::backend::Backend>,
        name: &str,
        after: Option<&VfsPath>,
        limit: usize,
    ) -> Result<BranchDiff> {
        let bound = &self.caller().principal.branch;
        if !bound.is_empty() && bound != name {
            return Err(Error::PermissionDenied(format!(
                "{} is bound to branch {bound:?} and may diff only it, not {name:?}",
                self.caller().principal.name
            )));
        }
        let overlay = overlay_named(backend, self.scope(), name)?;
        let limit = limit.clamp(1, MAX_DIFF_PAGE);
        let base_scope = overlay.record().base_scope(self.scope());
        let readable = |path: &VfsPath| self.may(path, Op::List) && self.may(path, Op::ReadFile);
        let (page, more) = overlay.touched(
            self.scope(),
            after,
            (limit, MAX_DIFF_PAGE_BYTES as u64),
            &readable,
        )?;
        let mut out = BranchDiff::default();
        let mut bytes = 0;
        let mut last = None;
        for touched in &page {
            last = Some(touched.path.clone());
            // The base's file is charged before it is read, and given back
            // once its diff is built.
            let mut held = 0;
            let now = base_now(backend.as_ref(), &base_scope, &touched.path, &mut |e| {
                self.charge(e.size, "the branch's diff")?;
                held = e.size;
                Ok(())
            })?;
            let branch = touched.branch.as_ref().map(|(d, _)| d.as_slice());
            let base = now.as_ref().map(|(d, _)| d.as_slice());
            let kind = match (base, branch) {
                (None, None) => None,
                (Some(a), Some(b)) if a == b => None,
                (None, Some(_)) => Some(DiffKind::Added),
                (Some(_), None) => Some(DiffKind::Deleted),
                (Some(_), Some(_)) => Some(DiffKind::Changed),
            };
            let diff = kind.map(|_| file_diff(&touched.path, base, branch));
            self.release(held);
            let (Some(kind), Some(diff)) = (kind, diff) else {
                continue;
            };
            bytes += diff.len();
            out.files.push(BranchFileDiff {
                path: touched.path.clone(),
                kind,
                from: None,
                diff,
            });
            if bytes > MAX_DIFF_PAGE_BYTES {
                break;
            }
        }
        pair_moves(&mut out.files, &page);
        let ended_early = last.as_ref() != page.last().map(|t| &t.path);
        if more || ended_early {
            out.next_after = last;
        }
        Ok(out)
    }

    /// Merges branch `name` into its base as one changeset: each file
    /// three-way (the base when the branch first changed it, the branch,
    /// the base now), every file guarded by the base's version now.
    /// Conflicts not settled by `resolutions` are answered and nothing is
    /// applied. Before anything is read, the caller must hold `read_file`
    /// on every file the branch changed (a merge moves them, and answers
    /// their content in conflicts), the branch must fit one changeset by
    /// the sizes of its files, and what the merge holds is charged to the
    /// caller's memory share (docs/branches.md § Merge). The branch is
    /// kept: the service discards it after a merge that applied when asked
    /// to, and `discard` checks the caller may before anything is merged.
    pub fn merge_branch(
        &self,
        backend: &Arc<dyn crate::backend::Backend>,
        name: &str,
        resolutions: &BTreeMap<VfsPath, Resolution>,
        limits: &ChangesetLimits,
        discard: bool,
    ) -> Result<Merged> {
        self.refuse_bound("merge branches")?;
        let overlay = overlay_named(backend, self.scope(), name)?;
        let record = overlay.record().clone();
        check_resolutions(&record, resolutions, limits)?;
        let changed = overlay.changed(self.scope())?;
        self.check_every(
            name,
            &changed,
            Op::ReadFile,
            "a merge moves every file the branch changed into the base, and answers a \
             conflict's content, so it needs 'read_file' on each",
        )?;
        if discard {
            self.check_discard(&overlay, &changed)?;
        }
        if changed.len() > limits.max_operations {
            return Err(Error::OverLimit {
                limit: "changeset_max_operations",
                message: format!(
                    "branch {name:?} changed {} files, more than the {} one changeset may \
                     carry",
                    changed.len(),
                    limits.max_operations
                ),
            });
        }
        let changed_set: HashSet<&VfsPath> = changed.iter().collect();
        if let Some(path) = resolutions.keys().find(|p| !changed_set.contains(p)) {
            return Err(Error::InvalidArgument(format!(
                "the resolution of {path}: branch {name:?} did not change that file, so a \
                 merge has nothing of it to settle (resolve only the files the branch changed)"
            )));
        }
        let base_scope = record.base_scope(self.scope());
        let plan = plan_merge(
            backend.as_ref(),
            &overlay,
            self.scope(),
            &base_scope,
            &changed,
            resolutions,
        )?;
        if plan.carried > limits.max_bytes {
            return Err(Error::OverLimit {
                limit: "changeset_max_bytes",
                message: format!(
                    "merging branch {name:?} may carry {} bytes (the branch's files and the \
                     base's now, which a three-way merge takes lines from), more than the {} \
                     one changeset may carry",
                    plan.carried, limits.max_bytes
                ),
            });
        }
        let resolved: u64 = resolutions.values().map(Resolution::bytes).sum();
        self.charge(plan.held.saturating_add(resolved), "merging the branch")?;
        let mut ops = Vec::new();
        let mut conflicts = Vec::new();
        for (path, counted) in &plan.files {
            self.go_on()?;
            let Some(mut file) = overlay.read_touched(self.scope(), path)? else {
                continue;
            };
            // The plan charged the base's file as its stat found it; a file
            // that grew since is charged for what it grew, once read.
            let now = base_now(backend.as_ref(), &base_scope, path, &mut |_| Ok(()))?;
            let read = file.ancestor.content.len()
                + file.branch.as_ref().map_or(0, |(d, _)| d.len())
                + now.as_ref().map_or(0, |(d, _)| d.len());
            self.charge((read as u64).saturating_sub(*counted), "merging the branch")?;
            let guard = now.as_ref().map_or(0, |(_, v)| *v);
            let decided = match resolutions.get(path) {
                Some(Resolution::Content(data)) => Step::Take(Some(data.to_vec())),
                Some(Resolution::Delete) => Step::Take(None),
                None => match self.step(&file, now.as_ref())? {
                    Step::Branch => Step::Take(file.branch.take().map(|(d, _)| d)),
                    step => step,
                },
            };
            match decided {
                Step::Keep | Step::Branch => {}
                Step::Take(Some(data)) => ops.push(ChangeOp::Write {
                    path: path.clone(),
                    data: Bytes::from(data),
                    pre: Precondition::if_version(Some(guard)),
                }),
                Step::Take(None) if now.is_none() => {}
                Step::Take(None) => ops.push(ChangeOp::Delete {
                    path: path.clone(),
                    if_version: Some(guard),
                }),
                Step::Conflict => conflicts.push(Conflict {
                    path: path.clone(),
                    ancestor: file.ancestor.version.map(|_| file.ancestor.content),
                    branch: file.branch.map(|(d, _)| d),
                    base: now.map(|(d, _)| d),
                    base_version: guard,
                }),
            }
        }
        if !conflicts.is_empty() {
            return Ok(Merged {
                conflicts,
                ..Merged::default()
            });
        }
        let base_caller = on_base(self.caller(), &record);
        let Committed { files, changeset } = match ops.is_empty() {
            true => Committed {
                files: Vec::new(),
                changeset: String::new(),
            },
            false => Files::new(backend.as_ref(), &base_caller, self.max_file_bytes())
                .commit(&ops, limits)?,
        };
        Ok(Merged {
            changeset,
            files,
            conflicts: Vec::new(),
            discarded: false,
        })
    }

    /// The three-way decision for one file; a line merge's result is
    /// charged to the caller's share before it is built (at most both
    /// sides together), and what it did not take is given back.
    fn step(&self, touched: &Touched, base: Option<&(Vec<u8>, u64)>) -> Result<Step> {
        let ancestor = touched
            .ancestor
            .version
            .map(|_| touched.ancestor.content.as_slice());
        let branch = touched.branch.as_ref().map(|(d, _)| d.as_slice());
        let now = base.map(|(d, _)| d.as_slice());
        if branch == ancestor || branch == now {
            return Ok(Step::Keep);
        }
        let base_unchanged = match (&touched.ancestor.version, base) {
            (None, None) => true,
            (Some(v), Some((_, now))) => v == now,
            _ => false,
        };
        if base_unchanged || now == ancestor {
            return Ok(Step::Branch);
        }
        match (
            as_text(ancestor.or(Some(b""))),
            as_text(branch),
            as_text(now),
        ) {
            (Some(a), Some(b), Some(t)) => {
                let most = (b.len() + t.len()) as u64;
                self.charge(most, "merging the branch")?;
                let merged = merge3(a, b, t);
                self.release(most.saturating_sub(merged.as_ref().map_or(0, |m| m.len() as u64)));
                Ok(match merged {
                    Some(merged) => Step::Take(Some(merged.into_bytes())),
                    None => Step::Conflict,
                })
            }
            _ => Ok(Step::Conflict),
        }
    }
}

/// What a merge will hold and carry, from the stats of the files the
/// branch changed, before any of them is read.
struct MergePlan {
    /// The files still changed, each with the bytes of its three sides
    /// (the ancestor, the branch's and the base's now).
    files: Vec<(VfsPath, u64)>,
    /// Those sides together: what the merge reads and holds.
    held: u64,
    /// The most the merged files can carry: per file its resolution, or
    /// the branch's and the base's file together (a three-way merge takes
    /// lines from both).
    carried: u64,
}

/// Sizes the merge of `changed` (by stats; nothing is read).
fn plan_merge(
    backend: &dyn crate::backend::Backend,
    overlay: &Overlay,
    scope: &Scope,
    base_scope: &Scope,
    changed: &[VfsPath],
    resolutions: &BTreeMap<VfsPath, Resolution>,
) -> Result<MergePlan> {
    let mut plan = MergePlan {
        files: Vec::with_capacity(changed.len()),
        held: 0,
        carried: 0,
    };
    for path in changed {
        let Some(sides) = overlay.sides(scope, path)? else {
            continue;
        };
        let base = match backend.stat(base_scope, path) {
            Ok(entry) if !entry.is_directory() => entry.size,
            Ok(_) | Err(Error::NotFound(_) | Error::NotDirectory(_)) => 0,
            Err(e) => return Err(e),
        };
        let held = sides.ancestor + sides.branch + base;
        plan.held = plan.held.saturating_add(held);
        plan.carried = plan.carried.saturating_add(match resolutions.get(path) {
            Some(resolution) => resolution.bytes(),
            None => sides.branch + base,
        });
        plan.files.push((path.clone(), held));
    }
    Ok(plan)
}

/// Refuses, before anything is read, resolutions no merge of the branch of
/// `record` can take: more than one changeset carries files
/// (RESOURCE_EXHAUSTED naming the limit), or a file outside the branch's
/// root (INVALID_ARGUMENT naming it). Docs: docs/branches.md § Merge.
fn check_resolutions(
    record: &BranchRecord,
    resolutions: &BTreeMap<VfsPath, Resolution>,
    limits: &ChangesetLimits,
) -> Result<()> {
    if resolutions.len() > limits.max_operations {
        return Err(Error::TooLarge(format!(
            "{} resolutions, more than the {} files one merge may carry ([limits] \
             changeset_max_operations)",
            resolutions.len(),
            limits.max_operations
        )));
    }
    let root = &record.root;
    match resolutions
        .keys()
        .find(|p| !p.is_within(root) || *p == root)
    {
        Some(path) => Err(Error::InvalidArgument(format!(
            "the resolution of {path}: outside branch {:?}, which forks {root}; a merge \
             settles only files below the branch's root",
            record.name
        ))),
        None => Ok(()),
    }
}

/// `bytes` as text, when it is UTF-8.
fn as_text(bytes: Option<&[u8]>) -> Option<&str> {
    std::str::from_utf8(bytes?).ok()
}

/// The unified diff of one file from the base to the branch.
fn file_diff(path: &VfsPath, base: Option<&[u8]>, branch: Option<&[u8]>) -> String {
    let shown = path.as_str().trim_start_matches('/');
    match (as_text(base.or(Some(b""))), as_text(branch.or(Some(b"")))) {
        (Some(old), Some(new)) => unified(shown, old, new, DiffCaps::WHOLE).text,
        _ => format!("Binary files a/{shown} and b/{shown} differ"),
    }
}

/// Marks an added file whose content is a deleted file's base content as
/// that file moved (its deletion then leaves the page).
fn pair_moves(files: &mut Vec<BranchFileDiff>, page: &[Touched]) {
    let content = |path: &VfsPath| {
        page.iter()
            .find(|t| t.path == *path)
            .and_then(|t| t.branch.as_ref().map(|(d, _)| d.clone()))
    };
    let deleted: Vec<(VfsPath, Vec<u8>)> = page
        .iter()
        .filter(|t| t.branch.is_none() && t.ancestor.version.is_some())
        .map(|t| (t.path.clone(), t.ancestor.content.clone()))
        .collect();
    let mut moved_from = Vec::new();
    for file in files.iter_mut().filter(|f| f.kind == DiffKind::Added) {
        let Some(data) = content(&file.path) else {
            continue;
        };
        if let Some((from, _)) = deleted
            .iter()
            .find(|(from, old)| *old == data && !moved_from.contains(from))
        {
            moved_from.push(from.clone());
            file.kind = DiffKind::Moved;
            file.from = Some(from.clone());
            file.diff = String::new();
        }
    }
    files.retain(|f| !(f.kind == DiffKind::Deleted && moved_from.contains(&f.path)));
}
