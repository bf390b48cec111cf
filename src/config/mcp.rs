//! The `[mcp]` section: the Model Context Protocol endpoint served at
//! `/mcp` (docs/mcp.md); every value is checked against its range.

use super::ConfigError;
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

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
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    http: Option<bool>,
    allowed_hosts: Option<Spanned<Vec<String>>>,
    max_sessions: Option<Spanned<u64>>,
    max_sessions_per_principal: Option<Spanned<u64>>,
    allowed_origins: Option<Spanned<Vec<String>>>,
    session_idle_timeout_seconds: Option<Spanned<u64>>,
}

/// Validates `[mcp]`.
pub(super) fn parse_mcp(
    raw: Option<RawMcp>,
    at: &dyn Fn(usize, String) -> ConfigError,
) -> Result<McpConfig, ConfigError> {
    let defaults = McpConfig::default();
    let Some(raw) = raw else {
        return Ok(defaults);
    };
    let within = |field: Option<Spanned<u64>>, name: &str, max: u64, default: u64| match field {
        None => Ok(default),
        Some(v) if (1..=max).contains(v.get_ref()) => Ok(*v.get_ref()),
        Some(v) => Err(at(
            v.span().start,
            format!("mcp {name} must be between 1 and {max}"),
        )),
    };
    let allowed_hosts = match raw.allowed_hosts {
        None => defaults.allowed_hosts,
        Some(hosts) => {
            let start = hosts.span().start;
            let hosts = hosts.into_inner();
            if hosts.is_empty() || hosts.iter().any(|h| h.is_empty() || h.contains('/')) {
                return Err(at(
                    start,
                    "mcp allowed_hosts must list host names or host:port values (an empty list \
                     would answer any Host and defeat the DNS-rebinding guard)"
                        .into(),
                ));
            }
            hosts
        }
    };
    let allowed_origins = match raw.allowed_origins {
        None => defaults.allowed_origins,
        Some(origins) => {
            let start = origins.span().start;
            let origins = origins.into_inner();
            if let Some(bad) = origins.iter().find(|o| *o != "null" && !o.contains("://")) {
                return Err(at(
                    start,
                    format!(
                        "mcp allowed_origins: {bad:?} is not an origin (scheme://host:port, \
                         :* for any port, or null)"
                    ),
                ));
            }
            origins
        }
    };
    Ok(McpConfig {
        http: raw.http.unwrap_or(defaults.http),
        allowed_hosts,
        allowed_origins,
        max_sessions_per_principal: within(
            raw.max_sessions_per_principal,
            "max_sessions_per_principal",
            MAX_MCP_SESSIONS,
            DEFAULT_MCP_MAX_SESSIONS_PER_PRINCIPAL,
        )? as usize,
        max_sessions: within(
            raw.max_sessions,
            "max_sessions",
            MAX_MCP_SESSIONS,
            DEFAULT_MCP_MAX_SESSIONS,
        )? as usize,
        session_idle_timeout: Duration::from_secs(within(
            raw.session_idle_timeout_seconds,
            "session_idle_timeout_seconds",
            24 * 3600,
            DEFAULT_MCP_SESSION_IDLE_TIMEOUT_SECONDS,
        )?),
    })
}
