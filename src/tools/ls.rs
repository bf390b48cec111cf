//! The LS tool (docs/contract.md § LS): one directory level, filtered, sorted, paged.
//!
//! Flow: resolve the path against the project root, check the `list` grant
//! (or, like the Filesystem service's ListInfo, the granted prefixes below
//! it), one `Backend::list` on a blocking thread, then filter (hidden names and
//! the default ignore list of docs/contract.md § LS unless `include_hidden`; the caller's
//! `ignore` globs), sort (directories and links to directories first, then by
//! name ignoring case) and cut the page `[offset, offset + limit)`.
//!
//! Errors (docs/contract.md § LS): NOT_FOUND "Path '{path}' does not exist.",
//! ACCESS_DENIED "Access denied. Path must be within the project root." or
//! "Permission denied accessing '{path}'.", INVALID_PARAM "'{path}' is a file,
//! not a directory. Use 'Read' tool to view its content." or "offset/limit/ignore
//! must be valid types.", INTERNAL_ERROR "Failed to list directory - {error}".
//!
//! Beyond that contract, the text says how many entries the hidden/ignore rules
//! left out (docs/contract.md § Glob and Grep: nothing is hidden silently).

use super::args::Args;
use super::params::{Param, Params};
use super::{Call, Object, Outcome, Status, ToolError};
use crate::entry::{Entry, EntryKind};
use crate::error::Error;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde_json::json;
use std::fmt::Write as _;
use std::sync::LazyLock;

/// The LS tool's description (docs/contract.md § LS).
pub const DESCRIPTION: &str = "List files and directories in a given path with pagination and \
filters. Directories come first (shown with a trailing '/', links with '@'), then files, each \
sorted by name. Hidden entries and build/VCS directories (.git, node_modules, target, dist, ...) \
are left out unless include_hidden is true. Use offset to page through large directories; use \
Glob to find files by name pattern across a tree.";

/// Most entries one call returns (docs/contract.md § LS).
pub const MAX_LIMIT: i64 = 200;
/// Entries returned when `limit` is not given (docs/contract.md § LS).
pub const DEFAULT_LIMIT: i64 = 100;

/// The default ignore list (docs/contract.md § LS): skipped unless `include_hidden` (which also shows names
/// starting with `.`). Differs from the Glob list (docs/contract.md § Glob and Grep), on purpose.
pub const DEFAULT_IGNORED: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    "node_modules",
    "target",
    "build",
    "dist",
    ".idea",
    ".vscode",
    ".DS_Store",
    "venv",
    ".venv",
];

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::optional(
            "path",
            json!({"type": "string", "description": "Directory path to list (relative to project root or absolute within it).", "default": "."}),
        ),
        Param::optional(
            "offset",
            json!({"type": "integer", "description": "Pagination start index (>=0).", "default": 0, "minimum": 0}),
        ),
        Param::optional(
            "limit",
            json!({"type": "integer", "description": "Max items to return (1-200).", "default": DEFAULT_LIMIT, "minimum": 1, "maximum": MAX_LIMIT}),
        ),
        Param::optional(
            "include_hidden",
            json!({"type": "boolean", "description": "Whether to include hidden files (starting with '.') and ignored directories (.git, node_modules, ...).", "default": false}),
        ),
        Param::optional(
            "ignore",
            json!({"type": ["array", "null"], "items": {"type": "string"}, "description": "Optional list of glob patterns to ignore (e.g. '*.log', 'dist/**').", "default": null}),
        ),
    ])
});
const INVALID_TYPES: &str = "offset/limit/ignore must be valid types.";
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// The caller's `ignore` patterns (docs/contract.md § LS): fnmatch-style, so `*` may
/// cross `/`; a pattern with `/` matches the path relative to the project
/// root or to the listed directory, one without matches the name; `**/foo`
/// also matches `foo` (globset does).
struct IgnoreSet {
    by_name: GlobSet,
    by_path: GlobSet,
}

impl IgnoreSet {
    fn new(patterns: &[&str]) -> Result<IgnoreSet, ToolError> {
        let (mut by_name, mut by_path) = (GlobSetBuilder::new(), GlobSetBuilder::new());
        for raw in patterns {
            let posix = raw.replace('\\', "/");
            let pattern = posix.trim_start_matches("./").trim_end_matches('/');
            let glob = Glob::new(pattern).map_err(|e| {
                ToolError::invalid(format!(
                    "{INVALID_TYPES} Bad ignore pattern '{}': {e}.",
                    crate::error::echo(raw)
                ))
            })?;
            if pattern.contains('/') {
                by_path.add(glob);
            } else {
                by_name.add(glob);
            }
        }
        let build = |b: GlobSetBuilder| {
            b.build()
                .map_err(|e| ToolError::invalid(format!("{INVALID_TYPES} {e}.")))
        };
        Ok(IgnoreSet {
            by_name: build(by_name)?,
            by_path: build(by_path)?,
        })
    }

    fn matches(&self, name: &str, from_root: &str, from_dir: &str) -> bool {
        self.by_name.is_match(name)
            || self.by_path.is_match(from_root)
            || self.by_path.is_match(from_dir)
    }
}

fn is_dir_like(e: &Entry) -> bool {
    matches!(
        e.kind,
        EntryKind::Directory | EntryKind::Symlink { to_directory: true }
    )
}

/// Runs LS.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("LS", raw, PARAMS.names())?;
    let types = |_| ToolError::invalid(INVALID_TYPES);
    let path_arg = args.string("path").map_err(types)?.unwrap_or(".");
    let offset = args.integer("offset").map_err(types)?.unwrap_or(0);
    let limit = args
        .integer("limit")
        .map_err(types)?
        .unwrap_or(DEFAULT_LIMIT);
    let include_hidden = args
        .boolean("include_hidden")
        .map_err(types)?
        .unwrap_or(false);
    let ignore = IgnoreSet::new(&args.strings("ignore").map_err(types)?)?;
    if offset < 0 {
        return Err(ToolError::invalid(format!(
            "{INVALID_TYPES} offset must be an integer >= 0, got {offset}."
        )));
    }
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ToolError::invalid(format!(
            "{INVALID_TYPES} limit must be an integer between 1 and {MAX_LIMIT}, got {limit}."
        )));
    }

    let dir = call.resolve(path_arg, OUTSIDE)?;
    let shown = call.display(&dir);
    let mut entries = call
        .service
        .list(&call.caller, dir.clone())
        .await
        .map_err(|e| {
            let message = match e.kind() {
                Error::NotFound(_) => format!("Path '{shown}' does not exist."),
                Error::NotDirectory(_) => format!(
                    "'{shown}' is a file, not a directory. Use 'Read' tool to view its content."
                ),
                Error::PermissionDenied(_) => format!("Permission denied accessing '{shown}'."),
                _ => format!("Failed to list directory - {e}"),
            };
            ToolError::new(e, message)
        })?;

    let before = entries.len();
    entries.retain(|e| {
        let name = e.path.name();
        include_hidden || !(name.starts_with('.') || DEFAULT_IGNORED.contains(&name))
    });
    let hidden = before - entries.len();
    let before = entries.len();
    entries.retain(|e| {
        let from_root = call.display(&e.path);
        let from_dir = e.path.relative_to(&dir).unwrap_or_default();
        !ignore.matches(e.path.name(), &from_root, from_dir)
    });
    let by_pattern = before - entries.len();
    entries.sort_by(|a, b| {
        let key = |e: &Entry| (!is_dir_like(e), e.path.name().to_lowercase());
        key(a)
            .cmp(&key(b))
            .then_with(|| a.path.name().cmp(b.path.name()))
    });

    let total = entries.len();
    let (dirs, links) = entries.iter().fold((0, 0), |(d, l), e| match e.kind {
        EntryKind::Directory => (d + 1, l),
        EntryKind::Symlink { .. } => (d, l + 1),
        EntryKind::File => (d, l),
    });
    let files = total - dirs - links;
    let start = offset as usize;
    if start > 0 && start >= total {
        return Err(ToolError::invalid(format!(
            "offset {start} is past the end of '{shown}', which has {total} items (valid offsets: 0 to {}).",
            total.saturating_sub(1)
        )));
    }
    let end = total.min(start + limit as usize);
    let page = &entries[start..end];
    let truncated = end < total;

    let mut text = format!(
        "Listed {} entries in '{shown}'\n(Total: {total} items - {dirs} dirs, {files} files, {links} links)",
        page.len()
    );
    if truncated {
        // Writing into a String cannot fail.
        let _ = write!(
            text,
            "\n[Truncated: Showing {start}-{end} of {total}. {} more items available.]\nUse offset={end} to view next page.",
            total - end
        );
    }
    if hidden > 0 {
        let _ = write!(
            text,
            "\n[Skipped: {hidden} hidden or ignored entries (.*, .git, node_modules, ...). Use include_hidden=true to show them.]"
        );
    }
    if by_pattern > 0 {
        let _ = write!(
            text,
            "\n[Skipped: {by_pattern} entries matching the ignore patterns.]"
        );
    }
    let mut listed = Vec::with_capacity(page.len());
    if !page.is_empty() {
        text.push('\n');
    }
    for e in page {
        let path = call.display(&e.path);
        let (kind, mark) = match e.kind {
            EntryKind::Directory => ("dir", "/"),
            EntryKind::Symlink { .. } => ("link", "@"),
            EntryKind::File => ("file", ""),
        };
        let _ = write!(text, "\n{path}{mark}");
        listed.push(json!({"path": path, "type": kind}));
    }
    Ok(Outcome {
        status: Status::partial_if(truncated),
        data: object! {"entries" => listed, "truncated" => truncated},
        text,
        stats: object! {
            "total_entries" => total,
            "dirs" => dirs,
            "files" => files,
            "links" => links,
            "returned" => page.len(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignore_patterns_match_names_and_paths_fnmatch_style() {
        let set = IgnoreSet::new(&["*.log", "dist/**", "**/cache"]).unwrap();
        assert!(set.matches("a.log", "x/a.log", "a.log"));
        assert!(set.matches("x", "dist/a/x", "a/x"));
        assert!(set.matches("cache", "cache", "cache"));
        assert!(!set.matches("main.rs", "src/main.rs", "main.rs"));
        assert!(IgnoreSet::new(&["a["]).is_err());
    }
}
