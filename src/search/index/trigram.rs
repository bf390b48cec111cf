//! What the index records of one file: the distinct trigrams of each of its
//! pieces, or the reason it cannot hold the file (then the file is always
//! scanned).
//!
//! A piece is a run of whole lines of at least [`PIECE_BYTES`] (the last one
//! may be shorter). Grep's matches never span lines, so a file can hold a
//! match only if one of its pieces holds all the match's trigrams: a large
//! file that holds a query's trigrams far apart from one another is ruled
//! out (docs/search-index.md § Pieces).
//!
//! A trigram is three consecutive bytes after ASCII case folding, packed
//! into the low 24 bits of a `u32`. Folding makes a case-insensitive query
//! as selective as a case-sensitive one (docs/search-index.md § Trigrams);
//! the planner folds its strings the same way, so a query trigram is always
//! the folded form of bytes the match contains. Three bytes that hold both
//! an ASCII capital and a small letter (`Dro`, `eX_`) are also recorded as
//! they are, tagged [`MIXED_CASE`]: a case-sensitive `Drop` then selects
//! the files holding `Drop`, not every file holding `drop`. Trigrams holding
//! a `\n` are left out: Grep's matches never span lines
//! (docs/search-index.md § Exactness).

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::OnceLock;

/// Largest file the index holds; larger ones are always scanned.
pub const MAX_INDEXED_FILE_BYTES: usize = 8 << 20;
/// Most distinct trigrams of one piece the index holds: a file with a piece
/// of more (random data on one long line) would match nearly every query
/// anyway.
pub const MAX_PIECE_TRIGRAMS: usize = 40_000;
/// Bytes of whole lines after which a file's piece ends.
///
/// Performance: on the Linux kernel, files over 64 KiB are 3% of the files
/// and half of the bytes, and as whole files they hold nearly every common
/// trigram, so they were candidates of most selective queries. Pieces of 16
/// KiB cut the bytes of large candidates 5x for `hello world` and 23x for
/// `unreachable_code_here` (docs/performance.md § Pieces), at the cost of
/// postings repeated across a large file's pieces.
pub const PIECE_BYTES: usize = 16 << 10;

/// A trigram: three folded bytes in the low 24 bits, or three bytes as
/// written and [`MIXED_CASE`].
pub type Trigram = u32;

/// The tag of a trigram recorded with its case ([`mixed_case`]).
pub const MIXED_CASE: Trigram = 1 << 24;

/// Why a file is not in the index (it is scanned by every Grep instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unindexable {
    /// It holds a NUL byte: Grep's binary detection decides per search.
    Binary,
    /// Over [`MAX_INDEXED_FILE_BYTES`].
    Huge,
    /// Not UTF-8: the planner reasons about UTF-8 text.
    InvalidUtf8,
    /// A piece of over [`MAX_PIECE_TRIGRAMS`] distinct trigrams.
    TooManyTrigrams,
}

/// A map keyed by trigram, hashed by [`hash`].
pub type TrigramMap<V> = HashMap<Trigram, V, BuildHasherDefault<TrigramHasher>>;

/// A keyed hash of a trigram.
///
/// Performance: the index build looks a trigram up once per (file, trigram)
/// pair, about 100 million times for the Linux kernel, where SipHash was a
/// fifth of the build (docs/performance.md § Build speed). One multiply and
/// shift mixes all 24 bits into both ends of the word (hash tables take
/// their slot from the low or the high bits). Trigrams come from users'
/// files, so the key is random per process: nobody can choose trigrams that
/// collide.
pub fn hash(t: Trigram) -> u64 {
    static KEY: OnceLock<u64> = OnceLock::new();
    let key = *KEY.get_or_init(|| RandomState::new().hash_one(0u8));
    let x = (u64::from(t) ^ key).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 32)
}

/// The [`Hasher`] of a [`TrigramMap`]: [`hash`] of the one `u32` written.
#[derive(Default)]
pub struct TrigramHasher(u64);

impl Hasher for TrigramHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u32` is reached for a `Trigram` key; any other key
        // still hashes, folded a word at a time.
        for chunk in bytes.chunks(4) {
            let mut word = [0; 4];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u32(u32::from_le_bytes(word));
        }
    }

    fn write_u32(&mut self, t: u32) {
        self.0 = hash(t ^ self.0 as u32);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The trigram recorded, besides the folded one, for `window` (three bytes
/// as written, packed by [`pack`]) when they hold both an ASCII capital and
/// a small letter; `None` for any other window (all one case, or no
/// letter), whose folded trigram says as much.
///
/// Performance: on the Linux kernel such windows add about 5% to the
/// postings, where recording every window with a capital would add 29%
/// (capitals in C are mostly macros, all one case); CamelCase and
/// capitalised words are what a case-sensitive query's folded trigrams
/// cannot tell apart (docs/performance.md § Mixed-case trigrams).
pub fn mixed_case(window: Trigram) -> Option<Trigram> {
    let bytes = [(window >> 16) as u8, (window >> 8) as u8, window as u8];
    let capital = bytes.iter().any(u8::is_ascii_uppercase);
    let small = bytes.iter().any(u8::is_ascii_lowercase);
    (capital && small && window < MIXED_CASE).then_some(window | MIXED_CASE)
}

/// ASCII lower case of one byte; every other byte is kept.
pub fn fold(byte: u8) -> u8 {
    byte.to_ascii_lowercase()
}

/// Packs three (already folded) bytes into a trigram.
pub fn pack(a: u8, b: u8, c: u8) -> Trigram {
    (u32::from(a) << 16) | (u32::from(b) << 8) | u32::from(c)
}

/// The trigrams of one file, piece by piece (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pieces {
    /// Every piece's sorted distinct trigrams, one piece after the other.
    trigrams: Vec<Trigram>,
    /// Where each piece ends in `trigrams`.
    ends: Vec<u32>,
}

impl Pieces {
    /// Each piece's sorted distinct trigrams, in file order.
    pub fn iter(&self) -> impl Iterator<Item = &[Trigram]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.trigrams[start as usize..end as usize])
    }

    /// How many pieces.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there is no piece.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        4 * (self.trigrams.len() + self.ends.len()) as u64
    }

    /// Appends a piece: its trigrams sorted and distinct.
    pub fn push(&mut self, piece: &[Trigram]) {
        self.trigrams.extend_from_slice(piece);
        self.ends.push(self.trigrams.len() as u32);
    }
}

impl From<Vec<Vec<Trigram>>> for Pieces {
    fn from(pieces: Vec<Vec<Trigram>>) -> Pieces {
        let mut out = Pieces::default();
        pieces.iter().for_each(|p| out.push(p));
        out
    }
}

/// The trigrams of `data` piece by piece, or why the file stays out. A file
/// always has at least one piece (empty for a file without trigrams).
pub fn extract(data: &[u8]) -> Result<Pieces, Unindexable> {
    if data.len() > MAX_INDEXED_FILE_BYTES {
        return Err(Unindexable::Huge);
    }
    if memchr::memchr(0, data).is_some() {
        return Err(Unindexable::Binary);
    }
    if std::str::from_utf8(data).is_err() {
        return Err(Unindexable::InvalidUtf8);
    }
    let mut seen = TrigramSet::for_bytes(data.len());
    let mut out = Pieces::default();
    let mut window = 0u32;
    let mut written = 0u32;
    let mut piece_start = 0;
    for (i, &byte) in data.iter().enumerate() {
        window = ((window << 8) | u32::from(fold(byte))) & 0xFF_FFFF;
        written = ((written << 8) | u32::from(byte)) & 0xFF_FFFF;
        if i >= 2 && !window_has_newline(window) {
            let fresh =
                seen.insert(window) | mixed_case(written).is_some_and(|exact| seen.insert(exact));
            if fresh && seen.distinct.len() > MAX_PIECE_TRIGRAMS {
                return Err(Unindexable::TooManyTrigrams);
            }
        }
        // No window across a newline is kept, so a piece ending at one
        // shares no trigram window with the next.
        if byte == b'\n' && i + 1 - piece_start >= PIECE_BYTES {
            seen.end_piece(&mut out);
            piece_start = i + 1;
        }
    }
    // A last piece without trigrams adds nothing a query could need, unless
    // it is the only one.
    if out.is_empty() || !seen.distinct.is_empty() {
        seen.end_piece(&mut out);
    }
    Ok(out)
}

fn window_has_newline(t: Trigram) -> bool {
    t & 0xFF == u32::from(b'\n')
        || (t >> 8) & 0xFF == u32::from(b'\n')
        || t >> 16 == u32::from(b'\n')
}

/// The distinct trigrams of one piece, in order of first sight.
///
/// Performance: a file of n bytes has about n windows but, for source text,
/// only a third as many distinct trigrams. Sorting every window and then
/// dropping repeats was a third of the index build (`perf`, docs/performance.md
/// § Build speed); an open-addressed set sized to the file drops repeats at
/// one multiply and probe each, so only the distinct trigrams are sorted.
struct TrigramSet {
    /// Open-addressed slots, 0 when empty: trigram 0 is three NUL bytes,
    /// which an indexed file never holds.
    slots: Vec<Trigram>,
    /// 64 minus log2 of the slot count.
    shift: u32,
    distinct: Vec<Trigram>,
    /// The slots `distinct` took, emptied when a piece ends (clearing
    /// them all would cost the whole table per piece).
    taken: Vec<u32>,
}

impl TrigramSet {
    /// A set that holds up to [`MAX_PIECE_TRIGRAMS`] (and the one past it
    /// that refuses the file) at most half full.
    fn for_bytes(len: usize) -> TrigramSet {
        let most = len.min(MAX_PIECE_TRIGRAMS + 1);
        let slots = (2 * most).next_power_of_two().max(64);
        let expected = most.min(len.min(PIECE_BYTES) / 3 + 16);
        TrigramSet {
            slots: vec![0; slots],
            shift: 64 - slots.trailing_zeros(),
            distinct: Vec::with_capacity(expected),
            taken: Vec::with_capacity(expected),
        }
    }

    /// Appends the piece gathered so far to `out`, sorted, and empties the
    /// set for the next one.
    fn end_piece(&mut self, out: &mut Pieces) {
        self.distinct.sort_unstable();
        out.push(&self.distinct);
        self.distinct.clear();
        for &at in &self.taken {
            self.slots[at as usize] = 0;
        }
        self.taken.clear();
    }

    /// Adds `t` (never 0); true when it was not there yet.
    fn insert(&mut self, t: Trigram) -> bool {
        let mask = self.slots.len() - 1;
        // The keyed hash's top bits pick the slot.
        let mut at = (hash(t) >> self.shift) as usize;
        loop {
            match self.slots[at] {
                0 => {
                    self.slots[at] = t;
                    self.distinct.push(t);
                    self.taken.push(at as u32);
                    return true;
                }
                same if same == t => return false,
                _ => at = (at + 1) & mask,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn trigrams_are_folded_distinct_and_skip_newlines() {
        let t = extract(b"AbCabc\nxyz").unwrap();
        let want = vec![
            pack(b'a', b'b', b'c'),
            pack(b'b', b'c', b'a'),
            pack(b'c', b'a', b'b'),
            pack(b'x', b'y', b'z'),
            // Windows with both cases, as written: `AbC`, `bCa`, `Cab`.
            pack(b'A', b'b', b'C') | MIXED_CASE,
            pack(b'b', b'C', b'a') | MIXED_CASE,
            pack(b'C', b'a', b'b') | MIXED_CASE,
        ];
        let mut want = want;
        want.sort_unstable();
        assert_eq!(t, Pieces::from(vec![want]));
    }

    /// Every window folded, and mixed-case ones also as written, newline
    /// windows dropped, sorted, repeats dropped.
    fn naive(data: &[u8]) -> Vec<Trigram> {
        let mut out: Vec<Trigram> = data
            .windows(3)
            .filter(|w| !w.contains(&b'\n'))
            .flat_map(|w| {
                let mixed =
                    w.iter().any(u8::is_ascii_uppercase) && w.iter().any(u8::is_ascii_lowercase);
                let folded = pack(fold(w[0]), fold(w[1]), fold(w[2]));
                [
                    Some(folded),
                    mixed.then(|| pack(w[0], w[1], w[2]) | MIXED_CASE),
                ]
            })
            .flatten()
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The pieces as the module doc defines them: whole lines, ending at
    /// the first newline at or past [`PIECE_BYTES`]; a last piece without
    /// trigrams dropped unless it is the only one.
    fn naive_pieces(data: &[u8]) -> Vec<Vec<Trigram>> {
        let mut pieces = Vec::new();
        let mut start = 0;
        for (i, &byte) in data.iter().enumerate() {
            if byte == b'\n' && i + 1 - start >= PIECE_BYTES {
                pieces.push(naive(&data[start..=i]));
                start = i + 1;
            }
        }
        let last = naive(&data[start..]);
        if pieces.is_empty() || !last.is_empty() {
            pieces.push(last);
        }
        pieces
    }

    #[test]
    fn the_set_finds_what_sorting_every_window_finds() {
        // Texts over alphabets of 3 to 95 letters, with newlines or on one
        // line, so the set sees few and many repeats, sizes around its
        // growth points, one piece and several, and a piece of too many.
        let mut rng = StdRng::seed_from_u64(0x2545_F491_4F6C_DD1D);
        for lines in [true, false] {
            for letters in [3u8, 10, 40, 95] {
                for len in [0, 1, 2, 3, 64, 1000, 50_000, 70_000] {
                    let text: Vec<u8> = (0..len)
                        .map(|_| match rng.random_range(0..=letters) {
                            0 if lines => b'\n',
                            0 => b'x',
                            n => b' ' + n - 1,
                        })
                        .collect();
                    let want = naive_pieces(&text);
                    let case = format!("{letters} letters, {len} bytes, lines {lines}");
                    match extract(&text) {
                        Ok(got) => assert_eq!(got, Pieces::from(want.clone()), "{case}"),
                        Err(why) => {
                            assert_eq!(why, Unindexable::TooManyTrigrams);
                            let most = want.iter().map(Vec::len).max();
                            assert!(most > Some(MAX_PIECE_TRIGRAMS), "{case}");
                        }
                    }
                    if lines && letters == 10 && len >= 50_000 {
                        assert!(want.len() >= 3, "{case}: several pieces");
                    }
                }
            }
        }
    }

    #[test]
    fn files_the_index_cannot_hold_say_why() {
        assert_eq!(extract(b"a\0b"), Err(Unindexable::Binary));
        assert_eq!(extract(b"caf\xe9"), Err(Unindexable::InvalidUtf8));
        let huge = vec![b'a'; MAX_INDEXED_FILE_BYTES + 1];
        assert_eq!(extract(&huge), Err(Unindexable::Huge));
        // Every 3-letter word over 40 distinct folded letters: 64,000 trigrams.
        let letters: Vec<char> = "abcdefghijklmnopqrstuvwxyz0123456789!#$%".chars().collect();
        let mut text = String::new();
        for a in &letters[..40] {
            for b in &letters[..40] {
                for c in &letters[..40] {
                    text.extend([*a, *b, *c, ' ']);
                }
            }
        }
        assert_eq!(extract(text.as_bytes()), Err(Unindexable::TooManyTrigrams));
        assert_eq!(extract(b"").unwrap(), Pieces::from(vec![vec![]]));
    }
}
