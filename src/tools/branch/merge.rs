//! The BranchMerge tool: merge a branch into its base as one changeset,
//! three-way per file (docs/branches.md § Merge).
//!
//! Flow: read the resolutions (each a file's new `content` or `delete`),
//! then the service's merge. Conflicts left unresolved apply nothing and
//! answer a CONFLICT error whose text shows each file's three versions
//! between diff3 markers and whose `data.conflicts` holds them; the
//! versions of one answer share [`MAX_CONFLICT_BYTES`], past which they are
//! clipped (`clipped: true`), so a merge of large files cannot flood the
//! model.

use super::{failure, name_arg, name_param};
use crate::error::Error;
use crate::path::VfsPath;
use crate::service::{Conflict, Merged, Resolution};
use crate::tools::args::Args;
use crate::tools::envelope::version_json;
use crate::tools::params::{Param, Params};
use crate::tools::{Call, Object, Outcome, Status, ToolError};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Merge a branch back into the directory it forked, as one atomic \
change. Each file the branch changed is merged three ways (the file when the branch first \
changed it, the branch's, the base's now): a side changed alone is taken, text changed on both \
sides merges line by line where the changes do not overlap. Anything else is a conflict: then \
NOTHING is applied and the error shows each conflicting file's three versions; merge again with \
a resolution per conflicting file (its final content, or delete: true). With discard, the \
branch is deleted after the merge.";

/// Most bytes of the conflicting files' versions one answer shows (text
/// and data each); versions past it are clipped.
pub const MAX_CONFLICT_BYTES: usize = 32 * 1024;

/// The parameters of one resolution of `resolutions`.
pub static RESOLUTION_PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "path",
            json!({"type": "string", "description": "The conflicting file (as the conflict names it)."}),
        ),
        Param::optional(
            "content",
            json!({"type": "string", "description": "The file's merged content."}),
        ),
        Param::optional(
            "delete",
            json!({"type": "boolean", "description": "true: the file is deleted (instead of content)."}),
        ),
    ])
});

/// The parameters, in the order the model sees them (`crate::tools::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        name_param(),
        Param::optional(
            "resolutions",
            json!({
                "type": "array",
                "description": "How each conflicting file merges: its content, or delete: true.",
                "items": RESOLUTION_PARAMS.schema(),
            }),
        ),
        Param::optional(
            "discard",
            json!({"type": "boolean", "description": "Delete the branch once the merge applied.", "default": false}),
        ),
        Param::label(),
    ])
});
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// Runs BranchMerge.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("BranchMerge", raw, PARAMS.names())?;
    let name = name_arg(&args)?;
    let discard = args.boolean("discard")?.unwrap_or(false);
    let resolutions = resolutions(call, &args)?;
    let merged = call
        .service
        .merge_branch(&call.caller, name.to_owned(), resolutions, discard)
        .await
        .map_err(|e| failure(e, name))?;
    if !merged.conflicts.is_empty() {
        return Err(conflicts(call, name, &merged.conflicts));
    }
    Ok(applied(call, name, merged))
}

/// The `resolutions` argument, by file; a resolution naming both or
/// neither of `content` and `delete`, or a file twice, is INVALID_PARAM.
fn resolutions(
    call: &mut Call,
    args: &Args<'_>,
) -> Result<BTreeMap<VfsPath, Resolution>, ToolError> {
    let mut out = BTreeMap::new();
    for (i, o) in args.objects("resolutions")?.into_iter().enumerate() {
        let r = Args::new("BranchMerge resolutions", o, RESOLUTION_PARAMS.names())?;
        let path = call.resolve(r.required_string("path")?, OUTSIDE)?;
        let resolution = match (r.string("content")?, r.boolean("delete")?) {
            (Some(content), None | Some(false)) => {
                Resolution::Content(content.as_bytes().to_vec().into())
            }
            (None, Some(true)) => Resolution::Delete,
            _ => {
                return Err(ToolError::invalid(format!(
                    "Invalid resolutions[{i}]: give either content (the file's merged text) or \
                     delete: true."
                )));
            }
        };
        let shown = call.display(&path);
        if out.insert(path, resolution).is_some() {
            return Err(ToolError::invalid(format!(
                "Invalid resolutions[{i}]: '{shown}' is resolved twice."
            )));
        }
    }
    Ok(out)
}

/// The answer to a merge that applied.
fn applied(call: &Call, name: &str, merged: Merged) -> Outcome {
    let mut text = match merged.files.len() {
        0 => format!("Branch '{name}' had nothing to merge; the base is unchanged."),
        n => format!(
            "Merged branch '{name}' into its base as changeset {} ({n} files):",
            merged.changeset
        ),
    };
    let mut files = Vec::with_capacity(merged.files.len());
    for f in &merged.files {
        let path = call.display(&f.path);
        match f.deleted {
            true => write!(text, "\nD {path}"),
            false => write!(text, "\nM {path} (version {})", f.version),
        }
        .ok();
        files.push(Value::Object(object! {
            "path" => path,
            "version" => version_json(f.version),
            "size" => f.size,
            "deleted" => f.deleted,
        }));
    }
    text.push_str(match merged.discarded {
        true => "\nThe branch was discarded.",
        false => "\nThe branch is kept (BranchDiscard deletes it).",
    });
    Outcome {
        status: Status::Success,
        stats: object! {"files_merged" => files.len()},
        data: object! {
            "changeset" => merged.changeset,
            "files" => files,
            "discarded" => merged.discarded,
        },
        text,
    }
}

/// The CONFLICT error of a merge that left `conflicts`: each file's three
/// versions in the text (diff3 markers) and in `data.conflicts`.
fn conflicts(call: &Call, name: &str, conflicts: &[Conflict]) -> ToolError {
    let mut text = format!(
        "Merge of branch '{name}' stopped: {} conflicting files, and nothing was applied. \
         Merge again with resolutions: one {{path, content}} or {{path, delete: true}} per \
         conflicting file.",
        conflicts.len()
    );
    let mut room = MAX_CONFLICT_BYTES;
    let mut listed = Vec::with_capacity(conflicts.len());
    for c in conflicts {
        let path = call.display(&c.path);
        let mut clipped = false;
        let mut binary = false;
        let mut show = |version: &Option<Vec<u8>>| -> Value {
            let Some(data) = version else {
                return Value::Null;
            };
            let Ok(text) = std::str::from_utf8(data) else {
                binary = true;
                return format!("(binary, {} bytes)", data.len()).into();
            };
            let mut cut = text.len().min(room);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            clipped |= cut < text.len();
            room -= cut;
            text[..cut].into()
        };
        let (branch, ancestor, base) = (show(&c.branch), show(&c.ancestor), show(&c.base));
        let _ = write!(
            text,
            "\n\nCONFLICT {path} (base version {}){}\n<<<<<<< branch\n{}||||||| ancestor (the \
             base when the branch first changed it)\n{}=======\n{}>>>>>>> base (now)",
            c.base_version,
            if clipped { ", versions clipped" } else { "" },
            marked(&branch),
            marked(&ancestor),
            marked(&base),
        );
        listed.push(Value::Object(object! {
            "path" => path,
            "base_version" => version_json(c.base_version),
            "ancestor" => ancestor,
            "branch" => branch,
            "base" => base,
            "binary" => binary,
            "clipped" => clipped,
        }));
    }
    let error = Error::Conflict(format!(
        "{} files of branch {name:?} conflict",
        conflicts.len()
    ));
    ToolError::new(error, text)
        .with_data("conflicts", listed)
        .with_data("applied", false)
}

/// A version between diff3 markers: its text ending in a newline, or
/// `(no file)`.
fn marked(version: &Value) -> String {
    match version.as_str() {
        None => "(no file)\n".to_owned(),
        Some(text) if text.ends_with('\n') || text.is_empty() => text.to_owned(),
        Some(text) => format!("{text}\n"),
    }
}
