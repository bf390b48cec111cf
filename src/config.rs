//! Configuration: TOML (`agentvfs serve --config FILE`) or the embedded
//! default, validated before the server listens.
//!
//! Every problem is reported with the file, the line and what is wrong, e.g.
//! `agentvfs.toml:12: mount prefix "workspace/": path must be absolute`. See
//! `agentvfs.example.toml` for every key.

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
pub const DEFAULT_CONFIG: &str = include_str!("default.toml");
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

/// Default `max_streams_per_connection`: HTTP/2 streams (calls) one
/// connection may have open at once.
pub const DEFAULT_MAX_STREAMS_PER_CONNECTION: u32 = 128;
/// Default `max_streams_per_principal`: ReadBytes, WriteBytes, Grep and Glob
/// streams one principal may have running at once.
pub const DEFAULT_MAX_STREAMS_PER_PRINCIPAL: u64 = 32;
/// Default `max_concurrent_searches`: Grep and Glob runs (Filesystem and
/// Tools services together) at once, server-wide.
pub const DEFAULT_MAX_CONCURRENT_SEARCHES: u64 = 16;
/// Most `max_concurrent_searches`: a Filesystem search may use up to four
/// threads, and tokio's blocking pool (512 threads) must keep room for every
/// unary call.
pub const MAX_CONCURRENT_SEARCHES: u64 = 64;
/// Default `stream_idle_timeout_seconds`: how long a stream may wait on its
/// client before it is cut.
pub const DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS: u64 = 30;

/// Default `memory_bytes`: bytes held for calls in flight on the whole
/// server (a quarter of a 4 GiB machine).
pub const DEFAULT_MEMORY_BYTES: u64 = 1 << 30;
/// Default `memory_bytes_per_principal`: a principal's share of it, room for
/// one Read of the largest default file (64 MiB, numbered) with some to spare.
pub const DEFAULT_MEMORY_BYTES_PER_PRINCIPAL: u64 = 256 << 20;
/// Default `max_connections`: connections open at once on the server.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 1024;
/// Default `max_connections_per_principal`: connections one principal may
/// have made calls on at once (an HTTP/1.1 MCP client opens one per call
/// in flight).
pub const DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL: u64 = 32;
/// Default `http2_window_bytes`: what a client may send on a stream, and on
/// a connection, before the server has taken it (hyper's default).
pub const DEFAULT_HTTP2_WINDOW_BYTES: u64 = 1 << 20;
/// Default `http2_send_buffer_bytes`: what HTTP/2 buffers per stream for a
/// client that has not granted room for it yet.
pub const DEFAULT_HTTP2_SEND_BUFFER_BYTES: u64 = 256 << 10;

/// The `[limits]` section: bounds that keep stalled or hostile clients from
/// holding the server's threads and memory (see `agentvfs.example.toml`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitsConfig {
    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`: calls one connection may
    /// have open at once (the client queues the rest).
    pub max_streams_per_connection: u32,
    /// ReadBytes, WriteBytes, Grep and Glob streams one principal may have
    /// running at once; more are refused with RESOURCE_EXHAUSTED. A handle
    /// counts against the principal that minted it.
    pub max_streams_per_principal: usize,
    /// Searches running at once on the whole server; more are refused with
    /// RESOURCE_EXHAUSTED. Each holds a blocking thread (and a Filesystem
    /// search up to three more), so this keeps threads free for other calls.
    pub max_concurrent_searches: usize,
    /// The longest a stream waits on its client (the next WriteBytes
    /// message, room for the next ReadBytes, Grep or Glob message) before it
    /// is aborted and its resources are freed; also how long a response
    /// may wait for the client to take its next piece before the call is
    /// reset.
    pub stream_idle_timeout: Duration,
    /// Bytes held for calls in flight on the whole server: request bodies
    /// being received, stream queues with their HTTP/2 buffers, answers
    /// being built and sent (`src/service/memory.rs`).
    pub memory_bytes: u64,
    /// The most of `memory_bytes` one principal's calls may hold at once.
    pub memory_bytes_per_principal: u64,
    /// Connections open at once; more are closed as they arrive.
    pub max_connections: usize,
    /// Connections one principal may have made calls on at once; a call on
    /// one more is refused with RESOURCE_EXHAUSTED.
    pub max_connections_per_principal: usize,
    /// HTTP/2 receive window of a stream and of a connection: request data
    /// the server lets a client send ahead of what it has taken.
    pub http2_window_bytes: u32,
    /// HTTP/2 send buffer of a stream: response data queued beyond what the
    /// client has granted room for.
    pub http2_send_buffer_bytes: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_streams_per_connection: DEFAULT_MAX_STREAMS_PER_CONNECTION,
            max_streams_per_principal: DEFAULT_MAX_STREAMS_PER_PRINCIPAL as usize,
            max_concurrent_searches: DEFAULT_MAX_CONCURRENT_SEARCHES as usize,
            stream_idle_timeout: Duration::from_secs(DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS),
            memory_bytes: DEFAULT_MEMORY_BYTES,
            memory_bytes_per_principal: DEFAULT_MEMORY_BYTES_PER_PRINCIPAL,
            max_connections: DEFAULT_MAX_CONNECTIONS as usize,
            max_connections_per_principal: DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL as usize,
            http2_window_bytes: DEFAULT_HTTP2_WINDOW_BYTES as u32,
            http2_send_buffer_bytes: DEFAULT_HTTP2_SEND_BUFFER_BYTES as usize,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_streams_per_connection: Option<Spanned<u64>>,
    max_streams_per_principal: Option<Spanned<u64>>,
    max_concurrent_searches: Option<Spanned<u64>>,
    stream_idle_timeout_seconds: Option<Spanned<u64>>,
    memory_bytes: Option<Spanned<u64>>,
    memory_bytes_per_principal: Option<Spanned<u64>>,
    max_connections: Option<Spanned<u64>>,
    max_connections_per_principal: Option<Spanned<u64>>,
    http2_window_bytes: Option<Spanned<u64>>,
    http2_send_buffer_bytes: Option<Spanned<u64>>,
}

/// Validates `[limits]`: every value must lie in its range.
fn parse_limits(
    raw: Option<&RawLimits>,
    max_file_bytes: u64,
    at: &dyn Fn(usize, String) -> ConfigError,
) -> Result<LimitsConfig, ConfigError> {
    let at_least =
        |field: Option<&Spanned<u64>>, name: &str, min: u64, max: u64, default| match field {
            None => Ok(default),
            Some(v) if (min..=max).contains(v.get_ref()) => Ok(*v.get_ref()),
            Some(v) => Err(at(
                v.span().start,
                format!("limits {name} must be between {min} and {max}"),
            )),
        };
    let value = |field: Option<&Spanned<u64>>, name: &str, max: u64, default: u64| {
        at_least(field, name, 1, max, default)
    };
    // A share must hold one whole message (a chunk, a batch, a small file),
    // so neither may go below 1 MiB.
    // By default a share holds one Read of the largest file (the data, the
    // numbered answer) with room to spare, and the server four shares.
    let share_default = DEFAULT_MEMORY_BYTES_PER_PRINCIPAL.max(max_file_bytes.saturating_mul(4));
    let memory_field = raw.and_then(|r| r.memory_bytes.as_ref());
    let memory_bytes = at_least(
        memory_field,
        "memory_bytes",
        1 << 20,
        1 << 50,
        DEFAULT_MEMORY_BYTES.max(share_default.saturating_mul(4)),
    )?;
    let share_field = raw.and_then(|r| r.memory_bytes_per_principal.as_ref());
    let memory_bytes_per_principal = at_least(
        share_field,
        "memory_bytes_per_principal",
        1 << 20,
        1 << 50,
        share_default.min(memory_bytes),
    )?;
    if memory_bytes_per_principal > memory_bytes {
        let start = share_field.or(memory_field).map_or(0, |v| v.span().start);
        return Err(at(
            start,
            format!(
                "limits memory_bytes_per_principal ({memory_bytes_per_principal}) must not exceed \
                 memory_bytes ({memory_bytes})"
            ),
        ));
    }
    Ok(LimitsConfig {
        max_streams_per_connection: value(
            raw.and_then(|r| r.max_streams_per_connection.as_ref()),
            "max_streams_per_connection",
            u64::from(u32::MAX),
            u64::from(DEFAULT_MAX_STREAMS_PER_CONNECTION),
        )? as u32,
        max_streams_per_principal: value(
            raw.and_then(|r| r.max_streams_per_principal.as_ref()),
            "max_streams_per_principal",
            1 << 20,
            DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
        )? as usize,
        max_concurrent_searches: value(
            raw.and_then(|r| r.max_concurrent_searches.as_ref()),
            "max_concurrent_searches",
            MAX_CONCURRENT_SEARCHES,
            DEFAULT_MAX_CONCURRENT_SEARCHES,
        )? as usize,
        stream_idle_timeout: Duration::from_secs(value(
            raw.and_then(|r| r.stream_idle_timeout_seconds.as_ref()),
            "stream_idle_timeout_seconds",
            24 * 3600,
            DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS,
        )?),
        memory_bytes,
        memory_bytes_per_principal,
        max_connections: value(
            raw.and_then(|r| r.max_connections.as_ref()),
            "max_connections",
            1 << 20,
            DEFAULT_MAX_CONNECTIONS,
        )? as usize,
        max_connections_per_principal: value(
            raw.and_then(|r| r.max_connections_per_principal.as_ref()),
            "max_connections_per_principal",
            1 << 20,
            DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL,
        )? as usize,
        // HTTP/2 allows windows up to 2^31 - 1; below 64 KiB (the
        // protocol's default) a connection only slows down.
        http2_window_bytes: at_least(
            raw.and_then(|r| r.http2_window_bytes.as_ref()),
            "http2_window_bytes",
            64 << 10,
            (1 << 31) - 1,
            DEFAULT_HTTP2_WINDOW_BYTES,
        )? as u32,
        http2_send_buffer_bytes: at_least(
            raw.and_then(|r| r.http2_send_buffer_bytes.as_ref()),
            "http2_send_buffer_bytes",
            16 << 10,
            1 << 30,
            DEFAULT_HTTP2_SEND_BUFFER_BYTES,
        )? as usize,
    })
}

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
struct RawMcp {
    http: Option<bool>,
    allowed_hosts: Option<Spanned<Vec<String>>>,
    max_sessions: Option<Spanned<u64>>,
    max_sessions_per_principal: Option<Spanned<u64>>,
    allowed_origins: Option<Spanned<Vec<String>>>,
    session_idle_timeout_seconds: Option<Spanned<u64>>,
}

/// Validates `[mcp]`.
fn parse_mcp(
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
            include_str!("../agentvfs.example.toml"),
        )
        .unwrap();
        assert_eq!(c.principals.len(), 2);
        assert!(!c.access.anonymous);
    }

    #[test]
    fn access_section_allows_only_safe_combinations() {
        const MOUNT: &str = "[[mount]]\nprefix=\"/\"\ntier=\"state\"\n";
        const PRINCIPAL: &str = "[[principal]]\nname=\"a\"\ntoken=\"12345678\"\n";
        let closed = parse(
            "x.toml",
            &format!("{MOUNT}[access]\nanonymous = false\noperator_token_file = \"op.token\"\n"),
        )
        .unwrap();
        assert_eq!(
            closed.access,
            AccessConfig {
                anonymous: false,
                operator_token_file: Some(PathBuf::from("op.token"))
            }
        );
        assert!(
            !parse("x.toml", &format!("{MOUNT}{PRINCIPAL}"))
                .unwrap()
                .access
                .anonymous
        );
        let err = |src: String| parse("x.toml", &src).unwrap_err().to_string();
        assert_eq!(
            err(format!("{MOUNT}{PRINCIPAL}[access]\nanonymous = true\n")),
            "x.toml:8: access anonymous = true is refused with [[principal]] configured: every \
             request without a token would hold every right"
        );
        assert_eq!(
            err(format!("{MOUNT}[access]\nanonymous = false\n")),
            "x.toml:5: access anonymous = false with no [[principal]] needs operator_token_file: \
             nobody could call the server"
        );
        for (src, line) in [
            (
                format!("{MOUNT}[access]\noperator_token_file = \"op.token\"\n"),
                5,
            ),
            (
                format!("{MOUNT}{PRINCIPAL}[access]\noperator_token_file = \"op.token\"\n"),
                8,
            ),
        ] {
            assert!(
                err(src).starts_with(&format!(
                    "x.toml:{line}: access operator_token_file is only for anonymous = false"
                )),
                "line {line}"
            );
        }
        assert_eq!(
            err(format!(
                "{MOUNT}[access]\nanonymous = false\noperator_token_file = \"\"\n"
            )),
            "x.toml:6: access operator_token_file must name a file"
        );
    }

    #[test]
    fn tools_section_has_defaults_and_bounds() {
        let t = embedded_default().tools;
        assert_eq!(t.root.as_str(), "/");
        assert_eq!(t.large_result_prefix.as_str(), DEFAULT_LARGE_RESULT_PREFIX);
        assert_eq!((t.max_output_lines, t.max_output_bytes), (2000, 51200));
        let src = "[tools]\nmax_output_lines = 10\n[[mount]]\nprefix=\"/\"\ntier=\"state\"\n";
        assert_eq!(
            parse("x.toml", src).unwrap_err().to_string(),
            "x.toml:2: tools max_output_lines must be at least 200"
        );
    }

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
        let src = format!("[limits]\nmax_concurrent_searches = 0\n{mount}");
        assert_eq!(
            parse("x.toml", &src).unwrap_err().to_string(),
            "x.toml:2: limits max_concurrent_searches must be between 1 and 64"
        );
    }

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
        let src = format!("[mcp]\nmax_sessions = 0\n{mount}");
        assert_eq!(
            parse("x.toml", &src).unwrap_err().to_string(),
            "x.toml:2: mcp max_sessions must be between 1 and 65536"
        );
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
    fn principal_names_are_unique() {
        let p = |token: &str| format!("[[principal]]\nname=\"a\"\ntoken=\"{token}\"\n");
        let src = format!(
            "[[mount]]\nprefix=\"/\"\ntier=\"state\"\n{}{}",
            p("token-0001"),
            p("token-0002")
        );
        assert_eq!(
            parse("x.toml", &src).unwrap_err().to_string(),
            "x.toml:8: two principals are named \"a\""
        );
    }

    #[test]
    fn key_prefixes_are_plain_segments() {
        for good in ["", "prod", "prod/", "/team-a/agents_1/", "a.b/c!*'()"] {
            assert!(valid_key_prefix(good), "{good:?}");
        }
        for bad in [
            "a//b",
            "//",
            "a/../b",
            "./a",
            "a b",
            "a\\b",
            "é",
            &"x".repeat(257),
        ] {
            assert!(!valid_key_prefix(bad), "{bad:?}");
        }
        let src = "[[mount]]\nprefix = \"/s\"\ntier = \"object\"\nbucket = \"b\"\nkey_prefix = \"a//b\"\n";
        assert_eq!(
            parse("x.toml", src).unwrap_err().to_string(),
            "x.toml:5: mount /s: key_prefix \"a//b\" must be at most 256 bytes of segments of \
             letters, digits and -_.!*'() (not . or ..) joined by single slashes"
        );
    }

    #[test]
    fn object_settings_on_another_tier_are_refused() {
        for (line, expected) in [
            ("bucket = \"b\"", "bucket"),
            ("path_style = true", "path_style"),
            ("cache_bytes = 1", "cache_bytes"),
            ("request_timeout_seconds = 5", "request_timeout_seconds"),
        ] {
            let src = format!("[[mount]]\nprefix = \"/\"\ntier = \"state\"\n{line}\n");
            assert_eq!(
                parse("x.toml", &src).unwrap_err().to_string(),
                format!("x.toml:4: mount /: tier \"state\" takes no `{expected}`")
            );
        }
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
