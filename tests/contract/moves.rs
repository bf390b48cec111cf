//! Move (`Backend::rename`): a file or a directory tree to another path
//! of the same tier, as one atomic step (docs/contract.md § Move;
//! `check_move_paths` in src/backend/mod.rs runs first, as in the
//! service). `if_version` applies to the source, `create_only` to the
//! destination.

use crate::harness::{Tier, any, create_only, expect_err, if_version, pattern, vpath};
use agentvfs::backend::MoveOutcome;
use agentvfs::error::Error;
use agentvfs::search::Budgets;
use tonic::Code;

/// Asserts `rel` no longer exists.
#[track_caller]
fn gone(t: &Tier, rel: &str) {
    expect_err(
        t.stat(rel),
        Code::NotFound,
        &format!("not found: {}", t.path(rel)),
    );
}

/// A file moves with its content and creation time, under a new, larger
/// version; the source is gone.
pub fn a_file_moves(t: &Tier) {
    t.write("src.txt", "payload");
    let before = t.stat("src.txt").unwrap();
    let out = t.rename("src.txt", "dst.txt", any()).unwrap();
    assert_eq!(out.files_moved, 1);
    assert!(out.version > before.version, "{out:?} after {before:?}");
    let (content, after) = t.try_read("dst.txt").unwrap();
    assert_eq!(content, b"payload");
    assert_eq!(after.version, out.version);
    assert_eq!(after.size, 7);
    if t.branch {
        // A Move in a branch is one changeset of its upper scope: the
        // destination is a new file there (docs/branches.md).
        assert_eq!(after.created, after.modified);
    } else if t.keeps_created {
        assert_eq!(after.created, before.created);
    }
    gone(t, "src.txt");
    assert_eq!(t.names(""), ["dst.txt"]);
}

/// A moved file's new version is greater than every version the tier
/// handed out before, not only its own: here another file's, written just
/// before each move (20 rounds, so a tier whose versions come from a clock
/// cannot pass by luck).
pub fn a_moved_file_outranks_every_earlier_version(t: &Tier) {
    let mut own = t.write("a", "a").version;
    let (mut from, mut to) = ("a", "b");
    for round in 0..20 {
        let latest = t.write(&format!("other{round}"), "x").version;
        let out = t.rename(from, to, any()).unwrap();
        // Per-file versions only promise to grow past the file's own.
        let floor = if t.tier_wide_versions { latest } else { own };
        assert!(
            out.version > floor,
            "round {round}: moved to version {}, not above {floor}",
            out.version
        );
        own = out.version;
        assert_eq!(t.version(to), out.version, "round {round}");
        std::mem::swap(&mut from, &mut to);
    }
}

/// An `if_version` taken before the move never matches the moved file.
pub fn an_earlier_if_version_never_matches_the_moved_file(t: &Tier) {
    let v = t.write("src", "x").version;
    let moved = t.rename("src", "dst", any()).unwrap().version;
    let conflict = format!(
        "version conflict on {}: expected version {v}, found {moved}",
        t.path("dst")
    );
    expect_err(
        t.write_pre("dst", "y", if_version(v)),
        Code::Aborted,
        &conflict,
    );
    expect_err(t.delete("dst", Some(v), false), Code::Aborted, &conflict);
    assert_eq!(t.content("dst"), b"x");
}

/// A directory tree moves whole: every file keeps its content and
/// creation time and gets a version above every earlier one (or, with
/// per-file versions, keeps its own: its content did not change);
/// `files_moved` counts the files and `version` is 0.
pub fn a_tree_moves(t: &Tier) {
    let files = ["a", "b/c", "b/d/e", "big"];
    for rel in &files[..3] {
        t.write(&format!("d/{rel}"), *rel);
    }
    t.write("d/big", pattern(3 << 20));
    let before: Vec<_> = files
        .iter()
        .map(|rel| t.stat(&format!("d/{rel}")).unwrap())
        .collect();
    let highest = before.iter().map(|e| e.version).max().unwrap();
    let out = t.rename("d", "e/moved", any()).unwrap();
    assert_eq!(
        out,
        MoveOutcome {
            files_moved: 4,
            version: 0
        }
    );
    for (rel, old) in files.iter().zip(&before) {
        let (content, now) = t.try_read(&format!("e/moved/{rel}")).unwrap();
        let expected = if *rel == "big" {
            pattern(3 << 20)
        } else {
            rel.as_bytes().to_vec()
        };
        assert!(content == expected, "{rel}: content differs");
        assert_eq!(now.size, old.size, "{rel}");
        // A Move in a branch makes new files (see `a_file_moves`).
        let created = if t.branch { now.modified } else { old.created };
        assert_eq!(now.created, created, "{rel}");
        if t.tier_wide_versions {
            assert!(now.version > highest, "{rel}: {} <= {highest}", now.version);
        } else {
            assert_eq!(now.version, old.version, "{rel}");
        }
    }
    gone(t, "d");
    assert_eq!(t.names("e/moved"), ["a", "b/", "big"]);
    assert_eq!(t.names("e/moved/b"), ["c", "d/"]);
}

/// Moving a directory takes nothing that only shares its name's prefix
/// (`d-x`, `d.txt`, `dd`), which sorts around it.
pub fn a_moved_tree_leaves_its_neighbours(t: &Tier) {
    for rel in ["d/x", "d-x", "d.txt", "dd/y", "c"] {
        t.write(rel, rel);
    }
    let out = t.rename("d", "z", any()).unwrap();
    assert_eq!(out.files_moved, 1);
    assert_eq!(t.names(""), ["c", "d-x", "d.txt", "dd/", "z/"]);
    assert_eq!(t.content("z/x"), b"d/x");
    assert_eq!(t.content("dd/y"), b"dd/y");
}

/// After a move, listing and search see the files at their new place only.
pub fn a_moved_tree_is_found_at_its_new_place(t: &Tier) {
    t.write("old/a.txt", "needle");
    t.write("old/sub/b.txt", "needle");
    t.rename("old", "new", any()).unwrap();
    let found = t.glob("", "**/*.txt", Budgets::default());
    assert_eq!(found.paths(), ["new/a.txt", "new/sub/b.txt"]);
    assert_eq!(t.names(""), ["new/"]);
}

/// `create_only` refuses an existing destination with AlreadyExists;
/// both files stay as they were.
pub fn create_only_refuses_an_existing_destination(t: &Tier) {
    let vs = t.write("src", "s").version;
    let vd = t.write("dst", "d").version;
    expect_err(
        t.rename("src", "dst", create_only()),
        Code::AlreadyExists,
        &format!("already exists: {}", t.path("dst")),
    );
    assert_eq!((t.content("src"), t.version("src")), (b"s".to_vec(), vs));
    assert_eq!((t.content("dst"), t.version("dst")), (b"d".to_vec(), vd));
}

/// `create_only` moves to a missing destination.
pub fn create_only_moves_to_a_missing_destination(t: &Tier) {
    t.write("src", "s");
    assert_eq!(
        t.rename("src", "dst", create_only()).unwrap().files_moved,
        1
    );
    assert_eq!(t.content("dst"), b"s");
    gone(t, "src");
}

/// An `if_version` matching the source moves it.
pub fn a_matching_if_version_moves(t: &Tier) {
    let v = t.write("src", "s").version;
    let out = t.rename("src", "dst", if_version(v)).unwrap();
    assert!(out.version > v);
    assert_eq!(t.content("dst"), b"s");
}

/// A stale `if_version` is refused naming the source and both versions;
/// nothing moves.
pub fn a_stale_if_version_is_refused(t: &Tier) {
    let v1 = t.write("src", "one").version;
    let v2 = t.write("src", "two").version;
    expect_err(
        t.rename("src", "dst", if_version(v1)),
        Code::Aborted,
        &format!(
            "version conflict on {}: expected version {v1}, found {v2}",
            t.path("src")
        ),
    );
    assert_eq!(t.content("src"), b"two");
    gone(t, "dst");
}

/// `if_version` on a directory source is InvalidArgument; nothing moves.
pub fn if_version_on_a_directory_is_invalid_argument(t: &Tier) {
    t.write("d/f", "x");
    expect_err(
        t.rename("d", "e", if_version(1)),
        Code::InvalidArgument,
        "if_version applies to files, not directories",
    );
    assert_eq!(t.content("d/f"), b"x");
    gone(t, "e");
}

/// A destination below a file is NotDirectory naming that file; nothing
/// moves.
pub fn a_destination_below_a_file_is_not_directory(t: &Tier) {
    t.write("src", "s");
    t.write("f", "file");
    for dst in ["f/x", "f/x/y"] {
        expect_err(
            t.rename("src", dst, any()),
            Code::FailedPrecondition,
            &format!("not a directory: {}", t.path("f")),
        );
    }
    assert_eq!(t.content("src"), b"s");
    assert_eq!(t.content("f"), b"file");
}

/// A directory never replaces anything: onto a file or a directory it is
/// AlreadyExists naming the destination.
pub fn a_directory_onto_an_existing_path_is_already_exists(t: &Tier) {
    t.write("d/f", "x");
    t.write("file", "y");
    t.write("dir/g", "z");
    for dst in ["file", "dir"] {
        expect_err(
            t.rename("d", dst, any()),
            Code::AlreadyExists,
            &format!("already exists: {}", t.path(dst)),
        );
    }
    assert_eq!(t.names(""), ["d/", "dir/", "file"]);
    assert_eq!(t.names("dir"), ["g"]);
}

/// A file onto a directory is IsDirectory naming the destination.
pub fn a_file_onto_a_directory_is_is_directory(t: &Tier) {
    t.write("src", "s");
    t.write("dir/g", "z");
    expect_err(
        t.rename("src", "dir", any()),
        Code::FailedPrecondition,
        &format!("is a directory: {}", t.path("dir")),
    );
    assert_eq!(t.content("src"), b"s");
    assert_eq!(t.names("dir"), ["g"]);
}

/// A file replaces a file: the destination holds the source's content
/// under a version above both, and the source is gone.
pub fn a_file_replaces_a_file(t: &Tier) {
    let vs = t.write("src", "source").version;
    let vd = t.write("dst", "destination").version;
    let out = t.rename("src", "dst", any()).unwrap();
    assert_eq!(out.files_moved, 1);
    assert!(out.version > vs.max(vd));
    let (content, entry) = t.try_read("dst").unwrap();
    assert_eq!((content, entry.version), (b"source".to_vec(), out.version));
    gone(t, "src");
    assert_eq!(t.names(""), ["dst"]);
}

/// A missing source is NotFound naming it.
pub fn a_missing_source_is_not_found(t: &Tier) {
    t.write("d/g", "x");
    for src in ["nope", "d/nope"] {
        expect_err(
            t.rename(src, "dst", any()),
            Code::NotFound,
            &format!("not found: {}", t.path(src)),
        );
    }
    gone(t, "dst");
}

/// Missing parents of the destination are created.
pub fn missing_parents_of_the_destination_are_created(t: &Tier) {
    t.write("src", "s");
    t.rename("src", "x/y/z/dst", any()).unwrap();
    for dir in ["x", "x/y", "x/y/z"] {
        assert!(t.stat(dir).unwrap().is_directory(), "{dir}");
    }
    assert_eq!(t.content("x/y/z/dst"), b"s");
}

/// A move within the source's own directory: into a new subdirectory of
/// it, and to a sibling that extends its name.
pub fn a_move_within_the_same_directory(t: &Tier) {
    t.write("d/f", "f");
    t.write("d/a/x", "x");
    t.rename("d/f", "d/sub/f", any()).unwrap();
    t.rename("d/a", "d/a-b", any()).unwrap();
    assert_eq!(t.names("d"), ["a-b/", "sub/"]);
    assert_eq!(t.content("d/sub/f"), b"f");
    assert_eq!(t.content("d/a-b/x"), b"x");
}

/// The mount root cannot be moved. The destination lies outside the
/// mount, since any path of the tier lies inside its root, which
/// `check_move_paths` refuses first; below `/` every path does.
pub fn the_mount_root_cannot_be_moved(t: &Tier) {
    t.write("f", "x");
    let destination = vpath("/moved-mount");
    let message = if t.mount.is_root() {
        format!("cannot move / into itself ({destination})")
    } else {
        format!("{} is a mount root; a mount cannot be moved", t.mount)
    };
    expect_err(
        t.rename_paths(&t.mount, &destination, any()),
        Code::InvalidArgument,
        &message,
    );
    assert_eq!(t.content("f"), b"x");
}

/// The checks answer in their order (docs/contract.md § Move): a missing
/// source before the destination's checks, the source's version before
/// them, a directory's `if_version` before an existing destination.
pub fn the_first_failing_check_answers(t: &Tier) {
    t.write("f", "file");
    let v1 = t.write("src", "one").version;
    let v2 = t.write("src", "two").version;
    t.write("d/x", "x");
    expect_err(
        t.rename("nope", "f/below", create_only()),
        Code::NotFound,
        &format!("not found: {}", t.path("nope")),
    );
    expect_err(
        t.rename("src", "f/below", if_version(v1)),
        Code::Aborted,
        &format!(
            "version conflict on {}: expected version {v1}, found {v2}",
            t.path("src")
        ),
    );
    expect_err(
        t.rename("d", "f", Default::default()),
        Code::AlreadyExists,
        &format!("already exists: {}", t.path("f")),
    );
    expect_err(
        t.rename("d", "f", if_version(v2)),
        Code::InvalidArgument,
        "if_version applies to files, not directories",
    );
}

/// The source's directory after its last file moved away: still there,
/// empty, where directories are real; gone where they are implied.
pub fn the_source_directory_after_its_last_file_moves(t: &Tier) {
    t.write("from/f", "x");
    t.rename("from/f", "to/f", any()).unwrap();
    if t.explicit_directories {
        assert_eq!(t.names("from"), Vec::<String>::new());
    } else {
        gone(t, "from");
    }
    assert_eq!(t.content("to/f"), b"x");
}

/// An empty directory moves where directories are real, counting no
/// file; where they are implied, a directory emptied of its last file is
/// no longer there to move.
pub fn an_empty_directory_moves_where_directories_are_real(t: &Tier) {
    t.write("d/f", "x");
    t.delete("d/f", None, false).unwrap();
    if t.explicit_directories {
        let out = t.rename("d", "e", any()).unwrap();
        assert_eq!(
            out,
            MoveOutcome {
                files_moved: 0,
                version: 0
            }
        );
        assert_eq!(t.names("e"), Vec::<String>::new());
        gone(t, "d");
    } else {
        expect_err(
            t.rename("d", "e", any()),
            Code::NotFound,
            &format!("not found: {}", t.path("d")),
        );
    }
}

/// 8 threads moving one file to 8 destinations: exactly one wins, the
/// others find the source gone, and the file exists once.
pub fn racing_moves_of_one_file_have_one_winner(t: &Tier) {
    t.write("src", "only once");
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| s.spawn(move || t.rename("src", &format!("dst{i}"), any())))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners: Vec<usize> = (0..8).filter(|&i| results[i].is_ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for result in &results {
        if let Err(err) = result {
            assert_eq!(*err, Error::NotFound(t.path("src").to_string()));
        }
    }
    assert_eq!(t.names(""), [format!("dst{}", winners[0])]);
    assert_eq!(
        t.content(&format!("dst{}", winners[0])),
        b"only once".to_vec()
    );
}
