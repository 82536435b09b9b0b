//! The `backup` controller: takes a backup the queue made `ReadyToStart`, prepares it as
//! Velero does ([`super::backup_prepare`]: location, TTL, expiration, label, validation
//! with Velero's messages → `FailedValidation`), marks it `InProgress`, runs it
//! ([`super::backup::run`]) with `status.progress` kept current, and ends it through
//! `Finalizing` in `Completed`, `PartiallyFailed` or `Failed`. Up to
//! `concurrentBackups` backups run at once (the queue never makes more ready). A
//! process that dies mid-backup leaves it InProgress; the next start marks it Failed
//! (the queue controller, as Velero's server does).

use super::backup::{self, BackupRequest, BackupResultPhase};
use super::backup_prepare::{ServerFacts, prepare};
use super::context::{VeleroContext, k8s_time};
use super::watch::each_event;
use granary_api::velero::{
    Backup, BackupPhase, BackupProgress, BackupStorageLocation, INTEGRITY_ANNOTATION,
    INTEGRITY_CHECKED_AT_ANNOTATION, is_synced,
};
use granary_runtime::work_queue::{Next, WorkQueue};
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::watcher::Event;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// `velero.io/schedule-name`: the metrics' `schedule` label.
const LABEL_SCHEDULE_NAME: &str = "velero.io/schedule-name";
/// The `formatVersion` a Granary backup carries (Velero's 1.1.0 tarball + manifest).
const FORMAT_VERSION: &str = granary_velero::FORMAT_VERSION_WITH_MANIFEST;

/// Runs the controller until dropped.
pub async fn run(ctx: Arc<VeleroContext>) {
    let queue: WorkQueue<String> = WorkQueue::new();
    let feed = {
        let queue = queue.clone();
        each_event(ctx.api::<Backup>(), "Backups", move |event| match event {
            Event::Apply(b) | Event::InitApply(b)
                if phase(&b) == Some(BackupPhase::ReadyToStart) =>
            {
                queue.trigger(b.name_any())
            }
            _ => {}
        })
    };
    let workers = ctx.settings.concurrent_backups.max(1) as usize;
    let work = queue.run(workers, move |name| {
        let ctx = ctx.clone();
        async move { reconcile(&ctx, name).await }
    });
    tokio::join!(feed, work);
}

fn phase(b: &Backup) -> Option<BackupPhase> {
    b.status.as_ref().and_then(|s| s.phase)
}

fn schedule(b: &Backup) -> String {
    b.labels()
        .get(LABEL_SCHEDULE_NAME)
        .cloned()
        .unwrap_or_default()
}

async fn patch(
    ctx: &VeleroContext,
    name: &str,
    patch: serde_json::Value,
) -> Result<(), kube::Error> {
    ctx.api::<Backup>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

async fn reconcile(ctx: &VeleroContext, name: String) -> Next {
    // A backup is signed when it ends: without a key yet (a seed whose garden has not
    // made the landscape's), it waits rather than fail.
    if ctx.keys.current().is_empty() {
        tracing::info!(backup = %name, "waiting for the integrity signing keys");
        return Next::After(Duration::from_secs(2));
    }
    // Boxed: the Send check happens here, once, with concrete lifetimes.
    let processed: futures::future::BoxFuture<'_, Result<(), kube::Error>> =
        Box::pin(process(ctx, &name));
    match processed.await {
        Ok(()) => Next::Done,
        Err(e) => {
            tracing::warn!(backup = %name, error = %e, "backup controller");
            Next::After(Duration::from_secs(5))
        }
    }
}

async fn process(ctx: &VeleroContext, name: &str) -> Result<(), kube::Error> {
    let Some(b) = ctx.api::<Backup>().get_opt(name).await? else {
        return Ok(());
    };
    if phase(&b) != Some(BackupPhase::ReadyToStart) || b.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    // Only Backups made through the API run; one imported from a bucket is a record.
    if is_synced(&b) {
        tracing::warn!(backup = %name, "a backup imported by backup sync is never run");
        return Ok(());
    }
    let sched = schedule(&b);
    let locations = ctx
        .api::<BackupStorageLocation>()
        .list(&ListParams::default())
        .await?
        .items;
    // The backed-up cluster's version, for Velero's source-cluster annotations.
    let version = ctx.client.apiserver_version().await?;
    let facts = ServerFacts {
        default_ttl: ctx.settings.default_backup_ttl.0,
        default_location: ctx.settings.default_backup_storage_location.clone(),
        resource_timeout: ctx.settings.resource_timeout.0,
        git_version: version.git_version,
        major: version.major,
        minor: version.minor,
    };
    let now = ctx.clock.now();
    let mut prepared = prepare(&b, &locations, &facts, now);
    prepared
        .validation_errors
        .extend(backup::validate(&b).await);
    // The defaulted spec, labels and annotations go back into the Backup, as Velero's
    // backup controller writes them.
    let base = json!({
        "metadata": {"labels": prepared.labels, "annotations": prepared.annotations},
        "spec": prepared.spec,
    });
    if !prepared.validation_errors.is_empty() {
        let mut p = base;
        p["status"] = json!({
            "phase": BackupPhase::FailedValidation,
            "validationErrors": prepared.validation_errors,
            "version": 1,
            "formatVersion": FORMAT_VERSION,
            "expiration": k8s_time(prepared.expiration),
        });
        patch(ctx, name, p).await?;
        ctx.metrics
            .backup_validation_failure
            .with_label_values(&[&sched])
            .inc();
        ctx.event(
            &b,
            EventType::Warning,
            "FailedValidation",
            prepared.validation_errors.join("; "),
        )
        .await;
        return Ok(());
    }
    let mut p = base;
    p["status"] = json!({
        "phase": BackupPhase::InProgress,
        "version": 1,
        "formatVersion": FORMAT_VERSION,
        "expiration": k8s_time(prepared.expiration),
        "startTimestamp": k8s_time(now),
    });
    patch(ctx, name, p).await?;
    ctx.metrics
        .backup_attempt
        .with_label_values(&[&sched])
        .inc();
    tracing::info!(backup = %name, location = ?prepared.spec.storage_location, "backup started");

    // The backup as it now stands, for the runner (and velero-backup.json).
    let mut running = b.clone();
    running.spec = prepared.spec.clone();
    running.metadata.labels = Some(prepared.labels.clone());
    running.metadata.annotations = Some(prepared.annotations.clone());
    let status = running.status.get_or_insert_with(Default::default);
    status.phase = Some(BackupPhase::InProgress);
    status.version = Some(1);
    status.format_version = Some(FORMAT_VERSION.to_string());
    status.expiration = Some(prepared.expiration);
    status.start_timestamp = Some(now);

    let Some(location) = prepared.location else {
        return fail(ctx, &b, &sched, "the storage location vanished".into()).await;
    };
    let open = match ctx.open(location).await {
        Ok(o) => o,
        Err(e) => {
            return fail(
                ctx,
                &b,
                &sched,
                format!("error opening the storage location: {e}"),
            )
            .await;
        }
    };

    // Progress: the runner reports synchronously; a task writes the latest value.
    let (tx, rx) = tokio::sync::watch::channel(BackupProgress::default());
    let progress_writer = super::context::spawn_progress_writer(
        ctx.api::<Backup>(),
        name.to_string(),
        rx,
        std::time::Duration::ZERO,
    );
    let result = {
        let client = ctx.client.clone();
        let store = open.store.clone();
        let layout = open.access.layout.clone();
        let page_size = ctx.settings.client_page_size;
        let workers = ctx.settings.item_block_worker_count.max(1) as usize;
        let keyring = ctx.keys.current();
        let tenant = crate::integrity::tenant_of_backup(&running);
        // The runner's future borrows across its worker pool in ways that are not Send
        // for every lifetime, so it runs on a thread of its own with a runtime of its own
        // (one per running backup, at most concurrentBackups).
        super::thread::on_own_thread(format!("backup-{name}"), move |runtime| {
            let report = move |p: BackupProgress| {
                let _ = tx.send(p);
            };
            runtime.block_on(backup::run(BackupRequest {
                client,
                backup: &running,
                store: store.as_ref(),
                layout: &layout,
                page_size,
                workers,
                now,
                progress: &report,
                keyring: &keyring,
                tenant: tenant.as_deref(),
            }))
        })
        .await
    };
    let result = match result {
        Ok(r) => r,
        Err(e) => return fail(ctx, &b, &sched, e).await,
    };
    let _ = progress_writer.await;
    let outcome = match result {
        Ok(o) => o,
        Err(e) => return fail(ctx, &b, &sched, e.to_string()).await,
    };
    if outcome.phase != BackupResultPhase::Failed {
        patch(
            ctx,
            name,
            json!({"status": {"phase": BackupPhase::Finalizing}}),
        )
        .await?;
    }
    let final_phase = outcome.phase.as_phase();
    // What this server just wrote and signed is verified by construction; the scrubber
    // checks it again later.
    let mut final_patch = json!({"status": {
            "phase": final_phase,
            "formatVersion": outcome.format_version,
            "completionTimestamp": k8s_time(outcome.completion_timestamp),
            "errors": outcome.errors,
            "warnings": outcome.warnings,
            "failureReason": outcome.failure_reason,
            "progress": {"totalItems": outcome.total_items, "itemsBackedUp": outcome.items_backed_up},
    }});
    if outcome.phase != BackupResultPhase::Failed {
        final_patch["metadata"] = json!({"annotations": {
            INTEGRITY_ANNOTATION: "verified",
            INTEGRITY_CHECKED_AT_ANNOTATION: k8s_time(outcome.completion_timestamp),
        }});
    }
    patch(ctx, name, final_patch).await?;
    let m = &ctx.metrics;
    match outcome.phase {
        BackupResultPhase::Completed => m.backup_success.with_label_values(&[&sched]).inc(),
        BackupResultPhase::PartiallyFailed => {
            m.backup_partial_failure.with_label_values(&[&sched]).inc()
        }
        BackupResultPhase::Failed => m.backup_failure.with_label_values(&[&sched]).inc(),
    }
    m.backup_items
        .with_label_values(&[&sched])
        .set(i64::try_from(outcome.items_backed_up).unwrap_or(i64::MAX));
    m.backup_items_errors
        .with_label_values(&[&sched])
        .set(i64::from(outcome.errors));
    if outcome.warnings > 0 {
        m.backup_warning.with_label_values(&[&sched]).inc();
    }
    m.backup_tarball_size
        .with_label_values(&[&sched])
        .set(i64::try_from(outcome.tarball_bytes).unwrap_or(i64::MAX));
    let succeeded = outcome.phase == BackupResultPhase::Completed;
    m.backup_last_status
        .with_label_values(&[&sched])
        .set(i64::from(succeeded));
    if succeeded {
        m.backup_last_successful
            .with_label_values(&[&sched])
            .set(outcome.completion_timestamp.timestamp());
    }
    m.backup_duration.with_label_values(&[&sched]).observe(
        (outcome.completion_timestamp - now)
            .to_std()
            .unwrap_or_default()
            .as_secs_f64(),
    );
    tracing::info!(backup = %name, phase = ?final_phase, items = outcome.items_backed_up, errors = outcome.errors, warnings = outcome.warnings, "backup finished");
    if let Some(reason) = &outcome.failure_reason {
        ctx.event(&b, EventType::Warning, "BackupFailed", reason.clone())
            .await;
    }
    Ok(())
}

/// Ends the backup `Failed` with `reason`.
async fn fail(
    ctx: &VeleroContext,
    b: &Backup,
    sched: &str,
    reason: String,
) -> Result<(), kube::Error> {
    let name = b.name_any();
    tracing::warn!(backup = %name, reason = %reason, "backup failed");
    patch(
        ctx,
        &name,
        json!({"status": {
            "phase": BackupPhase::Failed,
            "failureReason": reason,
            "completionTimestamp": k8s_time(ctx.clock.now()),
        }}),
    )
    .await?;
    ctx.metrics.backup_failure.with_label_values(&[sched]).inc();
    ctx.event(b, EventType::Warning, "BackupFailed", reason)
        .await;
    Ok(())
}
