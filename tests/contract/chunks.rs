//! ReadBytes and WriteBytes at the tier: files in pieces, never whole in
//! memory where the tier can help it, and an upload that fails halfway
//! changes nothing.

use crate::harness::{Tier, any, create_only, expect_err, pattern};
use agentvfs::error::{Error, Result};
use tonic::Code;

/// Reads `rel` in pieces of at most `max_chunk` bytes, checking every
/// piece's size; returns the pieces.
fn pieces(t: &Tier, rel: &str, max_chunk: usize) -> Vec<Vec<u8>> {
    let (entry, reader) = t
        .backend
        .read_chunks(&t.scope, &t.path(rel), max_chunk)
        .unwrap();
    assert_eq!(entry, t.stat(rel).unwrap(), "the entry read_chunks reports");
    let pieces: Vec<Vec<u8>> = reader.collect::<Result<_>>().unwrap();
    for (i, piece) in pieces.iter().enumerate() {
        assert!(piece.len() <= max_chunk, "piece {i}: {} bytes", piece.len());
    }
    pieces
}

/// A multi-MiB file comes back in pieces no larger than asked, non-empty,
/// which reassemble into the file, for piece sizes below, at and above the
/// Store's 1 MiB chunks.
pub fn read_chunks_reassemble_a_large_file(t: &Tier) {
    let data = pattern((3 << 20) + 17);
    t.write("big", data.clone());
    for max_chunk in [1000, 256 << 10, 1 << 20, 4 << 20] {
        let got = pieces(t, "big", max_chunk);
        assert!(got.iter().all(|p| !p.is_empty()), "max_chunk {max_chunk}");
        let min_pieces = data.len().div_ceil(max_chunk);
        assert!(got.len() >= min_pieces, "max_chunk {max_chunk}");
        assert!(
            got.concat() == data,
            "max_chunk {max_chunk}: content differs"
        );
    }
}

/// A small file reassembles the same way; an empty file is one empty piece,
/// so a reader always yields at least one.
pub fn read_chunks_of_small_and_empty_files(t: &Tier) {
    t.write("small", "0123456789");
    assert_eq!(pieces(t, "small", 3).concat(), b"0123456789");
    assert_eq!(pieces(t, "small", 100).concat(), b"0123456789");
    t.write("empty", "");
    assert_eq!(pieces(t, "empty", 100), [Vec::<u8>::new()]);
}

/// read_chunks refuses a directory and a missing file at once, before any
/// piece.
pub fn read_chunks_refuses_directories_and_missing_files(t: &Tier) {
    t.write("d/f", "x");
    let read = |rel: &str| {
        t.backend
            .read_chunks(&t.scope, &t.path(rel), 1024)
            .map(|(entry, _)| entry)
    };
    expect_err(
        read("d"),
        Code::FailedPrecondition,
        &format!("is a directory: {}", t.path("d")),
    );
    expect_err(
        read("d/nope"),
        Code::NotFound,
        &format!("not found: {}", t.path("d/nope")),
    );
}

/// write_chunks stores pieces of any size (empty ones too) as one file.
pub fn write_chunks_assembles_the_pieces(t: &Tier) {
    let data = pattern((5 << 20) / 2 + 3);
    let cuts = [0, 1, 1, 70_000, 1 << 20, (1 << 20) + 1, 2 << 20, data.len()];
    let mut pieces = cuts
        .windows(2)
        .map(|w| Ok(data[w[0]..w[1]].to_vec()))
        .collect::<Vec<_>>()
        .into_iter();
    let w = t
        .backend
        .write_chunks(&t.scope, &t.path("up/f"), any(), &mut pieces)
        .unwrap();
    assert_eq!((w.bytes_written, w.created), (data.len() as u64, true));
    let (got, entry) = t.try_read("up/f").unwrap();
    assert!(got == data, "content differs");
    assert_eq!(entry.version, w.version);
}

/// An `Err` piece aborts the upload with that error: an existing file
/// keeps its content and version, a new one is never created, and nothing
/// else appears in the directory.
pub fn a_failed_upload_changes_nothing(t: &Tier) {
    let old = pattern(100_000);
    let v = t.write("d/f", old.clone()).version;
    let gone = || Error::Internal("the client went away".into());
    for rel in ["d/f", "d/new"] {
        let mut pieces = vec![
            Ok(vec![1u8; 1 << 20]),
            Ok(vec![2u8; (1 << 20) + 5]),
            Err(gone()),
            Ok(vec![3u8; 10]),
        ]
        .into_iter();
        let err = t
            .backend
            .write_chunks(&t.scope, &t.path(rel), any(), &mut pieces)
            .unwrap_err();
        assert_eq!(err, gone(), "{rel}");
    }
    assert!(t.content("d/f") == old, "the old content changed");
    assert_eq!(t.version("d/f"), v);
    expect_err(
        t.stat("d/new"),
        Code::NotFound,
        &format!("not found: {}", t.path("d/new")),
    );
    assert_eq!(t.names("d"), ["f"], "an upload left something behind");
}

/// write_chunks honours `create_only`: an existing file is refused with
/// AlreadyExists and kept.
pub fn write_chunks_checks_the_precondition(t: &Tier) {
    t.write("f", "old");
    let mut pieces = vec![Ok(pattern(2 << 20))].into_iter();
    expect_err(
        t.backend
            .write_chunks(&t.scope, &t.path("f"), create_only(), &mut pieces),
        Code::AlreadyExists,
        &format!("already exists: {}", t.path("f")),
    );
    assert_eq!(t.content("f"), b"old");
}

/// A file larger than the Store's 1 MiB chunks round-trips through write
/// and read, and is replaced whole by a small file and back.
pub fn large_and_small_files_replace_each_other(t: &Tier) {
    let big = pattern((5 << 20) + 1);
    t.write("f", big.clone());
    assert!(t.content("f") == big, "large content differs");
    t.write("f", "small");
    assert_eq!(t.content("f"), b"small");
    assert_eq!(pieces(t, "f", 1 << 20).concat(), b"small");
    let other = pattern(2 << 20).into_iter().rev().collect::<Vec<u8>>();
    t.write("f", other.clone());
    assert!(pieces(t, "f", 1 << 20).concat() == other, "content differs");
}
