//! `[mcp]`: the Model Context Protocol endpoint at `/mcp`, read into
//! [`McpConfig`].

use super::{ConfigError, Source, Whole};
use crate::mcp::{
    DEFAULT_MCP_MAX_SESSIONS, DEFAULT_MCP_MAX_SESSIONS_PER_PRINCIPAL,
    DEFAULT_MCP_MAX_SUBSCRIPTIONS_PER_PRINCIPAL, DEFAULT_MCP_MAX_SUBSCRIPTIONS_PER_SESSION,
    DEFAULT_MCP_SESSION_IDLE_TIMEOUT_SECONDS, MAX_MCP_SESSIONS, MAX_MCP_SUBSCRIPTIONS, McpConfig,
    SubscriptionBounds,
};
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    http: Option<bool>,
    allowed_hosts: Option<Spanned<Vec<String>>>,
    max_sessions: Option<Spanned<u64>>,
    max_sessions_per_principal: Option<Spanned<u64>>,
    allowed_origins: Option<Spanned<Vec<String>>>,
    session_idle_timeout_seconds: Option<Spanned<u64>>,
    max_subscriptions_per_session: Option<Spanned<u64>>,
    max_subscriptions_per_principal: Option<Spanned<u64>>,
}

/// Validates `[mcp]`.
pub(super) fn parse(src: &Source<'_>, raw: Option<RawMcp>) -> Result<McpConfig, ConfigError> {
    let defaults = McpConfig::default();
    let Some(raw) = raw else {
        return Ok(defaults);
    };
    let within = |field: Option<Spanned<u64>>, name: &str, max: u64, default: u64| {
        let value = src.between(field.as_ref(), "mcp", name, 1..=max)?;
        Ok::<_, ConfigError>(value.unwrap_or(default))
    };
    let allowed_hosts = match raw.allowed_hosts {
        None => defaults.allowed_hosts,
        Some(hosts) => {
            let start = hosts.span().start;
            let hosts = hosts.into_inner();
            if hosts.is_empty() || hosts.iter().any(|h| h.is_empty() || h.contains('/')) {
                return Err(src.at(
                    start,
                    "mcp allowed_hosts must list host names or host:port values (an empty list \
                     would answer any Host and defeat the DNS-rebinding guard)",
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
                return Err(src.at(
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
    let max_sessions = within(
        raw.max_sessions.clone(),
        "max_sessions",
        MAX_MCP_SESSIONS,
        DEFAULT_MCP_MAX_SESSIONS,
    )?;
    let max_subscriptions_per_principal = within(
        raw.max_subscriptions_per_principal.clone(),
        "max_subscriptions_per_principal",
        MAX_MCP_SUBSCRIPTIONS,
        DEFAULT_MCP_MAX_SUBSCRIPTIONS_PER_PRINCIPAL,
    )?;
    Ok(McpConfig {
        http: raw.http.unwrap_or(defaults.http),
        allowed_hosts,
        allowed_origins,
        max_sessions_per_principal: src.share(
            "mcp",
            "max_sessions_per_principal",
            raw.max_sessions_per_principal.as_ref(),
            1..=MAX_MCP_SESSIONS,
            DEFAULT_MCP_MAX_SESSIONS_PER_PRINCIPAL,
            Whole {
                name: "max_sessions",
                value: max_sessions,
                field: raw.max_sessions.as_ref(),
            },
        )? as usize,
        max_sessions: max_sessions as usize,
        session_idle_timeout: Duration::from_secs(within(
            raw.session_idle_timeout_seconds,
            "session_idle_timeout_seconds",
            24 * 3600,
            DEFAULT_MCP_SESSION_IDLE_TIMEOUT_SECONDS,
        )?),
        subscriptions: SubscriptionBounds {
            per_session: src.share(
                "mcp",
                "max_subscriptions_per_session",
                raw.max_subscriptions_per_session.as_ref(),
                1..=MAX_MCP_SUBSCRIPTIONS,
                DEFAULT_MCP_MAX_SUBSCRIPTIONS_PER_SESSION,
                Whole {
                    name: "max_subscriptions_per_principal",
                    value: max_subscriptions_per_principal,
                    field: raw.max_subscriptions_per_principal.as_ref(),
                },
            )? as usize,
            per_principal: max_subscriptions_per_principal as usize,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{embedded_default, parse};

    #[test]
    fn mcp_section_has_defaults_and_bounds() {
        assert_eq!(embedded_default().mcp, McpConfig::default());
        let mount = "[[mount]]\nprefix=\"/\"\ntier=\"state\"\n";
        let src = format!(
            "[mcp]\nhttp = false\nallowed_hosts = [\"vfs.example.com\"]\nmax_sessions = 3\n{mount}"
        );
        let mcp = parse("x.toml", &src).unwrap().mcp;
        assert!(!mcp.http);
        assert_eq!(mcp.allowed_hosts, ["vfs.example.com"]);
        assert_eq!(mcp.max_sessions, 3);
        let src = format!("[mcp]\nallowed_hosts = []\n{mount}");
        assert!(
            parse("x.toml", &src)
                .unwrap_err()
                .to_string()
                .starts_with("x.toml:2: mcp allowed_hosts must list host names")
        );
        let src = format!("[mcp]\nmax_subscriptions_per_principal = 7\n{mount}");
        assert_eq!(
            parse("x.toml", &src)
                .unwrap()
                .mcp
                .subscriptions
                .per_principal,
            7
        );
        let src = format!("[mcp]\nmax_subscriptions_per_session = 0\n{mount}");
        assert_eq!(
            parse("x.toml", &src).unwrap_err().to_string(),
            "x.toml:2: mcp max_subscriptions_per_session must be between 1 and 65536"
        );
        let src = format!("[mcp]\nmax_sessions = 0\n{mount}");
        assert_eq!(
            parse("x.toml", &src).unwrap_err().to_string(),
            "x.toml:2: mcp max_sessions must be between 1 and 65536"
        );
    }
}
