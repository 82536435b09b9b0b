//! The world of the queue-centred controller tests (velero_server): an API server with
//! the seed CRDs, a `velero` namespace and a data directory for the local provider;
//! the scenarios start the controllers with the settings they look at.

use crate::builders::backup_spec;
use crate::{TestCluster, poll_until};
use granary_api::velero::{
    Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationPhase,
    BackupStorageLocationSpec, ObjectStorageLocation,
};
use granary_providers::{ObjectStore, StoreOptions};
use granary_runtime::clock::Clock;
use granary_runtime::metrics::Metrics;
use granary_runtime::selector::ObjectSelector;
use granary_velero_server::context::VeleroContext;
use granary_velero_server::metrics::VeleroMetrics;
use granary_velero_server::server::run_controllers;
use granary_velero_server::settings::VeleroSettings;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use std::sync::Arc;

pub struct World {
    pub cluster: TestCluster,
    pub client: Client,
    pub namespace: String,
    pub data: tempfile::TempDir,
    pub metrics: Metrics,
}

impl World {
    pub async fn start() -> World {
        let cluster = TestCluster::start().await;
        let client = cluster.client();
        cluster
            .install_crds_from_dir(&client, &crate::repo_root().join("deploy/seed/crds"))
            .await;
        let namespace = cluster.namespace("velero").await;
        World {
            cluster,
            client,
            namespace,
            data: tempfile::tempdir().expect("tempdir"),
            metrics: Metrics::new(),
        }
    }

    pub fn settings(&self, concurrent: u32) -> VeleroSettings {
        VeleroSettings {
            namespace: self.namespace.clone(),
            concurrent_backups: concurrent,
            ..VeleroSettings::default()
        }
    }

    /// Starts the controllers but the `backup` controller (these tests look at the
    /// queue: ReadyToStart backups hold their slot); aborting the handle stops them.
    pub fn controllers(&self, settings: VeleroSettings) -> tokio::task::JoinHandle<()> {
        self.controllers_but(settings, &[])
    }

    /// Starts the controllers but `disabled` (Velero's names).
    pub fn controllers_but(
        &self,
        settings: VeleroSettings,
        disabled: &[&str],
    ) -> tokio::task::JoinHandle<()> {
        let ctx = Arc::new(VeleroContext::new(
            self.client.clone(),
            settings,
            self.store_options(),
            Clock::system(),
            VeleroMetrics::new(&self.metrics),
            ObjectSelector::new(Some(self.cluster.object_selector.clone())),
        ));
        tokio::spawn(run_controllers(
            ctx,
            disabled.iter().map(|d| d.to_string()).collect(),
        ))
    }

    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            local_root: Some(self.data.path().to_path_buf()),
            ..StoreOptions::default()
        }
    }

    pub async fn store(&self) -> Arc<dyn ObjectStore> {
        granary_providers::open("local", None, &Default::default(), &self.store_options())
            .await
            .expect("local store")
    }

    pub fn locations(&self) -> Api<BackupStorageLocation> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub fn backups(&self) -> Api<Backup> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub async fn location(&self, name: &str, provider: &str, bucket: &str) {
        let bsl = BackupStorageLocation::new(
            name,
            BackupStorageLocationSpec {
                provider: provider.into(),
                object_storage: ObjectStorageLocation {
                    bucket: bucket.into(),
                    prefix: Some("velero/seed-a".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        );
        self.locations()
            .create(&PostParams::default(), &bsl)
            .await
            .expect("create location");
    }

    pub async fn wait_phase(
        &self,
        name: &str,
        want: BackupStorageLocationPhase,
    ) -> BackupStorageLocation {
        let api = self.locations();
        poll_until(&format!("location {name} {want:?}"), || async {
            api.get(name)
                .await
                .ok()
                .and_then(|l| l.status)
                .is_some_and(|s| s.phase == Some(want) && s.last_validation_time.is_some())
        })
        .await;
        api.get(name).await.expect("location")
    }

    pub async fn backup(&self, name: &str, namespaces: &[&str]) {
        let b = backup_spec()
            .namespaces(namespaces.iter().copied())
            .named(name);
        self.backups()
            .create(&PostParams::default(), &b)
            .await
            .expect("create backup");
    }

    pub async fn set_phase(&self, name: &str, phase: BackupPhase) {
        let patch = json!({"status": {"phase": phase}});
        self.backups()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("set phase");
    }

    /// Waits until every named backup has the wanted phase and queue position.
    pub async fn wait_queue(&self, want: &[(&str, BackupPhase, Option<i64>)]) {
        let api = self.backups();
        let shown = format!("{want:?}");
        poll_until(&format!("queue {shown}"), || async {
            let list = api.list(&Default::default()).await.expect("list").items;
            want.iter().all(|(name, phase, position)| {
                list.iter().any(|b| {
                    b.name_any() == *name
                        && b.status.as_ref().and_then(|s| s.phase) == Some(*phase)
                        && b.status.as_ref().and_then(|s| s.queue_position) == *position
                })
            })
        })
        .await;
    }
}
