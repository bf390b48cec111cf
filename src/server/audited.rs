//! The audit of every gRPC call of a service: one record per call
//! (docs/audit.md § Coverage). [`Audited`] wraps a service outside its
//! interceptor: it opens the call's [`Trail`] and puts it in the
//! request's extensions, where the interceptor hands it to the
//! [`crate::service::Caller`] (so the grant checks note their paths on
//! it); when the handler has answered it writes the record with the
//! call's status, and a change's record is on disk before the answer
//! leaves. A call the interceptor refused (a bad token) is recorded too,
//! as denied.

use crate::audit::{Audit, Class, Outcome, Surface, Trail};
use crate::service::SURFACE_HEADER;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::codegen::http;
use tonic::server::NamedService;
use tonic::{Code, Status};

/// A gRPC service whose every call is audited.
#[derive(Clone)]
pub struct Audited<S> {
    inner: S,
    audit: Audit,
    /// The class of every call of the service (`Admin` for Access), or
    /// `None` to take it from the grant checks.
    class: Option<Class>,
}

impl<S> Audited<S> {
    /// `inner`, its calls recorded in `audit`, of class `class` when given.
    pub fn new(inner: S, audit: Audit, class: Option<Class>) -> Audited<S> {
        Audited {
            inner,
            audit,
            class,
        }
    }
}

impl<S: NamedService> NamedService for Audited<S> {
    const NAME: &'static str = S::NAME;
}

/// `Filesystem/Read` of `/agentvfs.v1.Filesystem/Read`.
fn operation(path: &str) -> &str {
    let method = path.rsplit('/').next().unwrap_or(path);
    let service = path
        .rsplit('/')
        .nth(1)
        .map_or("", |s| s.rsplit('.').next().unwrap_or(s));
    &path[path.len() - method.len() - service.len() - 1..]
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for Audited<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<ReqBody>) -> Self::Future {
        if !self.audit.is_recording() {
            let response = self.inner.call(req);
            return Box::pin(async move { Ok(response.await?.map(Body::new)) });
        }
        if let Err(refused) = self.audit.admit() {
            return Box::pin(async move { Ok(Status::from(refused).into_http()) });
        }
        let declared = req
            .headers()
            .get(SURFACE_HEADER)
            .and_then(|v| v.to_str().ok());
        let trail: Trail = self.audit.trail(Surface::declared(declared));
        trail.operation(operation(req.uri().path()), "");
        if let Some(class) = self.class {
            trail.class(class);
        }
        req.extensions_mut().insert(trail.clone());
        let (audit, started) = (self.audit.clone(), Instant::now());
        let response = self.inner.call(req);
        Box::pin(async move {
            let response = response.await?;
            let status = response
                .headers()
                .get("grpc-status")
                .map(|_| Status::from_header_map(response.headers()));
            let (code, message) = match status.flatten() {
                Some(status) => (status.code(), status.message().to_owned()),
                None => (Code::Ok, String::new()),
            };
            if code == Code::Unimplemented {
                // A method the service lacks: its name is the client's word,
                // never a metric's label.
                trail.operation("unknown", "");
            }
            let outcome = Outcome::of_grpc_code(code as i32);
            match audit.finish(&trail, outcome, &message, started).await {
                Ok(()) => Ok(response.map(Body::new)),
                Err(unrecorded) => Ok(Status::from(unrecorded).into_http()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn operations_are_named_by_service_and_method() {
        assert_eq!(
            super::operation("/agentvfs.v1.Filesystem/Read"),
            "Filesystem/Read"
        );
        assert_eq!(
            super::operation("/agentvfs.v1.Access/MintHandle"),
            "Access/MintHandle"
        );
    }
}
