//! Branches through the real server (docs/branches.md): eight sub-agents
//! each fork the same directory, work in their own branch, and merge back;
//! every change made apart merges, every overlap is a conflict answered
//! with its three versions and applied only once resolved; on the State,
//! Store, object and Filesystem tiers. Also: isolation, search and listing
//! inside a branch, diff, discard, refusals, and kill -9 during a merge;
//! on the Filesystem tier, the served directory untouched until a merge
//! and links that leave the root refused inside a branch.

use crate::util::{Server, assert_error, glob_all, grep_all, write};
use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

/// `msg` sent in branch `branch`.
fn in_branch<T>(msg: T, branch: &str) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut()
        .insert("x-agentvfs-branch", branch.parse().unwrap());
    req
}

async fn read(
    fs: &mut FilesystemClient<Channel>,
    branch: Option<&str>,
    path: &str,
) -> Result<String, Status> {
    let msg = pb::ReadRequest {
        path: path.into(),
        ..Default::default()
    };
    let req = match branch {
        Some(b) => in_branch(msg, b),
        None => Request::new(msg),
    };
    fs.read(req).await.map(|r| r.into_inner().content)
}

/// The file's bytes on the base (ReadBytes: no line numbers).
async fn bytes(
    fs: &mut FilesystemClient<Channel>,
    branch: Option<&str>,
    path: &str,
) -> Option<String> {
    let msg = pb::ReadBytesRequest {
        path: path.into(),
        version: None,
    };
    let req = match branch {
        Some(b) => in_branch(msg, b),
        None => Request::new(msg),
    };
    let mut stream = match fs.read_bytes(req).await {
        Ok(s) => s.into_inner(),
        Err(s) if s.code() == Code::NotFound => return None,
        Err(s) => panic!("read_bytes {path}: {s:?}"),
    };
    let mut data = Vec::new();
    loop {
        match stream.message().await {
            Ok(Some(msg)) => data.extend(msg.data),
            Ok(None) => break,
            Err(s) if s.code() == Code::NotFound => return None,
            Err(s) => panic!("read_bytes {path}: {s:?}"),
        }
    }
    Some(String::from_utf8(data).unwrap())
}

async fn write_in(fs: &mut FilesystemClient<Channel>, branch: &str, path: &str, content: &str) {
    let msg = pb::WriteRequest {
        path: path.into(),
        content: content.into(),
        ..Default::default()
    };
    fs.write(in_branch(msg, branch))
        .await
        .unwrap_or_else(|s| panic!("write {path} in {branch}: {s:?}"));
}

async fn fork(fs: &mut FilesystemClient<Channel>, name: &str, path: &str) -> pb::Branch {
    let req = pb::CreateBranchRequest {
        name: name.into(),
        path: path.into(),
    };
    fs.create_branch(req)
        .await
        .unwrap_or_else(|s| panic!("fork {name}: {s:?}"))
        .into_inner()
        .branch
        .unwrap()
}

async fn merge(
    fs: &mut FilesystemClient<Channel>,
    name: &str,
    resolutions: Vec<pb::MergeResolution>,
) -> pb::MergeBranchResponse {
    let req = pb::MergeBranchRequest {
        name: name.into(),
        resolutions,
        discard: true,
    };
    fs.merge_branch(req)
        .await
        .unwrap_or_else(|s| panic!("merge {name}: {s:?}"))
        .into_inner()
}

/// A 30-line file; agent `i` changes line `3i + 1`, so no two agents'
/// changes touch.
fn shared_lines(changed: &[usize]) -> String {
    (0..30)
        .map(|n| match changed.iter().find(|&&i| 3 * i + 1 == n) {
            Some(i) => format!("line {n} by agent {i}\n"),
            None => format!("line {n}\n"),
        })
        .collect()
}

/// Eight agents, each in its own branch of `root`, then merged one by one.
async fn eight_agents_merge(fs: &mut FilesystemClient<Channel>, root: &str) {
    let tag = format!("{:08x}", rand::random::<u32>());
    write(fs, &format!("{root}/shared.txt"), &shared_lines(&[])).await;
    write(fs, &format!("{root}/common.txt"), "one\ntwo\nthree\n").await;
    for i in 0..8 {
        write(fs, &format!("{root}/old-{i}.txt"), &format!("old {i}\n")).await;
    }
    let names: Vec<String> = (0..8).map(|i| format!("agent-{i}-{tag}")).collect();
    for name in &names {
        let branch = fork(fs, name, root).await;
        assert_eq!(branch.root, root);
        assert_eq!(branch.files_changed, 0);
    }
    for (i, name) in names.iter().enumerate() {
        // Apart: a new file, one line of the shared file, a deletion.
        write_in(
            fs,
            name,
            &format!("{root}/new-{i}.txt"),
            &format!("new {i}\n"),
        )
        .await;
        let edit = pb::EditRequest {
            path: format!("{root}/shared.txt"),
            old_string: format!("line {}\n", 3 * i + 1),
            new_string: format!("line {} by agent {i}\n", 3 * i + 1),
            ..Default::default()
        };
        fs.edit(in_branch(edit, name)).await.unwrap();
        let delete = pb::DeleteRequest {
            path: format!("{root}/old-{i}.txt"),
            ..Default::default()
        };
        fs.delete(in_branch(delete, name)).await.unwrap();
        // Overlapping: agents 0-3 all rewrite the second line.
        if i < 4 {
            write_in(
                fs,
                name,
                &format!("{root}/common.txt"),
                &format!("one\nTWO by {i}\nthree\n"),
            )
            .await;
        }
    }
    // Isolation: each branch sees its own work only; the base none.
    assert_eq!(
        bytes(fs, None, &format!("{root}/shared.txt")).await,
        Some(shared_lines(&[]))
    );
    assert_eq!(bytes(fs, None, &format!("{root}/new-0.txt")).await, None);
    assert_eq!(
        bytes(fs, Some(&names[0]), &format!("{root}/new-0.txt"))
            .await
            .as_deref(),
        Some("new 0\n")
    );
    assert_eq!(
        bytes(fs, Some(&names[1]), &format!("{root}/new-0.txt")).await,
        None
    );
    assert_eq!(
        bytes(fs, Some(&names[1]), &format!("{root}/old-1.txt")).await,
        None
    );
    assert_eq!(
        bytes(fs, Some(&names[1]), &format!("{root}/old-0.txt"))
            .await
            .as_deref(),
        Some("old 0\n")
    );
    assert_eq!(
        bytes(fs, Some(&names[2]), &format!("{root}/shared.txt")).await,
        Some(shared_lines(&[2]))
    );
    // Diff of one branch against the base.
    let diff = fs
        .diff_branch(pb::DiffBranchRequest {
            name: names[2].clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let kinds: Vec<(String, String)> = diff
        .files
        .iter()
        .map(|f| (f.path.clone(), f.kind.clone()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (format!("{root}/common.txt"), "changed".to_owned()),
            (format!("{root}/new-2.txt"), "added".to_owned()),
            (format!("{root}/old-2.txt"), "deleted".to_owned()),
            (format!("{root}/shared.txt"), "changed".to_owned()),
        ]
    );
    let shared = &diff.files[3].diff;
    assert!(shared.contains("-line 7\n+line 7 by agent 2\n"), "{shared}");
    assert_eq!(diff.next_after, "");

    // Agent 0 merges cleanly; agents 1-3 then conflict on common.txt only.
    let first = merge(fs, &names[0], vec![]).await;
    assert!(first.conflicts.is_empty(), "{first:?}");
    assert!(first.changeset.starts_with("cs-"), "{first:?}");
    assert!(first.discarded);
    for (i, name) in names.iter().enumerate().skip(1) {
        let mut answer = merge(fs, name, vec![]).await;
        if i < 4 {
            assert_eq!(answer.conflicts.len(), 1, "{answer:?}");
            let conflict = &answer.conflicts[0];
            assert_eq!(conflict.path, format!("{root}/common.txt"));
            assert_eq!(
                conflict.ancestor.as_deref(),
                Some(&b"one\ntwo\nthree\n"[..])
            );
            assert_eq!(
                conflict.branch.as_deref(),
                Some(format!("one\nTWO by {i}\nthree\n").as_bytes())
            );
            assert_eq!(
                conflict.base.as_deref(),
                Some(format!("one\nTWO by {}\nthree\n", i - 1).as_bytes())
            );
            assert!(answer.changeset.is_empty() && !answer.discarded);
            // Nothing of the branch was applied.
            assert_eq!(bytes(fs, None, &format!("{root}/new-{i}.txt")).await, None);
            let resolved = pb::MergeResolution {
                path: conflict.path.clone(),
                resolution: Some(pb::merge_resolution::Resolution::Content(
                    format!("one\nTWO by {i}\nthree\n").into_bytes(),
                )),
            };
            answer = merge(fs, name, vec![resolved]).await;
        }
        assert!(answer.conflicts.is_empty(), "{answer:?}");
        assert!(answer.changeset.starts_with("cs-"));
    }
    // Every change made apart merged; the last resolution stands.
    let all: Vec<usize> = (0..8).collect();
    assert_eq!(
        bytes(fs, None, &format!("{root}/shared.txt")).await,
        Some(shared_lines(&all))
    );
    assert_eq!(
        bytes(fs, None, &format!("{root}/common.txt"))
            .await
            .as_deref(),
        Some("one\nTWO by 3\nthree\n")
    );
    for i in 0..8 {
        assert_eq!(
            bytes(fs, None, &format!("{root}/new-{i}.txt")).await,
            Some(format!("new {i}\n"))
        );
        assert_eq!(bytes(fs, None, &format!("{root}/old-{i}.txt")).await, None);
    }
    let listed = fs
        .list_branches(pb::ListBranchesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(
        !listed.branches.iter().any(|b| names.contains(&b.name)),
        "discarded: {listed:?}"
    );
}

#[tokio::test]
async fn eight_agents_merge_on_state_and_store() {
    let server = Server::start();
    let mut fs = server.fs().await;
    eight_agents_merge(&mut fs, "/scratch").await;
    eight_agents_merge(&mut fs, "/memories/project").await;
}

/// A server configuration: State at `/`, the object tier at `/shared`
/// under a key prefix of its own (two servers given it share the files).
fn object_config() -> String {
    let bucket = crate::s3::s3().bucket("agentvfs-it");
    format!(
        "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n[[mount]]\nprefix = \"/shared\"\n\
         tier = \"object\"\nbucket = \"{bucket}\"\nkey_prefix = \"br-{:016x}\"\n\
         path_style = true\n",
        rand::random::<u64>()
    )
}

#[tokio::test]
async fn eight_agents_merge_on_the_object_tier() {
    let config = object_config();
    let server = Server::start_with(Some(&config), &[]);
    let mut fs = server.fs().await;
    eight_agents_merge(&mut fs, "/shared/work").await;
}

/// A branch may be named like a mount (`memories`, `workspace`) or be
/// forked at a mount's root: its registry record never lands on another
/// mount (it once did: a branch named `memories` of a State directory
/// read its record at `/memories`, the Store mount, and failed).
#[tokio::test]
async fn a_branch_named_like_a_mount_or_forked_at_a_mount_root_works() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/scratch/f.md", "state\n").await;
    write(&mut fs, "/memories/f.md", "store\n").await;
    for (name, root, file) in [
        ("memories", "/scratch", "/scratch/f.md"),
        ("workspace", "/scratch", "/scratch/f.md"),
        ("scratch", "/memories", "/memories/f.md"),
        ("at-root", "/memories", "/memories/f.md"),
    ] {
        fork(&mut fs, name, root).await;
        write_in(&mut fs, name, file, &format!("in {name}\n")).await;
        assert_eq!(
            bytes(&mut fs, Some(name), file).await.unwrap(),
            format!("in {name}\n")
        );
    }
    let listed = fs
        .list_branches(pb::ListBranchesRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mut names: Vec<_> = listed.branches.iter().map(|b| b.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["at-root", "memories", "scratch", "workspace"]);
    let merged = merge(&mut fs, "at-root", Vec::new()).await;
    assert!(merged.conflicts.is_empty(), "{merged:?}");
    assert_eq!(
        bytes(&mut fs, None, "/memories/f.md").await.unwrap(),
        "in at-root\n"
    );
}

#[tokio::test]
async fn eight_agents_merge_on_the_filesystem_tier() {
    let server = Server::start();
    let mut fs = server.fs().await;
    eight_agents_merge(&mut fs, "/workspace/work").await;
}

/// Two servers on one bucket: a server that worked in a branch (and keeps
/// its record, docs/branches.md) sees another server discard it, fork it
/// again elsewhere and change it, on its next call in the branch.
#[tokio::test]
async fn a_branch_another_server_discards_or_forks_again_is_seen() {
    let config = object_config();
    let (a, b) = (
        Server::start_with(Some(&config), &[]),
        Server::start_with(Some(&config), &[]),
    );
    let (mut fa, mut fb) = (a.fs().await, b.fs().await);
    write(&mut fa, "/shared/w/f.txt", "base w\n").await;
    write(&mut fa, "/shared/v/f.txt", "base v\n").await;
    fork(&mut fa, "b", "/shared/w").await;
    write_in(&mut fa, "b", "/shared/w/f.txt", "in b\n").await;
    assert_eq!(
        bytes(&mut fa, Some("b"), "/shared/w/f.txt").await.unwrap(),
        "in b\n"
    );
    assert_eq!(
        bytes(&mut fb, Some("b"), "/shared/w/f.txt").await.unwrap(),
        "in b\n"
    );

    // B discards it: A's next call in it is NOT_FOUND, as B's.
    fb.discard_branch(pb::DiscardBranchRequest { name: "b".into() })
        .await
        .unwrap();
    let gone = read(&mut fa, Some("b"), "/shared/w/f.txt")
        .await
        .unwrap_err();
    assert_eq!(
        (gone.code(), gone.message()),
        (Code::NotFound, "not found: branch \"b\" (no such branch)")
    );

    // A works in a new "b"; B discards it and forks "b" of another
    // directory: A never answers from the branch it knew.
    fork(&mut fa, "b", "/shared/w").await;
    write_in(&mut fa, "b", "/shared/w/f.txt", "in the second b\n").await;
    fb.discard_branch(pb::DiscardBranchRequest { name: "b".into() })
        .await
        .unwrap();
    fork(&mut fb, "b", "/shared/v").await;
    write_in(&mut fb, "b", "/shared/v/f.txt", "in the third b\n").await;
    match read(&mut fa, Some("b"), "/shared/w/f.txt").await {
        Err(s) => assert_eq!(
            (s.code(), s.message()),
            (
                Code::Unavailable,
                "unavailable: branch \"b\" was discarded and forked again while this call began; \
                 try again"
            )
        ),
        Ok(content) => panic!("read a branch another server discarded: {content:?}"),
    }
    // Tried again: the branch as it is now (/shared/w is outside its root).
    assert_eq!(
        bytes(&mut fa, Some("b"), "/shared/w/f.txt").await.unwrap(),
        "base w\n"
    );
    assert_eq!(
        bytes(&mut fa, Some("b"), "/shared/v/f.txt").await.unwrap(),
        "in the third b\n"
    );
    let outside = fa
        .write(in_branch(
            pb::WriteRequest {
                path: "/shared/w/f.txt".into(),
                content: "x".into(),
                ..Default::default()
            },
            "b",
        ))
        .await
        .unwrap_err();
    assert_eq!(outside.code(), Code::InvalidArgument, "{outside:?}");
    assert_eq!(
        bytes(&mut fa, None, "/shared/w/f.txt").await.unwrap(),
        "base w\n"
    );
}

/// On the object tier a discard removes the branch's record, waits out
/// the lease other servers may read it under, then clears its changes
/// (docs/branches.md § Discard). Killed at a random point of that, the
/// branch is gone or whole, and a branch forked again under its name
/// starts from the base, never from what the killed discard left.
#[tokio::test]
async fn kill_9_during_a_discard_leaves_nothing_a_new_fork_of_the_name_sees() {
    let config = object_config();
    let mut server = Server::start_with(Some(&config), &[]);
    for trial in 0..4 {
        let mut fs = server.fs().await;
        let root = format!("/shared/d{trial}");
        for i in 0..5 {
            write(&mut fs, &format!("{root}/f{i}.txt"), "base\n").await;
        }
        fork(&mut fs, "d", &root).await;
        for i in 0..5 {
            write_in(&mut fs, "d", &format!("{root}/f{i}.txt"), "branch\n").await;
        }
        let delay = std::time::Duration::from_micros(rand::random_range(0..800_000));
        let mut discarding = fs.clone();
        let call = tokio::spawn(async move {
            discarding
                .discard_branch(pb::DiscardBranchRequest { name: "d".into() })
                .await
        });
        tokio::time::sleep(delay).await;
        server.crash_and_restart();
        let acknowledged = matches!(call.await, Ok(Ok(_)));
        let mut fs = server.fs().await;
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..5 {
            match read(&mut fs, Some("d"), &format!("{root}/f{i}.txt")).await {
                Ok(content) => seen.insert(content),
                Err(s) => {
                    assert_eq!(s.code(), Code::NotFound, "trial {trial}: {s:?}");
                    seen.insert("gone".into())
                }
            };
        }
        assert_eq!(seen.len(), 1, "trial {trial} after {delay:?}: {seen:?}");
        if acknowledged {
            assert!(
                seen.contains("gone"),
                "trial {trial}: an acknowledged discard was undone"
            );
        }
        if seen.contains("gone") {
            fork(&mut fs, "d", &root).await;
            for i in 0..5 {
                assert_eq!(
                    read(&mut fs, Some("d"), &format!("{root}/f{i}.txt"))
                        .await
                        .unwrap(),
                    "base\n",
                    "trial {trial} after {delay:?}: a new fork shows the discarded one's change"
                );
            }
        }
        fs.discard_branch(pb::DiscardBranchRequest { name: "d".into() })
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_branch_lists_searches_moves_and_refuses_what_it_cannot_do() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/memories/p/a.md", "alpha needle\n").await;
    write(&mut fs, "/memories/p/d/b.md", "beta\n").await;
    write(&mut fs, "/memories/outside.md", "out\n").await;
    fork(&mut fs, "b1", "/memories/p").await;
    write_in(&mut fs, "b1", "/memories/p/d/c.md", "gamma needle\n").await;
    let mv = pb::MoveRequest {
        source: "/memories/p/a.md".into(),
        destination: "/memories/p/e/a.md".into(),
        ..Default::default()
    };
    fs.r#move(in_branch(mv, "b1")).await.unwrap();
    let list = |dir: &str| pb::ListInfoRequest { path: dir.into() };
    let names = |r: pb::ListInfoResponse| r.entries.into_iter().map(|e| e.path).collect::<Vec<_>>();
    assert_eq!(
        names(
            fs.list_info(in_branch(list("/memories/p"), "b1"))
                .await
                .unwrap()
                .into_inner()
        ),
        ["/memories/p/d", "/memories/p/e"]
    );
    assert_eq!(
        names(
            fs.list_info(list("/memories/p"))
                .await
                .unwrap()
                .into_inner()
        ),
        ["/memories/p/a.md", "/memories/p/d"]
    );
    let grep = pb::GrepRequest {
        pattern: "needle".into(),
        path: "/memories".into(),
        ..Default::default()
    };
    let (hits, _) = grep_all(&mut fs, in_branch(grep.clone(), "b1"))
        .await
        .unwrap();
    let paths: Vec<_> = hits.iter().map(|h| h.path.as_str()).collect();
    assert_eq!(paths, ["/memories/p/d/c.md", "/memories/p/e/a.md"]);
    let (hits, _) = grep_all(&mut fs, grep).await.unwrap();
    assert_eq!(
        hits.iter().map(|h| h.path.as_str()).collect::<Vec<_>>(),
        ["/memories/p/a.md"]
    );
    let diff = fs
        .diff_branch(pb::DiffBranchRequest {
            name: "b1".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let moved = diff
        .files
        .iter()
        .find(|f| f.kind == "moved")
        .expect("a move");
    assert_eq!(
        (moved.path.as_str(), moved.from.as_str()),
        ("/memories/p/e/a.md", "/memories/p/a.md")
    );
    // Refusals, each naming the problem.
    let outside = pb::WriteRequest {
        path: "/memories/outside.md".into(),
        content: "x".into(),
        ..Default::default()
    };
    let refused = fs.write(in_branch(outside, "b1")).await.unwrap_err();
    assert_error(&refused, Code::InvalidArgument, "INVALID_PARAM");
    assert!(refused.message().contains("outside branch"), "{refused:?}");
    let reserved = pb::WriteRequest {
        path: "/memories/p/.avfs-wh.x".into(),
        content: "x".into(),
        ..Default::default()
    };
    let refused = fs.write(in_branch(reserved, "b1")).await.unwrap_err();
    assert!(refused.message().contains("reserved"), "{refused:?}");
    let unknown = read(&mut fs, Some("nope"), "/memories/p/d/b.md")
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound, "{unknown:?}");
    assert!(unknown.message().contains("nope"), "{unknown:?}");
    let again = fs
        .create_branch(pb::CreateBranchRequest {
            name: "b1".into(),
            path: "/memories/p".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists, "{again:?}");
    // Discard drops the branch and its changes; the base is untouched.
    let listed = fs
        .list_branches(pb::ListBranchesRequest {})
        .await
        .unwrap()
        .into_inner();
    let b1 = listed
        .branches
        .iter()
        .find(|b| b.name == "b1")
        .expect("listed");
    assert_eq!(b1.files_changed, 3, "{b1:?}");
    fs.discard_branch(pb::DiscardBranchRequest { name: "b1".into() })
        .await
        .unwrap();
    assert_eq!(
        read(&mut fs, Some("b1"), "/memories/p/a.md")
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    assert_eq!(
        bytes(&mut fs, None, "/memories/p/a.md").await.as_deref(),
        Some("alpha needle\n")
    );
    fork(&mut fs, "b1", "/memories/p").await;
    assert_eq!(bytes(&mut fs, Some("b1"), "/memories/p/d/c.md").await, None);
}

#[tokio::test]
async fn kill_9_during_a_merge_leaves_it_all_or_nothing() {
    let mut server = Server::start();
    kill_9_during_merges(&mut server, "/memories", 30).await;
}

#[tokio::test]
async fn kill_9_during_a_merge_on_the_filesystem_tier_leaves_it_all_or_nothing() {
    let mut server = Server::start();
    kill_9_during_merges(&mut server, "/workspace", 30).await;
}

/// On the object tier a merge of 100 files takes about a second (one
/// changeset of 100 files on S3), so the kill lands anywhere in it.
#[tokio::test]
async fn kill_9_during_a_merge_on_the_object_tier_leaves_it_all_or_nothing() {
    let config = object_config();
    let mut server = Server::start_with(Some(&config), &[]);
    kill_9_during_merges(&mut server, "/shared", 1500).await;
}

/// Six merges of 100 files below `mount`, each cut by kill -9 after a
/// random delay of up to `max_delay_ms`: every file before, or every file
/// merged.
async fn kill_9_during_merges(server: &mut Server, mount: &str, max_delay_ms: u64) {
    for trial in 0..6 {
        let mut fs = server.fs().await;
        let root = format!("{mount}/k{trial}");
        for i in 0..100 {
            write(&mut fs, &format!("{root}/f{i:03}.txt"), "before\n").await;
        }
        let name = format!("k{trial}");
        fork(&mut fs, &name, &root).await;
        for i in 0..100 {
            write_in(&mut fs, &name, &format!("{root}/f{i:03}.txt"), "after\n").await;
        }
        let delay = std::time::Duration::from_micros(rand::random_range(0..max_delay_ms * 1000));
        let mut merging = fs.clone();
        let req = pb::MergeBranchRequest {
            name: name.clone(),
            ..Default::default()
        };
        let call = tokio::spawn(async move { merging.merge_branch(req).await });
        tokio::time::sleep(delay).await;
        server.crash_and_restart();
        let acknowledged = matches!(call.await, Ok(Ok(_)));
        let mut fs = server.fs().await;
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..100 {
            seen.insert(
                bytes(&mut fs, None, &format!("{root}/f{i:03}.txt"))
                    .await
                    .unwrap(),
            );
        }
        assert_eq!(
            seen.len(),
            1,
            "trial {trial} after {delay:?}: a partial merge: {seen:?}"
        );
        if acknowledged {
            assert!(
                seen.contains("after\n"),
                "trial {trial}: an acknowledged merge was lost"
            );
        }
    }
}

/// A merge holds every file the branch changed: a branch over the
/// changeset bounds (in files or in bytes) is refused before any of it is
/// applied.
#[tokio::test]
async fn a_merge_over_the_changeset_bounds_is_refused() {
    let server = Server::start_with(Some(crate::changesets::SMALL_CHANGESETS), &[]);
    let mut fs = server.fs().await;
    write(&mut fs, "/memories/big/seed.txt", "s\n").await;
    fork(&mut fs, "bytes", "/memories/big").await;
    for i in 0..2 {
        write_in(
            &mut fs,
            "bytes",
            &format!("/memories/big/f{i}.txt"),
            &"x".repeat(800),
        )
        .await;
    }
    let refused = fs
        .merge_branch(pb::MergeBranchRequest {
            name: "bytes".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(bytes(&mut fs, None, "/memories/big/f0.txt").await, None);
}

/// The `limit` an error names (its `ErrorInfo.metadata.limit`).
fn limit_of(status: &Status) -> String {
    let info = status.get_details_error_info().expect("ErrorInfo");
    info.metadata.get("limit").cloned().unwrap_or_default()
}

/// A merge sizes what it would carry and hold from its files' stats and
/// refuses before it reads any of them: here the branch's files are small,
/// but the base now holds large files at their paths (which a three-way
/// merge reads and may carry).
#[tokio::test]
async fn a_merge_is_refused_by_its_sizes_before_it_reads() {
    let server = Server::start_with(Some(crate::changesets::SMALL_CHANGESETS), &[]);
    let mut fs = server.fs().await;
    write(&mut fs, "/memories/big/seed.txt", "s\n").await;
    fork(&mut fs, "sized", "/memories/big").await;
    write_in(&mut fs, "sized", "/memories/big/f0.txt", "mine\n").await;
    write(&mut fs, "/memories/big/f0.txt", &"x".repeat(2000)).await;
    let refused = fs
        .merge_branch(pb::MergeBranchRequest {
            name: "sized".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(limit_of(&refused), "changeset_max_bytes", "{refused:?}");
}

/// What a merge holds (every file's ancestor, branch side and base now) is
/// charged to the caller's share before it is read: eight small files of a
/// branch over 8 MiB files of the base are refused at once, and the peak
/// resident memory of the server (restarted, so that no freed memory of the
/// writes is reused) does not grow by what they hold.
#[tokio::test]
async fn a_merge_over_the_memory_share_is_refused_before_it_reads() {
    let config = r#"
[limits]
memory_bytes_per_principal = 25165824
changeset_max_bytes = 1073741824

[[mount]]
prefix = "/"
tier = "state"

[[mount]]
prefix = "/memories"
tier = "store"
"#;
    let mut server = Server::start_with(Some(config), &[]);
    let mut fs = server.fs().await;
    write(&mut fs, "/memories/big/seed.txt", "s\n").await;
    fork(&mut fs, "heavy", "/memories/big").await;
    for i in 0..8 {
        write_in(
            &mut fs,
            "heavy",
            &format!("/memories/big/f{i}.txt"),
            "mine\n",
        )
        .await;
    }
    for i in 0..8 {
        let content = format!("{i}").repeat(8 << 20);
        write(&mut fs, &format!("/memories/big/f{i}.txt"), &content).await;
    }
    server.crash_and_restart();
    let mut fs = server.fs().await;
    let before = server.memory_kib("VmHWM");
    let refused = fs
        .merge_branch(pb::MergeBranchRequest {
            name: "heavy".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    let grown_mib = server.memory_kib("VmHWM").saturating_sub(before) / 1024;
    eprintln!("merge over 8 x 8 MiB base files: VmHWM {before} KiB before, grew {grown_mib} MiB");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(
        limit_of(&refused),
        "memory_bytes_per_principal",
        "{refused:?}"
    );
    assert!(
        grown_mib < 16,
        "the merge grew the server by {grown_mib} MiB"
    );
}

/// One path below a directory on the host: a file's (or a link's target's
/// name's) bytes and modification time; `None` for a directory.
type Snapshot = Vec<(String, Option<(Vec<u8>, std::time::SystemTime)>)>;

/// Every file below `dir` on the host with its bytes and modification
/// time, and every directory: what "untouched" is checked against.
fn snapshot(dir: &std::path::Path) -> Snapshot {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let shown = path.strip_prefix(dir).unwrap().display().to_string();
            if meta.is_dir() {
                stack.push(path);
                out.push((shown, None));
            } else if meta.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                let bytes = target.display().to_string().into_bytes();
                out.push((shown, Some((bytes, meta.modified().unwrap()))));
            } else {
                let data = std::fs::read(&path).unwrap();
                out.push((shown, Some((data, meta.modified().unwrap()))));
            }
        }
    }
    out.sort();
    out
}

/// Work in a branch of a Filesystem mount (writes, edits, deletes, moves of
/// a file and of a directory) leaves the served directory byte for byte and
/// time stamp for time stamp as it was; the branch's changes live in the
/// server's data directory; the merge writes them, and discard removes the
/// branch's directory.
#[tokio::test]
async fn a_branch_of_a_filesystem_mount_leaves_the_served_directory_untouched() {
    let server = Server::start();
    let work = server.workdir().join("proj");
    std::fs::create_dir_all(work.join("src/deep")).unwrap();
    std::fs::write(work.join("README.md"), "readme\n").unwrap();
    std::fs::write(work.join("src/a.rs"), "fn a() {}\n").unwrap();
    std::fs::write(work.join("src/deep/b.rs"), "fn b() {}\n").unwrap();
    std::fs::write(work.join("gone.txt"), "bye\n").unwrap();
    let before = snapshot(server.workdir());
    let mut fs = server.fs().await;
    fork(&mut fs, "fsb", "/workspace/proj").await;
    write_in(&mut fs, "fsb", "/workspace/proj/new/c.rs", "fn c() {}\n").await;
    write_in(&mut fs, "fsb", "/workspace/proj/README.md", "readme v2\n").await;
    let edit = pb::EditRequest {
        path: "/workspace/proj/src/a.rs".into(),
        old_string: "a()".into(),
        new_string: "a2()".into(),
        ..Default::default()
    };
    fs.edit(in_branch(edit, "fsb")).await.unwrap();
    let delete = pb::DeleteRequest {
        path: "/workspace/proj/gone.txt".into(),
        ..Default::default()
    };
    fs.delete(in_branch(delete, "fsb")).await.unwrap();
    let mv = pb::MoveRequest {
        source: "/workspace/proj/src/deep".into(),
        destination: "/workspace/proj/lib".into(),
        ..Default::default()
    };
    fs.r#move(in_branch(mv, "fsb")).await.unwrap();
    // The branch sees its work; the disk shows none of it.
    assert_eq!(
        bytes(&mut fs, Some("fsb"), "/workspace/proj/lib/b.rs")
            .await
            .as_deref(),
        Some("fn b() {}\n")
    );
    assert_eq!(
        bytes(&mut fs, Some("fsb"), "/workspace/proj/src/a.rs")
            .await
            .as_deref(),
        Some("fn a2() {}\n")
    );
    assert_eq!(
        bytes(&mut fs, Some("fsb"), "/workspace/proj/gone.txt").await,
        None
    );
    assert_eq!(snapshot(server.workdir()), before);
    let kept = snapshot(server.data_dir());
    assert!(
        kept.iter().any(|(p, c)| p.ends_with("proj/new/c.rs")
            && c.as_ref().is_some_and(|(d, _)| d == b"fn c() {}\n")),
        "the branch's file is not in the data directory: {kept:?}"
    );
    // A file the base changes meanwhile shows through where the branch
    // did not change it.
    std::fs::write(work.join("src/other.rs"), "other\n").unwrap();
    assert_eq!(
        bytes(&mut fs, Some("fsb"), "/workspace/proj/src/other.rs")
            .await
            .as_deref(),
        Some("other\n")
    );
    let before = snapshot(server.workdir());
    let diff = fs
        .diff_branch(pb::DiffBranchRequest {
            name: "fsb".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    // Added, changed twice, deleted, and the move as one.
    assert_eq!(diff.files.len(), 5, "{diff:?}");
    assert_eq!(snapshot(server.workdir()), before);
    let merged = merge(&mut fs, "fsb", vec![]).await;
    assert!(merged.conflicts.is_empty(), "{merged:?}");
    let read = |p: &str| std::fs::read_to_string(work.join(p)).ok();
    assert_eq!(read("new/c.rs").as_deref(), Some("fn c() {}\n"));
    assert_eq!(read("README.md").as_deref(), Some("readme v2\n"));
    assert_eq!(read("src/a.rs").as_deref(), Some("fn a2() {}\n"));
    assert_eq!(read("lib/b.rs").as_deref(), Some("fn b() {}\n"));
    assert_eq!(read("src/deep/b.rs"), None);
    assert_eq!(read("gone.txt"), None);
    assert_eq!(read("src/other.rs").as_deref(), Some("other\n"));
    // Discarded with the merge: nothing of the branch is left on disk.
    let kept = snapshot(server.data_dir());
    assert!(
        !kept
            .iter()
            .any(|(p, _)| p.contains("branch.") && p.contains(".fsb")),
        "the discarded branch's directory is left: {kept:?}"
    );
}

/// A link that leaves the served directory is refused inside a branch as
/// on the base: read through, listed through, written through, moved; and
/// no caller can name the scope that holds a branch's changes.
#[tokio::test]
async fn a_link_leaving_the_root_is_refused_inside_a_branch() {
    let server = Server::start();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret\n").unwrap();
    let work = server.workdir().join("w");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("ok.txt"), "ok\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), work.join("out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), work.join("leak.txt")).unwrap();
    let mut fs = server.fs().await;
    fork(&mut fs, "esc", "/workspace/w").await;
    for path in ["/workspace/w/out/secret.txt", "/workspace/w/leak.txt"] {
        for branch in [None, Some("esc")] {
            let refused = read(&mut fs, branch, path).await.unwrap_err();
            assert_eq!(
                refused.code(),
                Code::PermissionDenied,
                "{path} {branch:?}: {refused:?}"
            );
        }
    }
    let list = pb::ListInfoRequest {
        path: "/workspace/w/out".into(),
    };
    let refused = fs.list_info(in_branch(list, "esc")).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let through = pb::WriteRequest {
        path: "/workspace/w/out/planted.txt".into(),
        content: "x".into(),
        ..Default::default()
    };
    let refused = fs.write(in_branch(through, "esc")).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let mv = pb::MoveRequest {
        source: "/workspace/w/leak.txt".into(),
        destination: "/workspace/w/copied.txt".into(),
        ..Default::default()
    };
    let refused = fs.r#move(in_branch(mv, "esc")).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let grep = pb::GrepRequest {
        pattern: "secret".into(),
        path: "/workspace/w".into(),
        ..Default::default()
    };
    let (hits, _) = grep_all(&mut fs, in_branch(grep, "esc")).await.unwrap();
    assert!(hits.is_empty(), "{hits:?}");
    assert_eq!(
        bytes(&mut fs, Some("esc"), "/workspace/w/copied.txt").await,
        None
    );
    let names: Vec<String> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["secret.txt"]);
    // The scope holding a branch's changes has a name no caller can send.
    let mut req = Request::new(pb::ReadRequest {
        path: "/workspace/w/ok.txt".into(),
        ..Default::default()
    });
    req.metadata_mut().insert(
        "x-agentvfs-namespace",
        "!branch.default.esc".parse().unwrap(),
    );
    let refused = fs.read(req).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
}

/// Every event of a Watch of `root` in `branch` from `cursor` (the head
/// when empty) up to the head, and the cursor after them.
async fn watch_in(
    fs: &mut FilesystemClient<Channel>,
    branch: &str,
    root: &str,
    cursor: &str,
) -> (Vec<pb::ChangeEvent>, String) {
    let msg = pb::WatchRequest {
        path: root.into(),
        cursor: cursor.into(),
        from_now: cursor.is_empty(),
        stop_at_head: true,
    };
    let mut stream = fs.watch(in_branch(msg, branch)).await.unwrap().into_inner();
    let (mut events, mut last) = (Vec::new(), String::new());
    while let Some(msg) = stream.message().await.unwrap() {
        events.extend(msg.events);
        last = msg.cursor;
    }
    (events, last)
}

/// What a Watch event says: its path, kind, the move's other end, and
/// whether the version is the branch's (top bit set).
fn said(e: &pb::ChangeEvent) -> (String, i32, String, bool) {
    (
        e.path.clone(),
        e.kind,
        e.moved_path.clone(),
        e.version >> 63 == 1,
    )
}

/// A Watch in a branch reports what the branch shows change: its own
/// changes, and the base's changes to files it has not changed (a base
/// move with both ends), never the base's change to a file the branch
/// changed; a cursor from it, the page's or one event's, resumes exactly
/// (docs/branches.md § Working in a branch).
async fn a_watch_in_a_branch_on(fs: &mut FilesystemClient<Channel>, root: &str) {
    let (created, modified, deleted) = (
        pb::ChangeKind::Created as i32,
        pb::ChangeKind::Modified as i32,
        pb::ChangeKind::Deleted as i32,
    );
    let p = |file: &str| format!("{root}/{file}");
    let name = root.trim_start_matches('/').replace('/', "-");
    for name in ["a", "b", "c"] {
        write(fs, &p(name), "base\n").await;
    }
    fork(fs, &name, root).await;
    let (none, head) = watch_in(fs, &name, root, "").await;
    assert!(none.is_empty(), "{none:?}");
    write_in(fs, &name, &p("a"), "mine\n").await;
    write(fs, &p("a"), "theirs\n").await;
    write(fs, &p("b"), "theirs\n").await;
    let mv = pb::MoveRequest {
        source: p("c"),
        destination: p("d"),
        ..Default::default()
    };
    fs.r#move(Request::new(mv)).await.unwrap();
    let (events, after) = watch_in(fs, &name, root, &head).await;
    let mut seen: Vec<_> = events.iter().map(said).collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (p("a"), created, String::new(), true),
            (p("b"), modified, String::new(), false),
            (p("c"), deleted, p("d"), false),
            (p("d"), created, p("c"), false),
        ],
        "{root}: {events:?}"
    );
    // Resuming after the first event sends exactly the others.
    let (rest, _) = watch_in(fs, &name, root, &events[0].cursor).await;
    assert_eq!(
        rest.iter().map(said).collect::<Vec<_>>(),
        events[1..].iter().map(said).collect::<Vec<_>>(),
        "{root}"
    );
    // The page's cursor resumes in both logs: one more change each.
    write(fs, &p("b"), "again\n").await;
    write_in(fs, &name, &p("e"), "new\n").await;
    let (more, _) = watch_in(fs, &name, root, &after).await;
    let mut seen: Vec<_> = more.iter().map(said).collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (p("b"), modified, String::new(), false),
            (p("e"), created, String::new(), true),
        ],
        "{root}"
    );
    assert_eq!(read(fs, Some(&name), &p("a")).await.unwrap(), "mine\n");
}

#[tokio::test]
async fn a_watch_in_a_branch_sees_the_base_where_the_branch_did_not_change_it() {
    let server = Server::start();
    let mut fs = server.fs().await;
    for root in ["/scratch/w", "/memories/w", "/workspace/w"] {
        a_watch_in_a_branch_on(&mut fs, root).await;
    }
}

#[tokio::test]
async fn a_watch_in_a_branch_sees_the_base_on_the_object_tier() {
    let config = object_config();
    let server = Server::start_with(Some(&config), &[]);
    let mut fs = server.fs().await;
    a_watch_in_a_branch_on(&mut fs, "/shared/w").await;
}

/// A resolution of `path` to `content`.
fn resolve(path: &str, content: &str) -> pb::MergeResolution {
    pb::MergeResolution {
        path: path.into(),
        resolution: Some(pb::merge_resolution::Resolution::Content(content.into())),
    }
}

/// Hostile MergeBranch resolutions (docs/branches.md § Merge): 100,000 of
/// them, a file outside the branch, a file twice, a file the branch did
/// not change: each refused with an error naming the problem, nothing
/// applied, the branch kept, and the server serving another client at
/// once; a resolution of a file that merges cleanly is taken as that
/// file's result.
#[tokio::test]
async fn hostile_merge_resolutions_are_refused() {
    let server = Server::start();
    let mut fs = server.fs().await;
    write(&mut fs, "/memories/h/a.md", "base a\n").await;
    write(&mut fs, "/memories/h/b.md", "base b\n").await;
    write(&mut fs, "/memories/other.md", "outside\n").await;
    fork(&mut fs, "hostile", "/memories/h").await;
    write_in(&mut fs, "hostile", "/memories/h/a.md", "branch a\n").await;
    let refuse = async |fs: &mut FilesystemClient<Channel>, resolutions| {
        let req = pb::MergeBranchRequest {
            name: "hostile".into(),
            resolutions,
            discard: true,
        };
        fs.merge_branch(req).await.unwrap_err()
    };

    // 100,000 resolutions: refused by count while another client is served.
    let many: Vec<_> = (0..100_000)
        .map(|i| resolve(&format!("/memories/h/f{i}.md"), "x"))
        .collect();
    let mut other = server.fs().await;
    let (refused, served) = tokio::join!(
        refuse(&mut fs, many),
        read(&mut other, None, "/memories/other.md")
    );
    assert_error(&refused, Code::ResourceExhausted, "INVALID_PARAM");
    assert!(
        refused.message().contains("100000 resolutions")
            && refused.message().contains("changeset_max_operations"),
        "{refused:?}"
    );
    assert!(served.unwrap().contains("outside"));

    // Outside the branch's root, and its root itself.
    for outside in ["/memories/other.md", "/memories/h", "/scratch/x.md"] {
        let refused = refuse(&mut fs, vec![resolve(outside, "x")]).await;
        assert_error(&refused, Code::InvalidArgument, "INVALID_PARAM");
        assert!(
            refused.message().contains(outside) && refused.message().contains("outside branch"),
            "{refused:?}"
        );
    }

    // A file twice.
    let twice = vec![
        resolve("/memories/h/a.md", "one\n"),
        resolve("/memories/h/a.md", "two\n"),
    ];
    let refused = refuse(&mut fs, twice).await;
    assert_error(&refused, Code::InvalidArgument, "INVALID_PARAM");
    assert!(
        refused
            .message()
            .contains("/memories/h/a.md is resolved twice"),
        "{refused:?}"
    );

    // A file of the root the branch did not change.
    let unchanged = vec![resolve("/memories/h/b.md", "evil\n")];
    let refused = refuse(&mut fs, unchanged).await;
    assert_error(&refused, Code::InvalidArgument, "INVALID_PARAM");
    assert!(
        refused.message().contains("/memories/h/b.md")
            && refused.message().contains("did not change"),
        "{refused:?}"
    );

    // Nothing applied, the branch kept.
    assert_eq!(
        bytes(&mut fs, None, "/memories/h/a.md").await.unwrap(),
        "base a\n"
    );
    assert_eq!(
        bytes(&mut fs, None, "/memories/h/b.md").await.unwrap(),
        "base b\n"
    );
    assert_eq!(
        bytes(&mut fs, Some("hostile"), "/memories/h/a.md")
            .await
            .unwrap(),
        "branch a\n"
    );

    // A resolution of a file that is no conflict is that file's result.
    let merged = merge(
        &mut fs,
        "hostile",
        vec![resolve("/memories/h/a.md", "settled\n")],
    )
    .await;
    assert!(merged.conflicts.is_empty(), "{merged:?}");
    assert_eq!(
        bytes(&mut fs, None, "/memories/h/a.md").await.unwrap(),
        "settled\n"
    );
    assert_eq!(
        bytes(&mut fs, None, "/memories/h/b.md").await.unwrap(),
        "base b\n"
    );
}

/// A Grep and a Glob with their summaries (elapsed time left out), as
/// `branch` (or the base) shows the tree below `path`.
async fn searched(
    fs: &mut FilesystemClient<Channel>,
    branch: Option<&str>,
    path: &str,
) -> (
    Vec<pb::GrepMatch>,
    pb::SearchSummary,
    Vec<String>,
    pb::SearchSummary,
) {
    let grep = pb::GrepRequest {
        pattern: "needle".into(),
        path: path.into(),
        ..Default::default()
    };
    let glob = pb::GlobRequest {
        pattern: "**".into(),
        path: path.into(),
        ..Default::default()
    };
    let (grep, glob) = match branch {
        Some(b) => (in_branch(grep, b), in_branch(glob, b)),
        None => (Request::new(grep), Request::new(glob)),
    };
    let (hits, mut grep_summary) = grep_all(fs, grep).await.unwrap();
    let (paths, mut glob_summary) = glob_all(fs, glob).await.unwrap();
    grep_summary.elapsed_ms = 0;
    glob_summary.elapsed_ms = 0;
    (hits, grep_summary, paths, glob_summary)
}

/// A search in a branch of a Filesystem mount applies the `.ignore` and
/// `.gitignore` files as the branch has them (docs/branches.md § On the
/// Filesystem tier): one the branch changed or deleted as changed or
/// deleted, one above the branch's root as the base has it. Grep and Glob
/// in the branch give what the base gives once the branch is merged, hits
/// and summaries alike (a bad rule the branch wrote reported as on the
/// base), and the base is unaffected before the merge.
#[tokio::test]
async fn a_search_in_a_branch_applies_the_ignore_files_as_the_branch_has_them() {
    let server = Server::start();
    let mut fs = server.fs().await;
    for (path, content) in [
        ("/workspace/.ignore", "*.bak\n"),
        ("/workspace/ig/.gitignore", "*.log\n"),
        ("/workspace/ig/a.log", "needle a.log\n"),
        ("/workspace/ig/a.tmp", "needle a.tmp\n"),
        ("/workspace/ig/keep.txt", "needle keep\n"),
        ("/workspace/ig/sub/.ignore", "b.txt\n"),
        ("/workspace/ig/sub/b.txt", "needle b\n"),
        ("/workspace/ig/sub/c.txt", "needle c\n"),
        ("/workspace/z.txt", "needle z\n"),
    ] {
        write(&mut fs, path, content).await;
    }
    let base_before = [
        searched(&mut fs, None, "/workspace").await,
        searched(&mut fs, None, "/workspace/ig").await,
    ];
    let (hits, summary, paths, _) = &base_before[1];
    assert_eq!(
        paths,
        &[
            "/workspace/ig/a.tmp",
            "/workspace/ig/keep.txt",
            "/workspace/ig/sub/c.txt"
        ]
    );
    assert_eq!(hits.len(), 3);
    assert_eq!((summary.skipped_ignored, summary.skipped_hidden), (2, 2));

    fork(&mut fs, "ig", "/workspace/ig").await;
    write_in(&mut fs, "ig", "/workspace/ig/.gitignore", "*.tmp\nx[z-a]\n").await;
    write_in(&mut fs, "ig", "/workspace/ig/new.log", "needle new.log\n").await;
    write_in(&mut fs, "ig", "/workspace/ig/new.tmp", "needle new.tmp\n").await;
    write_in(&mut fs, "ig", "/workspace/ig/old.bak", "needle old.bak\n").await;
    write_in(&mut fs, "ig", "/workspace/ig/sub/d.txt", "needle d\n").await;
    let delete = pb::DeleteRequest {
        path: "/workspace/ig/sub/.ignore".into(),
        ..Default::default()
    };
    fs.delete(in_branch(delete, "ig")).await.unwrap();

    let in_branch_now = [
        searched(&mut fs, Some("ig"), "/workspace").await,
        searched(&mut fs, Some("ig"), "/workspace/ig").await,
    ];
    let (_, summary, paths, _) = &in_branch_now[1];
    assert_eq!(
        paths,
        &[
            "/workspace/ig/a.log",
            "/workspace/ig/keep.txt",
            "/workspace/ig/new.log",
            "/workspace/ig/sub/b.txt",
            "/workspace/ig/sub/c.txt",
            "/workspace/ig/sub/d.txt",
        ]
    );
    assert_eq!(summary.skipped_ignored, 3, "a.tmp, new.tmp, old.bak");
    assert_eq!(summary.problems.len(), 1, "{:?}", summary.problems);
    assert_eq!(summary.problems[0].path, "/workspace/ig/.gitignore");
    assert!(summary.problems[0].message.contains("x[z-a]"));
    let base_now = [
        searched(&mut fs, None, "/workspace").await,
        searched(&mut fs, None, "/workspace/ig").await,
    ];
    assert_eq!(base_now, base_before, "the base before the merge");

    let merged = merge(&mut fs, "ig", Vec::new()).await;
    assert!(merged.conflicts.is_empty(), "{merged:?}");
    let base_merged = [
        searched(&mut fs, None, "/workspace").await,
        searched(&mut fs, None, "/workspace/ig").await,
    ];
    assert_eq!(
        in_branch_now, base_merged,
        "the branch against the merged base"
    );
}
