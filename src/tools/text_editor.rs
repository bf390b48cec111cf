//! Claude's text-editor tool (`text_editor_20250728`, tool name
//! `str_replace_based_edit_tool`): `view` of files and directories, `create`,
//! `str_replace` and `insert` over the logical path space.
//!
//! Anthropic's SDKs ship no implementation of this tool (the API defines it,
//! the application runs it), so the texts follow Anthropic's reference
//! implementation in its computer-use demo (anthropic-quickstarts,
//! `computer_use_demo/tools/edit.py`, `EditTool20250429`), with the
//! deliberate differences listed in clients/python/README.md: tabs are kept
//! (the demo expands them, rewriting every tab of an edited file), and
//! `insert` is the memory tool's ([`crate::text::insert`]), so the result ends
//! with a newline and the valid range does not count the empty tail of a
//! final newline. `insert` takes the text as `insert_text` (this version)
//! or `new_str` (earlier ones); `max_characters` cuts a viewed file.
//!
//! Paths are absolute logical paths inside the project root. Edits are one
//! atomic read-modify-write each.

use super::args::Args;
use super::claude::{self, edit_file, match_lines, missing, needed, occurrences};
use super::params::{Param, Params};
use super::{Call, Object, Outcome, ToolError};
use crate::access::Op;
use crate::error::{Error, echo};
use crate::path::VfsPath;
use crate::text;
use serde_json::json;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Claude's text editor (text_editor_20250728): view a file with \
line numbers (view_range [start, end], end -1 = to the end; max_characters cuts the view) or a \
directory two levels deep; create a new file (file_text); str_replace an old_str that occurs \
exactly once with new_str; insert insert_text after line insert_line (0 = top). Paths are \
absolute.";

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    let shared = |name| claude::param(name, &COMMANDS);
    Params::new(vec![
        shared("command"),
        Param::required(
            "path",
            json!({"type": "string", "description": "Absolute path of the file or directory."}),
        ),
        shared("file_text"),
        shared("view_range"),
        shared("old_str"),
        Param::optional(
            "new_str",
            json!({"type": "string", "description": "str_replace: its replacement (default empty); insert: the text, as earlier versions named it."}),
        ),
        shared("insert_line"),
        shared("insert_text"),
        Param::optional(
            "max_characters",
            json!({"type": "integer", "minimum": 1, "description": "view: most characters of the file to show."}),
        ),
    ])
});

/// This tool's name, as Claude calls it.
pub const NAME: &str = "str_replace_based_edit_tool";
const COMMANDS: [&str; 4] = ["view", "create", "str_replace", "insert"];
const OUTSIDE: &str = "Access denied. Path must be within the project root.";
/// Lines shown before and after a change (the demo's `SNIPPET_LINES`).
const SNIPPET_LINES: usize = 4;
/// Ends a view cut at `max_characters`.
const CLIPPED: &str = "<response clipped><NOTE>To save on context only part of this file has \
been shown to you. View the rest with view_range.</NOTE>";

/// Runs the text-editor tool.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new(NAME, raw, PARAMS.names())?;
    let command = args.required_string("command")?;
    if !COMMANDS.contains(&command) {
        return Err(ToolError::invalid(format!(
            "Unrecognized command {}. The allowed commands for the {NAME} tool are: {}",
            echo(command),
            COMMANDS.join(", ")
        )));
    }
    let path_arg = args.required_string("path")?;
    let shown = echo(path_arg).into_owned();
    if !path_arg.starts_with('/') {
        return Err(ToolError::invalid(format!(
            "The path {shown} is not an absolute path, it should start with `/`. Maybe you meant /{shown}?"
        )));
    }
    let path = call.resolve(path_arg, OUTSIDE)?;
    let text = match command {
        "view" => {
            let max = args.integer_in("max_characters", 1, i64::MAX, i64::MAX, || {
                "max_characters must be an integer >= 1.".into()
            })? as usize;
            view(call, path, shown, claude::view_range(raw)?, max).await?
        }
        "create" => create(call, path, shown, needed(&args, "file_text", command)?).await?,
        "str_replace" => {
            let old = needed(&args, "old_str", command)?.to_owned();
            let new = args.string("new_str")?.unwrap_or_default().to_owned();
            str_replace(call, path, shown, old, new).await?
        }
        _ => {
            let line = args
                .integer("insert_line")?
                .ok_or_else(|| missing("insert_line", command))?;
            let text = match (args.string("insert_text")?, args.string("new_str")?) {
                (Some(a), Some(b)) if a != b => {
                    return Err(ToolError::invalid(
                        "Pass the text to insert as insert_text or as new_str, not both.",
                    ));
                }
                (Some(t), _) | (None, Some(t)) => t.to_owned(),
                (None, None) => return Err(missing("insert_text", command)),
            };
            insert(call, path, shown, line, text).await?
        }
    };
    Ok(claude::answer(command, text))
}

/// The error of a path that is not what the command needs, in the demo's words.
fn path_error(e: Error, shown: &str) -> ToolError {
    let message = match e.kind() {
        Error::NotFound(_) => return claude::no_such_path(e, shown),
        Error::IsDirectory(_) => format!(
            "The path {shown} is a directory and only the `view` command can be used on directories"
        ),
        Error::Binary(_) => format!("The file {shown} is not valid UTF-8 text."),
        _ => return e.into(),
    };
    ToolError::new(e, message)
}

/// "Here's the result of running `cat -n` on {what}:\n", which precedes
/// the lines.
fn cat_n_head(what: &str) -> String {
    format!("Here's the result of running `cat -n` on {what}:\n")
}

/// [`cat_n_head`], the lines numbered from `first`, and a final `\n`.
fn cat_n<'a>(what: &str, lines: impl IntoIterator<Item = &'a str>, first: usize) -> String {
    let mut out = cat_n_head(what);
    text::lines::push_lines_numbered(&mut out, lines, first as u64);
    out.push('\n');
    out
}

/// `view_range` checked against a file of `n` lines, as the demo words it.
fn check_range(range: &[i64], n: usize) -> Result<std::ops::Range<usize>, ToolError> {
    let &[first, last] = range else {
        return Err(ToolError::invalid(
            "Invalid `view_range`. It should be a list of two integers.",
        ));
    };
    let n = n as i64;
    let shown = format!("[{first}, {last}]");
    if first < 1 || first > n {
        return Err(ToolError::invalid(format!(
            "Invalid `view_range`: {shown}. Its first element `{first}` should be within the range of lines of the file: [1, {n}]"
        )));
    }
    if last > n {
        return Err(ToolError::invalid(format!(
            "Invalid `view_range`: {shown}. Its second element `{last}` should be smaller than the number of lines in the file: `{n}`"
        )));
    }
    if last != -1 && last < first {
        return Err(ToolError::invalid(format!(
            "Invalid `view_range`: {shown}. Its second element `{last}` should be larger or equal than its first `{first}`"
        )));
    }
    let end = if last == -1 { n } else { last };
    Ok(first as usize - 1..end.max(0) as usize)
}

/// The start of `span` (lines joined by `\n`) within `max_chars`
/// characters, the `\n` between lines counting as one, the way the view's
/// `max_characters` cuts it, and whether it was cut.
fn clip(span: &str, max_chars: usize) -> (&str, bool) {
    let mut budget = max_chars;
    let mut at = 0;
    for line in span.split('\n') {
        let chars = line.chars().count();
        if chars > budget {
            let cut = line
                .char_indices()
                .nth(budget)
                .map_or(line.len(), |(i, _)| i);
            return (&span[..at + cut], true);
        }
        at += line.len() + 1;
        budget = budget.saturating_sub(chars + 1);
    }
    (span, false)
}

async fn view(
    call: &Call,
    path: VfsPath,
    shown: String,
    range: Option<Vec<i64>>,
    max_chars: usize,
) -> Result<String, ToolError> {
    call.service
        .run_asked(&call.caller, move |files| {
            let entry = match files.stat(&path, Op::File) {
                Ok(entry) => entry,
                Err(e) => return Ok(Err(path_error(e, &shown))),
            };
            if entry.is_directory() {
                if range.is_some() {
                    return Ok(Err(ToolError::invalid(
                        "The `view_range` parameter is not allowed when `path` points to a directory.",
                    )));
                }
                let (items, cut) = claude::tree(files, &path)?;
                let base = shown.strip_suffix('/').filter(|b| !b.is_empty()).unwrap_or(&shown);
                let mut lines = vec![shown.clone()];
                lines.extend(items.iter().map(|item| format!("{base}/{}", item.rel)));
                if cut {
                    lines.push(claude::tree_cut_note());
                }
                return Ok(Ok(format!(
                    "Here's the files and directories up to 2 levels deep in {shown}, excluding hidden items:\n{}\n",
                    lines.join("\n")
                )));
            }
            let (data, _) = files.read(&path, Op::ReadFile)?;
            let Ok(content) = text::decode_strict(path.as_str(), &data) else {
                return Ok(Err(path_error(Error::Binary(path.to_string()), &shown)));
            };
            // Lines are `split('\n')` pieces, as the demo counts them: found
            // by scanning, never collected.
            let n = memchr::memchr_iter(b'\n', content.as_bytes()).count() + 1;
            let window = match range.as_deref() {
                Some(range) => match check_range(range, n) {
                    Ok(window) => window,
                    Err(e) => return Ok(Err(e)),
                },
                None => 0..n,
            };
            let first = window.start + 1;
            let span = text::lines::split_span(content, window);
            let (visible, clipped) = clip(span, max_chars);
            let what = cat_n_head(&shown);
            let size = what.len()
                + text::lines::numbered_len(visible.split('\n'), first as u64)
                + 1
                + if clipped { CLIPPED.len() } else { 0 };
            files.charge(size as u64, "the view of the file")?;
            let mut out = String::with_capacity(size);
            out.push_str(&what);
            text::lines::push_lines_numbered(&mut out, visible.split('\n'), first as u64);
            out.push('\n');
            if clipped {
                out.push_str(CLIPPED);
            }
            Ok(Ok(out))
        })
        .await
        .map_err(ToolError::from)?
}

async fn create(
    call: &Call,
    path: VfsPath,
    shown: String,
    content: &str,
) -> Result<String, ToolError> {
    match claude::create(call, path, content).await {
        Ok(()) => Ok(format!("File created successfully at: {shown}")),
        Err(e) if matches!(e.kind(), Error::AlreadyExists(_)) => Err(ToolError::new(
            e,
            format!(
                "File already exists at: {shown}. Cannot overwrite files using command `create`."
            ),
        )),
        Err(e) => Err(path_error(e, &shown)),
    }
}

async fn str_replace(
    call: &Call,
    path: VfsPath,
    shown: String,
    old: String,
    new: String,
) -> Result<String, ToolError> {
    let quoted = shown.clone();
    let edited = edit_file(call, path, move |content, max| {
        let (count, first) = occurrences(content, &old);
        if count == 0 {
            return Err(ToolError::invalid(format!(
                "No replacement was performed, old_str `{}` did not appear verbatim in {quoted}.",
                echo(&old)
            )));
        }
        if count > 1 {
            let (lines, more) = match_lines(content, &old, false);
            let lines: Vec<String> = lines.iter().map(usize::to_string).collect();
            return Err(ToolError::invalid(format!(
                "No replacement was performed. Multiple occurrences of old_str `{}` in lines [{}{}]. Please ensure it is unique",
                echo(&old),
                lines.join(", "),
                if more { ", ..." } else { "" }
            )));
        }
        let (edited, changed) = claude::replace_at(content, &old, &new, first, max)?;
        let from = changed.saturating_sub(SNIPPET_LINES);
        let to = changed + SNIPPET_LINES + new.matches('\n').count();
        let snippet = cat_n(
            &format!("a snippet of {quoted}"),
            edited.split('\n').skip(from).take(to + 1 - from),
            from + 1,
        );
        Ok((edited, snippet))
    })
    .await
    .map_err(|e| path_error(e, &shown))?;
    let (_, snippet) = edited?;
    Ok(format!(
        "The file {shown} has been edited. {snippet}Review the changes and make sure they are as \
         expected. Edit the file again if necessary."
    ))
}

async fn insert(
    call: &Call,
    path: VfsPath,
    shown: String,
    line: i64,
    text: String,
) -> Result<String, ToolError> {
    let edited = call.service.run_asked(&call.caller, move |files| {
        files.edit_text(&path, None, false, |content, max| {
            let costs = text::Costs {
                charge: &|bytes, what| files.charge(bytes, what),
                alive: text::Costs::unbounded().alive,
            };
            match text::insert::insert_at_line(content, line, &text, max, &costs)? {
                Ok(done) => {
                    let at = line as usize;
                    let from = at.saturating_sub(SNIPPET_LINES);
                    let to = at + done.lines + SNIPPET_LINES;
                    let snippet = cat_n(
                        "a snippet of the edited file",
                        text::insert::lines(&done.text).skip(from).take(to - from),
                        from + 1,
                    );
                    Ok((done.text, snippet))
                }
                Err(n) => Err(ToolError::invalid(format!(
                    "Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: [0, {n}]"
                ))),
            }
        })
    })
    .await
    .map_err(|e| path_error(e, &shown))?;
    let (_, snippet) = edited?;
    Ok(format!(
        "The file {shown} has been edited. {snippet}Review the changes and make sure they are as \
         expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_ranges_are_checked_in_the_demo_words() {
        assert_eq!(check_range(&[2, -1], 5).unwrap(), 1..5);
        assert_eq!(check_range(&[2, 3], 5).unwrap(), 1..3);
        let message = |r: &[i64]| check_range(r, 5).unwrap_err().message;
        assert_eq!(
            message(&[0, 3]),
            "Invalid `view_range`: [0, 3]. Its first element `0` should be within the range of lines of the file: [1, 5]"
        );
        assert!(
            message(&[1, 6])
                .contains("should be smaller than the number of lines in the file: `5`")
        );
        assert!(message(&[3, 2]).contains("should be larger or equal than its first `3`"));
        assert!(message(&[1]).starts_with("Invalid `view_range`. It should be"));
    }
}
