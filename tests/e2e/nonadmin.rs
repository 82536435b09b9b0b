//! Tenancy of OADP's non-admin API (#18) against the embedded API server with real
//! identities: a token file with two namespace owners, each bound in their namespace to
//! the `admin` ClusterRole and to deploy/seed/nonadmin-rbac.yaml's ClusterRole. Acting
//! as the owner of ns-a through its own token: a NonAdminBackup backs up ns-a only;
//! every attempt to reach ns-b or the Velero namespace is refused with the field named
//! and nothing created; restores go back into ns-a only and need a finished backup of
//! ns-a; deleteBackup removes the data, a plain delete keeps it. The Velero-compatible
//! and non-admin controllers run in-process on the local provider.

use crate::support::poll_until;
use granary::api::oadp::{
    NonAdminBackup, NonAdminBackupSpec, NonAdminPhase, NonAdminRestore, NonAdminRestoreSpec,
};
use granary::api::velero::{
    Backup, BackupPhase, BackupSpec, BackupStorageLocation, BackupStorageLocationPhase,
    BackupStorageLocationSpec, ObjectStorageLocation, Restore, RestorePhase, RestoreSpec,
};
use granary::embedded::{EmbeddedOptions, EmbeddedServer};
use granary::runtime::clock::Clock;
use granary::runtime::config::ConfigDuration;
use granary::runtime::metrics::Metrics;
use granary::runtime::selector::ObjectSelector;
use granary::velero_server::context::VeleroContext;
use granary::velero_server::metrics::VeleroMetrics;
use granary::velero_server::server::run_controllers;
use granary::velero_server::settings::VeleroSettings;
use granary_providers::{BucketOptions, ListEntry, ObjectStore, StoreOptions};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const TOKENS: &str = "owner-a-token-0123456789,owner-a,uid-owner-a\n\
                      owner-b-token-0123456789,owner-b,uid-owner-b\n\
                      root-token-0123456789,root,uid-root,system:masters\n";
const VELERO: &str = "velero";
const BUCKET: &str = "nonadmin";
const PREFIX: &str = "velero";

struct Tenancy {
    _server: EmbeddedServer,
    admin: Client,
    owner_a: Client,
    owner_b: Client,
    store: Arc<dyn ObjectStore>,
    _data: tempfile::TempDir,
    _dir: tempfile::TempDir,
    controllers: tokio::task::JoinHandle<()>,
}

impl Drop for Tenancy {
    fn drop(&mut self) {
        self.controllers.abort();
    }
}

async fn client_as(server: &EmbeddedServer, token: &str) -> Client {
    let mut kc = server.kubeconfig().expect("kubeconfig");
    for named in &mut kc.auth_infos {
        if let Some(info) = named.auth_info.as_mut() {
            info.token = Some(token.to_string().into());
        }
    }
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    Client::try_from(config).expect("client")
}

/// Server-side applies every document of `yaml` (as `kubectl apply -f`).
async fn apply_yaml(client: &Client, yaml: &str) -> Vec<DynamicObject> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(yaml).expect("valid YAML");
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let mut out = Vec::new();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        let obj: DynamicObject = serde_json::from_value(doc).expect("object");
        let gvk =
            kube::api::GroupVersionKind::try_from(obj.types.as_ref().expect("typed")).expect("gvk");
        let (ar, _) = discovery.resolve_gvk(&gvk).expect("served");
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        out.push(
            api.patch(
                &obj.name_any(),
                &PatchParams::apply("granary-tests").force(),
                &Patch::Apply(&obj),
            )
            .await
            .expect("apply"),
        );
    }
    out
}

async fn bind(admin: &Client, ns: &str, user: &str, cluster_role: &str) {
    let mut b = RoleBinding::default();
    b.metadata.name = Some(format!("{user}-{cluster_role}"));
    b.role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "ClusterRole".into(),
        name: cluster_role.into(),
    };
    b.subjects = Some(vec![Subject {
        kind: "User".into(),
        name: user.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Default::default()
    }]);
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &b)
        .await
        .expect("rolebinding");
}

async fn start() -> Tenancy {
    start_with(|_| {}).await
}

async fn start_with(adjust: impl FnOnce(&mut VeleroSettings)) -> Tenancy {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, TOKENS).expect("token file");
    let server = EmbeddedServer::start_with_token_file(EmbeddedOptions::default(), &tokens)
        .await
        .expect("server");
    let admin = client_as(&server, "root-token-0123456789").await;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/seed");
    let mut crds: Vec<_> = std::fs::read_dir(root.join("crds"))
        .expect("crds")
        .map(|e| e.expect("entry").path())
        .collect();
    crds.sort();
    for f in crds {
        for crd in apply_yaml(&admin, &std::fs::read_to_string(&f).expect("crd")).await {
            crate::support::wait_established(&admin, &crd.name_any()).await;
        }
    }
    apply_yaml(
        &admin,
        &std::fs::read_to_string(root.join("nonadmin-rbac.yaml")).expect("rbac"),
    )
    .await;
    for ns in [VELERO, "ns-a", "ns-b"] {
        let mut n = Namespace::default();
        n.metadata.name = Some(ns.into());
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &n)
            .await
            .expect("namespace");
    }
    for (ns, user) in [("ns-a", "owner-a"), ("ns-b", "owner-b")] {
        bind(&admin, ns, user, "admin").await;
        bind(&admin, ns, user, "nonadmin-editor-role").await;
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("{ns}-config"));
        cm.data = Some([("k".to_string(), ns.to_string())].into());
        Api::<ConfigMap>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &cm)
            .await
            .expect("configmap");
    }
    let data = tempfile::tempdir().expect("data");
    let options = StoreOptions {
        local_root: Some(data.path().to_path_buf()),
        ..StoreOptions::default()
    };
    let store = granary_providers::open("local", None, &Default::default(), &options)
        .await
        .expect("store");
    store
        .ensure_bucket(BUCKET, &BucketOptions::default())
        .await
        .expect("bucket");
    let location = BackupStorageLocation::new(
        "default",
        BackupStorageLocationSpec {
            provider: "local".into(),
            object_storage: ObjectStorageLocation {
                bucket: BUCKET.into(),
                prefix: Some(PREFIX.into()),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let locations: Api<BackupStorageLocation> = Api::namespaced(admin.clone(), VELERO);
    locations
        .create(&PostParams::default(), &location)
        .await
        .expect("location");
    let mut settings = VeleroSettings {
        namespace: VELERO.into(),
        ..VeleroSettings::default()
    };
    settings.non_admin.enable = true;
    // The administrator decides every non-admin backup's TTL.
    settings.non_admin.enforce_backup_spec.ttl = Some("24h".parse().expect("ttl"));
    adjust(&mut settings);
    let ctx = Arc::new(VeleroContext::new(
        server.client().await.expect("controller client"),
        settings,
        options,
        Clock::system(),
        VeleroMetrics::new(&Metrics::new()),
        ObjectSelector::new(None),
    ));
    let controllers = tokio::spawn(run_controllers(ctx, vec![]));
    poll_until("location Available", || async {
        locations
            .get("default")
            .await
            .ok()
            .and_then(|l| l.status)
            .and_then(|s| s.phase)
            == Some(BackupStorageLocationPhase::Available)
    })
    .await;
    Tenancy {
        owner_a: client_as(&server, "owner-a-token-0123456789").await,
        owner_b: client_as(&server, "owner-b-token-0123456789").await,
        _server: server,
        admin,
        store,
        _data: data,
        _dir: dir,
        controllers,
    }
}

impl Tenancy {
    fn velero<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.admin.clone(), VELERO)
    }

    async fn velero_backups(&self) -> Vec<Backup> {
        self.velero::<Backup>()
            .list(&ListParams::default())
            .await
            .expect("backups")
            .items
    }

    async fn keys(&self, dir: &str) -> Vec<String> {
        granary_providers::list_all(
            self.store.as_ref(),
            BUCKET,
            &format!("{PREFIX}/{dir}"),
            None,
        )
        .await
        .expect("list")
        .into_iter()
        .filter_map(|e| match e {
            ListEntry::Object(m) => Some(m.key),
            ListEntry::Prefix(_) => None,
        })
        .collect()
    }
}

fn nab(name: &str, spec: BackupSpec) -> NonAdminBackup {
    NonAdminBackup::new(
        name,
        NonAdminBackupSpec {
            backup_spec: spec,
            delete_backup: None,
        },
    )
}

fn nar(name: &str, spec: RestoreSpec) -> NonAdminRestore {
    NonAdminRestore::new(name, NonAdminRestoreSpec { restore_spec: spec })
}

/// Waits until the NAB's Velero backup is Completed; returns the NAB.
async fn wait_backed_up(api: &Api<NonAdminBackup>, name: &str) -> NonAdminBackup {
    poll_until(&format!("NonAdminBackup {name} backed up"), || async {
        let n = api.get(name).await.expect("nab");
        let s = n.status.unwrap_or_default();
        if s.phase == Some(NonAdminPhase::BackingOff) {
            panic!("{name} refused: {:?}", s.conditions);
        }
        s.velero_backup.and_then(|v| v.status).and_then(|s| s.phase) == Some(BackupPhase::Completed)
    })
    .await;
    api.get(name).await.expect("nab")
}

/// Waits until the object is `BackingOff` with `Accepted=False`/`reason`; returns the
/// condition's message.
async fn wait_refused<K>(api: &Api<K>, name: &str, reason: &str) -> String
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + serde::Serialize,
{
    let accepted = |v: &serde_json::Value| {
        v["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Accepted")
            .cloned()
    };
    let get =
        || async { serde_json::to_value(api.get(name).await.expect("object")).expect("json") };
    poll_until(&format!("{name} looked at"), || async {
        accepted(&get().await).is_some()
    })
    .await;
    let v = get().await;
    let c = accepted(&v).expect("Accepted");
    assert_eq!(c["status"], "False", "{name} was accepted: {v}");
    assert_eq!(v["status"]["phase"], "BackingOff");
    assert_eq!(c["reason"], reason);
    c["message"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_namespace_owner_backs_up_and_restores_only_their_own_namespace() {
    let t = start().await;
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(t.owner_a.clone(), "ns-a");
    let nars_a: Api<NonAdminRestore> = Api::namespaced(t.owner_a.clone(), "ns-a");
    let pp = PostParams::default();

    // The owner of ns-a cannot reach the Velero namespace or ns-b directly.
    for r in [
        Api::<Backup>::namespaced(t.owner_a.clone(), VELERO)
            .list(&ListParams::default())
            .await
            .map(|_| ()),
        Api::<Restore>::namespaced(t.owner_a.clone(), VELERO)
            .list(&ListParams::default())
            .await
            .map(|_| ()),
        Api::<NonAdminBackup>::namespaced(t.owner_a.clone(), "ns-b")
            .create(&pp, &nab("into-b", BackupSpec::default()))
            .await
            .map(|_| ()),
    ] {
        assert_eq!(crate::conformance::api_error(r).code, 403);
    }

    // A backup of ns-a, as NAC makes it.
    nabs_a
        .create(&pp, &nab("b1", BackupSpec::default()))
        .await
        .expect("create nab");
    let b1 = wait_backed_up(&nabs_a, "b1").await;
    let status = b1.status.clone().expect("status");
    let vb = status.velero_backup.clone().expect("veleroBackup");
    let vb_name = vb.name.clone().expect("name");
    assert!(
        vb_name.starts_with("ns-a-b1-") && vb_name.len() <= 63,
        "{vb_name}"
    );
    assert_eq!(vb.nacuuid.as_deref(), Some(vb_name.as_str()));
    assert_eq!(vb.namespace.as_deref(), Some(VELERO));
    assert_eq!(status.phase, Some(NonAdminPhase::Created));
    assert_eq!(
        status
            .queue_info
            .expect("queueInfo")
            .estimated_queue_position,
        0
    );
    assert!(
        b1.finalizers()
            .iter()
            .any(|f| f == "nonadminbackup.oadp.openshift.io/finalizer")
    );
    let velero_b1 = t
        .velero::<Backup>()
        .get(&vb_name)
        .await
        .expect("velero backup");
    assert_eq!(
        velero_b1.spec.included_namespaces,
        Some(vec!["ns-a".to_string()])
    );
    assert_eq!(velero_b1.labels()["openshift.io/oadp"], "True");
    assert_eq!(
        velero_b1.labels()["openshift.io/oadp-nab-origin-nacuuid"],
        vb_name
    );
    assert_eq!(
        velero_b1.annotations()["openshift.io/oadp-nab-origin-namespace"],
        "ns-a"
    );
    let excluded = velero_b1
        .spec
        .excluded_resources
        .clone()
        .unwrap_or_default();
    assert!(excluded.iter().any(|r| r == "nonadminbackups"));
    assert!(excluded.iter().any(|r| r == "clusterroles"));
    // What was backed up is ns-a's only.
    let resources = t.keys(&format!("backups/{vb_name}/")).await;
    assert!(!resources.is_empty());
    let progress = velero_b1.status.clone().and_then(|s| s.progress);
    assert!(progress.is_some_and(|p| p.items_backed_up.unwrap_or(0) >= 1));

    // Field and name tricks: refused, naming the field, nothing created.
    let before = t.velero_backups().await.len();
    let tricks: Vec<(&str, BackupSpec, &str)> = vec![
        (
            "star",
            BackupSpec {
                included_namespaces: Some(vec!["*".into()]),
                ..Default::default()
            },
            "spec.backupSpec.includedNamespaces[0]",
        ),
        (
            "other",
            BackupSpec {
                included_namespaces: Some(vec!["ns-a".into(), "ns-b".into()]),
                ..Default::default()
            },
            "spec.backupSpec.includedNamespaces[1]",
        ),
        (
            "velero-ns",
            BackupSpec {
                included_namespaces: Some(vec![VELERO.into()]),
                ..Default::default()
            },
            "spec.backupSpec.includedNamespaces[0]",
        ),
        (
            "excluded",
            BackupSpec {
                excluded_namespaces: Some(vec!["ns-a".into()]),
                ..Default::default()
            },
            "spec.backupSpec.excludedNamespaces",
        ),
        (
            "cluster",
            BackupSpec {
                include_cluster_resources: Some(true),
                ..Default::default()
            },
            "spec.backupSpec.includeClusterResources",
        ),
        (
            "admins-location",
            BackupSpec {
                storage_location: Some("default".into()),
                ..Default::default()
            },
            "spec.backupSpec.storageLocation",
        ),
        (
            "own-ttl",
            BackupSpec {
                ttl: Some("48h".parse().expect("ttl")),
                ..Default::default()
            },
            "spec.backupSpec.ttl: the administrator has restricted spec.backupSpec.ttl field value to 24h",
        ),
    ];
    for (name, spec, _) in &tricks {
        nabs_a
            .create(&pp, &nab(name, spec.clone()))
            .await
            .expect("create");
    }
    for (name, _, field) in &tricks {
        let m = wait_refused(&nabs_a, name, "InvalidBackupSpec").await;
        assert!(m.contains(field), "{name}: {m}");
        let n = nabs_a.get(name).await.expect("nab");
        assert!(
            n.finalizers().is_empty(),
            "{name}: no finalizer on a refused NAB"
        );
        assert!(n.status.and_then(|s| s.velero_backup).is_none());
    }
    // Even one who may write in the Velero namespace gets no non-admin backup of it.
    let nabs_velero: Api<NonAdminBackup> = Api::namespaced(t.admin.clone(), VELERO);
    nabs_velero
        .create(&pp, &nab("of-velero", BackupSpec::default()))
        .await
        .expect("create");
    let m = wait_refused(&nabs_velero, "of-velero", "InvalidBackupSpec").await;
    assert!(m.contains("metadata.namespace"), "{m}");
    assert_eq!(t.velero_backups().await.len(), before, "nothing created");

    // Long names that collide after truncation get distinct Velero backups in ns-a.
    let long1 = format!("{}-one", "x".repeat(55));
    let long2 = format!("{}-two", "x".repeat(55));
    // The second also selects by a label ns-b's objects could carry: still ns-a only.
    let selector = k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
        match_labels: Some([("team".to_string(), "b".to_string())].into()),
        ..Default::default()
    };
    for (n, label_selector) in [(&long1, None), (&long2, Some(selector))] {
        let spec = BackupSpec {
            label_selector,
            ..Default::default()
        };
        nabs_a.create(&pp, &nab(n, spec)).await.expect("long");
    }
    let l1 = wait_backed_up(&nabs_a, &long1)
        .await
        .velero_backup_name()
        .map(String::from);
    let l2 = wait_backed_up(&nabs_a, &long2)
        .await
        .velero_backup_name()
        .map(String::from);
    let (l1, l2) = (l1.expect("name"), l2.expect("name"));
    assert_ne!(l1, l2);
    for l in [&l1, &l2] {
        assert!(l.len() <= 63 && l.starts_with("ns-a-xxxx"), "{l}");
        let v = t.velero::<Backup>().get(l).await.expect("backup");
        assert_eq!(v.spec.included_namespaces, Some(vec!["ns-a".to_string()]));
    }

    // ns-b's owner has a backup of their own; ns-a's owner cannot restore from it.
    let nabs_b: Api<NonAdminBackup> = Api::namespaced(t.owner_b.clone(), "ns-b");
    nabs_b
        .create(&pp, &nab("bb", BackupSpec::default()))
        .await
        .expect("nab in ns-b");
    wait_backed_up(&nabs_b, "bb").await;
    let restores_before = t
        .velero::<Restore>()
        .list(&ListParams::default())
        .await
        .expect("restores")
        .items
        .len();
    let from = |b: &str| RestoreSpec {
        backup_name: Some(b.into()),
        ..Default::default()
    };
    let nar_tricks: Vec<(&str, RestoreSpec, &str)> = vec![
        ("from-b", from("bb"), "not found in namespace ns-a"),
        (
            "missing",
            from("no-such-backup"),
            "not found in namespace ns-a",
        ),
        (
            "mapped",
            RestoreSpec {
                namespace_mapping: Some([("ns-a".to_string(), "ns-b".to_string())].into()),
                ..from("b1")
            },
            "spec.restoreSpec.namespaceMapping",
        ),
        (
            "into-b",
            RestoreSpec {
                included_namespaces: Some(vec!["ns-b".into()]),
                ..from("b1")
            },
            "spec.restoreSpec.includedNamespaces",
        ),
        ("refused-nab", from("star"), "not ready to restore from"),
    ];
    for (name, spec, _) in &nar_tricks {
        nars_a
            .create(&pp, &nar(name, spec.clone()))
            .await
            .expect("nar");
    }
    for (name, _, want) in &nar_tricks {
        let m = wait_refused(&nars_a, name, "InvalidRestoreSpec").await;
        assert!(m.contains(want), "{name}: {m}");
        assert!(m.contains("spec.restoreSpec."), "{name}: {m}");
    }

    // A NAR against a backup that failed is refused with the reason.
    let long2_nab = nabs_a.get(&long2).await.expect("nab");
    let failed = long2_nab
        .velero_backup_name()
        .expect("velero name")
        .to_string();
    t.velero::<Backup>()
        .patch(
            &failed,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await
        .expect("mark failed");
    nars_a
        .create(&pp, &nar("from-failed", from(&long2)))
        .await
        .expect("nar");
    let m = wait_refused(&nars_a, "from-failed", "InvalidRestoreSpec").await;
    assert!(m.contains("is Failed"), "{m}");
    assert_eq!(
        t.velero::<Restore>()
            .list(&ListParams::default())
            .await
            .expect("restores")
            .items
            .len(),
        restores_before,
        "no Velero Restore for a refused NAR"
    );

    // A restore of b1 goes back into ns-a only.
    let cms_a: Api<ConfigMap> = Api::namespaced(t.owner_a.clone(), "ns-a");
    cms_a
        .delete("ns-a-config", &DeleteParams::default())
        .await
        .expect("delete configmap");
    nars_a
        .create(&pp, &nar("r1", from("b1")))
        .await
        .expect("nar");
    poll_until("r1 restored", || async {
        nars_a
            .get("r1")
            .await
            .ok()
            .and_then(|r| r.status)
            .and_then(|s| s.velero_restore)
            .and_then(|v| v.status)
            .and_then(|s| s.phase)
            == Some(RestorePhase::Completed)
    })
    .await;
    assert!(cms_a.get_opt("ns-a-config").await.expect("get").is_some());
    let r1 = nars_a.get("r1").await.expect("r1");
    let vr = r1
        .velero_restore_name()
        .expect("velero restore")
        .to_string();
    assert!(vr.starts_with("ns-a-r1-"), "{vr}");
    let velero_r1 = t.velero::<Restore>().get(&vr).await.expect("restore");
    assert_eq!(
        velero_r1.spec.backup_name.as_deref(),
        Some(vb_name.as_str())
    );
    assert_eq!(
        velero_r1.spec.included_namespaces,
        Some(vec!["ns-a".to_string()])
    );
    assert_eq!(velero_r1.spec.namespace_mapping, None);
    // Deleting the NAR deletes its Velero Restore.
    nars_a
        .delete("r1", &DeleteParams::default())
        .await
        .expect("delete nar");
    poll_until("r1 and its Velero Restore gone", || async {
        matches!(nars_a.get_opt("r1").await, Ok(None))
            && matches!(t.velero::<Restore>().get_opt(&vr).await, Ok(None))
    })
    .await;

    // A plain delete removes the Velero Backup CR only; the data stays.
    let l1_keys = t.keys(&format!("backups/{l1}/")).await;
    assert!(!l1_keys.is_empty());
    nabs_a
        .delete(&long1, &DeleteParams::default())
        .await
        .expect("delete");
    poll_until("long1 and its Velero Backup gone", || async {
        matches!(nabs_a.get_opt(&long1).await, Ok(None))
            && matches!(t.velero::<Backup>().get_opt(&l1).await, Ok(None))
    })
    .await;
    assert_eq!(
        t.keys(&format!("backups/{l1}/")).await,
        l1_keys,
        "data kept"
    );

    // deleteBackup: a DeleteBackupRequest removes the data, the NAB's restores go, then
    // the NAB goes.
    nars_a
        .create(&pp, &nar("r2", from("b1")))
        .await
        .expect("nar");
    poll_until("r2 created", || async {
        nars_a
            .get("r2")
            .await
            .ok()
            .and_then(|r| r.status)
            .and_then(|s| s.phase)
            == Some(NonAdminPhase::Created)
    })
    .await;
    nabs_a
        .patch(
            "b1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"deleteBackup": true}})),
        )
        .await
        .expect("deleteBackup");
    poll_until("b1 deleted with its data", || async {
        matches!(nabs_a.get_opt("b1").await, Ok(None))
            && matches!(t.velero::<Backup>().get_opt(&vb_name).await, Ok(None))
            && matches!(nars_a.get_opt("r2").await, Ok(None))
    })
    .await;
    assert!(
        t.keys(&format!("backups/{vb_name}/")).await.is_empty(),
        "data gone"
    );
    // ns-b's backup was never touched.
    let bb = nabs_b.get("bb").await.expect("bb");
    assert_eq!(
        bb.status.and_then(|s| s.phase),
        Some(NonAdminPhase::Created)
    );
}

#[tokio::test]
async fn a_plain_delete_keeps_the_data_and_the_sync_brings_the_backup_back() {
    let t = start_with(|s| {
        s.backup_sync_period = ConfigDuration(Duration::from_secs(1));
        s.non_admin.backup_sync_period = ConfigDuration(Duration::from_secs(1));
    })
    .await;
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(t.owner_a.clone(), "ns-a");
    nabs_a
        .create(&PostParams::default(), &nab("keep", BackupSpec::default()))
        .await
        .expect("create nab");
    let first = wait_backed_up(&nabs_a, "keep").await;
    let vb = first.velero_backup_name().expect("velero name").to_string();
    let keys = t.keys(&format!("backups/{vb}/")).await;
    assert!(!keys.is_empty());
    nabs_a
        .delete("keep", &DeleteParams::default())
        .await
        .expect("plain delete");
    // Velero's sync brings the Backup back from object storage, NAC's sync the NAB,
    // which takes over the same Velero Backup.
    let old_uid = first.uid();
    poll_until("keep recreated by the sync", || async {
        nabs_a
            .get_opt("keep")
            .await
            .ok()
            .flatten()
            .is_some_and(|n| {
                n.uid() != old_uid
                    && n.status.as_ref().and_then(|s| s.phase) == Some(NonAdminPhase::Created)
            })
    })
    .await;
    let synced = nabs_a.get("keep").await.expect("nab");
    assert_eq!(
        synced.labels()["openshift.io/oadp-nab-synced-from-nacuuid"],
        vb
    );
    assert_eq!(synced.velero_backup_name(), Some(vb.as_str()));
    assert!(
        synced
            .finalizers()
            .iter()
            .any(|f| f == "nonadminbackup.oadp.openshift.io/finalizer")
    );
    assert_eq!(t.keys(&format!("backups/{vb}/")).await, keys, "data kept");
    assert_eq!(
        t.velero_backups().await.len(),
        1,
        "no second Velero Backup was made"
    );
}

#[tokio::test]
async fn velero_objects_of_gone_non_admin_objects_are_garbage_collected() {
    let t = start_with(|s| {
        s.non_admin.garbage_collection_period = ConfigDuration(Duration::from_secs(1));
    })
    .await;
    let pp = PostParams::default();
    // The administrator's own backup, not NAC's: never touched.
    t.velero::<Backup>()
        .create(
            &pp,
            &Backup::new(
                "admins-own",
                BackupSpec {
                    included_namespaces: Some(vec!["ns-b".into()]),
                    ..Default::default()
                },
            ),
        )
        .await
        .expect("admin backup");
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(t.owner_a.clone(), "ns-a");
    nabs_a
        .create(&pp, &nab("live", BackupSpec::default()))
        .await
        .expect("nab");
    let live = wait_backed_up(&nabs_a, "live").await;
    let live_vb = live.velero_backup_name().expect("name").to_string();
    let nac = |origin: &str, uuid: &str, ns: &str, name: &str| {
        let mut m = kube::api::ObjectMeta {
            name: Some(uuid.into()),
            ..Default::default()
        };
        m.labels = Some(
            [
                ("openshift.io/oadp", "True"),
                ("app.kubernetes.io/managed-by", "oadp-nac-controller"),
                (&*format!("openshift.io/oadp-{origin}-origin-nacuuid"), uuid),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        m.annotations = Some(
            [
                (format!("openshift.io/oadp-{origin}-origin-name"), name),
                (format!("openshift.io/oadp-{origin}-origin-namespace"), ns),
            ]
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect(),
        );
        m
    };
    let mut orphan_backup = Backup::new(
        "",
        BackupSpec {
            included_namespaces: Some(vec!["ns-gone".into()]),
            ..Default::default()
        },
    );
    orphan_backup.metadata = nac("nab", "ns-gone-x-1", "ns-gone", "x");
    t.velero::<Backup>()
        .create(&pp, &orphan_backup)
        .await
        .expect("orphan backup");
    let mut orphan_restore = Restore::new(
        "",
        RestoreSpec {
            backup_name: Some(live_vb.clone()),
            ..Default::default()
        },
    );
    orphan_restore.metadata = nac("nar", "ns-a-gone-1", "ns-a", "gone");
    t.velero::<Restore>()
        .create(&pp, &orphan_restore)
        .await
        .expect("orphan restore");
    poll_until("orphans collected", || async {
        matches!(t.velero::<Backup>().get_opt("ns-gone-x-1").await, Ok(None))
            && matches!(t.velero::<Restore>().get_opt("ns-a-gone-1").await, Ok(None))
    })
    .await;
    for name in ["admins-own", live_vb.as_str()] {
        assert!(
            t.velero::<Backup>()
                .get_opt(name)
                .await
                .expect("get")
                .is_some(),
            "{name} kept"
        );
    }
}
