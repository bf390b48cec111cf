//! The MultiEdit tool: several edits of one file, all or nothing.
//!
//! Every edit is matched against the ORIGINAL text (not the text left by the
//! edits before it), must match as Edit requires, and must not overlap
//! another; then all are applied at once by [`text::apply_edits`] inside the
//! same atomic update as Edit ([`super::edit::modify`]). When one fails,
//! nothing is written and `data.failed_index` (0-based) names it.

use super::args::Args;
use super::edit::{Refusal, adapt_endings, at_edit, check_matches, check_strings, modify};
use super::params::{Param, Params, version_schema};
use super::write::expected_version;
use super::{Call, Object, Outcome, ToolError};
use crate::error::Error;
use crate::text::{self, EditSpec};
use serde_json::json;
use std::sync::LazyLock;

/// Shown to the model.
pub const DESCRIPTION: &str = "Apply several exact-string replacements to one file at once, \
all or nothing. Each edit is matched against the original file (not the result of earlier \
edits), must be unique unless its replace_all is true, and must not overlap another edit. First \
Read the file and pass stats.version as expected_version. On failure nothing changes and \
data.failed_index names the edit to fix.";

/// The parameters of one edit of `edits`, in the order the model sees them.
pub static EDIT_PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "old_string",
            json!({"type": "string", "description": "Exact text to replace (non-empty)."}),
        ),
        Param::required(
            "new_string",
            json!({"type": "string", "description": "Replacement text."}),
        ),
        Param::optional(
            "replace_all",
            json!({"type": "boolean", "description": "Replace every occurrence.", "default": false}),
        ),
    ])
});

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "path",
            json!({"type": "string", "description": "File to edit (relative to project root or absolute within it)."}),
        ),
        Param::required(
            "edits",
            json!({
                "type": "array",
                "minItems": 1,
                "description": "Edits to apply, each matched against the original file.",
                "items": EDIT_PARAMS.schema(),
            }),
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

struct OneEdit {
    old: String,
    new: String,
    replace_all: bool,
}

/// Runs MultiEdit.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("MultiEdit", raw, PARAMS.names())?;
    let path_arg = args.required_string("path")?;
    let dry_run = args.boolean("dry_run")?.unwrap_or(false);
    let expected = expected_version(&args)?;
    let objects = args.objects("edits")?;
    if objects.is_empty() {
        return Err(ToolError::invalid(
            "Missing required parameter 'edits': give at least one {old_string, new_string} edit.",
        ));
    }
    let mut edits = Vec::with_capacity(objects.len());
    for (i, o) in objects.into_iter().enumerate() {
        let parsed = (|| {
            let e = Args::new("MultiEdit edits", o, EDIT_PARAMS.names())?;
            let edit = OneEdit {
                old: e.required_string("old_string")?.to_owned(),
                new: e.required_string("new_string")?.to_owned(),
                replace_all: e.boolean("replace_all")?.unwrap_or(false),
            };
            check_strings(&edit.old, &edit.new)?;
            Ok(edit)
        })();
        edits.push(parsed.map_err(|e| at_edit(i, e))?);
    }
    modify(
        call,
        path_arg,
        dry_run,
        expected,
        Box::new(move |file: &str, max: u64| {
            let mut adapted = Vec::with_capacity(edits.len());
            for (i, e) in edits.iter().enumerate() {
                let (old, new) = adapt_endings(file, &e.old, &e.new);
                check_matches(file, &old, e.replace_all).map_err(|r| r.at(i))?;
                adapted.push((old, new, e.replace_all));
            }
            let specs: Vec<EditSpec<'_>> = adapted
                .iter()
                .map(|(old, new, replace_all)| EditSpec {
                    old,
                    new,
                    replace_all: *replace_all,
                })
                .collect();
            text::apply_edits(file, &specs, max).map_err(|err| {
                if matches!(err.kind(), Error::TooLarge(_)) {
                    return Refusal::Error(err);
                }
                let index = match &err {
                    Error::Context { metadata, .. } => metadata
                        .iter()
                        .find(|(k, _)| k == "edit_index")
                        .and_then(|(_, v)| v.parse::<usize>().ok()),
                    _ => None,
                };
                let message = match err.kind() {
                    Error::InvalidArgument(m) => m.clone(),
                    _ => err.to_string(),
                };
                let failure = ToolError::new(err, message);
                Refusal::Tool(match index {
                    Some(i) => at_edit(i, failure),
                    None => failure,
                })
            })
        }),
    )
    .await
}
