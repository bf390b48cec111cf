//! The Edit tool: replace one exact string (or every occurrence) in a file.
//!
//! Flow (shared with MultiEdit through [`modify`]): resolve, check `read_file`
//! and `write`, then one atomic `Backend::update` with `if_version =
//! expected_version`, whose closure decodes the file (strict UTF-8: writing
//! back a lossy decoding would corrupt it), applies the change with
//! [`text::apply_edit`] and checks the size. A dry run reads instead and
//! writes nothing. The answer carries a unified diff and the new version.
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
use super::diff;
use super::hint;
use super::write::{change_error, check_size, expected_version, push_diff};
use super::{Call, Object, Outcome, Status, ToolError, object_schema};
use crate::access::Op;
use crate::error::Error;
use crate::server::blocking;
use crate::text::{self, EditSpec};
use serde_json::{Value, json};
use std::borrow::Cow;

/// Shown to the model.
pub const DESCRIPTION: &str = "Replace an exact string in a file. old_string must match the \
file exactly (whitespace and indentation included, without Read's line-number prefix) and be \
unique unless replace_all is true; include 2-5 surrounding lines to make it unique. First Read \
the file and pass stats.version as expected_version. When old_string is not found, the error \
shows the closest region of the file and what differs. dry_run shows the diff without writing.";

const PARAMS: &[&str] = &[
    "path",
    "old_string",
    "new_string",
    "replace_all",
    "dry_run",
    "expected_version",
];
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// The parameters.
pub fn schema() -> Value {
    object_schema(
        json!({
            "path": {"type": "string", "description": "File to edit (relative to project root or absolute within it)."},
            "old_string": {"type": "string", "description": "Exact text to replace (non-empty)."},
            "new_string": {"type": "string", "description": "Replacement text (must differ from old_string)."},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring a unique one.", "default": false},
            "dry_run": {"type": "boolean", "description": "If true, only report what would change.", "default": false},
            "expected_version": {"type": "integer", "description": "stats.version from your last Read (or Write/Edit) of this file.", "minimum": 0}
        }),
        &["path", "old_string", "new_string", "expected_version"],
    )
}

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

/// Checks that `old` occurs in `file` as the edit requires: at least once,
/// and once only unless `replace_all`.
pub fn check_matches(file: &str, old: &str, replace_all: bool) -> Result<(), ToolError> {
    let at: Vec<usize> = file.match_indices(old).map(|(i, _)| i).collect();
    match at.len() {
        0 => Err(ToolError::invalid(hint::not_found(file, old))),
        1 => Ok(()),
        n if replace_all => {
            debug_assert!(n > 1);
            Ok(())
        }
        n => {
            let lines: Vec<String> = at
                .iter()
                .take(10)
                .map(|&i| (file[..i].matches('\n').count() + 1).to_string())
                .collect();
            Err(ToolError::invalid(format!(
                "old_string matches {n} times in file. It must be unique. Include more \
                 surrounding context (2-5 lines) to make it unique, or set replace_all to \
                 replace every occurrence. Matches start at lines {}{}.",
                lines.join(", "),
                if n > 10 { ", ..." } else { "" }
            )))
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
pub type Transform = dyn FnMut(&str) -> Result<(String, u64), ToolError> + Send;

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
    let (backend, scope, max) = (
        call.backend.clone(),
        call.caller.scope.clone(),
        call.max_file_bytes,
    );
    let shown_in = shown.clone();
    let result = blocking(move || {
        // The transform's own error (with its hint) travels beside the
        // domain error that aborts the update.
        let mut failed: Option<ToolError> = None;
        let mut change = None;
        let mut apply = |data: &[u8]| -> crate::Result<Vec<u8>> {
            let old = text::decode_strict(path.as_str(), data)?;
            match transform(old) {
                Ok((new, replacements)) => {
                    check_size(&path, new.len(), max)?;
                    let preview = diff::preview(&shown_in, old, &new);
                    let bytes = new.into_bytes();
                    change = Some((preview, replacements, bytes.len()));
                    Ok(bytes)
                }
                Err(e) => {
                    let kind = Error::InvalidArgument(e.message.clone());
                    failed = Some(e);
                    Err(kind)
                }
            }
        };
        let outcome = if dry_run {
            backend.read(&scope, &path).and_then(|(data, entry)| {
                crate::backend::Precondition {
                    create_only: false,
                    if_version: Some(expected),
                }
                .check(&path, Some(entry.version))?;
                apply(&data).map(|_| entry.version)
            })
        } else {
            backend
                .update(&scope, &path, Some(expected), &mut apply)
                .map(|o| o.version)
        };
        Ok((outcome, failed, change))
    })
    .await
    .map_err(|e| change_error(e, &shown))?;
    let version = match result {
        (Ok(version), _, _) => version,
        (Err(_), Some(failed), _) => return Err(failed),
        (Err(e), None, _) => return Err(change_error(e, &shown)),
    };
    let Some((preview, replacements, bytes)) = result.2 else {
        return Err(ToolError::from(Error::Internal(
            "edit finished without a change".into(),
        )));
    };
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
            "version" => version,
        },
    })
}

/// Runs Edit.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("Edit", raw, PARAMS)?;
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
        Box::new(move |file: &str| {
            let (old, new) = adapt_endings(file, &old, &new);
            check_matches(file, &old, replace_all)?;
            let spec = EditSpec {
                old: &old,
                new: &new,
                replace_all,
            };
            Ok(text::apply_edit(file, &spec)?)
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
        let err = check_matches("x\ny\nx\n", "x", false).unwrap_err();
        assert!(err.message.starts_with("old_string matches 2 times in file. It must be unique. Include more surrounding context (2-5 lines)"));
        assert!(
            err.message.ends_with("Matches start at lines 1, 3."),
            "{}",
            err.message
        );
        assert!(check_matches("x\ny\nx\n", "x", true).is_ok());
    }
}
