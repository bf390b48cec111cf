//! The change feed for every front end (docs/contract.md § Changes and
//! history): a [`Watcher`] reads the change logs under a path page by page,
//! shows the caller only the changes at paths it may list, and waits for new
//! ones on the tiers' signals, holding no thread while it waits.
//!
//! Where it sits: a front end starts one with [`super::Service::watch`] and
//! calls [`Watcher::next`] for each message, sending it on with its own
//! bound on a slow client (the gRPC adapter cuts one that takes nothing for
//! the idle timeout). Memory is one page per watcher, whatever the backlog:
//! a watcher that falls behind reads the log later, and one that falls
//! behind the log's retention gets FAILED_PRECONDITION naming the oldest
//! cursor still available.

use super::{Caller, StreamPermit, blocking};
use crate::access::Op;
use crate::backend::Backend;
use crate::change::{Change, ChangeCursor, LogPosition};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Changes read from the logs per page (before the grant filter): one
/// message of at most a few hundred KiB.
pub const WATCH_PAGE: usize = 256;

/// How long a watcher waits for a signal before it reads the logs again,
/// in case one was missed (a log can start over, a mount can come back).
const RECHECK_EVERY: Duration = Duration::from_secs(30);

/// Where a Watch starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchStart {
    /// Just after this cursor.
    After(ChangeCursor),
    /// At the head of every log: only changes committed from now on.
    Now,
    /// At the oldest change every log still holds.
    Oldest,
}

impl WatchStart {
    /// The start a request names: just after `cursor` (as a cursor encodes
    /// it; empty for none), at the head with `from_now`, else at the oldest
    /// change. A cursor and `from_now` together are INVALID_ARGUMENT.
    pub fn parse(cursor: &str, from_now: bool) -> Result<WatchStart> {
        match (cursor.is_empty(), from_now) {
            (false, true) => Err(Error::InvalidArgument(
                "give cursor or from_now, not both".into(),
            )),
            (false, false) => Ok(WatchStart::After(ChangeCursor::decode(cursor)?)),
            (true, true) => Ok(WatchStart::Now),
            (true, false) => Ok(WatchStart::Oldest),
        }
    }
}

/// One message of a Watch: the visible changes of a page, each with the
/// cursor that resumes after it, and the cursor after the whole page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchBatch {
    /// Changes the caller may see, in each log's commit order.
    pub changes: Vec<(Change, String)>,
    /// Resumes after everything the page covered, seen or passed over.
    pub cursor: String,
}

/// A running Watch of one caller under one path.
pub struct Watcher {
    backend: Arc<dyn Backend>,
    caller: Caller,
    root: VfsPath,
    cursor: ChangeCursor,
    stop_at_head: bool,
    signals: Vec<watch::Receiver<u64>>,
    /// True once the first message (the starting cursor) was given.
    started: bool,
    /// The stream's slot among the caller's streams, held while it runs.
    _permit: StreamPermit,
}

impl Watcher {
    /// A watcher from `cursor` (already resolved from its start).
    pub(super) fn new(
        backend: Arc<dyn Backend>,
        caller: Caller,
        root: VfsPath,
        cursor: ChangeCursor,
        stop_at_head: bool,
        permit: StreamPermit,
    ) -> Watcher {
        let mut signals = Vec::new();
        backend.change_signals(&root, &mut signals);
        Watcher {
            backend,
            caller,
            root,
            cursor,
            stop_at_head,
            signals,
            started: false,
            _permit: permit,
        }
    }

    /// The cursor after everything read so far.
    pub fn cursor(&self) -> String {
        self.cursor.encode()
    }

    /// The next message: first the starting cursor alone (so a client that
    /// loses its connection before any change still knows where it began),
    /// then each page of changes (which may hold none the caller may see,
    /// only a cursor that moved on), waiting for new changes when it has
    /// caught up; `None` when a `stop_at_head` watch has caught up. An
    /// expired cursor is FAILED_PRECONDITION.
    pub async fn next(&mut self) -> Result<Option<WatchBatch>> {
        if !self.started {
            self.started = true;
            return Ok(Some(WatchBatch {
                changes: Vec::new(),
                cursor: self.cursor(),
            }));
        }
        loop {
            for signal in &mut self.signals {
                signal.borrow_and_update();
            }
            let before = self.cursor.clone();
            let (backend, caller, root) =
                (self.backend.clone(), self.caller.clone(), self.root.clone());
            let mut cursor = self.cursor.clone();
            let (changes, cursor) = blocking(move || {
                let mut changes = backend.changes(&caller.scope, &root, &mut cursor, WATCH_PAGE)?;
                complete_changeset(&*backend, &caller, &root, &mut cursor, &mut changes)?;
                Ok((changes, cursor))
            })
            .await?;
            self.cursor = cursor;
            if !changes.is_empty() || self.cursor != before {
                return Ok(Some(self.batch(before, changes)));
            }
            if self.stop_at_head {
                return Ok(None);
            }
            self.wait().await;
        }
    }

    /// The message of a page read from `before`: the changes the caller may
    /// list, each with its own cursor; the other end of a move is named only
    /// where the caller may list it.
    fn batch(&self, before: ChangeCursor, changes: Vec<Change>) -> WatchBatch {
        let principal = &self.caller.principal;
        let mut at = before;
        let mut visible = Vec::new();
        for mut change in changes {
            move_past(&mut at, &change, &self.cursor);
            if principal.check(&change.path, Op::List).is_err() {
                continue;
            }
            if let Some(other) = &change.moved_path
                && principal.check(other, Op::List).is_err()
            {
                change.moved_path = None;
            }
            visible.push((change, at.encode()));
        }
        WatchBatch {
            changes: visible,
            cursor: self.cursor.encode(),
        }
    }

    /// Waits until a log under the root may have grown (or a while passed).
    async fn wait(&mut self) {
        if self.signals.is_empty() {
            tokio::time::sleep(RECHECK_EVERY).await;
            return;
        }
        let changed = self
            .signals
            .iter_mut()
            .map(|signal| Box::pin(signal.changed()));
        // A closed signal (its tier gone) resolves at once; the timeout
        // keeps that from spinning.
        let _ =
            tokio::time::timeout(RECHECK_EVERY, futures_util::future::select_all(changed)).await;
    }
}

/// Moves `cursor` just past `change`, in the log `read` (the cursor after
/// the page holding it) names: the page's own position names the log (its
/// epoch) the change was read from, which a position taken before a State
/// session existed does not.
fn move_past(cursor: &mut ChangeCursor, change: &Change, read: &ChangeCursor) {
    if change.shard != 0 {
        cursor.set_shard(&change.log, change.shard, change.seq);
    } else if let Some(read) = read.get(&change.log) {
        let position = LogPosition {
            epoch: read.epoch,
            seq: change.seq,
        };
        cursor.set(&change.log, position);
    }
}

/// Extends a page that ends inside a changeset with the rest of that
/// changeset, and `cursor` past it, so that one message carries a whole
/// changeset and a watcher never sees half of one. A changeset's changes
/// are consecutive in its log (each tier appends them in one step), so the
/// rest is the run of changes after the page's last one that carry its id,
/// read a page at a time: a message holds at most a page plus one
/// changeset (`changeset_max_operations` files, a move's two ends each).
fn complete_changeset(
    backend: &dyn Backend,
    caller: &Caller,
    root: &VfsPath,
    cursor: &mut ChangeCursor,
    changes: &mut Vec<Change>,
) -> Result<()> {
    while let Some(last) = changes.last().filter(|c| !c.origin.changeset.is_empty()) {
        let (id, log, shard) = (last.origin.changeset.clone(), last.log.clone(), last.shard);
        let mut ahead = cursor.clone();
        let more = backend.changes(&caller.scope, root, &mut ahead, WATCH_PAGE)?;
        let rest: Vec<Change> = more
            .into_iter()
            .filter(|c| c.log == log && c.shard == shard)
            .take_while(|c| c.origin.changeset == id)
            .collect();
        let Some(end) = rest.last() else {
            return Ok(());
        };
        move_past(cursor, end, &ahead);
        changes.extend(rest);
    }
    Ok(())
}

impl super::Service {
    /// Starts a Watch of the changes under `root` (`list` grant on `root`
    /// or on paths below it; each change is shown only where the caller
    /// holds `list`), admitted as one of the caller's streams. The start is
    /// checked now: a foreign or expired cursor, or a root where no mount
    /// keeps a change log, fails the call itself.
    pub async fn watch(
        &self,
        caller: &Caller,
        root: VfsPath,
        start: WatchStart,
        stop_at_head: bool,
    ) -> Result<Watcher> {
        caller.check_within(&root, Op::List)?;
        let permit = self.admit_stream(caller)?;
        let view = self.backend_for(caller).await?;
        let (backend, who, at) = (view.clone(), caller.clone(), root.clone());
        let cursor = blocking(move || {
            let mut cursor = ChangeCursor::default();
            match start {
                WatchStart::Now => backend.watch_head(&who.scope, &at, &mut cursor)?,
                WatchStart::Oldest | WatchStart::After(_) => {
                    if let WatchStart::After(after) = start {
                        cursor = after;
                    }
                    // Checks the cursor (foreign, expired, ahead) and that
                    // some log is there, and sets the position of every log
                    // the cursor lacks to its oldest change: every event
                    // then gets a cursor naming all the logs.
                    backend.changes(&who.scope, &at, &mut cursor, 0)?;
                }
            }
            Ok(cursor)
        });
        let cursor = cursor.await?;
        Ok(Watcher::new(
            view,
            caller.clone(),
            root,
            cursor,
            stop_at_head,
            permit,
        ))
    }
}
