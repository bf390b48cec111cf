//! Oversized request messages answer RESOURCE_EXHAUSTED with an `ErrorInfo`,
//! as the README's error table promises for "file, message or quota too
//! large".
//!
//! tonic refuses a message over a service's decoding limit with OUT_OF_RANGE
//! and no `ErrorInfo`: for a unary call before the handler runs, for a
//! client stream when the handler reads the message. [`too_large`] maps that
//! status to the domain error (WriteBytes uses it on its stream), and
//! [`TooLargeStatus`] rewrites it in the response headers of every call, where
//! tonic puts an error that ends a call before any response message (our own
//! [`Error`] never maps to OUT_OF_RANGE, so nothing else is touched).
//! Responses are bounded below the encoding limit by construction (batches,
//! chunks, `max_file_bytes`), so no trailer needs the same treatment.

use crate::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::codegen::Service;
use tonic::codegen::http::{self, HeaderMap};
use tonic::server::NamedService;
use tonic::{Code, Status};

/// The domain error of a status tonic gave for a message over the size
/// limit (OUT_OF_RANGE); `None` for any other status.
pub fn too_large(status: &Status) -> Option<Error> {
    (status.code() == Code::OutOfRange).then(|| {
        let detail = status.message();
        Error::TooLarge(format!(
            "the message exceeds the server's size limit: {}",
            detail.strip_prefix("Error, ").unwrap_or(detail)
        ))
    })
}

/// Rewrites an OUT_OF_RANGE status in `headers` as [`too_large`]'s error.
fn rewrite(headers: &mut HeaderMap) {
    // Checked first: parsing the whole status copies the headers.
    let status_code = headers
        .get("grpc-status")
        .map(|v| Code::from_bytes(v.as_bytes()));
    if status_code != Some(Code::OutOfRange) {
        return;
    }
    let Some(error) = Status::from_header_map(headers).and_then(|s| too_large(&s)) else {
        return;
    };
    let mut fresh = HeaderMap::new();
    if Status::from(error).add_header(&mut fresh).is_ok() {
        for name in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
            headers.remove(name);
        }
        headers.extend(fresh);
    }
}

/// Wraps a gRPC service so an oversized request answers RESOURCE_EXHAUSTED
/// (see the module doc).
#[derive(Clone)]
pub struct TooLargeStatus<S>(pub S);

impl<S: NamedService> NamedService for TooLargeStatus<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for TooLargeStatus<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        let response = self.0.call(req);
        Box::pin(async move {
            let mut response = response.await?;
            rewrite(response.headers_mut());
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_types::StatusExt;

    #[test]
    fn out_of_range_in_headers_becomes_resource_exhausted_with_error_info() {
        let mut headers = HeaderMap::new();
        Status::out_of_range("Error, decoded message length too large: found 9 bytes")
            .add_header(&mut headers)
            .unwrap();
        rewrite(&mut headers);
        let status = Status::from_header_map(&headers).unwrap();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(
            status.message(),
            "too large: the message exceeds the server's size limit: decoded message length \
             too large: found 9 bytes"
        );
        assert_eq!(
            status.get_details_error_info().unwrap().reason,
            "INVALID_PARAM"
        );
    }

    #[test]
    fn other_statuses_are_left_alone() {
        let mut headers = HeaderMap::new();
        Status::not_found("x").add_header(&mut headers).unwrap();
        let before = headers.clone();
        rewrite(&mut headers);
        assert_eq!(headers, before);
    }
}
