//! MCP logging for clients of the protocol versions with sessions:
//! `logging/setLevel` sets the least severity a session is sent, and the
//! server tells it in `notifications/message` what it cannot say in an
//! answer: a subscription that will never fire, a change feed that ended
//! (docs/mcp.md § Logging).
//!
//! The 2026-07-28 protocol deprecates logging (SEP-2577), hence the allow
//! below: the SDK marks every logging item deprecated.
#![allow(deprecated)]

use rmcp::RoleServer;
use rmcp::model::{LoggingMessageNotificationParam, SetLevelRequestParams};
use rmcp::service::Peer;
use std::sync::Mutex;

use rmcp::model::LoggingLevel;

/// The name messages carry as their logger.
const LOGGER: &str = "agentvfs";

/// The level a session has asked for: warnings and worse until it says
/// otherwise.
pub struct Log {
    level: Mutex<LoggingLevel>,
}

impl Default for Log {
    fn default() -> Self {
        Log {
            level: Mutex::new(LoggingLevel::Warning),
        }
    }
}

impl Log {
    /// Applies `logging/setLevel`.
    pub fn set(&self, request: &SetLevelRequestParams) {
        *self.level.lock().unwrap_or_else(|p| p.into_inner()) = request.level;
    }

    /// True when a message of `level` is sent.
    fn wants(&self, level: LoggingLevel) -> bool {
        let least = *self.level.lock().unwrap_or_else(|p| p.into_inner());
        level as u8 >= least as u8
    }

    /// Tells `peer` of something that needs its attention (`warning`).
    pub async fn warning(&self, peer: &Peer<RoleServer>, message: String) {
        self.send(peer, LoggingLevel::Warning, message).await;
    }

    /// Tells `peer` that something it relies on failed (`error`).
    pub async fn error(&self, peer: &Peer<RoleServer>, message: String) {
        self.send(peer, LoggingLevel::Error, message).await;
    }

    /// Sends `message` at `level` to `peer` when the session wants it; a
    /// client that is gone misses it (there is no one left to tell).
    async fn send(&self, peer: &Peer<RoleServer>, level: LoggingLevel, message: String) {
        if self.wants(level) {
            let param =
                LoggingMessageNotificationParam::new(level, message.into()).with_logger(LOGGER);
            let _ = peer.notify_logging_message(param).await;
        }
    }
}
