//! The object tier's per-server content cache: objects by key and ETag,
//! bounded in bytes, least recently used first out.
//!
//! A head's ETag is unique per version (its body holds the version, so
//! identical content under two versions still differs), and content blobs
//! never change once written; so what a listing says (key and ETag) names
//! exactly one body, and a cached body is valid as long as the listing shows
//! the same ETag. A repeated search or listing then costs its list pages and
//! a local scan. Reads of one file still ask the store (`If-None-Match` with
//! the cached ETag): a deleted file must be gone for every server.

use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// Default bytes the cache holds.
pub const DEFAULT_CACHE_BYTES: u64 = 256 << 20;

/// Bytes counted for each entry beyond its key, ETag and body: the map slot,
/// the order slot and the allocations' headers.
const ENTRY_OVERHEAD: u64 = 96;

struct Entry {
    etag: String,
    body: Bytes,
    /// When it was last used (a counter).
    used: u64,
}

impl Entry {
    /// The bytes `key` with this entry holds: the key twice (map and order),
    /// the ETag, the body and the fixed overhead, so the bound holds for
    /// many small heads with long keys as well as for large bodies.
    fn cost(&self, key: &str) -> u64 {
        2 * key.len() as u64 + self.etag.len() as u64 + self.body.len() as u64 + ENTRY_OVERHEAD
    }
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    /// `used` → key: the least recently used first.
    order: BTreeMap<u64, String>,
    clock: u64,
    bytes: u64,
}

/// Bodies by key and ETag, at most `max_bytes` of them.
pub struct ContentCache {
    max_bytes: u64,
    inner: Mutex<Inner>,
}

impl ContentCache {
    /// An empty cache holding at most `max_bytes` (0: none).
    pub fn new(max_bytes: u64) -> ContentCache {
        ContentCache {
            max_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every critical section leaves the maps consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The body of `key` when the cache holds it at `etag`.
    pub fn get(&self, key: &str, etag: &str) -> Option<Bytes> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        let entry = inner.entries.get_mut(key).filter(|e| e.etag == etag)?;
        let (before, body) = (entry.used, entry.body.clone());
        entry.used = now;
        inner.order.remove(&before);
        inner.order.insert(now, key.to_owned());
        Some(body)
    }

    /// The ETag the cache holds `key` at, if any.
    pub fn etag(&self, key: &str) -> Option<String> {
        self.lock().entries.get(key).map(|e| e.etag.clone())
    }

    /// The ETag and body the cache holds `key` at, if any, taken together
    /// (the body cannot be dropped between the two).
    pub fn current(&self, key: &str) -> Option<(String, Bytes)> {
        let etag = self.etag(key)?;
        let body = self.get(key, &etag)?;
        Some((etag, body))
    }

    /// Keeps `body` as `key` at `etag`, dropping the least recently used
    /// entries to stay within the bound (an entry costing over a quarter of
    /// it is not kept).
    pub fn put(&self, key: &str, etag: &str, body: Bytes) {
        let entry = Entry {
            etag: etag.to_owned(),
            body,
            used: 0,
        };
        let cost = entry.cost(key);
        if cost > self.max_bytes / 4 {
            return;
        }
        let mut inner = self.lock();
        inner.clock += 1;
        let used = inner.clock;
        if let Some(old) = inner
            .entries
            .insert(key.to_owned(), Entry { used, ..entry })
        {
            inner.order.remove(&old.used);
            inner.bytes -= old.cost(key);
        }
        inner.order.insert(used, key.to_owned());
        inner.bytes += cost;
        while inner.bytes > self.max_bytes {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            if let Some(gone) = inner.entries.remove(&oldest) {
                inner.bytes -= gone.cost(&oldest);
            }
        }
    }

    /// Forgets `key` (its file was deleted or replaced here).
    pub fn remove(&self, key: &str) {
        let mut inner = self.lock();
        if let Some(gone) = inner.entries.remove(key) {
            inner.order.remove(&gone.used);
            inner.bytes -= gone.cost(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_found_by_key_and_etag_and_the_oldest_go_first() {
        let cache = ContentCache::new(2000);
        cache.put("a", "e1", Bytes::from(vec![1; 200]));
        cache.put("b", "e1", Bytes::from(vec![2; 200]));
        assert_eq!(cache.get("a", "e1").unwrap().len(), 200);
        assert!(cache.get("a", "e2").is_none());
        for i in 0..5 {
            cache.put(&format!("c{i}"), "e", Bytes::from(vec![3; 200]));
        }
        // "a" was used after "b": "b" went first.
        assert!(cache.get("b", "e1").is_none());
        assert!(cache.get("c4", "e").is_some());
        cache.put("big", "e", Bytes::from(vec![0; 500]));
        assert!(
            cache.get("big", "e").is_none(),
            "over a quarter of the bound"
        );
        cache.remove("c4");
        assert!(cache.etag("c4").is_none());
        assert!(cache.lock().bytes <= 2000);
    }

    #[test]
    fn long_keys_count_against_the_bound() {
        let cache = ContentCache::new(10_000);
        for i in 0..1000 {
            let key = format!("{i:04}{}", "k".repeat(500));
            cache.put(&key, "etag", Bytes::from_static(b"x"));
        }
        let inner = cache.lock();
        assert!(inner.bytes <= 10_000);
        assert!(inner.entries.len() <= 10, "{} entries", inner.entries.len());
    }
}
