//! Read: a whole file and its metadata.
//!
//! Read's line windows and numbering (`text::read_window`, docs/contract.md
//! § Text formats) work on the bytes a tier returns and never reach a tier,
//! so they are tested where they live, not here.

use crate::harness::{Tier, expect_err, pattern};
use agentvfs::entry::EntryKind;
use tonic::Code;

/// Read returns the bytes written, any bytes (NUL, invalid UTF-8, CR), and
/// the file's Stat.
pub fn read_returns_the_content_and_its_stat(t: &Tier) {
    let data = b"line 1\r\n\0\xff\xfe binary \n\rend".to_vec();
    let w = t.write("f", data.clone());
    let (got, entry) = t.try_read("f").unwrap();
    assert_eq!(got, data);
    assert_eq!(entry, t.stat("f").unwrap());
    assert_eq!(
        (entry.kind, entry.size, entry.version),
        (EntryKind::File, data.len() as u64, w.version)
    );
}

/// An empty file reads as no bytes, with a version like any file.
pub fn an_empty_file_reads_as_nothing(t: &Tier) {
    let w = t.write("empty", "");
    let (got, entry) = t.try_read("empty").unwrap();
    assert!(got.is_empty());
    assert_eq!((entry.size, entry.version), (0, w.version));
    assert!(w.version > 0);
}

/// A rewrite is read whole, never mixed with the old content: a shorter
/// file leaves no tail of a longer one, in and out of the Store's inline
/// limit (64 KiB).
pub fn read_sees_the_latest_write(t: &Tier) {
    let sizes = [10, 200 << 10, 3, 100 << 10, 70 << 10, 0, 5];
    for (i, size) in sizes.into_iter().enumerate() {
        let mut data = pattern(size);
        data.iter_mut().for_each(|b| *b = b.wrapping_add(i as u8));
        let w = t.write("f", data.clone());
        let (got, entry) = t.try_read("f").unwrap();
        assert_eq!(got.len(), size, "write {i}");
        assert!(got == data, "write {i}: content differs");
        assert_eq!(entry.version, w.version);
    }
}

/// Reading a directory is IsDirectory naming it: an implied or explicit
/// directory, and the mount root.
pub fn reading_a_directory_is_is_directory(t: &Tier) {
    t.write("d/f", "x");
    expect_err(
        t.try_read("d"),
        Code::FailedPrecondition,
        &format!("is a directory: {}", t.path("d")),
    );
    expect_err(
        t.backend.read(&t.scope, &t.mount),
        Code::FailedPrecondition,
        &format!("is a directory: {}", t.mount),
    );
}

/// Reading a missing file is NotFound naming it.
pub fn reading_a_missing_file_is_not_found(t: &Tier) {
    t.write("d/f", "x");
    for rel in ["d/nope", "nope"] {
        expect_err(
            t.try_read(rel),
            Code::NotFound,
            &format!("not found: {}", t.path(rel)),
        );
    }
}

/// An admitted read asks `admit` once, with the file's entry (its size),
/// and answers what Read answers; a refusal from `admit` is the read's
/// answer. Sizes in and out of the Store's inline limit, and past one piece
/// of the default's gathering (1 MiB).
pub fn an_admitted_read_asks_before_it_answers(t: &Tier) {
    for (i, size) in [0, 10, 200 << 10, (1 << 20) + 3].into_iter().enumerate() {
        let rel = format!("f{i}");
        let data = pattern(size);
        let w = t.write(&rel, data.clone());
        let mut asked = Vec::new();
        let (got, entry) = t
            .backend
            .read_admitted(&t.scope, &t.path(&rel), &mut |e| {
                asked.push(e.clone());
                Ok(())
            })
            .unwrap();
        assert!(got == data, "{rel}: content differs");
        assert_eq!(entry, t.stat(&rel).unwrap());
        assert_eq!((entry.size, entry.version), (size as u64, w.version));
        assert_eq!(
            asked,
            vec![entry],
            "{rel}: admit asked once, with the entry"
        );
        expect_err(
            t.backend.read_admitted(&t.scope, &t.path(&rel), &mut |e| {
                Err(agentvfs::error::Error::TooLarge(format!(
                    "{} refused",
                    e.size
                )))
            }),
            Code::ResourceExhausted,
            &format!("too large: {size} refused"),
        );
    }
    expect_err(
        t.backend
            .read_admitted(&t.scope, &t.path("nope"), &mut |_| Ok(())),
        Code::NotFound,
        &format!("not found: {}", t.path("nope")),
    );
}
