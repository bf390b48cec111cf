//! A namespace's walk with or without its search index, and the self-check
//! that compares the two in the background (docs/search-index.md §
//! Self-check).
//!
//! Invariants: a self-check holds nothing of the request it samples: it
//! runs on its own thread (low OS priority, at most one per tier), on its
//! own consistent view of the namespace, into its own output. Both of its
//! runs read that one view, so they see the same files; only the Greps the
//! index narrowed are sampled. It keeps a digest of the hits, not the hits,
//! so its memory does not grow with them.

use super::OrderedTier;
use crate::backend::ordered::walk::Walk;
use crate::backend::ordered::{Engine, Frozen};
use crate::error::Result;
use crate::scope::Scope;
use crate::search::index::check::{CheckedTier, IndexUse, answer, end_walk, start_use};
use crate::search::{SearchPart, SearchRun, SearchSpec};

impl<E: Engine> OrderedTier<E> {
    /// Searches `part` of the view `files` into `run`, using the
    /// namespace's index as `mode` says. Answers the outcome and, when the
    /// index narrowed the Grep, the namespace's index key.
    pub(super) fn search_view<F: Frozen + Sync>(
        &self,
        scope: &Scope,
        files: Option<&F>,
        run: &SearchRun,
        part: &SearchPart,
        mode: IndexUse,
    ) -> (Result<()>, Option<String>) {
        let root = &part.top;
        let mut index = None;
        let walked = (|| {
            let rel = self.keys.rel(root)?;
            let root_entry = self.lookup(files, root, &rel)?;
            let Some(files) = files else {
                return Ok(());
            };
            if !root_entry.is_directory() {
                let mut walk = Walk::new(&self.keys, files)?;
                return crate::search::sorted::search_one(run, &mut walk, root_entry);
            }
            let key = self.engine.index_key(scope);
            let owner = &scope.principal.owner;
            index = start_use(&self.index, (&key, owner), &run.spec().kind, mode);
            // A narrowed Grep walks the namespace's path table, so the files
            // it rules out are never sought in the tier.
            let table = match &mut index {
                Some(grep) if grep.narrows() => {
                    self.path_table(scope, files, (root, &rel), grep)?
                }
                _ => None,
            };
            match (table, index.as_mut()) {
                (Some(table), Some(grep)) => {
                    let walk = Walk::over_table(&self.keys, files, table.clone())?;
                    crate::backend::ordered::walk::search_table(run, walk, part, grep, &table)
                }
                (_, index) => {
                    let mut walk = Walk::new(&self.keys, files)?;
                    crate::search::sorted::walk_indexed(run, &mut walk, part, index)
                }
            }
        })();
        end_walk(walked, index)
    }

    /// Runs `spec` over `part` twice on one view, through the index and as
    /// a scan; answers what differs, if anything.
    fn check_on_one_view(
        &self,
        scope: &Scope,
        spec: SearchSpec,
        part: &SearchPart,
    ) -> Result<Option<String>> {
        let rel = self.keys.rel(&part.top)?;
        self.engine.freeze(scope, &rel, |files| {
            let indexed = answer(spec.clone(), |run| {
                self.search_view(scope, files, run, part, IndexUse::Check).0
            });
            let scanned = answer(spec, |run| {
                self.search_view(scope, files, run, part, IndexUse::Scan).0
            });
            tracing::debug!(?indexed, ?scanned, "search index self-check");
            if indexed.inconclusive() || scanned.inconclusive() || indexed == scanned {
                return Ok(None);
            }
            Ok(Some(format!(
                "indexed: {} lines, {:?}; scan: {} lines, {:?}",
                indexed.lines, indexed.end, scanned.lines, scanned.end
            )))
        })
    }
}

impl<E: Engine> CheckedTier for OrderedTier<E> {
    fn self_check(&self, scope: &Scope, spec: SearchSpec, part: &SearchPart) -> Option<String> {
        self.check_on_one_view(scope, spec, part)
            .unwrap_or_else(|err| {
                tracing::debug!(%err, "search index self-check could not run");
                None
            })
    }
}
