//! The `backup-storage-location` controller: validates every location of the Velero
//! namespace every `validationFrequency` (the location's, else the server's
//! `storeValidationFrequency`; 0 validates once per change) — the bucket reachable and
//! its root holding only Velero's six top-level directories — and writes
//! `status.phase` Available/Unavailable with `lastValidationTime` and Velero's message.
//! Velero's kinds have no status subresource, so status is patched on the object.

use super::context::VeleroContext;
use super::context::k8s_time;
use super::watch::each_event;
use futures::TryStreamExt;
use granary_api::velero::{BackupStorageLocation, BackupStorageLocationPhase};
use granary_providers::ListEntry;
use granary_runtime::work_queue::{Next, WorkQueue};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::watcher::Event;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// On a location that cannot be used yet (e.g. a seed's default location before the
/// seed has a bucket): why. Reported as the Unavailable message instead of validating.
pub const ANNOTATION_UNAVAILABLE_REASON: &str = "granary.gardener.cloud/unavailable-reason";

/// The outcome of one validation.
pub type Validation = Result<(), String>;

/// Validates `location`: opens its store and looks at its root.
pub async fn validate(ctx: &VeleroContext, location: &BackupStorageLocation) -> Validation {
    let name = location.name_any();
    let unavailable = |e: String| format!("BackupStorageLocation {name:?} is unavailable: {e}");
    if let Some(reason) = location.annotations().get(ANNOTATION_UNAVAILABLE_REASON) {
        return Err(unavailable(reason.clone()));
    }
    let open = ctx
        .open(location.clone())
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    let layout = &open.access.layout;
    let prefixes: Vec<String> = open
        .store
        .list(layout.bucket(), layout.root(), Some("/"))
        .try_filter_map(|e| async move {
            Ok(match e {
                ListEntry::Prefix(p) => Some(p),
                ListEntry::Object(_) => None,
            })
        })
        .try_collect()
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    layout
        .check_top_level(&prefixes)
        .map_err(|e| unavailable(e.to_string()))
}

/// How often `location` is validated.
pub fn frequency(ctx: &VeleroContext, location: &BackupStorageLocation) -> Duration {
    location
        .spec
        .validation_frequency
        .as_ref()
        .and_then(|d| d.to_std().ok())
        .unwrap_or(ctx.settings.store_validation_frequency.0)
}

/// Runs the controller until dropped.
pub async fn run(ctx: Arc<VeleroContext>) {
    let queue: WorkQueue<String> = WorkQueue::new();
    let feed = {
        let queue = queue.clone();
        each_event(
            ctx.api::<BackupStorageLocation>(),
            "BackupStorageLocations",
            move |event| match event {
                Event::Apply(o) | Event::InitApply(o) | Event::Delete(o) => {
                    queue.trigger(o.name_any())
                }
                _ => {}
            },
        )
    };
    let validated: Arc<Mutex<HashMap<String, Option<i64>>>> = Arc::default();
    let work = queue.run(2, move |name| {
        let ctx = ctx.clone();
        let validated = validated.clone();
        async move { reconcile(&ctx, &validated, name).await }
    });
    tokio::join!(feed, work);
}

async fn reconcile(
    ctx: &VeleroContext,
    validated: &Mutex<HashMap<String, Option<i64>>>,
    name: String,
) -> Next {
    let api = ctx.api::<BackupStorageLocation>();
    let location = match api.get_opt(&name).await {
        Ok(Some(l)) => l,
        Ok(None) => {
            let _ = ctx.metrics.location_status.remove_label_values(&[&name]);
            validated
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&name);
            return Next::Done;
        }
        Err(e) => {
            tracing::warn!(location = %name, error = %e, "reading BackupStorageLocation");
            return Next::After(Duration::from_secs(5));
        }
    };
    let every = frequency(ctx, &location);
    let now = ctx.clock.now();
    let generation = location.metadata.generation;
    let last = location
        .status
        .as_ref()
        .and_then(|s| s.last_validation_time);
    let seen = validated
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&name)
        .copied();
    let changed = seen != Some(generation);
    let due = match last {
        None => true,
        Some(_) if changed => true,
        Some(_) if every.is_zero() => false,
        Some(t) => (now - t).to_std().unwrap_or_default() >= every,
    };
    if !due {
        let wait = match last {
            Some(t) if !every.is_zero() => every
                .saturating_sub((now - t).to_std().unwrap_or_default())
                .max(Duration::from_millis(100)),
            _ => return Next::Done,
        };
        return Next::After(wait);
    }
    let result = validate(ctx, &location).await;
    let (phase, message) = match &result {
        Ok(()) => (BackupStorageLocationPhase::Available, None),
        Err(m) => (BackupStorageLocationPhase::Unavailable, Some(m.clone())),
    };
    let before = location.status.as_ref().and_then(|s| s.phase);
    let patch = json!({"status": {
        "phase": phase,
        "lastValidationTime": k8s_time(now),
        "message": message,
    }});
    if let Err(e) = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::warn!(location = %name, error = %e, "writing BackupStorageLocation status");
        return Next::After(Duration::from_secs(5));
    }
    validated
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(name.clone(), generation);
    ctx.metrics
        .location_status
        .with_label_values(&[&name])
        .set(i64::from(result.is_ok()));
    if let Err(m) = &result
        && before != Some(BackupStorageLocationPhase::Unavailable)
    {
        tracing::warn!(location = %name, message = %m, "BackupStorageLocation unavailable");
        ctx.event(&location, EventType::Warning, "Unavailable", m.clone())
            .await;
    }
    if every.is_zero() {
        Next::Done
    } else {
        Next::After(every)
    }
}
