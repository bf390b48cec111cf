//! The value of a `log` key: one change of the Store's change log.
//!
//! Layout (big-endian): `format (1) | kind (1) | version (8) | size (8) |
//! time ns (8) | operation (1) | principal length (1) | principal | handle
//! length (1) | handle | key length (2) | relative key | moved (1) [| key
//! length (2) | the move's other relative key]`. The change number is the
//! key's, not the value's. Keys are relative to the mount, so a store keeps
//! its log when it is mounted elsewhere.
//!
//! Errors: a value that does not decode is `Internal`, never guessed at.

use crate::backend::ordered::Logged;
use crate::backend::record::nanos;
use crate::change::{ChangeKind, Operation, Origin, bounded_name};
use crate::error::{Error, Result};
use std::time::{Duration, UNIX_EPOCH};

/// Format byte of a log value.
const FORMAT: u8 = 1;

fn put_name(out: &mut Vec<u8>, name: &str) {
    let name = bounded_name(name);
    // bounded_name keeps at most 255 bytes.
    out.push(name.len() as u8);
    out.extend_from_slice(name.as_bytes());
}

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
    out.push(change.origin.operation.code());
    put_name(&mut out, &change.origin.principal);
    put_name(&mut out, &change.origin.handle);
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

    fn name(&mut self) -> Result<String> {
        let len = usize::from(self.byte()?);
        Ok(String::from_utf8_lossy(self.take(len)?).into_owned())
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
    let operation = Operation::from_code(r.byte()?).ok_or_else(|| r.corrupt())?;
    let origin = Origin {
        principal: r.name()?,
        handle: r.name()?,
        operation,
    };
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

#[cfg(test)]
mod tests {
    use super::*;

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
