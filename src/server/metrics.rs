//! `/metrics` on the listener: the server's Prometheus metrics
//! ([`crate::metrics`], docs/audit.md § Metrics). It follows the
//! listener's rules: a request authenticates as a gRPC call does
//! (`Caller::identify`), so it needs a principal's token unless the
//! server runs in anonymous mode, which listens on loopback only.

use crate::audit::Audit;
use crate::auth::Auth;
use crate::metrics::Gauges;
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
        let gauges = Gauges {
            memory_bytes: self.limits.memory().in_use("").0,
            audit_records,
            audit_dropped,
        };
        (
            StatusCode::OK,
            [(CONTENT_TYPE, TEXT_FORMAT)],
            metrics.render(gauges),
        )
    }
}
