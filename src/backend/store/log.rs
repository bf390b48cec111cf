//! The Store's change log: how changes are numbered and kept, and the
//! format of a `log` value.
//!
//! Invariants:
//! - changes are numbered across namespaces, in commit order, under one
//!   mutex held while their batch is written, and each record is in the
//!   batch of its change: an acknowledged write always has its record, and
//!   a record never exists without its write, across `kill -9`;
//! - records older than the last `changes` of the store ([`Keep`]) are
//!   dropped in the batch that passes the bound by an eighth (at least 64);
//!   the head and the trim point are `max` merges, so they never go back;
//! - a read of the log takes its records and its bounds from one snapshot.
//!
//! Layout of a value (big-endian): `format (1) | kind (1) | version (8) |
//! size (8) | time ns (8) | operation (1) | principal length (1) |
//! principal | handle length (1) | handle | key length (2) | relative key |
//! moved (1) [| key length (2) | the move's other relative key]`. The change
//! number is the key's, not the value's. Keys are relative to the mount, so
//! a store keeps its log when it is mounted elsewhere.
//!
//! Errors: a value that does not decode is `Internal`, never guessed at.
//!
//! [`Keep`]: crate::backend::Keep

use super::keys::{self, NsId};
use super::{CF_LOG, LOG_HEAD_KEY, LOG_TRIMMED_KEY, StoreEngine, bounded, db_error, decode_u64};
use crate::backend::ordered::{LogRead, Logged};
use crate::backend::record::nanos;
use crate::change::{ChangeKind, LogBounds, Origin};
use crate::error::{Error, Result};
use crate::scope::Scope;
use rocksdb::{DB, SnapshotWithThreadMode, WriteBatch};
use std::time::{Duration, UNIX_EPOCH};

/// Format byte of a log value.
const FORMAT: u8 = 1;

fn put_key(out: &mut Vec<u8>, rel: &[u8]) {
    // Relative keys are at most a path's 4,096 bytes (crate::path).
    out.extend_from_slice(&(rel.len() as u16).to_be_bytes());
    out.extend_from_slice(rel);
}

/// Encodes a change (its number goes into the key).
pub fn encode(change: &Logged) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + change.rel.len());
    out.push(FORMAT);
    out.push(change.kind.code());
    for n in [change.version, change.size, nanos(change.time)] {
        out.extend_from_slice(&n.to_be_bytes());
    }
    change.origin.encode_into(&mut out);
    put_key(&mut out, &change.rel);
    match &change.moved {
        Some(moved) => {
            out.push(1);
            put_key(&mut out, moved);
        }
        None => out.push(0),
    }
    out
}

/// A reader over one value, failing on anything short or unknown.
struct Reader<'v> {
    rest: &'v [u8],
    seq: u64,
}

impl<'v> Reader<'v> {
    fn corrupt(&self) -> Error {
        Error::Internal(format!("corrupt Store change log record {}", self.seq))
    }

    fn take(&mut self, n: usize) -> Result<&'v [u8]> {
        if self.rest.len() < n {
            return Err(self.corrupt());
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn byte(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn word(&mut self) -> Result<u64> {
        let mut w = [0; 8];
        w.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(w))
    }

    fn origin(&mut self) -> Result<Origin> {
        let (origin, len) = Origin::decode_prefix(self.rest).ok_or_else(|| self.corrupt())?;
        self.take(len)?;
        Ok(origin)
    }

    fn key(&mut self) -> Result<Vec<u8>> {
        let len = self.take(2)?;
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        Ok(self.take(len)?.to_vec())
    }
}

/// Decodes the value of change `seq`.
pub fn decode(seq: u64, value: &[u8]) -> Result<Logged> {
    let mut r = Reader { rest: value, seq };
    if r.byte()? != FORMAT {
        return Err(r.corrupt());
    }
    let kind = ChangeKind::from_code(r.byte()?).ok_or_else(|| r.corrupt())?;
    let (version, size, time) = (r.word()?, r.word()?, r.word()?);
    let origin = r.origin()?;
    let rel = r.key()?;
    let moved = match r.byte()? {
        0 => None,
        _ => Some(r.key()?),
    };
    Ok(Logged {
        seq,
        rel,
        kind,
        version,
        size,
        time: UNIX_EPOCH + Duration::from_nanos(time),
        origin,
        moved,
    })
}

impl StoreEngine {
    /// Reads the counter at `key` through `snapshot`.
    fn counter_at(&self, snapshot: &SnapshotWithThreadMode<'_, DB>, key: &[u8]) -> Result<u64> {
        Ok(snapshot
            .get(key)
            .map_err(db_error("read a counter"))?
            .as_deref()
            .and_then(decode_u64)
            .unwrap_or(0))
    }

    /// The log's bounds as `snapshot` sees them.
    pub(super) fn log_bounds_at(
        &self,
        snapshot: &SnapshotWithThreadMode<'_, DB>,
    ) -> Result<LogBounds> {
        Ok(LogBounds {
            epoch: self.log_epoch,
            trimmed: self.counter_at(snapshot, LOG_TRIMMED_KEY)?,
            head: self.counter_at(snapshot, LOG_HEAD_KEY)?,
        })
    }

    /// Numbers `logged` (changes of namespace `ns`) and adds their records
    /// (and, past the log's bound, the dropping of its oldest ones) to
    /// `batch`, then writes it, all under the log's mutex: numbers follow
    /// commit order.
    pub(super) fn write_logged(
        &self,
        ns: NsId,
        mut batch: WriteBatch,
        logged: Vec<Logged>,
    ) -> Result<()> {
        let log_cf = self.cf(CF_LOG)?;
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let mut head = log.head;
        for mut change in logged {
            head += 1;
            change.seq = head;
            batch.put_cf(log_cf, keys::log(ns, head), encode(&change));
        }
        batch.merge(LOG_HEAD_KEY, head.to_be_bytes());
        let keep = self.options.keep.changes as u64;
        let slack = (keep / 8).max(64);
        let cut = (head > log.trimmed + keep + slack).then(|| head - keep);
        if let Some(cut) = cut {
            let namespaces = self.namespaces.read().unwrap_or_else(|p| p.into_inner());
            for ns in namespaces.values() {
                let end = keys::log(*ns, cut.saturating_add(1));
                batch.delete_range_cf(log_cf, keys::log(*ns, 0), end);
            }
            batch.merge(LOG_TRIMMED_KEY, cut.to_be_bytes());
        }
        self.db
            .write_opt(batch, &self.write_options)
            .map_err(db_error("write"))?;
        log.head = head;
        if let Some(cut) = cut {
            log.trimmed = cut;
            tracing::debug!(cut, head, "trimmed the store's change log");
        }
        drop(log);
        self.counters.changed();
        Ok(())
    }

    /// The change log of `scope`'s namespace from just after `after`, at
    /// most `max` changes, with its bounds, all from one snapshot (see
    /// `Engine::read_log`).
    pub(super) fn read_changes(
        &self,
        scope: &Scope,
        after: Option<u64>,
        max: usize,
    ) -> Result<LogRead> {
        let snapshot = self.db.snapshot();
        let mut read = LogRead {
            bounds: self.log_bounds_at(&snapshot)?,
            entries: Vec::new(),
        };
        let LogBounds { trimmed, head, .. } = read.bounds;
        let Some(ns) = self.namespace(scope)? else {
            return Ok(read);
        };
        let after = after.unwrap_or(trimmed).max(trimmed);
        if max == 0 || after >= head {
            return Ok(read);
        }
        let lo = keys::log(ns, after + 1);
        let hi = keys::log(ns, head).to_vec();
        let mut opts = bounded(lo.to_vec(), [hi.as_slice(), &[0]].concat());
        opts.set_snapshot(&snapshot);
        let mut it = self.db.raw_iterator_cf_opt(self.cf(CF_LOG)?, opts);
        it.seek(lo);
        while let Some((key, value)) = it.item() {
            let seq = keys::trailing_u64(key);
            read.entries.push(decode(seq, value)?);
            if read.entries.len() == max {
                break;
            }
            it.next();
        }
        it.status().map_err(db_error("read the change log"))?;
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::Operation;

    #[test]
    fn changes_round_trip_and_corruption_is_an_error() {
        let change = Logged {
            seq: 12,
            rel: b"notes\0a.md".to_vec(),
            kind: ChangeKind::Created,
            version: 40,
            size: 7,
            time: UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789),
            origin: Origin {
                principal: "agent".into(),
                handle: "h-1".into(),
                session: "s".into(),
                label: "turn/1".into(),
                changeset: "cs-9".into(),
                operation: Operation::Move,
            },
            moved: Some(b"old".to_vec()),
        };
        let value = encode(&change);
        assert_eq!(decode(12, &value).unwrap(), change);
        for cut in 0..value.len() {
            assert!(decode(12, &value[..cut]).is_err(), "cut at {cut}");
        }
    }
}
