//! Changes on the State tier: how the steps the ordered tier stages (put,
//! relocate, release, drop, log) become one [`StateBatch`], and how it
//! applies.
//!
//! Invariants:
//! - a batch applies at once under the session's lock, a whole Move
//!   included: a reader sees a change entirely or not at all;
//! - the memory bound is checked before anything applies (`reserve`, with
//!   what the batch adds and what it frees): a change beyond it is
//!   `TooLarge` and leaves the session as it was;
//! - a replaced or deleted version moves to the session's past versions
//!   with its content shared, not copied, and counts as it did;
//! - change-log records are numbered in commit order as the batch applies.

use super::space::Bounds;
use super::{FileRecord, StateSpace, log_cost};
use crate::backend::ChunkReader;
use crate::backend::ordered::{Content, Logged, Space, Stamp};
use crate::change::Origin;
use crate::error::Result;
use crate::path::VfsPath;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::SystemTime;

/// A change of a session's map, applied at once under its lock.
#[derive(Default)]
pub struct StateBatch {
    pub(super) steps: Vec<Step>,
    /// What the records stored by the change cost.
    pub(super) added: u64,
    /// What the records it removes cost.
    pub(super) freed: u64,
    /// Change-log records, numbered as the batch applies.
    pub(super) logged: Vec<Logged>,
}

pub(super) enum Step {
    Put(Arc<FileRecord>),
    Drop(Vec<u8>),
    DropBelow(Vec<u8>),
    /// Keep a record among its key's past versions.
    Retire(Arc<FileRecord>),
    /// Drop these past versions of a key.
    Forget(Vec<u8>, Vec<u64>),
}

impl Space for StateSpace<'_> {
    type Batch = StateBatch;
    type Upload = Infallible;

    fn read(&self, _path: &VfsPath, rel: &[u8]) -> Result<Option<(Arc<FileRecord>, Vec<u8>)>> {
        Ok(self
            .data
            .files
            .get(rel)
            .map(|file| (file.clone(), file.data.to_vec())))
    }

    /// The file's pieces cut from its shared content as they are asked for:
    /// a download holds one piece, never a copy of the whole file.
    fn read_chunks(
        &self,
        _path: &VfsPath,
        rel: &[u8],
        max_chunk: usize,
    ) -> Result<Option<(Arc<FileRecord>, ChunkReader)>> {
        Ok(self.data.files.get(rel).map(|file| {
            let (data, max) = (file.data.clone(), max_chunk.max(1));
            let mut at = 0;
            // One piece, even empty, as `split_chunks` gives.
            let pieces = std::iter::from_fn(move || {
                if at > 0 && at >= data.len() {
                    return None;
                }
                let end = data.len().min(at + max);
                let piece = data[at..end].to_vec();
                at = end.max(1);
                Some(Ok(piece))
            });
            (file.clone(), Box::new(pieces) as ChunkReader)
        }))
    }

    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        batch: &mut StateBatch,
        path: &VfsPath,
        rel: &[u8],
        old: Option<&Arc<FileRecord>>,
        content: Content<'_, Infallible>,
        stamp: Stamp,
        origin: &Origin,
    ) -> Result<u64> {
        let data = match content {
            Content::Bytes(data) => data,
            Content::Uploaded(upload) => match *upload {},
        };
        Ok(stage_new(batch, path, rel, old, data.into(), stamp, origin))
    }

    /// Shares the source's content: the copy's record holds the same
    /// `Arc<[u8]>`, so no byte is copied (it still counts against
    /// `max_total_bytes` as a file of its own, which it is once either
    /// changes).
    #[allow(clippy::too_many_arguments)]
    fn put_copy(
        &self,
        batch: &mut StateBatch,
        path: &VfsPath,
        rel: &[u8],
        old: Option<&Arc<FileRecord>>,
        (_, _, file): (&VfsPath, &[u8], &Arc<FileRecord>),
        version: u64,
        origin: &Origin,
    ) -> Result<u64> {
        let stamp = Stamp {
            version,
            executable: file.executable,
        };
        Ok(stage_new(
            batch,
            path,
            rel,
            old,
            file.data.clone(),
            stamp,
            origin,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn relocate(
        &self,
        batch: &mut StateBatch,
        _from: &[u8],
        file: &Arc<FileRecord>,
        to: &VfsPath,
        to_rel: &[u8],
        version: u64,
        origin: &Origin,
    ) -> Result<()> {
        let record = FileRecord {
            path: to.clone(),
            key: to_rel.to_vec(),
            data: file.data.clone(),
            created: file.created,
            modified: file.modified,
            version,
            origin: origin.clone(),
            deleted: false,
            executable: file.executable,
        };
        // The content is shared, but the path's copies change length.
        batch.added += record.cost();
        batch.freed += file.cost();
        batch.steps.push(Step::Put(Arc::new(record)));
        Ok(())
    }

    fn release(&self, batch: &mut StateBatch, file: &Arc<FileRecord>) -> Result<()> {
        batch.freed += file.cost();
        Ok(())
    }

    fn record(&self, batch: &mut StateBatch, change: Logged) {
        batch.added += log_cost(&change);
        batch.logged.push(change);
    }

    fn drop_key(&self, batch: &mut StateBatch, rel: &[u8]) {
        batch.steps.push(Step::Drop(rel.to_vec()));
    }

    fn drop_below(&self, batch: &mut StateBatch, rel: &[u8]) {
        batch.steps.push(Step::DropBelow(rel.to_vec()));
    }

    fn apply(&mut self, batch: StateBatch) -> Result<()> {
        let StateBatch {
            steps,
            added,
            mut freed,
            logged,
        } = batch;
        // Records the log drops to make room count as freed by the change.
        let capacity = self.engine.keep.changes;
        let log = &self.data.log;
        let dropped = (log.len() + logged.len()).saturating_sub(capacity);
        let from_log = dropped.min(log.len());
        let from_batch = dropped - from_log;
        freed += log.oldest(from_log).map(log_cost).sum::<u64>();
        freed += logged.iter().take(from_batch).map(log_cost).sum::<u64>();
        self.engine.reserve(added, freed)?;
        self.data.bytes = (self.data.bytes + added).saturating_sub(freed);
        for step in steps {
            match step {
                Step::Put(record) => self.data.put_file(record),
                Step::Drop(key) => self.data.drop_file(&key),
                Step::DropBelow(rel) => {
                    let below = Bounds::below(&rel);
                    let doomed: Vec<Vec<u8>> = self
                        .data
                        .files
                        .range::<_, [u8]>(below.range())
                        .map(|(key, _)| key.clone())
                        .collect();
                    for key in doomed {
                        self.data.drop_file(&key);
                    }
                }
                Step::Retire(record) => {
                    self.data
                        .past
                        .entry(record.key.clone())
                        .or_default()
                        .push(record);
                }
                Step::Forget(rel, versions) => {
                    if let Some(past) = self.data.past.get_mut(&rel) {
                        past.retain(|r| !versions.contains(&r.version));
                        if past.is_empty() {
                            self.data.past.remove(&rel);
                        }
                    }
                }
            }
        }
        if !logged.is_empty() {
            let log = &mut self.data.log;
            for record in logged {
                log.push(|seq| Logged { seq, ..record });
            }
            log.trim(capacity);
            self.engine.counters.changed();
        }
        Ok(())
    }
}

/// Stages a new current record of `rel` (`path`) holding `data`, replacing
/// `old` (whose creation time it keeps); answers its size.
fn stage_new(
    batch: &mut StateBatch,
    path: &VfsPath,
    rel: &[u8],
    old: Option<&Arc<FileRecord>>,
    data: Arc<[u8]>,
    stamp: Stamp,
    origin: &Origin,
) -> u64 {
    let now = SystemTime::now();
    let size = data.len() as u64;
    let record = FileRecord {
        path: path.clone(),
        key: rel.to_vec(),
        data,
        created: old.map_or(now, |old| old.created),
        modified: now,
        version: stamp.version,
        origin: origin.clone(),
        deleted: false,
        executable: stamp.executable,
    };
    batch.added += record.cost();
    batch.steps.push(Step::Put(Arc::new(record)));
    size
}
