//! The branch RPCs' messages to and from the application layer
//! (docs/branches.md).

use super::changeset::committed_files;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::pb;
use crate::service::{BranchDiff, BranchInfo, MAX_DIFF_PAGE, Merged, Resolution};
use std::collections::BTreeMap;

/// A branch as answers show it.
pub fn branch(info: BranchInfo) -> pb::Branch {
    pb::Branch {
        name: info.name,
        root: info.root.to_string(),
        created_time: Some(info.created.into()),
        creator: info.creator,
        files_changed: info.files,
        bytes: info.bytes,
    }
}

/// A DiffBranch request's start and page size.
pub fn diff_page(req: &pb::DiffBranchRequest) -> Result<(Option<VfsPath>, usize)> {
    let after = match req.after.as_str() {
        "" => None,
        after => Some(VfsPath::parse(after)?),
    };
    let limit = match req.limit {
        0 => MAX_DIFF_PAGE,
        n => n as usize,
    };
    Ok((after, limit))
}

/// The DiffBranch answer.
pub fn diff_response(diff: BranchDiff) -> pb::DiffBranchResponse {
    pb::DiffBranchResponse {
        files: diff
            .files
            .into_iter()
            .map(|f| pb::BranchFileDiff {
                path: f.path.to_string(),
                kind: f.kind.as_str().to_owned(),
                from: f.from.map(|p| p.to_string()).unwrap_or_default(),
                diff: f.diff,
            })
            .collect(),
        next_after: diff.next_after.map(|p| p.to_string()).unwrap_or_default(),
    }
}

/// A MergeBranch request's resolutions, by file; a file resolved twice or
/// a resolution naming neither content nor delete is INVALID_ARGUMENT.
pub fn resolutions(req: &pb::MergeBranchRequest) -> Result<BTreeMap<VfsPath, Resolution>> {
    use pb::merge_resolution::Resolution as Pb;
    let mut out = BTreeMap::new();
    for r in &req.resolutions {
        let path = VfsPath::parse(&r.path)?;
        let resolution = match &r.resolution {
            Some(Pb::Content(data)) => Resolution::Content(data.clone().into()),
            Some(Pb::Delete(true)) => Resolution::Delete,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "the resolution of {path} names neither content nor delete"
                )));
            }
        };
        if out.insert(path.clone(), resolution).is_some() {
            return Err(Error::InvalidArgument(format!("{path} is resolved twice")));
        }
    }
    Ok(out)
}

/// The MergeBranch answer.
pub fn merge_response(merged: Merged) -> pb::MergeBranchResponse {
    pb::MergeBranchResponse {
        changeset: merged.changeset,
        files: committed_files(merged.files),
        conflicts: merged
            .conflicts
            .into_iter()
            .map(|c| pb::MergeConflict {
                path: c.path.to_string(),
                ancestor: c.ancestor,
                branch: c.branch,
                base: c.base,
                base_version: c.base_version,
            })
            .collect(),
        discarded: merged.discarded,
    }
}
