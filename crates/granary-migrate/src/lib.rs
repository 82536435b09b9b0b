//! `granary migrate` (docs/architecture.md#legacy-migration, run as in
//! docs/operations.md#migrating-legacy-buckets): moves a BackupEntry's objects from one
//! bucket to another — a legacy per-shoot bucket into a shared one, or between shared
//! buckets — with etcd down only for the final delta, and registers legacy per-shoot
//! buckets so their shoots keep working until migrated.
//!
//! A run goes through the [`phase::Phase`]s plan → copy → cut-over → scale-up →
//! cleanup, each recorded in the garden BackupEntry's annotations so an interrupted run
//! resumes where it stopped; the [`manifest::Manifest`] in the destination records what
//! is copied. The parts:
//! - [`manifest`]: the manifest format and its key;
//! - [`plan`]: the pure decisions (what to copy, re-listing, HEAD skip, copy mode,
//!   quota, estimate);
//! - [`phase`]: phases, their annotations and transitions;
//! - [`place`]: the destination's quota, asked of the garden;
//! - [`copy`]: the copy engine (bounded parallelism, server-side or streamed);
//! - [`etcd`]: scaling etcd-main (Druid `Etcd` or the StatefulSet's scale subresource);
//! - [`cutover`]: the cut-over and the switch of the entry, its secret and etcd store;
//! - [`abandon`]: backing out of a migration that has not switched the entry;
//! - [`cleanup`]: handing the source to a `source-<entry>` BackupEntry for deletion;
//! - [`legacy`]: `migrate legacy import`;
//! - [`progress`]: progress output and the final report;
//! - [`cli`]: the command line's library side;
//! - [`run`]: the context and the orchestration of `migrate entry` and `migrate status`.

pub mod abandon;
pub mod cleanup;
pub mod cli;
pub mod copy;
pub mod cutover;
pub mod etcd;
pub mod legacy;
pub mod manifest;
pub mod phase;
pub mod place;
pub mod plan;
pub mod progress;
pub mod run;

pub use legacy::{ImportOutcome, LegacyBucket, discover_legacy, import_legacy};
pub use progress::{CopyCounters, MigrationReport, Output};
pub use run::{EntryMigration, MigrateContext, MigrationStatus, migrate_entry, migration_status};

/// Why a migration step failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    #[error("object store: {0}")]
    Store(#[from] granary_providers::Error),
    #[error("{0}")]
    Invalid(String),
    #[error("quota: {0}")]
    Quota(String),
    /// The garden refused the destination a place for the entry (full, being deleted…).
    #[error("the garden refused the move: {0}")]
    Refused(String),
    #[error("timed out: {0}")]
    Timeout(String),
    #[error(transparent)]
    Failpoint(#[from] granary_runtime::failpoints::FailpointError),
    #[error(transparent)]
    Phase(#[from] phase::UnknownPhase),
}

impl From<granary_seed::prefix::EmptyPrefix> for MigrateError {
    fn from(e: granary_seed::prefix::EmptyPrefix) -> Self {
        MigrateError::Invalid(e.to_string())
    }
}
