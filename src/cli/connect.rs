//! The connection of a client verb: the channel to the server, the
//! metadata every call carries (token, session, label, branch), and how a
//! failed call is described.

use super::Connection;
use crate::pb::filesystem_client::FilesystemClient;
use crate::service::SURFACE_HEADER;
use tonic::metadata::MetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Request, Status};
use tonic_types::StatusExt;

/// The Filesystem client every verb but `apply-patch` calls through.
pub(crate) type Fs = FilesystemClient<InterceptedService<Channel, Headers>>;

/// Adds the token, session, label and branch metadata to every call.
#[derive(Clone)]
pub(crate) struct Headers {
    token: Option<MetadataValue<tonic::metadata::Ascii>>,
    session: Option<MetadataValue<tonic::metadata::Ascii>>,
    label: Option<MetadataValue<tonic::metadata::Ascii>>,
    branch: Option<MetadataValue<tonic::metadata::Ascii>>,
    /// `cli` or `mount`: the surface the audit records (docs/audit.md).
    surface: &'static str,
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
        req.metadata_mut()
            .insert(SURFACE_HEADER, MetadataValue::from_static(self.surface));
        Ok(req)
    }
}

/// Describes a failed call: message and envelope code.
pub fn describe_status(status: &Status) -> String {
    format!("{} [{}]", status.message(), reason(status))
}

/// The envelope code of a failed call (its gRPC code when it has none).
pub(crate) fn reason(status: &Status) -> String {
    match status.get_details_error_info() {
        Some(info) => info.reason,
        None => format!("{:?}", status.code()),
    }
}

/// A server message with the request fields it names spelled as the CLI
/// flags that set them (`pass recursive` → `pass -r`).
pub(super) fn flag_names(message: String) -> String {
    [
        ("pass recursive", "pass -r"),
        ("pass force", "pass --force"),
        ("if_version", "--if-version"),
        ("create_only", "--create-only"),
        ("dry_run", "--dry-run"),
    ]
    .iter()
    .fold(message, |m, (field, flag)| m.replace(field, flag))
}

fn header(value: String) -> Result<MetadataValue<tonic::metadata::Ascii>, String> {
    value
        .parse()
        .map_err(|_| "token, session, label and branch must be printable ASCII".to_owned())
}

/// Connects to the server and builds the metadata of every call.
pub(super) async fn connect(conn: &Connection) -> Result<(Channel, Headers), String> {
    let (endpoint, url) = endpoint(conn)?;
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| format!("cannot connect to {url}: {}", connect_error(&e)))?;
    Ok((channel, headers(conn, "cli")?))
}

/// The server's endpoint (and its URL, for messages), not yet connected:
/// the mount (src/mount/) adds its own timeouts before connecting.
pub(crate) fn endpoint(conn: &Connection) -> Result<(tonic::transport::Endpoint, String), String> {
    let url = server_url(&conn.addr);
    let endpoint =
        Channel::from_shared(url.clone()).map_err(|e| format!("bad address {}: {e}", conn.addr))?;
    Ok((endpoint, url))
}

/// The metadata every call of `conn` carries, from the client program
/// `surface` (`cli`, `mount`).
pub(crate) fn headers(conn: &Connection, surface: &'static str) -> Result<Headers, String> {
    Ok(Headers {
        token: conn
            .token
            .clone()
            .map(|t| header(format!("Bearer {t}")))
            .transpose()?,
        session: conn.session.clone().map(header).transpose()?,
        label: conn.label.clone().map(header).transpose()?,
        branch: conn.branch.clone().map(header).transpose()?,
        surface,
    })
}

/// The URL of `addr`: as given when it has a scheme, else `http://` and
/// it (grpcurl's `host:port`).
fn server_url(addr: &str) -> String {
    match addr.contains("://") {
        true => addr.to_owned(),
        false => format!("http://{addr}"),
    }
}

/// Why a connection failed, in the words of the system call that failed
/// (`connection refused`) rather than the transport's `transport error`.
pub(crate) fn connect_error(err: &tonic::transport::Error) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    "connection refused (is the server running? scripts/serve starts one)"
                        .to_owned()
                }
                _ => io.to_string(),
            };
        }
        source = e.source();
    }
    err.to_string()
}

/// The Filesystem client over `channel`, answers of any size accepted.
pub(crate) fn filesystem(channel: Channel, headers: Headers) -> Fs {
    FilesystemClient::with_interceptor(channel, headers).max_decoding_message_size(usize::MAX)
}
