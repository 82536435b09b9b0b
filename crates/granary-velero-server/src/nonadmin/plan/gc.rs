//! The garbage collector's decision for the objects made for NonAdminBackupStorageLocations
//! in the Velero namespace (Velero BackupStorageLocations, credentials Secret copies and
//! approval requests): NAC's rule, an object carrying NAC's labels and the NABSL origin
//! annotations whose NonAdminBackupStorageLocation is gone is an orphan. Beyond NAC, a
//! NABSL of the same name that has taken another NACUUID is another object: the old
//! objects are orphans too.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use kube::api::ObjectMeta;

use super::{Origin, nac_origin};
use granary_api::oadp::{NABSL_ORIGIN_NACUUID_LABEL, NonAdminBackupStorageLocation};

/// The NonAdminBackupStorageLocations that exist: (namespace, name) → the NACUUID in
/// their status, `None` while they have none yet.
pub type LiveLocations = BTreeMap<(String, String), Option<String>>;

/// [`LiveLocations`] of `nabsls`.
pub fn live_locations(nabsls: &[NonAdminBackupStorageLocation]) -> LiveLocations {
    nabsls
        .iter()
        .map(|n| {
            let uuid = n
                .status
                .as_ref()
                .and_then(|s| s.velero_backup_storage_location.as_ref())
                .and_then(|v| v.nacuuid.clone())
                .filter(|u| !u.is_empty());
            ((n.namespace().unwrap_or_default(), n.name_any()), uuid)
        })
        .collect()
}

/// True when the object with `labels` and `annotations` was made for a
/// NonAdminBackupStorageLocation that is gone (or now has another NACUUID). Objects
/// without NAC's labels or the origin annotations are never orphans: the collector does
/// not touch them. A NABSL that has no NACUUID yet keeps every object it may own.
pub fn location_orphaned(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    live: &LiveLocations,
) -> bool {
    let Some(origin) = nac_origin(Origin::Location, labels, annotations) else {
        return false;
    };
    if origin.0.is_empty() || origin.1.is_empty() {
        return false;
    }
    match live.get(&origin) {
        None => true,
        Some(None) => false,
        Some(Some(uuid)) => labels.get(NABSL_ORIGIN_NACUUID_LABEL) != Some(uuid),
    }
}

/// The names the Secret copy of a NABSL may have, from the metadata of the Velero
/// locations and approval requests in the Velero namespace: the name and NABSL origin
/// NACUUID of each one made for a NABSL (a copy is named by that NACUUID). Whether a
/// Secret found under such a name is an orphan is still [`location_orphaned`] on its
/// own labels and annotations.
pub fn secret_candidates<'a>(
    objects: impl IntoIterator<Item = &'a ObjectMeta>,
) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for meta in objects {
        let (labels, annotations) = (
            meta.labels.clone().unwrap_or_default(),
            meta.annotations.clone().unwrap_or_default(),
        );
        if nac_origin(Origin::Location, &labels, &annotations).is_none() {
            continue;
        }
        names.extend(meta.name.clone());
        names.extend(labels.get(NABSL_ORIGIN_NACUUID_LABEL).cloned());
    }
    names.retain(|n| !n.is_empty());
    names
}

#[cfg(test)]
mod tests;
