//! `/metrics` on the listener: the server's Prometheus metrics
//! ([`crate::metrics`], docs/audit.md § Metrics). It follows the
//! listener's rules: a request authenticates as a gRPC call does
//! (`Caller::identify`), so it needs a principal's token unless the
//! server runs in anonymous mode, which listens on loopback only.

use super::transport::OpenConnections;
use crate::audit::{Audit, Failure};
use crate::auth::Auth;
use crate::mcp::http::Sessions;
use crate::metrics::{Gauges, TOP_PRINCIPALS};
use crate::search::index;
use crate::service::{Caller, Credentials, Limits};
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, StatusCode};
use std::sync::Arc;

/// Where the metrics are served.
pub const PATH: &str = "/metrics";

/// The content type of the Prometheus text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a scrape needs of the server.
#[derive(Clone)]
pub struct Scrape {
    /// Counts the calls; holds the audit log's counts.
    pub audit: Audit,
    /// The memory budget.
    pub limits: Limits,
    /// Who may scrape.
    pub auth: Arc<Auth>,
    /// The listener's open connections.
    pub connections: OpenConnections,
    /// The MCP endpoint's sessions, when `/mcp` is served.
    pub mcp: Option<Sessions>,
}

impl Scrape {
    /// Answers one GET of [`PATH`]: 401 without a valid token where one is
    /// needed, else the metrics.
    pub async fn answer(
        self,
        headers: HeaderMap,
    ) -> (StatusCode, [(http::HeaderName, &'static str); 1], String) {
        let authorization = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
        let credentials = Credentials {
            authorization,
            ..Credentials::default()
        };
        if let Err(refused) = Caller::identify(&self.auth, credentials) {
            let text = [(CONTENT_TYPE, "text/plain; charset=utf-8")];
            return (StatusCode::UNAUTHORIZED, text, format!("{refused}\n"));
        }
        let Some(metrics) = self.audit.metrics() else {
            let text = [(CONTENT_TYPE, "text/plain; charset=utf-8")];
            return (
                StatusCode::NOT_FOUND,
                text,
                "no metrics on this server\n".into(),
            );
        };
        let (audit_records, audit_dropped) = self.audit.counts();
        let mcp_sessions = match &self.mcp {
            Some(sessions) => sessions.live().await,
            None => 0,
        };
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        let memory = self.limits.memory();
        let gauges = Gauges {
            memory_bytes: memory.in_use("").0,
            memory_by_principal: memory.top(TOP_PRINCIPALS),
            open_streams: count(self.limits.open_streams()),
            open_connections: count(self.connections.count()),
            mcp_sessions: count(mcp_sessions),
            index_bytes: index::held_bytes(),
            index_narrowed: index::narrowed_greps(),
            audit_records,
            audit_dropped,
            audit_failure_mode: self.audit.failure().map(Failure::as_str),
            audit_failed: self.audit.has_failed(),
        };
        (
            StatusCode::OK,
            [(CONTENT_TYPE, TEXT_FORMAT)],
            metrics.render(gauges),
        )
    }
}
