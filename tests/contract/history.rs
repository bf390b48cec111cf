//! Version history (docs/contract.md § Changes and history): every
//! retained version listed newest first with who made it and how, old
//! versions read back, tombstones for deletions and moves, restores that
//! write a version back as a new one, and the default retention. On the
//! Filesystem tier, which keeps no history, every history call is
//! FAILED_PRECONDITION.

use crate::harness::{Tier, expect_err, pattern};
use agentvfs::change::Operation;
use tonic::Code;

/// On a tier without history the call is FAILED_PRECONDITION naming the
/// path; returns true when the case has nothing more to check.
fn without_history(t: &Tier) -> bool {
    if t.keeps_history {
        return false;
    }
    t.write("f", "one");
    let message = format!(
        "not supported: {} is on a mount that keeps no version history",
        t.path("f")
    );
    expect_err(t.versions("f"), Code::FailedPrecondition, &message);
    expect_err(t.read_version("f", 1), Code::FailedPrecondition, &message);
    expect_err(t.restore("f", 1, None), Code::FailedPrecondition, &message);
    true
}

/// Versions come newest first, the current one marked, each with its
/// size, the local principal and the operation that made it.
pub fn versions_are_listed_newest_first_with_their_origin(t: &Tier) {
    if without_history(t) {
        return;
    }
    let v1 = t.write("f", "one\n").version;
    let v2 = t
        .update("f", None, &mut |old| Ok([old, b"two\n"].concat()))
        .unwrap()
        .version;
    let v3 = t.write("f", "three\n").version;
    let versions = t.versions("f").unwrap();
    let seen: Vec<(u64, u64, Operation, bool, bool)> = versions
        .iter()
        .map(|v| (v.version, v.size, v.origin.operation, v.current, v.deleted))
        .collect();
    assert_eq!(
        seen,
        [
            (v3, 6, Operation::Write, true, false),
            (v2, 8, Operation::Edit, false, false),
            (v1, 4, Operation::Write, false, false),
        ]
    );
    for v in &versions {
        assert_eq!(
            (v.origin.principal.as_str(), v.origin.handle.as_str()),
            ("local", "")
        );
    }
    assert!(versions[0].time >= versions[2].time);
}

/// Every retained version reads back as it was written, small or large
/// (a Store keeps files over 64 KiB in chunks).
pub fn old_versions_read_back_as_written(t: &Tier) {
    if without_history(t) {
        return;
    }
    let big = pattern(300_000);
    let v1 = t.write("f", big.clone()).version;
    let v2 = t.write("f", "small").version;
    let v3 = t.write("f", pattern(70_000)).version;
    let (found, data) = t.read_version("f", v1).unwrap();
    assert_eq!(
        (found.version, found.size, found.current),
        (v1, 300_000, false)
    );
    assert_eq!(data, big);
    assert_eq!(t.read_version("f", v2).unwrap().1, b"small");
    let (current, data) = t.read_version("f", v3).unwrap();
    assert!(current.current);
    assert_eq!(data, pattern(70_000));
}

/// A deleted file keeps its versions and a tombstone with a new version;
/// it is gone for every other operation.
pub fn a_deleted_file_keeps_a_tombstone(t: &Tier) {
    if without_history(t) {
        return;
    }
    let v1 = t.write("f", "one").version;
    t.delete("f", None, false).unwrap();
    assert!(t.stat("f").is_err());
    let versions = t.versions("f").unwrap();
    assert_eq!(versions.len(), 2);
    let tomb = &versions[0];
    assert!(tomb.deleted && !tomb.current && tomb.version > v1);
    assert_eq!((tomb.size, tomb.origin.operation), (0, Operation::Delete));
    assert_eq!((versions[1].version, versions[1].current), (v1, false));
    // The tombstone is a version; a later file outranks it.
    let v3 = t.write("f", "again").version;
    assert!(v3 > tomb.version);
}

/// A restore writes the old content back as a new, larger version made by
/// `restore`; the version restored stays.
pub fn a_restore_writes_an_old_version_back(t: &Tier) {
    if without_history(t) {
        return;
    }
    let v1 = t.write("f", "one").version;
    let v2 = t.write("f", "two").version;
    let out = t.restore("f", v1, Some(v2)).unwrap();
    assert!(out.version > v2 && !out.created);
    assert_eq!(out.bytes_written, 3);
    assert_eq!(t.content("f"), b"one");
    let versions = t.versions("f").unwrap();
    assert_eq!(versions[0].origin.operation, Operation::Restore);
    let numbers: Vec<u64> = versions.iter().map(|v| v.version).collect();
    assert_eq!(numbers, [out.version, v2, v1]);
}

/// A deleted file is restored with `if_version` 0 (it must not exist) and
/// is created again.
pub fn a_deleted_file_is_restored(t: &Tier) {
    if without_history(t) {
        return;
    }
    let v1 = t.write("d/f", pattern(100_000)).version;
    t.delete("d", None, true).unwrap();
    let out = t.restore("d/f", v1, Some(0)).unwrap();
    assert!(out.created);
    assert_eq!(t.content("d/f"), pattern(100_000));
}

/// A restore checks `if_version` against the current version and changes
/// nothing when it is stale.
pub fn a_restore_checks_if_version(t: &Tier) {
    if without_history(t) {
        return;
    }
    let v1 = t.write("f", "one").version;
    let v2 = t.write("f", "two").version;
    let message = format!(
        "version conflict on {}: expected version {v1}, found {v2}",
        t.path("f")
    );
    expect_err(t.restore("f", v1, Some(v1)), Code::Aborted, &message);
    assert_eq!(t.content("f"), b"two");
    assert_eq!(t.version("f"), v2);
}

/// A tombstone has no content to restore, and a version never retained is
/// not found.
pub fn tombstones_and_unknown_versions_are_refused(t: &Tier) {
    if without_history(t) {
        return;
    }
    t.write("f", "one");
    t.delete("f", None, false).unwrap();
    let tomb = t.versions("f").unwrap()[0].version;
    let path = t.path("f");
    expect_err(
        t.restore("f", tomb, None),
        Code::InvalidArgument,
        &format!(
            "version {tomb} of {path} is a deletion: restore a version with content, or Delete \
             the file"
        ),
    );
    expect_err(
        t.read_version("f", 999_999),
        Code::NotFound,
        &format!("not found: version 999999 of {path}"),
    );
    expect_err(
        t.versions("never"),
        Code::NotFound,
        &format!("not found: {}", t.path("never")),
    );
}

/// A moved file leaves a tombstone made by `move` at its source and starts
/// at the destination with a `move` version; its content went with it.
pub fn a_move_leaves_a_tombstone_at_the_source(t: &Tier) {
    if without_history(t) {
        return;
    }
    let v1 = t.write("a", "x").version;
    let moved = t.rename("a", "b", Default::default()).unwrap().version;
    let source = t.versions("a").unwrap();
    // A Move in a branch is one changeset of its upper scope: the source's
    // past stays behind its tombstone (docs/branches.md).
    let kept: Vec<u64> = source[1..].iter().map(|v| v.version).collect();
    assert_eq!(kept, if t.branch { vec![v1] } else { vec![] });
    assert!(source[0].deleted && source[0].version > v1);
    assert_eq!(source[0].origin.operation, Operation::Move);
    let destination = t.versions("b").unwrap();
    assert_eq!(destination[0].version, moved);
    assert_eq!(destination[0].origin.operation, Operation::Move);
    assert!(destination[0].current);
}

/// History is kept per file: a directory has none.
pub fn a_directory_has_no_versions(t: &Tier) {
    if without_history(t) {
        return;
    }
    t.write("d/f", "x");
    expect_err(
        t.versions("d"),
        Code::FailedPrecondition,
        &format!("is a directory: {}", t.path("d")),
    );
}

/// The default retention keeps the last ten versions of a file, the
/// current one included, and drops the oldest first.
pub fn the_last_ten_versions_are_kept(t: &Tier) {
    if without_history(t) {
        return;
    }
    let written: Vec<u64> = (0..15)
        .map(|i| t.write("f", format!("v{i}")).version)
        .collect();
    let kept: Vec<u64> = t.versions("f").unwrap().iter().map(|v| v.version).collect();
    let newest: Vec<u64> = written.iter().rev().take(10).copied().collect();
    assert_eq!(kept, newest);
    let oldest = written[0];
    expect_err(
        t.read_version("f", oldest),
        Code::NotFound,
        &format!("not found: version {oldest} of {}", t.path("f")),
    );
}
