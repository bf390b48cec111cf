//! Configuration: TOML (`agentvfs serve --config FILE`) or the embedded
//! default, validated before the server listens.
//!
//! Every problem is reported with the file, the line and what is wrong, e.g.
//! `agentvfs.toml:12: mount prefix "workspace/": path must be absolute`. See
//! `agentvfs.example.toml` for every key.
//!
//! Configuration sits at the top of the crate, beside `startup`: each
//! section is read here, by one file per section (`mounts`, `principals`
//! with `[access]`, `limits`, `tools`, `mcp`, `audit`), into the settings type of the
//! module that owns it ([`LimitsConfig`] in `service::limits`,
//! [`ToolsConfig`] in `tools`, [`McpConfig`] in `mcp`), so no module below
//! depends on configuration. Every range check goes through
//! [`Source::in_range`].

mod audit;
mod limits;
mod mcp;
mod mounts;
mod principals;
mod tools;

pub use crate::audit::AuditConfig;
pub use crate::mcp::McpConfig;
pub use crate::service::LimitsConfig;
pub use crate::tools::ToolsConfig;
pub use mounts::{
    DEFAULT_MEMORY_CHANGE_LOG, DEFAULT_OBJECT_REQUEST_TIMEOUT_SECONDS,
    DEFAULT_OBJECT_TIMEOUT_SECONDS, MAX_CHANGE_LOG, MAX_HISTORY_VERSIONS, MountConfig, TierConfig,
    default_journal_path, default_object_index_path, default_store_path, valid_key_prefix,
};
pub use principals::AccessConfig;

use crate::access::Principal;
use crate::backend::state::StateLimits;
use crate::search::index::IndexSettings;
use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;
use toml::Spanned;

/// The configuration used when no `--config` is given.
pub const DEFAULT_CONFIG: &str = include_str!("../default.toml");
/// Default largest file: 64 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 << 20;
/// Default bytes of all State sessions together: 1 GiB.
pub const DEFAULT_STATE_MAX_TOTAL_BYTES: u64 = 1 << 30;
/// Default idle time before a State session is dropped: one hour.
pub const DEFAULT_STATE_IDLE_TTL_SECONDS: u64 = 3600;
/// Default most State sessions at once (of all namespaces together).
pub const DEFAULT_STATE_MAX_SESSIONS: usize = 10_000;

/// A configuration problem, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or `<embedded default>`).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.file, line, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The text being parsed and its file's name: what turns a byte offset of a
/// value into the line an error names, shared by every section's parser.
struct Source<'a> {
    file: &'a str,
    text: &'a str,
}

impl Source<'_> {
    /// An error at byte `offset` of the text.
    fn at(&self, offset: usize, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.to_owned(),
            line: Some(
                self.text[..offset.min(self.text.len())]
                    .matches('\n')
                    .count()
                    + 1,
            ),
            message: message.into(),
        }
    }

    /// An error of the whole file (no line).
    fn whole(&self, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.to_owned(),
            line: None,
            message: message.into(),
        }
    }

    /// The one range check: the value of `field` when it lies in `range`,
    /// `None` when the key is absent; a value outside is an error at the
    /// value saying `problem`.
    fn in_range<T: PartialOrd + Copy>(
        &self,
        field: Option<&Spanned<T>>,
        range: RangeInclusive<T>,
        problem: impl FnOnce() -> String,
    ) -> Result<Option<T>, ConfigError> {
        match field {
            None => Ok(None),
            Some(v) if range.contains(v.get_ref()) => Ok(Some(*v.get_ref())),
            Some(v) => Err(self.at(v.span().start, problem())),
        }
    }

    /// [`Source::in_range`] worded as most keys are: `{section} {name} must
    /// be between {min} and {max}`.
    fn between(
        &self,
        field: Option<&Spanned<u64>>,
        section: &str,
        name: &str,
        range: RangeInclusive<u64>,
    ) -> Result<Option<u64>, ConfigError> {
        let (min, max) = (*range.start(), *range.end());
        self.in_range(field, range, || {
            format!("{section} {name} must be between {min} and {max}")
        })
    }

    /// The key `name` of `[section]`, a share of the limit `whole` (one
    /// principal's part of the server's, one session's of its
    /// principal's): in `range`, and by default `default` capped at the
    /// whole. A share set above its whole is refused naming both keys, at
    /// the share's line (or the whole's, when only it was set).
    fn share(
        &self,
        section: &str,
        name: &str,
        field: Option<&Spanned<u64>>,
        range: RangeInclusive<u64>,
        default: u64,
        whole: Whole<'_>,
    ) -> Result<u64, ConfigError> {
        let value = self
            .between(field, section, name, range)?
            .unwrap_or(default.min(whole.value));
        if value > whole.value {
            let start = field.or(whole.field).map_or(0, |v| v.span().start);
            return Err(self.at(
                start,
                format!(
                    "{section} {name} ({value}) must not exceed {} ({})",
                    whole.name, whole.value
                ),
            ));
        }
        Ok(value)
    }
}

/// A limit that [`Source::share`] divides: its key, its value and where it
/// was set (`None`: its default).
struct Whole<'a> {
    name: &'a str,
    value: u64,
    field: Option<&'a Spanned<u64>>,
}

/// A validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Listen address.
    pub listen: SocketAddr,
    /// Largest file.
    pub max_file_bytes: u64,
    /// State tier bounds.
    pub state: StateLimits,
    /// Tools settings.
    pub tools: ToolsConfig,
    /// Mount table.
    pub mounts: Vec<MountConfig>,
    /// `(token, principal)` pairs.
    pub principals: Vec<(String, Principal)>,
    /// Anonymous mode and the operator token.
    pub access: AccessConfig,
    /// Stream, search and idle bounds.
    pub limits: LimitsConfig,
    /// The MCP endpoint.
    pub mcp: McpConfig,
    /// The search index of the State and Store tiers (`[search]`).
    pub search: IndexSettings,
    /// The audit log (`[audit]`, docs/audit.md).
    pub audit: AuditConfig,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    listen: Option<Spanned<String>>,
    max_file_bytes: Option<Spanned<u64>>,
    state: Option<RawState>,
    tools: Option<tools::RawTools>,
    limits: Option<limits::RawLimits>,
    mcp: Option<mcp::RawMcp>,
    search: Option<RawSearch>,
    #[serde(default, rename = "mount")]
    mounts: Vec<Spanned<mounts::RawMount>>,
    #[serde(default, rename = "principal")]
    principals: Vec<Spanned<principals::RawPrincipal>>,
    access: Option<principals::RawAccess>,
    audit: Option<audit::RawAudit>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawState {
    max_total_bytes: Option<u64>,
    idle_ttl_seconds: Option<u64>,
    max_sessions: Option<Spanned<usize>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSearch {
    index: Option<bool>,
    index_min_files: Option<Spanned<u64>>,
    index_bytes_per_principal: Option<Spanned<u64>>,
    index_bytes: Option<Spanned<u64>>,
    index_self_check: Option<Spanned<f64>>,
}

/// Validates `[search]`: each value in its range, and a principal's share
/// of the indexes (`index_bytes_per_principal`, by default the smaller of
/// 512 MiB and `index_bytes`) no larger than the server's (`index_bytes`).
fn parse_search(src: &Source<'_>, raw: Option<&RawSearch>) -> Result<IndexSettings, ConfigError> {
    let default = IndexSettings::default();
    let bytes = src
        .between(
            raw.and_then(|s| s.index_bytes.as_ref()),
            "search",
            "index_bytes",
            0..=1 << 50,
        )?
        .unwrap_or(default.bytes);
    let bytes_per_principal = src.share(
        "search",
        "index_bytes_per_principal",
        raw.and_then(|s| s.index_bytes_per_principal.as_ref()),
        0..=u64::MAX,
        default.bytes_per_principal,
        Whole {
            name: "index_bytes",
            value: bytes,
            field: raw.and_then(|s| s.index_bytes.as_ref()),
        },
    )?;
    Ok(IndexSettings {
        enabled: raw.and_then(|s| s.index).unwrap_or(default.enabled),
        min_files: src
            .between(
                raw.and_then(|s| s.index_min_files.as_ref()),
                "search",
                "index_min_files",
                0..=u64::from(u32::MAX),
            )?
            .unwrap_or(default.min_files),
        bytes_per_principal,
        bytes,
        self_check_per_million: match raw.and_then(|s| s.index_self_check.as_ref()) {
            None => default.self_check_per_million,
            Some(f) if (0.0..=1.0).contains(f.get_ref()) => {
                (f.get_ref() * 1_000_000.0).round() as u32
            }
            Some(f) => {
                return Err(src.at(
                    f.span().start,
                    "search index_self_check must be a fraction between 0 and 1",
                ));
            }
        },
    })
}

/// Parses and validates configuration text read from `file`.
pub fn parse(file: &str, source: &str) -> Result<Config, ConfigError> {
    let src = Source { file, text: source };
    let raw: RawConfig = toml::from_str(source).map_err(|e| match e.span() {
        Some(span) => src.at(span.start, e.message()),
        None => src.whole(e.message()),
    })?;
    let listen = match &raw.listen {
        None => SocketAddr::from(([127, 0, 0, 1], 50051)),
        Some(l) => l.get_ref().parse().map_err(|_| {
            src.at(
                l.span().start,
                format!(
                    "listen {:?} is not an address like 127.0.0.1:50051",
                    l.get_ref()
                ),
            )
        })?,
    };
    let max_file_bytes = src
        .in_range(raw.max_file_bytes.as_ref(), 1..=1 << 40, || {
            "max_file_bytes must be between 1 and 2^40".into()
        })?
        .unwrap_or(DEFAULT_MAX_FILE_BYTES);
    let state = parse_state(&src, raw.state.as_ref(), max_file_bytes)?;
    let tools = tools::parse(&src, raw.tools.as_ref())?;
    let mounts = mounts::parse(&src, &raw.mounts)?;
    let principals = principals::parse(&src, &raw.principals)?;
    let access = principals::parse_access(&src, raw.access.as_ref(), &principals)?;
    Ok(Config {
        listen,
        max_file_bytes,
        state,
        tools,
        mounts,
        principals,
        access,
        limits: limits::parse(&src, raw.limits.as_ref(), max_file_bytes)?,
        mcp: mcp::parse(&src, raw.mcp)?,
        search: parse_search(&src, raw.search.as_ref())?,
        audit: audit::parse(&src, raw.audit.as_ref())?,
    })
}

/// Validates `[state]`.
fn parse_state(
    src: &Source<'_>,
    raw: Option<&RawState>,
    max_file_bytes: u64,
) -> Result<StateLimits, ConfigError> {
    let max_sessions = raw.and_then(|s| s.max_sessions.as_ref());
    Ok(StateLimits {
        max_total_bytes: raw
            .and_then(|s| s.max_total_bytes)
            .unwrap_or(DEFAULT_STATE_MAX_TOTAL_BYTES),
        max_file_bytes,
        idle_ttl: Duration::from_secs(
            raw.and_then(|s| s.idle_ttl_seconds)
                .unwrap_or(DEFAULT_STATE_IDLE_TTL_SECONDS),
        ),
        max_sessions: src
            .in_range(max_sessions, 1..=usize::MAX, || {
                "state max_sessions must be at least 1".into()
            })?
            .unwrap_or(DEFAULT_STATE_MAX_SESSIONS),
    })
}

/// The embedded default configuration.
pub fn embedded_default() -> Config {
    parse("<embedded default>", DEFAULT_CONFIG)
        .expect("the embedded default configuration is valid (tested)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_listens_on_loopback_without_principals() {
        let c = embedded_default();
        assert_eq!(c.listen.to_string(), "127.0.0.1:50051");
        let prefixes: Vec<_> = c.mounts.iter().map(|m| m.prefix.to_string()).collect();
        assert_eq!(prefixes, ["/", "/memories", "/workspace"]);
        assert!(c.principals.is_empty());
        assert_eq!(
            c.access,
            AccessConfig {
                anonymous: true,
                operator_token_file: None
            }
        );
    }

    #[test]
    fn example_file_is_valid() {
        let c = parse(
            "agentvfs.example.toml",
            include_str!("../../agentvfs.example.toml"),
        )
        .unwrap();
        assert_eq!(c.principals.len(), 2);
        assert!(!c.access.anonymous);
    }

    #[test]
    fn search_index_settings_have_defaults_and_bounds() {
        assert_eq!(embedded_default().search, IndexSettings::default());
        let mount = "[[mount]]\nprefix=\"/\"\ntier=\"state\"\n";
        let c = parse(
            "x.toml",
            &format!(
                "[search]\nindex = false\nindex_min_files = 5\nindex_bytes_per_principal = 9\n\
                 index_self_check = 0.25\n{mount}"
            ),
        );
        let search = c.unwrap().search;
        assert!(!search.enabled);
        assert_eq!(search.min_files, 5);
        assert_eq!(search.bytes_per_principal, 9);
        assert_eq!(search.self_check_per_million, 250_000);
        let err = parse(
            "x.toml",
            &format!("[search]\nindex_self_check = 1.5\n{mount}"),
        );
        assert_eq!(
            err.unwrap_err().to_string(),
            "x.toml:2: search index_self_check must be a fraction between 0 and 1"
        );
        let err = parse(
            "x.toml",
            &format!("[search]\nindex_min_files = 5000000000\n{mount}"),
        );
        assert_eq!(
            err.unwrap_err().to_string(),
            "x.toml:2: search index_min_files must be between 0 and 4294967295"
        );
        let err = parse(
            "x.toml",
            &format!("[search]\nindex_bytes = 100\nindex_bytes_per_principal = 200\n{mount}"),
        );
        assert_eq!(
            err.unwrap_err().to_string(),
            "x.toml:3: search index_bytes_per_principal (200) must not exceed index_bytes (100)"
        );
        let c = parse("x.toml", &format!("[search]\nindex_bytes = 100\n{mount}"));
        let search = c.unwrap().search;
        assert_eq!((search.bytes, search.bytes_per_principal), (100, 100));
        let err = parse("x.toml", &format!("[search]\nindex = \"yes\"\n{mount}"));
        assert!(err.unwrap_err().to_string().starts_with("x.toml:2: "));
    }

    #[test]
    fn state_max_sessions_has_a_default_and_a_floor() {
        assert_eq!(
            embedded_default().state.max_sessions,
            DEFAULT_STATE_MAX_SESSIONS
        );
        let src = |n: u32| {
            format!("[state]\nmax_sessions = {n}\n[[mount]]\nprefix=\"/\"\ntier=\"state\"\n")
        };
        assert_eq!(parse("x.toml", &src(3)).unwrap().state.max_sessions, 3);
        assert_eq!(
            parse("x.toml", &src(0)).unwrap_err().to_string(),
            "x.toml:2: state max_sessions must be at least 1"
        );
    }

    #[test]
    fn errors_name_file_line_and_problem() {
        let src = "listen = \"127.0.0.1:1\"\n[[mount]]\nprefix = \"/\"\ntier = \"cloud\"\n";
        let err = parse("x.toml", src).unwrap_err();
        assert_eq!(
            err.to_string(),
            "x.toml:4: unknown tier \"cloud\"; expected \"state\", \"store\", \"filesystem\" or \"object\""
        );
        let err = parse("x.toml", "[[mount]]\nprefix = \"rel/\"\ntier = \"state\"\n").unwrap_err();
        assert_eq!(err.line, Some(2));
        let err = parse("x.toml", "bogus = 1\n").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("x.toml:1: unknown field `bogus`"),
            "{err}"
        );
        let bad_op = "[[mount]]\nprefix=\"/\"\ntier=\"state\"\n[[principal]]\nname=\"a\"\ntoken=\"12345678\"\ngrants=[{prefix=\"/\", ops=[\"read\"]}]\n";
        assert!(
            parse("x.toml", bad_op)
                .unwrap_err()
                .to_string()
                .contains("x.toml:7: unknown operation \"read\"")
        );
    }
}
