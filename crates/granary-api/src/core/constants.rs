//! Names Gardener and Granary agree on: annotations, labels, finalizers, condition types
//! and the names of the secrets and objects derived from a bucket or an entry (listed in
//! docs/formats.md#granarys-labels-and-annotations). Nobody spells these strings anywhere
//! else.

/// Annotation asking a controller for an operation: one of the `OPERATION_*` values.
pub const ANNOTATION_OPERATION: &str = "gardener.cloud/operation";
/// `gardener.cloud/operation` value: reconcile now.
pub const OPERATION_RECONCILE: &str = "reconcile";
/// `gardener.cloud/operation` value: hand the object over to another seed.
pub const OPERATION_MIGRATE: &str = "migrate";
/// `gardener.cloud/operation` value: take the object over from another seed.
pub const OPERATION_RESTORE: &str = "restore";
/// `gardener.cloud/operation` value: wait until `status.state` has been restored.
pub const OPERATION_WAIT_FOR_STATE: &str = "wait-for-state";
/// RFC 3339 (nano) time of the last deploy; also on the copied seed secrets.
pub const ANNOTATION_TIMESTAMP: &str = "gardener.cloud/timestamp";
/// `true` on a BackupEntry skips its deletion grace period.
pub const ANNOTATION_FORCE_DELETION: &str = "backupentry.core.gardener.cloud/force-deletion";
/// The shoot's purpose, copied onto its BackupEntry; selects the grace period.
pub const ANNOTATION_SHOOT_PURPOSE: &str = "shoot.gardener.cloud/purpose";
/// On an extension BackupBucket: the namespace its generated secret goes to.
pub const ANNOTATION_GENERATED_SECRET_NAMESPACE: &str =
    "backupbucket.extensions.gardener.cloud/generated-secret-namespace";
/// `true` is required on an extension object before Gardener deletes it.
pub const ANNOTATION_CONFIRM_DELETION: &str = "confirmation.gardener.cloud/deletion";
/// On the `etcd-backup` secret: the BackupEntry that wrote it.
pub const ANNOTATION_CREATED_BY: &str = "backup.gardener.cloud/created-by";
/// On an extension BackupEntry: the garden entry's deletionTimestamp (RFC 3339), so the
/// seed can run the grace period without reaching the garden.
pub const ANNOTATION_DELETION_REQUESTED_AT: &str = "granary.gardener.cloud/deletion-requested-at";

/// On a garden BackupEntry being migrated (`granary migrate`): the bucket it moves into.
/// It is also the migration's request for a place there, which the garden answers with
/// one of the two annotations below.
pub const ANNOTATION_MIGRATION_TARGET: &str = "granary.gardener.cloud/migration-target";
/// Set by the garden: the place in this bucket is held for the entry (its count was
/// raised within the quota), so the entry counts there until it moves or lets go.
pub const ANNOTATION_MIGRATION_RESERVED: &str = "granary.gardener.cloud/migration-reserved";
/// Set by the garden: why the entry may not move into the target bucket.
pub const ANNOTATION_MIGRATION_REFUSED: &str = "granary.gardener.cloud/migration-refused";

/// Label with the seed responsible for a garden BackupBucket/BackupEntry.
pub const LABEL_SEED: &str = "granary.gardener.cloud/seed";
/// Prefix of the labels naming, on a garden BackupBucket of a shared pool, each seed that
/// may read the Velero prefixes in it (`reader.granary.gardener.cloud/<seed>: "true"`):
/// the seeds of the pool, so any of them lists and restores the others' backups
/// (docs/architecture.md#sibling-locations). Only the garden writes them.
pub const LABEL_VELERO_READER_PREFIX: &str = "reader.granary.gardener.cloud/";

/// The reader label of `seed` ([`LABEL_VELERO_READER_PREFIX`]).
pub fn velero_reader_label(seed: &str) -> String {
    format!("{LABEL_VELERO_READER_PREFIX}{seed}")
}

/// Label with the [`PoolKind`] of a garden BackupBucket.
pub const LABEL_POOL_KIND: &str = "granary.gardener.cloud/pool-kind";
/// Label with the name of the CloudProfile or Seed owning a bucket pool.
pub const LABEL_POOL_OWNER: &str = "granary.gardener.cloud/pool-owner";
/// Label with the region of a bucket pool.
pub const LABEL_REGION: &str = "granary.gardener.cloud/region";
/// Label with the shard number of a bucket within its pool.
pub const LABEL_SHARD: &str = "granary.gardener.cloud/shard";
/// Label with the Granary installation that manages an object.
pub const LABEL_INSTANCE: &str = "granary.gardener.cloud/instance";
/// Prefix of the `provider.extensions.gardener.cloud/<type>=true` label.
pub const LABEL_PROVIDER_PREFIX: &str = "provider.extensions.gardener.cloud/";

/// Finalizer on garden BackupBuckets and BackupEntries.
pub const FINALIZER_GARDENER: &str = "gardener";
/// Finalizer the garden controller keeps on every garden BackupBucket it manages: the
/// deletion guard. It is removed only when no BackupEntry references the bucket, so a
/// seed acts on a bucket's deletion only once it is gone.
pub const FINALIZER_GARDEN_BUCKET_GUARD: &str = "granary.gardener.cloud/garden";
/// On an empty non-first shard: since when (RFC 3339) it has held no entry.
pub const ANNOTATION_EMPTY_SINCE: &str = "granary.gardener.cloud/empty-since";
/// Finalizer on a bucket's credentials and on the garden copy of its generated secret.
pub const FINALIZER_CORE_BACKUPBUCKET: &str = "core.gardener.cloud/backupbucket";
/// Finalizer on extension BackupBuckets and the secrets they reference.
pub const FINALIZER_EXTENSIONS_BACKUPBUCKET: &str = "extensions.gardener.cloud/backupbucket";
/// Finalizer on extension BackupEntries and the secrets they reference.
pub const FINALIZER_EXTENSIONS_BACKUPENTRY: &str = "extensions.gardener.cloud/backupentry";

/// Seed condition Granary keeps: are the seed's buckets healthy?
pub const CONDITION_BACKUP_BUCKETS_READY: &str = "BackupBucketsReady";
/// `BackupBucketsReady` reason: some bucket has a lastError.
pub const REASON_BACKUP_BUCKETS_ERROR: &str = "BackupBucketsError";
/// `BackupBucketsReady` reason: the seed has no buckets.
pub const REASON_BACKUP_BUCKETS_GONE: &str = "BackupBucketsGone";
/// `BackupBucketsReady` reason: every bucket is fine.
pub const REASON_BACKUP_BUCKETS_AVAILABLE: &str = "BackupBucketsAvailable";
/// Seed condition Granary keeps: is the seed lost (being deleted, or unready longer
/// than `controllers.backupBucket.seedHandOverAfter`)? Its Velero backups then restore on
/// the other seeds of its pool (docs/architecture.md#sibling-locations).
pub const CONDITION_SEED_LOST: &str = "Lost";
/// `Lost` reason: the Seed is being deleted.
pub const REASON_SEED_DELETED: &str = "SeedDeleted";
/// `Lost` reason: the seed stopped renewing its Lease long ago.
pub const REASON_SEED_UNREADY: &str = "SeedUnready";
/// `Lost` reason (status False): the seed renews its Lease, or has not been unready long.
pub const REASON_SEED_REACHABLE: &str = "SeedReachable";
/// CloudProfile condition Granary keeps: is `spec.backup` usable?
pub const CONDITION_BACKUP_CONFIGURATION_VALID: &str = "BackupConfigurationValid";

/// Namespace of the garden (leases, credentials) and of the copied secrets in a seed.
pub const GARDEN_NAMESPACE: &str = "garden";
/// The Secret holding integrity signing keys (docs/formats.md#integrity-record): in the
/// garden's namespace the landscape's, which every seed reads; in a Velero namespace the
/// keys of a `granary server` of its own.
pub const INTEGRITY_KEYS_SECRET: &str = "granary-integrity-keys";
/// Name of the secret the etcd backup sidecar reads in a shoot's control-plane namespace.
pub const ETCD_BACKUP_SECRET_NAME: &str = "etcd-backup";
/// Prefix of a source BackupEntry created for a copy between buckets.
pub const SOURCE_ENTRY_PREFIX: &str = "source-";

/// Name of the seed copy (in [`GARDEN_NAMESPACE`]) of a bucket's credentials.
pub fn bucket_secret_name(bucket: &str) -> String {
    format!("bucket-{bucket}")
}

/// Name of the seed copy (in [`GARDEN_NAMESPACE`]) of an entry's credentials.
pub fn entry_secret_name(entry: &str) -> String {
    format!("entry-{entry}")
}

/// Name of the secret a provider generates for a bucket (e.g. Azure's storage key).
pub fn generated_secret_name(bucket: &str) -> String {
    format!("generated-bucket-{bucket}")
}

/// The `provider.extensions.gardener.cloud/<type>` label key.
pub fn provider_label(provider_type: &str) -> String {
    format!("{LABEL_PROVIDER_PREFIX}{provider_type}")
}

/// What a bucket pool is keyed by (value of [`LABEL_POOL_KIND`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PoolKind {
    /// The pool of a CloudProfile's `spec.backup`.
    CloudProfile,
    /// The pool of a Seed with its own `spec.backup`.
    Seed,
    /// A per-shoot bucket from before shared buckets; never a placement target.
    Legacy,
}

impl PoolKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            PoolKind::CloudProfile => "cloudprofile",
            PoolKind::Seed => "seed",
            PoolKind::Legacy => "legacy",
        }
    }
}

impl std::fmt::Display for PoolKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for PoolKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cloudprofile" => Ok(PoolKind::CloudProfile),
            "seed" => Ok(PoolKind::Seed),
            "legacy" => Ok(PoolKind::Legacy),
            other => Err(format!(
                "unknown pool kind {other:?}, expected cloudprofile, seed or legacy"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_kind_round_trips_through_its_label_value() {
        for kind in [PoolKind::CloudProfile, PoolKind::Seed, PoolKind::Legacy] {
            assert_eq!(kind.as_str().parse::<PoolKind>(), Ok(kind));
        }
        assert!("shared".parse::<PoolKind>().is_err());
    }

    #[test]
    fn derived_names() {
        assert_eq!(bucket_secret_name("b1"), "bucket-b1");
        assert_eq!(entry_secret_name("e1"), "entry-e1");
        assert_eq!(generated_secret_name("b1"), "generated-bucket-b1");
        assert_eq!(
            provider_label("aws"),
            "provider.extensions.gardener.cloud/aws"
        );
    }
}
