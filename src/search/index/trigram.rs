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
    let mut out = Vec::with_capacity((data.len() / 4).min(MAX_FILE_TRIGRAMS));
    let mut window = 0u32;
    for (i, &byte) in data.iter().enumerate() {
        window = ((window << 8) | u32::from(fold(byte))) & 0xFF_FFFF;
        if i >= 2 && !window_has_newline(window) {
            out.push(window);
        }
        // Sort and drop repeats now and then, so a large file never holds a
        // trigram per byte.
        if out.len() >= 4 * MAX_FILE_TRIGRAMS {
            dedup(&mut out);
            if out.len() > MAX_FILE_TRIGRAMS {
                return Err(Unindexable::TooManyTrigrams);
            }
        }
    }
    dedup(&mut out);
    if out.len() > MAX_FILE_TRIGRAMS {
        return Err(Unindexable::TooManyTrigrams);
    }
    Ok(out)
}

fn window_has_newline(t: Trigram) -> bool {
    t & 0xFF == u32::from(b'\n')
        || (t >> 8) & 0xFF == u32::from(b'\n')
        || t >> 16 == u32::from(b'\n')
}

fn dedup(v: &mut Vec<Trigram>) {
    v.sort_unstable();
    v.dedup();
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
