//! What a path holds now: its head read through the cache, a Move in flight
//! onto it resolved (docs/object-storage.md § Move).
//!
//! Readers only look: a pending head at a Move's destination is the move's
//! new file once its source holds the move's moved-away head, and what the
//! destination held before while the source holds the ETag the move commits
//! on (not committed yet). A source holding anything else is read as a move
//! that never will commit only while the destination still holds the same
//! pending head: the source keeps the evidence of a commit only until the
//! destination is finished ([`Store::fate`]). A change must first **settle** the
//! path: a move in flight onto it is waited for while young, and past
//! [`MOVE_GRACE`] made sure never to commit (its source is fenced: written
//! again as it is, so the move's conditional put on the old ETag fails).
//! A change that replaces a moved-away head first finishes the move it
//! names, so the evidence that a move committed outlives its pending head.

use super::bucket::{Client, Put};
use super::cache::ContentCache;
use super::head::{self, Head, Pending, State};
use super::keys::{ObjectKeys, Position};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use bytes::Bytes;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a Move in flight onto a path is waited for before a change of
/// the path stops it (a move normally commits within a few requests; one
/// left by a killed server is stopped this long after it began).
pub const MOVE_GRACE: Duration = Duration::from_secs(2);

/// The tier's view of its bucket in the futures it runs: the S3 client, the
/// content cache and the key layout (cheap to clone into each future).
#[derive(Clone)]
pub struct Store {
    /// The S3 calls.
    pub client: Client,
    /// Bodies by key and ETag.
    pub cache: Arc<ContentCache>,
    /// The key layout.
    pub keys: ObjectKeys,
}

/// A path's state as read at one moment.
#[derive(Clone, Debug, Default)]
pub struct Now {
    /// The head object as stored: its ETag is the condition of the next
    /// change (`None`: the key holds nothing yet).
    pub head: Option<Head>,
    /// The version the path is at: a live, deleted or moved-away head (a
    /// pending head resolved to its new or prior one); `None` for nothing
    /// and for an absent head.
    pub state: Option<Head>,
    /// A Move onto the path not yet decided (then `state` is its prior).
    pub in_flight: Option<Box<Pending>>,
}

impl Now {
    /// The live file, if any.
    pub fn file(&self) -> Option<&Head> {
        self.state.as_ref().filter(|h| h.is_live())
    }

    /// Every version the path had is at most this: the next must exceed it.
    pub fn floor(&self) -> u64 {
        let head = self.head.as_ref().map_or(0, |h| h.meta.version);
        head.max(self.state.as_ref().map_or(0, |h| h.meta.version))
    }

    /// The change the path's state came from (the predecessor of the next).
    pub fn pos(&self) -> Position {
        self.state.as_ref().map_or(Position::NONE, |h| h.pos)
    }

    /// The conditional put that replaces the stored head.
    pub fn put_mode(&self) -> Put {
        match &self.head {
            Some(head) => Put::Replace(head.etag.clone()),
            None => Put::Create,
        }
    }
}

/// Reads the head at `key` through `cache`: the store answers (a change by
/// another server is seen at once), with only an ETag when the cached body
/// is still the current one.
pub async fn read_head(client: &Client, cache: &ContentCache, key: &str) -> Result<Option<Head>> {
    let cached = cache.current(key);
    let etag = cached.as_ref().map(|(etag, _)| etag.as_str());
    let (raw, etag) = match (client.get_unless(key, etag).await?, cached) {
        (None, _) => {
            cache.remove(key);
            return Ok(None);
        }
        (Some(Some(object)), _) => {
            cache.put(key, &object.etag, object.bytes.clone());
            (object.bytes, object.etag)
        }
        (Some(None), Some((etag, raw))) => (raw, etag),
        (Some(None), None) => {
            return Err(Error::Internal(format!(
                "{key}: the store answered 304 to a GET without If-None-Match"
            )));
        }
    };
    Head::decode(key, raw, etag).map(Some)
}

/// The head of a listed object, from the cache when the listing's ETag is
/// the cached one, else from the store (`None`: gone since the listing).
pub async fn listed_head(
    client: &Client,
    cache: &ContentCache,
    key: &str,
    etag: Option<&str>,
) -> Result<Option<Head>> {
    if let Some(etag) = etag
        && let Some(raw) = cache.get(key, etag)
    {
        return Head::decode(key, raw, etag.to_owned()).map(Some);
    }
    read_head(client, cache, key).await
}

/// Reads the head at `key` as a listing names it: through the cache at
/// `etag`, a pending move resolved (`None`: no live file there).
pub async fn listed_file(
    store: &Store,
    ns: &str,
    key: &str,
    etag: Option<&str>,
) -> Result<Option<Head>> {
    let head = listed_head(&store.client, &store.cache, key, etag).await?;
    if head.as_ref().is_some_and(Head::is_live) {
        return Ok(head);
    }
    Ok(store.resolve(ns, key, head).await?.file().cloned())
}

impl Store {
    /// What the path of head key `key` holds now, a pending head resolved
    /// by a read of its decider (readers never write: [`Store::resolve`]).
    pub async fn now(&self, ns: &str, key: &str) -> Result<Now> {
        let head = read_head(&self.client, &self.cache, key).await?;
        self.resolve(ns, key, head).await
    }

    /// [`Store::now`] of a head already read.
    pub async fn resolve(&self, ns: &str, key: &str, head: Option<Head>) -> Result<Now> {
        let mut head = head;
        for _ in 0..MAX_REREADS {
            let Some(current) = head else {
                return Ok(Now::default());
            };
            let State::Pending(pending) = &current.state else {
                let state = (current.state != State::Absent).then(|| current.clone());
                return Ok(Now {
                    head: Some(current),
                    state,
                    in_flight: None,
                });
            };
            let decided = match self.fate(ns, key, &current, pending).await? {
                Fate::Decided(decided) => decided,
                Fate::Replaced(again) => {
                    head = again;
                    continue;
                }
            };
            let pending = pending.clone();
            let (kept, in_flight) = match decided {
                Decided::Committed => (Some(pending.new.clone()), None),
                Decided::Aborted => (pending.prior.clone(), None),
                Decided::Undecided => (pending.prior.clone(), Some(pending)),
            };
            let state = match kept {
                Some(body) => Some(Head::decode(key, body, String::new())?),
                None => None,
            }
            .filter(|h| h.state != State::Absent);
            return Ok(Now {
                head: Some(current),
                state,
                in_flight,
            });
        }
        Err(Error::Unavailable(format!(
            "{key}: its head kept changing while it was read; try again"
        )))
    }

    /// The fate of the pending head `head` (holding `pending`) at `key`,
    /// from one read of its decider; or, when that says aborted but `head`
    /// is no longer there, what replaced it (resolve that instead).
    ///
    /// Committed and undecided are final as read: the source's moved-away
    /// head and its ETag before are each written once. "Aborted" is not: a
    /// move's source holds the evidence that it committed only until its
    /// destination is finished (a change of a moved-away source first
    /// finishes the move), so a source that changed after the commit reads
    /// as aborted to a reader that took the pending head before the finish.
    /// The destination tells them apart: while it still holds `head`, the
    /// move was never finished, so the source cannot have left its
    /// moved-away head, and the move did not commit.
    pub async fn fate(&self, ns: &str, key: &str, head: &Head, pending: &Pending) -> Result<Fate> {
        let source = self.decider(ns, pending)?;
        let source = read_head(&self.client, &self.cache, &source).await?;
        let decided = decide(pending, source.as_ref());
        if decided != Decided::Aborted {
            return Ok(Fate::Decided(decided));
        }
        let again = read_head(&self.client, &self.cache, key).await?;
        if again.as_ref().is_some_and(|h| h.etag == head.etag) {
            return Ok(Fate::Decided(Decided::Aborted));
        }
        Ok(Fate::Replaced(again))
    }

    /// What the path holds once any Move in flight onto it is decided, for
    /// a change about to replace its head: a young move is waited for and
    /// an old one stopped (`None` either way: read again after a pause); a
    /// moved-away head's move is finished at its destination first.
    pub async fn settle(&self, ns: &str, key: &str) -> Result<Option<Now>> {
        let now = self.now(ns, key).await?;
        if let Some(pending) = &now.in_flight {
            if age(pending.since) >= MOVE_GRACE {
                self.stop_move(ns, pending).await?;
            }
            return Ok(None);
        }
        if let Some(head) = &now.state
            && let State::MovedAway { move_id, to } = &head.state
        {
            self.finish_move(ns, *move_id, to).await?;
        }
        Ok(Some(now))
    }

    /// Makes sure the move `pending` never commits: its source is written
    /// again as it is (a new fence) while it still holds the ETag the move
    /// commits on.
    pub async fn stop_move(&self, ns: &str, pending: &Pending) -> Result<()> {
        let key = self.decider(ns, pending)?;
        if let Some(source) = read_head(&self.client, &self.cache, &key).await?
            && source.etag == pending.source_etag
        {
            self.fence(&key, &source).await?;
        }
        Ok(())
    }

    /// The key of the object whose conditional put decides `pending`: its
    /// move's source head, or its changeset's commit record.
    pub fn decider(&self, ns: &str, pending: &Pending) -> Result<String> {
        match &pending.source {
            Some(source) => self.keys.head(ns, source),
            None => self.keys.changeset(ns, pending.move_id),
        }
    }

    /// Writes `head` at `key` again as it is, under a new ETag, so a change
    /// conditional on its old ETag fails from now on.
    pub async fn fence(&self, key: &str, head: &Head) -> Result<bool> {
        let body = head::refenced(&head.body);
        let put = Put::Replace(head.etag.clone());
        let etag = self.client.put_exact(key, body.clone(), put).await?;
        if let Some(etag) = &etag {
            self.cache.put(key, etag, body);
        }
        Ok(etag.is_some())
    }

    /// Puts the committed move `move_id`'s new head in place of its pending
    /// head at `to`, if that is still there.
    pub async fn finish_move(&self, ns: &str, move_id: u64, to: &VfsPath) -> Result<()> {
        let key = self.keys.head(ns, to)?;
        let Some(head) = read_head(&self.client, &self.cache, &key).await? else {
            return Ok(());
        };
        if let State::Pending(pending) = &head.state
            && pending.move_id == move_id
        {
            self.put_head(&key, pending.new.clone(), Put::Replace(head.etag.clone()))
                .await?;
        }
        Ok(())
    }

    /// Puts the head `body` at `key` under `mode` (its own earlier write
    /// found again counts: [`Client::put_exact`]) and caches it; the new
    /// ETag, or `None` when the condition failed.
    pub async fn put_head(&self, key: &str, body: Bytes, mode: Put) -> Result<Option<String>> {
        let etag = self.client.put_exact(key, body.clone(), mode).await?;
        match &etag {
            Some(etag) => self.cache.put(key, etag, body),
            None => self.cache.remove(key),
        }
        Ok(etag)
    }
}

/// How many times [`Store::resolve`] reads a path's head again after it
/// changed under a pending head it was resolving (each time, another
/// change of the path landed: the limit only bounds a storm of them).
const MAX_REREADS: usize = 64;

/// What [`Store::fate`] found.
#[derive(Clone, Debug)]
pub enum Fate {
    /// The pending head's fate.
    Decided(Decided),
    /// The pending head was replaced while its decider was read: the head
    /// there now (resolve it instead).
    Replaced(Option<Head>),
}

/// The fate of a pending move, from its source's head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decided {
    /// The source holds the move's moved-away head.
    Committed,
    /// The source holds something else: the move never will commit, or
    /// it committed and its destination was finished since (only the
    /// destination's head tells: [`Store::fate`]).
    Aborted,
    /// The source still holds the ETag the move commits on.
    Undecided,
}

/// The fate of `pending` given its source's head now.
pub fn decide(pending: &Pending, source: Option<&Head>) -> Decided {
    match source {
        Some(head) if head.etag == pending.source_etag => Decided::Undecided,
        Some(head) => match &head.state {
            State::MovedAway { move_id, .. } if *move_id == pending.move_id => Decided::Committed,
            _ => Decided::Aborted,
        },
        None => Decided::Aborted,
    }
}

/// µs since the epoch, now.
pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// How long ago `micros` (µs since the epoch) was.
pub fn age(micros: u64) -> Duration {
    Duration::from_micros(now_micros().saturating_sub(micros))
}
