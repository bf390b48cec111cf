//! Every Filesystem RPC on the State tier, and every error kind.

use crate::util::{Server, assert_error, with_session, write};
use agentvfs::pb;
use tokio_stream::StreamExt;
use tonic::Code;

/// Write then Read returns the content, numbered cat -n style on request,
/// with the version the write returned.
#[tokio::test]
async fn write_then_read_round_trips_with_version() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let w = write(&mut fs, "/notes/a.txt", "alpha\nbeta\ngamma\n").await;
    assert_eq!(
        (w.path.as_str(), w.bytes_written, w.created),
        ("/notes/a.txt", 17, true)
    );
    let r = fs
        .read(pb::ReadRequest {
            path: "/notes/a.txt".into(),
            offset: 1,
            limit: 1,
            numbered: true,
            version: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.content, "     2\tbeta");
    assert_eq!(
        (r.total_lines, r.lines_returned, r.version),
        (3, 1, w.version)
    );
    let all = fs
        .read(pb::ReadRequest {
            path: "/notes/a.txt".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.into_inner().content, "alpha\nbeta\ngamma\n");
}

/// Lines over 10000 characters continue as N.1, N.2 (docs/contract.md § Text formats), and an empty
/// file reads as the EmptyContentWarning.
#[tokio::test]
async fn read_numbering_splits_long_lines_and_warns_on_empty() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(
        &mut fs,
        "/long.txt",
        &format!("x\n{}\n", "y".repeat(25_000)),
    )
    .await;
    let r = fs
        .read(pb::ReadRequest {
            path: "/long.txt".into(),
            numbered: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let labels: Vec<&str> = r
        .get_ref()
        .content
        .lines()
        .map(|l| l.split('\t').next().unwrap().trim())
        .collect();
    assert_eq!(labels, ["1", "2", "2.1", "2.2"]);
    write(&mut fs, "/empty.txt", "").await;
    let r = fs
        .read(pb::ReadRequest {
            path: "/empty.txt".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        r.into_inner().content,
        "System reminder: File exists but has empty contents"
    );
}

/// An offset past the end is INVALID_ARGUMENT naming the file's length.
#[tokio::test]
async fn read_offset_past_end_names_length() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/a.txt", "1\n2\n").await;
    let err = fs
        .read(pb::ReadRequest {
            path: "/a.txt".into(),
            offset: 5,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    assert!(err.message().contains("has 2 lines"), "{}", err.message());
}

/// ListInfo shows one level, directories flagged, sorted, `/d` equal to `/d/`.
#[tokio::test]
async fn list_info_shows_one_level_sorted() {
    let server = Server::start();
    let mut fs = server.fs().await;
    for p in [
        "/d/b.txt",
        "/d/a.txt",
        "/d/sub/deep/x.txt",
        "/d-other/y.txt",
    ] {
        write(&mut fs, p, "x").await;
    }
    for dir in ["/d", "/d/"] {
        let entries = fs
            .list_info(pb::ListInfoRequest { path: dir.into() })
            .await
            .unwrap()
            .into_inner()
            .entries;
        let shown: Vec<(&str, bool)> = entries
            .iter()
            .map(|e| (e.path.as_str(), e.is_directory))
            .collect();
        assert_eq!(
            shown,
            [("/d/a.txt", false), ("/d/b.txt", false), ("/d/sub", true)]
        );
    }
    let root = fs
        .list_info(pb::ListInfoRequest { path: "/".into() })
        .await
        .unwrap()
        .into_inner()
        .entries;
    let names: Vec<&str> = root.iter().map(|e| e.path.as_str()).collect();
    // The embedded default also mounts /memories (Store) and /workspace (the
    // working directory).
    assert_eq!(names, ["/d", "/d-other", "/memories", "/workspace"]);
}

/// Stat describes files and implied directories.
#[tokio::test]
async fn stat_files_and_directories() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let w = write(&mut fs, "/s/f.txt", "12345").await;
    let f = fs
        .stat(pb::StatRequest {
            path: "/s/f.txt".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .info
        .unwrap();
    assert_eq!((f.size, f.version, f.is_directory), (5, w.version, false));
    assert!(f.modified_time.is_some() && f.created_time.is_some());
    let d = fs
        .stat(pb::StatRequest { path: "/s".into() })
        .await
        .unwrap()
        .into_inner()
        .info
        .unwrap();
    assert!(d.is_directory);
    let err = fs
        .stat(pb::StatRequest {
            path: "/nope".into(),
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::NotFound, "NOT_FOUND");
}

/// Versions grow on every change; create_only and if_version conflicts map
/// to ALREADY_EXISTS and ABORTED with the CONFLICT reason.
#[tokio::test]
async fn conditional_writes_conflict() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let v1 = write(&mut fs, "/c.txt", "one").await.version;
    let v2 = write(&mut fs, "/c.txt", "two").await.version;
    assert!(v2 > v1);
    let err = fs
        .write(pb::WriteRequest {
            path: "/c.txt".into(),
            content: "x".into(),
            create_only: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::AlreadyExists, "CONFLICT");
    let err = fs
        .write(pb::WriteRequest {
            path: "/c.txt".into(),
            content: "x".into(),
            if_version: Some(v1),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::Aborted, "CONFLICT");
    let ok = fs
        .write(pb::WriteRequest {
            path: "/c.txt".into(),
            content: "three".into(),
            if_version: Some(v2),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ok.version > v2 && !ok.created);
    let fresh = fs
        .write(pb::WriteRequest {
            path: "/new.txt".into(),
            content: "n".into(),
            if_version: Some(0),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(fresh.into_inner().created);
}

/// Edit replaces a unique match; zero matches quote the string; several
/// matches without replace_all give the count; empty old_string is invalid.
#[tokio::test]
async fn edit_semantics() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/e.txt", "foo bar foo\n").await;
    let edit = |old: &str, new: &str, all: bool| pb::EditRequest {
        path: "/e.txt".into(),
        old_string: old.into(),
        new_string: new.into(),
        replace_all: all,
        if_version: None,
    };
    let ok = fs
        .edit(edit("bar", "baz", false))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.replacements_made, 1);
    let err = fs.edit(edit("foo", "x", false)).await.unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    assert!(
        err.message().contains("matches 2 times"),
        "{}",
        err.message()
    );
    let err = fs.edit(edit("missing", "x", false)).await.unwrap_err();
    assert!(err.message().contains("\"missing\""), "{}", err.message());
    let err = fs.edit(edit("", "x", false)).await.unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    let all = fs
        .edit(edit("foo", "qux", true))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.replacements_made, 2);
    let r = fs
        .read(pb::ReadRequest {
            path: "/e.txt".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.into_inner().content, "qux baz qux\n");
}

/// MultiEdit applies all edits against the original text or none, naming
/// the failing edit's index.
#[tokio::test]
async fn multi_edit_is_all_or_nothing() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/m.txt", "a b c").await;
    let op = |old: &str, new: &str| pb::EditOperation {
        old_string: old.into(),
        new_string: new.into(),
        replace_all: false,
    };
    let err = fs
        .multi_edit(pb::MultiEditRequest {
            path: "/m.txt".into(),
            edits: vec![op("a", "A"), op("zzz", "Z")],
            if_version: None,
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    assert!(
        err.message().starts_with("edit 1 failed"),
        "{}",
        err.message()
    );
    let read = |fs: &mut agentvfs::pb::filesystem_client::FilesystemClient<_>| {
        let req = pb::ReadRequest {
            path: "/m.txt".into(),
            ..Default::default()
        };
        let mut fs = fs.clone();
        async move { fs.read(req).await.unwrap().into_inner().content }
    };
    assert_eq!(read(&mut fs).await, "a b c", "nothing applied");
    let ok = fs
        .multi_edit(pb::MultiEditRequest {
            path: "/m.txt".into(),
            edits: vec![op("a", "b"), op("b", "a")],
            if_version: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.replacements_made, 2);
    assert_eq!(read(&mut fs).await, "b a c", "matched against the original");
}

/// Delete removes files; a directory needs recursive; missing is NOT_FOUND.
#[tokio::test]
async fn delete_files_and_directories() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/t/a", "1").await;
    write(&mut fs, "/t/b/c", "2").await;
    let del = |path: &str, recursive: bool| pb::DeleteRequest {
        path: path.into(),
        if_version: None,
        recursive,
    };
    assert_eq!(
        fs.delete(del("/t/a", false))
            .await
            .unwrap()
            .into_inner()
            .files_deleted,
        1
    );
    assert_error(
        &fs.delete(del("/t/a", false)).await.unwrap_err(),
        Code::NotFound,
        "NOT_FOUND",
    );
    assert_error(
        &fs.delete(del("/t", false)).await.unwrap_err(),
        Code::FailedPrecondition,
        "IS_DIRECTORY",
    );
    assert_eq!(
        fs.delete(del("/t", true))
            .await
            .unwrap()
            .into_inner()
            .files_deleted,
        1
    );
    assert_error(
        &fs.stat(pb::StatRequest { path: "/t".into() })
            .await
            .unwrap_err(),
        Code::NotFound,
        "NOT_FOUND",
    );
}

/// ReadRe returns every match; overlap lets matches share bytes.
#[tokio::test]
async fn read_re_windows() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/r.txt", "id=1 id=22 id=333").await;
    let r = fs
        .read_re(pb::ReadReRequest {
            path: "/r.txt".into(),
            pattern: r"id=\d+".into(),
            overlap: None,
        })
        .await
        .unwrap();
    assert_eq!(r.into_inner().matches, ["id=1", "id=22", "id=333"]);
    let err = fs
        .read_re(pb::ReadReRequest {
            path: "/r.txt".into(),
            pattern: "(".into(),
            overlap: None,
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    assert!(
        err.message().starts_with("Invalid regex pattern"),
        "{}",
        err.message()
    );
}

/// WriteBytes and ReadBytes move binary content of several chunks intact;
/// Read refuses it as BINARY_FILE.
#[tokio::test]
async fn bytes_round_trip_and_binary_is_refused_as_text() {
    use pb::write_bytes_request::Kind;
    let server = Server::start();
    let mut fs = server.fs().await;
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut msgs = vec![pb::WriteBytesRequest {
        kind: Some(Kind::Header(pb::WriteBytesHeader {
            path: "/bin/blob".into(),
            ..Default::default()
        })),
    }];
    msgs.extend(data.chunks(500_000).map(|c| pb::WriteBytesRequest {
        kind: Some(Kind::Data(c.to_vec())),
    }));
    let w = fs
        .write_bytes(tokio_stream::iter(msgs))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(w.bytes_written, data.len() as u64);
    let mut stream = fs
        .read_bytes(pb::ReadBytesRequest {
            path: "/bin/blob".into(),
            version: None,
        })
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    let mut chunks = 0;
    while let Some(msg) = stream.next().await {
        let msg = msg.unwrap();
        if chunks == 0 {
            assert_eq!(msg.info.as_ref().unwrap().size, data.len() as u64);
        }
        chunks += 1;
        got.extend(msg.data);
    }
    assert!(chunks > 1);
    assert_eq!(got, data);
    let err = fs
        .read(pb::ReadRequest {
            path: "/bin/blob".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::FailedPrecondition, "BINARY_FILE");
}

/// Every path rejection of docs/contract.md § Paths is INVALID_ARGUMENT with INVALID_PARAM, and
/// `/a` and `/a ` are different paths.
#[tokio::test]
async fn invalid_paths_are_rejected_not_repaired() {
    let server = Server::start();
    let mut fs = server.fs().await;
    for bad in [
        "", "rel/a", "/a/../b", "/a//b", "/a\\b", "/a\u{0}b", "/a\u{7}b", "/a*", "/a?",
    ] {
        let err = fs
            .stat(pb::StatRequest { path: bad.into() })
            .await
            .unwrap_err();
        assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    }
    write(&mut fs, "/a", "x").await;
    let err = fs
        .stat(pb::StatRequest { path: "/a ".into() })
        .await
        .unwrap_err();
    assert_error(&err, Code::NotFound, "NOT_FOUND");
}

/// Reading a directory is IS_DIRECTORY; writing below a file is refused.
#[tokio::test]
async fn directory_and_file_confusion() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/dir/f", "x").await;
    let err = fs
        .read(pb::ReadRequest {
            path: "/dir".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::FailedPrecondition, "IS_DIRECTORY");
    let err = fs
        .write(pb::WriteRequest {
            path: "/dir/f/g".into(),
            content: "y".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::FailedPrecondition, "INVALID_PARAM");
}

/// Files over the configured limit are RESOURCE_EXHAUSTED.
#[tokio::test]
async fn too_large_is_resource_exhausted() {
    let config = "max_file_bytes = 1000\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n";
    let server = Server::start_with(Some(config), &[]);
    let mut fs = server.fs().await;
    let err = fs
        .write(pb::WriteRequest {
            path: "/big".into(),
            content: "x".repeat(1001),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
}

/// Sessions see separate State files.
#[tokio::test]
async fn sessions_are_isolated() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let req = pb::WriteRequest {
        path: "/s.txt".into(),
        content: "mine".into(),
        ..Default::default()
    };
    fs.write(with_session(req, "alice")).await.unwrap();
    let err = fs
        .stat(with_session(
            pb::StatRequest {
                path: "/s.txt".into(),
            },
            "bob",
        ))
        .await
        .unwrap_err();
    assert_error(&err, Code::NotFound, "NOT_FOUND");
    assert!(
        fs.stat(with_session(
            pb::StatRequest {
                path: "/s.txt".into()
            },
            "alice"
        ))
        .await
        .is_ok()
    );
    let err = fs
        .stat(with_session(
            pb::StatRequest {
                path: "/s.txt".into(),
            },
            "bad/name",
        ))
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
}

/// Many concurrent edits of one file lose no update.
#[tokio::test]
async fn concurrent_edits_lose_nothing() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let lines: String = (0..40).map(|i| format!("line {i}: todo\n")).collect();
    write(&mut fs, "/race.txt", &lines).await;
    let mut tasks = Vec::new();
    for i in 0..40 {
        let mut fs = fs.clone();
        tasks.push(tokio::spawn(async move {
            fs.edit(pb::EditRequest {
                path: "/race.txt".into(),
                old_string: format!("line {i}: todo"),
                new_string: format!("line {i}: done"),
                ..Default::default()
            })
            .await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let r = fs
        .read(pb::ReadRequest {
            path: "/race.txt".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.into_inner().content.matches(": done").count(), 40);
}

/// A `replace_all` whose result would be 8 GiB (1 MiB of `a`, each replaced
/// by 8 KiB) is refused before it is built, naming the size and the limit,
/// by Edit and MultiEdit alike, and the server keeps answering with its
/// memory peak barely moved.
#[tokio::test]
async fn replace_all_bomb_is_refused_before_it_is_built() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/bomb.txt", &"a".repeat(1 << 20)).await;
    server.reset_peak_memory();
    let before = server.memory_kib("VmHWM");
    let bomb = pb::EditOperation {
        old_string: "a".into(),
        new_string: "b".repeat(8 << 10),
        replace_all: true,
    };
    let err = fs
        .edit(pb::EditRequest {
            path: "/bomb.txt".into(),
            old_string: bomb.old_string.clone(),
            new_string: bomb.new_string.clone(),
            replace_all: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
    assert_eq!(
        err.message(),
        "too large: the edited file would be 8589934592 bytes, over the file size limit of \
         67108864 bytes"
    );
    let err = fs
        .multi_edit(pb::MultiEditRequest {
            path: "/bomb.txt".into(),
            edits: vec![bomb],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
    let read = fs
        .stat(pb::StatRequest {
            path: "/bomb.txt".into(),
        })
        .await
        .expect("the server still answers")
        .into_inner();
    assert_eq!(read.info.unwrap().size, 1 << 20);
    let growth = server.memory_kib("VmHWM").saturating_sub(before);
    assert!(growth < 64 << 10, "peak grew by {growth} KiB");
}

/// A numbered Read of an 8 MiB file of short lines (4M lines) neither
/// collects its lines nor builds an answer it cannot send: a window of it
/// costs about one copy of the file, and the whole file numbered (about
/// 36 MB, over the 16 MiB answer bound of max_file_bytes = 8 MiB) is refused
/// up front, telling the caller to page.
#[tokio::test]
async fn numbered_read_of_a_large_file_is_bounded() {
    let config = "max_file_bytes = 8388608\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n";
    let server = Server::start_with(Some(config), &[]);
    let mut fs = server.fs().await;
    let lines = 4 << 20;
    write(&mut fs, "/big.txt", &"x\n".repeat(lines)).await;
    server.reset_peak_memory();
    let before = server.memory_kib("VmHWM");
    let window = fs
        .read(pb::ReadRequest {
            path: "/big.txt".into(),
            offset: 2_000_000,
            limit: 3,
            numbered: true,
            version: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(window.content, "2000001\tx\n2000002\tx\n2000003\tx");
    assert_eq!(window.total_lines, lines as u64);
    let err = fs
        .read(pb::ReadRequest {
            path: "/big.txt".into(),
            numbered: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
    assert_eq!(
        err.message(),
        "too large: reading lines 0 to 4194303 of /big.txt would answer 40943040 bytes, over \
         the limit of 16777216 bytes for one Read; read fewer lines at a time with offset and \
         limit"
    );
    let growth = server.memory_kib("VmHWM").saturating_sub(before);
    // One copy of the file is 8 MiB; collecting the lines alone took 64 MiB.
    assert!(growth < 32 << 10, "peak grew by {growth} KiB");
}

/// The State tier's quota counts paths and per-file overhead, not only
/// content: empty files with ~3.8 KB paths fill a 1 MiB tier within a few
/// hundred writes, and the write past it names the limit.
#[tokio::test]
async fn state_quota_counts_paths() {
    let config =
        "[state]\nmax_total_bytes = 1048576\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n";
    let server = Server::start_with(Some(config), &[]);
    let mut fs = server.fs().await;
    let dir: String = (b'a'..b'o')
        .map(|c| format!("/{}", char::from(c).to_string().repeat(250)))
        .collect();
    let mut refused = None;
    for i in 0..1000 {
        let req = pb::WriteRequest {
            path: format!("{dir}/{i:0>250}"),
            ..Default::default()
        };
        if let Err(err) = fs.write(req).await {
            refused = Some((i, err));
            break;
        }
    }
    let (written, err) = refused.expect("1000 empty files with long paths must not fit in 1 MiB");
    assert!(
        written > 10 && written < 200,
        "{written} files fitted: {err:?}"
    );
    assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
    assert!(
        err.message()
            .contains("the State tier is full (1048576 bytes)"),
        "{}",
        err.message()
    );
}

/// Reads, stats, listings and searches with new session names create no
/// session; writes do, up to `[state] max_sessions`, and the write that would
/// create one more is RESOURCE_EXHAUSTED naming the limit.
#[tokio::test]
async fn sessions_are_created_by_writes_only_and_bounded() {
    let config = "[state]\nmax_sessions = 2\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n";
    let server = Server::start_with(Some(config), &[]);
    let mut fs = server.fs().await;
    for i in 0..10 {
        let session = format!("reader-{i}");
        let read = pb::ReadRequest {
            path: "/x".into(),
            ..Default::default()
        };
        let err = fs.read(with_session(read, &session)).await.unwrap_err();
        assert_error(&err, Code::NotFound, "NOT_FOUND");
        let stat = pb::StatRequest { path: "/x".into() };
        assert!(fs.stat(with_session(stat, &session)).await.is_err());
        let list = pb::ListInfoRequest { path: "/".into() };
        let listed = fs.list_info(with_session(list, &session)).await.unwrap();
        assert!(listed.into_inner().entries.is_empty());
        let glob = pb::GlobRequest {
            pattern: "**".into(),
            path: "/".into(),
            ..Default::default()
        };
        let mut stream = fs
            .glob(with_session(glob, &session))
            .await
            .unwrap()
            .into_inner();
        while stream.next().await.transpose().unwrap().is_some() {}
    }
    let write_in = |session: &str| {
        with_session(
            pb::WriteRequest {
                path: "/w.txt".into(),
                content: "w".into(),
                ..Default::default()
            },
            session,
        )
    };
    fs.write(write_in("first")).await.expect("first session");
    fs.write(write_in("second")).await.expect("second session");
    let err = fs.write(write_in("third")).await.unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
    assert!(
        err.message()
            .contains("already holds 2 sessions, its limit (max_sessions)"),
        "{}",
        err.message()
    );
    fs.write(write_in("first"))
        .await
        .expect("existing sessions still write");
}

/// Errors never echo unbounded input: a 16 KiB path, a 4 KiB valid path and
/// a 16 KiB missing old_string come back with short messages and metadata
/// (grpc-core clients refuse trailers over 8 KiB and would see
/// RESOURCE_EXHAUSTED instead of the error).
#[tokio::test]
async fn errors_echo_input_capped() {
    let server = Server::start();
    let mut fs = server.fs().await;
    let huge = format!("/{}", "p".repeat(16 << 10));
    let err = fs
        .read(pb::ReadRequest {
            path: huge,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    assert!(err.message().len() < 2048, "{} bytes", err.message().len());
    assert!(
        err.message().contains("… (16385 bytes)"),
        "{}",
        err.message()
    );
    let info = tonic_types::StatusExt::get_details_error_info(&err).unwrap();
    assert!(info.metadata["path"].len() < 2048);
    let long: String = (0..16).map(|_| format!("/{}", "q".repeat(250))).collect();
    let err = fs.stat(pb::StatRequest { path: long }).await.unwrap_err();
    assert_error(&err, Code::NotFound, "NOT_FOUND");
    assert!(err.message().len() < 2048, "{} bytes", err.message().len());
    write(&mut fs, "/small.txt", "abc\n").await;
    let err = fs
        .edit(pb::EditRequest {
            path: "/small.txt".into(),
            old_string: "o".repeat(16 << 10),
            new_string: "x".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    assert!(err.message().len() < 2048, "{} bytes", err.message().len());
    assert!(
        err.message()
            .starts_with("old_string not found in file: \"ooo")
    );
}
