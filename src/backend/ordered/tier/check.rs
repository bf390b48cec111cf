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

use super::{IndexUse, OrderedTier};
use crate::backend::ordered::walk::Walk;
use crate::backend::ordered::{Engine, Frozen};
use crate::error::Result;
use crate::scope::Scope;
use crate::search::index::{IndexedGrep, lower_priority};
use crate::search::{
    AbortReason, EVENT_CHANNEL_CAPACITY, Hit, SearchEvent, SearchKind, SearchPart, SearchRun,
    SearchSpec, Summary,
};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

/// Longest a self-check's own output waits for its reader (which only
/// hashes what it gets).
const CHECK_IDLE: Duration = Duration::from_secs(60);

/// What a run answered: a digest of its matching and context lines (with
/// their paths) and its summary (elapsed time zeroed), or the error it
/// ended with (its numbers left out: they hold the elapsed time).
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    lines: u64,
    digest: u64,
    end: std::result::Result<Summary, String>,
}

impl Answer {
    /// True when the run was cut short by time or its reader: such runs
    /// are not compared.
    fn inconclusive(&self) -> bool {
        match &self.end {
            Ok(summary) => matches!(
                summary.aborted,
                Some(AbortReason::TimeLimit | AbortReason::Cancelled)
            ),
            Err(message) => message.contains(AbortReason::TimeLimit.as_str()),
        }
    }
}

/// Runs `walk` on a private run of `spec` and reads back what it sends.
fn answer(spec: SearchSpec, walk: impl FnOnce(&SearchRun) -> Result<()>) -> Answer {
    let (tx, mut rx) = tokio::sync::mpsc::channel(EVENT_CHANNEL_CAPACITY);
    std::thread::scope(|threads| {
        let reader = threads.spawn(move || {
            let mut hasher = DefaultHasher::new();
            let mut lines = 0;
            let mut end = Err("no summary".to_owned());
            while let Some(event) = rx.blocking_recv() {
                match event {
                    SearchEvent::Batch(hits) => {
                        for hit in hits {
                            if let Hit::File(file) = hit {
                                for line in &file.lines {
                                    (file.path.as_str(), file.modified).hash(&mut hasher);
                                    line.line_number.hash(&mut hasher);
                                    (&line.line, &line.matched, line.is_context).hash(&mut hasher);
                                    lines += 1;
                                }
                            }
                        }
                    }
                    SearchEvent::Summary(mut summary) => {
                        summary.elapsed = Duration::ZERO;
                        end = Ok(summary);
                    }
                    SearchEvent::Failed(err) => {
                        let message = err.to_string();
                        end = Err(message.chars().filter(|c| !c.is_ascii_digit()).collect());
                    }
                }
            }
            Answer {
                lines,
                digest: hasher.finish(),
                end,
            }
        });
        let run = SearchRun::new(spec, tx, CHECK_IDLE);
        let outcome = walk(&run);
        run.finish(outcome);
        reader.join().unwrap_or_else(|_| Answer {
            lines: 0,
            digest: 0,
            end: Err("the self-check's reader panicked".to_owned()),
        })
    })
}

impl<E: Engine> OrderedTier<E> {
    /// Searches `part` of the view `files` into `run`, using the
    /// namespace's index as `mode` says. Answers the outcome and, when the
    /// index narrowed the Grep, the namespace's index key.
    pub(super) fn search_view<F: Frozen>(
        &self,
        scope: &Scope,
        files: Option<&F>,
        run: &SearchRun,
        part: &SearchPart,
        mode: IndexUse,
    ) -> (Result<()>, Option<String>) {
        let root = &part.top;
        let walked = (|| {
            let rel = self.keys.rel(root)?;
            let root_entry = self.lookup(files, root, &rel)?;
            let Some(files) = files else {
                return Ok(None);
            };
            if !root_entry.is_directory() {
                let mut walk = Walk::new(&self.keys, files)?;
                return crate::search::sorted::search_one(run, &mut walk, root_entry)
                    .map(|()| None);
            }
            let mut index = match (&run.spec().kind, mode) {
                (SearchKind::Grep(grep), IndexUse::Request | IndexUse::Check) => self
                    .index
                    .get(&self.engine.index_key(scope), &scope.principal.owner)
                    .map(|index| IndexedGrep::start(index, self.index.settings(), &grep.plan))
                    .map(|g| match mode {
                        IndexUse::Check => g.without_learning(),
                        _ => g,
                    }),
                _ => None,
            };
            // A narrowed Grep walks the namespace's path table, so the files
            // it rules out are never sought in the tier.
            let table = match &mut index {
                Some(grep) if grep.narrows() => {
                    self.path_table(scope, files, (root, &rel), grep)?
                }
                _ => None,
            };
            let walked = match (table, index.as_mut()) {
                (Some(table), Some(grep)) => {
                    let mut walk = Walk::over_table(&self.keys, files, table.clone())?;
                    crate::search::bulk::walk_table(run, &mut walk, part, grep, &table)
                }
                (_, index) => {
                    let mut walk = Walk::new(&self.keys, files)?;
                    crate::search::sorted::walk_indexed(run, &mut walk, part, index)
                }
            };
            let narrowed = index
                .as_ref()
                .filter(|g| g.narrows())
                .map(|g| g.key().to_owned());
            if let Some(index) = index {
                index.finish();
            }
            walked.map(|()| narrowed)
        })();
        match walked {
            Ok(narrowed) => (Ok(()), narrowed),
            Err(err) => (Err(err), None),
        }
    }

    /// Starts a self-check of a Grep the index of `key` narrowed, when the
    /// sample picks it and no other check runs.
    pub(super) fn maybe_check(
        &self,
        scope: &Scope,
        spec: &SearchSpec,
        part: &SearchPart,
        key: String,
    ) {
        if !self.index.start_check() {
            return;
        }
        let (tier, scope, spec, part) = (self.clone(), scope.clone(), spec.clone(), part.clone());
        let key_of_thread = key.clone();
        let spawned = std::thread::Builder::new()
            .name("search-index-check".into())
            .spawn(move || {
                lower_priority();
                let mismatch = match tier.self_check(&scope, spec, &part) {
                    Ok(mismatch) => mismatch,
                    Err(err) => {
                        tracing::debug!(%err, "search index self-check could not run");
                        None
                    }
                };
                tier.index.checked(&key_of_thread, mismatch);
            });
        if let Err(err) = spawned {
            tracing::warn!(%err, "could not start a search index self-check");
            self.index.checked(&key, None);
        }
    }

    /// Runs `spec` over `part` twice on one view, through the index and as
    /// a scan; answers what differs, if anything.
    fn self_check(
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
