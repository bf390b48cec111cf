//! Claude's memory tool (`memory_20250818`, tool name `memory`): files under
//! `/memories` that persist across conversations, served with the texts,
//! limits and refusals of the reference implementation in Anthropic's
//! Python SDK (`anthropic.lib.tools.BetaLocalFilesystemMemoryTool`), so an
//! application plugs agentvfs in where that class kept a local directory
//! (clients/python/src/agentvfs/anthropic.py, clients/ts/src/anthropic.ts).
//!
//! Paths: the tool's `/memories/...` is the logical path `/memories/...`
//! (src/default.toml mounts the Store tier there); `.` and `..` are resolved
//! lexically and a path leaving `/memories` is refused with the SDK's words.
//! The project root and the caller's grants apply as to every tool.
//!
//! Commands: `view` (a directory two levels deep with sizes, or a file with
//! line numbers and an optional `view_range`), `create` (never overwrites),
//! `str_replace` (a unique `old_str`), `insert` (`insert_text` after line
//! `insert_line`, [`crate::text::insert`]), `delete` (a file or a tree),
//! `rename`. Edits are one atomic read-modify-write each; the deliberate
//! differences from the SDK are listed in clients/python/README.md.

use super::args::Args;
use super::claude::{self, edit_file, match_lines, missing, needed, occurrences};
use super::params::{Param, Params};
use super::{Call, Object, Outcome, ToolError};
use crate::access::Op;
use crate::error::{Error, echo};
use crate::path::VfsPath;
use crate::service::Precondition;
use crate::text;
use serde_json::json;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Claude's memory tool (memory_20250818): a memory directory at \
/memories that persists across conversations. Commands: view (a directory two levels deep with \
sizes, or a file with line numbers; view_range [start, end], end -1 = to the end), create (path, \
file_text; never overwrites), str_replace (path, old_str that must occur once, new_str), insert \
(path, insert_line: the line after which insert_text goes, 0 = top), delete (path: a file or a \
directory), rename (old_path, new_path). Every path starts with /memories.";

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    let string = |description: &str| json!({"type": "string", "description": description});
    let shared = |name| claude::param(name, &COMMANDS);
    Params::new(vec![
        shared("command"),
        Param::optional(
            "path",
            string("Path under /memories (view, create, str_replace, insert, delete)."),
        ),
        shared("view_range"),
        shared("file_text"),
        shared("old_str"),
        Param::optional("new_str", string("str_replace: its replacement.")),
        shared("insert_line"),
        shared("insert_text"),
        Param::optional("old_path", string("rename: the path to move.")),
        Param::optional(
            "new_path",
            string("rename: where it goes (must not exist)."),
        ),
    ])
});

const COMMANDS: [&str; 6] = [
    "view",
    "create",
    "str_replace",
    "insert",
    "delete",
    "rename",
];
/// The memory directory, as the tool's paths name it.
const MEMORIES: &str = "/memories";
const OUTSIDE: &str = "Access denied. The memory directory is outside the project root.";
/// The most lines a viewed file may have (the SDK's `MAX_LINES`).
const MAX_LINES: usize = 999_999;

/// A tool path, checked and resolved.
struct Located {
    /// The path as the model wrote it (every message quotes it so).
    raw: String,
    /// The logical path.
    path: VfsPath,
    /// True for `/memories` itself.
    root: bool,
}

/// Resolves a tool path: it must start with `/memories` and stay below it.
fn locate(call: &mut Call, raw: &str) -> Result<Located, ToolError> {
    let escape = || {
        let message = format!("Path {} would escape /memories directory", echo(raw));
        ToolError::new(Error::PermissionDenied(message.clone()), message)
    };
    let Some(rest) = raw.strip_prefix(MEMORIES) else {
        return Err(ToolError::invalid(format!(
            "Path must start with /memories, got: {}",
            echo(raw)
        )));
    };
    if !rest.is_empty() && !rest.starts_with('/') {
        return Err(escape());
    }
    let mut segments = vec!["memories"];
    for segment in rest.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop().ok_or_else(escape)?;
            }
            s => segments.push(s),
        }
    }
    if segments.first() != Some(&"memories") {
        return Err(escape());
    }
    let path = call.resolve(&format!("/{}", segments.join("/")), OUTSIDE)?;
    Ok(Located {
        raw: echo(raw).into_owned(),
        path,
        root: segments.len() == 1,
    })
}

/// Runs the memory tool.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("memory", raw, PARAMS.names())?;
    let command = args.required_string("command")?;
    let text = match command {
        "view" => {
            let at = locate(call, needed(&args, "path", command)?)?;
            view(call, at, claude::view_range(raw)?).await?
        }
        "create" => {
            let at = locate(call, needed(&args, "path", command)?)?;
            create(call, at, needed(&args, "file_text", command)?).await?
        }
        "str_replace" => {
            let at = locate(call, needed(&args, "path", command)?)?;
            let old = needed(&args, "old_str", command)?.to_owned();
            let new = needed(&args, "new_str", command)?.to_owned();
            str_replace(call, at, old, new).await?
        }
        "insert" => {
            let at = locate(call, needed(&args, "path", command)?)?;
            let line = args
                .integer("insert_line")?
                .ok_or_else(|| missing("insert_line", command))?;
            let text = needed(&args, "insert_text", command)?.to_owned();
            insert(call, at, line, text).await?
        }
        "delete" => {
            let at = locate(call, needed(&args, "path", command)?)?;
            delete(call, at).await?
        }
        "rename" => {
            let from = locate(call, needed(&args, "old_path", command)?)?;
            let to = locate(call, needed(&args, "new_path", command)?)?;
            rename(call, from, to).await?
        }
        other => {
            return Err(ToolError::invalid(format!(
                "Unknown command: {}. The memory tool's commands are: {}.",
                echo(other),
                COMMANDS.join(", ")
            )));
        }
    };
    Ok(claude::answer(command, text))
}

/// The SDK's `_format_file_size`: `0B`, `512B`, `4.0K`, `1.5M`.
fn file_size(bytes: u64) -> String {
    if bytes == 0 {
        return "0B".into();
    }
    let unit = ((63 - bytes.leading_zeros()) / 10).min(3);
    let size = bytes as f64 / 1024f64.powi(unit as i32);
    let suffix = ["B", "K", "M", "G"][unit as usize];
    if size.fract() == 0.0 {
        format!("{}{suffix}", size as u64)
    } else {
        format!("{size:.1}{suffix}")
    }
}

/// Python's `list[start:end]` bounds for a list of `len` items.
fn py_slice(len: usize, start: i64, end: i64) -> std::ops::Range<usize> {
    let clamp = |i: i64| {
        if i < 0 {
            (len as i64 + i).max(0) as usize
        } else {
            (i as usize).min(len)
        }
    };
    let (start, end) = (clamp(start), clamp(end));
    start..end.max(start)
}

async fn view(call: &Call, at: Located, range: Option<Vec<i64>>) -> Result<String, ToolError> {
    let Located { raw, path, root } = at;
    call.service
        .run_asked(&call.caller, move |files| {
            let entry = match files.stat(&path, Op::File) {
                Err(e) if root && matches!(e.kind(), Error::NotFound(_)) => None,
                Err(e) => return Ok(Err(claude::no_such_path(e, &raw))),
                Ok(entry) => Some(entry),
            };
            if entry.as_ref().is_none_or(|e| e.is_directory()) {
                let (items, cut) = match entry {
                    Some(_) => claude::tree(files, &path)?,
                    None => (Vec::new(), false),
                };
                let mut lines = vec![format!(
                    "Here're the files and directories up to 2 levels deep in {raw}, excluding \
                     hidden items:"
                )];
                lines.push(format!("{}\t{raw}", file_size(entry.map_or(0, |e| e.size))));
                for item in items {
                    let slash = if item.dir { "/" } else { "" };
                    lines.push(format!(
                        "{}\t{raw}/{}{slash}",
                        file_size(item.size),
                        item.rel
                    ));
                }
                if cut {
                    lines.push(claude::tree_cut_note());
                }
                return Ok(Ok(lines.join("\n")));
            }
            let (data, _) = files.read(&path, Op::ReadFile)?;
            let Ok(content) = text::decode_strict(path.as_str(), &data) else {
                return Ok(Err(ToolError::new(
                    Error::Binary(path.to_string()),
                    format!("The file {raw} is not valid UTF-8 text."),
                )));
            };
            // Lines are `split('\n')` pieces, as the SDK counts them: found
            // by scanning, never collected.
            let n = memchr::memchr_iter(b'\n', content.as_bytes()).count() + 1;
            if n > MAX_LINES {
                return Ok(Err(ToolError::invalid(format!(
                    "File {raw} exceeds maximum line limit of 999,999 lines."
                ))));
            }
            let (window, first) = match range.as_deref() {
                Some(&[start, end]) => {
                    let start = start.max(1) - 1;
                    let end = if end == -1 { n as i64 } else { end };
                    (py_slice(n, start, end), start as u64 + 1)
                }
                _ => (0..n, 1),
            };
            let shown = (!window.is_empty()).then(|| text::lines::split_span(content, window));
            let lines = || shown.into_iter().flat_map(|span| span.split('\n'));
            let what = format!("Here's the content of {raw} with line numbers:\n");
            let size = what.len() + text::lines::numbered_len(lines(), first);
            files.charge(size as u64, "the view of the file")?;
            let mut out = String::with_capacity(size);
            out.push_str(&what);
            text::lines::push_lines_numbered(&mut out, lines(), first);
            Ok(Ok(out))
        })
        .await
        .map_err(ToolError::from)?
}

async fn create(call: &Call, at: Located, content: &str) -> Result<String, ToolError> {
    let Located { raw, path, .. } = at;
    match claude::create(call, path, content).await {
        Ok(_) => Ok(format!("File created successfully at: {raw}")),
        Err(e) if matches!(e.kind(), Error::AlreadyExists(_) | Error::IsDirectory(_)) => {
            Err(ToolError::new(e, format!("File {raw} already exists")))
        }
        Err(e) => Err(e.into()),
    }
}

/// The error of an edit that did not happen, in the SDK's words.
fn edit_error(e: Error, raw: &str) -> ToolError {
    match e.kind() {
        Error::NotFound(_) => claude::no_such_path(e, raw),
        Error::IsDirectory(_) => ToolError::new(e, format!("The path {raw} is not a file.")),
        Error::Binary(_) => ToolError::new(e, format!("The file {raw} is not valid UTF-8 text.")),
        _ => e.into(),
    }
}

async fn str_replace(
    call: &Call,
    at: Located,
    old: String,
    new: String,
) -> Result<String, ToolError> {
    let Located { raw, path, .. } = at;
    let shown = raw.clone();
    let edited = edit_file(call, path, move |content, max| {
        let (count, first) = occurrences(content, &old);
        match count {
            0 => {
                return Err(ToolError::invalid(format!(
                    "No replacement was performed, old_str `{}` did not appear verbatim in {shown}.",
                    echo(&old)
                )));
            }
            1 => {}
            _ => {
                let (lines, more) = match_lines(content, &old, true);
                let lines: Vec<String> = lines.iter().map(usize::to_string).collect();
                return Err(ToolError::invalid(format!(
                    "No replacement was performed. Multiple occurrences of old_str `{}` in lines: \
                     {}{}. Please ensure it is unique",
                    echo(&old),
                    lines.join(", "),
                    if more { ", ..." } else { "" }
                )));
            }
        }
        let (edited, changed) = claude::replace_at(content, &old, &new, first, max)?;
        let from = changed.saturating_sub(2);
        let snippet =
            text::format_lines_numbered(edited.split('\n').skip(from).take(changed + 3 - from), from as u64 + 1);
        Ok((edited, snippet))
    })
    .await
    .map_err(|e| edit_error(e, &raw))?;
    let (_, snippet) = edited?;
    Ok(format!(
        "The memory file has been edited. Here is the snippet showing the change (with line \
         numbers):\n{snippet}"
    ))
}

async fn insert(call: &Call, at: Located, line: i64, text: String) -> Result<String, ToolError> {
    let Located { raw, path, .. } = at;
    call.service
        .run_asked(&call.caller, move |files| {
            files.edit_text(&path, None, false, |content, max| {
                let costs = text::Costs {
                    charge: &|bytes, what| files.charge(bytes, what),
                    alive: text::Costs::unbounded().alive,
                };
                match text::insert::insert_at_line(content, line, &text, max, &costs)? {
                    Ok(done) => Ok((done.text, ())),
                    Err(n) => Err(ToolError::invalid(format!(
                        "Invalid `insert_line` parameter: {line}. It should be within the range [0, {n}]."
                    ))),
                }
            })
        })
    .await
    .map_err(|e| edit_error(e, &raw))??;
    Ok(format!("The file {raw} has been edited."))
}

async fn delete(call: &Call, at: Located) -> Result<String, ToolError> {
    let Located { raw, path, root } = at;
    if root {
        return Err(ToolError::invalid(
            "Cannot delete the /memories directory itself",
        ));
    }
    match call.service.delete(&call.caller, path, None, true).await {
        Ok(_) => Ok(format!("Successfully deleted {raw}")),
        Err(e) if matches!(e.kind(), Error::NotFound(_)) => {
            Err(ToolError::new(e, format!("The path {raw} does not exist")))
        }
        Err(e) => Err(e.into()),
    }
}

async fn rename(call: &Call, from: Located, to: Located) -> Result<String, ToolError> {
    if from.root {
        return Err(ToolError::invalid(
            "Cannot rename the /memories directory itself",
        ));
    }
    let pre = Precondition {
        create_only: true,
        if_version: None,
        ..Precondition::default()
    };
    let (old, new) = (from.raw, to.raw);
    match call
        .service
        .rename(&call.caller, from.path, to.path, pre)
        .await
    {
        Ok(_) => Ok(format!("Successfully renamed {old} to {new}")),
        Err(e) if matches!(e.kind(), Error::AlreadyExists(_)) || to.root => Err(ToolError::new(
            e,
            format!("The destination {new} already exists"),
        )),
        Err(e) if matches!(e.kind(), Error::NotFound(_)) => {
            Err(ToolError::new(e, format!("The path {old} does not exist")))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_the_sdk_writes_them() {
        let cases = [
            (0, "0B"),
            (17, "17B"),
            (1024, "1K"),
            (4096, "4K"),
            (1536, "1.5K"),
        ];
        for (bytes, shown) in cases {
            assert_eq!(file_size(bytes), shown);
        }
        assert_eq!(file_size(3 * 1024 * 1024 + 1), "3.0M");
        assert_eq!(file_size(5 << 40), "5120G");
    }

    #[test]
    fn ranges_slice_as_python_does() {
        assert_eq!(py_slice(5, 0, 5), 0..5);
        assert_eq!(py_slice(5, 3, 99), 3..5);
        assert_eq!(py_slice(5, 4, 2), 4..4);
        assert_eq!(py_slice(5, 0, -2), 0..3);
        assert_eq!(py_slice(5, 9, 12), 5..5);
    }
}
