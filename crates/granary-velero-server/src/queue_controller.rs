//! The `backup-queue` controller (Velero 1.18's concurrent backup queue): applies the
//! pure decision of [`super::queue::plan`] to the Backups of the Velero namespace. New
//! backups become `Queued` with a `queuePosition`; a runnable one becomes `ReadyToStart`
//! (the backup controller takes it from there); the rest are renumbered 1..n, with what
//! each waits for in the annotation [`ANNOTATION_WAITING_FOR`]. It runs on every change
//! of a Backup and every `queuedBackupRecheckFrequency`. At start-up, backups left
//! `InProgress` by a previous process are marked `Failed`, as Velero's server does.

use super::context::VeleroContext;
use super::namespaces::{NamespaceScope, resolve};
use super::queue::{QueueDecision, QueueItem, QueuePhase, plan};
use super::watch::each_event;
use granary_api::velero::{Backup, BackupPhase, is_synced};
use granary_runtime::passes::run_passes;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::watcher::Event;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Notify;

/// On a Queued backup: why it has not started (Granary's; `granary backup describe`
/// shows it). Removed when it starts.
pub const ANNOTATION_WAITING_FOR: &str = "backup.granary.gardener.cloud/waiting-for";

/// Velero's `failureReason` for a backup found InProgress when the server starts.
pub fn in_progress_at_start_reason() -> String {
    "found a backup with status \"InProgress\" during the server starting, mark it as \"Failed\""
        .to_string()
}

/// Runs the controller until dropped.
pub async fn run(ctx: Arc<VeleroContext>) {
    fail_in_progress(&ctx).await;
    let wake = Arc::new(Notify::new());
    let feed = {
        let wake = wake.clone();
        each_event(ctx.api::<Backup>(), "Backups", move |event| match event {
            Event::InitDone | Event::Apply(_) | Event::Delete(_) => wake.notify_one(),
            _ => {}
        })
    };
    let work = async {
        let every = ctx.settings.queued_backup_recheck_frequency.0;
        run_passes("backup queue pass failed", Some(&wake), every, || {
            pass(&ctx)
        })
        .await
    };
    tokio::join!(feed, work);
}

/// Marks every InProgress backup Failed (a previous process died while running it).
async fn fail_in_progress(ctx: &VeleroContext) {
    let api = ctx.api::<Backup>();
    let backups = match api.list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) => {
            tracing::warn!(error = %e, "listing Backups at start-up");
            return;
        }
    };
    for b in backups {
        if phase(&b) != Some(BackupPhase::InProgress) {
            continue;
        }
        let patch = json!({"status": {
            "phase": BackupPhase::Failed,
            "failureReason": in_progress_at_start_reason(),
            "completionTimestamp": super::context::k8s_time(ctx.clock.now()),
        }});
        if let Err(e) = api
            .patch(
                &b.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            tracing::warn!(backup = %b.name_any(), error = %e, "marking an interrupted backup Failed");
        }
    }
}

fn phase(b: &Backup) -> Option<BackupPhase> {
    b.status.as_ref().and_then(|s| s.phase)
}

/// The queue's view of `b`, or `None` when the queue does not care about it: a finished
/// backup, or one backup sync imported (a record of a bucket, never work, whatever phase
/// it claims; sync imports none unfinished, and this holds should one appear anyway).
fn queue_phase(b: &Backup) -> Option<QueuePhase> {
    if is_synced(b) {
        return None;
    }
    match phase(b) {
        None | Some(BackupPhase::New) => Some(QueuePhase::New),
        Some(BackupPhase::Queued) => Some(QueuePhase::Queued(
            b.status
                .as_ref()
                .and_then(|s| s.queue_position)
                .and_then(|p| u32::try_from(p).ok())
                .unwrap_or(u32::MAX),
        )),
        Some(BackupPhase::ReadyToStart | BackupPhase::InProgress) => Some(QueuePhase::Running),
        _ => None,
    }
}

/// One pass: read every backup, decide, write what changed (public for the benchmarks).
pub async fn pass(ctx: &VeleroContext) -> Result<(), kube::Error> {
    let api = ctx.api::<Backup>();
    let backups = api.list(&ListParams::default()).await?.items;
    // Velero's `velero_backup_total`: every Backup of the namespace, whatever its phase.
    ctx.metrics
        .backup_total
        .set(i64::try_from(backups.len()).unwrap_or(i64::MAX));
    let needs_live = backups.iter().any(|b| {
        b.spec
            .included_namespaces
            .iter()
            .flatten()
            .any(|n| n.contains(['*', '?']) && n != "*")
    });
    let live: Vec<String> = if needs_live {
        Api::<Namespace>::all(ctx.client.clone())
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .map(|n| n.name_any())
            .collect()
    } else {
        Vec::new()
    };
    let items: Vec<QueueItem> = backups
        .iter()
        .filter(|b| b.metadata.deletion_timestamp.is_none())
        .filter_map(|b| {
            Some(QueueItem {
                name: b.name_any(),
                created: b
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| granary_runtime::clock::from_k8s(t.0))
                    .unwrap_or_default(),
                phase: queue_phase(b)?,
                scope: scope_of(b, &live),
            })
        })
        .collect();
    let decisions = plan(&items, ctx.settings.concurrent_backups as usize);
    let by_name: HashMap<String, &Backup> = backups.iter().map(|b| (b.name_any(), b)).collect();
    let mut queued = 0i64;
    for (name, decision) in decisions {
        let Some(b) = by_name.get(&name) else {
            continue;
        };
        let current_position = b.status.as_ref().and_then(|s| s.queue_position);
        let current_reason = b.annotations().get(ANNOTATION_WAITING_FOR);
        let patch = match &decision {
            QueueDecision::Start => {
                tracing::info!(backup = %name, "backup dequeued: ReadyToStart");
                json!({
                    "metadata": {"annotations": {ANNOTATION_WAITING_FOR: Value::Null}},
                    "status": {"phase": BackupPhase::ReadyToStart, "queuePosition": Value::Null},
                })
            }
            QueueDecision::Wait { position, reason } => {
                queued += 1;
                let reason = reason.to_string();
                if phase(b) == Some(BackupPhase::Queued)
                    && current_position == Some(i64::from(*position))
                    && current_reason == Some(&reason)
                {
                    continue;
                }
                json!({
                    "metadata": {"annotations": {ANNOTATION_WAITING_FOR: reason}},
                    "status": {"phase": BackupPhase::Queued, "queuePosition": position},
                })
            }
        };
        if let Err(e) = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(backup = %name, error = %e, "writing the queue's decision");
        }
    }
    ctx.metrics.queue_length.set(queued);
    Ok(())
}

/// The namespaces backup `b` can include.
pub fn scope_of(b: &Backup, live: &[String]) -> NamespaceScope {
    resolve(
        b.spec.included_namespaces.as_deref().unwrap_or_default(),
        b.spec.excluded_namespaces.as_deref().unwrap_or_default(),
        live,
    )
}
