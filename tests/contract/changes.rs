//! The change log (docs/contract.md § Changes and history): every change in
//! commit order with its version, size and origin; cursors that resume
//! exactly after a change; the head; a root that filters without losing
//! the place; one record per file of a recursive delete or a directory
//! move; nothing logged for a change that failed; and cursors of another
//! log refused with the oldest cursor still available. Every tier keeps a
//! log (the Filesystem tier's own changes here; tests/it/history.rs covers
//! changes made on disk by others).

use crate::harness::{Tier, create_only, expect_err};
use agentvfs::change::{ChangeCursor, ChangeKind, LogPosition, Operation};
use agentvfs::error::Error;
use tonic::Code;

use ChangeKind::{Created, Deleted, Modified};

/// On a tier without a change log every Watch call is FAILED_PRECONDITION
/// naming the path; returns true when the case has nothing more to check.
fn without_change_log(t: &Tier) -> bool {
    if t.keeps_change_log {
        return false;
    }
    let message = format!(
        "not supported: {} is on a mount that keeps no change log",
        t.base
    );
    let mut cursor = ChangeCursor::default();
    expect_err(
        t.backend.watch_head(&t.scope, &t.base, &mut cursor),
        Code::FailedPrecondition,
        &message,
    );
    expect_err(
        t.changes(&mut cursor, 10),
        Code::FailedPrecondition,
        &message,
    );
    true
}

/// Changes come in commit order, each with the version and size its
/// change reported and who made it, how.
pub fn changes_come_in_commit_order(t: &Tier) {
    if without_change_log(t) {
        return;
    }
    let mut cursor = t.head();
    let w1 = t.write("a", "one");
    let w2 = t
        .update("a", None, &mut |old| Ok([old, b"+"].concat()))
        .unwrap();
    let w3 = t.write("b", "bee");
    t.delete("a", None, false).unwrap();
    let changes = t.changes(&mut cursor, 100).unwrap();
    let seen: Vec<(ChangeKind, String, u64, u64, Operation)> = changes
        .iter()
        .map(|c| {
            let v = if c.kind == Deleted { 0 } else { c.version };
            (c.kind, t.rel(&c.path), v, c.size, c.origin.operation)
        })
        .collect();
    assert_eq!(
        seen,
        [
            (Created, "a".into(), w1.version, 3, Operation::Write),
            (Modified, "a".into(), w2.version, 4, Operation::Edit),
            (Created, "b".into(), w3.version, 3, Operation::Write),
            (Deleted, "a".into(), 0, 0, Operation::Delete),
        ]
    );
    for c in &changes {
        assert_eq!(c.origin.principal, "local");
        assert!(!c.external);
    }
    assert!(changes.windows(2).all(|w| w[0].seq < w[1].seq));
    if t.tier_wide_versions && t.keeps_history {
        // A deletion carries its tombstone's version, above every other
        // (a tier keeping no tombstones logs none: the Filesystem tier,
        // in a branch too).
        assert!(changes[3].version > w3.version);
    }
}

/// A cursor resumes exactly after the change it was taken at: no change
/// is skipped and none comes twice, however the log is paged.
pub fn a_cursor_resumes_exactly_after_its_change(t: &Tier) {
    if without_change_log(t) {
        return;
    }
    let start = t.head();
    for i in 0..7 {
        t.write(&format!("f{i}"), "x");
    }
    let mut cursor = start.clone();
    let first = t.changes(&mut cursor, 2).unwrap();
    assert_eq!(first.len(), 2);
    let rest = t.drain(&mut cursor);
    let mut all: Vec<String> = first.iter().map(|c| t.rel(&c.path)).collect();
    all.extend(rest.into_iter().map(|(_, p)| p));
    let expected: Vec<String> = (0..7).map(|i| format!("f{i}")).collect();
    assert_eq!(all, expected);
    // Resuming from the cursor at the second change gives the third on.
    let mut at_second = start.clone();
    t.changes(&mut at_second, 2).unwrap();
    let again: Vec<String> = t
        .drain(&mut at_second)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(again, expected[2..]);
    assert!(t.drain(&mut cursor).is_empty());
}

/// The head skips everything committed before it.
pub fn the_head_skips_the_past(t: &Tier) {
    if without_change_log(t) {
        return;
    }
    t.write("old", "x");
    let mut cursor = t.head();
    assert!(t.drain(&mut cursor).is_empty());
    t.write("new", "x");
    assert_eq!(t.drain(&mut cursor), [(Created, "new".into())]);
}

/// A root shows only the changes below it, and the cursor still moves past
/// the others, so they are not read again.
pub fn a_root_filters_changes_and_keeps_the_place(t: &Tier) {
    if without_change_log(t) {
        return;
    }
    let mut all = t.head();
    let mut inside = all.clone();
    t.write("in/a", "x");
    t.write("out/b", "x");
    t.write("in/c", "x");
    let root = t.path("in");
    let mut seen = Vec::new();
    loop {
        let before = inside.clone();
        let page = t.backend.changes(&t.scope, &root, &mut inside, 2).unwrap();
        if page.is_empty() && before == inside {
            break;
        }
        seen.extend(page.iter().map(|c| t.rel(&c.path)));
    }
    assert_eq!(seen, ["in/a", "in/c"]);
    // The filtered cursor ends where the unfiltered one does.
    t.drain(&mut all);
    assert_eq!(inside, all);
}

/// A recursive delete logs every file it removes.
pub fn a_recursive_delete_logs_every_file(t: &Tier) {
    if without_change_log(t) {
        return;
    }
    t.write("d/a", "x");
    t.write("d/e/b", "x");
    t.write("d/e/f/c", "x");
    let mut cursor = t.head();
    assert_eq!(t.delete("d", None, true).unwrap(), 3);
    let mut seen = t.drain(&mut cursor);
    seen.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        seen,
        [
            (Deleted, "d/a".into()),
            (Deleted, "d/e/b".into()),
            (Deleted, "d/e/f/c".into())
        ]
    );
}

/// A move logs both ends of every moved file, each naming the other.
pub fn a_move_logs_both_ends(t: &Tier) {
    if without_change_log(t) {
        return;
    }
    t.write("src/a", "x");
    t.write("src/sub/b", "x");
    t.write("one", "1");
    let mut cursor = t.head();
    t.rename("one", "two", Default::default()).unwrap();
    t.rename("src", "dst", Default::default()).unwrap();
    let changes = t.changes(&mut cursor, 100).unwrap();
    let mut seen: Vec<(ChangeKind, String, String)> = changes
        .iter()
        .map(|c| {
            assert_eq!(c.origin.operation, Operation::Move);
            let other = c.moved_path.as_ref().map(|p| t.rel(p)).unwrap_or_default();
            (c.kind, t.rel(&c.path), other)
        })
        .collect();
    seen.sort_by(|a, b| (&a.1, a.0 as u8).cmp(&(&b.1, b.0 as u8)));
    assert_eq!(
        seen,
        [
            (Created, "dst/a".into(), "src/a".into()),
            (Created, "dst/sub/b".into(), "src/sub/b".into()),
            (Deleted, "one".into(), "two".into()),
            (Deleted, "src/a".into(), "dst/a".into()),
            (Deleted, "src/sub/b".into(), "dst/sub/b".into()),
            (Created, "two".into(), "one".into()),
        ]
    );
}

/// A change that failed (a conflict, a write onto a directory) logs
/// nothing.
pub fn a_failed_change_logs_nothing(t: &Tier) {
    if without_change_log(t) {
        return;
    }
    t.write("f", "x");
    t.write("d/g", "x");
    let mut cursor = t.head();
    assert!(t.write_pre("f", "y", create_only()).is_err());
    let stale = t.version("f") + 1000;
    assert!(t.delete("f", Some(stale), false).is_err());
    assert!(t.write_pre("d", "y", Default::default()).is_err());
    assert!(t.drain(&mut cursor).is_empty());
}

/// A position in another log (a new store, a restarted server, an expired
/// session) is refused, naming the oldest cursor still available; a
/// position ahead of the log is INVALID_ARGUMENT.
pub fn a_position_in_another_log_is_expired(t: &Tier) {
    if without_change_log(t) {
        return;
    }
    t.write("f", "x");
    let head = t.head();
    if !head.shards(&t.mount).is_empty() {
        return a_position_in_a_gone_log_is_expired(t, &head);
    }
    let (mount, position) = owner_position(t, &head);
    let mut foreign = head.clone();
    foreign.set(
        &mount,
        LogPosition {
            epoch: position.epoch ^ 0x5a5a,
            seq: position.seq,
        },
    );
    let err = t.changes(&mut foreign.clone(), 10).unwrap_err();
    match &err {
        Error::Expired { what, oldest } => {
            assert!(what.contains("started over"), "{what}");
            let mut oldest = ChangeCursor::decode(oldest).unwrap();
            // The oldest cursor works.
            t.changes(&mut oldest, 10).unwrap();
        }
        other => panic!("expected Expired, got {other}"),
    }
    assert_eq!(err.grpc_code(), Code::FailedPrecondition);
    let mut ahead = head.clone();
    ahead.set(
        &mount,
        LogPosition {
            epoch: position.epoch,
            seq: position.seq + 100,
        },
    );
    let message = format!(
        "cursor is ahead of the change log of {mount}: it names change {} of {}",
        position.seq + 100,
        position.seq
    );
    expect_err(t.changes(&mut ahead, 10), Code::InvalidArgument, &message);
}

/// The mount whose log holds the base's changes, and its position in
/// `cursor`.
fn owner_position(t: &Tier, cursor: &ChangeCursor) -> (agentvfs::VfsPath, LogPosition) {
    let position = cursor
        .get(&t.mount)
        .unwrap_or_else(|| panic!("the cursor has no position for {}", t.mount));
    (t.mount.clone(), position)
}

/// The object tier keeps one log per server run (docs/object-storage.md §
/// The change log): a cursor naming a log the bucket does not hold (a run
/// gone for long, or another bucket's) is expired, with the oldest cursor
/// leaving it out; one ahead of a log is INVALID_ARGUMENT.
fn a_position_in_a_gone_log_is_expired(t: &Tier, head: &ChangeCursor) {
    let mount = &t.mount;
    let shards = head.shards(mount);
    let (&log, &seq) = shards.iter().next().expect("a log with the write");
    let mut foreign = head.clone();
    foreign.set_shard(mount, log ^ 0x5a5a, seq);
    match t.changes(&mut foreign.clone(), 10).unwrap_err() {
        Error::Expired { what, oldest } => {
            assert!(what.contains("no longer exists"), "{what}");
            let mut oldest = ChangeCursor::decode(&oldest).unwrap();
            assert_eq!(oldest.shards(mount), shards);
            t.changes(&mut oldest, 10).unwrap();
        }
        other => panic!("expected Expired, got {other}"),
    }
    let mut ahead = head.clone();
    ahead.set_shard(mount, log, seq + 100);
    let message = format!(
        "cursor is ahead of the change log of {mount} written by server run {log:016x}: it \
         names change {} of {seq}",
        seq + 100
    );
    expect_err(t.changes(&mut ahead, 0), Code::InvalidArgument, &message);
}

/// A watcher's signal changes after a change is logged, so it can wait
/// without polling.
pub fn a_signal_fires_after_a_change(t: &Tier) {
    if without_change_log(t) {
        return;
    }
    let mut signals = Vec::new();
    t.backend.change_signals(&t.base, &mut signals);
    assert!(!signals.is_empty());
    for s in &mut signals {
        s.borrow_and_update();
    }
    t.write("f", "x");
    assert!(signals.iter().any(|s| s.has_changed().unwrap_or(false)));
}

/// Concurrent writers: every acknowledged write is logged exactly once,
/// and each file's changes are in the order of its versions.
pub fn concurrent_changes_are_each_logged_once(t: &Tier) {
    if without_change_log(t) {
        return;
    }
    let mut cursor = t.head();
    std::thread::scope(|s| {
        for w in 0..4 {
            s.spawn(move || {
                for i in 0..25 {
                    t.write(&format!("w{w}"), format!("{i}"));
                }
            });
        }
    });
    let changes = t.changes(&mut cursor, 1000).unwrap();
    assert_eq!(changes.len(), 100);
    for w in 0..4 {
        let versions: Vec<u64> = changes
            .iter()
            .filter(|c| t.rel(&c.path) == format!("w{w}"))
            .map(|c| c.version)
            .collect();
        assert_eq!(versions.len(), 25);
        assert!(versions.windows(2).all(|v| v[0] < v[1]), "{versions:?}");
    }
}
