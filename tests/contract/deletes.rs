//! Delete: files with `if_version`, directory trees only when recursive.

use crate::harness::{Tier, expect_err};
use tonic::Code;

/// Deleting a file counts one and the file is gone; its neighbours stay.
pub fn deleting_a_file_removes_only_it(t: &Tier) {
    t.write("d/f", "x");
    t.write("d/g", "y");
    assert_eq!(t.delete("d/f", None, false).unwrap(), 1);
    expect_err(
        t.stat("d/f"),
        Code::NotFound,
        &format!("not found: {}", t.path("d/f")),
    );
    assert_eq!(t.names("d"), ["g"]);
}

/// A matching `if_version` deletes the file.
pub fn delete_with_a_matching_if_version(t: &Tier) {
    let v = t.write("f", "x").version;
    assert_eq!(t.delete("f", Some(v), false).unwrap(), 1);
    assert!(t.stat("f").is_err());
}

/// A stale `if_version` is refused naming both versions, and the file
/// stays as it is.
pub fn delete_with_a_stale_if_version_is_refused(t: &Tier) {
    let v1 = t.write("f", "one").version;
    let v2 = t.write("f", "two").version;
    expect_err(
        t.delete("f", Some(v1), false),
        Code::Aborted,
        &format!(
            "version conflict on {}: expected version {v1}, found {v2}",
            t.path("f")
        ),
    );
    assert_eq!(t.content("f"), b"two");
    assert_eq!(t.version("f"), v2);
}

/// A directory is deleted only when recursive; without it the answer is
/// IsDirectory saying so, and nothing is removed.
pub fn a_directory_needs_recursive(t: &Tier) {
    t.write("d/f", "x");
    expect_err(
        t.delete("d", None, false),
        Code::FailedPrecondition,
        &format!(
            "is a directory: {} (pass recursive to delete a directory)",
            t.path("d")
        ),
    );
    assert_eq!(t.content("d/f"), b"x");
}

/// A recursive delete removes the whole tree, counts its files, and
/// leaves the paths that merely share its name's prefix (`d-x`, `d.txt`,
/// `dd`), which sort around it.
pub fn a_recursive_delete_counts_the_files_of_the_tree(t: &Tier) {
    for rel in ["d/a", "d/b/c", "d/b/d/e", "d/f", "d/g/h"] {
        t.write(rel, rel);
    }
    for rel in ["d-x", "d.txt", "dd/a", "c"] {
        t.write(rel, rel);
    }
    assert_eq!(t.delete("d", None, true).unwrap(), 5);
    expect_err(
        t.stat("d"),
        Code::NotFound,
        &format!("not found: {}", t.path("d")),
    );
    assert_eq!(t.names(""), ["c", "d-x", "d.txt", "dd/"]);
    assert_eq!(t.content("dd/a"), b"dd/a");
}

/// `recursive` on a file deletes the file.
pub fn recursive_on_a_file_deletes_it(t: &Tier) {
    t.write("f", "x");
    assert_eq!(t.delete("f", None, true).unwrap(), 1);
    assert!(t.stat("f").is_err());
}

/// `if_version` on a directory is InvalidArgument: versions belong to
/// files; nothing is removed.
pub fn if_version_on_a_directory_is_invalid_argument(t: &Tier) {
    t.write("d/f", "x");
    for version in [0, 1, u64::MAX] {
        expect_err(
            t.delete("d", Some(version), true),
            Code::InvalidArgument,
            "if_version applies to files, not directories",
        );
    }
    assert_eq!(t.content("d/f"), b"x");
}

/// Deleting a missing path is NotFound naming it, recursive or not.
pub fn deleting_a_missing_path_is_not_found(t: &Tier) {
    t.write("d/g", "x");
    for rel in ["nope", "d/nope"] {
        for recursive in [false, true] {
            expect_err(
                t.delete(rel, None, recursive),
                Code::NotFound,
                &format!("not found: {}", t.path(rel)),
            );
        }
    }
}

/// A directory emptied of its last file: where directories are real it is
/// still there, empty, and a recursive delete removes it counting no
/// file; where they are implied it is gone already.
pub fn deleting_an_emptied_directory(t: &Tier) {
    t.write("d/f", "x");
    t.delete("d/f", None, false).unwrap();
    if t.explicit_directories {
        expect_err(
            t.delete("d", None, false),
            Code::FailedPrecondition,
            &format!(
                "is a directory: {} (pass recursive to delete a directory)",
                t.path("d")
            ),
        );
        assert_eq!(t.delete("d", None, true).unwrap(), 0);
    }
    expect_err(
        t.delete("d", None, true),
        Code::NotFound,
        &format!("not found: {}", t.path("d")),
    );
}

/// A deleted tree's paths can be written again at once, as files or
/// directories.
pub fn a_deleted_tree_can_be_rewritten(t: &Tier) {
    t.write("d/x/y", "1");
    t.delete("d", None, true).unwrap();
    t.write("d/x", "now a file");
    assert_eq!(t.content("d/x"), b"now a file");
    assert_eq!(t.names("d"), ["x"]);
}
