//! Lists of ascending ids, delta- and varint-encoded: a segment's posting
//! lists (piece ids per trigram) and its pieces' docs. A posting list also
//! has skip points, so that an AND left with a few candidates looks them
//! up in a common trigram's list instead of decoding all of it
//! (docs/search-index.md § Selection, docs/performance.md § Skips).

/// Ids between two skip points of a posting list.
///
/// Performance: a lookup decodes at most this many varints past the skip
/// point it starts from; the skips cost 8 bytes per this many postings,
/// about 5% of the postings (mostly one byte each).
pub const SKIP_EVERY: usize = 128;

/// A point to resume decoding a list at: `id` is the id decoded last
/// before the varint at byte offset `at` of the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skip {
    /// The id decoded just before `at`.
    pub id: u32,
    /// The byte offset in the list of the next varint.
    pub at: u32,
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `ids` (ascending, repeats allowed) delta- and varint-encoded;
/// with `skips`, also a skip point after every [`SKIP_EVERY`] ids, its
/// offset counted from where this list starts in `out`.
pub fn put_list(
    out: &mut Vec<u8>,
    ids: impl IntoIterator<Item = u32>,
    mut skips: Option<&mut Vec<Skip>>,
) {
    let start = out.len();
    let mut last = None;
    for (n, id) in ids.into_iter().enumerate() {
        put_varint(out, last.map_or(id, |l| id - l));
        last = Some(id);
        if (n + 1) % SKIP_EVERY == 0
            && let Some(skips) = skips.as_deref_mut()
        {
            let at = (out.len() - start) as u32;
            skips.push(Skip { id, at });
        }
    }
}

/// Reads the varint at `bytes[*at..]`, moving `at` past it. Never panics,
/// also on damaged bytes: a varint cut by the end of `bytes` ends there,
/// and bits shifted out are dropped.
fn read_varint(bytes: &[u8], at: &mut usize) -> u32 {
    let mut v = 0u32;
    let mut shift = 0u32;
    while let Some(&b) = bytes.get(*at) {
        *at += 1;
        v |= u32::from(b & 0x7F).wrapping_shl(shift);
        shift = shift.wrapping_add(7);
        if b < 0x80 {
            break;
        }
    }
    v
}

/// Calls `each` with every id of a delta-encoded list (posting lists, and
/// the pieces' docs, whose deltas may be 0). Never panics, also on
/// damaged bytes (a persisted segment is checked with it): arithmetic
/// wraps, and [`super::segment::Segment::decode_from`] refuses ids out of
/// order or range.
pub fn decode(bytes: &[u8], mut each: impl FnMut(u32)) {
    let mut at = 0;
    let mut id = 0u32;
    let mut first = true;
    while at < bytes.len() {
        let v = read_varint(bytes, &mut at);
        id = if first { v } else { id.wrapping_add(v) };
        first = false;
        each(id);
    }
}

/// True when `list` is a posting list [`decode`] reads as ids strictly
/// ascending below `limit` (and below 2^32): not empty, ending a varint,
/// every varint at most 5 bytes and below 2^32 (so `decode` reads the same
/// numbers). Pushes the list's skip points onto `skips`, at least
/// [`SKIP_EVERY`] ids apart.
///
/// Performance: a persisted copy is checked list by list when a namespace's
/// index is loaded, 150 million postings for the Linux kernel; one varint at
/// a time, this was two thirds of the cold start (docs/performance.md §
/// Cold start). Nearly every delta fits one byte, so eight
/// bytes without a continuation bit are checked and summed at once: no zero
/// (a repeated id) among them, their sum added to the last id. The skip
/// points are found in the same pass, so loading costs no second one.
pub fn valid_list(list: &[u8], limit: u64, skips: &mut Vec<Skip>) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW_OF_PAIRS: u64 = 0x00FF_00FF_00FF_00FF;
    if list.last().is_none_or(|b| *b >= 0x80) {
        return false;
    }
    let limit = limit.min(1 << 32);
    let mut at = 0;
    let mut id: u64 = 0;
    let mut first = true;
    let mut since_skip = 0;
    while at < list.len() {
        if since_skip >= SKIP_EVERY {
            // `id < limit <= 2^32` and `at < list.len()`, a u32 offset.
            skips.push(Skip {
                id: id as u32,
                at: at as u32,
            });
            since_skip = 0;
        }
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
                since_skip += 8;
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
        since_skip += 1;
        if id >= limit {
            return false;
        }
    }
    true
}

/// Answers "is this id in the list?" for ids asked in ascending order,
/// decoding each varint at most once and jumping over the runs between
/// skip points that hold no id asked.
pub struct Seeker<'a> {
    list: &'a [u8],
    skips: &'a [Skip],
    /// Byte offset of the next varint.
    at: usize,
    /// The id decoded last; `None` before the first.
    last: Option<u32>,
}

impl<'a> Seeker<'a> {
    /// A seeker over `list` (strictly ascending ids, checked by
    /// [`valid_list`] or written by [`put_list`]) and its skip points.
    pub fn new(list: &'a [u8], skips: &'a [Skip]) -> Seeker<'a> {
        Seeker {
            list,
            skips,
            at: 0,
            last: None,
        }
    }

    /// True when `id` is in the list. `id` must not be below an id asked
    /// before (then the answer may be wrong, never a panic).
    pub fn contains(&mut self, id: u32) -> bool {
        if let Some(last) = self.last
            && last >= id
        {
            return last == id;
        }
        // The last skip point before `id`, if it is ahead of us.
        let ahead = self.skips.partition_point(|s| s.id < id);
        if let Some(skip) = ahead.checked_sub(1).map(|i| self.skips[i])
            && skip.at as usize > self.at
        {
            self.at = skip.at as usize;
            self.last = Some(skip.id);
        }
        self.skips = &self.skips[ahead..];
        while self.at < self.list.len() {
            let v = read_varint(self.list, &mut self.at);
            let next = self.last.map_or(v, |l| l.wrapping_add(v));
            self.last = Some(next);
            if next >= id {
                return next == id;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn a_seeker_answers_as_the_decoded_list_with_skips_written_or_found() {
        let mut rng = StdRng::seed_from_u64(7);
        for round in 0..300 {
            let mut ids: Vec<u32> = Vec::new();
            let mut id = rng.random_range(0..300);
            for _ in 0..rng.random_range(1..2_000) {
                ids.push(id);
                id += 1 + match rng.random_range(0..10) {
                    0 => rng.random_range(0..100_000),
                    _ => rng.random_range(0..20),
                };
            }
            let mut list = Vec::new();
            let mut written = Vec::new();
            put_list(&mut list, ids.iter().copied(), Some(&mut written));
            let mut found = Vec::new();
            assert!(valid_list(&list, u64::from(id), &mut found));
            assert_eq!(written.len(), ids.len() / SKIP_EVERY, "round {round}");
            for skips in [&written, &found, &Vec::new()] {
                // Ascending probes: members, neighbours and far ones.
                let mut probes: Vec<u32> = (0..rng.random_range(0..200))
                    .map(|_| match rng.random_range(0..3) {
                        0 => ids[rng.random_range(0..ids.len())],
                        1 => ids[rng.random_range(0..ids.len())] + 1,
                        _ => rng.random_range(0..id + 10),
                    })
                    .collect();
                probes.sort_unstable();
                probes.dedup();
                let mut seeker = Seeker::new(&list, skips);
                for p in probes {
                    assert_eq!(
                        seeker.contains(p),
                        ids.binary_search(&p).is_ok(),
                        "round {round}: {p}"
                    );
                }
            }
        }
    }

    #[test]
    fn skip_points_found_while_checking_point_where_decoding_resumes() {
        let ids: Vec<u32> = (0..1_000).map(|i| i * 3 + (i % 7) * 200).collect();
        let mut ids = ids;
        ids.sort_unstable();
        ids.dedup();
        let mut list = Vec::new();
        put_list(&mut list, ids.iter().copied(), None);
        let mut skips = Vec::new();
        assert!(valid_list(&list, 1 << 20, &mut skips));
        assert!(skips.len() >= 3);
        let mut last_at = 0;
        for skip in &skips {
            assert!(skip.at > last_at);
            last_at = skip.at;
            // The list decoded up to `at` ends with `id`.
            let mut upto = Vec::new();
            decode(&list[..skip.at as usize], |id| upto.push(id));
            assert_eq!(upto.last(), Some(&skip.id));
            assert!(upto.len() >= SKIP_EVERY);
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
            put_list(&mut list, ids.iter().copied(), None);
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
                valid_list(&list, limit, &mut Vec::new()),
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
