//! The connection of a client verb: the channel to the server, the
//! metadata every call carries (token, session, label, branch), and how a
//! failed call is described.

use super::Connection;
use crate::pb::filesystem_client::FilesystemClient;
use tonic::metadata::MetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Request, Status};
use tonic_types::StatusExt;

/// The Filesystem client every verb but `apply-patch` calls through.
pub(super) type Fs = FilesystemClient<InterceptedService<Channel, Headers>>;

/// Adds the token, session, label and branch metadata to every call.
#[derive(Clone)]
pub(super) struct Headers {
    token: Option<MetadataValue<tonic::metadata::Ascii>>,
    session: Option<MetadataValue<tonic::metadata::Ascii>>,
    label: Option<MetadataValue<tonic::metadata::Ascii>>,
    branch: Option<MetadataValue<tonic::metadata::Ascii>>,
}

impl Interceptor for Headers {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(token) = &self.token {
            req.metadata_mut().insert("authorization", token.clone());
        }
        if let Some(session) = &self.session {
            req.metadata_mut()
                .insert("x-agentvfs-session", session.clone());
        }
        if let Some(label) = &self.label {
            req.metadata_mut().insert("x-agentvfs-label", label.clone());
        }
        if let Some(branch) = &self.branch {
            req.metadata_mut()
                .insert("x-agentvfs-branch", branch.clone());
        }
        Ok(req)
    }
}

/// Describes a failed call: message and envelope code.
pub fn describe_status(status: &Status) -> String {
    match status.get_details_error_info() {
        Some(info) => format!("{} [{}]", status.message(), info.reason),
        None => format!("{} [{:?}]", status.message(), status.code()),
    }
}

fn header(value: String) -> Result<MetadataValue<tonic::metadata::Ascii>, String> {
    value
        .parse()
        .map_err(|_| "token, session, label and branch must be printable ASCII".to_owned())
}

/// Connects to the server and builds the metadata of every call.
pub(super) async fn connect(conn: &Connection) -> Result<(Channel, Headers), String> {
    let channel = Channel::from_shared(conn.addr.clone())
        .map_err(|e| format!("bad address {}: {e}", conn.addr))?
        .connect()
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", conn.addr))?;
    let headers = Headers {
        token: conn
            .token
            .clone()
            .map(|t| header(format!("Bearer {t}")))
            .transpose()?,
        session: conn.session.clone().map(header).transpose()?,
        label: conn.label.clone().map(header).transpose()?,
        branch: conn.branch.clone().map(header).transpose()?,
    };
    Ok((channel, headers))
}

/// The Filesystem client over `channel`, answers of any size accepted.
pub(super) fn filesystem(channel: Channel, headers: Headers) -> Fs {
    FilesystemClient::with_interceptor(channel, headers).max_decoding_message_size(usize::MAX)
}
