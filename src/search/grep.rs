//! Grep's content matching, on ripgrep's own crates.
//!
//! A [`FileSearcher`] is made once per thread and reused for every file: a new
//! `Searcher` per file (64 KiB buffer each) cost 12–29% (docs/performance.md § ripgrep's crates).
//! Binary files are detected the way ripgrep does for files it walks (quit at
//! the first NUL byte) and counted in the summary; as in ripgrep, lines that
//! matched before the NUL was seen (a read file is searched buffer by buffer)
//! are still reported, while an in-memory file is checked whole first.
//! Which lines those are depends on the read buffer's size, and the searcher's
//! buffer grows (and never shrinks) on a line longer than it; so after a file
//! larger than the initial buffer the searcher is rebuilt, and every file is
//! read as ripgrep reads it with a fresh 64 KiB buffer (without this, the
//! 6 lines ripgrep reports before the NUL of its `sherlock-nul.txt` were lost
//! when a worker had searched a long-line file before).
//!
//! One file's matches are collected before they are emitted (the Filesystem
//! tier restores path order across its workers), so the collection is bounded:
//! it stops at the run's remaining `max_results` (one match for
//! `max_results=1`, however many lines match), and past
//! [`MAX_FILE_HITS_BYTES`] of results the rest of the file is left out and
//! listed in the summary's problems. A line longer than [`MAX_LINE_BYTES`]
//! (minified code, a one-line dump) is cut there and ends with
//! `… [line truncated: N bytes]`; so is a match that long.

use super::index::passes::Known;
use super::line_literal::GrepMatcher;
use super::prefix::{self, Prefix};
use super::room;
use super::run::FileCounts;
use super::{Admit, FileHits, GrepOptions, LineHit, SearchKind, SearchRun};
use crate::path::VfsPath;
use grep_matcher::Matcher;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use std::cell::Cell;
use std::io;
use std::time::SystemTime;

/// A reusable per-thread searcher for one Grep run.
pub struct FileSearcher<'r> {
    run: &'r SearchRun,
    grep: &'r GrepOptions,
    /// This searcher's own copy of the Grep's regex. Performance: a regex
    /// keeps its scratch space in a pool whose first user takes it without
    /// a lock; every other thread (a window's second worker) took and gave
    /// back a cache through a mutex per file, 5% of a selective regex Grep
    /// on State. A clone has a pool of its own (docs/performance.md §
    /// Pinned reads, the block cache, and what the unindexable gap is).
    matcher: GrepMatcher,
    builder: SearcherBuilder,
    searcher: Searcher,
    /// Set on a window's worker: the files searched (and skipped as binary
    /// or too large) are counted here, for the window to add in walk order
    /// (`super::window`), rather than in the run.
    held: Option<Cell<FileCounts>>,
}

/// ripgrep's binary detection: a file is binary from its first NUL byte
/// on, and its search stops there.
fn binary_detection() -> BinaryDetection {
    BinaryDetection::quit(0)
}

/// The largest file after which a searcher keeps its read buffer. The
/// buffer (64 KiB) grows only to hold a longer line, to at most twice the
/// file, so after a file this size a worker keeps at most 512 KiB; after a
/// larger one the searcher is built again, which frees the buffer.
/// Performance: building one allocates a zeroed 64 KiB buffer, which
/// jemalloc gets by purging pages (`madvise`, a TLB shootdown on every
/// core) that the next read faults in again; done after every file over
/// 64 KiB, it was 15% of a selective regex's CPU on the Filesystem tier
/// (docs/performance.md § A searcher's buffer kept across files).
const KEEP_BUFFER_BYTES: u64 = 256 << 10;
/// Longest line (and match) text a result carries; longer ones are cut.
pub const MAX_LINE_BYTES: usize = 16 << 10;
/// Estimated memory of one file's collected results beyond which the rest
/// of the file is left out (reported as a problem): about 200,000 short lines.
pub const MAX_FILE_HITS_BYTES: usize = 16 << 20;

/// A reader that counts the bytes it gave.
struct Counted<R> {
    inner: R,
    bytes: u64,
}

impl<R: io::Read> io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}

impl<'r> FileSearcher<'r> {
    /// A searcher for `run`; `None` when the run is a Glob.
    pub fn new(run: &'r SearchRun) -> Option<FileSearcher<'r>> {
        let SearchKind::Grep(grep) = &run.spec().kind else {
            return None;
        };
        let mut builder = SearcherBuilder::new();
        builder
            .line_number(true)
            .binary_detection(binary_detection())
            .before_context(grep.before_context)
            .after_context(grep.after_context);
        let searcher = builder.build();
        Some(FileSearcher {
            run,
            grep,
            matcher: grep.matcher.clone(),
            builder,
            searcher,
            held: None,
        })
    }

    /// This searcher counting its files apart, for a window's worker
    /// ([`FileSearcher::take_counts`]).
    pub fn holding_counts(mut self) -> FileSearcher<'r> {
        self.held = Some(Cell::default());
        self
    }

    /// What this searcher counted apart since the last call.
    pub fn take_counts(&mut self) -> FileCounts {
        self.held.as_ref().map(Cell::take).unwrap_or_default()
    }

    /// Counts with `count`, apart or in the run.
    fn count(&self, count: impl FnOnce(&mut FileCounts)) {
        let mut counts = FileCounts::default();
        count(&mut counts);
        match &self.held {
            Some(held) => held.set(held.get().plus(counts)),
            None => self.run.add_file_counts(counts),
        }
    }

    /// Counts a file searched without being read: the search index ruled
    /// a match out, so it holds no binary file and the search would find
    /// nothing.
    pub fn searched_unread(&self) {
        self.count(|c| c.files_searched += 1);
    }

    /// True when the file at `rel` (relative to the search root) passes the
    /// glob filter and size limit; counts it as skipped when too large.
    pub fn wants(&self, rel: &str, size: u64) -> bool {
        match self.grep.admits(rel, size) {
            Admit::Filtered => false,
            Admit::TooLarge => {
                self.count(|c| c.skipped_too_large += 1);
                false
            }
            Admit::Searched => true,
        }
    }

    /// True when the file at `rel` (relative to the search root) passes the
    /// glob filter. A walker can check this before it opens the file.
    pub fn accepts(&self, rel: &str) -> bool {
        self.grep.accepts(rel)
    }

    /// True when a file of `size` bytes is within the size limit; counts it
    /// as skipped otherwise.
    pub fn within_size(&self, size: u64) -> bool {
        if size > self.grep.max_file_bytes {
            self.count(|c| c.skipped_too_large += 1);
            return false;
        }
        true
    }

    /// Searches an in-memory file and returns its hits (`None`: no match, or
    /// binary, counted).
    ///
    /// `known`: what the search index knows of this very version.
    /// - Text ([`Known::NulFree`]): `data` holds no NUL byte, so binary
    ///   detection, which could find nothing, is skipped. Performance: it
    ///   is a pass over the file before the search, a tenth of a selective
    ///   regex Grep's CPU on State (docs/performance.md § Pinned reads, the
    ///   block cache, and what the unindexable gap is).
    /// - Text whose matches all lie in its first pieces
    ///   ([`Known::MatchesWithin`]): only those pieces are searched, and
    ///   the lines after them that after-context shows (`super::prefix`).
    pub fn search_slice(
        &mut self,
        path: &VfsPath,
        modified: SystemTime,
        data: &[u8],
        known: Known,
    ) -> Option<FileHits> {
        let data = match known {
            Known::MatchesWithin(pieces) => {
                &data[..prefix::end(data, pieces, self.grep.after_context)]
            }
            Known::Nothing | Known::NulFree => data,
        };
        let nul_free = known != Known::Nothing;
        let mut sink = Collect::new(&self.matcher, self.grep, self.run);
        if nul_free {
            self.searcher.set_binary_detection(BinaryDetection::none());
        }
        let outcome = self.searcher.search_slice(&self.matcher, data, &mut sink);
        if nul_free {
            self.searcher.set_binary_detection(binary_detection());
        }
        self.finish(path, modified, sink, outcome)
    }

    /// Searches a file of `size` bytes read from `reader` (the Filesystem
    /// tier). The searcher's buffer grows to hold the longest line, up to
    /// twice the file, so a large file holds room for that first
    /// (`super::room`); `None` also when the run must stop while waiting.
    /// At most `size` bytes are read: another process may append to the
    /// file while it is searched, and reading on to its end would pass the
    /// room held, the size limit and the version reported (its `fstat`'s),
    /// without bound. So the file is searched as it was at that `fstat`.
    pub fn search_reader(
        &mut self,
        path: &VfsPath,
        modified: SystemTime,
        size: u64,
        reader: impl io::Read,
    ) -> Option<FileHits> {
        let _room = room::hold(self.run, size.saturating_mul(2))?;
        let mut sink = Collect::new(&self.matcher, self.grep, self.run);
        let mut reader = Counted {
            inner: io::Read::take(reader, size),
            bytes: 0,
        };
        let outcome = self
            .searcher
            .search_reader(&self.matcher, &mut reader, &mut sink);
        if reader.bytes > KEEP_BUFFER_BYTES {
            self.searcher = self.builder.build();
        }
        self.finish(path, modified, sink, outcome)
    }

    /// [`FileSearcher::search_reader`] of a file whose matches all lie in
    /// its first `pieces` pieces (`Known::MatchesWithin`): it is read no
    /// further than those and the lines after-context shows
    /// (`super::prefix`).
    pub fn search_reader_within(
        &mut self,
        path: &VfsPath,
        modified: SystemTime,
        size: u64,
        reader: impl io::Read,
        pieces: u32,
    ) -> Option<FileHits> {
        let reader = Prefix::new(reader, pieces, self.grep.after_context);
        self.search_reader(path, modified, size, reader)
    }

    fn finish(
        &self,
        path: &VfsPath,
        modified: SystemTime,
        sink: Collect<'_>,
        outcome: io::Result<()>,
    ) -> Option<FileHits> {
        if let Err(err) = outcome {
            self.run
                .problem(path.as_str(), crate::error::Error::io(path.as_str(), err));
            return None;
        }
        if sink.bytes >= MAX_FILE_HITS_BYTES {
            self.run.problem(
                path.as_str(),
                crate::error::Error::TooLarge(format!(
                    "{path}: matches past the first {} MiB of results in this file were left \
                     out; narrow the pattern or set max_count_per_file",
                    MAX_FILE_HITS_BYTES >> 20
                )),
            );
        }
        // Like ripgrep, lines matched before the binary data showed up
        // (past the first buffer of a read file) are still reported.
        match sink.binary {
            true => self.count(|c| c.skipped_binary += 1),
            false => self.count(|c| c.files_searched += 1),
        }
        if sink.lines.is_empty() {
            return None;
        }
        Some(FileHits {
            path: path.clone(),
            modified,
            lines: sink.lines,
        })
    }
}

/// Collects one file's lines; stops at the per-file limit, at the run's
/// remaining results, at [`MAX_FILE_HITS_BYTES`], at binary data, and when
/// the run must stop.
struct Collect<'a> {
    matcher: &'a GrepMatcher,
    /// Matching lines wanted at most: the per-file limit or the results the
    /// run may still send, whichever is lower.
    max_count: u64,
    run: &'a SearchRun,
    matches: u64,
    /// Estimated memory of `lines`.
    bytes: usize,
    binary: bool,
    lines: Vec<LineHit>,
}

impl<'a> Collect<'a> {
    fn new(matcher: &'a GrepMatcher, grep: &'a GrepOptions, run: &'a SearchRun) -> Self {
        Collect {
            matcher,
            max_count: grep.max_count_per_file.min(run.remaining_results()),
            run,
            matches: 0,
            bytes: 0,
            binary: false,
            lines: Vec::new(),
        }
    }

    /// Adds a line; false when the file's results are full.
    fn add(&mut self, hit: LineHit) -> bool {
        self.bytes += hit.line.len() + hit.matched.len() + std::mem::size_of::<LineHit>();
        self.lines.push(hit);
        self.bytes < MAX_FILE_HITS_BYTES
    }
}

fn trim_terminator(bytes: &[u8]) -> &[u8] {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

/// The text of a line or match, cut at [`MAX_LINE_BYTES`] (on a character
/// boundary) with a marker giving the full length.
fn clip(bytes: &[u8]) -> String {
    if bytes.len() <= MAX_LINE_BYTES {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut end = MAX_LINE_BYTES;
    // Back off a cut UTF-8 sequence (continuation bytes are 0b10xxxxxx).
    while end > MAX_LINE_BYTES - 3 && bytes[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    format!(
        "{}… [line truncated: {} bytes]",
        String::from_utf8_lossy(&bytes[..end]),
        bytes.len()
    )
}

impl Sink for Collect<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let line = trim_terminator(m.bytes());
        let matched = match self.matcher.find(line) {
            Ok(Some(range)) => clip(&line[range]),
            _ => String::new(),
        };
        let room = self.add(LineHit {
            line_number: m.line_number().unwrap_or(0),
            line: clip(line),
            matched,
            is_context: false,
        });
        self.matches += 1;
        Ok(room && self.matches < self.max_count && !self.run.should_halt())
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        Ok(self.add(LineHit {
            line_number: c.line_number().unwrap_or(0),
            line: clip(trim_terminator(c.bytes())),
            matched: String::new(),
            is_context: true,
        }))
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        // As ripgrep's printer does: the searcher, in quit mode, stops at the
        // binary byte itself after reporting the lines before it.
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{Budgets, GrepRequest, SearchSpec};
    use std::io::{Seek, Write};
    use std::time::Duration;

    /// A file appended to after its `fstat` is searched as it was then: the
    /// line added later is not read, however long it grows (unbounded
    /// before: the searcher read on to the file's end).
    #[test]
    fn a_file_appended_to_while_searched_is_read_only_to_its_size() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"hay\nneedle one\n").unwrap();
        let size = file.metadata().unwrap().len();
        file.write_all(b"needle two, appended after the fstat\n")
            .unwrap();
        file.rewind().unwrap();

        let request = GrepRequest {
            pattern: "needle",
            ..GrepRequest::default()
        };
        let root = VfsPath::parse("/t").unwrap();
        let spec = SearchSpec::grep(root, request, Budgets::default()).unwrap();
        let (tx, _rx) = tokio::sync::mpsc::channel(16);
        let run = SearchRun::new(spec, tx, Duration::from_secs(5));
        let mut searcher = FileSearcher::new(&run).unwrap();
        let path = VfsPath::parse("/t/f.txt").unwrap();
        let hits = searcher
            .search_reader(&path, SystemTime::UNIX_EPOCH, size, &file)
            .expect("the first needle is found");
        let lines: Vec<&str> = hits.lines.iter().map(|l| l.line.as_str()).collect();
        assert_eq!(lines, ["needle one"]);
    }
}
