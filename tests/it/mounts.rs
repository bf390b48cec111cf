//! The mount table through the real server: routing on segment boundaries,
//! nested mounts, listing mount points, cross-mount search order.

use crate::util::{Server, assert_error, glob_all, grep_all, write};
use agentvfs::pb;
use tonic::Code;

/// Four State mounts, each its own backend, so a file is visible only
/// through the mount that owns its path.
const CONFIG: &str = r#"
[[mount]]
prefix = "/"
tier = "state"
[[mount]]
prefix = "/m/"
tier = "state"
[[mount]]
prefix = "/m/n/"
tier = "state"
[[mount]]
prefix = "/m-old/"
tier = "state"
[[mount]]
prefix = "/deep/er/mount/"
tier = "state"
"#;

async fn paths(
    fs: &mut pb::filesystem_client::FilesystemClient<tonic::transport::Channel>,
    dir: &str,
) -> Vec<String> {
    let list = fs
        .list_info(pb::ListInfoRequest { path: dir.into() })
        .await
        .unwrap()
        .into_inner();
    list.entries
        .into_iter()
        .map(|e| format!("{}{}", e.path, if e.is_directory { "/" } else { "" }))
        .collect()
}

/// Listing a parent shows mount points (and the way to deeper ones) as
/// directories, merged with the owning tier's own entries in path order.
#[tokio::test]
async fn listing_shows_mount_points() {
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut fs = server.fs().await;
    write(&mut fs, "/a.txt", "root").await;
    write(&mut fs, "/m/x.txt", "m").await;
    assert_eq!(
        paths(&mut fs, "/").await,
        ["/a.txt", "/deep/", "/m/", "/m-old/"]
    );
    assert_eq!(paths(&mut fs, "/m").await, ["/m/n/", "/m/x.txt"]);
    assert_eq!(paths(&mut fs, "/deep").await, ["/deep/er/"]);
    assert!(
        paths(&mut fs, "/m/n").await.is_empty(),
        "an empty mount lists as an empty directory"
    );
    let stat = fs
        .stat(pb::StatRequest {
            path: "/deep/er".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(stat.info.unwrap().is_directory);
}

/// `/m/` never owns `/m-old/x`; nested mounts own their own subtree; paths
/// come back restored, never with `//`.
#[tokio::test]
async fn routing_respects_segment_boundaries_and_nesting() {
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut fs = server.fs().await;
    write(&mut fs, "/m-old/y.txt", "old").await;
    write(&mut fs, "/m/n/z.txt", "nested").await;
    write(&mut fs, "/m/x.txt", "m").await;
    assert_eq!(paths(&mut fs, "/m-old").await, ["/m-old/y.txt"]);
    assert_eq!(paths(&mut fs, "/m/n").await, ["/m/n/z.txt"]);
    // Deleting /m's own files leaves the nested mount's files alone.
    fs.delete(pb::DeleteRequest {
        path: "/m".into(),
        recursive: true,
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(paths(&mut fs, "/m/n").await, ["/m/n/z.txt"]);
    let r = fs
        .read(pb::ReadRequest {
            path: "/m/n/z.txt".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.into_inner().path, "/m/n/z.txt");
}

/// Writing at a mount point itself is IS_DIRECTORY.
#[tokio::test]
async fn mount_point_is_a_directory() {
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut fs = server.fs().await;
    for path in ["/m", "/m/n", "/deep/er"] {
        let err = fs
            .write(pb::WriteRequest {
                path: path.into(),
                content: "x".into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_error(&err, Code::FailedPrecondition, "IS_DIRECTORY");
    }
}

/// Grep and Glob from `/` span every mount as one path-ordered stream under
/// one budget and one summary.
#[tokio::test]
async fn search_from_root_spans_mounts_in_path_order() {
    let server = Server::start_with(Some(CONFIG), &[]);
    let mut fs = server.fs().await;
    for p in [
        "/z.txt",
        "/a.txt",
        "/m/x.txt",
        "/m/n/z.txt",
        "/m-old/y.txt",
        "/deep/er/mount/d.txt",
        "/m/o.txt",
        "/mm.txt",
    ] {
        write(&mut fs, p, "needle\n").await;
    }
    let expected = [
        "/a.txt",
        "/deep/er/mount/d.txt",
        "/m/n/z.txt",
        "/m/o.txt",
        "/m/x.txt",
        "/m-old/y.txt",
        "/mm.txt",
        "/z.txt",
    ];
    let (globbed, summary) = glob_all(
        &mut fs,
        pb::GlobRequest {
            pattern: "**/*.txt".into(),
            path: "/".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(globbed, expected);
    assert_eq!(summary.matched, 8);
    let (matches, summary) = grep_all(
        &mut fs,
        pb::GrepRequest {
            pattern: "needle".into(),
            path: "/".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        matches.iter().map(|m| m.path.as_str()).collect::<Vec<_>>(),
        expected
    );
    assert_eq!(summary.files_searched, 8);
    let (limited, summary) = grep_all(
        &mut fs,
        pb::GrepRequest {
            pattern: "needle".into(),
            path: "/".into(),
            max_results: 3,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(limited.len(), 3);
    assert_eq!(summary.aborted_reason(), pb::AbortedReason::Limit);
    let (sub, _) = glob_all(
        &mut fs,
        pb::GlobRequest {
            pattern: "**/*.txt".into(),
            path: "/m".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(sub, ["/m/n/z.txt", "/m/o.txt", "/m/x.txt"]);
}
