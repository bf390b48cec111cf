//! One open file of the mount: a snapshot of one version, filled from a
//! single ReadBytes stream as reads need it, the writes made through the
//! handle on top, and the commit of a changed file as one WriteBytes
//! (docs/mount.md § Consistency).

use super::remote::{CALL_TIMEOUT, Failure, Remote};
use super::staging::{Budget, Staging};
use crate::pb;
use fuser::Errno;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;
use tokio::sync::watch;

/// Bytes per WriteBytes message of a commit.
const UPLOAD_CHUNK_BYTES: u64 = 1 << 20;

/// How far the snapshot is read.
#[derive(Clone, Debug)]
enum Fill {
    /// Not asked for yet.
    Idle,
    /// This many bytes are in.
    Filling(u64),
    /// All of it is in.
    Done,
    /// The read failed.
    Failed(Errno),
}

#[derive(Debug)]
struct State {
    staging: Staging,
    /// The version the content is based on (0: a new file; `None`: not
    /// known until the snapshot's first chunk arrives).
    base: Option<u64>,
    /// Changed since opened or last committed.
    dirty: bool,
    /// Unlinked or replaced through the mount: never committed again.
    unlinked: bool,
    /// When the content last changed.
    modified: SystemTime,
    /// The executable bit the handle shows while it holds changes: the
    /// file's as read, or as a chmod through the mount set it.
    executable: bool,
    /// A bit the next commit sets (a new file's, or a chmod made while the
    /// handle held changes); `None` keeps the server's.
    set_executable: Option<bool>,
}

/// What a commit did.
#[derive(Debug, PartialEq, Eq)]
pub enum Committed {
    /// Nothing to commit.
    Clean,
    /// A new version of the file.
    Version(u64),
}

/// An open file.
#[derive(Debug)]
pub struct OpenFile {
    /// Its inode number.
    pub ino: u64,
    state: Mutex<State>,
    fill: watch::Sender<Fill>,
    /// Serializes writes, truncations and commits of this handle.
    op: tokio::sync::Mutex<()>,
}

impl OpenFile {
    fn with(
        ino: u64,
        staging: Staging,
        (base, dirty): (Option<u64>, bool),
        (executable, set_executable): (bool, Option<bool>),
        fill: Fill,
    ) -> Arc<Self> {
        Arc::new(OpenFile {
            ino,
            state: Mutex::new(State {
                staging,
                base,
                dirty,
                unlinked: false,
                modified: SystemTime::now(),
                executable,
                set_executable,
            }),
            fill: watch::Sender::new(fill),
            op: tokio::sync::Mutex::new(()),
        })
    }

    /// An existing file, read lazily.
    pub fn existing(ino: u64, budget: Arc<Budget>) -> Arc<Self> {
        let staging = Staging::new(budget);
        OpenFile::with(ino, staging, (None, false), (false, None), Fill::Idle)
    }

    /// An existing file at `info`'s version opened with O_TRUNC: empty and
    /// changed, committed over that version.
    pub fn truncated(ino: u64, info: &pb::FileInfo, budget: Arc<Budget>) -> Arc<Self> {
        let (staging, base) = (Staging::new(budget), Some(info.version));
        OpenFile::with(
            ino,
            staging,
            (base, true),
            (info.executable, None),
            Fill::Done,
        )
    }

    /// A file created through the mount with the executable bit
    /// `executable`: empty, committed as new.
    pub fn created(ino: u64, executable: bool, budget: Arc<Budget>) -> Arc<Self> {
        let staging = Staging::new(budget);
        let bit = (executable, Some(executable));
        OpenFile::with(ino, staging, (Some(0), true), bit, Fill::Done)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The size, time and executable bit to report while the handle holds
    /// changes the server has not seen yet (`None` when the server's are
    /// current).
    pub fn pending_attr(&self) -> Option<(u64, SystemTime, bool)> {
        let state = self.state();
        (state.dirty && !state.unlinked)
            .then(|| (state.staging.len(), state.modified, state.executable))
    }

    /// The size, time and executable bit of the content the handle holds
    /// whole (its snapshot read to the end, or its changes): what an
    /// unlinked file's handle reports.
    pub fn held_attr(&self) -> Option<(u64, SystemTime, bool)> {
        let done = matches!(*self.fill.borrow(), Fill::Done);
        let state = self.state();
        (done || state.dirty).then(|| (state.staging.len(), state.modified, state.executable))
    }

    /// A chmod through the mount: a handle holding changes takes the bit
    /// into its next commit and answers true; otherwise false, and the
    /// mount sets the bit on the server.
    pub fn chmod(&self, executable: bool) -> bool {
        let mut state = self.state();
        if !state.dirty || state.unlinked {
            return false;
        }
        state.executable = executable;
        state.set_executable = Some(executable);
        true
    }

    /// True for a file created through the mount and not yet committed.
    pub fn is_new(&self) -> bool {
        let state = self.state();
        state.base == Some(0) && !state.unlinked
    }

    /// The version the handle's content is based on, once known.
    pub fn base(&self) -> Option<u64> {
        self.state().base
    }

    /// The file's content went from version `from` to version `to` (a Move,
    /// or a change of its executable bit, gives it a new one): a handle
    /// based on `from` is now based on `to`.
    pub fn renumbered(&self, from: u64, to: u64) {
        let mut state = self.state();
        if state.base == Some(from) {
            state.base = Some(to);
        }
    }

    /// Marks the file unlinked: its handles keep reading, nothing commits.
    pub fn unlink(&self) {
        self.state().unlinked = true;
    }

    /// Waits until the snapshot holds `upto` bytes (all of it when
    /// `None`), starting its read from `path` when nothing started it.
    pub async fn fill(
        self: &Arc<Self>,
        remote: &Remote,
        path: &str,
        upto: Option<u64>,
    ) -> Result<(), Failure> {
        let start = self.fill.send_if_modified(|fill| match fill {
            Fill::Idle => {
                *fill = Fill::Filling(0);
                true
            }
            _ => false,
        });
        if start {
            let stream = remote.read(path, None).await;
            let this = Arc::clone(self);
            tokio::spawn(async move {
                let end = match stream {
                    Ok(stream) => this.drain(stream).await,
                    Err(f) => Fill::Failed(f.errno),
                };
                this.fill.send_replace(end);
            });
        }
        let mut progress = self.fill.subscribe();
        let reached = progress
            .wait_for(|fill| match fill {
                Fill::Filling(n) => upto.is_some_and(|u| *n >= u),
                _ => true,
            })
            .await
            .map_err(|_| Failure::local(Errno::EIO, "the snapshot's reader ended"))?
            .clone();
        match reached {
            Fill::Failed(errno) => Err(Failure::local(errno, format!("reading {path} failed"))),
            _ => Ok(()),
        }
    }

    /// Takes the chunks of one ReadBytes stream into the staging.
    async fn drain(&self, mut stream: tonic::Streaming<pb::ReadBytesResponse>) -> Fill {
        loop {
            let message = match tokio::time::timeout(CALL_TIMEOUT, stream.message()).await {
                Ok(Ok(Some(message))) => message,
                Ok(Ok(None)) => return Fill::Done,
                Ok(Err(status)) => return Fill::Failed(Failure::from(status).errno),
                Err(_) => return Fill::Failed(Errno::EIO),
            };
            let mut state = self.state();
            if let Some(info) = &message.info {
                state.base = Some(info.version);
                state.executable = state.set_executable.unwrap_or(info.executable);
            }
            if let Err(err) = state.staging.append(&message.data) {
                tracing::warn!("mount: cannot stage a read: {err}");
                return Fill::Failed(Errno::EIO);
            }
            let len = state.staging.len();
            drop(state);
            self.fill.send_replace(Fill::Filling(len));
        }
    }

    /// Up to `size` bytes from `offset` of the snapshot (with this
    /// handle's writes).
    pub async fn read(
        self: &Arc<Self>,
        remote: &Remote,
        path: &str,
        offset: u64,
        size: u64,
    ) -> Result<Vec<u8>, Failure> {
        self.fill(remote, path, Some(offset.saturating_add(size)))
            .await?;
        Ok(self.state().staging.read_at(offset, size)?)
    }

    /// Writes `data` at `offset`.
    pub async fn write(
        self: &Arc<Self>,
        remote: &Remote,
        path: &str,
        offset: u64,
        data: &[u8],
    ) -> Result<(), Failure> {
        let _op = self.op.lock().await;
        self.fill(remote, path, None).await?;
        let mut state = self.state();
        state.staging.write_at(offset, data)?;
        state.dirty = true;
        state.modified = SystemTime::now();
        Ok(())
    }

    /// Cuts or extends the content to `len` bytes.
    pub async fn truncate(
        self: &Arc<Self>,
        remote: &Remote,
        path: &str,
        len: u64,
    ) -> Result<(), Failure> {
        let _op = self.op.lock().await;
        // Emptying needs none of the old bytes, only the version they had.
        if len > 0 || !self.empty_without_reading(remote, path).await? {
            self.fill(remote, path, None).await?;
        }
        let mut state = self.state();
        state.staging.set_len(len)?;
        state.dirty = true;
        state.modified = SystemTime::now();
        Ok(())
    }

    /// Makes an unread snapshot the empty content of the current version
    /// (found with Stat); false when the read had already started.
    async fn empty_without_reading(&self, remote: &Remote, path: &str) -> Result<bool, Failure> {
        if !matches!(*self.fill.borrow(), Fill::Idle) {
            return Ok(false);
        }
        let info = remote.stat(path).await?;
        let started = !self.fill.send_if_modified(|fill| match fill {
            Fill::Idle => {
                *fill = Fill::Done;
                true
            }
            _ => false,
        });
        if !started {
            let mut state = self.state();
            state.base = Some(info.version);
            state.executable = state.set_executable.unwrap_or(info.executable);
        }
        Ok(!started)
    }

    /// Reads the rest of the snapshot, so the handle keeps its bytes when
    /// the file is unlinked or replaced.
    pub async fn keep(self: &Arc<Self>, remote: &Remote, path: &str) -> Result<(), Failure> {
        self.fill(remote, path, None).await
    }

    /// Commits a changed file to `path` as one WriteBytes: over the
    /// version it is based on, or over whatever is there when `overwrite`.
    /// A conflict fails with EIO, keeps the other writer's content and
    /// drops this handle's changes.
    pub async fn commit(
        self: &Arc<Self>,
        remote: &Remote,
        path: &str,
        overwrite: bool,
    ) -> Result<Committed, Failure> {
        let _op = self.op.lock().await;
        let (base, size, executable) = {
            let state = self.state();
            if !state.dirty || state.unlinked {
                return Ok(Committed::Clean);
            }
            (state.base, state.staging.len(), state.set_executable)
        };
        let if_version = if overwrite { None } else { base };
        let this = Arc::clone(self);
        let chunks = futures_util::stream::unfold(0u64, move |offset| {
            let read = this.state().staging.read_at(offset, UPLOAD_CHUNK_BYTES);
            async move {
                match read {
                    Ok(data) if data.is_empty() => None,
                    Ok(data) => {
                        let next = offset + data.len() as u64;
                        let kind = pb::write_bytes_request::Kind::Data(data);
                        Some((pb::WriteBytesRequest { kind: Some(kind) }, next))
                    }
                    // Never end a stream short: a stalled upload times out
                    // and the server commits nothing.
                    Err(err) => {
                        tracing::warn!("mount: cannot read the staged content: {err}");
                        std::future::pending().await
                    }
                }
            }
        });
        match remote
            .write(path, (if_version, executable), size, chunks)
            .await
        {
            Ok(written) => {
                let mut state = self.state();
                state.base = Some(written.version);
                state.dirty = false;
                state.set_executable = None;
                Ok(Committed::Version(written.version))
            }
            Err(failure) => {
                if let Some(theirs) = failure.conflict {
                    tracing::error!(
                        "mount: conflict on {path}: opened at version {}, the server has version \
                         {theirs}; the other writer's content is kept, this handle's changes are dropped",
                        base.unwrap_or(0)
                    );
                    self.state().dirty = false;
                }
                Err(failure)
            }
        }
    }
}
