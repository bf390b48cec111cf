//! What an answer shows, checked in one place against the caller's grants
//! (docs/security.md § Answers show only what the caller may see).
//!
//! Every check before a tier call guards what a call *asks for*. An answer
//! can still carry more than that: a merge's conflicts carry three versions
//! of each file, a branch's diff names the file a move came from, a paging
//! cursor names the next file, a dry run's diff carries every file it would
//! change. Each such answer type implements [`Disclose`]: it names every
//! path and every piece of content it carries, and [`Sight`] decides, for
//! the caller, which of them it may see. The service applies it to every
//! answer that leaves [`super::Service::run`] (whose result type must
//! implement it) and to every batch a stream hands out, so a new answer
//! type cannot reach a front end without stating what it shows.
//!
//! The rules (docs/contract.md § Grants):
//! - a **name** may be shown when the caller holds any right on the path,
//!   or `list` on something below it (the directories that lead to its
//!   grants, as a listing shows them);
//! - **content** may be shown with `read_binary`, or with `read_file` when
//!   it is text (what Read or ReadBytes of it would answer).
//!
//! A list drops what the caller may not see; an answer about one thing
//! that it may not see is refused, with a message that names nothing.

use super::branch::{BranchDiff, BranchInfo, Discarding, Merged};
use super::changeset::Committed;
use super::edit::EditOutcome;
use super::history::VersionDiff;
use super::rewind::Rewound;
use crate::access::{Op, Principal};
use crate::backend::{ChunkReader, MoveOutcome, WriteOutcome};
use crate::entry::Entry;
use crate::error::{Error, Result};
use crate::history::FileVersion;
use crate::path::VfsPath;
use crate::text::lines::Window;

/// An answer that states the paths and the content it carries, and drops
/// or refuses what a caller may not see of them.
pub trait Disclose {
    /// Keeps only what `sight` allows: drops the items of a list that the
    /// caller may not see, and refuses (with [`Sight::withheld`]) an answer
    /// whose one subject it may not see.
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()>;
}

/// What one caller may see: its grants, asked about names and content.
pub struct Sight<'a> {
    principal: &'a Principal,
}

impl<'a> Sight<'a> {
    /// The sight of `principal`.
    pub fn of(principal: &'a Principal) -> Sight<'a> {
        Sight { principal }
    }

    /// True when the caller may see the name `path`: it holds a right on
    /// it, or `list` on something below it.
    pub fn may_name(&self, path: &VfsPath) -> bool {
        !self.principal.ops_on(path).is_empty()
            || self
                .principal
                .grants
                .iter()
                .any(|g| g.ops.contains(Op::List) && g.prefix.is_within(path))
    }

    /// True when the caller may see `content`, the bytes of `path`: with
    /// `read_binary`, or `read_file` when the bytes are text.
    pub fn may_show(&self, path: &VfsPath, content: &[u8]) -> bool {
        let ops = self.principal.ops_on(path);
        ops.contains(Op::ReadBinary)
            || (ops.contains(Op::ReadFile) && std::str::from_utf8(content).is_ok())
    }

    /// True when the caller may see text derived from `path`'s content (a
    /// diff, a window of lines): `read_file` or `read_binary`.
    pub fn may_show_text(&self, path: &VfsPath) -> bool {
        let ops = self.principal.ops_on(path);
        ops.contains(Op::ReadFile) || ops.contains(Op::ReadBinary)
    }

    /// Refuses an answer unless the caller may see the name `path`.
    pub fn name(&self, path: &VfsPath) -> Result<()> {
        self.require(self.may_name(path))
    }

    /// Refuses an answer unless the caller may see `content` of `path`.
    pub fn show(&self, path: &VfsPath, content: &[u8]) -> Result<()> {
        self.require(self.may_name(path) && self.may_show(path, content))
    }

    /// Refuses an answer unless the caller may see every byte of `path`
    /// (`read_binary`): a download, whatever the content turns out to be.
    pub fn show_bytes(&self, path: &VfsPath) -> Result<()> {
        let ops = self.principal.ops_on(path);
        self.require(self.may_name(path) && ops.contains(Op::ReadBinary))
    }

    /// Refuses an answer unless the caller may see text derived from
    /// `path`'s content.
    pub fn show_text(&self, path: &VfsPath) -> Result<()> {
        self.require(self.may_name(path) && self.may_show_text(path))
    }

    fn require(&self, allowed: bool) -> Result<()> {
        if allowed {
            Ok(())
        } else {
            Err(self.withheld())
        }
    }

    /// The refusal of an answer that would show what the caller may not
    /// see. It names nothing: the name itself may be what is withheld.
    pub fn withheld(&self) -> Error {
        Error::PermissionDenied(format!(
            "the answer would show a path or content outside the grants of {}, so it is \
             withheld; ask an administrator for read rights on the files this call touches",
            self.principal.name
        ))
    }
}

/// Answers that carry no path and no content.
macro_rules! discloses_nothing {
    ($($t:ty),*) => {
        $(impl Disclose for $t {
            fn screen(&mut self, _: &Sight<'_>) -> Result<()> {
                Ok(())
            }
        })*
    };
}

discloses_nothing!(
    (),
    bool,
    u64,
    (u64, u64),
    MoveOutcome,
    EditOutcome,
    Discarding
);

/// The versions of the one path a call named, with who made them: no
/// other path, and no content.
impl Disclose for Vec<FileVersion> {
    fn screen(&mut self, _: &Sight<'_>) -> Result<()> {
        Ok(())
    }
}

/// The diff of two versions of the one path a call named, whose
/// `read_file` [`super::Files::diff`] checked.
impl Disclose for VersionDiff {
    fn screen(&mut self, _: &Sight<'_>) -> Result<()> {
        Ok(())
    }
}

/// An answer made only of what the call itself named, each part read by a
/// [`super::Files`] step that checked the caller's grant for it: a front
/// end's composition of single-path steps (a tool's text of the one file
/// it read). Wrapping states that nothing else is carried; the files that
/// may use it are listed in `tests/it/modules.rs`, so a new use is seen in
/// review.
pub struct Asked<T>(pub T);

impl<T> Disclose for Asked<T> {
    fn screen(&mut self, _: &Sight<'_>) -> Result<()> {
        Ok(())
    }
}

/// A listing: the entries the caller may not name are dropped.
impl Disclose for Vec<Entry> {
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()> {
        self.retain(|e| sight.may_name(&e.path));
        Ok(())
    }
}

/// One path's metadata.
impl Disclose for Entry {
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()> {
        sight.name(&self.path)
    }
}

/// A file's content and its metadata, as a read answers them.
impl Disclose for (Vec<u8>, Entry) {
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()> {
        sight.show(&self.1.path, &self.0)
    }
}

/// A window of a file's lines and its metadata, as Read answers them.
impl Disclose for (Window, Entry) {
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()> {
        sight.show_text(&self.1.path)
    }
}

/// Metadata and a reader of the content, as a download starts.
impl Disclose for (Entry, ChunkReader) {
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()> {
        sight.show_bytes(&self.0.path)
    }
}

/// The file a write made.
impl Disclose for WriteOutcome {
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()> {
        sight.name(&self.path)
    }
}

/// The files a changeset changed.
impl Disclose for Committed {
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()> {
        self.files.iter().try_for_each(|f| sight.name(&f.path))
    }
}

/// A rewind's files; a dry run's diff carries the text of every one.
impl Disclose for Rewound {
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()> {
        let diffed = !self.diff.is_empty();
        self.files.iter().try_for_each(|f| match diffed {
            true => sight.show_text(&f.path),
            false => sight.name(&f.path),
        })
    }
}

/// A merge's files, and each conflict's three versions.
impl Disclose for Merged {
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()> {
        self.files.iter().try_for_each(|f| sight.name(&f.path))?;
        self.conflicts.iter().try_for_each(|c| {
            let sides = [&c.ancestor, &c.branch, &c.base];
            sight.name(&c.path)?;
            sides
                .into_iter()
                .flatten()
                .try_for_each(|data| sight.show(&c.path, data))
        })
    }
}

/// A page of a branch's diff: each file's name and diff, a move's source
/// and the cursor of the next page.
impl Disclose for BranchDiff {
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()> {
        for file in &mut self.files {
            sight.show_text(&file.path)?;
            if let Some(from) = &file.from {
                sight.name(from)?;
            }
        }
        self.next_after.as_ref().map_or(Ok(()), |p| sight.name(p))
    }
}

/// Branches as listed: the roots the caller may not name are dropped.
impl Disclose for Vec<BranchInfo> {
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()> {
        self.retain(|b| sight.may_name(&b.root));
        Ok(())
    }
}

/// A new branch.
impl Disclose for BranchInfo {
    fn screen(&mut self, sight: &Sight<'_>) -> Result<()> {
        sight.name(&self.root)
    }
}
