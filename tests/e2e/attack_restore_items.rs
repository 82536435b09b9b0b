//! A namespace owner controls the bucket of their backup location and can plant any
//! backup in it; these tests plant such backups and check they stay inert, through the
//! real controllers against the embedded API server and the local provider:
//! - an item whose object contradicts its path in the tarball (a Secret of `victim`
//!   filed under `team-a`, a ClusterRoleBinding filed as a ConfigMap) is refused and
//!   named in the restore's results, and nothing of the archive is created;
//! - an item whose kind is not its resource's kind is refused on its own;
//! - an archive `granary archive verify` calls invalid fails the restore before any
//!   write;
//! - download tokens (DownloadRequests, NonAdminDownloadRequests) never enter a backup,
//!   whatever its resource filters say.
//!
//! A planted backup carries no integrity record, so a restore refuses it before reading
//! anything (tests/e2e/integrity.rs). These tests go past that on purpose, as an
//! administrator who says `--allow-unverified` does: the archive's own checks are the
//! next line and must hold on their own.

use granary_api::velero::{Backup, BackupPhase, BackupSpec, RestorePhase, RestoreSpec};
use granary_test_support::poll_until;
use granary_test_support::worlds::velero::{
    World, create, dynamic, foreign_backup, restore_unverified as restore, results, tarball,
    wait_restore,
};
use granary_velero::archive::{ArchiveLimits, parse_archive};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn json_bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("json")
}

/// An item file and its preferred-version copy (`v1`), as Velero writes both.
fn with_copy(gr: &str, scope: &str, name: &str, v: &Value) -> Vec<(String, Vec<u8>)> {
    vec![
        (format!("resources/{gr}/{scope}/{name}.json"), json_bytes(v)),
        (
            format!("resources/{gr}/v1-preferredversion/{scope}/{name}.json"),
            json_bytes(v),
        ),
    ]
}

fn planted(files: Vec<(String, Vec<u8>)>) -> Vec<u8> {
    let mut all = vec![("metadata/version".to_string(), b"1.1.0\n".to_vec())];
    all.extend(files);
    let refs: Vec<(&str, Vec<u8>)> = all.iter().map(|(p, d)| (p.as_str(), d.clone())).collect();
    tarball(&refs)
}

fn configmap(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}")},
        "data": {"k": "v"}})
}

/// A restore of `backup` limited to `namespace`, as a namespace owner's restore is.
fn owner_restore(backup: &str, namespace: &str) -> RestoreSpec {
    RestoreSpec {
        backup_name: Some(backup.into()),
        included_namespaces: Some(vec![namespace.into()]),
        ..Default::default()
    }
}

async fn secret_exists(c: &Client, ns: &str, name: &str) -> bool {
    Api::<Secret>::namespaced(c.clone(), ns)
        .get_opt(name)
        .await
        .expect("read secret")
        .is_some()
}

async fn configmap_exists(c: &Client, ns: &str, name: &str) -> bool {
    Api::<ConfigMap>::namespaced(c.clone(), ns)
        .get_opt(name)
        .await
        .expect("read configmap")
        .is_some()
}

fn failure_reason(r: &granary_api::velero::Restore) -> String {
    r.status
        .as_ref()
        .and_then(|s| s.failure_reason.clone())
        .unwrap_or_default()
}

/// The errors of a restore's results file filed under `namespace` (`""`: cluster).
fn errors_in(results: &Value, namespace: &str) -> Vec<String> {
    let list = if namespace.is_empty() {
        results.pointer("/errors/cluster")
    } else {
        results.pointer(&format!("/errors/namespaces/{namespace}"))
    };
    list.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_filed_under_another_namespace_is_refused_and_nothing_is_restored() {
    let (w, _controllers) = World::start_planted().await;
    let victim = w.cluster.namespace("victim").await;
    let team = w.cluster.namespace("team-a").await;
    let scope = format!("namespaces/{team}");
    // The object says `victim`; its path says `team-a`.
    let stolen = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "stolen", "namespace": victim, "uid": "uid-stolen"},
        "type": "Opaque", "data": {"token": "c2VjcmV0"}});
    let mut files = with_copy("secrets", &scope, "stolen", &stolen);
    files.extend(with_copy(
        "configmaps",
        &scope,
        "innocent",
        &configmap(&team, "innocent"),
    ));
    foreign_backup(&w, "planted-secret", planted(files)).await;

    restore(&w, "r-secret", owner_restore("planted-secret", &team)).await;
    let r = wait_restore(&w, "r-secret", &[RestorePhase::Failed]).await;
    let reason = failure_reason(&r);
    let path = format!("resources/secrets/namespaces/{team}/stolen.json");
    assert!(
        reason.contains(&path) && reason.contains("not what its path says"),
        "failureReason names the item and why: {reason}"
    );
    let errors = errors_in(&results(&w, "r-secret").await, &team);
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with(&format!("secrets {team}/stolen: ")) && e.contains(&victim)),
        "the results name the refused item with the namespace it claims: {errors:?}"
    );
    for ns in [&victim, &team] {
        assert!(
            !secret_exists(&w.client, ns, "stolen").await,
            "the planted Secret was created in {ns}"
        );
    }
    assert!(
        !configmap_exists(&w.client, &team, "innocent").await,
        "nothing of a refused archive is restored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_role_binding_filed_as_a_configmap_is_refused() {
    let (w, _controllers) = World::start_planted().await;
    let team = w.cluster.namespace("team-a").await;
    let scope = format!("namespaces/{team}");
    let binding = w.cluster.name("escalate");
    let crb = |api_version: &str, namespace: Option<&str>, name: &str| {
        let mut meta = json!({"name": name, "uid": format!("uid-{name}")});
        if let Some(ns) = namespace {
            meta["namespace"] = json!(ns);
        }
        json!({"apiVersion": api_version, "kind": "ClusterRoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": team}],
            "data": {"k": "v"}})
    };

    // Its own apiVersion, no namespace: the archive contradicts itself.
    foreign_backup(
        &w,
        "planted-crb",
        planted(with_copy(
            "configmaps",
            &scope,
            &binding,
            &crb("rbac.authorization.k8s.io/v1", None, &binding),
        )),
    )
    .await;
    restore(&w, "r-crb", owner_restore("planted-crb", &team)).await;
    let r = wait_restore(&w, "r-crb", &[RestorePhase::Failed]).await;
    let reason = failure_reason(&r);
    assert!(
        reason.contains(&format!(
            "resources/configmaps/namespaces/{team}/{binding}.json"
        )),
        "{reason}"
    );
    let errors = errors_in(&results(&w, "r-crb").await, &team);
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with(&format!("configmaps {team}/{binding}: "))),
        "{errors:?}"
    );

    // Dressed as a core object of the path's namespace, only the kind differs: that
    // item is refused, the rest of the backup is restored.
    let disguised = w.cluster.name("disguised");
    let mut files = with_copy(
        "configmaps",
        &scope,
        &disguised,
        &crb("v1", Some(&team), &disguised),
    );
    files.extend(with_copy(
        "configmaps",
        &scope,
        "innocent",
        &configmap(&team, "innocent"),
    ));
    foreign_backup(&w, "planted-kind", planted(files)).await;
    restore(&w, "r-kind", owner_restore("planted-kind", &team)).await;
    wait_restore(&w, "r-kind", &[RestorePhase::PartiallyFailed]).await;
    let errors = errors_in(&results(&w, "r-kind").await, &team);
    assert!(
        errors.iter().any(
            |e| e.starts_with(&format!("configmaps {team}/{disguised}: "))
                && e.contains("ClusterRoleBinding")
        ),
        "the results name the item and its kind: {errors:?}"
    );
    assert!(configmap_exists(&w.client, &team, "innocent").await);

    let crbs: Api<ClusterRoleBinding> = Api::all(w.client.clone());
    for name in [&binding, &disguised] {
        assert!(
            crbs.get_opt(name).await.expect("read").is_none(),
            "ClusterRoleBinding {name} was created"
        );
        assert!(
            !configmap_exists(&w.client, &team, name).await,
            "ConfigMap {name} was created"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_with_format_errors_fails_the_restore_before_any_write() {
    let (w, _controllers) = World::start_planted().await;
    // Restored into a namespace that does not exist yet: not even it may appear.
    let source = "shop";
    let target = w.cluster.name("format-target");
    let scope = format!("namespaces/{source}");
    let ns_item = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": source, "uid": "uid-ns"}});
    let mut files = with_copy("namespaces", "cluster", source, &ns_item);
    files.extend(with_copy(
        "configmaps",
        &scope,
        "first",
        &configmap(source, "first"),
    ));
    // The preferred-version copy says something else than the file a restore reads.
    files.push((
        format!("resources/configmaps/{scope}/second.json"),
        json_bytes(&configmap(source, "second")),
    ));
    let mut other = configmap(source, "second");
    other["data"]["k"] = json!("other");
    files.push((
        format!("resources/configmaps/v1-preferredversion/{scope}/second.json"),
        json_bytes(&other),
    ));
    foreign_backup(&w, "malformed", planted(files)).await;

    let mut spec = owner_restore("malformed", source);
    spec.namespace_mapping = Some([(source.to_string(), target.clone())].into());
    restore(&w, "r-malformed", spec).await;
    let r = wait_restore(&w, "r-malformed", &[RestorePhase::Failed]).await;
    let reason = failure_reason(&r);
    assert!(
        reason.contains("differs from its preferred-version copy")
            && reason.contains("second.json"),
        "failureReason names the first problems: {reason}"
    );
    let namespaces: Api<Namespace> = Api::all(w.client.clone());
    assert!(
        namespaces.get_opt(&target).await.expect("read").is_none(),
        "the target namespace was created"
    );
    let progress = r.status.and_then(|s| s.progress).unwrap_or_default();
    assert_eq!(
        progress.items_restored.unwrap_or(0),
        0,
        "no item was restored"
    );
}

/// The group resources of every item file in a stored backup's tarball.
async fn backed_up_resources(w: &World, backup: &str) -> (Vec<String>, Vec<u8>) {
    let key = format!("velero/seed-a/backups/{backup}/{backup}.tar.gz");
    let tar = granary_providers::get_bytes(w.store.as_ref(), &w.bucket, &key)
        .await
        .expect("tarball stored")
        .to_vec();
    let archive = parse_archive(&tar[..], &ArchiveLimits::default()).expect("tarball parses");
    let resources = archive
        .items
        .keys()
        .map(|p| p.group_resource.to_string())
        .collect();
    (resources, tar)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn download_requests_are_never_backed_up() {
    let w = World::start().await;
    let c = w.client.clone();
    let app = w.app.clone();
    let token = "X-Amz-Signature=planted-signature-0123456789";
    let url = format!("https://bucket.example.com/backups/b/b-logs.gz?{token}");
    // A Velero DownloadRequest (no status subresource) carrying its signed URL.
    let drs = dynamic(
        &c,
        "velero.io",
        "v1",
        "DownloadRequest",
        "downloadrequests",
        Some(&app),
    );
    create(
        &drs,
        json!({"apiVersion": "velero.io/v1", "kind": "DownloadRequest",
            "metadata": {"name": "logs"},
            "spec": {"target": {"kind": "BackupLog", "name": "b"}},
            "status": {"phase": "Processed", "downloadURL": url}}),
    )
    .await;
    // A NonAdminDownloadRequest with the URL in its status.
    let nadrs = dynamic(
        &c,
        "oadp.openshift.io",
        "v1alpha1",
        "NonAdminDownloadRequest",
        "nonadmindownloadrequests",
        Some(&app),
    );
    create(
        &nadrs,
        json!({"apiVersion": "oadp.openshift.io/v1alpha1", "kind": "NonAdminDownloadRequest",
            "metadata": {"name": "logs"},
            "spec": {"target": {"kind": "BackupLog", "name": "b"}}}),
    )
    .await;
    nadrs
        .patch_status(
            "logs",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Created",
                "velero": {"status": {"phase": "Processed", "downloadURL": url}}}})),
        )
        .await
        .expect("status");
    poll_until("the NonAdminDownloadRequest carries its URL", || async {
        nadrs
            .get("logs")
            .await
            .ok()
            .is_some_and(|o| o.data.to_string().contains(token))
    })
    .await;

    let _controllers = w.controllers(w.settings());
    w.location("default", false).await;
    let everything = ["*".to_string()];
    let named = [
        "downloadrequests".to_string(),
        "downloadrequests.velero.io".to_string(),
        "nonadmindownloadrequests".to_string(),
        "nonadmindownloadrequests.oadp.openshift.io".to_string(),
        "configmaps".to_string(),
    ];
    for (name, included) in [("all", &everything[..]), ("named", &named[..])] {
        let b = Backup::new(
            name,
            BackupSpec {
                included_namespaces: Some(vec![app.clone()]),
                included_resources: Some(included.to_vec()),
                storage_location: Some("default".into()),
                ..Default::default()
            },
        );
        w.api::<Backup>()
            .create(&PostParams::default(), &b)
            .await
            .expect("create backup");
        w.wait_backup_phase(name, BackupPhase::Completed).await;
        let (resources, tar) = backed_up_resources(&w, name).await;
        assert!(
            resources.iter().any(|r| r == "configmaps"),
            "backup {name} holds the namespace's ConfigMaps: {resources:?}"
        );
        for never in [
            "downloadrequests.velero.io",
            "nonadmindownloadrequests.oadp.openshift.io",
        ] {
            assert!(
                !resources.iter().any(|r| r == never),
                "backup {name} holds {never}: {resources:?}"
            );
        }
        for api in [&drs, &nadrs] {
            assert!(
                api.get_opt("logs").await.expect("read").is_some(),
                "the download request was there during backup {name}"
            );
        }
        let text = String::from_utf8_lossy(
            &granary_velero::files::gunzip_limited(&tar[..], 1 << 30).expect("gzip"),
        )
        .into_owned();
        assert!(
            !text.contains(token),
            "backup {name}'s tarball holds the signed URL"
        );
    }
}
