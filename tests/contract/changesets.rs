//! Changesets (`Backend::commit`; docs/changesets.md § Tiers): every file's
//! final state applied as one atomic step, on condition that each file is
//! still at the version the changeset saw; else `VersionMismatch` and
//! nothing changes. Concurrent changesets over the same files serialize.

use crate::harness::{Tier, expect_err};
use agentvfs::backend::{FileAction, FileChange, FileCommitted};
use agentvfs::change::{ChangeKind, Operation};
use agentvfs::error::Result;
use tonic::Code;

/// A put of `data` at `rel`, expected at `expected`.
fn put(t: &Tier, rel: &str, expected: Option<u64>, data: &str) -> FileChange {
    FileChange {
        path: t.path(rel),
        expected,
        action: FileAction::Put {
            data: data.as_bytes().to_vec().into(),
            operation: Operation::Write,
            moved_from: None,
            executable: None,
        },
    }
}

/// A delete of `rel`, expected at `expected`.
fn delete(t: &Tier, rel: &str, expected: Option<u64>) -> FileChange {
    FileChange {
        path: t.path(rel),
        expected,
        action: FileAction::Delete { moved_to: None },
    }
}

/// A check that `rel` is at `expected`.
fn check(t: &Tier, rel: &str, expected: Option<u64>) -> FileChange {
    FileChange {
        path: t.path(rel),
        expected,
        action: FileAction::Check,
    }
}

fn commit(t: &Tier, changes: &[FileChange]) -> Result<Vec<FileCommitted>> {
    t.backend.commit(&t.scope, changes)
}

/// On a tier that takes no changesets, commit is FAILED_PRECONDITION
/// naming the mount; returns true when the case has nothing more to check.
fn without_changesets(t: &Tier) -> bool {
    if t.takes_changesets {
        return false;
    }
    let changes = [put(t, "a", None, "x")];
    let message = format!(
        "not supported: the mount of {} does not take changesets",
        t.path("a")
    );
    expect_err(commit(t, &changes), Code::FailedPrecondition, &message);
    assert!(t.stat("a").is_err(), "nothing was written");
    true
}

/// Creates, replaces and deletes in one changeset: each file gets one new
/// version, larger than its old one; the answer lists them in order.
pub fn a_changeset_applies_every_file(t: &Tier) {
    if without_changesets(t) {
        return;
    }
    let old = t.write("old.txt", "old").version;
    let gone = t.write("gone.txt", "bye").version;
    let done = commit(
        t,
        &[
            delete(t, "gone.txt", Some(gone)),
            put(t, "new/deep.txt", None, "fresh"),
            put(t, "old.txt", Some(old), "replaced"),
        ],
    )
    .unwrap();
    assert_eq!(done.len(), 3);
    assert_eq!(
        (done[0].path.clone(), done[0].deleted, done[0].size),
        (t.path("gone.txt"), true, 0)
    );
    assert_eq!(
        (done[1].path.clone(), done[1].deleted, done[1].size),
        (t.path("new/deep.txt"), false, 5)
    );
    assert_eq!(t.content("new/deep.txt"), b"fresh");
    assert_eq!(t.version("new/deep.txt"), done[1].version);
    assert_eq!(t.content("old.txt"), b"replaced");
    assert_eq!(t.version("old.txt"), done[2].version);
    assert!(done[2].version > old, "{done:?}");
    expect_err(
        t.stat("gone.txt"),
        Code::NotFound,
        &format!("not found: {}", t.path("gone.txt")),
    );
}

/// One file at another version than the changeset saw refuses the whole
/// changeset with the conflict naming it; no file changes.
pub fn a_stale_file_refuses_the_whole_changeset(t: &Tier) {
    if without_changesets(t) {
        return;
    }
    let a = t.write("a", "a1").version;
    let b = t.write("b", "b1").version;
    let b2 = t.write("b", "b2").version;
    let result = commit(
        t,
        &[
            put(t, "a", Some(a), "a-new"),
            put(t, "b", Some(b), "b-new"),
            put(t, "c", None, "c-new"),
        ],
    );
    expect_err(
        result,
        Code::Aborted,
        &format!(
            "version conflict on {}: expected version {b}, found {b2}",
            t.path("b")
        ),
    );
    assert_eq!(t.content("a"), b"a1");
    assert_eq!(t.version("a"), a);
    assert_eq!(t.content("b"), b"b2");
    assert!(t.stat("c").is_err(), "c was not created");
}

/// A file the changeset saw absent must still be absent; a file it only
/// read (a check) must still be at the version read.
pub fn absence_and_checks_are_conditions_too(t: &Tier) {
    if without_changesets(t) {
        return;
    }
    let there = t.write("there", "x").version;
    expect_err(
        commit(t, &[put(t, "new", None, "n"), put(t, "there", None, "y")]),
        Code::Aborted,
        &format!(
            "version conflict on {}: expected version 0, found {there}",
            t.path("there")
        ),
    );
    assert!(t.stat("new").is_err());
    let read = t.write("read", "r").version;
    let now = t.write("read", "r2").version;
    expect_err(
        commit(t, &[check(t, "read", Some(read)), put(t, "new", None, "n")]),
        Code::Aborted,
        &format!(
            "version conflict on {}: expected version {read}, found {now}",
            t.path("read")
        ),
    );
    assert!(t.stat("new").is_err());
    let done = commit(t, &[check(t, "read", Some(now)), put(t, "new", None, "n")]).unwrap();
    assert_eq!(done[0].version, now);
    assert_eq!(t.version("read"), now, "a check changes nothing");
    assert_eq!(t.content("new"), b"n");
}

/// A put at a directory is IS_DIRECTORY, below a file NOT_DIRECTORY; the
/// changeset's other files are not written.
pub fn a_put_that_cannot_be_a_file_changes_nothing(t: &Tier) {
    if without_changesets(t) {
        return;
    }
    t.write("dir/inner", "i");
    let file = t.write("file", "f").version;
    expect_err(
        commit(t, &[put(t, "dir", None, "x"), put(t, "ok", None, "ok")]),
        Code::FailedPrecondition,
        &format!("is a directory: {}", t.path("dir")),
    );
    expect_err(
        commit(
            t,
            &[put(t, "file/below", None, "x"), put(t, "ok", None, "ok")],
        ),
        Code::FailedPrecondition,
        &format!("not a directory: {}", t.path("file")),
    );
    assert!(t.stat("ok").is_err());
    assert_eq!(t.version("file"), file);
}

/// The change log holds one record per file of the changeset, next to each
/// other in its order (a watcher receives them together), each with its
/// operation.
pub fn a_changeset_is_logged_together(t: &Tier) {
    if without_changesets(t) || !t.keeps_change_log {
        return;
    }
    let old = t.write("m", "1").version;
    let gone = t.write("d", "x").version;
    let mut cursor = t.head();
    let mut moved = put(t, "m", Some(old), "2");
    if let FileAction::Put { operation, .. } = &mut moved.action {
        *operation = Operation::Edit;
    }
    commit(
        t,
        &[delete(t, "d", Some(gone)), moved, put(t, "n", None, "3")],
    )
    .unwrap();
    let changes = t.changes(&mut cursor, 10).unwrap();
    let seen: Vec<_> = changes
        .iter()
        .map(|c| (c.kind, t.rel(&c.path), c.origin.operation))
        .collect();
    assert_eq!(
        seen,
        [
            (ChangeKind::Deleted, "d".to_owned(), Operation::Delete),
            (ChangeKind::Modified, "m".to_owned(), Operation::Edit),
            (ChangeKind::Created, "n".to_owned(), Operation::Write),
        ]
    );
    for pair in changes.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1, "consecutive: {changes:?}");
    }
}

/// A changeset keeps the versions it replaces, as a write does.
pub fn a_changeset_keeps_history(t: &Tier) {
    if without_changesets(t) || !t.keeps_history {
        return;
    }
    let v1 = t.write("h", "one").version;
    let v2 = commit(t, &[put(t, "h", Some(v1), "two")]).unwrap()[0].version;
    let versions: Vec<u64> = t.versions("h").unwrap().iter().map(|v| v.version).collect();
    assert_eq!(versions, [v2, v1]);
    assert_eq!(t.read_version("h", v1).unwrap().1, b"one");
}

/// Threads each move one unit from one file to another, as changesets
/// conditioned on what they read, retrying on conflict: the total is kept
/// (no lost update, no torn changeset) and every committed changeset
/// counted.
pub fn concurrent_changesets_serialize(t: &Tier) {
    if without_changesets(t) {
        return;
    }
    const FILES: usize = 3;
    const THREADS: usize = 4;
    const ROUNDS: usize = 25;
    for i in 0..FILES {
        t.write(&format!("acct{i}"), "100");
    }
    let read = |rel: &str| -> (u64, i64) {
        let (data, entry) = t.try_read(rel).unwrap();
        let n = String::from_utf8(data).unwrap().parse().unwrap();
        (entry.version, n)
    };
    let committed = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let (read, committed) = (&read, &committed);
            s.spawn(move || {
                for round in 0..ROUNDS {
                    let from = format!("acct{}", (thread + round) % FILES);
                    let to = format!("acct{}", (thread + round + 1) % FILES);
                    loop {
                        let (vf, nf) = read(&from);
                        let (vt, nt) = read(&to);
                        let changes = [
                            put(t, &from, Some(vf), &(nf - 1).to_string()),
                            put(t, &to, Some(vt), &(nt + 1).to_string()),
                        ];
                        match commit(t, &changes) {
                            Ok(_) => break,
                            Err(agentvfs::error::Error::VersionMismatch { .. }) => continue,
                            Err(e) => panic!("commit: {e}"),
                        }
                    }
                    committed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let total: i64 = (0..FILES).map(|i| read(&format!("acct{i}")).1).sum();
    assert_eq!(total, 100 * FILES as i64);
    assert_eq!(committed.into_inner(), THREADS * ROUNDS);
}

/// A changeset's put keeps the replaced file's executable bit unless it
/// names one, and a put that names one sets it (docs/contract.md § The
/// executable bit).
pub fn a_changeset_keeps_or_sets_the_executable_bit(t: &Tier) {
    if without_changesets(t) {
        return;
    }
    let on = agentvfs::backend::Precondition {
        executable: Some(true),
        ..Default::default()
    };
    let run = t.write_pre("run.sh", "#!/bin/sh\n", on).unwrap().version;
    let named = FileChange {
        action: FileAction::Put {
            data: b"new tool".to_vec().into(),
            operation: Operation::Write,
            moved_from: None,
            executable: Some(true),
        },
        ..put(t, "tool", None, "")
    };
    commit(
        t,
        &[put(t, "run.sh", Some(run), "#!/bin/sh\necho\n"), named],
    )
    .unwrap();
    assert!(t.stat("run.sh").unwrap().executable, "{:?}: kept", t.kind);
    assert!(t.stat("tool").unwrap().executable, "{:?}: set", t.kind);
    assert_eq!(t.content("tool"), b"new tool", "{:?}", t.kind);
}
