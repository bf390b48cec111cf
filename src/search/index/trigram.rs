//! What the index records of one file: its distinct trigrams, or the reason
//! it cannot hold the file (then the file is always scanned).
//!
//! A trigram is three consecutive bytes after ASCII case folding, packed
//! into the low 24 bits of a `u32`. Folding makes a case-insensitive query
//! as selective as a case-sensitive one (docs/search-index.md § Trigrams);
//! the planner folds its strings the same way, so a query trigram is always
//! the folded form of bytes the match contains. Trigrams holding a `\n` are
//! left out: Grep's matches never span lines (docs/search-index.md §
//! Exactness).

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::OnceLock;

/// Largest file the index holds; larger ones are always scanned.
pub const MAX_INDEXED_FILE_BYTES: usize = 8 << 20;
/// Most distinct trigrams of a file the index holds: a file with more
/// (random data, a dictionary) would match nearly every query anyway.
pub const MAX_FILE_TRIGRAMS: usize = 40_000;

/// A trigram: three folded bytes in the low 24 bits.
pub type Trigram = u32;

/// Why a file is not in the index (it is scanned by every Grep instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unindexable {
    /// It holds a NUL byte: Grep's binary detection decides per search.
    Binary,
    /// Over [`MAX_INDEXED_FILE_BYTES`].
    Huge,
    /// Not UTF-8: the planner reasons about UTF-8 text.
    InvalidUtf8,
    /// Over [`MAX_FILE_TRIGRAMS`] distinct trigrams.
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

/// ASCII lower case of one byte; every other byte is kept.
pub fn fold(byte: u8) -> u8 {
    byte.to_ascii_lowercase()
}

/// Packs three (already folded) bytes into a trigram.
pub fn pack(a: u8, b: u8, c: u8) -> Trigram {
    (u32::from(a) << 16) | (u32::from(b) << 8) | u32::from(c)
}

/// The sorted, distinct trigrams of `data`, or why the file stays out.
pub fn extract(data: &[u8]) -> Result<Vec<Trigram>, Unindexable> {
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
    let mut window = 0u32;
    for (i, &byte) in data.iter().enumerate() {
        window = ((window << 8) | u32::from(fold(byte))) & 0xFF_FFFF;
        if i >= 2
            && !window_has_newline(window)
            && seen.insert(window)
            && seen.distinct.len() > MAX_FILE_TRIGRAMS
        {
            return Err(Unindexable::TooManyTrigrams);
        }
    }
    let mut out = seen.distinct;
    out.sort_unstable();
    Ok(out)
}

fn window_has_newline(t: Trigram) -> bool {
    t & 0xFF == u32::from(b'\n')
        || (t >> 8) & 0xFF == u32::from(b'\n')
        || t >> 16 == u32::from(b'\n')
}

/// The distinct trigrams of one file, in order of first sight.
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
}

impl TrigramSet {
    /// A set that holds up to [`MAX_FILE_TRIGRAMS`] (and the one past it
    /// that refuses the file) at most half full.
    fn for_bytes(len: usize) -> TrigramSet {
        let most = len.min(MAX_FILE_TRIGRAMS + 1);
        let slots = (2 * most).next_power_of_two().max(64);
        TrigramSet {
            slots: vec![0; slots],
            shift: 64 - slots.trailing_zeros(),
            distinct: Vec::with_capacity(most.min(len / 3 + 16)),
        }
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

    #[test]
    fn trigrams_are_folded_distinct_and_skip_newlines() {
        let t = extract(b"AbCabc\nxyz").unwrap();
        let want = vec![
            pack(b'a', b'b', b'c'),
            pack(b'b', b'c', b'a'),
            pack(b'c', b'a', b'b'),
            pack(b'x', b'y', b'z'),
        ];
        let mut want = want;
        want.sort_unstable();
        assert_eq!(t, want);
    }

    /// Every window folded, newline windows dropped, sorted, repeats dropped.
    fn naive(data: &[u8]) -> Vec<Trigram> {
        let mut out: Vec<Trigram> = data
            .windows(3)
            .filter(|w| !w.contains(&b'\n'))
            .map(|w| pack(fold(w[0]), fold(w[1]), fold(w[2])))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    #[test]
    fn the_set_finds_what_sorting_every_window_finds() {
        // Texts over alphabets of 3 to 95 letters with newlines, so the set
        // sees few and many repeats, and sizes around its growth points.
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for letters in [3u8, 10, 40, 95] {
            for len in [0, 1, 2, 3, 64, 1000, 50_000] {
                let text: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        match (seed % u64::from(letters + 1)) as u8 {
                            0 => b'\n',
                            n => b' ' + n - 1,
                        }
                    })
                    .collect();
                let want = naive(&text);
                match extract(&text) {
                    Ok(got) => assert_eq!(got, want, "{letters} letters, {len} bytes"),
                    Err(why) => {
                        assert_eq!(why, Unindexable::TooManyTrigrams);
                        assert!(
                            want.len() > MAX_FILE_TRIGRAMS,
                            "{letters} letters, {len} bytes"
                        );
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
        assert_eq!(extract(b"").unwrap(), Vec::<Trigram>::new());
    }
}
