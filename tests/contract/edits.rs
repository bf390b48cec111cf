//! Update: the atomic read-modify-write behind Edit and MultiEdit.

use crate::harness::{Tier, expect_err, pattern};
use agentvfs::error::Error;
use tonic::Code;

/// The closure sees the current content; its result replaces it under a
/// larger version, and the file keeps its creation time where the tier
/// knows one.
pub fn update_replaces_the_content_with_the_closure_result(t: &Tier) {
    let w = t.write("f", "foo bar");
    let before = t.stat("f").unwrap();
    let mut seen = Vec::new();
    let out = t
        .update("f", None, &mut |current| {
            seen = current.to_vec();
            Ok(current.to_ascii_uppercase())
        })
        .unwrap();
    assert_eq!(seen, b"foo bar");
    assert_eq!(out.path, t.path("f"));
    assert_eq!((out.bytes_written, out.created), (7, false));
    assert!(out.version > w.version);
    let (content, after) = t.try_read("f").unwrap();
    assert_eq!(content, b"FOO BAR");
    assert_eq!(after.version, out.version);
    if t.keeps_created {
        assert_eq!(after.created, before.created);
    }
}

/// An error from the closure is returned as it is, and the file keeps its
/// content and version.
pub fn a_failing_closure_leaves_the_file_unchanged(t: &Tier) {
    let v = t.write("f", "keep me").version;
    let err = t
        .update("f", None, &mut |_| {
            Err(Error::InvalidArgument("old_string not found".into()))
        })
        .unwrap_err();
    assert_eq!(err, Error::InvalidArgument("old_string not found".into()));
    assert_eq!(t.content("f"), b"keep me");
    assert_eq!(t.version("f"), v);
}

/// A matching `if_version` lets the update run; a stale one is refused
/// before the closure runs, naming both versions.
pub fn update_checks_if_version(t: &Tier) {
    let v1 = t.write("f", "a").version;
    let v2 = t
        .update("f", Some(v1), &mut |c| Ok([c, b"b"].concat()))
        .unwrap()
        .version;
    let mut called = false;
    expect_err(
        t.update("f", Some(v1), &mut |c| {
            called = true;
            Ok(c.to_vec())
        }),
        Code::Aborted,
        &format!(
            "version conflict on {}: expected version {v1}, found {v2}",
            t.path("f")
        ),
    );
    assert!(!called, "the closure ran despite a stale if_version");
    assert_eq!(t.content("f"), b"ab");
    assert_eq!(t.version("f"), v2);
}

/// Updating a missing file is NotFound naming it, without calling the
/// closure.
pub fn updating_a_missing_file_is_not_found(t: &Tier) {
    t.write("d/g", "x");
    for rel in ["d/f", "f"] {
        let mut called = false;
        expect_err(
            t.update(rel, None, &mut |c| {
                called = true;
                Ok(c.to_vec())
            }),
            Code::NotFound,
            &format!("not found: {}", t.path(rel)),
        );
        assert!(!called, "{rel}");
    }
    expect_err(
        t.stat("d/f"),
        Code::NotFound,
        &format!("not found: {}", t.path("d/f")),
    );
}

/// Updating a directory is IsDirectory naming it.
pub fn updating_a_directory_is_is_directory(t: &Tier) {
    t.write("d/f", "x");
    expect_err(
        t.update("d", None, &mut |c| Ok(c.to_vec())),
        Code::FailedPrecondition,
        &format!("is a directory: {}", t.path("d")),
    );
}

/// An update may grow a small file past the Store's inline limit (64 KiB)
/// and shrink it back; each step reads back whole.
pub fn update_grows_and_shrinks_a_file(t: &Tier) {
    t.write("f", "seed");
    let big = pattern(300 << 10);
    t.update("f", None, &mut |_| Ok(big.clone())).unwrap();
    assert!(t.content("f") == big, "grown content differs");
    let mut seen = 0;
    t.update("f", None, &mut |c| {
        seen = c.len();
        Ok(c[..10].to_vec())
    })
    .unwrap();
    assert_eq!(seen, big.len(), "the closure saw the whole large file");
    assert_eq!(t.content("f"), &big[..10]);
}
