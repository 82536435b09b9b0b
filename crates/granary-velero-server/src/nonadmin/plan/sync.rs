//! Which Velero locations the NonAdminBackup sync watches (NAC's
//! `nonadminbackupsynchronizer`): the default location, and every location made for a
//! NonAdminBackupStorageLocation that still exists (see [`super::location_orphaned`]).

use std::collections::BTreeMap;

use kube::ResourceExt;

use super::{LiveLocations, Origin, location_orphaned, nac_origin};
use granary_api::velero::BackupStorageLocation;

/// Watched Velero location name → the NonAdminBackupStorageLocation (namespace, name) it
/// was made for, `None` for the default location.
pub type WatchedLocations = BTreeMap<String, Option<(String, String)>>;

/// The default location `default` and the locations of `locations` made for a live
/// NonAdminBackupStorageLocation.
pub fn watched_locations(
    default: &str,
    locations: &[BackupStorageLocation],
    live: &LiveLocations,
) -> WatchedLocations {
    let mut watched = WatchedLocations::new();
    watched.insert(default.to_string(), None);
    for l in locations {
        let Some(origin) = nac_origin(Origin::Location, l.labels(), l.annotations()) else {
            continue;
        };
        if live.contains_key(&origin) && !location_orphaned(l.labels(), l.annotations(), live) {
            watched.entry(l.name_any()).or_insert(Some(origin));
        }
    }
    watched
}

#[cfg(test)]
mod tests;
