//! The gRPC server: services, interceptor, health ([`health`], which also
//! reports a failed `fail_closed` audit log), reflection, shutdown,
//! and MCP over streamable HTTP at `/mcp` on the same listener
//! ([`crate::mcp::http`]; HTTP/1.1 is accepted for it, gRPC stays HTTP/2).
//!
//! [`serve`] takes a bound listener and a shutdown future (as mini-redis does),
//! so `main` stays thin and tests can start a server on port 0. The
//! `[limits]` of the configuration bound streams per connection (HTTP/2),
//! streams per principal and searches ([`Limits`]), connections and the
//! memory of calls in flight ([`transport`], which also resets a call whose
//! client stops taking data); oversized requests answer RESOURCE_EXHAUSTED
//! ([`TooLargeStatus`]).

mod access;
mod audit_log;
mod audited;
mod branch;
mod caller;
mod changeset;
mod convert;
mod filesystem;
mod health;
mod message_limit;
mod metrics;
mod streams;
mod tools;
pub mod transport;

pub use access::AccessService;
pub use audit_log::AuditLogService;
use audited::Audited;
pub use caller::identify;
pub use filesystem::FilesystemService;
pub use message_limit::{TooLargeStatus, too_large};
pub use tools::ToolsService;

use crate::auth::Auth;
use crate::mcp::http::McpHttp;
use crate::pb;
use crate::service::Backend;
use crate::service::{Limits, Service};
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;
use tonic::service::interceptor::InterceptedService;

/// Room for protobuf framing on top of the largest file a message may carry.
const MESSAGE_OVERHEAD_BYTES: usize = 1 << 20;

/// Most bytes of text one answer carries (a Read's content): twice the
/// largest file, so a whole file fits numbered. Messages are this plus
/// [`MESSAGE_OVERHEAD_BYTES`], so an answer within it can always be sent.
pub fn max_answer_bytes(max_file_bytes: u64) -> usize {
    usize::try_from(max_file_bytes)
        .unwrap_or(usize::MAX)
        .saturating_mul(2)
}

/// Everything the services share.
#[derive(Clone)]
pub struct App {
    /// The mount table (or a single tier).
    pub backend: Arc<dyn Backend>,
    /// Tokens and handles.
    pub auth: Arc<Auth>,
    /// Largest file accepted by writes.
    pub max_file_bytes: u64,
    /// The Tools service's root and output budget.
    pub tools: crate::tools::ToolsConfig,
    /// Stream, search and idle bounds.
    pub limits: crate::service::LimitsConfig,
    /// The MCP endpoint at `/mcp`.
    pub mcp: crate::mcp::McpConfig,
    /// The audit log every call is recorded in (docs/audit.md).
    pub audit: crate::audit::Audit,
}

/// Serves every agentvfs service on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let (health, health_service) = tonic_health::server::health_reporter();
    // Both reflection versions, so every grpcurl version works. The
    // google.rpc types let grpcurl decode ErrorInfo details.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection()
        .build_v1()
        .expect("embedded descriptor sets are valid");
    let reflection_v1alpha = reflection()
        .build_v1alpha()
        .expect("embedded descriptor sets are valid");

    // A message may carry a whole file (Write) or an answer (Read).
    let max_message = max_answer_bytes(app.max_file_bytes).saturating_add(MESSAGE_OVERHEAD_BYTES);
    let limits = Limits::new(app.limits);
    let service = Service::new(app.backend.clone(), app.max_file_bytes, limits.clone())
        .with_audit(app.audit.clone());
    let stop_watches = tokio_util::sync::CancellationToken::new();
    let filesystem = pb::filesystem_server::FilesystemServer::new(FilesystemService::new(
        service.clone(),
        stop_watches.clone(),
    ))
    .max_decoding_message_size(max_message)
    .max_encoding_message_size(max_message);
    health
        .set_serving::<pb::filesystem_server::FilesystemServer<FilesystemService>>()
        .await;
    let llm_tools = crate::tools::Tools::new(service.clone(), app.tools.clone());
    let tools = pb::tools_server::ToolsServer::new(ToolsService::new(llm_tools.clone()))
        .max_decoding_message_size(max_message)
        .max_encoding_message_size(max_message);
    health
        .set_serving::<pb::tools_server::ToolsServer<ToolsService>>()
        .await;
    health
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;

    let access = pb::access_server::AccessServer::new(AccessService::new(app.auth.clone()));
    health
        .set_serving::<pb::access_server::AccessServer<AccessService>>()
        .await;

    let audit_log =
        pb::audit_log_server::AuditLogServer::new(AuditLogService::new(app.audit.clone()));
    health
        .set_serving::<pb::audit_log_server::AuditLogServer<AuditLogService>>()
        .await;

    health::follow_the_audit(app.audit.clone(), health);

    let intercept = caller::interceptor(app.auth.clone());
    let mut routes = tonic::service::RoutesBuilder::default();
    routes
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(Audited::new(
            TooLargeStatus(InterceptedService::new(filesystem, intercept.clone())),
            app.audit.clone(),
            None,
        ))
        .add_service(Audited::new(
            TooLargeStatus(InterceptedService::new(access, intercept.clone())),
            app.audit.clone(),
            Some(crate::audit::Class::Admin),
        ))
        .add_service(Audited::new(
            TooLargeStatus(InterceptedService::new(audit_log, intercept.clone())),
            app.audit.clone(),
            Some(crate::audit::Class::Admin),
        ))
        .add_service(TooLargeStatus(InterceptedService::new(tools, intercept)));
    let mut router = routes.routes().into_axum_router();
    let mut mcp_shutdown = None;
    let mut mcp_sessions = None;
    if app.mcp.http {
        let (endpoint, stop) =
            McpHttp::new(llm_tools, service, app.auth.clone(), &app.mcp, max_message);
        mcp_sessions = Some(endpoint.sessions());
        router = router.route_service(crate::mcp::http::PATH, endpoint);
        mcp_shutdown = Some(stop);
    }
    let connections = transport::OpenConnections::new(limits.config().max_connections);
    let scrape = metrics::Scrape {
        audit: app.audit.clone(),
        limits: limits.clone(),
        auth: app.auth.clone(),
        connections: connections.clone(),
        mcp: mcp_sessions,
    };
    router = router.route(
        metrics::PATH,
        axum::routing::get(move |headers: http::HeaderMap| scrape.clone().answer(headers)),
    );
    // Ending Watch streams, MCP sessions and event streams first lets the
    // graceful shutdown finish instead of waiting on a client's open stream.
    let shutdown = async move {
        shutdown.await;
        stop_watches.cancel();
        if let Some(stop) = mcp_shutdown {
            stop.cancel();
        }
    };
    tracing::info!(
        addr = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        audit_failure = app.audit.failure().map_or("off", crate::audit::Failure::as_str),
        "serving"
    );
    let settings = transport::Settings {
        limits,
        auth: app.auth.clone(),
        http1: app.mcp.http,
        // A client that stopped reading holds its connection open (its
        // stream cannot flush): graceful shutdown gets SHUTDOWN_GRACE.
        grace: SHUTDOWN_GRACE,
        connections,
    };
    transport::serve(listener, router, settings, shutdown).await;
    Ok(())
}

/// How long a graceful shutdown waits for open connections to finish.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
