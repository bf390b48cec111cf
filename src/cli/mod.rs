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
//!
//! This file holds the arguments and the dispatch; each group of verbs has
//! its own file: [`files`], [`search`], [`history`], [`branch`], with the
//! connection in [`connect`] and the shared line formats in [`format`].

mod audit;
mod branch;
pub(crate) mod connect;
mod files;
mod format;
mod history;
mod search;

pub use branch::BranchVerb;
pub use connect::describe_status;
pub use history::RewindSelector;
pub use search::SearchFlags;

/// Where and as whom to connect. Global, so each flag may come before or
/// after the verb (`agentvfs --token T mcp` and `agentvfs mcp --token T`,
/// as `mcp --help` shows it).
#[derive(Clone, Debug, clap::Args)]
pub struct Connection {
    /// Server address: a URL (`http://127.0.0.1:50051`) or `host:port`,
    /// as grpcurl takes it.
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
    /// List a directory (or show one file), like ls.
    Ls {
        /// Directory or file.
        #[arg(default_value = "/")]
        path: String,
        /// One JSON object per entry instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show a file's or directory's metadata.
    Stat {
        /// File or directory.
        path: String,
        /// A JSON object instead of text.
        #[arg(long)]
        json: bool,
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
    /// Search file contents (regex), like rg: exit status 0 when a line
    /// matched, 1 when none did, 2 on an error or a search cut short.
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
        /// One JSON object per matching line instead of text.
        #[arg(long)]
        json: bool,
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
        /// One JSON object per change (with its cursor) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List a file's retained versions, newest first.
    Log {
        /// File.
        path: String,
        /// One JSON object per version instead of text.
        #[arg(long)]
        json: bool,
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
    /// Print the audit log's records the filters match (needs the audit
    /// right), or `audit verify` its chain (docs/audit.md).
    Audit {
        /// `verify`, or nothing to query.
        #[command(subcommand)]
        action: Option<AuditVerb>,
        /// The query's filters.
        #[command(flatten)]
        query: audit::AuditQuery,
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

/// What `agentvfs audit` does besides querying.
#[derive(clap::Subcommand, Debug)]
pub enum AuditVerb {
    /// Check the chain and the signed checkpoints; names the first record
    /// that is wrong (and exits 1). On the server (VerifyAudit), or with
    /// --dir on a store read here.
    Verify {
        /// The audit directory, read here without a server.
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
}

/// An I/O error writing the output, as the text to print.
fn io(e: std::io::Error) -> String {
    e.to_string()
}

/// How a verb that did not fail ended, for its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done: exit status 0.
    Done,
    /// A `grep` that matched no line: exit status 1, as grep and rg.
    NothingMatched,
    /// A search a budget cut short, without `--allow-partial`: the verb's
    /// failure status, since what it printed may be incomplete.
    CutShort,
}

impl Outcome {
    /// The exit status of a verb that ended so, given its failure status
    /// ([`Verb::failure_status`]).
    pub fn exit_status(self, failure_status: u8) -> u8 {
        match self {
            Outcome::Done => 0,
            Outcome::NothingMatched => 1,
            Outcome::CutShort => failure_status,
        }
    }
}

impl Verb {
    /// The exit status of this verb's failure: 2 for `grep` (whose 1 means
    /// "nothing matched", as grep's and rg's), 1 for every other verb.
    pub fn failure_status(&self) -> u8 {
        match self {
            Verb::Grep { .. } => 2,
            _ => 1,
        }
    }
}

/// Runs one verb; the error is what to print before exiting with the
/// verb's [`Verb::failure_status`].
pub async fn run(conn: Connection, verb: Verb) -> Result<Outcome, String> {
    if let Verb::Audit {
        action: Some(AuditVerb::Verify { dir: Some(dir) }),
        ..
    } = &verb
    {
        let mut out = std::io::stdout().lock();
        return audit::verify_dir(dir, &mut out).map(|()| Outcome::Done);
    }
    let (channel, headers) = connect::connect(&conn).await?;
    let mut fs = connect::filesystem(channel.clone(), headers.clone());
    // Buffered, and flushed after each streamed message: Rust's stdout
    // alone writes every line with its own system call, which made
    // `agentvfs glob` of 10,000 paths 1.75× fd's time, process start
    // included (docs/performance.md § The CLI).
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let out = &mut out;
    match verb {
        Verb::Ls { path, json } => files::ls(&mut fs, path, json, out).await?,
        Verb::Stat { path, json } => files::stat(&mut fs, path, json, out).await?,
        Verb::Cat { path, numbered, at } => files::cat(&mut fs, path, numbered, at, out).await?,
        Verb::Get { path, at } => files::get(&mut fs, path, at, out).await?,
        Verb::Put { path, create_only } => files::put(&mut fs, path, create_only, out).await?,
        Verb::Rm { path, recursive } => files::rm(&mut fs, path, recursive, out).await?,
        Verb::Mv {
            source,
            destination,
            if_version,
            create_only,
        } => {
            let req = crate::pb::MoveRequest {
                source,
                destination,
                if_version,
                create_only,
            };
            files::mv(&mut fs, req, out).await?
        }
        Verb::Cp {
            source,
            destination,
            if_version,
            create_only,
        } => {
            let req = crate::pb::CopyRequest {
                source,
                destination,
                if_version,
                create_only,
            };
            files::cp(&mut fs, req, out).await?
        }
        Verb::ApplyPatch { root } => files::apply_patch(channel, headers, root, out).await?,
        Verb::Audit {
            action: Some(AuditVerb::Verify { .. }),
            ..
        } => audit::verify(channel, headers, out).await?,
        Verb::Audit {
            action: None,
            query,
        } => audit::query(channel, headers, query, out).await?,
        Verb::Grep {
            pattern,
            path,
            ignore_case,
            fixed_strings,
            glob,
            json,
            limits,
        } => {
            if !fixed_strings {
                search::check_regex(&pattern, ignore_case)?;
            }
            let allow_partial = limits.allow_partial;
            let req = crate::pb::GrepRequest {
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
            return search::grep(&mut fs, req, json, allow_partial, out).await;
        }
        Verb::Glob {
            pattern,
            path,
            limits,
        } => {
            let allow_partial = limits.allow_partial;
            let req = crate::pb::GlobRequest {
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
            return search::glob(&mut fs, req, allow_partial, out).await;
        }
        Verb::Watch {
            path,
            cursor,
            from_start,
            once,
            cursors,
            json,
        } => {
            let req = crate::pb::WatchRequest {
                path,
                from_now: cursor.is_none() && !from_start,
                cursor: cursor.unwrap_or_default(),
                stop_at_head: once,
            };
            history::watch(&mut fs, req, cursors, json, out).await?
        }
        Verb::Log { path, json } => history::log(&mut fs, path, json, out).await?,
        Verb::Diff { path, from, to } => history::diff(&mut fs, path, from, to, out).await?,
        Verb::Restore {
            path,
            version,
            if_version,
        } => {
            let req = crate::pb::RestoreRequest {
                path,
                version,
                if_version,
            };
            history::restore(&mut fs, req, out).await?
        }
        Verb::Rewind {
            path,
            selector,
            dry_run,
            force,
        } => {
            let req = crate::pb::RewindRequest {
                path,
                selector: selector.into_pb(),
                dry_run,
                force,
            };
            history::rewind(&mut fs, req, out).await?
        }
        Verb::Branch { action } => branch::run(&mut fs, action, out).await?,
    }
    std::io::Write::flush(out).map_err(io)?;
    Ok(Outcome::Done)
}
