//! The server's Prometheus metrics (docs/audit.md § Metrics): calls,
//! errors and latency per surface and operation, bytes read and written,
//! open streams, connections and MCP sessions, memory in use (server-wide
//! and its top principals), the search index's size and hits, the object
//! tier's requests (`object_tier`) and the audit log's records, in the
//! Prometheus text format at `/metrics`, by the `prometheus` crate's
//! encoder.

pub mod object_tier;

use prometheus::core::Collector;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use std::sync::Mutex;

/// Most principals `agentvfs_memory_in_use_bytes_by_principal` shows: the
/// ones holding the most, so the label set stays bounded.
pub const TOP_PRINCIPALS: usize = 10;

/// The server's metrics; cheap to share behind an `Arc`.
pub struct Metrics {
    registry: Registry,
    calls: IntCounterVec,
    latency: HistogramVec,
    bytes_read: IntCounter,
    bytes_written: IntCounter,
    memory: IntGauge,
    memory_by_principal: IntGaugeVec,
    streams: IntGauge,
    connections: IntGauge,
    mcp_sessions: IntGauge,
    index_bytes: IntGauge,
    index_narrowed: IntCounter,
    audit_records: IntGauge,
    audit_dropped: IntGauge,
    audit_failure_mode: IntGaugeVec,
    audit_failed: IntGauge,
    /// Held while a scrape sets the gauges and encodes them, so two
    /// scrapes never interleave their updates.
    rendering: Mutex<()>,
}

/// What a scrape reads from the rest of the server.
#[derive(Clone, Debug, Default)]
pub struct Gauges {
    /// Bytes of the memory budget charged now.
    pub memory_bytes: u64,
    /// The principals charged the most now, at most [`TOP_PRINCIPALS`],
    /// with their bytes.
    pub memory_by_principal: Vec<(String, u64)>,
    /// Streaming calls running now (their stream permits).
    pub open_streams: u64,
    /// Connections open now on the listener.
    pub open_connections: u64,
    /// MCP sessions live now at `/mcp`.
    pub mcp_sessions: u64,
    /// Bytes the search indexes hold now.
    pub index_bytes: u64,
    /// Greps an index has narrowed since the process started.
    pub index_narrowed: u64,
    /// Audit records written since start.
    pub audit_records: u64,
    /// Audit records lost (`drop_and_count`).
    pub audit_dropped: u64,
    /// The audit log's failure mode (`fail_closed`, `drop_and_count`), when
    /// it is on.
    pub audit_failure_mode: Option<&'static str>,
    /// True once a record could not be written under `fail_closed`.
    pub audit_failed: bool,
}

/// `metric` (valid: its name and help are the code's), registered in
/// `registry`.
fn registered<M: Collector + Clone + 'static>(
    registry: &Registry,
    metric: prometheus::Result<M>,
) -> M {
    let metric = metric.expect("valid metric");
    registry
        .register(Box::new(metric.clone()))
        .expect("each metric registered once");
    metric
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric, registered.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let r = &registry;
        for metric in object_tier::collectors() {
            registry
                .register(metric)
                .expect("each metric registered once");
        }
        let gauge = |name: &str, help: &str| registered(r, IntGauge::new(name, help));
        let labelled = |name: &str, help: &str, label: &str| {
            registered(r, IntGaugeVec::new(Opts::new(name, help), &[label]))
        };
        Metrics {
            calls: registered(
                r,
                IntCounterVec::new(
                    Opts::new(
                        "agentvfs_calls_total",
                        "Calls by surface, operation and result.",
                    ),
                    &["surface", "operation", "result"],
                ),
            ),
            latency: registered(
                r,
                HistogramVec::new(
                    HistogramOpts::new(
                        "agentvfs_call_duration_seconds",
                        "Time from a call's start to its answer, by surface and operation.",
                    ),
                    &["surface", "operation"],
                ),
            ),
            bytes_read: registered(
                r,
                IntCounter::new("agentvfs_bytes_read_total", "Content bytes read."),
            ),
            bytes_written: registered(
                r,
                IntCounter::new("agentvfs_bytes_written_total", "Content bytes written."),
            ),
            memory: gauge(
                "agentvfs_memory_in_use_bytes",
                "Bytes of the memory budget charged to calls in flight.",
            ),
            memory_by_principal: labelled(
                "agentvfs_memory_in_use_bytes_by_principal",
                "Bytes of the memory budget charged now to each of the principals holding the \
                 most (at most 10).",
                "principal",
            ),
            streams: gauge(
                "agentvfs_open_streams",
                "Streaming calls running now (ReadBytes, WriteBytes, Grep, Glob, Watch).",
            ),
            connections: gauge(
                "agentvfs_open_connections",
                "Connections open now on the listener.",
            ),
            mcp_sessions: gauge("agentvfs_mcp_sessions", "MCP sessions live now at /mcp."),
            index_bytes: gauge(
                "agentvfs_search_index_bytes",
                "Bytes the search indexes of every tier hold now.",
            ),
            index_narrowed: registered(
                r,
                IntCounter::new(
                    "agentvfs_search_index_narrowed_greps_total",
                    "Greps a search index narrowed (its hits) since the process started.",
                ),
            ),
            audit_records: gauge(
                "agentvfs_audit_records",
                "Audit records written since start.",
            ),
            audit_dropped: gauge(
                "agentvfs_audit_dropped_records",
                "Audit records lost under failure = drop_and_count.",
            ),
            audit_failure_mode: labelled(
                "agentvfs_audit_failure_mode",
                "1 for the audit log's failure mode ([audit] failure); absent when it is off.",
                "mode",
            ),
            audit_failed: gauge(
                "agentvfs_audit_failed",
                "1 once an audit record could not be written under fail_closed: every call is \
                 refused.",
            ),
            rendering: Mutex::new(()),
            registry,
        }
    }

    /// Counts one call: its surface, operation (from a fixed set: the
    /// RPCs and tools, `unknown` otherwise), result, duration, and the
    /// bytes it read (`wrote` false) or wrote.
    pub fn observe(
        &self,
        surface: &str,
        operation: &str,
        result: &str,
        seconds: f64,
        bytes: Option<u64>,
        wrote: bool,
    ) {
        self.calls
            .with_label_values(&[surface, operation, result])
            .inc();
        self.latency
            .with_label_values(&[surface, operation])
            .observe(seconds);
        match (bytes, wrote) {
            (Some(bytes), true) => self.bytes_written.inc_by(bytes),
            (Some(bytes), false) => self.bytes_read.inc_by(bytes),
            (None, _) => {}
        }
    }

    /// The metrics in the Prometheus text format, `gauges` read now.
    pub fn render(&self, gauges: Gauges) -> String {
        let _rendering = self.rendering.lock().unwrap_or_else(|p| p.into_inner());
        let set =
            |gauge: &IntGauge, value: u64| gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
        set(&self.memory, gauges.memory_bytes);
        self.memory_by_principal.reset();
        for (principal, bytes) in gauges.memory_by_principal.iter().take(TOP_PRINCIPALS) {
            set(
                &self
                    .memory_by_principal
                    .with_label_values(&[principal.as_str()]),
                *bytes,
            );
        }
        set(&self.streams, gauges.open_streams);
        set(&self.connections, gauges.open_connections);
        set(&self.mcp_sessions, gauges.mcp_sessions);
        set(&self.index_bytes, gauges.index_bytes);
        // A count kept elsewhere, only ever growing: the counter catches up.
        let narrowed = gauges.index_narrowed;
        self.index_narrowed
            .inc_by(narrowed.saturating_sub(self.index_narrowed.get()));
        set(&self.audit_records, gauges.audit_records);
        set(&self.audit_dropped, gauges.audit_dropped);
        self.audit_failure_mode.reset();
        if let Some(mode) = gauges.audit_failure_mode {
            self.audit_failure_mode.with_label_values(&[mode]).set(1);
        }
        set(&self.audit_failed, u64::from(gauges.audit_failed));
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("encoding to memory does not fail");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}
