//! Principals, grants and handles through the real server (docs/contract.md § Grants).

use crate::util::{Server, assert_error};
use agentvfs::pb;
use agentvfs::pb::access_client::AccessClient;
use agentvfs::pb::filesystem_client::FilesystemClient;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

const ALL_OPS: &str =
    r#"["list", "file", "read_binary", "read_file", "read_re", "write", "delete"]"#;

fn config() -> String {
    format!(
        r#"
[[mount]]
prefix = "/"
tier = "state"

[[principal]]
name = "admin"
token = "admin-token-0001"
grants = [{{ prefix = "/", ops = {ALL_OPS} }}]

[[principal]]
name = "reader"
token = "reader-token-0001"
grants = [{{ prefix = "/workspace/", ops = ["list", "file", "read_file", "read_binary", "read_re"] }}]

[[principal]]
name = "writer"
token = "writer-token-0001"
grants = [
  {{ prefix = "/workspace/", ops = ["list", "file", "read_file", "write"] }},
  {{ prefix = "/workspace/tmp/", ops = ["delete"] }},
]
"#
    )
}

fn authed<T>(msg: T, token: Option<&str>) -> Request<T> {
    let mut req = Request::new(msg);
    if let Some(token) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    req
}

/// A principal as the table sees it: name, token, and (prefix, ops) grants.
type TablePrincipal = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static [&'static str])],
);

/// Every RPC of the Filesystem service with benign arguments on `path`.
const RPCS: [&str; 12] = [
    "ListInfo",
    "Stat",
    "Read",
    "ReadBytes",
    "Write",
    "WriteBytes",
    "Edit",
    "MultiEdit",
    "Delete",
    "ReadRe",
    "Grep",
    "Glob",
];

/// The operations each RPC needs (README "Grants").
fn needs(rpc: &str) -> &'static [&'static str] {
    match rpc {
        "ListInfo" | "Glob" => &["list"],
        "Stat" => &["file"],
        "Read" => &["read_file"],
        "ReadBytes" => &["read_binary"],
        "Write" | "WriteBytes" => &["write"],
        "Edit" | "MultiEdit" => &["read_file", "write"],
        "Delete" => &["delete"],
        "ReadRe" | "Grep" => &["read_re"],
        _ => unreachable!("unknown rpc {rpc}"),
    }
}

async fn call(
    fs: &mut FilesystemClient<Channel>,
    rpc: &str,
    file: &str,
    token: &str,
) -> Result<(), Status> {
    use pb::write_bytes_request::Kind;
    let dir = file.rsplit_once('/').map(|(d, _)| d).unwrap_or("/");
    let t = Some(token);
    match rpc {
        "ListInfo" => fs
            .list_info(authed(pb::ListInfoRequest { path: dir.into() }, t))
            .await
            .map(drop),
        "Stat" => fs
            .stat(authed(pb::StatRequest { path: file.into() }, t))
            .await
            .map(drop),
        "Read" => fs
            .read(authed(
                pb::ReadRequest {
                    path: file.into(),
                    ..Default::default()
                },
                t,
            ))
            .await
            .map(drop),
        "ReadBytes" => {
            let mut s = fs
                .read_bytes(authed(
                    pb::ReadBytesRequest {
                        path: file.into(),
                        version: None,
                    },
                    t,
                ))
                .await?
                .into_inner();
            while s.message().await?.is_some() {}
            Ok(())
        }
        "Write" => {
            let req = pb::WriteRequest {
                path: file.into(),
                content: "alpha\n".into(),
                ..Default::default()
            };
            fs.write(authed(req, t)).await.map(drop)
        }
        "WriteBytes" => {
            let header = pb::WriteBytesHeader {
                path: file.into(),
                ..Default::default()
            };
            let msgs = vec![
                pb::WriteBytesRequest {
                    kind: Some(Kind::Header(header)),
                },
                pb::WriteBytesRequest {
                    kind: Some(Kind::Data(b"alpha\n".to_vec())),
                },
            ];
            fs.write_bytes(authed(tokio_stream::iter(msgs), t))
                .await
                .map(drop)
        }
        "Edit" => {
            let req = pb::EditRequest {
                path: file.into(),
                old_string: "alpha".into(),
                new_string: "beta".into(),
                ..Default::default()
            };
            fs.edit(authed(req, t)).await.map(drop)
        }
        "MultiEdit" => {
            let edit = pb::EditOperation {
                old_string: "alpha".into(),
                new_string: "beta".into(),
                replace_all: false,
            };
            let req = pb::MultiEditRequest {
                path: file.into(),
                edits: vec![edit],
                if_version: None,
            };
            fs.multi_edit(authed(req, t)).await.map(drop)
        }
        "Delete" => fs
            .delete(authed(
                pb::DeleteRequest {
                    path: file.into(),
                    ..Default::default()
                },
                t,
            ))
            .await
            .map(drop),
        "ReadRe" => {
            let req = pb::ReadReRequest {
                path: file.into(),
                pattern: "al.ha".into(),
                overlap: None,
            };
            fs.read_re(authed(req, t)).await.map(drop)
        }
        "Grep" => {
            let req = pb::GrepRequest {
                pattern: "alpha".into(),
                path: dir.into(),
                ..Default::default()
            };
            let mut fs = fs.clone();
            let mut s = fs.grep(authed(req, t)).await?.into_inner();
            while s.message().await?.is_some() {}
            Ok(())
        }
        "Glob" => {
            let req = pb::GlobRequest {
                pattern: "*".into(),
                path: dir.into(),
                ..Default::default()
            };
            let mut s = fs.glob(authed(req, t)).await?.into_inner();
            while s.message().await?.is_some() {}
            Ok(())
        }
        _ => unreachable!("unknown rpc {rpc}"),
    }
}

/// A table over principals × prefixes × every RPC: each call succeeds exactly
/// when the principal holds every operation the RPC needs on that path, and
/// otherwise is PERMISSION_DENIED naming the operation and the path.
#[tokio::test]
async fn grant_table_decides_every_rpc() {
    let server = Server::start_with(Some(&config()), &[]);
    let mut fs = server.fs().await;
    let principals: [TablePrincipal; 3] = [
        (
            "admin",
            "admin-token-0001",
            &[(
                "/",
                &[
                    "list",
                    "file",
                    "read_binary",
                    "read_file",
                    "read_re",
                    "write",
                    "delete",
                ],
            )],
        ),
        (
            "reader",
            "reader-token-0001",
            &[(
                "/workspace",
                &["list", "file", "read_file", "read_binary", "read_re"],
            )],
        ),
        (
            "writer",
            "writer-token-0001",
            &[
                ("/workspace", &["list", "file", "read_file", "write"]),
                ("/workspace/tmp", &["delete"]),
            ],
        ),
    ];
    let files = [
        "/workspace/a.txt",
        "/workspace/tmp/t.txt",
        "/workspace2/b.txt",
        "/other/c.txt",
    ];
    let mut checked = 0;
    for (name, token, grants) in principals {
        for file in files {
            for rpc in RPCS {
                // Fresh fixture before every call: a file holding "alpha".
                call(&mut fs, "Write", file, "admin-token-0001")
                    .await
                    .unwrap();
                let held = |op: &str| {
                    grants.iter().any(|(prefix, ops)| {
                        (file == *prefix
                            || file.starts_with(&format!("{prefix}/"))
                            || *prefix == "/")
                            && ops.contains(&op)
                    })
                };
                let allowed = needs(rpc).iter().all(|op| held(op));
                let result = call(&mut fs, rpc, file, token).await;
                match (allowed, result) {
                    (true, Ok(())) => {}
                    (false, Err(status)) => {
                        assert_error(&status, Code::PermissionDenied, "ACCESS_DENIED");
                        let missing = needs(rpc).iter().find(|op| !held(op)).unwrap();
                        assert!(
                            status.message().contains(&format!("'{missing}'")),
                            "{name} {rpc} {file}: {status:?}"
                        );
                    }
                    (allowed, result) => {
                        panic!("{name} {rpc} {file}: allowed={allowed} but got {result:?}")
                    }
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 3 * 4 * 12);
}

/// No token or an unknown token is UNAUTHENTICATED.
#[tokio::test]
async fn missing_or_unknown_token_is_unauthenticated() {
    let server = Server::start_with(Some(&config()), &[]);
    let mut fs = server.fs().await;
    for token in [None, Some("not-a-real-token")] {
        let err = fs
            .stat(authed(
                pb::StatRequest {
                    path: "/workspace".into(),
                },
                token,
            ))
            .await
            .unwrap_err();
        assert_error(&err, Code::Unauthenticated, "ACCESS_DENIED");
    }
}

/// The check order of docs/contract.md § Grants: an ungranted missing path is PERMISSION_DENIED, a granted
/// missing path NOT_FOUND; an invalid path is INVALID_ARGUMENT before either.
#[tokio::test]
async fn check_order_path_then_grant_then_existence() {
    let server = Server::start_with(Some(&config()), &[]);
    let mut fs = server.fs().await;
    let stat = |path: &str| {
        authed(
            pb::StatRequest { path: path.into() },
            Some("reader-token-0001"),
        )
    };
    assert_error(
        &fs.stat(stat("/secret/missing")).await.unwrap_err(),
        Code::PermissionDenied,
        "ACCESS_DENIED",
    );
    assert_error(
        &fs.stat(stat("/workspace/missing")).await.unwrap_err(),
        Code::NotFound,
        "NOT_FOUND",
    );
    assert_error(
        &fs.stat(stat("/secret/../x")).await.unwrap_err(),
        Code::InvalidArgument,
        "INVALID_PARAM",
    );
    assert_error(
        &fs.stat(stat("/workspace2/x")).await.unwrap_err(),
        Code::PermissionDenied,
        "ACCESS_DENIED",
    );
}

/// The paths a Grep for `alpha` from `/` returns to `token`.
async fn grep_paths(fs: &mut FilesystemClient<Channel>, token: &str) -> Vec<String> {
    let req = authed(
        pb::GrepRequest {
            pattern: "alpha".into(),
            path: "/".into(),
            ..Default::default()
        },
        Some(token),
    );
    let mut stream = fs.grep(req).await.unwrap().into_inner();
    let mut paths = Vec::new();
    while let Some(msg) = stream.message().await.unwrap() {
        if let Some(pb::grep_response::Result::Batch(b)) = msg.result {
            paths.extend(b.matches.into_iter().map(|m| m.path));
        }
    }
    paths
}

/// ListInfo and search from `/` show only what the caller may see.
#[tokio::test]
async fn listing_and_search_show_only_granted_paths() {
    let server = Server::start_with(Some(&config()), &[]);
    let mut fs = server.fs().await;
    for file in ["/workspace/a.txt", "/secret/s.txt", "/workspace2/b.txt"] {
        call(&mut fs, "Write", file, "admin-token-0001")
            .await
            .unwrap();
    }
    let list = fs
        .list_info(authed(
            pb::ListInfoRequest { path: "/".into() },
            Some("reader-token-0001"),
        ))
        .await
        .unwrap();
    let names: Vec<String> = list
        .into_inner()
        .entries
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(names, ["/workspace"]);
    assert_eq!(
        grep_paths(&mut fs, "admin-token-0001").await,
        ["/secret/s.txt", "/workspace/a.txt", "/workspace2/b.txt"]
    );
    assert_eq!(
        grep_paths(&mut fs, "reader-token-0001").await,
        ["/workspace/a.txt"]
    );
    let err = fs
        .list_info(authed(
            pb::ListInfoRequest {
                path: "/secret".into(),
            },
            Some("reader-token-0001"),
        ))
        .await;
    assert_error(&err.unwrap_err(), Code::PermissionDenied, "ACCESS_DENIED");
}

/// A handle holds the intersection of what was asked and what its creator
/// holds, can be described, and stops working when revoked.
#[tokio::test]
async fn handles_never_gain_rights_and_can_be_revoked() {
    let server = Server::start_with(Some(&config()), &[]);
    let mut fs = server.fs().await;
    let mut access = AccessClient::new(server.channel().await);
    call(&mut fs, "Write", "/workspace/a.txt", "admin-token-0001")
        .await
        .unwrap();
    let ask = pb::CreateHandleRequest {
        grants: vec![pb::Grant {
            prefix: "/workspace/".into(),
            ops: vec!["read_file".into(), "write".into()],
        }],
        ttl_seconds: 60,
        branch: String::new(),
    };
    let handle = access
        .create_handle(authed(ask, Some("reader-token-0001")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        handle.grants,
        [pb::Grant {
            prefix: "/workspace".into(),
            ops: vec!["read_file".into()]
        }]
    );
    let token = handle.token.as_str();
    assert!(
        call(&mut fs, "Read", "/workspace/a.txt", token)
            .await
            .is_ok()
    );
    assert_error(
        &call(&mut fs, "Write", "/workspace/a.txt", token)
            .await
            .unwrap_err(),
        Code::PermissionDenied,
        "ACCESS_DENIED",
    );
    assert_error(
        &call(&mut fs, "Stat", "/workspace/a.txt", token)
            .await
            .unwrap_err(),
        Code::PermissionDenied,
        "ACCESS_DENIED",
    );

    let described = access
        .describe_grants(authed(pb::DescribeGrantsRequest {}, Some(token)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(described.markdown, "/workspace/: read");
    let reader = access
        .describe_grants(authed(
            pb::DescribeGrantsRequest {},
            Some("reader-token-0001"),
        ))
        .await
        .unwrap();
    assert_eq!(
        reader.into_inner().markdown,
        "/workspace/: ls, stat, download, read, search"
    );

    let revoke = |t: &str| {
        authed(
            pb::RevokeHandleRequest {
                token: handle.token.clone(),
            },
            Some(t),
        )
    };
    assert_error(
        &access
            .revoke_handle(revoke("writer-token-0001"))
            .await
            .unwrap_err(),
        Code::PermissionDenied,
        "ACCESS_DENIED",
    );
    access
        .revoke_handle(revoke("reader-token-0001"))
        .await
        .unwrap();
    assert_error(
        &call(&mut fs, "Read", "/workspace/a.txt", token)
            .await
            .unwrap_err(),
        Code::Unauthenticated,
        "ACCESS_DENIED",
    );
}

/// Tokens never appear in the server's logs, even at debug level.
#[tokio::test]
async fn tokens_never_reach_the_logs() {
    let server = Server::start_with(Some(&config()), &[]);
    let mut fs = server.fs().await;
    call(&mut fs, "Write", "/workspace/a.txt", "admin-token-0001")
        .await
        .unwrap();
    let _ = call(&mut fs, "Read", "/workspace/a.txt", "reader-token-0001").await;
    let _ = call(&mut fs, "Read", "/workspace/a.txt", "bogus-token-9999").await;
    let mut access = AccessClient::new(server.channel().await);
    let ask = pb::CreateHandleRequest {
        grants: vec![pb::Grant {
            prefix: "/".into(),
            ops: vec!["list".into()],
        }],
        ttl_seconds: 0,
        branch: String::new(),
    };
    let handle = access
        .create_handle(authed(ask, Some("admin-token-0001")))
        .await
        .unwrap()
        .into_inner();
    // The log reader runs on its own thread: wait for the line, then look.
    assert!(
        server
            .wait_for_log("handle created", std::time::Duration::from_secs(5))
            .await
    );
    let logs = server.logs.lock().unwrap().clone();
    for secret in [
        "admin-token-0001",
        "reader-token-0001",
        "bogus-token-9999",
        handle.token.as_str(),
    ] {
        assert!(!logs.contains(secret), "{secret} leaked into logs");
    }
}

/// A configured principal is bound to its namespace: naming another one is
/// PERMISSION_DENIED, and principals of different namespaces never share
/// State scratch files even under one session name.
#[tokio::test]
async fn namespaces_bind_principals() {
    let config = r#"
[[mount]]
prefix = "/"
tier = "state"
[[principal]]
name = "a"
token = "token-team-a-01"
namespace = "team-a"
grants = [{ prefix = "/", ops = ["write", "file"] }]
[[principal]]
name = "b"
token = "token-team-b-01"
namespace = "team-b"
grants = [{ prefix = "/", ops = ["write", "file"] }]
"#;
    let server = Server::start_with(Some(config), &[]);
    let mut fs = server.fs().await;
    call(&mut fs, "Write", "/scratch.txt", "token-team-a-01")
        .await
        .unwrap();
    assert!(
        call(&mut fs, "Stat", "/scratch.txt", "token-team-a-01")
            .await
            .is_ok()
    );
    let err = call(&mut fs, "Stat", "/scratch.txt", "token-team-b-01")
        .await
        .unwrap_err();
    assert_error(&err, Code::NotFound, "NOT_FOUND");
    let mut req = authed(
        pb::StatRequest {
            path: "/scratch.txt".into(),
        },
        Some("token-team-b-01"),
    );
    req.metadata_mut()
        .insert("x-agentvfs-namespace", "team-a".parse().unwrap());
    assert_error(
        &fs.stat(req).await.unwrap_err(),
        Code::PermissionDenied,
        "ACCESS_DENIED",
    );
}

/// A State session idle longer than its TTL is dropped with its files.
#[tokio::test]
async fn idle_sessions_expire() {
    let config = "[state]\nidle_ttl_seconds = 1\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n";
    let server = Server::start_with(Some(config), &[]);
    let mut fs = server.fs().await;
    let stat = |session: &str| {
        crate::util::with_session(
            pb::StatRequest {
                path: "/tmp.txt".into(),
            },
            session,
        )
    };
    let write = pb::WriteRequest {
        path: "/tmp.txt".into(),
        content: "x".into(),
        ..Default::default()
    };
    fs.write(crate::util::with_session(write, "short"))
        .await
        .unwrap();
    assert!(fs.stat(stat("short")).await.is_ok());
    tokio::time::sleep(std::time::Duration::from_millis(1600)).await;
    // Any request sweeps idle sessions; this one uses another session so it
    // does not keep "short" alive.
    assert_error(
        &fs.stat(stat("other")).await.unwrap_err(),
        Code::NotFound,
        "NOT_FOUND",
    );
    assert_error(
        &fs.stat(stat("short")).await.unwrap_err(),
        Code::NotFound,
        "NOT_FOUND",
    );
    assert!(
        server
            .wait_for_log(
                "dropped idle State session",
                std::time::Duration::from_secs(5)
            )
            .await
    );
}

/// Asks `token` (`None`: no token) for a handle on `grants`.
async fn mint(
    access: &mut AccessClient<Channel>,
    token: Option<&str>,
    grants: &[(&str, &[&str])],
    ttl_seconds: u64,
) -> Result<pb::CreateHandleResponse, Status> {
    let grants = grants
        .iter()
        .map(|(prefix, ops)| pb::Grant {
            prefix: (*prefix).into(),
            ops: ops.iter().map(|op| (*op).into()).collect(),
        })
        .collect();
    let req = pb::CreateHandleRequest {
        grants,
        ttl_seconds,
        branch: String::new(),
    };
    access
        .create_handle(authed(req, token))
        .await
        .map(|r| r.into_inner())
}

const READ_WORKSPACE: &[(&str, &[&str])] = &[("/workspace/", &["read_file", "list"])];

/// The expiry a CreateHandle response announces.
fn expiry(handle: &pb::CreateHandleResponse) -> std::time::SystemTime {
    let at = handle.expires_at.expect("expires_at set");
    std::time::SystemTime::try_from(at).expect("a valid timestamp")
}

/// Revoking a handle revokes the handles it minted and theirs, at once; a
/// sibling minted by the same principal keeps working.
#[tokio::test]
async fn revoking_a_handle_revokes_every_handle_below_it() {
    let server = Server::start_with(Some(&config()), &[]);
    let mut fs = server.fs().await;
    let mut access = AccessClient::new(server.channel().await);
    call(&mut fs, "Write", "/workspace/a.txt", "admin-token-0001")
        .await
        .unwrap();
    let admin = Some("admin-token-0001");
    let h1 = mint(&mut access, admin, READ_WORKSPACE, 600).await.unwrap();
    let h2 = mint(&mut access, Some(&h1.token), READ_WORKSPACE, 600)
        .await
        .unwrap();
    let h3 = mint(&mut access, Some(&h2.token), READ_WORKSPACE, 600)
        .await
        .unwrap();
    let sibling = mint(&mut access, admin, READ_WORKSPACE, 600).await.unwrap();
    for h in [&h1, &h2, &h3, &sibling] {
        call(&mut fs, "Read", "/workspace/a.txt", &h.token)
            .await
            .unwrap();
    }
    access
        .revoke_handle(authed(
            pb::RevokeHandleRequest {
                token: h1.token.clone(),
            },
            admin,
        ))
        .await
        .unwrap();
    for h in [&h1, &h2, &h3] {
        let err = call(&mut fs, "Read", "/workspace/a.txt", &h.token)
            .await
            .unwrap_err();
        assert_error(&err, Code::Unauthenticated, "ACCESS_DENIED");
        let err = mint(&mut access, Some(&h.token), READ_WORKSPACE, 60)
            .await
            .unwrap_err();
        assert_error(&err, Code::Unauthenticated, "ACCESS_DENIED");
    }
    call(&mut fs, "Read", "/workspace/a.txt", &sibling.token)
        .await
        .unwrap();
}

/// A child asking for 30 days under a parent living 1 s gets the parent's
/// expiry, and both stop working when it passes.
#[tokio::test]
async fn a_handle_never_outlives_its_parent() {
    let server = Server::start_with(Some(&config()), &[]);
    let mut fs = server.fs().await;
    let mut access = AccessClient::new(server.channel().await);
    call(&mut fs, "Write", "/workspace/a.txt", "admin-token-0001")
        .await
        .unwrap();
    let parent = mint(&mut access, Some("admin-token-0001"), READ_WORKSPACE, 1)
        .await
        .unwrap();
    let child = mint(
        &mut access,
        Some(&parent.token),
        READ_WORKSPACE,
        30 * 24 * 3600,
    )
    .await
    .unwrap();
    assert_eq!(expiry(&child), expiry(&parent));
    // Wait until the server's announced expiry is past (same clock).
    let past = expiry(&parent) + std::time::Duration::from_millis(200);
    if let Ok(wait) = past.duration_since(std::time::SystemTime::now()) {
        tokio::time::sleep(wait).await;
    }
    for h in [&parent, &child] {
        let err = call(&mut fs, "Read", "/workspace/a.txt", &h.token)
            .await
            .unwrap_err();
        assert_error(&err, Code::Unauthenticated, "ACCESS_DENIED");
    }
}

/// Chains stop at depth 8 with RESOURCE_EXHAUSTED, and the principal name
/// names the depth instead of growing with it.
#[tokio::test]
async fn handle_chains_are_at_most_8_deep() {
    let server = Server::start_with(Some(&config()), &[]);
    let mut access = AccessClient::new(server.channel().await);
    let mut token = "admin-token-0001".to_owned();
    for _ in 0..8 {
        token = mint(&mut access, Some(&token), READ_WORKSPACE, 600)
            .await
            .unwrap()
            .token;
    }
    let described = access
        .describe_grants(authed(pb::DescribeGrantsRequest {}, Some(&token)))
        .await
        .unwrap()
        .into_inner();
    let name = &described.principal;
    assert!(
        name.starts_with("handle h") && name.ends_with(" of admin (depth 8)"),
        "{name}"
    );
    let err = mint(&mut access, Some(&token), READ_WORKSPACE, 600)
        .await
        .unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
    assert!(err.message().contains("at most 8 deep"), "{err:?}");
}

/// A principal's tree holds at most 1,000 live handles; its handles' handles
/// count too, other principals keep their own budget, and revoking frees room.
#[tokio::test]
async fn a_principal_holds_at_most_1000_live_handles() {
    let server = Server::start_with(Some(&config()), &[]);
    let mut access = AccessClient::new(server.channel().await);
    let reader = Some("reader-token-0001");
    let first = mint(&mut access, reader, READ_WORKSPACE, 600)
        .await
        .unwrap();
    for _ in 1..1000 {
        mint(&mut access, reader, READ_WORKSPACE, 600)
            .await
            .unwrap();
    }
    for creator in [reader, Some(first.token.as_str())] {
        let err = mint(&mut access, creator, READ_WORKSPACE, 600)
            .await
            .unwrap_err();
        assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
        assert!(
            err.message()
                .contains("principal reader already has 1000 live handles"),
            "{err:?}"
        );
    }
    mint(&mut access, Some("writer-token-0001"), READ_WORKSPACE, 600)
        .await
        .unwrap();
    access
        .revoke_handle(authed(
            pb::RevokeHandleRequest { token: first.token },
            reader,
        ))
        .await
        .unwrap();
    mint(&mut access, reader, READ_WORKSPACE, 600)
        .await
        .unwrap();
}

/// An agent chaining CreateHandle as deep as it can 2,000 times (starting a
/// new chain when refused, revoking the old one) leaves the server's memory
/// nearly where it was: ancestry is a parent pointer, not a copied list.
#[tokio::test]
async fn chained_create_handle_keeps_memory_bounded() {
    let server = Server::start_with(Some(&config()), &[]);
    let mut access = AccessClient::new(server.channel().await);
    let admin = "admin-token-0001";
    mint(&mut access, Some(admin), READ_WORKSPACE, 600)
        .await
        .unwrap();
    let before = server.memory_kib("VmRSS") * 1024;
    let mut chain: Vec<String> = Vec::new();
    let mut refused = 0;
    for _ in 0..2000 {
        let creator = chain.last().map_or(admin, String::as_str);
        match mint(&mut access, Some(creator), READ_WORKSPACE, 600).await {
            Ok(h) => chain.push(h.token),
            Err(err) => {
                assert_error(&err, Code::ResourceExhausted, "INVALID_PARAM");
                refused += 1;
                let head = chain.first().expect("a refused chain has a head").clone();
                access
                    .revoke_handle(authed(pb::RevokeHandleRequest { token: head }, Some(admin)))
                    .await
                    .unwrap();
                chain.clear();
            }
        }
    }
    let grown = (server.memory_kib("VmRSS") * 1024).saturating_sub(before);
    assert!(grown < 64 << 20, "server memory grew by {grown} bytes");
    assert!(refused > 0, "the chain was never refused");
}

/// A handle must ask for something the caller holds: no grants, or grants
/// sharing nothing with the caller's, are INVALID_ARGUMENT naming the problem.
#[tokio::test]
async fn handles_must_hold_a_right() {
    let server = Server::start_with(Some(&config()), &[]);
    let mut access = AccessClient::new(server.channel().await);
    let reader = Some("reader-token-0001");
    let err = mint(&mut access, reader, &[], 60).await.unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
    assert!(err.message().contains("at least one grant"), "{err:?}");
    for grants in [
        &[("/secret/", &["read_file"][..])][..],
        &[("/workspace/", &["write", "delete"][..])][..],
    ] {
        let err = mint(&mut access, reader, grants, 60).await.unwrap_err();
        assert_error(&err, Code::InvalidArgument, "INVALID_PARAM");
        assert!(
            err.message()
                .contains("none of the requested grants overlaps the caller's grants"),
            "{err:?}"
        );
    }
}

/// With `anonymous = false` and no principal, a request without a token is
/// UNAUTHENTICATED; the operator token the server wrote (mode 0600, replacing
/// a stale file) works and mints handles; a handle's holder that drops the
/// token gets nothing, and the token never reaches the logs.
#[tokio::test]
async fn without_anonymous_mode_a_handle_cannot_be_shed() {
    use std::os::unix::fs::PermissionsExt;
    let secrets = tempfile::tempdir().unwrap();
    let token_file = secrets.path().join("operator.token");
    std::fs::write(&token_file, "stale-token").unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = format!(
        "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n[access]\nanonymous = false\n\
         operator_token_file = {:?}\n",
        token_file.display().to_string()
    );
    let server = Server::start_with(Some(&config), &[]);
    let operator = std::fs::read_to_string(&token_file).unwrap();
    assert!(operator.starts_with("avfs_"), "{operator:?}");
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    let mut fs = server.fs().await;
    let mut access = AccessClient::new(server.channel().await);
    let stat = |token: Option<&str>| {
        authed(
            pb::StatRequest {
                path: "/workspace/a.txt".into(),
            },
            token,
        )
    };
    assert_error(
        &fs.stat(stat(None)).await.unwrap_err(),
        Code::Unauthenticated,
        "ACCESS_DENIED",
    );
    call(&mut fs, "Write", "/workspace/a.txt", &operator)
        .await
        .unwrap();
    let handle = mint(
        &mut access,
        Some(&operator),
        &[("/workspace/", &["read_file"])],
        600,
    )
    .await
    .unwrap();
    call(&mut fs, "Read", "/workspace/a.txt", &handle.token)
        .await
        .unwrap();
    assert_error(
        &call(&mut fs, "Write", "/workspace/a.txt", &handle.token)
            .await
            .unwrap_err(),
        Code::PermissionDenied,
        "ACCESS_DENIED",
    );
    // The holder drops the handle to shed its limits: refused.
    let read = authed(
        pb::ReadRequest {
            path: "/workspace/a.txt".into(),
            ..Default::default()
        },
        None,
    );
    assert_error(
        &fs.read(read).await.unwrap_err(),
        Code::Unauthenticated,
        "ACCESS_DENIED",
    );
    assert_error(
        &mint(&mut access, None, READ_WORKSPACE, 60)
            .await
            .unwrap_err(),
        Code::Unauthenticated,
        "ACCESS_DENIED",
    );
    assert!(
        server
            .wait_for_log("handle created", std::time::Duration::from_secs(5))
            .await
    );
    let logs = server.logs.lock().unwrap().clone();
    assert!(
        !logs.contains(&operator),
        "the operator token leaked into logs"
    );
}

/// Unsafe or unusable `[access]` settings stop the server before it listens,
/// naming the file, the line and the problem.
#[test]
fn unsafe_access_settings_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n[[principal]]\nname = \"a\"\n\
             token = \"token-0001\"\n[access]\nanonymous = true\n",
            "agentvfs.toml:8: access anonymous = true is refused with [[principal]] configured",
        ),
        (
            "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n[access]\nanonymous = false\n",
            "agentvfs.toml:5: access anonymous = false with no [[principal]] needs \
             operator_token_file",
        ),
        (
            "[[mount]]\nprefix = \"/\"\ntier = \"state\"\n[access]\nanonymous = false\n\
             operator_token_file = \"missing-dir/operator.token\"\n",
            "access operator_token_file missing-dir/operator.token: No such file or directory",
        ),
    ];
    for (config, expected) in cases {
        let path = dir.path().join("agentvfs.toml");
        std::fs::write(&path, config).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentvfs"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&path)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{expected:?} not in {stderr}");
    }
}
