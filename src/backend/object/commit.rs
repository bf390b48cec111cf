//! How every change of a head is committed (docs/object-storage.md §
//! Commit): the one place a head is replaced.
//!
//! A change reads the path's state ([`Now`]), decides its new head, and
//! then, at once and before anything is visible: writes its change-log
//! record (when the mount keeps a log), the successor mark of the change
//! it replaces (proof, for readers of the logs, that one committed), and the
//! version it replaces as a past version (when the mount keeps history).
//! Then one conditional put of the head, on the ETag it read (or
//! `If-None-Match` where no head was), decides the change: it happened, or
//! another change came first and nothing did. A put whose answer was lost
//! but which landed is found again ([`super::bucket::Client::put_exact`];
//! with a log, also by its successor mark once a later change replaced it).
//!
//! Invariants: a head is only ever replaced through [`ObjectBackend::commit`]
//! (or, for a Move, the same steps in `moves`); every record, mark and past
//! version is written before the put that makes it true.

use super::ObjectBackend;
use super::head::Head;
use super::keys::Position;
use super::log::{self, Intent};
use super::state::{Now, Store};
use crate::change::{ChangeKind, Origin};
use crate::error::Result;
use crate::path::VfsPath;
use bytes::Bytes;

/// One change of one file's head, decided and ready to commit.
pub struct Change<'a> {
    /// The namespace.
    pub ns: &'a str,
    /// The file.
    pub path: &'a VfsPath,
    /// Its head key.
    pub key: &'a str,
    /// The state it replaces, as read.
    pub now: &'a Now,
    /// What it does, for the change log.
    pub kind: ChangeKind,
    /// The file's new version.
    pub version: u64,
    /// The file's size after it.
    pub size: u64,
    /// Who makes it, and how.
    pub origin: &'a Origin,
    /// For a move: the other end.
    pub moved: Option<&'a VfsPath>,
}

impl Change<'_> {
    /// Its change-log record.
    pub fn intent(&self) -> Intent {
        Intent {
            kind: Some(self.kind),
            path: self.path.clone(),
            version: self.version,
            size: self.size,
            time: log::nanos_now(),
            prev: self.now.pos(),
            expected: self.now.head.as_ref().map(|h| h.etag.clone()),
            origin: self.origin.clone(),
            moved: self.moved.cloned(),
        }
    }
}

impl ObjectBackend {
    /// Commits `change` with the head `build` makes for its position;
    /// false when another change of the head came first (nothing happened).
    pub(super) fn commit(
        &self,
        change: &Change<'_>,
        build: impl Fn(Position) -> Bytes,
    ) -> Result<bool> {
        loop {
            let (pos, prune) = match &self.log {
                Some(log) => log.draw(change.ns),
                None => (Position::NONE, None),
            };
            let body = build(pos);
            let steps = Steps {
                store: self.store(),
                ns: change.ns.to_owned(),
                key: change.key.to_owned(),
                pos,
                intent: self.log.is_some().then(|| change.intent()),
                replaced: self.keep_replaced(change.ns, change.now.state.as_ref(), change.path)?,
                replaced_pos: change.now.pos(),
                body,
                mode: change.now.put_mode(),
            };
            let outcome = self.run("writing a file", steps.run())?;
            if let Some(through) = prune {
                self.prune_log(change.ns, through);
            }
            match outcome {
                Outcome::Voided => continue,
                Outcome::Lost => return Ok(false),
                Outcome::Won => {
                    self.feed.bump();
                    self.prune_history(change.ns, change.path);
                    return Ok(true);
                }
            }
        }
    }

    /// The past version to keep of `state` (the version a change of `path`
    /// replaces) when the mount keeps history: its key and body.
    pub(super) fn keep_replaced(
        &self,
        ns: &str,
        state: Option<&Head>,
        path: &VfsPath,
    ) -> Result<Option<(String, Bytes)>> {
        let Some(state) = state.filter(|_| self.keep.history.keeps_history()) else {
            return Ok(None);
        };
        let key = self.keys.version(ns, path, state.meta.version)?;
        Ok(Some((key, state.body.clone())))
    }
}

/// The requests of one commit attempt, run on the tier's runtime.
struct Steps {
    store: Store,
    ns: String,
    key: String,
    pos: Position,
    intent: Option<Intent>,
    replaced: Option<(String, Bytes)>,
    replaced_pos: Position,
    body: Bytes,
    mode: super::bucket::Put,
}

/// How one commit attempt ended.
enum Outcome {
    /// The head is ours.
    Won,
    /// Another change of the head came first.
    Lost,
    /// A reader voided the record's position before it was written: draw
    /// another and try again.
    Voided,
}

impl Steps {
    async fn run(self) -> Result<Outcome> {
        let Steps {
            store,
            ns,
            key,
            pos,
            intent,
            replaced,
            replaced_pos,
            body,
            mode,
        } = self;
        let record = async {
            match &intent {
                Some(intent) => log::write_record(&store, &ns, pos, intent).await,
                None => Ok(true),
            }
        };
        let mark = async {
            match &intent {
                Some(_) => log::mark_successor(&store, &ns, replaced_pos).await,
                None => Ok(()),
            }
        };
        let past = async {
            match &replaced {
                Some((key, body)) => store
                    .client
                    .put(key, body.clone(), super::bucket::Put::Overwrite)
                    .await
                    .map(|_| ()),
                None => Ok(()),
            }
        };
        let (recorded, (), ()) = futures_util::try_join!(record, mark, past)?;
        if !recorded {
            return Ok(Outcome::Voided);
        }
        if store.put_head(&key, body, mode).await?.is_some() {
            return Ok(Outcome::Won);
        }
        // The put failed its condition, or landed with its answer lost and
        // was replaced since: a successor mark of its position says so.
        if intent.is_some() {
            let mark = store.keys.successor(&ns, pos)?;
            if store.client.get(&mark).await?.is_some() {
                return Ok(Outcome::Won);
            }
        }
        Ok(Outcome::Lost)
    }
}
