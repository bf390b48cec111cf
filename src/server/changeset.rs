//! The Commit RPC's messages to and from the application layer's changeset
//! (docs/changesets.md).

use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::pb;
use crate::pb::changeset_operation::Operation as PbOperation;
use crate::service::{ChangeOp, FileCommitted, Precondition, TextEdit};

/// Decodes a Commit request's operations; a malformed one is
/// INVALID_ARGUMENT naming its index.
pub fn operations(request: pb::CommitRequest) -> Result<Vec<ChangeOp>> {
    request
        .operations
        .into_iter()
        .enumerate()
        .map(|(index, op)| {
            operation(op).map_err(|e| {
                e.with_context(
                    format!("operation {index} is malformed"),
                    [("operation_index", index.to_string())],
                )
            })
        })
        .collect()
}

fn operation(op: pb::ChangesetOperation) -> Result<ChangeOp> {
    let Some(op) = op.operation else {
        return Err(Error::InvalidArgument(
            "the operation names none of write, edit, multi_edit, delete, move".into(),
        ));
    };
    Ok(match op {
        PbOperation::Write(w) => ChangeOp::Write {
            path: VfsPath::parse(&w.path)?,
            data: w.content.into_bytes(),
            pre: Precondition {
                create_only: w.create_only,
                if_version: w.if_version,
            },
        },
        PbOperation::Edit(e) => ChangeOp::Edit {
            path: VfsPath::parse(&e.path)?,
            edits: vec![TextEdit {
                old: e.old_string,
                new: e.new_string,
                replace_all: e.replace_all,
            }],
            if_version: e.if_version,
        },
        PbOperation::MultiEdit(m) => ChangeOp::Edit {
            path: VfsPath::parse(&m.path)?,
            edits: m
                .edits
                .into_iter()
                .map(|e| TextEdit {
                    old: e.old_string,
                    new: e.new_string,
                    replace_all: e.replace_all,
                })
                .collect(),
            if_version: m.if_version,
        },
        PbOperation::Delete(d) => {
            if d.recursive {
                return Err(Error::InvalidArgument(
                    "a changeset deletes files; recursive is not allowed".into(),
                ));
            }
            ChangeOp::Delete {
                path: VfsPath::parse(&d.path)?,
                if_version: d.if_version,
            }
        }
        PbOperation::Move(m) => ChangeOp::Move {
            source: VfsPath::parse(&m.source)?,
            destination: VfsPath::parse(&m.destination)?,
            pre: Precondition {
                create_only: m.create_only,
                if_version: m.if_version,
            },
        },
    })
}

/// The Commit answer.
pub fn response(files: Vec<FileCommitted>) -> pb::CommitResponse {
    pb::CommitResponse {
        files: files
            .into_iter()
            .map(|f| pb::CommittedFile {
                path: f.path.to_string(),
                version: f.version,
                size: f.size,
                deleted: f.deleted,
            })
            .collect(),
    }
}
