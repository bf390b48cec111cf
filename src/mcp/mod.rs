//! The Model Context Protocol front end: the LLM tools and the files
//! as resources, for any MCP client (docs/mcp.md).
//!
//! A third adapter over the application layer, beside the gRPC services:
//! [`McpServer`] implements the SDK's (`rmcp`) `ServerHandler` by decoding
//! each MCP request, making one [`Tools`] or [`Service`] call, and encoding
//! the answer. It adds no file semantics of its own.
//!
//! - Tools: the names, descriptions and JSON Schemas of `ListTools`, with
//!   MCP annotations (LS, Glob, Grep, Read, BranchList and BranchDiff are
//!   read-only; the tools that change files are destructive, BranchCreate
//!   only adds a branch). A call answers with the
//!   envelope's `text` as text content (then a media Read's file as image
//!   content or an embedded resource), the whole envelope as
//!   `structuredContent`, and `isError` for error envelopes; the output budget and large-result eviction are the
//!   Tools' own.
//! - Resources: files under the caller's grants ([`resources`]), their
//!   changes notified to subscribers from the change feed
//!   ([`subscriptions`], [`feed`]: `resources/subscribe` on the protocol
//!   versions with sessions, `subscriptions/listen` on the stateless one),
//!   and their paths completed ([`completion`]).
//! - Logging: `logging/setLevel` and `notifications/message` for session
//!   clients ([`logging`]).
//! - Transports: streamable HTTP at `/mcp` on the gRPC listener ([`http`]),
//!   and stdio for a local agent (`agentvfs mcp`, [`stdio`]).
//!
//! Who calls: over HTTP every request carries its own credentials (the
//! bearer token selects the principal, as on gRPC); over stdio the process
//! runs as one caller fixed at start. [`Identity`] says which.

mod completion;
mod feed;
pub mod http;
mod logging;
mod resources;
pub mod stdio;
mod subscriptions;

use crate::audit::Surface;
use crate::error::Error;
use crate::path::VfsPath;
use crate::service::{Caller, Service, WatchStart};
use crate::tools::{Envelope, ToolName, Tools};
use feed::Notice;
use logging::Log;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ResourceContents, ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, Tool, ToolAnnotations, UnsubscribeRequestParams,
};
use rmcp::service::{Peer, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use subscriptions::{Ledger, Subscribed, Subscriptions};
use tokio_util::sync::CancellationToken;

pub use subscriptions::SubscriptionBounds;

/// Default `[mcp] max_sessions`.
pub const DEFAULT_MCP_MAX_SESSIONS: u64 = 256;
/// Most `[mcp] max_sessions`: each live session holds a task and a channel.
pub const MAX_MCP_SESSIONS: u64 = 65_536;
/// Default `[mcp] max_sessions_per_principal`: one principal cannot take
/// every session of the pool.
pub const DEFAULT_MCP_MAX_SESSIONS_PER_PRINCIPAL: u64 = 16;
/// Default `[mcp] allowed_origins`: pages served from this machine.
pub const DEFAULT_MCP_ALLOWED_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];
/// Default `[mcp] session_idle_timeout_seconds`.
pub const DEFAULT_MCP_SESSION_IDLE_TIMEOUT_SECONDS: u64 = 300;
/// Default `[mcp] max_subscriptions_per_session`.
pub const DEFAULT_MCP_MAX_SUBSCRIPTIONS_PER_SESSION: u64 = 256;
/// Default `[mcp] max_subscriptions_per_principal`.
pub const DEFAULT_MCP_MAX_SUBSCRIPTIONS_PER_PRINCIPAL: u64 = 1024;
/// Most subscriptions either bound allows: each is one URI in memory.
pub const MAX_MCP_SUBSCRIPTIONS: u64 = 65_536;

/// The `[mcp]` section: the Model Context Protocol endpoint served at
/// `/mcp` on the gRPC listener (docs/mcp.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpConfig {
    /// Serve MCP over streamable HTTP at `/mcp` (default on).
    pub http: bool,
    /// `Host` values the endpoint answers (a DNS-rebinding guard): names or
    /// `name:port`. Default: the loopback names.
    pub allowed_hosts: Vec<String>,
    /// MCP sessions (of clients on protocol versions with sessions) live at
    /// once; an `initialize` beyond it is refused with HTTP 503.
    pub max_sessions: usize,
    /// MCP sessions one principal may have open at once; an `initialize`
    /// beyond it is refused with HTTP 503.
    pub max_sessions_per_principal: usize,
    /// Browser origins whose pages may call the endpoint (`scheme://host:port`,
    /// `:*` for any port, or `null`); a request whose `Origin` is another is
    /// refused with HTTP 403 (the MCP specification's DNS-rebinding rule).
    /// Requests without `Origin` (agents, not browsers) pass.
    pub allowed_origins: Vec<String>,
    /// A session unused this long is closed and its memory freed.
    pub session_idle_timeout: Duration,
    /// Resources one session, and one principal over all its sessions, may
    /// subscribe to (`resources/subscribe`, `subscriptions/listen`).
    pub subscriptions: SubscriptionBounds,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            http: true,
            allowed_hosts: ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec(),
            max_sessions: DEFAULT_MCP_MAX_SESSIONS as usize,
            max_sessions_per_principal: DEFAULT_MCP_MAX_SESSIONS_PER_PRINCIPAL as usize,
            allowed_origins: DEFAULT_MCP_ALLOWED_ORIGINS.map(String::from).to_vec(),
            session_idle_timeout: Duration::from_secs(DEFAULT_MCP_SESSION_IDLE_TIMEOUT_SECONDS),
            subscriptions: SubscriptionBounds {
                per_session: DEFAULT_MCP_MAX_SUBSCRIPTIONS_PER_SESSION as usize,
                per_principal: DEFAULT_MCP_MAX_SUBSCRIPTIONS_PER_PRINCIPAL as usize,
            },
        }
    }
}

/// Where a request's caller comes from.
#[derive(Clone)]
pub enum Identity {
    /// Every request acts as this caller (stdio: one local agent).
    Fixed(Caller),
    /// Each HTTP request carries its own: [`http`] authenticates it and
    /// attaches the [`Caller`] to the request before the SDK sees it.
    PerRequest,
}

/// The MCP server: one per MCP session (the SDK makes one per session over
/// HTTP, and one per request of the stateless protocol), all sharing the
/// same tools, application layer and subscription ledger.
#[derive(Clone)]
pub struct McpServer {
    tools: Tools,
    service: Service,
    identity: Identity,
    ledger: Ledger,
    bounds: SubscriptionBounds,
    session: Arc<Session>,
}

/// What one MCP session holds: its log level and its subscriptions.
#[derive(Default)]
struct Session {
    log: Arc<Log>,
    /// Started by the first `resources/subscribe`; a lock held across the
    /// start so that two first subscriptions start one feed.
    watching: tokio::sync::Mutex<Option<Watching>>,
}

/// A session's subscriptions and the change feed that notifies them.
struct Watching {
    subscriptions: Subscriptions,
    feed: Feed,
}

/// A running change feed; dropping it (the session ended) stops it.
struct Feed(CancellationToken);

impl Feed {
    /// No feed running yet.
    fn stopped() -> Feed {
        let token = CancellationToken::new();
        token.cancel();
        Feed(token)
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl McpServer {
    /// A server answering with `tools` and `service` as `identity` says,
    /// subscriptions bounded by `bounds`.
    pub fn new(
        tools: Tools,
        service: Service,
        identity: Identity,
        bounds: SubscriptionBounds,
    ) -> McpServer {
        McpServer {
            tools,
            service,
            identity,
            ledger: Ledger::default(),
            bounds,
            session: Arc::default(),
        }
    }

    /// The server of a new MCP session: the same tools and ledger, its own
    /// log level and subscriptions.
    pub fn for_session(&self) -> McpServer {
        McpServer {
            session: Arc::default(),
            ..self.clone()
        }
    }

    /// Starts the change feed of a session's subscriptions, notifying
    /// `peer` (docs/mcp.md § Subscriptions): a Watch of everything the
    /// caller may list from now on.
    async fn watch(
        &self,
        caller: &Caller,
        peer: &Peer<RoleServer>,
        uris: Arc<Mutex<BTreeSet<String>>>,
    ) -> Result<Feed, Error> {
        let watcher = self
            .service
            .watch(caller, VfsPath::root(), WatchStart::Now, false)
            .await?;
        let feed = CancellationToken::new();
        let (stop, peer, log) = (feed.clone(), peer.clone(), self.session.log.clone());
        let listed = Some(self.tools.root().clone());
        tokio::spawn(async move {
            let notify = |notice| {
                let peer = peer.clone();
                async move {
                    match notice {
                        Notice::Updated(uri) => peer
                            .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                            .await
                            .is_ok(),
                        Notice::ListChanged => peer.notify_resource_list_changed().await.is_ok(),
                    }
                }
            };
            tokio::select! {
                _ = stop.cancelled() => {}
                ended = feed::run(watcher, uris, listed, notify) => {
                    if let Err(e) = ended {
                        let message = format!(
                            "resource subscriptions stopped: {e}; the next resources/subscribe \
                             starts them again"
                        );
                        log.error(&peer, message).await;
                    }
                    stop.cancel();
                }
            }
        });
        Ok(Feed(feed))
    }

    /// An empty set of subscriptions of `caller`'s principal, counted in
    /// the server's ledger and charged, for as long as it lives, to an
    /// account of the principal's own (not the request's, which ends with
    /// the request).
    fn subscriptions(&self, caller: &Caller) -> Subscriptions {
        let owner = &caller.principal.owner;
        let account = self.service.limits().memory().account(owner);
        Subscriptions::new(self.ledger.clone(), self.bounds, owner, account)
    }

    /// The caller of the request `context` belongs to.
    fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
        match &self.identity {
            Identity::Fixed(caller) => Ok(caller.clone()),
            Identity::PerRequest => http::caller_of(context),
        }
    }
}

/// The MCP description of one tool: the `ListTools` name, description and
/// schema, and whether it changes files.
fn tool(name: ToolName) -> Tool {
    let schema = match name.schema() {
        serde_json::Value::Object(schema) => schema,
        other => unreachable!("every tool schema is an object, not {other}"),
    };
    let read_only = matches!(
        name,
        ToolName::Ls
            | ToolName::Glob
            | ToolName::Grep
            | ToolName::Read
            | ToolName::BranchList
            | ToolName::BranchDiff
    );
    // A fork adds a branch and changes no file: not destructive.
    let destructive = !read_only && name != ToolName::BranchCreate;
    // Delete or discard again deletes nothing more: idempotent effects.
    let idempotent = read_only || matches!(name, ToolName::Delete | ToolName::BranchDiscard);
    let annotations = ToolAnnotations::new()
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(false);
    Tool::new(name.as_str(), name.description(), Arc::new(schema)).with_annotations(annotations)
}

/// An envelope as an MCP tool result: its text for the model, the whole
/// envelope as structured content, `isError` for error envelopes.
fn tool_result(envelope: &Envelope) -> CallToolResult {
    let mut result = if envelope.error().is_some() {
        CallToolResult::error(vec![ContentBlock::text(envelope.text.clone())])
    } else {
        let mut content = vec![ContentBlock::text(envelope.text.clone())];
        content.extend(media_content(envelope));
        CallToolResult::success(content)
    };
    result.structured_content = Some(envelope.to_value());
    result
}

/// A media Read's content as MCP carries it (`crate::tools::media`): image
/// content for an image, an embedded resource (a base64 blob named by the
/// file's URI) for a document, as the reference filesystem server's
/// `read_media_file` answers.
fn media_content(envelope: &Envelope) -> Option<ContentBlock> {
    let field = |key| envelope.data.get(key).and_then(|v| v.as_str());
    let (kind, mime, data) = (field("type")?, field("mime_type")?, field("data")?);
    match kind {
        "image" => Some(ContentBlock::image(data, mime)),
        "document" => {
            let path = crate::path::VfsPath::parse(field("logical_path")?).ok()?;
            let blob = ResourceContents::blob(data, resources::uri_of(&path)).with_mime_type(mime);
            Some(ContentBlock::resource(blob))
        }
        _ => None,
    }
}

/// A domain error as the JSON-RPC error of a protocol-level failure
/// (resources; tools answer every failure in an envelope).
fn rpc_error(error: Error) -> ErrorData {
    let message = error.to_string();
    let data = Some(serde_json::json!({ "code": error.code() }));
    match error.kind() {
        Error::NotFound(_) => ErrorData::resource_not_found(message, data),
        Error::Internal(_) => ErrorData::internal_error(message, data),
        _ => ErrorData::invalid_params(message, data),
    }
}

/// A fresh id naming where an oversized result is saved
/// (`/large_tool_results/{id}`): MCP carries no model tool-call id, and
/// JSON-RPC ids repeat across sessions.
/// The id the client gave its tool call, as `_meta.toolCallId` (for the
/// audit record and the budget's spill files, docs/audit.md).
fn given_tool_call_id(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<String> {
    let key = "toolCallId";
    let given = request
        .meta
        .as_ref()
        .and_then(|meta| meta.0.0.get(key))
        .or_else(|| context.meta.0.0.get(key))?;
    let id = given.as_str()?;
    crate::scope::Scope::check_label(id).ok()?;
    Some(id.to_owned())
}

fn tool_call_id() -> String {
    format!("mcp-{:016x}", rand::random::<u64>())
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        #[allow(deprecated)] // logging: deprecated by the 2026-07-28 protocol (SEP-2577)
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("agentvfs", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "agentvfs: a shared file system. Use LS, Glob, Grep and Read to look, Write, \
                 Edit, MultiEdit and ApplyPatch (OpenAI's apply_patch format) to change files; \
                 paths are relative to the project root. \
                 Every answer is a JSON envelope (status, data, text, stats, context, error).",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            ToolName::ALL.into_iter().map(tool).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        ToolName::parse(name).map(tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller(&context)?;
        // The specification's rule: a tool that does not exist is a
        // JSON-RPC error (-32602), not a result; docs/mcp.md § Tools.
        if ToolName::parse(&request.name).is_none() {
            let names = ToolName::ALL.map(ToolName::as_str).join(", ");
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}; the tools are {names}",
                    crate::error::echo(&request.name)
                ),
                Some(serde_json::json!({ "code": "INVALID_PARAM" })),
            ));
        }
        let trail = self.service.audit().trail(Surface::Mcp);
        trail.surface(Surface::Mcp, http::session_of(&context).as_deref());
        let caller = caller.with_trail(trail);
        let id = given_tool_call_id(&request, &context).unwrap_or_else(tool_call_id);
        let args = request.arguments.unwrap_or_default();
        let envelope = self
            .tools
            .invoke_args(caller, &request.name, Ok(args), &id)
            .await;
        Ok(tool_result(&envelope).into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = self.caller(&context)?;
        let cursor = request.and_then(|r| r.cursor);
        resources::list(&self.service, &caller, self.tools.root(), cursor.as_deref())
            .await
            .map_err(rpc_error)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            resources::template(),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = self.caller(&context)?;
        resources::read(&self.service, &caller, &request.uri)
            .await
            .map(Into::into)
            .map_err(rpc_error)
    }

    #[allow(deprecated)] // resources/subscribe: the protocol versions with sessions
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&context)?;
        let subscribed = Subscribed::parse(&request.uri).map_err(rpc_error)?;
        subscribed.check(&caller).map_err(rpc_error)?;
        let mut watching = self.session.watching.lock().await;
        let watching = watching.get_or_insert_with(|| Watching {
            subscriptions: self.subscriptions(&caller),
            feed: Feed::stopped(),
        });
        if watching.feed.0.is_cancelled() {
            let uris = watching.subscriptions.uris();
            watching.feed = self
                .watch(&caller, &context.peer, uris)
                .await
                .map_err(rpc_error)?;
        }
        watching.subscriptions.add(&subscribed).map_err(rpc_error)?;
        if let Subscribed::Foreign(uri) = &subscribed {
            let message = format!(
                "subscribed to {}: not an agentvfs:// URI, so no change will ever be notified \
                 for it",
                crate::error::echo(uri)
            );
            self.session.log.warning(&context.peer, message).await;
        }
        Ok(())
    }

    #[allow(deprecated)] // resources/unsubscribe: the protocol versions with sessions
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let subscribed = Subscribed::parse(&request.uri).map_err(rpc_error)?;
        if let Some(watching) = self.session.watching.lock().await.as_ref() {
            watching.subscriptions.remove(&subscribed);
        }
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Resources only (the tool list never changes); each URI's grant
        // is checked in `listen`, where the caller is known.
        let mut accepted = SubscriptionFilter::default();
        accepted.resources_list_changed = requested.resources_list_changed;
        accepted.resource_subscriptions = requested.resource_subscriptions.clone();
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let caller = self.caller(context.request_context())?;
        let subscriptions = self.subscriptions(&caller);
        let accepted = context.accepted();
        for uri in accepted.resource_subscriptions.iter().flatten() {
            let subscribed = Subscribed::parse(uri).map_err(rpc_error)?;
            subscribed.check(&caller).map_err(rpc_error)?;
            subscriptions.add(&subscribed).map_err(rpc_error)?;
        }
        let listed =
            (accepted.resources_list_changed == Some(true)).then(|| self.tools.root().clone());
        let watcher = self
            .service
            .watch(&caller, VfsPath::root(), WatchStart::Now, false)
            .await
            .map_err(rpc_error)?;
        let sink = context.sink().clone();
        let notify = |notice| {
            let sink = sink.clone();
            async move {
                match notice {
                    Notice::Updated(uri) => sink.notify_resource_updated(uri).await.is_ok(),
                    Notice::ListChanged => sink.notify_resource_list_changed().await.is_ok(),
                }
            }
        };
        tokio::select! {
            _ = context.cancelled() => Ok(()),
            ended = feed::run(watcher, subscriptions.uris(), listed, notify) => ended.map_err(rpc_error),
        }
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let caller = self.caller(&context)?;
        completion::complete(&self.service, &caller, &request)
            .await
            .map_err(rpc_error)
    }

    #[allow(deprecated)] // logging: deprecated by the 2026-07-28 protocol (SEP-2577)
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.session.log.set(&request);
        Ok(())
    }
}
