//! What only the mount table decides (src/backend/composite.rs): a Move
//! or a Copy never leaves its mount, and a mount point is neither moved nor
//! replaced. Run once, on the Composite holding all three tiers.

use crate::harness::{Kind, Setup, Tier, any, expect_err, vpath};
use agentvfs::VfsPath;
use tonic::Code;

/// The Composite of every tier with a file below each mount holding the
/// mount's name; `refuse` is called for every ordered pair of two mounts
/// with a file on the first and a path beside the file on the second, and
/// the files are checked unchanged after.
fn across_mounts(refuse: impl Fn(&Tier, &VfsPath, &VfsPath, &str, &str)) {
    let t = Tier::new(Setup::Composite(Kind::State));
    let mounts = ["/", "/memories", "/workspace"];
    let file = |mount: &str| vpath(&format!("{}/case/f", mount.trim_end_matches('/')));
    for mount in mounts {
        t.backend
            .write(&t.scope, &file(mount), mount.as_bytes().to_vec(), any())
            .unwrap();
    }
    for from in mounts {
        for to in mounts.iter().filter(|m| **m != from) {
            let (source, destination) = (file(from), file(to).parent().join("g").unwrap());
            refuse(&t, &source, &destination, from, to);
        }
    }
    for mount in mounts {
        let (content, _) = t.backend.read(&t.scope, &file(mount)).unwrap();
        assert_eq!(content, mount.as_bytes());
    }
}

/// A Move between two mounts is refused naming both paths and both
/// mounts, in every direction, and nothing moves.
#[test]
fn moves_across_mounts_are_refused() {
    across_mounts(|t, source, destination, from, to| {
        expect_err(
            t.rename_paths(source, destination, any()),
            Code::InvalidArgument,
            &format!("cannot move across mounts: {source} is on {from}, {destination} on {to}"),
        );
    });
}

/// A mount point is neither a Move's source nor its destination, nor is
/// `/` (the State mount's root here) a destination.
#[test]
fn mount_points_are_neither_moved_nor_replaced() {
    let t = Tier::new(Setup::Composite(Kind::State));
    let file = vpath("/case/f");
    t.backend
        .write(&t.scope, &file, b"x".to_vec(), any())
        .unwrap();
    for mount in ["/memories", "/workspace"] {
        let message = format!("{mount} is a mount root; a mount cannot be moved");
        expect_err(
            t.rename_paths(&vpath(mount), &vpath("/elsewhere"), any()),
            Code::InvalidArgument,
            &message,
        );
        expect_err(
            t.rename_paths(&file, &vpath(mount), any()),
            Code::InvalidArgument,
            &message,
        );
    }
    expect_err(
        t.rename_paths(&file, &vpath("/"), any()),
        Code::InvalidArgument,
        "/ is a mount root; a mount cannot be moved",
    );
    assert_eq!(t.backend.read(&t.scope, &file).unwrap().0, b"x");
}

/// A Copy between two mounts is refused naming both paths and both
/// mounts, in every direction, and nothing is written.
#[test]
fn copies_across_mounts_are_refused() {
    across_mounts(|t, source, destination, from, to| {
        expect_err(
            t.backend.copy(&t.scope, source, destination, any()),
            Code::InvalidArgument,
            &format!("cannot copy across mounts: {source} is on {from}, {destination} on {to}"),
        );
        expect_err(
            t.backend.stat(&t.scope, destination),
            Code::NotFound,
            &format!("not found: {destination}"),
        );
    });
}
