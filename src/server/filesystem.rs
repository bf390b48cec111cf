//! The `agentvfs.v1.Filesystem` service: a thin adapter from gRPC to the
//! application layer ([`Service`]).
//!
//! Every RPC does, in order: take the [`crate::service::Caller`] attached by
//! the interceptor, parse the paths, make one service call (which checks the
//! grants in the order of docs/contract.md § Grants: path, grant, arguments,
//! existence, and runs the tier on a blocking thread), convert the result.
//! Errors leave only through `From<Error> for Status`.
//!
//! What stays here is transport: the streaming RPCs (ReadBytes, WriteBytes,
//! Grep, Glob) never let a thread wait on the client: ReadBytes
//! reads one chunk per blocking call as the client takes them, WriteBytes
//! waits for each message at most the idle timeout, and a search's sends are
//! bounded likewise (`crate::search`). Patterns compile on a blocking thread.

use super::caller::caller;
use super::convert;
use super::message_limit::too_large;
use crate::access::Op;
use crate::change::ChangeCursor;
use crate::entry::Entry;
use crate::error::{Error, Result};
use crate::path::MAX_PATH_BYTES;
use crate::path::VfsPath;
use crate::pb;
use crate::pb::filesystem_server::Filesystem;
use crate::search::{
    Budgets, EVENT_CHANNEL_CAPACITY, GrepRequest, Hit, MAX_BATCH_BYTES, SearchEvent, SearchSpec,
    compile_regex,
};
use crate::service::{
    ChunkReader, Precondition, Service, StreamPermit, WATCH_PAGE, WatchStart, Watcher, blocking,
};
use crate::text::diff::DiffCaps;
use crate::text::{self, EditSpec};
use std::pin::Pin;
use std::time::Duration;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

/// Bytes per ReadBytes message: large enough to amortise per-message cost,
/// far below the 4 MiB default a client accepts.
pub const READ_CHUNK_BYTES: usize = 1 << 20;

/// ReadBytes/WriteBytes pieces buffered between the network and the tier:
/// two keep both busy while bounding memory to a few MiB per stream.
const PIECES_IN_FLIGHT: usize = 2;

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

/// What a stream holds at most (`queued` messages of at most `message`
/// bytes, and those in the transport), charged to the caller when it starts.
fn stream_bytes(queued: usize, message: u64) -> u64 {
    (queued as u64 + MESSAGES_IN_TRANSPORT) * message
}

/// A boxed server stream.
pub type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// Serves the backend protocol over gRPC.
pub struct FilesystemService {
    service: Service,
    /// Cancelled when the server shuts down: open Watch streams end then
    /// (a Watch would otherwise hold the graceful shutdown forever).
    shutdown: CancellationToken,
}

impl FilesystemService {
    /// The RPCs over the application layer `service`; Watch streams end
    /// when `shutdown` is cancelled.
    pub fn new(service: Service, shutdown: CancellationToken) -> Self {
        FilesystemService { service, shutdown }
    }

    /// Edit and MultiEdit: applies `edits` to the file as one atomic
    /// read-modify-write. A single Edit reports errors without an edit index.
    /// Returns (path, replacements, new version).
    async fn edit_file(
        &self,
        caller: crate::service::Caller,
        raw_path: &str,
        if_version: Option<u64>,
        edits: Vec<pb::EditOperation>,
        indexed: bool,
    ) -> Result<(String, u64, u64)> {
        let path = VfsPath::parse(raw_path)?;
        let shown = path.to_string();
        let (version, made) = self
            .service
            .run(&caller, move |files| {
                // Order of docs/contract.md § Grants: path, grant, arguments.
                files.check(&path, Op::ReadFile)?;
                files.check(&path, Op::Write)?;
                if edits.is_empty() {
                    return Err(Error::InvalidArgument(
                        "edits must contain at least one edit".into(),
                    ));
                }
                if !indexed && edits[0].old_string.is_empty() {
                    return Err(Error::InvalidArgument(
                        "old_string must not be empty".into(),
                    ));
                }
                let specs: Vec<EditSpec<'_>> = edits
                    .iter()
                    .map(|e| EditSpec {
                        old: &e.old_string,
                        new: &e.new_string,
                        replace_all: e.replace_all,
                    })
                    .collect();
                files.edit_text(&path, if_version, false, |text, max| {
                    if indexed {
                        text::apply_edits(text, &specs, max)
                    } else {
                        text::apply_edit(text, &specs[0], max)
                    }
                })?
            })
            .await?;
        Ok((shown, made, version))
    }
}

fn search_root(raw: &str) -> Result<VfsPath> {
    VfsPath::parse(if raw.is_empty() { "/" } else { raw })
}

type Reply<T> = Result<Response<T>, Status>;

/// Budgets from a search request's fields.
fn budgets(
    max_results: u64,
    max_visited: u64,
    max_duration_ms: u64,
    include_hidden: bool,
    include_ignored: bool,
) -> Budgets {
    Budgets {
        max_results,
        max_visited,
        max_duration_ms,
        include_hidden,
        include_ignored,
    }
}

#[tonic::async_trait]
impl Filesystem for FilesystemService {
    async fn list_info(&self, req: Request<pb::ListInfoRequest>) -> Reply<pb::ListInfoResponse> {
        let caller = caller(&req)?;
        let dir = VfsPath::parse(&req.into_inner().path)?;
        let entries = self.service.list(&caller, dir).await?;
        Ok(Response::new(pb::ListInfoResponse {
            entries: entries.iter().map(convert::file_info).collect(),
        }))
    }

    async fn stat(&self, req: Request<pb::StatRequest>) -> Reply<pb::StatResponse> {
        let caller = caller(&req)?;
        let path = VfsPath::parse(&req.into_inner().path)?;
        let entry = self.service.stat(&caller, path).await?;
        Ok(Response::new(pb::StatResponse {
            info: Some(convert::file_info(&entry)),
        }))
    }

    async fn read(&self, req: Request<pb::ReadRequest>) -> Reply<pb::ReadResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        // An answer the server could not send is refused before it is built.
        let max_answer = super::max_answer_bytes(self.service.max_file_bytes());
        let out = self
            .service
            .run(&caller, move |files| {
                let (data, entry) = match req.version {
                    None => files.read(&path, Op::ReadFile)?,
                    Some(version) => {
                        let (data, found) = files.read_version(&path, version, Op::ReadFile)?;
                        (data, found.entry(path.clone()))
                    }
                };
                // The answer (numbered: up to about twice the text) and its
                // encoding, before it is built.
                files.charge(2 * data.len() as u64, "the Read answer")?;
                let window = text::read_window(
                    path.as_str(),
                    &data,
                    req.offset,
                    req.limit,
                    req.numbered,
                    max_answer,
                )?;
                Ok(pb::ReadResponse {
                    content: window.content,
                    total_lines: window.total_lines,
                    version: entry.version,
                    path: path.to_string(),
                    lines_returned: window.lines_returned,
                    lossy: window.lossy,
                    size: entry.size,
                    modified_time: Some(entry.modified.into()),
                })
            })
            .await?;
        Ok(Response::new(out))
    }

    type ReadBytesStream = ResponseStream<pb::ReadBytesResponse>;

    async fn read_bytes(&self, req: Request<pb::ReadBytesRequest>) -> Reply<Self::ReadBytesStream> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let (entry, chunks, permit) = self
            .service
            .read_chunks(&caller, path, req.version, READ_CHUNK_BYTES)
            .await?;
        let chunk = entry.size.min(READ_CHUNK_BYTES as u64);
        caller
            .account
            .charge(stream_bytes(PIECES_IN_FLIGHT, chunk), "a ReadBytes stream")?;
        Ok(Response::new(chunk_stream(entry, chunks, permit)))
    }

    async fn write(&self, req: Request<pb::WriteRequest>) -> Reply<pb::WriteResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let pre = Precondition {
            create_only: req.create_only,
            if_version: req.if_version,
        };
        let out = self
            .service
            .write(&caller, path, req.content.into_bytes(), pre)
            .await?;
        Ok(Response::new(convert::write_response(out)))
    }

    async fn write_bytes(
        &self,
        req: Request<Streaming<pb::WriteBytesRequest>>,
    ) -> Reply<pb::WriteBytesResponse> {
        use pb::write_bytes_request::Kind;
        let caller = caller(&req)?;
        let _permit = self.service.admit_stream(&caller)?;
        let idle = self.service.limits().idle_timeout();
        let mut stream = req.into_inner();
        let header = match next_message(&mut stream, idle).await? {
            Some(pb::WriteBytesRequest {
                kind: Some(Kind::Header(h)),
            }) => h,
            _ => {
                return Err(Error::InvalidArgument(
                    "the first WriteBytes message must be a header".into(),
                )
                .into());
            }
        };
        let path = VfsPath::parse(&header.path)?;
        let pre = Precondition {
            create_only: header.create_only,
            if_version: header.if_version,
        };
        // The tier takes the pieces on a blocking thread as they arrive; the
        // bounded channel keeps at most PIECES_IN_FLIGHT of them in memory.
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>>>(PIECES_IN_FLIGHT);
        let writer = self.service.upload(&caller, path, pre, rx)?;
        let feed = async move {
            loop {
                let piece = match next_message(&mut stream, idle).await {
                    // Dropping `tx` ends the pieces: the tier commits.
                    Ok(None) => return Ok(()),
                    Ok(Some(pb::WriteBytesRequest {
                        kind: Some(Kind::Data(chunk)),
                    })) => Ok(chunk),
                    Ok(Some(_)) => Err(Error::InvalidArgument(
                        "only the first WriteBytes message may be a header".into(),
                    )),
                    Err(err) => Err(err),
                };
                let failed = piece.as_ref().err().cloned();
                if tx.send(piece).await.is_err() {
                    // The tier stopped early (the size limit, a conflict):
                    // its error is the answer.
                    return Ok(());
                }
                if let Some(err) = failed {
                    // The tier aborts on the same error; nothing is written.
                    return Err(err);
                }
            }
        };
        let (fed, written) = tokio::join!(feed, writer);
        fed?;
        let o = written?;
        Ok(Response::new(pb::WriteBytesResponse {
            path: o.path.to_string(),
            bytes_written: o.bytes_written,
            version: o.version,
            created: o.created,
        }))
    }

    async fn edit(&self, req: Request<pb::EditRequest>) -> Reply<pb::EditResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let edit = pb::EditOperation {
            old_string: req.old_string,
            new_string: req.new_string,
            replace_all: req.replace_all,
        };
        let (path, replacements_made, version) = self
            .edit_file(caller, &req.path, req.if_version, vec![edit], false)
            .await?;
        Ok(Response::new(pb::EditResponse {
            path,
            replacements_made,
            version,
        }))
    }

    async fn multi_edit(&self, req: Request<pb::MultiEditRequest>) -> Reply<pb::MultiEditResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let (path, replacements_made, version) = self
            .edit_file(caller, &req.path, req.if_version, req.edits, true)
            .await?;
        Ok(Response::new(pb::MultiEditResponse {
            path,
            replacements_made,
            version,
        }))
    }

    async fn delete(&self, req: Request<pb::DeleteRequest>) -> Reply<pb::DeleteResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let shown = path.to_string();
        let files_deleted = self
            .service
            .delete(&caller, path, req.if_version, req.recursive)
            .await?;
        Ok(Response::new(pb::DeleteResponse {
            path: shown,
            files_deleted,
        }))
    }

    async fn r#move(&self, req: Request<pb::MoveRequest>) -> Reply<pb::MoveResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let source = VfsPath::parse(&req.source)?;
        let destination = VfsPath::parse(&req.destination)?;
        let (shown_source, shown_destination) = (source.to_string(), destination.to_string());
        let pre = Precondition {
            create_only: req.create_only,
            if_version: req.if_version,
        };
        let outcome = self
            .service
            .rename(&caller, source, destination, pre)
            .await?;
        Ok(Response::new(pb::MoveResponse {
            source: shown_source,
            destination: shown_destination,
            files_moved: outcome.files_moved,
            version: outcome.version,
        }))
    }

    async fn read_re(&self, req: Request<pb::ReadReRequest>) -> Reply<pb::ReadReResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let matches = self
            .service
            .run(&caller, move |files| {
                files.check(&path, Op::ReadRe)?;
                // Compiled here, off the runtime, and before the read: a bad
                // pattern is INVALID_ARGUMENT even for a missing file
                // (docs/contract.md § Grants).
                let re = compile_regex(&req.pattern)?;
                let (data, _) = files.read(&path, Op::ReadRe)?;
                // The matches (their size is capped) and their encoding.
                let answer = data.len().min(text::MAX_READ_RE_BYTES) as u64;
                files.charge(2 * answer, "the ReadRe answer")?;
                let decoded = text::decode(path.as_str(), &data)?;
                text::regex_windows(&decoded.text, &re, req.overlap.unwrap_or(0))
            })
            .await?;
        Ok(Response::new(pb::ReadReResponse { matches }))
    }

    type GrepStream = ResponseStream<pb::GrepResponse>;

    async fn grep(&self, req: Request<pb::GrepRequest>) -> Reply<Self::GrepStream> {
        use pb::grep_response::Result as Item;
        let caller = caller(&req)?;
        let req = req.into_inner();
        let root = search_root(&req.path)?;
        let budgets = budgets(
            req.max_results,
            req.max_visited,
            req.max_duration_ms,
            req.include_hidden,
            req.include_ignored,
        );
        caller
            .account
            .charge(SEARCH_STREAM_BYTES, "a search stream")?;
        let events = self
            .service
            .search(&caller, Op::ReadRe, true, move || {
                let grep = GrepRequest {
                    pattern: &req.pattern,
                    glob: &req.glob,
                    literal: req.literal,
                    case_insensitive: req.case_insensitive,
                    before_context: req.before_context,
                    after_context: req.after_context,
                    max_count_per_file: req.max_count_per_file,
                };
                SearchSpec::grep(root, grep, budgets)
            })
            .await?;
        Ok(Response::new(respond(
            events,
            |hits| pb::GrepResponse {
                result: Some(Item::Batch(convert::grep_batch(hits))),
            },
            |summary| pb::GrepResponse {
                result: Some(Item::Summary(summary)),
            },
        )))
    }

    type WatchStream = ResponseStream<pb::WatchResponse>;

    async fn watch(&self, req: Request<pb::WatchRequest>) -> Reply<Self::WatchStream> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let root = search_root(&req.path)?;
        let start = match (req.cursor.is_empty(), req.from_now) {
            (false, true) => {
                return Err(
                    Error::InvalidArgument("give cursor or from_now, not both".into()).into(),
                );
            }
            (false, false) => WatchStart::After(ChangeCursor::decode(&req.cursor)?),
            (true, true) => WatchStart::Now,
            (true, false) => WatchStart::Oldest,
        };
        // The page being sent, and its messages in flight.
        let page = (WATCH_PAGE * (2 * MAX_PATH_BYTES + 256)) as u64;
        let held = page + stream_bytes(WATCH_MESSAGES_IN_FLIGHT, WATCH_MESSAGE_BYTES as u64);
        caller.account.charge(held, "a Watch stream")?;
        let watcher = self
            .service
            .watch(&caller, root, start, req.stop_at_head)
            .await?;
        Ok(Response::new(watch_stream(watcher, self.shutdown.clone())))
    }

    async fn list_versions(
        &self,
        req: Request<pb::ListVersionsRequest>,
    ) -> Reply<pb::ListVersionsResponse> {
        let caller = caller(&req)?;
        let path = VfsPath::parse(&req.into_inner().path)?;
        let shown = path.to_string();
        let versions = self
            .service
            .run(&caller, move |files| files.versions(&path))
            .await?;
        Ok(Response::new(pb::ListVersionsResponse {
            path: shown,
            versions: versions.into_iter().map(convert::file_version).collect(),
        }))
    }

    async fn restore(&self, req: Request<pb::RestoreRequest>) -> Reply<pb::RestoreResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let restored_version = req.version;
        let out = self
            .service
            .run(&caller, move |files| {
                files.restore(&path, restored_version, req.if_version)
            })
            .await?;
        Ok(Response::new(pb::RestoreResponse {
            path: out.path.to_string(),
            version: out.version,
            restored_version,
            bytes_written: out.bytes_written,
            created: out.created,
        }))
    }

    async fn diff(&self, req: Request<pb::DiffRequest>) -> Reply<pb::DiffResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let shown = path.to_string();
        let out = self
            .service
            .run(&caller, move |files| {
                files.diff(&path, req.from_version, req.to_version, DiffCaps::WHOLE)
            })
            .await?;
        // A unified diff ends with a newline, as `diff -u` writes it.
        let mut diff = out.diff.text;
        if !diff.is_empty() {
            diff.push('\n');
        }
        Ok(Response::new(pb::DiffResponse {
            path: shown,
            from_version: out.from_version,
            to_version: out.to_version,
            diff,
            added: out.diff.added as u64,
            removed: out.diff.removed as u64,
            truncated: out.diff.truncated,
        }))
    }

    type GlobStream = ResponseStream<pb::GlobResponse>;

    async fn glob(&self, req: Request<pb::GlobRequest>) -> Reply<Self::GlobStream> {
        use pb::glob_response::Result as Item;
        let caller = caller(&req)?;
        let req = req.into_inner();
        let root = search_root(&req.path)?;
        let budgets = budgets(
            req.max_results,
            req.max_visited,
            req.max_duration_ms,
            req.include_hidden,
            req.include_ignored,
        );
        caller
            .account
            .charge(SEARCH_STREAM_BYTES, "a search stream")?;
        let events = self
            .service
            .search(&caller, Op::List, true, move || {
                SearchSpec::glob(root, &req.pattern, req.paths_only, budgets)
            })
            .await?;
        Ok(Response::new(respond(
            events,
            |hits| pb::GlobResponse {
                result: Some(Item::Batch(convert::glob_batch(hits))),
            },
            |summary| pb::GlobResponse {
                result: Some(Item::Summary(summary)),
            },
        )))
    }
}

/// A search's events as a gRPC response stream: batches and the summary as
/// messages, a failure as the stream's final status.
fn respond<T: Send + 'static>(
    events: ReceiverStream<SearchEvent>,
    batch: fn(Vec<Hit>) -> T,
    summary: fn(pb::SearchSummary) -> T,
) -> ResponseStream<T> {
    Box::pin(events.map(move |event| match event {
        SearchEvent::Batch(hits) => Ok(batch(hits)),
        SearchEvent::Summary(s) => Ok(summary(convert::summary(s))),
        SearchEvent::Failed(err) => Err(Status::from(err)),
    }))
}

/// ReadBytes' response: a task fetches one chunk per blocking call and hands
/// it over as the client takes them (at most PIECES_IN_FLIGHT waiting), so no
/// thread waits on the client. A client that takes nothing for the idle
/// timeout has its call reset by the transport (`src/server/transport.rs`),
/// which drops the queue; the task then ends with the reader and the permit.
fn chunk_stream(
    entry: Entry,
    chunks: ChunkReader,
    permit: StreamPermit,
) -> ResponseStream<pb::ReadBytesResponse> {
    let (tx, rx) = tokio::sync::mpsc::channel(PIECES_IN_FLIGHT);
    tokio::spawn(async move {
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
    });
    Box::pin(ReceiverStream::new(rx))
}

/// Watch's response: a task takes each message from the watcher and hands
/// it over as the client takes them (at most [`WATCH_MESSAGES_IN_FLIGHT`]
/// waiting, each at most [`WATCH_MESSAGE_BYTES`]). The watcher holds no
/// thread while it waits for changes; a client that takes nothing for the
/// idle timeout has its call reset by the transport, which drops the queue
/// (the client resumes from the last cursor it read), and one that leaves
/// stops the task at its next step. When the server shuts down the stream
/// ends with UNAVAILABLE naming the cursor to resume from (on this server
/// once it is back, or another).
fn watch_stream(
    mut watcher: Watcher,
    shutdown: CancellationToken,
) -> ResponseStream<pb::WatchResponse> {
    let (tx, rx) = tokio::sync::mpsc::channel(WATCH_MESSAGES_IN_FLIGHT);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<Status>();
    tokio::spawn(async move {
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
    Box::pin(ReceiverStream::new(rx).chain(stop))
}

/// A Watch page as messages of at most about [`WATCH_MESSAGE_BYTES`]: each
/// resumes after its last change, the last one after the whole page.
fn watch_messages(batch: crate::service::WatchBatch) -> Vec<pb::WatchResponse> {
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

/// The next message of a client stream, waiting at most `idle`; a stalled
/// stream is DEADLINE_EXCEEDED, an oversized message RESOURCE_EXHAUSTED.
async fn next_message<T>(stream: &mut Streaming<T>, idle: Duration) -> Result<Option<T>> {
    match tokio::time::timeout(idle, stream.message()).await {
        Ok(Ok(message)) => Ok(message),
        Ok(Err(status)) => Err(too_large(&status).unwrap_or_else(|| {
            Error::InvalidArgument(format!(
                "the WriteBytes stream failed: {}",
                status.message()
            ))
        })),
        Err(_) => Err(Error::Timeout(format!(
            "no WriteBytes message for {} s (the server's stream_idle_timeout_seconds); the \
             upload was aborted and nothing was written",
            idle.as_secs()
        ))),
    }
}
