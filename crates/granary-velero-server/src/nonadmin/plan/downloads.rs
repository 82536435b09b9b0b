//! The NonAdminDownloadRequest controller's pure decisions: whether a namespace owner's
//! download target is theirs to download, the Velero DownloadRequest `nadr-<uid>` made for
//! it, and when it has expired.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use kube::ResourceExt;
use kube::api::ObjectMeta;

use super::{in_velero_namespace, nac_labels, origin_matches};
use granary_api::common::FieldError;
use granary_api::oadp::{
    CONDITION_NAB_NOT_AVAILABLE, CONDITION_NABSL_NOT_USED, CONDITION_NAR_NOT_AVAILABLE,
    MANAGED_BY_LABEL, MANAGED_BY_LABEL_VALUE, NAB_ORIGIN_NAMESPACE_ANNOTATION,
    NADR_ORIGIN_NACUUID_LABEL, NADR_ORIGIN_NAME_ANNOTATION, NADR_ORIGIN_NAMESPACE_ANNOTATION,
    NAR_ORIGIN_NAMESPACE_ANNOTATION, NonAdminBackup, NonAdminDownloadRequest, NonAdminRestore,
    OADP_LABEL, OADP_LABEL_VALUE,
};
use granary_api::velero::{
    Backup, DownloadRequest, DownloadRequestSpec, DownloadRequestStatus, DownloadTarget, Restore,
};

/// Why a NonAdminDownloadRequest is not served: the condition type NAC sets (`True`) and
/// the problem, naming the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DownloadRefusal {
    pub condition: &'static str,
    pub error: FieldError,
}

fn refuse(condition: &'static str, path: &str, message: String) -> DownloadRefusal {
    DownloadRefusal {
        condition,
        error: FieldError::new(path, message),
    }
}

/// The NonAdminBackup a download target is about: the one it names (backup kinds), or
/// the backup of `nar`, the NonAdminRestore it names (restore kinds).
pub fn backup_name(target: &DownloadTarget, nar: Option<&NonAdminRestore>) -> String {
    match nar {
        Some(nar) => nar
            .spec
            .restore_spec
            .backup_name
            .clone()
            .unwrap_or_default(),
        None => target.name.clone(),
    }
}

/// The Velero DownloadRequest for a NonAdminDownloadRequest, or why there is none. The
/// target must name a NonAdminBackup (backup kinds) or NonAdminRestore (restore kinds) of
/// the request's own namespace whose Velero object exists and came from that namespace;
/// as NAC, the backup must use a NonAdminBackupStorageLocation (files of backups in the
/// administrator's locations are not handed out). `nab`/`nar` are the objects of that
/// namespace the target names (a restore's backup for restore kinds).
pub fn velero_download_request(
    nadr: &NonAdminDownloadRequest,
    velero_namespace: &str,
    nab: Option<&NonAdminBackup>,
    nar: Option<&NonAdminRestore>,
    backups: &[Backup],
    restores: &[Restore],
) -> Result<DownloadRequest, DownloadRefusal> {
    let ns = nadr.namespace().unwrap_or_default();
    if let Some(e) = in_velero_namespace(nadr.namespace(), velero_namespace)
        .into_iter()
        .next()
    {
        return Err(DownloadRefusal {
            condition: CONDITION_NAB_NOT_AVAILABLE,
            error: e,
        });
    }
    let field = "spec.target.name";
    let target = &nadr.spec.target;
    if target.name.is_empty() {
        return Err(refuse(
            CONDITION_NAB_NOT_AVAILABLE,
            field,
            "required".into(),
        ));
    }
    let restore_target = target.kind.is_restore_target();
    let velero_restore = if restore_target {
        let Some(nar) = nar else {
            return Err(refuse(
                CONDITION_NAR_NOT_AVAILABLE,
                field,
                format!(
                    "NonAdminRestore {:?} not found in namespace {ns}",
                    target.name
                ),
            ));
        };
        let name = nar
            .status
            .as_ref()
            .and_then(|s| s.velero_restore.as_ref())
            .and_then(|v| v.name.clone());
        let found = name.as_ref().and_then(|n| {
            restores.iter().find(|r| {
                r.name_any() == *n
                    && origin_matches(r.annotations(), NAR_ORIGIN_NAMESPACE_ANNOTATION, &ns)
            })
        });
        let Some(found) = found else {
            return Err(refuse(
                CONDITION_NAR_NOT_AVAILABLE,
                field,
                format!(
                    "the restore of NonAdminRestore {:?} does not exist (yet)",
                    target.name
                ),
            ));
        };
        Some(found.name_any())
    } else {
        None
    };
    let nab_name = backup_name(target, nar.filter(|_| restore_target));
    let Some(nab) = nab else {
        return Err(refuse(
            CONDITION_NAB_NOT_AVAILABLE,
            field,
            format!("NonAdminBackup {nab_name:?} not found in namespace {ns}"),
        ));
    };
    if !nab.uses_nabsl() {
        return Err(refuse(
            CONDITION_NABSL_NOT_USED,
            field,
            format!(
                "NonAdminBackup {nab_name:?} does not use a NonAdminBackupStorageLocation \
                 (only files in the namespace's own locations can be downloaded)"
            ),
        ));
    }
    let velero_backup = nab.velero_backup_name().and_then(|n| {
        backups.iter().find(|b| {
            b.name_any() == n
                && origin_matches(b.annotations(), NAB_ORIGIN_NAMESPACE_ANNOTATION, &ns)
        })
    });
    let Some(velero_backup) = velero_backup else {
        return Err(refuse(
            CONDITION_NAB_NOT_AVAILABLE,
            field,
            format!("the backup of NonAdminBackup {nab_name:?} does not exist (yet)"),
        ));
    };
    let uid = nadr.metadata.uid.clone().unwrap_or_default();
    let annotations: BTreeMap<String, String> = [
        (NADR_ORIGIN_NAME_ANNOTATION, nadr.name_any()),
        (NADR_ORIGIN_NAMESPACE_ANNOTATION, ns.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Ok(DownloadRequest {
        metadata: ObjectMeta {
            name: nadr.velero_download_request_name(),
            namespace: Some(velero_namespace.to_string()),
            labels: Some(nac_labels(NADR_ORIGIN_NACUUID_LABEL, &uid)),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: DownloadRequestSpec {
            target: DownloadTarget {
                kind: target.kind,
                name: velero_restore.unwrap_or_else(|| velero_backup.name_any()),
            },
        },
        status: None,
    })
}

/// True once the URL handed out has expired (the request is then removed).
pub fn expired(status: Option<&DownloadRequestStatus>, now: DateTime<Utc>) -> bool {
    status
        .and_then(|s| s.expiration)
        .is_some_and(|at| at <= now)
}

/// The origin (namespace, name) of a Velero DownloadRequest made for a
/// NonAdminDownloadRequest, `None` for any other.
pub fn nadr_origin(dr: &DownloadRequest) -> Option<(String, String)> {
    let labels = dr.labels();
    let is_nac = labels.get(OADP_LABEL).map(String::as_str) == Some(OADP_LABEL_VALUE)
        && labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY_LABEL_VALUE)
        && labels
            .get(NADR_ORIGIN_NACUUID_LABEL)
            .is_some_and(|v| !v.is_empty());
    if !is_nac {
        return None;
    }
    let a = dr.annotations();
    Some((
        a.get(NADR_ORIGIN_NAMESPACE_ANNOTATION)?.clone(),
        a.get(NADR_ORIGIN_NAME_ANNOTATION)?.clone(),
    ))
}

#[cfg(test)]
mod tests;
