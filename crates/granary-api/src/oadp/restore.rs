//! NonAdminRestore (`nar`): a namespace owner's request to restore one of their
//! NonAdminBackups into their namespace.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{NonAdminPhase, QueueInfo};
use crate::velero::{RestoreSpec, RestoreStatus};

/// What the namespace owner wants restored (`oadp.openshift.io/v1alpha1`
/// NonAdminRestore `spec`).
// Several `printcolumn(type_ = ...)` entries read as duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "oadp.openshift.io",
    version = "v1alpha1",
    kind = "NonAdminRestore",
    namespaced,
    status = "NonAdminRestoreStatus",
    shortname = "nar",
    printcolumn(name = "Request-Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Velero-Phase",
        type_ = "string",
        json_path = ".status.veleroRestore.status.phase"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    derive = "PartialEq",
    derive = "Default",
    doc = "NonAdminRestore is the Schema for the nonadminrestores API"
)]
#[serde(rename_all = "camelCase")]
pub struct NonAdminRestoreSpec {
    /// The Velero Restore spec; `backupName` names a NonAdminBackup.
    pub restore_spec: RestoreSpec,
}

/// The Velero Restore behind a NonAdminRestore, mirrored.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VeleroRestore {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RestoreStatus>,
    /// Name of the Velero Restore made for this NonAdminRestore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The identifier that links the Velero Restore to this NonAdminRestore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nacuuid: Option<String>,
    /// Namespace of the Velero Restore (the namespace Velero runs in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// DataDownloads of the restore, counted by phase.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataMoverDataDownloads {
    /// How many data downloads the restore has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    /// How many data downloads have not started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<i64>,
    /// How many data downloads were accepted by a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<i64>,
    /// How many data downloads are prepared to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepared: Option<i64>,
    /// How many data downloads are running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<i64>,
    /// How many data downloads are being cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canceling: Option<i64>,
    /// How many data downloads were cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canceled: Option<i64>,
    /// How many data downloads failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i64>,
    /// How many data downloads completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<i64>,
}

/// PodVolumeRestores of the restore, counted by phase.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileSystemPodVolumeRestores {
    /// How many pod volume restores the restore has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    /// How many pod volume restores have not started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<i64>,
    /// How many pod volume restores are running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<i64>,
    /// How many pod volume restores failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i64>,
    /// How many pod volume restores completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<i64>,
}

/// Observed state of a NonAdminRestore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NonAdminRestoreStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub velero_restore: Option<VeleroRestore>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_mover_data_downloads: Option<DataMoverDataDownloads>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_system_pod_volume_restores: Option<FileSystemPodVolumeRestores>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_info: Option<QueueInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<NonAdminPhase>,
    /// Conditions of the NonAdminRestore: whether it was accepted and queued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

impl NonAdminRestore {
    /// Name of the Velero Restore, once NAC has created it.
    pub fn velero_restore_name(&self) -> Option<&str> {
        self.status
            .as_ref()?
            .velero_restore
            .as_ref()?
            .name
            .as_deref()
    }

    /// The NonAdminBackup this restore reads from.
    pub fn non_admin_backup_name(&self) -> Option<&str> {
        self.spec.restore_spec.backup_name.as_deref()
    }
}
