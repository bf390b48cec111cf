//! The part of a file a Grep must search when the search index knows that
//! every match lies in its first pieces (`index::passes::Known::MatchesWithin`):
//! from its start to the end of those pieces, cut where
//! `index::trigram::extract` cuts them, plus the lines after-context shows.
//! What comes before is the file's own start, so line numbers and
//! before-context are the whole file's (docs/search-index.md § Exactness).
//!
//! One state machine finds that end as the file's bytes pass, whole (a
//! State or Store file in memory) or read by read (a Filesystem file,
//! which [`Prefix`] stops reading there).

use super::index::trigram::PIECE_BYTES;
use std::io;

/// Finds where the prefix ends, fed the file's bytes in order.
#[derive(Clone, Copy, Debug)]
pub struct PrefixEnd {
    /// Pieces still to pass.
    pieces: u32,
    /// Where the pieces and lines passed so far end (a file offset): the
    /// start of the next piece, then of the next line.
    passed: u64,
    /// Lines after the pieces still to pass.
    lines: usize,
}

impl PrefixEnd {
    /// The end of the first `pieces` pieces and the `lines` lines after
    /// them.
    pub fn new(pieces: u32, lines: usize) -> PrefixEnd {
        PrefixEnd {
            pieces,
            passed: 0,
            lines,
        }
    }

    /// Given the file's next bytes `chunk`, at offset `at`, where the
    /// prefix ends, when it ends within them (or ended before them).
    /// A piece ends after the first `\n` that makes it [`PIECE_BYTES`]
    /// long, a line after its `\n`. Costs a `memchr` per piece from
    /// [`PIECE_BYTES`] into it, and one per line.
    pub fn feed(&mut self, chunk: &[u8], at: u64) -> Option<u64> {
        let end = at + chunk.len() as u64;
        while self.pieces > 0 {
            let from = self.passed + PIECE_BYTES as u64 - 1;
            let newline = (from < end)
                .then(|| memchr::memchr(b'\n', &chunk[from.saturating_sub(at) as usize..]))
                .flatten()?;
            self.passed = from.max(at) + newline as u64 + 1;
            self.pieces -= 1;
        }
        while self.lines > 0 {
            let from = self.passed.max(at);
            let newline = (from < end)
                .then(|| memchr::memchr(b'\n', &chunk[(from - at) as usize..]))
                .flatten()?;
            self.passed = from + newline as u64 + 1;
            self.lines -= 1;
        }
        Some(self.passed)
    }
}

/// Where the prefix of `data` (a whole file) ends; the end of `data` when
/// it has fewer pieces or lines.
pub fn end(data: &[u8], pieces: u32, lines: usize) -> usize {
    PrefixEnd::new(pieces, lines)
        .feed(data, 0)
        .map_or(data.len(), |end| end as usize)
}

/// A reader of a file that ends where the prefix does: a Filesystem
/// candidate is read no further.
pub struct Prefix<R> {
    inner: R,
    end: PrefixEnd,
    at: u64,
    done: bool,
}

impl<R> Prefix<R> {
    /// Reads `inner`, a file from its start, up to the end of its first
    /// `pieces` pieces and `lines` lines after them.
    pub fn new(inner: R, pieces: u32, lines: usize) -> Prefix<R> {
        Prefix {
            inner,
            end: PrefixEnd::new(pieces, lines),
            at: 0,
            done: false,
        }
    }
}

impl<R: io::Read> io::Read for Prefix<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        let n = self.inner.read(buf)?;
        let kept = match self.end.feed(&buf[..n], self.at) {
            Some(end) => {
                self.done = true;
                (end - self.at) as usize
            }
            None => n,
        };
        self.at += n as u64;
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::index::trigram::extract;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::io::Read;

    /// A reader handing out `data` in reads of random lengths.
    struct Choppy<'a> {
        data: &'a [u8],
        rng: StdRng,
    }

    impl Read for Choppy<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            // At least a byte while any is left: a read of none is the end.
            let most = buf.len().min(self.data.len());
            let n = self.rng.random_range(most.min(1)..=most);
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn the_prefix_ends_where_extract_cuts_and_lines_end() {
        let mut rng = StdRng::seed_from_u64(11);
        for round in 0..40 {
            let len = rng.random_range(0..120_000);
            let text: Vec<u8> = (0..len)
                .map(|_| match rng.random_range(0..40) {
                    0 => b'\n',
                    n => b'a' + n % 26,
                })
                .collect();
            // The cuts as docs/search-index.md defines pieces.
            let mut cuts = vec![0];
            for (i, &byte) in text.iter().enumerate() {
                if byte == b'\n' && i + 1 - cuts.last().unwrap() >= PIECE_BYTES {
                    cuts.push(i + 1);
                }
            }
            let line_ends: Vec<usize> = memchr::memchr_iter(b'\n', &text).map(|i| i + 1).collect();
            for pieces in 0..cuts.len() + 2 {
                let piece_end = cuts.get(pieces).copied().unwrap_or(text.len());
                for lines in [0, 1, 2, 7] {
                    let want = match lines {
                        0 => piece_end,
                        _ => line_ends
                            .iter()
                            .filter(|&&e| e > piece_end)
                            .nth(lines - 1)
                            .copied()
                            .unwrap_or(text.len()),
                    };
                    let got = end(&text, pieces as u32, lines);
                    assert_eq!(got, want, "round {round} pieces {pieces} lines {lines}");
                    // Read by reads of random lengths, the same bytes.
                    let mut read = Vec::new();
                    let choppy = Choppy {
                        data: &text,
                        rng: StdRng::seed_from_u64(round),
                    };
                    Prefix::new(choppy, pieces as u32, lines)
                        .read_to_end(&mut read)
                        .unwrap();
                    assert_eq!(read, &text[..want], "round {round} pieces {pieces}");
                }
            }
            // Each piece extract gave holds the trigrams of its range.
            let extracted = extract(&text).unwrap();
            for (n, piece) in extracted.iter().enumerate() {
                let range = end(&text, n as u32, 0)..end(&text, n as u32 + 1, 0);
                let alone = extract(&text[range]).unwrap();
                assert_eq!(alone.len(), 1, "round {round} piece {n}");
                assert_eq!(
                    alone.iter().next().unwrap(),
                    piece,
                    "round {round} piece {n}"
                );
            }
        }
    }
}
