//! Runs a search on a blocking thread and exposes its events as a stream.
//!
//! A search is admitted under the server's [`Limits`]: it takes one of the
//! `max_concurrent_searches` slots, and one of its principal's
//! `max_searches_per_principal`, before its thread starts and holds them
//! until its walk ends, just before its summary is sent, so a client that
//! has the summary finds the slot free again; the caller's stream permit,
//! if any, until the thread ends, which the idle timeout bounds even when
//! the client stops reading.

use super::limits::{Limits, StreamPermit};
use crate::access::{Op, Principal};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::{
    EVENT_CHANNEL_CAPACITY, Hit, SearchEvent, SearchPart, SearchRun, SearchSpec, Summary,
};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

/// Starts `spec` over every part of its root the principal may use `op` on,
/// in path order, under one budget; with `after`, only paths ordered after
/// it (a walk resumed from its last result). Fails at once when nothing is
/// visible or the server runs its maximum of searches. `stream` is the
/// caller's stream permit (None when the server itself consumes the
/// results, as the Tools do), held until the search ends.
#[allow(clippy::too_many_arguments)] // one search's inputs, each from a different owner
pub fn start(
    limits: &Limits,
    stream: Option<StreamPermit>,
    backend: Arc<dyn Backend>,
    principal: &Principal,
    op: Op,
    scope: Scope,
    spec: SearchSpec,
    after: Option<&VfsPath>,
) -> Result<ReceiverStream<SearchEvent>> {
    // Strictly after `after`: its own key followed by NUL sorts above it and
    // below everything else after it (docs/architecture.md, order keys).
    let lo = after.map(|path| {
        let mut key = path.order_key();
        key.push(0);
        key
    });
    let tops = principal.granted_within(&spec.root, op);
    if tops.is_empty() {
        principal.check(&spec.root, op)?;
    }
    let slot = limits.search(principal)?;
    let idle_timeout = limits.idle_timeout();
    let (tx, rx) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
    // When only parts of the root are granted, a granted prefix that does
    // not exist is simply empty: the root the caller named does exist.
    let partial = tops.first() != Some(&spec.root);
    tokio::task::spawn_blocking(move || {
        let _stream = stream;
        let run = SearchRun::new(spec, tx, idle_timeout);
        let mut outcome = Ok(());
        for top in tops {
            if run.should_stop() {
                break;
            }
            let mut part = SearchPart::whole(top.clone());
            if let Some(lo) = &lo {
                if *lo >= part.hi {
                    continue;
                }
                part.lo = part.lo.max(lo.clone());
            }
            match backend.search(&scope, &run, &part) {
                Ok(()) => {}
                Err(Error::NotFound(_)) if partial => {}
                Err(err) if !partial => {
                    outcome = Err(err);
                    break;
                }
                Err(err) => run.problem(top.as_str(), err),
            }
        }
        // Freed before the summary is sent: a client starting its next
        // search as soon as it has this one's answer, on a server running
        // its maximum, was refused while this thread still ended
        // (`concurrent_greps_of_huge_files_are_bounded` in tests/it).
        drop(slot);
        run.finish(outcome);
    });
    Ok(ReceiverStream::new(rx))
}

/// Collects a search's hits and summary (the Tools render them whole). The
/// spec's `max_results` bounds the memory this takes.
pub async fn collect(mut events: ReceiverStream<SearchEvent>) -> Result<(Vec<Hit>, Summary)> {
    let mut hits = Vec::new();
    while let Some(event) = events.next().await {
        match event {
            SearchEvent::Batch(batch) => hits.extend(batch),
            SearchEvent::Summary(summary) => return Ok((hits, summary)),
            SearchEvent::Failed(err) => return Err(err),
        }
    }
    Err(Error::Internal("search ended without a summary".into()))
}
