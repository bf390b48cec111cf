//! One search engine, Grep and Glob, for every tier.
//!
//! The application layer (`crate::service`) validates a request into a
//! [`SearchSpec`] (pattern compiled once, on a blocking thread, under size
//! limits), starts a [`SearchRun`] on a blocking thread and hands it to
//! `Backend::search`. The tier walks its entries in path order and feeds them to
//! the run, which applies the shared rules (hidden and ignored names, globs,
//! binary and size limits), enforces the budgets (visited count, time,
//! max_results, cancellation) and streams results in batches through a bounded
//! channel, ending with one [`Summary`]. Nothing in a search waits on its
//! client without a bound (see `run`), and one file's results are bounded too
//! (see `grep`).
//!
//! Layout:
//! - `spec`: the validated request and its defaults;
//! - `run`: budgets, counters and the batching, back-pressured output;
//! - `grep`: the ripgrep searcher and sink that collects one file's matches;
//! - `line_literal`: the Grep's matcher, which finds candidate lines by the
//!   longest literal every match holds;
//! - `rules`: which names are hidden or ignored by default (docs/contract.md § Glob and Grep);
//! - `ignore_rules` and `ignore_cache`: the rules of `.ignore` and
//!   `.gitignore` files, compiled once per text and matched during a walk
//!   (the walker reads the files);
//! - `room`: the one bound on large file contents all searches hold;
//! - `sorted`: the walk over tiers whose files live in an ordered key space;
//! - `index`: the trigram index that narrows a Grep's candidate files
//!   (docs/search-index.md);
//! - `window`: the parallel, order-preserving file window any tier's Grep
//!   can search files with (results still in walk order).

pub mod bulk;
mod grep;
mod ignore_cache;
pub mod ignore_rules;
pub mod index;
mod line_literal;
mod prefix;
pub mod room;
pub mod rules;
mod run;
pub mod sorted;
mod spec;
pub mod window;

pub use grep::{FileSearcher, MAX_FILE_HITS_BYTES, MAX_LINE_BYTES};
pub use line_literal::GrepMatcher;
pub use run::{EVENT_CHANNEL_CAPACITY, MAX_BATCH_BYTES, SearchEvent, SearchRun};
pub use spec::{
    Admit, Budgets, DEFAULT_MAX_DURATION_MS, DEFAULT_MAX_GREP_FILE_BYTES, DEFAULT_MAX_VISITED,
    FileFilter, GlobOptions, GrepOptions, GrepRequest, REGEX_DFA_SIZE_LIMIT, REGEX_SIZE_LIMIT,
    SearchKind, SearchSpec, compile_regex, normalize_pattern,
};

use crate::entry::Entry;
use crate::error::Error;
use crate::path::VfsPath;
use std::time::{Duration, SystemTime};

/// The part of the path space one `Backend::search` call covers: the subtree
/// of `top`, cut to the order-key range `[lo, hi)`. The mount table uses the
/// range to leave out mounts below a tier and splice them in at their place in
/// path order; a plain search covers the whole subtree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchPart {
    /// The directory (or, for Grep, file) walked.
    pub top: VfsPath,
    /// Inclusive lower order key.
    pub lo: Vec<u8>,
    /// Exclusive upper order key.
    pub hi: Vec<u8>,
}

impl SearchPart {
    /// The whole subtree of `top`.
    pub fn whole(top: VfsPath) -> SearchPart {
        let (lo, hi) = top.subtree_range();
        SearchPart { top, lo, hi }
    }

    /// True when the path with this order key lies in the part.
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.lo.as_slice() <= key && key < self.hi.as_slice()
    }

    /// True when some path below `dir` may lie in the part (a walker can
    /// prune `dir` otherwise).
    pub fn overlaps_dir(&self, dir: &VfsPath) -> bool {
        let (lo, hi) = dir.subtree_range();
        lo < self.hi && self.lo < hi
    }
}

/// Why a search stopped before covering everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortReason {
    /// `max_results` reached.
    Limit,
    /// `max_visited` reached.
    CountLimit,
    /// `max_duration_ms` ran out.
    TimeLimit,
    /// The client went away.
    Cancelled,
}

impl AbortReason {
    /// The name used in summaries and envelopes (`count_limit`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            AbortReason::Limit => "limit",
            AbortReason::CountLimit => "count_limit",
            AbortReason::TimeLimit => "time_limit",
            AbortReason::Cancelled => "cancelled",
        }
    }
}

/// One line of Grep output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineHit {
    /// 1-based line number.
    pub line_number: u64,
    /// The line without its terminator (invalid UTF-8 replaced).
    pub line: String,
    /// The first match in the line (empty for context lines).
    pub matched: String,
    /// True for a before/after context line.
    pub is_context: bool,
}

/// All the Grep output of one file (its path sent once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileHits {
    /// Logical path of the file.
    pub path: VfsPath,
    /// Its modification time (the Grep tool sorts by it).
    pub modified: SystemTime,
    /// Matching and context lines in line order.
    pub lines: Vec<LineHit>,
}

/// One result of a search, in path order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hit {
    /// A path matched by Glob, with its metadata.
    Entry(Entry),
    /// A path matched by a `paths_only` Glob.
    Path {
        /// Logical path.
        path: VfsPath,
        /// True for a symbolic link (never followed).
        symlink: bool,
    },
    /// A file's matches found by Grep.
    File(FileHits),
}

/// What a finished search reports, always last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Entries (files and directories) looked at.
    pub visited: u64,
    /// Results: matching lines (Grep) or paths (Glob).
    pub matched: u64,
    /// Files with at least one match (Grep).
    pub matched_files: u64,
    /// Files whose contents were searched.
    pub files_searched: u64,
    /// Entries left out by ignore rules (default list, .gitignore, ...).
    pub skipped_ignored: u64,
    /// Entries left out because their name starts with `.`.
    pub skipped_hidden: u64,
    /// Files left out because they hold binary data.
    pub skipped_binary: u64,
    /// Files left out because they exceed the size limit.
    pub skipped_too_large: u64,
    /// Wall time of the search.
    pub elapsed: Duration,
    /// Why it stopped early, if it did.
    pub aborted: Option<AbortReason>,
    /// Soft errors: unreadable files, failed mounts. The search went on.
    pub problems: Vec<(String, Error)>,
}
