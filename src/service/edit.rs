//! Edit and MultiEdit's one atomic step, shared by every front end: the
//! gRPC Edit/MultiEdit RPCs and the Edit/MultiEdit tools differ only in the
//! change they compute and how they word the answer. [`Service::edit`] is
//! the whole call of a front end that replaces strings as asked.

use super::{Caller, Files, Service};
use crate::access::Op;
use crate::backend::Precondition;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::text::{self, EditSpec};

/// One string replacement of an Edit or MultiEdit call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextEdit {
    /// Text to find; must be non-empty.
    pub old: String,
    /// Replacement.
    pub new: String,
    /// Replace every occurrence instead of requiring exactly one.
    pub replace_all: bool,
}

impl TextEdit {
    /// The replacement as the text functions take it.
    pub fn spec(&self) -> EditSpec<'_> {
        EditSpec {
            old: &self.old,
            new: &self.new,
            replace_all: self.replace_all,
        }
    }
}

/// What an Edit or MultiEdit call made of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EditOutcome {
    /// Occurrences replaced, over all the edits.
    pub replacements: u64,
    /// The version written.
    pub version: u64,
}

impl Service {
    /// Applies `edits` to the file at `path` as one atomic read-modify-write
    /// (`read_file` and `write` grants, then the arguments, in the order of
    /// docs/contract.md § Grants). `multi` is MultiEdit: each edit matched
    /// against the original text, a failure naming its index; otherwise the
    /// one edit is Edit's, reported without an index.
    pub async fn edit(
        &self,
        caller: &Caller,
        path: VfsPath,
        if_version: Option<u64>,
        edits: Vec<TextEdit>,
        multi: bool,
    ) -> Result<EditOutcome> {
        let (version, replacements) = self
            .run(caller, move |files| {
                files.check(&path, Op::ReadFile)?;
                files.check(&path, Op::Write)?;
                if edits.is_empty() {
                    return Err(Error::InvalidArgument(
                        "edits must contain at least one edit".into(),
                    ));
                }
                if !multi && edits[0].old.is_empty() {
                    return Err(Error::InvalidArgument(
                        "old_string must not be empty".into(),
                    ));
                }
                let specs: Vec<EditSpec<'_>> = edits.iter().map(TextEdit::spec).collect();
                files.edit_checked(&path, if_version, false, |text, max| {
                    if multi {
                        text::apply_edits(text, &specs, max)
                    } else {
                        text::apply_edit(text, &specs[0], max)
                    }
                })?
            })
            .await?;
        Ok(EditOutcome {
            replacements,
            version,
        })
    }
}

/// What an edit made of a file: the version written (the current one for a
/// dry run) and what the edit kept for the answer; or the edit's refusal,
/// which changed nothing.
pub type Edited<T, R> = std::result::Result<(u64, T), R>;

impl Files<'_> {
    /// Replaces the text of the file at `path` with what `edit` makes of it,
    /// as one atomic read-modify-write (`read_file` and `write` grants); a
    /// dry run reads, checks `if_version` and computes, and writes nothing.
    ///
    /// The file must be UTF-8 (strictly: writing back a lossy decoding would
    /// corrupt it). `edit` gets the text and the file size limit, and returns
    /// the new text with what the caller keeps for its answer, or a refusal.
    /// It runs under the tier's lock on the file, so it should compute the
    /// new text and little else; whatever needs the whole old text (a
    /// closest-match hint) is built from what it keeps, after the lock.
    pub fn edit_text<T, R>(
        &self,
        path: &VfsPath,
        if_version: Option<u64>,
        dry_run: bool,
        edit: impl FnMut(&str, u64) -> std::result::Result<(String, T), R>,
    ) -> Result<Edited<T, R>> {
        self.check(path, Op::ReadFile)?;
        self.check(path, Op::Write)?;
        self.edit_checked(path, if_version, dry_run, edit)
    }

    /// [`Files::edit_text`] once its grants are checked.
    fn edit_checked<T, R>(
        &self,
        path: &VfsPath,
        if_version: Option<u64>,
        dry_run: bool,
        mut edit: impl FnMut(&str, u64) -> std::result::Result<(String, T), R>,
    ) -> Result<Edited<T, R>> {
        let max = self.max_file_bytes();
        let (mut kept, mut refused) = (None, None);
        let outcome = {
            let mut apply = |data: &[u8]| -> Result<Vec<u8>> {
                let old = text::decode_strict(path.as_str(), data)?;
                match edit(old, max) {
                    Ok((new, keep)) => {
                        kept = Some(keep);
                        Ok(new.into_bytes())
                    }
                    Err(refusal) => {
                        // Aborts the update; the refusal is the answer.
                        refused = Some(refusal);
                        Err(Error::InvalidArgument("the edit was refused".into()))
                    }
                }
            };
            if dry_run {
                self.read(path, Op::ReadFile).and_then(|(data, entry)| {
                    Precondition::if_version(if_version).check(path, Some(entry.version))?;
                    apply(&data).map(|_| entry.version)
                })
            } else {
                self.update(path, if_version, &mut apply).map(|o| o.version)
            }
        };
        match (outcome, refused, kept) {
            (Err(_), Some(refusal), _) => Ok(Err(refusal)),
            (Err(e), None, _) => Err(e),
            (Ok(version), _, Some(keep)) => Ok(Ok((version, keep))),
            (Ok(_), _, None) => Err(Error::Internal("edit finished without a change".into())),
        }
    }
}
