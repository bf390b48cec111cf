//! The ApplyPatch tool: OpenAI's apply_patch (V4A) served natively, one
//! patch as one changeset (docs/changesets.md § apply_patch).
//!
//! Flow: resolve `root` (a directory inside the project root, default the
//! project root), parse the patch ([`crate::text::patch::parse`]), resolve
//! every path it names against `root`, turn each file operation into
//! changeset operations (Add: a write without precondition, as Codex
//! overwrites; Delete: a delete; Update: a patch of the file, then a move
//! for a `*** Move to:` naming another path) and commit them at once through
//! [`crate::service::Service::commit`]: every file changes, or none.
//!
//! A hunk that does not match fails the whole patch; the answer names the
//! operation, the file and the hunk (the service's error) and, like Edit's,
//! the closest region of the file ([`super::hint`]), computed after the
//! failure from the file as stored, with the hunk's old lines as what was
//! looked for.

use super::args::Args;
use super::envelope::version_json;
use super::hint::{self, Sought};
use super::params::{Param, Params};
use super::{Call, Object, Outcome, Status, ToolError};
use crate::access::Op;
use crate::error::{Error, echo};
use crate::path::VfsPath;
use crate::service::{ChangeOp, Precondition};
use crate::text::patch::{self, PatchOperation};
use serde_json::{Value, json};
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Apply a patch in OpenAI's apply_patch format, all or nothing: \
every file changes, or none does. The patch starts with '*** Begin Patch' and ends with '*** End \
Patch'; in between, '*** Add File: <path>' followed by '+' lines, '*** Delete File: <path>', or \
'*** Update File: <path>' (optionally '*** Move to: <path>') followed by hunks: '@@' or '@@ \
<line to find first>', then lines starting with ' ' (context), '-' (removed) or '+' (added). \
Paths are relative to root. When a hunk does not match, the error names the file and the hunk \
and shows the closest region of the file.";

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "patch",
            json!({"type": "string", "description": "The patch, from '*** Begin Patch' to '*** End Patch'."}),
        ),
        Param::optional(
            "root",
            json!({"type": "string", "description": "Directory the patch's relative paths resolve against (relative to project root or absolute within it; default: the project root)."}),
        ),
        Param::label(),
    ])
});

const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// What a hunk that does not match is called in the hint.
const HUNK: Sought = Sought {
    lead: "Hint:",
    name: "the hunk",
    retry: "Copy the hunk's context and removed lines exactly from the file (whitespace and \
            indentation included) and retry.",
};

/// A path of the patch resolved against `root`: absolute paths as they are
/// (inside the project root), relative ones below `root`. `.` and empty
/// segments are dropped and `..` steps up; leaving `root` is INVALID_PARAM.
fn patch_path(call: &Call, root: &VfsPath, raw: &str) -> Result<VfsPath, ToolError> {
    let invalid = |why: String| {
        ToolError::invalid(format!(
            "Invalid path '{}' in the patch: {why}. Nothing was applied.",
            echo(raw)
        ))
    };
    let (base, rest) = match raw.strip_prefix('/') {
        Some(rest) => (
            VfsPath::parse("/").map_err(|e| invalid(e.to_string()))?,
            rest,
        ),
        None => (root.clone(), raw),
    };
    let floor = base.segments().count();
    let mut segments: Vec<&str> = base.segments().collect();
    for segment in rest.split('/') {
        match segment {
            "" | "." => {}
            ".." if segments.len() > floor => {
                segments.pop();
            }
            ".." => return Err(invalid(format!("it leaves {}", call.display(&base)))),
            s => segments.push(s),
        }
    }
    let path = VfsPath::parse(&format!("/{}", segments.join("/"))).map_err(|e| {
        let reason = match e.kind() {
            Error::InvalidPath { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        invalid(reason)
    })?;
    if !path.is_within(&call.root) {
        return Err(ToolError::new(
            Error::PermissionDenied(format!("{} is outside the project root", echo(raw))),
            OUTSIDE,
        ));
    }
    if path == *root || path == call.root {
        return Err(invalid("it names a directory, not a file".into()));
    }
    Ok(path)
}

/// One file operation of the patch with its paths resolved.
struct Resolved {
    /// `A`, `M` or `D`, as Codex prints it.
    action: &'static str,
    /// The file it leaves changed (an Update's destination when it moves).
    path: VfsPath,
    /// Where a moved file came from.
    moved_from: Option<VfsPath>,
}

/// Runs ApplyPatch.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("ApplyPatch", raw, PARAMS.names())?;
    let text = args.required_string("patch")?;
    let root_arg = args.string("root")?.unwrap_or(".");
    let root = call.resolve(root_arg, OUTSIDE)?;
    // The parsed patch holds about a hundred bytes a line, a line of the
    // request one byte: charged before it is built.
    call.caller
        .account
        .charge(patch::parse_cost(text), "parsing the patch")?;
    let parsed = patch::parse(text).map_err(|e| {
        let message = format!("{e}. Nothing was applied.");
        ToolError::new(e, message)
    })?;
    let mut ops = Vec::with_capacity(parsed.operations.len());
    let mut resolved = Vec::with_capacity(parsed.operations.len());
    for operation in parsed.operations {
        let path = patch_path(call, &root, operation.path())?;
        match operation {
            PatchOperation::Add { content, .. } => {
                ops.push(ChangeOp::Write {
                    path: path.clone(),
                    data: content.into_bytes().into(),
                    pre: Precondition::default(),
                });
                resolved.push(Resolved {
                    action: "A",
                    path,
                    moved_from: None,
                });
            }
            PatchOperation::Delete { .. } => {
                ops.push(ChangeOp::Delete {
                    path: path.clone(),
                    if_version: None,
                });
                resolved.push(Resolved {
                    action: "D",
                    path,
                    moved_from: None,
                });
            }
            PatchOperation::Update { move_to, hunks, .. } => {
                ops.push(ChangeOp::Patch {
                    path: path.clone(),
                    hunks,
                });
                let to = move_to.map(|to| patch_path(call, &root, &to)).transpose()?;
                let moved = match to {
                    // A move to the file itself: Codex updates it in place.
                    Some(to) if to == path => None,
                    Some(to) => {
                        ops.push(ChangeOp::Move {
                            source: path.clone(),
                            destination: to.clone(),
                            pre: Precondition::default(),
                        });
                        Some(to)
                    }
                    None => None,
                };
                resolved.push(match moved {
                    Some(to) => Resolved {
                        action: "M",
                        path: to,
                        moved_from: Some(path),
                    },
                    None => Resolved {
                        action: "M",
                        path,
                        moved_from: None,
                    },
                });
            }
        }
    }
    let committed = match call.service.commit(&call.caller, ops.clone()).await {
        Ok(committed) => committed,
        Err(e) => return Err(failure(call, e, &ops).await),
    };
    let mut text = String::from("Success. Updated the following files:");
    let mut files = Vec::with_capacity(resolved.len());
    let mut counts = [0u64; 3];
    for r in &resolved {
        let shown = call.display(&r.path);
        let mut file = object! { "action" => r.action, "path" => shown.clone() };
        let mut line = format!("\n{} {shown}", r.action);
        counts[match r.action {
            "A" => 0,
            "M" => 1,
            _ => 2,
        }] += 1;
        if r.action != "D"
            && let Some(done) = committed.files.iter().find(|f| f.path == r.path)
        {
            line.push_str(&format!(" (version {}", done.version));
            file.insert("version".into(), version_json(done.version));
            file.insert("size".into(), done.size.into());
            if let Some(from) = &r.moved_from {
                let from = call.display(from);
                line.push_str(&format!(", moved from {from}"));
                file.insert("moved_from".into(), from.into());
            }
            line.push(')');
        }
        text.push_str(&line);
        files.push(Value::Object(file));
    }
    Ok(Outcome {
        status: Status::Success,
        data: object! { "applied" => true, "files" => files },
        text,
        stats: object! {
            "files_added" => counts[0],
            "files_modified" => counts[1],
            "files_deleted" => counts[2],
        },
    })
}

/// The answer to a patch the service refused: its error (naming the
/// operation, the file and the hunk), and for a hunk that does not match the
/// closest region of the file.
async fn failure(call: &Call, e: Error, ops: &[ChangeOp]) -> ToolError {
    let mut message = format!("{e}. Nothing was applied.");
    let index = match &e {
        Error::Context { metadata, .. } => metadata
            .iter()
            .find(|(k, _)| k == "operation_index")
            .and_then(|(_, v)| v.parse::<usize>().ok()),
        _ => None,
    };
    if let (Some(ChangeOp::Patch { path, hunks }), Error::InvalidArgument(_)) =
        (index.and_then(|i| ops.get(i)), e.kind())
        && let Some(hint) = closest(call, path, hunks).await
    {
        message.push('\n');
        message.push_str(&hint);
    }
    ToolError::new(e, message)
}

/// The closest region of the file at `path` to the first of `hunks` that
/// does not match it as stored, or `None` when the file cannot be read as
/// text or every hunk matches (an earlier operation of the patch made the
/// text it was matched against).
async fn closest(call: &Call, path: &VfsPath, hunks: &[patch::Hunk]) -> Option<String> {
    let (read, hunks) = (path.clone(), hunks.to_vec());
    call.service
        .run_asked(&call.caller, move |files| {
            let (data, _) = files.read(&read, Op::ReadFile)?;
            let text = crate::text::decode_strict(read.as_str(), &data)?;
            let costs = crate::text::Costs {
                charge: &|bytes, what| files.charge(bytes, what),
                alive: crate::text::Costs::unbounded().alive,
            };
            let Ok(Err(mismatch)) = patch::apply_hunks(text, &hunks, &costs) else {
                return Ok(None);
            };
            Ok(Some(hint::missing(text, &mismatch.missing, &HUNK)))
        })
        .await
        .ok()
        .flatten()
}
