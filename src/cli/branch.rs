//! The branch verbs (docs/branches.md): `branch create`, `list`, `diff`,
//! `merge` and `discard`.

use super::connect::{Fs, describe_status as fail};
use super::format::{branch_json, count};
use super::io;
use crate::pb;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

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
    List {
        /// One JSON object per branch instead of text.
        #[arg(long)]
        json: bool,
    },
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

/// Runs a branch verb.
pub(super) async fn run(
    fs: &mut Fs,
    action: BranchVerb,
    out: &mut impl Write,
) -> Result<(), String> {
    match action {
        BranchVerb::Create { name, path } => {
            let req = pb::CreateBranchRequest { name, path };
            let b = fs
                .create_branch(req)
                .await
                .map_err(|s| fail(&s))?
                .into_inner();
            if let Some(b) = b.branch {
                eprintln!("forked {} into branch {}", b.root, b.name);
            }
        }
        BranchVerb::List { json } => {
            let req = pb::ListBranchesRequest {};
            for b in fs
                .list_branches(req)
                .await
                .map_err(|s| fail(&s))?
                .into_inner()
                .branches
            {
                if json {
                    writeln!(out, "{}", branch_json(&b)).map_err(io)?;
                    continue;
                }
                let created = b.created_time.map(|t| t.seconds).unwrap_or_default();
                let age = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64 - created);
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{age}s old\tby {}",
                    b.name,
                    b.root,
                    count(b.files_changed, "file", "files"),
                    count(b.bytes, "byte", "bytes"),
                    b.creator
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
                let page = fs
                    .diff_branch(req)
                    .await
                    .map_err(|s| fail(&s))?
                    .into_inner();
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
            let r = fs
                .merge_branch(req)
                .await
                .map_err(|s| fail(&s))?
                .into_inner();
            if !r.conflicts.is_empty() {
                let paths: Vec<&str> = r.conflicts.iter().map(|c| c.path.as_str()).collect();
                return Err(format!(
                    "{} in conflict, nothing merged: {}",
                    count(paths.len() as u64, "file", "files"),
                    paths.join(", ")
                ));
            }
            eprintln!(
                "{} merged as changeset {}",
                count(r.files.len() as u64, "file", "files"),
                r.changeset
            );
        }
        BranchVerb::Discard { name } => {
            let req = pb::DiscardBranchRequest { name };
            fs.discard_branch(req).await.map_err(|s| fail(&s))?;
        }
    }
    Ok(())
}
