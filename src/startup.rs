//! Turns a validated [`Config`] into a running server's [`App`]: opens every
//! tier, builds the mount table and the authenticator, and refuses unsafe
//! listeners.

use crate::auth::Auth;
use crate::backend::Backend;
use crate::backend::composite::{CompositeBackend, Mount};
use crate::backend::fs::FsBackend;
use crate::backend::object::{ObjectBackend, ObjectOptions, RENEW_UPLOADS_AFTER};
use crate::backend::state::StateBackend;
use crate::backend::store::{StoreBackend, StoreOptions};
use crate::config::{self, Config, TierConfig};
use crate::error::Error;
use crate::search::index::IndexSettings;
use crate::server::App;
use std::os::unix::ffi::OsStringExt;
use std::sync::Arc;

/// The file in a default journal naming the directory it serves.
const JOURNAL_ROOT_FILE: &str = "root";

/// Keeps the user's data directory from filling with the default journals
/// (`config::default_journal_path`) of directories served once and since
/// deleted, as every test run's temporary roots are: records in `journal`
/// which directory it serves (`root`), and removes each other default
/// journal whose recorded directory is gone while its parent remains (a
/// deleted directory, not an unmounted disk) and which holds no changeset
/// record (`*.intent`: nothing to finish or undo). Its branches and index
/// go with it: what they were of is gone. Failures are logged, never fatal.
fn keep_default_journals(journal: &std::path::Path, root: &std::path::Path) {
    let record = || -> std::io::Result<()> {
        std::fs::create_dir_all(journal)?;
        let served = root.canonicalize()?;
        std::fs::write(
            journal.join(JOURNAL_ROOT_FILE),
            served.as_os_str().as_encoded_bytes(),
        )
    };
    if let Err(e) = record() {
        tracing::warn!(journal = %journal.display(), error = %e, "recording a journal's directory");
    }
    let Some(all) = journal.parent() else { return };
    let Ok(others) = std::fs::read_dir(all) else {
        return;
    };
    for other in others.flatten().map(|e| e.path()) {
        if other == journal || !is_orphan_journal(&other) {
            continue;
        }
        match std::fs::remove_dir_all(&other) {
            Ok(()) => tracing::info!(
                journal = %other.display(),
                "removed the journal of a directory that no longer exists"
            ),
            Err(e) => tracing::warn!(journal = %other.display(), error = %e, "removing a journal"),
        }
    }
}

/// True for a default journal whose recorded directory was deleted (its
/// parent is still there) and which holds no changeset record.
fn is_orphan_journal(journal: &std::path::Path) -> bool {
    let Ok(served) = std::fs::read(journal.join(JOURNAL_ROOT_FILE)) else {
        return false;
    };
    let served = std::path::PathBuf::from(<std::ffi::OsString as OsStringExt>::from_vec(served));
    let deleted = !served.exists() && served.parent().is_some_and(|p| p.is_dir());
    let pending = std::fs::read_dir(journal).map_or(true, |entries| {
        entries
            .flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "intent"))
    });
    deleted && !pending
}

/// Opens the tiers of `config`. Errors name the mount that failed.
pub fn build_app(config: &Config) -> Result<App, String> {
    let mut mounts = Vec::new();
    for m in &config.mounts {
        let search = IndexSettings {
            enabled: m.index.unwrap_or(config.search.enabled),
            ..config.search
        };
        let (backend, tier): (Arc<dyn Backend>, &'static str) = match &m.tier {
            TierConfig::State => (
                Arc::new(
                    StateBackend::new(m.prefix.clone(), config.state, m.keep)
                        .with_search_index(search),
                ),
                "state",
            ),
            TierConfig::Filesystem { root, journal } => {
                let journal = match journal {
                    Some(dir) => dir.clone(),
                    None => {
                        let dir = config::default_journal_path(root)
                            .map_err(|e| format!("mount {}: {e}", m.prefix))?;
                        keep_default_journals(&dir, root);
                        dir
                    }
                };
                let fs = FsBackend::open(
                    m.prefix.clone(),
                    root,
                    config.max_file_bytes,
                    m.keep.changes,
                )
                .and_then(|fs| fs.with_journal(&journal))
                .and_then(|fs| fs.with_branches(&journal.join("branches")))
                .and_then(|fs| fs.with_search_index(search, &journal.join("search-index")))
                .map_err(|e| format!("mount {}: {e}", m.prefix))?;
                (Arc::new(fs), "filesystem")
            }
            TierConfig::Store { path, sync } => {
                let options = StoreOptions {
                    sync: *sync,
                    max_file_bytes: config.max_file_bytes,
                    keep: m.keep,
                };
                let store = StoreBackend::open(m.prefix.clone(), path, options).map_err(|e| {
                    match e.kind() {
                        // Startup problems read better without the kind prefix.
                        Error::Internal(message) => format!("mount {}: {message}", m.prefix),
                        other => format!("mount {}: {other}", m.prefix),
                    }
                })?;
                (Arc::new(store.with_search_index(search)), "store")
            }
            TierConfig::Object {
                bucket,
                key_prefix,
                cache_bytes,
            } => {
                let options = ObjectOptions {
                    bucket: bucket.clone(),
                    key_prefix: key_prefix.clone(),
                    max_file_bytes: config.max_file_bytes,
                    cache_bytes: *cache_bytes,
                    credentials: None,
                    renew_uploads_after: RENEW_UPLOADS_AFTER,
                    keep: m.keep,
                };
                // With no data directory the index is kept in memory only:
                // it speeds Greps up, and the tier serves without it.
                let index_dir = config::default_object_index_path(bucket, key_prefix)
                    .inspect_err(|err| {
                        tracing::warn!(mount = %m.prefix, %err, "search index not kept across restarts");
                    })
                    .ok();
                let tier = ObjectBackend::open(m.prefix.clone(), options)
                    .map_err(|e| format!("mount {}: {}", m.prefix, e.kind()))?;
                (
                    Arc::new(tier.with_search_index(search, index_dir.as_deref())),
                    "object",
                )
            }
        };
        mounts.push(Mount {
            prefix: m.prefix.clone(),
            backend,
            tier,
        });
    }
    let backend = CompositeBackend::new(mounts).map_err(|e| e.to_string())?;
    Ok(App {
        backend: Arc::new(backend),
        auth: Arc::new(Auth::with_operator(
            config.principals.clone(),
            config.access.anonymous,
            config.access.operator_token_file.as_deref(),
        )?),
        max_file_bytes: config.max_file_bytes,
        tools: config.tools.clone(),
        limits: config.limits,
        mcp: config.mcp.clone(),
        audit: crate::audit::Audit::open(&config.audit)
            .map_err(|e| e.to_string())?
            .with_metrics(Arc::new(crate::metrics::Metrics::new())),
    })
}

/// Raises the soft limit on open descriptors to the hard limit: a
/// Filesystem search holds one per directory level it is inside, and many
/// searches and transfers at once must not run the process out of them
/// (the usual soft limit is 1,024).
pub fn raise_open_file_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            tracing::warn!(cause = %e, "cannot raise the open file limit");
        }
    }
}

/// Refuses a Store data directory inside a Filesystem mount's root: any
/// client could then overwrite the database's files through the mount (and
/// a corrupted `CURRENT` keeps the server from starting again).
pub fn check_data_dirs(config: &Config) -> Result<(), String> {
    check_audit_dir(config)?;
    for store in &config.mounts {
        let TierConfig::Store { path, .. } = &store.tier else {
            continue;
        };
        let data = real_path(path)?;
        for served in &config.mounts {
            let TierConfig::Filesystem { root, .. } = &served.tier else {
                continue;
            };
            let root_real = real_path(root)?;
            if data.starts_with(&root_real) {
                return Err(format!(
                    "mount {}: data directory {} lies inside {}, the directory served at {}; \
                     any client could overwrite the database. Give the store a `path` (or \
                     --data DIR) outside every served directory",
                    store.prefix,
                    path.display(),
                    root.display(),
                    served.prefix
                ));
            }
        }
    }
    Ok(())
}

/// Refuses an audit directory inside (or holding) a Filesystem mount's
/// root: the audited could then read or rewrite their own records
/// (docs/audit.md § Out of reach).
fn check_audit_dir(config: &Config) -> Result<(), String> {
    if !config.audit.enabled {
        return Ok(());
    }
    let audit = real_path(&config.audit.dir)?;
    for served in &config.mounts {
        let TierConfig::Filesystem { root, .. } = &served.tier else {
            continue;
        };
        let root_real = real_path(root)?;
        if audit.starts_with(&root_real) || root_real.starts_with(&audit) {
            return Err(format!(
                "[audit] dir {} and {}, the directory served at {}, overlap; the audited \
                 could reach their own records. Give [audit] a `dir` outside every served \
                 directory",
                config.audit.dir.display(),
                root.display(),
                served.prefix
            ));
        }
    }
    Ok(())
}

/// `path` made absolute with every link resolved, as far as it exists: the
/// missing rest (a data directory not created yet) is appended as written.
fn real_path(path: &std::path::Path) -> Result<std::path::PathBuf, String> {
    let absolute = std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        match existing.canonicalize() {
            Ok(real) => return Ok(rest.iter().rev().fold(real, |p, name| p.join(name))),
            Err(_) => match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_owned());
                    existing = parent;
                }
                _ => return Ok(absolute),
            },
        }
    }
}

/// Refuses to serve a non-loopback address without authentication unless
/// explicitly allowed: an open server on a network would give anyone every
/// right.
pub fn check_listener(config: &Config, allow_unauthenticated: bool) -> Result<(), String> {
    if config.access.anonymous && !config.listen.ip().is_loopback() && !allow_unauthenticated {
        return Err(format!(
            "refusing to listen on {} with no [[principal]] configured: anyone could read and write \
             everything. Configure principals, listen on loopback, or pass --allow-unauthenticated",
            config.listen
        ));
    }
    Ok(())
}

/// The lines `serve` prints after `agentvfs listening on ADDR` (which
/// scripts parse, so it stays first and alone): each mount with its tier and
/// where its data lives, who may call, and the MCP endpoint.
pub fn banner(config: &Config, addr: std::net::SocketAddr) -> String {
    let mut lines = Vec::new();
    for m in &config.mounts {
        let (tier, data) = match &m.tier {
            TierConfig::State => ("state", "in memory, per session; gone at exit".to_owned()),
            TierConfig::Store { path, .. } => ("store", shown_path(path)),
            TierConfig::Filesystem { root, .. } => ("filesystem", shown_path(root)),
            TierConfig::Object {
                bucket, key_prefix, ..
            } => {
                let at = bucket.endpoint.as_deref().unwrap_or("AWS S3");
                (
                    "object",
                    format!("s3://{}/{key_prefix} at {at}", bucket.bucket),
                )
            }
        };
        lines.push(format!(
            "  mount {:<12} {tier:<10} {data}",
            m.prefix.as_str()
        ));
    }
    let auth = match (config.access.anonymous, config.principals.len()) {
        (true, _) => "anonymous: any local process may call, with every grant (configure \
                      [[principal]]s before exposing it)"
            .to_owned(),
        (false, 1) => "principals: 1, each call needs its bearer token".to_owned(),
        (false, n) => format!("principals: {n}, each call needs its bearer token"),
    };
    lines.push(format!("  auth  {auth}"));
    let mcp = match config.mcp.http {
        true => format!("http://{addr}/mcp"),
        false => "off ([mcp] http = false)".to_owned(),
    };
    lines.push(format!("  mcp   {mcp}"));
    lines.join("\n")
}

/// A configured directory as the banner shows it: absolute, links resolved
/// as far as it exists.
fn shown_path(path: &std::path::Path) -> String {
    real_path(path).map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
}
