//! `[[principal]]` (tokens, namespaces, grants) and `[access]` (whether
//! requests without a token are allowed).

use super::{ConfigError, Source};
use crate::access::{Grant, OpSet, Principal};
use crate::path::VfsPath;
use crate::scope::Scope;
use serde::Deserialize;
use std::collections::HashSet;
use std::path::PathBuf;
use toml::Spanned;

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
pub(super) struct RawAccess {
    anonymous: Option<Spanned<bool>>,
    operator_token_file: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrincipal {
    name: Spanned<String>,
    token: Spanned<String>,
    namespace: Option<Spanned<String>>,
    #[serde(default)]
    grants: Vec<Spanned<RawGrant>>,
    #[serde(default)]
    audit: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrant {
    prefix: Spanned<String>,
    ops: Vec<Spanned<String>>,
}

/// Validates the principals: unique names and tokens, tokens of 8+
/// characters without spaces, valid namespaces and grants.
pub(super) fn parse(
    src: &Source<'_>,
    raw: &[Spanned<RawPrincipal>],
) -> Result<Vec<(String, Principal)>, ConfigError> {
    let mut principals = Vec::new();
    let mut tokens = HashSet::new();
    let mut names = HashSet::new();
    for p in raw {
        let p = p.get_ref();
        // Names key the per-principal budgets (streams, handles).
        if !names.insert(p.name.get_ref().clone()) {
            return Err(src.at(
                p.name.span().start,
                format!("two principals are named {:?}", p.name.get_ref()),
            ));
        }
        let token = p.token.get_ref();
        if token.len() < 8 || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(src.at(
                p.token.span().start,
                "token must be at least 8 characters without spaces",
            ));
        }
        if !tokens.insert(token.clone()) {
            return Err(src.at(p.token.span().start, "two principals share one token"));
        }
        let namespace = match &p.namespace {
            None => "default".to_owned(),
            Some(ns) => {
                Scope::check_name("namespace", ns.get_ref())
                    .map_err(|e| src.at(ns.span().start, e.to_string()))?;
                ns.get_ref().clone()
            }
        };
        let mut grants = Vec::new();
        for g in &p.grants {
            let g = g.get_ref();
            let prefix = VfsPath::parse(g.prefix.get_ref())
                .map_err(|e| src.at(g.prefix.span().start, format!("grant prefix: {e}")))?;
            let ops = OpSet::parse(g.ops.iter().map(|o| o.get_ref().as_str())).map_err(|e| {
                let start = g
                    .ops
                    .first()
                    .map_or(g.prefix.span().start, |o| o.span().start);
                src.at(start, e.to_string())
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
                branch: String::new(),
                handle: String::new(),
                audit: p.audit,
            },
        ));
    }
    Ok(principals)
}

/// Validates `[access]` against the principals configured.
pub(super) fn parse_access(
    src: &Source<'_>,
    raw: Option<&RawAccess>,
    principals: &[(String, Principal)],
) -> Result<AccessConfig, ConfigError> {
    // Anonymous access with principals would hand every right to anyone who
    // leaves the token out; without principals and without it, only an
    // operator token can let anybody in.
    let anonymous = raw.and_then(|a| a.anonymous.as_ref());
    let operator_file = raw.and_then(|a| a.operator_token_file.as_ref());
    let access = AccessConfig {
        anonymous: anonymous.map_or(principals.is_empty(), |a| *a.get_ref()),
        operator_token_file: operator_file.map(|f| PathBuf::from(f.get_ref())),
    };
    match (anonymous, operator_file) {
        (Some(a), _) if access.anonymous && !principals.is_empty() => Err(src.at(
            a.span().start,
            "access anonymous = true is refused with [[principal]] configured: every request \
             without a token would hold every right",
        )),
        (Some(a), None) if !access.anonymous && principals.is_empty() => Err(src.at(
            a.span().start,
            "access anonymous = false with no [[principal]] needs operator_token_file: nobody \
             could call the server",
        )),
        (_, Some(f)) if access.anonymous || !principals.is_empty() => Err(src.at(
            f.span().start,
            "access operator_token_file is only for anonymous = false with no [[principal]]; \
             with principals, configure one holding the grants the orchestrator needs",
        )),
        (_, Some(f)) if f.get_ref().is_empty() => Err(src.at(
            f.span().start,
            "access operator_token_file must name a file",
        )),
        _ => Ok(access),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

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
}
