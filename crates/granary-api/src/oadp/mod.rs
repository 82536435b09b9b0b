//! `oadp.openshift.io/v1alpha1`: the OADP non-admin kinds NonAdminBackup (`nab`),
//! NonAdminRestore (`nar`), NonAdminBackupStorageLocation (`nabsl`) with its approval
//! object NonAdminBackupStorageLocationRequest (`nabslrequest`), and
//! NonAdminDownloadRequest (`nadr`), which embed the Velero specs of [`crate::velero`],
//! with the names NAC puts on objects, its NACUUID naming rule and its validation (see
//! docs/architecture.md#non-admin-backups). Nothing here does I/O.

mod backup;
mod constants;
mod download_request;
mod location_request;
mod naming;
mod restore;
mod storage_location;
mod validation;

#[cfg(test)]
mod tests;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use backup::{
    DataMoverDataUploads, FileSystemPodVolumeBackups, NonAdminBackup, NonAdminBackupSpec,
    NonAdminBackupStatus, NonAdminPhase, QueueInfo, VeleroBackup, VeleroDeleteBackupRequest,
};
pub use constants::*;
pub use download_request::{
    NADR_PREFIX, NonAdminDownloadRequest, NonAdminDownloadRequestSpec,
    NonAdminDownloadRequestStatus, VeleroDownloadRequest,
};
pub use location_request::{
    NonAdminBackupStorageLocationRequest, NonAdminBackupStorageLocationRequestSpec,
    NonAdminBackupStorageLocationRequestStatus, NonAdminBslRequestDecision,
    NonAdminBslRequestPhase, SourceNonAdminBsl,
};
pub use naming::{nac_name_prefix, nac_object_name};
pub use restore::{
    DataMoverDataDownloads, FileSystemPodVolumeRestores, NonAdminRestore, NonAdminRestoreSpec,
    NonAdminRestoreStatus, VeleroRestore,
};
pub use storage_location::{
    NonAdminBackupStorageLocation, NonAdminBackupStorageLocationSpec,
    NonAdminBackupStorageLocationStatus, VeleroBackupStorageLocation, prefix_for_object_storage,
};
pub use validation::{
    enforced_spec_errors, fill_from_enforced, user_prefix_problem, validate_non_admin_backup_spec,
    validate_non_admin_bsl_spec, validate_non_admin_restore_spec,
};

/// API group of every kind here.
pub const GROUP: &str = "oadp.openshift.io";
/// API version of every kind here.
pub const VERSION: &str = "v1alpha1";

/// The CRDs of every `oadp.openshift.io/v1alpha1` kind here.
pub fn crds() -> Vec<CustomResourceDefinition> {
    use crate::velero::tidy_crd;
    vec![
        tidy_crd(NonAdminBackup::crd()),
        tidy_crd(NonAdminRestore::crd()),
        tidy_crd(NonAdminBackupStorageLocation::crd()),
        tidy_crd(NonAdminBackupStorageLocationRequest::crd()),
        tidy_crd(NonAdminDownloadRequest::crd()),
    ]
}
