//! The application layer: the one place where a call's domain steps happen.
//!
//! Front ends (the gRPC `Filesystem` service, the LLM tools, any future
//! adapter such as MCP) decode a request, make one call here, and encode the
//! answer. Everything between is written once, in this module:
//!
//! - the caller's grants are checked for the object each step touches
//!   ([`Files`] checks before every tier call, so an adapter cannot forget);
//! - listings are grant-aware: a caller granted only parts of a directory
//!   sees what leads to or lies in them ([`Files::list`]);
//! - sizes are bounded: a write over `max_file_bytes` is RESOURCE_EXHAUSTED
//!   before it reaches a tier, an edit's result before it is built;
//! - blocking tier work runs off the async runtime ([`Service::run`]);
//! - streams and searches are admitted under the server's [`Limits`];
//! - searches start over the granted parts of their root ([`Service::search`]);
//! - history (versions, restores, diffs) and the change feed ([`Watcher`])
//!   show and change only what the caller's grants cover.
//!
//! Errors are domain [`Error`]s; each front end maps them once (gRPC:
//! `From<Error> for Status`; tools: the envelope's codes and messages).
//!
//! Dependencies point one way: front ends → `service` → tiers (`backend`) →
//! `search` → `path`/`error` (docs/architecture.md).

mod branch;
mod caller;
mod changeset;
mod disclose;
mod edit;
mod files;
mod history;
pub mod limits;
mod memory;
mod read;
mod rewind;
mod search;
mod upload;
mod watch;

pub use branch::{
    BranchDiff, BranchFileDiff, BranchInfo, Conflict, DiffKind, MAX_DIFF_PAGE, Merged, Resolution,
};
pub use caller::{
    BRANCH_HEADER, Caller, Credentials, LABEL_HEADER, NAMESPACE_HEADER, SESSION_HEADER,
    SURFACE_HEADER, Secret,
};
pub use changeset::{ChangeOp, ChangesetLimits, Committed};
pub use disclose::{Asked, Disclose, Sight};
pub use edit::{EditOutcome, TextEdit};
pub use files::Files;
pub use history::VersionDiff;
pub use limits::{ClientIdle, Limits, LimitsConfig, SearchPermit, StreamPermit};
pub use memory::{Account, BodyRefused, MemoryBudget};
pub use read::ReadText;
pub use rewind::{Rewound, RewoundFile, Selector};
pub use search::collect;
pub use upload::{PIECES_IN_FLIGHT, UploadMessage};
pub use watch::{WATCH_PAGE, WatchBatch, WatchStart, Watcher};

/// What front ends hand to and get from the tiers, through this layer:
/// a front end names no `backend` item (`tests/it/modules.rs`).
pub use crate::backend::{
    Backend, ChunkReader, FileCommitted, MoveOutcome, Precondition, WriteOutcome,
};

use crate::access::Op;
use crate::audit::Audit;
use crate::backend::branch::RecordCache;
use crate::entry::{Entry, EntryKind};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::search::{Budgets, Hit, SearchEvent, SearchSpec};
use std::sync::Arc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

/// The application layer over one backend (the mount table, or a single
/// tier), shared by every front end. Cloning is cheap.
#[derive(Clone)]
pub struct Service {
    backend: Arc<dyn Backend>,
    max_file_bytes: u64,
    limits: Limits,
    /// The branch records this server read last (docs/branches.md).
    branches: Arc<RecordCache>,
    /// Where every front end writes its calls' records (docs/audit.md).
    audit: Audit,
}

impl Service {
    /// The layer over `backend`, refusing files over `max_file_bytes`, its
    /// streams and searches admitted under `limits`.
    pub fn new(backend: Arc<dyn Backend>, max_file_bytes: u64, limits: Limits) -> Service {
        Service {
            backend,
            max_file_bytes,
            limits,
            branches: Arc::default(),
            audit: Audit::default(),
        }
    }

    /// The layer recording its front ends' calls in `audit`.
    pub fn with_audit(mut self, audit: Audit) -> Service {
        self.audit = audit;
        self
    }

    /// The audit log the front ends record their calls in.
    pub fn audit(&self) -> &Audit {
        &self.audit
    }

    /// Largest file a write may produce.
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    /// The server's stream and search bounds.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Runs `work` on a blocking thread with the caller's grant-checked view
    /// of the files: the way a front end composes several steps of one call
    /// (a read and then a write, a read and then a window of lines). Its
    /// answer shows only what the caller may see ([`Disclose`]).
    pub async fn run<T: Disclose + Send + 'static>(
        &self,
        caller: &Caller,
        work: impl FnOnce(&Files<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (backend, caller, max) = (self.backend.clone(), caller.clone(), self.max_file_bytes);
        let branches = self.branches.clone();
        let abandoned = AbandonOnDrop::default();
        let flag = abandoned.0.clone();
        let answer = blocking(move || {
            let backend = view(&backend, &caller, &branches)?;
            let files = Files::new(&*backend, &caller, max).abandoned_with(flag);
            let mut answer = work(&files)?;
            answer.screen(&Sight::of(&caller.principal))?;
            Ok(answer)
        })
        .await;
        abandoned.finished();
        answer
    }

    /// [`Service::run`] for a front end that composes single-path steps
    /// into an answer of its own (a tool's text of the one file it read):
    /// each step checked the grant for the path the call named, and the
    /// answer carries nothing else ([`Asked`]). The files that may call it
    /// are listed in `tests/it/modules.rs`.
    pub async fn run_asked<T: Send + 'static>(
        &self,
        caller: &Caller,
        work: impl FnOnce(&Files<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let Asked(answer) = self.run(caller, |files| work(files).map(Asked)).await?;
        Ok(answer)
    }

    /// The backend the caller's calls go through: the base, or the branch
    /// it names (`x-agentvfs-branch`, docs/branches.md).
    async fn backend_for(&self, caller: &Caller) -> Result<Arc<dyn Backend>> {
        if caller.scope.branch.is_empty() {
            return Ok(self.backend.clone());
        }
        let (backend, caller) = (self.backend.clone(), caller.clone());
        let branches = self.branches.clone();
        blocking(move || view(&backend, &caller, &branches)).await
    }

    /// Runs `work` on a blocking thread over the base (for the branch
    /// operations, which name their branch themselves).
    async fn run_on_base<T: Disclose + Send + 'static>(
        &self,
        caller: &Caller,
        work: impl FnOnce(&Files<'_>, &Arc<dyn Backend>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (backend, caller, max) = (self.backend.clone(), caller.clone(), self.max_file_bytes);
        let abandoned = AbandonOnDrop::default();
        let flag = abandoned.0.clone();
        let answer = blocking(move || {
            let files = Files::new(&*backend, &caller, max).abandoned_with(flag);
            let mut answer = work(&files, &backend)?;
            answer.screen(&Sight::of(&caller.principal))?;
            Ok(answer)
        })
        .await;
        abandoned.finished();
        answer
    }

    /// Forks the directory `root` into a new branch `name`
    /// (docs/branches.md § Fork).
    pub async fn create_branch(
        &self,
        caller: &Caller,
        name: String,
        root: VfsPath,
    ) -> Result<BranchInfo> {
        self.forget_branch(caller, &name);
        let max_branches = self.limits.config().max_branches_per_principal;
        self.run_on_base(caller, move |files, _| {
            let record = files.create_branch(&name, &root, max_branches)?;
            Ok(BranchInfo {
                name: record.name,
                root: record.root,
                created: record.created,
                creator: record.creator,
                files: 0,
                bytes: 0,
            })
        })
        .await
    }

    /// The caller's branches, with their sizes.
    pub async fn list_branches(&self, caller: &Caller) -> Result<Vec<BranchInfo>> {
        self.run_on_base(caller, move |files, backend| files.list_branches(backend))
            .await
    }

    /// One page of what branch `name` changed against its base now.
    pub async fn diff_branch(
        &self,
        caller: &Caller,
        name: String,
        after: Option<VfsPath>,
        limit: usize,
    ) -> Result<BranchDiff> {
        self.run_on_base(caller, move |files, backend| {
            files.diff_branch(backend, &name, after.as_ref(), limit)
        })
        .await
    }

    /// Merges branch `name` into its base as one changeset
    /// (docs/branches.md § Merge).
    pub async fn merge_branch(
        &self,
        caller: &Caller,
        name: String,
        resolutions: std::collections::BTreeMap<VfsPath, Resolution>,
        discard: bool,
    ) -> Result<Merged> {
        let limits = self.limits.changeset();
        let forget = name.clone();
        let merged = self
            .run_on_base(caller, move |files, backend| {
                files.merge_branch(backend, &name, &resolutions, &limits, discard)
            })
            .await;
        self.forget_branch(caller, &forget);
        let mut merged = merged?;
        if discard && merged.conflicts.is_empty() {
            self.discard_branch(caller, forget).await?;
            merged.discarded = true;
        }
        Ok(merged)
    }

    /// Deletes branch `name` and its changes. The record goes first, so
    /// the branch is gone for every later call; its changes are cleared
    /// once no server may still read them under a lease (docs/branches.md
    /// § Discard): the wait is a timer, holding no thread.
    pub async fn discard_branch(&self, caller: &Caller, name: String) -> Result<()> {
        let forget = name.clone();
        let discarding = self
            .run_on_base(caller, move |files, backend| {
                files.discard_branch(backend, &name)
            })
            .await;
        self.forget_branch(caller, &forget);
        let discarding = discarding?;
        if !discarding.wait.is_zero() {
            tokio::time::sleep(discarding.wait).await;
        }
        self.run_on_base(caller, move |files, _| discarding.clear(files.scope()))
            .await
    }

    /// Drops this server's record of the caller's branch `name` (forked,
    /// merged or discarded here): its next call reads the registry.
    fn forget_branch(&self, caller: &Caller, name: &str) {
        self.branches.forget(&caller.scope.namespace, name);
    }

    /// One directory level, as much of it as the caller may see.
    pub async fn list(&self, caller: &Caller, dir: VfsPath) -> Result<Vec<Entry>> {
        self.run(caller, move |files| files.list(&dir)).await
    }

    /// Metadata of one path (`file` grant).
    pub async fn stat(&self, caller: &Caller, path: VfsPath) -> Result<Entry> {
        self.run(caller, move |files| files.stat(&path, Op::File))
            .await
    }

    /// Creates or replaces a file (`write` grant, size limit).
    pub async fn write(
        &self,
        caller: &Caller,
        path: VfsPath,
        data: Vec<u8>,
        pre: Precondition,
    ) -> Result<WriteOutcome> {
        self.run(caller, move |files| files.write(&path, data, pre))
            .await
    }

    /// Sets or clears a file's executable bit (`write` grant;
    /// [`files::Files::set_executable`]).
    pub async fn set_executable(
        &self,
        caller: &Caller,
        path: VfsPath,
        executable: bool,
        if_version: Option<u64>,
    ) -> Result<(u64, u64)> {
        self.run(caller, move |files| {
            files.set_executable(&path, executable, if_version)
        })
        .await
    }

    /// Deletes a file or a directory tree (`delete` grant).
    pub async fn delete(
        &self,
        caller: &Caller,
        path: VfsPath,
        if_version: Option<u64>,
        recursive: bool,
    ) -> Result<u64> {
        self.run(caller, move |files| {
            files.delete(&path, if_version, recursive)
        })
        .await
    }

    /// Moves a file or a directory tree (docs/contract.md § Move).
    pub async fn rename(
        &self,
        caller: &Caller,
        source: VfsPath,
        destination: VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        self.run(caller, move |files| {
            files.rename(&source, &destination, pre)
        })
        .await
    }

    /// Applies `ops` as one changeset, all or nothing (docs/changesets.md).
    /// The bounds are `[limits]`'s.
    pub async fn commit(&self, caller: &Caller, ops: Vec<ChangeOp>) -> Result<Committed> {
        let limits = self.limits.changeset();
        self.run(caller, move |files| files.commit(&ops, &limits))
            .await
    }

    /// Undoes the changes under `root` that `selector` picks, as one
    /// changeset (docs/changesets.md § Rewind); `dry_run` answers what
    /// would change, with its diff, and changes nothing. Bounded like a
    /// changeset by `[limits]`.
    pub async fn rewind(
        &self,
        caller: &Caller,
        root: VfsPath,
        selector: Selector,
        dry_run: bool,
        force: bool,
    ) -> Result<Rewound> {
        let limits = self.limits.changeset();
        self.run(caller, move |files| {
            files.rewind(&root, &selector, dry_run, force, &limits)
        })
        .await
    }

    /// Admits one more stream of the caller (RESOURCE_EXHAUSTED over
    /// `max_streams_per_principal`); the stream lasts while the permit does.
    pub fn admit_stream(&self, caller: &Caller) -> Result<StreamPermit> {
        self.limits.stream(&caller.principal)
    }

    /// A download: the file's metadata, its content in pieces of at most
    /// `max_chunk` bytes fetched as they are asked for, and the stream's
    /// permit (`read_binary` grant).
    pub async fn read_chunks(
        &self,
        caller: &Caller,
        path: VfsPath,
        version: Option<u64>,
        max_chunk: usize,
    ) -> Result<(Entry, ChunkReader, StreamPermit)> {
        caller.check(&path, Op::ReadBinary)?;
        let permit = self.admit_stream(caller)?;
        let (entry, chunks) = self
            .run(caller, move |files| match version {
                None => files.read_chunks(&path, max_chunk),
                Some(version) => {
                    let (found, chunks) =
                        files.read_version_chunks(&path, version, Op::ReadBinary, max_chunk)?;
                    Ok((found.entry(path), chunks))
                }
            })
            .await?;
        Ok((entry, chunks, permit))
    }

    /// Starts a search: admits it as one of the caller's streams when
    /// `streamed` (a front end forwarding results as they come; the Tools,
    /// which collect them, pass false), builds its spec off the runtime
    /// (compiling a pattern is CPU work), then runs it over the parts of
    /// its root the caller holds `op` on ([`search::start`]).
    pub async fn search(
        &self,
        caller: &Caller,
        op: Op,
        streamed: bool,
        spec: impl FnOnce() -> Result<SearchSpec> + Send + 'static,
    ) -> Result<ReceiverStream<SearchEvent>> {
        let permit = streamed.then(|| self.admit_stream(caller)).transpose()?;
        let spec = blocking(spec).await?;
        caller.trail.touch(&spec.root, op);
        caller.trail.request(&spec.pattern);
        search::start(
            &self.limits,
            permit,
            self.backend_for(caller).await?,
            &caller.principal,
            op,
            caller.scope.clone(),
            spec,
            None,
        )
    }

    /// One page of a walk over the files below `root` the caller may list,
    /// in path order: at most `limit` files ordered after `after`, and
    /// whether more may follow. The walk runs under the search budgets
    /// (docs/contract.md § Glob and Grep), so a page that hits one is
    /// shorter and says more may follow; hidden files are included, what
    /// ignore rules leave out is not.
    pub async fn files_after(
        &self,
        caller: &Caller,
        root: VfsPath,
        after: Option<VfsPath>,
        limit: usize,
    ) -> Result<(Vec<Entry>, bool)> {
        let budgets = Budgets {
            include_hidden: true,
            ..Budgets::default()
        };
        let spec = blocking(move || SearchSpec::glob(root, "**", false, budgets)).await?;
        let mut events = search::start(
            &self.limits,
            None,
            self.backend_for(caller).await?,
            &caller.principal,
            Op::List,
            caller.scope.clone(),
            spec,
            after.as_ref(),
        )?;
        let mut files = Vec::new();
        while let Some(event) = events.next().await {
            match event {
                SearchEvent::Batch(batch) => {
                    for hit in batch {
                        if let Hit::Entry(entry) = hit
                            && entry.kind == EntryKind::File
                        {
                            if files.len() == limit {
                                // Dropping `events` stops the walk.
                                return Ok((files, true));
                            }
                            files.push(entry);
                        }
                    }
                }
                SearchEvent::Summary(summary) => return Ok((files, summary.aborted.is_some())),
                SearchEvent::Failed(err) => return Err(err),
            }
        }
        Err(Error::Internal("search ended without a summary".into()))
    }
}

/// Marks a call abandoned when its future is dropped before the call's
/// blocking work has answered: the client is gone ([`Files::go_on`]).
#[derive(Default)]
struct AbandonOnDrop(files::Abandoned, bool);

impl AbandonOnDrop {
    /// The work answered: nothing to mark.
    fn finished(mut self) {
        self.1 = true;
    }
}

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        if !self.1 {
            self.0.set();
        }
    }
}

/// The backend `caller`'s calls go through: `backend`, or the branch the
/// caller names over it.
fn view(
    backend: &Arc<dyn Backend>,
    caller: &Caller,
    branches: &Arc<RecordCache>,
) -> Result<Arc<dyn Backend>> {
    if caller.scope.branch.is_empty() {
        return Ok(backend.clone());
    }
    Ok(Arc::new(branch::overlay(backend, caller, branches)?))
}

/// Runs blocking work off the async runtime's worker threads.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(format!("blocking task failed: {e}")))?
}
