//! `[audit]`: the audit log (docs/audit.md), read into
//! [`AuditConfig`]; its `[[audit.rule]]`s into the [`Policy`].

use super::{ConfigError, Source};
use crate::audit::{AuditConfig, Class, Failure, Level, Policy, Rule};
use crate::path::VfsPath;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;
use toml::Spanned;

/// Default records between checkpoints.
pub const DEFAULT_CHECKPOINT_RECORDS: u64 = 1000;
/// Default seconds between checkpoints.
pub const DEFAULT_CHECKPOINT_SECONDS: u64 = 10;
/// Default size of a segment: 64 MiB.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAudit {
    enabled: Option<bool>,
    dir: Option<String>,
    checkpoint_records: Option<Spanned<u64>>,
    checkpoint_seconds: Option<Spanned<u64>>,
    segment_bytes: Option<Spanned<u64>>,
    retention_days: Option<Spanned<u64>>,
    retention_bytes: Option<Spanned<u64>>,
    failure: Option<Spanned<String>>,
    sync: Option<bool>,
    #[serde(default, rename = "rule")]
    rules: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    prefix: Option<Spanned<String>>,
    principal: Option<String>,
    class: Option<Spanned<String>>,
    level: Spanned<String>,
}

/// Validates `[audit]`: each number in its range, the failure mode, each
/// rule's prefix, class and level. The directory defaults to
/// `agentvfs-audit` in the user's data directory.
pub(super) fn parse(src: &Source<'_>, raw: Option<&RawAudit>) -> Result<AuditConfig, ConfigError> {
    let between =
        |field: Option<&Spanned<u64>>, name: &str, range| src.between(field, "audit", name, range);
    let enabled = raw.and_then(|a| a.enabled).unwrap_or(false);
    let dir = match raw.and_then(|a| a.dir.as_ref()) {
        Some(dir) => PathBuf::from(dir),
        None if enabled => super::mounts::data_home()
            .map_err(|e| src.whole(format!("audit dir: {e}; give [audit] a `dir`")))?
            .join("agentvfs-audit"),
        None => PathBuf::new(),
    };
    let days = between(
        raw.and_then(|a| a.retention_days.as_ref()),
        "retention_days",
        0..=36_500,
    )?;
    let bytes = between(
        raw.and_then(|a| a.retention_bytes.as_ref()),
        "retention_bytes",
        0..=1 << 50,
    )?;
    let failure = match raw.and_then(|a| a.failure.as_ref()) {
        None => Failure::FailClosed,
        Some(f) => match f.get_ref().as_str() {
            "fail_closed" => Failure::FailClosed,
            "drop_and_count" => Failure::DropAndCount,
            other => {
                return Err(src.at(
                    f.span().start,
                    format!(
                        "audit failure {other:?} is not a mode; expected \"fail_closed\" or \
                         \"drop_and_count\""
                    ),
                ));
            }
        },
    };
    let mut rules = Vec::new();
    for rule in raw.map_or(&[][..], |a| &a.rules) {
        rules.push(parse_rule(src, rule)?);
    }
    Ok(AuditConfig {
        enabled,
        dir,
        policy: Policy { rules },
        checkpoint_records: between(
            raw.and_then(|a| a.checkpoint_records.as_ref()),
            "checkpoint_records",
            1..=1_000_000,
        )?
        .unwrap_or(DEFAULT_CHECKPOINT_RECORDS),
        checkpoint_interval: Duration::from_secs(
            between(
                raw.and_then(|a| a.checkpoint_seconds.as_ref()),
                "checkpoint_seconds",
                1..=3600,
            )?
            .unwrap_or(DEFAULT_CHECKPOINT_SECONDS),
        ),
        segment_bytes: between(
            raw.and_then(|a| a.segment_bytes.as_ref()),
            "segment_bytes",
            4096..=1 << 40,
        )?
        .unwrap_or(DEFAULT_SEGMENT_BYTES),
        retention_age: days
            .filter(|d| *d > 0)
            .map(|d| Duration::from_secs(d * 86_400)),
        retention_bytes: bytes.filter(|b| *b > 0),
        failure,
        sync: raw.and_then(|a| a.sync).unwrap_or(false),
    })
}

/// One `[[audit.rule]]`.
fn parse_rule(src: &Source<'_>, raw: &RawRule) -> Result<Rule, ConfigError> {
    let prefix = match &raw.prefix {
        None => None,
        Some(p) => Some(
            VfsPath::parse(p.get_ref())
                .map_err(|e| src.at(p.span().start, format!("audit rule prefix: {e}")))?,
        ),
    };
    let class = match &raw.class {
        None => None,
        Some(c) => Some(Class::parse(c.get_ref()).ok_or_else(|| {
            src.at(
                c.span().start,
                format!(
                    "audit rule class {:?} is not a class; expected metadata_read, data_read, \
                     data_write or admin",
                    c.get_ref()
                ),
            )
        })?),
    };
    let level = Level::parse(raw.level.get_ref()).ok_or_else(|| {
        src.at(
            raw.level.span().start,
            format!(
                "audit rule level {:?} is not a level; expected none, metadata or request",
                raw.level.get_ref()
            ),
        )
    })?;
    Ok(Rule {
        prefix,
        principal: raw.principal.clone(),
        class,
        level,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    const MOUNT: &str = "[[mount]]\nprefix=\"/\"\ntier=\"state\"\n";

    #[test]
    fn audit_is_off_by_default_and_its_keys_are_range_checked() {
        let c = parse("x.toml", MOUNT).unwrap();
        assert!(!c.audit.enabled);
        let c = parse(
            "x.toml",
            &format!(
                "[audit]\nenabled = true\ndir = \"/tmp/a\"\ncheckpoint_records = 5\n\
                 failure = \"drop_and_count\"\n[[audit.rule]]\nprefix = \"/s\"\nclass = \
                 \"data_read\"\nlevel = \"none\"\n{MOUNT}"
            ),
        )
        .unwrap();
        assert!(c.audit.enabled);
        assert_eq!(c.audit.checkpoint_records, 5);
        assert_eq!(c.audit.policy.rules.len(), 1);
        let err = |text: &str| {
            parse("x.toml", &format!("[audit]\n{text}\n{MOUNT}"))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("checkpoint_records = 0"),
            "x.toml:2: audit checkpoint_records must be between 1 and 1000000"
        );
        assert_eq!(
            err("checkpoint_seconds = 7200"),
            "x.toml:2: audit checkpoint_seconds must be between 1 and 3600"
        );
        assert_eq!(
            err("segment_bytes = 10"),
            "x.toml:2: audit segment_bytes must be between 4096 and 1099511627776"
        );
        assert!(err("failure = \"shrug\"").starts_with("x.toml:2: audit failure \"shrug\""));
        assert!(
            err("[[audit.rule]]\nlevel = \"all\"")
                .starts_with("x.toml:3: audit rule level \"all\"")
        );
        assert!(
            err("[[audit.rule]]\nclass = \"reads\"\nlevel = \"none\"")
                .starts_with("x.toml:3: audit rule class \"reads\"")
        );
    }
}
