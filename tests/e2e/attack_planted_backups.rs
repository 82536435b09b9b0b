//! A namespace owner who controls the bucket of their own NonAdminBackupStorageLocation
//! plants backups in it, acting through their own token against the embedded API server
//! with every Velero and non-admin controller running (the world of
//! tests/e2e/nonadmin_locations.rs, `local` provider). Whatever the bucket says:
//! - an unfinished backup (New, InProgress) is imported as a Failed record and never
//!   run, also when its `velero-backup.json` is gone right after the sync read it; a
//!   planted `includedNamespaces: ["*"]` InProgress backup holds nobody's backup back;
//! - a planted name outside the namespace's NACUUID prefix is not imported at all;
//! - a planted backup labelled with an administrator's schedule steers neither the
//!   schedule (`lastBackup`, its tick) nor `--from-schedule`; a tick whose name is taken
//!   by a backup that is not the schedule's own is created under another name;
//! - a non-admin restore never creates a cluster-scoped object, also not one an action
//!   brings along (a Pod's PriorityClass);
//! - a namespace owner's location never names a landscape bucket, an administrator's
//!   location's bucket, or a `local` bucket the administrator did not allow.

use chrono::{DateTime, TimeDelta, Utc};
use granary_api::oadp::{
    MANAGED_BY_LABEL, NAB_ORIGIN_NACUUID_LABEL, NAB_ORIGIN_NAME_ANNOTATION,
    NAB_ORIGIN_NAMESPACE_ANNOTATION, NonAdminBackup, NonAdminBackupStorageLocation, NonAdminPhase,
    NonAdminRestore, NonAdminRestoreSpec, OADP_LABEL,
};
use granary_api::velero::{
    Backup, BackupPhase, BackupStatus, Restore, RestorePhase, RestoreSpec, SCHEDULE_NAME_LABEL,
    SCHEDULE_UID_ANNOTATION, SYNCED_LABEL, Schedule, ScheduleSpec,
};
use granary_runtime::config::ConfigDuration;
use granary_test_support::builders::backup_spec;
use granary_test_support::poll_until;
use granary_test_support::worlds::nonadmin_locations::{
    BUCKET, PREFIX, TENANTS, VELERO, World, nabsl, start, uuid_of, wait_available, wait_refused,
};
use granary_velero::layout::StorageLayout;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use std::collections::BTreeSet;
use std::time::Duration;

/// Velero's sync every second, NAC's every two (a location's own must stay below).
async fn fast_sync() -> World {
    start(|s| {
        s.backup_sync_period = ConfigDuration(Duration::from_secs(1));
        s.non_admin.backup_sync_period = ConfigDuration(Duration::from_secs(2));
    })
    .await
}

/// ns-a's own location `mine` (prefix `team` in the tenants' bucket), syncing every
/// second; returns its Velero location's name and its layout in the bucket.
async fn own_location(w: &World) -> (String, StorageLayout) {
    let mut body = nabsl("mine", TENANTS, Some("team"), "creds");
    body.spec.backup_storage_location_spec.backup_sync_period = Some("1s".parse().expect("1s"));
    let uuid = uuid_of(&w.own_location(&body).await);
    let layout = StorageLayout::new(TENANTS, Some("ns-a/team")).expect("layout");
    (uuid, layout)
}

/// A `velero-backup.json` as the owner writes it into their bucket.
fn planted(name: &str, phase: Option<BackupPhase>, labels: &[(&str, &str)]) -> Backup {
    let mut b = Backup::new(
        name,
        backup_spec()
            .namespaces(["*"])
            .cluster_resources(true)
            .build(),
    );
    b.metadata.namespace = Some(VELERO.into());
    b.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    b.status = phase.map(|p| BackupStatus {
        phase: Some(p),
        ..Default::default()
    });
    b
}

async fn plant(w: &World, layout: &StorageLayout, backup: &Backup) {
    let keys = layout.backup(&backup.name_any()).expect("keys");
    w.store
        .put(
            TENANTS,
            &keys.metadata(),
            serde_json::to_vec(backup).expect("json").into(),
        )
        .await
        .expect("plant");
}

/// Signs the backup `name` planted at `layout` with the server's own key, for namespace
/// owner `tenant`: what only a leaked key could do.
async fn sign_for(w: &World, layout: &StorageLayout, name: &str, tenant: &str) {
    use granary_velero::integrity::{IntegrityRecord, Keyring, ObjectDigest, RecordKind};
    let secret: k8s_openapi::api::core::v1::Secret = Api::namespaced(w.admin.clone(), VELERO)
        .get("granary-integrity-keys")
        .await
        .expect("the server's keys");
    let data: std::collections::BTreeMap<String, Vec<u8>> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    let ring = Keyring::from_data(&data).expect("keyring");
    let keys = layout.backup(name).expect("keys");
    let mut objects = std::collections::BTreeMap::new();
    for key in w.tenant_keys(keys.dir()).await {
        let bytes = granary_providers::get_bytes(w.store.as_ref(), TENANTS, &key)
            .await
            .expect("read");
        let file = key.strip_prefix(keys.dir()).expect("in the dir").to_owned();
        objects.insert(file, ObjectDigest::of(&bytes));
    }
    let record = IntegrityRecord::sign(RecordKind::Backup, name, Some(tenant), objects, &ring)
        .expect("sign");
    w.store
        .put(TENANTS, &keys.integrity(), record.to_bytes().into())
        .await
        .expect("record");
}

/// Polls until the Velero Backup `name` exists, moving the test's clock so that the
/// locations' syncs come due.
async fn wait_imported(w: &World, name: &str) -> Backup {
    let backups = w.velero::<Backup>();
    poll_until(&format!("backup {name} imported"), || async {
        w.clock.advance(TimeDelta::seconds(2));
        backups.get_opt(name).await.expect("get").is_some()
    })
    .await;
    backups.get(name).await.expect("backup")
}

async fn events_with_reason(client: &Client, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), VELERO)
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

fn phase_of(b: &Backup) -> Option<BackupPhase> {
    b.status.as_ref().and_then(|s| s.phase)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_unfinished_backup_is_a_record_and_never_runs() {
    let w = fast_sync().await;
    let (_, layout) = own_location(&w).await;
    // New with every namespace and the cluster's resources, and the schedule label of
    // an administrator's schedule; InProgress with every namespace; a name of the
    // administrator's.
    let new = planted("ns-a-new", None, &[(SCHEDULE_NAME_LABEL, "nightly")]);
    let running = planted("ns-a-running", Some(BackupPhase::InProgress), &[]);
    let foreign = planted("nightly-20260101000000", Some(BackupPhase::Completed), &[]);
    for b in [&new, &running, &foreign] {
        plant(&w, &layout, b).await;
    }
    let imported = wait_imported(&w, "ns-a-new").await;
    // The race: the json goes away right after the sync read it.
    w.store
        .delete_many(
            TENANTS,
            &[layout.backup("ns-a-new").expect("keys").metadata()],
        )
        .await
        .expect("delete json");
    let other = wait_imported(&w, "ns-a-running").await;
    for (b, was) in [(&imported, "New"), (&other, "InProgress")] {
        assert_eq!(phase_of(b), Some(BackupPhase::Failed), "{was}: {b:?}");
        let reason = b
            .status
            .as_ref()
            .and_then(|s| s.failure_reason.clone())
            .unwrap_or_default();
        assert!(reason.contains(&format!("phase {was}")), "{reason}");
        assert_eq!(b.labels()[SYNCED_LABEL], "true");
        assert!(!b.labels().contains_key(SCHEDULE_NAME_LABEL), "{b:?}");
    }
    poll_until("a Warning for each unfinished import", || async {
        events_with_reason(&w.admin, "SyncedUnfinished").await.len() >= 2
    })
    .await;
    // A name outside ns-a's prefix is refused, with a Warning on the location.
    poll_until("the foreign name refused", || async {
        w.clock.advance(TimeDelta::seconds(2));
        events_with_reason(&w.admin, "BackupNotSynced")
            .await
            .iter()
            .any(|e| {
                e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("nightly-20260101000000"))
            })
    })
    .await;
    assert!(
        w.velero::<Backup>()
            .get_opt("nightly-20260101000000")
            .await
            .expect("get")
            .is_none()
    );
    // An administrator's backup runs: nothing planted holds it back.
    let mut admins = Backup::new("admins", backup_spec().namespaces(["ns-b"]).build());
    admins.metadata.namespace = Some(VELERO.into());
    let backups = w.velero::<Backup>();
    backups
        .create(&PostParams::default(), &admins)
        .await
        .expect("admin backup");
    poll_until("the administrator's backup completes", || async {
        phase_of(&backups.get("admins").await.expect("get")) == Some(BackupPhase::Completed)
    })
    .await;
    // The planted ones are still records, and nothing was written into the bucket for
    // them: the tenant's bucket holds what the tenant put there, less what they took.
    for name in ["ns-a-new", "ns-a-running"] {
        let b = backups.get(name).await.expect("get");
        assert_eq!(phase_of(&b), Some(BackupPhase::Failed), "{name}");
    }
    let left: BTreeSet<String> = w.tenant_keys("").await.into_iter().collect();
    let planted_left: BTreeSet<String> = ["ns-a-running", "nightly-20260101000000"]
        .iter()
        .map(|n| layout.backup(n).expect("keys").metadata())
        .collect();
    assert_eq!(left, planted_left);
}

fn scheduled(name: &str) -> Schedule {
    let mut s = Schedule::new(
        name,
        ScheduleSpec {
            schedule: "@every 1h".into(),
            ..Default::default()
        },
    );
    s.metadata.namespace = Some(VELERO.into());
    s.spec.template.included_namespaces = Some(vec!["ns-b".into()]);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_backups_steer_neither_schedules_nor_restores_from_them() {
    let w = fast_sync().await;
    let (_, layout) = own_location(&w).await;
    // A Completed backup labelled with the schedule, started a day from now.
    let mut newest = planted(
        "ns-a-latest",
        Some(BackupPhase::Completed),
        &[(SCHEDULE_NAME_LABEL, "nightly")],
    );
    let later: DateTime<Utc> = w.clock.now() + TimeDelta::days(1);
    newest.status.as_mut().expect("status").start_timestamp = Some(later);
    newest.status.as_mut().expect("status").completion_timestamp = Some(later);
    plant(&w, &layout, &newest).await;
    let imported = wait_imported(&w, "ns-a-latest").await;
    assert!(!imported.labels().contains_key(SCHEDULE_NAME_LABEL));

    // The tick's name, taken by a backup made by hand (not the schedule's own).
    let now = w.clock.now();
    let schedule = scheduled("nightly");
    let tick = schedule.timestamped_name(now);
    let backups = w.velero::<Backup>();
    let mut by_hand = Backup::new(&tick, backup_spec().namespaces(["ns-b"]).build());
    by_hand.metadata.namespace = Some(VELERO.into());
    by_hand.metadata.labels =
        Some([(SCHEDULE_NAME_LABEL.to_string(), "nightly".to_string())].into());
    backups
        .create(&PostParams::default(), &by_hand)
        .await
        .expect("backup by hand");
    let schedules = w.velero::<Schedule>();
    let created = schedules
        .create(&PostParams::default(), &schedule)
        .await
        .expect("schedule");
    let own = format!("{tick}-1");
    poll_until("the tick under another name", || async {
        backups.get_opt(&own).await.expect("get").is_some()
    })
    .await;
    let b = backups.get(&own).await.expect("own");
    assert_eq!(
        b.annotations().get(SCHEDULE_UID_ANNOTATION),
        created.uid().as_ref()
    );
    poll_until("the name collision said", || async {
        events_with_reason(&w.admin, "BackupNameTaken")
            .await
            .iter()
            .any(|e| e.message.as_deref().is_some_and(|m| m.contains(&own)))
    })
    .await;
    poll_until("both complete", || async {
        let mut done = true;
        for n in [&tick, &own] {
            done &= backups.get(n).await.ok().and_then(|b| phase_of(&b))
                == Some(BackupPhase::Completed);
        }
        done
    })
    .await;
    // lastBackup is the tick, not the planted backup's time.
    let last = schedules
        .get("nightly")
        .await
        .expect("schedule")
        .status
        .and_then(|s| s.last_backup)
        .expect("lastBackup");
    assert!(last < later, "{last} moved by the planted backup");
    // --from-schedule takes the schedule's newest, never the planted one.
    let restore = Restore {
        metadata: kube::api::ObjectMeta {
            name: Some("from-nightly".into()),
            namespace: Some(VELERO.into()),
            ..Default::default()
        },
        spec: RestoreSpec {
            schedule_name: Some("nightly".into()),
            namespace_mapping: Some([("ns-b".to_string(), "ns-b-copy".to_string())].into()),
            ..Default::default()
        },
        status: None,
    };
    let restores = w.velero::<Restore>();
    restores
        .create(&PostParams::default(), &restore)
        .await
        .expect("restore");
    poll_until("the restore ends", || async {
        let r = restores.get("from-nightly").await.expect("restore");
        matches!(
            r.status.and_then(|s| s.phase),
            Some(
                RestorePhase::Completed
                    | RestorePhase::PartiallyFailed
                    | RestorePhase::Failed
                    | RestorePhase::FailedValidation
            )
        )
    })
    .await;
    let r = restores.get("from-nightly").await.expect("restore");
    assert_eq!(r.spec.backup_name.as_deref(), Some(own.as_str()), "{r:?}");
}

/// A restore NAC would make of a planted backup: the administrator backs up a
/// ClusterRoleBinding of owner-a to cluster-admin and a ConfigMap of ns-a, then the
/// owner copies that backup's files into their own bucket under a name of theirs, with
/// the metadata of a NonAdminBackup of ns-a, as a Velero of their own could write them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nonadmin_restore_never_creates_cluster_scoped_objects() {
    let w = fast_sync().await;
    let (uuid, layout) = own_location(&w).await;
    let pp = PostParams::default();
    let nars: Api<NonAdminRestore> = Api::namespaced(w.owner_a.clone(), "ns-a");

    // The administrator's backup with the binding.
    let selector = [("app".to_string(), "planted".to_string())].into();
    let crb = ClusterRoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some("owner-a-cluster-admin".into()),
            labels: Some(std::collections::BTreeMap::clone(&selector)),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "cluster-admin".into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: "owner-a".into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            ..Default::default()
        }]),
    };
    let crbs: Api<ClusterRoleBinding> = Api::all(w.admin.clone());
    crbs.create(&pp, &crb).await.expect("crb");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("settings".into());
    cm.metadata.labels = Some(std::collections::BTreeMap::clone(&selector));
    let cms: Api<ConfigMap> = Api::namespaced(w.admin.clone(), "ns-a");
    cms.create(&pp, &cm).await.expect("configmap");
    // A Pod whose PriorityClass the pod action would bring along as an additional item.
    let class: PriorityClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "planted-high", "labels": {"app": "planted"}},
        "value": 1000000000,
    }))
    .expect("priority class");
    let classes: Api<PriorityClass> = Api::all(w.admin.clone());
    classes.create(&pp, &class).await.expect("priority class");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "app", "labels": {"app": "planted"}},
        "spec": {"priorityClassName": "planted-high", "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .expect("pod");
    let pods: Api<Pod> = Api::namespaced(w.admin.clone(), "ns-a");
    pods.create(&pp, &pod).await.expect("pod");
    let mut source = Backup::new(
        "source",
        backup_spec()
            .namespaces(["ns-a"])
            .cluster_resources(true)
            .label_selector(Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                    match_labels: Some(selector),
                    ..Default::default()
                },
            ))
            .build(),
    );
    source.metadata.namespace = Some(VELERO.into());
    let backups = w.velero::<Backup>();
    backups.create(&pp, &source).await.expect("backup");
    poll_until("the source backup completes", || async {
        phase_of(&backups.get("source").await.expect("get")) == Some(BackupPhase::Completed)
    })
    .await;
    crbs.delete("owner-a-cluster-admin", &Default::default())
        .await
        .expect("delete crb");
    cms.delete("settings", &Default::default())
        .await
        .expect("delete cm");
    pods.delete("app", &Default::default())
        .await
        .expect("delete pod");
    classes
        .delete("planted-high", &Default::default())
        .await
        .expect("delete priority class");

    // The owner's copy, named and labelled as a NonAdminBackup `planted` of ns-a.
    let name = "ns-a-planted-1a3d4da8-0f97-4117-a9c6-19e2c97d978a";
    let from = StorageLayout::new(BUCKET, Some(PREFIX)).expect("layout");
    let from_keys = from.backup("source").expect("keys");
    let to_keys = layout.backup(name).expect("keys");
    for (a, b) in [
        (from_keys.contents(), to_keys.contents()),
        (from_keys.resource_list(), to_keys.resource_list()),
    ] {
        let bytes = granary_providers::get_bytes(w.store.as_ref(), BUCKET, &a)
            .await
            .expect("read");
        w.store.put(TENANTS, &b, bytes).await.expect("copy");
    }
    let mut json = backups.get("source").await.expect("source");
    json.metadata = kube::api::ObjectMeta {
        name: Some(name.into()),
        namespace: Some(VELERO.into()),
        labels: Some(
            [
                (OADP_LABEL, "True"),
                (MANAGED_BY_LABEL, "oadp-nac-controller"),
                (NAB_ORIGIN_NACUUID_LABEL, name),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ),
        annotations: Some(
            [
                (NAB_ORIGIN_NAME_ANNOTATION, "planted"),
                (NAB_ORIGIN_NAMESPACE_ANNOTATION, "ns-a"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ),
        ..Default::default()
    };
    json.spec.storage_location = Some(uuid);
    plant(&w, &layout, &json).await;
    wait_imported(&w, name).await;
    let nabs: Api<NonAdminBackup> = Api::namespaced(w.owner_a.clone(), "ns-a");
    poll_until("the NonAdminBackup synced into ns-a", || async {
        w.clock.advance(TimeDelta::seconds(2));
        nabs.get_opt("planted")
            .await
            .ok()
            .flatten()
            .and_then(|n| n.status)
            .and_then(|s| s.phase)
            == Some(NonAdminPhase::Created)
    })
    .await;
    // Asking for the cluster's resources is refused, naming the field: nothing runs.
    let mut asking = NonAdminRestore::new(
        "asking",
        NonAdminRestoreSpec {
            restore_spec: RestoreSpec {
                backup_name: Some("planted".into()),
                include_cluster_resources: Some(true),
                ..Default::default()
            },
        },
    );
    asking.metadata.namespace = Some("ns-a".into());
    nars.create(&pp, &asking).await.expect("nar");
    let m = wait_refused(&nars, "asking").await;
    assert!(
        m.contains("spec.restoreSpec.includeClusterResources"),
        "{m}"
    );

    let bring_back = |name: &str| {
        let mut restore = NonAdminRestore::new(
            name,
            NonAdminRestoreSpec {
                restore_spec: RestoreSpec {
                    backup_name: Some("planted".into()),
                    ..Default::default()
                },
            },
        );
        restore.metadata.namespace = Some("ns-a".into());
        restore
    };
    let ended = |name: &'static str| {
        let nars = nars.clone();
        async move {
            let phase_of = || async {
                nars.get(name)
                    .await
                    .expect("nar")
                    .status
                    .and_then(|s| s.velero_restore)
                    .and_then(|v| v.status)
                    .and_then(|s| s.phase)
                    .filter(|p| p.is_terminal())
            };
            poll_until("the non-admin restore ends", || async {
                phase_of().await.is_some()
            })
            .await;
            phase_of().await.expect("ended")
        }
    };
    // The planted copy carries no integrity record: a namespace owner's restore never
    // reads an unsigned backup, so nothing at all comes back.
    nars.create(&pp, &bring_back("bring-back"))
        .await
        .expect("nar");
    assert_eq!(ended("bring-back").await, RestorePhase::FailedValidation);
    assert!(cms.get_opt("settings").await.expect("get").is_none());

    // Defence in depth: were the planted copy signed for ns-a (a leaked key), the
    // restore would still stay inside ns-a.
    sign_for(&w, &layout, name, "ns-a").await;
    nars.create(&pp, &bring_back("bring-back-signed"))
        .await
        .expect("nar");
    assert!(matches!(
        ended("bring-back-signed").await,
        RestorePhase::Completed | RestorePhase::PartiallyFailed | RestorePhase::Failed
    ));
    // The namespace's own objects are back; the binding and the class are not.
    assert!(cms.get_opt("settings").await.expect("get").is_some());
    assert!(pods.get_opt("app").await.expect("get").is_some());
    assert!(
        classes
            .get_opt("planted-high")
            .await
            .expect("get")
            .is_none(),
        "a non-admin restore created a PriorityClass"
    );
    assert!(
        crbs.get_opt("owner-a-cluster-admin")
            .await
            .expect("get")
            .is_none(),
        "a non-admin restore created a ClusterRoleBinding"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_location_stays_off_landscape_and_administrator_buckets() {
    let w = start(|s| {
        s.non_admin
            .allowed_local_buckets
            .push("landscape-pool-1".into())
    })
    .await;
    let pp = PostParams::default();
    // A landscape bucket the seed knows.
    let bucket: granary_api::extensions::BackupBucket = serde_json::from_value(serde_json::json!({
        "apiVersion": "extensions.gardener.cloud/v1alpha1",
        "kind": "BackupBucket",
        "metadata": {"name": "landscape-pool-1"},
        "spec": {"type": "local", "region": "local", "secretRef": {"name": "s", "namespace": "garden"}},
    }))
    .expect("bucket");
    Api::<granary_api::extensions::BackupBucket>::all(w.admin.clone())
        .create(&pp, &bucket)
        .await
        .expect("backup bucket");
    let nabsls: Api<NonAdminBackupStorageLocation> = Api::namespaced(w.owner_a.clone(), "ns-a");
    w.secret(&w.owner_a, "ns-a", "creds").await;
    for (name, bucket, says) in [
        ("pool", "landscape-pool-1", "landscape's shoot backups"),
        ("admins", BUCKET, "administrator's backup storage location"),
        ("elsewhere", "elsewhere", "nonAdmin.allowedLocalBuckets"),
    ] {
        nabsls
            .create(&pp, &nabsl(name, bucket, Some("team"), "creds"))
            .await
            .expect("create");
        let m = wait_refused(&nabsls, name).await;
        assert!(
            m.contains("spec.backupStorageLocationSpec.objectStorage.bucket") && m.contains(says),
            "{name}: {m}"
        );
    }
    // The allowed bucket is fine.
    nabsls
        .create(&pp, &nabsl("mine", TENANTS, Some("team"), "creds"))
        .await
        .expect("create");
    wait_available(&nabsls, "mine").await;
}
