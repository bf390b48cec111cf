//! The history verbs: `watch` (the change feed), `log`, `diff`, `restore`
//! and `rewind` (undo a session's, label's or changeset's changes).

use super::connect::{Fs, describe_status as fail, flag_names};
use super::format::{change_json, change_line, count, rewound_line, version_json, version_line};
use super::io;
use crate::pb;
use std::io::Write;

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
    pub(super) fn into_pb(self) -> Option<pb::rewind_request::Selector> {
        use pb::rewind_request::Selector;
        (self.by_session.map(Selector::Session))
            .or(self.by_handle.map(Selector::Handle))
            .or(self.by_label.map(Selector::Label))
            .or(self.changeset.map(Selector::Changeset))
            .or(self.since.map(Selector::SinceCursor))
    }
}

/// `watch`: one line per change as it commits (or one JSON object). A
/// stream that breaks names the cursor to resume from once: the server's
/// when its message carries one (a shutdown), else the last one read.
pub(super) async fn watch(
    fs: &mut Fs,
    req: pb::WatchRequest,
    cursors: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<(), String> {
    let mut stream = fs.watch(req).await.map_err(|s| fail(&s))?.into_inner();
    let mut last = String::new();
    loop {
        let msg = match stream.message().await {
            Ok(Some(msg)) => msg,
            Ok(None) => break,
            Err(status) => return Err(broken_watch(&status, &last)),
        };
        for e in &msg.events {
            if json {
                writeln!(out, "{}", change_json(e)).map_err(io)?;
                continue;
            }
            write!(out, "{}", change_line(e)).map_err(io)?;
            if cursors {
                write!(out, "  {}", e.cursor).map_err(io)?;
            }
            writeln!(out).map_err(io)?;
        }
        out.flush().map_err(io)?;
        last = msg.cursor;
    }
    Ok(())
}

/// Why a watch stopped and how to resume it: the server's cursor (`resume
/// from cursor C`, sent when it shuts down) as the `--cursor` flag, or
/// else the last cursor this watch read, once.
fn broken_watch(status: &tonic::Status, last: &str) -> String {
    let described = fail(status);
    match described.split_once("resume from cursor ") {
        Some((why, cursor)) => format!("{why}resume with --cursor {cursor}"),
        None if last.is_empty() => described,
        None => format!("{described}; resume with --cursor {last}"),
    }
}

/// `log`: the file's retained versions, newest first.
pub(super) async fn log(
    fs: &mut Fs,
    path: String,
    json: bool,
    out: &mut impl Write,
) -> Result<(), String> {
    let versions = fs
        .list_versions(pb::ListVersionsRequest { path })
        .await
        .map_err(|s| fail(&s))?
        .into_inner()
        .versions;
    for v in &versions {
        match json {
            true => writeln!(out, "{}", version_json(v)),
            false => writeln!(out, "{}", version_line(v)),
        }
        .map_err(io)?;
    }
    Ok(())
}

/// `diff`: the unified diff between two versions, its counts on stderr.
pub(super) async fn diff(
    fs: &mut Fs,
    path: String,
    from: u64,
    to: Option<u64>,
    out: &mut impl Write,
) -> Result<(), String> {
    let d = fs
        .diff(pb::DiffRequest {
            path,
            from_version: from,
            to_version: to,
        })
        .await
        .map_err(|s| fail(&s))?
        .into_inner();
    if !d.diff.is_empty() {
        writeln!(out, "{}", d.diff).map_err(io)?;
    }
    let cut = if d.truncated { ", cut short" } else { "" };
    eprintln!(
        "version {} → {}: +{} -{} lines{cut}",
        d.from_version, d.to_version, d.added, d.removed
    );
    Ok(())
}

/// `restore`: a retained version written back as the newest.
pub(super) async fn restore(
    fs: &mut Fs,
    req: pb::RestoreRequest,
    out: &mut impl Write,
) -> Result<(), String> {
    let r = fs
        .restore(req)
        .await
        .map_err(|s| flag_names(fail(&s)))?
        .into_inner();
    writeln!(
        out,
        "restored {} to version {} as version {} ({})",
        r.path,
        r.restored_version,
        r.version,
        count(r.bytes_written, "byte", "bytes")
    )
    .map_err(io)
}

/// `rewind`: the selected changes undone as one changeset (or, dry run,
/// the diff of what would change).
pub(super) async fn rewind(
    fs: &mut Fs,
    req: pb::RewindRequest,
    out: &mut impl Write,
) -> Result<(), String> {
    let dry_run = req.dry_run;
    let r = fs
        .rewind(req)
        .await
        .map_err(|s| flag_names(fail(&s)))?
        .into_inner();
    if dry_run && !r.diff.is_empty() {
        writeln!(out, "{}", r.diff).map_err(io)?;
    }
    for f in &r.files {
        eprintln!("{}", rewound_line(f, dry_run));
    }
    let files = count(r.files.len() as u64, "file", "files");
    match (r.files.len(), dry_run) {
        (0, _) => eprintln!("nothing to rewind"),
        (_, true) => eprintln!("{files} would change (dry run: nothing changed)"),
        (_, false) => eprintln!("{files} rewound as changeset {}", r.changeset),
    }
    Ok(())
}
