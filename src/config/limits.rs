//! `[limits]`: the bounds that keep stalled or hostile clients from holding
//! the server's threads and memory, read into [`LimitsConfig`].

use super::{ConfigError, Source, Whole};
use crate::backend::changeset::MAX_CHANGESET_FILES;
use crate::service::ChangesetLimits;
use crate::service::limits::{
    DEFAULT_HTTP2_SEND_BUFFER_BYTES, DEFAULT_HTTP2_WINDOW_BYTES,
    DEFAULT_MAX_BRANCHES_PER_PRINCIPAL, DEFAULT_MAX_CONCURRENT_SEARCHES, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL, DEFAULT_MAX_SEARCHES_PER_PRINCIPAL,
    DEFAULT_MAX_STREAMS_PER_CONNECTION, DEFAULT_MAX_STREAMS_PER_PRINCIPAL, DEFAULT_MEMORY_BYTES,
    DEFAULT_MEMORY_BYTES_PER_PRINCIPAL, DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS, LimitsConfig,
    MAX_CONCURRENT_SEARCHES,
};
use serde::Deserialize;
use std::ops::RangeInclusive;
use std::time::Duration;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    max_streams_per_connection: Option<Spanned<u64>>,
    max_streams_per_principal: Option<Spanned<u64>>,
    max_concurrent_searches: Option<Spanned<u64>>,
    max_searches_per_principal: Option<Spanned<u64>>,
    stream_idle_timeout_seconds: Option<Spanned<u64>>,
    memory_bytes: Option<Spanned<u64>>,
    memory_bytes_per_principal: Option<Spanned<u64>>,
    max_connections: Option<Spanned<u64>>,
    max_connections_per_principal: Option<Spanned<u64>>,
    http2_window_bytes: Option<Spanned<u64>>,
    http2_send_buffer_bytes: Option<Spanned<u64>>,
    changeset_max_operations: Option<Spanned<u64>>,
    changeset_max_bytes: Option<Spanned<u64>>,
    changeset_timeout_ms: Option<Spanned<u64>>,
    max_branches_per_principal: Option<Spanned<u64>>,
}

/// How a key of `[limits]` is read from the raw section.
type Key = fn(&RawLimits) -> Option<&Spanned<u64>>;

/// Validates `[limits]`: every value must lie in its range, and every
/// per-principal share within its server-wide pair.
pub(super) fn parse(
    src: &Source<'_>,
    raw: Option<&RawLimits>,
    max_file_bytes: u64,
) -> Result<LimitsConfig, ConfigError> {
    let value = |field: fn(&RawLimits) -> Option<&Spanned<u64>>,
                 name: &str,
                 range: RangeInclusive<u64>,
                 default: u64| {
        let value = src.between(raw.and_then(field), "limits", name, range)?;
        Ok::<_, ConfigError>(value.unwrap_or(default))
    };
    // A share must hold one whole message (a chunk, a batch, a small file),
    // so neither may go below 1 MiB.
    // By default a share holds one Read of the largest file (the data, the
    // numbered answer) with room to spare, and the server four shares.
    let share_default = DEFAULT_MEMORY_BYTES_PER_PRINCIPAL.max(max_file_bytes.saturating_mul(4));
    let memory_bytes = value(
        |r| r.memory_bytes.as_ref(),
        "memory_bytes",
        1 << 20..=1 << 50,
        DEFAULT_MEMORY_BYTES.max(share_default.saturating_mul(4)),
    )?;
    // Each per-principal limit is a share of its server-wide pair.
    let share = |field: Key,
                 name: &str,
                 range: RangeInclusive<u64>,
                 default: u64,
                 whole: (Key, &str, u64)| {
        let (whole_field, whole_name, whole_value) = whole;
        src.share(
            "limits",
            name,
            raw.and_then(field),
            range,
            default,
            Whole {
                name: whole_name,
                value: whole_value,
                field: raw.and_then(whole_field),
            },
        )
    };
    let memory_bytes_per_principal = share(
        |r| r.memory_bytes_per_principal.as_ref(),
        "memory_bytes_per_principal",
        1 << 20..=1 << 50,
        share_default,
        (|r| r.memory_bytes.as_ref(), "memory_bytes", memory_bytes),
    )?;
    let max_concurrent_searches = value(
        |r| r.max_concurrent_searches.as_ref(),
        "max_concurrent_searches",
        1..=MAX_CONCURRENT_SEARCHES,
        DEFAULT_MAX_CONCURRENT_SEARCHES,
    )?;
    let max_connections = value(
        |r| r.max_connections.as_ref(),
        "max_connections",
        1..=1 << 20,
        DEFAULT_MAX_CONNECTIONS,
    )?;
    let defaults = ChangesetLimits::default();
    Ok(LimitsConfig {
        max_streams_per_connection: value(
            |r| r.max_streams_per_connection.as_ref(),
            "max_streams_per_connection",
            1..=u64::from(u32::MAX),
            u64::from(DEFAULT_MAX_STREAMS_PER_CONNECTION),
        )? as u32,
        max_streams_per_principal: value(
            |r| r.max_streams_per_principal.as_ref(),
            "max_streams_per_principal",
            1..=1 << 20,
            DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
        )? as usize,
        max_concurrent_searches: max_concurrent_searches as usize,
        max_searches_per_principal: share(
            |r| r.max_searches_per_principal.as_ref(),
            "max_searches_per_principal",
            1..=MAX_CONCURRENT_SEARCHES,
            DEFAULT_MAX_SEARCHES_PER_PRINCIPAL,
            (
                |r| r.max_concurrent_searches.as_ref(),
                "max_concurrent_searches",
                max_concurrent_searches,
            ),
        )? as usize,
        stream_idle_timeout: Duration::from_secs(value(
            |r| r.stream_idle_timeout_seconds.as_ref(),
            "stream_idle_timeout_seconds",
            1..=24 * 3600,
            DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS,
        )?),
        memory_bytes,
        memory_bytes_per_principal,
        max_connections: max_connections as usize,
        max_connections_per_principal: share(
            |r| r.max_connections_per_principal.as_ref(),
            "max_connections_per_principal",
            1..=1 << 20,
            DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL,
            (
                |r| r.max_connections.as_ref(),
                "max_connections",
                max_connections,
            ),
        )? as usize,
        // HTTP/2 allows windows up to 2^31 - 1; below 64 KiB (the
        // protocol's default) a connection only slows down.
        http2_window_bytes: value(
            |r| r.http2_window_bytes.as_ref(),
            "http2_window_bytes",
            64 << 10..=(1 << 31) - 1,
            DEFAULT_HTTP2_WINDOW_BYTES,
        )? as u32,
        http2_send_buffer_bytes: value(
            |r| r.http2_send_buffer_bytes.as_ref(),
            "http2_send_buffer_bytes",
            16 << 10..=1 << 30,
            DEFAULT_HTTP2_SEND_BUFFER_BYTES,
        )? as usize,
        changeset: ChangesetLimits {
            max_operations: value(
                |r| r.changeset_max_operations.as_ref(),
                "changeset_max_operations",
                1..=MAX_CHANGESET_FILES as u64,
                defaults.max_operations as u64,
            )? as usize,
            max_bytes: value(
                |r| r.changeset_max_bytes.as_ref(),
                "changeset_max_bytes",
                1 << 10..=1 << 40,
                defaults.max_bytes,
            )?,
            timeout: Duration::from_millis(value(
                |r| r.changeset_timeout_ms.as_ref(),
                "changeset_timeout_ms",
                100..=600_000,
                defaults.timeout.as_millis() as u64,
            )?),
        },
        max_branches_per_principal: value(
            |r| r.max_branches_per_principal.as_ref(),
            "max_branches_per_principal",
            1..=100_000,
            DEFAULT_MAX_BRANCHES_PER_PRINCIPAL,
        )? as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{embedded_default, parse};

    #[test]
    fn limits_section_has_defaults_and_bounds() {
        assert_eq!(embedded_default().limits, LimitsConfig::default());
        let mount = "[[mount]]\nprefix=\"/\"\ntier=\"state\"\n";
        let src = format!(
            "[limits]\nmax_streams_per_principal = 8\nstream_idle_timeout_seconds = 2\n{mount}"
        );
        let limits = parse("x.toml", &src).unwrap().limits;
        assert_eq!(limits.max_streams_per_principal, 8);
        assert_eq!(limits.stream_idle_timeout, Duration::from_secs(2));
        let src = format!("[limits]\nmax_searches_per_principal = 0\n{mount}");
        assert_eq!(
            parse("x.toml", &src).unwrap_err().to_string(),
            "x.toml:2: limits max_searches_per_principal must be between 1 and 64"
        );
        let src = format!("[limits]\nmax_branches_per_principal = 0\n{mount}");
        assert_eq!(
            parse("x.toml", &src).unwrap_err().to_string(),
            "x.toml:2: limits max_branches_per_principal must be between 1 and 100000"
        );
        let src = format!("[limits]\nmax_concurrent_searches = 0\n{mount}");
        assert_eq!(
            parse("x.toml", &src).unwrap_err().to_string(),
            "x.toml:2: limits max_concurrent_searches must be between 1 and 64"
        );
    }
}
