//! What changed, by whom, and where a reader of the change logs stands: the
//! values of the change feed (Watch) and of version history, shared by the
//! tiers that record them and the front ends that show them. A leaf module
//! (docs/contract.md § Changes and history).
//!
//! Each tier that keeps a change log numbers its changes in commit order
//! (`seq`, per State session, per Store, per Filesystem mount) and names the
//! log by an `epoch` that changes whenever the log starts over (a new Store, a
//! restarted server's State sessions). A [`ChangeCursor`] holds one
//! [`LogPosition`] per mount, so one cursor resumes a Watch that spans several
//! mounts; clients see it only as an opaque string.

use crate::error::{Error, Result};
use crate::path::VfsPath;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use std::collections::BTreeMap;
use std::time::SystemTime;

/// How a version came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Write or WriteBytes (create or replace).
    Write,
    /// Edit or MultiEdit (a read-modify-write).
    Edit,
    /// Delete (the version is a tombstone).
    Delete,
    /// Move (a tombstone at the source, a new version at the destination).
    Move,
    /// Restore of an earlier version.
    Restore,
}

impl Operation {
    /// Every operation, in the order of their stored codes.
    const ALL: [Operation; 5] = [
        Operation::Write,
        Operation::Edit,
        Operation::Delete,
        Operation::Move,
        Operation::Restore,
    ];

    /// The name clients see: `write`, `edit`, `delete`, `move`, `restore`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Write => "write",
            Operation::Edit => "edit",
            Operation::Delete => "delete",
            Operation::Move => "move",
            Operation::Restore => "restore",
        }
    }

    /// The byte a tier stores for it.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The operation stored as `code` (`None` for an unknown code).
    pub fn from_code(code: u8) -> Option<Operation> {
        Operation::ALL.get(usize::from(code)).copied()
    }
}

/// Who made a version and how: kept with every version and change event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The configured principal (for a handle: the principal at the root of
    /// its chain); empty for a change made outside agentvfs.
    pub principal: String,
    /// The handle the principal acted through; empty when it acted itself.
    pub handle: String,
    /// The State session of the request (`x-agentvfs-session`); empty for a
    /// change made outside agentvfs, and for one recorded before sessions
    /// were kept.
    pub session: String,
    /// The caller's label for the change (`x-agentvfs-label`, or a tool's
    /// `label` argument: a tool-call or turn id); empty when none was given.
    pub label: String,
    /// The changeset the change belongs to (`Filesystem/Commit`,
    /// ApplyPatch, Rewind); empty for a single-file call.
    pub changeset: String,
    /// What was done.
    pub operation: Operation,
}

impl Origin {
    /// Longest principal or handle name kept (longer names are cut on a
    /// character boundary): names come from the configuration and from
    /// handle ids, so this only bounds what a record can hold.
    pub const MAX_NAME_BYTES: usize = 255;

    /// Bit of the stored operation byte saying the session, label and
    /// changeset follow the handle (records written before they were kept
    /// lack it and decode with them empty).
    const ATTRIBUTED: u8 = 0x80;

    /// `operation` done by the caller of `scope`, in its session, under its
    /// label and changeset; a handle is recorded as itself, by its lineage
    /// (`crate::access::Principal::handle`).
    pub fn of(scope: &crate::scope::Scope, operation: Operation) -> Origin {
        let principal = &scope.principal;
        Origin {
            principal: bounded_name(&principal.owner),
            handle: bounded_name(&principal.handle),
            session: bounded_name(&scope.session),
            label: bounded_name(&scope.label),
            changeset: bounded_name(&scope.changeset),
            operation,
        }
    }

    /// A change made on disk by something other than agentvfs.
    pub fn external(operation: Operation) -> Origin {
        Origin {
            principal: String::new(),
            handle: String::new(),
            session: String::new(),
            label: String::new(),
            changeset: String::new(),
            operation,
        }
    }

    /// Appends the stored form every tier keeps: the operation's byte, then
    /// each name as a length byte and its bytes (principal, handle, and,
    /// when any is set, session, label and changeset).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let attributed = [&self.session, &self.label, &self.changeset];
        let flag = if attributed.iter().any(|name| !name.is_empty()) {
            Self::ATTRIBUTED
        } else {
            0
        };
        out.push(self.operation.code() | flag);
        let names = [&self.principal, &self.handle];
        let extra = if flag == 0 { &[][..] } else { &attributed[..] };
        for name in names.iter().chain(extra) {
            let name = bounded_name(name);
            // bounded_name keeps at most 255 bytes.
            out.push(name.len() as u8);
            out.extend_from_slice(name.as_bytes());
        }
    }

    /// Decodes the stored form at the start of `bytes`: the origin and the
    /// bytes it took, or `None` when they are cut short or unknown.
    pub fn decode_prefix(bytes: &[u8]) -> Option<(Origin, usize)> {
        let code = *bytes.first()?;
        let operation = Operation::from_code(code & !Self::ATTRIBUTED)?;
        let count = if code & Self::ATTRIBUTED == 0 { 2 } else { 5 };
        let mut at = 1;
        let mut names = [const { String::new() }; 5];
        for name in names.iter_mut().take(count) {
            let len = usize::from(*bytes.get(at)?);
            let text = bytes.get(at + 1..at + 1 + len)?;
            *name = String::from_utf8_lossy(text).into_owned();
            at += 1 + len;
        }
        let [principal, handle, session, label, changeset] = names;
        let origin = Origin {
            principal,
            handle,
            session,
            label,
            changeset,
            operation,
        };
        Some((origin, at))
    }
}

/// Bytes of randomness in a handle's id: enough that two handles of one
/// server never share one.
const HANDLE_ID_BYTES: usize = 8;

/// A new handle's id: `h` and 16 hex digits. Ids are public (change
/// records and DescribeGrants show them), unlike tokens; a lineage of the
/// deepest chain, 8 ids, fits [`Origin::MAX_NAME_BYTES`].
pub fn new_handle_id() -> String {
    let bytes: [u8; HANDLE_ID_BYTES] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("h{hex}")
}

/// True when `text` has the shape of a handle's id ([`new_handle_id`]).
fn is_handle_id(text: &str) -> bool {
    text.len() == 1 + 2 * HANDLE_ID_BYTES
        && text.starts_with('h')
        && text[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

impl Origin {
    /// True when the change was made through `handle` or a handle it
    /// minted, at any depth: `handle` is a handle's id, or a lineage as
    /// change records show it. A record kept before handles were recorded
    /// by lineage (it holds the handle's name, `handle of NAME`) is picked
    /// by that exact name only.
    pub fn made_through(&self, handle: &str) -> bool {
        let recorded = self.handle.as_str();
        if handle.is_empty() || recorded.is_empty() {
            return false;
        }
        if recorded == handle {
            return true;
        }
        let ids: Vec<&str> = recorded.split('/').collect();
        if !ids.iter().all(|id| is_handle_id(id)) {
            return false;
        }
        match handle.rsplit_once('/') {
            None => ids.contains(&handle),
            Some(_) => recorded
                .strip_prefix(handle)
                .is_some_and(|rest| rest.starts_with('/')),
        }
    }
}

/// `name` cut to [`Origin::MAX_NAME_BYTES`] on a character boundary.
pub fn bounded_name(name: &str) -> String {
    let mut cut = name.len().min(Origin::MAX_NAME_BYTES);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    name[..cut].to_owned()
}

/// What a change did to its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// The file did not exist before.
    Created,
    /// The file's content changed.
    Modified,
    /// The file is gone.
    Deleted,
}

impl ChangeKind {
    /// The byte a tier stores for it.
    pub fn code(self) -> u8 {
        match self {
            ChangeKind::Created => 1,
            ChangeKind::Modified => 2,
            ChangeKind::Deleted => 3,
        }
    }

    /// The kind stored as `code`.
    pub fn from_code(code: u8) -> Option<ChangeKind> {
        match code {
            1 => Some(ChangeKind::Created),
            2 => Some(ChangeKind::Modified),
            3 => Some(ChangeKind::Deleted),
            _ => None,
        }
    }
}

/// One committed change of one file, as a change log keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The mount whose log holds it (its key in a [`ChangeCursor`]).
    pub log: VfsPath,
    /// Which of the mount's logs holds it: 0 for a mount with one log; an
    /// object mount has one per server run (docs/object-storage.md § The
    /// change log).
    pub shard: u64,
    /// Its place in that log: commit order, starting at 1.
    pub seq: u64,
    /// The file changed.
    pub path: VfsPath,
    /// What happened to it.
    pub kind: ChangeKind,
    /// The file's new version (a deletion's: its tombstone's).
    pub version: u64,
    /// Size after the change (0 for a deletion).
    pub size: u64,
    /// When it was committed.
    pub time: SystemTime,
    /// Who did it, and how.
    pub origin: Origin,
    /// Made on disk outside agentvfs (Filesystem tier, best effort).
    pub external: bool,
    /// For a move: where the file came from (created) or went (deleted).
    pub moved_path: Option<VfsPath>,
}

/// Where a reader stands in one change log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogPosition {
    /// Which log: it changes whenever the log starts over, so a position in
    /// an earlier log is never read against a new one.
    pub epoch: u64,
    /// The last change seen (0: none).
    pub seq: u64,
}

/// Where one change log stands, read at one moment: which log, what it no
/// longer holds, and its last change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogBounds {
    /// Which log (0: the scope has none yet, so no change was ever lost).
    pub epoch: u64,
    /// The last change no longer held (0: none dropped yet).
    pub trimmed: u64,
    /// The last change committed.
    pub head: u64,
}

impl LogBounds {
    /// Checks that `position`, the position of `cursor` in the log of
    /// `mount` (which keeps its last `kept` changes), can be resumed from:
    /// it names this log (or a scope that had none yet), and the log still
    /// holds every change after it. Otherwise the error names the oldest
    /// cursor still available ([`Error::Expired`]); a position ahead of the
    /// log is INVALID_ARGUMENT.
    pub fn check(
        &self,
        mount: &VfsPath,
        cursor: &ChangeCursor,
        position: LogPosition,
        kept: usize,
    ) -> Result<()> {
        let empty = LogPosition { epoch: 0, seq: 0 };
        let same_log = position.epoch == self.epoch || position == empty;
        if same_log && position.seq > self.head {
            return Err(Error::InvalidArgument(format!(
                "cursor is ahead of the change log of {mount}: it names change {} of {}",
                position.seq, self.head
            )));
        }
        if same_log && position.seq >= self.trimmed {
            return Ok(());
        }
        let mut oldest = cursor.clone();
        oldest.set(
            mount,
            LogPosition {
                epoch: self.epoch,
                seq: self.trimmed,
            },
        );
        let what = if same_log {
            format!(
                "the change log of {mount} keeps its last {kept} changes and no longer holds \
                 those after this cursor"
            )
        } else {
            format!(
                "the change log of {mount} started over since this cursor (a new store, a \
                 restarted server or an expired session)"
            )
        };
        Err(Error::Expired {
            what,
            oldest: oldest.encode(),
        })
    }
}

/// A reader's position in every change log a Watch spans: one per mount,
/// and for a mount whose changes are in several logs (an object mount: one
/// per server run, see [`Change::shard`]) one per log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeCursor {
    positions: BTreeMap<VfsPath, LogPosition>,
    /// Mount → log → the last change seen in it.
    shards: BTreeMap<VfsPath, BTreeMap<u64, u64>>,
}

/// What every encoded cursor starts with (a format tag).
const CURSOR_TAG: &str = "c1.";
/// Marks a position in one of a mount's several logs: its mount prefix
/// is written after it (no logical path starts with it).
const SHARD_MARK: char = '*';
/// Longest cursor accepted: far above any mount table's, so decoding a
/// hostile string is bounded.
pub const MAX_CURSOR_CHARS: usize = 16 << 10;

impl ChangeCursor {
    /// The position in the log of `mount`, if the cursor has one.
    pub fn get(&self, mount: &VfsPath) -> Option<LogPosition> {
        self.positions.get(mount).copied()
    }

    /// Sets the position in the log of `mount`.
    pub fn set(&mut self, mount: &VfsPath, position: LogPosition) {
        self.positions.insert(mount.clone(), position);
    }

    /// The positions in the logs of `mount`, a mount with several (log →
    /// last change seen; empty when the cursor has none there).
    pub fn shards(&self, mount: &VfsPath) -> BTreeMap<u64, u64> {
        self.shards.get(mount).cloned().unwrap_or_default()
    }

    /// Sets the positions in the logs of `mount`, a mount with several.
    pub fn set_shards(&mut self, mount: &VfsPath, positions: BTreeMap<u64, u64>) {
        self.shards.insert(mount.clone(), positions);
    }

    /// Exchanges the places kept under `a` with those kept under `b`: a
    /// Watch in a branch keeps its place in the base's log of a mount under
    /// a key no mount has, and swaps it in while the tier reads that log
    /// (src/backend/branch/overlay/).
    pub fn swap(&mut self, a: &VfsPath, b: &VfsPath) {
        let (pa, pb) = (self.positions.remove(a), self.positions.remove(b));
        let (sa, sb) = (self.shards.remove(a), self.shards.remove(b));
        for (key, position) in [(b, pa), (a, pb)] {
            if let Some(position) = position {
                self.positions.insert(key.clone(), position);
            }
        }
        for (key, logs) in [(b, sa), (a, sb)] {
            if let Some(logs) = logs {
                self.shards.insert(key.clone(), logs);
            }
        }
    }

    /// Takes `other`'s places under `key` in place of this cursor's.
    pub fn copy_from(&mut self, other: &ChangeCursor, key: &VfsPath) {
        self.positions.remove(key);
        self.shards.remove(key);
        if let Some(position) = other.positions.get(key) {
            self.positions.insert(key.clone(), *position);
        }
        if let Some(logs) = other.shards.get(key) {
            self.shards.insert(key.clone(), logs.clone());
        }
    }

    /// Sets the position in log `shard` of `mount`, a mount with several.
    pub fn set_shard(&mut self, mount: &VfsPath, shard: u64, seq: u64) {
        self.shards
            .entry(mount.clone())
            .or_default()
            .insert(shard, seq);
    }

    /// The opaque text form clients hold: `c1.` then URL-safe base64 of
    /// each mount's prefix, epoch and sequence number (for a mount with
    /// several logs, one entry per log: `*` and the prefix, the log, the
    /// sequence number).
    pub fn encode(&self) -> String {
        let mut bytes = Vec::new();
        let mut entry = |prefix: &[u8], epoch: u64, seq: u64| {
            // Paths are at most 4,096 bytes (crate::path), so this fits.
            bytes.extend_from_slice(&(prefix.len() as u16).to_be_bytes());
            bytes.extend_from_slice(prefix);
            bytes.extend_from_slice(&epoch.to_be_bytes());
            bytes.extend_from_slice(&seq.to_be_bytes());
        };
        for (mount, position) in &self.positions {
            entry(mount.as_str().as_bytes(), position.epoch, position.seq);
        }
        for (mount, logs) in &self.shards {
            let prefix = format!("{SHARD_MARK}{mount}");
            for (log, seq) in logs {
                entry(prefix.as_bytes(), *log, *seq);
            }
        }
        format!("{CURSOR_TAG}{}", URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Parses a cursor this server (or another sharing its stores) issued;
    /// anything else is INVALID_ARGUMENT.
    pub fn decode(text: &str) -> Result<ChangeCursor> {
        let bad = |why: &str| {
            Error::InvalidArgument(format!(
                "cursor {:?} is not a cursor a Watch returned: {why}",
                crate::error::echo(text)
            ))
        };
        if text.len() > MAX_CURSOR_CHARS {
            return Err(bad("too long"));
        }
        let body = text
            .strip_prefix(CURSOR_TAG)
            .ok_or_else(|| bad("unknown format"))?;
        let bytes = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| bad("not base64"))?;
        let mut rest = bytes.as_slice();
        let mut take = |n: usize| -> Result<&[u8]> {
            if rest.len() < n {
                return Err(bad("truncated"));
            }
            let (head, tail) = rest.split_at(n);
            rest = tail;
            Ok(head)
        };
        let word = |b: &[u8]| {
            let mut w = [0; 8];
            w.copy_from_slice(b);
            u64::from_be_bytes(w)
        };
        let mut cursor = ChangeCursor::default();
        for _ in 0..bytes.len() {
            let len = match take(2) {
                Ok(len) => usize::from(u16::from_be_bytes([len[0], len[1]])),
                // Only a cursor ending exactly after a position is whole.
                Err(_) if take(1).is_err() => break,
                Err(err) => return Err(err),
            };
            let prefix = std::str::from_utf8(take(len)?).map_err(|_| bad("not UTF-8"))?;
            let (shard, prefix) = match prefix.strip_prefix(SHARD_MARK) {
                Some(rest) => (true, rest),
                None => (false, prefix),
            };
            let mount = VfsPath::parse(prefix).map_err(|_| bad("names no mount"))?;
            let epoch = word(take(8)?);
            let seq = word(take(8)?);
            if shard {
                cursor.set_shard(&mount, epoch, seq);
            } else {
                cursor.positions.insert(mount, LogPosition { epoch, seq });
            }
        }
        Ok(cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> VfsPath {
        VfsPath::parse(s).unwrap()
    }

    #[test]
    fn cursors_round_trip_through_their_text() {
        let mut cursor = ChangeCursor::default();
        assert_eq!(ChangeCursor::decode(&cursor.encode()).unwrap(), cursor);
        cursor.set(&p("/"), LogPosition { epoch: 7, seq: 0 });
        cursor.set(
            &p("/memories"),
            LogPosition {
                epoch: u64::MAX,
                seq: 42,
            },
        );
        cursor.set(&p("/"), LogPosition { epoch: 7, seq: 3 });
        let text = cursor.encode();
        assert!(text.starts_with("c1."), "{text}");
        let back = ChangeCursor::decode(&text).unwrap();
        assert_eq!(back, cursor);
        assert_eq!(back.get(&p("/")), Some(LogPosition { epoch: 7, seq: 3 }));
        cursor.set_shard(&p("/shared"), 11, 5);
        cursor.set_shard(&p("/shared"), 12, 0);
        let back = ChangeCursor::decode(&cursor.encode()).unwrap();
        assert_eq!(back, cursor);
        assert_eq!(
            back.shards(&p("/shared")).into_iter().collect::<Vec<_>>(),
            [(11, 5), (12, 0)]
        );
        assert!(back.get(&p("/shared")).is_none());
    }

    #[test]
    fn foreign_cursors_are_invalid_arguments() {
        for text in ["", "c2.AAAA", "c1.!!", "c1.AAE", "c1.AAJ4eA"] {
            let err = ChangeCursor::decode(text).unwrap_err();
            assert_eq!(err.code(), "INVALID_PARAM", "{text}: {err}");
        }
        let long = format!("c1.{}", "A".repeat(MAX_CURSOR_CHARS));
        assert!(ChangeCursor::decode(&long).is_err());
    }

    #[test]
    fn a_handle_is_picked_with_the_handles_it_minted_never_a_sibling() {
        let (parent, sibling) = (new_handle_id(), new_handle_id());
        let child = format!("{parent}/{}", new_handle_id());
        let origin = |handle: &str| Origin {
            handle: handle.to_owned(),
            ..Origin::external(Operation::Write)
        };
        assert!(origin(&parent).made_through(&parent));
        assert!(origin(&child).made_through(&parent));
        assert!(origin(&child).made_through(&child));
        assert!(!origin(&parent).made_through(&child));
        assert!(!origin(&sibling).made_through(&parent));
        assert!(!origin(&format!("{sibling}/{}", new_handle_id())).made_through(&parent));
        assert!(!origin("").made_through(""));
        // A record written when handles were recorded by name decodes as
        // before, and is picked by that name only.
        let mut old = vec![Operation::Edit.code()];
        for name in ["alice", "handle of alice"] {
            old.push(name.len() as u8);
            old.extend_from_slice(name.as_bytes());
        }
        let (decoded, used) = Origin::decode_prefix(&old).unwrap();
        assert_eq!(used, old.len());
        assert_eq!(
            (decoded.principal.as_str(), decoded.handle.as_str()),
            ("alice", "handle of alice")
        );
        assert!(decoded.made_through("handle of alice"));
        assert!(!decoded.made_through("alice"));
        assert!(!origin("handle of a/b").made_through("b"));
        // The deepest chain's lineage is kept whole.
        let deepest: Vec<String> = (0..8).map(|_| new_handle_id()).collect();
        let deepest = deepest.join("/");
        assert_eq!(bounded_name(&deepest), deepest);
    }

    #[test]
    fn operations_round_trip_through_their_codes() {
        for op in Operation::ALL {
            assert_eq!(Operation::from_code(op.code()), Some(op));
        }
        assert_eq!(Operation::from_code(200), None);
        for kind in [
            ChangeKind::Created,
            ChangeKind::Modified,
            ChangeKind::Deleted,
        ] {
            assert_eq!(ChangeKind::from_code(kind.code()), Some(kind));
        }
    }
}
