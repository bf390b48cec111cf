//! What a server knows of a namespace's files between searches
//! (docs/object-storage.md § Warm searches): every head key that may hold a
//! file and the ETag it was last seen at, kept fresh from the change logs.
//! A repeated search then asks the store only what changed (one listing of
//! the logs and one per log) instead of listing every key, and scans the
//! heads and blobs its cache still holds.
//!
//! Freshness: every change writes its log record before its head's put
//! (`log`), so a search that starts after a change was acknowledged finds
//! the record, and reads that head again. A change's head is read at every
//! search for as long as the change may still be in flight (every call of
//! the tier gives up at the mount's deadline; see `Catalogs::new`), and
//! then once more before its ETag is trusted. When the catalog is built
//! (one listing of the heads), the records written within that time before
//! are treated the same way, so a change that landed while the listing ran
//! is never missed. It relies on every server on the bucket keeping the
//! change log (docs/object-storage.md § Configuration).
//!
//! Every change of the keys is numbered, and the last [`MAX_JOURNAL`] are
//! remembered, so a search's path table is brought to the catalog by
//! reading again only the heads named since (`super::table`).
//!
//! Bounds: at most [`MAX_KEYS`] keys per namespace (past it the namespace
//! has no catalog and searches list the bucket) and [`MAX_CATALOGS`]
//! namespaces, the least recently searched dropped first.

use super::head::Class;
use super::keys::Space;
use super::log::{self, Intent};
use super::state::Store;
use crate::change::LogPosition;
use crate::error::Result;
use futures_util::StreamExt;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Most keys one namespace's catalog holds (about 150 bytes each).
pub const MAX_KEYS: usize = 200_000;
/// Most namespaces with a catalog.
pub const MAX_CATALOGS: usize = 16;
/// Most changes of a catalog's keys remembered for [`Fresh::changed`];
/// a path table further behind is taken again.
pub const MAX_JOURNAL: usize = 16_384;
/// Most keys a search must read the head of ([`Known::etag`] unknown) for
/// [`Fresh::changed`] to name them; past it, searches walk the catalog.
pub const MAX_UNSURE: usize = 4_096;

/// A change that may still be in flight.
#[derive(Clone, Debug)]
struct Unsettled {
    /// The ETag its head's put is conditional on (`None`: no head).
    expected: Option<String>,
    /// When it was recorded, ns since the epoch.
    time: u64,
}

/// A head key's entry: the ETag last seen (`None`: read it at the next
/// search) and a generation that grows whenever a change marks it.
#[derive(Clone, Debug)]
pub struct Known {
    /// The ETag last seen.
    pub etag: Option<String>,
    /// Bumped by every change recorded for the key.
    pub generation: u64,
}

/// The keys of a namespace as one search sees them.
pub type Snapshot = Arc<BTreeMap<String, Known>>;

/// A catalog brought up to date for one search.
pub struct Fresh {
    /// Its keys.
    pub keys: Snapshot,
    /// Where its numbered changes stand: a catalog built anew has another
    /// epoch.
    pub at: LogPosition,
    /// Every key changed after the position the search asked about (up to
    /// [`Fresh::at`]), and every key whose head must be read (its ETag
    /// unknown): all a path table at that position needs read again.
    /// `None` when that is not known (another epoch, changes forgotten,
    /// too many heads to read).
    pub changed: Option<Vec<String>>,
}

/// One namespace's catalog.
#[derive(Default)]
struct Catalog {
    /// Head keys that may hold a file (deleted ones are dropped).
    keys: Snapshot,
    /// Log → the last record applied with none missing before it.
    positions: BTreeMap<u64, u64>,
    /// Head keys of changes that may still be in flight: the ETag their
    /// latest change's put is conditional on, and when it was recorded
    /// (ns). Read at every search until its ETag is another (the change
    /// landed, or never will: a later change of the key has a record of its
    /// own) or the record is old.
    unsettled: HashMap<String, Unsettled>,
    /// When it was last used (a counter).
    used: u64,
    /// Too many keys: searches of the namespace list the bucket.
    too_big: bool,
    built: bool,
    generation: u64,
    /// Numbers the catalog's builds: see [`Fresh::at`].
    epoch: u64,
    /// The number of the last change of `keys` in this epoch.
    seq: u64,
    /// The last changes of `keys` (at most [`MAX_JOURNAL`]), by number.
    journal: VecDeque<(u64, String)>,
    /// Keys whose ETag is unknown, so their heads are read at every search.
    unsure: BTreeSet<String>,
}

impl Catalog {
    /// Numbers a change of `key` in `keys` (already made).
    fn note(&mut self, key: &str) {
        self.seq += 1;
        if self.journal.len() == MAX_JOURNAL {
            self.journal.pop_front();
        }
        self.journal.push_back((self.seq, key.to_owned()));
        match self.keys.get(key) {
            Some(Known { etag: None, .. }) => self.unsure.insert(key.to_owned()),
            _ => self.unsure.remove(key),
        };
    }

    /// The keys changed after `since` and the keys whose ETag is unknown
    /// (see [`Fresh::changed`]).
    fn changed_since(&self, since: LogPosition) -> Option<Vec<String>> {
        if since.epoch != self.epoch || since.seq > self.seq || self.unsure.len() > MAX_UNSURE {
            return None;
        }
        let from = self.journal.partition_point(|(seq, _)| *seq <= since.seq);
        // The change right after `since` must still be remembered.
        let forgotten = since.seq < self.seq
            && self
                .journal
                .get(from)
                .is_none_or(|(seq, _)| *seq != since.seq + 1);
        if forgotten {
            return None;
        }
        let mut keys: BTreeSet<&String> = self.unsure.iter().collect();
        keys.extend(self.journal.range(from..).map(|(_, key)| key));
        Some(keys.into_iter().cloned().collect())
    }
}

/// Epochs of every catalog this process builds: never one twice.
static EPOCHS: AtomicU64 = AtomicU64::new(1);

/// Every namespace's catalog on one server.
pub struct Catalogs {
    by_ns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Catalog>>>>,
    clock: std::sync::atomic::AtomicU64,
    /// The longest a change can be in flight between its record and its
    /// head's put (the mount's call deadline and one request's).
    in_flight: Duration,
}

impl Catalogs {
    /// No catalogs yet; changes finish within `in_flight`.
    pub fn new(in_flight: Duration) -> Catalogs {
        Catalogs {
            by_ns: Mutex::new(HashMap::new()),
            clock: std::sync::atomic::AtomicU64::new(0),
            in_flight,
        }
    }

    fn catalog(&self, ns: &str) -> Arc<tokio::sync::Mutex<Catalog>> {
        let mut by_ns = self.by_ns.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = by_ns.get(ns) {
            return found.clone();
        }
        if by_ns.len() >= MAX_CATALOGS {
            // Drop the least recently used (one that is not busy).
            let oldest = by_ns
                .iter()
                .filter_map(|(k, c)| c.try_lock().ok().map(|c| (c.used, k.clone())))
                .min()
                .map(|(_, k)| k);
            if let Some(oldest) = oldest {
                by_ns.remove(&oldest);
            }
        }
        let fresh = Arc::new(tokio::sync::Mutex::new(Catalog::default()));
        by_ns.insert(ns.to_owned(), fresh.clone());
        fresh
    }

    /// The keys of `ns` brought up to date with the change logs, with
    /// what changed after `since`; `None` when the namespace has too many
    /// keys for a catalog (then search by listing).
    pub async fn fresh(
        &self,
        store: &Store,
        ns: &str,
        since: Option<LogPosition>,
    ) -> Result<Option<Fresh>> {
        let catalog = self.catalog(ns);
        let mut catalog = catalog.lock().await;
        catalog.used = self
            .clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if catalog.too_big {
            return Ok(None);
        }
        if !catalog.built && !self.build(&mut catalog, store, ns).await? {
            return Ok(None);
        }
        catch_up(&mut catalog, store, ns).await?;
        // Changes older than the longest flight have landed or never will.
        let in_flight = self.in_flight.as_nanos() as u64;
        let now = log::nanos_now();
        catalog
            .unsettled
            .retain(|_, u| now.saturating_sub(u.time) < in_flight);
        let at = LogPosition {
            epoch: catalog.epoch,
            seq: catalog.seq,
        };
        Ok(Some(Fresh {
            keys: catalog.keys.clone(),
            at,
            changed: since.and_then(|since| catalog.changed_since(since)),
        }))
    }

    /// Remembers the ETag a search read for `key` (seen at `generation`),
    /// unless a change marked the key since, or the change marked may still
    /// land (the head still has the ETag that change expects).
    pub fn learn(&self, ns: &str, key: &str, generation: u64, etag: Option<String>) {
        let catalog = self.catalog(ns);
        let Ok(mut catalog) = catalog.try_lock() else {
            // Being refreshed: the next search reads the head again.
            return;
        };
        if let Some(unsettled) = catalog.unsettled.get(key) {
            if unsettled.expected == etag {
                return;
            }
            catalog.unsettled.remove(key);
        }
        let keys = Arc::make_mut(&mut catalog.keys);
        let changed = match (keys.get_mut(key), etag) {
            (Some(known), Some(etag)) if known.generation == generation => {
                let changed = known.etag.as_ref() != Some(&etag);
                known.etag = Some(etag);
                changed
            }
            (Some(known), None) if known.generation == generation => {
                keys.remove(key);
                true
            }
            _ => false,
        };
        if changed {
            catalog.note(key);
        }
    }

    /// Lists every head of `ns` once: false when there are too many.
    async fn build(&self, catalog: &mut Catalog, store: &Store, ns: &str) -> Result<bool> {
        // The logs' positions first: every change recorded after them is
        // applied by the next catch-up; those recorded shortly before (they
        // may land while the listing runs) are read at every search until
        // decided.
        let since = log::nanos_now().saturating_sub(self.in_flight.as_nanos() as u64);
        for run in log::logs(store, ns).await? {
            let last = log::last_seq(store, ns, run).await?;
            catalog.positions.insert(run, last);
            let first = log::first_since(store, ns, run, since, last).await?;
            let mut after = first.saturating_sub(1);
            while after < last {
                let page = log::read_page(store, ns, run, after).await?;
                let Some((at, _)) = page.last() else {
                    break;
                };
                after = at.seq;
                for (_, intent) in page.into_iter().filter(|(at, _)| at.seq <= last) {
                    mark(catalog, store, ns, intent)?;
                }
            }
        }
        let prefix = store.keys.space(ns, Space::Heads)?;
        let mut listing = store.client.list_after(&prefix, None)?;
        let mut keys = BTreeMap::clone(&catalog.keys);
        while let Some(meta) = listing.next().await {
            let meta = meta?;
            if Class::of_size(meta.size) == Class::NoFile {
                continue;
            }
            let key = meta.location.to_string();
            let etag = match Class::of_size(meta.size) {
                // A move in flight: resolved when read.
                Class::Pending => None,
                _ => meta.e_tag,
            };
            let generation = keys.get(&key).map_or(0, |k| k.generation);
            let known = keys.entry(key.clone()).or_insert(Known {
                etag: None,
                generation,
            });
            // A change recorded before the listing whose put had landed
            // when the key was listed (its ETag is another than the one it
            // expected) is settled: the listing shows it.
            let settled = catalog
                .unsettled
                .get(&key)
                .is_none_or(|u| etag.is_some() && u.expected != etag);
            if settled {
                catalog.unsettled.remove(&key);
                known.etag = etag;
            }
            if keys.len() > MAX_KEYS {
                catalog.too_big = true;
                catalog.keys = Arc::default();
                catalog.unsettled.clear();
                return Ok(false);
            }
        }
        catalog.unsure = keys
            .iter()
            .filter(|(_, known)| known.etag.is_none())
            .map(|(key, _)| key.clone())
            .collect();
        catalog.keys = Arc::new(keys);
        catalog.built = true;
        catalog.epoch = EPOCHS.fetch_add(1, Relaxed);
        catalog.seq = 0;
        catalog.journal.clear();
        Ok(true)
    }
}

/// Marks the head of the change `intent` to be read at every search while
/// the change may be in flight, and once more after.
fn mark(catalog: &mut Catalog, store: &Store, ns: &str, intent: Intent) -> Result<()> {
    if intent.kind.is_none() {
        return Ok(());
    }
    let key = store.keys.head(ns, &intent.path)?;
    catalog.generation += 1;
    let generation = catalog.generation;
    Arc::make_mut(&mut catalog.keys).insert(
        key.clone(),
        Known {
            etag: None,
            generation,
        },
    );
    catalog.note(&key);
    let unsettled = Unsettled {
        expected: intent.expected,
        time: intent.time,
    };
    catalog.unsettled.insert(key, unsettled);
    Ok(())
}

/// Applies every record written since the catalog's positions (and after
/// a gap, the records beyond it, again at the next catch-up).
async fn catch_up(catalog: &mut Catalog, store: &Store, ns: &str) -> Result<()> {
    for run in log::logs(store, ns).await? {
        let known = catalog.positions.get(&run).copied();
        let mut position = known.unwrap_or(0);
        let mut after = position;
        loop {
            let page = log::read_page(store, ns, run, after).await?;
            let Some((last, _)) = page.last() else {
                break;
            };
            after = last.seq;
            for (at, intent) in page {
                if known.is_none() && position == 0 {
                    // A log begun since the catalog was built: from its
                    // oldest record.
                    position = at.seq - 1;
                }
                if at.seq == position + 1 {
                    position = at.seq;
                }
                mark(catalog, store, ns, intent)?;
            }
        }
        catalog.positions.insert(run, position);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A built catalog of epoch 7 holding `keys` (`true`: ETag known).
    fn catalog(keys: &[(&str, bool)]) -> Catalog {
        let mut catalog = Catalog {
            epoch: 7,
            built: true,
            ..Catalog::default()
        };
        for (key, known) in keys {
            set(&mut catalog, key, Some(*known));
        }
        catalog
    }

    /// Sets `key` (`None`: removes it) and numbers the change.
    fn set(catalog: &mut Catalog, key: &str, known: Option<bool>) {
        let keys = Arc::make_mut(&mut catalog.keys);
        match known {
            Some(known) => {
                let etag = known.then(|| format!("e-{key}"));
                keys.insert(
                    key.into(),
                    Known {
                        etag,
                        generation: 0,
                    },
                );
            }
            None => {
                keys.remove(key);
            }
        }
        catalog.note(key);
    }

    fn at(seq: u64) -> LogPosition {
        LogPosition { epoch: 7, seq }
    }

    #[test]
    fn changed_since_names_each_key_changed_after_and_every_unsure_one() {
        let mut c = catalog(&[("a", true), ("b", false), ("c", true)]);
        assert_eq!(c.seq, 3);
        let names = |c: &Catalog, seq| c.changed_since(at(seq));
        assert_eq!(names(&c, 3), Some(vec!["b".to_owned()]));
        assert_eq!(names(&c, 2), Some(vec!["b".to_owned(), "c".to_owned()]));
        set(&mut c, "b", Some(true));
        set(&mut c, "a", None);
        // b was learned, a removed: both named after 3; b no longer unsure.
        assert_eq!(names(&c, 3), Some(vec!["a".to_owned(), "b".to_owned()]));
        assert_eq!(names(&c, 5), Some(vec![]));
        // Another epoch, or a position the catalog never reached.
        assert_eq!(c.changed_since(LogPosition { epoch: 8, seq: 5 }), None);
        assert_eq!(names(&c, 6), None);
    }

    #[test]
    fn a_position_whose_changes_are_forgotten_has_none() {
        let mut c = catalog(&[]);
        for i in 0..MAX_JOURNAL + 2 {
            set(&mut c, &format!("k{}", i % 3), Some(true));
        }
        let seq = c.seq;
        assert_eq!(
            c.changed_since(at(seq - MAX_JOURNAL as u64))
                .map(|k| k.len()),
            Some(3)
        );
        assert_eq!(c.changed_since(at(seq - MAX_JOURNAL as u64 - 1)), None);
        assert_eq!(c.changed_since(at(0)), None);
    }

    #[test]
    fn too_many_unsure_keys_have_none() {
        let keys: Vec<String> = (0..=MAX_UNSURE).map(|i| format!("k{i:05}")).collect();
        let unsure: Vec<(&str, bool)> = keys.iter().map(|k| (k.as_str(), false)).collect();
        let mut c = catalog(&unsure);
        let seq = c.seq;
        assert_eq!(c.changed_since(at(seq)), None);
        set(&mut c, "k00000", Some(true));
        // The 4,096 still unsure, and the one learned since.
        assert_eq!(
            c.changed_since(at(seq)).map(|k| k.len()),
            Some(MAX_UNSURE + 1)
        );
    }
}
