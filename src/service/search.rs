//! Runs a search on a blocking thread and exposes its events as a stream.
//!
//! A search is admitted under the server's [`Limits`]: it takes one of the
//! `max_concurrent_searches` slots before its thread starts and holds it
//! (with the caller's stream permit, if any) until the thread ends, which the
//! idle timeout bounds even when the client stops reading.

use super::limits::{Limits, StreamPermit};
use crate::access::{Op, Principal};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::scope::Scope;
use crate::search::{
    EVENT_CHANNEL_CAPACITY, Hit, SearchEvent, SearchPart, SearchRun, SearchSpec, Summary,
};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

/// Starts `spec` over every part of its root the principal may use `op` on,
/// in path order, under one budget. Fails at once when nothing is visible
/// or the server runs its maximum of searches. `stream` is the caller's
/// stream permit (None when the server itself consumes the results, as the
/// Tools do), held until the search ends.
pub fn start(
    limits: &Limits,
    stream: Option<StreamPermit>,
    backend: Arc<dyn Backend>,
    principal: &Principal,
    op: Op,
    scope: Scope,
    spec: SearchSpec,
) -> Result<ReceiverStream<SearchEvent>> {
    let tops = principal.granted_within(&spec.root, op);
    if tops.is_empty() {
        principal.check(&spec.root, op)?;
    }
    let slot = limits.search()?;
    let idle_timeout = limits.idle_timeout();
    let (tx, rx) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
    // When only parts of the root are granted, a granted prefix that does
    // not exist is simply empty: the root the caller named does exist.
    let partial = tops.first() != Some(&spec.root);
    tokio::task::spawn_blocking(move || {
        let _held = (slot, stream);
        let run = SearchRun::new(spec, tx, idle_timeout);
        let mut outcome = Ok(());
        for top in tops {
            if run.should_stop() {
                break;
            }
            match backend.search(&scope, &run, &SearchPart::whole(top.clone())) {
                Ok(()) => {}
                Err(Error::NotFound(_)) if partial => {}
                Err(err) if !partial => {
                    outcome = Err(err);
                    break;
                }
                Err(err) => run.problem(top.as_str(), err),
            }
        }
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
