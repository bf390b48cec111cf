//! The server's own HTTP transport: the accept loop, each connection, and
//! what every call passes before and after the services (gRPC and `/mcp`).
//!
//! tonic's `Server` cannot reset one stalled call, buffer less per stream,
//! or tell which connection a call came on; this loop (hyper's, as tonic
//! runs it) can:
//!
//! - **A call whose client stops taking data is reset at once.** The response
//!   body is handed to HTTP/2 in pieces of [`PIECE_BYTES`], and [`Pace`]
//!   notes when a piece waits for the client to take it (room in its HTTP/2
//!   window, or in the TCP socket). One that waits longer than `[limits]
//!   stream_idle_timeout_seconds` ends the task serving the call: HTTP/2 sends
//!   RST_STREAM and drops the stream's buffered data, and the response with
//!   its queue (messages, HTTP/2 buffers) is freed. An HTTP/1 connection is
//!   closed instead. This is the one idle cut of every stream (ReadBytes,
//!   Watch, Grep, Glob, MCP) and of every large unary answer.
//! - **Memory is charged before it is held** ([`crate::service::Account`]):
//!   a body announced by `content-length` beyond what the caller may hold is
//!   refused unread, and each piece of a body is charged as it arrives.
//!   Everything a call charged comes back when its response is finished or
//!   reset.
//! - **Connections are bounded**: `max_connections` in all (more are closed
//!   as they arrive) and `max_connections_per_principal` for the calls of
//!   one principal (a call on one more is refused with RESOURCE_EXHAUSTED).
//! - **HTTP/2 buffers are bounded**: the receive windows
//!   (`http2_window_bytes`) bound what a client sends ahead, the send
//!   buffer (`http2_send_buffer_bytes`) what waits per stream.

use crate::auth::Auth;
use crate::error::{Error, Result};
use crate::service::{Account, BodyRefused, Limits};
use axum::body::Body;
use bytes::{Buf, Bytes};
use http::{Request, Response, header};
use http_body::Frame;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;
use tonic::Status;
use tower_service::Service as _;

/// Most bytes of a response handed to HTTP/2 at once. HTTP/2 takes a whole
/// piece as soon as the stream has room for one byte, so this is what can
/// stay buffered there after the call's task is gone.
pub const PIECE_BYTES: usize = 16 << 10;

/// The principal name of requests whose credentials do not identify one
/// (they are refused by the services; their bodies are still counted).
const UNIDENTIFIED: &str = "(unidentified)";

tokio::task_local! {
    /// The [`Pace`] of the call (HTTP/2 stream) or connection (HTTP/1)
    /// whose task is running.
    static PACE: Pace;
}

/// Whether a client takes what the server sends: the response notes when a
/// piece starts waiting for the client and when the client took it, and
/// [`Pace::stalled`] resolves once one waited longer than the idle timeout.
#[derive(Clone)]
pub struct Pace(Arc<PaceState>);

struct PaceState {
    idle: Duration,
    /// Since when the oldest untaken piece waits; `None`: nothing waits.
    waiting_since: Mutex<Option<Instant>>,
    started_waiting: Notify,
}

impl Pace {
    fn new(idle: Duration) -> Pace {
        Pace(Arc::new(PaceState {
            idle,
            waiting_since: Mutex::new(None),
            started_waiting: Notify::new(),
        }))
    }

    /// A piece now waits for the client (unless one already did).
    fn waiting(&self) {
        let mut since = self
            .0
            .waiting_since
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if since.is_none() {
            *since = Some(Instant::now());
            drop(since);
            self.0.started_waiting.notify_one();
        }
    }

    /// The client took what waited.
    fn taken(&self) {
        *self
            .0
            .waiting_since
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Resolves when a piece has waited for the client longer than the idle
    /// timeout.
    async fn stalled(&self) {
        loop {
            let since = *self
                .0
                .waiting_since
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match since {
                None => self.0.started_waiting.notified().await,
                Some(since) => {
                    let deadline = since + self.0.idle;
                    if Instant::now() >= deadline {
                        return;
                    }
                    // Taken meanwhile: the next check sees `None` or a
                    // later start.
                    tokio::time::sleep_until(deadline).await;
                }
            }
        }
    }
}

/// Runs `future` as the task of one call: with its [`Pace`] in scope, and
/// dropped (which resets an HTTP/2 stream) once the client stalls.
async fn paced<F: Future>(pace: Pace, future: F) {
    let watched = pace.clone();
    tokio::select! {
        _ = PACE.scope(pace, future) => {}
        () = watched.stalled() => {
            tracing::info!(
                idle_seconds = watched.0.idle.as_secs(),
                "the client took nothing for the idle timeout \
                 (stream_idle_timeout_seconds): call reset, its queued data dropped"
            );
        }
    }
}

/// hyper's executor for the tasks of HTTP/2 streams: each runs [`paced`].
#[derive(Clone)]
struct PacedExecutor {
    idle: Duration,
}

impl<F> hyper::rt::Executor<F> for PacedExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        tokio::spawn(paced(Pace::new(self.idle), future));
    }
}

/// The principals that made calls on one connection, counted server-wide
/// per principal; the count goes down when the connection closes.
#[derive(Clone)]
pub struct Connection(Arc<ConnectionState>);

struct ConnectionState {
    principals: Mutex<HashSet<String>>,
    registry: Arc<Registry>,
}

/// Connections per principal, server-wide.
struct Registry {
    max_per_principal: usize,
    by_owner: Mutex<HashMap<String, usize>>,
}

impl Connection {
    fn new(registry: Arc<Registry>) -> Connection {
        Connection(Arc::new(ConnectionState {
            principals: Mutex::default(),
            registry,
        }))
    }

    /// Counts this connection for `owner`, or refuses the call when `owner`
    /// already has its maximum of other connections.
    fn admit(&self, owner: &str) -> Result<()> {
        let state = &self.0;
        let mut principals = state.principals.lock().unwrap_or_else(|p| p.into_inner());
        if principals.contains(owner) {
            return Ok(());
        }
        let max = state.registry.max_per_principal;
        let mut by_owner = state
            .registry
            .by_owner
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let count = by_owner.entry(owner.to_owned()).or_default();
        if *count >= max {
            return Err(Error::OverLimit {
                limit: "max_connections_per_principal",
                message: format!(
                    "principal {owner:?} already makes calls on {max} connections, the server's \
                     max_connections_per_principal; reuse one (HTTP/2 carries many calls) or \
                     close one"
                ),
            });
        }
        *count += 1;
        principals.insert(owner.to_owned());
        Ok(())
    }
}

impl Drop for ConnectionState {
    fn drop(&mut self) {
        let principals = self.principals.get_mut().unwrap_or_else(|p| p.into_inner());
        let mut by_owner = self
            .registry
            .by_owner
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for owner in principals.drain() {
            if let Some(count) = by_owner.get_mut(&owner) {
                *count -= 1;
                if *count == 0 {
                    by_owner.remove(&owner);
                }
            }
        }
    }
}

/// The transport's view of the socket: a write the client does not take
/// (the socket full) waits on its [`Pace`].
struct PacedIo {
    io: TcpStream,
    pace: Pace,
}

impl PacedIo {
    fn note<T>(&self, poll: Poll<T>) -> Poll<T> {
        match poll {
            Poll::Pending => self.pace.waiting(),
            Poll::Ready(_) => self.pace.taken(),
        }
        poll
    }
}

impl AsyncRead for PacedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for PacedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        self.note(poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.note(poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_flush(cx);
        self.note(poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A request body charged to the call's account as it arrives.
struct MeteredBody {
    inner: Incoming,
    account: Account,
}

impl http_body::Body for MeteredBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, Self::Error>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        Poll::Ready(match frame {
            Some(Ok(frame)) => match frame
                .data_ref()
                .map(|data| self.account.charge(data.len() as u64, "the request body"))
            {
                Some(Err(error)) => Some(Err(Box::new(BodyRefused::new(error)))),
                _ => Some(Ok(frame)),
            },
            Some(Err(err)) => Some(Err(err.into())),
            None => None,
        })
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A response body handed to HTTP/2 in pieces of at most [`PIECE_BYTES`],
/// noting on the call's [`Pace`] when a piece waits for the client; it
/// keeps the call's account (what the call charged) until it is finished
/// or dropped.
struct PacedBody {
    inner: Body,
    rest: Bytes,
    pace: Option<Pace>,
    _account: Account,
}

impl PacedBody {
    fn piece(&mut self) -> Frame<Bytes> {
        let piece = self.rest.split_to(self.rest.len().min(PIECE_BYTES));
        if let Some(pace) = &self.pace {
            pace.waiting();
        }
        Frame::data(piece)
    }
}

impl http_body::Body for PacedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, axum::Error>>> {
        // Asked again: the client took the last piece.
        if let Some(pace) = &self.pace {
            pace.taken();
        }
        if self.rest.has_remaining() {
            return Poll::Ready(Some(Ok(self.piece())));
        }
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        Poll::Ready(match frame {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => {
                    self.rest = data;
                    Some(Ok(self.piece()))
                }
                Err(frame) => Some(Ok(frame)),
            },
            other => other,
        })
    }

    fn is_end_stream(&self) -> bool {
        !self.rest.has_remaining() && self.inner.is_end_stream()
    }

    /// The inner body's, so a whole answer keeps its `content-length`
    /// (HTTP/1 clients read up to it).
    fn size_hint(&self) -> http_body::SizeHint {
        let inner = self.inner.size_hint();
        let rest = self.rest.len() as u64;
        if let Some(exact) = inner.exact() {
            return http_body::SizeHint::with_exact(exact + rest);
        }
        let mut hint = http_body::SizeHint::new();
        hint.set_lower(inner.lower() + rest);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

impl Drop for PacedBody {
    fn drop(&mut self) {
        if let Some(pace) = &self.pace {
            pace.taken();
        }
    }
}

/// What every call passes before the services: the connection bound, the
/// memory account, the paced response.
#[derive(Clone)]
struct Gate {
    auth: Arc<Auth>,
    limits: Limits,
    router: axum::Router,
}

impl Gate {
    /// The principal `headers` authenticate, if any (the services check
    /// the rest of the credentials, and refuse a request without one).
    fn owner(&self, headers: &http::HeaderMap) -> Option<String> {
        let token = match headers.get(header::AUTHORIZATION) {
            None => None,
            Some(value) => Some(value.to_str().ok()?.strip_prefix("Bearer ")?),
        };
        let principal = self.auth.authenticate(token).ok()?;
        Some(principal.owner.clone())
    }

    async fn call(self, req: Request<Incoming>, connection: Connection) -> Response<Body> {
        let pace = PACE.try_with(Pace::clone).ok();
        let mcp = req.uri().path() == crate::mcp::http::PATH;
        let owner = self.owner(req.headers());
        if let Some(owner) = &owner
            && let Err(error) = connection.admit(owner)
        {
            return refusal(error, mcp);
        }
        let account = self
            .limits
            .memory()
            .account(owner.as_deref().unwrap_or(UNIDENTIFIED));
        let announced = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if let Some(length) = announced
            && let Err(error) = account.check(length, "the request body")
        {
            return refusal(error, mcp);
        }
        let (parts, body) = req.into_parts();
        let body = MeteredBody {
            inner: body,
            account: account.clone(),
        };
        let mut req = Request::from_parts(parts, Body::new(body));
        req.extensions_mut().insert(account.clone());
        let mut router = self.router;
        let ready = std::future::poll_fn(|cx| {
            tower_service::Service::<Request<Body>>::poll_ready(&mut router, cx)
        });
        let called = match ready.await {
            Ok(()) => router.call(req).await,
            Err(never) => match never {},
        };
        let response = match called {
            Ok(response) => response,
            Err(never) => match never {},
        };
        response.map(|inner| {
            Body::new(PacedBody {
                inner,
                rest: Bytes::new(),
                pace,
                _account: account,
            })
        })
    }
}

/// The answer to a call refused before the services saw it: a gRPC status,
/// or on `/mcp` an HTTP error ([`crate::mcp::http::over_limit`]).
fn refusal(error: Error, mcp: bool) -> Response<Body> {
    tracing::info!(cause = %error, "call refused");
    if mcp {
        crate::mcp::http::over_limit(&error)
    } else {
        Status::from(error).into_http()
    }
}

/// The connections open now: the accept loop's `max_connections` slots
/// taken. Cloning shares them, so the metrics read what the loop holds.
#[derive(Clone)]
pub struct OpenConnections {
    slots: Arc<Semaphore>,
    max: usize,
}

impl OpenConnections {
    /// Room for `max` connections (`max_connections`), none open.
    pub fn new(max: usize) -> OpenConnections {
        OpenConnections {
            slots: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// Connections open now (while shutting down, those still finishing).
    pub fn count(&self) -> usize {
        self.max.saturating_sub(self.slots.available_permits())
    }
}

/// How the accept loop serves.
pub struct Settings {
    /// The bounds (`[limits]`), with the memory budget.
    pub limits: Limits,
    /// Tokens, to count calls per principal.
    pub auth: Arc<Auth>,
    /// Also serve HTTP/1.1 (for `/mcp`); gRPC is HTTP/2 either way.
    pub http1: bool,
    /// How long open connections may take to finish once shutdown begins.
    pub grace: Duration,
    /// The connection slots, of `limits`' `max_connections`.
    pub connections: OpenConnections,
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets open
/// connections finish for at most `settings.grace`.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    settings: Settings,
    shutdown: impl Future<Output = ()>,
) {
    let config = *settings.limits.config();
    let idle = config.stream_idle_timeout;
    let mut builder = auto::Builder::new(PacedExecutor { idle });
    if !settings.http1 {
        builder = builder.http2_only();
    }
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(config.max_streams_per_connection)
        .initial_stream_window_size(config.http2_window_bytes)
        .initial_connection_window_size(config.http2_window_bytes)
        .max_send_buf_size(config.http2_send_buffer_bytes);
    // hyper enforces its HTTP/1 header timeout (30 s) only with a timer.
    builder.http1().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let gate = Gate {
        auth: settings.auth,
        limits: settings.limits,
        router,
    };
    let registry = Arc::new(Registry {
        max_per_principal: config.max_connections_per_principal,
        by_owner: Mutex::default(),
    });
    let (slots, max_connections) = (settings.connections.slots, settings.connections.max);
    let (stop, stopped) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(err) => {
                // Out of descriptors, most likely: let some close.
                tracing::warn!(cause = %err, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::info!(
                max_connections,
                "connection closed on arrival: the server has max_connections open"
            );
            continue;
        };
        // Nagle's algorithm off: a response larger than one segment would
        // otherwise wait for the client's delayed ACK (44 ms per call on a
        // 20-entry ListInfo).
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::warn!(cause = %err, "cannot set TCP_NODELAY");
        }
        let connection = Connection::new(registry.clone());
        let gate = gate.clone();
        let builder = builder.clone();
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let pace = Pace::new(idle);
            let io = TokioIo::new(PacedIo {
                io: tcp,
                pace: pace.clone(),
            });
            let service = hyper::service::service_fn(move |req| {
                let call = gate.clone().call(req, connection.clone());
                async move { Ok::<_, std::convert::Infallible>(call.await) }
            });
            let mut serving = pin!(builder.serve_connection(io, service));
            let mut stop_signal = pin!(stopped.changed());
            let mut stalled = pin!(pace.stalled());
            let mut draining = false;
            let ended = std::future::poll_fn(|cx| {
                if !draining && stop_signal.as_mut().poll(cx).is_ready() {
                    serving.as_mut().graceful_shutdown();
                    draining = true;
                }
                if stalled.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                PACE.sync_scope(pace.clone(), || serving.as_mut().poll(cx))
                    .map(Some)
            })
            .await;
            match ended {
                Some(Ok(())) => {}
                Some(Err(err)) => tracing::debug!(cause = %err, "connection ended"),
                None => tracing::info!(
                    idle_seconds = idle.as_secs(),
                    "the client took nothing for the idle timeout \
                     (stream_idle_timeout_seconds): connection closed"
                ),
            }
        });
    }
    // Stop accepting (the listener closes) and let connections finish.
    drop(listener);
    let _ = stop.send(true);
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    let drained = tokio::time::timeout(settings.grace, slots.acquire_many(all)).await;
    if drained.is_err() {
        tracing::warn!(
            grace_seconds = settings.grace.as_secs(),
            "stopping with connections still open: their clients stopped reading"
        );
    }
}
