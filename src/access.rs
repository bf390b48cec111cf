//! Principals, grants and the permission check (docs/contract.md § Grants).
//!
//! A [`Principal`] holds [`Grant`]s: a path prefix and the operations allowed
//! below it. Prefixes match on segment boundaries (`/workspace` allows
//! `/workspace/x`, never `/workspace2/x`, unlike a raw string-prefix test).
//! Grants are only ever positive, so a right held on a directory holds for
//! everything below it.
//!
//! Check order (docs/contract.md § Grants): the path is validated first (by [`VfsPath::parse`]),
//! then the grant, then the arguments, then existence — so an ungranted
//! missing path is PERMISSION_DENIED and a granted missing path NOT_FOUND.

use crate::error::{Error, Result};
use crate::path::VfsPath;
use std::fmt;

/// The atomic operations (docs/contract.md § Grants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// List a directory, glob.
    List,
    /// Read one path's metadata.
    File,
    /// Download bytes.
    ReadBinary,
    /// Read text.
    ReadFile,
    /// Regex search in contents (ReadRe, Grep).
    ReadRe,
    /// Create, replace, edit.
    Write,
    /// Delete.
    Delete,
}

impl Op {
    /// Every operation, in the contract's order (docs/contract.md § Grants).
    pub const ALL: [Op; 7] = [
        Op::List,
        Op::File,
        Op::ReadBinary,
        Op::ReadFile,
        Op::ReadRe,
        Op::Write,
        Op::Delete,
    ];

    /// The contract's name (`read_file`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Op::List => "list",
            Op::File => "file",
            Op::ReadBinary => "read_binary",
            Op::ReadFile => "read_file",
            Op::ReadRe => "read_re",
            Op::Write => "write",
            Op::Delete => "delete",
        }
    }

    /// Parses an operation name; an unknown name is an error listing the valid ones.
    pub fn parse(name: &str) -> Result<Op> {
        Op::ALL.into_iter().find(|op| op.as_str() == name).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "unknown operation {name:?}; expected one of list, file, read_binary, read_file, read_re, write, delete"
            ))
        })
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of operations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpSet(u8);

impl OpSet {
    /// The set of the operations named (`read_file`, `write`, ...), for the
    /// configuration and for requests; an unknown name is INVALID_ARGUMENT.
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<OpSet> {
        names.into_iter().map(Op::parse).collect()
    }

    /// Every operation.
    pub fn all() -> OpSet {
        OpSet(Op::ALL.iter().fold(0, |bits, op| bits | op.bit()))
    }

    /// True when `op` is in the set.
    pub fn contains(self, op: Op) -> bool {
        self.0 & op.bit() != 0
    }

    /// Operations in both sets.
    pub fn intersect(self, other: OpSet) -> OpSet {
        OpSet(self.0 & other.0)
    }

    /// Operations in either set.
    pub fn union(self, other: OpSet) -> OpSet {
        OpSet(self.0 | other.0)
    }

    /// True when empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The operations, in the contract's order (docs/contract.md § Grants).
    pub fn iter(self) -> impl Iterator<Item = Op> {
        Op::ALL.into_iter().filter(move |op| self.contains(*op))
    }
}

impl FromIterator<Op> for OpSet {
    fn from_iter<I: IntoIterator<Item = Op>>(iter: I) -> OpSet {
        OpSet(iter.into_iter().fold(0, |bits, op| bits | op.bit()))
    }
}

/// Operations allowed below a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The directory the grant covers (and everything below it).
    pub prefix: VfsPath,
    /// What is allowed there.
    pub ops: OpSet,
}

/// Someone making requests: a configured principal or a handle minted by one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// For logs and DescribeGrants.
    pub name: String,
    /// The Store namespace it sees.
    pub namespace: String,
    /// What it may do.
    pub grants: Vec<Grant>,
    /// The configured principal whose budgets it uses (stream limits,
    /// handles): itself, or for a handle the principal at the root of its
    /// chain, so minting handles never buys more.
    pub owner: String,
    /// The branch every call of this principal works in (empty: none): a
    /// handle bound to a branch sees and changes only it (docs/security.md
    /// § Handles bound to a branch).
    pub branch: String,
    /// For a handle, its lineage: the ids of the handles from its root
    /// principal's down to itself, joined by `/` (empty for a root
    /// principal). Changes record it, so a Rewind by a handle's id undoes
    /// that handle's changes and those of the handles it minted, never a
    /// sibling's (docs/changesets.md § Attribution).
    pub handle: String,
    /// The `audit` right: it may read the audit log (docs/audit.md).
    /// Configured principals hold it only when their `[[principal]]` says
    /// `audit = true`; handles never do.
    pub audit: bool,
}

impl Principal {
    /// The principal of a server with no configured principals: every right
    /// on every path (the server then only listens on loopback).
    pub fn local() -> Principal {
        Principal {
            name: "local".into(),
            namespace: "default".into(),
            grants: vec![Grant {
                prefix: VfsPath::root(),
                ops: OpSet::all(),
            }],
            owner: "local".into(),
            branch: String::new(),
            handle: String::new(),
            audit: true,
        }
    }

    /// Fails with PERMISSION_DENIED unless the principal holds the `audit`
    /// right.
    pub fn check_audit(&self) -> Result<()> {
        match self.audit {
            true => Ok(()),
            false => Err(Error::PermissionDenied(format!(
                "{} lacks the audit right (audit = true on its [[principal]]); handles never \
                 hold it",
                self.name
            ))),
        }
    }

    /// The operations granted on `path`.
    pub fn ops_on(&self, path: &VfsPath) -> OpSet {
        self.grants
            .iter()
            .filter(|g| path.is_within(&g.prefix))
            .fold(OpSet::default(), |ops, g| ops.union(g.ops))
    }

    /// Fails with PERMISSION_DENIED naming the operation and the path unless
    /// `op` is granted on `path`.
    pub fn check(&self, path: &VfsPath, op: Op) -> Result<()> {
        if self.ops_on(path).contains(op) {
            Ok(())
        } else {
            Err(Error::PermissionDenied(format!(
                "no grant allows '{op}' on {path}"
            )))
        }
    }

    /// Checks `op` on `dir` or on some path below it: what a walk of `dir`
    /// needs (Watch, Rewind), each path then shown only where `op` holds on
    /// it. PERMISSION_DENIED naming `dir` when nothing below it is granted.
    pub fn check_within(&self, dir: &VfsPath, op: Op) -> Result<()> {
        if self.granted_within(dir, op).is_empty() {
            self.check(dir, op)?;
        }
        Ok(())
    }

    /// Where `op` may run at or below `dir`: `[dir]` when granted there, else
    /// the granted prefixes below it, in path order (empty: nothing visible).
    pub fn granted_within(&self, dir: &VfsPath, op: Op) -> Vec<VfsPath> {
        if self.ops_on(dir).contains(op) {
            return vec![dir.clone()];
        }
        let mut below: Vec<VfsPath> = self
            .grants
            .iter()
            .filter(|g| g.ops.contains(op) && g.prefix.is_within(dir))
            .map(|g| g.prefix.clone())
            .collect();
        below.sort_by_key(VfsPath::order_key);
        // Keep only outermost prefixes: the walk of one covers those below it.
        let mut out: Vec<VfsPath> = Vec::new();
        for p in below {
            if !out.last().is_some_and(|last| p.is_within(last)) {
                out.push(p);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> VfsPath {
        VfsPath::parse(s).unwrap()
    }

    fn reader() -> Principal {
        Principal {
            name: "reader".into(),
            owner: "reader".into(),
            branch: String::new(),
            handle: String::new(),
            audit: false,
            namespace: "team".into(),
            grants: vec![Grant {
                prefix: p("/workspace"),
                ops: [Op::List, Op::ReadFile].into_iter().collect(),
            }],
        }
    }

    #[test]
    fn grant_prefix_matches_on_segment_boundary() {
        let r = reader();
        assert!(r.check(&p("/workspace/a"), Op::ReadFile).is_ok());
        assert!(r.check(&p("/workspace"), Op::List).is_ok());
        let err = r.check(&p("/workspace2/a"), Op::ReadFile).unwrap_err();
        assert_eq!(
            err.to_string(),
            "permission denied: no grant allows 'read_file' on /workspace2/a"
        );
        assert!(r.check(&p("/workspace/a"), Op::Write).is_err());
    }

    #[test]
    fn granted_within_lists_outermost_visible_prefixes() {
        let r = reader();
        assert_eq!(r.granted_within(&p("/"), Op::List), vec![p("/workspace")]);
        assert_eq!(
            r.granted_within(&p("/workspace/x"), Op::List),
            vec![p("/workspace/x")]
        );
        assert!(r.granted_within(&p("/other"), Op::List).is_empty());
    }

    #[test]
    fn op_names_round_trip() {
        for op in Op::ALL {
            assert_eq!(Op::parse(op.as_str()).unwrap(), op);
        }
        assert!(Op::parse("read").is_err());
    }
}
