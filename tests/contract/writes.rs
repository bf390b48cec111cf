//! Write with every precondition (`create_only`, `if_version`), versions
//! that only grow, and writes where a directory or a file is in the way.

use crate::harness::{Tier, any, create_only, expect_err, if_version};
use agentvfs::backend::Precondition;
use agentvfs::entry::EntryKind;
use tonic::Code;

/// A write of a new file says so, with its size and a version.
pub fn a_write_creates_a_file_and_reports_it(t: &Tier) {
    let w = t.write("f.txt", "hello");
    assert_eq!(w.path, t.path("f.txt"));
    assert_eq!((w.bytes_written, w.created), (5, true));
    assert!(w.version > 0);
    assert_eq!(t.content("f.txt"), b"hello");
}

/// A rewrite is not a creation and gets a larger version.
pub fn a_rewrite_gets_a_larger_version(t: &Tier) {
    let v1 = t.write("f", "one").version;
    let w = t.write("f", "two!");
    assert_eq!((w.bytes_written, w.created), (4, false));
    assert!(w.version > v1, "{} after {v1}", w.version);
    assert_eq!(t.version("f"), w.version);
}

/// A rewrite keeps the file's creation time where the tier knows it; the
/// Filesystem tier reports the modification time as `created`
/// (src/entry.rs).
pub fn a_rewrite_keeps_the_created_time(t: &Tier) {
    t.write("f", "one");
    let first = t.stat("f").unwrap();
    t.write("f", "two");
    let second = t.stat("f").unwrap();
    assert!(second.modified >= first.modified);
    if t.keeps_created {
        assert_eq!(second.created, first.created);
    } else {
        assert_eq!(second.created, second.modified);
    }
}

/// `create_only` refuses an existing file with AlreadyExists and leaves it
/// as it was.
pub fn create_only_refuses_an_existing_file(t: &Tier) {
    let v = t.write("f", "old").version;
    expect_err(
        t.write_pre("f", "new", create_only()),
        Code::AlreadyExists,
        &format!("already exists: {}", t.path("f")),
    );
    assert_eq!(t.content("f"), b"old");
    assert_eq!(t.version("f"), v);
}

/// `create_only` creates a missing file.
pub fn create_only_creates_a_missing_file(t: &Tier) {
    let w = t.write_pre("d/f", "new", create_only()).unwrap();
    assert!(w.created);
    assert_eq!(t.content("d/f"), b"new");
}

/// `if_version = 0` means "must not exist": it creates a missing file.
pub fn if_version_zero_creates_a_missing_file(t: &Tier) {
    let w = t.write_pre("f", "new", if_version(0)).unwrap();
    assert!(w.created && w.version > 0);
}

/// `if_version = 0` refuses an existing file, naming both versions.
pub fn if_version_zero_refuses_an_existing_file(t: &Tier) {
    let v = t.write("f", "old").version;
    expect_err(
        t.write_pre("f", "new", if_version(0)),
        Code::Aborted,
        &format!(
            "version conflict on {}: expected version 0, found {v}",
            t.path("f")
        ),
    );
    assert_eq!(t.content("f"), b"old");
}

/// A matching `if_version` replaces the file.
pub fn a_matching_if_version_replaces(t: &Tier) {
    let v = t.write("f", "old").version;
    let w = t.write_pre("f", "new", if_version(v)).unwrap();
    assert!(!w.created && w.version > v);
    assert_eq!(t.content("f"), b"new");
}

/// A stale `if_version` is refused with both versions and changes nothing.
pub fn a_stale_if_version_is_refused(t: &Tier) {
    let v1 = t.write("f", "one").version;
    let v2 = t.write("f", "two").version;
    expect_err(
        t.write_pre("f", "three", if_version(v1)),
        Code::Aborted,
        &format!(
            "version conflict on {}: expected version {v1}, found {v2}",
            t.path("f")
        ),
    );
    assert_eq!(t.content("f"), b"two");
    assert_eq!(t.version("f"), v2);
}

/// An `if_version` other than 0 on a missing file is refused: the file has
/// version 0.
pub fn if_version_on_a_missing_file_is_refused(t: &Tier) {
    expect_err(
        t.write_pre("f", "x", if_version(7)),
        Code::Aborted,
        &format!(
            "version conflict on {}: expected version 7, found 0",
            t.path("f")
        ),
    );
    expect_err(
        t.stat("f"),
        Code::NotFound,
        &format!("not found: {}", t.path("f")),
    );
}

/// Versions only grow, also across a delete and a re-create, so an
/// `if_version` taken before the delete never matches the new file
/// (docs/contract.md § Backend protocol).
pub fn versions_only_grow_across_delete_and_recreate(t: &Tier) {
    let mut last = 0;
    for round in 0..5 {
        let w = t.write("f", format!("round {round}"));
        assert!(w.created, "round {round}");
        assert!(
            w.version > last,
            "round {round}: {} after {last}",
            w.version
        );
        let again = t.write("f", "again").version;
        assert!(again > w.version);
        t.delete("f", None, false).unwrap();
        last = again;
    }
    let w = t.write("f", "new").version;
    expect_err(
        t.write_pre("f", "x", if_version(last)),
        Code::Aborted,
        &format!(
            "version conflict on {}: expected version {last}, found {w}",
            t.path("f")
        ),
    );
}

/// Writing where a directory is fails with IsDirectory and changes
/// nothing below it, whatever the precondition.
pub fn writing_a_directory_is_is_directory(t: &Tier) {
    t.write("d/f", "x");
    for pre in [any(), create_only(), if_version(0)] {
        expect_err(
            t.write_pre("d", "y", pre),
            Code::FailedPrecondition,
            &format!("is a directory: {}", t.path("d")),
        );
    }
    assert_eq!(t.names("d"), ["f"]);
    assert_eq!(t.stat("d").unwrap().kind, EntryKind::Directory);
}

/// Writing directly below a file fails with NotDirectory naming the file.
pub fn writing_below_a_file_is_not_directory(t: &Tier) {
    t.write("f", "x");
    expect_err(
        t.write_pre("f/g", "y", any()),
        Code::FailedPrecondition,
        &format!("not a directory: {}", t.path("f")),
    );
    assert_eq!(t.content("f"), b"x");
}

/// Writing deeper below a file names the file in the way: the ancestor
/// that is not a directory, the one path a caller can act on (Move's
/// destination check names it the same way).
pub fn writing_deep_below_a_file_names_the_file(t: &Tier) {
    t.write("f", "x");
    expect_err(
        t.write_pre("f/g/h/i", "y", any()),
        Code::FailedPrecondition,
        &format!("not a directory: {}", t.path("f")),
    );
    assert_eq!(t.content("f"), b"x");
}

/// A write creates every missing parent directory.
pub fn a_write_creates_missing_parents(t: &Tier) {
    t.write("a/b/c/d/e/f", "x");
    let mut dir = String::new();
    for name in ["a", "b", "c", "d", "e"] {
        dir = if dir.is_empty() {
            name.to_owned()
        } else {
            format!("{dir}/{name}")
        };
        assert!(t.stat(&dir).unwrap().is_directory(), "{dir}");
    }
    assert_eq!(t.content("a/b/c/d/e/f"), b"x");
}

/// The executable bit (docs/contract.md § The executable bit): off for a
/// new file, set by a write that names it, kept by every change that does
/// not (a rewrite, an update, a move), carried by a copy, shown by stat,
/// list and read alike, and cleared by a write that names it off.
pub fn the_executable_bit_is_kept_until_a_write_names_it(t: &Tier) {
    let bit = |rel: &str| t.stat(rel).unwrap().executable;
    let set = |on: bool| Precondition {
        executable: Some(on),
        ..any()
    };
    t.write("plain.txt", "text");
    assert!(
        !bit("plain.txt"),
        "{:?}: a new file is not executable",
        t.kind
    );
    t.write_pre("run.sh", "#!/bin/sh\n", set(true)).unwrap();
    assert!(bit("run.sh"), "{:?}", t.kind);
    let listed = t.list("").unwrap();
    let shown = |rel: &str| {
        listed
            .iter()
            .find(|e| e.path == t.path(rel))
            .unwrap()
            .executable
    };
    assert!(
        shown("run.sh") && !shown("plain.txt"),
        "{:?}: listed",
        t.kind
    );
    assert!(
        t.try_read("run.sh").unwrap().1.executable,
        "{:?}: read",
        t.kind
    );
    t.write("run.sh", "#!/bin/sh\necho 1\n");
    assert!(bit("run.sh"), "{:?}: a rewrite keeps the bit", t.kind);
    t.update("run.sh", None, &mut |d| Ok([d, b"echo 2\n"].concat()))
        .unwrap();
    assert!(bit("run.sh"), "{:?}: an update keeps the bit", t.kind);
    t.rename("run.sh", "bin/run.sh", any()).unwrap();
    assert!(bit("bin/run.sh"), "{:?}: a move keeps the bit", t.kind);
    t.backend
        .copy(&t.scope, &t.path("bin/run.sh"), &t.path("copy.sh"), any())
        .unwrap();
    assert!(bit("copy.sh"), "{:?}: a copy carries the bit", t.kind);
    t.write_pre("copy.sh", "#!/bin/sh\n", set(false)).unwrap();
    assert!(!bit("copy.sh"), "{:?}: a write clears the bit", t.kind);
    t.write_pre("plain.txt", "text", set(true)).unwrap();
    assert!(bit("plain.txt"), "{:?}: a write sets the bit", t.kind);
    assert_eq!(t.content("plain.txt"), b"text", "{:?}", t.kind);
}
