//! Copy (`Backend::copy`): one file to another path of the same tier, as
//! one write of the destination (docs/contract.md § Copy). `pre` applies
//! to the destination as Write's does; the source is never changed; the
//! copy is its own file from then on (a reflinked or shared copy too).

use crate::harness::{Tier, any, create_only, expect_err, if_version, pattern};
use agentvfs::backend::WriteOutcome;
use agentvfs::change::{ChangeKind, Operation};
use agentvfs::error::Result;
use tonic::Code;

/// Copies `source` to `destination` (both below the base).
fn copy(
    t: &Tier,
    source: &str,
    destination: &str,
    pre: agentvfs::backend::Precondition,
) -> Result<WriteOutcome> {
    t.backend
        .copy(&t.scope, &t.path(source), &t.path(destination), pre)
}

/// A file copies with its content to a new file of its own, reported as
/// a write that created it; the source keeps its content and version.
pub fn a_file_copies(t: &Tier) {
    let src = t.write("src.txt", "payload");
    let out = copy(t, "src.txt", "dst.txt", any()).unwrap();
    assert!(out.created);
    assert_eq!(out.bytes_written, 7);
    assert_eq!(out.path, t.path("dst.txt"));
    let (content, entry) = t.try_read("dst.txt").unwrap();
    assert_eq!(content, b"payload");
    assert_eq!(entry.version, out.version);
    assert_eq!(entry.size, 7);
    assert_eq!(t.content("src.txt"), b"payload");
    assert_eq!(t.version("src.txt"), src.version);
    assert_eq!(t.names(""), ["dst.txt", "src.txt"]);
}

/// A change of the copy leaves the source as it was, and a change of the
/// source leaves the copy (whatever the tier shares underneath).
pub fn the_copy_is_a_file_of_its_own(t: &Tier) {
    let big = pattern(3 << 20);
    t.write("a", big.clone());
    copy(t, "a", "b", any()).unwrap();
    t.write("b", "changed");
    assert_eq!(t.content("a"), big);
    t.write("a", "also changed");
    assert_eq!(t.content("b"), b"changed");
    copy(t, "a", "c", any()).unwrap();
    t.delete("a", None, false).unwrap();
    assert_eq!(t.content("c"), b"also changed");
}

/// A large file (chunked on the Store tier) copies byte for byte.
pub fn a_large_file_copies_whole(t: &Tier) {
    let big = pattern((5 << 20) + 17);
    t.write("big", big.clone());
    let out = copy(t, "big", "copy/big", any()).unwrap();
    assert_eq!(out.bytes_written, big.len() as u64);
    assert_eq!(t.content("copy/big"), big);
}

/// `create_only` refuses an existing destination and changes nothing.
pub fn create_only_refuses_an_existing_destination(t: &Tier) {
    t.write("src", "new");
    let old = t.write("dst", "old");
    expect_err(
        copy(t, "src", "dst", create_only()),
        Code::AlreadyExists,
        &format!("already exists: {}", t.path("dst")),
    );
    assert_eq!(t.content("dst"), b"old");
    assert_eq!(t.version("dst"), old.version);
}

/// Without guards a copy replaces a file, under a larger version; with a
/// matching `if_version` too, and a stale one is refused.
pub fn a_copy_replaces_a_file_under_if_version(t: &Tier) {
    t.write("src", "new");
    let old = t.write("dst", "old");
    expect_err(
        copy(t, "src", "dst", if_version(old.version + 1000)),
        Code::Aborted,
        &format!(
            "version conflict on {}: expected version {}, found {}",
            t.path("dst"),
            old.version + 1000,
            old.version
        ),
    );
    let out = copy(t, "src", "dst", if_version(old.version)).unwrap();
    assert!(!out.created);
    assert!(out.version > old.version);
    assert_eq!(t.content("dst"), b"new");
    let again = copy(t, "dst", "src", any()).unwrap();
    assert!(!again.created);
}

/// A missing source is NOT_FOUND and nothing is written.
pub fn a_missing_source_is_not_found(t: &Tier) {
    expect_err(
        copy(t, "missing", "dst", any()),
        Code::NotFound,
        &format!("not found: {}", t.path("missing")),
    );
    expect_err(
        t.stat("dst"),
        Code::NotFound,
        &format!("not found: {}", t.path("dst")),
    );
}

/// Missing parents of the destination are created; a destination that is
/// a directory is IS_DIRECTORY.
pub fn parents_are_created_and_a_directory_is_not_replaced(t: &Tier) {
    t.write("f", "x");
    copy(t, "f", "a/b/c/f", any()).unwrap();
    assert!(t.stat("a/b").unwrap().is_directory());
    assert_eq!(t.content("a/b/c/f"), b"x");
    expect_err(
        copy(t, "f", "a/b", any()),
        Code::FailedPrecondition,
        &format!("is a directory: {}", t.path("a/b")),
    );
}

/// The copy is in the change log as the write that created the
/// destination, and nothing else changed.
pub fn a_copy_is_logged_as_a_write(t: &Tier) {
    if !t.keeps_change_log {
        return;
    }
    t.write("src", "x");
    let mut cursor = t.head();
    let out = copy(t, "src", "dst", any()).unwrap();
    let changes = t.changes(&mut cursor, 100).unwrap();
    let seen: Vec<_> = changes
        .iter()
        .map(|c| (c.kind, t.rel(&c.path), c.version, c.origin.operation))
        .collect();
    assert_eq!(
        seen,
        [(
            ChangeKind::Created,
            "dst".into(),
            out.version,
            Operation::Write
        )]
    );
}
