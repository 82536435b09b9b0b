//! The `server-status-request` controller: a new ServerStatusRequest (what `velero
//! version` and `velero plugin get` create) gets `phase: Processed`, its
//! `processedTimestamp`, the server's version and its plugins ([`plugins`]: the built-in
//! backup and restore item actions and the object stores, named and kinded as Velero's
//! plugin list names them), as Velero's controller does; a processed request is deleted
//! once [`TTL`] (Velero's minute) has passed since it was processed.

use super::context::{VeleroContext, k8s_time};
use chrono::{DateTime, Utc};
use granary_api::velero::{
    PluginInfo, ServerStatusRequest, ServerStatusRequestPhase, ServerStatusRequestStatus,
};
use granary_runtime::work_queue::{Next, WorkQueue};
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// How long a processed request stays (Velero's `ttl`).
pub const TTL: Duration = Duration::from_secs(60);
/// How often a request is looked at again without an event (Velero's resync period).
const RESYNC: Duration = Duration::from_secs(300);
/// How soon a failed write is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// The version `serverVersion` reports: Granary's.
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The object stores a location's `spec.provider` may name, as Velero names its
/// object-store plugins (and Granary's own `local`).
const OBJECT_STORES: [&str; 4] = [
    "velero.io/aws",
    "velero.io/azure",
    "velero.io/gcp",
    "granary.gardener.cloud/local",
];

/// The server's plugins as `velero plugin get` lists them: every built-in backup item
/// action (`BackupItemAction`), restore item action (`RestoreItemAction`) and object
/// store (`ObjectStore`), sorted by kind, then name, as Velero sorts them.
pub fn plugins(restore_role_ceiling: &str) -> Vec<PluginInfo> {
    let info = |kind: &str, name: &str| PluginInfo {
        name: name.to_string(),
        kind: kind.to_string(),
    };
    let mut out: Vec<PluginInfo> = Vec::new();
    for a in super::backup::actions::builtin() {
        out.push(info("BackupItemAction", a.name()));
    }
    for a in super::restore::builtin_actions::builtin_with(restore_role_ceiling) {
        out.push(info("RestoreItemAction", a.name()));
    }
    for s in OBJECT_STORES {
        out.push(info("ObjectStore", s));
    }
    out.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    out.dedup();
    out
}

/// What to do about one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// New: answer it.
    Process,
    /// Processed, its time is up: delete it.
    Delete,
    /// Processed, still fresh: look again then.
    After(Duration),
}

/// The pure rule: a new request is processed; a processed one is deleted `ttl` after
/// its `processedTimestamp` (at once without one), looked at again when that comes.
pub fn step(
    phase: Option<ServerStatusRequestPhase>,
    processed: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    ttl: Duration,
) -> Step {
    match phase {
        None | Some(ServerStatusRequestPhase::New) => Step::Process,
        Some(ServerStatusRequestPhase::Processed) => {
            let Some(at) = processed else {
                return Step::Delete;
            };
            let expires = at + chrono::TimeDelta::from_std(ttl).unwrap_or(chrono::TimeDelta::MAX);
            match (expires - now).to_std() {
                Ok(left) if !left.is_zero() => Step::After(left.min(RESYNC)),
                _ => Step::Delete,
            }
        }
    }
}

/// Runs the controller until dropped, deleting requests [`TTL`] after processing.
pub async fn run(ctx: Arc<VeleroContext>) {
    run_with_ttl(ctx, TTL).await
}

/// [`run`] with another time-to-live (tests).
pub async fn run_with_ttl(ctx: Arc<VeleroContext>, ttl: Duration) {
    let queue: WorkQueue<String> = WorkQueue::new();
    let feed = {
        let queue = queue.clone();
        // Metadata only: a request made without `spec` (Velero's CLI sends `spec: {}`,
        // not every client does) is still answered, and never stops the watch.
        super::watch::each_event(
            ctx.api::<kube::core::PartialObjectMeta<ServerStatusRequest>>(),
            "ServerStatusRequests",
            move |event| match event {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                    queue.trigger(o.name_any())
                }
                _ => {}
            },
        )
    };
    let plugins = Arc::new(plugins(&ctx.settings.non_admin.restore_role_ceiling));
    let work = queue.run(2, move |name| {
        let (ctx, plugins) = (ctx.clone(), plugins.clone());
        async move {
            let done: futures::future::BoxFuture<'_, Result<Next, kube::Error>> =
                Box::pin(reconcile(&ctx, &plugins, ttl, &name));
            done.await.unwrap_or_else(|e| {
                tracing::warn!(request = %name, error = %e, "server-status-request");
                Next::After(RETRY)
            })
        }
    });
    tokio::join!(feed, work);
}

async fn reconcile(
    ctx: &VeleroContext,
    plugins: &[PluginInfo],
    ttl: Duration,
    name: &str,
) -> Result<Next, kube::Error> {
    // Read as JSON: the request's `spec` may be missing.
    let resource = kube::api::ApiResource::erase::<ServerStatusRequest>(&());
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(ctx.client.clone(), &ctx.settings.namespace, &resource);
    let Some(request) = api.get_opt(name).await? else {
        return Ok(Next::Done);
    };
    // A status that is not Velero's shape counts as none: the request is answered anew.
    let status: ServerStatusRequestStatus = request
        .data
        .get("status")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default();
    let now = ctx.clock.now();
    match step(status.phase, status.processed_timestamp, now, ttl) {
        Step::Process => {
            let body = json!({"status": {
                "phase": ServerStatusRequestPhase::Processed,
                "processedTimestamp": k8s_time(now),
                "serverVersion": SERVER_VERSION,
                "plugins": plugins,
            }});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
                .await?;
            tracing::info!(request = %name, "server status request processed");
            Ok(Next::After(ttl.min(RESYNC)))
        }
        Step::Delete => {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
            Ok(Next::Done)
        }
        Step::After(left) => Ok(Next::After(left)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0)
            .single()
            .expect("valid")
            + chrono::TimeDelta::seconds(s)
    }

    #[test]
    fn new_requests_are_processed_and_processed_ones_go_after_the_ttl() {
        use ServerStatusRequestPhase::{New, Processed};
        assert_eq!(step(None, None, t(0), TTL), Step::Process);
        assert_eq!(step(Some(New), None, t(0), TTL), Step::Process);
        assert_eq!(
            step(Some(Processed), Some(t(0)), t(20), TTL),
            Step::After(Duration::from_secs(40))
        );
        assert_eq!(step(Some(Processed), Some(t(0)), t(60), TTL), Step::Delete);
        assert_eq!(
            step(Some(Processed), Some(t(0)), t(3600), TTL),
            Step::Delete
        );
        assert_eq!(step(Some(Processed), None, t(0), TTL), Step::Delete);
        // A long TTL is looked at again at least every resync period.
        assert_eq!(
            step(Some(Processed), Some(t(0)), t(0), Duration::from_secs(3600)),
            Step::After(RESYNC)
        );
    }

    #[test]
    fn plugins_are_the_built_in_actions_and_stores() {
        let p = plugins("admin");
        let has = |kind: &str, name: &str| p.iter().any(|i| i.kind == kind && i.name == name);
        assert!(has("BackupItemAction", "velero.io/pod"));
        assert!(has("BackupItemAction", "velero.io/pv"));
        assert!(has("RestoreItemAction", "velero.io/pod"));
        assert!(has("RestoreItemAction", "velero.io/service-account"));
        assert!(has("ObjectStore", "velero.io/aws"));
        assert!(has("ObjectStore", "granary.gardener.cloud/local"));
        let mut sorted = p.clone();
        sorted.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
        assert_eq!(p, sorted);
    }
}
