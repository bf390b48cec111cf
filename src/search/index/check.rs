//! What a self-check of the search index shares across tiers
//! (docs/search-index.md § Self-check): how a walk uses the index, and a
//! run's answer reduced to a digest, so that two runs can be compared
//! without keeping their hits.

use super::{IndexedGrep, Registry, lower_priority};
use crate::error::Result;
use crate::scope::Scope;
use crate::search::{
    AbortReason, EVENT_CHANNEL_CAPACITY, Hit, SearchEvent, SearchKind, SearchPart, SearchRun,
    SearchSpec, Summary,
};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

/// How a walk of a namespace uses its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexUse {
    /// As a request does: narrow, learn, merge.
    Request,
    /// As a self-check's indexed run: narrow, learn nothing.
    Check,
    /// Not at all: the plain scan.
    Scan,
}

/// Longest a self-check's own output waits for its reader (which only
/// hashes what it gets).
const CHECK_IDLE: Duration = Duration::from_secs(60);

/// What a run answered: a digest of its matching and context lines (with
/// their paths) and its summary (elapsed time zeroed), or the error it
/// ended with (its numbers left out: they hold the elapsed time).
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    /// Matching and context lines.
    pub lines: u64,
    /// A hash of those lines and their paths.
    pub digest: u64,
    /// The summary, or the error the run ended with.
    pub end: std::result::Result<Summary, String>,
}

impl Answer {
    /// True when the run was cut short by time or its reader: such runs
    /// are not compared.
    pub fn inconclusive(&self) -> bool {
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
pub fn answer(spec: SearchSpec, walk: impl FnOnce(&SearchRun) -> Result<()>) -> Answer {
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

/// The index's part in a walk of `kind` as `mode` says: a Grep's only,
/// through the index of the namespace `key` (made by `owner`'s Grep when
/// new); `None` when indexing is off.
pub fn start_use(
    registry: &Registry,
    (key, owner): (&str, &str),
    kind: &SearchKind,
    mode: IndexUse,
) -> Option<IndexedGrep> {
    let SearchKind::Grep(grep) = kind else {
        return None;
    };
    let grep = match mode {
        IndexUse::Scan => return None,
        IndexUse::Request | IndexUse::Check => {
            IndexedGrep::start(registry.get(key, owner)?, registry.settings(), &grep.plan)
        }
    };
    Some(match mode {
        IndexUse::Check => grep.without_learning(),
        _ => grep,
    })
}

/// Ends `index`'s part in a walk that answered `walked`: the outcome, and
/// the namespace's index key when the index narrowed the Grep (a Grep a
/// self-check may then sample).
pub fn end_walk(walked: Result<()>, index: Option<IndexedGrep>) -> (Result<()>, Option<String>) {
    let narrowed = index
        .as_ref()
        .filter(|g| g.narrows())
        .map(|g| g.key().to_owned());
    if let Some(index) = index {
        index.finish();
    }
    match walked {
        Ok(()) => (Ok(()), narrowed),
        Err(err) => (Err(err), None),
    }
}

/// A tier whose narrowed Greps a self-check can run again in the
/// background; a clone shares the tier's state.
pub trait CheckedTier: Clone + Send + 'static {
    /// What differs between `spec` over `part` run through the index and
    /// run as a scan, if anything.
    fn self_check(&self, scope: &Scope, spec: SearchSpec, part: &SearchPart) -> Option<String>;
}

/// Runs `tier`'s self-check of the Grep `spec` over `part` on a thread of
/// its own at low priority, when the sample picks this Grep of the index
/// of `key` and no other check of `registry` runs; its answer goes to
/// [`Registry::checked`]. The check holds nothing of the request.
pub fn spawn_check<T: CheckedTier>(
    tier: &T,
    (registry, key): (&Arc<Registry>, String),
    (scope, spec, part): (&Scope, &SearchSpec, &SearchPart),
) {
    if !registry.start_check() {
        return;
    }
    let (tier, of_thread, key_of_thread) = (tier.clone(), registry.clone(), key.clone());
    let (scope, spec, part) = (scope.clone(), spec.clone(), part.clone());
    let spawned = std::thread::Builder::new()
        .name("search-index-check".into())
        .spawn(move || {
            lower_priority();
            of_thread.checked(&key_of_thread, tier.self_check(&scope, spec, &part));
        });
    if let Err(err) = spawned {
        tracing::warn!(%err, "could not start a search index self-check");
        registry.checked(&key, None);
    }
}
