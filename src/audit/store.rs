//! The audit store: append-only JSON Lines segment files in the audit
//! directory, with the signed checkpoints beside them and the key that
//! signs them (docs/audit.md § Storage).
//!
//! A change's record is sealed and appended by its caller, under the
//! store's lock, before the change is answered ([`Store::append`]); under
//! `[audit] sync` it goes to the writer thread instead, which syncs
//! (`fdatasync`) its batch before answering. Every other record is queued
//! to the writer thread, which appends it with a batch (group commit) at
//! most [`PAUSE`] later, and signs the checkpoints and starts new segments.
//! All records are synced with the next checkpoint, so a crash of the
//! process loses only the records still queued (of reads answered in the
//! last [`PAUSE`]), and a crash of the machine at most the last checkpoint
//! interval's.
//!
//! A queued record does not wake a busy writer: a wake-up and a context
//! switch per record held audited Reads at 0.83× of unaudited ones on two
//! cores, 0.90–1.01× without (docs/performance.md § History, the change
//! feed and the audit log).

use super::AuditConfig;
use super::chain::{self, Anchor, Checkpoint, GENESIS};
use super::record::Record;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// The key file: 32 random bytes, mode 0600, created on first start.
pub const KEY_FILE: &str = "key";
/// The signed checkpoints, one JSON line each.
pub const CHECKPOINTS_FILE: &str = "checkpoints.jsonl";
/// Where the dropped segments ended (retention).
pub const ANCHOR_FILE: &str = "anchor.json";
/// Segment files: `segment-<first seq, 20 digits>.jsonl`.
const SEGMENT_PREFIX: &str = "segment-";
const SEGMENT_SUFFIX: &str = ".jsonl";
/// Locked by the one process writing the store.
const LOCK_FILE: &str = "lock";
/// Most records written in one batch.
const MAX_BATCH: usize = 4096;
/// Most records queued to the writer (a few MiB: a record holds at most 16
/// paths and a 1,024-character request); past it a caller appends its
/// record itself.
pub const MAX_QUEUED: usize = MAX_BATCH;
/// How long a busy writer waits for more records, woken only by a
/// change's record, before it writes those queued meanwhile.
pub const PAUSE: Duration = Duration::from_millis(1);

/// The store, shared by the writer thread and the callers that append a
/// change's record themselves ([`Store::append`]).
pub type Shared = Arc<Mutex<Store>>;

/// The store, locked; a panic while it was held left it usable.
fn lock(store: &Mutex<Store>) -> MutexGuard<'_, Store> {
    store.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where records reach the writer.
pub struct Inlets {
    /// Records whose callers wait to hear they are written: a change's
    /// under `[audit] sync` (without it, the caller appends it itself).
    pub waited: Receiver<Job>,
    /// Every other record: taken with the next batch.
    pub queued: Receiver<Job>,
    /// A caller's append made a checkpoint or a new segment due.
    pub nudge: Receiver<()>,
}

/// A record handed to the writer, with where to say it is on disk.
pub struct Job {
    /// The record; the writer sets `seq`, `prev` and `hash`.
    pub record: Record,
    /// Told once the record is durable (or could not be written).
    pub durable: Option<tokio::sync::oneshot::Sender<Result<(), String>>>,
}

/// The segments of `dir`, by their first record, oldest first.
pub fn segments(dir: &Path) -> std::io::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let first = name.as_deref().and_then(|n| {
            n.strip_prefix(SEGMENT_PREFIX)?
                .strip_suffix(SEGMENT_SUFFIX)?
                .parse::<u64>()
                .ok()
        });
        if let Some(first) = first {
            out.push((first, path));
        }
    }
    out.sort();
    Ok(out)
}

fn segment_path(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("{SEGMENT_PREFIX}{first:020}{SEGMENT_SUFFIX}"))
}

/// The complete lines of `path` (a torn last line, from a crash mid-write,
/// is cut off the file: it was never acknowledged).
fn complete_lines(path: &Path) -> std::io::Result<Vec<String>> {
    let mut file = OpenOptions::new().read(true).write(true).open(path)?;
    let mut text = Vec::new();
    file.read_to_end(&mut text)?;
    let complete = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    if complete < text.len() {
        tracing::warn!(file = %path.display(), "cutting a torn last line of the audit log");
        file.set_len(complete as u64)?;
        file.sync_all()?;
    }
    Ok(String::from_utf8_lossy(&text[..complete])
        .split_terminator('\n')
        .map(str::to_owned)
        .collect())
}

/// The key of `dir`, created (0600) on first start.
fn key(dir: &Path) -> std::io::Result<Vec<u8>> {
    let path = dir.join(KEY_FILE);
    match std::fs::read(&path) {
        Ok(key) if !key.is_empty() => Ok(key),
        Ok(_) => Err(std::io::Error::other(format!(
            "{} is empty",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key: [u8; 32] = rand::random();
            crate::private_file::write(&path, &[&key])?;
            Ok(key.to_vec())
        }
        Err(e) => Err(e),
    }
}

/// The writer's state: the open segment and the chain's head.
pub struct Store {
    /// Held locked while the store is open: one writer per directory.
    _lock: File,
    dir: PathBuf,
    key: Vec<u8>,
    config: AuditConfig,
    segment: File,
    segment_first: u64,
    segment_bytes: u64,
    /// The next record's `seq`.
    next: u64,
    /// The last record's hash.
    head: String,
    /// The last checkpoint's `mac`.
    last_mac: String,
    /// Records since the last checkpoint, and when it was.
    since_checkpoint: u64,
    checkpointed: Instant,
}

impl Store {
    /// Opens (or creates) the store of `config.dir` and finds where its
    /// chain ends.
    pub fn open(config: &AuditConfig) -> std::io::Result<Store> {
        use std::os::unix::fs::PermissionsExt;
        let dir = config.dir.clone();
        std::fs::create_dir_all(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let lock = open_append(&dir.join(LOCK_FILE))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
            |_| {
                std::io::Error::other(
                    "another agentvfs process writes this audit log (one writer per directory)",
                )
            },
        )?;
        let key = key(&dir)?;
        let (mut next, mut head) = match std::fs::read_to_string(dir.join(ANCHOR_FILE)) {
            Ok(text) => {
                let anchor: Anchor = serde_json::from_str(&text).map_err(std::io::Error::other)?;
                (anchor.seq + 1, anchor.head)
            }
            Err(_) => (1, GENESIS.to_owned()),
        };
        let files = segments(&dir)?;
        for (first, path) in files.iter().rev() {
            if let Some(last) = complete_lines(path)?.last() {
                let record: Record = serde_json::from_str(last).map_err(std::io::Error::other)?;
                next = record.seq + 1;
                head = chain::stated_hash(last)
                    .ok_or_else(|| std::io::Error::other("the last record is not sealed"))?;
                break;
            }
            next = next.max(*first);
        }
        let segment_first = files.last().map_or(next, |(first, _)| *first);
        let path = segment_path(&dir, segment_first);
        let segment = open_append(&path)?;
        let segment_bytes = segment.metadata()?.len();
        let checkpoints = dir.join(CHECKPOINTS_FILE);
        let last_mac = match checkpoints.exists() {
            true => complete_lines(&checkpoints)?
                .last()
                .and_then(|line| serde_json::from_str::<Checkpoint>(line).ok())
                .map_or(String::new(), |c| c.mac),
            false => String::new(),
        };
        Ok(Store {
            _lock: lock,
            dir,
            key,
            config: config.clone(),
            segment,
            segment_first,
            segment_bytes,
            next,
            head,
            last_mac,
            since_checkpoint: 0,
            checkpointed: Instant::now(),
        })
    }

    /// Writes the records of `inlets` into `store` until every sender is
    /// gone. An idle writer wakes for the first record of either kind or a
    /// nudge; a busy one only for a record its caller waits on,
    /// collecting the others every [`PAUSE`]. It also signs the
    /// checkpoints and rolls the segments over that appends made due.
    pub fn run(store: Shared, inlets: Inlets) {
        // Read once: a guard in the select below would be held while it waits.
        let interval = lock(&store).config.checkpoint_interval;
        loop {
            let first = crossbeam_channel::select! {
                recv(inlets.waited) -> job => job,
                recv(inlets.queued) -> job => job,
                recv(inlets.nudge) -> _ => {
                    lock(&store).settle(false);
                    continue;
                }
                default(interval) => {
                    lock(&store).checkpoint_if_due(true);
                    continue;
                }
            };
            let Ok(first) = first else {
                return lock(&store).close(&inlets);
            };
            let mut batch = vec![first];
            loop {
                batch.extend(inlets.waited.try_iter().take(MAX_BATCH - batch.len()));
                batch.extend(inlets.queued.try_iter().take(MAX_BATCH - batch.len()));
                lock(&store).write_and_tell(std::mem::take(&mut batch));
                match inlets.waited.recv_timeout(PAUSE) {
                    Ok(job) => batch.push(job),
                    Err(RecvTimeoutError::Timeout) if inlets.queued.is_empty() => break,
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return lock(&store).close(&inlets),
                }
            }
        }
    }

    /// Seals and writes a change's `record` on the caller's thread: handed
    /// to the operating system when this returns, without waiting for the
    /// writer thread's turn (that wait held audited Writes at 0.79× of
    /// unaudited ones; 0.88× without, docs/performance.md). True when a
    /// checkpoint or a new segment is due, which the caller leaves to the
    /// writer (a nudge): no caller syncs.
    pub fn append(store: &Mutex<Store>, record: Record) -> (Result<(), String>, bool) {
        let mut store = lock(store);
        let mut job = [Job {
            record,
            durable: None,
        }];
        let written = store.append_batch(&mut job);
        (written, store.due())
    }

    /// Writes what is still queued and signs the last checkpoint: every
    /// sender is gone.
    fn close(&mut self, inlets: &Inlets) {
        let mut left: Vec<Job> = inlets
            .waited
            .try_iter()
            .chain(inlets.queued.try_iter())
            .collect();
        while !left.is_empty() {
            let rest = left.split_off(left.len().min(MAX_BATCH));
            self.write_and_tell(left);
            left = rest;
        }
        self.settle(true);
    }

    /// Writes `batch` and tells those who wait how it went.
    fn write_and_tell(&mut self, mut batch: Vec<Job>) {
        let written = self.write_batch(&mut batch);
        for job in batch {
            if let Some(durable) = job.durable {
                let _ = durable.send(written.clone());
            }
        }
        if let Err(e) = &written {
            tracing::error!(error = %e, "cannot write the audit log");
        }
    }

    /// Appends `batch`, then signs a checkpoint when one is due and rolls
    /// the segment over when it is full.
    fn write_batch(&mut self, batch: &mut [Job]) -> Result<(), String> {
        let written = self.append_batch(batch);
        self.settle(false);
        written
    }

    /// True when a checkpoint or a new segment is due.
    fn due(&self) -> bool {
        self.since_checkpoint >= self.config.checkpoint_records
            || self.segment_bytes >= self.config.segment_bytes
    }

    /// Signs a checkpoint when one is due (`timer`: the interval passed)
    /// and rolls the segment over when it is full.
    fn settle(&mut self, timer: bool) {
        self.checkpoint_if_due(timer);
        if self.segment_bytes >= self.config.segment_bytes
            && let Err(e) = self.roll_over()
        {
            tracing::error!(error = %e, "cannot start a new audit segment");
        }
    }

    /// Seals and appends `batch`, synced when a change's record asks for it
    /// under `[audit] sync`.
    fn append_batch(&mut self, batch: &mut [Job]) -> Result<(), String> {
        let mut text = String::new();
        let (next, head) = (self.next, self.head.clone());
        for job in batch.iter_mut() {
            job.record.seq = self.next;
            job.record.prev = std::mem::take(&mut self.head);
            let (line, hash) = chain::seal(&mut job.record);
            text.push_str(&line);
            text.push('\n');
            self.head = hash;
            self.next += 1;
        }
        let sync = self.config.sync && batch.iter().any(|j| j.durable.is_some());
        let written = self
            .segment
            .write_all(text.as_bytes())
            .and_then(|()| match sync {
                true => self.segment.sync_data(),
                false => Ok(()),
            });
        if let Err(e) = written {
            // Nothing of the batch counts: the chain goes on from before it.
            let _ = self.segment.set_len(self.segment_bytes);
            let _ = self.segment.seek(SeekFrom::End(0));
            (self.next, self.head) = (next, head);
            return Err(format!("audit log {}: {e}", self.dir.display()));
        }
        self.segment_bytes += text.len() as u64;
        self.since_checkpoint += batch.len() as u64;
        Ok(())
    }

    /// Signs a checkpoint of the head when `checkpoint_records` records or
    /// (`timer`) `checkpoint_interval` passed since the last one and some
    /// record came since.
    fn checkpoint_if_due(&mut self, timer: bool) {
        let due = self.since_checkpoint >= self.config.checkpoint_records
            || (self.since_checkpoint > 0
                && (timer || self.checkpointed.elapsed() >= self.config.checkpoint_interval));
        if !due {
            return;
        }
        let checkpoint = Checkpoint::new(&self.key, self.next - 1, &self.head, &self.last_mac);
        let line = serde_json::to_string(&checkpoint).expect("a checkpoint serializes") + "\n";
        let written = self.segment.sync_data().and_then(|()| {
            let mut file = open_append(&self.dir.join(CHECKPOINTS_FILE))?;
            file.write_all(line.as_bytes())?;
            file.sync_data()
        });
        match written {
            Ok(()) => {
                self.last_mac = checkpoint.mac;
                self.since_checkpoint = 0;
                self.checkpointed = Instant::now();
            }
            Err(e) => tracing::error!(error = %e, "cannot write an audit checkpoint"),
        }
    }

    /// Closes the full segment (synced) and opens the next, then drops
    /// what retention no longer keeps.
    fn roll_over(&mut self) -> std::io::Result<()> {
        self.segment.sync_all()?;
        self.segment_first = self.next;
        self.segment = open_append(&segment_path(&self.dir, self.next))?;
        self.segment_bytes = 0;
        let dir = std::fs::File::open(&self.dir)?;
        dir.sync_all()?;
        self.retain()
    }

    /// Drops the oldest whole segments (never the open one) while the
    /// store is over `retention_bytes` or they are older than
    /// `retention_age`, writing first the signed anchor where the kept
    /// chain starts, so verification still passes.
    fn retain(&mut self) -> std::io::Result<()> {
        let files = segments(&self.dir)?;
        let mut sizes: Vec<(PathBuf, u64, SystemTime)> = Vec::new();
        for (first, path) in &files {
            if *first == self.segment_first {
                continue;
            }
            let meta = std::fs::metadata(path)?;
            sizes.push((path.clone(), meta.len(), meta.modified()?));
        }
        let mut total: u64 = sizes.iter().map(|s| s.1).sum::<u64>() + self.segment_bytes;
        for (path, size, modified) in sizes {
            let too_big = self.config.retention_bytes.is_some_and(|max| total > max);
            let too_old = self
                .config
                .retention_age
                .is_some_and(|age| modified.elapsed().unwrap_or(Duration::ZERO) > age);
            if !too_big && !too_old {
                break;
            }
            let lines = complete_lines(&path)?;
            if let Some(last) = lines.last() {
                let record: Record = serde_json::from_str(last).map_err(std::io::Error::other)?;
                let head = chain::stated_hash(last)
                    .ok_or_else(|| std::io::Error::other("the last record is not sealed"))?;
                let anchor = Anchor::new(&self.key, record.seq, &head);
                let text = serde_json::to_vec(&anchor).map_err(std::io::Error::other)?;
                crate::private_file::write(&self.dir.join(ANCHOR_FILE), &[&text])?;
            }
            std::fs::remove_file(&path)?;
            total -= size;
            tracing::info!(segment = %path.display(), "audit segment expired");
        }
        Ok(())
    }
}

/// `path` opened for appending (created 0600).
fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
}
