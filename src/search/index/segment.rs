//! An immutable segment: a path table in path order (doc id = position),
//! the pieces of each doc (piece ids ascending with doc ids), and one
//! posting list of piece ids per trigram, delta- and varint-encoded. A
//! query is answered piece by piece and a doc is selected when one of its
//! pieces is (a match lies in one piece: [`super::trigram`]).

use super::codec::{Bytes, Reader};
use super::plan::Query;
use super::postings::{Seeker, Skip, decode, put_list, valid_list};
use super::trigram::{Pieces, Trigram, TrigramMap};

/// One file as a segment is built from it.
pub struct Doc {
    /// The path's order key ([`crate::path::VfsPath::order_key`]).
    pub key: Vec<u8>,
    /// The version of the content indexed.
    pub version: u64,
    /// Its trigrams, piece by piece; `None`: always scanned.
    pub trigrams: Option<Pieces>,
}

/// Docs a query selects: all of them, or a bit per doc id (and per piece).
#[derive(Clone)]
pub enum Selected {
    /// No constraint.
    All,
    /// Bit `i` of `docs` set: doc `i` may match; bit `p` of `pieces`: piece
    /// `p` may hold a match.
    Bits {
        /// A bit per doc.
        docs: Vec<u64>,
        /// A bit per piece.
        pieces: Vec<u64>,
    },
}

/// Pieces a query part selects: `None`, all of them, or a bit per piece.
type PieceSet = Option<Vec<u64>>;

impl Selected {
    /// True when doc `id` may match.
    pub fn has(&self, id: u32) -> bool {
        match self {
            Selected::All => true,
            Selected::Bits { docs, .. } => has_bit(docs, id),
        }
    }

    /// How many docs are selected (`None`: all).
    pub fn count(&self) -> Option<u64> {
        match self {
            Selected::All => None,
            Selected::Bits { docs, .. } => Some(ones_in(docs) as u64),
        }
    }
}

/// An immutable segment; see the module doc.
#[derive(Default)]
pub struct Segment {
    keys: Vec<Box<[u8]>>,
    versions: Vec<u64>,
    /// Bit per doc: always scanned.
    unindexed: Vec<u64>,
    /// The doc of each piece (ascending; an always-scanned doc has none).
    piece_docs: Vec<u32>,
    /// Trigram -> where its piece ids are in `postings`.
    lists: TrigramMap<List>,
    postings: Vec<u8>,
    /// The posting lists' skip points, list after list.
    skips: Vec<Skip>,
}

/// Where one trigram's posting list is: `postings[start..end]`, its skip
/// points `skips[skips_start..skips_end]`.
#[derive(Clone, Copy)]
struct List {
    start: u32,
    end: u32,
    skips_start: u32,
    skips_end: u32,
}

/// An AND left with fewer candidate pieces than a list's bytes over this
/// looks them up in the list ([`Seeker`]) instead of decoding all of it.
///
/// Performance: a decoded posting costs about a byte's step and a bit set;
/// a lookup, a binary search of the skip points and on average half of
/// [`super::postings::SKIP_EVERY`] varints, but those are never decoded
/// twice. Measured on the Linux kernel (docs/performance.md § Skips).
const LOOKUP_BELOW: usize = 32;

/// How many bits of `words` are set.
fn ones_in(words: &[u64]) -> usize {
    words.iter().map(|w| w.count_ones() as usize).sum()
}

fn has_bit(bits: &[u64], id: u32) -> bool {
    bits.get(id as usize / 64)
        .is_some_and(|w| w >> (id % 64) & 1 == 1)
}

fn set_bit(bits: &mut [u64], id: u32) {
    bits[id as usize / 64] |= 1 << (id % 64);
}

/// The ids of two ascending lists of distinct ids, ascending.
fn merge_ascending(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] < b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// The ids whose bits are set in `words` (a word per 64 ids), ascending.
fn ones(words: impl Iterator<Item = u64>) -> impl Iterator<Item = u32> {
    words.enumerate().flat_map(|(w, mut word)| {
        std::iter::from_fn(move || {
            (word != 0).then(|| {
                let bit = word.trailing_zeros();
                word &= word - 1;
                w as u32 * 64 + bit
            })
        })
    })
}

impl Segment {
    /// Builds a segment from docs sorted by key (distinct keys).
    pub fn build(docs: Vec<Doc>) -> Segment {
        Segment::default().merge(|_, _| true, docs)
    }

    /// The segment of this one's docs that `keep` (given a doc's key and
    /// version) accepts and whose keys `docs` does not name, and of `docs`
    /// (sorted by key, distinct keys), in key order.
    ///
    /// Performance: this segment's posting lists are carried over as they
    /// are, their piece ids renumbered, and only `docs` go through a map of
    /// trigrams. Decoding the old lists into per-piece trigram vectors and
    /// posting every trigram again held about 8 bytes per posting for the
    /// merge's duration, over a gigabyte for the Linux kernel
    /// (docs/performance.md § Pieces).
    pub fn merge(&self, mut keep: impl FnMut(&[u8], u64) -> bool, docs: Vec<Doc>) -> Segment {
        // The first piece of each old doc (pieces ascend with docs).
        let mut first_piece = vec![0u32; self.keys.len() + 1];
        for &doc in &self.piece_docs {
            first_piece[doc as usize + 1] += 1;
        }
        for i in 1..first_piece.len() {
            first_piece[i] += first_piece[i - 1];
        }
        // Old piece -> new piece; `u32::MAX`: left out.
        let mut renumbered = vec![u32::MAX; self.piece_docs.len()];
        let mut seg = Segment::default();
        let mut unindexed = Vec::new();
        let mut lists: TrigramMap<Vec<u32>> = TrigramMap::default();
        let mut docs = docs.into_iter().peekable();
        let mut old = 0;
        loop {
            let id = seg.keys.len() as u32;
            let take_old = match (self.keys.get(old), docs.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(key), Some(doc)) => match key.as_ref().cmp(&doc.key) {
                    std::cmp::Ordering::Less => true,
                    std::cmp::Ordering::Equal => {
                        // Replaced by the new doc.
                        old += 1;
                        false
                    }
                    std::cmp::Ordering::Greater => false,
                },
            };
            if take_old {
                let from = old;
                old += 1;
                if !keep(&self.keys[from], self.versions[from]) {
                    continue;
                }
                seg.keys.push(self.keys[from].clone());
                seg.versions.push(self.versions[from]);
                if self.unindexed(from as u32) {
                    unindexed.push(id);
                }
                for piece in first_piece[from]..first_piece[from + 1] {
                    renumbered[piece as usize] = seg.piece_docs.len() as u32;
                    seg.piece_docs.push(id);
                }
                continue;
            }
            let Some(doc) = docs.next() else { break };
            seg.keys.push(doc.key.into_boxed_slice());
            seg.versions.push(doc.version);
            match doc.trigrams {
                Some(pieces) => {
                    for piece in pieces.iter() {
                        let piece_id = seg.piece_docs.len() as u32;
                        seg.piece_docs.push(id);
                        for &t in piece {
                            lists.entry(t).or_default().push(piece_id);
                        }
                    }
                }
                None => unindexed.push(id),
            }
        }
        seg.unindexed = vec![0; seg.keys.len().div_ceil(64)];
        unindexed
            .into_iter()
            .for_each(|id| set_bit(&mut seg.unindexed, id));
        seg.lists.reserve(self.lists.len().max(lists.len()));
        let mut carried = Vec::new();
        for (&t, list) in &self.lists {
            carried.clear();
            decode(self.list_bytes(list), |piece| {
                let new = renumbered[piece as usize];
                if new != u32::MAX {
                    carried.push(new);
                }
            });
            let added = lists.remove(&t).unwrap_or_default();
            seg.put_postings(t, merge_ascending(&carried, &added));
        }
        for (t, added) in lists {
            seg.put_postings(t, added);
        }
        seg.postings.shrink_to_fit();
        seg
    }

    /// Appends the posting list of `t`, unless it is empty.
    fn put_postings(&mut self, t: Trigram, pieces: Vec<u32>) {
        if pieces.is_empty() {
            return;
        }
        let start = self.postings.len() as u32;
        let skips_start = self.skips.len() as u32;
        put_list(&mut self.postings, pieces, Some(&mut self.skips));
        let list = List {
            start,
            end: self.postings.len() as u32,
            skips_start,
            skips_end: self.skips.len() as u32,
        };
        self.lists.insert(t, list);
    }

    fn list_bytes(&self, list: &List) -> &[u8] {
        &self.postings[list.start as usize..list.end as usize]
    }

    fn list_skips(&self, list: &List) -> &[Skip] {
        &self.skips[list.skips_start as usize..list.skips_end as usize]
    }

    /// Docs in the segment.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when the segment holds no doc.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Bytes of the postings and the path table, roughly.
    pub fn bytes(&self) -> usize {
        self.postings.len()
            + self.lists.len() * 20
            + self.skips.len() * 8
            + self.keys.iter().map(|k| k.len() + 16).sum::<usize>()
            + self.versions.len() * 8
            + self.piece_docs.len() * 4
    }

    /// The doc id of the path with `key` when its indexed version is
    /// `version`.
    pub fn find(&self, key: &[u8], version: u64) -> Option<u32> {
        let id = self.keys.binary_search_by(|k| k.as_ref().cmp(key)).ok()?;
        (self.versions[id] == version).then_some(id as u32)
    }

    /// The order key of doc `id`.
    pub fn key(&self, id: usize) -> &[u8] {
        &self.keys[id]
    }

    /// The version doc `id` indexed.
    pub fn version(&self, id: usize) -> u64 {
        self.versions[id]
    }

    /// The docs `selected` holds or that are always scanned, ascending;
    /// `None` when `selected` is everything. Costs a word per 64 docs plus
    /// one step per doc given.
    pub fn selected_or_unindexed(&self, selected: &Selected) -> Option<impl Iterator<Item = u32>> {
        let Selected::Bits { docs, .. } = selected else {
            return None;
        };
        Some(ones(docs.iter().zip(&self.unindexed).map(|(a, b)| a | b)))
    }

    /// True when doc `id` is always scanned.
    pub fn unindexed(&self, id: u32) -> bool {
        has_bit(&self.unindexed, id)
    }

    fn posting_bits(&self, t: Trigram) -> Vec<u64> {
        let mut bits = vec![0; self.piece_docs.len().div_ceil(64)];
        if let Some(list) = self.lists.get(&t) {
            decode(self.list_bytes(list), |id| set_bit(&mut bits, id));
        }
        bits
    }

    /// Clears the bits of `pieces` whose piece is not in `t`'s list.
    fn keep_posted(&self, t: Trigram, pieces: &mut [u64]) {
        let Some(list) = self.lists.get(&t) else {
            pieces.fill(0);
            return;
        };
        if ones_in(pieces) * LOOKUP_BELOW >= (list.end - list.start) as usize {
            let posted = self.posting_bits(t);
            pieces.iter_mut().zip(&posted).for_each(|(x, y)| *x &= y);
            return;
        }
        let mut seeker = Seeker::new(self.list_bytes(list), self.list_skips(list));
        for (w, word) in pieces.iter_mut().enumerate() {
            let mut left = *word;
            while left != 0 {
                let bit = left.trailing_zeros();
                left &= left - 1;
                if !seeker.contains(w as u32 * 64 + bit) {
                    *word &= !(1 << bit);
                }
            }
        }
    }

    /// The posting bytes selecting `query` decodes.
    fn cost(&self, query: &Query) -> u64 {
        match query {
            Query::All | Query::Nothing => 0,
            Query::Trigram(t) => self
                .lists
                .get(t)
                .map_or(0, |list| u64::from(list.end - list.start)),
            Query::And(parts) | Query::Or(parts) => parts.iter().map(|p| self.cost(p)).sum(),
        }
    }

    /// The docs with a piece whose trigrams satisfy `query` (unindexed docs
    /// are not included: callers check [`Segment::unindexed`]).
    pub fn select(&self, query: &Query) -> Selected {
        // An AND or OR holds for a doc only if it holds within one of its
        // pieces, so pieces are only turned into docs at the end.
        let Some(pieces) = self.select_within(query, None) else {
            return Selected::All;
        };
        // One step per selected piece.
        let mut docs = vec![0; self.keys.len().div_ceil(64)];
        for piece in ones(pieces.iter().copied()) {
            set_bit(&mut docs, self.piece_docs[piece as usize]);
        }
        Selected::Bits { docs, pieces }
    }

    /// How many of doc `id`'s first pieces hold every piece `selected`
    /// selected of it, when that is fewer than all its pieces: a match lies
    /// in one line, and a line in one piece, so none lies past them. `None`
    /// for a doc of one piece, one whose last piece is selected, or when
    /// everything is selected. A Grep searches only that prefix of the file
    /// ([`super::passes::Known::MatchesWithin`]).
    ///
    /// Performance: two binary searches over the pieces and a step per
    /// piece of the doc. On the kernel, `copyright holder` (`-i`) selects
    /// 489 files over 64 KiB, 395 MB, by their first piece, their license
    /// header (docs/performance.md § Searching up to the last selected piece).
    pub fn matches_within(&self, selected: &Selected, id: u32) -> Option<u32> {
        let Selected::Bits { pieces, .. } = selected else {
            return None;
        };
        let first = self.piece_docs.partition_point(|&d| d < id);
        let end = first + self.piece_docs[first..].partition_point(|&d| d <= id);
        let last = (first..end).rev().find(|&p| has_bit(pieces, p as u32))?;
        (last + 1 < end).then_some((last + 1 - first) as u32)
    }

    /// The pieces of `within` (`None`: all) whose trigrams satisfy `query`
    /// (`None`: all).
    fn select_within(&self, query: &Query, within: PieceSet) -> PieceSet {
        match query {
            Query::All => within,
            Query::Nothing => Some(vec![0; self.piece_docs.len().div_ceil(64)]),
            Query::Trigram(t) => match within {
                None => Some(self.posting_bits(*t)),
                Some(mut pieces) => {
                    self.keep_posted(*t, &mut pieces);
                    Some(pieces)
                }
            },
            Query::And(parts) => {
                // Cheapest parts first (the rarest trigrams: the shortest
                // lists select the fewest docs), each only within what the
                // ones before left, stopping once nothing is left: a
                // selective AND never decodes its common lists, and looks
                // its few candidates up in them (`keep_posted`).
                let mut parts: Vec<&Query> = parts.iter().collect();
                parts.sort_by_cached_key(|part| self.cost(part));
                let mut out = within;
                for part in parts {
                    out = self.select_within(part, out);
                    if out.as_deref().is_some_and(|bits| ones_in(bits) == 0) {
                        break;
                    }
                }
                out
            }
            Query::Or(parts) => {
                // Within a few candidates, each part is asked only about the
                // pieces no part before it took, the most common parts first:
                // a candidate most parts hold is looked up about once, not
                // once per part (`kmalloc_array\([a-z_]+` ORs 27 trigrams).
                let mut parts: Vec<&Query> = parts.iter().collect();
                parts.sort_by_cached_key(|part| std::cmp::Reverse(self.cost(part)));
                let mut out = vec![0; self.piece_docs.len().div_ceil(64)];
                let mut left = within;
                for part in parts {
                    // `None`: a part without constraint, so the OR has none.
                    let b = self.select_within(part, left.clone())?;
                    out.iter_mut().zip(&b).for_each(|(x, y)| *x |= y);
                    if let Some(left) = &mut left {
                        left.iter_mut().zip(&b).for_each(|(x, y)| *x &= !y);
                    }
                    if left.as_deref().is_some_and(|bits| ones_in(bits) == 0) {
                        break;
                    }
                }
                Some(out)
            }
        }
    }

    /// Appends the segment in the persisted format (docs/search-index.md §
    /// Persistence): docs (key, version), always-scan bits, the pieces'
    /// docs, lists by trigram, postings.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.put_u64(self.keys.len() as u64);
        for (key, version) in self.keys.iter().zip(&self.versions) {
            out.put_bytes(key);
            out.put_u64(*version);
        }
        self.unindexed.iter().for_each(|w| out.put_u64(*w));
        out.put_u64(self.piece_docs.len() as u64);
        let mut piece_docs = Vec::new();
        put_list(&mut piece_docs, self.piece_docs.iter().copied(), None);
        out.put_bytes(&piece_docs);
        let mut lists: Vec<(&Trigram, &List)> = self.lists.iter().collect();
        lists.sort_unstable_by_key(|(t, _)| **t);
        out.put_u64(lists.len() as u64);
        for (t, list) in lists {
            out.put_u64(u64::from(*t));
            out.put_u64(u64::from(list.start));
            out.put_u64(u64::from(list.end));
        }
        out.put_bytes(&self.postings);
    }

    /// Reads back what [`Segment::encode_into`] wrote, checking everything a
    /// lookup relies on: keys strictly ascending, pieces' docs in range and
    /// ascending, every list inside the postings, every piece id in range
    /// and ascending within its list.
    pub fn decode_from(r: &mut Reader<'_>) -> Option<Segment> {
        let n = usize::try_from(r.u64()?).ok()?;
        let mut seg = Segment {
            keys: Vec::with_capacity(n.min(r.left())),
            versions: Vec::with_capacity(n.min(r.left())),
            ..Segment::default()
        };
        for _ in 0..n {
            let key: Box<[u8]> = r.bytes()?.into();
            if seg.keys.last().is_some_and(|last| *last >= key) {
                return None;
            }
            seg.keys.push(key);
            seg.versions.push(r.u64()?);
        }
        for _ in 0..n.div_ceil(64) {
            seg.unindexed.push(r.u64()?);
        }
        let pieces = usize::try_from(r.u64()?).ok()?;
        let piece_docs = r.bytes()?;
        if piece_docs.last().is_some_and(|b| *b >= 0x80) {
            return None;
        }
        seg.piece_docs.reserve(pieces.min(piece_docs.len()));
        let mut ok = true;
        decode(piece_docs, |doc| {
            ok &= (doc as usize) < n && seg.piece_docs.last().is_none_or(|&l| l <= doc);
            seg.piece_docs.push(doc);
        });
        if !ok || seg.piece_docs.len() != pieces {
            return None;
        }
        let lists = usize::try_from(r.u64()?).ok()?;
        let mut ranges = Vec::with_capacity(lists.min(r.left()));
        for _ in 0..lists {
            let t = Trigram::try_from(r.u64()?).ok()?;
            let start = u32::try_from(r.u64()?).ok()?;
            let end = u32::try_from(r.u64()?).ok()?;
            ranges.push((t, (start, end)));
        }
        seg.postings = r.bytes()?.to_vec();
        for (t, (start, end)) in ranges {
            let bytes = seg.postings.get(start as usize..end as usize)?;
            let skips_start = seg.skips.len() as u32;
            if !valid_list(bytes, pieces as u64, &mut seg.skips) {
                return None;
            }
            let list = List {
                start,
                end,
                skips_start,
                skips_end: seg.skips.len() as u32,
            };
            if seg.lists.insert(t, list).is_some() {
                return None;
            }
        }
        Some(seg)
    }

    /// Every doc with its trigrams, decoded back. A merge does not need
    /// this ([`Segment::merge`] carries the lists over); tests use it to
    /// compare segments and to re-encode a deliberately damaged index.
    pub fn docs(&self) -> Vec<Doc> {
        let mut per_piece: Vec<Vec<Trigram>> = vec![Vec::new(); self.piece_docs.len()];
        for (&t, list) in &self.lists {
            decode(self.list_bytes(list), |id| per_piece[id as usize].push(t));
        }
        let mut per_doc: Vec<Pieces> = vec![Pieces::default(); self.keys.len()];
        for (piece, mut trigrams) in per_piece.into_iter().enumerate() {
            trigrams.sort_unstable();
            per_doc[self.piece_docs[piece] as usize].push(&trigrams);
        }
        per_doc
            .into_iter()
            .enumerate()
            .map(|(id, pieces)| Doc {
                key: self.keys[id].to_vec(),
                version: self.versions[id],
                trigrams: (!self.unindexed(id as u32)).then_some(pieces),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    fn doc(key: &str, version: u64, trigrams: Option<Vec<Trigram>>) -> Doc {
        Doc {
            key: key.as_bytes().to_vec(),
            version,
            trigrams: trigrams.map(|t| Pieces::from(vec![t])),
        }
    }

    #[test]
    fn postings_round_trip_and_select_by_and_or() {
        let docs = vec![
            doc("a", 1, Some(vec![1, 2, 300])),
            doc("b", 2, Some(vec![2, 300_000])),
            doc("c", 3, None),
            doc("d", 4, Some(vec![1, 2])),
        ];
        let seg = Segment::build(docs);
        assert_eq!(seg.find(b"b", 2), Some(1));
        assert_eq!(seg.find(b"b", 3), None);
        assert_eq!(seg.find(b"e", 1), None);
        assert!(seg.unindexed(2) && !seg.unindexed(0));
        let q = Query::Trigram(1).and(Query::Trigram(2));
        let s = seg.select(&q);
        assert_eq!(
            (0..4).map(|i| s.has(i)).collect::<Vec<_>>(),
            [true, false, false, true]
        );
        let q = Query::Trigram(300).or(Query::Trigram(300_000));
        assert_eq!(seg.select(&q).count(), Some(2));
        let back = seg.docs();
        assert_eq!(back[0].trigrams, Some(Pieces::from(vec![vec![1, 2, 300]])));
        assert_eq!(back[2].trigrams, None);
        assert_eq!(back[3].key, b"d");
        let mut bytes = Vec::new();
        seg.encode_into(&mut bytes);
        let again = Segment::decode_from(&mut Reader::new(&bytes)).unwrap();
        assert_eq!(again.select(&q).count(), Some(2));
        assert_eq!(again.find(b"b", 2), Some(1));
        assert!(again.unindexed(2));
        for cut in 0..bytes.len() {
            assert!(Segment::decode_from(&mut Reader::new(&bytes[..cut])).is_none());
        }
    }

    #[test]
    fn a_doc_is_selected_only_when_one_piece_holds_the_whole_query() {
        use super::super::{
            plan::plan,
            trigram::{PIECE_BYTES, extract},
        };
        let filler = "filler line\n".repeat(PIECE_BYTES / 12 + 1);
        // Every trigram of `hello world` is in the file, but no piece holds
        // them all: "hello " is in the first piece, "o world" in the next.
        let apart = format!("say hello there\n{filler}go world\n");
        let together = format!("{filler}say hello world\n");
        let docs: Vec<Doc> = [("a", &apart), ("b", &together)]
            .into_iter()
            .map(|(key, text)| Doc {
                key: key.as_bytes().to_vec(),
                version: 1,
                trigrams: Some(extract(text.as_bytes()).unwrap()),
            })
            .collect();
        assert_eq!(docs[0].trigrams.as_ref().unwrap().len(), 2);
        let query = plan("hello world", true, false);
        let seg = Segment::build(docs);
        let selected = seg.select(&query);
        assert!(!selected.has(0) && selected.has(1));
        assert_eq!(selected.count(), Some(1));
        // Only `together`'s last piece holds the query: all of it is
        // searched. `hello` alone is in `apart`'s first piece only, so a
        // Grep searches only that one; `world` in its last, `filler` in
        // both, so all of it.
        assert_eq!(seg.matches_within(&selected, 1), None);
        let within = |pattern| seg.matches_within(&seg.select(&plan(pattern, true, false)), 0);
        assert_eq!(within("hello"), Some(1));
        assert_eq!(within("world"), None);
        assert_eq!(within("filler"), None);
        assert_eq!(seg.matches_within(&Selected::All, 0), None);
        // Pieces survive a merge's decoding and the persisted format.
        let again = Segment::build(seg.docs());
        assert_eq!(again.select(&query).count(), Some(1));
        let mut bytes = Vec::new();
        seg.encode_into(&mut bytes);
        let back = Segment::decode_from(&mut Reader::new(&bytes)).unwrap();
        assert!(back.select(&query).has(1) && !back.select(&query).has(0));
        // Both pieces together hold the query: a plan over a whole file
        // would have selected both docs.
        let whole: Vec<Trigram> = {
            let mut all: Vec<Trigram> = extract(apart.as_bytes())
                .unwrap()
                .iter()
                .flatten()
                .copied()
                .collect();
            all.sort_unstable();
            all.dedup();
            all
        };
        assert!(query.matches(&whole));
    }

    fn as_tuples(docs: Vec<Doc>) -> Vec<(Vec<u8>, u64, Option<Pieces>)> {
        docs.into_iter()
            .map(|d| (d.key, d.version, d.trigrams))
            .collect()
    }

    /// Docs over 12 keys, each always scanned or of 1-3 pieces of
    /// trigrams out of 20, some pieces empty.
    fn random_docs(rng: &mut StdRng, version: u64) -> Vec<Doc> {
        let mut docs = Vec::new();
        for k in 0..12u8 {
            if rng.random_range(0..2) == 0 {
                continue;
            }
            let trigrams = if rng.random_range(0..5) == 0 {
                None
            } else {
                let mut pieces = Vec::new();
                for _ in 0..1 + rng.random_range(0..3) {
                    let mut t: Vec<Trigram> = Vec::new();
                    for _ in 0..rng.random_range(0..6) {
                        t.push(1 + rng.random_range(0..20));
                    }
                    t.sort_unstable();
                    t.dedup();
                    pieces.push(t);
                }
                Some(Pieces::from(pieces))
            };
            docs.push(Doc {
                key: vec![b'k', k],
                version: version + u64::from(k),
                trigrams,
            });
        }
        docs
    }

    /// A random AND/OR query over trigrams `1..=max`.
    fn random_query(rng: &mut StdRng, max: Trigram, depth: u32) -> Query {
        match rng.random_range(0..if depth == 0 { 2 } else { 5 }) {
            0 | 1 => Query::Trigram(1 + rng.random_range(0..max)),
            2 => Query::Nothing,
            3 => Query::And(
                (0..rng.random_range(1..5))
                    .map(|_| random_query(rng, max, depth - 1))
                    .collect(),
            ),
            _ => Query::Or(
                (0..rng.random_range(1..4))
                    .map(|_| random_query(rng, max, depth - 1))
                    .collect(),
            ),
        }
    }

    fn holds(query: &Query, piece: &[Trigram]) -> bool {
        match query {
            Query::All => true,
            Query::Nothing => false,
            Query::Trigram(t) => piece.binary_search(t).is_ok(),
            Query::And(parts) => parts.iter().all(|p| holds(p, piece)),
            Query::Or(parts) => parts.iter().any(|p| holds(p, piece)),
        }
    }

    #[test]
    fn selecting_with_lookups_equals_checking_every_piece() {
        let mut rng = StdRng::seed_from_u64(0x51_7CC1_B727_220A);
        for round in 0..20 {
            // Trigrams 1..=4 are in most pieces (lists of thousands, with
            // skips), the rest rarer and rarer.
            let docs: Vec<Doc> = (0..3_000u32)
                .map(|k| {
                    let pieces: Vec<Vec<Trigram>> = (0..1 + rng.random_range(0..3))
                        .map(|_| {
                            let mut t: Vec<Trigram> = (1..=40)
                                .filter(|&t| rng.random_range(0..t * t) < 12)
                                .collect();
                            t.dedup();
                            t
                        })
                        .collect();
                    Doc {
                        key: k.to_be_bytes().to_vec(),
                        version: 1,
                        trigrams: (k % 17 != 0).then(|| Pieces::from(pieces)),
                    }
                })
                .collect();
            let want_docs: Vec<Vec<Vec<Trigram>>> = docs
                .iter()
                .map(|d| {
                    d.trigrams
                        .as_ref()
                        .map_or(Vec::new(), |p| p.iter().map(<[Trigram]>::to_vec).collect())
                })
                .collect();
            let built = Segment::build(docs);
            assert!(!built.skips.is_empty());
            let mut bytes = Vec::new();
            built.encode_into(&mut bytes);
            let loaded = Segment::decode_from(&mut Reader::new(&bytes)).unwrap();
            for _ in 0..200 {
                let query = random_query(&mut rng, 40, 3);
                for seg in [&built, &loaded] {
                    let selected = seg.select(&query);
                    for (id, pieces) in want_docs.iter().enumerate() {
                        let want = pieces.iter().any(|p| holds(&query, p));
                        assert_eq!(
                            selected.has(id as u32),
                            want,
                            "round {round}, doc {id}, {query:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_merge_equals_a_build_of_what_it_keeps_and_adds() {
        let mut rng = StdRng::seed_from_u64(0x9E37_79B9_7F4A_7C15);
        for round in 0..200 {
            let old = Segment::build(random_docs(&mut rng, 100));
            let added = random_docs(&mut rng, 200);
            let dropped: Vec<bool> = (0..12).map(|_| rng.random_range(0..4) == 0).collect();
            let keep = |key: &[u8], _: u64| !dropped[usize::from(key[1])];
            let want: BTreeMap<Vec<u8>, Doc> = old
                .docs()
                .into_iter()
                .filter(|d| keep(&d.key, d.version))
                .map(|d| (d.key.clone(), d))
                .chain(added.iter().map(|d| {
                    let copy = Doc {
                        key: d.key.clone(),
                        version: d.version,
                        trigrams: d.trigrams.clone(),
                    };
                    (d.key.clone(), copy)
                }))
                .collect();
            let want = Segment::build(want.into_values().collect());
            let merged = old.merge(keep, added);
            assert_eq!(
                as_tuples(merged.docs()),
                as_tuples(want.docs()),
                "round {round}"
            );
            for t in 1..=20 {
                let q = Query::Trigram(t).and(Query::Trigram(1 + (t % 20)));
                assert_eq!(
                    merged.select(&q).count(),
                    want.select(&q).count(),
                    "round {round}"
                );
            }
            let mut bytes = Vec::new();
            merged.encode_into(&mut bytes);
            assert!(Segment::decode_from(&mut Reader::new(&bytes)).is_some());
        }
    }
}
