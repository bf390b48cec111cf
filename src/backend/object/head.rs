//! A file's head: the one object whose conditional puts decide every change
//! of the file (docs/object-storage.md § Heads).
//!
//! A head is never removed. It holds one of five states:
//! - **live**: the file's record (`backend::record`: version, size, times,
//!   origin, and the content when small);
//! - **deleted**: a tombstone, the version the file was deleted at;
//! - **moved away**: the source of a committed Move, naming the move and its
//!   destination (which may still hold the move's pending head);
//! - **absent**: no file, and no history entry either (a move that did not
//!   happen put back a destination that had no file);
//! - **pending**: the destination of a Move in flight, or a file of a
//!   changeset in flight: the new head it will hold once the move (the
//!   changeset) commits, what it held before, and the object whose
//!   conditional put decides it: the move's source head, or the changeset's
//!   commit record (its key and ETag).
//!
//! Every head also holds a random **fence**, so writing the same state again
//! (to make a stale conditional put fail) changes its ETag, and the
//! **position** of the change that made it in the change logs.
//!
//! Layout (big-endian): `magic "AVH1" | state (1) | fence (4) | log (8) |
//! seq (8)`, then by state: live and deleted `record length (4) | record`;
//! moved away `move (8) | destination length (2) | destination | record
//! length (4) | record`; absent `floor (8)`; pending `move (8) | since µs (8)
//! | source length (2; 0: a changeset's record) | source | source ETag length (1) | source ETag | new
//! length (4) | new head | prior length (4, all ones: none) | prior head`.
//! Then 0 to 3 zero bytes, so that the body's length modulo 4 tells its
//! state class ([`Class`]): a listing, which shows each key's size, tells
//! live heads from tombstones without fetching them.

use super::keys::Position;
use crate::backend::record::{self, Meta};
use crate::change::Origin;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use bytes::Bytes;
use std::ops::Range;

/// Every head body starts with it.
const MAGIC: &[u8; 4] = b"AVH1";
/// Bytes before the state's own fields.
const HEADER_BYTES: usize = 4 + 1 + 4 + 16;
/// The prior-length value of a pending head whose destination had no head.
const NO_PRIOR: u32 = u32::MAX;

/// What a head's length says of it (length modulo 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A live file.
    Live,
    /// No file: deleted, moved away or absent.
    NoFile,
    /// A move in flight: fetch and resolve it.
    Pending,
}

impl Class {
    /// The class of a head body of `size` bytes (as a listing shows it).
    pub fn of_size(size: u64) -> Class {
        match size % 4 {
            0 => Class::Live,
            2 => Class::Pending,
            _ => Class::NoFile,
        }
    }

    fn remainder(self) -> usize {
        match self {
            Class::Live => 0,
            Class::NoFile => 1,
            Class::Pending => 2,
        }
    }
}

/// The state codes stored.
const LIVE: u8 = 0;
const DELETED: u8 = 1;
const MOVED_AWAY: u8 = 2;
const ABSENT: u8 = 3;
const PENDING: u8 = 4;

/// A Move in flight, as its destination's head holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The move's id (random), also in the source's moved-away head; a
    /// changeset's id, also in its committed record.
    pub move_id: u64,
    /// When the move began, µs since the epoch.
    pub since: u64,
    /// The source file; `None` for a changeset's file, decided by the
    /// changeset's commit record (`ObjectKeys::changeset` of `move_id`).
    pub source: Option<VfsPath>,
    /// The ETag of the deciding object (the source head, the record) when
    /// the move began: it commits by a put on this ETag, so once the
    /// object's ETag is another, it never will.
    pub source_etag: String,
    /// The live head the destination holds once the move commits.
    pub new: Bytes,
    /// What the destination held before (`None`: no head).
    pub prior: Option<Bytes>,
}

/// A head's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// A file.
    Live,
    /// Deleted (a tombstone).
    Deleted,
    /// The source of a committed Move.
    MovedAway {
        /// The move's id.
        move_id: u64,
        /// Where the file went.
        to: VfsPath,
    },
    /// No file and no history entry; `meta.version` is the floor.
    Absent,
    /// The destination of a Move in flight.
    Pending(Box<Pending>),
}

/// A head as read from the store.
#[derive(Clone, Debug)]
pub struct Head {
    /// Its ETag: the condition of the next change.
    pub etag: String,
    /// Its whole body.
    pub body: Bytes,
    /// Its state.
    pub state: State,
    /// The change that made it.
    pub pos: Position,
    /// The record's metadata (live, deleted, moved away); for absent and
    /// pending heads only `version` is set: the floor of the next version.
    pub meta: Meta,
    /// Where the record lies in `body` (empty for absent and pending heads).
    record: Range<usize>,
}

/// Reads big-endian fields from a body, failing as corrupt past its end.
struct Fields<'b> {
    body: &'b [u8],
    at: usize,
    what: &'b dyn std::fmt::Display,
}

impl<'b> Fields<'b> {
    fn corrupt(&self) -> Error {
        Error::Internal(format!("corrupt object head for {}", self.what))
    }

    fn take(&mut self, n: usize) -> Result<Range<usize>> {
        let end = self.at.checked_add(n).filter(|end| *end <= self.body.len());
        let end = end.ok_or_else(|| self.corrupt())?;
        let range = self.at..end;
        self.at = end;
        Ok(range)
    }

    fn bytes(&mut self, n: usize) -> Result<&'b [u8]> {
        let range = self.take(n)?;
        Ok(&self.body[range])
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }

    fn u16(&mut self) -> Result<usize> {
        let b = self.bytes(2)?;
        Ok(usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64> {
        let mut w = [0; 8];
        w.copy_from_slice(self.bytes(8)?);
        Ok(u64::from_be_bytes(w))
    }

    fn path(&mut self) -> Result<VfsPath> {
        let n = self.u16()?;
        let text = std::str::from_utf8(self.bytes(n)?).map_err(|_| self.corrupt())?;
        VfsPath::parse(text).map_err(|_| self.corrupt())
    }
}

impl Head {
    /// Decodes the head `body` (ETag `etag`) read at `key`.
    pub fn decode(key: &str, body: Bytes, etag: String) -> Result<Head> {
        let mut f = Fields {
            body: &body,
            at: 0,
            what: &key,
        };
        if f.bytes(4)? != MAGIC {
            return Err(Error::Internal(format!(
                "{key} is not an agentvfs object head (an earlier format, or another program's \
                 object); see docs/object-storage.md § Keys"
            )));
        }
        let code = f.u8()?;
        f.take(4)?;
        let pos = Position {
            log: f.u64()?,
            seq: f.u64()?,
        };
        let record_at = |f: &mut Fields<'_>| -> Result<Range<usize>> {
            let n = f.u32()? as usize;
            f.take(n)
        };
        let (state, record) = match code {
            LIVE => (State::Live, record_at(&mut f)?),
            DELETED => (State::Deleted, record_at(&mut f)?),
            MOVED_AWAY => {
                let move_id = f.u64()?;
                let to = f.path()?;
                (State::MovedAway { move_id, to }, record_at(&mut f)?)
            }
            ABSENT => {
                let floor = f.u64()?;
                let meta = Meta {
                    version: floor,
                    ..Meta::tombstone(0)
                };
                return Ok(Head {
                    etag,
                    state: State::Absent,
                    pos,
                    meta,
                    record: 0..0,
                    body,
                });
            }
            PENDING => {
                let move_id = f.u64()?;
                let since = f.u64()?;
                let source = match f.u16()? {
                    0 => None,
                    n => {
                        let text = std::str::from_utf8(f.bytes(n)?).map_err(|_| f.corrupt())?;
                        Some(VfsPath::parse(text).map_err(|_| f.corrupt())?)
                    }
                };
                let n = usize::from(f.u8()?);
                let source_etag = String::from_utf8_lossy(f.bytes(n)?).into_owned();
                let n = f.u32()? as usize;
                let new = body.slice(f.take(n)?);
                let prior = match f.u32()? {
                    NO_PRIOR => None,
                    n => Some(body.slice(f.take(n as usize)?)),
                };
                // The floor: above both what the destination held and what
                // it would hold.
                let mut floor = Head::decode(key, new.clone(), String::new())?.meta.version;
                if let Some(prior) = &prior {
                    floor = floor.max(
                        Head::decode(key, prior.clone(), String::new())?
                            .meta
                            .version,
                    );
                }
                let meta = Meta {
                    version: floor,
                    ..Meta::tombstone(0)
                };
                let pending = Pending {
                    move_id,
                    since,
                    source,
                    source_etag,
                    new,
                    prior,
                };
                return Ok(Head {
                    etag,
                    state: State::Pending(Box::new(pending)),
                    pos,
                    meta,
                    record: 0..0,
                    body,
                });
            }
            _ => return Err(f.corrupt()),
        };
        let (meta, _) = record::decode(&key, &body[record.clone()])?;
        Ok(Head {
            etag,
            state,
            pos,
            meta,
            record,
            body,
        })
    }

    /// True for a live file.
    pub fn is_live(&self) -> bool {
        self.state == State::Live
    }

    /// The record of a live, deleted or moved-away head.
    pub fn record(&self) -> &[u8] {
        &self.body[self.record.clone()]
    }

    /// The inline content of a live head of a small file.
    pub fn inline(&self, path: &VfsPath) -> Result<Option<Bytes>> {
        if !self.is_live() || !self.meta.inline {
            return Ok(None);
        }
        let (_, content) = record::decode(path, self.record())?;
        let start = self.record.start + (self.record().len() - content.len());
        Ok(Some(self.body.slice(start..self.record.end)))
    }

    /// Who made this version, and how.
    pub fn origin(&self, path: &VfsPath) -> Result<Origin> {
        record::origin(path, self.record())
    }

    /// True when this head ends the file's history with a deletion (a
    /// tombstone or a move away), which history shows as a version.
    pub fn is_deletion(&self) -> bool {
        matches!(self.state, State::Deleted | State::MovedAway { .. })
    }
}

/// The body of a live head: `meta` made by `origin`, with `inline` content,
/// at `pos`.
pub fn live(meta: &Meta, origin: &Origin, inline: Option<&[u8]>, pos: Position) -> Bytes {
    let record = record::encode(meta, origin, inline);
    with_record(LIVE, pos, &[], &record, Class::Live)
}

/// The body of a tombstone: `version` deleted now by `origin`, at `pos`.
pub fn deleted(version: u64, origin: &Origin, pos: Position) -> Bytes {
    let record = record::encode_tombstone(&Meta::tombstone(version), origin);
    with_record(DELETED, pos, &[], &record, Class::NoFile)
}

/// The body of a Move's source once the move commits: `version` moved to
/// `to` by `origin` in move `move_id`, at `pos`.
pub fn moved_away(
    version: u64,
    origin: &Origin,
    pos: Position,
    move_id: u64,
    to: &VfsPath,
) -> Bytes {
    let record = record::encode_tombstone(&Meta::tombstone(version), origin);
    let mut fields = move_id.to_be_bytes().to_vec();
    push_path(&mut fields, to);
    with_record(MOVED_AWAY, pos, &fields, &record, Class::NoFile)
}

/// The body of an absent head whose next version must exceed `floor`.
pub fn absent(floor: u64) -> Bytes {
    let mut out = header(ABSENT, Position::NONE);
    out.extend_from_slice(&floor.to_be_bytes());
    finish(out, Class::NoFile)
}

/// The body of a Move's destination while the move is in flight.
pub fn pending(p: &Pending, pos: Position) -> Bytes {
    let mut out = header(PENDING, pos);
    out.extend_from_slice(&p.move_id.to_be_bytes());
    out.extend_from_slice(&p.since.to_be_bytes());
    match &p.source {
        Some(source) => push_path(&mut out, source),
        None => out.extend_from_slice(&0u16.to_be_bytes()),
    }
    // ETags are at most a few dozen bytes (an MD5 and a part count).
    let etag = &p.source_etag.as_bytes()[..p.source_etag.len().min(255)];
    out.push(etag.len() as u8);
    out.extend_from_slice(etag);
    out.extend_from_slice(&(p.new.len() as u32).to_be_bytes());
    out.extend_from_slice(&p.new);
    match &p.prior {
        Some(prior) => {
            out.extend_from_slice(&(prior.len() as u32).to_be_bytes());
            out.extend_from_slice(prior);
        }
        None => out.extend_from_slice(&NO_PRIOR.to_be_bytes()),
    }
    finish(out, Class::Pending)
}

/// `body` with a new fence: the same state under another ETag, so a
/// conditional put on the old ETag fails from now on.
pub fn refenced(body: &Bytes) -> Bytes {
    let mut out = body.to_vec();
    if out.len() >= HEADER_BYTES {
        out[5..9].copy_from_slice(&rand::random::<u32>().to_be_bytes());
    }
    Bytes::from(out)
}

fn header(state: u8, pos: Position) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + 64);
    out.extend_from_slice(MAGIC);
    out.push(state);
    out.extend_from_slice(&rand::random::<u32>().to_be_bytes());
    out.extend_from_slice(&pos.log.to_be_bytes());
    out.extend_from_slice(&pos.seq.to_be_bytes());
    out
}

fn with_record(state: u8, pos: Position, fields: &[u8], record: &[u8], class: Class) -> Bytes {
    let mut out = header(state, pos);
    out.extend_from_slice(fields);
    out.extend_from_slice(&(record.len() as u32).to_be_bytes());
    out.extend_from_slice(record);
    finish(out, class)
}

fn push_path(out: &mut Vec<u8>, path: &VfsPath) {
    // Logical paths are at most 4,096 bytes (crate::path).
    out.extend_from_slice(&(path.as_str().len() as u16).to_be_bytes());
    out.extend_from_slice(path.as_str().as_bytes());
}

/// Pads `out` so its length modulo 4 is `class`'s.
fn finish(mut out: Vec<u8>, class: Class) -> Bytes {
    while out.len() % 4 != class.remainder() {
        out.push(0);
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::Operation;

    fn p(s: &str) -> VfsPath {
        VfsPath::parse(s).unwrap()
    }

    fn origin() -> Origin {
        Origin {
            principal: "agent".into(),
            ..Origin::external(Operation::Write)
        }
    }

    #[test]
    fn every_state_round_trips_and_its_size_tells_its_class() {
        let pos = Position { log: 3, seq: 9 };
        let meta = Meta {
            version: 7,
            size: 5,
            created: 1,
            modified: 2,
            inline: true,
            blob: 0,
            executable: true,
        };
        let file = live(&meta, &origin(), Some(b"hello"), pos);
        let head = Head::decode("k", file.clone(), "e".into()).unwrap();
        assert_eq!(
            (head.state.clone(), head.pos, head.meta),
            (State::Live, pos, meta)
        );
        assert_eq!(head.inline(&p("/x")).unwrap().unwrap(), &b"hello"[..]);
        assert_eq!(Class::of_size(file.len() as u64), Class::Live);

        let tomb = deleted(8, &origin(), pos);
        let head = Head::decode("k", tomb.clone(), "e".into()).unwrap();
        assert_eq!((head.state.clone(), head.meta.version), (State::Deleted, 8));
        assert!(head.is_deletion());
        assert_eq!(Class::of_size(tomb.len() as u64), Class::NoFile);

        let away = moved_away(9, &origin(), pos, 42, &p("/y"));
        let head = Head::decode("k", away.clone(), "e".into()).unwrap();
        assert_eq!(
            head.state,
            State::MovedAway {
                move_id: 42,
                to: p("/y")
            }
        );
        assert_eq!(Class::of_size(away.len() as u64), Class::NoFile);

        let gone = absent(11);
        let head = Head::decode("k", gone.clone(), "e".into()).unwrap();
        assert_eq!((head.state.clone(), head.meta.version), (State::Absent, 11));
        assert_eq!(Class::of_size(gone.len() as u64), Class::NoFile);

        let moving = Pending {
            move_id: 42,
            since: 5,
            source: Some(p("/x")),
            source_etag: "\"abc\"".into(),
            new: live(
                &Meta {
                    version: 12,
                    ..meta
                },
                &origin(),
                Some(b"hello"),
                pos,
            ),
            prior: Some(tomb),
        };
        let body = pending(&moving, pos);
        let head = Head::decode("k", body.clone(), "e".into()).unwrap();
        assert_eq!(head.state, State::Pending(Box::new(moving)));
        assert_eq!(head.meta.version, 12);
        assert_eq!(Class::of_size(body.len() as u64), Class::Pending);

        let again = refenced(&file);
        assert_ne!(again, file);
        let head = Head::decode("k", again, "e".into()).unwrap();
        assert_eq!((head.state, head.pos, head.meta), (State::Live, pos, meta));
    }

    #[test]
    fn foreign_and_cut_bodies_are_errors() {
        assert!(Head::decode("k", Bytes::from_static(b"hello"), "e".into()).is_err());
        let file = live(&Meta::tombstone(1), &origin(), Some(b""), Position::NONE);
        for cut in [4, 10, file.len() - 5] {
            assert!(
                Head::decode("k", file.slice(..cut), "e".into()).is_err(),
                "{cut}"
            );
        }
    }
}
