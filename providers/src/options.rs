//! Tuning knobs shared by all providers. The defaults are the real limits of the
//! clouds; tests shrink page and part sizes so small data crosses every boundary.

use std::path::PathBuf;
use std::time::Duration;

use crate::retry::RetryPolicy;
use crate::store::Immutability;

/// Options for [`crate::open`] that do not come from the Secret.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub retry: RetryPolicy,
    /// Part (S3) / block (Azure) / chunk (GCS resumable) size for `put_reader`.
    /// S3 requires ≥ 5 MiB for all but the last part; GCS a multiple of 256 KiB.
    pub part_size: usize,
    /// Keys per list page; `None` uses the store's maximum (1000 S3 and GCS, 5000 Azure).
    pub list_page_size: Option<u32>,
    /// Keys per `delete_many` round in `delete_prefix`; S3 allows at most 1000.
    pub delete_batch_size: usize,
    /// Concurrent single-key deletes (Azure, GCS) and concurrent part uploads.
    pub concurrency: usize,
    /// Timeout of one HTTP attempt (not of a whole streaming download).
    pub request_timeout: Duration,
    /// Root directory of the `local` provider (`--data-dir`); never from a Secret.
    pub local_root: Option<PathBuf>,
    /// GCS project for bucket creation; defaults to the service account's `project_id`.
    pub gcp_project: Option<String>,
    /// Object lock applied to new S3 buckets (from providerConfig).
    pub immutability: Option<Immutability>,
    /// Whether S3 buckets get a TLS-only bucket policy. `None`: only when the endpoint
    /// is https (on plain http the policy would deny Granary's own requests).
    pub tls_only_policy: Option<bool>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            retry: RetryPolicy::default(),
            part_size: 16 * 1024 * 1024,
            list_page_size: None,
            delete_batch_size: 1000,
            concurrency: 16,
            request_timeout: Duration::from_secs(60),
            local_root: None,
            gcp_project: None,
            immutability: None,
            tls_only_policy: None,
        }
    }
}

/// S3 never takes more than 1000 keys in one DeleteObjects request.
pub const S3_MAX_DELETE_BATCH: usize = 1000;
/// S3's smallest part size (all but the last part).
pub const S3_MIN_PART_SIZE: usize = 5 * 1024 * 1024;
