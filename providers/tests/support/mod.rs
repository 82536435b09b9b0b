//! Shared test support: which backends are reachable, how to open a store on each
//! with test-sized options, unique bucket names, and bulk helpers.
#![allow(dead_code)]

pub use granary_emulators as emulators;
pub mod proxy;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use granary_providers::{ObjectStore, RetryPolicy, SecretData, StoreOptions};

/// Azurite's well-known development account key (public, documented by Microsoft).
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Local,
    S3,
    Azure,
    Gcs,
}

/// Page size used by the list tests, so a few hundred keys cross several pages.
pub const PAGE: u32 = 100;
/// Part size used by the streaming tests: S3's real minimum.
pub const PART: usize = 5 * 1024 * 1024;

pub fn options() -> StoreOptions {
    StoreOptions {
        retry: RetryPolicy::fast(4),
        part_size: PART,
        list_page_size: Some(PAGE),
        concurrency: 8,
        ..StoreOptions::default()
    }
}

#[allow(unsafe_code)] // set_var is unsafe in edition 2024
pub fn init() {
    // SAFETY of the test process: set once before any client reads it.
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| unsafe { std::env::set_var("AWS_EC2_METADATA_DISABLED", "true") });
}

pub fn data(pairs: &[(&str, &str)]) -> SecretData {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect()
}

/// Secret data and provider type for a backend at `endpoint`.
pub fn secret_for(backend: Backend, endpoint: &str) -> (&'static str, SecretData) {
    match backend {
        Backend::Local => ("local", BTreeMap::new()),
        Backend::S3 => (
            "aws",
            data(&[
                ("accessKeyID", "test"),
                ("secretAccessKey", "test"),
                ("endpoint", endpoint),
                ("s3ForcePathStyle", "true"),
            ]),
        ),
        Backend::Azure => (
            "azure",
            data(&[
                ("storageAccount", AZURITE_ACCOUNT),
                ("storageKey", AZURITE_KEY),
                ("endpoint", endpoint),
            ]),
        ),
        Backend::Gcs => ("gcp", data(&[("endpoint", endpoint)])),
    }
}

pub fn endpoint(backend: Backend) -> Option<String> {
    match backend {
        Backend::Local => Some(String::new()),
        Backend::S3 => emulators::s3(),
        Backend::Azure => emulators::azure(),
        Backend::Gcs => emulators::gcs(),
    }
}

/// A test store on `backend`, or `None` when its emulator is unavailable (skip).
/// The temp dir of `local` lives as long as the returned guard.
pub async fn open(
    backend: Backend,
    opts: StoreOptions,
) -> Option<(Arc<dyn ObjectStore>, Option<tempfile::TempDir>)> {
    init();
    let ep = endpoint(backend)?;
    let mut opts = opts;
    let mut guard = None;
    if backend == Backend::Local {
        let dir = tempfile::tempdir().expect("temp dir");
        opts.local_root = Some(dir.path().to_path_buf());
        guard = Some(dir);
    }
    let (kind, secret) = secret_for(backend, &ep);
    let store = granary_providers::open(kind, Some("us-east-1"), &secret, &opts)
        .await
        .expect("opening store");
    Some((store, guard))
}

/// A bucket name unique in this test process run.
pub fn bucket(tag: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("gt-{tag}-{pid:x}{n:x}{:x}", nanos >> 12)
}

/// Puts `keys` with small bodies (the key itself), 16 at a time.
pub async fn put_many(store: &dyn ObjectStore, bucket: &str, keys: &[String]) {
    stream::iter(keys)
        .map(|k| async move { store.put(bucket, k, Bytes::from(k.clone())).await })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .expect("put_many");
}

/// A store on `backend` talking to `endpoint` (e.g. a fault proxy in front of the
/// emulator) instead of the emulator itself.
pub async fn open_at(backend: Backend, endpoint: &str, opts: StoreOptions) -> Arc<dyn ObjectStore> {
    init();
    let (kind, secret) = secret_for(backend, endpoint);
    granary_providers::open(kind, Some("us-east-1"), &secret, &opts)
        .await
        .expect("opening store")
}

/// A small workload touching every kind of request: create, puts, list, get, head,
/// copy, delete prefix, delete bucket.
pub async fn workload(store: &dyn ObjectStore, tag: &str) -> granary_providers::Result<()> {
    use granary_providers::{BucketOptions, get_bytes, list_all};
    let b = bucket(tag);
    store.ensure_bucket(&b, &BucketOptions::default()).await?;
    for i in 0..12 {
        store
            .put(&b, &format!("w/{i:02}"), Bytes::from(format!("v{i}")))
            .await?;
    }
    let listed = list_all(store, &b, "w/", None).await?;
    assert_eq!(listed.len(), 12);
    for i in [0, 5, 11] {
        let got = get_bytes(store, &b, &format!("w/{i:02}")).await?;
        assert_eq!(got, format!("v{i}"));
        assert_eq!(
            store.head(&b, &format!("w/{i:02}")).await?.size as usize,
            got.len()
        );
    }
    store.copy(&b, "w/03", &b, "c/03").await?;
    let r = store.delete_prefix(&b, "w/").await?;
    assert_eq!(r.deleted, 12);
    store.delete_bucket(&b, true).await?;
    Ok(())
}
