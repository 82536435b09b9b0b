//! Names the OADP non-admin controller (NAC) puts on objects: labels, annotations,
//! finalizers, condition types, reasons and messages, the always-excluded resources, and
//! its periods, exactly as upstream NAC spells them. Granary's own names are listed in
//! docs/formats.md#granarys-labels-and-annotations.

/// Label on every Velero object NAC creates; its value is [`OADP_LABEL_VALUE`].
pub const OADP_LABEL: &str = "openshift.io/oadp";
pub const OADP_LABEL_VALUE: &str = "True";
/// `app.kubernetes.io/managed-by` with value [`MANAGED_BY_LABEL_VALUE`].
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_LABEL_VALUE: &str = "oadp-nac-controller";

/// Origin labels: the NACUUID of the non-admin object a Velero object was made for.
pub const NAB_ORIGIN_NACUUID_LABEL: &str = "openshift.io/oadp-nab-origin-nacuuid";
pub const NAR_ORIGIN_NACUUID_LABEL: &str = "openshift.io/oadp-nar-origin-nacuuid";
pub const NABSL_ORIGIN_NACUUID_LABEL: &str = "openshift.io/oadp-nabsl-origin-nacuuid";
pub const NADR_ORIGIN_NACUUID_LABEL: &str = "openshift.io/oadp-nadr-origin-nacuuid";
/// On a NonAdminBackup recreated by the sync controller: the NACUUID it was synced from.
pub const NAB_SYNCED_FROM_NACUUID_LABEL: &str = "openshift.io/oadp-nab-synced-from-nacuuid";

/// Origin annotations: name and namespace of the non-admin object.
pub const NAB_ORIGIN_NAME_ANNOTATION: &str = "openshift.io/oadp-nab-origin-name";
pub const NAB_ORIGIN_NAMESPACE_ANNOTATION: &str = "openshift.io/oadp-nab-origin-namespace";
pub const NAR_ORIGIN_NAME_ANNOTATION: &str = "openshift.io/oadp-nar-origin-name";
pub const NAR_ORIGIN_NAMESPACE_ANNOTATION: &str = "openshift.io/oadp-nar-origin-namespace";
pub const NABSL_ORIGIN_NAME_ANNOTATION: &str = "openshift.io/oadp-nabsl-origin-name";
pub const NABSL_ORIGIN_NAMESPACE_ANNOTATION: &str = "openshift.io/oadp-nabsl-origin-namespace";
pub const NADR_ORIGIN_NAME_ANNOTATION: &str = "openshift.io/oadp-nadr-origin-name";
pub const NADR_ORIGIN_NAMESPACE_ANNOTATION: &str = "openshift.io/oadp-nadr-origin-namespace";

/// Finalizers NAC keeps on its objects until the Velero side is cleaned up.
pub const NAB_FINALIZER: &str = "nonadminbackup.oadp.openshift.io/finalizer";
pub const NAR_FINALIZER: &str = "nonadminrestore.oadp.openshift.io/finalizer";
pub const NABSL_FINALIZER: &str = "nonadminbackupstoragelocation.oadp.openshift.io/finalizer";

/// Environment variable naming the OADP (Velero) namespace.
pub const WATCH_NAMESPACE_ENV: &str = "WATCH_NAMESPACE";
/// Longest generated Velero object name (a DNS-1123 label; also used as a label value).
pub const MAXIMUM_NAC_OBJECT_NAME_LENGTH: usize = 63;
/// Longest label or annotation value NAC accepts as valid.
pub const MAXIMUM_LABEL_ANNOTATION_VALUE_LENGTH: usize = 252;

/// Condition types.
pub const CONDITION_ACCEPTED: &str = "Accepted";
pub const CONDITION_QUEUED: &str = "Queued";
pub const CONDITION_DELETING: &str = "Deleting";
pub const CONDITION_SECRET_SYNCED: &str = "SecretSynced";
pub const CONDITION_BACKUP_STORAGE_LOCATION_SYNCED: &str = "BackupStorageLocationSynced";
pub const CONDITION_CLUSTER_ADMIN_APPROVED: &str = "ClusterAdminApproved";
pub const CONDITION_SPEC_UPDATE_APPROVED: &str = "SpecUpdateApproved";
/// NonAdminDownloadRequest condition types (status `True` says what is wrong).
pub const CONDITION_NABSL_NOT_USED: &str = "NonAdminBackupStorageLocationNotUsed";
pub const CONDITION_NAB_NOT_AVAILABLE: &str = "NonAdminBackupNotAvailable";
pub const CONDITION_NAR_NOT_AVAILABLE: &str = "NonAdminRestoreNotAvailable";
pub const CONDITION_PROCESSED: &str = "Processed";

/// Condition reasons.
pub const REASON_INVALID_BACKUP_SPEC: &str = "InvalidBackupSpec";
/// Granary's: a NonAdminBackup whose own storage location is not ready yet waits for it
/// (looked at again on every change of a location) instead of being refused for good.
pub const REASON_LOCATION_NOT_READY: &str = "BackupStorageLocationNotReady";
pub const REASON_BACKUP_ACCEPTED: &str = "BackupAccepted";
pub const REASON_BACKUP_SCHEDULED: &str = "BackupScheduled";
pub const REASON_DELETION_PENDING: &str = "DeletionPending";
pub const REASON_VELERO_BACKUP_NOT_FOUND: &str = "VeleroBackupNotFound";
pub const REASON_INVALID_RESTORE_SPEC: &str = "InvalidRestoreSpec";
pub const REASON_RESTORE_ACCEPTED: &str = "RestoreAccepted";
pub const REASON_RESTORE_SCHEDULED: &str = "RestoreScheduled";
pub const REASON_VELERO_RESTORE_NOT_FOUND: &str = "VeleroRestoreNotFound";
pub const REASON_BSL_SPEC_VALIDATION: &str = "BslSpecValidation";
pub const REASON_SECRET_CREATED: &str = "SecretCreated";
pub const REASON_SECRET_UPDATED: &str = "SecretUpdated";
pub const REASON_BSL_CREATED: &str = "BackupStorageLocationCreated";
pub const REASON_BSL_UPDATED: &str = "BackupStorageLocationUpdated";
pub const REASON_BSL_APPROVED: &str = "BslSpecApproved";
pub const REASON_BSL_PENDING_APPROVAL: &str = "BslSpecPendingApproval";
pub const REASON_BSL_REJECTED: &str = "BslSpecRejected";
pub const REASON_BSL_UPDATE_APPROVED: &str = "BslSpecUpdateApproved";
pub const REASON_BSL_UPDATE_PENDING: &str = "BslSpecUpdatePendingApproval";
/// Reason of a NonAdminDownloadRequest condition that says what is wrong.
pub const REASON_ERROR: &str = "Error";
pub const REASON_DOWNLOAD_PROCESSED: &str = "DownloadRequestProcessed";

/// Condition messages NAC writes verbatim.
pub const MESSAGE_BACKUP_ACCEPTED: &str = "backup accepted";
pub const MESSAGE_BACKUP_SCHEDULED: &str = "Created Velero Backup object";
pub const MESSAGE_RESTORE_ACCEPTED: &str = "restore accepted";
pub const MESSAGE_RESTORE_SCHEDULED: &str = "Created Velero Restore object";
pub const MESSAGE_BACKUP_DELETION_ACCEPTED: &str = "backup accepted for deletion";
pub const MESSAGE_BSL_ACCEPTED: &str = "NonAdminBackupStorageLocation spec validation successful";
pub const MESSAGE_SECRET_CREATED: &str = "Secret successfully created in the OADP namespace";
pub const MESSAGE_SECRET_UPDATED: &str = "Secret successfully updated in the OADP namespace";
pub const MESSAGE_BSL_CREATED: &str =
    "BackupStorageLocation successfully created in the OADP namespace";
pub const MESSAGE_BSL_UPDATED: &str =
    "BackupStorageLocation successfully updated in the OADP namespace";
pub const MESSAGE_BSL_APPROVED: &str =
    "BackupStorageLocation approved by the cluster administrator";
pub const MESSAGE_BSL_PENDING_APPROVAL: &str =
    "BackupStorageLocation is waiting for approval by the cluster administrator";
pub const MESSAGE_BSL_REJECTED: &str =
    "BackupStorageLocation rejected by the cluster administrator";
pub const MESSAGE_BSL_UPDATE_PENDING: &str = "the changed spec is waiting for approval by the cluster administrator; the approved spec stays in use";
pub const MESSAGE_BSL_UPDATE_APPROVED: &str = "the changed spec was approved and applied";
pub const MESSAGE_PERMANENT_DELETION_REQUIRED: &str =
    "permanent backup deletion requires setting spec.deleteBackup to true";

/// Namespaced resources NAC always excludes from a non-admin backup.
pub const EXCLUDED_NAMESPACED_RESOURCES: [&str; 3] = [
    "nonadminbackups",
    "nonadminrestores",
    "nonadminbackupstoragelocations",
];
/// Cluster-scoped resources NAC always excludes from a non-admin backup.
pub const EXCLUDED_CLUSTER_RESOURCES: [&str; 7] = [
    "securitycontextconstraints",
    "clusterroles",
    "clusterrolebindings",
    "priorityclasses",
    "customresourcedefinitions",
    "virtualmachineclusterinstancetypes",
    "virtualmachineclusterpreferences",
];
/// Added to `excludedResources` of every Velero Restore NAC creates.
pub const EXCLUDED_RESTORE_RESOURCE: &str = "volumesnapshotclasses";

/// DPA `nonAdmin.backupSyncPeriod` default (2m); 0 or less disables the NAB sync.
pub const DEFAULT_BACKUP_SYNC_PERIOD_SECS: i64 = 120;
/// DPA `nonAdmin.garbageCollectionPeriod` default (24h).
pub const DEFAULT_GARBAGE_COLLECTION_PERIOD_SECS: i64 = 24 * 3600;
/// Velero's `--backup-sync-period` default (1m), used when a NABSL sets none.
pub const VELERO_DEFAULT_BACKUP_SYNC_PERIOD_SECS: i64 = 60;

/// NAC's `CheckLabelAnnotationValueIsValid`: length between 1 and 252.
pub fn is_valid_label_or_annotation_value(value: &str) -> bool {
    (1..=MAXIMUM_LABEL_ANNOTATION_VALUE_LENGTH).contains(&value.len())
}
