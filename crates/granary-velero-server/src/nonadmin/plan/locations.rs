//! The NonAdminBackupStorageLocation controller's pure decisions: what a namespace owner
//! may ask for as a location, the Velero BackupStorageLocation and credentials Secret made
//! for it in the Velero namespace (named by the NACUUID, prefix under the namespace's own
//! directory), the approval request and what the administrator's decision means.

use std::collections::BTreeMap;

use chrono::TimeDelta;
use k8s_openapi::api::core::v1::{Secret, SecretKeySelector};
use kube::ResourceExt;
use kube::api::ObjectMeta;

use super::{in_velero_namespace, nac_labels};
use crate::location::provider_kind;
use granary_api::common::{FieldError, FieldErrors};
use granary_api::oadp::{
    NABSL_ORIGIN_NACUUID_LABEL, NABSL_ORIGIN_NAME_ANNOTATION, NABSL_ORIGIN_NAMESPACE_ANNOTATION,
    NonAdminBackupStorageLocation, NonAdminBackupStorageLocationRequest,
    NonAdminBackupStorageLocationRequestSpec, NonAdminBackupStorageLocationRequestStatus,
    NonAdminBslRequestDecision, NonAdminBslRequestPhase, SourceNonAdminBsl, enforced_spec_errors,
    fill_from_enforced, prefix_for_object_storage,
};
use granary_api::velero::{BackupStorageLocation, BackupStorageLocationSpec};
use granary_velero::layout::{StorageLayout, TopLevelDir};

const SPEC: &str = "spec.backupStorageLocationSpec";

/// The labels of a Velero object made for the NonAdminBackupStorageLocation `nacuuid`.
pub fn nabsl_labels(nacuuid: &str) -> BTreeMap<String, String> {
    nac_labels(NABSL_ORIGIN_NACUUID_LABEL, nacuuid)
}

/// The metadata of every object made in the Velero namespace for a
/// NonAdminBackupStorageLocation: named `nacuuid`, with NAC's labels and annotations.
fn nabsl_object_meta(
    nabsl: &NonAdminBackupStorageLocation,
    velero_namespace: &str,
    nacuuid: &str,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(nacuuid.to_string()),
        namespace: Some(velero_namespace.to_string()),
        labels: Some(nabsl_labels(nacuuid)),
        annotations: Some(nabsl_annotations(nabsl)),
        ..Default::default()
    }
}

fn nabsl_annotations(nabsl: &NonAdminBackupStorageLocation) -> BTreeMap<String, String> {
    [
        (NABSL_ORIGIN_NAME_ANNOTATION, nabsl.name_any()),
        (
            NABSL_ORIGIN_NAMESPACE_ANNOTATION,
            nabsl.namespace().unwrap_or_default(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Every problem with a NonAdminBackupStorageLocation, paths from the object: its
/// namespace; the administrator's enforced spec (against what the user wrote); and, on
/// the spec the enforced one completes, NAC's and Velero's rules, a provider Granary
/// serves (`local` only when the enforced spec sets it), a bucket name that stays a bucket, and no `caCertRef` (it would name a Secret
/// of the Velero namespace).
pub fn location_problems(
    nabsl: &NonAdminBackupStorageLocation,
    enforced: &BackupStorageLocationSpec,
    velero_namespace: &str,
    nac_backup_sync_period: Option<TimeDelta>,
) -> FieldErrors {
    let mut errs = in_velero_namespace(nabsl.namespace(), velero_namespace);
    let user = &nabsl.spec.backup_storage_location_spec;
    errs.extend(enforced_spec_errors(user, enforced, SPEC));
    let mut effective = nabsl.clone();
    effective.spec.backup_storage_location_spec = fill_from_enforced(user, enforced);
    let spec = &effective.spec.backup_storage_location_spec;
    let mut more = effective.validate(nac_backup_sync_period);
    if !spec.provider.trim().is_empty() && provider_kind(&spec.provider).is_none() {
        more.push(FieldError::new(
            format!("{SPEC}.provider"),
            format!(
                "provider {:?} is not served (aws, velero.io/aws, azure, velero.io/azure, gcp, \
                 velero.io/gcp, local)",
                spec.provider
            ),
        ));
    }
    // `local` writes to the Granary server's own disk: the administrator's choice only.
    if provider_kind(&spec.provider) == Some("local")
        && provider_kind(&enforced.provider) != Some("local")
    {
        more.push(FieldError::new(
            format!("{SPEC}.provider"),
            "provider \"local\" writes to the Granary server's own disk and is not open to \
             namespace owners; an administrator can allow it by setting \
             nonAdmin.enforceBSLSpec.provider to local",
        ));
    }
    let bucket = &spec.object_storage.bucket;
    if !bucket.is_empty() {
        let problem = if bucket == "." || bucket == ".." {
            Some(format!("{bucket:?} is not a bucket name"))
        } else {
            StorageLayout::new(bucket, None)
                .err()
                .map(|e| e.to_string())
        };
        if let Some(problem) = problem {
            more.push(FieldError::new(
                format!("{SPEC}.objectStorage.bucket"),
                problem,
            ));
        }
    }
    if spec.object_storage.ca_cert_ref.is_some() {
        more.push(FieldError::new(
            format!("{SPEC}.objectStorage.caCertRef"),
            "not supported for a non-admin location (put the CA bundle in objectStorage.caCert)",
        ));
    }
    for e in more {
        if !errs.iter().any(|have| have.path == e.path) {
            errs.push(e);
        }
    }
    errs
}

/// Why the credentials named by `spec.backupStorageLocationSpec.credential` cannot be
/// used: `secret` is that Secret as found in the location's own namespace.
pub fn credential_problem(
    nabsl: &NonAdminBackupStorageLocation,
    secret: Option<&Secret>,
) -> Option<FieldError> {
    let credential = nabsl
        .spec
        .backup_storage_location_spec
        .credential
        .as_ref()?;
    let ns = nabsl.namespace().unwrap_or_default();
    let Some(secret) = secret else {
        return Some(FieldError::new(
            format!("{SPEC}.credential.name"),
            format!("Secret {:?} not found in namespace {ns}", credential.name),
        ));
    };
    let has_key = secret
        .data
        .as_ref()
        .is_some_and(|d| d.contains_key(&credential.key))
        || secret
            .string_data
            .as_ref()
            .is_some_and(|d| d.contains_key(&credential.key));
    (!has_key).then(|| {
        FieldError::new(
            format!("{SPEC}.credential.key"),
            format!(
                "Secret {:?} in namespace {ns} has no key {:?}",
                credential.name, credential.key
            ),
        )
    })
}

/// The copy of the user's credentials Secret in the Velero namespace: named `nacuuid`,
/// with its type and data and NAC's labels and annotations (never the user's own labels
/// or annotations).
pub fn secret_copy(
    source: &Secret,
    nabsl: &NonAdminBackupStorageLocation,
    velero_namespace: &str,
    nacuuid: &str,
) -> Secret {
    Secret {
        metadata: nabsl_object_meta(nabsl, velero_namespace, nacuuid),
        type_: source.type_.clone(),
        data: source.data.clone(),
        string_data: source.string_data.clone(),
        ..Default::default()
    }
}

/// The Velero BackupStorageLocation made for a valid NonAdminBackupStorageLocation:
/// named `nacuuid` in `velero_namespace`; the user's spec with empty fields filled from
/// the enforced one; the credential the copied Secret; never the default; and the prefix
/// `<namespace>/<user prefix>`, so that two namespaces never share a directory.
pub fn velero_location(
    nabsl: &NonAdminBackupStorageLocation,
    enforced: &BackupStorageLocationSpec,
    velero_namespace: &str,
    nacuuid: &str,
) -> BackupStorageLocation {
    let mut spec = fill_from_enforced(&nabsl.spec.backup_storage_location_spec, enforced);
    let namespace = nabsl.namespace().unwrap_or_default();
    spec.object_storage.prefix = Some(prefix_for_object_storage(
        &namespace,
        spec.object_storage.prefix.as_deref(),
    ));
    spec.default = Some(false);
    spec.credential = spec.credential.map(|c| SecretKeySelector {
        name: nacuuid.to_string(),
        key: c.key,
        optional: None,
    });
    spec.object_storage.ca_cert_ref = None;
    BackupStorageLocation {
        metadata: nabsl_object_meta(nabsl, velero_namespace, nacuuid),
        spec,
        status: None,
    }
}

/// Why a namespace owner's location may not use its bucket, or `None`: whoever owns a
/// location's bucket can plant anything in it, so a namespace owner's location never
/// reaches a bucket of the landscape or of an administrator.
/// - `landscape_buckets`: the landscape's shared shoot-backup buckets this server knows
///   (the seed's BackupBuckets): never, whatever the enforced spec says;
/// - `admin_locations`: the administrator's own locations: never their bucket on the
///   same provider, unless the administrator enforces that very bucket for every
///   namespace owner (each then gets a directory of their own in it);
/// - `allowed_local`: with provider `local` (the server's own disk, where the landscape's
///   buckets live too), only a bucket the administrator lists, or the enforced one.
pub fn reserved_bucket_problem(
    draft: &BackupStorageLocation,
    enforced: &BackupStorageLocationSpec,
    admin_locations: &[BackupStorageLocation],
    landscape_buckets: &[String],
    allowed_local: &[String],
) -> Option<FieldError> {
    let bucket = draft.spec.object_storage.bucket.trim_matches('/');
    if bucket.is_empty() {
        return None;
    }
    let field = format!("{SPEC}.objectStorage.bucket");
    let kind = provider_kind(&draft.spec.provider);
    let enforced_bucket = enforced.object_storage.bucket.trim_matches('/') == bucket;
    if landscape_buckets.iter().any(|b| b == bucket) {
        return Some(FieldError::new(
            field,
            format!(
                "bucket {bucket:?} holds the landscape's shoot backups; a namespace owner's \
                 location may not use it"
            ),
        ));
    }
    let admins = admin_locations.iter().any(|l| {
        provider_kind(&l.spec.provider) == kind
            && l.spec.object_storage.bucket.trim_matches('/') == bucket
    });
    if admins && !enforced_bucket {
        return Some(FieldError::new(
            field,
            format!(
                "bucket {bucket:?} is used by an administrator's backup storage location; a \
                 namespace owner's location may not use it"
            ),
        ));
    }
    if kind == Some("local") && !enforced_bucket && !allowed_local.iter().any(|b| b == bucket) {
        let allowed = if allowed_local.is_empty() {
            "none".to_string()
        } else {
            allowed_local.join(", ")
        };
        return Some(FieldError::new(
            field,
            format!(
                "bucket {bucket:?} is not one the administrator allows for provider local \
                 (nonAdmin.allowedLocalBuckets: {allowed})"
            ),
        ));
    }
    None
}

/// True when a store's keys under `a` and under `b` can meet: the same root, or one root
/// inside the other through one of Velero's top-level directories (`backups/`, ...).
fn roots_overlap(a: &str, b: &str) -> bool {
    let nested = |outer: &str, inner: &str| {
        let rest = if outer.is_empty() {
            Some(inner)
        } else {
            inner.strip_prefix(outer).and_then(|r| r.strip_prefix('/'))
        };
        rest.and_then(|r| r.split('/').next())
            .is_some_and(|first| TopLevelDir::parse(first).is_some())
    };
    a == b || nested(a, b) || nested(b, a)
}

/// The store a location reaches: provider kind, bucket and the endpoint-like settings.
fn store_of(spec: &BackupStorageLocationSpec) -> (Option<&'static str>, &str, Vec<Option<&str>>) {
    let config = spec.config.as_ref();
    let endpoint = ["s3Url", "endpoint", "storageAccount", "storageAccountURI"]
        .iter()
        .map(|k| config.and_then(|c| c.get(*k)).map(String::as_str))
        .collect();
    (
        provider_kind(&spec.provider),
        spec.object_storage.bucket.trim_matches('/'),
        endpoint,
    )
}

/// Why the Velero location `mine` would share its directory with another location of
/// the Velero namespace (an administrator's, or one made for another
/// NonAdminBackupStorageLocation): same store and bucket, and roots whose keys meet. The
/// other location is not named (its name may carry another namespace's).
pub fn shared_directory_problem(
    mine: &BackupStorageLocation,
    others: &[BackupStorageLocation],
) -> Option<FieldError> {
    let root = |l: &BackupStorageLocation| {
        l.spec
            .object_storage
            .prefix
            .as_deref()
            .unwrap_or_default()
            .trim_matches('/')
            .to_string()
    };
    let (mine_root, mine_store) = (root(mine), store_of(&mine.spec));
    let shared = others.iter().any(|o| {
        o.name_any() != mine.name_any()
            && store_of(&o.spec) == mine_store
            && roots_overlap(&mine_root, &root(o))
    });
    shared.then(|| {
        FieldError::new(
            format!("{SPEC}.objectStorage.prefix"),
            format!(
                "the location's directory {mine_root:?} in bucket {:?} would share keys with \
                 another backup storage location",
                mine.spec.object_storage.bucket
            ),
        )
    })
}

/// The approval request filed in the Velero namespace for a NonAdminBackupStorageLocation
/// (named `nacuuid`, decision pending, the requested spec in its status).
pub fn location_request(
    nabsl: &NonAdminBackupStorageLocation,
    velero_namespace: &str,
    nacuuid: &str,
) -> NonAdminBackupStorageLocationRequest {
    NonAdminBackupStorageLocationRequest {
        metadata: nabsl_object_meta(nabsl, velero_namespace, nacuuid),
        spec: NonAdminBackupStorageLocationRequestSpec {
            approval_decision: Some(NonAdminBslRequestDecision::Pending),
        },
        status: Some(request_status(
            nabsl,
            nacuuid,
            NonAdminBslRequestPhase::Pending,
        )),
    }
}

/// The status of the request for `nabsl` in `phase`, with its current spec requested.
pub fn request_status(
    nabsl: &NonAdminBackupStorageLocation,
    nacuuid: &str,
    phase: NonAdminBslRequestPhase,
) -> NonAdminBackupStorageLocationRequestStatus {
    NonAdminBackupStorageLocationRequestStatus {
        non_admin_backup_storage_location: Some(SourceNonAdminBsl {
            requested_spec: Some(nabsl.spec.backup_storage_location_spec.clone()),
            nacuuid: Some(nacuuid.to_string()),
            name: Some(nabsl.name_any()),
            namespace: nabsl.namespace(),
        }),
        phase: Some(phase),
    }
}

/// What the administrator's decision means for the location's current spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    /// No request yet: one must be filed.
    Missing,
    /// The request asks about another spec (the user changed it): the request must ask
    /// about the current one again, decision back to pending.
    Outdated,
    /// Waiting for a decision on the current spec.
    Pending,
    /// The current spec was approved.
    Approved,
    /// The current spec was rejected.
    Rejected,
}

/// The decision on `nabsl`'s current spec. A decision counts only for the spec it was
/// asked about, so a spec changed after approval needs a new approval.
pub fn approval(
    nabsl: &NonAdminBackupStorageLocation,
    request: Option<&NonAdminBackupStorageLocationRequest>,
) -> Approval {
    let Some(request) = request else {
        return Approval::Missing;
    };
    match request.requested_spec() {
        // Filed, but the spec it asks about is not recorded yet (a create drops the
        // status; it is written right after, and that write can lose a race with the
        // administrator's decision): no earlier spec was asked about, so the decision
        // stands, and it counts once the spec is recorded.
        None => return Approval::Pending,
        Some(asked) if *asked != nabsl.spec.backup_storage_location_spec => {
            return Approval::Outdated;
        }
        Some(_) => {}
    }
    match request.spec.approval_decision {
        Some(NonAdminBslRequestDecision::Approve) => Approval::Approved,
        Some(NonAdminBslRequestDecision::Reject) => Approval::Rejected,
        Some(NonAdminBslRequestDecision::Pending) | None => Approval::Pending,
    }
}

#[cfg(test)]
mod tests;
