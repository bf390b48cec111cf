//! The domain error of agentvfs and its one mapping to gRPC.
//!
//! Every layer returns [`Error`]; the gRPC adapters turn it into a `tonic::Status`
//! only through `From<Error> for Status` below, and the Tools layer turns it into
//! an envelope error through [`Error::code`]. Both therefore agree on the code a
//! client sees. Payloads carry logical paths only, never host paths.
//!
//! Errors never echo unbounded input: caller input quoted in a message goes
//! through [`echo`], and the mapping to a status caps the whole message and
//! every `ErrorInfo.metadata` value. A status travels in HTTP/2 trailers, and
//! grpc-core clients refuse trailers over 8 KiB with RESOURCE_EXHAUSTED
//! instead of showing the error, so a 16 KiB path must not reach them whole.

use crate::pb::ErrorReason;
use std::borrow::Cow;
use std::collections::HashMap;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// `google.rpc.ErrorInfo.domain` of every error this server returns.
pub const ERROR_DOMAIN: &str = "agentvfs";

/// What every [`ErrorReason`] name starts with, and its wire spelling does
/// not (buf lint's ENUM_VALUE_PREFIX rule keeps every value's name so).
const REASON_PREFIX: &str = "ERROR_REASON_";

/// The wire spelling of `reason` (`NOT_FOUND` for
/// `ERROR_REASON_NOT_FOUND`): the `ErrorInfo.reason` and tool envelope code,
/// spelled by `proto/agentvfs/v1/errors.proto` alone.
pub fn reason_code(reason: ErrorReason) -> &'static str {
    let name = reason.as_str_name();
    name.strip_prefix(REASON_PREFIX).unwrap_or(name)
}

/// Most characters of caller input (a path, an `old_string`, a name) an
/// error quotes; the rest is replaced by `… (N bytes)`.
pub const MAX_ECHO_CHARS: usize = 256;

/// Most characters of a status message (messages quote input through
/// [`echo`], so only composed messages come near it).
pub const MAX_STATUS_MESSAGE_CHARS: usize = 1024;

/// `input` as an error may quote it: whole when it has at most
/// [`MAX_ECHO_CHARS`] characters, else its first [`MAX_ECHO_CHARS`]
/// characters followed by `… (N bytes)`, N being the whole input's length.
pub fn echo(input: &str) -> Cow<'_, str> {
    clip(input, MAX_ECHO_CHARS)
}

/// `text` cut after `max_chars` characters, with `… (N bytes)` appended.
fn clip(text: &str, max_chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        None => Cow::Borrowed(text),
        Some((cut, _)) => Cow::Owned(format!("{}… ({} bytes)", &text[..cut], text.len())),
    }
}

/// Shorthand used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a request, by kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A logical path broke the rules of [`crate::path`].
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as the caller gave it.
        path: String,
        /// Which rule it broke.
        reason: String,
    },
    /// Any other argument is unusable (bad regex, out-of-range limit, ...).
    #[error("{0}")]
    InvalidArgument(String),
    /// The path does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The file keeps no such version (never had it, or dropped it).
    #[error("not found: version {version} of {path}")]
    VersionNotFound {
        /// Logical path of the file.
        path: String,
        /// The version asked for.
        version: u64,
    },
    /// The caller holds no grant for this operation on this path, or the OS
    /// refused access.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// No token, or a token the server does not know.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// A create-only write found the file already there.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// A conditional write found another version than the one it expected.
    #[error("version conflict on {path}: expected version {expected}, found {actual}")]
    VersionMismatch {
        /// Logical path of the file.
        path: String,
        /// The `if_version` the caller sent.
        expected: u64,
        /// The version the file has (0: it does not exist).
        actual: u64,
    },
    /// Changes that do not combine: a branch merge's conflicting files
    /// (docs/branches.md § Merge), of which nothing was applied.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A file operation named a directory.
    #[error("is a directory: {0}")]
    IsDirectory(String),
    /// A directory operation named a file (or a path below a file).
    #[error("not a directory: {0}")]
    NotDirectory(String),
    /// Text was asked of a binary file.
    #[error("binary file: {0}")]
    Binary(String),
    /// A file, message or quota limit would be exceeded.
    #[error("too large: {0}")]
    TooLarge(String),
    /// A server limit on what a caller may hold at once (memory in flight,
    /// streams, searches, connections) would be exceeded; `limit` is the
    /// configuration key that sets it (`ErrorInfo.metadata.limit`).
    #[error("resource exhausted: {message}")]
    OverLimit {
        /// The `[limits]` (or `[mcp]`) key of the bound.
        limit: &'static str,
        /// What was refused and how to get on.
        message: String,
    },
    /// A search budget ran out before it found anything.
    #[error("timeout: {0}")]
    Timeout(String),
    /// A service the call needs cannot be reached or refused to serve (an
    /// object store down, the server shutting down); worth retrying.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The mount cannot do this (no version history, no change log).
    #[error("not supported: {0}")]
    Unsupported(String),
    /// A Watch cursor names changes the log no longer holds.
    #[error("cursor expired: {what}; the oldest cursor still available is {oldest}")]
    Expired {
        /// Which log, and why.
        what: String,
        /// The oldest cursor a Watch can still resume from.
        oldest: String,
    },
    /// A fault of the server or its storage; logged when mapped.
    #[error("internal error: {0}")]
    Internal(String),
    /// Adds detail to another error (which edit of a MultiEdit failed, ...)
    /// while keeping its kind.
    #[error("{context}: {source}")]
    Context {
        /// What was being done.
        context: String,
        /// Key/value pairs for `ErrorInfo.metadata`.
        metadata: Vec<(String, String)>,
        /// The underlying error, whose kind decides the code.
        source: Box<Error>,
    },
}

impl Error {
    /// Refuses content of `size` bytes at `path` over the file size limit
    /// `max` with RESOURCE_EXHAUSTED: the one wording of that refusal, for
    /// every front end and tier.
    pub fn check_file_size(path: impl std::fmt::Display, size: u64, max: u64) -> Result<()> {
        if size > max {
            return Err(Error::TooLarge(format!(
                "{path}: {size} bytes exceeds the file size limit of {max} bytes"
            )));
        }
        Ok(())
    }

    /// Builds an [`Error::InvalidPath`], quoting the path through [`echo`]
    /// (an invalid path may be as long as a message).
    pub fn invalid_path(path: &str, reason: impl Into<String>) -> Self {
        Error::InvalidPath {
            path: echo(path).into_owned(),
            reason: reason.into(),
        }
    }

    /// Wraps an I/O error met on `path` (a logical path), keeping its kind:
    /// not found, permission denied, ... instead of a bare internal error.
    pub fn io(path: &str, err: std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        match err.kind() {
            K::NotFound => Error::NotFound(path.to_owned()),
            K::PermissionDenied => {
                Error::PermissionDenied(format!("the operating system denied access to {path}"))
            }
            K::AlreadyExists => Error::AlreadyExists(path.to_owned()),
            K::IsADirectory => Error::IsDirectory(path.to_owned()),
            K::NotADirectory => Error::NotDirectory(path.to_owned()),
            K::StorageFull | K::QuotaExceeded | K::FileTooLarge => {
                Error::TooLarge(format!("{path}: {err}"))
            }
            _ => Error::Internal(format!("{path}: {err}")),
        }
    }

    /// Adds context and `ErrorInfo` metadata while keeping the error's kind.
    pub fn with_context(
        self,
        context: impl Into<String>,
        metadata: impl IntoIterator<Item = (&'static str, String)>,
    ) -> Self {
        Error::Context {
            context: context.into(),
            metadata: metadata
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            source: Box::new(self),
        }
    }

    /// The error without any [`Error::Context`] wrapping: the kind that decides codes.
    pub fn kind(&self) -> &Error {
        match self {
            Error::Context { source, .. } => source.kind(),
            other => other,
        }
    }

    /// The reason of this error, as `proto/agentvfs/v1/errors.proto`
    /// documents each one (with the gRPC codes and metadata below).
    pub fn reason(&self) -> ErrorReason {
        match self.kind() {
            Error::InvalidPath { .. }
            | Error::InvalidArgument(_)
            | Error::NotDirectory(_)
            | Error::TooLarge(_)
            | Error::OverLimit { .. }
            | Error::Unsupported(_)
            | Error::Expired { .. } => ErrorReason::InvalidParam,
            Error::NotFound(_) | Error::VersionNotFound { .. } => ErrorReason::NotFound,
            Error::PermissionDenied(_) | Error::Unauthenticated(_) => ErrorReason::AccessDenied,
            Error::AlreadyExists(_) | Error::VersionMismatch { .. } | Error::Conflict(_) => {
                ErrorReason::Conflict
            }
            Error::IsDirectory(_) => ErrorReason::IsDirectory,
            Error::Binary(_) => ErrorReason::BinaryFile,
            Error::Timeout(_) => ErrorReason::Timeout,
            Error::Internal(_) | Error::Unavailable(_) | Error::Context { .. } => {
                ErrorReason::InternalError
            }
        }
    }

    /// The envelope code, [`reason_code`] of [`Error::reason`]:
    /// `google.rpc.ErrorInfo.reason` and the Tools envelope's `error.code`,
    /// so both always agree.
    pub fn code(&self) -> &'static str {
        reason_code(self.reason())
    }

    /// The gRPC status code of this error (the README's error table).
    pub fn grpc_code(&self) -> Code {
        match self.kind() {
            Error::InvalidPath { .. } | Error::InvalidArgument(_) => Code::InvalidArgument,
            Error::NotFound(_) | Error::VersionNotFound { .. } => Code::NotFound,
            Error::PermissionDenied(_) => Code::PermissionDenied,
            Error::Unauthenticated(_) => Code::Unauthenticated,
            Error::AlreadyExists(_) => Code::AlreadyExists,
            Error::VersionMismatch { .. } | Error::Conflict(_) => Code::Aborted,
            Error::IsDirectory(_)
            | Error::NotDirectory(_)
            | Error::Binary(_)
            | Error::Unsupported(_)
            | Error::Expired { .. } => Code::FailedPrecondition,
            Error::TooLarge(_) | Error::OverLimit { .. } => Code::ResourceExhausted,
            Error::Timeout(_) => Code::DeadlineExceeded,
            Error::Unavailable(_) => Code::Unavailable,
            Error::Internal(_) | Error::Context { .. } => Code::Internal,
        }
    }

    /// `ErrorInfo.metadata`: every context's pairs plus what the kind knows.
    fn metadata(&self) -> HashMap<String, String> {
        let mut out = HashMap::new();
        let mut err = self;
        while let Error::Context {
            metadata, source, ..
        } = err
        {
            out.extend(metadata.iter().cloned());
            err = source;
        }
        match err {
            Error::InvalidPath { path, .. }
            | Error::NotFound(path)
            | Error::AlreadyExists(path)
            | Error::IsDirectory(path)
            | Error::NotDirectory(path)
            | Error::Binary(path) => {
                out.insert("path".into(), path.clone());
            }
            Error::VersionMismatch {
                path,
                expected,
                actual,
            } => {
                out.insert("path".into(), path.clone());
                out.insert("expected_version".into(), expected.to_string());
                out.insert("actual_version".into(), actual.to_string());
            }
            Error::VersionNotFound { path, version } => {
                out.insert("path".into(), path.clone());
                out.insert("version".into(), version.to_string());
            }
            Error::Expired { oldest, .. } => {
                out.insert("oldest_cursor".into(), oldest.clone());
            }
            Error::OverLimit { limit, .. } => {
                out.insert("limit".into(), (*limit).to_owned());
            }
            _ => {}
        }
        out
    }
}

impl From<Error> for Status {
    fn from(err: Error) -> Status {
        let code = err.grpc_code();
        if code == Code::Internal {
            tracing::error!(cause = %err, "internal error");
        }
        let metadata = err
            .metadata()
            .into_iter()
            .map(|(k, v)| {
                // A cursor is a value to pass back whole, bounded by the
                // mount table; caller input is echoed short.
                let v = if k == "oldest_cursor" {
                    clip(&v, MAX_STATUS_MESSAGE_CHARS).into_owned()
                } else {
                    echo(&v).into_owned()
                };
                (k, v)
            })
            .collect::<HashMap<_, _>>();
        let details = ErrorDetails::with_error_info(err.code(), ERROR_DOMAIN, metadata);
        let message = err.to_string();
        let message = clip(&message, MAX_STATUS_MESSAGE_CHARS);
        Status::with_error_details(code, message, details)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_carries_envelope_code_as_error_info_reason() {
        let status: Status = Error::VersionMismatch {
            path: "/a".into(),
            expected: 1,
            actual: 2,
        }
        .into();
        assert_eq!(status.code(), Code::Aborted);
        let info = status.get_details_error_info().expect("ErrorInfo attached");
        assert_eq!(info.reason, "CONFLICT");
        assert_eq!(info.metadata["actual_version"], "2");
    }

    /// One error of each kind (a kind added to [`Error`] belongs here).
    fn one_of_each_kind() -> Vec<Error> {
        vec![
            Error::invalid_path("a", "relative"),
            Error::InvalidArgument("bad regex".into()),
            Error::NotFound("/a".into()),
            Error::VersionNotFound {
                path: "/a".into(),
                version: 3,
            },
            Error::PermissionDenied("/a".into()),
            Error::Unauthenticated("unknown token".into()),
            Error::AlreadyExists("/a".into()),
            Error::VersionMismatch {
                path: "/a".into(),
                expected: 1,
                actual: 2,
            },
            Error::IsDirectory("/a".into()),
            Error::NotDirectory("/a".into()),
            Error::Binary("/a".into()),
            Error::TooLarge("/a".into()),
            Error::OverLimit {
                limit: "max_concurrent_searches",
                message: "busy".into(),
            },
            Error::Timeout("budget".into()),
            Error::Unavailable("store down".into()),
            Error::Unsupported("/a".into()),
            Error::Expired {
                what: "log".into(),
                oldest: "c1".into(),
            },
            Error::Internal("disk".into()),
            Error::NotFound("/a".into()).with_context("edit 0 failed", []),
        ]
    }

    #[test]
    fn every_reason_sent_is_an_error_reason_and_every_reason_is_sent() {
        let mut sent = std::collections::BTreeSet::new();
        for err in one_of_each_kind() {
            let status: Status = err.clone().into();
            let info = status.get_details_error_info().expect("ErrorInfo attached");
            assert_eq!(info.domain, ERROR_DOMAIN);
            let reason = ErrorReason::from_str_name(&format!("{REASON_PREFIX}{}", info.reason))
                .unwrap_or_else(|| panic!("{err:?} sends {:?}, not in ErrorReason", info.reason));
            assert_ne!(reason, ErrorReason::Unspecified, "{err:?}");
            assert_eq!(reason, err.reason(), "{err:?}");
            sent.insert(reason);
        }
        let every: Vec<ErrorReason> = (1..).map_while(|n| ErrorReason::try_from(n).ok()).collect();
        assert_eq!(sent.into_iter().collect::<Vec<_>>(), every);
    }

    #[test]
    fn reasons_keep_their_wire_spelling() {
        let codes: Vec<&str> = (1..)
            .map_while(|n| ErrorReason::try_from(n).ok())
            .map(reason_code)
            .collect();
        assert_eq!(
            codes,
            [
                "INVALID_PARAM",
                "NOT_FOUND",
                "ACCESS_DENIED",
                "CONFLICT",
                "IS_DIRECTORY",
                "BINARY_FILE",
                "TIMEOUT",
                "INTERNAL_ERROR",
            ]
        );
    }

    #[test]
    fn echo_caps_input_and_names_its_length() {
        assert_eq!(echo("short"), "short");
        let long = "é".repeat(300);
        let shown = echo(&long);
        assert!(shown.starts_with(&"é".repeat(MAX_ECHO_CHARS)), "{shown}");
        assert!(shown.ends_with("é… (600 bytes)"), "{shown}");
    }

    #[test]
    fn statuses_never_carry_unbounded_input() {
        let path = format!("/{}", "a".repeat(16 << 10));
        let status: Status = Error::NotFound(path.clone()).into();
        assert!(status.message().len() < 2048, "{}", status.message().len());
        assert!(
            status
                .message()
                .ends_with(&format!("({} bytes)", path.len() + 11))
        );
        let info = status.get_details_error_info().unwrap();
        assert!(info.metadata["path"].len() < 1024);
        let err = Error::invalid_path(&path, "path is longer than 4096 bytes");
        assert!(err.to_string().len() < 1024, "{err}");
        assert!(
            err.to_string()
                .ends_with("… (16385 bytes)\": path is longer than 4096 bytes")
        );
    }

    #[test]
    fn context_keeps_the_kind_and_adds_metadata() {
        let err = Error::NotFound("/x".into()).with_context("edit 2", [("edit_index", "2".into())]);
        assert_eq!(err.code(), "NOT_FOUND");
        let status: Status = err.into();
        assert_eq!(status.code(), Code::NotFound);
        assert!(status.message().starts_with("edit 2: "));
        assert_eq!(
            status.get_details_error_info().unwrap().metadata["edit_index"],
            "2"
        );
    }
}
