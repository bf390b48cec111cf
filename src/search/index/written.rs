//! What one change teaches its namespace's index as it commits
//! (docs/search-index.md § Learning in the write path).
//!
//! A Write, an Edit, a Copy, a Move, a changeset, a Restore or a streamed
//! upload knows the content of every file it commits: the bytes it was
//! given, the source it copies or moves, or the pieces it streamed in
//! ([`StreamCopy`]). Learning that content as
//! the change returns lets the next Grep rule the file out, or select it,
//! without reading it first, so no Grep pays for learning what was just
//! written.
//!
//! One change learns at most [`MAX_WRITE_LEARN_BYTES`] of content in all:
//! the extraction runs on the writer's thread after the commit, so the
//! bound is what one change's latency grows by (about 4 ms at the index's
//! build speed, docs/performance.md § Build speed), however many files it
//! commits. The tier asks [`WriteLearning::takes`] before it reads a file
//! to learn it, so a change whose files do not fit reads nothing extra.

use super::{Learned, NamespaceIndex, Registry, learned_bytes, trigram};
use crate::error::Result;
use std::borrow::Cow;
use std::sync::Arc;

/// Most content one change teaches the index: extracting its trigrams
/// takes at most about 4 ms at the index's build speed
/// (docs/performance.md § Build speed) added to that change; larger files,
/// and what a change commits past it, are learned by the Greps that read
/// them.
pub(super) const MAX_WRITE_LEARN_BYTES: usize = 256 << 10;

/// The files one change commits, held to be learned once it has: made by
/// [`Registry::write_learning`], fed by [`WriteLearning::add`] after the
/// commit drew each version, and learned by [`WriteLearning::learn`].
pub struct WriteLearning<'a> {
    registry: &'a Registry,
    index: Arc<NamespaceIndex>,
    /// Content bytes this change may still learn.
    left: usize,
    files: Vec<(Vec<u8>, u64, Cow<'a, [u8]>)>,
}

impl Registry {
    /// What a change in `namespace` may teach its index, when one is held
    /// that Greps use (indexing on, large enough, not switched off by a
    /// self-check): a change never makes an index, and a small namespace's
    /// changes cost nothing.
    pub fn write_learning(&self, namespace: &str) -> Option<WriteLearning<'_>> {
        Some(WriteLearning {
            registry: self,
            index: self.used_index(namespace)?,
            left: MAX_WRITE_LEARN_BYTES,
            files: Vec::new(),
        })
    }
}

impl<'a> WriteLearning<'a> {
    /// Whether a file of `bytes` fits what this change may still learn: a
    /// tier reads or copies a file's content to learn it only then.
    pub fn takes(&self, bytes: u64) -> bool {
        bytes <= self.left as u64
    }

    /// Holds `data`, committed as `version` of the file with order key
    /// `key`, to be learned; past what the change may learn it is left to
    /// the Greps. The index is exact by versions, so a file learned after a
    /// newer write of it only costs a later Grep a read.
    pub fn add(&mut self, key: Vec<u8>, version: u64, data: impl Into<Cow<'a, [u8]>>) {
        let data = data.into();
        if self.takes(data.len() as u64) {
            self.left -= data.len();
            self.files.push((key, version, data));
        }
    }

    /// Learns `data`, committed as `version` of the file with order key
    /// `key`: a change of one file.
    pub fn learn_file(mut self, key: Vec<u8>, version: u64, data: impl Into<Cow<'a, [u8]>>) {
        self.add(key, version, data);
        self.learn();
    }

    /// Learns the files held, each while its entry fits in the room the
    /// index's maker has left (its Greps' learning is charged the same way,
    /// docs/search-index.md § Memory), then merges the overlay if it grew
    /// enough.
    pub fn learn(self) {
        if self.files.is_empty() {
            return;
        }
        let mut room = self.registry.room_of(&self.index.owner);
        let mut learned: Vec<(Vec<u8>, Learned)> = Vec::with_capacity(self.files.len());
        for (key, version, data) in self.files {
            let trigrams = trigram::extract(&data).ok().map(Arc::new);
            let bytes = learned_bytes(&key, &trigrams);
            if bytes > room {
                break;
            }
            room -= bytes;
            learned.push((key, (version, trigrams)));
        }
        self.index.add_learned(learned);
        self.index.maybe_merge(false);
    }
}

/// A streamed write's pieces as its tier consumes them, with a copy of
/// their bytes kept while it fits what the change may learn: a tier whose
/// upload consumes the pieces (storing a large file as it arrives) learns
/// its content from [`StreamCopy::whole`] once the write commits.
pub struct StreamCopy<I> {
    pieces: I,
    copy: Option<Vec<u8>>,
    /// Most bytes the copy may hold.
    room: u64,
    /// The pieces ran out: the copy, if kept, is the whole content.
    ended: bool,
}

impl<I> StreamCopy<I> {
    /// `pieces`, copied for `learning` when there is one.
    pub fn new(pieces: I, learning: Option<&WriteLearning<'_>>) -> StreamCopy<I> {
        StreamCopy {
            pieces,
            copy: learning.map(|_| Vec::new()),
            room: learning.map_or(0, |l| l.left as u64),
            ended: false,
        }
    }

    /// The whole content, when every piece was taken and it fitted.
    pub fn whole(self) -> Option<Vec<u8>> {
        self.copy.filter(|_| self.ended)
    }
}

impl<I: Iterator<Item = Result<Vec<u8>>>> Iterator for StreamCopy<I> {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Result<Vec<u8>>> {
        let Some(piece) = self.pieces.next() else {
            self.ended = true;
            return None;
        };
        if let (Ok(piece), Some(copy)) = (&piece, &mut self.copy) {
            match (copy.len() + piece.len()) as u64 <= self.room {
                true => copy.extend_from_slice(piece),
                false => self.copy = None,
            }
        }
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::settings;
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn only_a_used_index_learns_and_one_change_learns_its_share() {
        let registry = Registry::new(settings(2), None);
        // No index yet: a tier reads nothing to teach it.
        assert!(registry.write_learning("ns").is_none());
        let (index, _) = registry.get("ns", "alice").unwrap();
        // Too small a namespace to be used yet.
        assert!(registry.write_learning("ns").is_none());
        index.walked.store(2, Relaxed);
        let mut learning = registry.write_learning("ns").unwrap();
        assert!(registry.write_learning("other").is_none());
        assert!(learning.takes(MAX_WRITE_LEARN_BYTES as u64));
        assert!(!learning.takes(MAX_WRITE_LEARN_BYTES as u64 + 1));
        let half = vec![b'a'; MAX_WRITE_LEARN_BYTES / 2];
        learning.add(b"a".to_vec(), 1, &half[..]);
        learning.add(b"b".to_vec(), 1, &half[..]);
        // The change's share is spent: the third file is left to Greps.
        assert!(!learning.takes(1));
        learning.add(b"c".to_vec(), 1, &b"x"[..]);
        learning.learn();
        let overlay = super::super::lock(&index.overlay);
        assert_eq!(overlay.keys().collect::<Vec<_>>(), [b"a", b"b"]);
        drop(overlay);
        index.off.store(true, Relaxed);
        assert!(registry.write_learning("ns").is_none());
    }

    #[test]
    fn a_stream_is_copied_whole_only_when_it_fits_and_ends() {
        let registry = Registry::new(settings(0), None);
        registry.get("ns", "alice").unwrap();
        let learning = registry.write_learning("ns").unwrap();
        let pieces = |sizes: &[usize]| -> Vec<Result<Vec<u8>>> {
            sizes.iter().map(|&n| Ok(vec![b'a'; n])).collect()
        };
        let half = MAX_WRITE_LEARN_BYTES / 2;
        let mut fits = StreamCopy::new(pieces(&[half, half]).into_iter(), Some(&learning));
        assert_eq!(fits.by_ref().count(), 2);
        assert_eq!(fits.whole().map(|c| c.len()), Some(MAX_WRITE_LEARN_BYTES));
        // One byte too many: nothing is kept, and every piece still passes.
        let mut over = StreamCopy::new(pieces(&[half, half, 1]).into_iter(), Some(&learning));
        assert_eq!(over.by_ref().count(), 3);
        assert_eq!(over.whole(), None);
        // Not read to its end (an upload that failed): no content.
        let mut cut = StreamCopy::new(pieces(&[1, 1]).into_iter(), Some(&learning));
        cut.next();
        assert_eq!(cut.whole(), None);
        // No index that learns: nothing is copied.
        let mut none = StreamCopy::new(pieces(&[1]).into_iter(), None);
        none.by_ref().count();
        assert_eq!(none.whole(), None);
    }
}
