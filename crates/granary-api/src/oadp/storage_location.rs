//! NonAdminBackupStorageLocation (`nabsl`): a namespace owner's own bucket, turned by
//! NAC into a Velero BackupStorageLocation in the OADP namespace.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::NonAdminPhase;
use crate::velero::{BackupStorageLocationSpec, BackupStorageLocationStatus};

/// The location the namespace owner asks for (`oadp.openshift.io/v1alpha1`
/// NonAdminBackupStorageLocation `spec`).
// Several `printcolumn(type_ = ...)` entries read as duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "oadp.openshift.io",
    version = "v1alpha1",
    kind = "NonAdminBackupStorageLocation",
    namespaced,
    status = "NonAdminBackupStorageLocationStatus",
    shortname = "nabsl",
    printcolumn(
        name = "Request-Approved",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='ClusterAdminApproved')].status"
    ),
    printcolumn(name = "Request-Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Velero-Phase",
        type_ = "string",
        json_path = ".status.veleroBackupStorageLocation.status.phase"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    derive = "PartialEq",
    derive = "Default",
    doc = "NonAdminBackupStorageLocation is the Schema for the nonadminbackupstoragelocations API"
)]
#[serde(rename_all = "camelCase")]
pub struct NonAdminBackupStorageLocationSpec {
    /// The Velero BSL spec; NAC forces the prefix under the namespace.
    pub backup_storage_location_spec: BackupStorageLocationSpec,
}

/// The Velero BackupStorageLocation behind a NonAdminBackupStorageLocation, mirrored.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VeleroBackupStorageLocation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<BackupStorageLocationStatus>,
    /// The identifier that links the Velero BackupStorageLocation to this
    /// NonAdminBackupStorageLocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nacuuid: Option<String>,
    /// Name of the Velero BackupStorageLocation made for this
    /// NonAdminBackupStorageLocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace of the Velero BackupStorageLocation (the namespace Velero runs in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Observed state of a NonAdminBackupStorageLocation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NonAdminBackupStorageLocationStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub velero_backup_storage_location: Option<VeleroBackupStorageLocation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<NonAdminPhase>,
    /// Conditions of the NonAdminBackupStorageLocation: whether it was accepted and its
    /// Velero location created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// The object-storage prefix NAC forces: `<namespace>/<user prefix>`, or `<namespace>`.
pub fn prefix_for_object_storage(namespace: &str, user_prefix: Option<&str>) -> String {
    match user_prefix
        .map(|p| p.trim_matches('/'))
        .filter(|p| !p.is_empty())
    {
        Some(p) => format!("{namespace}/{p}"),
        None => namespace.to_owned(),
    }
}
