//! Tenancy of OADP's non-admin API (#18) with real identities: two namespace owners,
//! each bound in their namespace to the `admin` ClusterRole and to
//! deploy/seed/nonadmin-rbac.yaml's ClusterRole. Acting as the owner of ns-a through
//! its own credentials: a NonAdminBackup backs up ns-a only; every attempt to reach ns-b
//! or the Velero namespace — through a spec field, a name (253 characters, unicode,
//! names that collide after OADP's 63-character cut), a label, or the Velero kinds
//! directly — is refused, naming the field (or with kube-apiserver's 403 Status), and
//! nothing is created half-way; the administrator's enforced specs fill empty fields and
//! refuse other values; restores go back into ns-a only and need a finished backup of
//! ns-a; deleteBackup removes the data, a plain delete keeps it. The Velero-compatible
//! and non-admin controllers run in the test process on the `local` provider, with the
//! test's own object selector.
//!
//! By default the cluster is the embedded API server, the owners users of its static
//! token file. With `GRANARY_TEST_KUBECONFIG` (a cluster admin's kubeconfig, as for the
//! rest of the suite) the same tests run on that real cluster, and the owners must be
//! real identities there too, given as
//!
//! ```text
//! GRANARY_TEST_OWNER_A_KUBECONFIG  a kubeconfig that acts as the first owner
//! GRANARY_TEST_OWNER_A_USER        that owner's user name as RBAC sees it (a RoleBinding
//!                                  subject of kind User; a service account is
//!                                  system:serviceaccount:<namespace>:<name>)
//! GRANARY_TEST_OWNER_B_KUBECONFIG  the same for a second owner
//! GRANARY_TEST_OWNER_B_USER
//! ```
//!
//! Neither owner may hold any cluster-wide permission beyond the defaults every
//! authenticated user has. As the admin the tests apply deploy/seed/crds and
//! deploy/seed/nonadmin-rbac.yaml, make their own namespaces (`ns-a-<id>`, `ns-b-<id>`,
//! `velero-<id>`, deleted at the end) and bind each owner in their namespace to `admin`
//! and `nonadmin-editor-role`. The cluster must serve the aggregated `admin` ClusterRole
//! (every conformant one does) and run no other controller of `oadp.openshift.io` or
//! `velero.io` (no OADP operator, whose CRDs would also clash with ours). Without the
//! four variables the tests print `SKIPPED` with the reason and pass, as the suite's
//! other tests do when the cluster lacks what they need.

use crate::support::{INSTANCE_LABEL, TestCluster, poll_until};
use granary_api::oadp::{
    NonAdminBackup, NonAdminBackupSpec, NonAdminBackupStorageLocation,
    NonAdminBackupStorageLocationSpec, NonAdminPhase, NonAdminRestore, NonAdminRestoreSpec,
};
use granary_api::velero::{
    Backup, BackupPhase, BackupSpec, BackupStorageLocation, BackupStorageLocationPhase,
    BackupStorageLocationSpec, DeleteBackupRequest, DownloadRequest, DownloadRequestSpec,
    DownloadTarget, DownloadTargetKind, ObjectStorageLocation, Restore, RestorePhase, RestoreSpec,
};
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_providers::{BucketOptions, ListEntry, ObjectStore, StoreOptions};
use granary_runtime::clock::Clock;
use granary_runtime::config::ConfigDuration;
use granary_runtime::metrics::Metrics;
use granary_runtime::selector::ObjectSelector;
use granary_velero_server::context::VeleroContext;
use granary_velero_server::metrics::VeleroMetrics;
use granary_velero_server::server::run_controllers;
use granary_velero_server::settings::VeleroSettings;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, ResourceExt};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub(crate) const TOKENS: &str = "owner-a-token-0123456789,owner-a,uid-owner-a\n\
                      owner-b-token-0123456789,owner-b,uid-owner-b\n\
                      root-token-0123456789,root,uid-root,system:masters\n";
pub(crate) const BUCKET: &str = "nonadmin";
pub(crate) const PREFIX: &str = "velero";
/// The ConfigMap every owner's namespace starts with (its data names the namespace).
const CONFIG: &str = "team-config";

/// Where the suite runs.
enum Cluster {
    /// The embedded server, knowing the owners from its token file.
    Embedded {
        _server: EmbeddedServer,
        _dir: tempfile::TempDir,
    },
    /// A real cluster (`GRANARY_TEST_KUBECONFIG`); its namespaces go at the end.
    Real(Box<TestCluster>),
}

pub(crate) struct Tenancy {
    pub(crate) admin: Client,
    pub(crate) owner_a: Client,
    owner_b: Client,
    /// The first owner's user name (in kube-apiserver's 403 messages).
    pub(crate) user_a: String,
    /// The owners' namespaces and the Velero namespace: `ns-a`, `ns-b` and `velero` on
    /// the embedded server, with a unique suffix on a real cluster.
    pub(crate) ns_a: String,
    ns_b: String,
    pub(crate) velero_ns: String,
    /// The controllers' `--object-selector` value; every object the tests make for
    /// them carries it.
    selector: String,
    pub(crate) store: Arc<dyn ObjectStore>,
    _data: tempfile::TempDir,
    controllers: tokio::task::JoinHandle<()>,
    cluster: Cluster,
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
fn release_finalizers(kubeconfig: PathBuf, namespaces: Vec<String>) {
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

async fn client_from(path: &Path) -> Client {
    let kc = Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("{} is not a readable kubeconfig: {e}", path.display()));
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{} is not usable: {e}", path.display()));
    Client::try_from(config).expect("client")
}

/// Applies deploy/seed's CRDs (waiting until each is Established) and the
/// namespace-owner ClusterRole of deploy/seed/nonadmin-rbac.yaml.
pub(crate) async fn install_seed_crds_and_owner_role(admin: &Client) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/seed");
    let mut crds: Vec<_> = std::fs::read_dir(root.join("crds"))
        .expect("crds")
        .map(|e| e.expect("entry").path())
        .collect();
    crds.sort();
    for f in crds {
        for crd in apply_yaml(admin, &std::fs::read_to_string(&f).expect("crd")).await {
            crate::support::wait_established(admin, &crd.name_any()).await;
        }
    }
    apply_yaml(
        admin,
        &std::fs::read_to_string(root.join("nonadmin-rbac.yaml")).expect("rbac"),
    )
    .await;
}

pub(crate) async fn client_as(server: &EmbeddedServer, token: &str) -> Client {
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
pub(crate) async fn apply_yaml(client: &Client, yaml: &str) -> Vec<DynamicObject> {
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
async fn bind(admin: &Client, ns: &str, user: &str, cluster_role: &str) {
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
fn owner_from_env(which: &str) -> Option<(PathBuf, String)> {
    let kubeconfig = std::env::var_os(format!("GRANARY_TEST_OWNER_{which}_KUBECONFIG"))?;
    let user = std::env::var(format!("GRANARY_TEST_OWNER_{which}_USER")).ok()?;
    Some((PathBuf::from(kubeconfig), user))
}

/// What a test works against: the cluster, its admin, the two owners `(client, user)`,
/// the namespaces of ns-a, ns-b and Velero (made and labelled with the selector) and
/// the selector; `None` when a real cluster is given without the owners.
type Parts = (Cluster, Client, [(Client, String); 2], [String; 3], String);

async fn cluster() -> Option<Parts> {
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

pub(crate) async fn start() -> Option<Tenancy> {
    start_with(|_| {}).await
}

async fn start_with(adjust: impl FnOnce(&mut VeleroSettings)) -> Option<Tenancy> {
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
    pub(crate) fn velero<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.admin.clone(), &self.velero_ns)
    }

    async fn count<K>(&self) -> usize
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

    /// The instance label the controllers select on.
    fn instance(&self) -> std::collections::BTreeMap<String, String> {
        [(INSTANCE_LABEL.to_string(), self.selector.clone())].into()
    }

    pub(crate) fn nab(&self, name: &str, spec: BackupSpec) -> NonAdminBackup {
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

    pub(crate) fn nar(&self, name: &str, spec: RestoreSpec) -> NonAdminRestore {
        let mut n = NonAdminRestore::new(name, NonAdminRestoreSpec { restore_spec: spec });
        n.metadata.labels = Some(self.instance());
        n
    }

    /// Asserts kube-apiserver's 403 Status for the first owner doing `verb` on
    /// `resource` (`"<name>"` when one is named) in `ns`.
    fn assert_forbidden<T: std::fmt::Debug>(
        &self,
        r: Result<T, kube::Error>,
        (verb, resource, group, name, ns): (&str, &str, &str, Option<&str>, &str),
    ) {
        let e = crate::conformance::api_error(r);
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
pub(crate) async fn wait_backed_up(api: &Api<NonAdminBackup>, name: &str) -> NonAdminBackup {
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
    let Some(t) = start().await else { return };
    let (ns_a, ns_b, velero) = (t.ns_a.as_str(), t.ns_b.as_str(), t.velero_ns.as_str());
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(t.owner_a.clone(), ns_a);
    let nars_a: Api<NonAdminRestore> = Api::namespaced(t.owner_a.clone(), ns_a);
    let pp = PostParams::default();

    // A backup of ns-a, as NAC makes it.
    nabs_a
        .create(&pp, &t.nab("b1", BackupSpec::default()))
        .await
        .expect("create nab");
    let b1 = wait_backed_up(&nabs_a, "b1").await;
    let status = b1.status.clone().expect("status");
    let vb = status.velero_backup.clone().expect("veleroBackup");
    let vb_name = vb.name.clone().expect("name");
    assert!(
        vb_name.starts_with(&format!("{ns_a}-b1-")) && vb_name.len() <= 63,
        "{vb_name}"
    );
    assert_eq!(vb.nacuuid.as_deref(), Some(vb_name.as_str()));
    assert_eq!(vb.namespace.as_deref(), Some(velero));
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
        Some(vec![ns_a.to_string()])
    );
    // The administrator's enforced TTL filled the empty field.
    assert_eq!(velero_b1.spec.ttl, Some("24h".parse().expect("ttl")));
    assert_eq!(velero_b1.labels()["openshift.io/oadp"], "True");
    assert_eq!(
        velero_b1.labels()["openshift.io/oadp-nab-origin-nacuuid"],
        vb_name
    );
    assert_eq!(
        velero_b1.annotations()["openshift.io/oadp-nab-origin-namespace"],
        ns_a
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

    // ns-b's owner has a backup and a location of their own.
    let nabs_b: Api<NonAdminBackup> = Api::namespaced(t.owner_b.clone(), ns_b);
    nabs_b
        .create(&pp, &t.nab("bb", BackupSpec::default()))
        .await
        .expect("nab in ns-b");
    let bb = wait_backed_up(&nabs_b, "bb").await;
    let bb_velero = bb.velero_backup_name().expect("name").to_string();
    Api::<NonAdminBackupStorageLocation>::namespaced(t.owner_b.clone(), ns_b)
        .create(
            &pp,
            &NonAdminBackupStorageLocation::new(
                "b-location",
                NonAdminBackupStorageLocationSpec {
                    backup_storage_location_spec: BackupStorageLocationSpec {
                        provider: "local".into(),
                        object_storage: ObjectStorageLocation {
                            bucket: BUCKET.into(),
                            ..Default::default()
                        },
                        ..Default::default()
                    },
                },
            ),
        )
        .await
        .expect("ns-b's location");

    // Field, name and label tricks: refused, naming the field, nothing created.
    let before = t.velero_backups().await.len();
    let with_labels = |pairs: &[(&str, &str)]| {
        Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some(
                    pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
        )
    };
    let tricks: Vec<(&str, BackupSpec, String)> = vec![
        (
            "star",
            BackupSpec {
                included_namespaces: Some(vec!["*".into()]),
                ..Default::default()
            },
            "spec.backupSpec.includedNamespaces[0]".into(),
        ),
        (
            "other",
            BackupSpec {
                included_namespaces: Some(vec![ns_a.into(), ns_b.into()]),
                ..Default::default()
            },
            "spec.backupSpec.includedNamespaces[1]".into(),
        ),
        (
            "velero-ns",
            BackupSpec {
                included_namespaces: Some(vec![velero.into()]),
                ..Default::default()
            },
            "spec.backupSpec.includedNamespaces[0]".into(),
        ),
        (
            "excluded",
            BackupSpec {
                excluded_namespaces: Some(vec![ns_a.into()]),
                ..Default::default()
            },
            "spec.backupSpec.excludedNamespaces".into(),
        ),
        (
            "cluster",
            BackupSpec {
                include_cluster_resources: Some(true),
                ..Default::default()
            },
            "spec.backupSpec.includeClusterResources".into(),
        ),
        (
            "admins-location",
            BackupSpec {
                storage_location: Some("default".into()),
                ..Default::default()
            },
            "spec.backupSpec.storageLocation".into(),
        ),
        (
            "others-location",
            BackupSpec {
                storage_location: Some("b-location".into()),
                ..Default::default()
            },
            format!(
                "spec.backupSpec.storageLocation: NonAdminBackupStorageLocation \"b-location\" not found in namespace {ns_a}"
            ),
        ),
        (
            "others-backup-as-location",
            BackupSpec {
                storage_location: Some(bb_velero.clone()),
                ..Default::default()
            },
            "spec.backupSpec.storageLocation".into(),
        ),
        (
            "own-ttl",
            BackupSpec {
                ttl: Some("48h".parse().expect("ttl")),
                ..Default::default()
            },
            "spec.backupSpec.ttl: the administrator has restricted spec.backupSpec.ttl field value to 24h".into(),
        ),
        // A label value Velero's selector parsing refuses (unicode).
        (
            "unicode-selector",
            BackupSpec {
                label_selector: with_labels(&[("team", "b\u{e9}")]),
                ..Default::default()
            },
            "spec.backupSpec.labelSelector.matchLabels[\"team\"]".into(),
        ),
    ];
    for (name, spec, _) in &tricks {
        nabs_a
            .create(&pp, &t.nab(name, spec.clone()))
            .await
            .expect("create");
    }
    for (name, _, field) in &tricks {
        let m = wait_refused(&nabs_a, name, "InvalidBackupSpec").await;
        assert!(m.contains(field.as_str()), "{name}: {m}");
        let n = nabs_a.get(name).await.expect("nab");
        assert!(
            n.finalizers().is_empty(),
            "{name}: no finalizer on a refused NAB"
        );
        assert!(n.status.and_then(|s| s.velero_backup).is_none());
    }
    // Names and labels that are no valid object names or labels never get in at all.
    for bad in [
        t.nab("b\u{e9}b\u{e9}", BackupSpec::default()),
        t.nab(&"x".repeat(254), BackupSpec::default()),
        {
            let mut n = t.nab("unicode-labelled", BackupSpec::default());
            n.labels_mut().insert("team".into(), "\u{1f600}".into());
            n
        },
    ] {
        assert_eq!(
            crate::conformance::api_error(nabs_a.create(&pp, &bad).await).code,
            422
        );
    }
    // Even one who may write in the Velero namespace gets no non-admin backup of it.
    let nabs_velero: Api<NonAdminBackup> = Api::namespaced(t.admin.clone(), velero);
    nabs_velero
        .create(&pp, &t.nab("of-velero", BackupSpec::default()))
        .await
        .expect("create");
    let m = wait_refused(&nabs_velero, "of-velero", "InvalidBackupSpec").await;
    assert!(m.contains("metadata.namespace"), "{m}");
    assert_eq!(t.velero_backups().await.len(), before, "nothing created");

    // 253-character names that are the same after OADP's cut to 63 get distinct Velero
    // backups of ns-a; the second also selects by a label ns-b's objects could carry,
    // and a third claims to be synced from ns-b's backup: each still ns-a only, and
    // ns-b's backup is left as it was.
    let long1 = format!("{}-one", "x".repeat(249));
    let long2 = format!("{}-two", "x".repeat(249));
    assert_eq!(long1.len(), 253);
    for (n, label_selector) in [(&long1, None), (&long2, with_labels(&[("team", "b")]))] {
        let spec = BackupSpec {
            label_selector,
            ..Default::default()
        };
        nabs_a.create(&pp, &t.nab(n, spec)).await.expect("long");
    }
    let mut adopter = t.nab("adopter", BackupSpec::default());
    adopter.labels_mut().insert(
        "openshift.io/oadp-nab-synced-from-nacuuid".into(),
        bb_velero.clone(),
    );
    nabs_a.create(&pp, &adopter).await.expect("adopter");
    let l1 = wait_backed_up(&nabs_a, &long1)
        .await
        .velero_backup_name()
        .map(String::from);
    let l2 = wait_backed_up(&nabs_a, &long2)
        .await
        .velero_backup_name()
        .map(String::from);
    let adopted = wait_backed_up(&nabs_a, "adopter")
        .await
        .velero_backup_name()
        .map(String::from);
    let (l1, l2, adopted) = (l1.expect("name"), l2.expect("name"), adopted.expect("name"));
    assert_ne!(l1, l2);
    for l in [&l1, &l2, &adopted] {
        assert_ne!(*l, bb_velero);
        assert!(l.len() <= 63 && l.starts_with(&format!("{ns_a}-")), "{l}");
        let v = t.velero::<Backup>().get(l).await.expect("backup");
        assert_eq!(v.spec.included_namespaces, Some(vec![ns_a.to_string()]));
        // DESIGN §8: what a controller creates carries its object selector.
        assert_eq!(
            v.labels().get("granary.gardener.cloud/instance"),
            Some(&t.selector),
            "{l}"
        );
        assert_eq!(
            v.annotations()["openshift.io/oadp-nab-origin-namespace"],
            ns_a
        );
    }
    let bb_now = t.velero::<Backup>().get(&bb_velero).await.expect("bb");
    assert_eq!(
        bb_now.annotations()["openshift.io/oadp-nab-origin-name"],
        "bb"
    );
    assert_eq!(
        bb_now.annotations()["openshift.io/oadp-nab-origin-namespace"],
        ns_b
    );

    // Directly, the owner of ns-a reaches nothing of ns-b or of the Velero namespace:
    // kube-apiserver's 403.
    let backups_v: Api<Backup> = Api::namespaced(t.owner_a.clone(), velero);
    let restores_v: Api<Restore> = Api::namespaced(t.owner_a.clone(), velero);
    let downloads_v: Api<DownloadRequest> = Api::namespaced(t.owner_a.clone(), velero);
    let dbrs_v: Api<DeleteBackupRequest> = Api::namespaced(t.owner_a.clone(), velero);
    let nabs_b_as_a: Api<NonAdminBackup> = Api::namespaced(t.owner_a.clone(), ns_b);
    let v = "velero.io";
    let o = "oadp.openshift.io";
    t.assert_forbidden(
        backups_v.get(&bb_velero).await,
        ("get", "backups", v, Some(&bb_velero), velero),
    );
    t.assert_forbidden(
        backups_v.list(&ListParams::default()).await,
        ("list", "backups", v, None, velero),
    );
    t.assert_forbidden(
        backups_v.delete(&bb_velero, &DeleteParams::default()).await,
        ("delete", "backups", v, Some(&bb_velero), velero),
    );
    t.assert_forbidden(
        restores_v.list(&ListParams::default()).await,
        ("list", "restores", v, None, velero),
    );
    t.assert_forbidden(
        restores_v
            .delete("anything", &DeleteParams::default())
            .await,
        ("delete", "restores", v, Some("anything"), velero),
    );
    let download = DownloadRequest::new(
        "steal",
        DownloadRequestSpec {
            target: DownloadTarget {
                kind: DownloadTargetKind::BackupContents,
                name: bb_velero.clone(),
            },
        },
    );
    t.assert_forbidden(
        downloads_v.create(&pp, &download).await,
        ("create", "downloadrequests", v, None, velero),
    );
    t.assert_forbidden(
        downloads_v.get("steal").await,
        ("get", "downloadrequests", v, Some("steal"), velero),
    );
    t.assert_forbidden(
        downloads_v.delete("steal", &DeleteParams::default()).await,
        ("delete", "downloadrequests", v, Some("steal"), velero),
    );
    t.assert_forbidden(
        dbrs_v.list(&ListParams::default()).await,
        ("list", "deletebackuprequests", v, None, velero),
    );
    t.assert_forbidden(
        dbrs_v
            .create(
                &pp,
                &DeleteBackupRequest::new(
                    "drop-b",
                    granary_api::velero::DeleteBackupRequestSpec {
                        backup_name: bb_velero.clone(),
                    },
                ),
            )
            .await,
        ("create", "deletebackuprequests", v, None, velero),
    );
    t.assert_forbidden(
        nabs_b_as_a.get("bb").await,
        ("get", "nonadminbackups", o, Some("bb"), ns_b),
    );
    t.assert_forbidden(
        nabs_b_as_a.delete("bb", &DeleteParams::default()).await,
        ("delete", "nonadminbackups", o, Some("bb"), ns_b),
    );
    t.assert_forbidden(
        nabs_b_as_a
            .patch(
                "bb",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"deleteBackup": true}})),
            )
            .await,
        ("patch", "nonadminbackups", o, Some("bb"), ns_b),
    );
    t.assert_forbidden(
        nabs_b_as_a
            .create(&pp, &t.nab("into-b", BackupSpec::default()))
            .await,
        ("create", "nonadminbackups", o, None, ns_b),
    );
    t.assert_forbidden(
        Api::<ConfigMap>::namespaced(t.owner_a.clone(), ns_b)
            .get(CONFIG)
            .await,
        ("get", "configmaps", "", Some(CONFIG), ns_b),
    );
    // Nor through the status of their own NAB, which only the controllers write.
    t.assert_forbidden(
        nabs_a
            .patch_status(
                "b1",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"status": {"veleroBackup": {"nacuuid": bb_velero, "name": bb_velero}}}),
                ),
            )
            .await,
        ("patch", "nonadminbackups/status", o, Some("b1"), ns_a),
    );

    // Restores: a NAR names a NAB of its own namespace whose backup finished.
    let restores_before = t.count::<Restore>().await;
    let from = |b: &str| RestoreSpec {
        backup_name: Some(b.into()),
        ..Default::default()
    };
    let not_found = format!("not found in namespace {ns_a}");
    let nar_tricks: Vec<(&str, RestoreSpec, String)> = vec![
        ("from-b", from("bb"), not_found.clone()),
        ("from-velero-name", from(&bb_velero), not_found.clone()),
        ("missing", from("no-such-backup"), not_found.clone()),
        ("unicode", from("b\u{e9}"), not_found.clone()),
        (
            "mapped",
            RestoreSpec {
                namespace_mapping: Some([(ns_a.to_string(), ns_b.to_string())].into()),
                ..from("b1")
            },
            "spec.restoreSpec.namespaceMapping".into(),
        ),
        (
            "mapped-velero",
            RestoreSpec {
                namespace_mapping: Some([(ns_a.to_string(), velero.to_string())].into()),
                ..from("b1")
            },
            "spec.restoreSpec.namespaceMapping".into(),
        ),
        (
            "into-b",
            RestoreSpec {
                included_namespaces: Some(vec![ns_b.into()]),
                ..from("b1")
            },
            "spec.restoreSpec.includedNamespaces".into(),
        ),
        (
            "star",
            RestoreSpec {
                included_namespaces: Some(vec!["*".into()]),
                ..from("b1")
            },
            "spec.restoreSpec.includedNamespaces".into(),
        ),
        (
            "excluded",
            RestoreSpec {
                excluded_namespaces: Some(vec![ns_b.into()]),
                ..from("b1")
            },
            "spec.restoreSpec.excludedNamespaces".into(),
        ),
        (
            "own-pvs",
            RestoreSpec {
                restore_pvs: Some(true),
                ..from("b1")
            },
            "spec.restoreSpec.restorePVs: the administrator has restricted spec.restoreSpec.restorePVs field value to false".into(),
        ),
        ("refused-nab", from("star"), "not ready to restore from".into()),
    ];
    for (name, spec, _) in &nar_tricks {
        nars_a
            .create(&pp, &t.nar(name, spec.clone()))
            .await
            .expect("nar");
    }
    for (name, _, want) in &nar_tricks {
        let m = wait_refused(&nars_a, name, "InvalidRestoreSpec").await;
        assert!(m.contains(want.as_str()), "{name}: {m}");
        assert!(m.contains("spec.restoreSpec."), "{name}: {m}");
        let n = nars_a.get(name).await.expect("nar");
        assert!(n.finalizers().is_empty(), "{name}: no finalizer");
        assert!(n.status.and_then(|s| s.velero_restore).is_none());
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
        .create(&pp, &t.nar("from-failed", from(&long2)))
        .await
        .expect("nar");
    let m = wait_refused(&nars_a, "from-failed", "InvalidRestoreSpec").await;
    assert!(m.contains("is Failed"), "{m}");
    assert_eq!(
        t.count::<Restore>().await,
        restores_before,
        "no Velero Restore for a refused NAR"
    );

    // A restore of b1 goes back into ns-a only, with the enforced spec filled in.
    let cms_a: Api<ConfigMap> = Api::namespaced(t.owner_a.clone(), ns_a);
    cms_a
        .delete(CONFIG, &DeleteParams::default())
        .await
        .expect("delete configmap");
    nars_a
        .create(&pp, &t.nar("r1", from("b1")))
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
    let restored = cms_a.get(CONFIG).await.expect("restored configmap");
    assert_eq!(restored.data.expect("data")["k"], ns_a);
    let r1 = nars_a.get("r1").await.expect("r1");
    let vr = r1
        .velero_restore_name()
        .expect("velero restore")
        .to_string();
    assert!(vr.starts_with(&format!("{ns_a}-r1-")), "{vr}");
    let velero_r1 = t.velero::<Restore>().get(&vr).await.expect("restore");
    assert_eq!(
        velero_r1.spec.backup_name.as_deref(),
        Some(vb_name.as_str())
    );
    assert_eq!(
        velero_r1.spec.included_namespaces,
        Some(vec![ns_a.to_string()])
    );
    assert_eq!(velero_r1.spec.namespace_mapping, None);
    assert_eq!(velero_r1.spec.restore_pvs, Some(false));
    // ns-b was not touched.
    let cm_b = Api::<ConfigMap>::namespaced(t.admin.clone(), ns_b)
        .get(CONFIG)
        .await
        .expect("ns-b's configmap");
    assert_eq!(cm_b.data.expect("data")["k"], ns_b);
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
        .create(&pp, &t.nar("r2", from("b1")))
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
    assert!(!t.keys(&format!("backups/{bb_velero}/")).await.is_empty());
}

#[tokio::test]
async fn a_plain_delete_keeps_the_data_and_the_sync_brings_the_backup_back() {
    let Some(t) = start_with(|s| {
        s.backup_sync_period = ConfigDuration(Duration::from_secs(1));
        s.non_admin.backup_sync_period = ConfigDuration(Duration::from_secs(1));
    })
    .await
    else {
        return;
    };
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(t.owner_a.clone(), &t.ns_a);
    nabs_a
        .create(
            &PostParams::default(),
            &t.nab("keep", BackupSpec::default()),
        )
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
    let Some(t) = start_with(|s| {
        s.non_admin.garbage_collection_period = ConfigDuration(Duration::from_secs(1));
    })
    .await
    else {
        return;
    };
    let pp = PostParams::default();
    // The administrator's own backup, not NAC's: never touched.
    t.velero::<Backup>()
        .create(
            &pp,
            &Backup::new(
                "admins-own",
                BackupSpec {
                    included_namespaces: Some(vec![t.ns_b.clone()]),
                    ..Default::default()
                },
            ),
        )
        .await
        .expect("admin backup");
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(t.owner_a.clone(), &t.ns_a);
    nabs_a
        .create(&pp, &t.nab("live", BackupSpec::default()))
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
    orphan_restore.metadata = nac("nar", "ns-a-gone-1", &t.ns_a, "gone");
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
