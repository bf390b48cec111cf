//! Health, reflection, startup and shutdown of the real binary.

use crate::util::Server;
use std::process::Command;
use tokio_stream::StreamExt;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

/// The health service reports SERVING for the server and for Filesystem.
#[tokio::test]
async fn health_reports_serving() {
    let server = Server::start();
    let mut health = HealthClient::new(server.channel().await);
    for service in ["", "agentvfs.v1.Filesystem"] {
        let resp = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap();
        assert_eq!(
            resp.into_inner().status(),
            ServingStatus::Serving,
            "{service:?}"
        );
    }
}

/// Reflection v1 lists the agentvfs services, so grpcurl needs no proto files.
#[tokio::test]
async fn reflection_lists_services() {
    let server = Server::start();
    let mut client = ServerReflectionClient::new(server.channel().await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = client
        .server_reflection_info(tokio_stream::once(request))
        .await
        .unwrap()
        .into_inner();
    let response = stream.next().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected reflection answer");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for expected in [
        "agentvfs.v1.Filesystem",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
    ] {
        assert!(
            names.contains(&expected.to_string()),
            "{expected} missing from {names:?}"
        );
    }
}

/// SIGTERM shuts the server down cleanly with exit status 0.
#[tokio::test]
async fn sigterm_shuts_down_cleanly() {
    let mut server = Server::start();
    let pid = server.pid().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert!(
        server
            .wait_for_log("shutting down", std::time::Duration::from_secs(10))
            .await
    );
    let status = server.wait();
    assert!(status.success(), "exit status {status:?}");
}

/// An invalid configuration stops the server before it listens, naming the
/// file, the line and the problem.
#[test]
fn invalid_config_is_refused_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[[mount]]\nprefix = \"/\"\ntier = \"floppy\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .arg("serve")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.toml:3: unknown tier \"floppy\""),
        "{stderr}"
    );
}

/// Binding a non-loopback address without principals is refused unless
/// --allow-unauthenticated is given.
#[test]
fn open_listener_without_principals_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .current_dir(tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-unauthenticated"));
}

/// After `agentvfs listening on ADDR` (unchanged: scripts parse it), the
/// server says what it serves: each mount with its tier and where its data
/// lives, the auth mode and the MCP URL.
#[test]
fn startup_banner_says_what_it_serves() {
    use std::io::BufRead;
    let cwd = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(cwd.path())
        .env("XDG_DATA_HOME", data.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lines: Vec<String> = std::io::BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(Result::unwrap)
        .take(6)
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    let addr = lines[0]
        .strip_prefix("agentvfs listening on 127.0.0.1:")
        .unwrap_or_else(|| panic!("{lines:?}"));
    let banner = lines.join("\n");
    let workspace = cwd.path().canonicalize().unwrap();
    let memories = data
        .path()
        .canonicalize()
        .unwrap()
        .join("agentvfs/memories");
    for needle in [
        format!("mount {:<12} {:<10} in memory", "/", "state"),
        format!(
            "mount {:<12} {:<10} {}",
            "/memories",
            "store",
            memories.display()
        ),
        format!(
            "mount {:<12} {:<10} {}",
            "/workspace",
            "filesystem",
            workspace.display()
        ),
        "auth  anonymous: any local process may call, with every grant".to_owned(),
        format!("mcp   http://127.0.0.1:{addr}/mcp"),
    ] {
        assert!(banner.contains(&needle), "no {needle:?} in\n{banner}");
    }
}

/// Starts `agentvfs serve` on the default configuration in `cwd` (served
/// at /workspace) with `data` as the user's data directory, waits until it
/// listens, and stops it.
fn serve_once(cwd: &std::path::Path, data: &std::path::Path) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentvfs"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(cwd)
        .env("XDG_DATA_HOME", data)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let first = std::io::BufReader::new(child.stdout.take().unwrap())
        .lines()
        .next();
    let _ = child.kill();
    let _ = child.wait();
    let first = first.expect("a line").unwrap();
    assert!(first.starts_with("agentvfs listening on "), "{first}");
}

/// The changeset journals of served directories that were since deleted
/// (a test run's temporary roots) do not pile up in the user's data
/// directory: the next server removes them, and keeps those of directories
/// that still exist.
#[test]
fn journals_of_deleted_directories_are_removed() {
    let data = tempfile::tempdir().unwrap();
    let roots = tempfile::tempdir().unwrap();
    let (gone, kept, next) = (
        roots.path().join("gone"),
        roots.path().join("kept"),
        roots.path().join("next"),
    );
    let journals = data.path().join("agentvfs-journal");
    let names = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&journals)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    for root in [&gone, &kept] {
        std::fs::create_dir(root).unwrap();
        serve_once(root, data.path());
    }
    let before = names();
    assert_eq!(before.len(), 2, "{before:?}");
    std::fs::remove_dir_all(&gone).unwrap();
    std::fs::create_dir(&next).unwrap();
    serve_once(&next, data.path());
    let after = names();
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(after.iter().any(|n| n.starts_with("kept-")), "{after:?}");
    assert!(after.iter().any(|n| n.starts_with("next-")), "{after:?}");
    assert!(!after.iter().any(|n| n.starts_with("gone-")), "{after:?}");
}
