//! One condition, one answer: every operation meeting the same condition
//! fails with the same gRPC code and the same message, naming the same
//! path, whatever the tier (docs/contract.md § Errors; § Grants: "a
//! granted missing path is NOT_FOUND").

use crate::harness::{MAX_FILE_BYTES, Tier, any, expect_err};
use agentvfs::VfsPath;
use agentvfs::error::Result;
use tonic::Code;

/// One operation's answer, labelled, shown as text when it succeeded.
type Answer = (&'static str, Result<String>);

/// Shows a success of any kind as text.
fn shown<T: std::fmt::Debug>(result: Result<T>) -> Result<String> {
    result.map(|value| format!("{value:?}"))
}

/// Every operation that looks `path` up: stat, read, read_chunks, list,
/// update, delete (plain and recursive).
fn every_lookup(t: &Tier, path: &VfsPath) -> Vec<Answer> {
    let (b, scope) = (&t.backend, &t.scope);
    vec![
        ("stat", shown(b.stat(scope, path))),
        ("read", shown(b.read(scope, path).map(|(_, e)| e))),
        (
            "read_chunks",
            shown(b.read_chunks(scope, path, 1024).map(|(e, _)| e)),
        ),
        ("list", shown(b.list(scope, path))),
        (
            "update",
            shown(b.update(scope, path, None, &mut |c| Ok(c.to_vec()))),
        ),
        ("delete", shown(b.delete(scope, path, None, false))),
        ("delete recursive", shown(b.delete(scope, path, None, true))),
    ]
}

/// Every operation that needs a file at `path`: read, read_chunks,
/// update, write, write_chunks, and a non-recursive delete.
fn every_file_operation(t: &Tier, path: &VfsPath) -> Vec<Answer> {
    let (b, scope) = (&t.backend, &t.scope);
    let piece = || std::iter::once(Ok(b"x".to_vec()));
    vec![
        ("read", shown(b.read(scope, path).map(|(_, e)| e))),
        (
            "read_chunks",
            shown(b.read_chunks(scope, path, 1024).map(|(e, _)| e)),
        ),
        (
            "update",
            shown(b.update(scope, path, None, &mut |c| Ok(c.to_vec()))),
        ),
        ("write", shown(b.write(scope, path, b"x".to_vec(), any()))),
        (
            "write_chunks",
            shown(b.write_chunks(scope, path, any(), &mut piece())),
        ),
        ("delete", shown(b.delete(scope, path, None, false))),
    ]
}

/// Asserts every answer failed with `code` and the message `expected`
/// gives for its operation, listing every one that did not.
#[track_caller]
fn all_fail(answers: Vec<Answer>, code: Code, expected: impl Fn(&str) -> String) {
    let wrong: Vec<String> = answers
        .into_iter()
        .filter_map(|(op, answer)| {
            let want = expected(op);
            match answer {
                Err(e) if e.grpc_code() == code && e.to_string() == want => None,
                other => Some(format!("{op}: {other:?}, expected {code:?} {want:?}")),
            }
        })
        .collect();
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// A missing file beside others is NotFound naming it, for every
/// operation.
pub fn a_missing_file_is_not_found_by_every_operation(t: &Tier) {
    t.write("d/g", "x");
    let path = t.path("d/nope");
    all_fail(every_lookup(t, &path), Code::NotFound, |_| {
        format!("not found: {path}")
    });
}

/// A path whose directories are missing too is NotFound naming the path
/// asked for, not the first missing directory, for every operation.
pub fn a_missing_ancestor_still_names_the_requested_path(t: &Tier) {
    t.write("d/g", "x");
    let path = t.path("nope/deeper/f");
    all_fail(every_lookup(t, &path), Code::NotFound, |_| {
        format!("not found: {path}")
    });
}

/// A path below a file does not exist: every operation that looks it up
/// is NotFound naming it (only a write there is NotDirectory; see
/// `writes`).
pub fn a_path_below_a_file_does_not_exist(t: &Tier) {
    t.write("f", "x");
    let path = t.path("f/x");
    all_fail(every_lookup(t, &path), Code::NotFound, |_| {
        format!("not found: {path}")
    });
    assert_eq!(t.content("f"), b"x");
}

/// Every file operation on a directory is IsDirectory naming it; a
/// non-recursive delete says how to delete it.
pub fn every_file_operation_on_a_directory_is_is_directory(t: &Tier) {
    t.write("d/f", "x");
    let path = t.path("d");
    all_fail(
        every_file_operation(t, &path),
        Code::FailedPrecondition,
        |op| match op {
            "delete" => format!("is a directory: {path} (pass recursive to delete a directory)"),
            _ => format!("is a directory: {path}"),
        },
    );
    assert_eq!(t.content("d/f"), b"x");
}

/// The mount root is a directory to every file operation: IsDirectory
/// naming it. A non-recursive delete says why it stays: the tier asks for
/// `recursive`, the mount table names a mount point.
pub fn the_mount_root_is_a_directory_to_every_file_operation(t: &Tier) {
    t.write("f", "x");
    let root = &t.mount;
    let why = if t.composite {
        "is a mount point"
    } else {
        "(pass recursive to delete a directory)"
    };
    all_fail(
        every_file_operation(t, root),
        Code::FailedPrecondition,
        |op| match op {
            "delete" => format!("is a directory: {root} {why}"),
            _ => format!("is a directory: {root}"),
        },
    );
    assert_eq!(t.content("f"), b"x");
}

/// A file over `max_file_bytes` is refused with RESOURCE_EXHAUSTED,
/// worded as docs/contract.md § Errors fixes it, whether written whole or
/// in pieces, and nothing is stored.
pub fn a_file_over_the_size_limit_is_too_large(t: &Tier) {
    t.write("other", "x");
    let path = t.path("big");
    let size = MAX_FILE_BYTES + (1 << 20);
    let whole = vec![0u8; size as usize];
    let mut pieces = (0..size >> 20).map(|_| Ok(vec![0u8; 1 << 20]));
    let (b, scope) = (&t.backend, &t.scope);
    all_fail(
        vec![
            ("write", shown(b.write(scope, &path, whole, any()))),
            (
                "write_chunks",
                shown(b.write_chunks(scope, &path, any(), &mut pieces)),
            ),
        ],
        Code::ResourceExhausted,
        |_| {
            format!(
                "too large: {path}: {size} bytes exceeds the file size limit of \
                 {MAX_FILE_BYTES} bytes"
            )
        },
    );
    expect_err(t.stat("big"), Code::NotFound, &format!("not found: {path}"));
}
