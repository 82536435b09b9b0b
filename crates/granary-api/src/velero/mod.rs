//! `velero.io/v1`: Backup, Restore, BackupStorageLocation, DeleteBackupRequest, Schedule,
//! DownloadRequest and ServerStatusRequest with Velero 1.18's JSON field names, phases and defaults, so
//! Velero's CLI, YAML and stored `velero-backup.json` files work unchanged.
//!
//! Fields are `Option` wherever Velero's are optional, so an object read and written
//! back keeps exactly the fields it had. Defaults live in Rust (`apply_defaults`), not in
//! the CRD; validation (`validate`, `validate_at`) returns every problem with its field
//! path. Nothing here does I/O.

mod backup;
mod checks;
pub mod cron;
mod duration;
mod requests;
mod restore;
mod schedule;
mod storage_location;

#[cfg(test)]
pub(crate) mod tests;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

pub use crate::common::{FieldError, FieldErrors};
pub use backup::{
    Backup, BackupHooks, BackupPhase, BackupProgress, BackupResourceHook, BackupResourceHookSpec,
    BackupSpec, BackupStatus, DEFAULT_BACKUP_HOOK_ON_ERROR, DEFAULT_EXEC_HOOK_TIMEOUT_SECS,
    ExecHook, HookErrorMode, HookStatus, Metadata, UploaderConfigForBackup,
};
pub use duration::{Duration, DurationError};
pub use requests::{
    DeleteBackupRequest, DeleteBackupRequestPhase, DeleteBackupRequestSpec,
    DeleteBackupRequestStatus, DownloadRequest, DownloadRequestPhase, DownloadRequestSpec,
    DownloadRequestStatus, DownloadTarget, DownloadTargetKind, PluginInfo, ServerStatusRequest,
    ServerStatusRequestPhase, ServerStatusRequestSpec, ServerStatusRequestStatus,
};
pub use restore::{
    DEFAULT_RESTORE_HOOK_ON_ERROR, ExecRestoreHook, InitRestoreHook, NON_RESTORABLE_RESOURCES,
    PolicyType, RESTORE_FINALIZER, Restore, RestoreHooks, RestorePhase, RestoreProgress,
    RestoreResourceHook, RestoreResourceHookSpec, RestoreSpec, RestoreStatus, RestoreStatusSpec,
    UploaderConfigForRestore,
};
pub use schedule::{Schedule, SchedulePhase, ScheduleSpec, ScheduleStatus};
pub use storage_location::{
    BackupStorageLocation, BackupStorageLocationAccessMode, BackupStorageLocationPhase,
    BackupStorageLocationSpec, BackupStorageLocationStatus, MRAP_BUCKET_PREFIX,
    ObjectStorageLocation,
};

/// API group of every kind here.
pub const GROUP: &str = "velero.io";
/// API version of every kind here.
pub const VERSION: &str = "v1";

/// Archive format version Velero writes into `status.formatVersion` and `metadata/version`.
pub const BACKUP_FORMAT_VERSION: &str = "1.1.0";
/// Deprecated major format version in `status.version`.
pub const BACKUP_VERSION: i64 = 1;

/// Label on Backups (and restored objects, DeleteBackupRequests) naming the backup.
pub const BACKUP_NAME_LABEL: &str = "velero.io/backup-name";
/// Label on DeleteBackupRequests and PodVolumeBackups carrying the backup's UID.
pub const BACKUP_UID_LABEL: &str = "velero.io/backup-uid";
/// Label on restored objects naming the restore.
pub const RESTORE_NAME_LABEL: &str = "velero.io/restore-name";
/// Label on backups created by a schedule.
pub const SCHEDULE_NAME_LABEL: &str = "velero.io/schedule-name";
/// Label on backups naming their storage location.
pub const STORAGE_LOCATION_LABEL: &str = "velero.io/storage-location";
/// Label the GC controller sets when it cannot delete an expired backup.
pub const GC_FAILURE_LABEL: &str = "velero.io/gc-failure";
/// Label backup sync puts on every Backup it imports from object storage (value
/// `true`): such a Backup is a record of what a bucket holds, never work to do. The
/// queue, the backup controller and the schedules leave it alone, whatever its phase.
pub const SYNCED_LABEL: &str = "granary.gardener.cloud/synced";
/// Annotation on the backups a Schedule creates, naming the Schedule's UID: what makes a
/// backup the schedule's own (its `lastBackup`, its pile-up rule, its name collisions).
/// Backup sync never carries it over from a bucket.
pub const SCHEDULE_UID_ANNOTATION: &str = "granary.gardener.cloud/schedule-uid";
/// Annotation on a Backup: the last integrity check of its objects in storage
/// (`verified`, `unsigned`, `unknown-key` or `mismatch`; docs/formats.md#integrity-record).
/// Written by backup sync, the backup controller and the `backup-verification` scrubber;
/// never read from a bucket, never trusted by a restore (which checks again).
pub const INTEGRITY_ANNOTATION: &str = "granary.gardener.cloud/integrity";
/// Annotation beside [`INTEGRITY_ANNOTATION`]: why, when it is not `verified`.
pub const INTEGRITY_REASON_ANNOTATION: &str = "granary.gardener.cloud/integrity-reason";
/// Annotation beside [`INTEGRITY_ANNOTATION`]: when the objects were last checked (RFC 3339).
pub const INTEGRITY_CHECKED_AT_ANNOTATION: &str = "granary.gardener.cloud/integrity-checked-at";
/// Label on a read-only BackupStorageLocation Granary keeps of another seed's Velero
/// prefix (`seed-<name>`): that seed's name (docs/architecture.md#sibling-locations).
pub const SOURCE_SEED_LABEL: &str = "granary.gardener.cloud/source-seed";
/// Annotation on a Backup synced from another seed's prefix (a location labelled
/// [`SOURCE_SEED_LABEL`]): the name its files are stored under. Such a Backup is named
/// `<seed>.<stored name>` ([`sibling_backup_name`]) so that two seeds' backups of the same
/// name (the same Schedule on every seed) both appear; every reader of a backup's files
/// goes through [`Backup::stored_name`]. Set by backup sync only; a new Backup carrying it
/// is refused.
pub const STORED_NAME_ANNOTATION: &str = "granary.gardener.cloud/stored-name";

/// The name of the Backup that lists backup `stored` of seed `seed`: seed names are
/// DNS-1123 labels, so the first dot separates them.
pub fn sibling_backup_name(seed: &str, stored: &str) -> String {
    format!("{seed}.{stored}")
}

/// Annotation on a Restore: the location its own files (logs, results, resource list,
/// integrity record) went to, when not its backup's: a read-only location (another
/// seed's) is never written, so they go to the default location instead.
pub const RESTORE_FILES_LOCATION_ANNOTATION: &str = "granary.gardener.cloud/files-location";
/// Annotation on a Restore (value `true`): an administrator accepts restoring an
/// `unsigned` backup (Velero's own, or one an older Granary wrote). Never honoured for a
/// namespace owner's restore.
pub const ALLOW_UNVERIFIED_ANNOTATION: &str = "granary.gardener.cloud/allow-unverified";
/// Annotation on a Backup: the outcome of the last restore rehearsal (`ok: …` or
/// `failed: <reason>`, with the counts of what the restore would create, update and skip).
pub const REHEARSAL_ANNOTATION: &str = "granary.gardener.cloud/rehearsed";
/// Annotation beside [`REHEARSAL_ANNOTATION`]: when the rehearsal ran (RFC 3339).
pub const REHEARSED_AT_ANNOTATION: &str = "granary.gardener.cloud/rehearsed-at";

/// True when `backup` was imported by backup sync ([`SYNCED_LABEL`]).
pub fn is_synced(backup: &Backup) -> bool {
    backup
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(SYNCED_LABEL))
        .is_some_and(|v| v == "true")
}

/// The server-wide defaults Velero applies to specs (its `velero server` flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerDefaults {
    /// `--default-backup-ttl`, 720h.
    pub backup_ttl: Duration,
    /// CSI snapshot timeout, 10m.
    pub csi_snapshot_timeout: Duration,
    /// `--default-item-operation-timeout` for backups, 4h.
    pub item_operation_timeout: Duration,
    /// `--default-item-operation-timeout` for restores, 4h.
    pub restore_item_operation_timeout: Duration,
}

impl Default for ServerDefaults {
    fn default() -> Self {
        Self {
            backup_ttl: Duration::hours(720),
            csi_snapshot_timeout: Duration::minutes(10),
            item_operation_timeout: Duration::hours(4),
            restore_item_operation_timeout: Duration::hours(4),
        }
    }
}

/// The CRDs of every `velero.io/v1` kind here.
pub fn crds() -> Vec<CustomResourceDefinition> {
    [
        Backup::crd(),
        Restore::crd(),
        BackupStorageLocation::crd(),
        DeleteBackupRequest::crd(),
        Schedule::crd(),
        DownloadRequest::crd(),
        ServerStatusRequest::crd(),
    ]
    .into_iter()
    .map(|crd| without_status_subresource(tidy_crd(crd)))
    .collect()
}

/// No `velero.io` CRD has a status subresource (Velero dropped them in 1.9): Velero's
/// controllers write `status` by updating or patching the whole object, and with a
/// status subresource the API server would drop those writes (a BackupStorageLocation
/// would never become Available). Granary's controllers write status the same way; the
/// Rust types still carry a typed `status`.
fn without_status_subresource(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(sub) = version.subresources.as_mut() {
            sub.status = None;
            if sub.scale.is_none() {
                version.subresources = None;
            }
        }
    }
    crd
}

/// Brings a Velero or OADP CRD to the shape controller-gen gives it upstream:
/// - no `null` in the `enum` list of an optional enum field (the generator adds one; a
///   value that does not match `type: string` is best kept out of a CRD);
/// - no `required: [spec]` at the root: Velero's and OADP's Go types say
///   `spec,omitempty`, so an object without `spec` is valid upstream;
/// - no `format` on integers: upstream counts with Go `int`, which controller-gen leaves
///   without one (the `int64` of `metav1.Condition.observedGeneration` stays).
pub(crate) fn tidy_crd(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            drop_null_enum_values(schema);
            schema.required = None;
            drop_integer_formats(schema);
        }
    }
    crd
}

fn drop_integer_formats(schema: &mut JSONSchemaProps) {
    let props = schema.properties.as_ref();
    let is_condition = props.is_some_and(|p| {
        p.contains_key("observedGeneration") && p.contains_key("lastTransitionTime")
    });
    if is_condition {
        return;
    }
    if schema.type_.as_deref() == Some("integer") {
        schema.format = None;
    }
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        drop_integer_formats(child);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = schema.items.as_mut() {
        drop_integer_formats(items);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(extra)) = schema.additional_properties.as_mut() {
        drop_integer_formats(extra);
    }
}

fn drop_null_enum_values(schema: &mut JSONSchemaProps) {
    if let Some(values) = schema.enum_.as_mut() {
        values.retain(|v| v.0 != serde_json::Value::Null);
    }
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        drop_null_enum_values(child);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = schema.items.as_mut() {
        drop_null_enum_values(items);
    }
    if let Some(JSONSchemaPropsOrArray::Schemas(items)) = schema.items.as_mut() {
        items.iter_mut().for_each(drop_null_enum_values);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(extra)) = schema.additional_properties.as_mut() {
        drop_null_enum_values(extra);
    }
}
