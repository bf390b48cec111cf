//! Principals, grants and handles through the real server (seed 002).

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
                .read_bytes(authed(pb::ReadBytesRequest { path: file.into() }, t))
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

/// Seed 002 order: an ungranted missing path is PERMISSION_DENIED, a granted
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
    };
    let handle = access
        .create_handle(authed(ask, Some("admin-token-0001")))
        .await
        .unwrap()
        .into_inner();
    // The server logs before it answers, but the log pump thread may not
    // have read the line yet: wait for it rather than race it.
    assert!(
        server
            .wait_for_log("handle created", std::time::Duration::from_secs(5))
            .await,
        "debug logging is on: {}",
        server.logs.lock().unwrap()
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
