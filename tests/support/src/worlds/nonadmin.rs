//! The world of the non-admin (OADP) tests: an API server whose users include two
//! namespace owners (the embedded server's static tokens, or real identities given by
//! `GRANARY_TEST_OWNER_{A,B}_{KUBECONFIG,USER}` on a real cluster; see
//! tests/e2e/nonadmin.rs), their namespaces, the seed CRDs and nonadmin RBAC, and the
//! Velero-compatible and non-admin controllers on the `local` provider ([`Tenancy`]).

use crate::{INSTANCE_LABEL, TestCluster, poll_until};
use granary_api::oadp::{
    NonAdminBackup, NonAdminBackupSpec, NonAdminPhase, NonAdminRestore, NonAdminRestoreSpec,
};
use granary_api::velero::{
    Backup, BackupPhase, BackupSpec, BackupStorageLocation, BackupStorageLocationPhase,
    BackupStorageLocationSpec, ObjectStorageLocation, RestoreSpec,
};
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_providers::{BucketOptions, ListEntry, ObjectStore, StoreOptions};
use granary_runtime::clock::Clock;
use granary_runtime::metrics::Metrics;
use granary_runtime::selector::ObjectSelector;
use granary_velero_server::context::VeleroContext;
use granary_velero_server::metrics::VeleroMetrics;
use granary_velero_server::server::run_controllers;
use granary_velero_server::settings::VeleroSettings;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, ResourceExt};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const TOKENS: &str = "owner-a-token-0123456789,owner-a,uid-owner-a\n\
                      owner-b-token-0123456789,owner-b,uid-owner-b\n\
                      root-token-0123456789,root,uid-root,system:masters\n";
pub const BUCKET: &str = "nonadmin";
pub const PREFIX: &str = "velero";
/// The ConfigMap every owner's namespace starts with (its data names the namespace).
pub const CONFIG: &str = "team-config";

/// Where the suite runs.
pub enum Cluster {
    /// The embedded server, knowing the owners from its token file.
    Embedded {
        _server: EmbeddedServer,
        _dir: tempfile::TempDir,
    },
    /// A real cluster (`GRANARY_TEST_KUBECONFIG`); its namespaces go at the end.
    Real(Box<TestCluster>),
}

pub struct Tenancy {
    pub admin: Client,
    pub owner_a: Client,
    pub owner_b: Client,
    /// The first owner's user name (in kube-apiserver's 403 messages).
    pub user_a: String,
    /// The owners' namespaces and the Velero namespace: `ns-a`, `ns-b` and `velero` on
    /// the embedded server, with a unique suffix on a real cluster.
    pub ns_a: String,
    pub ns_b: String,
    pub velero_ns: String,
    /// The controllers' `--object-selector` value; every object the tests make for
    /// them carries it.
    pub selector: String,
    pub store: Arc<dyn ObjectStore>,
    _data: tempfile::TempDir,
    pub controllers: tokio::task::JoinHandle<()>,
    pub cluster: Cluster,
}

impl Drop for Tenancy {
    fn drop(&mut self) {
        self.controllers.abort();
        if let Cluster::Real(cluster) = &self.cluster {
            release_finalizers(
                cluster.garden.kubeconfig_path.clone(),
                vec![self.ns_a.clone(), self.ns_b.clone()],
            );
        }
    }
}

/// On a real cluster the controllers are gone when a test ends, so the finalizers of
/// what is left in the owners' namespaces are taken off (on a thread: drop cannot
/// await) before the harness deletes the namespaces.
pub fn release_finalizers(kubeconfig: PathBuf, namespaces: Vec<String>) {
    let work = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let admin = client_from(&kubeconfig).await;
            let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
            for ns in namespaces {
                let nabs: Api<NonAdminBackup> = Api::namespaced(admin.clone(), &ns);
                let nars: Api<NonAdminRestore> = Api::namespaced(admin.clone(), &ns);
                for n in nabs
                    .list(&ListParams::default())
                    .await
                    .into_iter()
                    .flatten()
                {
                    let _ = nabs
                        .patch(&n.name_any(), &PatchParams::default(), &patch)
                        .await;
                }
                for n in nars
                    .list(&ListParams::default())
                    .await
                    .into_iter()
                    .flatten()
                {
                    let _ = nars
                        .patch(&n.name_any(), &PatchParams::default(), &patch)
                        .await;
                }
            }
        });
    });
    let _ = work.join();
}

pub async fn client_from(path: &Path) -> Client {
    let kc = Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("{} is not a readable kubeconfig: {e}", path.display()));
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{} is not usable: {e}", path.display()));
    Client::try_from(config).expect("client")
}

/// Applies deploy/seed's CRDs (waiting until each is Established) and the
/// namespace-owner ClusterRole of deploy/seed/nonadmin-rbac.yaml.
pub async fn install_seed_crds_and_owner_role(admin: &Client) {
    let root = crate::repo_path("deploy/seed");
    let mut crds: Vec<_> = std::fs::read_dir(root.join("crds"))
        .expect("crds")
        .map(|e| e.expect("entry").path())
        .collect();
    crds.sort();
    for f in crds {
        for crd in apply_yaml(admin, &std::fs::read_to_string(&f).expect("crd")).await {
            crate::wait_established(admin, &crd.name_any()).await;
        }
    }
    apply_yaml(
        admin,
        &std::fs::read_to_string(root.join("nonadmin-rbac.yaml")).expect("rbac"),
    )
    .await;
}

pub async fn client_as(server: &EmbeddedServer, token: &str) -> Client {
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
pub async fn apply_yaml(client: &Client, yaml: &str) -> Vec<DynamicObject> {
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

/// Binds `user` in `ns` to `cluster_role` (named by the role: a user name, e.g. a
/// service account's, need not be a valid object name).
pub async fn bind(admin: &Client, ns: &str, user: &str, cluster_role: &str) {
    let mut b = RoleBinding::default();
    b.metadata.name = Some(format!("owner-{cluster_role}"));
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

/// A real-cluster owner from the environment: (kubeconfig, user name).
pub fn owner_from_env(which: &str) -> Option<(PathBuf, String)> {
    let kubeconfig = std::env::var_os(format!("GRANARY_TEST_OWNER_{which}_KUBECONFIG"))?;
    let user = std::env::var(format!("GRANARY_TEST_OWNER_{which}_USER")).ok()?;
    Some((PathBuf::from(kubeconfig), user))
}

/// What a test works against: the cluster, its admin, the two owners `(client, user)`,
/// the namespaces of ns-a, ns-b and Velero (made and labelled with the selector) and
/// the selector; `None` when a real cluster is given without the owners.
type Parts = (Cluster, Client, [(Client, String); 2], [String; 3], String);

pub async fn cluster() -> Option<Parts> {
    if std::env::var_os("GRANARY_TEST_KUBECONFIG").is_some() {
        let (Some(a), Some(b)) = (owner_from_env("A"), owner_from_env("B")) else {
            eprintln!(
                "SKIPPED: on a real cluster the tenancy suite acts as two namespace owners: set \
                 GRANARY_TEST_OWNER_A_KUBECONFIG, GRANARY_TEST_OWNER_A_USER, \
                 GRANARY_TEST_OWNER_B_KUBECONFIG and GRANARY_TEST_OWNER_B_USER (see \
                 tests/e2e/nonadmin.rs)"
            );
            return None;
        };
        let cluster = TestCluster::start().await;
        let admin = cluster.client();
        // The harness labels these with the test's selector.
        let names = [
            cluster.namespace("ns-a").await,
            cluster.namespace("ns-b").await,
            cluster.namespace("velero").await,
        ];
        let owners = [
            (client_from(&a.0).await, a.1),
            (client_from(&b.0).await, b.1),
        ];
        let selector = cluster.object_selector.clone();
        return Some((
            Cluster::Real(Box::new(cluster)),
            admin,
            owners,
            names,
            selector,
        ));
    }
    let selector = "tenancy".to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, TOKENS).expect("token file");
    let server = EmbeddedServer::start_with_token_file(EmbeddedOptions::default(), &tokens)
        .await
        .expect("server");
    let admin = client_as(&server, "root-token-0123456789").await;
    let names = ["ns-a", "ns-b", "velero"].map(String::from);
    for ns in &names {
        let mut n = Namespace::default();
        n.metadata.name = Some(ns.clone());
        n.metadata.labels = Some([(INSTANCE_LABEL.to_string(), selector.clone())].into());
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &n)
            .await
            .expect("namespace");
    }
    let owners = [
        (
            client_as(&server, "owner-a-token-0123456789").await,
            "owner-a".to_string(),
        ),
        (
            client_as(&server, "owner-b-token-0123456789").await,
            "owner-b".to_string(),
        ),
    ];
    let cluster = Cluster::Embedded {
        _server: server,
        _dir: dir,
    };
    Some((cluster, admin, owners, names, selector))
}

pub async fn start() -> Option<Tenancy> {
    start_with(|_| {}).await
}

pub async fn start_with(adjust: impl FnOnce(&mut VeleroSettings)) -> Option<Tenancy> {
    let (cluster, admin, owners, [ns_a, ns_b, velero_ns], selector) = cluster().await?;
    let [(owner_a, user_a), (owner_b, user_b)] = owners;
    install_seed_crds_and_owner_role(&admin).await;
    for (ns, user) in [(&ns_a, &user_a), (&ns_b, &user_b)] {
        bind(&admin, ns, user, "admin").await;
        bind(&admin, ns, user, "nonadmin-editor-role").await;
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(CONFIG.into());
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
    let locations: Api<BackupStorageLocation> = Api::namespaced(admin.clone(), &velero_ns);
    locations
        .create(&PostParams::default(), &location)
        .await
        .expect("location");
    let mut settings = VeleroSettings {
        namespace: velero_ns.clone(),
        ..VeleroSettings::default()
    };
    settings.non_admin.enable = true;
    // The administrator decides every non-admin backup's TTL, and that restores leave
    // volumes alone.
    settings.non_admin.enforce_backup_spec.ttl = Some("24h".parse().expect("ttl"));
    settings.non_admin.enforce_restore_spec.restore_pvs = Some(false);
    adjust(&mut settings);
    let ctx = Arc::new(VeleroContext::new(
        admin.clone(),
        settings,
        options,
        Clock::system(),
        VeleroMetrics::new(&Metrics::new()),
        ObjectSelector::new(Some(selector.clone())),
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
    Some(Tenancy {
        admin,
        owner_a,
        owner_b,
        user_a,
        ns_a,
        ns_b,
        velero_ns,
        selector,
        store,
        _data: data,
        controllers,
        cluster,
    })
}

impl Tenancy {
    pub fn velero<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.admin.clone(), &self.velero_ns)
    }

    pub async fn count<K>(&self) -> usize
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        self.velero::<K>()
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len()
    }

    pub async fn velero_backups(&self) -> Vec<Backup> {
        self.velero::<Backup>()
            .list(&ListParams::default())
            .await
            .expect("backups")
            .items
    }

    pub async fn keys(&self, dir: &str) -> Vec<String> {
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

    /// The instance label the controllers select on.
    pub fn instance(&self) -> std::collections::BTreeMap<String, String> {
        [(INSTANCE_LABEL.to_string(), self.selector.clone())].into()
    }

    pub fn nab(&self, name: &str, spec: BackupSpec) -> NonAdminBackup {
        let mut n = NonAdminBackup::new(
            name,
            NonAdminBackupSpec {
                backup_spec: spec,
                delete_backup: None,
            },
        );
        n.metadata.labels = Some(self.instance());
        n
    }

    pub fn nar(&self, name: &str, spec: RestoreSpec) -> NonAdminRestore {
        let mut n = NonAdminRestore::new(name, NonAdminRestoreSpec { restore_spec: spec });
        n.metadata.labels = Some(self.instance());
        n
    }

    /// Asserts kube-apiserver's 403 Status for the first owner doing `verb` on
    /// `resource` (`"<name>"` when one is named) in `ns`.
    pub fn assert_forbidden<T: std::fmt::Debug>(
        &self,
        r: Result<T, kube::Error>,
        (verb, resource, group, name, ns): (&str, &str, &str, Option<&str>, &str),
    ) {
        let e = crate::api::api_error(r);
        assert_eq!(
            (e.code, e.is_failure(), e.reason.as_str()),
            (403, true, "Forbidden"),
            "{e:?}"
        );
        let base = resource.split('/').next().unwrap_or(resource);
        let qualified = if group.is_empty() {
            base.to_string()
        } else {
            format!("{base}.{group}")
        };
        let named = name.map_or(String::new(), |n| format!(" \"{n}\""));
        assert_eq!(
            e.message,
            format!(
                "{qualified}{named} is forbidden: User \"{}\" cannot {verb} resource \"{resource}\" in API group \"{group}\" in the namespace \"{ns}\"",
                self.user_a
            )
        );
    }
}

/// Waits until the NAB's Velero backup is Completed; returns the NAB.
pub async fn wait_backed_up(api: &Api<NonAdminBackup>, name: &str) -> NonAdminBackup {
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
pub async fn wait_refused<K>(api: &Api<K>, name: &str, reason: &str) -> String
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
