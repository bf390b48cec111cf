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
        let n = docs.len();
        let mut lists: TrigramMap<Vec<u32>> = TrigramMap::default();
        let mut seg = Segment {
            keys: Vec::with_capacity(n),
            versions: Vec::with_capacity(n),
            unindexed: vec![0; n.div_ceil(64)],
            ..Segment::default()
        };
        for (id, doc) in docs.into_iter().enumerate() {
            let id = id as u32;
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
                None => set_bit(&mut seg.unindexed, id),
            }
            seg.keys.push(doc.key.into_boxed_slice());
            seg.versions.push(doc.version);
        }
        seg.lists.reserve(lists.len());
        for (t, ids) in lists {
            let start = seg.postings.len() as u32;
            put_list(&mut seg.postings, ids);
            seg.lists.insert(t, (start, seg.postings.len() as u32));
        }
        seg.postings.shrink_to_fit();
        seg
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
            if list.is_empty() || list.last().is_some_and(|b| *b >= 0x80) {
                return None;
            }
            let mut ok = true;
            let mut last: Option<u32> = None;
            decode(list, |id| {
                ok &= (id as usize) < pieces && last.is_none_or(|l| l < id);
                last = Some(id);
            });
            if !ok || seg.lists.insert(t, (start, end)).is_some() {
                return None;
            }
        }
        Some(seg)
    }

    /// Every doc with its trigrams, decoded back (for a merge).
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
}
