//! Move on the object tier (docs/object-storage.md § Move): two heads
//! change, and one conditional put decides it.
//!
//! 1. The destination's head becomes **pending** (a conditional put on the
//!    ETag read there): it holds the new head, what the destination held
//!    before, and the source head's ETag. Readers resolve it by a read of
//!    the source (and, when the source is no longer the move's, of the
//!    destination again: `state::Store::fate`): until the move commits, the
//!    destination is what it was.
//! 2. The source's head becomes **moved away** by a put conditional on that
//!    ETag: the commit point. If it fails (the source changed), the move did
//!    not happen, and the destination is put back as it was.
//! 3. The pending head is replaced by the new head (anyone who finds the
//!    source moved away may do this step; see `state`).
//!
//! So a Move that fails leaves both paths as they were, never visibly
//! changed, and one that commits is seen at both ends at once. A killed
//! mover leaves a pending head that readers resolve and the next change of
//! the destination stops (`state::MOVE_GRACE`). A directory moves file by
//! file: not atomic; a crash leaves some files moved, each whole.

use super::commit::Change as Planned;
use super::head::{self, Pending};
use super::keys::Position;
use super::log::{self, Intent};
use super::state::{Now, Store, now_micros};
use super::write::NewContent;
use super::{MAX_ATTEMPTS, ObjectBackend, backoff, next_version};
use crate::backend::record::Meta;
use crate::backend::{MoveOutcome, Precondition, unmovable_mount};
use crate::change::{ChangeKind, Operation, Origin};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::Scope;
use crate::search::index::written::WriteLearning;
use bytes::Bytes;

impl ObjectBackend {
    /// Move of a file or a directory tree (callers checked the two paths).
    pub(super) fn move_path(
        &self,
        scope: &Scope,
        source: &VfsPath,
        destination: &VfsPath,
        pre: Precondition,
    ) -> Result<MoveOutcome> {
        for path in [source, destination] {
            if path == &self.keys.mount {
                return Err(unmovable_mount(path));
            }
        }
        let ns = self.namespace(scope)?;
        let origin = Origin::of(scope, Operation::Move);
        let (src_key, dst_key) = (self.file_key(ns, source)?, self.file_key(ns, destination)?);
        let mut learning = self.index.write_learning(ns);
        for attempt in 0..MAX_ATTEMPTS {
            let src = self.settled(ns, &src_key, 1)?;
            let source_is_dir = match src.file() {
                Some(file) => {
                    Precondition::if_version(pre.if_version)
                        .check(source, Some(file.meta.version))?;
                    false
                }
                None => {
                    self.lookup_missing(ns, source)?;
                    if pre.if_version.is_some() {
                        return Err(Error::InvalidArgument(
                            "if_version applies to files, not directories".into(),
                        ));
                    }
                    true
                }
            };
            let dst = self.settled(ns, &dst_key, 1)?;
            // The destination: no parent a file, and free (only a file
            // replaces a file, unless create_only).
            let refused = if dst.file().is_none() {
                self.new_file_checks(ns, destination)
                    .map_err(|e| match e {
                        Error::IsDirectory(_) if source_is_dir || pre.create_only => {
                            Error::AlreadyExists(destination.to_string())
                        }
                        Error::IsDirectory(_) => Error::IsDirectory(destination.to_string()),
                        other => other,
                    })
                    .err()
            } else if pre.create_only || source_is_dir {
                Some(Error::AlreadyExists(destination.to_string()))
            } else {
                None
            };
            if let Some(refused) = refused {
                // The two ends were read one after the other: the refusal
                // stands only if the source did not change in between (its
                // head unchanged since the first read means it held that
                // state while the destination was read).
                if self.unchanged(ns, &src_key, &src)? {
                    return Err(refused);
                }
                backoff(attempt);
                continue;
            }
            if source_is_dir {
                let moved = self.move_tree(ns, source, destination, &origin, &mut learning)?;
                if let Some(learning) = learning {
                    learning.learn();
                }
                return Ok(moved);
            }
            let ends = Ends {
                ns,
                source: (source, &src_key, &src),
                destination: (destination, &dst_key, &dst),
            };
            if let Some(version) = self.move_file(&ends, &origin, &mut learning)? {
                if let Some(learning) = learning {
                    learning.learn();
                }
                return Ok(MoveOutcome {
                    files_moved: 1,
                    version,
                });
            }
            // The source (or the destination) changed since it was read:
            // look again (a missing source is NOT_FOUND then).
            backoff(attempt);
        }
        Err(Error::Unavailable(format!(
            "{source}: gave up after {MAX_ATTEMPTS} moves lost races with other writers"
        )))
    }

    /// True when the head at `key` is still the one `then` read (same ETag,
    /// or still no head).
    fn unchanged(&self, ns: &str, key: &str, then: &Now) -> Result<bool> {
        let (store, key) = (self.store(), key.to_owned());
        let _ = ns;
        let now = self.run("reading a file", async move {
            super::state::read_head(&store.client, &store.cache, &key).await
        })?;
        Ok(now.map(|h| h.etag) == then.head.as_ref().map(|h| h.etag.clone()))
    }

    /// Moves every file of the directory `source` below `destination`
    /// (which holds nothing), file by file, a page at a time.
    fn move_tree(
        &self,
        ns: &str,
        source: &VfsPath,
        destination: &VfsPath,
        origin: &Origin,
        learning: &mut Option<WriteLearning<'_>>,
    ) -> Result<MoveOutcome> {
        let mut files_moved = 0;
        let mut after = None;
        loop {
            let (files, last) = self.files_below(ns, source, after)?;
            for file in files {
                let Some(to) = file.rebase(source, destination) else {
                    continue;
                };
                let (src_key, dst_key) = (self.file_key(ns, &file)?, self.file_key(ns, &to)?);
                let src = self.settled(ns, &src_key, 1)?;
                if src.file().is_none() {
                    // Changed since the listing: it is no longer here.
                    continue;
                }
                let dst = self.settled(ns, &dst_key, 1)?;
                if dst.file().is_some() {
                    return Err(Error::AlreadyExists(to.to_string()));
                }
                let ends = Ends {
                    ns,
                    source: (&file, &src_key, &src),
                    destination: (&to, &dst_key, &dst),
                };
                if self.move_file(&ends, origin, learning)?.is_some() {
                    files_moved += 1;
                }
            }
            match last {
                Some(last) => after = Some(last),
                None => break,
            }
        }
        if files_moved == 0 {
            return Err(Error::NotFound(source.to_string()));
        }
        Ok(MoveOutcome {
            files_moved,
            version: 0,
        })
    }

    /// Moves the live file of `ends.source` to `ends.destination` as the
    /// module doc says: its new version, or `None` when either end changed
    /// since it was read (then nothing changed). A moved file whose content
    /// is inline in its head is held for `learning` (docs/search-index.md §
    /// Learning in the write path); one in a blob is learned by a Grep.
    fn move_file(
        &self,
        ends: &Ends<'_>,
        origin: &Origin,
        learning: &mut Option<WriteLearning<'_>>,
    ) -> Result<Option<u64>> {
        let (ns, (source, src_key, src), (destination, dst_key, dst)) =
            (ends.ns, ends.source, ends.destination);
        let file = src
            .file()
            .ok_or_else(|| Error::NotFound(source.to_string()))?;
        let src_head = src
            .head
            .as_ref()
            .ok_or_else(|| Error::NotFound(source.to_string()))?;
        let version = next_version(src.floor().max(dst.floor()));
        let gone = next_version(src.floor());
        // The content goes with the file: inline in the head, or a copy of
        // the blob under the destination (each blob belongs to one head).
        let blob = match file.meta.content_blob() {
            0 => 0,
            id => self.copy_blob(ns, (source, id), destination)?,
        };
        let content = match file.inline(source)? {
            Some(inline) => NewContent::Inline(inline),
            None => NewContent::Blob {
                id: blob,
                size: file.meta.size,
            },
        };
        let arrival = Planned {
            ns,
            path: destination,
            key: dst_key,
            now: dst,
            kind: if dst.file().is_some() {
                ChangeKind::Modified
            } else {
                ChangeKind::Created
            },
            version,
            size: file.meta.size,
            origin,
            moved: Some(source),
        };
        let departure = Planned {
            ns,
            path: source,
            key: src_key,
            now: src,
            kind: ChangeKind::Deleted,
            version: gone,
            size: 0,
            origin,
            moved: Some(destination),
        };
        // A file the move replaces becomes a past version at the
        // destination; the source's own versions went with it (its history
        // there starts with the moved-away head).
        let replaced = self.keep_replaced(ns, dst.state.as_ref(), destination)?;
        loop {
            let (to_pos, from_pos) = match &self.log {
                Some(log) => (log.draw(ns).0, log.draw(ns).0),
                None => (Position::NONE, Position::NONE),
            };
            let meta = Meta {
                version,
                blob: content.blob(),
                ..file.meta
            };
            let inline = content.inline().map(Bytes::as_ref);
            let new = head::live(&meta, origin, inline, to_pos);
            let move_id = rand::random::<u64>().max(1);
            let pending = Pending {
                move_id,
                since: now_micros(),
                source: Some(source.clone()),
                source_etag: src_head.etag.clone(),
                new: new.clone(),
                prior: dst.state.as_ref().map(|h| h.body.clone()),
            };
            let steps = MoveSteps {
                store: self.store(),
                ns: ns.to_owned(),
                records: self
                    .log
                    .as_ref()
                    .map(|_| [(to_pos, arrival.intent()), (from_pos, departure.intent())]),
                marks: [src.pos(), dst.pos()],
                replaced: replaced.clone(),
                dst_key: dst_key.to_owned(),
                dst_mode: dst.put_mode(),
                pending: head::pending(&pending, Position::NONE),
                src_key: src_key.to_owned(),
                src_etag: src_head.etag.clone(),
                moved_away: head::moved_away(gone, origin, from_pos, move_id, destination),
                from_pos,
                new,
                undo: match &dst.state {
                    Some(prior) => head::refenced(&prior.body),
                    None => head::absent(version),
                },
            };
            match self.run("moving a file", steps.run())? {
                MoveEnd::Voided => continue,
                MoveEnd::Lost => {
                    self.forget_blob(ns, destination, blob);
                    return Ok(None);
                }
                MoveEnd::Moved => {
                    self.feed.bump();
                    // The content went with a copy of the blob.
                    self.forget_blob(ns, source, file.meta.content_blob());
                    if let Some(replaced) = dst.file() {
                        self.forget_replaced(ns, destination, replaced);
                    }
                    self.prune_history(ns, destination);
                    if let (Some(learning), Some(data)) = (learning.as_mut(), content.inline())
                        && learning.takes(data.len() as u64)
                    {
                        learning.add(destination.order_key(), version, data.to_vec());
                    }
                    return Ok(Some(version));
                }
            }
        }
    }
}

/// The two ends of a file's Move: path, head key and state read.
struct Ends<'a> {
    ns: &'a str,
    source: (&'a VfsPath, &'a str, &'a Now),
    destination: (&'a VfsPath, &'a str, &'a Now),
}

/// The requests of one Move attempt, run on the tier's runtime.
struct MoveSteps {
    store: Store,
    ns: String,
    /// The change-log records of the arrival and the departure.
    records: Option<[(Position, Intent); 2]>,
    /// The changes the two ends replace (their successor marks).
    marks: [Position; 2],
    /// The past version to keep at the destination.
    replaced: Option<(String, Bytes)>,
    dst_key: String,
    dst_mode: super::bucket::Put,
    pending: Bytes,
    src_key: String,
    src_etag: String,
    moved_away: Bytes,
    from_pos: Position,
    new: Bytes,
    /// What the destination is put back to when the move does not commit.
    undo: Bytes,
}

/// How one Move attempt ended.
enum MoveEnd {
    Moved,
    Lost,
    Voided,
}

impl MoveSteps {
    async fn run(self) -> Result<MoveEnd> {
        let store = &self.store;
        let ns = &self.ns;
        let records = async {
            let Some(records) = &self.records else {
                return Ok(true);
            };
            let [(a, arrival), (d, departure)] = records;
            let (a, d) = futures_util::try_join!(
                log::write_record(store, ns, *a, arrival),
                log::write_record(store, ns, *d, departure)
            )?;
            Ok::<_, Error>(a && d)
        };
        let marks = async {
            if self.records.is_some() {
                for mark in self.marks {
                    log::mark_successor(store, ns, mark).await?;
                }
            }
            Ok::<_, Error>(())
        };
        let pasts = async {
            if let Some((key, body)) = &self.replaced {
                store
                    .client
                    .put(key, body.clone(), super::bucket::Put::Overwrite)
                    .await?;
            }
            Ok::<_, Error>(())
        };
        let (recorded, (), ()) = futures_util::try_join!(records, marks, pasts)?;
        if !recorded {
            return Ok(MoveEnd::Voided);
        }
        let Some(pending_etag) = store
            .put_head(&self.dst_key, self.pending.clone(), self.dst_mode.clone())
            .await?
        else {
            return Ok(MoveEnd::Lost);
        };
        let replace = |etag: &str| super::bucket::Put::Replace(etag.to_owned());
        let committed = match store
            .put_head(
                &self.src_key,
                self.moved_away.clone(),
                replace(&self.src_etag),
            )
            .await?
        {
            Some(_) => true,
            // Its answer lost and replaced since? Its successor mark says.
            None if self.records.is_some() => {
                let mark = store.keys.successor(ns, self.from_pos)?;
                store.client.get(&mark).await?.is_some()
            }
            None => false,
        };
        if !committed {
            // The source changed first: the move never happened. Put the
            // destination back (someone who read it stopped may have).
            store
                .put_head(&self.dst_key, self.undo.clone(), replace(&pending_etag))
                .await?;
            return Ok(MoveEnd::Lost);
        }
        store
            .put_head(&self.dst_key, self.new.clone(), replace(&pending_etag))
            .await?;
        Ok(MoveEnd::Moved)
    }
}
