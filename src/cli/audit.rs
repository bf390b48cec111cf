//! `agentvfs audit`: query the audit log over `QueryAudit`, and
//! `agentvfs audit verify`, over `VerifyAudit` or, with `--dir`, offline
//! on the store itself (docs/audit.md).

use super::connect::{Headers, describe_status};
use super::io;
use crate::pb;
use crate::pb::audit_log_client::AuditLogClient;
use std::io::Write;
use std::path::Path;
use tonic::transport::Channel;

/// The filters of `agentvfs audit` (each optional; all must hold).
#[derive(clap::Args, Debug, Default)]
pub struct AuditQuery {
    /// Records at or after this RFC 3339 time.
    #[arg(long)]
    pub since: Option<String>,
    /// Records before this RFC 3339 time.
    #[arg(long)]
    pub until: Option<String>,
    /// Records of this principal.
    #[arg(long)]
    pub principal: Option<String>,
    /// Records naming a path at or below this one.
    #[arg(long, value_name = "PREFIX")]
    pub path: Option<String>,
    /// Records of this operation (Filesystem/Read, tool/Read, ...).
    #[arg(long)]
    pub operation: Option<String>,
    /// metadata_read, data_read, data_write or admin.
    #[arg(long)]
    pub class: Option<String>,
    /// ok, denied, not_found, conflict, exhausted, invalid or error.
    #[arg(long)]
    pub result: Option<String>,
    /// Records of requests with this label.
    #[arg(long)]
    pub label: Option<String>,
    /// Records of this tool call.
    #[arg(long)]
    pub tool_call_id: Option<String>,
    /// Records after this sequence number.
    #[arg(long, default_value_t = 0)]
    pub after: u64,
    /// Each record as its JSON line (JSON Lines export).
    #[arg(long)]
    pub json: bool,
}

/// `agentvfs audit verify --dir DIR`: the store read here, no server.
pub fn verify_dir(dir: &Path, out: &mut impl Write) -> Result<(), String> {
    match crate::audit::verify(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        Ok(v) => writeln!(
            out,
            "{}: records {} to {} verified, {} signed checkpoints",
            dir.display(),
            v.first,
            v.last,
            v.checkpoints
        )
        .map_err(io),
        Err(broken) => Err(format!("{}: {broken}", dir.display())),
    }
}

/// `agentvfs audit verify`: the server's VerifyAudit.
pub async fn verify(
    channel: Channel,
    headers: Headers,
    out: &mut impl Write,
) -> Result<(), String> {
    let answer = AuditLogClient::with_interceptor(channel, headers)
        .verify_audit(pb::VerifyAuditRequest {})
        .await
        .map_err(|s| describe_status(&s))?
        .into_inner();
    if !answer.ok {
        return Err(format!(
            "record {} ({}): {}",
            answer.bad_record, answer.place, answer.reason
        ));
    }
    writeln!(
        out,
        "records {} to {} verified, {} signed checkpoints",
        answer.first, answer.last, answer.checkpoints
    )
    .map_err(io)
}

/// `agentvfs audit`: every record the filters match, one per line.
pub async fn query(
    channel: Channel,
    headers: Headers,
    query: AuditQuery,
    out: &mut impl Write,
) -> Result<(), String> {
    let req = pb::QueryAuditRequest {
        since: query.since.unwrap_or_default(),
        until: query.until.unwrap_or_default(),
        principal: query.principal.unwrap_or_default(),
        path_prefix: query.path.unwrap_or_default(),
        operation: query.operation.unwrap_or_default(),
        class: query.class.unwrap_or_default(),
        result: query.result.unwrap_or_default(),
        label: query.label.unwrap_or_default(),
        tool_call_id: query.tool_call_id.unwrap_or_default(),
        after_seq: query.after,
        page_size: 0,
    };
    let mut pages = AuditLogClient::with_interceptor(channel, headers)
        .query_audit(req)
        .await
        .map_err(|s| describe_status(&s))?
        .into_inner();
    while let Some(page) = pages.message().await.map_err(|s| describe_status(&s))? {
        for line in page.records {
            if query.json {
                writeln!(out, "{line}").map_err(io)?;
                continue;
            }
            let r: serde_json::Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            let paths: Vec<&str> = r["paths"]
                .as_array()
                .map(|a| a.iter().filter_map(|p| p.as_str()).collect())
                .unwrap_or_default();
            writeln!(
                out,
                "{} {} {} {} {} {} {}{}",
                r["seq"],
                text("time"),
                text("principal"),
                text("surface"),
                text("operation"),
                text("result"),
                paths.join(","),
                match text("rule").as_str() {
                    "" => String::new(),
                    rule => format!(" ({rule})"),
                }
            )
            .map_err(io)?;
        }
        out.flush().map_err(io)?;
    }
    Ok(())
}
