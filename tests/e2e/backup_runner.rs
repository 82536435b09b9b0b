//! The Velero backup runner (`granary_velero_server::backup`) end to end against the
//! embedded API server and a real object store: a backup of ~2,200 objects in 22
//! namespaces read back with the archive reader (Velero's tarball layout, the manifest
//! equal to the tarball, the resource list, results, log and `velero-backup.json`);
//! each filter and selector cutting exactly what it should; a backup that already
//! exists; and a store failing half-way, which leaves no `velero-backup.json`.

use std::collections::BTreeSet;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use granary_api::velero::{BackupPhase, BackupSpec};
use granary_velero::archive::{ArchiveLimits, ItemPath, Scope, VersionDir};
use granary_velero::files::ResourceList;
use granary_velero::manifest::{ItemKey, Manifest};
use granary_velero::resource::GroupResource;
use granary_velero_server::backup::{BackupError, BackupResultPhase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use granary_test_support::builders::backup_spec;
use granary_test_support::seed::Backend;
use granary_test_support::worlds::backup_runner::*;

fn s(items: &[&str]) -> Option<Vec<String>> {
    Some(items.iter().map(|s| s.to_string()).collect())
}

fn selector(k: &str, v: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some([(k.to_string(), v.to_string())].into()),
        match_expressions: None,
    }
}

/// Velero's tarball, entry by entry: `metadata/version` first, regular files with mode
/// 0755 only, every item twice (unversioned and `v1-preferredversion`), compact JSON
/// with sorted keys, and nothing else.
fn check_tarball_layout(stored: &Stored) {
    let gz = flate2::read::MultiGzDecoder::new(&stored.tarball[..]);
    let mut tar = tar::Archive::new(gz);
    let mut paths = Vec::new();
    for entry in tar.entries().expect("tar entries") {
        let mut entry = entry.expect("entry");
        let header = entry.header();
        assert_eq!(header.entry_type(), tar::EntryType::Regular);
        assert_eq!(header.mode().expect("mode"), 0o755);
        let path = entry.path().expect("path").to_string_lossy().into_owned();
        assert!(!path.starts_with('/') && !path.starts_with("./"), "{path}");
        let mut body = Vec::new();
        entry.read_to_end(&mut body).expect("body");
        if paths.is_empty() {
            assert_eq!(path, "metadata/version");
            assert_eq!(body, b"1.1.0\n");
        } else {
            let value: serde_json::Value = serde_json::from_slice(&body).expect("JSON item");
            assert_eq!(
                body,
                serde_json::to_vec(&value).expect("json"),
                "{path}: compact, sorted keys"
            );
        }
        paths.push(path);
    }
    assert_eq!(paths.len(), 1 + 2 * stored.manifest.len());
    assert!(stored.archive.version_first);
    assert!(
        stored.archive.other_files.is_empty(),
        "{:?}",
        stored.archive.other_files
    );
    for item in stored.manifest.iter() {
        let gr = GroupResource::new(item.key.group.clone(), item.key.resource.clone());
        let scope = Scope::from_namespace(&item.key.namespace);
        let at = |version_dir| ItemPath {
            group_resource: gr.clone(),
            version_dir,
            scope: scope.clone(),
            name: item.key.name.clone(),
        };
        let plain = stored
            .archive
            .items
            .get(&at(VersionDir::Unversioned))
            .expect("unversioned copy");
        let preferred = stored
            .archive
            .items
            .get(&at(VersionDir::Preferred(item.meta.version.clone())))
            .expect("preferred-version copy");
        assert_eq!(plain, preferred);
        assert_eq!(plain["metadata"]["name"], item.key.name.as_str());
    }
    let rebuilt =
        Manifest::from_archive(&stored.tarball[..], &ArchiveLimits::default()).expect("rebuilt");
    assert_eq!(
        rebuilt, stored.manifest,
        "manifest.json.gz equals the tarball's content"
    );
}

/// The entry paths of a tarball, in order.
fn entry_paths(tarball: &[u8]) -> Vec<String> {
    let mut tar = tar::Archive::new(flate2::read::MultiGzDecoder::new(tarball));
    tar.entries()
        .expect("tar entries")
        .map(|e| {
            e.expect("entry")
                .path()
                .expect("path")
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

async fn whole_cluster(world: &World) {
    world.progress.lock().expect("not poisoned").clear();
    let outcome = world.run("full", BackupSpec::default()).await;
    let reports = std::mem::take(&mut *world.progress.lock().expect("not poisoned"));
    let last = reports.last().expect("progress is reported");
    assert_eq!(last.total_items, Some(outcome.total_items as i64));
    assert_eq!(last.items_backed_up, Some(outcome.items_backed_up as i64));
    assert!(
        reports
            .windows(2)
            .all(|w| w[0].items_backed_up <= w[1].items_backed_up),
        "progress only grows"
    );
    assert_eq!(outcome.phase, BackupResultPhase::Completed, "{outcome:?}");
    assert_eq!((outcome.errors, outcome.warnings), (0, 0));
    assert_eq!(outcome.format_version, "1.2.0");
    let stored = world.read("full").await;
    assert_eq!(outcome.tarball_bytes, stored.tarball.len() as u64);
    let keys = stored.keys();
    assert!(keys.len() >= 2000, "{} items", keys.len());
    assert_eq!(outcome.items_backed_up, keys.len() as u64);
    assert_eq!(outcome.total_items, keys.len() as u64);
    let expected = namespaces_backup(0..NAMESPACES);
    let missing: Vec<&ItemKey> = expected.difference(&keys).collect();
    assert!(missing.is_empty(), "missing {missing:?}");
    let lonely = ItemKey {
        group: "rbac.authorization.k8s.io".into(),
        resource: "clusterroles".into(),
        namespace: String::new(),
        name: "lonely".into(),
    };
    assert!(
        keys.contains(&lonely),
        "a full backup takes every cluster-scoped object"
    );
    assert!(
        !keys.iter().any(|k| k.resource == "events"),
        "events are never backed up"
    );
    assert!(
        !keys
            .iter()
            .any(|k| k.name == format!("cm-{}", CONFIGMAPS - 1)),
        "exclude-from-backup label"
    );
    check_tarball_layout(&stored);

    // Owners are recorded: each ReplicaSet's owner is its Deployment.
    let rs = ItemKey {
        group: "apps".into(),
        resource: "replicasets".into(),
        namespace: ns(3),
        name: "web-1".into(),
    };
    let owners = stored.manifest.owners(&rs);
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].key.resource, "deployments");

    assert_eq!(
        stored.resource_list,
        ResourceList::from_manifest(&stored.manifest)
    );
    assert!(stored.resource_list.0["v1/ConfigMap"].contains("br-00/cm-0"));
    assert!(stored.resource_list.0["v1/PersistentVolume"].contains("pv-00"));
    assert!(stored.resource_list.0["apps/v1/ReplicaSet"].contains("br-21/web-1"));
    assert!(stored.resource_list.0["stable.example.com/v1/CronTab"].contains("br-07/ct-9"));
    assert!(stored.results.errors.is_empty() && stored.results.warnings.is_empty());
    let status = stored.backup.status.clone().expect("status");
    assert_eq!(status.phase, Some(BackupPhase::Completed));
    assert_eq!(status.format_version.as_deref(), Some("1.2.0"));
    assert_eq!(status.version, Some(1));
    assert_eq!(
        status.completion_timestamp,
        Some(outcome.completion_timestamp.trunc_subsecs_utc())
    );
    let progress = status.progress.expect("progress");
    assert_eq!(progress.items_backed_up, Some(keys.len() as i64));
    assert!(
        stored
            .logs
            .contains("msg=\"Starting backup\" backup=velero/full"),
        "{}",
        &stored.logs[..200.min(stored.logs.len())]
    );
}

trait Trunc {
    fn trunc_subsecs_utc(self) -> Self;
}

impl Trunc for chrono::DateTime<chrono::Utc> {
    /// velero-backup.json holds whole seconds.
    fn trunc_subsecs_utc(self) -> Self {
        use chrono::SubsecRound;
        self.trunc_subsecs(0)
    }
}

/// Runs a backup and returns the keys it stored, checking it completed.
async fn keys_of(world: &World, name: &str, spec: BackupSpec) -> BTreeSet<ItemKey> {
    let outcome = world.run(name, spec).await;
    assert_eq!(
        outcome.phase,
        BackupResultPhase::Completed,
        "{name}: {outcome:?}"
    );
    let stored = world.read(name).await;
    assert_eq!(
        Manifest::from_archive(&stored.tarball[..], &ArchiveLimits::default()).expect("rebuilt"),
        stored.manifest
    );
    stored.keys()
}

fn assert_same(name: &str, got: &BTreeSet<ItemKey>, want: &BTreeSet<ItemKey>) {
    let extra: Vec<_> = got.difference(want).collect();
    let missing: Vec<_> = want.difference(got).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{name}: extra {extra:?}, missing {missing:?}"
    );
}

async fn filters(world: &World) {
    // Two namespaces: their items, Namespace objects, and what the actions bring.
    let got = keys_of(
        world,
        "two-ns",
        backup_spec().namespaces(["br-00", "br-01"]).build(),
    )
    .await;
    assert_same("two-ns", &got, &namespaces_backup([0, 1]));

    // includeClusterResources: false keeps every cluster-scoped object out.
    let got = keys_of(
        world,
        "no-cluster",
        backup_spec()
            .namespaces(["br-00"])
            .cluster_resources(false)
            .build(),
    )
    .await;
    assert_same("no-cluster", &got, &namespaced_keys(0));

    // A wildcard, and an exclude.
    let got = keys_of(
        world,
        "wildcard",
        backup_spec()
            .namespaces(["br-0*"])
            .exclude_namespaces(["br-03"])
            .build(),
    )
    .await;
    assert_same(
        "wildcard",
        &got,
        &namespaces_backup([0, 1, 2, 4, 5, 6, 7, 8, 9]),
    );

    // Old-style resource excludes: no secrets, no custom resources (so no CRD).
    let got = keys_of(
        world,
        "excluded",
        backup_spec()
            .namespaces(["br-00"])
            .exclude_resources(["secrets", "crontabs.stable.example.com"])
            .build(),
    )
    .await;
    let want: BTreeSet<ItemKey> = namespaces_backup([0])
        .into_iter()
        .filter(|k| k.resource != "secrets" && k.resource != "crontabs" && *k != crd_key())
        .collect();
    assert_same("excluded", &got, &want);

    // A label selector on two namespaces: the selected ConfigMaps, the namespaces.
    let got = keys_of(
        world,
        "selected",
        backup_spec()
            .namespaces(["br-00", "br-01"])
            .label_selector(Some(selector("pick", "yes")))
            .build(),
    )
    .await;
    let picked = |i: usize| {
        (0..CONFIGMAPS - 1).step_by(10).map(move |j| ItemKey {
            group: String::new(),
            resource: "configmaps".into(),
            namespace: ns(i),
            name: format!("cm-{j}"),
        })
    };
    let mut want: BTreeSet<ItemKey> = picked(0).chain(picked(1)).collect();
    want.extend([namespace_key(0), namespace_key(1)]);
    assert_same("selected", &got, &want);

    // Or-selectors over every namespace: the picked ConfigMaps and the ServiceAccounts
    // (with the cluster RBAC they bring), and only the namespaces holding them.
    let got = keys_of(
        world,
        "or-selected",
        BackupSpec {
            or_label_selectors: Some(vec![selector("pick", "yes"), selector("app", "robot")]),
            ..Default::default()
        },
    )
    .await;
    let mut want = BTreeSet::new();
    for i in 0..NAMESPACES {
        want.extend(picked(i));
        want.insert(namespace_key(i));
        want.insert(ItemKey {
            group: String::new(),
            resource: "serviceaccounts".into(),
            namespace: ns(i),
            name: "robot".into(),
        });
        want.extend(rbac_keys(i));
    }
    assert_same("or-selected", &got, &want);

    // New-style filters: ConfigMaps and claims of one namespace, every PV.
    let got = keys_of(
        world,
        "scoped",
        BackupSpec {
            included_namespaces: s(&["br-00"]),
            included_namespace_scoped_resources: s(&["configmaps", "pvc"]),
            included_cluster_scoped_resources: s(&["persistentvolumes"]),
            ..Default::default()
        },
    )
    .await;
    let mut want: BTreeSet<ItemKey> = namespaced_keys(0)
        .into_iter()
        .filter(|k| k.resource == "configmaps" || k.resource == "persistentvolumeclaims")
        .collect();
    want.insert(namespace_key(0));
    want.extend((0..NAMESPACES).map(pv_key));
    assert_same("scoped", &got, &want);

    // orderedResources: a name that does not exist is a warning, the rest is complete.
    let mut order = std::collections::BTreeMap::new();
    order.insert(
        "configmaps".to_string(),
        "br-00/cm-5,br-00/cm-1,br-00/nope".to_string(),
    );
    // One worker, so the tarball shows the collection order.
    let backup = World::backup(
        "ordered",
        BackupSpec {
            included_namespaces: s(&["br-00"]),
            ordered_resources: Some(order),
            ..Default::default()
        },
    );
    let outcome = world.run_on(&*world.store, &backup, 1).await.expect("runs");
    assert_eq!(
        (outcome.phase, outcome.errors, outcome.warnings),
        (BackupResultPhase::Completed, 0, 1)
    );
    let stored = world.read("ordered").await;
    assert_same("ordered", &stored.keys(), &namespaces_backup([0]));
    let order = entry_paths(&stored.tarball);
    let configmaps: Vec<&str> = order
        .iter()
        .filter_map(|p| p.strip_prefix("resources/configmaps/namespaces/br-00/"))
        .take(3)
        .collect();
    assert_eq!(configmaps, ["cm-5.json", "cm-1.json", "cm-0.json"]);
    // Velero's core order: pods (each followed by its claim and volume) come first.
    assert!(order[1].starts_with("resources/pods/"), "{:?}", &order[..4]);
    assert!(
        order[3].starts_with("resources/persistentvolumeclaims/"),
        "{:?}",
        &order[..6]
    );
    assert!(
        stored.results.warnings.velero[0].contains("Cannot find resource 'br-00/nope'."),
        "{:?}",
        stored.results
    );

    // A namespace that does not exist is an error: PartiallyFailed, stored all the same.
    let outcome = world
        .run(
            "missing-ns",
            backup_spec().namespaces(["br-00", "no-such-ns"]).build(),
        )
        .await;
    assert_eq!(
        (outcome.phase, outcome.errors),
        (BackupResultPhase::PartiallyFailed, 1)
    );
    let stored = world.read("missing-ns").await;
    assert_eq!(
        stored.backup.status.and_then(|s| s.phase),
        Some(BackupPhase::PartiallyFailed)
    );
    assert_eq!(stored.results.errors.velero.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_cluster_backup_and_every_filter_on_the_local_store() {
    let Some(world) = World::start(Backend::Local).await else {
        return;
    };
    whole_cluster(&world).await;
    filters(&world).await;

    // The same name again: refused before anything is written.
    let err = world
        .run_on(
            &*world.store,
            &World::backup("full", BackupSpec::default()),
            1,
        )
        .await
        .expect_err("exists");
    assert!(matches!(err, BackupError::AlreadyExists(_)), "{err:?}");
    assert_eq!(err.to_string(), "backup already exists in object storage");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failing_half_way_leaves_no_velero_backup_json() {
    let Some(world) = World::start(Backend::Local).await else {
        return;
    };
    let spec = || backup_spec().namespaces(["br-0*"]).build();

    // The tarball upload dies after 64 KiB.
    let store = FailingStore {
        inner: Arc::clone(&world.store),
        puts_ok: AtomicI64::new(i64::MAX),
        tarball_bytes_ok: Some(64 * 1024),
    };
    let outcome = world
        .run_on(&store, &World::backup("tar-fails", spec()), 2)
        .await
        .expect("runs");
    assert_eq!(outcome.phase, BackupResultPhase::Failed, "{outcome:?}");
    let reason = outcome.failure_reason.expect("reason");
    assert!(
        reason.contains("tar-fails.tar.gz") && reason.contains("injected failure"),
        "{reason}"
    );
    let keys = world.layout.backup("tar-fails").expect("keys");
    assert!(
        !world.exists(&keys.metadata()).await,
        "no velero-backup.json"
    );
    assert!(!world.exists(&keys.contents()).await, "no tarball");
    assert!(world.exists(&keys.logs()).await, "the log says why");

    // The second file after the tarball (the resource list) fails: everything but the
    // log is deleted again.
    let store = FailingStore {
        inner: Arc::clone(&world.store),
        puts_ok: AtomicI64::new(1),
        tarball_bytes_ok: None,
    };
    let outcome = world
        .run_on(&store, &World::backup("list-fails", spec()), 2)
        .await
        .expect("runs");
    assert_eq!(outcome.phase, BackupResultPhase::Failed);
    assert!(
        outcome
            .failure_reason
            .as_deref()
            .is_some_and(|r| r.contains("list-fails-resource-list.json.gz")),
        "{outcome:?}"
    );
    let keys = world.layout.backup("list-fails").expect("keys");
    for key in [
        keys.metadata(),
        keys.contents(),
        keys.manifest(),
        keys.resource_list(),
    ] {
        assert!(!world.exists(&key).await, "{key} deleted");
    }

    // velero-backup.json itself fails (the 4th put after the tarball: manifest, resource
    // list, results, log, then the metadata).
    let store = FailingStore {
        inner: Arc::clone(&world.store),
        puts_ok: AtomicI64::new(4),
        tarball_bytes_ok: None,
    };
    let outcome = world
        .run_on(&store, &World::backup("meta-fails", spec()), 2)
        .await
        .expect("runs");
    assert_eq!(outcome.phase, BackupResultPhase::Failed);
    let keys = world.layout.backup("meta-fails").expect("keys");
    assert!(!world.exists(&keys.metadata()).await && !world.exists(&keys.contents()).await);

    // A failed backup may be run again under the same name: nothing claims it exists.
    let outcome = world.run("tar-fails", spec()).await;
    assert_eq!(outcome.phase, BackupResultPhase::Completed);
    assert_same(
        "retry",
        &world.read("tar-fails").await.keys(),
        &namespaces_backup(0..10),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_cluster_backup_on_s3() {
    let Some(world) = World::start(Backend::S3).await else {
        return;
    };
    whole_cluster(&world).await;
}
