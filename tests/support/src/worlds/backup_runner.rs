//! The world of the backup-runner tests: an embedded API server filled with a known
//! set of objects (22 namespaces of ConfigMaps, Secrets, custom resources, a Deployment
//! owning a ReplicaSet, a ServiceAccount, a Pod with its claim; PVs, ClusterRoles and
//! ClusterRoleBindings), an object store (`local`, or moto), and helpers that run a
//! backup and read back everything it stored. Also a store wrapper that fails on cue.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use granary_api::velero::{Backup, BackupPhase, BackupSpec, BackupStatus};
use granary_providers::{
    BoxReader, BucketOptions, BucketReport, ByteStream, DeleteReport, ListEntry, ObjectMeta,
    ObjectStore, ProviderKind, RetryStats, StoreOptions, get_bytes,
};
use granary_velero::archive::{ArchiveLimits, ParsedArchive, parse_archive};
use granary_velero::files::{ResourceList, Results, decode_backup_json, gunzip_limited};
use granary_velero::layout::StorageLayout;
use granary_velero::manifest::{ItemKey, Manifest};
use granary_velero_server::backup::{
    BackupError, BackupOutcome, BackupProgress, BackupRequest, run,
};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::seed::{Backend, endpoint};
use crate::{TestCluster, wait_established};

pub const NAMESPACES: usize = 22;
pub const CONFIGMAPS: usize = 40;
pub const SECRETS: usize = 40;
pub const CRONTABS: usize = 10;
pub const CRD: &str = "crontabs.stable.example.com";

pub fn ns(i: usize) -> String {
    format!("br-{i:02}")
}

pub struct World {
    pub cluster: TestCluster,
    pub client: Client,
    pub store: Arc<dyn ObjectStore>,
    pub layout: StorageLayout,
    /// Every progress report of every run, in order.
    pub progress: std::sync::Mutex<Vec<BackupProgress>>,
    _data: tempfile::TempDir,
}

fn key(group: &str, resource: &str, namespace: &str, name: &str) -> ItemKey {
    ItemKey {
        group: group.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// The namespaced fixture items of namespace `i` that every backup of it takes (the
/// ConfigMap labelled `velero.io/exclude-from-backup` is not among them).
pub fn namespaced_keys(i: usize) -> BTreeSet<ItemKey> {
    let n = ns(i);
    let mut out = BTreeSet::new();
    for j in 0..CONFIGMAPS - 1 {
        out.insert(key("", "configmaps", &n, &format!("cm-{j}")));
    }
    for j in 0..SECRETS {
        out.insert(key("", "secrets", &n, &format!("s-{j}")));
    }
    for j in 0..CRONTABS {
        out.insert(key(
            "stable.example.com",
            "crontabs",
            &n,
            &format!("ct-{j}"),
        ));
    }
    out.insert(key("apps", "deployments", &n, "web"));
    out.insert(key("apps", "replicasets", &n, "web-1"));
    out.insert(key("", "serviceaccounts", &n, "robot"));
    out.insert(key("", "pods", &n, "p"));
    out.insert(key("", "persistentvolumeclaims", &n, "data"));
    out
}

pub fn namespace_key(i: usize) -> ItemKey {
    key("", "namespaces", "", &ns(i))
}

pub fn pv_key(i: usize) -> ItemKey {
    key("", "persistentvolumes", "", &format!("pv-{i:02}"))
}

pub fn crd_key() -> ItemKey {
    key("apiextensions.k8s.io", "customresourcedefinitions", "", CRD)
}

/// The ClusterRoleBinding naming namespace `i`'s ServiceAccount, and its ClusterRole.
pub fn rbac_keys(i: usize) -> [ItemKey; 2] {
    let g = "rbac.authorization.k8s.io";
    [
        key(g, "clusterrolebindings", "", &format!("crb-{i:02}")),
        key(g, "clusterroles", "", &format!("cr-{i:02}")),
    ]
}

/// What a backup of namespaces `which` takes with no other filter: their items, their
/// Namespace objects, and the cluster-scoped items the item actions bring (PV, CRD,
/// cluster RBAC).
pub fn namespaces_backup(which: impl IntoIterator<Item = usize>) -> BTreeSet<ItemKey> {
    let mut out = BTreeSet::from([crd_key()]);
    for i in which {
        out.extend(namespaced_keys(i));
        out.insert(namespace_key(i));
        out.insert(pv_key(i));
        out.extend(rbac_keys(i));
    }
    out
}

async fn create(client: &Client, ar: &ApiResource, ns: Option<&str>, obj: Value) -> DynamicObject {
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    let obj: DynamicObject = serde_json::from_value(obj).expect("an object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("created")
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

impl World {
    /// The world on `backend`, filled; `None` when the backend (or a real cluster, which
    /// this test would back up whole) is not available.
    pub async fn start(backend: Backend) -> Option<World> {
        let url = endpoint(backend)?;
        let cluster = TestCluster::start().await;
        if !cluster.is_embedded() {
            eprintln!(
                "backup_runner: needs the embedded API server (it backs up the whole cluster); skipped"
            );
            return None;
        }
        let client = cluster.client();
        let data = tempfile::tempdir().expect("temp dir");
        let secret: Vec<(String, Vec<u8>)> = match backend {
            Backend::Local => vec![],
            Backend::S3 => [
                ("accessKeyID", "test"),
                ("secretAccessKey", "test"),
                ("endpoint", url.as_str()),
                ("s3ForcePathStyle", "true"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect(),
            other => panic!("{other:?} is not used by these tests"),
        };
        let options = StoreOptions {
            local_root: Some(data.path().to_path_buf()),
            retry: granary_providers::RetryPolicy::fast(2),
            ..StoreOptions::default()
        };
        let store = granary_providers::open(
            backend.provider(),
            Some("us-east-1"),
            &secret.into_iter().collect(),
            &options,
        )
        .await
        .expect("open store");
        let bucket = format!("velero-{}", cluster.object_selector);
        store
            .ensure_bucket(&bucket, &BucketOptions::default())
            .await
            .expect("bucket");
        let layout = StorageLayout::new(&bucket, Some("velero/seed-a")).expect("layout");
        let world = World {
            cluster,
            client,
            store,
            layout,
            progress: Default::default(),
            _data: data,
        };
        world.populate().await;
        Some(world)
    }

    async fn populate(&self) {
        let c = &self.client;
        let crd = ar(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        );
        create(c, &crd, None, json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": CRD},
            "spec": {"group": "stable.example.com", "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        })).await;
        wait_established(c, CRD).await;

        let namespaces = ar("", "v1", "Namespace", "namespaces");
        let pvs = ar("", "v1", "PersistentVolume", "persistentvolumes");
        let roles = ar(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
        );
        let bindings = ar(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
        );
        create(
            c,
            &roles,
            None,
            json!({"metadata": {"name": "lonely"}, "rules": []}),
        )
        .await;
        for i in 0..NAMESPACES {
            let n = ns(i);
            let tier = if i % 2 == 0 { "gold" } else { "silver" };
            create(
                c,
                &namespaces,
                None,
                json!({"metadata": {"name": n, "labels": {"tier": tier}}}),
            )
            .await;
            create(c, &pvs, None, json!({"metadata": {"name": format!("pv-{i:02}")},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp"}}})).await;
            create(
                c,
                &roles,
                None,
                json!({"metadata": {"name": format!("cr-{i:02}")},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
            )
            .await;
            create(c, &bindings, None, json!({"metadata": {"name": format!("crb-{i:02}")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("cr-{i:02}")},
                "subjects": [{"kind": "ServiceAccount", "namespace": n, "name": "robot"}]})).await;
        }
        // The namespaced objects, many at a time.
        let jobs: Vec<(ApiResource, String, Value)> = (0..NAMESPACES)
            .flat_map(|i| self.namespaced_objects(i))
            .collect();
        futures::stream::iter(jobs)
            .for_each_concurrent(16, |(ar, n, obj)| async move {
                create(c, &ar, Some(&n), obj).await;
            })
            .await;
        // Owners: each ReplicaSet is owned by its namespace's Deployment.
        let deployments = ar("apps", "v1", "Deployment", "deployments");
        let replicasets = ar("apps", "v1", "ReplicaSet", "replicasets");
        for i in 0..NAMESPACES {
            let n = ns(i);
            let d = create(c, &deployments, Some(&n), json!({"metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})).await;
            create(c, &replicasets, Some(&n), json!({"metadata": {"name": "web-1", "labels": {"app": "web"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                        "uid": d.metadata.uid.clone().expect("uid"), "controller": true}]},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})).await;
        }
    }

    fn namespaced_objects(&self, i: usize) -> Vec<(ApiResource, String, Value)> {
        let n = ns(i);
        let mut out = Vec::new();
        let cm = ar("", "v1", "ConfigMap", "configmaps");
        for j in 0..CONFIGMAPS {
            let mut labels = json!({"app": "cm"});
            if j % 10 == 0 {
                labels["pick"] = json!("yes");
            }
            if j == CONFIGMAPS - 1 {
                labels["velero.io/exclude-from-backup"] = json!("true");
            }
            out.push((cm.clone(), n.clone(), json!({"metadata": {"name": format!("cm-{j}"), "labels": labels}, "data": {"k": format!("v{j}")}})));
        }
        let secret = ar("", "v1", "Secret", "secrets");
        for j in 0..SECRETS {
            out.push((
                secret.clone(),
                n.clone(),
                json!({"metadata": {"name": format!("s-{j}")}, "data": {"k": "dmFsdWU="}}),
            ));
        }
        let ct = ar("stable.example.com", "v1", "CronTab", "crontabs");
        for j in 0..CRONTABS {
            out.push((
                ct.clone(),
                n.clone(),
                json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                "metadata": {"name": format!("ct-{j}")}, "spec": {"cronSpec": "* * * * */5"}}),
            ));
        }
        out.push((
            ar("", "v1", "ServiceAccount", "serviceaccounts"),
            n.clone(),
            json!({"metadata": {"name": "robot", "labels": {"app": "robot"}}}),
        ));
        out.push((ar("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"), n.clone(), json!({"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": format!("pv-{i:02}")}})));
        out.push((ar("", "v1", "Pod", "pods"), n.clone(), json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}})));
        out.push((ar("", "v1", "Event", "events"), n, json!({"metadata": {"name": "ev"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Test"})));
        out
    }

    /// A Backup as the controller hands it over (validated, InProgress).
    pub fn backup(name: &str, spec: BackupSpec) -> Backup {
        let mut b = Backup::new(name, spec);
        b.metadata.namespace = Some("velero".into());
        b.status = Some(BackupStatus {
            phase: Some(BackupPhase::InProgress),
            ..Default::default()
        });
        b
    }

    /// Runs `backup` against `store` (this world's store by default).
    pub async fn run_on(
        &self,
        store: &dyn ObjectStore,
        backup: &Backup,
        workers: usize,
    ) -> Result<BackupOutcome, BackupError> {
        let progress = |p| self.progress.lock().expect("not poisoned").push(p);
        let keyring = test_keyring();
        run(BackupRequest {
            client: self.client.clone(),
            backup,
            store,
            layout: &self.layout,
            page_size: 100,
            workers,
            now: chrono::Utc::now(),
            progress: &progress,
            keyring: &keyring,
            tenant: None,
        })
        .await
    }

    pub async fn run(&self, name: &str, spec: BackupSpec) -> BackupOutcome {
        self.run_on(&*self.store, &Self::backup(name, spec), 4)
            .await
            .expect("backup runs")
    }

    pub async fn exists(&self, key: &str) -> bool {
        self.store.head(self.layout.bucket(), key).await.is_ok()
    }

    /// Everything a backup stored.
    pub async fn read(&self, name: &str) -> Stored {
        let keys = self.layout.backup(name).expect("keys");
        let get = |k: String| async move {
            get_bytes(&*self.store, self.layout.bucket(), &k)
                .await
                .expect("object present")
                .to_vec()
        };
        let tarball = get(keys.contents()).await;
        let limit = 1 << 30;
        Stored {
            archive: parse_archive(&tarball[..], &ArchiveLimits::default())
                .expect("tarball parses"),
            manifest: Manifest::read_gz(&get(keys.manifest()).await[..], limit).expect("manifest"),
            resource_list: ResourceList::read_gz(&get(keys.resource_list()).await[..], limit)
                .expect("resource list"),
            results: Results::read_gz(&get(keys.results()).await[..], limit).expect("results"),
            backup: decode_backup_json(&get(keys.metadata()).await).expect("velero-backup.json"),
            logs: String::from_utf8(
                gunzip_limited(&get(keys.logs()).await[..], limit).expect("logs"),
            )
            .expect("utf8"),
            tarball,
        }
    }
}

pub struct Stored {
    pub tarball: Vec<u8>,
    pub archive: ParsedArchive,
    pub manifest: Manifest,
    pub resource_list: ResourceList,
    pub results: Results,
    pub backup: Backup,
    pub logs: String,
}

impl Stored {
    pub fn keys(&self) -> BTreeSet<ItemKey> {
        self.manifest.keys().cloned().collect()
    }
}

/// A real store that fails on cue: the `put` after `puts_ok` successful ones, or the
/// tarball upload after reading `tarball_bytes_ok` bytes of it.
#[derive(Debug)]
pub struct FailingStore {
    pub inner: Arc<dyn ObjectStore>,
    pub puts_ok: AtomicI64,
    pub tarball_bytes_ok: Option<u64>,
}

fn injected() -> granary_providers::Error {
    granary_providers::Error::Transient("injected failure: the store went away".into())
}

#[async_trait]
impl ObjectStore for FailingStore {
    fn kind(&self) -> ProviderKind {
        self.inner.kind()
    }
    fn retry_stats(&self) -> &RetryStats {
        self.inner.retry_stats()
    }
    async fn ensure_bucket(
        &self,
        bucket: &str,
        opts: &BucketOptions,
    ) -> granary_providers::Result<BucketReport> {
        self.inner.ensure_bucket(bucket, opts).await
    }
    async fn delete_bucket(
        &self,
        bucket: &str,
        empty_first: bool,
    ) -> granary_providers::Result<()> {
        self.inner.delete_bucket(bucket, empty_first).await
    }
    async fn put(&self, bucket: &str, key: &str, data: Bytes) -> granary_providers::Result<()> {
        if self.puts_ok.fetch_sub(1, Ordering::SeqCst) <= 0 {
            return Err(injected());
        }
        self.inner.put(bucket, key, data).await
    }
    async fn put_reader(
        &self,
        bucket: &str,
        key: &str,
        mut reader: BoxReader,
    ) -> granary_providers::Result<u64> {
        let Some(limit) = self.tarball_bytes_ok else {
            return self.inner.put_reader(bucket, key, reader).await;
        };
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; 8192];
        let mut read = 0u64;
        while read < limit {
            let n = reader
                .read(&mut buf)
                .await
                .map_err(|e| granary_providers::Error::Transient(e.to_string()))?;
            if n == 0 {
                break;
            }
            read += n as u64;
        }
        Err(injected())
    }
    async fn get(&self, bucket: &str, key: &str) -> granary_providers::Result<ByteStream> {
        self.inner.get(bucket, key).await
    }
    async fn head(&self, bucket: &str, key: &str) -> granary_providers::Result<ObjectMeta> {
        self.inner.head(bucket, key).await
    }
    fn list<'a>(
        &'a self,
        bucket: &'a str,
        prefix: &'a str,
        delimiter: Option<&'a str>,
    ) -> futures::stream::BoxStream<'a, granary_providers::Result<ListEntry>> {
        self.inner.list(bucket, prefix, delimiter)
    }
    async fn delete_many(
        &self,
        bucket: &str,
        keys: &[String],
    ) -> granary_providers::Result<DeleteReport> {
        self.inner.delete_many(bucket, keys).await
    }
    async fn copy(&self, sb: &str, sk: &str, db: &str, dk: &str) -> granary_providers::Result<()> {
        self.inner.copy(sb, sk, db, dk).await
    }
}

/// The signing key the runner's tests sign with (`k1`, 32 bytes of 7).
pub fn test_keyring() -> granary_velero::integrity::Keyring {
    granary_velero::integrity::Keyring::default()
        .with_new_key(vec![7; 32])
        .expect("a 32-byte key")
        .0
}
