//! Names skipped by default, shared by every tier so all agree (seed 003 §5.3).

/// Directory (and file) names pruned unless `include_ignored` (seed 003 §5.3).
pub const DEFAULT_IGNORED_NAMES: &[&str] = &[
    ".DS_Store",
    ".cache",
    ".git",
    ".hg",
    ".idea",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    ".vscode",
    "__pycache__",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "target",
    "venv",
];

/// Why an entry is left out of a walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Its name starts with `.`.
    Hidden,
    /// An ignore rule names it.
    Ignored,
}

/// Decides whether a name is walked. Ignored wins over hidden so `.git` counts
/// as ignored (it is both).
pub fn skip_name(name: &str, include_hidden: bool, include_ignored: bool) -> Option<Skip> {
    if !include_ignored && DEFAULT_IGNORED_NAMES.binary_search(&name).is_ok() {
        Some(Skip::Ignored)
    } else if !include_hidden && name.starts_with('.') {
        Some(Skip::Hidden)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_is_sorted_for_binary_search() {
        assert!(DEFAULT_IGNORED_NAMES.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn ignored_beats_hidden() {
        assert_eq!(skip_name(".git", false, false), Some(Skip::Ignored));
        assert_eq!(skip_name(".git", false, true), Some(Skip::Hidden));
        assert_eq!(skip_name(".env", false, false), Some(Skip::Hidden));
        assert_eq!(skip_name("node_modules", true, false), Some(Skip::Ignored));
        assert_eq!(skip_name("src", false, false), None);
    }
}
