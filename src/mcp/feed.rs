//! The change feed of a subscribing MCP client: a Watch of the service
//! ([`crate::service::Watcher`]) turned into `notifications/resources/updated`
//! for subscribed files and `notifications/resources/list_changed` for files
//! appearing or going (docs/mcp.md § Subscriptions).
//!
//! The Watcher already shows only changes at paths the caller may list, so
//! no notification names, or is caused by, a file outside its grants. It
//! waits on the tiers' signals, so a change is notified as soon as it is
//! committed, whichever front end made it.

use super::resources::uri_of;
use crate::change::ChangeKind;
use crate::error::Result;
use crate::path::VfsPath;
use crate::service::{WatchBatch, Watcher};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// What a committed change tells a subscribed client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// A subscribed file (its canonical URI) changed, appeared or went.
    Updated(String),
    /// Files under the listing's root appeared or went.
    ListChanged,
}

/// Sends the notices of each change `watcher` reports until the watch ends,
/// fails (the error is returned), or `send` says the client is gone (it
/// returns false). `uris` is the live subscription set; `listed`, when
/// given, is the root of `resources/list` whose changes are ListChanged.
pub async fn run<F, Fut>(
    mut watcher: Watcher,
    uris: Arc<Mutex<BTreeSet<String>>>,
    listed: Option<VfsPath>,
    mut send: F,
) -> Result<()>
where
    F: FnMut(Notice) -> Fut,
    Fut: Future<Output = bool>,
{
    while let Some(batch) = watcher.next().await? {
        let notices = {
            let uris = uris.lock().unwrap_or_else(|p| p.into_inner());
            notices(&batch, &uris, listed.as_ref())
        };
        for notice in notices {
            if !send(notice).await {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The notices of one Watch message: each subscribed file it touches once,
/// in path order, then one ListChanged if a file under `listed` appeared or
/// went (a move is both).
fn notices(batch: &WatchBatch, uris: &BTreeSet<String>, listed: Option<&VfsPath>) -> Vec<Notice> {
    let mut updated = BTreeSet::new();
    let mut list_changed = false;
    for (change, _) in &batch.changes {
        let uri = uri_of(&change.path);
        if uris.contains(&uri) {
            updated.insert(uri);
        }
        list_changed |= change.kind != ChangeKind::Modified
            && listed.is_some_and(|root| change.path.is_within(root));
    }
    let mut out: Vec<Notice> = updated.into_iter().map(Notice::Updated).collect();
    if list_changed {
        out.push(Notice::ListChanged);
    }
    out
}
