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
//!   `default`;
//! - bounds: at most `[mcp] max_sessions` live sessions (an `initialize`
//!   beyond it is HTTP 503), each closed after `session_idle_timeout_seconds`
//!   unused; request bodies up to the gRPC message limit, received within
//!   the stream idle timeout (HTTP 413, 408); `Host` checked against
//!   `allowed_hosts` (DNS rebinding). Request headers must arrive within
//!   30 s (hyper's HTTP/1 header timeout).
//!
//! The server's shutdown cancels every session and stream, so a client
//! holding an event stream open never delays it.

use super::{Identity, McpServer};
use crate::auth::Auth;
use crate::config::McpConfig;
use crate::error::Error;
use crate::service::{Caller, Credentials, NAMESPACE_HEADER, SESSION_HEADER, Service};
use crate::tools::Tools;
use axum::body::Body;
use futures_util::future::BoxFuture;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer};
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

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
    auth: Arc<Auth>,
    max_sessions: usize,
    max_body_bytes: usize,
    body_timeout: Duration,
}

/// What stops the endpoint: cancelling it ends every session and stream.
pub type Shutdown = tokio_util::sync::CancellationToken;

impl McpHttp {
    /// The endpoint over `tools` and `service`, accepting request bodies up
    /// to `max_body_bytes` that arrive within `body_timeout`, and the handle
    /// that shuts it down.
    pub fn new(
        tools: Tools,
        service: Service,
        auth: Arc<Auth>,
        config: &McpConfig,
        max_body_bytes: usize,
        body_timeout: Duration,
    ) -> (McpHttp, Shutdown) {
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = Some(config.session_idle_timeout);
        let sessions = Arc::new(sessions);
        let http_config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(config.allowed_hosts.clone())
            .with_json_response(true)
            .with_max_request_body_bytes(max_body_bytes);
        let shutdown = http_config.cancellation_token.clone();
        let server = McpServer::new(tools, service, Identity::PerRequest);
        let inner =
            StreamableHttpService::new(move || Ok(server.clone()), sessions.clone(), http_config);
        let endpoint = McpHttp {
            inner,
            sessions,
            auth,
            max_sessions: config.max_sessions,
            max_body_bytes,
            body_timeout,
        };
        (endpoint, shutdown)
    }

    /// Authenticates `req` and applies the session bound; the response that
    /// refuses it, if any.
    async fn admit(&self, req: &mut Request<Body>) -> Result<(), Response<Body>> {
        let headers = req.headers();
        let text = |key: &str| -> Result<Option<&str>, Error> {
            match headers.get(key) {
                None => Ok(None),
                Some(v) => v.to_str().map(Some).map_err(|_| {
                    Error::InvalidArgument(format!("header {key} is not printable ASCII"))
                }),
            }
        };
        let caller = (|| {
            let mcp_session = text(MCP_SESSION_HEADER)?;
            let credentials = Credentials {
                authorization: text(header::AUTHORIZATION.as_str())?,
                session: text(SESSION_HEADER)?.or(mcp_session),
                namespace: text(NAMESPACE_HEADER)?,
            };
            Caller::identify(&self.auth, credentials)
        })()
        .map_err(refusal)?;
        let opens_session =
            req.method() == http::Method::POST && !req.headers().contains_key(MCP_SESSION_HEADER);
        if opens_session && self.sessions.sessions.read().await.len() >= self.max_sessions {
            return Err(json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "too many MCP sessions: the server keeps at most {} ([mcp] max_sessions); \
                     close one (HTTP DELETE) or retry later",
                    self.max_sessions
                ),
            ));
        }
        req.extensions_mut().insert(caller);
        Ok(())
    }

    /// `req` with its body read whole: at most `max_body_bytes`, all of it
    /// within `body_timeout`, so a client that stalls mid-body is answered
    /// (408) and dropped instead of holding the request open for ever.
    async fn read_body(&self, req: Request<Body>) -> Result<Request<Body>, Response<Body>> {
        let (parts, body) = req.into_parts();
        let limited = http_body_util::Limited::new(body, self.max_body_bytes);
        match tokio::time::timeout(self.body_timeout, limited.collect()).await {
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
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "request body over {} bytes (the largest message, set by max_file_bytes)",
                    self.max_body_bytes
                ),
            )),
            Ok(Err(e)) => Err(json_error(
                StatusCode::BAD_REQUEST,
                format!("cannot read the request body: {e}"),
            )),
            Err(_) => Err(json_error(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "request body not received within {} s ([limits] stream_idle_timeout_seconds)",
                    self.body_timeout.as_secs()
                ),
            )),
        }
    }
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
            if let Err(refused) = this.admit(&mut req).await {
                return Ok(refused);
            }
            let req = match this.read_body(req).await {
                Ok(req) => req,
                Err(refused) => return Ok(refused),
            };
            let closes_session = req.method() == http::Method::DELETE;
            let mut inner = this.inner.clone();
            let mut response = tower_service::Service::call(&mut inner, req).await?;
            // A closed session has nothing to say: 204, which every client
            // reads as done (the SDK answers 202, which the Python SDK logs
            // as a failed termination).
            if closes_session && response.status() == StatusCode::ACCEPTED {
                *response.status_mut() = StatusCode::NO_CONTENT;
            }
            Ok(response.map(Body::new))
        })
    }
}

/// The caller [`McpHttp`] attached to the HTTP request `context` came in.
pub fn caller_of(context: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| {
            ErrorData::internal_error(
                "request reached the MCP server without passing authentication",
                None,
            )
        })
}
