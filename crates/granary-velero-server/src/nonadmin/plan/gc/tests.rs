use std::collections::BTreeSet;

use super::*;
use crate::nonadmin::plan::{
    WatchedLocations, location_request, secret_copy, velero_location, watched_locations,
};
use granary_api::oadp::{
    NonAdminBackupStorageLocationSpec, NonAdminBackupStorageLocationStatus,
    VeleroBackupStorageLocation,
};
use granary_api::velero::{BackupStorageLocationSpec, ObjectStorageLocation};
use k8s_openapi::api::core::v1::{Secret, SecretKeySelector};

fn nabsl(ns: &str, name: &str, uuid: Option<&str>) -> NonAdminBackupStorageLocation {
    let mut n = NonAdminBackupStorageLocation::new(
        name,
        NonAdminBackupStorageLocationSpec {
            backup_storage_location_spec: BackupStorageLocationSpec {
                provider: "aws".into(),
                object_storage: ObjectStorageLocation {
                    bucket: "team".into(),
                    ..Default::default()
                },
                credential: Some(SecretKeySelector {
                    name: "creds".into(),
                    key: "cloud".into(),
                    optional: None,
                }),
                ..Default::default()
            },
        },
    );
    n.metadata.namespace = Some(ns.into());
    n.status = uuid.map(|u| NonAdminBackupStorageLocationStatus {
        velero_backup_storage_location: Some(VeleroBackupStorageLocation {
            nacuuid: Some(u.into()),
            ..Default::default()
        }),
        ..Default::default()
    });
    n
}

/// The labels and annotations of the location, Secret copy and request made for `n`
/// under `uuid`.
fn made_for(
    n: &NonAdminBackupStorageLocation,
    uuid: &str,
) -> Vec<(BTreeMap<String, String>, BTreeMap<String, String>)> {
    let l = velero_location(n, &Default::default(), "velero", uuid);
    let s = secret_copy(&Secret::default(), n, "velero", uuid);
    let r = location_request(n, "velero", uuid);
    vec![
        (l.labels().clone(), l.annotations().clone()),
        (s.labels().clone(), s.annotations().clone()),
        (r.labels().clone(), r.annotations().clone()),
    ]
}

#[test]
fn objects_of_a_gone_location_are_orphans_and_nothing_else_is() {
    let mine = nabsl("ns-a", "mine", Some("ns-a-mine-u1"));
    let gone = nabsl("ns-a", "gone", Some("ns-a-gone-u2"));
    let fresh = nabsl("ns-b", "fresh", None);
    let live = live_locations(&[mine.clone(), fresh.clone()]);
    assert_eq!(live.len(), 2);
    for (labels, annotations) in made_for(&mine, "ns-a-mine-u1") {
        assert!(!location_orphaned(&labels, &annotations, &live));
    }
    for (labels, annotations) in made_for(&gone, "ns-a-gone-u2") {
        assert!(location_orphaned(&labels, &annotations, &live));
    }
    // A NABSL deleted and made again under the same name has another NACUUID: the old
    // objects are orphans, the new ones not.
    for (labels, annotations) in made_for(&mine, "ns-a-mine-old") {
        assert!(location_orphaned(&labels, &annotations, &live));
    }
    // A NABSL without a NACUUID yet keeps whatever names it.
    for (labels, annotations) in made_for(&fresh, "ns-b-fresh-u3") {
        assert!(!location_orphaned(&labels, &annotations, &live));
    }
    // The same origin in another namespace is another NABSL.
    let elsewhere = nabsl("ns-b", "mine", Some("ns-a-mine-u1"));
    for (labels, annotations) in made_for(&elsewhere, "ns-a-mine-u1") {
        assert!(location_orphaned(&labels, &annotations, &live));
    }
}

#[test]
fn objects_without_nac_metadata_are_never_orphans() {
    let gone = nabsl("ns-a", "gone", Some("u"));
    let live = LiveLocations::new();
    let (labels, annotations) = made_for(&gone, "u").remove(0);
    for drop in [
        "openshift.io/oadp",
        "app.kubernetes.io/managed-by",
        "openshift.io/oadp-nabsl-origin-nacuuid",
    ] {
        let mut l = labels.clone();
        l.remove(drop);
        assert!(!location_orphaned(&l, &annotations, &live), "{drop}");
    }
    for drop in [
        "openshift.io/oadp-nabsl-origin-name",
        "openshift.io/oadp-nabsl-origin-namespace",
    ] {
        let mut a = annotations.clone();
        a.remove(drop);
        assert!(!location_orphaned(&labels, &a, &live), "{drop}");
    }
    // A backup's origin labels are not a location's.
    let mut nab_labels = labels.clone();
    let uuid = nab_labels
        .remove("openshift.io/oadp-nabsl-origin-nacuuid")
        .unwrap();
    nab_labels.insert("openshift.io/oadp-nab-origin-nacuuid".into(), uuid);
    assert!(!location_orphaned(&nab_labels, &annotations, &live));
    assert!(location_orphaned(&labels, &annotations, &live));
}

#[test]
fn the_sync_watches_the_default_and_live_user_locations() {
    let mine = nabsl("ns-a", "mine", Some("u1"));
    let gone = nabsl("ns-a", "gone", Some("u2"));
    let live = live_locations(std::slice::from_ref(&mine));
    let mut admins = velero_location(&mine, &Default::default(), "velero", "admins");
    admins.metadata.labels = None;
    let locations = vec![
        velero_location(&mine, &Default::default(), "velero", "u1"),
        velero_location(&gone, &Default::default(), "velero", "u2"),
        // Made for `mine` under an old NACUUID.
        velero_location(&mine, &Default::default(), "velero", "u0"),
        admins,
    ];
    let watched = watched_locations("default", &locations, &live);
    let want: WatchedLocations = [
        ("default".to_string(), None),
        (
            "u1".to_string(),
            Some(("ns-a".to_string(), "mine".to_string())),
        ),
    ]
    .into();
    assert_eq!(watched, want);
}

#[test]
fn secret_copies_are_looked_for_under_the_names_of_nac_locations_and_requests() {
    let gone = nabsl("ns-a", "gone", Some("u1"));
    let location = velero_location(&gone, &Default::default(), "velero", "u1");
    let mut request = location_request(&gone, "velero", "u2");
    request.metadata.name = Some("renamed".into());
    let mut admins = velero_location(&gone, &Default::default(), "velero", "admins");
    admins.metadata.labels = None;
    let names = secret_candidates([&location.metadata, &request.metadata, &admins.metadata]);
    let want: BTreeSet<String> = ["u1", "u2", "renamed"].map(String::from).into();
    assert_eq!(names, want);
}
