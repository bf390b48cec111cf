//! Configuration: TOML (`agentvfs serve --config FILE`) or the embedded
//! default, validated before the server listens.
//!
//! Every problem is reported with the file, the line and what is wrong, e.g.
//! `agentvfs.toml:12: mount prefix "workspace/": path must be absolute`. See
//! `agentvfs.example.toml` for every key.
//!
//! Files: `limits` (the `[limits]` section) and `mcp` (the `[mcp]` section),
//! each a section's type, defaults and validation; this one parses the
//! file, its mounts, tools, access and principals; `tests` holds the tests.

mod limits;
mod mcp;

pub use limits::{
    DEFAULT_HTTP2_SEND_BUFFER_BYTES, DEFAULT_HTTP2_WINDOW_BYTES, DEFAULT_MAX_CONCURRENT_SEARCHES,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL,
    DEFAULT_MAX_STREAMS_PER_CONNECTION, DEFAULT_MAX_STREAMS_PER_PRINCIPAL, DEFAULT_MEMORY_BYTES,
    DEFAULT_MEMORY_BYTES_PER_PRINCIPAL, DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS, LimitsConfig,
    MAX_CONCURRENT_SEARCHES,
};
use limits::{RawLimits, parse_limits};
pub use mcp::{
    DEFAULT_MCP_ALLOWED_ORIGINS, DEFAULT_MCP_MAX_SESSIONS, DEFAULT_MCP_MAX_SESSIONS_PER_PRINCIPAL,
    DEFAULT_MCP_SESSION_IDLE_TIMEOUT_SECONDS, MAX_MCP_SESSIONS, McpConfig,
};
use mcp::{RawMcp, parse_mcp};

use crate::access::{Grant, OpSet, Principal};
use crate::backend::Keep;
use crate::backend::state::StateLimits;
use crate::history::Retention;
use crate::path::VfsPath;
use crate::scope::Scope;
use serde::Deserialize;
use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
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
/// Default logical directory where tool results over the output budget are
/// saved in full (one file per tool call id).
pub const DEFAULT_LARGE_RESULT_PREFIX: &str = "/large_tool_results";
/// Default most lines of one tool envelope's text.
pub const DEFAULT_MAX_OUTPUT_LINES: u64 = 2000;
/// Default most bytes of one tool envelope's text (50 KiB, about 12k tokens).
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 51200;

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

/// Which tier serves a mount, with its settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TierConfig {
    /// In memory, per session.
    State,
    /// RocksDB in `path`.
    Store {
        /// Data directory.
        path: PathBuf,
        /// fsync every write.
        sync: bool,
    },
    /// A real directory.
    Filesystem {
        /// The directory exposed.
        root: PathBuf,
    },
    /// An S3-compatible bucket, shared by every server mounting it.
    Object {
        /// Where the bucket is, how to reach it, the call deadline.
        bucket: crate::backend::object::BucketOptions,
        /// Prepended to every key.
        key_prefix: String,
        /// Bytes of the per-server content cache.
        cache_bytes: u64,
    },
}

/// True when `key_prefix` names keys every S3 store keeps as written: at
/// most 256 bytes of segments of S3's safe characters, not `.` or `..`,
/// joined by single slashes (one leading and one trailing slash allowed).
pub fn valid_key_prefix(key_prefix: &str) -> bool {
    let inner = key_prefix.strip_prefix('/').unwrap_or(key_prefix);
    let inner = inner.strip_suffix('/').unwrap_or(inner);
    key_prefix.len() <= 256
        && ((inner.is_empty() && key_prefix.len() <= 1)
            || inner.split('/').all(|segment| {
                !segment.is_empty()
                    && segment != "."
                    && segment != ".."
                    && segment
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.!*'()".contains(&b))
            }))
}

/// Default most time one object-store call may take, retries included.
pub const DEFAULT_OBJECT_TIMEOUT_SECONDS: u64 = 30;
/// Default most time one object-store HTTP request may take.
pub const DEFAULT_OBJECT_REQUEST_TIMEOUT_SECONDS: u64 = 10;

/// One mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountConfig {
    /// Logical prefix.
    pub prefix: VfsPath,
    /// The tier serving it.
    pub tier: TierConfig,
    /// What it keeps of its past: `history_versions`, `history_seconds`,
    /// `change_log` (a Filesystem mount keeps no history).
    pub keep: Keep,
}

/// Default changes a State session's log and a Filesystem mount's log
/// keep: memory, so fewer than the Store's.
pub const DEFAULT_MEMORY_CHANGE_LOG: usize = 10_000;
/// Most versions per file a mount may keep.
pub const MAX_HISTORY_VERSIONS: u64 = 10_000;
/// Most changes a change log may keep.
pub const MAX_CHANGE_LOG: u64 = 100_000_000;

/// The Tools service's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolsConfig {
    /// Logical project root of the tools.
    pub root: VfsPath,
    /// Where results over the output budget are saved in full.
    pub large_result_prefix: VfsPath,
    /// Most lines of one envelope's text.
    pub max_output_lines: u64,
    /// Most bytes of one envelope's text.
    pub max_output_bytes: u64,
}

/// The `[access]` section: whether requests without a token are allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessConfig {
    /// Token-less requests act as the local principal holding every grant:
    /// for one trusted local user, where handles are labels, not limits.
    /// Default: on when no `[[principal]]` is configured; refused with
    /// principals.
    pub anonymous: bool,
    /// With `anonymous = false` and no principal: where the server writes a
    /// fresh operator token holding every grant at start-up, for the
    /// orchestrator that mints handles for sub-agents.
    pub operator_token_file: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAccess {
    anonymous: Option<Spanned<bool>>,
    operator_token_file: Option<Spanned<String>>,
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    listen: Option<Spanned<String>>,
    max_file_bytes: Option<Spanned<u64>>,
    state: Option<RawState>,
    tools: Option<RawTools>,
    limits: Option<RawLimits>,
    mcp: Option<RawMcp>,
    #[serde(default, rename = "mount")]
    mounts: Vec<Spanned<RawMount>>,
    #[serde(default, rename = "principal")]
    principals: Vec<Spanned<RawPrincipal>>,
    access: Option<RawAccess>,
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
struct RawTools {
    root: Option<Spanned<String>>,
    large_result_prefix: Option<Spanned<String>>,
    max_output_lines: Option<Spanned<u64>>,
    max_output_bytes: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMount {
    prefix: Spanned<String>,
    tier: Spanned<String>,
    root: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    sync: Option<bool>,
    history_versions: Option<Spanned<u64>>,
    history_seconds: Option<Spanned<u64>>,
    change_log: Option<Spanned<u64>>,
    bucket: Option<Spanned<String>>,
    key_prefix: Option<Spanned<String>>,
    endpoint: Option<Spanned<String>>,
    region: Option<Spanned<String>>,
    path_style: Option<Spanned<bool>>,
    cache_bytes: Option<Spanned<u64>>,
    timeout_seconds: Option<Spanned<u64>>,
    request_timeout_seconds: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrincipal {
    name: Spanned<String>,
    token: Spanned<String>,
    namespace: Option<Spanned<String>>,
    #[serde(default)]
    grants: Vec<Spanned<RawGrant>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrant {
    prefix: Spanned<String>,
    ops: Vec<Spanned<String>>,
}

/// Parses and validates configuration text read from `file`.
pub fn parse(file: &str, source: &str) -> Result<Config, ConfigError> {
    let at = |offset: usize, message: String| ConfigError {
        file: file.to_owned(),
        line: Some(source[..offset.min(source.len())].matches('\n').count() + 1),
        message,
    };
    let raw: RawConfig = toml::from_str(source).map_err(|e| match e.span() {
        Some(span) => at(span.start, e.message().to_owned()),
        None => ConfigError {
            file: file.to_owned(),
            line: None,
            message: e.message().to_owned(),
        },
    })?;

    let listen = match &raw.listen {
        None => SocketAddr::from(([127, 0, 0, 1], 50051)),
        Some(l) => l.get_ref().parse().map_err(|_| {
            at(
                l.span().start,
                format!(
                    "listen {:?} is not an address like 127.0.0.1:50051",
                    l.get_ref()
                ),
            )
        })?,
    };
    let max_file_bytes = match &raw.max_file_bytes {
        None => DEFAULT_MAX_FILE_BYTES,
        Some(m) if *m.get_ref() == 0 || *m.get_ref() > (1 << 40) => {
            return Err(at(
                m.span().start,
                "max_file_bytes must be between 1 and 2^40".into(),
            ));
        }
        Some(m) => *m.get_ref(),
    };
    let state = StateLimits {
        max_total_bytes: raw
            .state
            .as_ref()
            .and_then(|s| s.max_total_bytes)
            .unwrap_or(DEFAULT_STATE_MAX_TOTAL_BYTES),
        max_file_bytes,
        idle_ttl: Duration::from_secs(
            raw.state
                .as_ref()
                .and_then(|s| s.idle_ttl_seconds)
                .unwrap_or(DEFAULT_STATE_IDLE_TTL_SECONDS),
        ),
        max_sessions: match raw.state.as_ref().and_then(|s| s.max_sessions.as_ref()) {
            None => DEFAULT_STATE_MAX_SESSIONS,
            Some(m) if *m.get_ref() == 0 => {
                return Err(at(
                    m.span().start,
                    "state max_sessions must be at least 1".into(),
                ));
            }
            Some(m) => *m.get_ref(),
        },
    };
    let tools = {
        let t = raw.tools.as_ref();
        let logical = |field: Option<&Spanned<String>>, name: &str, default: &str| match field {
            // The defaults are constants this module's tests parse.
            None => Ok(VfsPath::parse(default).expect("default tools paths are valid")),
            Some(r) => VfsPath::parse(r.get_ref())
                .map_err(|e| at(r.span().start, format!("tools {name}: {e}"))),
        };
        // Below 200 lines / 4 KiB a head-and-tail preview has no room left.
        let bounded = |field: Option<&Spanned<u64>>, name: &str, min: u64, default: u64| match field
        {
            None => Ok(default),
            Some(v) if *v.get_ref() < min => Err(at(
                v.span().start,
                format!("tools {name} must be at least {min}"),
            )),
            Some(v) => Ok(*v.get_ref()),
        };
        ToolsConfig {
            root: logical(t.and_then(|t| t.root.as_ref()), "root", "/")?,
            large_result_prefix: logical(
                t.and_then(|t| t.large_result_prefix.as_ref()),
                "large_result_prefix",
                DEFAULT_LARGE_RESULT_PREFIX,
            )?,
            max_output_lines: bounded(
                t.and_then(|t| t.max_output_lines.as_ref()),
                "max_output_lines",
                200,
                DEFAULT_MAX_OUTPUT_LINES,
            )?,
            max_output_bytes: bounded(
                t.and_then(|t| t.max_output_bytes.as_ref()),
                "max_output_bytes",
                4096,
                DEFAULT_MAX_OUTPUT_BYTES,
            )?,
        }
    };

    let mut mounts = Vec::new();
    let mut prefixes = HashSet::new();
    for m in &raw.mounts {
        let span = m.span().start;
        let m = m.get_ref();
        let prefix = VfsPath::parse(m.prefix.get_ref())
            .map_err(|e| at(m.prefix.span().start, format!("mount prefix: {e}")))?;
        if !prefixes.insert(prefix.clone()) {
            return Err(at(m.prefix.span().start, format!("two mounts at {prefix}")));
        }
        let needs = |field: &Option<Spanned<String>>, name: &str, tier: &str| {
            field
                .as_ref()
                .map(|f| PathBuf::from(f.get_ref()))
                .ok_or_else(|| {
                    at(
                        span,
                        format!("mount {prefix}: tier \"{tier}\" needs `{name}`"),
                    )
                })
        };
        let unexpected = |field: &Option<Spanned<String>>, name: &str, tier: &str| match field {
            Some(f) => Err(at(
                f.span().start,
                format!("mount {prefix}: tier \"{tier}\" takes no `{name}`"),
            )),
            None => Ok(()),
        };
        let tier = match m.tier.get_ref().as_str() {
            "state" => {
                unexpected(&m.root, "root", "state")?;
                unexpected(&m.path, "path", "state")?;
                TierConfig::State
            }
            "store" => {
                unexpected(&m.root, "root", "store")?;
                let path = match &m.path {
                    Some(path) => PathBuf::from(path.get_ref()),
                    None => default_store_path(&prefix).map_err(|e| at(span, e))?,
                };
                TierConfig::Store {
                    path,
                    sync: m.sync.unwrap_or(false),
                }
            }
            "filesystem" => {
                unexpected(&m.path, "path", "filesystem")?;
                TierConfig::Filesystem {
                    root: needs(&m.root, "root", "filesystem")?,
                }
            }
            "object" => {
                unexpected(&m.root, "root", "object")?;
                unexpected(&m.path, "path", "object")?;
                let bucket = needs(&m.bucket, "bucket", "object")?.display().to_string();
                if bucket.is_empty() {
                    return Err(at(
                        span,
                        format!("mount {prefix}: bucket must not be empty"),
                    ));
                }
                let seconds = |field: &Option<Spanned<u64>>, name: &str, default: u64| match field {
                    Some(v) if !(1..=3600).contains(v.get_ref()) => Err(at(
                        v.span().start,
                        format!("mount {prefix}: {name} must be between 1 and 3600"),
                    )),
                    Some(v) => Ok(Duration::from_secs(*v.get_ref())),
                    None => Ok(Duration::from_secs(default)),
                };
                let text =
                    |field: &Option<Spanned<String>>| field.as_ref().map(|f| f.get_ref().clone());
                if let Some(key_prefix) = &m.key_prefix
                    && !valid_key_prefix(key_prefix.get_ref())
                {
                    return Err(at(
                        key_prefix.span().start,
                        format!(
                            "mount {prefix}: key_prefix {:?} must be at most 256 bytes of \
                             segments of letters, digits and -_.!*'() (not . or ..) joined \
                             by single slashes",
                            key_prefix.get_ref()
                        ),
                    ));
                }
                TierConfig::Object {
                    bucket: crate::backend::object::BucketOptions {
                        bucket,
                        endpoint: text(&m.endpoint),
                        region: text(&m.region),
                        path_style: m.path_style.as_ref().is_some_and(|v| *v.get_ref()),
                        timeout: seconds(
                            &m.timeout_seconds,
                            "timeout_seconds",
                            DEFAULT_OBJECT_TIMEOUT_SECONDS,
                        )?,
                        request_timeout: seconds(
                            &m.request_timeout_seconds,
                            "request_timeout_seconds",
                            DEFAULT_OBJECT_REQUEST_TIMEOUT_SECONDS,
                        )?,
                    },
                    key_prefix: text(&m.key_prefix).unwrap_or_default(),
                    cache_bytes: match &m.cache_bytes {
                        Some(v) if *v.get_ref() > 1 << 40 => {
                            return Err(at(
                                v.span().start,
                                format!("mount {prefix}: cache_bytes must be at most 2^40"),
                            ));
                        }
                        Some(v) => *v.get_ref(),
                        None => crate::backend::object::DEFAULT_CACHE_BYTES,
                    },
                }
            }
            other => {
                return Err(at(
                    m.tier.span().start,
                    format!(
                        "unknown tier {other:?}; expected \"state\", \"store\", \"filesystem\" or \"object\""
                    ),
                ));
            }
        };
        if !matches!(tier, TierConfig::Object { .. }) {
            for (field, name) in [
                (&m.bucket, "bucket"),
                (&m.key_prefix, "key_prefix"),
                (&m.endpoint, "endpoint"),
                (&m.region, "region"),
            ] {
                unexpected(field, name, m.tier.get_ref())?;
            }
            let starts = [
                (m.path_style.as_ref().map(|v| v.span().start), "path_style"),
                (
                    m.cache_bytes.as_ref().map(|v| v.span().start),
                    "cache_bytes",
                ),
                (
                    m.timeout_seconds.as_ref().map(|v| v.span().start),
                    "timeout_seconds",
                ),
                (
                    m.request_timeout_seconds.as_ref().map(|v| v.span().start),
                    "request_timeout_seconds",
                ),
            ];
            if let Some((Some(start), name)) = starts.into_iter().find(|(start, _)| start.is_some())
            {
                return Err(at(
                    start,
                    format!(
                        "mount {prefix}: tier \"{}\" takes no `{name}`",
                        m.tier.get_ref()
                    ),
                ));
            }
        }
        let in_range = |field: &Option<Spanned<u64>>, name: &str, min: u64, max: u64| match field {
            Some(v) if !(min..=max).contains(v.get_ref()) => Err(at(
                v.span().start,
                format!("mount {prefix}: {name} must be between {min} and {max}"),
            )),
            Some(v) => Ok(Some(*v.get_ref())),
            None => Ok(None),
        };
        let versions = in_range(
            &m.history_versions,
            "history_versions",
            1,
            MAX_HISTORY_VERSIONS,
        )?;
        let seconds = in_range(&m.history_seconds, "history_seconds", 1, 100 * 365 * 86_400)?;
        let changes = in_range(&m.change_log, "change_log", 0, MAX_CHANGE_LOG)?;
        let kept: &[(&Option<Spanned<u64>>, &str)] = match tier {
            TierConfig::Filesystem { .. } => &[
                (&m.history_versions, "history_versions"),
                (&m.history_seconds, "history_seconds"),
            ],
            _ => &[],
        };
        for (field, name) in kept {
            if let Some(f) = field {
                return Err(at(
                    f.span().start,
                    format!(
                        "mount {prefix}: tier {:?} keeps no version history or change log, so it \
                         takes no `{name}`",
                        m.tier.get_ref()
                    ),
                ));
            }
        }
        let default_changes = match tier {
            TierConfig::Store { .. } | TierConfig::Object { .. } => Keep::DEFAULT_CHANGES,
            _ => DEFAULT_MEMORY_CHANGE_LOG,
        };
        let keep = Keep {
            history: Retention {
                versions: versions.map_or(Retention::DEFAULT_VERSIONS, |v| v as usize),
                within: seconds.map(Duration::from_secs),
            },
            changes: changes.map_or(default_changes, |c| c as usize),
        };
        mounts.push(MountConfig { prefix, tier, keep });
    }
    if mounts.is_empty() {
        return Err(ConfigError {
            file: file.into(),
            line: None,
            message: "no [[mount]] configured".into(),
        });
    }

    let mut principals = Vec::new();
    let mut tokens = HashSet::new();
    let mut names = HashSet::new();
    for p in &raw.principals {
        let p = p.get_ref();
        // Names key the per-principal budgets (streams, handles).
        if !names.insert(p.name.get_ref().clone()) {
            return Err(at(
                p.name.span().start,
                format!("two principals are named {:?}", p.name.get_ref()),
            ));
        }
        let token = p.token.get_ref();
        if token.len() < 8 || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(at(
                p.token.span().start,
                "token must be at least 8 characters without spaces".into(),
            ));
        }
        if !tokens.insert(token.clone()) {
            return Err(at(
                p.token.span().start,
                "two principals share one token".into(),
            ));
        }
        let namespace = match &p.namespace {
            None => "default".to_owned(),
            Some(ns) => {
                Scope::check_name("namespace", ns.get_ref())
                    .map_err(|e| at(ns.span().start, e.to_string()))?;
                ns.get_ref().clone()
            }
        };
        let mut grants = Vec::new();
        for g in &p.grants {
            let g = g.get_ref();
            let prefix = VfsPath::parse(g.prefix.get_ref())
                .map_err(|e| at(g.prefix.span().start, format!("grant prefix: {e}")))?;
            let ops = OpSet::parse(g.ops.iter().map(|o| o.get_ref().as_str())).map_err(|e| {
                let start = g
                    .ops
                    .first()
                    .map_or(g.prefix.span().start, |o| o.span().start);
                at(start, e.to_string())
            })?;
            grants.push(Grant { prefix, ops });
        }
        principals.push((
            token.clone(),
            Principal {
                name: p.name.get_ref().clone(),
                namespace,
                grants,
                owner: p.name.get_ref().clone(),
            },
        ));
    }

    // Anonymous access with principals would hand every right to anyone who
    // leaves the token out; without principals and without it, only an
    // operator token can let anybody in.
    let raw_access = raw.access.as_ref();
    let anonymous = raw_access.and_then(|a| a.anonymous.as_ref());
    let operator_file = raw_access.and_then(|a| a.operator_token_file.as_ref());
    let access = AccessConfig {
        anonymous: anonymous.map_or(principals.is_empty(), |a| *a.get_ref()),
        operator_token_file: operator_file.map(|f| PathBuf::from(f.get_ref())),
    };
    match (anonymous, operator_file) {
        (Some(a), _) if access.anonymous && !principals.is_empty() => {
            return Err(at(
                a.span().start,
                "access anonymous = true is refused with [[principal]] configured: every request \
                 without a token would hold every right"
                    .into(),
            ));
        }
        (Some(a), None) if !access.anonymous && principals.is_empty() => {
            return Err(at(
                a.span().start,
                "access anonymous = false with no [[principal]] needs operator_token_file: \
                 nobody could call the server"
                    .into(),
            ));
        }
        (_, Some(f)) if access.anonymous || !principals.is_empty() => {
            return Err(at(
                f.span().start,
                "access operator_token_file is only for anonymous = false with no [[principal]]; \
                 with principals, configure one holding the grants the orchestrator needs"
                    .into(),
            ));
        }
        (_, Some(f)) if f.get_ref().is_empty() => {
            return Err(at(
                f.span().start,
                "access operator_token_file must name a file".into(),
            ));
        }
        _ => {}
    }
    Ok(Config {
        listen,
        max_file_bytes,
        state,
        tools,
        mounts,
        principals,
        access,
        limits: parse_limits(raw.limits.as_ref(), max_file_bytes, &at)?,
        mcp: parse_mcp(raw.mcp, &at)?,
    })
}

/// Where a Store mount without `path` keeps its data: `agentvfs/<prefix>`
/// (the prefix's `/` as `_`, `root` for `/`) in the user's data directory —
/// `$XDG_DATA_HOME`, else `~/.local/share` — so the database lies outside
/// every served directory by default (a Filesystem mount over the working
/// directory would otherwise let any client overwrite it).
pub fn default_store_path(prefix: &VfsPath) -> Result<PathBuf, String> {
    let env_dir = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = env_dir("XDG_DATA_HOME")
        .or_else(|| env_dir("HOME").map(|home| home.join(".local/share")))
        .ok_or_else(|| {
            format!(
                "mount {prefix}: no data directory (neither XDG_DATA_HOME nor HOME is set); \
                 give the mount a `path`"
            )
        })?;
    let name = match prefix.as_str().trim_start_matches('/') {
        "" => "root".to_owned(),
        rel => rel.replace('/', "_"),
    };
    Ok(base.join("agentvfs").join(name))
}

/// The embedded default configuration.
pub fn embedded_default() -> Config {
    parse("<embedded default>", DEFAULT_CONFIG)
        .expect("the embedded default configuration is valid (tested)")
}

#[cfg(test)]
mod tests;
