//! NonAdminBackup (`nab`): a namespace owner's request for a Velero Backup of their
//! own namespace, plus the phase, conditions and queue estimate shared by the
//! non-admin kinds.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::velero::{BackupSpec, BackupStatus, DeleteBackupRequestStatus};

/// High-level lifecycle of a non-admin object.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum NonAdminPhase {
    /// Accepted by the API server, not yet processed.
    New,
    /// The Velero object was not created because of a problem with this object.
    BackingOff,
    /// The Velero object was created.
    Created,
    /// The Velero object is being deleted.
    Deleting,
}

/// NAC's estimate of how many operations are ahead in the OADP namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueInfo {
    /// 0 once served; otherwise 1 + unfinished operations created earlier.
    pub estimated_queue_position: i64,
}

/// What the namespace owner wants backed up (`oadp.openshift.io/v1alpha1`
/// NonAdminBackup `spec`).
// Several `printcolumn(type_ = ...)` entries read as duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "oadp.openshift.io",
    version = "v1alpha1",
    kind = "NonAdminBackup",
    namespaced,
    status = "NonAdminBackupStatus",
    shortname = "nab",
    printcolumn(name = "Request-Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Velero-Phase",
        type_ = "string",
        json_path = ".status.veleroBackup.status.phase"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    derive = "PartialEq",
    derive = "Default",
    doc = "NonAdminBackup is the Schema for the nonadminbackups API"
)]
#[serde(rename_all = "camelCase")]
pub struct NonAdminBackupSpec {
    /// The Velero Backup spec; NAC restricts and completes it.
    pub backup_spec: BackupSpec,
    /// Delete the backup, its restores and its data in object storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_backup: Option<bool>,
}

/// The Velero Backup behind a NonAdminBackup, mirrored.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VeleroBackup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<BackupSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<BackupStatus>,
    /// The identifier that links the Velero Backup to this NonAdminBackup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nacuuid: Option<String>,
    /// Name of the Velero Backup made for this NonAdminBackup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace of the Velero Backup (the namespace Velero runs in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The Velero DeleteBackupRequest behind `spec.deleteBackup`, mirrored.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VeleroDeleteBackupRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DeleteBackupRequestStatus>,
    /// The identifier that links the Velero DeleteBackupRequest to this NonAdminBackup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nacuuid: Option<String>,
    /// Name of the Velero DeleteBackupRequest made for this NonAdminBackup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace of the Velero DeleteBackupRequest (the namespace Velero runs in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// DataUploads of the backup, counted by phase.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataMoverDataUploads {
    /// How many data uploads the backup has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    /// How many data uploads have not started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<i64>,
    /// How many data uploads were accepted by a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<i64>,
    /// How many data uploads are prepared to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepared: Option<i64>,
    /// How many data uploads are running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<i64>,
    /// How many data uploads are being cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canceling: Option<i64>,
    /// How many data uploads were cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canceled: Option<i64>,
    /// How many data uploads failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i64>,
    /// How many data uploads completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<i64>,
}

/// PodVolumeBackups of the backup, counted by phase.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileSystemPodVolumeBackups {
    /// How many pod volume backups the backup has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    /// How many pod volume backups have not started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<i64>,
    /// How many pod volume backups are running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<i64>,
    /// How many pod volume backups failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i64>,
    /// How many pod volume backups completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<i64>,
}

/// Observed state of a NonAdminBackup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NonAdminBackupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub velero_backup: Option<VeleroBackup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub velero_delete_backup_request: Option<VeleroDeleteBackupRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_mover_data_uploads: Option<DataMoverDataUploads>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_system_pod_volume_backups: Option<FileSystemPodVolumeBackups>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_info: Option<QueueInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<NonAdminPhase>,
    /// Conditions of the NonAdminBackup: whether it was accepted and queued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

impl NonAdminBackup {
    /// Name of the Velero Backup, once NAC has created it.
    pub fn velero_backup_name(&self) -> Option<&str> {
        self.status
            .as_ref()?
            .velero_backup
            .as_ref()?
            .name
            .as_deref()
    }

    /// True when the backup uses a NonAdminBackupStorageLocation.
    pub fn uses_nabsl(&self) -> bool {
        self.spec
            .backup_spec
            .storage_location
            .as_ref()
            .is_some_and(|s| !s.is_empty())
    }

    /// True when the user asked for permanent deletion.
    pub fn delete_requested(&self) -> bool {
        self.spec.delete_backup == Some(true)
    }
}
