//! The [`ObjectStore`] trait every provider implements, and the small value types it
//! speaks in.
//!
//! The trait uses `async-trait` (boxed futures) rather than native `async fn` in traits:
//! callers hold providers as `Arc<dyn ObjectStore>` chosen at run time from a Secret,
//! and native async trait methods are not object-safe. One allocation per call is
//! nothing next to a network round trip.

use std::fmt;
use std::pin::Pin;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use tokio::io::AsyncRead;

use crate::error::Result;
use crate::retry::RetryStats;

/// A stream of object bytes, as returned by [`ObjectStore::get`].
pub type ByteStream = BoxStream<'static, Result<Bytes>>;

/// A reader to upload from, as taken by [`ObjectStore::put_reader`].
pub type BoxReader = Pin<Box<dyn AsyncRead + Send>>;

/// Which implementation is behind a `dyn ObjectStore`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    Local,
    Aws,
    Azure,
    Gcp,
}

impl ProviderKind {
    /// Gardener's provider type string (`local`, `aws`, `azure`, `gcp`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Local => "local",
            ProviderKind::Aws => "aws",
            ProviderKind::Azure => "azure",
            ProviderKind::Gcp => "gcp",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `head` (and listing) knows about an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub key: String,
    pub size: u64,
    pub last_modified: Option<DateTime<Utc>>,
    pub etag: Option<String>,
}

/// One item of a listing: an object, or (with a delimiter) a common prefix that stands
/// for all keys below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListEntry {
    Object(ObjectMeta),
    /// Ends with the delimiter.
    Prefix(String),
}

impl ListEntry {
    pub fn name(&self) -> &str {
        match self {
            ListEntry::Object(m) => &m.key,
            ListEntry::Prefix(p) => p,
        }
    }
}

/// Counts from a batched delete.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeleteReport {
    /// Keys the store confirmed deleted (absent keys count as deleted: delete is
    /// idempotent on every store).
    pub deleted: u64,
    /// Requests sent to the store (for throughput benchmarks; excludes listing).
    pub requests: u64,
}

impl std::ops::AddAssign for DeleteReport {
    fn add_assign(&mut self, o: Self) {
        self.deleted += o.deleted;
        self.requests += o.requests;
    }
}

/// Object-lock (WORM) settings applied at bucket creation where supported (S3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Immutability {
    /// Default retention in days for new objects.
    pub retention_days: u32,
    /// Compliance mode (nobody, not even root, can shorten it); otherwise governance.
    pub compliance: bool,
}

/// Per-bucket settings for [`ObjectStore::ensure_bucket`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BucketOptions {
    pub immutability: Option<Immutability>,
}

/// What `ensure_bucket` did, and what it could not do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BucketReport {
    /// True when this call created the bucket.
    pub created: bool,
    /// Hardening that could not be applied or verified; the caller turns each into a
    /// Warning event. Never contains secrets.
    pub warnings: Vec<String>,
}

/// Object storage, as Granary needs it. All methods take bucket names already
/// validated by the caller.
#[async_trait]
pub trait ObjectStore: Send + Sync + fmt::Debug {
    fn kind(&self) -> ProviderKind;

    /// Retry counters of this provider instance.
    fn retry_stats(&self) -> &RetryStats;

    /// Creates the bucket if it does not exist and applies the hardening of the
    /// provider. A bucket that already exists and is ours is success; one owned by
    /// someone else is [`crate::Error::Conflict`].
    async fn ensure_bucket(&self, bucket: &str, opts: &BucketOptions) -> Result<BucketReport>;

    /// Deletes the bucket. A non-empty bucket is [`crate::Error::Conflict`] unless
    /// `empty_first`, in which case every object is deleted first. An absent bucket is
    /// success.
    async fn delete_bucket(&self, bucket: &str, empty_first: bool) -> Result<()>;

    /// Writes a whole object from memory (overwrites).
    async fn put(&self, bucket: &str, key: &str, data: Bytes) -> Result<()>;

    /// Writes an object from a reader of unknown length, in parts of the configured part
    /// size (multipart / block upload), so memory stays bounded by one part. Returns the
    /// number of bytes written.
    async fn put_reader(&self, bucket: &str, key: &str, reader: BoxReader) -> Result<u64>;

    /// Reads an object as a stream.
    async fn get(&self, bucket: &str, key: &str) -> Result<ByteStream>;

    async fn head(&self, bucket: &str, key: &str) -> Result<ObjectMeta>;

    /// Lists keys starting with `prefix`, in lexicographic order per page. With a
    /// delimiter, keys containing it after the prefix are rolled up into
    /// [`ListEntry::Prefix`] entries. Paging is hidden.
    fn list<'a>(
        &'a self,
        bucket: &'a str,
        prefix: &'a str,
        delimiter: Option<&'a str>,
    ) -> BoxStream<'a, Result<ListEntry>>;

    /// Deletes the given keys, batched (S3: 1000 per request) or with bounded
    /// parallelism. Absent keys are not an error.
    async fn delete_many(&self, bucket: &str, keys: &[String]) -> Result<DeleteReport>;

    /// Server-side copy inside this store.
    async fn copy(
        &self,
        src_bucket: &str,
        src_key: &str,
        dst_bucket: &str,
        dst_key: &str,
    ) -> Result<()>;

    /// Deletes every object whose key starts with `prefix` (an empty prefix empties the
    /// bucket). Lists and deletes in batches of the provider's delete batch size.
    async fn delete_prefix(&self, bucket: &str, prefix: &str) -> Result<DeleteReport> {
        let batch = self.delete_batch_size().max(1);
        let mut report = DeleteReport::default();
        let mut pending = Vec::with_capacity(batch);
        let mut listing = self.list(bucket, prefix, None);
        while let Some(entry) = listing.try_next().await? {
            if let ListEntry::Object(m) = entry {
                pending.push(m.key);
                if pending.len() == batch {
                    report += self.delete_many(bucket, &pending).await?;
                    pending.clear();
                }
            }
        }
        drop(listing);
        if !pending.is_empty() {
            report += self.delete_many(bucket, &pending).await?;
        }
        Ok(report)
    }

    /// How many keys one `delete_many` round should carry in `delete_prefix`.
    fn delete_batch_size(&self) -> usize {
        1000
    }

    /// A URL anyone holding it can GET `key` with, for `ttl`, signed with this store's
    /// credentials and granting nothing else: S3 SigV4 query signing, an Azure service
    /// SAS (read, this one blob), a GCS V4 signed URL. The URL is a bearer secret: never
    /// log it. Stores that cannot sign (`local`, GCS without a private key) return
    /// [`crate::ErrorKind::Invalid`] saying why; nothing is contacted either way.
    async fn presign_get(
        &self,
        bucket: &str,
        key: &str,
        ttl: std::time::Duration,
    ) -> Result<String> {
        let _ = (bucket, key, ttl);
        Err(crate::error::Error::new(
            crate::error::ErrorKind::Invalid,
            format!("the {} provider cannot sign download URLs", self.kind()),
        ))
    }
}

/// Reads a whole object into memory (tests and small metadata objects only).
pub async fn get_bytes(store: &dyn ObjectStore, bucket: &str, key: &str) -> Result<Bytes> {
    let mut stream = store.get(bucket, key).await?;
    let mut out = bytes::BytesMut::new();
    while let Some(chunk) = stream.next().await {
        out.extend_from_slice(&chunk?);
    }
    Ok(out.freeze())
}

/// Collects a listing (tests and small listings only).
pub async fn list_all(
    store: &dyn ObjectStore,
    bucket: &str,
    prefix: &str,
    delimiter: Option<&str>,
) -> Result<Vec<ListEntry>> {
    store.list(bucket, prefix, delimiter).try_collect().await
}

/// Rolls up flat listing keys into common prefixes, for stores whose list API has no
/// delimiter. `keys` must arrive sorted; the returned entries keep that order.
pub(crate) fn roll_up(
    prefix: &str,
    delimiter: &str,
    last_prefix: &mut Option<String>,
    meta: ObjectMeta,
) -> Option<ListEntry> {
    let rest = meta.key.strip_prefix(prefix).unwrap_or(&meta.key);
    match rest.find(delimiter) {
        Some(i) => {
            let p = format!("{prefix}{}", &rest[..i + delimiter.len()]);
            if last_prefix.as_deref() == Some(p.as_str()) {
                None
            } else {
                *last_prefix = Some(p.clone());
                Some(ListEntry::Prefix(p))
            }
        }
        None => Some(ListEntry::Object(meta)),
    }
}

/// Reads up to `size` bytes (less only at the end of the reader).
/// Deletes keys one request each with at most `concurrency` requests in flight (for
/// stores without a batch delete). A key that is already gone counts as deleted.
pub(crate) async fn delete_each<F, Fut>(
    keys: &[String],
    concurrency: usize,
    delete_one: F,
) -> Result<DeleteReport>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let results: Vec<Result<()>> = futures::stream::iter(keys.iter().cloned())
        .map(|key| {
            let fut = delete_one(key);
            async move {
                match fut.await {
                    Err(crate::error::Error::NotFound(_)) => Ok(()),
                    other => other,
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let mut report = DeleteReport::default();
    for r in results {
        r?;
        report.deleted += 1;
        report.requests += 1;
    }
    Ok(report)
}

/// A listing as one stream over its pages: `fetch(token)` returns a page and the next
/// page's token (`None` on the last page); the first page is fetched without a token.
pub(crate) fn paged<'a, F, Fut>(fetch: F) -> BoxStream<'a, Result<ListEntry>>
where
    F: Fn(Option<String>) -> Fut + Send + 'a,
    Fut: std::future::Future<Output = Result<(Vec<ListEntry>, Option<String>)>> + Send + 'a,
{
    futures::stream::try_unfold(Some(None::<String>), move |state| {
        let page = state.map(&fetch);
        async move {
            let Some(page) = page else { return Ok(None) };
            let (entries, next) = page.await?;
            Ok(Some((
                futures::stream::iter(entries.into_iter().map(Ok)),
                next.map(Some),
            )))
        }
    })
    .try_flatten()
    .boxed()
}

pub(crate) async fn read_part(reader: &mut BoxReader, size: usize) -> Result<Bytes> {
    use tokio::io::AsyncReadExt;
    let mut buf = bytes::BytesMut::with_capacity(size);
    while buf.len() < size {
        let mut limited = (&mut *reader).take((size - buf.len()) as u64);
        let n = limited.read_buf(&mut buf).await.map_err(|e| {
            crate::error::Error::new(
                crate::error::ErrorKind::Transient,
                format!("reading upload source: {e}"),
            )
        })?;
        if n == 0 {
            break;
        }
    }
    Ok(buf.freeze())
}
