//! The `azure` provider: block blobs in a container of a storage account, through
//! Microsoft's official `azure_storage_blob` crate, authenticated by an account SAS we
//! sign from the account key ([`crate::azure_sas`]), renewed before it expires.
//!
//! The SDK's retries are off; [`crate::retry`] retries each request. Listing goes one
//! page per request (the SDK's pager is only asked for its first page, with our
//! marker) so each page is retried on its own; the 1.1 SDK has no delimiter listing, so
//! common prefixes are rolled up from the flat listing.

use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use azure_core::http::{ClientOptions, RequestContent, RetryOptions, Url};
use azure_storage_blob::models::{
    BlobClientGetPropertiesResultHeaders, BlobContainerClientListBlobsOptions, BlockLookupList,
    CopyStatus,
};
use azure_storage_blob::{BlobContainerClient, BlobServiceClient, BlobServiceClientOptions};
use bytes::Bytes;
use chrono::{DateTime, Duration, Utc};
use futures::stream::{self, BoxStream, FuturesUnordered, StreamExt, TryStreamExt};

use crate::azure_sas::{AccountSas, BlobReadSas};
use crate::credentials::AzureCredentials;
use crate::error::{Error, ErrorKind, Result, kind_for_status};
use crate::options::StoreOptions;
use crate::retry::{Retrier, RetryStats};
use crate::store::{
    BoxReader, BucketOptions, BucketReport, ByteStream, DeleteReport, ListEntry, ObjectMeta,
    ObjectStore, ProviderKind, delete_each, read_part, roll_up,
};

/// A SAS lives this long; it is renewed when less than a quarter is left.
const SAS_LIFETIME_HOURS: i64 = 8;

pub(crate) struct AzureStore {
    creds: AzureCredentials,
    service: RwLock<(Arc<BlobServiceClient>, DateTime<Utc>)>,
    retrier: Retrier,
    stats: Arc<RetryStats>,
    part_size: usize,
    page_size: Option<i32>,
    delete_batch: usize,
    concurrency: usize,
}

impl AzureStore {
    pub(crate) fn new(creds: AzureCredentials, opts: &StoreOptions) -> Result<Self> {
        let now = Utc::now();
        let (client, expiry) = build_client(&creds, now)?;
        let retrier = Retrier::new(opts.retry.clone());
        Ok(AzureStore {
            creds,
            service: RwLock::new((Arc::new(client), expiry)),
            stats: retrier.stats(),
            retrier,
            part_size: opts.part_size.max(1),
            page_size: opts.list_page_size.map(|p| p.clamp(1, 5000) as i32),
            delete_batch: opts.delete_batch_size.max(1),
            concurrency: opts.concurrency.max(1),
        })
    }

    /// The service client, re-signed when its SAS nears expiry.
    fn service(&self) -> Result<Arc<BlobServiceClient>> {
        let now = Utc::now();
        {
            let guard = self.service.read().unwrap_or_else(|p| p.into_inner());
            if guard.1 - now > Duration::hours(SAS_LIFETIME_HOURS / 4) {
                return Ok(guard.0.clone());
            }
        }
        let (client, expiry) = build_client(&self.creds, now)?;
        let client = Arc::new(client);
        *self.service.write().unwrap_or_else(|p| p.into_inner()) = (client.clone(), expiry);
        Ok(client)
    }

    fn container(&self, bucket: &str) -> Result<BlobContainerClient> {
        Ok(self.service()?.blob_container_client(bucket))
    }

    fn err(&self, e: azure_core::Error, what: impl std::fmt::Display) -> Error {
        az_error(&e)
            .context(what)
            .scrubbed(&[self.creds.storage_key.as_str()])
    }

    async fn list_page(
        &self,
        bucket: &str,
        prefix: &str,
        marker: Option<String>,
    ) -> Result<(Vec<ObjectMeta>, Option<String>)> {
        let page = self
            .retrier
            .run("list", || async {
                let c = self.container(bucket)?;
                let opts = BlobContainerClientListBlobsOptions {
                    prefix: (!prefix.is_empty()).then(|| prefix.to_string()),
                    maxresults: self.page_size,
                    marker: marker.clone(),
                    ..Default::default()
                };
                let pager = c.list_blobs(Some(opts)).map_err(|e| self.err(e, "list"))?;
                let mut pages = pager.into_pages();
                let first = pages
                    .try_next()
                    .await
                    .map_err(|e| self.err(e, format_args!("list {bucket}/{prefix}")))?;
                match first {
                    Some(resp) => resp.into_model().map_err(|e| self.err(e, "list response")),
                    None => Err(Error::new(ErrorKind::Transient, "list returned no page")),
                }
            })
            .await?;
        let metas = page
            .blob_items
            .into_iter()
            .filter_map(|b| {
                let props = b.properties;
                Some(ObjectMeta {
                    key: b.name?,
                    size: props.as_ref().and_then(|p| p.content_length).unwrap_or(0),
                    last_modified: props
                        .as_ref()
                        .and_then(|p| p.last_modified)
                        .and_then(to_chrono),
                    etag: props.and_then(|p| p.etag).map(|e| e.to_string()),
                })
            })
            .collect();
        Ok((metas, page.next_marker.filter(|m| !m.is_empty())))
    }

    async fn stage(&self, bucket: &str, key: &str, id: Vec<u8>, chunk: Bytes) -> Result<Vec<u8>> {
        self.retrier
            .run("stage_block", || async {
                self.container(bucket)?
                    .blob_client(key)
                    .block_blob_client()
                    .stage_block(
                        &id,
                        chunk.len() as u64,
                        RequestContent::from(chunk.to_vec()),
                        None,
                    )
                    .await
                    .map_err(|e| self.err(e, format_args!("stage block of {bucket}/{key}")))
            })
            .await?;
        Ok(id)
    }
}

impl std::fmt::Debug for AzureStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureStore")
            .field("account", &self.creds.storage_account)
            .field("service_url", &self.creds.service_url())
            .finish_non_exhaustive()
    }
}

fn build_client(
    creds: &AzureCredentials,
    now: DateTime<Utc>,
) -> Result<(BlobServiceClient, DateTime<Utc>)> {
    let base = creds.service_url();
    let mut url = Url::parse(&base).map_err(|_| {
        Error::new(
            ErrorKind::Invalid,
            "secret key `endpoint` is not a valid blob service URL",
        )
    })?;
    let expiry = now + Duration::hours(SAS_LIFETIME_HOURS);
    let sas = AccountSas {
        account: creds.storage_account.clone(),
        // Tolerate clock skew between us and the service.
        start: now - Duration::minutes(15),
        expiry,
        https_only: url.scheme() == "https",
    };
    url.set_query(Some(&sas.query(&creds.storage_key)?));
    let options = BlobServiceClientOptions {
        client_options: ClientOptions {
            retry: RetryOptions::none(),
            ..Default::default()
        },
        ..Default::default()
    };
    let client = BlobServiceClient::new(url, None, Some(options))
        .map_err(|e| az_error(&e).scrubbed(&[creds.storage_key.as_str()]))?;
    Ok((client, expiry))
}

fn az_error(e: &azure_core::Error) -> Error {
    use azure_core::error::ErrorKind as K;
    let kind = match e.kind() {
        K::HttpResponse {
            status, error_code, ..
        } => {
            let status: u16 = (*status).into();
            let code = error_code.as_deref().unwrap_or("");
            // A 404 for a copy source is a missing object.
            if code == "CannotVerifyCopySource" && status == 404 {
                ErrorKind::NotFound
            } else {
                kind_for_status(status, code)
            }
        }
        K::Credential => ErrorKind::Unauthenticated,
        K::Io | K::Connection => ErrorKind::Transient,
        K::DataConversion => ErrorKind::Transient,
        _ => ErrorKind::Transient,
    };
    Error::new(kind, e.to_string())
}

fn to_chrono(t: azure_core::time::OffsetDateTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.unix_timestamp(), t.nanosecond())
}

#[async_trait]
impl ObjectStore for AzureStore {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Azure
    }

    fn retry_stats(&self) -> &RetryStats {
        &self.stats
    }

    async fn ensure_bucket(&self, bucket: &str, opts: &BucketOptions) -> Result<BucketReport> {
        let created = self
            .retrier
            .run("create_container", || async {
                match self.container(bucket)?.create(None).await {
                    Ok(_) => Ok(true),
                    Err(e) => match self.err(e, format_args!("create container {bucket}")) {
                        // Container names are per account: an existing one is ours.
                        Error::Conflict(m) if m.contains("ContainerAlreadyExists") => Ok(false),
                        other => Err(other),
                    },
                }
            })
            .await?;
        let mut warnings = vec![
            "Azure: secure transfer (TLS-only), public blob access and encryption settings are storage-account \
             level and cannot be changed with an account key; verify them on the account"
                .to_string(),
        ];
        if opts.immutability.is_some() {
            warnings.push("Azure: immutability policies are not applied by Granary; configure them on the container".into());
        }
        Ok(BucketReport { created, warnings })
    }

    async fn delete_bucket(&self, bucket: &str, empty_first: bool) -> Result<()> {
        // Azure deletes non-empty containers; refuse unless asked to empty.
        let r = if empty_first {
            self.delete_prefix(bucket, "").await.map(|_| ())
        } else {
            match self.list_page(bucket, "", None).await {
                Ok((items, _)) if !items.is_empty() => {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!("container {bucket} is not empty"),
                    ));
                }
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            }
        };
        match r {
            Ok(()) => {}
            Err(Error::BucketNotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        }
        let r = self
            .retrier
            .run("delete_container", || async {
                self.container(bucket)?
                    .delete(None)
                    .await
                    .map(|_| ())
                    .map_err(|e| self.err(e, format_args!("delete container {bucket}")))
            })
            .await;
        match r {
            Ok(()) | Err(Error::BucketNotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn put(&self, bucket: &str, key: &str, data: Bytes) -> Result<()> {
        self.retrier
            .run("put", || async {
                self.container(bucket)?
                    .blob_client(key)
                    .upload(RequestContent::from(data.to_vec()), None)
                    .await
                    .map(|_| ())
                    .map_err(|e| self.err(e, format_args!("put {bucket}/{key}")))
            })
            .await
    }

    async fn put_reader(&self, bucket: &str, key: &str, mut reader: BoxReader) -> Result<u64> {
        let first = read_part(&mut reader, self.part_size).await?;
        if first.len() < self.part_size {
            let n = first.len() as u64;
            self.put(bucket, key, first).await?;
            return Ok(n);
        }
        // Blocks staged but never committed are discarded by the service after a week.
        let mut in_flight = FuturesUnordered::new();
        let mut ids = Vec::new();
        let mut next = Some(first);
        let mut total = 0u64;
        let mut n = 0u32;
        loop {
            while in_flight.len() >= self.concurrency {
                if let Some(r) = in_flight.next().await {
                    r?;
                }
            }
            let chunk = match next.take() {
                Some(c) => c,
                None => read_part(&mut reader, self.part_size).await?,
            };
            if chunk.is_empty() {
                break;
            }
            let last = chunk.len() < self.part_size;
            total += chunk.len() as u64;
            // Block ids of one blob must all have the same length.
            let id = format!("granary-block-{n:010}").into_bytes();
            ids.push(id.clone());
            in_flight.push(self.stage(bucket, key, id, chunk));
            n += 1;
            if last {
                break;
            }
        }
        while let Some(r) = in_flight.next().await {
            r?;
        }
        let list = BlockLookupList {
            latest: Some(ids),
            ..Default::default()
        };
        self.retrier
            .run("commit_block_list", || async {
                let content = RequestContent::try_from(list.clone())
                    .map_err(|e| Error::new(ErrorKind::Invalid, format!("block list: {e}")))?;
                self.container(bucket)?
                    .blob_client(key)
                    .block_blob_client()
                    .commit_block_list(content, None)
                    .await
                    .map_err(|e| self.err(e, format_args!("commit blocks of {bucket}/{key}")))
            })
            .await?;
        Ok(total)
    }

    async fn get(&self, bucket: &str, key: &str) -> Result<ByteStream> {
        let result = self
            .retrier
            .run("get", || async {
                self.container(bucket)?
                    .blob_client(key)
                    .download(None)
                    .await
                    .map_err(|e| self.err(e, format_args!("get {bucket}/{key}")))
            })
            .await?;
        let key = key.to_string();
        Ok(result
            .body
            .map_err(move |e| az_error(&e).context(format_args!("reading {key}")))
            .boxed())
    }

    async fn presign_get(
        &self,
        bucket: &str,
        key: &str,
        ttl: std::time::Duration,
    ) -> Result<String> {
        let mut url = Url::parse(&self.creds.service_url()).map_err(|_| {
            Error::new(
                ErrorKind::Invalid,
                "secret key `endpoint` is not a valid blob service URL",
            )
        })?;
        let now = Utc::now();
        let ttl = Duration::from_std(ttl)
            .map_err(|_| Error::new(ErrorKind::Invalid, "download URL lifetime out of range"))?;
        let sas = BlobReadSas {
            account: self.creds.storage_account.clone(),
            container: bucket.to_string(),
            blob: key.to_string(),
            // Tolerate clock skew between us and the service.
            start: now - Duration::minutes(15),
            expiry: now + ttl,
            https_only: url.scheme() == "https",
        };
        url.path_segments_mut()
            .map_err(|_| Error::new(ErrorKind::Invalid, "blob service URL cannot have a path"))?
            .pop_if_empty()
            .push(bucket)
            .extend(key.split('/'));
        url.set_query(Some(&sas.query(&self.creds.storage_key)?));
        Ok(url.to_string())
    }

    async fn head(&self, bucket: &str, key: &str) -> Result<ObjectMeta> {
        let resp = self
            .retrier
            .run("head", || async {
                self.container(bucket)?
                    .blob_client(key)
                    .get_properties(None)
                    .await
                    .map_err(|e| self.err(e, format_args!("head {bucket}/{key}")))
            })
            .await?;
        Ok(ObjectMeta {
            key: key.to_string(),
            size: resp.content_length().ok().flatten().unwrap_or(0),
            last_modified: resp.last_modified().ok().flatten().and_then(to_chrono),
            etag: resp.etag().ok().flatten().map(|e| e.to_string()),
        })
    }

    fn list<'a>(
        &'a self,
        bucket: &'a str,
        prefix: &'a str,
        delimiter: Option<&'a str>,
    ) -> BoxStream<'a, Result<ListEntry>> {
        let pages = stream::try_unfold(Some(None::<String>), move |state| async move {
            let Some(marker) = state else { return Ok(None) };
            let (metas, next) = self.list_page(bucket, prefix, marker).await?;
            Ok(Some((
                stream::iter(metas.into_iter().map(Ok)),
                next.map(Some),
            )))
        })
        .try_flatten();
        let mut last_prefix: Option<String> = None;
        pages
            .try_filter_map(move |meta| {
                let entry = match delimiter {
                    Some(d) if !d.is_empty() => roll_up(prefix, d, &mut last_prefix, meta),
                    _ => Some(ListEntry::Object(meta)),
                };
                futures::future::ready(Ok(entry))
            })
            .boxed()
    }

    async fn delete_many(&self, bucket: &str, keys: &[String]) -> Result<DeleteReport> {
        delete_each(keys, self.concurrency, |key: String| async move {
            let key = key.as_str();
            self.retrier
                .run("delete", || async {
                    self.container(bucket)?
                        .blob_client(key)
                        .delete(None)
                        .await
                        .map(|_| ())
                        .map_err(|e| self.err(e, format_args!("delete {bucket}/{key}")))
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
        let what = format!("copy {src_bucket}/{src_key} to {dst_bucket}/{dst_key}");
        // The source URL carries our SAS, which authorises the read.
        let status = self
            .retrier
            .run("copy", || async {
                let source = self
                    .container(src_bucket)?
                    .blob_client(src_key)
                    .url()
                    .to_string();
                let resp = self
                    .container(dst_bucket)?
                    .blob_client(dst_key)
                    .start_copy_from_url(source, None)
                    .await
                    .map_err(|e| self.err(e, &what))?;
                use azure_storage_blob::models::BlobClientStartCopyFromUrlResultHeaders;
                Ok(resp.copy_status().ok().flatten())
            })
            .await?;
        if matches!(status, Some(CopyStatus::Success) | None) {
            return Ok(());
        }
        // Asynchronous copy (large blobs, other accounts): poll with a deadline.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(600);
        let mut delay = std::time::Duration::from_millis(50);
        loop {
            let resp = self
                .retrier
                .run("copy status", || async {
                    self.container(dst_bucket)?
                        .blob_client(dst_key)
                        .get_properties(None)
                        .await
                        .map_err(|e| self.err(e, &what))
                })
                .await?;
            match resp.copy_status().ok().flatten() {
                Some(CopyStatus::Success) | None => return Ok(()),
                Some(CopyStatus::Pending) => {}
                Some(other) => {
                    return Err(Error::new(
                        ErrorKind::Transient,
                        format!("{what}: copy ended {other:?}"),
                    ));
                }
            }
            if tokio::time::Instant::now() > deadline {
                return Err(Error::new(
                    ErrorKind::Transient,
                    format!("{what}: still pending after 10 minutes"),
                ));
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(std::time::Duration::from_secs(5));
        }
    }

    fn delete_batch_size(&self) -> usize {
        self.delete_batch
    }
}
