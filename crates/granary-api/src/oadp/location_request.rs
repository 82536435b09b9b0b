//! NonAdminBackupStorageLocationRequest (`nabslrequest`): when the administrator requires
//! approval of non-admin locations, the non-admin controller files one of these in the
//! Velero namespace for every NonAdminBackupStorageLocation, and creates nothing for the
//! namespace owner until an administrator sets `spec.approvalDecision: approve`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::velero::BackupStorageLocationSpec;

/// The administrator's decision on a requested NonAdminBackupStorageLocation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NonAdminBslRequestDecision {
    /// The location may be created (or its changed spec applied).
    Approve,
    /// The location is refused; nothing is created for it.
    Reject,
    /// No decision yet.
    Pending,
}

/// Where a NonAdminBackupStorageLocationRequest stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum NonAdminBslRequestPhase {
    /// Waiting for an administrator's decision on the requested spec.
    Pending,
    /// The requested spec was approved.
    Approved,
    /// The requested spec was rejected.
    Rejected,
}

/// The administrator's answer (`oadp.openshift.io/v1alpha1`
/// NonAdminBackupStorageLocationRequest `spec`).
// Several `printcolumn(type_ = ...)` entries read as duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "oadp.openshift.io",
    version = "v1alpha1",
    kind = "NonAdminBackupStorageLocationRequest",
    namespaced,
    status = "NonAdminBackupStorageLocationRequestStatus",
    shortname = "nabslrequest",
    printcolumn(
        name = "NABSL-Namespace",
        type_ = "string",
        json_path = ".status.nonAdminBackupStorageLocation.namespace"
    ),
    printcolumn(
        name = "NABSL-Name",
        type_ = "string",
        json_path = ".status.nonAdminBackupStorageLocation.name"
    ),
    printcolumn(name = "Request-Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    derive = "PartialEq",
    derive = "Default",
    doc = "NonAdminBackupStorageLocationRequest is the Schema for the nonadminbackupstoragelocationrequests API"
)]
#[serde(rename_all = "camelCase")]
pub struct NonAdminBackupStorageLocationRequestSpec {
    /// The administrator's decision on the requested location: approve, reject or
    /// pending. A change of the location's spec sets it back to pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_decision: Option<NonAdminBslRequestDecision>,
}

/// The NonAdminBackupStorageLocation a request was filed for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceNonAdminBsl {
    /// The location spec the namespace owner asks for; the decision applies to this spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_spec: Option<BackupStorageLocationSpec>,
    /// The identifier of the NonAdminBackupStorageLocation (also the name of its Velero
    /// BackupStorageLocation once created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nacuuid: Option<String>,
    /// Name of the NonAdminBackupStorageLocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace of the NonAdminBackupStorageLocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Observed state of a NonAdminBackupStorageLocationRequest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NonAdminBackupStorageLocationRequestStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_admin_backup_storage_location: Option<SourceNonAdminBsl>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<NonAdminBslRequestPhase>,
}

impl NonAdminBackupStorageLocationRequest {
    /// The spec the decision was asked for.
    pub fn requested_spec(&self) -> Option<&BackupStorageLocationSpec> {
        self.status
            .as_ref()?
            .non_admin_backup_storage_location
            .as_ref()?
            .requested_spec
            .as_ref()
    }
}
