//! The object tier's change logs (docs/object-storage.md § The change log):
//! what every server sharing a bucket changed, in an order that agrees with
//! each file's versions, delivered exactly once across crashes.
//!
//! Each server run keeps a log of its own per namespace (a random id; keys
//! `{ns}/l/{log}/{seq}`), so writers on different servers never contend for
//! one key. A change writes its record there **before** its head's
//! conditional put (write-ahead), so an acknowledged change always has one;
//! a record whose put lost (or never happened) is told apart by
//! **verification**:
//! - the head holds the record's position: committed;
//! - the record's **successor mark** `{ns}/s/{log}/{seq}` exists: committed
//!   and since replaced (every change that replaces a head writes the mark
//!   of the position it replaces before its own put, so the mark exists
//!   before the head moves on);
//! - the head still has the ETag the change expected: undecided (in
//!   flight), waited for, and past [`UNDECIDED_GRACE`] made sure never to
//!   commit by fencing the head;
//! - otherwise: void (the put lost its race; nothing happened).
//!
//! Readers merge the logs: a record is delivered once the change it
//! replaced (its `prev` position, taken from the head it read) was, so each
//! file's changes come in version order. A record is written after its
//! writer read the head it replaces and draws its number, so such waits
//! never form a cycle. A number drawn but never written (a killed server)
//! is a gap: once the next record is [`GAP_GRACE`] old, any reader writes a
//! void record there (`If-None-Match`, so a late writer's record and the
//! void cannot both land; the writer then draws another number).
//!
//! Cost per change with the log kept: one record and, for a change that
//! replaces a head, one empty successor mark, put at the same time before
//! the head's put: two round trips instead of one.

use super::bucket::{Page, Put};
use super::head::State;
use super::keys::{Position, Space};
use super::state::{Decided, Fate, Store, read_head};
use crate::change::{Change, ChangeCursor, ChangeKind, Operation, Origin};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a missing record is waited for once a later one exists.
pub const GAP_GRACE: Duration = Duration::from_secs(2);
/// How long a change whose outcome is not yet visible is waited for.
pub const UNDECIDED_GRACE: Duration = Duration::from_secs(5);
/// Records read from one log per listing.
const RECORDS_PER_PAGE: usize = 256;
/// A server prunes its log every this many records.
const PRUNE_EVERY: u64 = 1024;
/// Verdicts remembered (committed or void never changes).
const VERDICTS_KEPT: usize = 200_000;
/// The format byte of a record.
const FORMAT: u8 = 1;

/// One record of a change log: a change about to be committed, or a void.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intent {
    /// What the change does (`None`: a void record filling a gap).
    pub kind: Option<ChangeKind>,
    /// The file changed.
    pub path: VfsPath,
    /// Its new version (a deletion's: its tombstone's).
    pub version: u64,
    /// Its size after the change.
    pub size: u64,
    /// When the record was written, ns since the epoch.
    pub time: u64,
    /// The position of the change it replaces ([`Position::NONE`]: none).
    pub prev: Position,
    /// The ETag of the head the change's put is conditional on (`None`:
    /// the key held no head).
    pub expected: Option<String>,
    /// Who makes it, and how.
    pub origin: Origin,
    /// For a move: the other end.
    pub moved: Option<VfsPath>,
}

impl Intent {
    /// A void record.
    pub fn void() -> Intent {
        Intent {
            kind: None,
            path: VfsPath::root(),
            version: 0,
            size: 0,
            time: nanos_now(),
            prev: Position::NONE,
            expected: None,
            origin: Origin::external(Operation::Write),
            moved: None,
        }
    }

    /// The record's bytes.
    pub fn encode(&self) -> Bytes {
        let mut out = vec![FORMAT, self.kind.map_or(0, ChangeKind::code)];
        for n in [
            self.version,
            self.size,
            self.time,
            self.prev.log,
            self.prev.seq,
        ] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        match &self.expected {
            Some(etag) => {
                let etag = &etag.as_bytes()[..etag.len().min(254)];
                out.push(etag.len() as u8);
                out.extend_from_slice(etag);
            }
            None => out.push(u8::MAX),
        }
        self.origin.encode_into(&mut out);
        for path in [Some(&self.path), self.moved.as_ref()] {
            match path {
                Some(path) => {
                    out.extend_from_slice(&(path.as_str().len() as u16).to_be_bytes());
                    out.extend_from_slice(path.as_str().as_bytes());
                }
                None => out.extend_from_slice(&u16::MAX.to_be_bytes()),
            }
        }
        Bytes::from(out)
    }

    /// Decodes a record read at `key`.
    pub fn decode(key: &str, body: &[u8]) -> Result<Intent> {
        let corrupt = || Error::Internal(format!("corrupt change log record {key}"));
        let at = std::cell::Cell::new(0usize);
        let take = |n: usize| -> Result<&[u8]> {
            let end = at.get().checked_add(n).filter(|e| *e <= body.len());
            let end = end.ok_or_else(corrupt)?;
            let out = &body[at.get()..end];
            at.set(end);
            Ok(out)
        };
        if take(1)? != [FORMAT] {
            return Err(corrupt());
        }
        let kind = match take(1)?[0] {
            0 => return Ok(Intent::void()),
            code => Some(ChangeKind::from_code(code).ok_or_else(corrupt)?),
        };
        let mut words = [0u64; 5];
        for w in &mut words {
            *w = u64::from_be_bytes(take(8)?.try_into().map_err(|_| corrupt())?);
        }
        let expected = match take(1)?[0] {
            u8::MAX => None,
            n => Some(String::from_utf8_lossy(take(usize::from(n))?).into_owned()),
        };
        let (origin, len) = Origin::decode_prefix(&body[at.get()..]).ok_or_else(corrupt)?;
        take(len)?;
        let mut paths = [None, None];
        for path in &mut paths {
            let n = u16::from_be_bytes(take(2)?.try_into().map_err(|_| corrupt())?);
            if n != u16::MAX {
                let text = std::str::from_utf8(take(usize::from(n))?).map_err(|_| corrupt())?;
                *path = Some(VfsPath::parse(text).map_err(|_| corrupt())?);
            }
        }
        let [path, moved] = paths;
        Ok(Intent {
            kind,
            path: path.ok_or_else(corrupt)?,
            version: words[0],
            size: words[1],
            time: words[2],
            prev: Position {
                log: words[3],
                seq: words[4],
            },
            expected,
            origin,
            moved,
        })
    }
}

/// ns since the epoch, now.
pub fn nanos_now() -> u64 {
    crate::backend::record::nanos(SystemTime::now())
}

/// This server run's logs: one id, a counter per namespace.
pub struct LogWriter {
    id: u64,
    next: Mutex<HashMap<String, u64>>,
    /// Records each log keeps (older ones are pruned).
    keep: usize,
}

impl LogWriter {
    /// A new run's logs keeping the last `keep` records each.
    pub fn new(keep: usize) -> LogWriter {
        LogWriter {
            id: rand::random::<u64>().max(1),
            next: Mutex::new(HashMap::new()),
            keep,
        }
    }

    /// This run's log id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Draws `n` consecutive positions in `ns`'s log (a changeset's, so its
    /// records come together), and the position up to which records are
    /// due to be pruned, when they are.
    pub fn draw_many(&self, ns: &str, n: usize) -> (Vec<Position>, Option<u64>) {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let seq = next.entry(ns.to_owned()).or_insert(0);
        let first = *seq + 1;
        *seq += n as u64;
        let at = (first..=*seq)
            .map(|seq| Position { log: self.id, seq })
            .collect();
        let keep = self.keep as u64;
        let crossed = (first..=*seq).any(|s| s.is_multiple_of(PRUNE_EVERY));
        let prune = (crossed && *seq > keep).then(|| *seq - keep);
        (at, prune)
    }

    /// Draws the next position in `ns`'s log, and the position up to which
    /// records are due to be pruned, when they are.
    pub fn draw(&self, ns: &str) -> (Position, Option<u64>) {
        let (mut at, prune) = self.draw_many(ns, 1);
        (at.remove(0), prune)
    }
}

/// Writes the record `intent` at `at` (`If-None-Match`): false when the
/// position was taken meanwhile (a reader voided it), so the change must
/// draw another.
pub async fn write_record(store: &Store, ns: &str, at: Position, intent: &Intent) -> Result<bool> {
    let key = store.keys.record(ns, at)?;
    let written = store
        .client
        .put_exact(&key, intent.encode(), Put::Create)
        .await?;
    Ok(written.is_some())
}

/// Writes the successor mark of the change at `replaced`: it committed.
pub async fn mark_successor(store: &Store, ns: &str, replaced: Position) -> Result<()> {
    if !replaced.is_some() {
        return Ok(());
    }
    let key = store.keys.successor(ns, replaced)?;
    store
        .client
        .put(&key, Bytes::new(), Put::Overwrite)
        .await
        .map(|_| ())
}

/// Deletes the records (and successor marks) of log `log` in `ns` up to
/// `through`: nothing writes them again (a void is written only after the
/// oldest record kept, see `read_page`).
pub async fn prune(store: &Store, ns: &str, log: u64, through: u64) -> Result<u64> {
    let mut deleted = 0;
    for space in [Space::Logs, Space::Successors] {
        let prefix = match space {
            Space::Logs => store.keys.log(ns, Some(log))?,
            _ => store.keys.successors(ns, Some(log))?,
        };
        let mut after: Option<String> = None;
        'pages: loop {
            let page = store
                .client
                .page(&prefix, after.as_deref(), 1000, false)
                .await?;
            for meta in &page.objects {
                let key = meta.location.to_string();
                match store.keys.position_of(ns, space, &key) {
                    Some(at) if at.seq <= through => {
                        store.client.delete(&key).await?;
                        deleted += 1;
                    }
                    _ => break 'pages,
                }
                after = Some(key);
            }
            if !page.truncated || page.objects.is_empty() {
                break;
            }
        }
    }
    Ok(deleted)
}

/// What a record's verification found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The change happened.
    Committed,
    /// Nothing happened.
    Void,
    /// Not decided yet.
    Undecided,
}

/// The readers' side, one per tier: verdicts already reached (they never
/// change) and the signal watchers wait on.
pub struct Feed {
    verdicts: Mutex<HashMap<(String, Position), Verdict>>,
    signal: tokio::sync::watch::Sender<u64>,
}

impl Default for Feed {
    fn default() -> Feed {
        Feed {
            verdicts: Mutex::new(HashMap::new()),
            signal: tokio::sync::watch::channel(0).0,
        }
    }
}

impl Feed {
    /// Tells waiting watchers the logs may have grown.
    pub fn bump(&self) {
        self.signal.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes whenever [`Feed::bump`] is called.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.signal.subscribe()
    }

    /// True while some watcher waits on the signal.
    pub fn watched(&self) -> bool {
        self.signal.receiver_count() > 0
    }

    fn remembered(&self, ns: &str, at: Position) -> Option<Verdict> {
        let verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
        verdicts.get(&(ns.to_owned(), at)).copied()
    }

    fn remember(&self, ns: &str, at: Position, verdict: Verdict) {
        if verdict == Verdict::Undecided {
            return;
        }
        let mut verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
        if verdicts.len() >= VERDICTS_KEPT {
            verdicts.clear();
        }
        verdicts.insert((ns.to_owned(), at), verdict);
    }

    /// Verifies the record `intent` at `at` (see the module doc), fencing a
    /// change undecided past [`UNDECIDED_GRACE`] so it never commits.
    pub async fn verify(
        &self,
        store: &Store,
        ns: &str,
        at: Position,
        intent: &Intent,
    ) -> Result<Verdict> {
        if intent.kind.is_none() {
            return Ok(Verdict::Void);
        }
        if let Some(verdict) = self.remembered(ns, at) {
            return Ok(verdict);
        }
        let mut verdict = look(store, ns, at, intent).await?;
        if verdict == Verdict::Undecided && age_ns(intent.time) >= UNDECIDED_GRACE {
            stop(store, ns, at, intent).await?;
            verdict = look(store, ns, at, intent).await?;
        }
        self.remember(ns, at, verdict);
        Ok(verdict)
    }
}

/// How long ago `time` (ns since the epoch) was.
fn age_ns(time: u64) -> Duration {
    Duration::from_nanos(nanos_now().saturating_sub(time))
}

/// One look at what became of the change `intent` at `at`.
async fn look(store: &Store, ns: &str, at: Position, intent: &Intent) -> Result<Verdict> {
    let key = store.keys.head(ns, &intent.path)?;
    let mut head = read_head(&store.client, &store.cache, &key).await?;
    // A pending head replaced while its decider was read is looked at
    // again (a move's source may read as aborted once its destination was
    // finished: `Store::fate`); each round, another change landed.
    for round in 0.. {
        let Some(current) = &head else { break };
        if current.pos == at {
            return Ok(Verdict::Committed);
        }
        let State::Pending(pending) = &current.state else {
            break;
        };
        let new = super::head::Head::decode(&key, pending.new.clone(), String::new())?;
        if new.pos == at {
            match store.fate(ns, &key, current, pending).await? {
                Fate::Decided(decided) => {
                    return Ok(match decided {
                        Decided::Committed => Verdict::Committed,
                        Decided::Aborted => Verdict::Void,
                        Decided::Undecided => Verdict::Undecided,
                    });
                }
                Fate::Replaced(_) if round >= 64 => {
                    return Err(Error::Unavailable(format!(
                        "{key}: its head kept changing while a change of it was verified"
                    )));
                }
                Fate::Replaced(again) => {
                    head = again;
                    continue;
                }
            }
        }
        if let Some(prior) = &pending.prior
            && super::head::Head::decode(&key, prior.clone(), String::new())?.pos == at
        {
            return Ok(Verdict::Committed);
        }
        break;
    }
    let mark = store.keys.successor(ns, at)?;
    if store.client.get(&mark).await?.is_some() {
        return Ok(Verdict::Committed);
    }
    let current = head.as_ref().map(|h| h.etag.as_str());
    if current == intent.expected.as_deref() {
        return Ok(Verdict::Undecided);
    }
    Ok(Verdict::Void)
}

/// Makes sure the undecided change `intent` at `at` never commits: the
/// head it expected is fenced (or, for a move, its source).
async fn stop(store: &Store, ns: &str, at: Position, intent: &Intent) -> Result<()> {
    let key = store.keys.head(ns, &intent.path)?;
    let head = read_head(&store.client, &store.cache, &key).await?;
    match &head {
        Some(head) if Some(head.etag.as_str()) == intent.expected.as_deref() => {
            store.fence(&key, head).await?;
        }
        Some(head) => {
            if let State::Pending(pending) = &head.state
                && super::head::Head::decode(&key, pending.new.clone(), String::new())?.pos == at
            {
                store.stop_move(ns, pending).await?;
            }
        }
        None if intent.expected.is_none() => {
            // The change would have created the head: take the key first.
            let body = super::head::absent(0);
            store.put_head(&key, body, Put::Create).await?;
        }
        None => {}
    }
    Ok(())
}

/// The logs of `ns` that exist now.
pub async fn logs(store: &Store, ns: &str) -> Result<Vec<u64>> {
    let listed = store
        .client
        .prefixes_below(&store.keys.log(ns, None)?)
        .await?;
    Ok(listed
        .iter()
        .filter_map(|p| store.keys.position_of(ns, Space::Logs, p))
        .map(|at| at.log)
        .collect())
}

/// One listing of at most `max` keys of log `log` after the record at
/// `seq` (0: from its start), in order.
async fn page_after(store: &Store, ns: &str, log: u64, seq: u64, max: usize) -> Result<Page> {
    let prefix = store.keys.log(ns, Some(log))?;
    let after = (seq > 0)
        .then(|| store.keys.record(ns, Position { log, seq }))
        .transpose()?;
    store
        .client
        .page(&prefix, after.as_deref(), max, false)
        .await
}

/// The first record of log `log` after `seq` (its position), if any.
async fn first_after(store: &Store, ns: &str, log: u64, seq: u64) -> Result<Option<u64>> {
    let page = page_after(store, ns, log, seq, 1).await?;
    Ok(page
        .objects
        .first()
        .and_then(|m| store.keys.position_of(ns, Space::Logs, m.location.as_ref()))
        .map(|at| at.seq))
}

/// The last record of log `log` (0: none), found by a search over
/// one-key listings: about twice the log's size's bits of requests.
pub async fn last_seq(store: &Store, ns: &str, log: u64) -> Result<u64> {
    let Some(mut low) = first_after(store, ns, log, 0).await? else {
        return Ok(0);
    };
    // Double a step past the records until none lies beyond it...
    let mut step = 1u64;
    while let Some(seq) = first_after(store, ns, log, low.saturating_add(step)).await? {
        low = seq;
        step = step.saturating_mul(2);
    }
    // ...then halve the gap: `low` is a record, none lies after `high`.
    let mut high = low.saturating_add(step);
    while high > low + 1 {
        let mid = low + (high - low) / 2;
        match first_after(store, ns, log, mid).await? {
            Some(seq) => low = seq,
            None => high = mid,
        }
    }
    Ok(first_after(store, ns, log, low).await?.unwrap_or(low))
}

/// When the record at `seq` of log `log` was stored (`None`: no such
/// record).
pub async fn record_time(
    store: &Store,
    ns: &str,
    log: u64,
    seq: u64,
) -> Result<Option<SystemTime>> {
    if seq == 0 {
        return Ok(None);
    }
    let prefix = store.keys.log(ns, Some(log))?;
    let after = (seq > 1)
        .then(|| store.keys.record(ns, Position { log, seq: seq - 1 }))
        .transpose()?;
    let page = store
        .client
        .page(&prefix, after.as_deref(), 1, false)
        .await?;
    Ok(page.objects.first().map(|m| m.last_modified.into()))
}

/// The first record of log `log` (at most `last`) stored at or after
/// `since` (ns since the epoch, the store's clock), found by halving: the
/// records of one log are stored in order. `last + 1` when none is.
pub async fn first_since(store: &Store, ns: &str, log: u64, since: u64, last: u64) -> Result<u64> {
    let since = std::time::UNIX_EPOCH + Duration::from_nanos(since);
    let (mut low, mut high) = (0u64, last + 1);
    // Invariant: no record <= low is recent; record `high` is (or is past the end).
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        match record_time(store, ns, log, mid).await? {
            Some(time) if time >= since => high = mid,
            _ => low = mid,
        }
    }
    Ok(high)
}

/// The records of log `log` after `seq`, in order, at most one page: each
/// with its position and the intent it holds.
pub async fn read_page(
    store: &Store,
    ns: &str,
    log: u64,
    seq: u64,
) -> Result<Vec<(Position, Intent)>> {
    use futures_util::StreamExt;
    let page = page_after(store, ns, log, seq, RECORDS_PER_PAGE).await?;
    let keys: Vec<(Position, String)> = page
        .objects
        .iter()
        .filter_map(|m| {
            let key = m.location.to_string();
            Some((store.keys.position_of(ns, Space::Logs, &key)?, key))
        })
        .collect();
    let read: Vec<Result<Option<(Position, Intent)>>> = futures_util::stream::iter(keys)
        .map(|(at, key)| async move {
            let body = match store.cache.current(&key) {
                Some((_, body)) => body,
                None => match store.client.get(&key).await? {
                    Some(object) => {
                        store.cache.put(&key, &object.etag, object.bytes.clone());
                        object.bytes
                    }
                    // Pruned since it was listed.
                    None => return Ok(None),
                },
            };
            Ok(Some((at, Intent::decode(&key, &body)?)))
        })
        .buffered(32)
        .collect()
        .await;
    read.into_iter().filter_map(Result::transpose).collect()
}

/// Fills the gap at `at` with a void record: false when the change's own
/// record landed first.
async fn void(store: &Store, ns: &str, at: Position) -> Result<bool> {
    write_record(store, ns, at, &Intent::void()).await
}

/// One reader's pass over the logs of `ns`: up to `max` committed changes
/// after `positions` (log → last record passed), merged so each file's
/// changes come in version order; `positions` move past every record read.
pub async fn read_changes(
    feed: &Feed,
    store: &Store,
    ns: &str,
    cursor: &ChangeCursor,
    positions: &mut BTreeMap<u64, u64>,
    max: usize,
) -> Result<Vec<Change>> {
    let mount = &store.keys.mount;
    let known = logs(store, ns).await?;
    if let Some(gone) = positions.keys().find(|log| !known.contains(log)).copied() {
        // A log no longer listed belonged to a run gone for long
        // (sweep::DEAD_LOG_AGE), or to another bucket.
        let mut oldest = cursor.clone();
        let mut kept = positions.clone();
        kept.remove(&gone);
        oldest.set_shards(mount, kept);
        return Err(Error::Expired {
            what: format!(
                "the change log of {mount} written by server run {gone:016x} no longer exists \
                 (its run ended over a week ago, or the cursor is another bucket's), so changes \
                 after this cursor may be gone"
            ),
            oldest: oldest.encode(),
        });
    }
    for log in &known {
        positions.entry(*log).or_insert(0);
    }
    if max == 0 {
        // Only the check of a Watch's start: every position must still be
        // followed by the records after it, and none be ahead of its log.
        for (log, at) in positions.clone() {
            if at == 0 {
                continue;
            }
            let oldest = first_after(store, ns, log, 0).await?;
            if oldest.is_some_and(|oldest| oldest > at + 1) {
                return Err(lapsed(cursor, mount, positions, log, oldest.unwrap_or(1)));
            }
            let last = last_seq(store, ns, log).await?;
            if at > last {
                return Err(Error::InvalidArgument(format!(
                    "cursor is ahead of the change log of {mount} written by server run \
                     {log:016x}: it names change {at} of {last}"
                )));
            }
        }
        return Ok(Vec::new());
    }
    let mut pages: BTreeMap<u64, std::collections::VecDeque<(Position, Intent)>> = BTreeMap::new();
    let mut out = Vec::new();
    loop {
        let mut moved = false;
        for log in known.iter().copied() {
            while out.len() < max {
                let at = positions[&log];
                let queue = pages.entry(log).or_default();
                if queue.is_empty() {
                    queue.extend(read_page(store, ns, log, at).await?);
                }
                let Some((next, intent)) = queue.front().cloned() else {
                    break;
                };
                if next.seq != at + 1 {
                    if at == 0 {
                        // A log read from its start: its oldest records
                        // may be pruned.
                        positions.insert(log, next.seq - 1);
                        continue;
                    }
                    // Records after the reader's position are missing:
                    // pruned (the cursor is too old), or a gap (a record
                    // drawn and not yet written).
                    let oldest = first_after(store, ns, log, 0).await?.unwrap_or(next.seq);
                    if oldest > at {
                        return Err(lapsed(cursor, mount, positions, log, oldest));
                    }
                    if age_ns(intent.time) < GAP_GRACE {
                        break;
                    }
                    let gap = Position { log, seq: at + 1 };
                    if !void(store, ns, gap).await? {
                        // Its record landed meanwhile: read it.
                        queue.clear();
                    } else {
                        positions.insert(log, at + 1);
                        moved = true;
                    }
                    continue;
                }
                let verdict = feed.verify(store, ns, next, &intent).await?;
                if verdict == Verdict::Undecided {
                    break;
                }
                if verdict == Verdict::Committed && waits_for(positions, intent.prev) {
                    break;
                }
                queue.pop_front();
                positions.insert(log, next.seq);
                moved = true;
                if verdict == Verdict::Committed
                    && let Some(kind) = intent.kind
                {
                    out.push(Change {
                        log: mount.clone(),
                        shard: log,
                        seq: next.seq,
                        path: intent.path,
                        kind,
                        version: intent.version,
                        size: intent.size,
                        time: UNIX_EPOCH + Duration::from_nanos(intent.time),
                        origin: intent.origin,
                        external: false,
                        moved_path: intent.moved,
                    });
                }
            }
        }
        if !moved || out.len() >= max {
            return Ok(out);
        }
    }
}

/// The error of a reader at `positions` in the logs of `mount` whose log
/// `log` no longer holds the records before `oldest`.
fn lapsed(
    cursor: &ChangeCursor,
    mount: &VfsPath,
    positions: &BTreeMap<u64, u64>,
    log: u64,
    oldest: u64,
) -> Error {
    let mut oldest_cursor = cursor.clone();
    let mut kept = positions.clone();
    kept.insert(log, oldest - 1);
    oldest_cursor.set_shards(mount, kept);
    Error::Expired {
        what: format!(
            "the change log of {mount} written by server run {log:016x} no longer holds the \
             changes after this cursor"
        ),
        oldest: oldest_cursor.encode(),
    }
}

/// True while the change at `prev` has not been passed by the reader at
/// `positions` (a log it does not know is one already pruned away).
fn waits_for(positions: &BTreeMap<u64, u64>, prev: Position) -> bool {
    prev.is_some() && positions.get(&prev.log).is_some_and(|seq| *seq < prev.seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let intent = Intent {
            kind: Some(ChangeKind::Modified),
            path: VfsPath::parse("/s/a b").unwrap(),
            version: 9,
            size: 3,
            time: 77,
            prev: Position { log: 4, seq: 5 },
            expected: Some("\"etag\"".into()),
            origin: Origin {
                principal: "p".into(),
                handle: "h".into(),
                session: "s".into(),
                label: "turn/1".into(),
                changeset: "cs-9".into(),
                operation: Operation::Move,
            },
            moved: Some(VfsPath::parse("/s/c").unwrap()),
        };
        assert_eq!(Intent::decode("k", &intent.encode()).unwrap(), intent);
        let created = Intent {
            expected: None,
            moved: None,
            ..intent
        };
        assert_eq!(Intent::decode("k", &created.encode()).unwrap(), created);
        let void = Intent::decode("k", &Intent::void().encode()).unwrap();
        assert_eq!(void.kind, None);
        assert!(Intent::decode("k", b"\x01\x02").is_err());
    }

    #[test]
    fn a_record_waits_for_the_change_it_replaced() {
        let positions = BTreeMap::from([(1, 5), (2, 9)]);
        assert!(waits_for(&positions, Position { log: 1, seq: 6 }));
        assert!(!waits_for(&positions, Position { log: 1, seq: 5 }));
        assert!(!waits_for(&positions, Position::NONE));
        assert!(!waits_for(&positions, Position { log: 3, seq: 1 }));
    }
}
