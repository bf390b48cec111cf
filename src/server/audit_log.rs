//! The `agentvfs.v1.AuditLog` service: VerifyAudit and QueryAudit over
//! the audit log (docs/audit.md § Query), for principals holding the
//! `audit` right. A thin adapter over [`crate::audit`]; its calls are
//! themselves audited (class admin).

use super::caller::caller;
use super::streams::{ResponseStream, bounded, stream_bytes};
use crate::audit::{self, Audit, Class, Filter, Outcome};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::pb;
use crate::pb::audit_log_server::AuditLog;
use crate::service::{Caller, blocking};
use std::path::PathBuf;
use tonic::{Request, Response, Status};

/// Records per QueryAudit message by default, and at most.
const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 1000;
/// Pages queued ahead of a client that reads slowly.
const PAGES_IN_FLIGHT: usize = 2;

/// Serves the audit log of `audit`.
pub struct AuditLogService {
    audit: Audit,
}

impl AuditLogService {
    /// The service over `audit`'s store.
    pub fn new(audit: Audit) -> AuditLogService {
        AuditLogService { audit }
    }

    /// The store's directory, once the caller's right is checked.
    fn dir(&self, caller: &Caller) -> Result<PathBuf> {
        caller.principal.check_audit()?;
        self.audit
            .dir()
            .map(PathBuf::from)
            .ok_or_else(|| Error::Unsupported("the audit log is off ([audit] enabled)".into()))
    }
}

/// The filter of `req`: every field given, checked.
fn filter(req: &pb::QueryAuditRequest) -> Result<Filter> {
    let given = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let time = |what: &str, s: &str| {
        given(s)
            .map(|s| audit::normalized_time(what, &s))
            .transpose()
    };
    Ok(Filter {
        since: time("since", &req.since)?,
        until: time("until", &req.until)?,
        principal: given(&req.principal),
        path_prefix: given(&req.path_prefix)
            .map(|p| VfsPath::parse(&p))
            .transpose()?,
        operation: given(&req.operation),
        class: given(&req.class)
            .map(|c| {
                Class::parse(&c).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "class {c:?} is not metadata_read, data_read, data_write or admin"
                    ))
                })
            })
            .transpose()?,
        result: given(&req.result)
            .map(|r| {
                Outcome::parse(&r).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "result {r:?} is not ok, denied, not_found, conflict, exhausted, \
                         invalid or error"
                    ))
                })
            })
            .transpose()?,
        label: given(&req.label),
        tool_call_id: given(&req.tool_call_id),
    })
}

#[tonic::async_trait]
impl AuditLog for AuditLogService {
    async fn verify_audit(
        &self,
        req: Request<pb::VerifyAuditRequest>,
    ) -> Result<Response<pb::VerifyAuditResponse>, Status> {
        let dir = self.dir(&caller(&req)?)?;
        let verified = blocking(move || {
            audit::verify(&dir).map_err(|e| Error::Internal(format!("reading the audit log: {e}")))
        })
        .await?;
        Ok(Response::new(match verified {
            Ok(v) => pb::VerifyAuditResponse {
                ok: true,
                first: v.first,
                last: v.last,
                checkpoints: v.checkpoints,
                head_checkpoint: v
                    .head
                    .map(|c| serde_json::to_string(&c).unwrap_or_default())
                    .unwrap_or_default(),
                ..Default::default()
            },
            Err(broken) => pb::VerifyAuditResponse {
                ok: false,
                bad_record: broken.seq,
                place: broken.place,
                reason: broken.reason,
                ..Default::default()
            },
        }))
    }

    type QueryAuditStream = ResponseStream<pb::QueryAuditResponse>;

    async fn query_audit(
        &self,
        req: Request<pb::QueryAuditRequest>,
    ) -> Result<Response<Self::QueryAuditStream>, Status> {
        let caller = caller(&req)?;
        let dir = self.dir(&caller)?;
        let req = req.into_inner();
        let filter = filter(&req)?;
        let limit = match req.page_size as usize {
            0 => DEFAULT_PAGE,
            n if n <= MAX_PAGE => n,
            n => {
                return Err(
                    Error::InvalidArgument(format!("page_size {n} is over {MAX_PAGE}")).into(),
                );
            }
        };
        let mut after = req.after_seq;
        // What the stream holds at most, charged once for its life, as every
        // stream is (src/server/streams.rs).
        let held = stream_bytes(PAGES_IN_FLIGHT, audit::MAX_PAGE_BYTES as u64);
        caller.account.charge(held, "a QueryAudit stream")?;
        Ok(Response::new(bounded(PAGES_IN_FLIGHT, |tx| async move {
            loop {
                let (dir, filter) = (dir.clone(), filter.clone());
                let read = blocking(move || audit::page(&dir, &filter, after, limit)).await;
                let page = match read {
                    Ok(page) => page,
                    Err(e) => {
                        let _ = tx.send(Err(e.into())).await;
                        return;
                    }
                };
                after = page.cursor;
                let message = pb::QueryAuditResponse {
                    records: page.lines,
                    cursor: page.cursor,
                };
                let sent = tx.send(Ok(message)).await;
                if sent.is_err() || !page.more {
                    return;
                }
            }
        })))
    }
}
