//! A validated search request: patterns compiled once, defaults applied.
//!
//! Compiling is CPU work bounded by size limits ([`REGEX_SIZE_LIMIT`],
//! [`REGEX_DFA_SIZE_LIMIT`]; globset bounds its globs' regexes alike), and
//! callers run it on a blocking thread, never on the async runtime: a pattern
//! like `\p{L}{5000}` would otherwise stall every call sharing the worker.

use super::index::plan::{Query, parse, plan_hir};
use super::line_literal::GrepMatcher;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use grep_regex::RegexMatcherBuilder;
use std::time::Duration;

/// The contract's visited-entries budget (docs/contract.md § Glob and Grep), the default of every search.
pub const DEFAULT_MAX_VISITED: u64 = 20_000;
/// The contract's time budget (docs/contract.md § Glob and Grep) in milliseconds, the default of every search.
pub const DEFAULT_MAX_DURATION_MS: u64 = 2_000;
/// Most context lines before or after a match: more is never useful to an
/// agent and would let one request hold a file's worth of lines per match.
pub const MAX_CONTEXT_LINES: u32 = 1000;
/// Files larger than this are skipped (and counted) by Grep: searching a
/// multi-gigabyte log would blow every budget for little use to an agent.
pub const DEFAULT_MAX_GREP_FILE_BYTES: u64 = 64 << 20;
/// Largest compiled regex (its NFA), the regex crate's own default: enough
/// for any pattern an agent writes, while `\p{L}{5000}` is refused at once
/// instead of compiling for seconds (grep-regex's default is 100 MiB).
pub const REGEX_SIZE_LIMIT: usize = 10 << 20;
/// Cache of the lazy DFA per matcher (grep-regex's default is 1000 MiB,
/// meant for one ripgrep process, not for many searches in one server).
pub const REGEX_DFA_SIZE_LIMIT: usize = 10 << 20;

/// What to look for.
#[derive(Clone, Debug)]
pub enum SearchKind {
    /// Paths matching a glob.
    Glob(GlobOptions),
    /// Lines matching a regex.
    Grep(GrepOptions),
}

/// Glob search (docs/contract.md § Glob and Grep).
#[derive(Clone, Debug)]
pub struct GlobOptions {
    /// Pattern relative to the root; `*`/`?` never cross `/`.
    pub matcher: GlobSet,
    /// Emit paths without metadata ([`crate::search::Hit::Path`]), so tiers
    /// that would look it up per match (the Filesystem tier's `lstat`) skip
    /// that.
    pub paths_only: bool,
}

/// Grep search.
#[derive(Clone, Debug)]
pub struct GrepOptions {
    /// The compiled regex (line terminator set, which enables grep-searcher's
    /// fast whole-buffer path), finding lines by its longest literal.
    pub matcher: GrepMatcher,
    /// Only files passing this filter are searched.
    pub file_filter: Option<FileFilter>,
    /// Context lines before each match.
    pub before_context: usize,
    /// Context lines after each match.
    pub after_context: usize,
    /// At most this many matching lines per file.
    pub max_count_per_file: u64,
    /// Larger files are skipped and counted.
    pub max_file_bytes: u64,
    /// The trigrams every match's file holds, for the search index
    /// (docs/search-index.md).
    pub plan: Query,
}

impl GrepOptions {
    /// True when the file at `rel` (relative to the search root) passes the
    /// glob filter.
    pub fn accepts(&self, rel: &str) -> bool {
        self.file_filter.as_ref().is_none_or(|f| f.accepts(rel))
    }

    /// What Grep does with a walked file at `rel` of `size` bytes: the glob
    /// filter, then the size limit. The one place these rules are applied,
    /// by the live walk and by the path table's counting walk alike
    /// (docs/search-index.md § The path table).
    pub fn admits(&self, rel: &str, size: u64) -> Admit {
        if !self.accepts(rel) {
            Admit::Filtered
        } else if size > self.max_file_bytes {
            Admit::TooLarge
        } else {
            Admit::Searched
        }
    }
}

/// What Grep does with a walked file ([`GrepOptions::admits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Left out by the glob filter, not counted.
    Filtered,
    /// Over `max_file_bytes`: counted as too large.
    TooLarge,
    /// Searched.
    Searched,
}

/// A glob restricting which files Grep searches. Like ripgrep's `-g`, a glob
/// without `/` matches the file name at any depth; one with `/` matches the
/// path relative to the search root.
#[derive(Clone, Debug)]
pub struct FileFilter {
    matcher: GlobSet,
    whole_path: bool,
    /// The glob as given.
    glob: String,
}

impl FileFilter {
    /// Compiles the filter; an empty glob means no filter.
    pub fn new(glob: &str) -> Result<Option<FileFilter>> {
        if glob.is_empty() {
            return Ok(None);
        }
        let whole_path = glob.contains('/');
        let matcher = compile_glob(glob.strip_prefix("./").unwrap_or(glob), "glob")?;
        Ok(Some(FileFilter {
            matcher,
            whole_path,
            glob: glob.to_owned(),
        }))
    }

    /// The glob as given (what a cache of the walk's counts is keyed by).
    pub fn glob(&self) -> &str {
        &self.glob
    }

    /// True when the file at `rel` (relative to the search root) is searched.
    pub fn accepts(&self, rel: &str) -> bool {
        if self.whole_path {
            self.matcher.is_match(rel)
        } else {
            self.matcher.is_match(rel.rsplit('/').next().unwrap_or(rel))
        }
    }
}

/// Everything a search needs, validated.
#[derive(Clone, Debug)]
pub struct SearchSpec {
    /// Where the search starts (a directory, or a file for Grep).
    pub root: VfsPath,
    /// Glob or Grep.
    pub kind: SearchKind,
    /// Also walk entries whose name starts with `.`.
    pub include_hidden: bool,
    /// Also walk what ignore rules (default list, .gitignore) leave out.
    pub include_ignored: bool,
    /// Stop after this many results.
    pub max_results: u64,
    /// Stop after visiting this many entries.
    pub max_visited: u64,
    /// Stop after this long.
    pub max_duration: Duration,
    /// The pattern as the caller wrote it: only an audit record at level
    /// `request` keeps it (docs/audit.md § Policy).
    pub pattern: String,
}

/// The budgets and switches shared by Grep and Glob requests; 0 means default.
#[derive(Clone, Copy, Debug, Default)]
pub struct Budgets {
    /// 0: unlimited.
    pub max_results: u64,
    /// 0: [`DEFAULT_MAX_VISITED`].
    pub max_visited: u64,
    /// 0: [`DEFAULT_MAX_DURATION_MS`].
    pub max_duration_ms: u64,
    /// See [`SearchSpec::include_hidden`].
    pub include_hidden: bool,
    /// See [`SearchSpec::include_ignored`].
    pub include_ignored: bool,
}

impl SearchSpec {
    fn new(root: VfsPath, kind: SearchKind, pattern: &str, b: Budgets) -> SearchSpec {
        let or = |v: u64, d: u64| if v == 0 { d } else { v };
        SearchSpec {
            root,
            kind,
            pattern: pattern.to_owned(),
            include_hidden: b.include_hidden,
            include_ignored: b.include_ignored,
            max_results: or(b.max_results, u64::MAX),
            max_visited: or(b.max_visited, DEFAULT_MAX_VISITED),
            max_duration: Duration::from_millis(or(b.max_duration_ms, DEFAULT_MAX_DURATION_MS)),
        }
    }

    /// A Glob search; the pattern is relative to `root`. With `paths_only`
    /// results carry no metadata.
    pub fn glob(
        root: VfsPath,
        pattern: &str,
        paths_only: bool,
        budgets: Budgets,
    ) -> Result<SearchSpec> {
        if pattern.is_empty() {
            return Err(Error::InvalidArgument(
                "Missing required parameter 'pattern'.".into(),
            ));
        }
        if pattern.starts_with('/') {
            return Err(Error::InvalidArgument(format!(
                "glob pattern {pattern:?} must be relative to the search path"
            )));
        }
        let matcher = compile_glob(normalize_pattern(pattern), "pattern")?;
        Ok(SearchSpec::new(
            root,
            SearchKind::Glob(GlobOptions {
                matcher,
                paths_only,
            }),
            pattern,
            budgets,
        ))
    }

    /// A Grep search.
    pub fn grep(root: VfsPath, request: GrepRequest<'_>, budgets: Budgets) -> Result<SearchSpec> {
        if request.pattern.is_empty() {
            return Err(Error::InvalidArgument("pattern must not be empty".into()));
        }
        if request.before_context.max(request.after_context) > MAX_CONTEXT_LINES {
            return Err(Error::InvalidArgument(format!(
                "before_context and after_context must be at most {MAX_CONTEXT_LINES}"
            )));
        }
        let regex = RegexMatcherBuilder::new()
            .case_insensitive(request.case_insensitive)
            .fixed_strings(request.literal)
            .line_terminator(Some(b'\n'))
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
            .build(request.pattern)
            .map_err(|e| Error::InvalidArgument(format!("Invalid regex pattern: {e}")))?;
        let hir = parse(request.pattern, request.literal, request.case_insensitive);
        let options = GrepOptions {
            matcher: GrepMatcher::new(regex, hir.as_ref()),
            file_filter: FileFilter::new(request.glob)?,
            before_context: request.before_context as usize,
            after_context: request.after_context as usize,
            max_count_per_file: if request.max_count_per_file == 0 {
                u64::MAX
            } else {
                request.max_count_per_file
            },
            max_file_bytes: DEFAULT_MAX_GREP_FILE_BYTES,
            plan: hir.as_ref().map_or(Query::All, plan_hir),
        };
        let pattern = request.pattern;
        Ok(SearchSpec::new(
            root,
            SearchKind::Grep(options),
            pattern,
            budgets,
        ))
    }
}

/// The content part of a Grep request.
#[derive(Clone, Copy, Debug, Default)]
pub struct GrepRequest<'a> {
    /// Regex (or fixed string with `literal`).
    pub pattern: &'a str,
    /// File filter glob (empty: every file).
    pub glob: &'a str,
    /// Treat the pattern as a fixed string.
    pub literal: bool,
    /// Ignore case.
    pub case_insensitive: bool,
    /// Context lines before.
    pub before_context: u32,
    /// Context lines after.
    pub after_context: u32,
    /// 0: no per-file limit.
    pub max_count_per_file: u64,
}

/// The Glob tool's `pattern_normalized` (docs/contract.md § Glob and Grep): POSIX separators, no leading `./`.
pub fn normalize_pattern(pattern: &str) -> &str {
    let mut p = pattern;
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    p
}

/// Compiles a glob where `*` and `?` never match `/` (docs/contract.md § Glob and Grep).
///
/// A set of one glob rather than a `GlobMatcher`: the set picks a matching
/// strategy by the glob's shape (`**/*.rs` becomes a lookup of the extension)
/// where the matcher always runs a regex, which was 5% of a Glob's CPU.
fn compile_glob(pattern: &str, what: &str) -> Result<GlobSet> {
    let invalid = |e: globset::Error| {
        Error::InvalidArgument(format!("invalid {what} {pattern:?}: {}", e.kind()))
    };
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(invalid)?;
    GlobSetBuilder::new().add(glob).build().map_err(invalid)
}

/// Compiles a regex for ReadRe under the same size limits as Grep's, so a
/// pattern like `\p{L}{5000}` is refused quickly instead of compiling for
/// seconds into a huge program.
pub fn compile_regex(pattern: &str) -> Result<regex::Regex> {
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
        .build()
        .map_err(|e| Error::InvalidArgument(format!("Invalid regex pattern: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob_matches(pattern: &str, path: &str) -> bool {
        compile_glob(pattern, "pattern").unwrap().is_match(path)
    }

    #[test]
    fn star_and_question_never_cross_slash() {
        assert!(glob_matches("*.rs", "main.rs"));
        assert!(!glob_matches("*.rs", "src/main.rs"));
        assert!(!glob_matches("src?main.rs", "src/main.rs"));
        assert!(glob_matches("**/*.rs", "src/a/main.rs"));
    }

    #[test]
    fn double_star_prefix_matches_zero_levels() {
        assert!(glob_matches("**/foo", "foo"));
        assert!(glob_matches("**/foo", "a/b/foo"));
        assert!(glob_matches("src/{a,b}.rs", "src/b.rs"));
    }

    #[test]
    fn file_filter_matches_name_without_slash_and_path_with_it() {
        let by_name = FileFilter::new("*.rs").unwrap().unwrap();
        assert!(by_name.accepts("deep/dir/x.rs"));
        let by_path = FileFilter::new("src/*.rs").unwrap().unwrap();
        assert!(by_path.accepts("src/x.rs"));
        assert!(!by_path.accepts("lib/src/x.rs"));
    }

    #[test]
    fn context_beyond_limit_is_invalid_param() {
        let req = GrepRequest {
            pattern: "x",
            after_context: MAX_CONTEXT_LINES + 1,
            ..Default::default()
        };
        let err = SearchSpec::grep(VfsPath::root(), req, Budgets::default()).unwrap_err();
        assert!(err.to_string().contains("at most 1000"), "{err}");
    }

    #[test]
    fn huge_compiled_regex_is_refused_by_the_size_limit() {
        let req = GrepRequest {
            pattern: r"\p{L}{5000}",
            ..Default::default()
        };
        let err = SearchSpec::grep(VfsPath::root(), req, Budgets::default()).unwrap_err();
        let limit = format!("size limit of {REGEX_SIZE_LIMIT}");
        assert!(err.to_string().ends_with(&limit), "{err}");
        assert_eq!(err.code(), "INVALID_PARAM");
    }

    #[test]
    fn bad_regex_is_invalid_param_naming_the_problem() {
        let req = GrepRequest {
            pattern: "a(",
            ..Default::default()
        };
        let err = SearchSpec::grep(VfsPath::root(), req, Budgets::default()).unwrap_err();
        assert!(
            err.to_string().starts_with("Invalid regex pattern: "),
            "{err}"
        );
        assert_eq!(err.code(), "INVALID_PARAM");
    }
}
