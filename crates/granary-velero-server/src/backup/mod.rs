//! The backup runner: everything between "this Backup is ReadyToStart and validated"
//! and "its files are in object storage", as Velero 1.18 does it (`backup_controller.go`
//! `runBackup`, `pkg/backup`, `persistence.PutBackup`). The backup controller calls
//! [`validate`] and then [`run`]; phases, status patches and metrics stay with it.
//!
//! [`run`]:
//! 1. refuses a backup whose `velero-backup.json` already exists
//!    ([`BackupError::AlreadyExists`], "backup already exists in object storage");
//! 2. reads discovery (preferred versions) and lists every resource the filters take,
//!    page by page (`limit`/`continue`), in Velero's order ([`catalog`],
//!    [`filters`], `orderedResources`);
//! 3. hands each item to a pool of `workers` tasks that run the item checks and the
//!    [`actions`] (a custom resource brings its CRD, a ServiceAccount its cluster RBAC, a
//!    Pod its claims, a claim its volume) and send the items to one tarball writer,
//!    whose bytes stream through a bounded [`pipe`] into `put_reader` while collection
//!    goes on;
//! 4. uploads `manifest.json.gz`, the resource list, the results, the log and, last,
//!    `velero-backup.json` ([`persist`]): a backup whose upload fails part-way is `Failed`
//!    and has no `velero-backup.json`, so backup sync never imports half a backup.
//!
//! [`collect`] is the dry run: steps 2 and 3 with the tarball written to nowhere and
//! the store never touched, returning the manifest items in write order.
//!
//! Pure decisions live in [`catalog`], [`filters`], [`order`], [`selectors`], [`validate`] and the
//! item readers of [`actions`], each tested beside its code.

pub mod actions;
pub mod catalog;
pub(crate) mod cluster;
mod collect;
pub mod filters;
pub(crate) mod logbook;
pub mod order;
mod persist;
mod pipe;
mod preview;
mod runner;
pub mod selectors;
mod setup;
mod validate;

use granary_api::velero::Backup;
pub use granary_api::velero::BackupProgress;
pub use preview::{CollectRequest, Collected};
pub use validate::{BOTH_SELECTORS, MIXED_FILTERS};

/// One backup to run.
pub struct BackupRequest<'a> {
    /// The cluster being backed up.
    pub client: kube::Client,
    /// Validated, phase InProgress, `status.expiration` etc. set by the controller.
    pub backup: &'a Backup,
    pub store: &'a dyn granary_providers::ObjectStore,
    /// Bucket and prefix of the backup's storage location.
    pub layout: &'a granary_velero::layout::StorageLayout,
    /// Items per list page (`clientPageSize`, Velero default 500); 0 lists unpaged.
    pub page_size: u32,
    /// Items backed up in parallel (`itemBlockWorkerCount`, at least 1).
    pub workers: usize,
    /// When the run starts (the controller's clock); later times derive from it.
    pub now: chrono::DateTime<chrono::Utc>,
    /// Called with `totalItems`/`itemsBackedUp` about once a second, and once at the end.
    pub progress: &'a (dyn Fn(BackupProgress) + Send + Sync),
    /// Signs the backup's integrity record (its newest key).
    pub keyring: &'a granary_velero::integrity::Keyring,
    /// The namespace owner the backup is made for (a NonAdminBackup's namespace), bound
    /// into the integrity record.
    pub tenant: Option<&'a str>,
}

/// How a backup ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackupResultPhase {
    Completed,
    /// Some items failed (errors counted); everything else is stored.
    PartiallyFailed,
    /// Nothing usable is stored (no `velero-backup.json`); see `failure_reason`.
    Failed,
}

impl BackupResultPhase {
    pub fn as_phase(self) -> granary_api::velero::BackupPhase {
        use granary_api::velero::BackupPhase;
        match self {
            Self::Completed => BackupPhase::Completed,
            Self::PartiallyFailed => BackupPhase::PartiallyFailed,
            Self::Failed => BackupPhase::Failed,
        }
    }
}

/// The result of [`run`], for the Backup's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupOutcome {
    pub phase: BackupResultPhase,
    pub errors: u32,
    pub warnings: u32,
    pub total_items: u64,
    pub items_backed_up: u64,
    pub failure_reason: Option<String>,
    /// `status.formatVersion` (`1.2.0`: Velero's 1.1.0 tarball plus the manifest).
    pub format_version: String,
    /// When the run ended (`status.completionTimestamp`, also in `velero-backup.json`).
    pub completion_timestamp: chrono::DateTime<chrono::Utc>,
    /// Size of the stored tarball (`velero_backup_tarball_size_bytes`); 0 when Failed.
    pub tarball_bytes: u64,
}

/// Why a backup could not run at all. The controller marks the backup `Failed` with the
/// message as `failureReason`.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// `velero-backup.json` is already in the bucket (Velero's message).
    #[error("backup already exists in object storage")]
    AlreadyExists(String),
    /// The store could not be asked whether the backup exists.
    #[error("error checking if backup already exists in object storage: {0}")]
    Store(granary_providers::Error),
    /// Discovery failed before anything was written.
    #[error("error discovering the cluster's resources: {0}")]
    Kube(kube::Error),
    /// The request cannot run (a bad name, a bad spec that slipped past validation).
    #[error("invalid {field}: {message}")]
    Invalid { field: String, message: String },
}

/// Velero's spec validation for what does not need the cluster (see
/// `validate.rs` for what Granary refuses on top: exec hooks, volume data,
/// resource policies). Empty when the backup may run; otherwise the messages for
/// `status.validationErrors` of a `FailedValidation` backup.
pub async fn validate(backup: &Backup) -> Vec<String> {
    validate::validation_errors(backup)
}

/// Runs one validated backup and stores it (module docs).
pub async fn run(req: BackupRequest<'_>) -> Result<BackupOutcome, BackupError> {
    runner::run(req).await
}

/// Collects what a backup of `req.backup` would hold without storing anything (the
/// dry run; module docs).
pub async fn collect(req: CollectRequest<'_>) -> Result<Collected, BackupError> {
    preview::collect(req).await
}
