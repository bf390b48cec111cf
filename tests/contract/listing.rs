//! List and Stat: one directory level in path order, directories implied
//! or explicit, and what a file's metadata says.

use crate::harness::{Tier, expect_err};
use agentvfs::entry::{Entry, EntryKind};
use std::time::{Duration, SystemTime};
use tonic::Code;

/// A listing is one level, sorted by order key: `/` sorts below every
/// character, so the directory `a` comes before `a b`, `a-b` and `a.txt`,
/// upper case before lower case, bytes after ASCII.
pub fn sorted_by_path_in_order_key_order(t: &Tier) {
    for rel in ["b", "a.txt", "é", "a-b", "a/x", "a/y/z", "A", "a b"] {
        t.write(rel, rel);
    }
    assert_eq!(
        t.names(""),
        ["A", "a/", "a b", "a-b", "a.txt", "b", "é"],
        "one level, in order-key order"
    );
    assert_eq!(t.names("a"), ["x", "y/"]);
    assert_eq!(t.names("a/y"), ["z"]);
}

/// Many files below a directory show it once, as a directory with no size
/// and no version.
pub fn a_directory_is_listed_once(t: &Tier) {
    for i in 0..20 {
        t.write(&format!("d/{i:02}"), "x");
        t.write(&format!("d/sub/{i:02}"), "x");
    }
    t.write("e", "x");
    let entries = t.list("").unwrap();
    assert_eq!(t.names(""), ["d/", "e"]);
    let d = &entries[0];
    assert_eq!((d.kind, d.size, d.version), (EntryKind::Directory, 0, 0));
    assert_eq!(t.names("d").len(), 21, "20 files and sub/");
}

/// A file's entry in a listing is its Stat: kind, size, version and times.
pub fn a_listed_file_is_its_stat(t: &Tier) {
    t.write("f.txt", "hello");
    t.write("g", "");
    let listed = t.list("").unwrap();
    let stat: Vec<Entry> = ["f.txt", "g"].iter().map(|r| t.stat(r).unwrap()).collect();
    assert_eq!(listed, stat);
    assert_eq!((stat[0].kind, stat[0].size), (EntryKind::File, 5));
    assert_eq!(stat[1].size, 0);
}

/// Listing a file is NotDirectory naming it.
pub fn listing_a_file_is_not_directory(t: &Tier) {
    t.write("f", "x");
    expect_err(
        t.list("f"),
        Code::FailedPrecondition,
        &format!("not a directory: {}", t.path("f")),
    );
}

/// Listing a missing path is NotFound naming it, also beside files.
pub fn listing_a_missing_path_is_not_found(t: &Tier) {
    expect_err(
        t.list("nope"),
        Code::NotFound,
        &format!("not found: {}", t.path("nope")),
    );
    t.write("d/f", "x");
    expect_err(
        t.list("d/nope"),
        Code::NotFound,
        &format!("not found: {}", t.path("d/nope")),
    );
}

/// The mount root lists even when the tier holds nothing, and is a
/// directory; it shows the base once something is written there.
pub fn the_mount_root_always_lists(t: &Tier) {
    let listed: Vec<_> = t
        .backend
        .list(&t.scope, &t.mount)
        .unwrap()
        .into_iter()
        .map(|e| (e.path, e.kind))
        .collect();
    let mounts: Vec<_> = t
        .mount_points
        .iter()
        .map(|m| (m.clone(), EntryKind::Directory))
        .collect();
    assert_eq!(listed, mounts, "an empty tier lists only mount points");
    let root = t.backend.stat(&t.scope, &t.mount).unwrap();
    assert_eq!((root.kind, root.version), (EntryKind::Directory, 0));
    t.write("f", "x");
    let mut expected: Vec<_> = mounts;
    expected.push((t.base.clone(), EntryKind::Directory));
    expected.sort_by_key(|(p, _)| p.order_key());
    let listed: Vec<_> = t
        .backend
        .list(&t.scope, &t.mount)
        .unwrap()
        .into_iter()
        .map(|e| (e.path, e.kind))
        .collect();
    assert_eq!(listed, expected);
}

/// Writing a file creates its parent directories; they list and stat as
/// directories.
pub fn parents_of_a_file_are_directories(t: &Tier) {
    t.write("a/b/c/f", "x");
    for (dir, inside) in [("", "a/"), ("a", "b/"), ("a/b", "c/"), ("a/b/c", "f")] {
        assert_eq!(t.names(dir), [inside], "in {}", t.path(dir));
    }
    for dir in ["a", "a/b", "a/b/c"] {
        let e = t.stat(dir).unwrap();
        assert_eq!((e.kind, e.size, e.version), (EntryKind::Directory, 0, 0));
    }
}

/// A directory whose last file is deleted stays, empty, where directories
/// are real (Filesystem) and vanishes with its parents where they are
/// implied (State, Store).
pub fn a_directory_after_its_last_file(t: &Tier) {
    t.write("d/sub/f", "x");
    t.delete("d/sub/f", None, false).unwrap();
    if t.explicit_directories {
        assert_eq!(t.names("d/sub"), Vec::<String>::new());
        assert_eq!(t.names("d"), ["sub/"]);
        assert!(t.stat("d/sub").unwrap().is_directory());
    } else {
        for gone in ["d/sub", "d", ""] {
            let shown = format!("not found: {}", t.path(gone));
            expect_err(t.list(gone), Code::NotFound, &shown);
            expect_err(t.stat(gone), Code::NotFound, &shown);
        }
    }
}

/// Stat of a file reports what was written: kind, size, the write's
/// version, and times taken during the write.
pub fn stat_of_a_file_matches_its_write(t: &Tier) {
    let before = SystemTime::now();
    let w = t.write("f.bin", vec![7u8; 1000]);
    let after = SystemTime::now();
    let e = t.stat("f.bin").unwrap();
    assert_eq!(e.path, t.path("f.bin"));
    assert_eq!(
        (e.kind, e.size, e.version),
        (EntryKind::File, 1000, w.version)
    );
    // File systems may keep time stamps coarser than the clock.
    let slack = Duration::from_secs(1);
    assert!(
        e.modified >= before - slack && e.modified <= after + slack,
        "{e:?}"
    );
    assert!(e.created <= e.modified, "{e:?}");
}

/// Stat of a missing path is NotFound naming it.
pub fn stat_of_a_missing_path_is_not_found(t: &Tier) {
    t.write("other", "x");
    expect_err(
        t.stat("nope"),
        Code::NotFound,
        &format!("not found: {}", t.path("nope")),
    );
}

/// Paths are compared byte for byte: no case folding, no trimming
/// (docs/contract.md § Paths).
pub fn names_are_exact(t: &Tier) {
    for rel in ["x", "X", "x ", " x", "é", "e\u{301}"] {
        t.write(rel, rel);
    }
    assert_eq!(t.names("").len(), 6);
    for rel in ["x", "X", "x ", " x", "é", "e\u{301}"] {
        assert_eq!(t.content(rel), rel.as_bytes(), "{rel:?}");
    }
}
