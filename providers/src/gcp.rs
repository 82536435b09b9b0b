//! The `gcp` provider: Google Cloud Storage through `gcloud-storage` (JSON API, which
//! fake-gcs-server speaks; Google's new crate of that name uses gRPC for buckets,
//! listing and deletes, which no emulator serves).
//!
//! Buckets are created in a location with uniform bucket-level access and public
//! access prevention, read back afterwards. Large objects go up as resumable uploads,
//! one chunk (a multiple of 256 KiB) at a time. The crate does no retries itself.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use gcloud_storage::client::{Client, ClientConfig};
use gcloud_storage::http::Error as GcsError;
use gcloud_storage::http::buckets::delete::DeleteBucketRequest;
use gcloud_storage::http::buckets::get::GetBucketRequest;
use gcloud_storage::http::buckets::insert::{
    BucketCreationConfig, InsertBucketParam, InsertBucketRequest,
};
use gcloud_storage::http::buckets::{IamConfiguration, iam_configuration};
use gcloud_storage::http::objects::delete::DeleteObjectRequest;
use gcloud_storage::http::objects::download::Range;
use gcloud_storage::http::objects::get::GetObjectRequest;
use gcloud_storage::http::objects::list::ListObjectsRequest;
use gcloud_storage::http::objects::rewrite::RewriteObjectRequest;
use gcloud_storage::http::objects::upload::{Media, UploadObjectRequest, UploadType};
use gcloud_storage::http::resumable_upload_client::ChunkSize;

use crate::credentials::GcpCredentials;
use crate::error::{Error, ErrorKind, Result, kind_for_status};
use crate::gcs_sign::GcsUrlSigner;
use crate::options::StoreOptions;
use crate::retry::{Retrier, RetryStats};
use crate::store::{
    BoxReader, BucketOptions, BucketReport, ByteStream, DeleteReport, ListEntry, ObjectMeta,
    ObjectStore, ProviderKind, delete_each, paged, read_part,
};

/// Resumable upload chunks must be multiples of this.
const GCS_CHUNK_QUANTUM: usize = 256 * 1024;

pub(crate) struct GcsStore {
    client: Client,
    /// Signs download URLs, or why it cannot (no key, no private key).
    signer: std::result::Result<GcsUrlSigner, String>,
    project: String,
    location: String,
    retrier: Retrier,
    stats: Arc<RetryStats>,
    part_size: usize,
    page_size: Option<i32>,
    delete_batch: usize,
    concurrency: usize,
}

impl std::fmt::Debug for GcsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcsStore")
            .field("project", &self.project)
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl GcsStore {
    pub(crate) async fn new(
        creds: GcpCredentials,
        region: Option<&str>,
        opts: &StoreOptions,
    ) -> Result<Self> {
        let mut config = ClientConfig::default();
        // reqwest's default client waits forever on a silent peer. Connect and per-read
        // timeouts bound every request without cutting a long, steadily flowing transfer.
        let http = reqwest::Client::builder()
            .connect_timeout(opts.request_timeout)
            .read_timeout(opts.request_timeout)
            .build()
            .map_err(|e| Error::new(ErrorKind::Invalid, format!("GCS HTTP client: {e}")))?;
        config.http = Some(reqwest_middleware::ClientBuilder::new(http).build());
        if let Some(e) = &creds.endpoint {
            config.storage_endpoint = e.trim_end_matches('/').to_string();
        }
        let signer = match &creds.service_account_json {
            None => Err(
                "signed download URLs need a service account key with a private key; this location's GCS credential has none (anonymous access)".to_string(),
            ),
            Some(json) => GcsUrlSigner::from_service_account_json(json, creds.endpoint.as_deref())
                .map_err(|e| e.message().to_string()),
        };
        let mut project = opts.gcp_project.clone();
        let config = match &creds.service_account_json {
            None => config.anonymous(),
            Some(json) => {
                if project.is_none() {
                    project = serde_json::from_str::<serde_json::Value>(json)
                        .ok()
                        .and_then(|v| {
                            v.get("project_id")
                                .and_then(|p| p.as_str())
                                .map(str::to_string)
                        });
                }
                let file = gcloud_storage::client::google_cloud_auth::credentials::CredentialsFile::new_from_str(json)
                    .await
                    .map_err(|_| Error::new(ErrorKind::Invalid, "secret key `serviceaccount.json` is not a usable service account key"))?;
                config.with_credentials(file).await.map_err(|e| {
                    Error::new(
                        ErrorKind::Unauthenticated,
                        format!("service account token source: {e}"),
                    )
                    .scrubbed(&[json.as_str()])
                })?
            }
        };
        let project = match (project, &creds.service_account_json) {
            (Some(p), _) => p,
            // Emulators accept any project.
            (None, None) => "granary".to_string(),
            (None, Some(_)) => {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    "secret key `serviceaccount.json` has no `project_id` and no project was configured",
                ));
            }
        };
        let retrier = Retrier::new(opts.retry.clone());
        // Chunks must be multiples of 256 KiB.
        let part_size =
            (opts.part_size.max(GCS_CHUNK_QUANTUM) / GCS_CHUNK_QUANTUM) * GCS_CHUNK_QUANTUM;
        Ok(GcsStore {
            client: Client::new(config),
            signer,
            project,
            location: region.unwrap_or("US").to_string(),
            stats: retrier.stats(),
            retrier,
            part_size,
            page_size: opts.list_page_size.map(|p| p.clamp(1, 1000) as i32),
            delete_batch: opts.delete_batch_size.max(1),
            concurrency: opts.concurrency.max(1),
        })
    }

    async fn list_page(
        &self,
        bucket: &str,
        prefix: &str,
        delimiter: Option<&str>,
        token: Option<String>,
    ) -> Result<(Vec<ListEntry>, Option<String>)> {
        let resp = self
            .retrier
            .run("list", || async {
                self.client
                    .list_objects(&ListObjectsRequest {
                        bucket: bucket.to_string(),
                        prefix: (!prefix.is_empty()).then(|| prefix.to_string()),
                        delimiter: delimiter.filter(|d| !d.is_empty()).map(str::to_string),
                        max_results: self.page_size,
                        page_token: token.clone(),
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| gcs_error(e, true).context(format_args!("list {bucket}/{prefix}")))
            })
            .await?;
        let mut entries: Vec<ListEntry> = resp
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|o| {
                ListEntry::Object(ObjectMeta {
                    key: o.name,
                    size: o.size.max(0) as u64,
                    last_modified: o
                        .updated
                        .and_then(|t| DateTime::from_timestamp(t.unix_timestamp(), t.nanosecond())),
                    etag: Some(o.etag).filter(|e| !e.is_empty()),
                })
            })
            .chain(
                resp.prefixes
                    .unwrap_or_default()
                    .into_iter()
                    .map(ListEntry::Prefix),
            )
            .collect();
        entries.sort_by(|a, b| a.name().cmp(b.name()));
        Ok((entries, resp.next_page_token.filter(|t| !t.is_empty())))
    }
}

impl GcsStore {
    /// For a bare 404: BucketNotFound when the bucket is absent, NotFound otherwise.
    async fn which_missing(&self, bucket: &str, message: String) -> Error {
        let req = GetBucketRequest {
            bucket: bucket.to_string(),
            ..Default::default()
        };
        let missing = match self.client.get_bucket(&req).await {
            Err(e) => gcs_error(e, true).kind() == ErrorKind::BucketNotFound,
            Ok(_) => false,
        };
        let kind = if missing {
            ErrorKind::BucketNotFound
        } else {
            ErrorKind::NotFound
        };
        Error::new(kind, message)
    }
}

/// Maps a crate error. `bucket_scope`: a 404 here means the bucket is missing (bucket
/// and list calls); elsewhere a 404 is decided by the message.
fn gcs_error(e: GcsError, bucket_scope: bool) -> Error {
    let (status, reason, message) = match &e {
        GcsError::Response(r) => (
            Some(r.code),
            r.errors
                .first()
                .map(|i| i.reason.clone())
                .unwrap_or_default(),
            r.message.clone(),
        ),
        GcsError::HttpClient(h) => (h.status().map(|s| s.as_u16()), String::new(), e.to_string()),
        GcsError::TokenSource(_) => {
            return Error::new(ErrorKind::Unauthenticated, format!("token source: {e}"));
        }
        _ => (None, String::new(), e.to_string()),
    };
    let Some(status) = status else {
        return Error::new(ErrorKind::Transient, message);
    };
    let mut kind = kind_for_status(status, &reason);
    if kind == ErrorKind::NotFound
        && (bucket_scope || message.to_ascii_lowercase().contains("bucket"))
    {
        kind = ErrorKind::BucketNotFound;
    }
    Error::new(kind, format!("HTTP {status} {reason}: {message}"))
}

fn object_error(e: GcsError) -> Error {
    gcs_error(e, false)
}

#[async_trait]
impl ObjectStore for GcsStore {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Gcp
    }

    fn retry_stats(&self) -> &RetryStats {
        &self.stats
    }

    async fn ensure_bucket(&self, bucket: &str, opts: &BucketOptions) -> Result<BucketReport> {
        let created = self
            .retrier
            .run("insert_bucket", || async {
                let req = InsertBucketRequest {
                    name: bucket.to_string(),
                    param: InsertBucketParam {
                        project: self.project.clone(),
                        ..Default::default()
                    },
                    bucket: BucketCreationConfig {
                        location: self.location.clone(),
                        iam_configuration: Some(IamConfiguration {
                            uniform_bucket_level_access: Some(
                                iam_configuration::UniformBucketLevelAccess {
                                    enabled: true,
                                    locked_time: None,
                                },
                            ),
                            public_access_prevention: Some(
                                iam_configuration::PublicAccessPrevention::Enforced,
                            ),
                        }),
                        ..Default::default()
                    },
                };
                match self.client.insert_bucket(&req).await {
                    Ok(_) => Ok(true),
                    Err(e) => match gcs_error(e, false) {
                        Error::Conflict(_) => Ok(false),
                        other => Err(other.context(format_args!("create bucket {bucket}"))),
                    },
                }
            })
            .await?;
        // A name clash: ours if we can read it, someone else's if we may not.
        let got = self
            .retrier
            .run("get_bucket", || async {
                self.client
                    .get_bucket(&GetBucketRequest {
                        bucket: bucket.to_string(),
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| gcs_error(e, true))
            })
            .await;
        let got = match got {
            Ok(b) => b,
            Err(Error::Unauthorized(_)) if !created => {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("bucket {bucket} exists and belongs to another project"),
                ));
            }
            Err(e) => return Err(e.context(format_args!("read back bucket {bucket}"))),
        };
        let mut warnings = Vec::new();
        let ubla = got
            .iam_configuration
            .as_ref()
            .and_then(|c| c.uniform_bucket_level_access.as_ref())
            .is_some_and(|u| u.enabled);
        if !ubla {
            warnings.push(format!(
                "uniform bucket-level access is not in effect on bucket {bucket} (read back after create)"
            ));
        }
        if opts.immutability.is_some() {
            warnings.push("GCS: retention policies are not applied by Granary".to_string());
        }
        Ok(BucketReport { created, warnings })
    }

    async fn delete_bucket(&self, bucket: &str, empty_first: bool) -> Result<()> {
        if empty_first {
            match self.delete_prefix(bucket, "").await {
                Ok(_) => {}
                Err(Error::BucketNotFound(_)) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        let r = self
            .retrier
            .run("delete_bucket", || async {
                self.client
                    .delete_bucket(&DeleteBucketRequest {
                        bucket: bucket.to_string(),
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| gcs_error(e, true).context(format_args!("delete bucket {bucket}")))
            })
            .await;
        match r {
            Ok(()) | Err(Error::BucketNotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn put(&self, bucket: &str, key: &str, data: Bytes) -> Result<()> {
        let r = self
            .retrier
            .run("put", || async {
                self.client
                    .upload_object(
                        &UploadObjectRequest {
                            bucket: bucket.to_string(),
                            ..Default::default()
                        },
                        data.clone(),
                        &UploadType::Simple(Media::new(key.to_string())),
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| object_error(e).context(format_args!("put {bucket}/{key}")))
            })
            .await;
        match r {
            Err(Error::NotFound(m)) => Err(self.which_missing(bucket, m).await),
            other => other,
        }
    }

    async fn put_reader(&self, bucket: &str, key: &str, mut reader: BoxReader) -> Result<u64> {
        let mut current = read_part(&mut reader, self.part_size).await?;
        if current.len() < self.part_size {
            let n = current.len() as u64;
            self.put(bucket, key, current).await?;
            return Ok(n);
        }
        let session = self
            .retrier
            .run("start resumable upload", || async {
                self.client
                    .prepare_resumable_upload(
                        &UploadObjectRequest {
                            bucket: bucket.to_string(),
                            ..Default::default()
                        },
                        &UploadType::Simple(Media::new(key.to_string())),
                    )
                    .await
                    .map_err(|e| {
                        object_error(e).context(format_args!("start upload {bucket}/{key}"))
                    })
            })
            .await?;
        let mut offset = 0u64;
        loop {
            // Read ahead one chunk: the last chunk must carry the total size.
            let next = read_part(&mut reader, self.part_size).await?;
            let len = current.len() as u64;
            let total = next.is_empty().then_some(offset + len);
            let range = ChunkSize::new(offset, offset + len - 1, total);
            self.retrier
                .run("upload chunk", || async {
                    session
                        .upload_multiple_chunk(current.clone(), &range)
                        .await
                        .map(|_| ())
                        .map_err(|e| {
                            object_error(e).context(format_args!("upload chunk of {bucket}/{key}"))
                        })
                })
                .await?;
            offset += len;
            if next.is_empty() {
                return Ok(offset);
            }
            current = next;
        }
    }

    async fn get(&self, bucket: &str, key: &str) -> Result<ByteStream> {
        let req = GetObjectRequest {
            bucket: bucket.to_string(),
            object: key.to_string(),
            ..Default::default()
        };
        let s = self
            .retrier
            .run("get", || async {
                self.client
                    .download_streamed_object(&req, &Range::default())
                    .await
                    .map_err(|e| object_error(e).context(format_args!("get {bucket}/{key}")))
            })
            .await;
        let s = match s {
            Ok(s) => s,
            // The download error has no JSON body saying which is missing.
            Err(Error::NotFound(m)) => return Err(self.which_missing(bucket, m).await),
            Err(e) => return Err(e),
        };
        Ok(
            s.map_err(|e| object_error(e).context("reading object body"))
                .boxed(),
        )
    }

    async fn presign_get(
        &self,
        bucket: &str,
        key: &str,
        ttl: std::time::Duration,
    ) -> Result<String> {
        match &self.signer {
            Ok(signer) => signer.sign_get(bucket, key, ttl, None).await,
            Err(why) => Err(Error::new(ErrorKind::Invalid, why.clone())),
        }
    }

    async fn head(&self, bucket: &str, key: &str) -> Result<ObjectMeta> {
        let o = self
            .retrier
            .run("head", || async {
                self.client
                    .get_object(&GetObjectRequest {
                        bucket: bucket.to_string(),
                        object: key.to_string(),
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| object_error(e).context(format_args!("head {bucket}/{key}")))
            })
            .await;
        let o = match o {
            Err(Error::NotFound(m)) => return Err(self.which_missing(bucket, m).await),
            other => other?,
        };
        Ok(ObjectMeta {
            key: key.to_string(),
            size: o.size.max(0) as u64,
            last_modified: o
                .updated
                .and_then(|t| DateTime::<Utc>::from_timestamp(t.unix_timestamp(), t.nanosecond())),
            etag: Some(o.etag).filter(|e| !e.is_empty()),
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
        delete_each(keys, self.concurrency, |key: String| async move {
            self.retrier
                .run("delete", || async {
                    self.client
                        .delete_object(&DeleteObjectRequest {
                            bucket: bucket.to_string(),
                            object: key.clone(),
                            ..Default::default()
                        })
                        .await
                        .map_err(|e| object_error(e).context(format_args!("delete {bucket}/{key}")))
                })
                .await
        })
        .await
    }

    async fn copy(
        &self,
        src_bucket: &str,
        src_key: &str,
        dst_bucket: &str,
        dst_key: &str,
    ) -> Result<()> {
        // Rewrite (not copyTo): large objects are copied over several calls with a token.
        let mut token: Option<String> = None;
        loop {
            let resp = self
                .retrier
                .run("copy", || async {
                    self.client
                        .rewrite_object(&RewriteObjectRequest {
                            source_bucket: src_bucket.to_string(),
                            source_object: src_key.to_string(),
                            destination_bucket: dst_bucket.to_string(),
                            destination_object: dst_key.to_string(),
                            rewrite_token: token.clone(),
                            ..Default::default()
                        })
                        .await
                        .map_err(|e| {
                            object_error(e).context(format_args!(
                                "copy {src_bucket}/{src_key} to {dst_bucket}/{dst_key}"
                            ))
                        })
                })
                .await?;
            if resp.done {
                return Ok(());
            }
            token = resp.rewrite_token;
            if token.is_none() {
                return Err(Error::new(
                    ErrorKind::Transient,
                    "rewrite not done and no token to continue",
                ));
            }
        }
    }

    fn delete_batch_size(&self) -> usize {
        self.delete_batch
    }
}
