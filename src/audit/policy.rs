//! Which operations are recorded, and how much of them: first-match rules
//! over path prefix, principal and class, each giving a level
//! (docs/audit.md § Policy), as Kubernetes' audit policy does.

use super::record::Class;
use crate::path::VfsPath;

/// How much of an operation is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Nothing (a denial is still recorded, at `Metadata`).
    None,
    /// Who, what, where and how it ended: never content nor patterns.
    Metadata,
    /// `Metadata` and the request's pattern or argument text.
    Request,
}

impl Level {
    /// The level named `name` (`none`, `metadata`, `request`), or `None`.
    pub fn parse(name: &str) -> Option<Level> {
        match name {
            "none" => Some(Level::None),
            "metadata" => Some(Level::Metadata),
            "request" => Some(Level::Request),
            _ => None,
        }
    }
}

/// One rule: it matches an operation when each of its conditions given
/// holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The operation's first path lies at or below it.
    pub prefix: Option<VfsPath>,
    /// The operation's principal is this one.
    pub principal: Option<String>,
    /// The operation is of this class.
    pub class: Option<Class>,
    /// The level it gives.
    pub level: Level,
}

/// The rules, tried in order; an operation no rule matches is recorded at
/// `Metadata`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// The rules in the configuration's order.
    pub rules: Vec<Rule>,
}

impl Policy {
    /// The level of an operation of `principal` on `path` (its first path,
    /// if it named one) of class `class`.
    pub fn level(&self, principal: &str, path: Option<&VfsPath>, class: Class) -> Level {
        self.rules
            .iter()
            .find(|rule| {
                rule.prefix
                    .as_ref()
                    .is_none_or(|prefix| path.is_some_and(|p| p.is_within(prefix)))
                    && rule.principal.as_deref().is_none_or(|p| p == principal)
                    && rule.class.is_none_or(|c| c == class)
            })
            .map_or(Level::Metadata, |rule| rule.level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_rule_decides() {
        let p = |s: &str| Some(VfsPath::parse(s).unwrap());
        let policy = Policy {
            rules: vec![
                Rule {
                    prefix: p("/secrets"),
                    principal: None,
                    class: None,
                    level: Level::Request,
                },
                Rule {
                    prefix: None,
                    principal: Some("bot".into()),
                    class: Some(Class::MetadataRead),
                    level: Level::None,
                },
            ],
        };
        let path = VfsPath::parse("/secrets/a").unwrap();
        assert_eq!(
            policy.level("bot", Some(&path), Class::MetadataRead),
            Level::Request
        );
        let other = VfsPath::parse("/secretsx").unwrap();
        assert_eq!(
            policy.level("bot", Some(&other), Class::MetadataRead),
            Level::None
        );
        assert_eq!(
            policy.level("bot", Some(&other), Class::DataRead),
            Level::Metadata
        );
        assert_eq!(policy.level("ann", None, Class::Admin), Level::Metadata);
    }
}
