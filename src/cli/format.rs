//! The one-line formats the history verbs print: a change (`watch`), a
//! version (`log`), a rewound file (`rewind`), and who made each.

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
    let kind = match e.kind() {
        pb::ChangeKind::Created => "created ",
        pb::ChangeKind::Modified => "modified",
        pb::ChangeKind::Deleted => "deleted ",
        pb::ChangeKind::Unspecified => "changed ",
    };
    let moved = match (e.kind(), e.moved_path.as_str()) {
        (_, "") => String::new(),
        (pb::ChangeKind::Deleted, to) => format!(" → {to}"),
        (_, from) => format!(" ← {from}"),
    };
    format!(
        "{}  {kind}  {}{moved}  v{}  {} bytes  {} {}",
        time_text(e.time.as_ref()),
        e.path,
        e.version,
        e.size,
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
        (_, true) => format!("  {} bytes  (current)", v.size),
        _ => format!("  {} bytes", v.size),
    };
    format!(
        "v{}  {}  {} {}{state}",
        v.version,
        time_text(v.time.as_ref()),
        v.operation,
        made_by(&v.principal, &v.handle, &v.label, &v.changeset)
    )
}
