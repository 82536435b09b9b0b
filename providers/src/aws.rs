//! The `aws` provider: Amazon S3 and S3-compatible stores through aws-sdk-s3.
//!
//! The client is built from static credentials only (no credential chain, so nothing
//! can reach an instance-metadata endpoint), with the SDK's own retries disabled:
//! [`crate::retry`] does the retrying. Buckets are hardened on every `ensure_bucket`
//! and the hardening is read back; what does not match becomes a warning.

mod admin;
mod upload;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::config::{BehaviorVersion, Region, StalledStreamProtectionConfig};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream as SdkByteStream;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::{self, BoxStream, StreamExt};

use crate::credentials::AwsCredentials;
use crate::error::{Error, ErrorKind, Result, kind_for_status};
use crate::options::{S3_MAX_DELETE_BATCH, StoreOptions};
use crate::retry::{Retrier, RetryStats};
use crate::store::{
    BoxReader, BucketOptions, BucketReport, ByteStream, DeleteReport, ListEntry, ObjectMeta,
    ObjectStore, ProviderKind, paged,
};

#[derive(Debug)]
pub(crate) struct S3Store {
    client: Client,
    /// Signs download URLs: `client`, or one for the public endpoint (Velero's
    /// `publicUrl`) when clients reach the store by another address.
    presigner: Client,
    region: String,
    retrier: Retrier,
    stats: Arc<RetryStats>,
    secrets: Vec<String>,
    part_size: usize,
    page_size: Option<i32>,
    delete_batch: usize,
    concurrency: usize,
    tls_only_policy: bool,
    immutability: Option<crate::store::Immutability>,
}

impl S3Store {
    pub(crate) fn new(
        creds: AwsCredentials,
        region: Option<&str>,
        opts: &StoreOptions,
    ) -> Result<Self> {
        let region = region
            .map(str::to_string)
            .or_else(|| creds.region.clone())
            .unwrap_or_else(|| "us-east-1".to_string());
        let static_creds = aws_sdk_s3::config::Credentials::new(
            creds.access_key_id.clone(),
            creds.secret_access_key.clone(),
            None,
            None,
            "granary-secret",
        );
        let timeouts = aws_sdk_s3::config::timeout::TimeoutConfig::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .operation_attempt_timeout(opts.request_timeout)
            .build();
        let mut b = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(region.clone()))
            .credentials_provider(static_creds)
            .retry_config(aws_sdk_s3::config::retry::RetryConfig::disabled())
            .timeout_config(timeouts)
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
            .force_path_style(creds.force_path_style);
        let public = creds
            .public_endpoint
            .as_ref()
            .map(|p| b.clone().endpoint_url(p.trim_end_matches('/')).build());
        if let Some(e) = &creds.endpoint {
            b = b.endpoint_url(e.trim_end_matches('/'));
        }
        let retrier = Retrier::new(opts.retry.clone());
        let client = Client::from_conf(b.build());
        Ok(S3Store {
            presigner: public.map_or_else(|| client.clone(), Client::from_conf),
            client,
            region,
            stats: retrier.stats(),
            retrier,
            secrets: vec![creds.secret_access_key.clone(), creds.access_key_id.clone()],
            part_size: opts.part_size.max(1),
            page_size: opts.list_page_size.map(|p| p.clamp(1, 1000) as i32),
            delete_batch: opts.delete_batch_size.clamp(1, S3_MAX_DELETE_BATCH),
            concurrency: opts.concurrency.clamp(1, 8),
            tls_only_policy: opts.tls_only_policy.unwrap_or_else(|| {
                creds
                    .endpoint
                    .as_deref()
                    .is_none_or(|e| e.starts_with("https://"))
            }),
            immutability: opts.immutability.clone(),
        })
    }

    /// Maps an SDK error to ours, scrubbed of secrets.
    fn err<E, R>(&self, e: SdkError<E, R>, what: impl std::fmt::Display) -> Error
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + HasStatus,
    {
        let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        sdk_error(e).context(what).scrubbed(&secrets)
    }

    async fn list_page(
        &self,
        bucket: &str,
        prefix: &str,
        delimiter: Option<&str>,
        token: Option<String>,
    ) -> Result<(Vec<ListEntry>, Option<String>)> {
        let out = self
            .retrier
            .run("list", || async {
                self.client
                    .list_objects_v2()
                    .bucket(bucket)
                    .prefix(prefix)
                    .set_delimiter(delimiter.filter(|d| !d.is_empty()).map(str::to_string))
                    .set_max_keys(self.page_size)
                    .set_continuation_token(token.clone())
                    .send()
                    .await
                    .map_err(|e| self.err(e, format_args!("list {bucket}/{prefix}")))
            })
            .await?;
        let mut entries: Vec<ListEntry> = out
            .contents()
            .iter()
            .filter_map(|o| {
                Some(ListEntry::Object(ObjectMeta {
                    key: o.key()?.to_string(),
                    size: o.size().unwrap_or(0).max(0) as u64,
                    last_modified: o.last_modified().and_then(to_chrono),
                    etag: o.e_tag().map(str::to_string),
                }))
            })
            .chain(
                out.common_prefixes()
                    .iter()
                    .filter_map(|p| p.prefix().map(|p| ListEntry::Prefix(p.to_string()))),
            )
            .collect();
        entries.sort_by(|a, b| a.name().cmp(b.name()));
        let next = if out.is_truncated().unwrap_or(false) {
            out.next_continuation_token().map(str::to_string)
        } else {
            None
        };
        Ok((entries, next))
    }
}

#[async_trait]
impl ObjectStore for S3Store {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Aws
    }

    fn retry_stats(&self) -> &RetryStats {
        &self.stats
    }

    async fn ensure_bucket(&self, bucket: &str, opts: &BucketOptions) -> Result<BucketReport> {
        admin::ensure_bucket(self, bucket, opts).await
    }

    async fn delete_bucket(&self, bucket: &str, empty_first: bool) -> Result<()> {
        admin::delete_bucket(self, bucket, empty_first).await
    }

    async fn put(&self, bucket: &str, key: &str, data: Bytes) -> Result<()> {
        self.retrier
            .run("put", || async {
                self.client
                    .put_object()
                    .bucket(bucket)
                    .key(key)
                    .body(SdkByteStream::from(data.clone()))
                    .send()
                    .await
                    .map_err(|e| self.err(e, format_args!("put {bucket}/{key}")))
            })
            .await
            .map(|_| ())
    }

    async fn put_reader(&self, bucket: &str, key: &str, reader: BoxReader) -> Result<u64> {
        upload::put_reader(self, bucket, key, reader).await
    }

    async fn get(&self, bucket: &str, key: &str) -> Result<ByteStream> {
        let out = self
            .retrier
            .run("get", || async {
                self.client
                    .get_object()
                    .bucket(bucket)
                    .key(key)
                    .send()
                    .await
                    .map_err(|e| self.err(e, format_args!("get {bucket}/{key}")))
            })
            .await?;
        let body = out.body;
        Ok(stream::try_unfold(body, |mut body| async move {
            match body.try_next().await {
                Ok(Some(chunk)) => Ok(Some((chunk, body))),
                Ok(None) => Ok(None),
                Err(e) => Err(Error::new(
                    ErrorKind::Transient,
                    format!("reading object body: {e}"),
                )),
            }
        })
        .boxed())
    }

    async fn presign_get(
        &self,
        bucket: &str,
        key: &str,
        ttl: std::time::Duration,
    ) -> Result<String> {
        // SigV4 query signing is local: the SDK signs with the static key, no request.
        let config = aws_sdk_s3::presigning::PresigningConfig::expires_in(ttl).map_err(|e| {
            Error::new(
                ErrorKind::Invalid,
                format!("download URL lifetime {ttl:?}: {e}"),
            )
        })?;
        let req = self
            .presigner
            .get_object()
            .bucket(bucket)
            .key(key)
            .presigned(config)
            .await
            .map_err(|e| self.err(e, format_args!("sign a download URL for {bucket}/{key}")))?;
        Ok(req.uri().to_string())
    }

    async fn head(&self, bucket: &str, key: &str) -> Result<ObjectMeta> {
        let out = self
            .retrier
            .run("head", || async {
                self.client
                    .head_object()
                    .bucket(bucket)
                    .key(key)
                    .send()
                    .await
                    .map_err(|e| self.err(e, format_args!("head {bucket}/{key}")))
            })
            .await?;
        Ok(ObjectMeta {
            key: key.to_string(),
            size: out.content_length().unwrap_or(0).max(0) as u64,
            last_modified: out.last_modified().and_then(to_chrono),
            etag: out.e_tag().map(str::to_string),
        })
    }

    fn list<'a>(
        &'a self,
        bucket: &'a str,
        prefix: &'a str,
        delimiter: Option<&'a str>,
    ) -> BoxStream<'a, Result<ListEntry>> {
        paged(move |token| self.list_page(bucket, prefix, delimiter, token))
    }

    async fn delete_many(&self, bucket: &str, keys: &[String]) -> Result<DeleteReport> {
        let mut report = DeleteReport::default();
        for chunk in keys.chunks(self.delete_batch) {
            let objects: Vec<ObjectIdentifier> = chunk
                .iter()
                .map(|k| {
                    ObjectIdentifier::builder()
                        .key(k)
                        .build()
                        .map_err(|e| Error::new(ErrorKind::Invalid, format!("delete key: {e}")))
                })
                .collect::<Result<_>>()?;
            let delete = Delete::builder()
                .set_objects(Some(objects))
                .quiet(true)
                .build()
                .map_err(|e| Error::new(ErrorKind::Invalid, format!("delete request: {e}")))?;
            let requests = AtomicU64::new(0);
            self.retrier
                .run("delete_many", || async {
                    requests.fetch_add(1, Ordering::Relaxed);
                    let out = self
                        .client
                        .delete_objects()
                        .bucket(bucket)
                        .delete(delete.clone())
                        .send()
                        .await
                        .map_err(|e| {
                            self.err(e, format_args!("delete {} keys in {bucket}", chunk.len()))
                        })?;
                    // Per-key failures: retry the whole (idempotent) batch when any is
                    // retryable; otherwise report the first.
                    let mut worst: Option<Error> = None;
                    for e in out.errors() {
                        let code = e.code().unwrap_or("");
                        if code == "NoSuchKey" {
                            continue;
                        }
                        let kind =
                            kind_for_status(if code == "InternalError" { 500 } else { 400 }, code);
                        let err = Error::new(
                            kind,
                            format!(
                                "delete {bucket}/{}: {code}: {}",
                                e.key().unwrap_or(""),
                                e.message().unwrap_or("")
                            ),
                        );
                        if worst
                            .as_ref()
                            .is_none_or(|w| !w.is_retryable() && err.is_retryable())
                        {
                            worst = Some(err);
                        }
                    }
                    match worst {
                        Some(e) => Err(e),
                        None => Ok(out),
                    }
                })
                .await?;
            report.requests += requests.load(Ordering::Relaxed);
            report.deleted += chunk.len() as u64;
        }
        Ok(report)
    }

    async fn copy(
        &self,
        src_bucket: &str,
        src_key: &str,
        dst_bucket: &str,
        dst_key: &str,
    ) -> Result<()> {
        let source = format!("{src_bucket}/{}", encode_key(src_key));
        self.retrier
            .run("copy", || async {
                self.client
                    .copy_object()
                    .copy_source(&source)
                    .bucket(dst_bucket)
                    .key(dst_key)
                    .send()
                    .await
                    .map_err(|e| {
                        self.err(
                            e,
                            format_args!("copy {src_bucket}/{src_key} to {dst_bucket}/{dst_key}"),
                        )
                    })
            })
            .await
            .map(|_| ())
    }

    fn delete_batch_size(&self) -> usize {
        self.delete_batch
    }
}

/// Gives the SDK's raw response type a status code without naming its concrete type.
pub(crate) trait HasStatus {
    fn status_code(&self) -> u16;
}

impl HasStatus for aws_sdk_s3::config::http::HttpResponse {
    fn status_code(&self) -> u16 {
        self.status().as_u16()
    }
}

fn sdk_error<E, R>(e: SdkError<E, R>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + HasStatus,
{
    match &e {
        SdkError::ConstructionFailure(_) => Error::new(
            ErrorKind::Invalid,
            format!("request could not be built: {}", source_chain(&e)),
        ),
        SdkError::TimeoutError(_) => Error::new(ErrorKind::Transient, "request timed out"),
        SdkError::DispatchFailure(_) => Error::new(
            ErrorKind::Transient,
            format!("connection failed: {}", source_chain(&e)),
        ),
        SdkError::ResponseError(r) => {
            let status = r.raw().status_code();
            let kind = if status >= 400 {
                kind_for_status(status, "")
            } else {
                ErrorKind::Transient
            };
            Error::new(kind, format!("HTTP {status}: unreadable response"))
        }
        SdkError::ServiceError(se) => {
            let status = se.raw().status_code();
            let code = se.err().code().unwrap_or("");
            let msg = se.err().message().unwrap_or("");
            Error::new(
                kind_for_status(status, code),
                format!("HTTP {status} {code}: {msg}"),
            )
        }
        _ => Error::new(ErrorKind::Transient, source_chain(&e)),
    }
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn to_chrono(t: &aws_sdk_s3::primitives::DateTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.secs(), t.subsec_nanos())
}

/// Percent-encodes a key for `x-amz-copy-source`, keeping `/`.
fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn copy_source_encoding() {
        assert_eq!(super::encode_key("a b/ü+%"), "a%20b/%C3%BC%2B%25");
    }
}
