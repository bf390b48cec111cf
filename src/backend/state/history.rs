//! History on the State tier: a session's past versions and tombstones,
//! kept with it under its lock.
//!
//! Invariants:
//! - a key's past versions are oldest first; a retired record is the one
//!   that was current, unchanged (its content shared, not copied);
//! - past versions count against the memory bound as live files do, and
//!   leave it when the retention drops them;
//! - a past version lives as long as its session: a session dropped for
//!   idleness takes its history with it.

use super::write::Step;
use super::{FileRecord, StateBatch, StateSpace};
use crate::backend::ordered::{History, HistoryChange, Past};
use crate::backend::{ChunkReader, split_chunks};
use crate::error::Result;
use crate::history::FileVersion;
use crate::path::VfsPath;
use std::sync::Arc;
use std::time::SystemTime;

impl History for StateSpace<'_> {
    fn past(&self, rel: &[u8]) -> Result<Vec<Past>> {
        let past = self.data.past.get(rel).into_iter().flatten().rev();
        Ok(past
            .map(|r| Past {
                version: r.version,
                time: r.modified,
                content: 0,
            })
            .collect())
    }

    fn set_history(
        &self,
        batch: &mut StateBatch,
        path: &VfsPath,
        rel: &[u8],
        change: HistoryChange<'_, Arc<FileRecord>>,
    ) -> Result<()> {
        // The session's map of past versions is what `past` reads, so the
        // list the change keeps follows from these steps.
        if !change.forget.is_empty() {
            let doomed: Vec<u64> = change.forget.iter().map(|p| p.version).collect();
            if let Some(past) = self.data.past.get(rel) {
                for record in past.iter().filter(|r| doomed.contains(&r.version)) {
                    batch.freed += record.cost();
                }
            }
            batch.steps.push(Step::Forget(rel.to_vec(), doomed));
        }
        if let Some(file) = change.retire {
            // Its cost stays counted: the record lives on as a past version.
            batch.steps.push(Step::Retire(file.clone()));
        }
        if let Some((version, origin)) = change.tombstone {
            let now = SystemTime::now();
            let record = FileRecord {
                path: path.clone(),
                key: rel.to_vec(),
                data: Arc::from(&[][..]),
                created: now,
                modified: now,
                version,
                origin: origin.clone(),
                deleted: true,
                executable: false,
            };
            batch.added += record.cost();
            batch.steps.push(Step::Retire(Arc::new(record)));
        }
        Ok(())
    }

    fn versions(&self, _path: &VfsPath, rel: &[u8]) -> Result<Vec<FileVersion>> {
        let current = self.data.files.get(rel).map(|r| r.as_version(true));
        let past = self.data.past.get(rel).into_iter().flatten().rev();
        Ok(current
            .into_iter()
            .chain(past.map(|r| r.as_version(false)))
            .collect())
    }

    fn read_version(
        &self,
        _path: &VfsPath,
        rel: &[u8],
        version: u64,
        max_chunk: usize,
    ) -> Result<Option<(FileVersion, ChunkReader)>> {
        let current = self.data.files.get(rel).filter(|r| r.version == version);
        let found = match current {
            Some(record) => Some((record, true)),
            None => self
                .data
                .past
                .get(rel)
                .and_then(|past| past.iter().find(|r| r.version == version))
                .map(|record| (record, false)),
        };
        Ok(found.map(|(record, current)| {
            (
                record.as_version(current),
                split_chunks(record.data.to_vec(), max_chunk),
            )
        }))
    }
}
