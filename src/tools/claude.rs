//! What Claude's two file tools share: the memory tool ([`super::memory`])
//! and the text-editor tool ([`super::text_editor`]) view directories two
//! levels deep, number lines `cat -n` style, count `old_str` the way the
//! reference implementations do, and edit a file's text in one atomic step
//! without the `expected_version` the other editing tools require (Claude's
//! tools have no such parameter; the text they match is their guard).

use super::args::Args;
use super::params::Param;
use super::{Call, Object, Outcome, Status, ToolError};
use crate::error::Error;
use crate::path::VfsPath;
use crate::service::{Files, Precondition};
use serde_json::{Value, json};

/// Most entries one directory view lists: beyond it the view ends with a
/// note, so a directory of a million files costs a bounded walk.
pub const MAX_TREE_ENTRIES: usize = 10_000;
/// Most line numbers named when `old_str` occurs several times.
pub const MAX_NAMED_LINES: usize = 1000;

/// One entry of a directory view.
pub struct TreeEntry {
    /// Path relative to the viewed directory (`a`, `a/b`).
    pub rel: String,
    /// True for a directory (or a link to one).
    pub dir: bool,
    /// Size in bytes, as the tier reports it.
    pub size: u64,
}

/// The entries below `dir` up to two levels deep, depth first, names in
/// byte (code point) order, hidden names (`.`-prefixed) skipped, as both
/// reference implementations list them. A subdirectory that cannot be
/// listed is skipped, as the SDK's memory tool skips it. The flag is true
/// when [`MAX_TREE_ENTRIES`] cut the walk.
pub fn tree(files: &Files<'_>, dir: &VfsPath) -> crate::Result<(Vec<TreeEntry>, bool)> {
    let mut out = Vec::new();
    let cut = walk(files, dir, "", 1, &mut out)?;
    Ok((out, cut))
}

fn walk(
    files: &Files<'_>,
    dir: &VfsPath,
    prefix: &str,
    depth: u8,
    out: &mut Vec<TreeEntry>,
) -> crate::Result<bool> {
    let mut entries = files.list(dir)?;
    entries.sort_by(|a, b| a.path.name().cmp(b.path.name()));
    for entry in entries {
        let name = entry.path.name();
        if name.starts_with('.') {
            continue;
        }
        if out.len() >= MAX_TREE_ENTRIES {
            return Ok(true);
        }
        let rel = if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}/{name}")
        };
        let dir = matches!(
            entry.kind,
            crate::entry::EntryKind::Directory
                | crate::entry::EntryKind::Symlink { to_directory: true }
        );
        out.push(TreeEntry {
            rel: rel.clone(),
            dir,
            size: entry.size,
        });
        if dir && depth < 2 && walk(files, &entry.path, &rel, depth + 1, out).unwrap_or(false) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The note that ends a directory view cut at [`MAX_TREE_ENTRIES`].
pub fn tree_cut_note() -> String {
    format!(
        "[Truncated: more than {MAX_TREE_ENTRIES} entries; view a subdirectory to see the rest.]"
    )
}

/// A parameter a command needs: "Parameter `file_text` is required for
/// command: create" (the reference implementations' words).
pub fn needed<'a>(args: &Args<'a>, name: &str, command: &str) -> Result<&'a str, ToolError> {
    args.string(name)?.ok_or_else(|| missing(name, command))
}

/// The error of a parameter `command` needs and did not get.
pub fn missing(name: &str, command: &str) -> ToolError {
    ToolError::invalid(format!(
        "Parameter `{name}` is required for command: {command}"
    ))
}

/// `view_range` as the model wrote it: a list of integers, or absent.
pub fn view_range(raw: &super::Object) -> Result<Option<Vec<i64>>, ToolError> {
    let bad = || ToolError::invalid("Invalid `view_range`. It should be a list of two integers.");
    match raw.get("view_range") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_i64().ok_or_else(bad))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(bad()),
    }
}

/// How often `old` occurs in `content` (non-overlapping, as Python's
/// `str.count`) and where the first occurrence starts.
pub fn occurrences(content: &str, old: &str) -> (usize, usize) {
    let mut found = content.match_indices(old).map(|(i, _)| i);
    let first = found.next();
    (first.map_or(0, |_| 1 + found.count()), first.unwrap_or(0))
}

/// The 1-based lines where occurrences of `old` start, at most
/// [`MAX_NAMED_LINES`] and a flag when there were more: every start when
/// `overlapping` (the SDK's memory tool steps one character past each
/// match), else distinct lines of non-overlapping matches (the editor).
pub fn match_lines(content: &str, old: &str, overlapping: bool) -> (Vec<usize>, bool) {
    let (mut lines, mut from, mut line) = (Vec::new(), 0, 1);
    let mut at = 0;
    while let Some(pos) = content.get(at..).and_then(|rest| rest.find(old)) {
        let pos = at + pos;
        line += memchr::memchr_iter(b'\n', &content.as_bytes()[from..pos]).count();
        from = pos;
        if overlapping || lines.last() != Some(&line) {
            if lines.len() == MAX_NAMED_LINES {
                return (lines, true);
            }
            lines.push(line);
        }
        let step = if overlapping || old.is_empty() {
            content[pos..].chars().next().map_or(1, char::len_utf8)
        } else {
            old.len()
        };
        at = pos + step;
    }
    (lines, false)
}

/// Applies `edit` to the text of the file at `path` as one atomic
/// read-modify-write (`read_file` and `write` grants, no version guard).
/// `edit` gets the text and the file size limit, and answers the new text
/// and what the tool reports, or its refusal; a domain error (missing file,
/// directory, binary) is returned for the tool to word.
pub async fn edit_file<T: Send + 'static>(
    call: &Call,
    path: VfsPath,
    edit: impl FnMut(&str, u64) -> Result<(String, T), ToolError> + Send + 'static,
) -> Result<Result<(u64, T), ToolError>, Error> {
    call.service
        .run_asked(&call.caller, move |files| {
            files.edit_text(&path, None, false, edit)
        })
        .await
}

/// A command's answer: success, the text Claude reads, the command in `data`.
pub fn answer(command: &str, text: String) -> Outcome {
    Outcome {
        status: Status::Success,
        data: object! {"command" => command},
        text,
        stats: Object::new(),
    }
}

/// Creates the file at `path` with `content`, never replacing one (both
/// tools' `create`); the domain error is the tool's to word.
pub async fn create(call: &Call, path: VfsPath, content: &str) -> crate::Result<()> {
    let pre = Precondition {
        create_only: true,
        if_version: None,
        ..Precondition::default()
    };
    call.service
        .write(&call.caller, path, content.as_bytes().to_vec(), pre)
        .await
        .map(|_| ())
}

/// "The path X does not exist. Please provide a valid path." (both
/// reference implementations' words).
pub fn no_such_path(e: Error, shown: &str) -> ToolError {
    let message = format!("The path {shown} does not exist. Please provide a valid path.");
    ToolError::new(e, message)
}

/// `content` with its one occurrence of `old`, starting at byte `first`,
/// replaced by `new` (refused over `max` bytes before it is built), and the
/// 0-based line where the change starts, which both tools' snippets centre on.
pub fn replace_at(
    content: &str,
    old: &str,
    new: &str,
    first: usize,
    max: u64,
) -> crate::Result<(String, usize)> {
    let size = (content.len() - old.len() + new.len()) as u64;
    Error::check_file_size("the edited file", size, max)?;
    let mut edited = String::with_capacity(size as usize);
    edited.push_str(&content[..first]);
    edited.push_str(new);
    edited.push_str(&content[first + old.len()..]);
    let line = memchr::memchr_iter(b'\n', &content.as_bytes()[..first]).count();
    Ok((edited, line))
}

/// The parameters both tools take, worded alike: `command` (one of
/// `commands`), `file_text`, `view_range`, `old_str`, `insert_line` and
/// `insert_text`, by name; each tool adds its own between them.
pub fn param(name: &'static str, commands: &[&str]) -> Param {
    let string = |description: &str| json!({"type": "string", "description": description});
    match name {
        "command" => Param::required(
            "command",
            json!({"type": "string", "enum": commands, "description": "The operation."}),
        ),
        "view_range" => Param::optional(
            "view_range",
            json!({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2, "description": "view: [first line, last line], 1-based; -1 as last means to the end."}),
        ),
        "insert_line" => Param::optional(
            "insert_line",
            json!({"type": "integer", "description": "insert: the line after which the text goes (0 = before the first line)."}),
        ),
        "file_text" => Param::optional(name, string("create: the file's content.")),
        "old_str" => Param::optional(
            name,
            string("str_replace: text that occurs exactly once in the file."),
        ),
        "insert_text" => Param::optional(name, string("insert: the text to insert.")),
        other => unreachable!("{other} is not a parameter both tools take"),
    }
}
