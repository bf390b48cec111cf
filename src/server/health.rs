//! gRPC health (`grpc.health.v1`) and the audit log's failure mode
//! (docs/audit.md § Failure mode): every service answers SERVING while
//! the server serves; once a record could not be written under
//! `fail_closed`, the server refuses every call, and its health says so:
//! NOT_SERVING for the server (`""`) and each service.

use super::{AccessService, AuditLogService, FilesystemService, ToolsService};
use crate::audit::Audit;
use crate::pb::access_server::AccessServer;
use crate::pb::audit_log_server::AuditLogServer;
use crate::pb::filesystem_server::FilesystemServer;
use crate::pb::tools_server::ToolsServer;
use tonic::server::NamedService;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// Turns `health` NOT_SERVING when `audit` closes (a failed write under
/// `fail_closed`), from a task that waits for it and ends with the server.
pub fn follow_the_audit(audit: Audit, health: HealthReporter) {
    tokio::spawn(async move {
        audit.closed().await;
        tracing::error!(
            "the audit log cannot be written and [audit] failure is fail_closed: health is \
             NOT_SERVING, every call is refused until the server is restarted"
        );
        let services = [
            "",
            FilesystemServer::<FilesystemService>::NAME,
            ToolsServer::<ToolsService>::NAME,
            AccessServer::<AccessService>::NAME,
            AuditLogServer::<AuditLogService>::NAME,
        ];
        for service in services {
            health
                .set_service_status(service, ServingStatus::NotServing)
                .await;
        }
    });
}
