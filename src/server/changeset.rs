//! The Commit and Rewind RPCs' messages to and from the application
//! layer's changesets (docs/changesets.md).

use crate::change::ChangeCursor;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::pb;
use crate::pb::changeset_operation::Operation as PbOperation;
use crate::scope::Scope;
use crate::service::{
    ChangeOp, Committed, FileCommitted, Precondition, Rewound, Selector, TextEdit,
};

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
            data: w.content.into_bytes().into(),
            pre: Precondition {
                create_only: w.create_only,
                if_version: w.if_version,
                executable: w.executable,
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
                ..Precondition::default()
            },
        },
    })
}

/// The Commit answer.
pub fn response(committed: Committed) -> pb::CommitResponse {
    pb::CommitResponse {
        changeset: committed.changeset,
        files: committed_files(committed.files),
    }
}

/// What a changeset did to each file, as answers show it.
pub fn committed_files(files: Vec<FileCommitted>) -> Vec<pb::CommittedFile> {
    files
        .into_iter()
        .map(|f| pb::CommittedFile {
            path: f.path.to_string(),
            version: f.version,
            size: f.size,
            deleted: f.deleted,
        })
        .collect()
}

/// The selector of a Rewind request: exactly one must be given, and a
/// session, label or cursor must be well formed (INVALID_ARGUMENT).
pub fn selector(selector: Option<pb::rewind_request::Selector>) -> Result<Selector> {
    use pb::rewind_request::Selector as Pb;
    let non_empty = |what: &str, value: String| {
        if value.is_empty() {
            Err(Error::InvalidArgument(format!(
                "rewind by {what}: the {what} is empty"
            )))
        } else {
            Ok(value)
        }
    };
    Ok(match selector {
        None => {
            return Err(Error::InvalidArgument(
                "say which changes to rewind: session, handle, label, changeset or \
                 since_cursor"
                    .into(),
            ));
        }
        Some(Pb::Session(session)) => {
            Scope::check_name("session", &session)?;
            Selector::Session(session)
        }
        Some(Pb::Handle(handle)) => Selector::Handle(non_empty("handle", handle)?),
        Some(Pb::Label(label)) => {
            Scope::check_label(&label)?;
            Selector::Label(label)
        }
        Some(Pb::Changeset(id)) => Selector::Changeset(non_empty("changeset", id)?),
        Some(Pb::SinceCursor(cursor)) => {
            Selector::Since(ChangeCursor::decode(&non_empty("cursor", cursor)?)?)
        }
    })
}

/// The Rewind answer.
pub fn rewind_response(rewound: Rewound) -> pb::RewindResponse {
    pb::RewindResponse {
        files: rewound
            .files
            .into_iter()
            .map(|f| pb::RewoundFile {
                path: f.path.to_string(),
                from_version: f.from_version,
                to_version: f.to_version,
                version: f.version,
                deleted: f.to_version == 0,
            })
            .collect(),
        diff: rewound.diff,
        changeset: rewound.changeset,
    }
}
