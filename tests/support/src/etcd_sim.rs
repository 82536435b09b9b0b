//! TEST SIMULATOR — NOT PRODUCTION CODE. Plays the Kubernetes StatefulSet controller for
//! one `etcd-main` StatefulSet in a test seed (the embedded API server runs no
//! controllers): whenever `spec.replicas` differs from what `status` reports, it
//! writes a status in which every desired replica exists and is ready, after an
//! optional delay that stands for pods starting or stopping. `granary migrate` sees
//! etcd-main through this status exactly as it would see a real StatefulSet's.
//!
//! [`EtcdSim::start_druid`] plays etcd-druid instead, for an `etcds.druid.gardener.cloud`
//! `Etcd` named `etcd-main` (with a minimal stand-in of Druid's CRD, holding only what
//! the cut-over reads and writes): it acts on the `gardener.cloud/operation=reconcile`
//! annotation as Druid does, removes it, and reports the replicas in the status.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::json;

/// Which controller the simulator plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    StatefulSet,
    Druid,
}

fn etcd_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("druid.gardener.cloud", "v1alpha1", "Etcd"),
        "etcds",
    )
}

/// A minimal stand-in of etcd-druid's `Etcd` CRD: the fields the cut-over uses.
fn etcd_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "etcds.druid.gardener.cloud"},
        "spec": {
            "group": "druid.gardener.cloud",
            "scope": "Namespaced",
            "names": {"plural": "etcds", "singular": "etcd", "kind": "Etcd", "listKind": "EtcdList"},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "replicas": {"type": "integer"},
                        "backup": {"type": "object", "properties": {
                            "store": {"type": "object", "properties": {
                                "container": {"type": "string"},
                                "prefix": {"type": "string"},
                                "provider": {"type": "string"},
                            }},
                        }},
                    }},
                    "status": {"type": "object", "properties": {
                        "replicas": {"type": "integer"},
                        "readyReplicas": {"type": "integer"},
                        "ready": {"type": "boolean"},
                    }},
                }}},
            }],
        },
    }))
    .expect("the Etcd CRD")
}

/// The simulator of one namespace's `etcd-main`; stops when dropped.
pub struct EtcdSim {
    pub namespace: String,
    pub driver: Driver,
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
        ensure_namespace(&client, namespace).await;
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
            driver: Driver::StatefulSet,
            client,
            task,
            transitions,
        };
        sim.wait_ready(replicas).await;
        sim
    }

    /// Installs the stand-in Druid CRD in the seed (if missing), creates `Etcd`
    /// `etcd-main` with `replicas` in `namespace`, and starts playing etcd-druid.
    pub async fn start_druid(
        client: Client,
        namespace: &str,
        replicas: i32,
        delay: Duration,
    ) -> EtcdSim {
        ensure_namespace(&client, namespace).await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        match crds.create(&PostParams::default(), &etcd_crd()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("create the Etcd CRD: {e}"),
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &etcd_resource());
        let etcd: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "druid.gardener.cloud/v1alpha1",
            "kind": "Etcd",
            "metadata": {"name": "etcd-main", "namespace": namespace},
            "spec": {"replicas": replicas, "backup": {"store": {
                "container": "old", "prefix": "old/etcd-main", "provider": "Local",
            }}},
        }))
        .expect("an Etcd");
        // The CRD is served within a moment of its creation.
        crate::poll_until("the Etcd resource is served", || async {
            match api.create(&PostParams::default(), &etcd).await {
                Ok(_) => true,
                Err(kube::Error::Api(s)) if s.code == 404 => false,
                Err(e) => panic!("create Etcd etcd-main: {e}"),
            }
        })
        .await;
        let transitions = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(simulate_druid(api, delay, transitions.clone()));
        let sim = EtcdSim {
            namespace: namespace.to_string(),
            driver: Driver::Druid,
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

    /// The Druid `Etcd` etcd-main (Druid simulators only).
    pub async fn etcd(&self) -> DynamicObject {
        Api::<DynamicObject>::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &etcd_resource(),
        )
        .get("etcd-main")
        .await
        .expect("get Etcd etcd-main")
    }

    /// `(spec.replicas, status.replicas, status.readyReplicas)`.
    pub async fn state(&self) -> (i32, i32, i32) {
        match self.driver {
            Driver::StatefulSet => {
                let s = self.api().get("etcd-main").await.expect("get etcd-main");
                let spec = s.spec.and_then(|s| s.replicas).unwrap_or(1);
                let status = s.status.unwrap_or_default();
                (spec, status.replicas, status.ready_replicas.unwrap_or(0))
            }
            Driver::Druid => {
                let e = self.etcd().await;
                (
                    int_at(&e.data, "/spec/replicas"),
                    int_at(&e.data, "/status/replicas"),
                    int_at(&e.data, "/status/readyReplicas"),
                )
            }
        }
    }

    /// Waits until `replicas` are desired and ready.
    pub async fn wait_ready(&self, replicas: i32) {
        crate::poll_until(
            &format!("etcd-main at {replicas} ready replicas"),
            || async { self.state().await == (replicas, replicas, replicas) },
        )
        .await;
    }

    /// Stops playing the controller; the objects stay as they are.
    pub fn stop(&self) {
        self.task.abort();
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

fn int_at(v: &serde_json::Value, pointer: &str) -> i32 {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or(0)
}

async fn ensure_namespace(client: &Client, namespace: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces
        .get_opt(namespace)
        .await
        .expect("get namespace")
        .is_none()
    {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(namespace.to_string());
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("create namespace: {e}"),
        }
    }
}

/// Plays etcd-druid: a spec change counts only with the reconcile annotation, which it
/// removes `delay` later (its reconcile); then the status follows `spec.replicas` after
/// `delay`.
async fn simulate_druid(api: Api<DynamicObject>, delay: Duration, transitions: Arc<AtomicU64>) {
    const OPERATION: &str = "gardener.cloud/operation";
    let mut acting_on: Option<i32> = None;
    loop {
        if let Ok(e) = api.get("etcd-main").await {
            let requested = e
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(OPERATION))
                .is_some_and(|v| v == "reconcile");
            if requested {
                acting_on = Some(int_at(&e.data, "/spec/replicas"));
                // Druid removes the annotation when its reconcile is done, with a plain
                // merge patch: a request written meanwhile loses its annotation too.
                tokio::time::sleep(delay).await;
                let patch = json!({"metadata": {"annotations": {OPERATION: null}}});
                let _ = api
                    .patch("etcd-main", &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
            }
            let desired = acting_on.unwrap_or_else(|| int_at(&e.data, "/spec/replicas"));
            let (replicas, ready) = (
                int_at(&e.data, "/status/replicas"),
                int_at(&e.data, "/status/readyReplicas"),
            );
            let reported = e.data.pointer("/status/replicas").is_some();
            if !reported || replicas != desired || ready != desired {
                tokio::time::sleep(delay).await;
                let patch = json!({"status": {
                    "replicas": desired,
                    "readyReplicas": desired,
                    "ready": desired > 0,
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
