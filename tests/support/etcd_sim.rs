//! TEST SIMULATOR — NOT PRODUCTION CODE. Plays the Kubernetes StatefulSet controller for
//! one `etcd-main` StatefulSet in a test seed (the embedded API server runs no
//! controllers): whenever `spec.replicas` differs from what `status` reports, it
//! writes a status in which every desired replica exists and is ready, after an
//! optional delay that stands for pods starting or stopping. `granary migrate` sees
//! etcd-main through this status exactly as it would see a real StatefulSet's.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// The simulator of one namespace's `etcd-main`; stops when dropped.
pub struct EtcdSim {
    pub namespace: String,
    client: Client,
    task: tokio::task::JoinHandle<()>,
    /// How many times the simulated controller changed the status.
    transitions: Arc<AtomicU64>,
}

impl Drop for EtcdSim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EtcdSim {
    /// Creates namespace `namespace` (if missing) and StatefulSet `etcd-main` with
    /// `replicas`, all ready, and starts simulating. `delay` is how long each scale
    /// takes to show in the status.
    pub async fn start(client: Client, namespace: &str, replicas: i32, delay: Duration) -> EtcdSim {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        if namespaces
            .get_opt(namespace)
            .await
            .expect("get namespace")
            .is_none()
        {
            let mut ns = Namespace::default();
            ns.metadata.name = Some(namespace.to_string());
            namespaces
                .create(&PostParams::default(), &ns)
                .await
                .expect("create namespace");
        }
        let sts: StatefulSet = serde_json::from_value(json!({
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "etcd-main", "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "serviceName": "etcd-main-client",
                "selector": {"matchLabels": {"app": "etcd-main"}},
                "template": {
                    "metadata": {"labels": {"app": "etcd-main"}},
                    "spec": {"containers": [{"name": "etcd", "image": "etcd:test"}]},
                },
            },
        }))
        .expect("a StatefulSet");
        let api: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
        api.create(&PostParams::default(), &sts)
            .await
            .expect("create etcd-main StatefulSet");
        let transitions = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(simulate(api, delay, transitions.clone()));
        let sim = EtcdSim {
            namespace: namespace.to_string(),
            client,
            task,
            transitions,
        };
        sim.wait_ready(replicas).await;
        sim
    }

    fn api(&self) -> Api<StatefulSet> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// `(spec.replicas, status.replicas, status.readyReplicas)`.
    pub async fn state(&self) -> (i32, i32, i32) {
        let s = self.api().get("etcd-main").await.expect("get etcd-main");
        let spec = s.spec.and_then(|s| s.replicas).unwrap_or(1);
        let status = s.status.unwrap_or_default();
        (spec, status.replicas, status.ready_replicas.unwrap_or(0))
    }

    /// Waits until `replicas` are desired and ready.
    pub async fn wait_ready(&self, replicas: i32) {
        crate::support::poll_until(
            &format!("etcd-main at {replicas} ready replicas"),
            || async { self.state().await == (replicas, replicas, replicas) },
        )
        .await;
    }

    /// How many status changes the simulated controller made (each scale is one).
    pub fn transitions(&self) -> u64 {
        self.transitions.load(Ordering::Relaxed)
    }
}

async fn simulate(api: Api<StatefulSet>, delay: Duration, transitions: Arc<AtomicU64>) {
    loop {
        if let Ok(s) = api.get("etcd-main").await {
            let desired = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let status = s.status.clone().unwrap_or_default();
            if status.replicas != desired || status.ready_replicas.unwrap_or(0) != desired {
                tokio::time::sleep(delay).await;
                let patch = json!({"status": {
                    "replicas": desired,
                    "readyReplicas": desired,
                    "availableReplicas": desired,
                    "currentReplicas": desired,
                    "updatedReplicas": desired,
                    "observedGeneration": s.metadata.generation,
                }});
                if api
                    .patch_status("etcd-main", &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .is_ok()
                {
                    transitions.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
