//! The object tier's search with or without its index, and the self-check
//! that compares the two in the background (docs/search-index.md
//! § Self-check).
//!
//! The tier has no consistent view to run twice on: the bucket changes
//! under any walk, through any server. So a self-check runs three walks on
//! its own thread (low OS priority, at most one per tier): a scan, the
//! indexed run (learning nothing), and a scan again. It judges only when
//! both scans answer alike: a change that fell between them shows as a
//! difference of the scans, and says nothing of the index. A change made
//! and undone between two walks of one check is the case it could misjudge
//! (the index then switches off, which costs speed, never an answer).

use super::ObjectBackend;
use super::{table, walk};
use crate::error::Result;
use crate::scope::Scope;
use crate::search::index::check::{CheckedTier, IndexUse, answer, end_walk, start_use};
use crate::search::{SearchPart, SearchRun, SearchSpec};

impl ObjectBackend {
    /// Searches `part` into `run`, using the namespace's index as `mode`
    /// says. Answers the outcome and, when the index narrowed the Grep,
    /// the namespace's index key.
    pub(super) fn search_with(
        &self,
        scope: &Scope,
        run: &SearchRun,
        part: &SearchPart,
        mode: IndexUse,
    ) -> (Result<()>, Option<String>) {
        let mut index = None;
        let walked = (|| {
            let ns = self.namespace(scope)?.to_owned();
            let root = &part.top;
            if let Some(file) = self.file(&ns, root)? {
                let entry = crate::backend::ordered::file_entry(root.clone(), &file.meta);
                let mut files = walk::Walk::new(self, ns, part, None)?.for_run(run);
                return crate::search::sorted::search_one(run, &mut files, entry);
            }
            self.lookup_missing(&ns, root)?;
            // A Grep skips the files the index rules out at the version their
            // heads show: a change on any server gives its path a new version
            // in its head, so the index is exact across servers without a log
            // (docs/search-index.md § Freshness per tier).
            let owner = &scope.principal.owner;
            index = start_use(&self.index, (&ns, owner), &run.spec().kind, mode);
            let narrowed = index.as_mut().filter(|grep| grep.narrows());
            let held = narrowed.as_ref().and_then(|grep| self.held_table(grep));
            let fresh = self.fresh_catalog(&ns, held.as_ref().map(|t| t.at()))?;
            // A narrowed Grep walks the namespace's path table, so only its
            // candidates' heads are read (docs/search-index.md § The object
            // tier's path table).
            if let (Some(fresh), Some(grep)) = (&fresh, narrowed)
                && let Some(table) = self.path_table((&ns, &part.top), fresh, held, grep)?
            {
                let mut files = table::TableWalk::new(self, &ns, &fresh.keys, &table);
                return crate::search::bulk::walk_table(run, &mut files, part, grep, &table);
            }
            let catalog = fresh.map(|fresh| fresh.keys);
            let mut files = walk::Walk::new(self, ns, part, catalog)?.for_run(run);
            crate::search::sorted::walk_indexed(run, &mut files, part, index.as_mut())
        })();
        end_walk(walked, index)
    }
}

impl CheckedTier for ObjectBackend {
    /// Runs `spec` over `part` as a scan, through the index, and as a scan
    /// again; answers what differs when both scans agree and the indexed
    /// run does not.
    fn self_check(&self, scope: &Scope, spec: SearchSpec, part: &SearchPart) -> Option<String> {
        let run_as = |mode| {
            answer(spec.clone(), |run| {
                self.search_with(scope, run, part, mode).0
            })
        };
        let before = run_as(IndexUse::Scan);
        let indexed = run_as(IndexUse::Check);
        let after = run_as(IndexUse::Scan);
        tracing::debug!(?before, ?indexed, ?after, "search index self-check");
        let conclusive = [&before, &indexed, &after]
            .iter()
            .all(|a| !a.inconclusive());
        if !conclusive || before != after || indexed == before {
            return None;
        }
        Some(format!(
            "indexed: {} lines, {:?}; scan: {} lines, {:?}",
            indexed.lines, indexed.end, before.lines, before.end
        ))
    }
}
