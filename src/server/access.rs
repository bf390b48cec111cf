//! The `agentvfs.v1.Access` service: handles for sub-agents (optionally
//! bound to a branch) and grant descriptions. A thin adapter over [`Auth`].

use super::caller::caller;
use crate::access::{Grant, OpSet};
use crate::auth::{self, Auth};
use crate::error::Error;
use crate::path::VfsPath;
use crate::pb;
use crate::pb::access_server::Access;
use std::sync::Arc;
use std::time::Duration;
use tonic::{Request, Response, Status};

/// Serves CreateHandle, RevokeHandle and DescribeGrants.
pub struct AccessService {
    auth: Arc<Auth>,
}

impl AccessService {
    /// A service minting handles in `auth`.
    pub fn new(auth: Arc<Auth>) -> Self {
        AccessService { auth }
    }
}

fn to_pb(grants: &[Grant]) -> Vec<pb::Grant> {
    grants
        .iter()
        .map(|g| pb::Grant {
            prefix: g.prefix.to_string(),
            ops: g.ops.iter().map(|op| op.as_str().to_owned()).collect(),
        })
        .collect()
}

fn from_pb(grants: &[pb::Grant]) -> Result<Vec<Grant>, Error> {
    grants
        .iter()
        .map(|g| {
            Ok(Grant {
                prefix: VfsPath::parse(&g.prefix)?,
                ops: OpSet::parse(g.ops.iter().map(String::as_str))?,
            })
        })
        .collect()
}

#[tonic::async_trait]
impl Access for AccessService {
    async fn create_handle(
        &self,
        req: Request<pb::CreateHandleRequest>,
    ) -> Result<Response<pb::CreateHandleResponse>, Status> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let requested = from_pb(&req.grants)?;
        let handle = self.auth.create_handle(
            caller.token.as_ref().map(|t| t.0.as_str()),
            &requested,
            Duration::from_secs(req.ttl_seconds),
            &req.branch,
        )?;
        tracing::info!(
            creator = %caller.principal.name,
            grants = handle.grants.len(),
            branch = %handle.branch,
            "handle created"
        );
        Ok(Response::new(pb::CreateHandleResponse {
            token: handle.token,
            grants: to_pb(&handle.grants),
            expires_at: Some(handle.expires.into()),
            branch: handle.branch,
        }))
    }

    async fn revoke_handle(
        &self,
        req: Request<pb::RevokeHandleRequest>,
    ) -> Result<Response<pb::RevokeHandleResponse>, Status> {
        let caller = caller(&req)?;
        let token = req.into_inner().token;
        self.auth
            .revoke_handle(caller.token.as_ref().map(|t| t.0.as_str()), &token)?;
        Ok(Response::new(pb::RevokeHandleResponse {}))
    }

    async fn describe_grants(
        &self,
        req: Request<pb::DescribeGrantsRequest>,
    ) -> Result<Response<pb::DescribeGrantsResponse>, Status> {
        let caller = caller(&req)?;
        let grants = &caller.principal.grants;
        Ok(Response::new(pb::DescribeGrantsResponse {
            principal: caller.principal.name.clone(),
            grants: to_pb(grants),
            markdown: auth::describe(grants),
            branch: caller.principal.branch.clone(),
        }))
    }
}
