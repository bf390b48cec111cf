//! Learning in the write path beyond Write and Edit (docs/search-index.md §
//! Learning in the write path), through the real server on State and the
//! Store (and the object tier, from `search_index_object`): a Copy, a Move
//! of a file and of a directory, a changeset, a Restore and streamed writes
//! (one over 64 KiB, stored as it arrives) each teach the namespace's index
//! the content they commit, so the next Grep reads none of them to learn
//! them.

use super::search_index::{narrowed, store_server};
use crate::util::{Server, grep_all};
use agentvfs::pb;
use agentvfs::pb::changeset_operation::Operation;
use agentvfs::pb::write_bytes_request::Kind;

#[tokio::test]
async fn copies_moves_changesets_restores_and_streamed_writes_are_learned() {
    let server = store_server(
        "index_min_files = 0
index_self_check = 0",
    );
    for (round, root) in ["/w", "/memories/w"].into_iter().enumerate() {
        changes_are_learned(&server, root, 2 * round, 40).await;
    }
}

/// The check under `root` of `server`, whose log shows `before` narrowed
/// Greps so far: after a Grep learned `first` of the 40 files written (all
/// of them on a new namespace; none where the namespace had an index in
/// use, as the writes taught it), each kind of change is learned as it
/// commits, so the next Grep learns nothing and skips every file but the
/// three that match.
pub(super) async fn changes_are_learned(server: &Server, root: &str, before: usize, first: u64) {
    let mut fs = server.fs().await;
    let write = |path: String, content: &str| pb::WriteRequest {
        path,
        content: content.into(),
        ..Default::default()
    };
    let mut first_of_04 = 0;
    for i in 0..38 {
        let written = fs
            .write(write(format!("{root}/{i:02}.txt"), &format!("hay {i}\n")))
            .await
            .unwrap()
            .into_inner();
        if i == 4 {
            first_of_04 = written.version;
        }
    }
    for name in ["x", "y"] {
        let path = format!("{root}/d/{name}.txt");
        fs.write(write(path, "hay in d\n")).await.unwrap();
    }
    let needle = pb::GrepRequest {
        pattern: "needle".into(),
        path: root.into(),
        ..Default::default()
    };
    let (matches, _) = grep_all(&mut fs, needle.clone()).await.unwrap();
    assert!(matches.is_empty());
    assert_eq!(
        narrowed(server, before + 1, "learned").await,
        first,
        "{root}"
    );

    fs.copy(pb::CopyRequest {
        source: format!("{root}/00.txt"),
        destination: format!("{root}/c/copy.txt"),
        ..Default::default()
    })
    .await
    .unwrap();
    for (source, destination) in [("02.txt", "m/moved.txt"), ("d", "e")] {
        fs.r#move(pb::MoveRequest {
            source: format!("{root}/{source}"),
            destination: format!("{root}/{destination}"),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let operations = vec![
        Operation::Write(write(format!("{root}/cs.txt"), "a needle\n")),
        Operation::Edit(pb::EditRequest {
            path: format!("{root}/03.txt"),
            old_string: "hay 3".into(),
            new_string: "hay 3 and a needle".into(),
            ..Default::default()
        }),
    ];
    let operations = operations
        .into_iter()
        .map(|operation| pb::ChangesetOperation {
            operation: Some(operation),
        })
        .collect();
    fs.commit(pb::CommitRequest { operations }).await.unwrap();
    fs.edit(pb::EditRequest {
        path: format!("{root}/04.txt"),
        old_string: "hay".into(),
        new_string: "straw".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    fs.restore(pb::RestoreRequest {
        path: format!("{root}/04.txt"),
        version: first_of_04,
        ..Default::default()
    })
    .await
    .unwrap();
    // A small streamed write, and one over 64 KiB that the Store and the
    // object tier store apart as it arrives.
    let large = "hay in a large file\n".repeat(5_000);
    for (name, content) in [("streamed.txt", "streamed needle\n"), ("large.txt", &large)] {
        let header = pb::WriteBytesRequest {
            kind: Some(Kind::Header(pb::WriteBytesHeader {
                path: format!("{root}/{name}"),
                ..Default::default()
            })),
        };
        let pieces = content
            .as_bytes()
            .chunks(30_000)
            .map(|piece| pb::WriteBytesRequest {
                kind: Some(Kind::Data(piece.to_vec())),
            });
        let messages: Vec<_> = std::iter::once(header).chain(pieces).collect();
        fs.write_bytes(tokio_stream::iter(messages)).await.unwrap();
    }

    let (matches, summary) = grep_all(&mut fs, needle).await.unwrap();
    let paths: Vec<String> = matches.into_iter().map(|m| m.path).collect();
    let expected = ["03.txt", "cs.txt", "streamed.txt"].map(|p| format!("{root}/{p}"));
    assert_eq!(paths, expected);
    assert_eq!(summary.files_searched, 44, "{root}");
    let learned = narrowed(server, before + 2, "learned").await;
    assert_eq!(learned, 0, "{root}: learned by the changes");
    assert_eq!(narrowed(server, before + 2, "skipped").await, 41, "{root}");
}
