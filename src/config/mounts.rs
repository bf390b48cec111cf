//! `[[mount]]`: which tier serves each prefix, with its settings and what
//! it keeps of its past.

use super::{ConfigError, Source};
use crate::backend::Keep;
use crate::backend::branch::{RESERVED_PREFIX, is_reserved};
use crate::backend::object::{BucketOptions, DEFAULT_CACHE_BYTES};
use crate::history::Retention;
use crate::path::VfsPath;
use crate::search::index::file_keeper::stable_hash;
use serde::Deserialize;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;
use toml::Spanned;

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
        /// Where its changeset journal lies (`path`); by default
        /// [`default_journal_path`] of the root, in the user's data
        /// directory.
        journal: Option<PathBuf>,
    },
    /// An S3-compatible bucket, shared by every server mounting it.
    Object {
        /// Where the bucket is, how to reach it, the call deadline.
        bucket: BucketOptions,
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
    /// `index`: this mount's Greps use the search index; `None` follows
    /// `[search] index` (docs/search-index.md § Configuration).
    pub index: Option<bool>,
}

/// Default changes a State session's log and a Filesystem mount's log
/// keep: memory, so fewer than the Store's.
pub const DEFAULT_MEMORY_CHANGE_LOG: usize = 10_000;
/// Most versions per file a mount may keep.
pub const MAX_HISTORY_VERSIONS: u64 = 10_000;
/// Most changes a change log may keep.
pub const MAX_CHANGE_LOG: u64 = 100_000_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMount {
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
    index: Option<bool>,
}

/// Validates the mount table: at least one mount, no two at one prefix.
pub(super) fn parse(
    src: &Source<'_>,
    raw: &[Spanned<RawMount>],
) -> Result<Vec<MountConfig>, ConfigError> {
    let mut mounts = Vec::new();
    let mut prefixes = HashSet::new();
    for m in raw {
        let span = m.span().start;
        let m = m.get_ref();
        let prefix = VfsPath::parse(m.prefix.get_ref())
            .map_err(|e| src.at(m.prefix.span().start, format!("mount prefix: {e}")))?;
        if let Some(reserved) = prefix.as_str().split('/').find(|c| is_reserved(c)) {
            return Err(src.at(
                m.prefix.span().start,
                format!(
                    "mount prefix {prefix}: {reserved:?} starts with {RESERVED_PREFIX}, which \
                     names agentvfs's own records (docs/branches.md)"
                ),
            ));
        }
        if !prefixes.insert(prefix.clone()) {
            return Err(src.at(m.prefix.span().start, format!("two mounts at {prefix}")));
        }
        let tier = parse_tier(src, span, &prefix, m)?;
        let keep = parse_keep(src, &prefix, m, &tier)?;
        mounts.push(MountConfig {
            prefix,
            tier,
            keep,
            index: m.index,
        });
    }
    if mounts.is_empty() {
        return Err(src.whole("no [[mount]] configured"));
    }
    Ok(mounts)
}

/// The tier of the mount at `prefix` (declared at byte `span`), refusing
/// the settings of every other tier.
fn parse_tier(
    src: &Source<'_>,
    span: usize,
    prefix: &VfsPath,
    m: &RawMount,
) -> Result<TierConfig, ConfigError> {
    let needs = |field: &Option<Spanned<String>>, name: &str, tier: &str| {
        field.as_ref().map(|f| f.get_ref().clone()).ok_or_else(|| {
            src.at(
                span,
                format!("mount {prefix}: tier \"{tier}\" needs `{name}`"),
            )
        })
    };
    let unexpected = |field: &Option<Spanned<String>>, name: &str, tier: &str| match field {
        Some(f) => Err(src.at(
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
                None => default_store_path(prefix).map_err(|e| src.at(span, e))?,
            };
            TierConfig::Store {
                path,
                sync: m.sync.unwrap_or(false),
            }
        }
        "filesystem" => TierConfig::Filesystem {
            root: PathBuf::from(needs(&m.root, "root", "filesystem")?),
            journal: m.path.as_ref().map(|p| PathBuf::from(p.get_ref())),
        },
        "object" => {
            unexpected(&m.root, "root", "object")?;
            unexpected(&m.path, "path", "object")?;
            parse_object(src, span, prefix, needs(&m.bucket, "bucket", "object")?, m)?
        }
        other => {
            return Err(src.at(
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
        if let Some((Some(start), name)) = starts.into_iter().find(|(start, _)| start.is_some()) {
            return Err(src.at(
                start,
                format!(
                    "mount {prefix}: tier \"{}\" takes no `{name}`",
                    m.tier.get_ref()
                ),
            ));
        }
    }
    Ok(tier)
}

/// An object mount's bucket, key prefix, deadlines and cache.
fn parse_object(
    src: &Source<'_>,
    span: usize,
    prefix: &VfsPath,
    bucket: String,
    m: &RawMount,
) -> Result<TierConfig, ConfigError> {
    if bucket.is_empty() {
        return Err(src.at(span, format!("mount {prefix}: bucket must not be empty")));
    }
    let section = format!("mount {prefix}:");
    let seconds = |field: &Option<Spanned<u64>>, name: &str, default: u64| {
        let value = src.between(field.as_ref(), &section, name, 1..=3600)?;
        Ok::<_, ConfigError>(Duration::from_secs(value.unwrap_or(default)))
    };
    let text = |field: &Option<Spanned<String>>| field.as_ref().map(|f| f.get_ref().clone());
    if let Some(key_prefix) = &m.key_prefix
        && !valid_key_prefix(key_prefix.get_ref())
    {
        return Err(src.at(
            key_prefix.span().start,
            format!(
                "mount {prefix}: key_prefix {:?} must be at most 256 bytes of segments of \
                 letters, digits and -_.!*'() (not . or ..) joined by single slashes",
                key_prefix.get_ref()
            ),
        ));
    }
    Ok(TierConfig::Object {
        bucket: BucketOptions {
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
        cache_bytes: src
            .in_range(m.cache_bytes.as_ref(), 0..=1 << 40, || {
                format!("mount {prefix}: cache_bytes must be at most 2^40")
            })?
            .unwrap_or(DEFAULT_CACHE_BYTES),
    })
}

/// What the mount keeps of its past; a Filesystem mount keeps no history.
fn parse_keep(
    src: &Source<'_>,
    prefix: &VfsPath,
    m: &RawMount,
    tier: &TierConfig,
) -> Result<Keep, ConfigError> {
    let section = format!("mount {prefix}:");
    let versions = src.between(
        m.history_versions.as_ref(),
        &section,
        "history_versions",
        1..=MAX_HISTORY_VERSIONS,
    )?;
    let seconds = src.between(
        m.history_seconds.as_ref(),
        &section,
        "history_seconds",
        1..=100 * 365 * 86_400,
    )?;
    let changes = src.between(
        m.change_log.as_ref(),
        &section,
        "change_log",
        0..=MAX_CHANGE_LOG,
    )?;
    if let TierConfig::Filesystem { .. } = tier {
        for (field, name) in [
            (&m.history_versions, "history_versions"),
            (&m.history_seconds, "history_seconds"),
        ] {
            if let Some(f) = field {
                return Err(src.at(
                    f.span().start,
                    format!(
                        "mount {prefix}: tier {:?} keeps no version history or change log, so it \
                         takes no `{name}`",
                        m.tier.get_ref()
                    ),
                ));
            }
        }
    }
    let default_changes = match tier {
        TierConfig::Store { .. } | TierConfig::Object { .. } => Keep::DEFAULT_CHANGES,
        _ => DEFAULT_MEMORY_CHANGE_LOG,
    };
    Ok(Keep {
        history: Retention {
            versions: versions.map_or(Retention::DEFAULT_VERSIONS, |v| v as usize),
            within: seconds.map(Duration::from_secs),
        },
        changes: changes.map_or(default_changes, |c| c as usize),
    })
}

/// Where a Filesystem mount without `path` keeps its changeset journal:
/// `agentvfs-journal/<name>-<hash>` in the user's data directory, named by
/// the served directory (its last component and a hash of its resolved
/// path), so servers of one directory share it and servers of two never do.
pub fn default_journal_path(root: &std::path::Path) -> Result<PathBuf, String> {
    let resolved = root
        .canonicalize()
        .map_err(|e| format!("{}: {e}", root.display()))?;
    let hash = stable_hash(resolved.as_os_str().as_encoded_bytes());
    let name = resolved
        .file_name()
        .map_or("root".into(), |n| n.to_string_lossy().into_owned());
    Ok(data_home()?
        .join("agentvfs-journal")
        .join(format!("{name}-{hash:016x}")))
}

/// Where an object-tier mount keeps its namespaces' search indexes:
/// `agentvfs-index/<bucket>-<hash>` in the user's data directory, named by
/// the bucket (its endpoint, name and the mount's key prefix), so servers of
/// one deployment on this machine share it and two deployments never do.
pub fn default_object_index_path(
    bucket: &BucketOptions,
    key_prefix: &str,
) -> Result<PathBuf, String> {
    let endpoint = bucket.endpoint.as_deref().unwrap_or("");
    let deployment = format!("{endpoint}\n{}\n{key_prefix}", bucket.bucket);
    let hash = stable_hash(deployment.as_bytes());
    Ok(data_home()?
        .join("agentvfs-index")
        .join(format!("{}-{hash:016x}", bucket.bucket)))
}

/// The user's data directory: `$XDG_DATA_HOME`, else `~/.local/share`.
pub(super) fn data_home() -> Result<PathBuf, String> {
    let env_dir = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    env_dir("XDG_DATA_HOME")
        .or_else(|| env_dir("HOME").map(|home| home.join(".local/share")))
        .ok_or_else(|| "no data directory (neither XDG_DATA_HOME nor HOME is set)".to_owned())
}

/// Where a Store mount without `path` keeps its data: `agentvfs/<prefix>`
/// (the prefix's `/` as `_`, `root` for `/`) in the user's data directory —
/// `$XDG_DATA_HOME`, else `~/.local/share` — so the database lies outside
/// every served directory by default (a Filesystem mount over the working
/// directory would otherwise let any client overwrite it).
pub fn default_store_path(prefix: &VfsPath) -> Result<PathBuf, String> {
    let base = data_home().map_err(|e| format!("mount {prefix}: {e}; give the mount a `path`"))?;
    let name = match prefix.as_str().trim_start_matches('/') {
        "" => "root".to_owned(),
        rel => rel.replace('/', "_"),
    };
    Ok(base.join("agentvfs").join(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

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
    fn a_reserved_name_in_a_mount_prefix_is_refused() {
        let src = "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n[[mount]]\nprefix = \"/a/.avfs-branch.x\"\ntier = \"state\"\n";
        assert_eq!(
            parse("x.toml", src).unwrap_err().to_string(),
            "x.toml:6: mount prefix /a/.avfs-branch.x: \".avfs-branch.x\" starts with .avfs-, \
             which names agentvfs's own records (docs/branches.md)"
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
}
