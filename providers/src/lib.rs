//! Object storage for Granary: one [`ObjectStore`] trait, implemented by the `local`,
//! `aws`, `azure` and `gcp` providers (each a cargo feature, all on by default), and
//! one factory, [`open`], that turns a provider type, a region, Secret data and
//! [`StoreOptions`] into an `Arc<dyn ObjectStore>`.
//!
//! Every operation is retried with jittered exponential backoff only on
//! [`Error::Throttled`] and [`Error::Transient`]; SDK-internal retries are off so the
//! two never multiply. Error messages never carry a secret.
//!
//! What each store cannot do:
//! - `local`: no hardening (a directory has none); no object lock.
//! - `aws`: object lock can only be enabled when the bucket is created; an existing
//!   bucket without it gets a warning, not a change. The TLS-only bucket policy is
//!   applied only when the endpoint is https (on plain http it would deny Granary's own
//!   requests; a warning says so) unless `StoreOptions::tls_only_policy` forces it.
//!   `copy` is a single CopyObject, so objects above 5 GiB cannot be copied yet.
//!   Ownership of an existing bucket is decided by CreateBucket's answer and, for
//!   `BucketAlreadyExists`, by ListBuckets.
//! - `azure`: encryption at rest, TLS-only and public-access settings are account-level
//!   and cannot be set with an account key; `ensure_bucket` reports them as warnings.
//!   The 1.1 SDK has no delimiter listing, so common prefixes are rolled up client-side
//!   from a flat listing (correct, but lists every key under the prefix).
//! - `gcp`: uniform bucket-level access and public access prevention are set on
//!   create (read back; a mismatch is a warning); retention/object lock is not applied
//!   (warning when asked). The HTTP client has no per-request timeout. Emulators
//!   (endpoint without `serviceaccount.json`) use anonymous access and project
//!   `granary`.
//! - Download URLs ([`ObjectStore::presign_get`]): S3 SigV4 query signing, Azure
//!   service SAS (read, one blob), GCS V4 signing with the service account's private
//!   key (a credential without one cannot sign: an error says so). `local` cannot sign;
//!   its caller serves the object itself.
//! - `local`: keys with empty, `.` or `..` segments are refused; listing reads the
//!   whole matching subtree into memory before streaming it.

mod credentials;
#[cfg_attr(
    not(any(feature = "aws", feature = "azure", feature = "gcp")),
    allow(dead_code)
)]
mod error;
mod options;
#[cfg_attr(
    not(any(feature = "aws", feature = "azure", feature = "gcp")),
    allow(dead_code)
)]
mod retry;
#[cfg_attr(
    not(any(feature = "aws", feature = "azure", feature = "gcp")),
    allow(dead_code)
)]
mod store;

#[cfg(feature = "local")]
mod local;

#[cfg(feature = "aws")]
mod aws;

#[cfg(feature = "azure")]
mod azure;
#[cfg(feature = "azure")]
pub mod azure_sas;

#[cfg(feature = "gcp")]
mod gcp;
#[cfg(feature = "gcp")]
pub mod gcs_sign;

use std::sync::Arc;

pub use credentials::{
    AwsCredentials, AzureCredentials, Credentials, GcpCredentials, SecretData, velero_aws_secret,
};
pub use error::{Error, ErrorKind, Result, redact};
pub use options::{S3_MAX_DELETE_BATCH, S3_MIN_PART_SIZE, StoreOptions};
pub use retry::{RetryPolicy, RetryStats};
pub use store::{
    BoxReader, BucketOptions, BucketReport, ByteStream, DeleteReport, Immutability, ListEntry,
    ObjectMeta, ObjectStore, ProviderKind, get_bytes, list_all,
};

#[cfg(feature = "local")]
pub use local::LocalStore;

impl std::str::FromStr for ProviderKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "local" => Ok(ProviderKind::Local),
            "aws" => Ok(ProviderKind::Aws),
            "azure" => Ok(ProviderKind::Azure),
            "gcp" => Ok(ProviderKind::Gcp),
            other => Err(Error::new(
                ErrorKind::Invalid,
                format!("unknown provider type {other:?} (expected local, aws, azure or gcp)"),
            )),
        }
    }
}

/// Builds the provider of `provider_type` (`local`, `aws`, `azure`, `gcp`).
///
/// `region` is the bucket's region/location (AWS region, GCS location; unused by Azure
/// and local); for AWS it falls back to the Secret's `region`, then `us-east-1`.
/// `secret` is the Secret data with Gardener's keys (ignored by `local`, whose root is
/// `options.local_root`).
pub async fn open(
    provider_type: &str,
    region: Option<&str>,
    secret: &SecretData,
    options: &StoreOptions,
) -> Result<Arc<dyn ObjectStore>> {
    let kind: ProviderKind = provider_type.parse()?;
    let creds = Credentials::from_secret(kind, secret)?;
    open_with(creds, region, options).await
}

/// Like [`open`], with credentials already parsed.
pub async fn open_with(
    creds: Credentials,
    region: Option<&str>,
    options: &StoreOptions,
) -> Result<Arc<dyn ObjectStore>> {
    let _ = (region, options);
    match creds {
        Credentials::Local => {
            #[cfg(feature = "local")]
            {
                let root = options.local_root.clone().ok_or_else(|| {
                    Error::new(
                        ErrorKind::Invalid,
                        "the local provider needs a data directory (--data-dir)",
                    )
                })?;
                Ok(Arc::new(LocalStore::with_options(root, options)?))
            }
            #[cfg(not(feature = "local"))]
            Err(disabled("local"))
        }
        Credentials::Aws(c) => {
            #[cfg(feature = "aws")]
            {
                Ok(Arc::new(aws::S3Store::new(c, region, options)?))
            }
            #[cfg(not(feature = "aws"))]
            {
                let _ = c;
                Err(disabled("aws"))
            }
        }
        Credentials::Azure(c) => {
            #[cfg(feature = "azure")]
            {
                Ok(Arc::new(azure::AzureStore::new(c, options)?))
            }
            #[cfg(not(feature = "azure"))]
            {
                let _ = c;
                Err(disabled("azure"))
            }
        }
        Credentials::Gcp(c) => {
            #[cfg(feature = "gcp")]
            {
                Ok(Arc::new(gcp::GcsStore::new(c, region, options).await?))
            }
            #[cfg(not(feature = "gcp"))]
            {
                let _ = c;
                Err(disabled("gcp"))
            }
        }
    }
}

#[allow(dead_code)]
fn disabled(name: &str) -> Error {
    Error::new(
        ErrorKind::Invalid,
        format!("provider {name} is not compiled in (cargo feature `{name}`)"),
    )
}
