//! The audit log: one record per operation on every surface, hash-chained
//! and signed, kept out of reach of the audited (docs/audit.md).
//!
//! A front end opens a [`Trail`] for each call ([`Audit::trail`]) and
//! hands it to the application layer with the caller; the grant checks
//! note on it the paths they decided on, and the tiers' answers the
//! versions and bytes ([`Trail::touch`], [`Trail::deny`], ...). When the
//! call has its answer, the front end hands the trail and the result to
//! [`Audit::finish`], which writes the record through the policy
//! ([`policy`]) to the store ([`store`]): a change's record is on disk
//! before the change is acknowledged.

mod chain;
mod policy;
mod query;
mod record;
mod store;
mod verify;

pub use chain::Checkpoint;
pub use policy::{Level, Policy, Rule};
pub use query::{Filter, MAX_PAGE_BYTES, Page, normalized_time, page};
pub use record::{Class, Outcome, Record};
pub use verify::{Broken, Verified, verify};

use crate::access::Op;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::path::VfsPath;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most paths one record names (a changeset of thousands names its first).
pub const MAX_PATHS: usize = 16;
/// Most characters of a request's text kept at level `request`.
const MAX_REQUEST_CHARS: usize = 1024;

/// What to do when a record cannot be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Refuse every call from then on (UNAVAILABLE), as Vault does.
    FailClosed,
    /// Go on serving and count the records lost.
    DropAndCount,
}

impl Failure {
    /// The configuration's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::FailClosed => "fail_closed",
            Failure::DropAndCount => "drop_and_count",
        }
    }
}

/// The `[audit]` settings (docs/configuration.md § audit).
#[derive(Clone, Debug, PartialEq)]
pub struct AuditConfig {
    /// Whether operations are recorded at all.
    pub enabled: bool,
    /// The audit directory: segments, checkpoints, key.
    pub dir: PathBuf,
    /// What is recorded, and how much.
    pub policy: Policy,
    /// A checkpoint after this many records...
    pub checkpoint_records: u64,
    /// ...or this long after the last, whichever comes first.
    pub checkpoint_interval: Duration,
    /// A segment is closed past this size.
    pub segment_bytes: u64,
    /// Whole segments older than this are dropped (`None`: kept).
    pub retention_age: Option<Duration>,
    /// The oldest segments are dropped while the store is larger
    /// (`None`: kept).
    pub retention_bytes: Option<u64>,
    /// What a failed write does.
    pub failure: Failure,
    /// A change's record is synced (`fdatasync`) before the change is
    /// answered (true), or handed to the kernel before it, which survives
    /// kill -9 as a Store's unsynced write does, and synced at the next
    /// checkpoint (false, the default: docs/audit.md § Storage).
    pub sync: bool,
}

/// The time now, RFC 3339 UTC with microseconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

/// Where a call came in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Surface {
    /// A gRPC client.
    #[default]
    Grpc,
    /// The `agentvfs` command line (over gRPC).
    Cli,
    /// `agentvfs mount` (over gRPC).
    Mount,
    /// An MCP client.
    Mcp,
}

impl Surface {
    /// The name in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::Grpc => "grpc",
            Surface::Cli => "cli",
            Surface::Mount => "mount",
            Surface::Mcp => "mcp",
        }
    }

    /// The surface a gRPC client declares in `x-agentvfs-surface` (`cli`,
    /// `mount`); anything else is plain gRPC.
    pub fn declared(value: Option<&str>) -> Surface {
        match value {
            Some("cli") => Surface::Cli,
            Some("mount") => Surface::Mount,
            _ => Surface::Grpc,
        }
    }
}

/// Who made a call, as the trail records it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Who<'a> {
    /// The principal's name.
    pub principal: &'a str,
    /// The handle's lineage.
    pub handle: &'a str,
    /// The State session.
    pub session: &'a str,
    /// The label.
    pub label: &'a str,
    /// The branch.
    pub branch: &'a str,
}

/// What a call noted of itself on its way.
#[derive(Debug, Default)]
struct Note {
    record: Record,
    class: Option<Class>,
    first_path: Option<VfsPath>,
    denied: Option<String>,
}

/// One call's notes for its record; empty (and free) when the audit is
/// off. Clones share the notes.
#[derive(Clone, Debug, Default)]
pub struct Trail(Option<Arc<Mutex<Note>>>);

impl Trail {
    fn note(&self, f: impl FnOnce(&mut Note)) {
        if let Some(note) = &self.0 {
            f(&mut note.lock().unwrap_or_else(|p| p.into_inner()));
        }
    }

    /// True when the call is being recorded.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Records who called.
    pub fn identify(&self, who: Who<'_>) {
        self.note(|n| {
            let r = &mut n.record;
            r.principal = who.principal.to_owned();
            r.handle = who.handle.to_owned();
            r.session = who.session.to_owned();
            r.label = who.label.to_owned();
            r.branch = who.branch.to_owned();
        });
    }

    /// Where the call came in, and its MCP session.
    pub fn surface(&self, surface: Surface, mcp_session: Option<&str>) {
        self.note(|n| {
            n.record.surface = surface.as_str().to_owned();
            n.record.mcp_session = mcp_session.unwrap_or_default().to_owned();
        });
    }

    /// The operation, and the caller's id of the tool call.
    pub fn operation(&self, operation: &str, tool_call_id: &str) {
        self.note(|n| {
            n.record.operation = operation.to_owned();
            n.record.tool_call_id = tool_call_id.to_owned();
        });
    }

    /// The call's class, whatever its grant checks say (an admin RPC).
    pub fn class(&self, class: Class) {
        self.note(|n| n.class = Some(class));
    }

    /// A grant check of `op` on `path` (allowed or not): the path is
    /// named and the class raised to `op`'s.
    pub fn touch(&self, path: &VfsPath, op: Op) {
        self.note(|n| {
            let class = match op {
                Op::List | Op::File => Class::MetadataRead,
                Op::ReadBinary | Op::ReadFile | Op::ReadRe => Class::DataRead,
                Op::Write | Op::Delete => Class::DataWrite,
            };
            if n.class != Some(Class::Admin) {
                n.class = n.class.max(Some(class));
            }
            if n.first_path.is_none() {
                n.first_path = Some(path.clone());
            }
            let shown = path.as_str();
            if n.record.paths.len() < MAX_PATHS && !n.record.paths.iter().any(|p| p == shown) {
                n.record.paths.push(shown.to_owned());
            }
        });
    }

    /// A grant refused the call: `rule` says which check.
    pub fn deny(&self, rule: &str) {
        self.note(|n| {
            if n.denied.is_none() {
                n.denied = Some(rule.to_owned());
            }
        });
    }

    /// The version the call found, and the one it wrote.
    pub fn versions(&self, before: Option<u64>, after: Option<u64>) {
        self.note(|n| {
            n.record.version_before = before.or(n.record.version_before);
            n.record.version_after = after.or(n.record.version_after);
        });
    }

    /// Bytes of content the call read or wrote.
    pub fn bytes(&self, bytes: u64) {
        self.note(|n| n.record.bytes = Some(n.record.bytes.unwrap_or(0) + bytes));
    }

    /// The request's own text (a pattern): kept only at level `request`.
    pub fn request(&self, text: &str) {
        self.note(|n| n.record.request = Some(text.chars().take(MAX_REQUEST_CHARS).collect()));
    }
}

/// The audit of a server: a handle on its writer (off when `[audit]
/// enabled` is false) and on its metrics, which count every call the
/// trails note (docs/audit.md § Metrics); cheap to clone.
#[derive(Clone, Default)]
pub struct Audit {
    log: Option<Arc<Inner>>,
    metrics: Option<Arc<Metrics>>,
}

struct Inner {
    dir: PathBuf,
    policy: Policy,
    failure: Failure,
    /// The store, where a change's record is appended by its caller.
    store: store::Shared,
    /// Whether a change's record is synced before its answer.
    sync: bool,
    /// Tells the writer an append made a checkpoint or segment due.
    nudge: crossbeam_channel::Sender<()>,
    /// A change's records under `[audit] sync`: the writer wakes for each.
    waited: crossbeam_channel::Sender<store::Job>,
    /// Every other record: the writer takes them with its next batch.
    queued: crossbeam_channel::Sender<store::Job>,
    /// Set when a write failed under `fail_closed`.
    failed: AtomicBool,
    /// Becomes true with `failed`, for those who wait on it
    /// ([`Audit::closed`]: the server's health).
    closed: tokio::sync::watch::Sender<bool>,
    written: AtomicU64,
    dropped: AtomicU64,
}

impl Inner {
    /// Appends `record` on the caller's thread ([`store::Store::append`]),
    /// nudging the writer when that made a checkpoint or segment due.
    fn append_here(&self, record: Record) -> std::result::Result<(), String> {
        let (written, due) = store::Store::append(&self.store, record);
        if due {
            let _ = self.nudge.try_send(());
        }
        written
    }
}

impl Audit {
    /// The audit `config` asks for: off, or its store opened (the key
    /// created on first start) and its writer thread started.
    pub fn open(config: &AuditConfig) -> Result<Audit> {
        if !config.enabled {
            return Ok(Audit::default());
        }
        let store = store::Store::open(config).map_err(|e| {
            Error::Internal(format!(
                "cannot open the audit log in {}: {e}",
                config.dir.display()
            ))
        })?;
        let (waited, waited_inlet) = crossbeam_channel::unbounded();
        let (queued, queued_inlet) = crossbeam_channel::bounded(store::MAX_QUEUED);
        let (nudge, nudge_inlet) = crossbeam_channel::bounded(1);
        let inlets = store::Inlets {
            waited: waited_inlet,
            queued: queued_inlet,
            nudge: nudge_inlet,
        };
        let store: store::Shared = Arc::new(std::sync::Mutex::new(store));
        let writer = Arc::clone(&store);
        std::thread::Builder::new()
            .name("agentvfs-audit".into())
            .spawn(move || store::Store::run(writer, inlets))
            .map_err(|e| Error::Internal(format!("cannot start the audit writer: {e}")))?;
        Ok(Audit {
            metrics: None,
            log: Some(Arc::new(Inner {
                dir: config.dir.clone(),
                policy: config.policy.clone(),
                failure: config.failure,
                store,
                sync: config.sync,
                nudge,
                waited,
                queued,
                failed: AtomicBool::new(false),
                closed: tokio::sync::watch::Sender::new(false),
                written: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            })),
        })
    }

    /// This audit, also counting every call in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Audit {
        self.metrics = Some(metrics);
        self
    }

    /// The metrics calls are counted in, if any.
    pub fn metrics(&self) -> Option<&Metrics> {
        self.metrics.as_deref()
    }

    /// True when calls are recorded or counted: a front end then opens a
    /// trail for each ([`Audit::trail`]).
    pub fn is_recording(&self) -> bool {
        self.log.is_some() || self.metrics.is_some()
    }

    /// The audit directory, when on.
    pub fn dir(&self) -> Option<&std::path::Path> {
        self.log.as_ref().map(|i| i.dir.as_path())
    }

    /// True when operations are recorded.
    pub fn is_on(&self) -> bool {
        self.log.is_some()
    }

    /// The failure mode, when on.
    pub fn failure(&self) -> Option<Failure> {
        self.log.as_ref().map(|i| i.failure)
    }

    /// True once a record could not be written under `fail_closed`: every
    /// call is refused from then on ([`Audit::admit`]).
    pub fn has_failed(&self) -> bool {
        self.log
            .as_ref()
            .is_some_and(|i| i.failed.load(Ordering::Relaxed))
    }

    /// Resolves once a record could not be written under `fail_closed`
    /// (never when the audit is off, or under `drop_and_count`): the
    /// server's health turns NOT_SERVING then.
    pub async fn closed(&self) {
        match &self.log {
            Some(inner) => {
                // The sender lives in `inner`, which `self` holds.
                let _ = inner.closed.subscribe().wait_for(|closed| *closed).await;
            }
            None => std::future::pending().await,
        }
    }

    /// Records handed to the store, and records lost (`drop_and_count`).
    pub fn counts(&self) -> (u64, u64) {
        self.log.as_ref().map_or((0, 0), |i| {
            (
                i.written.load(Ordering::Relaxed),
                i.dropped.load(Ordering::Relaxed),
            )
        })
    }

    /// A new trail for a call coming in on `surface`: empty when calls
    /// are neither recorded nor counted.
    pub fn trail(&self, surface: Surface) -> Trail {
        match self.is_recording() {
            false => Trail::default(),
            true => {
                let trail = Trail(Some(Arc::default()));
                trail.surface(surface, None);
                trail
            }
        }
    }

    /// Refuses a call when the audit has failed under `fail_closed`: no
    /// call runs that could not be recorded.
    pub fn admit(&self) -> Result<()> {
        match &self.log {
            Some(inner) if inner.failed.load(Ordering::Relaxed) => Err(Error::Unavailable(
                "the audit log cannot be written and [audit] failure is fail_closed: no call \
                 is served until it can"
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// Writes the record of the call `trail` noted, which ended with
    /// `outcome` (`message`: its error's text, the rule of a denial no
    /// grant check noted) after `started`. A change's record (class
    /// `data_write`) is on disk when this returns. Under `fail_closed` a
    /// record that could not be written is an error, and so is every call
    /// after it ([`Audit::admit`]).
    pub async fn finish(
        &self,
        trail: &Trail,
        outcome: Outcome,
        message: &str,
        started: Instant,
    ) -> Result<()> {
        let Some(note) = &trail.0 else {
            return Ok(());
        };
        if let Some(metrics) = &self.metrics {
            let note = note.lock().unwrap_or_else(|p| p.into_inner());
            let result = serde_json::to_value(outcome).unwrap_or_default();
            metrics.observe(
                &note.record.surface,
                &note.record.operation,
                result.as_str().unwrap_or_default(),
                started.elapsed().as_secs_f64(),
                note.record.bytes,
                note.class == Some(Class::DataWrite),
            );
        }
        let Some(inner) = &self.log else {
            return Ok(());
        };
        let (record, durable) = {
            let mut note = note.lock().unwrap_or_else(|p| p.into_inner());
            let class = note.class.unwrap_or(Class::MetadataRead);
            let mut level =
                inner
                    .policy
                    .level(&note.record.principal, note.first_path.as_ref(), class);
            if outcome == Outcome::Denied {
                level = level.max(Level::Metadata);
            }
            if level == Level::None {
                return Ok(());
            }
            let mut record = std::mem::take(&mut note.record);
            if record.principal.is_empty() {
                record.principal = "-".into();
            }
            if level < Level::Request {
                record.request = None;
            }
            record.class = Some(class);
            record.result = Some(outcome);
            if outcome == Outcome::Denied {
                record.rule = note.denied.clone().unwrap_or_else(|| message.to_owned());
            }
            record.time = now_rfc3339();
            record.duration_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            (record, class == Class::DataWrite)
        };
        let written = match (durable, inner.sync) {
            // A change's record, handed to the kernel by its caller.
            (true, false) => inner.append_here(record),
            // A change's record synced by the writer before the answer.
            (true, true) => {
                let (tell, told) = tokio::sync::oneshot::channel();
                let job = store::Job {
                    record,
                    durable: Some(tell),
                };
                match inner.waited.send(job) {
                    Err(_) => Err("the audit writer has stopped".to_owned()),
                    Ok(()) => told
                        .await
                        .unwrap_or_else(|_| Err("the audit writer has stopped".into())),
                }
            }
            (false, _) => {
                let job = store::Job {
                    record,
                    durable: None,
                };
                match inner.queued.try_send(job) {
                    Ok(()) => Ok(()),
                    // The writer is behind: the caller appends its record
                    // itself, so the queue, and the memory it holds, stays
                    // bounded whatever the callers send.
                    Err(crossbeam_channel::TrySendError::Full(job)) => {
                        inner.append_here(job.record)
                    }
                    Err(crossbeam_channel::TrySendError::Disconnected(_)) => {
                        Err("the audit writer has stopped".to_owned())
                    }
                }
            }
        };
        match written {
            Ok(()) => {
                inner.written.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) if inner.failure == Failure::DropAndCount => {
                inner.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "an audit record was dropped");
                Ok(())
            }
            Err(e) => {
                inner.failed.store(true, Ordering::Relaxed);
                inner.closed.send_replace(true);
                Err(Error::Unavailable(format!(
                    "the call's audit record could not be written ({e}); [audit] failure is \
                     fail_closed"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer held up (here: its store locked by another thread) fills
    /// the queue; the records past it are appended by their callers once
    /// the store is free, and none is lost.
    #[tokio::test]
    async fn a_full_queue_makes_callers_append_their_own_records() {
        let dir = tempfile::tempdir().unwrap();
        let config = AuditConfig {
            enabled: true,
            dir: dir.path().join("audit"),
            policy: Policy::default(),
            checkpoint_records: 1000,
            checkpoint_interval: Duration::from_secs(10),
            segment_bytes: 64 << 20,
            retention_age: None,
            retention_bytes: None,
            failure: Failure::FailClosed,
            sync: false,
        };
        let audit = Audit::open(&config).unwrap();
        let inner = Arc::clone(audit.log.as_ref().unwrap());
        let (locked, is_locked) = std::sync::mpsc::channel();
        let held = std::thread::spawn(move || {
            let _store = inner.store.lock().unwrap();
            locked.send(()).unwrap();
            // Held until the queue is full: the writer takes at most one
            // batch before it waits for the store, and the test sends two
            // batches' worth and more.
            while inner.queued.len() < store::MAX_QUEUED {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(50));
            // The callers past it wait for the store instead of queueing.
            assert_eq!(inner.queued.len(), store::MAX_QUEUED);
        });
        is_locked.recv().unwrap();
        let calls = 2 * store::MAX_QUEUED + 10;
        for _ in 0..calls {
            let trail = audit.trail(Surface::Grpc);
            audit
                .finish(&trail, Outcome::Ok, "", Instant::now())
                .await
                .unwrap();
        }
        held.join().unwrap();
        let lines = || {
            std::fs::read_dir(&config.dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.to_string_lossy().contains("segment-"))
                .map(|p| std::fs::read_to_string(p).unwrap().lines().count())
                .sum::<usize>()
        };
        for _ in 0..500 {
            if lines() >= calls {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(lines(), calls);
    }
}
