//! Writes, edits and restores of one file on the object tier
//! (docs/object-storage.md § Writes).
//!
//! Each is a loop: settle the path's state, check `create_only` /
//! `if_version` against it, decide the new head and [`commit`] it. A change
//! without a condition that loses its race reads again and retries (Edit
//! and MultiEdit re-run the edit on the new content: no update is lost); a
//! conditional one that loses is the conflict it is, judged on the state
//! read again. Content over [`INLINE_MAX_BYTES`] is uploaded as a blob
//! before its head commits, and removed again if it never does.
//!
//! [`commit`]: super::ObjectBackend::commit

use super::commit::Change;
use super::head::{self, Head};
use super::keys::Space;
use super::state::{Now, read_head};
use super::{MAX_ATTEMPTS, ObjectBackend, backoff, blob_id, next_version};
use crate::backend::record::{INLINE_MAX_BYTES, Meta, nanos};
use crate::backend::{ChunkSource, Precondition, UpdateFn, WriteOutcome};
use crate::change::{ChangeKind, Operation, Origin};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use bytes::Bytes;
use std::time::SystemTime;

/// New content of a file.
pub enum NewContent {
    /// Small: inside the head.
    Inline(Bytes),
    /// Uploaded as the blob `id`.
    Blob {
        /// Its id.
        id: u64,
        /// Its size.
        size: u64,
    },
}

impl NewContent {
    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        match self {
            NewContent::Inline(data) => data.len() as u64,
            NewContent::Blob { size, .. } => *size,
        }
    }

    /// Its bytes when it is inline (small enough to live in the head).
    pub fn inline(&self) -> Option<&Bytes> {
        match self {
            NewContent::Inline(data) => Some(data),
            NewContent::Blob { .. } => None,
        }
    }

    /// The blob holding it (0: inline).
    pub fn blob(&self) -> u64 {
        match self {
            NewContent::Inline(_) => 0,
            NewContent::Blob { id, .. } => *id,
        }
    }

    /// The live head of `version` holding it, made by `origin`, created at
    /// `created` (`None`: now), with the executable bit `executable`, at
    /// log position `pos`.
    pub fn head(
        &self,
        version: u64,
        created: Option<u64>,
        executable: bool,
        origin: &Origin,
        pos: super::keys::Position,
    ) -> Bytes {
        let now = nanos(SystemTime::now());
        let inline = self.inline().map(Bytes::as_ref);
        let meta = Meta {
            version,
            size: self.size(),
            created: created.unwrap_or(now),
            modified: now,
            inline: inline.is_some(),
            blob: self.blob(),
            executable,
        };
        head::live(&meta, origin, inline, pos)
    }
}

impl ObjectBackend {
    /// What `path` (head key `key`) holds, settled for a change: a Move in
    /// flight onto it waited for or stopped, a finished move's destination
    /// put in place. On the first attempt a head this server wrote or read
    /// last is taken from the cache without asking the store: only a
    /// conditional put relies on it, and a stale one fails that put.
    pub(super) fn settled(&self, ns: &str, key: &str, attempt: u32) -> Result<Now> {
        if attempt == 0
            && let Some((etag, body)) = self.cache.current(key)
            && let Ok(head) = Head::decode(key, body, etag)
            && matches!(
                head.state,
                head::State::Live | head::State::Deleted | head::State::Absent
            )
        {
            let state = (head.state != head::State::Absent).then(|| head.clone());
            return Ok(Now {
                head: Some(head),
                state,
                in_flight: None,
            });
        }
        let mut tries = 0;
        loop {
            let (store, ns_owned, key_owned) = (self.store(), ns.to_owned(), key.to_owned());
            let settled = self.run("reading a file", async move {
                store.settle(&ns_owned, &key_owned).await
            })?;
            match settled {
                Some(now) => return Ok(now),
                None if tries < MAX_ATTEMPTS => {
                    backoff(tries);
                    tries += 1;
                }
                None => {
                    let path = self.keys.path(ns, key).map(|p| p.to_string());
                    return Err(Error::Unavailable(format!(
                        "{}: a move onto this file stayed in flight; try again",
                        path.unwrap_or_default()
                    )));
                }
            }
        }
    }

    /// Commits `content` at `path` under `pre` as a change by `origin`:
    /// the read-check-write loop of Write, WriteBytes and Restore. The
    /// content's blob is removed again when it is not committed.
    pub(super) fn put_content(
        &self,
        scope: &Scope,
        path: &VfsPath,
        pre: Precondition,
        content: NewContent,
        origin: &Origin,
    ) -> Result<WriteOutcome> {
        let ns = self.namespace(scope)?;
        let done = self.put_content_once(ns, path, pre, &content, origin);
        if done.is_err() {
            self.forget_blob(ns, path, content.blob());
        }
        done
    }

    fn put_content_once(
        &self,
        ns: &str,
        path: &VfsPath,
        pre: Precondition,
        content: &NewContent,
        origin: &Origin,
    ) -> Result<WriteOutcome> {
        let key = self.file_key(ns, path)?;
        for attempt in 0..MAX_ATTEMPTS {
            let now = self.settled(ns, &key, attempt)?;
            let file = now.file();
            if pre.check(path, file.map(|f| f.meta.version)).is_err() && attempt == 0 {
                // The cache may be stale: judge on the store's answer.
                continue;
            }
            pre.check(path, file.map(|f| f.meta.version))?;
            if file.is_none() {
                self.new_file_checks(ns, path)?;
            }
            let version = next_version(now.floor());
            let created = file.map(|f| f.meta.created);
            let executable = pre.executable_after(file.map(|f| f.meta.executable));
            let change = Change {
                ns,
                path,
                key: &key,
                now: &now,
                kind: if file.is_some() {
                    ChangeKind::Modified
                } else {
                    ChangeKind::Created
                },
                version,
                size: content.size(),
                origin,
                moved: None,
            };
            let head = |pos| content.head(version, created, executable, origin, pos);
            if self.commit(&change, head)? {
                if let Some(file) = file {
                    self.forget_replaced(ns, path, file);
                }
                return Ok(WriteOutcome {
                    path: path.clone(),
                    bytes_written: content.size(),
                    version,
                    created: file.is_none(),
                });
            }
            // Lost a race: with a condition, judge it on what is there now.
            if pre != Precondition::default() {
                let now = self.settled(ns, &key, 1)?;
                pre.check(path, now.file().map(|f| f.meta.version))?;
            }
            backoff(attempt);
        }
        Err(Error::Unavailable(format!(
            "{path}: gave up after {MAX_ATTEMPTS} writes lost races with other writers"
        )))
    }

    /// Edit and MultiEdit: `f` applied to the content as it is when the
    /// change commits (run again after a lost race).
    pub(super) fn edit(
        &self,
        scope: &Scope,
        path: &VfsPath,
        if_version: Option<u64>,
        f: &mut UpdateFn<'_>,
    ) -> Result<WriteOutcome> {
        let ns = self.namespace(scope)?;
        let key = self.file_key(ns, path)?;
        let origin = Origin::of(scope, Operation::Edit);
        for attempt in 0..MAX_ATTEMPTS {
            let now = self.settled(ns, &key, 1)?;
            let Some(file) = now.file() else {
                return Err(self.not_a_file(ns, path));
            };
            Precondition::if_version(if_version).check(path, Some(file.meta.version))?;
            let old = self.content(ns, path, file)?;
            let new = f(&old)?;
            Error::check_file_size(path, new.len() as u64, self.max_file_bytes)?;
            let (learning, copy) = self.copy_to_learn(ns, &new).unzip();
            let content = self.new_content(ns, path, new)?;
            let version = next_version(now.floor());
            let created = Some(file.meta.created);
            let change = Change {
                ns,
                path,
                key: &key,
                now: &now,
                kind: ChangeKind::Modified,
                version,
                size: content.size(),
                origin: &origin,
                moved: None,
            };
            let executable = file.meta.executable;
            let committed = self.commit(&change, |pos| {
                content.head(version, created, executable, &origin, pos)
            });
            match committed {
                Ok(true) => {
                    self.forget_replaced(ns, path, file);
                    let outcome = WriteOutcome {
                        path: path.clone(),
                        bytes_written: content.size(),
                        version,
                        created: false,
                    };
                    outcome.teach(learning, copy);
                    return Ok(outcome);
                }
                Ok(false) => self.forget_blob(ns, path, content.blob()),
                Err(err) => {
                    self.forget_blob(ns, path, content.blob());
                    return Err(err);
                }
            }
            backoff(attempt);
        }
        Err(Error::Unavailable(format!(
            "{path}: gave up after {MAX_ATTEMPTS} edits lost races with other writers"
        )))
    }

    /// Stores a streamed write's pieces: gathered when small, else uploaded
    /// as a blob in parts as they arrive (never whole in memory).
    pub(super) fn upload(
        &self,
        ns: &str,
        path: &VfsPath,
        pieces: &mut ChunkSource<'_>,
    ) -> Result<NewContent> {
        let mut head = Vec::new();
        while head.len() <= INLINE_MAX_BYTES {
            match pieces.next() {
                None => return Ok(NewContent::Inline(Bytes::from(head))),
                Some(piece) => {
                    head.extend_from_slice(&piece?);
                    Error::check_file_size(path, head.len() as u64, self.max_file_bytes)?;
                }
            }
        }
        let id = blob_id();
        let key = self.keys.blob(ns, path, id)?;
        let started = std::time::Instant::now();
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let client = self.bucket.client();
        let uploading = self
            .bucket
            .spawn(async move { client.upload(&key, rx).await })?;
        let mut size = head.len() as u64;
        let mut feed = || -> Result<()> {
            tx.blocking_send(Ok(Bytes::from(std::mem::take(&mut head))))
                .map_err(|_| Error::Internal("the upload stopped".into()))?;
            for piece in &mut *pieces {
                let piece = piece.and_then(|data| {
                    size += data.len() as u64;
                    Error::check_file_size(path, size, self.max_file_bytes).map(|()| data)
                });
                match piece {
                    Ok(data) => {
                        if tx.blocking_send(Ok(Bytes::from(data))).is_err() {
                            break;
                        }
                    }
                    Err(err) => {
                        let _ = tx.blocking_send(Err(err.clone()));
                        return Err(err);
                    }
                }
            }
            Ok(())
        };
        let fed = feed();
        drop(tx);
        let uploaded = self.run("uploading a file", async move {
            uploading
                .await
                .map_err(|e| Error::Internal(format!("upload task: {e}")))?
        });
        fed?;
        let size = uploaded?;
        if started.elapsed() < self.renew_uploads_after {
            return Ok(NewContent::Blob { id, size });
        }
        // See RENEW_UPLOADS_AFTER: a copy is dated now.
        let fresh = self.copy_blob(ns, (path, id), path)?;
        self.forget_blob(ns, path, id);
        Ok(NewContent::Blob { id: fresh, size })
    }

    /// A copy of the blob `id` of `from` as a new blob of `to` (one
    /// server-side copy): its id.
    pub(super) fn copy_blob(
        &self,
        ns: &str,
        (from, id): (&VfsPath, u64),
        to: &VfsPath,
    ) -> Result<u64> {
        let fresh = blob_id();
        let (from, to) = (
            self.keys.blob(ns, from, id)?,
            self.keys.blob(ns, to, fresh)?,
        );
        let client = self.bucket.client();
        self.run("copying a file's content", async move {
            client.copy(&from, &to).await
        })?;
        Ok(fresh)
    }

    /// `data` as a new version's content: inline when small, else uploaded
    /// as a blob.
    pub(super) fn new_content(
        &self,
        ns: &str,
        path: &VfsPath,
        data: Vec<u8>,
    ) -> Result<NewContent> {
        if data.len() <= INLINE_MAX_BYTES {
            return Ok(NewContent::Inline(Bytes::from(data)));
        }
        self.upload(ns, path, &mut std::iter::once(Ok(data)))
    }

    /// Deletes the blob `id` of `path` (0: none); one that fails to go is
    /// left to the orphan sweep. Only a blob no head or past version names
    /// is passed here, so no writer can race its deletion.
    pub(super) fn forget_blob(&self, ns: &str, path: &VfsPath, id: u64) {
        if id == 0 {
            return;
        }
        let Ok(key) = self.keys.blob(ns, path, id) else {
            return;
        };
        let client = self.bucket.client();
        if let Err(err) = self.run("deleting a blob", async move { client.delete(&key).await }) {
            tracing::warn!(path = %path, cause = %err, "a blob is left for the orphan sweep");
        }
    }

    /// Deletes the blob of the version `replaced` of `path` once a change
    /// replaced it, unless history keeps that version (then its blob goes
    /// when the version is dropped).
    pub(super) fn forget_replaced(&self, ns: &str, path: &VfsPath, replaced: &Head) {
        if !self.keep.history.keeps_history() {
            self.forget_blob(ns, path, replaced.meta.content_blob());
        }
    }

    /// The checks of a new file at `path` (the mount root excluded): not a
    /// directory (no live file below it), no parent a live file. Heads are
    /// never removed, so a deleted name below or above is passed over.
    pub(super) fn new_file_checks(&self, ns: &str, path: &VfsPath) -> Result<()> {
        let below = self.keys.below(ns, Space::Heads, path)?;
        let mut parents = Vec::new();
        let mut dir = path.parent();
        while dir != self.keys.mount && dir.is_within(&self.keys.mount) {
            parents.push((dir.clone(), self.keys.head(ns, &dir)?));
            dir = dir.parent();
        }
        // The nearest file above is the one named, as the other tiers do:
        // check the outermost first.
        parents.reverse();
        let (store, ns, shown) = (self.store(), ns.to_owned(), path.clone());
        self.run("checking a new file's place", async move {
            let below_check = super::read::first_file_below(&store, &ns, &below);
            let parent_checks =
                futures_util::future::try_join_all(parents.iter().map(|(_, key)| {
                    let (store, ns) = (&store, &ns);
                    async move {
                        let head = read_head(&store.client, &store.cache, key).await?;
                        Ok::<_, Error>(store.resolve(ns, key, head).await?.file().is_some())
                    }
                }));
            let (below, files) = futures_util::try_join!(below_check, parent_checks)?;
            if below.is_some() {
                return Err(Error::IsDirectory(shown.to_string()));
            }
            for ((dir, _), is_file) in parents.iter().zip(files) {
                if is_file {
                    return Err(Error::NotDirectory(dir.to_string()));
                }
            }
            Ok(())
        })
    }

    /// Restore: the content of retained `version` written back as a new
    /// version made by `restore`.
    pub(super) fn restore_version(
        &self,
        scope: &Scope,
        path: &VfsPath,
        version: u64,
        if_version: Option<u64>,
    ) -> Result<WriteOutcome> {
        let ns = self.namespace(scope)?;
        let old = self.retained(ns, path, version)?;
        if old.is_deletion() {
            return Err(crate::backend::restore_of_deletion(path, version));
        }
        let content = match old.inline(path)? {
            Some(inline) => NewContent::Inline(inline),
            None => NewContent::Blob {
                id: self.copy_blob(ns, (path, old.meta.blob), path)?,
                size: old.meta.size,
            },
        };
        let pre = Precondition::if_version(if_version);
        let origin = Origin::of(scope, Operation::Restore);
        let (learning, inline) = (self.index.write_learning(ns), content.inline().cloned());
        let outcome = self.put_content(scope, path, pre, content, &origin)?;
        outcome.teach(learning, inline.as_deref());
        Ok(outcome)
    }
}
