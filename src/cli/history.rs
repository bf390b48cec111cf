//! The history verbs: `watch` (the change feed), `log`, `diff`, `restore`
//! and `rewind` (undo a session's, label's or changeset's changes).

use super::connect::{Fs, describe_status as fail};
use super::format::{change_line, rewound_line, version_line};
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

/// `watch`: one line per change as it commits; a broken stream names the
/// cursor to resume from.
pub(super) async fn watch(
    fs: &mut Fs,
    req: pb::WatchRequest,
    cursors: bool,
    out: &mut impl Write,
) -> Result<(), String> {
    let mut stream = fs.watch(req).await.map_err(|s| fail(&s))?.into_inner();
    let mut last = String::new();
    loop {
        let msg = match stream.message().await {
            Ok(Some(msg)) => msg,
            Ok(None) => break,
            Err(status) if last.is_empty() => return Err(fail(&status)),
            Err(status) => {
                return Err(format!("{}; resume with --cursor {last}", fail(&status)));
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
    Ok(())
}

/// `log`: the file's retained versions, newest first.
pub(super) async fn log(fs: &mut Fs, path: String, out: &mut impl Write) -> Result<(), String> {
    let versions = fs
        .list_versions(pb::ListVersionsRequest { path })
        .await
        .map_err(|s| fail(&s))?
        .into_inner()
        .versions;
    for v in &versions {
        writeln!(out, "{}", version_line(v)).map_err(io)?;
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
    let r = fs.restore(req).await.map_err(|s| fail(&s))?.into_inner();
    writeln!(
        out,
        "restored {} to version {} as version {} ({} bytes)",
        r.path, r.restored_version, r.version, r.bytes_written
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
    let r = fs.rewind(req).await.map_err(|s| fail(&s))?.into_inner();
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
    Ok(())
}
