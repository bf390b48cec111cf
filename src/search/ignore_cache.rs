//! Compiled ignore files, shared by every search and keyed by their text.
//!
//! Compiling a `.gitignore` builds a glob set and its regexes (a DFA each);
//! over the cargo registry's 115 ignore files that was 7% of a Glob's CPU,
//! paid again on every search although the files rarely change. The key is
//! the file's whole text and the rules are matched relative to the file's
//! directory (the matcher's root is `.`), so an entry is a pure function of
//! its key: a changed file is a different key, never a stale hit, and
//! identical files (`/target` in many crates) share one entry.
//!
//! Bounded by [`MAX_ENTRIES`]: when full it is emptied and refills with what
//! searches use next, which keeps memory bounded without tracking recency.

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// Most distinct ignore-file texts kept compiled.
pub const MAX_ENTRIES: usize = 1024;

/// One ignore file's rules, compiled.
pub struct Compiled {
    /// The matcher, `None` when no rule could be compiled into one.
    pub matcher: Option<Gitignore>,
    /// Why rules were skipped, one message per problem.
    pub errors: Vec<String>,
}

static CACHE: LazyLock<Mutex<HashMap<String, Arc<Compiled>>>> = LazyLock::new(Default::default);

/// The compiled rules of an ignore file whose content is `text`.
pub fn compiled(text: String) -> Arc<Compiled> {
    let lock = || CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(hit) = lock().get(&text) {
        return hit.clone();
    }
    // Compiled outside the lock: two searches may both compile a new file
    // once, which is cheaper than making every search wait for one.
    let compiled = Arc::new(compile(&text));
    let mut cache = lock();
    if cache.len() >= MAX_ENTRIES {
        cache.clear();
    }
    cache.insert(text, compiled.clone());
    compiled
}

fn compile(text: &str) -> Compiled {
    let mut errors = Vec::new();
    let mut builder = GitignoreBuilder::new(".");
    for line in text.lines() {
        if let Err(e) = builder.add_line(None, line) {
            errors.push(format!("ignore rule {line:?} skipped: {e}"));
        }
    }
    let matcher = builder.build().map_err(|e| errors.push(e.to_string())).ok();
    Compiled { matcher, errors }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_texts_share_one_entry_and_changed_texts_do_not() {
        let a = compiled("*.log\n".into());
        let b = compiled("*.log\n".into());
        assert!(Arc::ptr_eq(&a, &b));
        let c = compiled("*.log\n!keep.log\n".into());
        assert!(!Arc::ptr_eq(&a, &c));
        let m = c.matcher.as_ref().unwrap();
        assert!(m.matched("keep.log", false).is_whitelist());
        assert!(m.matched("x/a.log", false).is_ignore());
    }

    #[test]
    fn bad_rules_are_reported_and_the_rest_apply() {
        let c = compiled("x[z-a]\n*.tmp\n".into());
        assert_eq!(c.errors.len(), 1, "{:?}", c.errors);
        assert!(c.errors[0].contains("x[z-a]"));
        assert!(
            c.matcher
                .as_ref()
                .unwrap()
                .matched("b.tmp", false)
                .is_ignore()
        );
    }
}
