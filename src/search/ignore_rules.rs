//! The ignore rules in force during a walk of a Filesystem mount: one
//! [`Level`] per directory from the mount root down, holding that
//! directory's `.ignore` and `.gitignore` rules, and [`skip_of`], which
//! decides whether a path is skipped by them or by the shared
//! hidden/default-ignore name rules ([`super::rules`]).
//!
//! The rules are compiled and matched here; the files are read by whoever
//! walks, through [`level_of`]'s reader: the Filesystem tier's ordered walk
//! and read-ahead workers from disk (`src/backend/fs/ignore_files.rs`), a
//! search in a branch of a Filesystem mount as the branch shows them
//! (`src/backend/branch/walk.rs`). So the tiers call this module, never the
//! other way.
//!
//! Ignore files follow ripgrep: rules in deeper directories win, and any
//! `.ignore` match wins over any `.gitignore` match. Unlike ripgrep,
//! `.gitignore` applies outside git repositories as well (ripgrep's
//! `--no-require-git`): a workspace copied without its `.git` keeps its
//! rules. `.git/info/exclude` and global excludes are not read. Each file
//! is matched with the `ignore` crate's gitignore matcher, compiled once per
//! distinct file text ([`super::ignore_cache`]).

use super::SearchRun;
use super::ignore_cache::{self, Compiled};
use super::rules::{self, Skip};
use crate::access::Op;
use crate::error::Error;
use crate::path::VfsPath;
use crate::scope::Scope;
use ignore::Match;
use std::io::Read;
use std::sync::Arc;

/// Ignore files larger than this are not read (reported as a problem).
pub const MAX_IGNORE_FILE_BYTES: u64 = 1 << 20;
/// The ignore files read in each directory, `.ignore` first (it wins).
const IGNORE_FILES: [&str; 2] = [".ignore", ".gitignore"];

/// A problem found while reading a directory or its ignore files: the
/// logical path shown and the error, reported by the walk when it gets there.
pub type Problem = (String, Error);

/// The ignore files of one directory of the walk.
#[derive(Default)]
pub struct Level {
    /// By [`IGNORE_FILES`] index.
    matchers: [Option<Arc<Compiled>>; 2],
    /// Bytes of the directory's logical path and the `/` after it: what to
    /// cut from a path below it to match it against these rules.
    prefix_len: usize,
}

impl Level {
    /// The rules of `dir` when it has no ignore file.
    fn empty(dir: &VfsPath) -> Level {
        Level {
            prefix_len: if dir.is_root() {
                1
            } else {
                dir.as_str().len() + 1
            },
            ..Level::default()
        }
    }

    /// True when it holds rules from at least one ignore file.
    pub fn has_rules(&self) -> bool {
        self.matchers.iter().any(Option::is_some)
    }

    /// True when `other` holds the same rules for the same directory
    /// depth. Compiled rules are shared by text
    /// (`crate::search::ignore_cache`), so the same text is the same
    /// matcher; a cache emptied between the two only makes equal rules
    /// look changed. Unlike a file's metadata, this sees a rewrite of an
    /// ignore file that kept its size within one tick of the clock.
    pub fn same_rules(&self, other: &Level) -> bool {
        let same = |(a, b): (&Option<Arc<Compiled>>, &Option<Arc<Compiled>>)| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        self.prefix_len == other.prefix_len && self.matchers.iter().zip(&other.matchers).all(same)
    }
}

/// True when `name` is that of an ignore file: changing one changes what
/// the rules skip anywhere below its directory.
pub fn is_ignore_file(name: &str) -> bool {
    IGNORE_FILES.contains(&name)
}

/// Why the hidden, default-ignore and ignore-file rules (of `levels`, the
/// directories from the mount root down to `path`'s parent) skip `path` (a
/// logical path).
pub fn skip_of(run: &SearchRun, levels: &[Arc<Level>], path: &str, is_dir: bool) -> Option<Skip> {
    let spec = run.spec();
    let name = path.rsplit('/').next().unwrap_or(path);
    rules::skip_name(name, spec.include_hidden, spec.include_ignored)
        .or_else(|| ignored_by_files(levels, path, is_dir).then_some(Skip::Ignored))
}

/// ripgrep's precedence: the deepest `.ignore` match, else the deepest
/// `.gitignore` match.
fn ignored_by_files(levels: &[Arc<Level>], path: &str, is_dir: bool) -> bool {
    for kind in 0..IGNORE_FILES.len() {
        for level in levels.iter().rev() {
            if let Some(m) = level.matchers[kind]
                .as_ref()
                .and_then(|c| c.matcher.as_ref())
            {
                // Relative to the rules' directory (the matcher's root is
                // `.`), so `matched` has no prefix to strip: stripping
                // compared `Path`s component by component, 5% of a Glob.
                let rel = path.get(level.prefix_len..).unwrap_or_default();
                match m.matched(rel, is_dir) {
                    Match::None => {}
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                }
            }
        }
    }
    false
}

/// The ignore rules of `dir`, from the texts of its ignore files as `read`
/// finds them (given each file's name and logical path; `None` or
/// `NotFound` when there is no such file): the walk of the Filesystem tier
/// reads them from disk (`src/backend/fs/ignore_files.rs`), a search in a
/// branch of a Filesystem mount through the branch
/// (`src/backend/branch/walk.rs`).
/// Unreadable files and bad rules go to `problems`.
pub fn level_of(
    run: &SearchRun,
    dir: &VfsPath,
    problems: &mut Vec<Problem>,
    read: impl FnMut(&str, &VfsPath) -> Result<Option<String>, Error>,
) -> Level {
    if run.spec().include_ignored {
        return Level::empty(dir);
    }
    rules_of(dir, problems, read)
}

/// [`level_of`] for any search: the rules of `dir`'s ignore files, which a
/// search that includes ignored files must not be given (the Filesystem
/// tier's path table keeps them for every search:
/// `src/backend/fs/mirror/`).
pub fn rules_of(
    dir: &VfsPath,
    problems: &mut Vec<Problem>,
    mut read: impl FnMut(&str, &VfsPath) -> Result<Option<String>, Error>,
) -> Level {
    let mut level = Level::empty(dir);
    for (slot, name) in level.matchers.iter_mut().zip(IGNORE_FILES) {
        let Ok(path) = dir.join(name) else {
            continue;
        };
        let text = match read(name, &path) {
            Ok(Some(text)) => text,
            Ok(None) | Err(Error::NotFound(_)) => continue,
            Err(err) => {
                problems.push((path.to_string(), err));
                continue;
            }
        };
        let compiled = ignore_cache::compiled(text);
        for message in &compiled.errors {
            problems.push((path.to_string(), Error::InvalidArgument(message.clone())));
        }
        *slot = Some(compiled);
    }
    level
}

/// The text of the ignore file at `path`, read from `reader`: at most
/// [`MAX_IGNORE_FILE_BYTES`] of it, which must be UTF-8.
pub fn read_text(path: &VfsPath, reader: impl Read) -> Result<String, Error> {
    let mut text = String::new();
    reader
        .take(MAX_IGNORE_FILE_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| Error::io(path.as_str(), e))?;
    Ok(text)
}

/// Reports the `problems` met loading the ignore files of the directories
/// above a search's top (`above_top`) or below it: above it, only those of
/// files the caller may read (their text is not the caller's to see).
pub fn report(run: &SearchRun, scope: &Scope, problems: Vec<Problem>, above_top: bool) {
    for (path, err) in problems {
        let readable = !above_top
            || VfsPath::parse(&path)
                .is_ok_and(|p| scope.principal.ops_on(&p).contains(Op::ReadFile));
        if readable {
            run.problem(path, err);
        }
    }
}
