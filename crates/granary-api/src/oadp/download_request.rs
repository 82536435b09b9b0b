//! NonAdminDownloadRequest (`nadr`): a namespace owner's request for a download URL of a
//! file (logs, contents, results, ...) of their own NonAdminBackup or NonAdminRestore,
//! served through a Velero DownloadRequest `nadr-<uid>` in the Velero namespace.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::NonAdminPhase;
use crate::velero::{DownloadRequestStatus, DownloadTarget};

/// What the namespace owner wants to download (`oadp.openshift.io/v1alpha1`
/// NonAdminDownloadRequest `spec`).
// Several `printcolumn(type_ = ...)` entries read as duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "oadp.openshift.io",
    version = "v1alpha1",
    kind = "NonAdminDownloadRequest",
    namespaced,
    status = "NonAdminDownloadRequestStatus",
    shortname = "nadr",
    printcolumn(name = "Request-Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    derive = "PartialEq",
    derive = "Default",
    doc = "NonAdminDownloadRequest is the Schema for the nonadmindownloadrequests API"
)]
#[serde(rename_all = "camelCase")]
pub struct NonAdminDownloadRequestSpec {
    /// What to download: a kind of file and the name of a NonAdminBackup (backup kinds)
    /// or NonAdminRestore (restore kinds) of this namespace.
    pub target: DownloadTarget,
}

/// The Velero DownloadRequest behind a NonAdminDownloadRequest, mirrored.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VeleroDownloadRequest {
    /// The Velero DownloadRequest's status: the download URL, when it expires, and
    /// whether it was processed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DownloadRequestStatus>,
}

/// Observed state of a NonAdminDownloadRequest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NonAdminDownloadRequestStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub velero: Option<VeleroDownloadRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<NonAdminPhase>,
    /// Conditions of the NonAdminDownloadRequest: why it cannot be served, if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

impl NonAdminDownloadRequest {
    /// The name of the Velero DownloadRequest NAC makes for this request: `nadr-<uid>`.
    pub fn velero_download_request_name(&self) -> Option<String> {
        self.metadata
            .uid
            .as_ref()
            .filter(|u| !u.is_empty())
            .map(|u| format!("{NADR_PREFIX}{u}"))
    }
}

/// Prefix of the Velero DownloadRequest made for a NonAdminDownloadRequest.
pub const NADR_PREFIX: &str = "nadr-";
