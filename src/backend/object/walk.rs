//! The object tier's search walk: a namespace's files in path order for
//! `search::sorted`, listed page by page from where the walk seeks (S3
//! start-after, never the whole bucket) with their heads fetched ahead of
//! it, many at once, so the store's latency is paid in parallel while
//! results still come out in path order.
//!
//! A listing task on the tier's runtime sends the keys of the part being
//! searched, in key order (which is path order, see `keys`), through a
//! bounded channel; the walk keeps up to [`AHEAD`] of them with their head
//! fetches in flight (at most [`FETCH_CONCURRENCY`] at once, through the
//! content cache: a head whose listed ETag is cached costs nothing). Names the
//! walk will prune (hidden, ignored) and every head of a paths-only Glob are
//! not fetched when the listing shows a live file's head (else the head
//! alone tells whether a file is there: a move in flight). A seek past what is listed starts a new listing there;
//! dropping the walk stops its tasks.
//!
//! Memory: [`AHEAD`] heads (at most 64 KiB of content each) and one page of
//! keys, whatever the namespace's size.

use super::bucket::Client;
use super::head::{Class, Head};
use super::keys::{Seek, Space};
use super::read::read_blob;
use super::state::listed_file;
use super::{FETCH_CONCURRENCY, ObjectBackend};
use crate::entry::{Entry, EntryKind};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::search::rules;
use crate::search::sorted::WholeFiles;
use crate::search::{SearchKind, SearchPart};
use bytes::Bytes;
use futures_util::StreamExt;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::UNIX_EPOCH;
use tokio::sync::{Semaphore, mpsc, oneshot};

/// Keys the walk keeps ahead of it, their heads being fetched.
const AHEAD: usize = 128;
/// Keys the listing task may send ahead of the walk.
const LISTED_AHEAD: usize = 1024;

/// A key as the listing gives it.
struct ListedKey {
    key: String,
    /// Its ETag as listed.
    etag: Option<String>,
    /// Its generation, when it comes from the catalog (`catalog`).
    generation: Option<u64>,
    /// The listing shows a live file's head: else (a move in flight, a
    /// state the catalog does not know) only its head tells whether a file
    /// is there, so it is fetched even where the walk prunes or wants no
    /// metadata: a pruned directory or a path of a paths-only Glob is then
    /// one that holds a file.
    live: bool,
}

/// One listed key and, when wanted, the fetch of its head.
struct Listed {
    key: String,
    path: VfsPath,
    head: Option<oneshot::Receiver<Result<Option<Head>>>>,
}

/// The walk of one search over an object mount.
pub struct Walk<'a> {
    tier: &'a ObjectBackend,
    ns: String,
    /// The key every head of the namespace starts with.
    prefix: String,
    /// Fetch heads (a Grep, or a Glob that shows metadata).
    fetch: bool,
    include_hidden: bool,
    include_ignored: bool,
    /// The walk's root, under which names are checked for pruning.
    root: VfsPath,
    /// Keys listed and not yet taken, in key order.
    ahead: VecDeque<Listed>,
    /// The running listing, and where it started.
    listing: Option<mpsc::Receiver<Result<ListedKey>>>,
    /// The listing ran out.
    listed_all: bool,
    /// Limits the head fetches in flight.
    fetches: Arc<Semaphore>,
    /// The head of the last entry returned, for `load`.
    current: Option<(VfsPath, Head)>,
    /// The namespace's keys from the catalog, kept fresh from the change
    /// logs (`None`: list the bucket).
    catalog: Option<super::catalog::Snapshot>,
}

impl<'a> Walk<'a> {
    /// A walk over the heads of `ns` for the search of `part`.
    pub fn new(
        tier: &'a ObjectBackend,
        ns: String,
        part: &SearchPart,
        catalog: Option<super::catalog::Snapshot>,
    ) -> Result<Walk<'a>> {
        let prefix = tier.keys.space(&ns, Space::Heads)?;
        Ok(Walk {
            tier,
            ns,
            prefix,
            fetch: true,
            include_hidden: false,
            include_ignored: false,
            root: part.top.clone(),
            ahead: VecDeque::new(),
            listing: None,
            listed_all: false,
            fetches: Arc::new(Semaphore::new(FETCH_CONCURRENCY)),
            current: None,
            catalog,
        })
    }

    /// Adopts the run's rules: what is pruned, whether heads are needed.
    pub fn for_run(mut self, run: &crate::search::SearchRun) -> Walk<'a> {
        let spec = run.spec();
        self.fetch = !matches!(&spec.kind, SearchKind::Glob(g) if g.paths_only);
        self.include_hidden = spec.include_hidden;
        self.include_ignored = spec.include_ignored;
        self.root = spec.root.clone();
        self
    }

    fn client(&self) -> Client {
        self.tier.bucket.client()
    }

    /// Starts listing the heads after `offset` (all when `None`): from the
    /// catalog when there is one, else from the bucket.
    fn start_listing(&mut self, offset: Option<String>) -> Result<()> {
        let (tx, rx) = mpsc::channel(LISTED_AHEAD);
        if let Some(catalog) = self.catalog.clone() {
            self.tier.bucket.spawn(async move {
                use std::ops::Bound::{Excluded, Unbounded};
                let from = offset.map_or(Unbounded, Excluded);
                for (key, known) in catalog.range::<String, _>((from, Unbounded)) {
                    // The catalog keeps an ETag only for a live head
                    // (`catalog`): a move in flight or a file gone has none.
                    let item = ListedKey {
                        key: key.clone(),
                        etag: known.etag.clone(),
                        generation: Some(known.generation),
                        live: known.etag.is_some(),
                    };
                    if tx.send(Ok(item)).await.is_err() {
                        break;
                    }
                }
                Ok(())
            })?;
        } else {
            let listing = self.client().list_after(&self.prefix, offset.as_deref())?;
            self.tier.bucket.spawn(async move {
                let mut listing = listing;
                while let Some(item) = listing.next().await {
                    // Deleted files' heads stay: their size says so (head::Class).
                    if let Ok(meta) = &item
                        && Class::of_size(meta.size) == Class::NoFile
                    {
                        continue;
                    }
                    let item = item.map(|meta| ListedKey {
                        key: meta.location.to_string(),
                        live: Class::of_size(meta.size) == Class::Live,
                        etag: meta.e_tag,
                        generation: None,
                    });
                    let failed = item.is_err();
                    if tx.send(item).await.is_err() || failed {
                        return Ok(());
                    }
                }
                Ok(())
            })?;
        }
        self.listing = Some(rx);
        self.ahead.clear();
        self.listed_all = false;
        Ok(())
    }

    /// True when the walk will prune a name on `path`'s way below the root
    /// (so its head is not worth fetching).
    fn pruned(&self, path: &VfsPath) -> bool {
        let Some(rel) = path.relative_to(&self.root) else {
            return false;
        };
        rel.split('/')
            .any(|name| rules::skip_name(name, self.include_hidden, self.include_ignored).is_some())
    }

    /// Takes listed keys into [`Walk::ahead`] (waiting for the listing only
    /// when nothing is ahead) and starts their fetches.
    fn fill(&mut self) -> Result<()> {
        while self.ahead.len() < AHEAD && !self.listed_all {
            let Some(listing) = self.listing.as_mut() else {
                self.listed_all = true;
                break;
            };
            let next = if self.ahead.is_empty() {
                listing.blocking_recv()
            } else {
                match listing.try_recv() {
                    Ok(item) => Some(item),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => None,
                }
            };
            let Some(listed) = next else {
                self.listed_all = true;
                break;
            };
            let ListedKey {
                key,
                etag,
                generation,
                live,
            } = listed?;
            let Some(path) = self.tier.keys.path(&self.ns, &key) else {
                continue;
            };
            let head = (!live || self.fetch && !self.pruned(&path))
                .then(|| self.start_fetch(&key, etag, generation));
            self.ahead.push_back(Listed { key, path, head });
        }
        Ok(())
    }

    /// Fetches the head at `key`, listed at `etag`, on the tier's runtime:
    /// from the cache when it holds that ETag (the file is unchanged since
    /// this server last read it), else from the store.
    fn start_fetch(
        &self,
        key: &str,
        etag: Option<String>,
        generation: Option<u64>,
    ) -> oneshot::Receiver<Result<Option<Head>>> {
        let (tx, rx) = oneshot::channel();
        let (store, key, ns) = (self.tier.store(), key.to_owned(), self.ns.clone());
        let catalogs = self.tier.catalogs.clone();
        let permits = self.fetches.clone();
        let fetch = async move {
            let Ok(_permit) = permits.acquire_owned().await else {
                return Ok(());
            };
            if tx.is_closed() {
                // The walk went away (or passed this key) while it waited.
                return Ok(());
            }
            let head = listed_file(&store, &ns, &key, etag.as_deref()).await;
            if let (Some(generation), Ok(file)) = (generation, &head) {
                // What the catalog did not know, for the next search (a
                // file a pending move resolved to has no ETag of its own).
                match file {
                    Some(file) if !file.etag.is_empty() => {
                        catalogs.learn(&ns, &key, generation, Some(file.etag.clone()))
                    }
                    Some(_) => {}
                    None => catalogs.learn(&ns, &key, generation, None),
                }
            }
            let _ = tx.send(head);
            Ok(())
        };
        if self.tier.bucket.spawn(fetch).is_err() {
            // The tier is shutting down: the receiver reports it.
        }
        rx
    }

    /// Drops the keys ahead that come before `seek`; restarts the listing
    /// when `seek` lies past what was listed.
    fn seek_to(&mut self, seek: Seek) -> Result<bool> {
        let (bound, inclusive) = match seek {
            Seek::End => return Ok(false),
            // The first head: every key of the namespace is at or after "".
            Seek::Start => (String::new(), true),
            Seek::After(key) => (key, false),
            Seek::AtOrAfter(key) => (key, true),
        };
        let before = |key: &str| {
            if inclusive {
                key < bound.as_str()
            } else {
                key <= bound.as_str()
            }
        };
        while self.ahead.front().is_some_and(|l| before(&l.key)) {
            self.ahead.pop_front();
        }
        if self.listing.is_none() && bound.is_empty() {
            self.start_listing(None)?;
        } else if self.listing.is_none() || (self.ahead.is_empty() && !self.listed_all) {
            // Nothing listed reaches the bound yet: list from there instead
            // of reading every key in between (a pruned directory).
            let offset = if inclusive {
                // S3 lists strictly after the offset; one byte less is
                // before the bound, and keys below it are dropped above.
                let mut offset = bound.clone();
                offset.pop();
                offset
            } else {
                bound.clone()
            };
            self.start_listing(Some(offset))?;
        }
        loop {
            self.fill()?;
            while self.ahead.front().is_some_and(|l| before(&l.key)) {
                self.ahead.pop_front();
            }
            if !self.ahead.is_empty() || self.listed_all {
                return Ok(true);
            }
        }
    }
}

impl WholeFiles for Walk<'_> {
    type Data<'w>
        = Bytes
    where
        Self: 'w;

    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
        let seek = match self.tier.keys.seek(&self.ns, from) {
            Ok(seek) => seek,
            Err(err) => return Some(Err(err)),
        };
        match self.seek_to(seek) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(err) => return Some(Err(err)),
        }
        loop {
            let listed = self.ahead.pop_front()?;
            if let Err(err) = self.fill() {
                return Some(Err(err));
            }
            let Some(fetch) = listed.head else {
                // Not fetched: a live head pruned by the walk, or of a
                // paths-only Glob.
                return Some(Ok(Entry {
                    path: listed.path,
                    kind: EntryKind::File,
                    size: 0,
                    modified: UNIX_EPOCH,
                    created: UNIX_EPOCH,
                    version: 0,
                    executable: false,
                }));
            };
            let head = match fetch.blocking_recv() {
                Ok(Ok(head)) => head,
                Ok(Err(err)) => return Some(Err(err)),
                Err(_) => return Some(Err(Error::Unavailable("the object tier stopped".into()))),
            };
            // Gone since it was listed: no file.
            let Some(head) = head else {
                continue;
            };
            let entry = crate::backend::ordered::file_entry(listed.path.clone(), &head.meta);
            self.current = Some((listed.path, head));
            return Some(Ok(entry));
        }
    }

    fn load(&mut self, entry: &Entry) -> Result<Bytes> {
        let head = match &self.current {
            Some((path, head)) if path == &entry.path => head.clone(),
            _ => self
                .tier
                .file(&self.ns, &entry.path)?
                .ok_or_else(|| Error::NotFound(entry.path.to_string()))?,
        };
        if let Some(inline) = head.inline(&entry.path)? {
            return Ok(inline);
        }
        let key = self.tier.keys.blob(&self.ns, &entry.path, head.meta.blob)?;
        let (client, cache) = (self.client(), self.tier.cache.clone());
        let (shown, version) = (entry.path.to_string(), head.meta.version);
        self.tier.run("reading a file's content", async move {
            read_blob(&client, &cache, &key, &shown, version).await
        })
    }
}
