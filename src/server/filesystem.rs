//! The `agentvfs.v1.Filesystem` service: a thin adapter from gRPC to the
//! application layer ([`Service`]).
//!
//! Every RPC does, in order: take the [`crate::service::Caller`] attached by
//! the interceptor, parse the paths, make one service call (which checks the
//! grants in the order of docs/contract.md § Grants: path, grant, arguments,
//! existence, and runs the tier on a blocking thread), convert the result
//! ([`convert`]). Errors leave only through `From<Error> for Status`. The
//! streaming RPCs hand their stream to [`streams`], which bounds what it
//! holds and never lets a thread wait on the client.

use super::caller::caller;
use super::streams::{self, READ_CHUNK_BYTES, ResponseStream};
use super::{convert, max_answer_bytes};
use crate::access::Op;
use crate::error::Result;
use crate::path::VfsPath;
use crate::pb;
use crate::pb::filesystem_server::Filesystem;
use crate::service::{Service, WatchStart};
use crate::text::diff::DiffCaps;
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

/// Serves the backend protocol over gRPC.
pub struct FilesystemService {
    service: Service,
    /// Cancelled when the server shuts down: open Watch streams end then
    /// (a Watch would otherwise hold the graceful shutdown forever).
    shutdown: CancellationToken,
}

impl FilesystemService {
    /// The RPCs over the application layer `service`; Watch streams end
    /// when `shutdown` is cancelled.
    pub fn new(service: Service, shutdown: CancellationToken) -> Self {
        FilesystemService { service, shutdown }
    }
}

/// The root of a search or Watch: `/` when the request leaves it empty.
fn search_root(raw: &str) -> Result<VfsPath> {
    VfsPath::parse(if raw.is_empty() { "/" } else { raw })
}

type Reply<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl Filesystem for FilesystemService {
    async fn list_info(&self, req: Request<pb::ListInfoRequest>) -> Reply<pb::ListInfoResponse> {
        let caller = caller(&req)?;
        let dir = VfsPath::parse(&req.into_inner().path)?;
        let entries = self.service.list(&caller, dir).await?;
        Ok(Response::new(pb::ListInfoResponse {
            entries: entries.iter().map(convert::file_info).collect(),
        }))
    }

    async fn stat(&self, req: Request<pb::StatRequest>) -> Reply<pb::StatResponse> {
        let caller = caller(&req)?;
        let path = VfsPath::parse(&req.into_inner().path)?;
        let entry = self.service.stat(&caller, path).await?;
        Ok(Response::new(pb::StatResponse {
            info: Some(convert::file_info(&entry)),
        }))
    }

    async fn read(&self, req: Request<pb::ReadRequest>) -> Reply<pb::ReadResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let read = convert::read_text(&req);
        // An answer the server could not send is refused before it is built.
        let max_answer = max_answer_bytes(self.service.max_file_bytes());
        let (window, entry) = (self.service)
            .read_text(&caller, path.clone(), read, max_answer)
            .await?;
        Ok(Response::new(convert::read_response(&path, window, entry)))
    }

    type ReadBytesStream = ResponseStream<pb::ReadBytesResponse>;

    async fn read_bytes(&self, req: Request<pb::ReadBytesRequest>) -> Reply<Self::ReadBytesStream> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let (entry, chunks, permit) = (self.service)
            .read_chunks(&caller, path, req.version, READ_CHUNK_BYTES)
            .await?;
        let stream = streams::chunks(&caller, entry, chunks, permit)?;
        Ok(Response::new(stream))
    }

    async fn write(&self, req: Request<pb::WriteRequest>) -> Reply<pb::WriteResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let pre = convert::precondition(req.create_only, req.if_version, req.executable);
        let content = req.content.into_bytes();
        let out = self.service.write(&caller, path, content, pre).await?;
        Ok(Response::new(convert::write_response(out)))
    }

    async fn write_bytes(
        &self,
        req: Request<Streaming<pb::WriteBytesRequest>>,
    ) -> Reply<pb::WriteBytesResponse> {
        let caller = caller(&req)?;
        let limits = self.service.limits().clone();
        let messages = streams::upload_messages(req.into_inner(), limits);
        let messages = messages.map(|m| m.map(convert::upload_message));
        let out = self.service.upload(&caller, messages).await?;
        Ok(Response::new(convert::write_bytes_response(out)))
    }

    async fn edit(&self, req: Request<pb::EditRequest>) -> Reply<pb::EditResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let shown = path.to_string();
        let (if_version, edit) = (req.if_version, convert::edit(req));
        let out = (self.service)
            .edit(&caller, path, if_version, vec![edit], false)
            .await?;
        Ok(Response::new(convert::edit_response(shown, out)))
    }

    async fn multi_edit(&self, req: Request<pb::MultiEditRequest>) -> Reply<pb::MultiEditResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let shown = path.to_string();
        let edits = req.edits.into_iter().map(convert::text_edit).collect();
        let out = (self.service)
            .edit(&caller, path, req.if_version, edits, true)
            .await?;
        Ok(Response::new(convert::multi_edit_response(shown, out)))
    }

    async fn delete(&self, req: Request<pb::DeleteRequest>) -> Reply<pb::DeleteResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let shown = path.to_string();
        let files_deleted = (self.service)
            .delete(&caller, path, req.if_version, req.recursive)
            .await?;
        Ok(Response::new(pb::DeleteResponse {
            path: shown,
            files_deleted,
        }))
    }

    async fn r#move(&self, req: Request<pb::MoveRequest>) -> Reply<pb::MoveResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let source = VfsPath::parse(&req.source)?;
        let destination = VfsPath::parse(&req.destination)?;
        let shown = (source.to_string(), destination.to_string());
        let pre = convert::precondition(req.create_only, req.if_version, None);
        let out = (self.service)
            .rename(&caller, source, destination, pre)
            .await?;
        Ok(Response::new(convert::move_response(shown, out)))
    }

    async fn commit(&self, req: Request<pb::CommitRequest>) -> Reply<pb::CommitResponse> {
        let caller = caller(&req)?;
        let ops = super::changeset::operations(req.into_inner())?;
        let committed = self.service.commit(&caller, ops).await?;
        Ok(Response::new(super::changeset::response(committed)))
    }

    async fn rewind(&self, req: Request<pb::RewindRequest>) -> Reply<pb::RewindResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let root = VfsPath::parse(if req.path.is_empty() { "/" } else { &req.path })?;
        let selector = super::changeset::selector(req.selector)?;
        let rewound = (self.service)
            .rewind(&caller, root, selector, req.dry_run, req.force)
            .await?;
        Ok(Response::new(super::changeset::rewind_response(rewound)))
    }

    async fn create_branch(
        &self,
        req: Request<pb::CreateBranchRequest>,
    ) -> Reply<pb::CreateBranchResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let root = VfsPath::parse(&req.path)?;
        let info = self.service.create_branch(&caller, req.name, root).await?;
        Ok(Response::new(pb::CreateBranchResponse {
            branch: Some(super::branch::branch(info)),
        }))
    }

    async fn list_branches(
        &self,
        req: Request<pb::ListBranchesRequest>,
    ) -> Reply<pb::ListBranchesResponse> {
        let caller = caller(&req)?;
        let branches = self.service.list_branches(&caller).await?;
        Ok(Response::new(pb::ListBranchesResponse {
            branches: branches.into_iter().map(super::branch::branch).collect(),
        }))
    }

    async fn diff_branch(
        &self,
        req: Request<pb::DiffBranchRequest>,
    ) -> Reply<pb::DiffBranchResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let (after, limit) = super::branch::diff_page(&req)?;
        let diff = (self.service)
            .diff_branch(&caller, req.name, after, limit)
            .await?;
        Ok(Response::new(super::branch::diff_response(diff)))
    }

    async fn merge_branch(
        &self,
        req: Request<pb::MergeBranchRequest>,
    ) -> Reply<pb::MergeBranchResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let resolutions = super::branch::resolutions(&req)?;
        let merged = (self.service)
            .merge_branch(&caller, req.name, resolutions, req.discard)
            .await?;
        Ok(Response::new(super::branch::merge_response(merged)))
    }

    async fn discard_branch(
        &self,
        req: Request<pb::DiscardBranchRequest>,
    ) -> Reply<pb::DiscardBranchResponse> {
        let caller = caller(&req)?;
        let name = req.into_inner().name;
        self.service.discard_branch(&caller, name).await?;
        Ok(Response::new(pb::DiscardBranchResponse {}))
    }

    async fn read_re(&self, req: Request<pb::ReadReRequest>) -> Reply<pb::ReadReResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let overlap = req.overlap.unwrap_or(0);
        let matches = (self.service)
            .read_re(&caller, path, req.pattern, overlap)
            .await?;
        Ok(Response::new(pb::ReadReResponse { matches }))
    }

    type GrepStream = ResponseStream<pb::GrepResponse>;

    async fn grep(&self, req: Request<pb::GrepRequest>) -> Reply<Self::GrepStream> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let root = search_root(&req.path)?;
        streams::charge_search(&caller)?;
        let spec = move || convert::grep_spec(root, &req);
        let events = self.service.search(&caller, Op::ReadRe, true, spec).await?;
        let stream = streams::search(events, convert::grep_message);
        Ok(Response::new(stream))
    }

    type WatchStream = ResponseStream<pb::WatchResponse>;

    async fn watch(&self, req: Request<pb::WatchRequest>) -> Reply<Self::WatchStream> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let root = search_root(&req.path)?;
        let start = WatchStart::parse(&req.cursor, req.from_now)?;
        streams::charge_watch(&caller)?;
        let watcher = (self.service)
            .watch(&caller, root, start, req.stop_at_head)
            .await?;
        let stream = streams::watch(watcher, self.shutdown.clone());
        Ok(Response::new(stream))
    }

    async fn list_versions(
        &self,
        req: Request<pb::ListVersionsRequest>,
    ) -> Reply<pb::ListVersionsResponse> {
        let caller = caller(&req)?;
        let path = VfsPath::parse(&req.into_inner().path)?;
        let shown = path.to_string();
        let versions = (self.service)
            .run(&caller, move |files| files.versions(&path))
            .await?;
        Ok(Response::new(convert::versions_response(shown, versions)))
    }

    async fn restore(&self, req: Request<pb::RestoreRequest>) -> Reply<pb::RestoreResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let (version, if_version) = (req.version, req.if_version);
        let out = (self.service)
            .run(&caller, move |files| {
                files.restore(&path, version, if_version)
            })
            .await?;
        Ok(Response::new(convert::restore_response(out, version)))
    }

    async fn diff(&self, req: Request<pb::DiffRequest>) -> Reply<pb::DiffResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let shown = path.to_string();
        let (from, to) = (req.from_version, req.to_version);
        let out = (self.service)
            .run(&caller, move |files| {
                files.diff(&path, from, to, DiffCaps::WHOLE)
            })
            .await?;
        Ok(Response::new(convert::diff_response(shown, out)))
    }

    type GlobStream = ResponseStream<pb::GlobResponse>;

    async fn glob(&self, req: Request<pb::GlobRequest>) -> Reply<Self::GlobStream> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let root = search_root(&req.path)?;
        streams::charge_search(&caller)?;
        let spec = move || convert::glob_spec(root, &req);
        let events = self.service.search(&caller, Op::List, true, spec).await?;
        let stream = streams::search(events, convert::glob_message);
        Ok(Response::new(stream))
    }

    async fn copy(&self, req: Request<pb::CopyRequest>) -> Reply<pb::CopyResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let source = VfsPath::parse(&req.source)?;
        let destination = VfsPath::parse(&req.destination)?;
        let pre = convert::precondition(req.create_only, req.if_version, None);
        let shown = source.to_string();
        let out = (self.service)
            .run(&caller, move |files| files.copy(&source, &destination, pre))
            .await?;
        Ok(Response::new(convert::copy_response(shown, out)))
    }

    async fn set_executable(
        &self,
        req: Request<pb::SetExecutableRequest>,
    ) -> Reply<pb::SetExecutableResponse> {
        let caller = caller(&req)?;
        let req = req.into_inner();
        let path = VfsPath::parse(&req.path)?;
        let shown = path.to_string();
        let (previous_version, version) = (self.service)
            .set_executable(&caller, path, req.executable, req.if_version)
            .await?;
        Ok(Response::new(pb::SetExecutableResponse {
            path: shown,
            version,
            changed: version != previous_version,
            previous_version,
        }))
    }
}
