//! An immutable segment: a path table in path order (doc id = position),
//! the pieces of each doc (piece ids ascending with doc ids), and one
//! posting list of piece ids per trigram, delta- and varint-encoded. A
//! query is answered piece by piece and a doc is selected when one of its
//! pieces is (a match lies in one piece: [`super::trigram`]).

use super::codec::{Bytes, Reader};
use super::plan::Query;
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

/// Docs a query selects: all of them, or a bit per doc id.
pub enum Selected {
    /// No constraint.
    All,
    /// Bit `i` set: doc `i` may match.
    Bits(Vec<u64>),
}

impl Selected {
    /// True when doc `id` may match.
    pub fn has(&self, id: u32) -> bool {
        match self {
            Selected::All => true,
            Selected::Bits(bits) => bits
                .get(id as usize / 64)
                .is_some_and(|w| w >> (id % 64) & 1 == 1),
        }
    }

    /// How many docs are selected (`None`: all).
    pub fn count(&self) -> Option<u64> {
        match self {
            Selected::All => None,
            Selected::Bits(bits) => Some(bits.iter().map(|w| u64::from(w.count_ones())).sum()),
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
    /// Trigram -> (start, end) of its piece ids in `postings`.
    lists: TrigramMap<(u32, u32)>,
    postings: Vec<u8>,
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Calls `each` with every id of a delta-encoded list (posting lists, and
/// the pieces' docs, whose deltas may be 0). Never panics, also on
/// damaged bytes (a persisted segment is checked with it): arithmetic
/// wraps, and [`Segment::decode_from`] refuses ids out of order or range.
fn decode(mut bytes: &[u8], mut each: impl FnMut(u32)) {
    let mut doc = 0u32;
    let mut first = true;
    while !bytes.is_empty() {
        let mut v = 0u32;
        let mut shift = 0;
        while let Some((&b, rest)) = bytes.split_first() {
            bytes = rest;
            v |= u32::from(b & 0x7F).wrapping_shl(shift);
            shift = shift.wrapping_add(7);
            if b < 0x80 {
                break;
            }
        }
        doc = if first { v } else { doc.wrapping_add(v) };
        first = false;
        each(doc);
    }
}

/// True when `list` is a posting list [`decode`] reads as ids strictly
/// ascending below `limit`: not empty, ending a varint, every varint at
/// most 5 bytes and below 2^32 (so `decode` reads the same numbers).
///
/// Performance: a persisted copy is checked list by list when a namespace's
/// index is loaded, 150 million postings for the Linux kernel; one varint at
/// a time, this was two thirds of the cold start (docs/performance.md §
/// Cold start after pieces). Nearly every delta fits one byte, so eight
/// bytes without a continuation bit are checked and summed at once: no zero
/// (a repeated id) among them, their sum added to the last id.
fn valid_list(list: &[u8], limit: u64) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW_OF_PAIRS: u64 = 0x00FF_00FF_00FF_00FF;
    if list.last().is_none_or(|b| *b >= 0x80) {
        return false;
    }
    let mut at = 0;
    let mut id: u64 = 0;
    let mut first = true;
    while at < list.len() {
        if let Some(word) = list.get(at..at + 8).filter(|_| !first) {
            let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
            if w & HIGH == 0 {
                if w.wrapping_sub(ONES) & !w & HIGH != 0 {
                    return false;
                }
                // Four 16-bit sums of two bytes each, then their sum.
                let pairs = (w & LOW_OF_PAIRS) + ((w >> 8) & LOW_OF_PAIRS);
                id += pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48;
                at += 8;
                if id >= limit {
                    return false;
                }
                continue;
            }
        }
        let mut delta: u64 = 0;
        let mut shift = 0;
        loop {
            // In range: the list ends with a byte below 0x80.
            let byte = list[at];
            at += 1;
            if shift > 28 {
                return false;
            }
            delta |= u64::from(byte & 0x7F) << shift;
            shift += 7;
            if byte < 0x80 {
                break;
            }
        }
        if delta > u64::from(u32::MAX) || (!first && delta == 0) {
            return false;
        }
        id += delta;
        first = false;
        if id >= limit {
            return false;
        }
    }
    true
}

fn set_bit(bits: &mut [u64], id: u32) {
    bits[id as usize / 64] |= 1 << (id % 64);
}

/// Appends `ids` (ascending, repeats allowed) delta- and varint-encoded.
fn put_list(out: &mut Vec<u8>, ids: impl IntoIterator<Item = u32>) {
    let mut last = None;
    for id in ids {
        put_varint(out, last.map_or(id, |l| id - l));
        last = Some(id);
    }
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
        for (&t, &(start, end)) in &self.lists {
            carried.clear();
            decode(&self.postings[start as usize..end as usize], |piece| {
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
        put_list(&mut self.postings, pieces);
        self.lists.insert(t, (start, self.postings.len() as u32));
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
            + self.lists.len() * 12
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
        let Selected::Bits(bits) = selected else {
            return None;
        };
        Some(ones(bits.iter().zip(&self.unindexed).map(|(a, b)| a | b)))
    }

    /// True when doc `id` is always scanned.
    pub fn unindexed(&self, id: u32) -> bool {
        self.unindexed
            .get(id as usize / 64)
            .is_some_and(|w| w >> (id % 64) & 1 == 1)
    }

    fn posting_bits(&self, t: Trigram) -> Vec<u64> {
        let mut bits = vec![0; self.piece_docs.len().div_ceil(64)];
        if let Some(&(start, end)) = self.lists.get(&t) {
            decode(&self.postings[start as usize..end as usize], |id| {
                set_bit(&mut bits, id)
            });
        }
        bits
    }

    /// The posting bytes selecting `query` decodes.
    fn cost(&self, query: &Query) -> u64 {
        match query {
            Query::All | Query::Nothing => 0,
            Query::Trigram(t) => self
                .lists
                .get(t)
                .map_or(0, |&(start, end)| u64::from(end - start)),
            Query::And(parts) | Query::Or(parts) => parts.iter().map(|p| self.cost(p)).sum(),
        }
    }

    /// The docs with a piece whose trigrams satisfy `query` (unindexed docs
    /// are not included: callers check [`Segment::unindexed`]).
    pub fn select(&self, query: &Query) -> Selected {
        match self.select_pieces(query) {
            Selected::All => Selected::All,
            Selected::Bits(pieces) => {
                // One step per selected piece.
                let mut docs = vec![0; self.keys.len().div_ceil(64)];
                for piece in ones(pieces.into_iter()) {
                    set_bit(&mut docs, self.piece_docs[piece as usize]);
                }
                Selected::Bits(docs)
            }
        }
    }

    /// The pieces whose trigrams satisfy `query`: an AND or OR holds for a
    /// doc only if it holds within one of its pieces, so pieces are only
    /// turned into docs at the end.
    fn select_pieces(&self, query: &Query) -> Selected {
        match query {
            Query::All => Selected::All,
            Query::Nothing => Selected::Bits(vec![0; self.piece_docs.len().div_ceil(64)]),
            Query::Trigram(t) => Selected::Bits(self.posting_bits(*t)),
            Query::And(parts) => {
                // Cheapest parts first (the rarest trigrams: the shortest
                // lists select the fewest docs), stopping once nothing is
                // left, so a selective AND never decodes its common lists.
                let mut parts: Vec<&Query> = parts.iter().collect();
                parts.sort_by_cached_key(|part| self.cost(part));
                let mut out = Selected::All;
                for part in parts {
                    out = match (out, self.select_pieces(part)) {
                        (Selected::All, s) | (s, Selected::All) => s,
                        (Selected::Bits(mut a), Selected::Bits(b)) => {
                            a.iter_mut().zip(&b).for_each(|(x, y)| *x &= y);
                            Selected::Bits(a)
                        }
                    };
                    if out.count() == Some(0) {
                        break;
                    }
                }
                out
            }
            Query::Or(parts) => {
                let mut out = Selected::Bits(vec![0; self.piece_docs.len().div_ceil(64)]);
                for part in parts {
                    out = match (out, self.select_pieces(part)) {
                        (Selected::All, _) | (_, Selected::All) => return Selected::All,
                        (Selected::Bits(mut a), Selected::Bits(b)) => {
                            a.iter_mut().zip(&b).for_each(|(x, y)| *x |= y);
                            Selected::Bits(a)
                        }
                    };
                }
                out
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
        put_list(&mut piece_docs, self.piece_docs.iter().copied());
        out.put_bytes(&piece_docs);
        let mut lists: Vec<(&Trigram, &(u32, u32))> = self.lists.iter().collect();
        lists.sort_unstable();
        out.put_u64(lists.len() as u64);
        for (t, (start, end)) in lists {
            out.put_u64(u64::from(*t));
            out.put_u64(u64::from(*start));
            out.put_u64(u64::from(*end));
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
            let list = seg.postings.get(start as usize..end as usize)?;
            if !valid_list(list, pieces as u64) || seg.lists.insert(t, (start, end)).is_some() {
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
        for (&t, &(start, end)) in &self.lists {
            decode(&self.postings[start as usize..end as usize], |id| {
                per_piece[id as usize].push(t)
            });
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

    /// What `decode_from` checked of a list before `valid_list`: every id
    /// `decode` reads, below `limit` and strictly ascending.
    fn valid_by_decoding(list: &[u8], limit: u64) -> bool {
        if list.last().is_none_or(|b| *b >= 0x80) {
            return false;
        }
        // `decode` reads varints of over 5 bytes or 2^32 differently from
        // their encoding; `valid_list` refuses them.
        let (mut value, mut shift) = (0u64, 0);
        for &b in list {
            if shift > 28 {
                return false;
            }
            value |= u64::from(b & 0x7F) << shift;
            shift += 7;
            if b < 0x80 {
                if value > u64::from(u32::MAX) {
                    return false;
                }
                (value, shift) = (0, 0);
            }
        }
        let mut ok = true;
        let mut last: Option<u32> = None;
        decode(list, |id| {
            ok &= u64::from(id) < limit && last.is_none_or(|l| l < id);
            last = Some(id);
        });
        ok
    }

    #[test]
    fn checking_a_list_eight_bytes_at_a_time_agrees_with_decoding_it() {
        let mut rng = StdRng::seed_from_u64(0x2545_F491_4F6C_DD1D);
        let (mut valid, mut invalid) = (0, 0);
        for round in 0..20_000 {
            // A real list of ids with mostly small gaps, then maybe damaged.
            let mut ids: Vec<u32> = Vec::new();
            let mut id = rng.random_range(0..300);
            for _ in 0..rng.random_range(0..40) {
                ids.push(id);
                id += 1 + match rng.random_range(0..10) {
                    0 => rng.random_range(0..100_000),
                    1 => 0,
                    _ => rng.random_range(0..100),
                };
            }
            let mut list = Vec::new();
            put_list(&mut list, ids.iter().copied());
            for _ in 0..rng.random_range(0..3) {
                if list.is_empty() {
                    break;
                }
                let at = rng.random_range(0..list.len());
                match rng.random_range(0..4) {
                    0 => list[at] = 0,
                    1 => list[at] ^= 0x80,
                    2 => list.insert(at, 0xFF),
                    _ => list[at] = rng.random(),
                }
            }
            let limit = [1, 200, 5_000, 1 << 20, 1 << 33][rng.random_range(0..5)];
            let want = valid_by_decoding(&list, limit);
            assert_eq!(
                valid_list(&list, limit),
                want,
                "round {round}: {list:?} below {limit}"
            );
            if want { valid += 1 } else { invalid += 1 }
        }
        assert!(
            valid > 1_000 && invalid > 1_000,
            "{valid} valid, {invalid} invalid"
        );
    }
}
