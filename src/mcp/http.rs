//! MCP over streamable HTTP, served at [`PATH`] on the gRPC listener.
//!
//! [`McpHttp`] sits in front of the SDK's `StreamableHttpService` and does
//! what the SDK leaves to its host:
//!
//! - authentication, per request: the `authorization: Bearer` token selects
//!   the principal exactly as on gRPC ([`Caller::identify`]); a request
//!   that fails it never reaches the SDK (HTTP 401, or 403 / 400), and the
//!   [`Caller`] of one that passes rides in its extensions to the handler;
//! - the State session: `x-agentvfs-session` when sent, else the MCP
//!   session id (`mcp-session-id`, protocol versions with sessions), else
//!   (the stateless protocol) `mcp:` and the client's declared name;
//! - sessions: at most `[mcp] max_sessions` live sessions (an
//!   `initialize` beyond it is HTTP 503), and at most
//!   `max_sessions_per_principal` of one principal (an `initialize` beyond
//!   it ends that principal's least recently used session), each closed
//!   after `session_idle_timeout_seconds`
//!   unused. A session belongs to the principal that opened it: another
//!   principal presenting its id gets HTTP 404, as for an unknown session;
//! - bounds: request bodies up to the gRPC message limit, received within
//!   the stream idle timeout (HTTP 413, 408), and within the caller's memory
//!   share and the server's budget (HTTP 413 and 503,
//!   `src/server/transport.rs` charges them); `Host` checked against
//!   `allowed_hosts` and `Origin`, when sent, against `allowed_origins`
//!   (HTTP 403: DNS rebinding). Request headers must arrive within 30 s
//!   (hyper's HTTP/1 header timeout).
//!
//! The server's shutdown cancels every session and stream, so a client
//! holding an event stream open never delays it.

use super::McpConfig;
use super::{Identity, McpServer};
use crate::auth::Auth;
use crate::error::Error;
use crate::service::{
    Account, BRANCH_HEADER, BodyRefused, Caller, Credentials, LABEL_HEADER, Limits,
    NAMESPACE_HEADER, SESSION_HEADER, Service,
};
use crate::tools::Tools;
use axum::body::Body;
use futures_util::future::BoxFuture;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// Where the endpoint is served.
pub const PATH: &str = "/mcp";
/// The MCP session header (protocol versions with sessions).
const MCP_SESSION_HEADER: &str = "mcp-session-id";

/// The `/mcp` endpoint: authentication and bounds in front of the SDK's
/// streamable HTTP service. Cloning is cheap (one per connection).
#[derive(Clone)]
pub struct McpHttp {
    inner: StreamableHttpService<McpServer, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
    owners: Arc<Mutex<Owners>>,
    auth: Arc<Auth>,
    max_sessions: usize,
    max_sessions_per_principal: usize,
    max_body_bytes: usize,
    /// Bounds the wait for a request's body (the idle timeout).
    limits: Limits,
}

/// Who opened each session and when it was last used, and the `initialize`
/// calls under way per principal (counted against its cap until their
/// session exists).
#[derive(Default)]
struct Owners {
    by_session: HashMap<String, Held>,
    opening: HashMap<String, usize>,
    /// Counts requests, to order sessions by their last use.
    uses: u64,
}

/// One live session: its principal, and the request count at its last use.
struct Held {
    owner: String,
    used: u64,
}

impl Owners {
    /// Forgets sessions the SDK no longer has (closed or expired).
    fn prune<V>(&mut self, live: &HashMap<Arc<str>, V>) {
        self.by_session
            .retain(|id, _| live.contains_key(id.as_str()));
    }

    /// Sessions `owner` holds or is opening.
    fn count(&self, owner: &str) -> usize {
        let held = self
            .by_session
            .values()
            .filter(|h| h.owner == owner)
            .count();
        held + self.opening.get(owner).copied().unwrap_or(0)
    }

    /// Marks `session` used now.
    fn touch(&mut self, session: &str) {
        self.uses += 1;
        if let Some(held) = self.by_session.get_mut(session) {
            held.used = self.uses;
        }
    }

    /// The session of `owner` used least recently, if it holds one.
    fn least_recent(&self, owner: &str) -> Option<String> {
        self.by_session
            .iter()
            .filter(|(_, h)| h.owner == owner)
            .min_by_key(|(_, h)| h.used)
            .map(|(id, _)| id.clone())
    }

    /// An `initialize` of `owner` ended, having opened `session` or not.
    fn opened(&mut self, owner: &str, session: Option<String>) {
        if let Some(opening) = self.opening.get_mut(owner) {
            *opening -= 1;
            if *opening == 0 {
                self.opening.remove(owner);
            }
        }
        if let Some(session) = session {
            self.uses += 1;
            let held = Held {
                owner: owner.to_owned(),
                used: self.uses,
            };
            self.by_session.insert(session, held);
        }
    }
}

/// The endpoint's live MCP sessions, as the SDK's session manager holds
/// them; cloning shares them, so the server's metrics read what `/mcp`
/// holds.
#[derive(Clone)]
pub struct Sessions(Arc<LocalSessionManager>);

impl Sessions {
    /// Sessions live now (opened and neither closed nor expired).
    pub async fn live(&self) -> usize {
        self.0.sessions.read().await.len()
    }
}

/// What stops the endpoint: cancelling it ends every session and stream.
pub type Shutdown = tokio_util::sync::CancellationToken;

impl McpHttp {
    /// The endpoint over `tools` and `service`, accepting request bodies up
    /// to `max_body_bytes` that arrive within the idle timeout of the
    /// service's limits, and the handle that shuts it down.
    pub fn new(
        tools: Tools,
        service: Service,
        auth: Arc<Auth>,
        config: &McpConfig,
        max_body_bytes: usize,
    ) -> (McpHttp, Shutdown) {
        let limits = service.limits().clone();
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = Some(config.session_idle_timeout);
        let sessions = Arc::new(sessions);
        let http_config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(config.allowed_hosts.clone())
            .with_allowed_origins(config.allowed_origins.clone())
            .enforce_origin_validation()
            .with_json_response(true)
            .with_max_request_body_bytes(max_body_bytes);
        let shutdown = http_config.cancellation_token.clone();
        let server = McpServer::new(tools, service, Identity::PerRequest, config.subscriptions);
        let inner = StreamableHttpService::new(
            move || Ok(server.for_session()),
            sessions.clone(),
            http_config,
        );
        let endpoint = McpHttp {
            inner,
            sessions,
            owners: Arc::default(),
            auth,
            max_sessions: config.max_sessions,
            max_sessions_per_principal: config.max_sessions_per_principal,
            max_body_bytes,
            limits,
        };
        (endpoint, shutdown)
    }

    /// The endpoint's live sessions, for the server's metrics.
    pub fn sessions(&self) -> Sessions {
        Sessions(self.sessions.clone())
    }

    /// Authenticates `req` and applies the session bounds; the caller and
    /// whether the request opens a session, or the response that refuses it.
    async fn admit(&self, req: &mut Request<Body>) -> Result<(Caller, bool), Response<Body>> {
        let headers = req.headers();
        let text = |key: &str| -> Result<Option<&str>, Error> {
            match headers.get(key) {
                None => Ok(None),
                Some(v) => v.to_str().map(Some).map_err(|_| {
                    Error::InvalidArgument(format!("header {key} is not printable ASCII"))
                }),
            }
        };
        let mcp_session = text(MCP_SESSION_HEADER).map_err(refusal)?;
        let named = text(SESSION_HEADER).map_err(refusal)?.or(mcp_session);
        let caller = (|| {
            let credentials = Credentials {
                authorization: text(header::AUTHORIZATION.as_str())?,
                session: named,
                namespace: text(NAMESPACE_HEADER)?,
                label: text(LABEL_HEADER)?,
                branch: text(BRANCH_HEADER)?,
            };
            Caller::identify(&self.auth, credentials)
        })()
        .map_err(refusal)?
        .with_account(req.extensions().get::<Account>());
        let owner = caller.principal.owner.as_str();
        if let Some(session) = mcp_session {
            let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
            if owners
                .by_session
                .get(session)
                .is_some_and(|h| h.owner != owner)
            {
                // As for an unknown session: its id tells nothing to others.
                return Err(json_error(
                    StatusCode::NOT_FOUND,
                    "Not Found: no MCP session with this id".into(),
                ));
            }
            owners.touch(session);
        }
        let opens_session = req.method() == http::Method::POST && mcp_session.is_none();
        if opens_session {
            self.make_room(owner).await?;
        }
        if named.is_none() {
            req.extensions_mut().insert(Unnamed);
        }
        req.extensions_mut().insert(caller.clone());
        Ok((caller, opens_session))
    }

    /// Counts a session `owner` is opening against the bounds. At its
    /// share (`max_sessions_per_principal`), its least recently used
    /// session is ended to make room: most clients never end their
    /// sessions (HTTP DELETE), and one whose session is gone gets 404 and
    /// initializes again, as the MCP spec has it. A server whose pool
    /// (`max_sessions`) is full of others' sessions refuses it, 503.
    async fn make_room(&self, owner: &str) -> Result<(), Response<Body>> {
        let ended = {
            let live = self.sessions.sessions.read().await;
            let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
            owners.prune(&live);
            let at_share = owners.count(owner) >= self.max_sessions_per_principal;
            let ended = if at_share {
                let Some(oldest) = owners.least_recent(owner) else {
                    // Its share is all sessions still opening.
                    return Err(json_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!(
                            "too many MCP sessions: principal {owner:?} is opening {} at once \
                             ([mcp] max_sessions_per_principal); retry when they are open",
                            self.max_sessions_per_principal
                        ),
                    ));
                };
                Some(oldest)
            } else {
                None
            };
            if live.len() - usize::from(ended.is_some()) >= self.max_sessions {
                return Err(json_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "too many MCP sessions: the server keeps at most {} ([mcp] \
                         max_sessions); close one (HTTP DELETE) or retry later",
                        self.max_sessions
                    ),
                ));
            }
            if let Some(oldest) = &ended {
                owners.by_session.remove(oldest);
            }
            *owners.opening.entry(owner.to_owned()).or_default() += 1;
            ended
        };
        if let Some(oldest) = ended {
            tracing::info!(
                principal = owner,
                session = oldest.as_str(),
                "ended the principal's least recently used MCP session to open one more \
                 ([mcp] max_sessions_per_principal)"
            );
            if let Err(e) = self
                .sessions
                .close_session(&Arc::from(oldest.as_str()))
                .await
            {
                tracing::warn!(session = oldest.as_str(), error = %e, "ending an MCP session");
            }
        }
        Ok(())
    }

    /// `req` with its body read whole: at most `max_body_bytes`, all of it
    /// within the idle timeout, so a client that stalls mid-body is answered
    /// (408) and dropped instead of holding the request open for ever.
    async fn read_body(&self, req: Request<Body>) -> Result<Request<Body>, Response<Body>> {
        let (parts, body) = req.into_parts();
        let limited = http_body_util::Limited::new(body, self.max_body_bytes);
        match self.limits.from_client(limited.collect()).await {
            Ok(Ok(collected)) => {
                let bytes = collected.to_bytes();
                // JSON that does not parse is a JSON-RPC parse error (-32700,
                // HTTP 400); the SDK would answer 415 with a bare text.
                // Checking costs one pass that allocates nothing.
                if parts.method == http::Method::POST
                    && let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes)
                {
                    return Err(json_rpc_error(
                        StatusCode::BAD_REQUEST,
                        -32700,
                        format!("Parse error: the request body is not JSON ({e})"),
                    ));
                }
                Ok(Request::from_parts(parts, Body::from(bytes)))
            }
            Ok(Err(e)) => {
                // The refusal comes wrapped (axum's body error around the
                // transport's): look for it along the chain of causes.
                let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&*e);
                while let Some(err) = cause {
                    if let Some(refused) = err.downcast_ref::<BodyRefused>() {
                        return Err(over_limit(&refused.error));
                    }
                    cause = err.source();
                }
                Err(self.unreadable(&*e))
            }
            Err(idle) => Err(json_error(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "request body not received within {} s ([limits] stream_idle_timeout_seconds)",
                    idle.seconds
                ),
            )),
        }
    }

    /// The answer to a body that could not be read (`e`: why).
    fn unreadable(&self, e: &(dyn std::error::Error + 'static)) -> Response<Body> {
        if e.is::<http_body_util::LengthLimitError>() {
            return json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "request body over {} bytes (the largest message, set by max_file_bytes)",
                    self.max_body_bytes
                ),
            );
        }
        json_error(
            StatusCode::BAD_REQUEST,
            format!("cannot read the request body: {e}"),
        )
    }
}

/// The HTTP answer to a request refused by a server limit: 413 when it
/// would take the caller past its memory share, else 503 (the server's
/// total, its connections): retry later.
pub fn over_limit(error: &Error) -> Response<Body> {
    let status = match error.kind() {
        Error::OverLimit {
            limit: "memory_bytes_per_principal",
            ..
        } => StatusCode::PAYLOAD_TOO_LARGE,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    json_error(status, error.to_string())
}

/// The HTTP answer to a request whose credentials are refused.
fn refusal(error: Error) -> Response<Body> {
    let status = match error.kind() {
        Error::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
        Error::PermissionDenied(_) => StatusCode::FORBIDDEN,
        _ => StatusCode::BAD_REQUEST,
    };
    let mut response = json_error(status, error.to_string());
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"agentvfs\""),
        );
    }
    response
}

/// A JSON-RPC error body for a request refused before it was read (no
/// request id), with the implementation-defined server error code.
fn json_error(status: StatusCode, message: String) -> Response<Body> {
    json_rpc_error(status, -32001, message)
}

/// A JSON-RPC error body with `code` (no request id: none was read).
fn json_rpc_error(status: StatusCode, code: i32, message: String) -> Response<Body> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": message },
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

impl tower_service::Service<Request<Body>> for McpHttp {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let (caller, opens_session) = match this.admit(&mut req).await {
                Ok(admitted) => admitted,
                Err(refused) => return Ok(refused),
            };
            let answered = this.answer(req).await;
            if opens_session {
                let session = answered
                    .headers()
                    .get(MCP_SESSION_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let mut owners = this.owners.lock().unwrap_or_else(|p| p.into_inner());
                owners.opened(&caller.principal.owner, session);
            }
            Ok(answered)
        })
    }
}

impl McpHttp {
    /// The SDK's answer to an admitted request.
    async fn answer(&self, req: Request<Body>) -> Response<Body> {
        let req = match self.read_body(req).await {
            Ok(req) => req,
            Err(refused) => return refused,
        };
        let closes_session = req.method() == http::Method::DELETE;
        let mut inner = self.inner.clone();
        let mut response = match tower_service::Service::call(&mut inner, req).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        // A closed session has nothing to say: 204, which every client
        // reads as done (the SDK answers 202, which the Python SDK logs
        // as a failed termination).
        if closes_session && response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        response.map(Body::new)
    }
}

/// Marks a request that named no State session: neither
/// `x-agentvfs-session` nor an MCP session id (the stateless protocol).
#[derive(Clone, Copy)]
struct Unnamed;

/// The MCP session id of the HTTP request `context` came in (`None` on
/// stdio, or before `initialize` gave one), for its audit record.
pub fn session_of(context: &RequestContext<RoleServer>) -> Option<String> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    let id = parts.headers.get(MCP_SESSION_HEADER)?.to_str().ok()?;
    Some(id.to_owned())
}

/// The caller [`McpHttp`] attached to the HTTP request `context` came in.
/// A request that named no State session gets the one of the client
/// program it declares (docs/mcp.md § Who calls, and which session).
pub fn caller_of(context: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
    let parts = context.extensions.get::<http::request::Parts>();
    let mut caller = parts
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| {
            ErrorData::internal_error(
                "request reached the MCP server without passing authentication",
                None,
            )
        })?;
    let unnamed = parts.is_some_and(|parts| parts.extensions.get::<Unnamed>().is_some());
    if unnamed && let Some(client) = context.meta.client_info() {
        caller.scope.session = client_session(&client.name);
    }
    Ok(caller)
}

/// The State session of a stateless client that names none: `mcp:` and
/// the name its `clientInfo` declares, each character a session name cannot
/// hold replaced by `-`, so two agent programs never share scratch files.
fn client_session(name: &str) -> String {
    let keep = |c: char| c.is_ascii_alphanumeric() || "-_.@+~".contains(c);
    let cleaned: String = name
        .chars()
        .map(|c| if keep(c) { c } else { '-' })
        .take(crate::scope::MAX_SCOPE_NAME - 4)
        .collect();
    format!(
        "mcp:{}",
        if cleaned.is_empty() {
            "client"
        } else {
            &cleaned
        }
    )
}

#[cfg(test)]
mod tests {
    use super::client_session;
    use crate::scope::Scope;

    #[test]
    fn client_sessions_are_valid_session_names() {
        assert_eq!(client_session("claude-code"), "mcp:claude-code");
        assert_eq!(client_session("My Agent/1 é"), "mcp:My-Agent-1--");
        assert_eq!(client_session(""), "mcp:client");
        let long = client_session(&"x".repeat(500));
        assert_eq!(long.len(), crate::scope::MAX_SCOPE_NAME);
        for name in ["claude-code", "My Agent/1 é", "", &"x".repeat(500)] {
            Scope::check_name("session", &client_session(name)).unwrap();
        }
    }
}
