//! The formats the verbs print: one line per change (`watch`), version
//! (`log`) or rewound file (`rewind`) and who made each, `stat`'s fields,
//! counts with their plural, and each record as a JSON object (`--json`).

use crate::pb;

/// `2026-11-24T16:05:18Z` for a protobuf time (`-` when absent).
fn time_text(t: Option<&prost_types::Timestamp>) -> String {
    t.map_or_else(|| "-".to_owned(), ToString::to_string)
}

/// Who made a change or version: `by agent via h-1`, `by someone outside
/// agentvfs` for a change on disk; then its label and changeset when it
/// has them (`label turn-3  changeset cs-…`).
fn made_by(principal: &str, handle: &str, label: &str, changeset: &str) -> String {
    let mut who = match (principal, handle) {
        ("", _) => "by someone outside agentvfs".to_owned(),
        (p, "") => format!("by {p}"),
        (p, h) => format!("by {p} via {h}"),
    };
    if !label.is_empty() {
        who.push_str(&format!("  label {label}"));
    }
    if !changeset.is_empty() {
        who.push_str(&format!("  changeset {changeset}"));
    }
    who
}

/// One change as `watch` prints it: time, kind, path, version, size, how
/// and by whom (and where a move went or came from).
pub(super) fn change_line(e: &pb::ChangeEvent) -> String {
    let kind = format!("{:<8}", kind_name(e.kind()));
    let moved = match (e.kind(), e.moved_path.as_str()) {
        (_, "") => String::new(),
        (pb::ChangeKind::Deleted, to) => format!(" → {to}"),
        (_, from) => format!(" ← {from}"),
    };
    format!(
        "{}  {kind}  {}{moved}  v{}  {}  {} {}",
        time_text(e.time.as_ref()),
        e.path,
        e.version,
        count(e.size, "byte", "bytes"),
        e.operation,
        made_by(&e.principal, &e.handle, &e.label, &e.changeset)
    )
}

/// One file as `rewind` reports it: `/a.md  v7 → v3 (now v9)`, or
/// `deleted`/`restored` when it goes or comes back.
pub(super) fn rewound_line(f: &pb::RewoundFile, dry_run: bool) -> String {
    let to = match (f.from_version, f.to_version) {
        (_, 0) => "deleted".to_owned(),
        (0, to) => format!("restored from v{to}"),
        (from, to) => format!("v{from} → v{to}"),
    };
    match (dry_run, f.version) {
        (true, _) | (false, 0) => format!("{}  {to}", f.path),
        (false, now) => format!("{}  {to} (now v{now})", f.path),
    }
}

/// One version as `log` prints it.
pub(super) fn version_line(v: &pb::FileVersion) -> String {
    let state = match (v.deleted, v.current) {
        (true, _) => "  (deleted)".to_owned(),
        (_, true) => format!("  {}  (current)", count(v.size, "byte", "bytes")),
        _ => format!("  {}", count(v.size, "byte", "bytes")),
    };
    format!(
        "v{}  {}  {} {}{state}",
        v.version,
        time_text(v.time.as_ref()),
        v.operation,
        made_by(&v.principal, &v.handle, &v.label, &v.changeset)
    )
}

/// `1 file`, `2 files`: a count with its noun, singular for one.
pub(super) fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    match n.into() {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    }
}

/// A protobuf time as JSON: the RFC 3339 text, or null when absent.
fn time_json(t: Option<&prost_types::Timestamp>) -> serde_json::Value {
    t.map_or(serde_json::Value::Null, |t| t.to_string().into())
}

/// The kind of a change as `watch` names it.
fn kind_name(kind: pb::ChangeKind) -> &'static str {
    match kind {
        pb::ChangeKind::Created => "created",
        pb::ChangeKind::Modified => "modified",
        pb::ChangeKind::Deleted => "deleted",
        pb::ChangeKind::Unspecified => "changed",
    }
}

/// An entry (`ls`, `stat`) as one JSON object.
pub(super) fn info_json(i: &pb::FileInfo) -> serde_json::Value {
    serde_json::json!({
        "path": i.path,
        "type": info_type(i),
        "size": i.size,
        "version": i.version,
        "modified": time_json(i.modified_time.as_ref()),
        "created": time_json(i.created_time.as_ref()),
    })
}

/// `file`, `directory` or `symlink`.
pub(super) fn info_type(i: &pb::FileInfo) -> &'static str {
    match (i.is_directory, i.is_symlink) {
        (true, _) => "directory",
        (false, true) => "symlink",
        (false, false) => "file",
    }
}

/// `stat`'s text: one `field: value` line each.
pub(super) fn info_text(i: &pb::FileInfo) -> String {
    let mut text = format!("path: {}\ntype: {}\n", i.path, info_type(i));
    if !i.is_directory {
        text.push_str(&format!("size: {}\n", count(i.size, "byte", "bytes")));
    }
    if i.version != 0 {
        text.push_str(&format!("version: {}\n", i.version));
    }
    text.push_str(&format!(
        "modified: {}\ncreated: {}\n",
        time_text(i.modified_time.as_ref()),
        time_text(i.created_time.as_ref())
    ));
    text
}

/// A change (`watch --json`) as one JSON object.
pub(super) fn change_json(e: &pb::ChangeEvent) -> serde_json::Value {
    serde_json::json!({
        "time": time_json(e.time.as_ref()),
        "kind": kind_name(e.kind()),
        "path": e.path,
        "moved_path": e.moved_path,
        "version": e.version,
        "size": e.size,
        "operation": e.operation,
        "principal": e.principal,
        "handle": e.handle,
        "session": e.session,
        "label": e.label,
        "changeset": e.changeset,
        "cursor": e.cursor,
    })
}

/// A version (`log --json`) as one JSON object.
pub(super) fn version_json(v: &pb::FileVersion) -> serde_json::Value {
    serde_json::json!({
        "version": v.version,
        "time": time_json(v.time.as_ref()),
        "size": v.size,
        "operation": v.operation,
        "principal": v.principal,
        "handle": v.handle,
        "session": v.session,
        "label": v.label,
        "changeset": v.changeset,
        "deleted": v.deleted,
        "current": v.current,
    })
}

/// A branch (`branch list --json`) as one JSON object.
pub(super) fn branch_json(b: &pb::Branch) -> serde_json::Value {
    serde_json::json!({
        "name": b.name,
        "root": b.root,
        "created": time_json(b.created_time.as_ref()),
        "creator": b.creator,
        "files_changed": b.files_changed,
        "bytes": b.bytes,
    })
}
