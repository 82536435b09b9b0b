//! The non-admin controllers' pure decisions (see
//! docs/architecture.md#non-admin-objects-stay-in-their-namespace): what a NonAdminBackup
//! or NonAdminRestore may ask for, the Velero object made for it, the queue estimate and
//! the conditions. No I/O here; the controllers look things up and hand them in.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::api::ObjectMeta;

use granary_api::common::{FieldError, FieldErrors};
use granary_api::oadp::{
    EXCLUDED_CLUSTER_RESOURCES, EXCLUDED_NAMESPACED_RESOURCES, EXCLUDED_RESTORE_RESOURCE,
    MANAGED_BY_LABEL, MANAGED_BY_LABEL_VALUE, NAB_ORIGIN_NACUUID_LABEL, NAB_ORIGIN_NAME_ANNOTATION,
    NAB_ORIGIN_NAMESPACE_ANNOTATION, NAR_ORIGIN_NACUUID_LABEL, NAR_ORIGIN_NAME_ANNOTATION,
    NAR_ORIGIN_NAMESPACE_ANNOTATION, NonAdminBackup, NonAdminPhase, NonAdminRestore, OADP_LABEL,
    OADP_LABEL_VALUE, enforced_spec_errors, fill_from_enforced,
};
use granary_api::velero::{Backup, BackupPhase, BackupSpec, Restore, RestoreSpec};

mod downloads;
mod gc;
mod locations;
mod sync;

pub use downloads::{DownloadRefusal, backup_name, expired, nadr_origin, velero_download_request};
pub use gc::{LiveLocations, live_locations, location_orphaned, secret_candidates};
pub use locations::{
    Approval, approval, credential_problem, location_problems, location_request, nabsl_labels,
    request_status, reserved_bucket_problem, secret_copy, shared_directory_problem,
    velero_location,
};
pub use sync::{WatchedLocations, watched_locations};

/// A non-admin object in the Velero namespace is refused: backing up or restoring into
/// that namespace would reach the credentials and objects of every user.
pub(super) fn in_velero_namespace(
    namespace: Option<String>,
    velero_namespace: &str,
) -> FieldErrors {
    match namespace {
        Some(ns) if ns == velero_namespace => vec![FieldError::new(
            "metadata.namespace",
            format!("non-admin objects are not allowed in the Velero namespace {ns}"),
        )],
        _ => FieldErrors::new(),
    }
}

/// Every problem with a NonAdminBackup: its namespace, NAC's rules, Velero's own, and
/// the administrator's enforced spec; paths from the object (`spec.backupSpec.…`).
pub fn backup_problems(
    nab: &NonAdminBackup,
    enforced: &BackupSpec,
    velero_namespace: &str,
) -> FieldErrors {
    let mut errs = in_velero_namespace(nab.namespace(), velero_namespace);
    errs.extend(nab.validate());
    errs.extend(enforced_spec_errors(
        &nab.spec.backup_spec,
        enforced,
        "spec.backupSpec",
    ));
    errs
}

/// Every problem with a NonAdminRestore's namespace and own spec (the NAB it names is
/// checked by [`restorable_backup`]).
pub fn restore_problems(
    nar: &NonAdminRestore,
    enforced: &RestoreSpec,
    velero_namespace: &str,
) -> FieldErrors {
    let mut errs = in_velero_namespace(nar.namespace(), velero_namespace);
    errs.extend(nar.validate());
    errs.extend(enforced_spec_errors(
        &nar.spec.restore_spec,
        enforced,
        "spec.restoreSpec",
    ));
    errs
}

/// The problems as one condition message: `path: message; path: message`.
pub fn message(errs: &[FieldError]) -> String {
    errs.iter()
        .map(|e| format!("{}: {}", e.path, e.message))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The labels NAC puts on every Velero object it makes, plus the origin label.
pub(super) fn nac_labels(origin_label: &str, nacuuid: &str) -> BTreeMap<String, String> {
    [
        (OADP_LABEL, OADP_LABEL_VALUE),
        (MANAGED_BY_LABEL, MANAGED_BY_LABEL_VALUE),
        (origin_label, nacuuid),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The origin annotations of a NonAdminBackup on the Velero objects made for it.
pub fn nab_annotations(nab: &NonAdminBackup) -> BTreeMap<String, String> {
    [
        (NAB_ORIGIN_NAME_ANNOTATION, nab.name_any()),
        (
            NAB_ORIGIN_NAMESPACE_ANNOTATION,
            nab.namespace().unwrap_or_default(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The labels of a Velero object made for the NonAdminBackup with `nacuuid`.
pub fn nab_labels(nacuuid: &str) -> BTreeMap<String, String> {
    nac_labels(NAB_ORIGIN_NACUUID_LABEL, nacuuid)
}

fn append(list: &mut Option<Vec<String>>, more: &[&str]) {
    let list = list.get_or_insert_with(Vec::new);
    for m in more {
        if !list.iter().any(|have| have == m) {
            list.push(m.to_string());
        }
    }
}

/// The Velero Backup NAC makes for a valid NonAdminBackup: named `nacuuid` in
/// `velero_namespace`; the spec with empty fields filled from the enforced spec, only
/// the NAB's own namespace included, `storageLocation` the Velero location behind the
/// user's NABSL (`None` for the default location), and the always-excluded resources
/// added (to `excludedResources`, or to the `excluded*ScopedResources` fields when the
/// new-style filters are used).
pub fn velero_backup(
    nab: &NonAdminBackup,
    enforced: &BackupSpec,
    velero_namespace: &str,
    nacuuid: &str,
    storage_location: Option<String>,
) -> Backup {
    let mut spec = fill_from_enforced(&nab.spec.backup_spec, enforced);
    spec.included_namespaces = Some(vec![nab.namespace().unwrap_or_default()]);
    spec.storage_location = storage_location;
    if spec.new_resource_filters_set().is_empty() {
        let all: Vec<&str> = EXCLUDED_NAMESPACED_RESOURCES
            .iter()
            .chain(EXCLUDED_CLUSTER_RESOURCES.iter())
            .copied()
            .collect();
        append(&mut spec.excluded_resources, &all);
    } else {
        append(
            &mut spec.excluded_namespace_scoped_resources,
            &EXCLUDED_NAMESPACED_RESOURCES,
        );
        append(
            &mut spec.excluded_cluster_scoped_resources,
            &EXCLUDED_CLUSTER_RESOURCES,
        );
    }
    Backup {
        metadata: ObjectMeta {
            name: Some(nacuuid.to_string()),
            namespace: Some(velero_namespace.to_string()),
            labels: Some(nab_labels(nacuuid)),
            annotations: Some(nab_annotations(nab)),
            ..Default::default()
        },
        spec,
        status: None,
    }
}

/// True when the Velero object's origin annotations name this namespace (NAC refuses
/// to act on a Velero object that came from elsewhere).
pub fn origin_matches(
    annotations: &BTreeMap<String, String>,
    namespace_annotation: &str,
    namespace: &str,
) -> bool {
    annotations.get(namespace_annotation).map(String::as_str) == Some(namespace)
}

/// NAC's `estimatedQueuePosition`: 0 once the operation has completed, else 1 + the
/// operations in the Velero namespace, not yet completed, created before it (all of
/// them, not only non-admin ones). `others` are (creation time, completed) pairs.
pub fn queue_position(
    created: Option<&Time>,
    completed: bool,
    others: impl IntoIterator<Item = (Option<Time>, bool)>,
) -> i64 {
    if completed {
        return 0;
    }
    let Some(created) = created else { return 1 };
    1 + others
        .into_iter()
        .filter(|(t, done)| !done && t.as_ref().is_some_and(|t| t.0 < created.0))
        .count() as i64
}

/// Why a NonAdminRestore's `backupName` cannot be restored from, or the Velero Backup
/// to restore: the NAB must exist in the NAR's namespace and be `Created`, and (beyond
/// NAC, its issue #225) its Velero Backup must exist, come from that namespace, and be
/// `Completed` or `PartiallyFailed`.
pub fn restorable_backup(
    namespace: &str,
    backup_name: &str,
    nab: Option<&NonAdminBackup>,
    velero: Option<&Backup>,
) -> Result<String, FieldError> {
    let field = "spec.restoreSpec.backupName";
    let refuse = |m: String| Err(FieldError::new(field, m));
    let Some(nab) = nab else {
        return refuse(format!(
            "NonAdminBackup {backup_name:?} not found in namespace {namespace}"
        ));
    };
    let phase = nab.status.as_ref().and_then(|s| s.phase);
    if phase != Some(NonAdminPhase::Created) {
        return refuse(format!(
            "NonAdminBackup {backup_name:?} is not ready to restore from (phase {})",
            phase.map_or("unset".to_string(), |p| format!("{p:?}"))
        ));
    }
    let Some(velero) = velero else {
        return refuse(format!(
            "the backup of NonAdminBackup {backup_name:?} does not exist"
        ));
    };
    if !origin_matches(
        velero.annotations(),
        NAB_ORIGIN_NAMESPACE_ANNOTATION,
        namespace,
    ) {
        return refuse(format!(
            "the backup of NonAdminBackup {backup_name:?} does not belong to namespace {namespace}"
        ));
    }
    let velero_phase = velero.status.as_ref().and_then(|s| s.phase);
    match velero_phase {
        Some(BackupPhase::Completed | BackupPhase::PartiallyFailed) => Ok(velero.name_any()),
        other => refuse(format!(
            "the backup of NonAdminBackup {backup_name:?} is {}, not Completed or PartiallyFailed",
            other.map_or("not finished".to_string(), |p| p.to_string())
        )),
    }
}

/// The Velero Restore NAC makes for a valid NonAdminRestore: named `nacuuid` in
/// `velero_namespace`, from `velero_backup`, restoring into the NAR's namespace only,
/// empty fields filled from the enforced spec, `volumesnapshotclasses` excluded, and
/// `includeClusterResources` false whatever the specs say: no cluster-scoped object.
pub fn velero_restore(
    nar: &NonAdminRestore,
    enforced: &RestoreSpec,
    velero_namespace: &str,
    nacuuid: &str,
    velero_backup: &str,
) -> Restore {
    let mut spec = fill_from_enforced(&nar.spec.restore_spec, enforced);
    let namespace = nar.namespace().unwrap_or_default();
    spec.backup_name = Some(velero_backup.to_string());
    spec.schedule_name = None;
    spec.included_namespaces = Some(vec![namespace.clone()]);
    spec.excluded_namespaces = None;
    spec.namespace_mapping = None;
    spec.include_cluster_resources = Some(false);
    append(&mut spec.excluded_resources, &[EXCLUDED_RESTORE_RESOURCE]);
    let annotations = [
        (NAR_ORIGIN_NAME_ANNOTATION, nar.name_any()),
        (NAR_ORIGIN_NAMESPACE_ANNOTATION, namespace),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Restore {
        metadata: ObjectMeta {
            name: Some(nacuuid.to_string()),
            namespace: Some(velero_namespace.to_string()),
            labels: Some(nac_labels(NAR_ORIGIN_NACUUID_LABEL, nacuuid)),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec,
        status: None,
    }
}

/// Sets condition `type_` in `conditions` as observed at `generation`; its transition
/// time moves only when its status changes.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    (reason, message): (&str, &str),
    generation: Option<i64>,
    now: Time,
) {
    let status = if status { "True" } else { "False" }.to_string();
    let new = Condition {
        type_: type_.to_string(),
        status: status.clone(),
        reason: reason.to_string(),
        message: message.to_string(),
        last_transition_time: now,
        observed_generation: generation,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            let time = if c.status == status {
                c.last_transition_time.clone()
            } else {
                new.last_transition_time.clone()
            };
            *c = Condition {
                last_transition_time: time,
                ..new
            };
        }
        None => conditions.push(new),
    }
}

/// True when the object was refused (`Accepted=False`) at its current generation: the
/// refusal is final until the user changes the spec, as NAC's terminal errors are.
pub fn refused_at(conditions: Option<&Vec<Condition>>, generation: Option<i64>) -> bool {
    conditions.into_iter().flatten().any(|c| {
        c.type_ == granary_api::oadp::CONDITION_ACCEPTED
            && c.status == "False"
            && c.reason != granary_api::oadp::REASON_LOCATION_NOT_READY
            && c.observed_generation.is_some()
            && c.observed_generation == generation
    })
}

/// The NonAdminBackups NAC's sync recreates: one for every finished Velero Backup made
/// for a NonAdminBackup (NAC labels, a valid origin label and origin annotations) on a
/// watched location, whose origin namespace exists and has no NonAdminBackup of that
/// name or NACUUID. The NAB carries `openshift.io/oadp-nab-synced-from-nacuuid` and the
/// Velero spec, its storage location cleared (the default location) or mapped back to the
/// NonAdminBackupStorageLocation's name; a backup on a NABSL's location is recreated only
/// in that NABSL's namespace.
pub fn nabs_to_sync(
    backups: &[Backup],
    watched_locations: &WatchedLocations,
    namespaces: &std::collections::BTreeSet<String>,
    existing: &[NonAdminBackup],
) -> Vec<NonAdminBackup> {
    use granary_api::oadp::{NAB_SYNCED_FROM_NACUUID_LABEL, is_valid_label_or_annotation_value};
    let mut out: Vec<NonAdminBackup> = Vec::new();
    for b in backups {
        let labels = b.labels();
        let annotations = b.annotations();
        let is_nac = labels.get(OADP_LABEL).map(String::as_str) == Some(OADP_LABEL_VALUE)
            && labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY_LABEL_VALUE);
        let Some(uuid) = labels.get(NAB_ORIGIN_NACUUID_LABEL) else {
            continue;
        };
        let (Some(name), Some(ns)) = (
            annotations.get(NAB_ORIGIN_NAME_ANNOTATION),
            annotations.get(NAB_ORIGIN_NAMESPACE_ANNOTATION),
        ) else {
            continue;
        };
        let valid = is_nac
            && uuid.len() <= granary_api::oadp::MAXIMUM_NAC_OBJECT_NAME_LENGTH
            && is_valid_label_or_annotation_value(uuid)
            && is_valid_label_or_annotation_value(name)
            && is_valid_label_or_annotation_value(ns)
            && *uuid == b.name_any();
        let finished = b
            .status
            .as_ref()
            .is_some_and(|s| s.completion_timestamp.is_some());
        // A backup on a NonAdminBackupStorageLocation's location goes back only to that
        // location's own namespace: the backup's metadata comes from the user's bucket.
        let Some(location) = b
            .spec
            .storage_location
            .as_ref()
            .and_then(|l| watched_locations.get(l))
        else {
            continue;
        };
        let own = location.as_ref().is_none_or(|(nabsl_ns, _)| nabsl_ns == ns);
        if !valid || !finished || !own || !namespaces.contains(ns) {
            continue;
        }
        let taken = existing.iter().chain(out.iter()).any(|n| {
            n.namespace().as_deref() == Some(ns.as_str())
                && (n.name_any() == *name
                    || n.status
                        .as_ref()
                        .and_then(|s| s.velero_backup.as_ref())
                        .and_then(|v| v.nacuuid.as_ref())
                        == Some(uuid))
        });
        if taken {
            continue;
        }
        let mut spec = b.spec.clone();
        spec.storage_location = location.as_ref().map(|(_, nabsl)| nabsl.clone());
        let mut nab = NonAdminBackup::new(
            name,
            granary_api::oadp::NonAdminBackupSpec {
                backup_spec: spec,
                delete_backup: None,
            },
        );
        nab.metadata.namespace = Some(ns.clone());
        nab.metadata.labels =
            Some([(NAB_SYNCED_FROM_NACUUID_LABEL.to_string(), uuid.clone())].into());
        out.push(nab);
    }
    out
}

/// The NACUUID a NonAdminBackup recreated by the sync takes over: its synced-from label,
/// when that Velero Backup exists and was made for this NAB's namespace and name.
pub fn adopted_nacuuid(nab: &NonAdminBackup, backups: &[Backup]) -> Option<String> {
    let uuid = nab
        .labels()
        .get(granary_api::oadp::NAB_SYNCED_FROM_NACUUID_LABEL)?;
    let ns = nab.namespace().unwrap_or_default();
    backups
        .iter()
        .find(|b| {
            b.name_any() == *uuid
                && origin_matches(b.annotations(), NAB_ORIGIN_NAMESPACE_ANNOTATION, &ns)
                && b.annotations().get(NAB_ORIGIN_NAME_ANNOTATION) == Some(&nab.name_any())
        })
        .map(|b| b.name_any())
}

/// Which origin a Velero object of the garbage collector points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Backup,
    Restore,
    /// A BackupStorageLocation, Secret copy or approval request made for a
    /// NonAdminBackupStorageLocation.
    Location,
}

/// NAC's garbage collection: the origin (namespace, name) of a Velero object made by
/// NAC (its labels and origin annotations), `None` for any other object, which the
/// collector never touches.
pub fn nac_origin(
    kind: Origin,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Option<(String, String)> {
    let (label, name, ns) = match kind {
        Origin::Backup => (
            NAB_ORIGIN_NACUUID_LABEL,
            NAB_ORIGIN_NAME_ANNOTATION,
            NAB_ORIGIN_NAMESPACE_ANNOTATION,
        ),
        Origin::Restore => (
            NAR_ORIGIN_NACUUID_LABEL,
            NAR_ORIGIN_NAME_ANNOTATION,
            NAR_ORIGIN_NAMESPACE_ANNOTATION,
        ),
        Origin::Location => (
            granary_api::oadp::NABSL_ORIGIN_NACUUID_LABEL,
            granary_api::oadp::NABSL_ORIGIN_NAME_ANNOTATION,
            granary_api::oadp::NABSL_ORIGIN_NAMESPACE_ANNOTATION,
        ),
    };
    let is_nac = labels.get(OADP_LABEL).map(String::as_str) == Some(OADP_LABEL_VALUE)
        && labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY_LABEL_VALUE)
        && labels.get(label).is_some_and(|v| !v.is_empty());
    if !is_nac {
        return None;
    }
    Some((annotations.get(ns)?.clone(), annotations.get(name)?.clone()))
}

/// True once the Velero object was created for this object (condition `Queued` set).
pub fn was_queued(conditions: Option<&Vec<Condition>>) -> bool {
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == granary_api::oadp::CONDITION_QUEUED && c.status == "True")
}

#[cfg(test)]
mod tests;
