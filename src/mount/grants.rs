//! The principal's grants as DescribeGrants answered them at start-up, so
//! that a change the server would refuse fails where POSIX says it fails
//! (at `open`, `create`, `unlink`, `rename`) rather than at `close`, when
//! most programs no longer look. The server still decides every call.

use crate::pb;

/// What the token may do, by path prefix.
#[derive(Debug)]
pub struct Grants {
    /// `None`: unknown (the server did not say), so nothing is refused
    /// here and the server's answers decide.
    grants: Option<Vec<pb::Grant>>,
}

impl Grants {
    /// The grants DescribeGrants answered, if it did.
    pub fn new(grants: Option<Vec<pb::Grant>>) -> Grants {
        Grants { grants }
    }

    /// True when some grant whose prefix holds `path` (on segment
    /// boundaries, as docs/contract.md § Grants says) allows `op`.
    pub fn allow(&self, op: &str, path: &str) -> bool {
        let Some(grants) = &self.grants else {
            return true;
        };
        let dir = format!("{}/", path.trim_end_matches('/'));
        grants.iter().any(|g| {
            let prefix = format!("{}/", g.prefix.trim_end_matches('/'));
            dir.starts_with(&prefix) && g.ops.iter().any(|o| o == op)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_hold_on_segment_boundaries() {
        let grants = Grants::new(Some(vec![pb::Grant {
            prefix: "/memories/team/".into(),
            ops: vec!["write".into()],
        }]));
        assert!(grants.allow("write", "/memories/team/a"));
        assert!(grants.allow("write", "/memories/team"));
        assert!(!grants.allow("write", "/memories/team2/a"));
        assert!(!grants.allow("delete", "/memories/team/a"));
        assert!(Grants::new(None).allow("delete", "/x"));
    }
}
