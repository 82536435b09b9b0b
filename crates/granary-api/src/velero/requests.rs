//! `velero.io/v1` DeleteBackupRequest, DownloadRequest and ServerStatusRequest: small
//! request objects the Velero server processes once.

use chrono::{DateTime, Utc};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::FieldErrors;
use super::checks::push;

/// Which backup to delete (`velero.io/v1` DeleteBackupRequest `spec`).
// Several `printcolumn(type_ = ...)` entries read as duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "DeleteBackupRequest",
    namespaced,
    status = "DeleteBackupRequestStatus",
    printcolumn(
        name = "BackupName",
        type_ = "string",
        json_path = ".spec.backupName",
        description = "The name of the backup to be deleted"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.phase",
        description = "The status of the deletion request"
    ),
    derive = "PartialEq",
    derive = "Default",
    doc = "DeleteBackupRequest is a request to delete one or more backups."
)]
#[serde(rename_all = "camelCase")]
pub struct DeleteBackupRequestSpec {
    /// The Backup to delete, with its data in the backup storage.
    pub backup_name: String,
}

/// Lifecycle phase of a DeleteBackupRequest.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DeleteBackupRequestPhase {
    New,
    InProgress,
    Processed,
}

/// Observed state of a DeleteBackupRequest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeleteBackupRequestStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<DeleteBackupRequestPhase>,
    /// What went wrong while deleting, one problem per entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub errors: Option<Vec<String>>,
}

impl DeleteBackupRequest {
    /// Every problem with this request's spec, paths from `spec`.
    pub fn validate(&self) -> FieldErrors {
        let mut errs = FieldErrors::new();
        if self.spec.backup_name.is_empty() {
            push(&mut errs, "spec.backupName", "required");
        }
        errs
    }
}

/// What to download (`velero.io/v1` DownloadRequest `spec`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "DownloadRequest",
    namespaced,
    status = "DownloadRequestStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "DownloadRequest is a request to download an artifact from backup object storage, such as a backup log file."
)]
#[serde(rename_all = "camelCase")]
pub struct DownloadRequestSpec {
    pub target: DownloadTarget,
}

/// The file to download and the Backup or Restore it belongs to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct DownloadTarget {
    pub kind: DownloadTargetKind,
    /// Name of the Backup or Restore.
    pub name: String,
}

impl Default for DownloadTarget {
    fn default() -> Self {
        Self {
            kind: DownloadTargetKind::BackupLog,
            name: String::new(),
        }
    }
}

/// Kind of file a DownloadRequest asks for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DownloadTargetKind {
    BackupLog,
    BackupContents,
    BackupVolumeSnapshots,
    BackupItemOperations,
    BackupResourceList,
    BackupResults,
    RestoreLog,
    RestoreResults,
    RestoreResourceList,
    RestoreItemOperations,
    #[serde(rename = "CSIBackupVolumeSnapshots")]
    #[schemars(rename = "CSIBackupVolumeSnapshots")]
    CsiBackupVolumeSnapshots,
    #[serde(rename = "CSIBackupVolumeSnapshotContents")]
    #[schemars(rename = "CSIBackupVolumeSnapshotContents")]
    CsiBackupVolumeSnapshotContents,
    BackupVolumeInfos,
    RestoreVolumeInfo,
}

impl DownloadTargetKind {
    /// True for the kinds whose target names a Restore (the rest name a Backup).
    pub fn is_restore_target(self) -> bool {
        matches!(
            self,
            Self::RestoreLog
                | Self::RestoreResults
                | Self::RestoreResourceList
                | Self::RestoreItemOperations
                | Self::RestoreVolumeInfo
        )
    }
}

/// Lifecycle phase of a DownloadRequest.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DownloadRequestPhase {
    New,
    Processed,
}

/// Observed state of a DownloadRequest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DownloadRequestStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<DownloadRequestPhase>,
    /// Pre-signed URL of the file.
    #[serde(
        default,
        rename = "downloadURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub download_url: Option<String>,
    /// When the request may be deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub expiration: Option<DateTime<Utc>>,
}

impl DownloadRequest {
    /// Every problem with this request's spec, paths from `spec`.
    pub fn validate(&self) -> FieldErrors {
        let mut errs = FieldErrors::new();
        if self.spec.target.name.is_empty() {
            push(&mut errs, "spec.target.name", "required");
        }
        errs
    }
}

/// `velero.io/v1` ServerStatusRequest `spec`: empty, as Velero's.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "ServerStatusRequest",
    namespaced,
    status = "ServerStatusRequestStatus",
    shortname = "ssr",
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.phase",
        description = "Server Status Request status such as New/Processed"
    ),
    derive = "PartialEq",
    derive = "Default",
    doc = "ServerStatusRequest is a request to access current status information about the Velero server."
)]
pub struct ServerStatusRequestSpec {}

/// Lifecycle phase of a ServerStatusRequest.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ServerStatusRequestPhase {
    New,
    Processed,
}

/// A plugin of the server, as `velero plugin get` lists it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PluginInfo {
    /// The plugin's name, e.g. `velero.io/pod`.
    pub name: String,
    /// Its kind: `BackupItemAction`, `RestoreItemAction`, `ObjectStore`, ...
    pub kind: String,
}

/// What the server says of itself.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatusRequestStatus {
    /// The current lifecycle phase of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ServerStatusRequestPhase>,
    /// When the server processed the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub processed_timestamp: Option<DateTime<Utc>>,
    /// The server's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// The plugins running in the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub plugins: Option<Vec<PluginInfo>>,
}
