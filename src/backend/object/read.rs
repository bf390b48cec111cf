//! Reads of the object tier: a file's content, a path's metadata, one
//! directory's listing (docs/object-storage.md § Reads and listings).
//!
//! A read is one conditional GET of the file's head (the cached body when
//! unchanged), plus its blob for a large file: the head's version and
//! content are one object's, so they always belong together. A pending
//! head (a Move in flight onto the path) costs one more read, of the move's
//! source, to learn whether the move committed.
//!
//! Heads are never removed, so listings pass over deleted files by the
//! size of their heads (a listing shows each key's size; see
//! `head::Class`), without fetching them. A directory exists while a live
//! file lies below it: a listing walks its keys in order and, at the first
//! live file inside a subdirectory, skips the rest of that subdirectory with
//! a new listing after it, so it costs one request per page of keys plus
//! one per subdirectory holding many keys.

use super::bucket::{Client, Page};
use super::head::{Class, Head};
use super::keys::Space;
use super::state::{Store, listed_file};
use super::{BLOB_PIECE_BYTES, FETCH_CONCURRENCY, ObjectBackend, TREE_PAGE};
use crate::backend::ChunkReader;
use crate::backend::ordered;
use crate::entry::Entry;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use bytes::Bytes;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

/// The first live file below `prefix` (a directory's key prefix), if any:
/// small listings first (a directory usually starts with a live file),
/// then pages of 1,000 past deleted ones.
pub async fn first_file_below(store: &Store, ns: &str, prefix: &str) -> Result<Option<Head>> {
    let mut after: Option<String> = None;
    let mut max_keys = 8;
    loop {
        let page = store
            .client
            .page(prefix, after.as_deref(), max_keys, false)
            .await?;
        for meta in &page.objects {
            let key = meta.location.to_string();
            if Class::of_size(meta.size) != Class::NoFile
                && let Some(file) = listed_file(store, ns, &key, meta.e_tag.as_deref()).await?
            {
                return Ok(Some(file));
            }
            after = Some(key);
        }
        if !page.truncated || page.objects.is_empty() {
            return Ok(None);
        }
        max_keys = 1000;
    }
}

/// One level of a directory: its subdirectories (by name) and its files'
/// listed keys and ETags, in key order.
async fn level(
    store: &Store,
    ns: &str,
    prefix: &str,
) -> Result<(Vec<String>, Vec<(String, Option<String>)>)> {
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    let mut after: Option<String> = None;
    loop {
        let page: Page = store
            .client
            .page(prefix, after.as_deref(), 1000, false)
            .await?;
        let mut skip_to = None;
        for meta in &page.objects {
            let key = meta.location.to_string();
            let class = Class::of_size(meta.size);
            let rel = &key[prefix.len().min(key.len())..];
            match rel.split_once('/') {
                Some((dir, _)) => {
                    let live = match class {
                        Class::Live => true,
                        Class::Pending => listed_file(store, ns, &key, meta.e_tag.as_deref())
                            .await?
                            .is_some(),
                        Class::NoFile => false,
                    };
                    if live {
                        dirs.push(dir.to_owned());
                        // Past everything below `dir` (its keys continue
                        // with `/` or `!`, below the escape byte `0`).
                        skip_to = Some(format!("{prefix}{dir}0"));
                        break;
                    }
                }
                None if class != Class::NoFile => files.push((key.clone(), meta.e_tag.clone())),
                None => {}
            }
            after = Some(key);
        }
        match skip_to {
            Some(seek) => after = Some(seek),
            None if !page.truncated || page.objects.is_empty() => return Ok((dirs, files)),
            None => {}
        }
    }
}

impl ObjectBackend {
    /// The whole content of the live file `head` of `path`: inline, or its
    /// blob.
    pub(super) fn content(&self, ns: &str, path: &VfsPath, head: &Head) -> Result<Bytes> {
        if let Some(inline) = head.inline(path)? {
            return Ok(inline);
        }
        let key = self.keys.blob(ns, path, head.meta.blob)?;
        let (client, cache) = (self.bucket.client(), self.cache.clone());
        let (shown, version) = (path.to_string(), head.meta.version);
        self.run("reading a file's content", async move {
            read_blob(&client, &cache, &key, &shown, version).await
        })
    }

    /// The live file at `path`, a pending move resolved (`None`: none).
    pub(super) fn file(&self, ns: &str, path: &VfsPath) -> Result<Option<Head>> {
        if path == &self.keys.mount {
            return Ok(None);
        }
        let key = self.keys.head(ns, path)?;
        let (store, ns) = (self.store(), ns.to_owned());
        let now = self.run("reading a file", async move { store.now(&ns, &key).await })?;
        Ok(now.file().cloned())
    }

    /// What `path`, which holds no live file, is: a directory (a live file
    /// below it, or the mount root) or nothing.
    pub(super) fn lookup_missing(&self, ns: &str, path: &VfsPath) -> Result<Entry> {
        if path == &self.keys.mount {
            return Ok(Entry::directory(path.clone(), UNIX_EPOCH));
        }
        let prefix = self.keys.below(ns, Space::Heads, path)?;
        let (store, ns) = (self.store(), ns.to_owned());
        let below = self.run("looking up a directory", async move {
            first_file_below(&store, &ns, &prefix).await
        })?;
        match below {
            Some(file) => Ok(Entry::directory(path.clone(), file.meta.modified_time())),
            None => Err(Error::NotFound(path.to_string())),
        }
    }

    /// Why `path`, which holds no live file, cannot be read as one.
    pub(super) fn not_a_file(&self, ns: &str, path: &VfsPath) -> Error {
        match self.lookup_missing(ns, path) {
            Ok(_) => Error::IsDirectory(path.to_string()),
            Err(e) => e,
        }
    }

    /// One directory's entries, sorted by path.
    pub(super) fn list_dir(&self, ns: &str, dir: &VfsPath) -> Result<Vec<Entry>> {
        let prefix = self.keys.below(ns, Space::Heads, dir)?;
        let (store, ns_owned, shown) = (self.store(), ns.to_owned(), dir.clone());
        let mut entries = self.run("listing a directory", async move {
            let (dirs, files) = level(&store, &ns_owned, &prefix).await?;
            let store = &store;
            let ns = &ns_owned;
            let fetched: Vec<Result<Option<Entry>>> = futures_util::stream::iter(files)
                .map(|(key, etag)| async move {
                    let Some(path) = store.keys.path(ns, &key) else {
                        return Ok(None);
                    };
                    let file = listed_file(store, ns, &key, etag.as_deref()).await?;
                    Ok(file.map(|head| ordered::file_entry(path, &head.meta)))
                })
                .buffered(FETCH_CONCURRENCY)
                .collect()
                .await;
            let mut entries = Vec::new();
            for name in dirs {
                let decoded = store.keys.path(
                    ns,
                    &format!("{}{name}!", store.keys.below(ns, Space::Heads, &shown)?),
                );
                if let Some(path) = decoded {
                    entries.push(Entry::directory(path, UNIX_EPOCH));
                }
            }
            for entry in fetched {
                entries.extend(entry?);
            }
            Ok(entries)
        })?;
        if entries.is_empty() && dir != &self.keys.mount {
            // Nothing below: a file (NotDirectory) or nothing at all.
            return match self.file(ns, dir)? {
                Some(_) => Err(Error::NotDirectory(dir.to_string())),
                None => Err(Error::NotFound(dir.to_string())),
            };
        }
        entries.sort_by_key(|e| e.path.order_key());
        Ok(entries)
    }

    /// The live files below the directory `dir` in one page of
    /// [`TREE_PAGE`] keys after the key `after`, and the page's last key to
    /// go on from (`None`: the listing is done): whatever the tree's size,
    /// one page is held at a time.
    pub(super) fn files_below(
        &self,
        ns: &str,
        dir: &VfsPath,
        after: Option<String>,
    ) -> Result<(Vec<VfsPath>, Option<String>)> {
        let prefix = self.keys.below(ns, Space::Heads, dir)?;
        let (store, ns) = (self.store(), ns.to_owned());
        self.run("listing a directory tree", async move {
            let page = store
                .client
                .page(&prefix, after.as_deref(), TREE_PAGE, false)
                .await?;
            let mut files = Vec::new();
            for meta in &page.objects {
                let key = meta.location.to_string();
                if Class::of_size(meta.size) == Class::NoFile {
                    continue;
                }
                if let Some(path) = store.keys.path(&ns, &key)
                    && listed_file(&store, &ns, &key, meta.e_tag.as_deref())
                        .await?
                        .is_some()
                {
                    files.push(path);
                }
            }
            let last = page.objects.last().map(|m| m.location.to_string());
            Ok((files, last.filter(|_| page.truncated)))
        })
    }

    /// The content of `head` (the live file at `path`) in pieces of at most
    /// `max_chunk` bytes: inline, or its blob read a range at a time.
    pub(super) fn pieces(
        &self,
        ns: &str,
        path: &VfsPath,
        head: &Head,
        max_chunk: usize,
    ) -> Result<ChunkReader> {
        if let Some(inline) = head.inline(path)? {
            return Ok(crate::backend::split_chunks(inline.to_vec(), max_chunk));
        }
        Ok(Box::new(BlobReader {
            bucket: self.bucket.clone(),
            key: self.keys.blob(ns, path, head.meta.blob)?,
            shown: path.to_string(),
            version: head.meta.version,
            size: head.meta.size,
            at: 0,
            piece: (max_chunk as u64).clamp(1, BLOB_PIECE_BYTES),
        }))
    }
}

/// The content of the blob at `key` (file `shown`, `version`), from the
/// cache when there (a blob never changes).
pub async fn read_blob(
    client: &Client,
    cache: &super::cache::ContentCache,
    key: &str,
    shown: &str,
    version: u64,
) -> Result<Bytes> {
    if let Some((_, data)) = cache.current(key) {
        return Ok(data);
    }
    match client.get(key).await? {
        Some(object) => {
            cache.put(key, &object.etag, object.bytes.clone());
            Ok(object.bytes)
        }
        None => Err(changed_while_read(shown, version)),
    }
}

/// The error of a read whose blob went away (a newer version replaced the
/// one it read, and history keeps no past versions).
fn changed_while_read(shown: &str, version: u64) -> Error {
    Error::VersionMismatch {
        path: shown.to_owned(),
        expected: version,
        actual: 0,
    }
    .with_context(
        "the file changed while it was being read; read it again",
        [],
    )
}

/// A blob read piece by piece as ReadBytes asks (never whole in memory).
struct BlobReader {
    bucket: Arc<super::bucket::Bucket>,
    key: String,
    shown: String,
    version: u64,
    size: u64,
    at: u64,
    piece: u64,
}

impl Iterator for BlobReader {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Result<Vec<u8>>> {
        if self.at >= self.size {
            return None;
        }
        let end = (self.at + self.piece).min(self.size);
        let (client, key) = (self.bucket.client(), self.key.clone());
        let range = self.at..end;
        let piece = self.bucket.run("reading a file's content", async move {
            client.get_range(&key, range).await
        });
        self.at = match &piece {
            Ok(Some(_)) => end,
            _ => u64::MAX,
        };
        Some(match piece {
            Ok(Some(bytes)) => Ok(bytes.to_vec()),
            Ok(None) => Err(changed_while_read(&self.shown, self.version)),
            Err(err) => Err(err),
        })
    }
}
