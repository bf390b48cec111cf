//! The Edit tool: replace one exact string (or every occurrence) in a file.
//!
//! Flow (shared with MultiEdit through [`modify`]): resolve, check `read_file`
//! and `write`, then one atomic `Backend::update` with `if_version =
//! expected_version`, whose closure decodes the file (strict UTF-8: writing
//! back a lossy decoding would corrupt it) and applies the change with
//! [`text::apply_edit`], which refuses a result over the file size limit
//! before building it. A dry run reads instead and writes nothing. The answer
//! carries a unified diff and the new version.
//!
//! The closure runs under the tier's lock on the file (the State session's
//! lock), so it computes the new text and nothing else: it keeps the changed
//! lines ([`diff::Change`]) or, when `old_string` is missing, a copy of the
//! file, and the diff and the closest-match hint are built after the update
//! returned. A concurrent Read never waits for them.
//!
//! Line endings: in a CRLF file an `old_string`/`new_string` written with
//! `\n` is matched and written as `\r\n`, so CRLF files stay CRLF.
//!
//! Errors: INVALID_PARAM "old_string not found in file…" with the closest
//! region and what differs ([`super::hint`]); "old_string matches N times in
//! file. It must be unique. Include more surrounding context (2-5 lines)…";
//! CONFLICT for a missing or stale `expected_version`; NOT_FOUND,
//! IS_DIRECTORY, BINARY_FILE as Write.

use super::args::Args;
use super::envelope::version_json;
use super::hint;
use super::params::{Param, Params, version_schema};
use super::write::{change_error, expected_version, push_diff};
use super::{Call, Object, Outcome, Status, ToolError};
use crate::access::Op;
use crate::error::Error;
use crate::text::diff;
use crate::text::{self, EditSpec};
use serde_json::json;
use std::borrow::Cow;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Replace an exact string in a file. old_string must match the \
file exactly (whitespace and indentation included, without Read's line-number prefix) and be \
unique unless replace_all is true; include 2-5 surrounding lines to make it unique. First Read \
the file and pass stats.version as expected_version. When old_string is not found, the error \
shows the closest region of the file and what differs. dry_run shows the diff without writing.";

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "path",
            json!({"type": "string", "description": "File to edit (relative to project root or absolute within it)."}),
        ),
        Param::required(
            "old_string",
            json!({"type": "string", "description": "Exact text to replace (non-empty)."}),
        ),
        Param::required(
            "new_string",
            json!({"type": "string", "description": "Replacement text (must differ from old_string)."}),
        ),
        Param::optional(
            "replace_all",
            json!({"type": "boolean", "description": "Replace every occurrence instead of requiring a unique one.", "default": false}),
        ),
        Param::optional(
            "dry_run",
            json!({"type": "boolean", "description": "If true, only report what would change.", "default": false}),
        ),
        Param::required(
            "expected_version",
            version_schema("stats.version from your last Read (or Write/Edit) of this file."),
        ),
        Param::label(),
    ])
});
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// `old`/`new` as they must be in a file whose lines end with `\r\n` when it
/// does (and they were written with bare `\n`).
pub fn adapt_endings<'a>(file: &str, old: &'a str, new: &'a str) -> (Cow<'a, str>, Cow<'a, str>) {
    if file.contains("\r\n") && old.contains('\n') && !old.contains("\r\n") {
        let crlf = |s: &'a str| Cow::Owned(s.replace("\r\n", "\n").replace('\n', "\r\n"));
        (crlf(old), crlf(new))
    } else {
        (Cow::Borrowed(old), Cow::Borrowed(new))
    }
}

/// Why a transformation changed nothing.
#[derive(Debug)]
pub enum Refusal {
    /// Told to the model as it is.
    Tool(ToolError),
    /// A domain error (the file size limit), worded like Write's by
    /// [`change_error`].
    Error(Error),
    /// `old_string` (of MultiEdit's edit `index`) is not in the file: the
    /// hint is built once the update released the file.
    Missing {
        /// The string looked for (line endings adapted to the file).
        old: String,
        /// Which edit of a MultiEdit; `None` for Edit.
        index: Option<usize>,
    },
}

impl Refusal {
    /// The refusal of MultiEdit's edit `index` (`edits[i]: ` and
    /// `data.failed_index`).
    pub fn at(self, index: usize) -> Refusal {
        match self {
            Refusal::Tool(e) => Refusal::Tool(at_edit(index, e)),
            Refusal::Missing { old, .. } => Refusal::Missing {
                old,
                index: Some(index),
            },
            error => error,
        }
    }
}

/// MultiEdit's error for edit `index`: the message prefixed with
/// `edits[index]: ` and `data.failed_index` set.
pub fn at_edit(index: usize, e: ToolError) -> ToolError {
    ToolError {
        message: format!("edits[{index}]: {}", e.message),
        ..e
    }
    .with_data("failed_index", index)
}

/// Most match positions named when `old_string` is not unique.
const MAX_NAMED_MATCHES: usize = 10;

/// Checks that `old` occurs in `file` as the edit requires: at least once,
/// and once only unless `replace_all`. Counts without collecting (a
/// `replace_all` may match millions of times).
pub fn check_matches(file: &str, old: &str, replace_all: bool) -> Result<(), Refusal> {
    let mut found = file.match_indices(old).map(|(i, _)| i);
    let Some(first) = found.next() else {
        return Err(Refusal::Missing {
            old: old.to_owned(),
            index: None,
        });
    };
    if replace_all {
        return Ok(());
    }
    let mut at = vec![first];
    let mut n = 1;
    for i in found {
        if at.len() < MAX_NAMED_MATCHES {
            at.push(i);
        }
        n += 1;
    }
    match n {
        1 => Ok(()),
        n => {
            let mut lines = Vec::with_capacity(at.len());
            let (mut line, mut from) = (1, 0);
            for i in at {
                line += memchr::memchr_iter(b'\n', &file.as_bytes()[from..i]).count();
                from = i;
                lines.push(line.to_string());
            }
            Err(Refusal::Tool(ToolError::invalid(format!(
                "old_string matches {n} times in file. It must be unique. Include more \
                 surrounding context (2-5 lines) to make it unique, or set replace_all to \
                 replace every occurrence. Matches start at lines {}{}.",
                lines.join(", "),
                if n > MAX_NAMED_MATCHES { ", ..." } else { "" }
            ))))
        }
    }
}

/// Checks `old_string`/`new_string` before any I/O.
pub fn check_strings(old: &str, new: &str) -> Result<(), ToolError> {
    if old.is_empty() {
        return Err(ToolError::invalid(
            "old_string must not be empty. To create a file use Write.",
        ));
    }
    if old == new {
        return Err(ToolError::invalid(
            "No changes to make: old_string and new_string are exactly the same.",
        ));
    }
    Ok(())
}

/// A transformation of a file's text: the new text and the replacements made.
/// The file size limit is its argument: a result over it is refused before
/// it is built.
pub type Transform = dyn FnMut(&str, u64) -> Result<(String, u64), Refusal> + Send;

/// The error a refusal gives the model; `file` is the text `old_string` was
/// looked for in (only kept for [`Refusal::Missing`]).
fn refusal_error(refusal: Refusal, file: &str, shown: &str) -> ToolError {
    match refusal {
        Refusal::Tool(e) => e,
        Refusal::Error(e) => change_error(e, shown),
        Refusal::Missing { old, index } => {
            let e = ToolError::invalid(hint::not_found(file, &old));
            match index {
                Some(i) => at_edit(i, e),
                None => e,
            }
        }
    }
}

/// Applies `transform` to the file at `path_arg` atomically (or, for a dry
/// run, only computes it) and renders the result as `verb` ("Edited").
pub async fn modify(
    call: &mut Call,
    path_arg: &str,
    dry_run: bool,
    expected: Option<u64>,
    mut transform: Box<Transform>,
) -> Result<Outcome, ToolError> {
    let path = call.resolve(path_arg, OUTSIDE)?;
    let shown = call.display(&path);
    call.check(&path, Op::ReadFile)?;
    call.check(&path, Op::Write)?;
    let Some(expected) = expected else {
        return Err(ToolError::invalid(format!(
            "Missing required parameter 'expected_version'. Read '{shown}' first and pass the \
             version from Read's stats."
        )));
    };
    let shown_in = shown.clone();
    let result = call
        .service
        .run_asked(&call.caller, move |files| {
            // Under the lock: the new text only. What the diff or the hint
            // needs is kept for after the update.
            let edited =
                files.edit_text(&path, Some(expected), dry_run, |old, max| {
                    match transform(old, max) {
                        Ok((new, replacements)) => {
                            let kept = (diff::Change::new(old, &new), replacements, new.len());
                            Ok((new, kept))
                        }
                        Err(refusal) => {
                            let file = match refusal {
                                Refusal::Missing { .. } => old.to_owned(),
                                _ => String::new(),
                            };
                            Err(Box::new((refusal, file)))
                        }
                    }
                })?;
            // The file is released: build the hint or the diff now.
            Ok(match edited {
                Err(refused) => {
                    let (refusal, file) = *refused;
                    Err(refusal_error(refusal, &file, &shown_in))
                }
                Ok((version, (change, replacements, bytes))) => {
                    Ok((version, change.preview(&shown_in), replacements, bytes))
                }
            })
        })
        .await
        .map_err(|e| change_error(e, &shown))?;
    let (version, preview, replacements, bytes) = result?;
    let verb = if dry_run {
        "[Dry Run] Would edit"
    } else {
        "Edited"
    };
    let mut text = format!(
        "{verb} '{shown}' (+{}/-{} lines, {bytes} bytes).",
        preview.added, preview.removed
    );
    push_diff(&mut text, &preview);
    Ok(Outcome {
        status: Status::Success,
        data: object! {
            "applied" => !dry_run,
            "replacements" => replacements,
            "diff_preview" => preview.text,
            "diff_truncated" => preview.truncated,
        },
        text,
        stats: object! {
            "replacements" => replacements,
            "lines_added" => preview.added,
            "lines_removed" => preview.removed,
            "bytes" => bytes,
            "version" => version_json(version),
        },
    })
}

/// Runs Edit.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("Edit", raw, PARAMS.names())?;
    let path_arg = args.required_string("path")?;
    let old = args.required_string("old_string")?.to_owned();
    let new = args.required_string("new_string")?.to_owned();
    let replace_all = args.boolean("replace_all")?.unwrap_or(false);
    let dry_run = args.boolean("dry_run")?.unwrap_or(false);
    let expected = expected_version(&args)?;
    check_strings(&old, &new)?;
    modify(
        call,
        path_arg,
        dry_run,
        expected,
        Box::new(move |file: &str, max: u64| {
            let (old, new) = adapt_endings(file, &old, &new);
            check_matches(file, &old, replace_all)?;
            let spec = EditSpec {
                old: &old,
                new: &new,
                replace_all,
            };
            text::apply_edit(file, &spec, max).map_err(Refusal::Error)
        }),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_files_get_crlf_strings() {
        let (old, new) = adapt_endings("a\r\nb\r\n", "a\nb", "x\ny");
        assert_eq!((old.as_ref(), new.as_ref()), ("a\r\nb", "x\r\ny"));
        let (old, _) = adapt_endings("a\nb\n", "a\nb", "x");
        assert_eq!(old, "a\nb");
    }

    #[test]
    fn several_matches_name_their_lines() {
        let Err(Refusal::Tool(err)) = check_matches("x\ny\nx\n", "x", false) else {
            panic!("two matches are refused");
        };
        assert!(err.message.starts_with("old_string matches 2 times in file. It must be unique. Include more surrounding context (2-5 lines)"));
        assert!(
            err.message.ends_with("Matches start at lines 1, 3."),
            "{}",
            err.message
        );
        assert!(check_matches("x\ny\nx\n", "x", true).is_ok());
    }
}
