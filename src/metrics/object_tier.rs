//! The object tier's requests to its store, counted process-wide: every
//! HTTP request `object_store` sends (retries included, each one counted),
//! by method and outcome, and its latency to the answer's head. The tier
//! counts them (`src/backend/object/metered.rs`) and every server's
//! [`super::Metrics`] registers them, so `/metrics` shows them beside the
//! calls; one process serves one server, as with the search index's
//! accounting (`crate::search::index`).

use prometheus::core::Collector;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use std::sync::LazyLock;

/// How one request to the store ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx or 3xx answer (304 Not Modified included).
    Ok,
    /// A 4xx answer other than 429: an answer the tier reads (a missing
    /// key, a failed precondition) or an error it maps; never retried.
    Answered,
    /// A 5xx or 429 answer, or none (a reset, a timeout): `object_store`
    /// retries these while the call's budget lasts, so each one but a
    /// call's last is a retry.
    Retryable,
}

impl Outcome {
    /// The `outcome` label.
    fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Answered => "answered",
            Outcome::Retryable => "retryable",
        }
    }
}

/// The tier's metrics, made on first use.
struct ObjectTier {
    requests: IntCounterVec,
    latency: HistogramVec,
}

static OBJECT_TIER: LazyLock<ObjectTier> = LazyLock::new(|| ObjectTier {
    requests: IntCounterVec::new(
        Opts::new(
            "agentvfs_object_requests_total",
            "HTTP requests of the object tier to its store, retries included, by method and \
             outcome (retryable: 5xx, 429 or no answer, which the client retries).",
        ),
        &["method", "outcome"],
    )
    .expect("valid metric"),
    latency: HistogramVec::new(
        HistogramOpts::new(
            "agentvfs_object_request_duration_seconds",
            "Time from an object-tier request to its answer's head, by method.",
        ),
        &["method"],
    )
    .expect("valid metric"),
});

/// The `method` label: the HTTP methods S3 takes, `other` otherwise, so
/// the label set stays bounded.
fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "PUT" => "PUT",
        "POST" => "POST",
        "DELETE" => "DELETE",
        _ => "other",
    }
}

/// Counts one HTTP request of `method` that ended as `outcome` after
/// `seconds`.
pub fn request(method: &str, outcome: Outcome, seconds: f64) {
    let method = method_label(method);
    let tier = &*OBJECT_TIER;
    tier.requests
        .with_label_values(&[method, outcome.label()])
        .inc();
    tier.latency.with_label_values(&[method]).observe(seconds);
}

/// The tier's metrics, for a server's registry.
pub(super) fn collectors() -> [Box<dyn Collector>; 2] {
    let tier = &*OBJECT_TIER;
    [
        Box::new(tier.requests.clone()),
        Box::new(tier.latency.clone()),
    ]
}
