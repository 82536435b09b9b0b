//! The world of the Velero-compatible controllers: an API server with the seed CRDs, a
//! `velero` namespace, an `app` namespace with a few ConfigMaps, and a bucket on the
//! local provider (or moto). Scenarios start the controllers ([`World::controllers`] or
//! [`controllers`] with restore item actions), create a location, take backups and
//! restore them (velero_lifecycle, velero_restore, velero_schedules, velero_download and
//! the attack tests).

use std::sync::Arc;

use futures::StreamExt;
use granary_api::velero::{
    Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationPhase,
    BackupStorageLocationSpec, DeleteBackupRequest, DeleteBackupRequestPhase,
    DeleteBackupRequestSpec, ObjectStorageLocation, Restore, RestorePhase, RestoreSpec, Schedule,
    ScheduleStatus,
};
use granary_providers::{BucketOptions, ListEntry, ObjectStore, StoreOptions};
use granary_runtime::clock::Clock;
use granary_runtime::metrics::Metrics;
use granary_runtime::selector::ObjectSelector;
use granary_velero_server::context::VeleroContext;
use granary_velero_server::metrics::VeleroMetrics;
use granary_velero_server::restore::actions::RestoreItemAction;
use granary_velero_server::restore_controller;
use granary_velero_server::server::run_controllers;
use granary_velero_server::settings::{CONTROLLER_RESTORE, VeleroSettings};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use crate::builders::backup_spec;
use crate::seed::{Backend, endpoint};
use crate::{DEADLINE, TestCluster, poll_until};

const LOCAL_BUCKET: &str = "lifecycle";
/// The prefix of the locations [`World::location`] creates.
pub const PREFIX: &str = "velero/seed-a";

/// Cloning shares the cluster, bucket and metrics (another namespace = another seed).
#[derive(Clone)]
pub struct World {
    pub cluster: Arc<TestCluster>,
    pub client: Client,
    pub namespace: String,
    /// A namespace with a few ConfigMaps to back up.
    pub app: String,
    pub data: Arc<tempfile::TempDir>,
    pub metrics: Metrics,
    pub store: Arc<dyn ObjectStore>,
    pub bucket: String,
    /// `None` on the local provider; moto's endpoint for S3.
    pub s3: Option<String>,
}

impl World {
    pub async fn start() -> World {
        Self::start_on(Backend::Local)
            .await
            .expect("the local provider is always there")
    }

    /// The world on `backend` (local or S3); `None` when its emulator is missing.
    pub async fn start_on(backend: Backend) -> Option<World> {
        let url = endpoint(backend)?;
        let cluster = TestCluster::start().await;
        let client = cluster.client();
        cluster
            .install_crds_from_dir(&client, &crate::repo_root().join("deploy/seed/crds"))
            .await;
        let namespace = cluster.namespace("velero").await;
        let app = cluster.namespace("app").await;
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &app);
        for i in 0..3 {
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(format!("cm-{i}"));
            cm.data = Some([("k".to_string(), format!("v{i}"))].into());
            configmaps
                .create(&PostParams::default(), &cm)
                .await
                .expect("configmap");
        }
        let data = tempfile::tempdir().expect("tempdir");
        let options = StoreOptions {
            local_root: Some(data.path().to_path_buf()),
            ..StoreOptions::default()
        };
        let (s3, secret, bucket) = match backend {
            Backend::Local => (None, Default::default(), LOCAL_BUCKET.to_string()),
            Backend::S3 => {
                let secret = [
                    ("accessKeyID", "test"),
                    ("secretAccessKey", "test"),
                    ("endpoint", url.as_str()),
                    ("s3ForcePathStyle", "true"),
                ]
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                .collect();
                // The credentials file the locations name (Velero's AWS format).
                let mut cred = k8s_openapi::api::core::v1::Secret::default();
                cred.metadata.name = Some("cloud-credentials".into());
                // `data`, not `stringData`: the embedded server stores what it is given.
                cred.data = Some(
                    [(
                        "cloud".to_string(),
                        k8s_openapi::ByteString(
                            b"[default]\naws_access_key_id=test\naws_secret_access_key=test\n"
                                .to_vec(),
                        ),
                    )]
                    .into(),
                );
                Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), &namespace)
                    .create(&PostParams::default(), &cred)
                    .await
                    .expect("credentials");
                let bucket = format!("lifecycle-{}", cluster.object_selector);
                (Some(url.clone()), secret, bucket)
            }
            other => panic!("{other:?} is not used by these tests"),
        };
        let store =
            granary_providers::open(backend.provider(), Some("us-east-1"), &secret, &options)
                .await
                .expect("store");
        store
            .ensure_bucket(&bucket, &BucketOptions::default())
            .await
            .expect("bucket");
        Some(World {
            cluster: Arc::new(cluster),
            client,
            namespace,
            app,
            data: Arc::new(data),
            metrics: Metrics::new(),
            store,
            bucket,
            s3,
        })
    }

    /// The world with every controller running and the `default` location Available; the
    /// backup sync is off, so Backup objects planted in the cluster stay as created.
    pub async fn start_planted() -> (World, Vec<tokio::task::JoinHandle<()>>) {
        let w = World::start().await;
        let mut settings = w.settings();
        settings.backup_sync_period =
            granary_runtime::config::ConfigDuration(std::time::Duration::ZERO);
        let handles = controllers(&w, settings, None);
        w.location("default", false).await;
        (w, handles)
    }

    pub fn settings(&self) -> VeleroSettings {
        VeleroSettings {
            namespace: self.namespace.clone(),
            ..VeleroSettings::default()
        }
    }

    /// Starts the controllers; aborting the handle stops them (a crash).
    pub fn controllers(&self, settings: VeleroSettings) -> tokio::task::JoinHandle<()> {
        self.controllers_but(settings, &[])
    }

    /// Starts every controller but `disabled`.
    pub fn controllers_but(
        &self,
        settings: VeleroSettings,
        disabled: &[&str],
    ) -> tokio::task::JoinHandle<()> {
        let ctx = Arc::new(VeleroContext::new(
            self.client.clone(),
            settings,
            StoreOptions {
                local_root: Some(self.data.path().to_path_buf()),
                ..StoreOptions::default()
            },
            Clock::system(),
            VeleroMetrics::new(&self.metrics),
            ObjectSelector::new(Some(self.cluster.object_selector.clone())),
        ));
        let disabled = disabled.iter().map(|s| s.to_string()).collect();
        tokio::spawn(run_controllers(ctx, disabled))
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// A location named `name` in the bucket, under the shared prefix.
    pub async fn location(&self, name: &str, read_only: bool) {
        let mut spec = BackupStorageLocationSpec {
            provider: "local".into(),
            object_storage: ObjectStorageLocation {
                bucket: self.bucket.clone(),
                prefix: Some(PREFIX.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        if let Some(url) = &self.s3 {
            spec.provider = "aws".into();
            spec.config = Some(
                [
                    ("region", "us-east-1"),
                    ("s3Url", url.as_str()),
                    ("s3ForcePathStyle", "true"),
                ]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            );
            spec.credential = Some(k8s_openapi::api::core::v1::SecretKeySelector {
                name: "cloud-credentials".into(),
                key: "cloud".into(),
                optional: None,
            });
        }
        if read_only {
            spec.access_mode = Some(granary_api::velero::BackupStorageLocationAccessMode::ReadOnly);
        }
        self.api::<BackupStorageLocation>()
            .create(
                &PostParams::default(),
                &BackupStorageLocation::new(name, spec),
            )
            .await
            .expect("create location");
        let api = self.api::<BackupStorageLocation>();
        poll_until(&format!("location {name} Available"), || async {
            let status = api.get(name).await.ok().and_then(|l| l.status);
            if let Some(m) = status.as_ref().and_then(|s| s.message.as_ref()) {
                panic!("location {name}: {m}");
            }
            status.is_some_and(|s| s.phase == Some(BackupStorageLocationPhase::Available))
        })
        .await;
    }

    /// A backup of the app namespace to the `default` location.
    pub fn app_backup(&self, name: &str, ttl: Option<&str>) -> Backup {
        let spec = backup_spec().namespaces([&self.app]).location("default");
        match ttl {
            Some(ttl) => spec.ttl(ttl),
            None => spec,
        }
        .named(name)
    }

    /// Takes a real backup of the app namespace through the controllers.
    pub async fn take_backup(&self, name: &str, ttl: Option<&str>) -> Backup {
        let b = self.app_backup(name, ttl);
        self.api::<Backup>()
            .create(&PostParams::default(), &b)
            .await
            .expect("create backup");
        self.wait_backup_phase(name, BackupPhase::Completed).await
    }

    /// Creates a backup like [`Self::take_backup`] and returns the phases its writes
    /// went through, in order, until it was deleted. Each phase change is recorded once;
    /// a Completed backup must also carry its expiration.
    pub async fn phases_until_deleted(
        &self,
        name: &str,
        ttl: Option<&str>,
    ) -> Vec<Option<BackupPhase>> {
        let api = self.api::<Backup>();
        let rv = api
            .list_metadata(&ListParams::default())
            .await
            .expect("list backups")
            .metadata
            .resource_version
            .expect("list resourceVersion");
        let params = WatchParams::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(DEADLINE.as_secs() as u32);
        let mut events = api.watch(&params, &rv).await.expect("watch").boxed();
        let b = self.app_backup(name, ttl);
        api.create(&PostParams::default(), &b)
            .await
            .expect("create backup");
        let mut phases = Vec::new();
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let event = tokio::time::timeout_at(deadline, events.next())
                .await
                .unwrap_or_else(|_| panic!("backup {name} not deleted; phases {phases:?}"))
                .unwrap_or_else(|| panic!("watch ended; phases {phases:?}"))
                .expect("watch event");
            match event {
                WatchEvent::Added(b) | WatchEvent::Modified(b) => {
                    let status = b.status.unwrap_or_default();
                    if status.phase == Some(BackupPhase::Completed) {
                        assert!(status.expiration.is_some(), "{name} has no expiration");
                    }
                    if phases.last() != Some(&status.phase) {
                        phases.push(status.phase);
                    }
                }
                WatchEvent::Deleted(_) => return phases,
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(e) => panic!("watch error: {e:?}"),
            }
        }
    }

    pub async fn wait_backup_phase(&self, name: &str, want: BackupPhase) -> Backup {
        let api = self.api::<Backup>();
        poll_until(&format!("backup {name} {want}"), || async {
            api.get(name)
                .await
                .ok()
                .and_then(|b| b.status)
                .and_then(|s| s.phase)
                == Some(want)
        })
        .await;
        api.get(name).await.expect("backup")
    }

    pub async fn wait_gone<K>(&self, what: &str, name: &str)
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api = self.api::<K>();
        poll_until(&format!("{what} {name} gone"), || async {
            matches!(api.get_opt(name).await, Ok(None))
        })
        .await;
    }

    /// Every key under `<prefix>/<dir>`.
    pub async fn keys(&self, dir: &str) -> Vec<String> {
        granary_providers::list_all(
            self.store.as_ref(),
            &self.bucket,
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

    pub async fn put(&self, key: &str) {
        self.store
            .put(
                &self.bucket,
                &format!("{PREFIX}/{key}"),
                bytes::Bytes::from_static(b"{}"),
            )
            .await
            .expect("put");
    }

    pub async fn request(&self, name: &str, backup: &str) {
        let r = DeleteBackupRequest::new(
            name,
            DeleteBackupRequestSpec {
                backup_name: backup.into(),
            },
        );
        self.api::<DeleteBackupRequest>()
            .create(&PostParams::default(), &r)
            .await
            .expect("create request");
    }

    pub async fn wait_processed(&self, name: &str) -> Vec<String> {
        let api = self.api::<DeleteBackupRequest>();
        poll_until(&format!("request {name} Processed"), || async {
            api.get(name)
                .await
                .ok()
                .and_then(|r| r.status)
                .and_then(|s| s.phase)
                == Some(DeleteBackupRequestPhase::Processed)
        })
        .await;
        api.get(name)
            .await
            .expect("request")
            .status
            .and_then(|s| s.errors)
            .unwrap_or_default()
    }

    /// A Backup CR with a status, as left by someone else (no controller touches it:
    /// the caller has them stopped or the phase is final).
    pub async fn backup_cr(&self, name: &str, location: &str, status: serde_json::Value) {
        // Created with its status in one go (Velero's kinds have no status subresource),
        // so the queue never sees it without a phase.
        let b: Backup = serde_json::from_value(json!({
            "apiVersion": "velero.io/v1",
            "kind": "Backup",
            "metadata": {"name": name},
            "spec": {"storageLocation": location},
            "status": status,
        }))
        .expect("backup");
        self.api::<Backup>()
            .create(&PostParams::default(), &b)
            .await
            .expect("create backup");
    }
}

/// Starts every controller, the restore controller with `actions` (the built-in ones
/// when `None`).
pub fn controllers(
    w: &World,
    settings: VeleroSettings,
    actions: Option<Vec<Box<dyn RestoreItemAction>>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let ctx = || {
        Arc::new(VeleroContext::new(
            w.client.clone(),
            settings.clone(),
            StoreOptions {
                local_root: Some(w.data.path().to_path_buf()),
                ..StoreOptions::default()
            },
            Clock::system(),
            VeleroMetrics::new(&w.metrics),
            granary_runtime::selector::ObjectSelector::new(Some(w.cluster.object_selector.clone())),
        ))
    };
    match actions {
        None => vec![tokio::spawn(run_controllers(ctx(), vec![]))],
        Some(actions) => {
            // One context: the restore controller signs and verifies with the keys the
            // others load.
            let shared = ctx();
            vec![
                tokio::spawn(run_controllers(
                    shared.clone(),
                    vec![CONTROLLER_RESTORE.to_string()],
                )),
                tokio::spawn(restore_controller::run_with_actions(shared, actions)),
            ]
        }
    }
}

pub fn dynamic(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

pub async fn create(api: &Api<DynamicObject>, obj: Value) -> DynamicObject {
    let o: DynamicObject = serde_json::from_value(obj).expect("object");
    api.create(&PostParams::default(), &o)
        .await
        .expect("create")
}

pub async fn restore(w: &World, name: &str, spec: RestoreSpec) {
    w.api::<Restore>()
        .create(&PostParams::default(), &Restore::new(name, spec))
        .await
        .expect("create restore");
}

/// Creates restore `name` as an administrator who says `--allow-unverified` (the
/// annotation): for backups without an integrity record, Velero's own above all.
pub async fn restore_unverified(w: &World, name: &str, spec: RestoreSpec) {
    let mut r = Restore::new(name, spec);
    r.metadata.annotations = Some(
        [(
            granary_api::velero::ALLOW_UNVERIFIED_ANNOTATION.to_owned(),
            "true".to_owned(),
        )]
        .into(),
    );
    w.api::<Restore>()
        .create(&PostParams::default(), &r)
        .await
        .expect("create restore");
}

pub async fn wait_restore(w: &World, name: &str, want: &[RestorePhase]) -> Restore {
    let api = w.api::<Restore>();
    poll_until(&format!("restore {name} in {want:?}"), || async {
        let r = api.get(name).await.ok();
        let phase = r
            .as_ref()
            .and_then(|r| r.status.as_ref())
            .and_then(|s| s.phase);
        if let Some(p) = phase
            && p.is_terminal()
            && !want.contains(&p)
        {
            panic!("restore {name} ended {p}: {:?}", r.and_then(|r| r.status));
        }
        phase.is_some_and(|p| want.contains(&p))
    })
    .await;
    api.get(name).await.expect("restore")
}

pub fn from_backup(backup: &str) -> RestoreSpec {
    RestoreSpec {
        backup_name: Some(backup.into()),
        ..Default::default()
    }
}

/// The restore's results file, decoded.
pub async fn results(w: &World, name: &str) -> Value {
    let key = format!("velero/seed-a/restores/{name}/restore-{name}-results.gz");
    let bytes = granary_providers::get_bytes(w.store.as_ref(), &w.bucket, &key)
        .await
        .expect("results uploaded");
    let json = granary_velero::files::gunzip_limited(&bytes[..], 1 << 20).expect("gzip");
    serde_json::from_slice(&json).expect("json")
}

/// A gzip'd tar of `files` (path, contents), regular files only, as Velero writes.
pub fn tarball(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ));
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o755);
        h.set_entry_type(tar::EntryType::Regular);
        // `set_path` refuses `..`; a hostile archive writes the raw name.
        let raw = path.as_bytes();
        h.as_old_mut().name[..raw.len()].copy_from_slice(raw);
        h.set_cksum();
        b.append(&h, &data[..]).expect("append");
    }
    b.into_inner().expect("tar").finish().expect("gzip")
}

/// A backup written elsewhere (by Velero 1.18's layout), present in the cluster as a
/// Completed Backup of the location.
pub async fn foreign_backup(w: &World, name: &str, tar: Vec<u8>) {
    w.store
        .put(
            &w.bucket,
            &format!("velero/seed-a/backups/{name}/{name}.tar.gz"),
            bytes::Bytes::from(tar),
        )
        .await
        .expect("put tarball");
    let b: Backup = serde_json::from_value(json!({
        "apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {"name": name, "labels": {"velero.io/storage-location": "default"}},
        "spec": {"storageLocation": "default"},
        "status": {"phase": "Completed", "formatVersion": "1.1.0", "version": 1},
    }))
    .expect("backup");
    w.api::<Backup>()
        .create(&PostParams::default(), &b)
        .await
        .expect("backup cr");
}

/// Schedules and the backups they take.
impl World {
    /// Creates Schedule `name` (labelled `team: a`) with `spec`.
    pub async fn schedule(&self, name: &str, spec: serde_json::Value) {
        let s: Schedule = serde_json::from_value(json!({
            "apiVersion": "velero.io/v1", "kind": "Schedule",
            "metadata": {"name": name, "labels": {"team": "a"}},
            "spec": spec,
        }))
        .expect("schedule");
        self.api::<Schedule>()
            .create(&PostParams::default(), &s)
            .await
            .expect("create schedule");
    }

    /// The Backups Schedule `schedule` took.
    pub async fn backups_of(&self, schedule: &str) -> Vec<Backup> {
        self.api::<Backup>()
            .list(&ListParams::default().labels(&format!("velero.io/schedule-name={schedule}")))
            .await
            .expect("list")
            .items
    }

    /// Schedule `name`'s status.
    pub async fn schedule_status(&self, name: &str) -> ScheduleStatus {
        self.api::<Schedule>()
            .get(name)
            .await
            .expect("schedule")
            .status
            .unwrap_or_default()
    }
}
