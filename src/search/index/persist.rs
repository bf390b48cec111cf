//! A namespace's index as bytes, so a tier can keep it across restarts
//! (docs/search-index.md § Persistence).
//!
//! Layout (little-endian): `magic "AVIX" (4) | format (1) | CRC-32 of the
//! rest (4) | walked (8) | segment | table present (1) [| path table]`.
//! Integers are 8 bytes, byte strings an 8-byte length then the bytes
//! ([`Bytes`], `codec`). The segment and the path table write and check their own
//! parts (`segment`, `table`).
//!
//! Invariants: [`decode`] never trusts its input: a wrong magic, format or
//! checksum, a short or overlong buffer, or parts that fail their own
//! checks give `Err`, never a panic or a partial index. Where the bytes are
//! kept is the tier's business ([`Keeper`]).

use super::codec::{Bytes, Reader};
use super::segment::Segment;
use super::table::PathTable;
use crate::error::Result;
use std::sync::Arc;

/// The first bytes of a persisted index.
const MAGIC: &[u8; 4] = b"AVIX";
/// The format written; another one is not read (the index is learned anew).
/// 3: mixed-case trigrams are posted too (`trigram::mixed_case`); a copy
/// without them would rule out every file a case-sensitive query needs
/// them of. 2: docs hold pieces (`trigram::Pieces`); 1 held one trigram set
/// a doc.
const FORMAT: u8 = 3;
/// Bytes before the checksummed part: magic, format, checksum.
const HEADER_BYTES: usize = 4 + 1 + 4;

/// Where a tier keeps its namespaces' indexes across restarts, by the
/// namespace's index key (`Engine::index_key`).
pub trait Keeper: Send + Sync {
    /// The bytes last saved for `key`, read only when they are at most
    /// `limit` bytes: a copy too large for its reader's share is refused
    /// before it takes any memory.
    fn load(&self, key: &str, limit: u64) -> Result<Kept>;

    /// Replaces what is kept for `key` by `bytes`, atomically: after a
    /// crash, the old bytes or the new ones are there, whole.
    fn save(&self, key: &str, bytes: &[u8]) -> Result<()>;

    /// Drops what is kept for `key`.
    fn forget(&self, key: &str) -> Result<()>;

    /// Whether the path table is kept with the segment: a tier whose table
    /// is built again after a restart anyway (the Filesystem tier's mirror)
    /// need not write it at every merge.
    fn keeps_table(&self) -> bool {
        true
    }
}

/// What [`Keeper::load`] found for a namespace.
#[derive(Debug, PartialEq, Eq)]
pub enum Kept {
    /// No copy of this namespace (none saved, another namespace's file, or
    /// one cut short: the next save replaces it).
    Nothing,
    /// A copy of at least this many bytes, over the limit: not read (or
    /// read no further than that).
    Over(u64),
    /// The copy's bytes.
    Bytes(Vec<u8>),
}

/// What a persisted index holds.
pub struct Saved {
    /// Most files one Grep of the namespace walked (the size threshold).
    pub walked: u64,
    /// Its segment.
    pub segment: Arc<Segment>,
    /// Its path table, at the log position it records.
    pub table: Option<Arc<PathTable>>,
}

/// The bytes of `saved` (written once: the checksum is filled in last).
pub fn encode(saved: &Saved) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + saved.segment.bytes() + 64);
    out.extend_from_slice(MAGIC);
    out.push(FORMAT);
    out.extend_from_slice(&[0; 4]);
    out.put_u64(saved.walked);
    saved.segment.encode_into(&mut out);
    let before_table = out.len();
    out.push(1);
    let kept = saved
        .table
        .as_ref()
        .is_some_and(|t| t.encode_into(&mut out));
    if !kept {
        out.truncate(before_table);
        out.push(0);
    }
    let crc = crc32fast::hash(&out[HEADER_BYTES..]);
    out[5..HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Reads back what [`encode`] wrote; `Err` says why it cannot be used.
pub fn decode(bytes: &[u8]) -> std::result::Result<Saved, &'static str> {
    if bytes.len() < HEADER_BYTES || &bytes[..4] != MAGIC {
        return Err("not a persisted search index");
    }
    if bytes[4] != FORMAT {
        return Err("another format");
    }
    let body = &bytes[HEADER_BYTES..];
    if crc32fast::hash(body).to_le_bytes() != bytes[5..HEADER_BYTES] {
        return Err("checksum mismatch");
    }
    let mut r = Reader::new(body);
    let walked = r.u64().ok_or("truncated")?;
    let segment = Segment::decode_from(&mut r).ok_or("segment does not decode")?;
    let table = match r.take(1).ok_or("truncated")? {
        [0] => None,
        [1] => Some(Arc::new(
            PathTable::decode_from(&mut r).ok_or("path table does not decode")?,
        )),
        _ => return Err("bad path table flag"),
    };
    if r.left() != 0 {
        return Err("trailing bytes");
    }
    Ok(Saved {
        walked,
        segment: Arc::new(segment),
        table,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::index::segment::Doc;

    #[test]
    fn an_index_round_trips_and_any_damage_is_refused() {
        let segment = Segment::build(vec![
            Doc {
                key: b"a".to_vec(),
                version: 3,
                trigrams: Some(vec![vec![1, 2], vec![2, 3]].into()),
            },
            Doc {
                key: b"b".to_vec(),
                version: 4,
                trigrams: None,
            },
        ]);
        let saved = Saved {
            walked: 9,
            segment: Arc::new(segment),
            table: None,
        };
        let bytes = encode(&saved);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.walked, 9);
        assert_eq!(back.segment.find(b"b", 4), Some(1));
        assert!(back.table.is_none());
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(decode(&bad).is_err(), "flip at {at}");
            assert!(decode(&bytes[..at]).is_err(), "cut at {at}");
        }
    }
}
