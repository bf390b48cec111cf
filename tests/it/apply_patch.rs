//! The ApplyPatch tool against the real Codex (docs/changesets.md §
//! apply_patch): every case of tests/apply_patch/cases runs in both, Codex's
//! `apply_patch` in a temporary directory holding the case's input tree, and
//! ApplyPatch through the server with the input tree written under a fresh
//! directory of the Store mount (/memories) and of the Filesystem mount
//! (/workspace), that directory as `root`. Both must accept or refuse alike
//! and leave the same files (paths and bytes), except for the documented
//! differences, asserted exactly.

use crate::util::Server;
use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use agentvfs::pb::tools_client::ToolsClient;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tonic::transport::Channel;

/// Files by path relative to the tree's root, with their bytes.
type Tree = BTreeMap<String, Vec<u8>>;

/// The cases, in name order.
fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apply_patch/cases");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    cases.sort();
    cases
}

/// The files under `dir` on disk (none when it does not exist).
fn disk_tree(dir: &Path) -> Tree {
    fn walk(dir: &Path, prefix: &str, tree: &mut Tree) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let rel = format!("{prefix}{name}");
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &format!("{rel}/"), tree);
            } else {
                tree.insert(rel, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    let mut tree = Tree::new();
    walk(dir, "", &mut tree);
    tree
}

/// The reference binary: `$AGENTVFS_CODEX`, linked as `apply_patch` in
/// `dir` (the name makes it run apply_patch).
fn codex_apply_patch(dir: &Path) -> PathBuf {
    let codex = std::env::var("AGENTVFS_CODEX").unwrap_or_default();
    assert!(
        !codex.is_empty() && Path::new(&codex).is_file(),
        "AGENTVFS_CODEX must name the Codex CLI binary these tests compare ApplyPatch \
         with: run `export AGENTVFS_CODEX=$(scripts/codex install)` (it installs \
         @openai/codex 0.169.0 from npm once; scripts/test does it)"
    );
    let link = dir.join("apply_patch");
    std::os::unix::fs::symlink(&codex, &link).unwrap();
    link
}

/// Runs Codex on `patch` over `input`: whether it applied, and the tree left.
fn run_codex(tool: &Path, input: &Tree, patch: &str) -> (bool, Tree, String) {
    let dir = tempfile::tempdir().unwrap();
    for (path, data) in input {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, data).unwrap();
    }
    let out = Command::new(tool)
        .arg(patch)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run codex");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "codex: {:?} {said}",
        out.status
    );
    (out.status.success(), disk_tree(dir.path()), said)
}

/// The files under `dir` through the Filesystem service.
async fn vfs_tree(fs: &mut FilesystemClient<Channel>, dir: &str) -> Tree {
    let mut tree = Tree::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(d) = pending.pop() {
        let entries = match fs.list_info(pb::ListInfoRequest { path: d.clone() }).await {
            Ok(r) => r.into_inner().entries,
            Err(s) if s.code() == tonic::Code::NotFound => continue,
            Err(s) => panic!("list {d}: {s:?}"),
        };
        for e in entries {
            if e.is_directory {
                pending.push(e.path);
                continue;
            }
            let mut stream = fs
                .read_bytes(pb::ReadBytesRequest {
                    path: e.path.clone(),
                    version: None,
                })
                .await
                .unwrap()
                .into_inner();
            let mut data = Vec::new();
            while let Some(chunk) = stream.message().await.unwrap() {
                data.extend(chunk.data);
            }
            let rel = e.path.strip_prefix(&format!("{dir}/")).unwrap().to_owned();
            tree.insert(rel, data);
        }
    }
    tree
}

/// Calls ApplyPatch; the envelope as JSON.
async fn apply_patch(tools: &mut ToolsClient<Channel>, args: Value) -> Value {
    let r = tools
        .invoke(pb::InvokeRequest {
            name: "ApplyPatch".into(),
            arguments_json: args.to_string(),
            tool_call_id: String::new(),
        })
        .await
        .expect("Invoke never fails")
        .into_inner();
    serde_json::from_str(&r.envelope_json).unwrap()
}

/// A difference docs/changesets.md § apply_patch lists: what each side
/// does with the case, exactly (applied, and the whole tree left).
struct Difference {
    case: &'static str,
    codex: (bool, &'static [(&'static str, &'static str)]),
    ours: (bool, &'static [(&'static str, &'static str)]),
}

const DIFFERENCES: &[Difference] = &[
    // All or nothing: Codex applies the Add before the failing Update.
    Difference {
        case: "015_failure_after_partial_success",
        codex: (false, &[("made.txt", "made\n")]),
        ours: (false, &[]),
    },
    // Codex writes the destination, then removes the source: the file.
    Difference {
        case: "041_move_to_same_path",
        codex: (true, &[]),
        ours: (true, &[("f.txt", "A\nb\n")]),
    },
];

fn tree(files: &[(&str, &str)]) -> Tree {
    files
        .iter()
        .map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))
        .collect()
}

/// Every case, on the Store and the Filesystem mount, against Codex.
#[tokio::test]
async fn apply_patch_agrees_with_codex() {
    let bin = tempfile::tempdir().unwrap();
    let codex = codex_apply_patch(bin.path());
    let server = Server::start();
    let mut fs = FilesystemClient::new(server.channel().await);
    let mut tools = ToolsClient::new(server.channel().await);
    let mut agreeing = 0;
    let mut failures = Vec::new();
    for case in cases() {
        let name = case.file_name().unwrap().to_str().unwrap().to_owned();
        let patch = std::fs::read_to_string(case.join("patch.txt")).unwrap();
        let input = disk_tree(&case.join("input"));
        let (codex_ok, codex_tree, codex_said) = run_codex(&codex, &input, &patch);
        for mount in ["/memories", "/workspace"] {
            let root = format!("{mount}/ap-{name}");
            for (path, data) in &input {
                fs.write(pb::WriteRequest {
                    path: format!("{root}/{path}"),
                    content: String::from_utf8(data.clone()).expect("text inputs"),
                    ..Default::default()
                })
                .await
                .unwrap_or_else(|s| panic!("{name}: write {path}: {s:?}"));
            }
            let envelope = apply_patch(&mut tools, json!({"patch": patch, "root": root})).await;
            let ours_ok = envelope["status"] == "success";
            let ours = vfs_tree(&mut fs, &root).await;
            let (want_ok, want_tree) = match DIFFERENCES.iter().find(|d| d.case == name) {
                Some(d) => {
                    assert_eq!(
                        (codex_ok, &codex_tree),
                        (d.codex.0, &tree(d.codex.1)),
                        "{name}: what Codex does"
                    );
                    (d.ours.0, tree(d.ours.1))
                }
                None => (codex_ok, codex_tree.clone()),
            };
            if ours_ok != want_ok || ours != want_tree {
                failures.push(format!(
                    "{name} on {mount}: codex {} ({}), agentvfs {} ({})\n  codex tree: {:?}\n  \
                     agentvfs tree: {:?}",
                    if codex_ok { "applied" } else { "refused" },
                    codex_said.trim(),
                    if ours_ok { "applied" } else { "refused" },
                    envelope["text"].as_str().unwrap_or_default(),
                    lossy(&codex_tree),
                    lossy(&ours),
                ));
            } else {
                agreeing += 1;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} runs differ from Codex:\n{}",
        failures.len(),
        failures.len() + agreeing,
        failures.join("\n")
    );
    assert_eq!(agreeing, cases().len() * 2);
}

fn lossy(tree: &Tree) -> BTreeMap<&str, String> {
    tree.iter()
        .map(|(k, v)| (k.as_str(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

/// A hunk that does not match names the operation, file and hunk, shows the
/// closest region, and applies nothing; success lists the files like Codex.
#[tokio::test]
async fn apply_patch_answers_name_files_and_hunks() {
    let server = Server::start();
    let mut fs = FilesystemClient::new(server.channel().await);
    let mut tools = ToolsClient::new(server.channel().await);
    for (path, content) in [
        (
            "/p/app.py",
            "def greet():\n    print(\"hi\")\n    return 1\n",
        ),
        ("/p/old.txt", "old\n"),
    ] {
        crate::util::write(&mut fs, path, content).await;
    }
    let miss = "*** Begin Patch\n*** Add File: new.txt\n+x\n*** Update File: app.py\n@@ def greet():\n-    print(\"hey\")\n+    print(\"hello\")\n*** End Patch\n";
    let env = apply_patch(&mut tools, json!({"patch": miss, "root": "p"})).await;
    assert_eq!(env["status"], "error", "{env}");
    assert_eq!(env["error"]["code"], "INVALID_PARAM");
    let text = env["text"].as_str().unwrap();
    assert!(
        text.starts_with(
            "operation 1 (update of /p/app.py) failed: hunk 1 (patch line 5) does not match"
        ),
        "{text}"
    );
    assert!(text.contains("Nothing was applied."), "{text}");
    assert!(text.contains("Closest match (line 2"), "{text}");
    assert!(text.contains("print(\"hi\")"), "{text}");
    assert!(
        text.contains("Hint: First difference at line 1, column 13 of the hunk: the hunk has \"ey\" where the file has \"i\"."),
        "{text}"
    );
    let absent = fs
        .stat(pb::StatRequest {
            path: "/p/new.txt".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(absent.code(), tonic::Code::NotFound);

    let ok = "*** Begin Patch\n*** Add File: new.txt\n+x\n*** Update File: app.py\n*** Move to: main.py\n@@ def greet():\n-    print(\"hi\")\n+    print(\"hello\")\n*** Delete File: old.txt\n*** End Patch\n";
    let env = apply_patch(&mut tools, json!({"patch": ok, "root": "/p"})).await;
    assert_eq!(env["status"], "success", "{env}");
    let text = env["text"].as_str().unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Success. Updated the following files:");
    assert!(lines[1].starts_with("A p/new.txt (version "), "{text}");
    assert!(
        lines[2].starts_with("M p/main.py (version ")
            && lines[2].ends_with(", moved from p/app.py)"),
        "{text}"
    );
    assert_eq!(lines[3], "D p/old.txt");
    assert_eq!(env["stats"]["files_added"], 1);
    assert_eq!(env["stats"]["files_modified"], 1);
    assert_eq!(env["stats"]["files_deleted"], 1);
    assert_eq!(env["data"]["files"][1]["moved_from"], "p/app.py");

    for (patch_path, root) in [("../escape.txt", "p"), ("a/../../x", "p")] {
        let patch = format!("*** Begin Patch\n*** Add File: {patch_path}\n+x\n*** End Patch\n");
        let env = apply_patch(&mut tools, json!({"patch": patch, "root": root})).await;
        assert_eq!(env["error"]["code"], "INVALID_PARAM", "{env}");
        assert!(env["text"].as_str().unwrap().contains("leaves p"), "{env}");
    }
    let env = apply_patch(
        &mut tools,
        json!({"patch": "*** Begin Patch\n*** End Patch"}),
    )
    .await;
    assert_eq!(env["error"]["code"], "INVALID_PARAM", "{env}");
    assert!(
        env["text"].as_str().unwrap().contains("changes no file"),
        "{env}"
    );
}

/// `agentvfs apply-patch` reads the patch on stdin; a refusal exits
/// non-zero with the message and code.
#[tokio::test]
async fn apply_patch_verb() {
    let server = Server::start();
    let run = |args: &[&str], stdin: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentvfs"))
            .arg("--addr")
            .arg(&server.url)
            .args(args)
            .env_remove("AGENTVFS_TOKEN")
            .env_remove("AGENTVFS_SESSION")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run(
        &["apply-patch", "--root", "/cli"],
        "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\n",
    );
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(
        said.starts_with("Success. Updated the following files:\nA cli/a.txt (version "),
        "{said}"
    );
    let out = run(&["cat", "/cli/a.txt"], "");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "hello\n");
    let out = run(
        &["apply-patch", "--root", "/cli"],
        "*** Begin Patch\n*** Delete File: missing.txt\n*** End Patch\n",
    );
    assert!(!out.status.success());
    let said = String::from_utf8(out.stderr).unwrap();
    assert!(
        said.contains("operation 0 (delete of /cli/missing.txt) failed")
            && said.contains("[NOT_FOUND]"),
        "{said}"
    );
}

/// Issue 51 F2: ApplyPatch on files of 48 MiB of empty lines, eight at
/// once, in a server limited to 2 GiB of address space: each patch is
/// applied or refused for memory, and the server stays up. Matching split
/// the file into two vectors of its lines and their endings (32 bytes a
/// line, uncharged): one such patch took 1.5 GiB.
#[tokio::test]
async fn patches_of_files_of_empty_lines_keep_the_server_up() {
    use crate::claude_tools::{empty_lines, huge_text_server, memory_mib, served_or_refused};
    let server = huge_text_server();
    let content = empty_lines();
    for i in 0..8 {
        std::fs::write(server.workdir().join(format!("empty{i}.txt")), &content).unwrap();
    }
    drop(content);
    crate::util::write(&mut server.fs().await, "/small.txt", "still here\n").await;
    let (start, _) = memory_mib(&server);
    server.reset_peak_memory();
    let patches = (0..8)
        .map(|i| {
            let patch = format!(
                "*** Begin Patch\n*** Update File: empty{i}.txt\n@@\n \n-\n+x\n \n*** End Patch\n"
            );
            ("ApplyPatch", json!({"patch": patch, "root": "/workspace"}))
        })
        .collect();
    let served = served_or_refused(&server, patches, "memory_bytes").await;
    let (_, peak) = memory_mib(&server);
    eprintln!(
        "ApplyPatch of 48 MiB of empty lines: {served} of 8 served; peak {peak} MiB, {} MiB \
         over {start} MiB",
        peak.saturating_sub(start)
    );
    assert!(served > 0, "no patch was applied");
    // Each file is patched whole, or untouched when its patch was refused.
    let mut patched = 0;
    for i in 0..8 {
        let data = std::fs::read(server.workdir().join(format!("empty{i}.txt"))).unwrap();
        if data.starts_with(b"\nx\n\n") && data.len() == (48 << 20) + 1 {
            patched += 1;
        } else {
            assert!(data.len() == 48 << 20 && data.iter().all(|&b| b == b'\n'));
        }
    }
    assert_eq!(patched, served);
    let read = crate::util::read_text(&mut server.fs().await, "/small.txt").await;
    assert_eq!(read.content, "still here\n");
}

/// CPU time the process `pid` has used, in milliseconds (`/proc/PID/stat`).
fn cpu_ms(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 14th and 15th of the line, in clock ticks (100 a second).
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks * 10
}

/// Issue 51 F8: a patch of 800 KiB of context lines that almost match a
/// 32 MiB file at every offset (long lines, the last one of the hunk
/// differing) is refused RESOURCE_EXHAUSTED naming the bound on the bytes
/// matching may read, instead of comparing line after line for seconds of
/// CPU after its client has given up (an 882 KiB patch took 77–85 s).
#[tokio::test]
async fn patches_that_almost_match_everywhere_are_bounded_in_bytes() {
    let server = Server::start();
    let line = "a".repeat(4000);
    let file = format!("{line}\n").repeat(8000);
    std::fs::write(server.workdir().join("near.txt"), &file).unwrap();
    let mut patch = String::from("*** Begin Patch\n*** Update File: near.txt\n@@\n");
    for _ in 0..200 {
        patch.push_str(&format!(" {line}\n"));
    }
    patch.push_str(&format!("-{line}b\n+x\n*** End Patch\n"));
    let mut tools = ToolsClient::new(server.channel().await);
    let before = cpu_ms(server.pid());
    let envelope = apply_patch(&mut tools, json!({"patch": patch, "root": "/workspace"})).await;
    let spent = cpu_ms(server.pid()) - before;
    eprintln!(
        "a patch of {} KiB almost matching a {} MiB file: {spent} ms of CPU",
        patch.len() >> 10,
        file.len() >> 20
    );
    assert_eq!(envelope["status"], "error", "{envelope}");
    assert_eq!(envelope["error"]["code"], "INVALID_PARAM", "{envelope}");
    let message = envelope["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "would read over {} bytes of the file and the patch",
            agentvfs::text::patch::match_budget(file.len())
        )),
        "{message}"
    );
    assert_eq!(
        std::fs::read(server.workdir().join("near.txt")).unwrap(),
        file.as_bytes()
    );
}
