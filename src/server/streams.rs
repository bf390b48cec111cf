//! The streams of the `Filesystem` service, between its handlers and the
//! transport: the response streams of ReadBytes, Watch, Grep and Glob, and
//! the client stream of WriteBytes.
//!
//! No thread waits on a client. ReadBytes reads one chunk per blocking call
//! as the client takes them and Watch asks its watcher for one page at a
//! time, both through [`bounded`], a task feeding a queue of a fixed size;
//! a search's sends are bounded by its channel (`crate::search`). A client
//! that takes nothing for the idle timeout has its call reset by the
//! transport (`src/server/transport.rs`, the one idle cut of every response
//! stream), which drops the queue; a WriteBytes client that sends nothing
//! for it is cut by [`upload_messages`] through `Limits::from_client`, the
//! one bound on waiting for a client's request (MCP bodies take it too).
//! Each stream charges what it holds at most to the caller when it starts.

use super::convert;
use super::message_limit::too_large;
use crate::entry::Entry;
use crate::error::{Error, Result};
use crate::path::MAX_PATH_BYTES;
use crate::pb;
use crate::search::{EVENT_CHANNEL_CAPACITY, MAX_BATCH_BYTES, SearchEvent};
use crate::service::{
    Caller, ChunkReader, Limits, PIECES_IN_FLIGHT, StreamPermit, WATCH_PAGE, WatchBatch, Watcher,
    blocking,
};
use std::future::Future;
use std::pin::Pin;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::{Status, Streaming};

/// Bytes per ReadBytes message: large enough to amortise per-message cost,
/// far below the 4 MiB default a client accepts.
pub const READ_CHUNK_BYTES: usize = 1 << 20;

/// Watch messages queued for a client: a few, so a reader that keeps up
/// never waits on the next page, and one that stalls holds little.
const WATCH_MESSAGES_IN_FLIGHT: usize = 4;

/// About the most bytes of changes one Watch message carries: a page of
/// changes with long paths is sent as several.
const WATCH_MESSAGE_BYTES: usize = 256 << 10;

/// Messages of a stream the transport may hold besides its queue: one being
/// encoded, one handed to HTTP/2 and waiting for room, one in the encoder's
/// buffer (`src/server/transport.rs` sends them on in small pieces).
const MESSAGES_IN_TRANSPORT: u64 = 3;

/// What a Grep or Glob stream holds at most: its batches in the channel and
/// in the transport.
const SEARCH_STREAM_BYTES: u64 =
    ((EVENT_CHANNEL_CAPACITY as u64) + MESSAGES_IN_TRANSPORT) * MAX_BATCH_BYTES as u64;

/// What a Watch stream holds at most: the page being sent, and its
/// messages in flight.
const WATCH_STREAM_BYTES: u64 = (WATCH_PAGE * (2 * MAX_PATH_BYTES + 256)) as u64
    + stream_bytes(WATCH_MESSAGES_IN_FLIGHT, WATCH_MESSAGE_BYTES as u64);

/// What a stream holds at most (`queued` messages of at most `message`
/// bytes, and those in the transport), charged to the caller when it starts.
pub(super) const fn stream_bytes(queued: usize, message: u64) -> u64 {
    (queued as u64 + MESSAGES_IN_TRANSPORT) * message
}

/// Charges `caller` for what a Grep or Glob stream holds at most, before
/// the search starts (RESOURCE_EXHAUSTED when its memory is spent).
pub fn charge_search(caller: &Caller) -> Result<()> {
    caller
        .account
        .charge(SEARCH_STREAM_BYTES, "a search stream")
}

/// Charges `caller` for what a Watch stream holds at most, before the
/// watcher starts (RESOURCE_EXHAUSTED when its memory is spent).
pub fn charge_watch(caller: &Caller) -> Result<()> {
    caller.account.charge(WATCH_STREAM_BYTES, "a Watch stream")
}

/// A boxed server stream.
pub type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// A response stream fed by `produce`, a task spawned now that sends its
/// messages into a queue of `capacity`: the one pattern of the streams
/// that read as the client takes (ReadBytes, Watch). The task waits while
/// the queue is full, so a slow client holds at most `capacity` messages;
/// a client gone, or reset by the transport's idle cut, drops the queue, and
/// the task's next send fails (or `closed()` resolves) and it ends.
pub(super) fn bounded<T, F, Fut>(capacity: usize, produce: F) -> ResponseStream<T>
where
    T: Send + 'static,
    F: FnOnce(mpsc::Sender<Result<T, Status>>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(capacity);
    tokio::spawn(produce(tx));
    Box::pin(ReceiverStream::new(rx))
}

/// A search's events as a gRPC response stream, each event one message
/// (`message`: a batch or the summary, a failure as the final status).
pub fn search<T: Send + 'static>(
    events: ReceiverStream<SearchEvent>,
    message: fn(SearchEvent) -> Result<T, Status>,
) -> ResponseStream<T> {
    Box::pin(events.map(message))
}

/// ReadBytes' response, charged to `caller`: a task fetches one chunk per
/// blocking call and hands it over as the client takes them (at most
/// PIECES_IN_FLIGHT waiting); it ends with the reader and the permit when
/// the file is sent, on an error, or when the client is gone or reset.
pub fn chunks(
    caller: &Caller,
    entry: Entry,
    chunks: ChunkReader,
    permit: StreamPermit,
) -> Result<ResponseStream<pb::ReadBytesResponse>> {
    let chunk = entry.size.min(READ_CHUNK_BYTES as u64);
    caller
        .account
        .charge(stream_bytes(PIECES_IN_FLIGHT, chunk), "a ReadBytes stream")?;
    Ok(bounded(PIECES_IN_FLIGHT, |tx| async move {
        let _permit = permit;
        let mut info = Some(convert::file_info(&entry));
        let mut reader = Some(chunks);
        while let Some(mut chunks) = reader.take() {
            let next = blocking(move || {
                let piece = chunks.next();
                Ok((chunks, piece))
            })
            .await;
            let piece = match next {
                Ok((rest, Some(piece))) => {
                    if piece.is_ok() {
                        reader = Some(rest);
                    }
                    piece
                }
                Ok((_, None)) => return,
                Err(err) => Err(err),
            };
            let msg = piece
                .map_err(Status::from)
                .map(|data| pb::ReadBytesResponse {
                    data,
                    info: info.take(),
                });
            // After an error `reader` is None: that was the last. A client
            // gone (or reset) drops `reader` with the task.
            if tx.send(msg).await.is_err() {
                return;
            }
        }
    }))
}

/// Watch's response: a task takes each message from the watcher and hands
/// it over as the client takes them (at most [`WATCH_MESSAGES_IN_FLIGHT`]
/// waiting, each at most [`WATCH_MESSAGE_BYTES`]). The watcher holds no
/// thread while it waits for changes; a client reset by the transport
/// resumes from the last cursor it read, and one that leaves stops the task
/// at its next step. When the server shuts down the stream ends with
/// UNAVAILABLE naming the cursor to resume from (on this server once it is
/// back, or another).
pub fn watch(
    mut watcher: Watcher,
    shutdown: CancellationToken,
) -> ResponseStream<pb::WatchResponse> {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<Status>();
    let messages = bounded(WATCH_MESSAGES_IN_FLIGHT, |tx| async move {
        loop {
            let next = tokio::select! {
                next = watcher.next() => next,
                () = tx.closed() => return,
                () = shutdown.cancelled() => {
                    // After what the client has not read yet, never waiting
                    // on it: shutdown does not wait for a silent client.
                    let stop = Error::Unavailable(format!(
                        "the server is shutting down; resume from cursor {}",
                        watcher.cursor()
                    ));
                    let _unread = stop_tx.send(stop.into());
                    return;
                }
            };
            let messages = match next {
                Ok(Some(batch)) => watch_messages(batch).into_iter().map(Ok).collect(),
                Ok(None) => return,
                Err(err) => vec![Err(Status::from(err))],
            };
            for message in messages {
                let last = message.is_err();
                if tx.send(message).await.is_err() || last {
                    return;
                }
            }
        }
    });
    let stop = futures_util::stream::once(stop_rx).filter_map(|stop| stop.ok().map(Err));
    Box::pin(messages.chain(stop))
}

/// A Watch page as messages of at most about [`WATCH_MESSAGE_BYTES`]: each
/// resumes after its last change, the last one after the whole page.
fn watch_messages(batch: WatchBatch) -> Vec<pb::WatchResponse> {
    let mut messages = Vec::new();
    let (mut events, mut bytes) = (Vec::new(), 0);
    for (change, cursor) in batch.changes {
        let event = convert::change_event(change, cursor);
        bytes += prost::Message::encoded_len(&event);
        events.push(event);
        if bytes >= WATCH_MESSAGE_BYTES {
            let cursor = events.last().map(|e| e.cursor.clone()).unwrap_or_default();
            messages.push(pb::WatchResponse {
                events: std::mem::take(&mut events),
                cursor,
            });
            bytes = 0;
        }
    }
    if !events.is_empty() || messages.is_empty() {
        messages.push(pb::WatchResponse {
            events,
            cursor: batch.cursor,
        });
    } else if let Some(last) = messages.last_mut() {
        last.cursor = batch.cursor;
    }
    messages
}

/// The messages of a WriteBytes client stream, each waited for at most the
/// idle timeout ([`Limits::from_client`]): a stalled stream is
/// DEADLINE_EXCEEDED, an oversized message RESOURCE_EXHAUSTED, and the
/// stream ends after its first error.
pub fn upload_messages<T: Send + 'static>(
    stream: Streaming<T>,
    limits: Limits,
) -> impl Stream<Item = Result<T>> + Send + Unpin {
    Box::pin(futures_util::stream::unfold(Some(stream), move |stream| {
        let limits = limits.clone();
        async move {
            let mut stream = stream?;
            let failed = match limits.from_client(stream.message()).await {
                Ok(Ok(message)) => return Some((Ok(message?), Some(stream))),
                Ok(Err(status)) => too_large(&status).unwrap_or_else(|| {
                    Error::InvalidArgument(format!(
                        "the WriteBytes stream failed: {}",
                        status.message()
                    ))
                }),
                Err(idle) => Error::Timeout(format!(
                    "no WriteBytes message for {} s (the server's stream_idle_timeout_seconds); \
                         the upload was aborted and nothing was written",
                    idle.seconds
                )),
            };
            Some((Err(failed), None))
        }
    }))
}
