//! The History tool: a file's retained versions, the diff between two of
//! them, or a restore (docs/contract.md § Changes and history).
//!
//! Flow: resolve the path, check the grant of the action (`list`: `file`;
//! `diff`: `read_file`; `restore`: `read_file`, `read_binary` and `write`), make one
//! application-layer call on a blocking thread, word the answer for a model.
//! A diff is a unified diff capped like the editing tools' previews, so a
//! rewrite of a big file cannot flood the model (status `partial` when cut).
//! A restore takes `expected_version` as Write does (the file's current
//! version; 0 when it is deleted), so a model never undoes a change it has
//! not seen.
//!
//! Errors: INVALID_PARAM for an unknown action, a missing or negative
//! version, a deletion restored, or a mount that keeps no history;
//! NOT_FOUND for a file or version not retained; CONFLICT for a stale
//! `expected_version`; BINARY_FILE for a diff of binary content.

use super::args::Args;
use super::envelope::version_json;
use super::params::{Param, Params, version_schema};
use super::write::{change_error, expected_version};
use super::{Call, Object, Outcome, Status, ToolError};
use crate::access::Op;
use crate::error::Error;
use crate::history::FileVersion;
use crate::path::VfsPath;
use crate::text::diff::DiffCaps;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "See and undo changes to a file. action='list' (the default) \
lists the file's retained versions, newest first: version, time, operation (write, edit, delete, \
move, restore) and who made it; a deleted file keeps its versions. action='diff' shows a unified \
diff from `version` to `to_version` (default: the newest version). action='restore' writes \
`version` back as the file's newest version, which also brings back a deleted file; pass \
expected_version (the current version from list or Read, 0 when the file is deleted) so you never \
undo a change you have not seen.";

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "path",
            json!({"type": "string", "description": "File whose history to use (relative to project root or absolute within it)."}),
        ),
        Param::optional(
            "action",
            json!({"type": "string", "enum": ["list", "diff", "restore"], "default": "list", "description": "list versions, diff two versions, or restore one."}),
        ),
        Param::optional(
            "version",
            version_schema("diff: the older version; restore: the version to write back."),
        ),
        Param::optional(
            "to_version",
            version_schema("diff: the newer version (default: the newest)."),
        ),
        Param::optional(
            "expected_version",
            version_schema(
                "restore: the file's current version (0 when it is deleted); the restore is refused if it changed.",
            ),
        ),
        Param::label(),
    ])
});
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// A version argument (`>= 1`), required or not.
fn version_arg(args: &Args<'_>, key: &str) -> Result<Option<u64>, ToolError> {
    match args.version(key)? {
        None => Ok(None),
        Some(v) if v >= 1 => Ok(Some(v)),
        Some(v) => Err(ToolError::invalid(format!(
            "{key} must be a version >= 1 (see action='list'), got \"{v}\"."
        ))),
    }
}

/// Maps a failed history call on `shown` to the tool's messages.
fn history_error(e: Error, shown: &str) -> ToolError {
    let message = match e.kind() {
        Error::VersionNotFound { version, .. } => format!(
            "'{shown}' has no retained version {version}. Use action='list' to see the \
             versions kept."
        ),
        Error::NotFound(_) => format!("File '{shown}' does not exist and has no history."),
        Error::IsDirectory(_) => {
            format!("Path '{shown}' is a directory. History is kept per file.")
        }
        Error::Unsupported(_) => {
            format!("'{shown}' is on a mount that keeps no version history.")
        }
        Error::Binary(_) => {
            format!("'{shown}' is binary in one of these versions. Cannot diff it as text.")
        }
        Error::InvalidArgument(message) => format!("{message}."),
        _ => return change_error(e, shown),
    };
    ToolError::new(e, message)
}

/// One version as the model reads it: `v12  2026-11-24T16:05:18Z  edit by
/// agent via h-1 label turn-3 in cs-…  204 bytes  (current)`.
fn version_line(v: &FileVersion) -> String {
    let time = prost_types::Timestamp::from(v.time);
    let mut line = format!("v{}  {time}  {}", v.version, v.origin.operation.as_str());
    if !v.origin.principal.is_empty() {
        let _ = write!(line, " by {}", v.origin.principal);
    }
    if !v.origin.handle.is_empty() {
        let _ = write!(line, " via {}", v.origin.handle);
    }
    if !v.origin.label.is_empty() {
        let _ = write!(line, " label {}", v.origin.label);
    }
    if !v.origin.changeset.is_empty() {
        let _ = write!(line, " in {}", v.origin.changeset);
    }
    if v.deleted {
        line.push_str("  (deleted)");
    } else {
        let _ = write!(line, "  {} bytes", v.size);
    }
    if v.current {
        line.push_str("  (current)");
    }
    line
}

/// Runs History.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("History", raw, PARAMS.names())?;
    let path_arg = args.required_string("path")?;
    let action = args.string("action")?.unwrap_or("list");
    let version = version_arg(&args, "version")?;
    let to_version = version_arg(&args, "to_version")?;
    let expected = expected_version(&args)?;
    let path = call.resolve(path_arg, OUTSIDE)?;
    let shown = call.display(&path);
    let needed = |what: Option<u64>| {
        what.ok_or_else(|| {
            ToolError::invalid(format!(
                "Missing required parameter 'version' for action '{action}'."
            ))
        })
    };
    match action {
        "list" => list(call, path, shown).await,
        "diff" => {
            let from = needed(version)?;
            diff(call, path, shown, from, to_version).await
        }
        "restore" => {
            let version = needed(version)?;
            restore(call, path, shown, version, expected).await
        }
        other => Err(ToolError::invalid(format!(
            "action must be 'list', 'diff' or 'restore', got '{}'.",
            crate::error::echo(other)
        ))),
    }
}

async fn list(call: &mut Call, path: VfsPath, shown: String) -> Result<Outcome, ToolError> {
    call.check(&path, Op::File)?;
    let versions = call
        .service
        .run(&call.caller, move |files| files.versions(&path))
        .await
        .map_err(|e| history_error(e, &shown))?;
    let mut text = format!(
        "{} version{} of '{shown}' retained, newest first:\n",
        versions.len(),
        if versions.len() == 1 { "" } else { "s" }
    );
    for v in &versions {
        text.push('\n');
        text.push_str(&version_line(v));
    }
    let listed: Vec<Value> = versions
        .iter()
        .map(|v| {
            json!({
                "version": version_json(v.version),
                "time": prost_types::Timestamp::from(v.time).to_string(),
                "operation": v.origin.operation.as_str(),
                "principal": v.origin.principal,
                "handle": v.origin.handle,
                "session": v.origin.session,
                "label": v.origin.label,
                "changeset": v.origin.changeset,
                "size": v.size,
                "deleted": v.deleted,
                "current": v.current,
            })
        })
        .collect();
    let count = listed.len();
    Ok(Outcome {
        status: Status::Success,
        data: object! {"path" => shown, "versions" => listed},
        text,
        stats: object! {"versions" => count},
    })
}

async fn diff(
    call: &mut Call,
    path: VfsPath,
    shown: String,
    from: u64,
    to: Option<u64>,
) -> Result<Outcome, ToolError> {
    call.check(&path, Op::ReadFile)?;
    let out = call
        .service
        .run(&call.caller, move |files| {
            files.diff(&path, from, to, DiffCaps::PREVIEW)
        })
        .await
        .map_err(|e| history_error(e, &shown))?;
    let d = &out.diff;
    let head = format!(
        "Diff of '{shown}' from version {} to version {} (+{} -{} lines)",
        out.from_version, out.to_version, d.added, d.removed
    );
    let text = if d.text.is_empty() {
        format!("{head}: the two versions are identical.")
    } else if d.truncated {
        format!("{head}, cut to its first lines:\n\n{}", d.text)
    } else {
        format!("{head}:\n\n{}", d.text)
    };
    Ok(Outcome {
        status: Status::partial_if(d.truncated),
        data: object! {
            "path" => shown,
            "from_version" => version_json(out.from_version),
            "to_version" => version_json(out.to_version),
            "added" => d.added,
            "removed" => d.removed,
            "truncated" => d.truncated,
        },
        text,
        stats: Object::new(),
    })
}

async fn restore(
    call: &mut Call,
    path: VfsPath,
    shown: String,
    version: u64,
    expected: Option<u64>,
) -> Result<Outcome, ToolError> {
    call.check(&path, Op::ReadFile)?;
    call.check(&path, Op::ReadBinary)?;
    call.check(&path, Op::Write)?;
    let out = call
        .service
        .run(&call.caller, move |files| {
            files.restore(&path, version, expected)
        })
        .await
        .map_err(|e| history_error(e, &shown))?;
    let text = format!(
        "Restored '{shown}' to the content of version {version}: it is now version {} ({} bytes{}).",
        out.version,
        out.bytes_written,
        if out.created {
            ", the file was created again"
        } else {
            ""
        }
    );
    Ok(Outcome {
        status: Status::Success,
        data: object! {
            "path" => shown,
            "version" => version_json(out.version),
            "restored_version" => version_json(version),
            "bytes_written" => out.bytes_written,
            "created" => out.created,
        },
        text,
        stats: object! {"version" => version_json(out.version)},
    })
}
