//! DEV ONLY — stands in for the shoots' control planes, which `granary dev` does not run.
//! For every garden Shoot it keeps, in the API server of the shoot's seed, the technical
//! namespace (`shoot--<project>--<name>`) with a stored `etcd-main` StatefulSet, and
//! plays the StatefulSet controller for those (the embedded API server runs none):
//! `status` follows `spec.replicas`, every replica ready. So the seed writes each shoot's
//! `etcd-backup` secret as in a real landscape, and `granary migrate` can scale etcd-main
//! down and up during a cut-over. A deleted shoot's namespace goes with it.

use std::collections::HashMap;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use granary_api::core::Shoot;
use granary_runtime::backoff::WatchBackoff;

/// The etcd StatefulSet's name, and the replicas a new one gets.
const ETCD_MAIN: &str = "etcd-main";
const REPLICAS: i32 = 1;

/// The stored shape of a shoot's etcd-main (no pods run).
fn etcd_main(namespace: &str) -> Result<StatefulSet, serde_json::Error> {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": ETCD_MAIN, "namespace": namespace,
                     "labels": {"app": "etcd-statefulset", "role": "main"}},
        "spec": {
            "replicas": REPLICAS,
            "serviceName": "etcd-main-client",
            "selector": {"matchLabels": {"app": "etcd-statefulset", "role": "main"}},
            "template": {
                "metadata": {"labels": {"app": "etcd-statefulset", "role": "main"}},
                "spec": {"containers": [{"name": "etcd", "image": "etcd"}]},
            },
        },
    }))
}

/// A create's result, with "exists already" as success.
fn created<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

async fn ensure(seed: &Client, namespace: &str) -> Result<(), kube::Error> {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(namespace.to_string());
    created(
        Api::<Namespace>::all(seed.clone())
            .create(&PostParams::default(), &ns)
            .await,
    )?;
    let sts = etcd_main(namespace).map_err(kube::Error::SerdeError)?;
    created(
        Api::<StatefulSet>::namespaced(seed.clone(), namespace)
            .create(&PostParams::default(), &sts)
            .await,
    )
}

/// Keeps the control planes of the garden's shoots in their seeds until `stop`.
pub async fn run(garden: Client, seeds: HashMap<String, Client>, stop: CancellationToken) {
    let shoots = async {
        let stream = watcher(Api::<Shoot>::all(garden), watcher::Config::default())
            .backoff(WatchBackoff::default())
            .touched_objects();
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            let Ok(shoot) = event else { continue };
            let Some(seed) = shoot.spec.seed_name.as_deref().and_then(|s| seeds.get(s)) else {
                continue;
            };
            let namespace = shoot.technical_id();
            let result = if shoot.metadata.deletion_timestamp.is_some() {
                Api::<Namespace>::all(seed.clone())
                    .delete(&namespace, &DeleteParams::default())
                    .await
                    .map(|_| ())
                    .or_else(|e| match e {
                        kube::Error::Api(s) if s.code == 404 => Ok(()),
                        e => Err(e),
                    })
            } else {
                ensure(seed, &namespace).await
            };
            if let Err(e) = result {
                tracing::debug!(shoot = %shoot.name_any(), error = %e, "dev control plane");
            }
        }
    };
    let statefulsets = futures::future::join_all(seeds.values().cloned().map(follow_replicas));
    tokio::select! {
        _ = shoots => {}
        _ = statefulsets => {}
        _ = stop.cancelled() => {}
    }
}

/// The StatefulSet controller's part: every etcd-main's status shows its desired
/// replicas, all ready.
async fn follow_replicas(seed: Client) {
    let config = watcher::Config::default().fields(&format!("metadata.name={ETCD_MAIN}"));
    let stream = watcher(Api::<StatefulSet>::all(seed.clone()), config)
        .backoff(WatchBackoff::default())
        .applied_objects();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        let Ok(sts) = event else { continue };
        let desired = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let status = sts.status.clone().unwrap_or_default();
        if status.replicas == desired && status.ready_replicas.unwrap_or(0) == desired {
            continue;
        }
        let Some(namespace) = sts.namespace() else {
            continue;
        };
        let patch = json!({"status": {
            "replicas": desired,
            "readyReplicas": desired,
            "availableReplicas": desired,
            "currentReplicas": desired,
            "updatedReplicas": desired,
            "observedGeneration": sts.metadata.generation,
        }});
        if let Err(e) = Api::<StatefulSet>::namespaced(seed.clone(), &namespace)
            .patch_status(ETCD_MAIN, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::debug!(%namespace, error = %e, "dev etcd-main status");
        }
    }
}
