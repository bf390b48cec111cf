//! MCP over stdin/stdout for one local agent (`agentvfs mcp`): the server
//! runs in the agent's own process tree, on the embedded default (or a
//! given configuration), as one caller fixed at start.
//!
//! stdout carries only MCP messages; logs go to stderr (`main.rs` sets the
//! tracing writer), so nothing else can corrupt the stream.

use super::{Identity, McpConfig, McpServer};
use crate::service::{Caller, Service};
use crate::tools::Tools;
use rmcp::ServiceExt;

/// Serves MCP on stdin/stdout as `caller` until the client closes stdin,
/// with the `[mcp]` bounds that apply to one session (subscriptions).
pub async fn serve(
    tools: Tools,
    service: Service,
    caller: Caller,
    config: &McpConfig,
) -> Result<(), String> {
    let server = McpServer::new(
        tools,
        service,
        Identity::Fixed(caller),
        config.subscriptions,
    );
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("MCP over stdio: {e}"))?;
    running
        .waiting()
        .await
        .map_err(|e| format!("MCP over stdio: {e}"))?;
    Ok(())
}
