//! What the seed keeps in touch with in the garden besides the mirrored objects: the
//! credentials Secrets its buckets use (watched metadata-only, so a rotation heals at
//! once) and its liveness Lease (docs/architecture.md#seed-liveness).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};

use crate::context::Context;
use granary_api::core::GARDEN_NAMESPACE;
use granary_runtime::backoff::WatchBackoff;
use granary_runtime::leader::renew_lease;
use granary_runtime::work_queue::WorkQueue;

/// Garden bucket names by the (namespace, name) of the credentials Secret they use.
pub(crate) type SecretUsers = Arc<Mutex<HashMap<(String, String), HashSet<String>>>>;

/// Watches each garden Secret `secrets` names, by name (metadata only: no secret data is
/// held; a seed may see only its own buckets' credentials), and wakes the buckets that
/// use a changed one.
pub(crate) async fn watch_credentials(
    garden: Client,
    mut secrets: tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
    users: SecretUsers,
    buckets: WorkQueue<String>,
) {
    let mut watched = HashSet::new();
    let mut watches = tokio::task::JoinSet::new();
    while let Some((namespace, name)) = secrets.recv().await {
        if !watched.insert((namespace.clone(), name.clone())) {
            continue;
        }
        let (users, buckets) = (users.clone(), buckets.clone());
        let api: Api<PartialObjectMeta<k8s_openapi::api::core::v1::Secret>> =
            Api::namespaced(garden.clone(), &namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        watches.spawn(async move {
            let stream = watcher::watcher(api, config).backoff(WatchBackoff::default());
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                let secret = match event {
                    Ok(Event::Apply(m) | Event::Delete(m)) => m,
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, %namespace, "watch of credentials failed; retrying");
                        continue;
                    }
                };
                let key = (namespace.clone(), secret.name_any());
                let woken: Vec<String> = users
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&key)
                    .map(|s| s.iter().cloned().collect())
                    .unwrap_or_default();
                for bucket in woken {
                    buckets.trigger(bucket);
                }
            }
        });
    }
    // No more buckets will come: keep watching for those there are.
    while watches.join_next().await.is_some() {}
}

/// Renews the Lease `seed-<name>` in the garden's `garden` namespace every
/// `seedLiveness.renewInterval` (docs/architecture.md#seed-liveness).
pub(crate) async fn liveness(ctx: Arc<Context>) {
    let api: Api<Lease> = Api::namespaced(ctx.garden.clone(), GARDEN_NAMESPACE);
    let every = ctx.config.seed_liveness.renew_interval.0;
    let name = format!("seed-{}", ctx.seed_name);
    let mut labels = BTreeMap::new();
    ctx.selector.label(&mut labels);
    loop {
        match renew_lease(
            &api,
            &name,
            &ctx.seed_name,
            every * 4,
            &labels,
            ctx.clock.now(),
        )
        .await
        {
            Ok(true) => {}
            Ok(false) => tracing::warn!(lease = %name, "liveness lease is held by someone else"),
            Err(e) => tracing::warn!(lease = %name, error = %e, "liveness lease renewal failed"),
        }
        tokio::time::sleep(every).await;
    }
}
