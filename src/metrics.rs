//! The server's Prometheus metrics (docs/audit.md § Metrics): calls,
//! errors and latency per surface and operation, bytes read and written,
//! memory in use and the audit log's records, in the Prometheus text
//! format at `/metrics`, by the `prometheus` crate's encoder.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

/// The server's metrics; cheap to share behind an `Arc`.
pub struct Metrics {
    registry: Registry,
    calls: IntCounterVec,
    latency: HistogramVec,
    bytes_read: IntCounter,
    bytes_written: IntCounter,
    memory: IntGauge,
    audit_records: IntGauge,
    audit_dropped: IntGauge,
}

/// What a scrape reads from the rest of the server.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gauges {
    /// Bytes of the memory budget charged now.
    pub memory_bytes: u64,
    /// Audit records written since start.
    pub audit_records: u64,
    /// Audit records lost (`drop_and_count`).
    pub audit_dropped: u64,
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
        let calls = IntCounterVec::new(
            Opts::new(
                "agentvfs_calls_total",
                "Calls by surface, operation and result.",
            ),
            &["surface", "operation", "result"],
        )
        .expect("valid metric");
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "agentvfs_call_duration_seconds",
                "Time from a call's start to its answer, by surface and operation.",
            ),
            &["surface", "operation"],
        )
        .expect("valid metric");
        let bytes_read = IntCounter::new("agentvfs_bytes_read_total", "Content bytes read.")
            .expect("valid metric");
        let bytes_written =
            IntCounter::new("agentvfs_bytes_written_total", "Content bytes written.")
                .expect("valid metric");
        let memory = IntGauge::new(
            "agentvfs_memory_in_use_bytes",
            "Bytes of the memory budget charged to calls in flight.",
        )
        .expect("valid metric");
        let audit_records = IntGauge::new(
            "agentvfs_audit_records",
            "Audit records written since start.",
        )
        .expect("valid metric");
        let audit_dropped = IntGauge::new(
            "agentvfs_audit_dropped_records",
            "Audit records lost under failure = drop_and_count.",
        )
        .expect("valid metric");
        for metric in [
            Box::new(calls.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(latency.clone()),
            Box::new(bytes_read.clone()),
            Box::new(bytes_written.clone()),
            Box::new(memory.clone()),
            Box::new(audit_records.clone()),
            Box::new(audit_dropped.clone()),
        ] {
            registry
                .register(metric)
                .expect("each metric registered once");
        }
        Metrics {
            registry,
            calls,
            latency,
            bytes_read,
            bytes_written,
            memory,
            audit_records,
            audit_dropped,
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
        let set =
            |gauge: &IntGauge, value: u64| gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
        set(&self.memory, gauges.memory_bytes);
        set(&self.audit_records, gauges.audit_records);
        set(&self.audit_dropped, gauges.audit_dropped);
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("encoding to memory does not fail");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}
