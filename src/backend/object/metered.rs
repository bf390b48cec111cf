//! The object tier's HTTP client, counted: `object_store`'s own reqwest
//! client, each request it sends (a retry too) counted by method and
//! outcome with its latency (`crate::metrics::object_tier`). Counting at
//! the HTTP layer sees every attempt, which the store's API above it hides
//! behind its retries.

use crate::metrics::object_tier::{self, Outcome};
use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};
use std::time::Instant;

/// Connects `object_store`'s reqwest client, wrapped to count its requests.
#[derive(Debug, Default)]
pub struct MeteredConnector;

impl HttpConnector for MeteredConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(Metered(inner)))
    }
}

/// A client whose requests are counted.
#[derive(Debug)]
struct Metered(HttpClient);

#[async_trait::async_trait]
impl HttpService for Metered {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let method = req.method().clone();
        let start = Instant::now();
        let answer = self.0.execute(req).await;
        let outcome = match &answer {
            Ok(response) => {
                let status = response.status();
                if status.is_success() || status.is_redirection() {
                    Outcome::Ok
                } else if status.is_server_error() || status.as_u16() == 429 {
                    Outcome::Retryable
                } else {
                    Outcome::Answered
                }
            }
            Err(_) => Outcome::Retryable,
        };
        object_tier::request(method.as_str(), outcome, start.elapsed().as_secs_f64());
        answer
    }
}
