//! `completion/complete`: the `path` argument of the `agentvfs://{+path}`
//! resource template completed from the directory it names, under the
//! caller's grants, in path order (docs/mcp.md § Completion).
//!
//! A value is split at its last `/`: the part before names the directory
//! listed (one level, the `list` grant), the part after is the prefix the
//! entries must start with. Directories complete with a trailing `/`, so
//! the next request descends. At most [`CompletionInfo::MAX_VALUES`] values
//! (the specification's cap) come back, with the total and `hasMore`; the
//! listing must answer within [`DEADLINE`].

use super::resources::{TEMPLATE, TEMPLATE_ARGUMENT};
use crate::error::{Error, Result, echo};
use crate::path::VfsPath;
use crate::service::{Caller, Service};
use rmcp::model::{CompleteRequestParams, CompleteResult, CompletionInfo, Reference};
use std::time::Duration;

/// How long one completion may take (a directory listing of a slow tier).
pub const DEADLINE: Duration = Duration::from_secs(2);

/// Answers a completion request of `caller`.
pub async fn complete(
    service: &Service,
    caller: &Caller,
    request: &CompleteRequestParams,
) -> Result<CompleteResult> {
    match &request.r#ref {
        // agentvfs serves no prompts: no prompt argument has values.
        Reference::Prompt(_) => Ok(CompleteResult::default()),
        Reference::Resource(template) if template.uri != TEMPLATE => {
            Err(Error::InvalidArgument(format!(
                "no resource template {}; the one template is {TEMPLATE}",
                echo(&template.uri)
            )))
        }
        Reference::Resource(_) if request.argument.name != TEMPLATE_ARGUMENT => {
            Err(Error::InvalidArgument(format!(
                "{TEMPLATE} has no argument {}; its one argument is {TEMPLATE_ARGUMENT}",
                echo(&request.argument.name)
            )))
        }
        Reference::Resource(_) => paths(service, caller, &request.argument.value).await,
        _ => Err(Error::InvalidArgument(
            "completion: ref must be ref/resource (the one template) or ref/prompt".into(),
        )),
    }
}

/// The paths completing `value` (an absolute path typed so far; a relative
/// one is taken from `/`).
async fn paths(service: &Service, caller: &Caller, value: &str) -> Result<CompleteResult> {
    let typed = if value.starts_with('/') {
        value.to_owned()
    } else {
        format!("/{value}")
    };
    let (dir, stem) = typed.rsplit_once('/').unwrap_or(("", &typed));
    let dir = VfsPath::parse(if dir.is_empty() { "/" } else { dir })?;
    let listing = tokio::time::timeout(DEADLINE, service.list(caller, dir.clone()))
        .await
        .map_err(|_| {
            Error::Timeout(format!(
                "listing {dir} for completion took over {} s",
                DEADLINE.as_secs()
            ))
        })?;
    let mut entries = match listing {
        Ok(entries) => entries,
        // Nothing to offer where nothing is, or nothing may be seen.
        Err(e) if matches!(e.kind(), Error::NotFound(_) | Error::PermissionDenied(_)) => Vec::new(),
        Err(e) => return Err(e),
    };
    entries.retain(|e| e.path.name().starts_with(stem));
    entries.sort_by_key(|e| e.path.order_key());
    let total = entries.len();
    let values: Vec<String> = entries
        .iter()
        .take(CompletionInfo::MAX_VALUES)
        .map(|e| {
            let mut path = e.path.as_str().to_owned();
            if e.is_directory() {
                path.push('/');
            }
            path
        })
        .collect();
    let more = total > values.len();
    let info =
        CompletionInfo::with_pagination(values, Some(total.min(u32::MAX as usize) as u32), more)
            .map_err(Error::Internal)?;
    Ok(CompleteResult::new(info))
}
