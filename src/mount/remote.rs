//! The server, as the mount calls it: one gRPC call per step, each bounded
//! in time so that a dead server fails an operation instead of hanging it
//! (docs/mount.md § Lifecycle), and each failure mapped to one errno.

use crate::cli::connect::{Fs, reason};
use crate::pb;
use fuser::Errno;
use futures_util::Stream;
use std::future::Future;
use std::time::Duration;
use tonic::{Code, Status};
use tonic_types::StatusExt;

/// How long one unary call, or one message of a stream, may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(4);

/// A failed step: the errno the kernel gets, and what to log.
#[derive(Debug)]
pub struct Failure {
    /// What the file system call returns.
    pub errno: Errno,
    /// Why, for the log.
    pub why: String,
    /// For a conditional write that found another version: that version.
    pub conflict: Option<u64>,
}

impl Failure {
    /// A failure with no server call behind it.
    pub fn local(errno: Errno, why: impl Into<String>) -> Failure {
        Failure {
            errno,
            why: why.into(),
            conflict: None,
        }
    }
}

impl From<Status> for Failure {
    fn from(status: Status) -> Failure {
        let conflict = match status.code() {
            Code::Aborted => status
                .get_details_error_info()
                .and_then(|info| info.metadata.get("actual_version")?.parse().ok()),
            _ => None,
        };
        Failure {
            errno: errno_of(&status),
            why: format!("{} [{}]", status.message(), reason(&status)),
            conflict,
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(err: std::io::Error) -> Failure {
        Failure {
            errno: Errno::from_i32(err.raw_os_error().unwrap_or(libc::EIO)),
            why: format!("the cache directory: {err}"),
            conflict: None,
        }
    }
}

/// The errno of a failed call (docs/mount.md § Errors).
pub fn errno_of(status: &Status) -> Errno {
    match (status.code(), reason(status).as_str()) {
        (Code::NotFound, _) => Errno::ENOENT,
        (Code::PermissionDenied | Code::Unauthenticated, _) => Errno::EACCES,
        (Code::AlreadyExists, _) => Errno::EEXIST,
        (Code::FailedPrecondition, "IS_DIRECTORY") => Errno::EISDIR,
        (Code::FailedPrecondition, "INVALID_PARAM") => Errno::ENOTDIR,
        (Code::InvalidArgument, _) => Errno::EINVAL,
        (Code::ResourceExhausted, _) => Errno::EFBIG,
        // A conflict, a dead or unreachable server, a timeout, a fault.
        _ => Errno::EIO,
    }
}

/// `fut`, failed with EIO when it takes longer than `CALL_TIMEOUT`.
pub async fn bounded<T>(
    what: &str,
    fut: impl Future<Output = Result<T, Status>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(CALL_TIMEOUT, fut).await {
        Ok(result) => result.map_err(Failure::from),
        Err(_) => Err(Failure::local(
            Errno::EIO,
            format!("{what}: the server did not answer within {CALL_TIMEOUT:?}"),
        )),
    }
}

/// The server's calls the mount makes.
#[derive(Clone)]
pub struct Remote {
    fs: Fs,
}

impl Remote {
    /// Calls through `fs`.
    pub fn new(fs: Fs) -> Remote {
        Remote { fs }
    }

    /// The metadata of `path`.
    pub async fn stat(&self, path: &str) -> Result<pb::FileInfo, Failure> {
        let req = pb::StatRequest {
            path: path.to_owned(),
        };
        let answer = bounded("Stat", self.fs.clone().stat(req)).await?;
        answer
            .into_inner()
            .info
            .ok_or_else(|| Failure::local(Errno::EIO, "Stat answered no metadata"))
    }

    /// The entries of directory `path`.
    pub async fn list(&self, path: &str) -> Result<Vec<pb::FileInfo>, Failure> {
        let req = pb::ListInfoRequest {
            path: path.to_owned(),
        };
        let answer = bounded("ListInfo", self.fs.clone().list_info(req)).await?;
        Ok(answer.into_inner().entries)
    }

    /// The bytes of `path` (at `version`), as a stream of chunks whose
    /// first carries the file's metadata.
    pub async fn read(
        &self,
        path: &str,
        version: Option<u64>,
    ) -> Result<tonic::Streaming<pb::ReadBytesResponse>, Failure> {
        let req = pb::ReadBytesRequest {
            path: path.to_owned(),
            version,
        };
        let answer = bounded("ReadBytes", self.fs.clone().read_bytes(req)).await?;
        Ok(answer.into_inner())
    }

    /// Uploads `chunks` as the content of `path`, if it is at `if_version`
    /// (0: it must not exist; `None`: whatever it is), setting the
    /// executable bit when `executable` names one. The whole upload is
    /// bounded by `CALL_TIMEOUT` plus a second per 16 MiB.
    pub async fn write(
        &self,
        path: &str,
        (if_version, executable): (Option<u64>, Option<bool>),
        size: u64,
        chunks: impl Stream<Item = pb::WriteBytesRequest> + Send + 'static,
    ) -> Result<pb::WriteBytesResponse, Failure> {
        use futures_util::StreamExt;
        let header = pb::WriteBytesRequest {
            kind: Some(pb::write_bytes_request::Kind::Header(
                pb::WriteBytesHeader {
                    path: path.to_owned(),
                    create_only: false,
                    if_version,
                    executable,
                },
            )),
        };
        let messages = futures_util::stream::iter([header]).chain(chunks);
        let limit = CALL_TIMEOUT + Duration::from_secs(size >> 24);
        match tokio::time::timeout(limit, self.fs.clone().write_bytes(messages)).await {
            Ok(result) => Ok(result?.into_inner()),
            Err(_) => Err(Failure::local(
                Errno::EIO,
                format!("WriteBytes: the server did not answer within {limit:?}"),
            )),
        }
    }

    /// Sets or clears the executable bit of the file `path`.
    pub async fn set_executable(
        &self,
        path: &str,
        executable: bool,
    ) -> Result<pb::SetExecutableResponse, Failure> {
        let req = pb::SetExecutableRequest {
            path: path.to_owned(),
            executable,
            if_version: None,
        };
        let set = bounded("SetExecutable", self.fs.clone().set_executable(req)).await?;
        Ok(set.into_inner())
    }

    /// Deletes `path` (a directory: with what is under it).
    pub async fn delete(&self, path: &str, recursive: bool) -> Result<(), Failure> {
        let req = pb::DeleteRequest {
            path: path.to_owned(),
            if_version: None,
            recursive,
        };
        bounded("Delete", self.fs.clone().delete(req)).await?;
        Ok(())
    }

    /// Moves `source` to `destination`, replacing a file there unless
    /// `create_only`; a file's new version (0 for a directory).
    pub async fn rename(
        &self,
        source: &str,
        destination: &str,
        create_only: bool,
    ) -> Result<u64, Failure> {
        let req = pb::MoveRequest {
            source: source.to_owned(),
            destination: destination.to_owned(),
            if_version: None,
            create_only,
        };
        let moved = bounded("Move", self.fs.clone().r#move(req)).await?;
        Ok(moved.into_inner().version)
    }

    /// The changes under `path` from `cursor` (or from now), as a stream.
    pub async fn watch(
        &self,
        path: &str,
        cursor: Option<String>,
    ) -> Result<tonic::Streaming<pb::WatchResponse>, Failure> {
        let req = pb::WatchRequest {
            path: path.to_owned(),
            from_now: cursor.is_none(),
            cursor: cursor.unwrap_or_default(),
            stop_at_head: false,
        };
        let answer = bounded("Watch", self.fs.clone().watch(req)).await?;
        Ok(answer.into_inner())
    }
}
