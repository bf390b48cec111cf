//! The object tier's one door to its bucket: `object_store`'s S3 client,
//! driven on a runtime of the tier's own, every call bounded in time.
//!
//! The tier's `Backend` methods are synchronous and run on blocking threads
//! (`service::blocking`); each composes its S3 steps into one future and
//! waits for it with [`Bucket::run`], which spawns it on the tier's runtime
//! (so `object_store`'s HTTP client always has its reactor) and gives up at
//! the call's deadline. `object_store` retries transient failures itself
//! (5xx, 503 SlowDown, resets) with exponential backoff, each attempt bounded
//! by the request timeout, all of them by the call's deadline.
//!
//! Errors, mapped once here (docs/object-storage.md § Failures): a store
//! that cannot be reached or keeps failing is UNAVAILABLE naming the
//! endpoint and bucket; one that refuses the credentials UNAVAILABLE saying
//! so; a call past its deadline DEADLINE_EXCEEDED; a key that cannot be an
//! S3 key INVALID_ARGUMENT. Missing keys, failed preconditions and
//! unmodified objects are answers, not errors ([`Put`], `Option`).
//!
//! There is no conditional DELETE here on purpose: stores differ on it
//! (versitygw answers `DELETE If-Match` on a missing key with 204, and its
//! check races a concurrent PUT), so no outcome may rest on one
//! (docs/object-storage.md § What compare-and-set builds on). Only keys no
//! writer can race (a blob no head names, a pruned log record) are deleted.

use crate::error::{Error, Result};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode,
    PutOptions, PutPayload, RetryConfig, UpdateVersion,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Where the bucket is and how to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketOptions {
    /// The bucket's name.
    pub bucket: String,
    /// The S3 endpoint (`None`: AWS's, or `AWS_ENDPOINT_URL`).
    pub endpoint: Option<String>,
    /// The region (`None`: `AWS_REGION`, else `us-east-1`).
    pub region: Option<String>,
    /// Address the bucket in the path (`endpoint/bucket/key`), as MinIO and
    /// versitygw expect, instead of as a host name (`bucket.endpoint/key`).
    pub path_style: bool,
    /// Most time one call may take, retries included.
    pub timeout: Duration,
    /// Most time one HTTP request may take.
    pub request_timeout: Duration,
}

/// A conditional write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Put {
    /// Only if the key does not exist (`If-None-Match: *`).
    Create,
    /// Only if the key holds this ETag (`If-Match`).
    Replace(String),
    /// Whatever the key holds.
    Overwrite,
}

/// An object read whole: its bytes and its ETag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// The body.
    pub bytes: Bytes,
    /// Its ETag (unique per version of a head: its body holds the version).
    pub etag: String,
}

/// The bucket of one object mount.
pub struct Bucket {
    s3: Arc<AmazonS3>,
    /// Drives the S3 client; shut down in the background when dropped (a
    /// runtime may not be dropped on another runtime's thread).
    runtime: Option<tokio::runtime::Runtime>,
    timeout: Duration,
    /// `bucket B at ENDPOINT`, for messages.
    shown: String,
}

impl Drop for Bucket {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A key as `object_store` takes it; the tier's keys are always valid
/// (`keys` encodes away `.` segments and control characters).
fn key(raw: &str) -> Result<Key> {
    Key::parse(raw).map_err(|e| Error::InvalidArgument(format!("object key {raw:?}: {e}")))
}

impl Bucket {
    /// A client of the bucket of `options`: credentials from the standard
    /// AWS environment variables, else from `credentials` (the AWS files).
    pub fn open(
        options: &BucketOptions,
        credentials: Option<&super::Credentials>,
    ) -> Result<Bucket> {
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&options.bucket)
            .with_virtual_hosted_style_request(!options.path_style);
        let endpoint = options
            .endpoint
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        if let Some(endpoint) = &endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        let region = options
            .region
            .clone()
            .or_else(|| std::env::var("AWS_REGION").ok())
            .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
            .unwrap_or_else(|| "us-east-1".into());
        builder = builder.with_region(region);
        if let Some(c) = credentials {
            builder = builder
                .with_access_key_id(&c.access_key_id)
                .with_secret_access_key(&c.secret_access_key);
            if let Some(token) = &c.session_token {
                builder = builder.with_token(token);
            }
        }
        let http = endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"));
        let client = ClientOptions::new()
            .with_allow_http(http)
            .with_connect_timeout(options.request_timeout.min(Duration::from_secs(5)))
            .with_timeout(options.request_timeout);
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(50),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: 8,
            retry_timeout: options.timeout,
        };
        let s3 = builder
            .with_client_options(client)
            .with_retry(retry)
            .with_http_connector(super::metered::MeteredConnector)
            .build()
            .map_err(|e| Error::InvalidArgument(format!("object store: {e}")))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("agentvfs-s3")
            .enable_all()
            .build()
            .map_err(|e| Error::Internal(format!("cannot start the object tier's runtime: {e}")))?;
        let shown = format!(
            "bucket {} at {}",
            options.bucket,
            endpoint.as_deref().unwrap_or("AWS S3")
        );
        Ok(Bucket {
            s3: Arc::new(s3),
            runtime: Some(runtime),
            timeout: options.timeout,
            shown,
        })
    }

    /// `bucket B at ENDPOINT`.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Runs `work` on the tier's runtime and waits for it, at most the
    /// call's deadline (DEADLINE_EXCEEDED naming `what` past it). Call from a
    /// thread that may block (never from async code).
    pub fn run<T: Send + 'static>(
        &self,
        what: &str,
        work: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| Error::Unavailable("the object tier is shutting down".into()))?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let deadline = self.timeout;
        runtime.spawn(async move {
            let done = tokio::time::timeout(deadline, work).await;
            // The caller may have gone: nothing waits for the answer then.
            let _ = tx.send(done);
        });
        match rx.recv() {
            Ok(Ok(done)) => done,
            Ok(Err(_elapsed)) => Err(Error::Timeout(format!(
                "the object store ({}) did not finish {what} within {} s",
                self.shown,
                deadline.as_secs()
            ))),
            Err(_) => Err(Error::Unavailable(
                "the object tier is shutting down".into(),
            )),
        }
    }

    /// Starts `work` on the tier's runtime without waiting for it (a
    /// listing feeding a walk, an upload fed from this thread).
    pub fn spawn<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<tokio::task::JoinHandle<Result<T>>> {
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| Error::Unavailable("the object tier is shutting down".into()))?;
        Ok(runtime.spawn(work))
    }

    /// A handle to the client for futures given to [`Bucket::run`].
    pub fn client(&self) -> Client {
        Client {
            s3: self.s3.clone(),
            shown: self.shown.clone().into(),
        }
    }
}

/// The S3 error code in the text of a failed request (`<Code>…</Code>`).
fn s3_code(text: &str) -> Option<&str> {
    let start = text.find("<Code>")? + "<Code>".len();
    let len = text[start..].find("</Code>")?;
    Some(&text[start..start + len])
}

/// The S3 calls, cheap to clone into futures.
#[derive(Clone)]
pub struct Client {
    s3: Arc<AmazonS3>,
    shown: Arc<str>,
}

/// One page of a listing: objects and, with a delimiter, common prefixes
/// (as keys ending with the delimiter), in key order.
#[derive(Debug, Default)]
pub struct Page {
    /// The objects listed.
    pub objects: Vec<ObjectMeta>,
    /// The common prefixes listed (subdirectories).
    pub prefixes: Vec<String>,
    /// There is more after this page.
    pub truncated: bool,
}

impl Client {
    /// Maps a failure of the store (not an answer) to the domain error.
    fn failed(&self, what: &str, err: object_store::Error) -> Error {
        use object_store::Error as E;
        match &err {
            E::PermissionDenied { .. } | E::Unauthenticated { .. } => Error::Unavailable(format!(
                "the object store ({}) refused the credentials while {what}: {err}",
                self.shown
            )),
            E::InvalidPath { .. } => Error::InvalidArgument(format!("{what}: {err}")),
            _ => {
                let text = err.to_string();
                match s3_code(&text) {
                    Some("ObjectParentIsFile") => {
                        Error::NotDirectory(format!("{what}: a parent is a file"))
                    }
                    Some("ExistingObjectIsDirectory") => {
                        Error::IsDirectory(format!("{what}: it is a directory"))
                    }
                    Some(
                        code @ ("InvalidAccessKeyId"
                        | "SignatureDoesNotMatch"
                        | "AccessDenied"
                        | "XAdminUserNotFound"
                        | "InvalidToken"
                        | "ExpiredToken"),
                    ) => Error::Unavailable(format!(
                        "the object store ({}) refused the credentials ({code}) while {what}",
                        self.shown
                    )),
                    Some("NoSuchBucket") => Error::Unavailable(format!(
                        "the object store has no such bucket ({}; NoSuchBucket)",
                        self.shown
                    )),
                    _ => Error::Unavailable(format!(
                        "the object store ({}) failed while {what}: {err}",
                        self.shown
                    )),
                }
            }
        }
    }

    /// The object at `raw`, or `None`.
    pub async fn get(&self, raw: &str) -> Result<Option<Object>> {
        self.get_unless(raw, None).await.map(|got| got.flatten())
    }

    /// The object at `raw` unless it still has ETag `cached`: `None` when
    /// missing, `Some(None)` when unchanged, `Some(Some(object))` otherwise.
    pub async fn get_unless(
        &self,
        raw: &str,
        cached: Option<&str>,
    ) -> Result<Option<Option<Object>>> {
        let options = GetOptions {
            if_none_match: cached.map(str::to_owned),
            ..GetOptions::default()
        };
        let what = format!("reading {raw}");
        match self.s3.get_opts(&key(raw)?, options).await {
            Ok(got) => {
                let etag = got.meta.e_tag.clone().unwrap_or_default();
                let bytes = got.bytes().await.map_err(|e| self.failed(&what, e))?;
                Ok(Some(Some(Object { bytes, etag })))
            }
            Err(object_store::Error::NotModified { .. }) => Ok(Some(None)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed(&what, e)),
        }
    }

    /// Bytes `range` of the object at `raw` (`None`: missing).
    pub async fn get_range(&self, raw: &str, range: std::ops::Range<u64>) -> Result<Option<Bytes>> {
        match self.s3.get_range(&key(raw)?, range).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed(&format!("reading {raw}"), e)),
        }
    }

    /// Writes `bytes` at `raw` under `mode`: the new ETag, or `None` when
    /// the condition failed (it existed for `Create`, another ETag or none
    /// for `Replace`).
    pub async fn put(&self, raw: &str, bytes: Bytes, mode: Put) -> Result<Option<String>> {
        let mode = match mode {
            Put::Create => PutMode::Create,
            Put::Replace(etag) => PutMode::Update(UpdateVersion {
                e_tag: Some(etag),
                version: None,
            }),
            Put::Overwrite => PutMode::Overwrite,
        };
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        match self
            .s3
            .put_opts(&key(raw)?, PutPayload::from(bytes), options)
            .await
        {
            Ok(done) => Ok(Some(done.e_tag.unwrap_or_default())),
            // S3 answers If-Match on a missing key with 404, not 412.
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. }
                | object_store::Error::NotFound { .. },
            ) => Ok(None),
            Err(e) => Err(self.failed(&format!("writing {raw}"), e)),
        }
    }

    /// Puts `bytes` at `raw` under `mode` as [`Client::put`] does; when the
    /// condition fails, reads the key, and if it holds exactly `bytes` the
    /// put landed after all (a retried request whose first answer was lost
    /// finds its own write: every body the tier puts conditionally holds a
    /// random fence, so no other writer's bytes are equal).
    pub async fn put_exact(&self, raw: &str, bytes: Bytes, mode: Put) -> Result<Option<String>> {
        if let Some(etag) = self.put(raw, bytes.clone(), mode).await? {
            return Ok(Some(etag));
        }
        Ok(self
            .get(raw)
            .await?
            .filter(|object| object.bytes == bytes)
            .map(|object| object.etag))
    }

    /// Uploads the content `pieces` bring at `raw` in parts (multipart
    /// upload, aborted on any failure); returns its size.
    pub async fn upload(
        &self,
        raw: &str,
        mut pieces: tokio::sync::mpsc::Receiver<Result<Bytes>>,
    ) -> Result<u64> {
        let what = format!("uploading {raw}");
        let upload = self
            .s3
            .put_multipart(&key(raw)?)
            .await
            .map_err(|e| self.failed(&what, e))?;
        let mut writer = object_store::WriteMultipart::new(upload);
        let mut size = 0u64;
        while let Some(piece) = pieces.recv().await {
            match piece {
                Ok(bytes) => {
                    size += bytes.len() as u64;
                    writer
                        .wait_for_capacity(4)
                        .await
                        .map_err(|e| self.failed(&what, e))?;
                    writer.put(bytes);
                }
                Err(err) => {
                    let _ = writer.abort().await;
                    return Err(err);
                }
            }
        }
        writer.finish().await.map_err(|e| self.failed(&what, e))?;
        Ok(size)
    }

    /// Deletes the object at `raw` (deleting a missing key succeeds).
    pub async fn delete(&self, raw: &str) -> Result<()> {
        self.s3
            .delete(&key(raw)?)
            .await
            .map_err(|e| self.failed(&format!("deleting {raw}"), e))
    }

    /// Copies the object at `from` to `to` inside the store.
    pub async fn copy(&self, from: &str, to: &str) -> Result<()> {
        self.s3
            .copy(&key(from)?, &key(to)?)
            .await
            .map_err(|e| self.failed(&format!("copying {from} to {to}"), e))
    }

    /// Every object below `prefix` (which ends with `/`) after the key
    /// `offset` (all when `None`), in key order, fetched page by page as the
    /// stream is read.
    pub fn list_after(
        &self,
        prefix: &str,
        offset: Option<&str>,
    ) -> Result<BoxStream<'static, Result<ObjectMeta>>> {
        let trimmed = key(prefix.trim_end_matches('/'))?;
        let this = self.clone();
        let listing = match offset {
            Some(offset) => self.s3.list_with_offset(Some(&trimmed), &key(offset)?),
            None => self.s3.list(Some(&trimmed)),
        };
        let what = format!("listing {prefix}");
        Ok(listing
            .map(move |item| item.map_err(|e| this.failed(&what, e)))
            .boxed())
    }

    /// One page of at most `max_keys` keys starting with `prefix` (byte
    /// for byte, not by path segment) after the key `after`, and with
    /// `delimiter`, their common prefixes. S3's `start-after` pages keys
    /// without a token, so a caller resumes after the last key it saw.
    pub async fn page(
        &self,
        prefix: &str,
        after: Option<&str>,
        max_keys: usize,
        delimiter: bool,
    ) -> Result<Page> {
        use object_store::list::{PaginatedListOptions, PaginatedListStore};
        let options = PaginatedListOptions {
            offset: after.map(str::to_owned),
            delimiter: delimiter.then_some(std::borrow::Cow::Borrowed("/")),
            max_keys: Some(max_keys),
            ..Default::default()
        };
        let page = self
            .s3
            .list_paginated(Some(prefix), options)
            .await
            .map_err(|e| self.failed(&format!("listing {prefix}"), e))?;
        Ok(Page {
            objects: page.result.objects,
            prefixes: page
                .result
                .common_prefixes
                .into_iter()
                .map(|p| format!("{p}/"))
                .collect(),
            truncated: page.page_token.is_some(),
        })
    }

    /// Every object whose key starts with `prefix`, page by page, in key
    /// order: for listings bounded by what they list (a file's past
    /// versions, the deployment registry).
    pub async fn objects_below(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let mut out: Vec<ObjectMeta> = Vec::new();
        loop {
            let after = out.last().map(|m| m.location.to_string());
            let page = self.page(prefix, after.as_deref(), 1000, false).await?;
            let done = !page.truncated || page.objects.is_empty();
            out.extend(page.objects);
            if done {
                return Ok(out);
            }
        }
    }

    /// Every common prefix one level below `prefix` (each ending with
    /// `/`), page by page, in key order.
    pub async fn prefixes_below(&self, prefix: &str) -> Result<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        loop {
            // Past every key below the last prefix listed.
            let after = out.last().map(|p| format!("{p}{}", char::MAX));
            let page = self.page(prefix, after.as_deref(), 1000, true).await?;
            let done = !page.truncated || page.prefixes.is_empty();
            out.extend(page.prefixes);
            if done {
                return Ok(out);
            }
        }
    }
}
