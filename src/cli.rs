//! Client verbs of the `agentvfs` command, for people at a terminal:
//! `agentvfs ls /dir`, `cat`, `get`, `put`, `rm`, `mv`, `cp`, `grep`, `glob`, and
//! the history verbs `watch`, `log`, `diff`, `restore` and `rewind`, and
//! `apply-patch` (an OpenAI apply_patch patch on stdin, through the
//! ApplyPatch tool).
//!
//! Each verb is one gRPC call through the generated client; output is plain
//! text (grep prints `path:line:text` like ripgrep, glob one path per line)
//! and the search summary goes to stderr. Errors print the status message and
//! its envelope code and exit non-zero.

use crate::pb;
use crate::pb::filesystem_client::FilesystemClient;
use crate::pb::tools_client::ToolsClient;
use std::io::{Read, Write};
use std::time::{SystemTime, UNIX_EPOCH};
use tonic::metadata::MetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Request, Status};
use tonic_types::StatusExt;

/// Bytes per WriteBytes message when uploading.
const UPLOAD_CHUNK_BYTES: usize = 1 << 20;

/// Where and as whom to connect. Global, so each flag may come before or
/// after the verb (`agentvfs --token T mcp` and `agentvfs mcp --token T`,
/// as `mcp --help` shows it).
#[derive(Clone, Debug, clap::Args)]
pub struct Connection {
    /// Server address.
    #[arg(
        long,
        global = true,
        env = "AGENTVFS_ADDR",
        default_value = "http://127.0.0.1:50051"
    )]
    pub addr: String,
    /// Bearer token.
    #[arg(long, global = true, env = "AGENTVFS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// State session.
    #[arg(long, global = true, env = "AGENTVFS_SESSION")]
    pub session: Option<String>,
    /// Label kept with every change this command makes (a tool-call or
    /// turn id; 1-128 of letters, digits and -_.@+:~/#=).
    #[arg(long, global = true, env = "AGENTVFS_LABEL")]
    pub label: Option<String>,
    /// Branch to work in (docs/branches.md): every read and write of this
    /// command sees and changes the branch, not its base.
    #[arg(long, global = true, env = "AGENTVFS_BRANCH")]
    pub branch: Option<String>,
}

/// A client verb.
#[derive(Debug, clap::Subcommand)]
pub enum Verb {
    /// List a directory.
    Ls {
        /// Directory.
        path: String,
    },
    /// Show a file's metadata.
    Stat {
        /// File or directory.
        path: String,
    },
    /// Print a text file, numbered with -n.
    Cat {
        /// File.
        path: String,
        /// Number lines cat -n style.
        #[arg(short = 'n', long)]
        numbered: bool,
        /// Print this retained version instead (see `log`).
        #[arg(long, value_name = "VERSION")]
        at: Option<u64>,
    },
    /// Write a file's bytes to stdout.
    Get {
        /// File.
        path: String,
        /// Download this retained version instead (see `log`).
        #[arg(long, value_name = "VERSION")]
        at: Option<u64>,
    },
    /// Upload stdin to a file.
    Put {
        /// File.
        path: String,
        /// Fail if the file exists.
        #[arg(long)]
        create_only: bool,
    },
    /// Delete a file (or, with -r, a directory).
    Rm {
        /// Path.
        path: String,
        /// Delete a directory tree.
        #[arg(short, long)]
        recursive: bool,
    },
    /// Move (rename) a file or a directory tree within one mount.
    Mv {
        /// File or directory to move.
        source: String,
        /// Its new path; missing parent directories are created.
        destination: String,
        /// Move only if the source file is at this version.
        #[arg(long, value_name = "N")]
        if_version: Option<u64>,
        /// Fail if the destination exists (else a file replaces a file).
        #[arg(long)]
        create_only: bool,
    },
    /// Copy a file within one mount (a reflink where the disk can).
    Cp {
        /// File to copy.
        source: String,
        /// Path of the copy; missing parent directories are created.
        destination: String,
        /// Copy only if the destination is at this version (0: must not exist).
        #[arg(long, value_name = "N")]
        if_version: Option<u64>,
        /// Fail if the destination exists (else the copy replaces it).
        #[arg(long)]
        create_only: bool,
    },
    /// Search file contents (regex).
    Grep {
        /// Regex.
        pattern: String,
        /// Where to search.
        #[arg(default_value = "/")]
        path: String,
        /// Ignore case.
        #[arg(short = 'i', long)]
        ignore_case: bool,
        /// Fixed string.
        #[arg(short = 'F', long)]
        fixed_strings: bool,
        /// File filter glob.
        #[arg(short, long, default_value = "")]
        glob: String,
        /// Hidden/ignored switches and budgets.
        #[command(flatten)]
        limits: SearchFlags,
    },
    /// Follow the changes under a path as they commit, one line each.
    Watch {
        /// Directory (or file) to watch.
        #[arg(default_value = "/")]
        path: String,
        /// Resume exactly after this cursor (printed with --cursors, or by a
        /// watch that lost its connection).
        #[arg(long, conflicts_with = "from_start")]
        cursor: Option<String>,
        /// Start at the oldest change still retained instead of now.
        #[arg(long)]
        from_start: bool,
        /// Stop once caught up instead of following.
        #[arg(long)]
        once: bool,
        /// End each line with the cursor that resumes after it.
        #[arg(long)]
        cursors: bool,
    },
    /// List a file's retained versions, newest first.
    Log {
        /// File.
        path: String,
    },
    /// Show a unified diff between two versions of a file.
    Diff {
        /// File.
        path: String,
        /// The older version.
        from: u64,
        /// The newer version (default: the newest, usually the current file).
        to: Option<u64>,
    },
    /// Write a retained version back as the file's newest version.
    Restore {
        /// File.
        path: String,
        /// The version to write back (see `log`).
        version: u64,
        /// Restore only if the file is at this version (0: it must not exist).
        #[arg(long, value_name = "N")]
        if_version: Option<u64>,
    },
    /// Undo, as one changeset, the changes under a path made by one
    /// session, handle, label or changeset, or every change since a cursor.
    Rewind {
        /// Where the changes lie (all on one mount).
        #[arg(default_value = "/")]
        path: String,
        /// Which changes to undo.
        #[command(flatten)]
        selector: RewindSelector,
        /// Print the unified diff of what would change, and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Undo a file even when someone else changed it since.
        #[arg(long)]
        force: bool,
    },
    /// Fork, list, diff, merge or discard branches (docs/branches.md).
    Branch {
        /// What to do.
        #[command(subcommand)]
        action: BranchVerb,
    },
    /// Apply an OpenAI apply_patch patch read from stdin, all or nothing.
    ApplyPatch {
        /// Directory the patch's relative paths resolve against (default:
        /// the server's project root, `/` unless configured).
        #[arg(long, value_name = "DIR")]
        root: Option<String>,
    },
    /// Find files by glob.
    Glob {
        /// Glob relative to path.
        pattern: String,
        /// Where to search.
        #[arg(default_value = "/")]
        path: String,
        /// Hidden/ignored switches and budgets.
        #[command(flatten)]
        limits: SearchFlags,
    },
}

/// Which changes `rewind` undoes: exactly one of these.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct RewindSelector {
    /// Those made in this State session.
    #[arg(long, value_name = "SESSION")]
    by_session: Option<String>,
    /// Those made through this handle.
    #[arg(long, value_name = "HANDLE")]
    by_handle: Option<String>,
    /// Those made under this label.
    #[arg(long, value_name = "LABEL")]
    by_label: Option<String>,
    /// Those of this changeset (as `watch` and `log` show it).
    #[arg(long, value_name = "ID")]
    changeset: Option<String>,
    /// Every change after this cursor (`watch --cursors` prints them).
    #[arg(long, value_name = "CURSOR")]
    since: Option<String>,
}

impl RewindSelector {
    /// The request's selector.
    fn into_pb(self) -> Option<pb::rewind_request::Selector> {
        use pb::rewind_request::Selector;
        (self.by_session.map(Selector::Session))
            .or(self.by_handle.map(Selector::Handle))
            .or(self.by_label.map(Selector::Label))
            .or(self.changeset.map(Selector::Changeset))
            .or(self.since.map(Selector::SinceCursor))
    }
}

/// The walk switches and budgets shared by `grep` and `glob`.
#[derive(Debug, clap::Args)]
pub struct SearchFlags {
    /// Include hidden files.
    #[arg(long)]
    hidden: bool,
    /// Include ignored files.
    #[arg(long)]
    no_ignore: bool,
    /// Visited-entries budget (0: default 20000).
    #[arg(long, default_value_t = 0)]
    max_visited: u64,
    /// Time budget in ms (0: default 2000).
    #[arg(long, default_value_t = 0)]
    max_duration_ms: u64,
}

/// A branch verb (docs/branches.md).
#[derive(Debug, clap::Subcommand)]
pub enum BranchVerb {
    /// Fork a directory into a new branch (copy-on-write).
    Create {
        /// The branch's name.
        name: String,
        /// The directory to fork.
        path: String,
    },
    /// List your branches with their root, age and size.
    List,
    /// Print the unified diff of a branch against its base now.
    Diff {
        /// The branch.
        name: String,
    },
    /// Merge a branch into its base as one changeset; conflicts are
    /// printed and nothing is applied (exit status 1).
    Merge {
        /// The branch.
        name: String,
        /// Delete the branch once merged.
        #[arg(long)]
        discard: bool,
    },
    /// Delete a branch and its changes.
    Discard {
        /// The branch.
        name: String,
    },
}

/// Adds the token, session, label and branch metadata to every call.
#[derive(Clone)]
struct Headers {
    token: Option<MetadataValue<tonic::metadata::Ascii>>,
    session: Option<MetadataValue<tonic::metadata::Ascii>>,
    label: Option<MetadataValue<tonic::metadata::Ascii>>,
    branch: Option<MetadataValue<tonic::metadata::Ascii>>,
}

impl Interceptor for Headers {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(token) = &self.token {
            req.metadata_mut().insert("authorization", token.clone());
        }
        if let Some(session) = &self.session {
            req.metadata_mut()
                .insert("x-agentvfs-session", session.clone());
        }
        if let Some(label) = &self.label {
            req.metadata_mut().insert("x-agentvfs-label", label.clone());
        }
        if let Some(branch) = &self.branch {
            req.metadata_mut()
                .insert("x-agentvfs-branch", branch.clone());
        }
        Ok(req)
    }
}

/// Runs a branch verb.
async fn branch(
    fs: &mut FilesystemClient<InterceptedService<Channel, Headers>>,
    action: BranchVerb,
    out: &mut impl Write,
) -> Result<(), String> {
    let fail = |s: Status| describe_status(&s);
    let io = |e: std::io::Error| e.to_string();
    match action {
        BranchVerb::Create { name, path } => {
            let req = pb::CreateBranchRequest { name, path };
            let b = fs.create_branch(req).await.map_err(fail)?.into_inner();
            if let Some(b) = b.branch {
                eprintln!("forked {} into branch {}", b.root, b.name);
            }
        }
        BranchVerb::List => {
            let req = pb::ListBranchesRequest {};
            for b in fs
                .list_branches(req)
                .await
                .map_err(fail)?
                .into_inner()
                .branches
            {
                let created = b.created_time.map(|t| t.seconds).unwrap_or_default();
                let age = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64 - created);
                writeln!(
                    out,
                    "{}\t{}\t{} files\t{} bytes\t{age}s old\tby {}",
                    b.name, b.root, b.files_changed, b.bytes, b.creator
                )
                .map_err(io)?;
            }
        }
        BranchVerb::Diff { name } => {
            let mut after = String::new();
            loop {
                let req = pb::DiffBranchRequest {
                    name: name.clone(),
                    after,
                    limit: 0,
                };
                let page = fs.diff_branch(req).await.map_err(fail)?.into_inner();
                for f in page.files {
                    match f.kind.as_str() {
                        "moved" => writeln!(out, "moved {} -> {}", f.from, f.path),
                        _ => writeln!(out, "{}", f.diff),
                    }
                    .map_err(io)?;
                }
                if page.next_after.is_empty() {
                    break;
                }
                after = page.next_after;
            }
        }
        BranchVerb::Merge { name, discard } => {
            let req = pb::MergeBranchRequest {
                name,
                resolutions: Vec::new(),
                discard,
            };
            let r = fs.merge_branch(req).await.map_err(fail)?.into_inner();
            if !r.conflicts.is_empty() {
                let paths: Vec<&str> = r.conflicts.iter().map(|c| c.path.as_str()).collect();
                return Err(format!(
                    "{} files conflict, nothing merged: {}",
                    paths.len(),
                    paths.join(", ")
                ));
            }
            eprintln!(
                "{} files merged as changeset {}",
                r.files.len(),
                r.changeset
            );
        }
        BranchVerb::Discard { name } => {
            let req = pb::DiscardBranchRequest { name };
            fs.discard_branch(req).await.map_err(fail)?;
        }
    }
    Ok(())
}

/// Describes a failed call: message and envelope code.
pub fn describe_status(status: &Status) -> String {
    match status.get_details_error_info() {
        Some(info) => format!("{} [{}]", status.message(), info.reason),
        None => format!("{} [{:?}]", status.message(), status.code()),
    }
}

fn header(value: String) -> Result<MetadataValue<tonic::metadata::Ascii>, String> {
    value
        .parse()
        .map_err(|_| "token, session, label and branch must be printable ASCII".to_owned())
}

/// Runs one verb; the error is what to print before exiting non-zero.
pub async fn run(conn: Connection, verb: Verb) -> Result<(), String> {
    let channel = Channel::from_shared(conn.addr.clone())
        .map_err(|e| format!("bad address {}: {e}", conn.addr))?
        .connect()
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", conn.addr))?;
    let headers = Headers {
        token: conn
            .token
            .map(|t| header(format!("Bearer {t}")))
            .transpose()?,
        session: conn.session.map(header).transpose()?,
        label: conn.label.map(header).transpose()?,
        branch: conn.branch.clone().map(header).transpose()?,
    };
    let mut fs = FilesystemClient::with_interceptor(channel.clone(), headers.clone())
        .max_decoding_message_size(usize::MAX);
    // Buffered, and flushed after each streamed message: Rust's stdout
    // alone writes every line with its own system call, which made
    // `agentvfs glob` of 10,000 paths 1.75× fd's time, process start
    // included (docs/performance.md § Search).
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let fail = |s: Status| describe_status(&s);
    let io = |e: std::io::Error| e.to_string();
    match verb {
        Verb::Ls { path } => {
            for e in fs
                .list_info(pb::ListInfoRequest { path })
                .await
                .map_err(fail)?
                .into_inner()
                .entries
            {
                let suffix = if e.is_directory { "/" } else { "" };
                writeln!(out, "{:>10}  {}{suffix}", e.size, e.path).map_err(io)?;
            }
        }
        Verb::Stat { path } => {
            let info = fs
                .stat(pb::StatRequest { path })
                .await
                .map_err(fail)?
                .into_inner()
                .info
                .unwrap_or_default();
            writeln!(out, "{info:#?}").map_err(io)?;
        }
        Verb::Cat { path, numbered, at } => {
            let r = fs
                .read(pb::ReadRequest {
                    path,
                    numbered,
                    version: at,
                    ..Default::default()
                })
                .await
                .map_err(fail)?;
            out.write_all(r.into_inner().content.as_bytes())
                .map_err(io)?;
        }
        Verb::Get { path, at } => {
            let mut stream = fs
                .read_bytes(pb::ReadBytesRequest { path, version: at })
                .await
                .map_err(fail)?
                .into_inner();
            while let Some(chunk) = stream.message().await.map_err(fail)? {
                out.write_all(&chunk.data).map_err(io)?;
            }
        }
        Verb::Put { path, create_only } => {
            use pb::write_bytes_request::Kind;
            let mut data = Vec::new();
            std::io::stdin().read_to_end(&mut data).map_err(io)?;
            let header = pb::WriteBytesHeader {
                path,
                create_only,
                if_version: None,
            };
            let mut msgs = vec![pb::WriteBytesRequest {
                kind: Some(Kind::Header(header)),
            }];
            msgs.extend(
                data.chunks(UPLOAD_CHUNK_BYTES)
                    .map(|c| pb::WriteBytesRequest {
                        kind: Some(Kind::Data(c.to_vec())),
                    }),
            );
            let w = fs
                .write_bytes(tokio_stream::iter(msgs))
                .await
                .map_err(fail)?
                .into_inner();
            writeln!(
                out,
                "{} ({} bytes, version {})",
                w.path, w.bytes_written, w.version
            )
            .map_err(io)?;
        }
        Verb::Rm { path, recursive } => {
            let d = fs
                .delete(pb::DeleteRequest {
                    path,
                    recursive,
                    if_version: None,
                })
                .await
                .map_err(fail)?
                .into_inner();
            writeln!(out, "deleted {} ({} files)", d.path, d.files_deleted).map_err(io)?;
        }
        Verb::Mv {
            source,
            destination,
            if_version,
            create_only,
        } => {
            let m = fs
                .r#move(pb::MoveRequest {
                    source,
                    destination,
                    if_version,
                    create_only,
                })
                .await
                .map_err(fail)?
                .into_inner();
            // A directory has no version (0); a file shows its new one.
            let version = match m.version {
                0 => String::new(),
                v => format!(", version {v}"),
            };
            writeln!(
                out,
                "moved {} to {} ({} files{version})",
                m.source, m.destination, m.files_moved
            )
            .map_err(io)?;
        }
        Verb::Cp {
            source,
            destination,
            if_version,
            create_only,
        } => {
            let c = fs
                .copy(pb::CopyRequest {
                    source,
                    destination,
                    if_version,
                    create_only,
                })
                .await
                .map_err(fail)?
                .into_inner();
            writeln!(
                out,
                "copied {} to {} ({} bytes, version {})",
                c.source, c.destination, c.bytes_written, c.version
            )
            .map_err(io)?;
        }
        Verb::Grep {
            pattern,
            path,
            ignore_case,
            fixed_strings,
            glob,
            limits,
        } => {
            let req = pb::GrepRequest {
                pattern,
                path,
                glob,
                literal: fixed_strings,
                case_insensitive: ignore_case,
                include_hidden: limits.hidden,
                include_ignored: limits.no_ignore,
                max_visited: limits.max_visited,
                max_duration_ms: limits.max_duration_ms,
                ..Default::default()
            };
            let mut stream = fs.grep(req).await.map_err(fail)?.into_inner();
            while let Some(msg) = stream.message().await.map_err(fail)? {
                match msg.result {
                    Some(pb::grep_response::Result::Batch(b)) => {
                        for m in b.matches {
                            let sep = if m.is_context { '-' } else { ':' };
                            writeln!(out, "{}{sep}{}{sep}{}", m.path, m.line_number, m.line)
                                .map_err(io)?;
                        }
                        out.flush().map_err(io)?;
                    }
                    Some(pb::grep_response::Result::Summary(s)) => print_summary(&s),
                    None => {}
                }
            }
        }
        Verb::Watch {
            path,
            cursor,
            from_start,
            once,
            cursors,
        } => {
            let req = pb::WatchRequest {
                path,
                from_now: cursor.is_none() && !from_start,
                cursor: cursor.unwrap_or_default(),
                stop_at_head: once,
            };
            let mut stream = fs.watch(req).await.map_err(fail)?.into_inner();
            let mut last = String::new();
            loop {
                let msg = match stream.message().await {
                    Ok(Some(msg)) => msg,
                    Ok(None) => break,
                    Err(status) if last.is_empty() => return Err(fail(status)),
                    Err(status) => {
                        return Err(format!(
                            "{}; resume with --cursor {last}",
                            describe_status(&status)
                        ));
                    }
                };
                for e in &msg.events {
                    write!(out, "{}", change_line(e)).map_err(io)?;
                    if cursors {
                        write!(out, "  {}", e.cursor).map_err(io)?;
                    }
                    writeln!(out).map_err(io)?;
                }
                out.flush().map_err(io)?;
                last = msg.cursor;
            }
        }
        Verb::Rewind {
            path,
            selector,
            dry_run,
            force,
        } => {
            let r = fs
                .rewind(pb::RewindRequest {
                    path,
                    selector: selector.into_pb(),
                    dry_run,
                    force,
                })
                .await
                .map_err(fail)?
                .into_inner();
            if dry_run && !r.diff.is_empty() {
                writeln!(out, "{}", r.diff).map_err(io)?;
            }
            for f in &r.files {
                eprintln!("{}", rewound_line(f, dry_run));
            }
            match (r.files.len(), dry_run) {
                (0, _) => eprintln!("nothing to rewind"),
                (n, true) => eprintln!("{n} files would change (dry run: nothing changed)"),
                (n, false) => eprintln!("{n} files rewound as changeset {}", r.changeset),
            }
        }
        Verb::Branch { action } => branch(&mut fs, action, &mut out).await?,
        Verb::ApplyPatch { root } => {
            let mut patch = String::new();
            std::io::stdin().read_to_string(&mut patch).map_err(io)?;
            let envelope = ToolsClient::with_interceptor(channel, headers)
                .apply_patch_tool(pb::ApplyPatchToolRequest {
                    patch,
                    root,
                    tool_call_id: String::new(),
                    // --label goes as the header, like every verb's.
                    label: None,
                })
                .await
                .map_err(fail)?
                .into_inner()
                .envelope
                .unwrap_or_default();
            if let Some(e) = envelope.error {
                return Err(format!("{} [{}]", e.message, e.code));
            }
            writeln!(out, "{}", envelope.text).map_err(io)?;
        }
        Verb::Log { path } => {
            let versions = fs
                .list_versions(pb::ListVersionsRequest { path })
                .await
                .map_err(fail)?
                .into_inner()
                .versions;
            for v in &versions {
                writeln!(out, "{}", version_line(v)).map_err(io)?;
            }
        }
        Verb::Diff { path, from, to } => {
            let d = fs
                .diff(pb::DiffRequest {
                    path,
                    from_version: from,
                    to_version: to,
                })
                .await
                .map_err(fail)?
                .into_inner();
            if !d.diff.is_empty() {
                writeln!(out, "{}", d.diff).map_err(io)?;
            }
            let cut = if d.truncated { ", cut short" } else { "" };
            eprintln!(
                "version {} → {}: +{} -{} lines{cut}",
                d.from_version, d.to_version, d.added, d.removed
            );
        }
        Verb::Restore {
            path,
            version,
            if_version,
        } => {
            let r = fs
                .restore(pb::RestoreRequest {
                    path,
                    version,
                    if_version,
                })
                .await
                .map_err(fail)?
                .into_inner();
            writeln!(
                out,
                "restored {} to version {} as version {} ({} bytes)",
                r.path, r.restored_version, r.version, r.bytes_written
            )
            .map_err(io)?;
        }
        Verb::Glob {
            pattern,
            path,
            limits,
        } => {
            let req = pb::GlobRequest {
                pattern,
                path,
                include_hidden: limits.hidden,
                include_ignored: limits.no_ignore,
                max_visited: limits.max_visited,
                max_duration_ms: limits.max_duration_ms,
                // Only paths are printed.
                paths_only: true,
                ..Default::default()
            };
            let mut stream = fs.glob(req).await.map_err(fail)?.into_inner();
            while let Some(msg) = stream.message().await.map_err(fail)? {
                match msg.result {
                    Some(pb::glob_response::Result::Batch(b)) => {
                        for e in b.entries {
                            writeln!(out, "{}", e.path).map_err(io)?;
                        }
                        out.flush().map_err(io)?;
                    }
                    Some(pb::glob_response::Result::Summary(s)) => print_summary(&s),
                    None => {}
                }
            }
        }
    }
    out.flush().map_err(io)
}

/// `2026-11-24T16:05:18Z` for a protobuf time (`-` when absent).
fn time_text(t: Option<&prost_types::Timestamp>) -> String {
    t.map_or_else(|| "-".to_owned(), ToString::to_string)
}

/// Who made a change or version: `by agent via h-1`, `by someone outside
/// agentvfs` for a change on disk; then its label and changeset when it
/// has them (`label turn-3  changeset cs-…`).
fn made_by(principal: &str, handle: &str, label: &str, changeset: &str) -> String {
    let mut who = match (principal, handle) {
        ("", _) => "by someone outside agentvfs".to_owned(),
        (p, "") => format!("by {p}"),
        (p, h) => format!("by {p} via {h}"),
    };
    if !label.is_empty() {
        who.push_str(&format!("  label {label}"));
    }
    if !changeset.is_empty() {
        who.push_str(&format!("  changeset {changeset}"));
    }
    who
}

/// One change as `watch` prints it: time, kind, path, version, size, how
/// and by whom (and where a move went or came from).
fn change_line(e: &pb::ChangeEvent) -> String {
    let kind = match e.kind() {
        pb::ChangeKind::Created => "created ",
        pb::ChangeKind::Modified => "modified",
        pb::ChangeKind::Deleted => "deleted ",
        pb::ChangeKind::Unspecified => "changed ",
    };
    let moved = match (e.kind(), e.moved_path.as_str()) {
        (_, "") => String::new(),
        (pb::ChangeKind::Deleted, to) => format!(" → {to}"),
        (_, from) => format!(" ← {from}"),
    };
    format!(
        "{}  {kind}  {}{moved}  v{}  {} bytes  {} {}",
        time_text(e.time.as_ref()),
        e.path,
        e.version,
        e.size,
        e.operation,
        made_by(&e.principal, &e.handle, &e.label, &e.changeset)
    )
}

/// One file as `rewind` reports it: `/a.md  v7 → v3 (now v9)`, or
/// `deleted`/`restored` when it goes or comes back.
fn rewound_line(f: &pb::RewoundFile, dry_run: bool) -> String {
    let to = match (f.from_version, f.to_version) {
        (_, 0) => "deleted".to_owned(),
        (0, to) => format!("restored from v{to}"),
        (from, to) => format!("v{from} → v{to}"),
    };
    match (dry_run, f.version) {
        (true, _) | (false, 0) => format!("{}  {to}", f.path),
        (false, now) => format!("{}  {to} (now v{now})", f.path),
    }
}

/// One version as `log` prints it.
fn version_line(v: &pb::FileVersion) -> String {
    let state = match (v.deleted, v.current) {
        (true, _) => "  (deleted)".to_owned(),
        (_, true) => format!("  {} bytes  (current)", v.size),
        _ => format!("  {} bytes", v.size),
    };
    format!(
        "v{}  {}  {} {}{state}",
        v.version,
        time_text(v.time.as_ref()),
        v.operation,
        made_by(&v.principal, &v.handle, &v.label, &v.changeset)
    )
}

fn print_summary(s: &pb::SearchSummary) {
    let reason = match s.aborted_reason() {
        pb::AbortedReason::Unspecified => String::new(),
        other => format!(", stopped: {}", other.as_str_name()),
    };
    eprintln!(
        "{} matched, {} visited, {} files searched, skipped {} ignored / {} hidden / {} binary / {} too large, {} ms{reason}",
        s.matched,
        s.visited,
        s.files_searched,
        s.skipped_ignored,
        s.skipped_hidden,
        s.skipped_binary,
        s.skipped_too_large,
        s.elapsed_ms
    );
    for p in &s.problems {
        eprintln!("problem: {}: {} [{}]", p.path, p.message, p.code);
    }
}
