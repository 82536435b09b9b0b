//! The `restore` controller. A new Restore is validated ([`super::restore::validate`]:
//! Velero's messages → `FailedValidation`), gets the finalizer
//! `restores.velero.io/external-resources-finalizer`, and waits its turn in the
//! concurrent-restore queue ([`super::restore::queue`]: restores that do not overlap run
//! together, up to `concurrentRestores`; a waiting one carries what it waits for in
//! [`ANNOTATION_WAITING_FOR`] and its place in [`ANNOTATION_QUEUE_POSITION`]). Then it
//! runs `InProgress` ([`super::restore::run`]) with `status.progress` kept current, its
//! log, results and resource list go to `restores/<name>/`, and it ends `Completed`,
//! `PartiallyFailed` or `Failed`. Deleting a Restore removes `restores/<name>/` before
//! the finalizer goes. A Restore left InProgress by a previous process is marked Failed
//! at start-up, as Velero's server does.

use granary_runtime::passes::run_passes;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::watcher::Event;
use serde_json::json;
use tokio::sync::Notify;

use super::context::{VeleroContext, k8s_time};
use super::integrity;
use super::restore::actions::RestoreItemAction;
use super::restore::builtin_actions;
use super::restore::queue::{Candidate, Decision, Footprint, admit};
use super::restore::run::{self, RestoreRequest, RestoreResultPhase};
use super::restore::validate::{Source, validate};
use super::watch::each_event;
use granary_api::velero::{
    Backup, BackupStorageLocation, BackupStorageLocationAccessMode,
    RESTORE_FILES_LOCATION_ANNOTATION, RESTORE_FINALIZER, Restore, RestorePhase, RestoreProgress,
};
use granary_velero::archive::ArchiveLimits;
use granary_velero::files::ResourceList;
use granary_velero::integrity::{IntegrityRecord, ObjectDigest, RecordKind};

/// On a waiting Restore: the restores it waits for, or that every slot is taken.
pub const ANNOTATION_WAITING_FOR: &str = "granary.gardener.cloud/restore-waiting-for";
/// On a waiting Restore: its 1-based place among the waiting ones.
pub const ANNOTATION_QUEUE_POSITION: &str = "granary.gardener.cloud/restore-queue-position";

/// Velero's `failureReason` for a restore found InProgress when the server starts.
pub const IN_PROGRESS_AT_START: &str =
    "found a restore with status \"InProgress\" during the server starting, mark it as \"Failed\"";

const LABEL_SCHEDULE_NAME: &str = "velero.io/schedule-name";
/// Most of a backup's resource list read for a queue footprint.
const MAX_RESOURCE_LIST_BYTES: u64 = 64 << 20;

/// State shared by the controller's passes and its running restores.
struct Shared {
    ctx: Arc<VeleroContext>,
    actions: Arc<Vec<Box<dyn RestoreItemAction>>>,
    /// Names of the restores this process runs now.
    running: Mutex<HashMap<String, Footprint>>,
    /// Footprints of validated, waiting restores, by UID.
    footprints: Mutex<HashMap<String, Footprint>>,
    wake: Notify,
    /// Set when the controller is dropped: running restores stop between two items.
    stop: Arc<std::sync::atomic::AtomicBool>,
}

/// Sets the stop flag when the controller's future is dropped.
struct StopOnDrop(Arc<std::sync::atomic::AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs the controller with the built-in restore item actions until dropped.
pub async fn run(ctx: Arc<VeleroContext>) {
    let ceiling = ctx.settings.non_admin.restore_role_ceiling.clone();
    run_with_actions(ctx, builtin_actions::builtin_with(&ceiling)).await
}

/// Runs the controller with `actions` (in their order) until dropped.
pub async fn run_with_actions(ctx: Arc<VeleroContext>, actions: Vec<Box<dyn RestoreItemAction>>) {
    fail_in_progress(&ctx).await;
    let shared = Arc::new(Shared {
        ctx: ctx.clone(),
        actions: Arc::new(actions),
        running: Mutex::new(HashMap::new()),
        footprints: Mutex::new(HashMap::new()),
        wake: Notify::new(),
        stop: Arc::new(std::sync::atomic::AtomicBool::new(false)),
    });
    let _stop = StopOnDrop(shared.stop.clone());
    let feed = {
        let shared = shared.clone();
        each_event(ctx.api::<Restore>(), "Restores", move |event| match event {
            Event::InitDone | Event::Apply(_) | Event::Delete(_) => shared.wake.notify_one(),
            _ => {}
        })
    };
    let work = async {
        let every = ctx.settings.queued_backup_recheck_frequency.0;
        run_passes(
            "restore controller pass failed",
            Some(&shared.wake),
            every,
            || pass(&shared),
        )
        .await
    };
    tokio::join!(feed, work);
}

fn phase(r: &Restore) -> Option<RestorePhase> {
    r.status.as_ref().and_then(|s| s.phase)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn patch(
    ctx: &VeleroContext,
    name: &str,
    body: serde_json::Value,
) -> Result<(), kube::Error> {
    ctx.api::<Restore>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map(|_| ())
}

async fn fail_in_progress(ctx: &VeleroContext) {
    let restores = match ctx.api::<Restore>().list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) => {
            tracing::warn!(error = %e, "listing Restores at start-up");
            return;
        }
    };
    for r in restores {
        if phase(&r) != Some(RestorePhase::InProgress) {
            continue;
        }
        let body = json!({"status": {
            "phase": RestorePhase::Failed,
            "failureReason": IN_PROGRESS_AT_START,
            "completionTimestamp": k8s_time(ctx.clock.now()),
        }});
        if let Err(e) = patch(ctx, &r.name_any(), body).await {
            tracing::warn!(restore = %r.name_any(), error = %e, "marking an interrupted restore Failed");
        }
    }
}

fn schedule_of(backup: &Backup) -> String {
    backup
        .labels()
        .get(LABEL_SCHEDULE_NAME)
        .cloned()
        .unwrap_or_default()
}

/// One pass: deletions, validation, the queue.
async fn pass(shared: &Arc<Shared>) -> Result<(), kube::Error> {
    let ctx = &shared.ctx;
    let mut restores = ctx
        .api::<Restore>()
        .list(&ListParams::default())
        .await?
        .items;
    ctx.metrics.restore.total.set(restores.len() as i64);
    restores.sort_by(|a, b| {
        (
            a.metadata.creation_timestamp.as_ref().map(|t| t.0),
            a.name_any(),
        )
            .cmp(&(
                b.metadata.creation_timestamp.as_ref().map(|t| t.0),
                b.name_any(),
            ))
    });
    let backups = ctx
        .api::<Backup>()
        .list(&ListParams::default())
        .await?
        .items;
    let locations = ctx
        .api::<BackupStorageLocation>()
        .list(&ListParams::default())
        .await?
        .items;
    let live_uids: HashSet<String> = restores.iter().filter_map(|r| r.uid()).collect();
    lock(&shared.footprints).retain(|uid, _| live_uids.contains(uid));

    let mut waiting: Vec<(Restore, Source, Candidate)> = Vec::new();
    for r in restores {
        let name = r.name_any();
        if r.metadata.deletion_timestamp.is_some() {
            if r.finalizers().iter().any(|f| f == RESTORE_FINALIZER)
                && !lock(&shared.running).contains_key(&name)
            {
                finalize(ctx, &r, &backups, &locations).await?;
            }
            continue;
        }
        if !matches!(phase(&r), None | Some(RestorePhase::New)) {
            continue;
        }
        if lock(&shared.running).contains_key(&name) {
            continue;
        }
        // Without the keys every backup would look `unknown-key`: wait for them.
        if ctx.keys.current().is_empty() {
            continue;
        }
        let source = match validate(&r, &backups, &locations) {
            Ok(s) => s,
            Err(errors) => {
                fail_validation(ctx, &r, errors, &backups).await?;
                continue;
            }
        };
        if !r.finalizers().iter().any(|f| f == RESTORE_FINALIZER) {
            let mut finalizers = r.finalizers().to_vec();
            finalizers.push(RESTORE_FINALIZER.to_string());
            patch(ctx, &name, json!({"metadata": {"finalizers": finalizers}})).await?;
        }
        let uid = r.uid().unwrap_or_default();
        let known = lock(&shared.footprints).get(&uid).cloned();
        let footprint = match known {
            Some(f) => f,
            None => {
                let f = footprint(ctx, &r, &source).await;
                lock(&shared.footprints).insert(uid, f.clone());
                f
            }
        };
        let candidate = Candidate {
            name: name.clone(),
            footprint,
        };
        waiting.push((r, source, candidate));
    }
    let running: Vec<Candidate> = lock(&shared.running)
        .iter()
        .map(|(n, f)| Candidate {
            name: n.clone(),
            footprint: f.clone(),
        })
        .collect();
    let candidates: Vec<Candidate> = waiting.iter().map(|(_, _, c)| c.clone()).collect();
    let decisions = admit(
        &running,
        &candidates,
        ctx.settings.concurrent_restores.max(1) as usize,
    );
    for ((r, source, candidate), decision) in waiting.into_iter().zip(decisions) {
        match decision {
            Decision::Start => {
                lock(&shared.running).insert(candidate.name.clone(), candidate.footprint);
                let shared = shared.clone();
                tokio::spawn(async move {
                    let name = r.name_any();
                    let result: futures::future::BoxFuture<'_, Result<(), kube::Error>> =
                        Box::pin(start(&shared, r, source));
                    if let Err(e) = result.await {
                        tracing::warn!(restore = %name, error = %e, "restore controller");
                    }
                    lock(&shared.running).remove(&name);
                    shared.wake.notify_one();
                });
            }
            Decision::Wait {
                position,
                blocked_by,
            } => {
                let waiting_for = if blocked_by.is_empty() {
                    format!(
                        "all {} restore slots are taken (concurrentRestores)",
                        ctx.settings.concurrent_restores.max(1)
                    )
                } else {
                    format!("overlapping restores to finish: {}", blocked_by.join(", "))
                };
                let position = position.to_string();
                let a = r.annotations();
                if a.get(ANNOTATION_WAITING_FOR) != Some(&waiting_for)
                    || a.get(ANNOTATION_QUEUE_POSITION) != Some(&position)
                {
                    patch(
                        ctx,
                        &candidate.name,
                        json!({"metadata": {"annotations": {
                            ANNOTATION_WAITING_FOR: waiting_for,
                            ANNOTATION_QUEUE_POSITION: position,
                        }}, "status": {"phase": RestorePhase::New}}),
                    )
                    .await?;
                }
            }
        }
    }
    Ok(())
}

/// The footprint of a validated restore: from the backup's resource list when it can
/// be read, else everything (it then runs alone).
async fn footprint(ctx: &VeleroContext, r: &Restore, source: &Source) -> Footprint {
    let list = async {
        let open = ctx.open(source.location.clone()).await.ok()?;
        let keys = open
            .access
            .layout
            .backup(&source.backup.stored_name())
            .ok()?;
        let bytes = granary_providers::get_bytes(
            open.store.as_ref(),
            open.access.layout.bucket(),
            &keys.resource_list(),
        )
        .await
        .ok()?;
        ResourceList::read_gz(&bytes[..], MAX_RESOURCE_LIST_BYTES).ok()
    }
    .await;
    Footprint::of(&r.spec, list.as_ref())
}

async fn fail_validation(
    ctx: &VeleroContext,
    r: &Restore,
    errors: Vec<String>,
    backups: &[Backup],
) -> Result<(), kube::Error> {
    let sched = backup_of(r, backups).map(schedule_of).unwrap_or_default();
    patch(
        ctx,
        &r.name_any(),
        json!({"status": {
            "phase": RestorePhase::FailedValidation,
            "validationErrors": errors,
            "completionTimestamp": k8s_time(ctx.clock.now()),
        }}),
    )
    .await?;
    ctx.metrics
        .restore
        .validation_failed
        .with_label_values(&[&sched])
        .inc();
    ctx.event(r, EventType::Warning, "FailedValidation", errors.join("; "))
        .await;
    Ok(())
}

/// Deletes `restores/<name>/` from the backup's location, then the finalizer.
/// The restore's backup among `backups`.
fn backup_of<'a>(r: &Restore, backups: &'a [Backup]) -> Option<&'a Backup> {
    let name = r.spec.backup_name.as_deref()?;
    backups
        .iter()
        .find(|x| x.metadata.name.as_deref() == Some(name))
}

/// Whether a location may not be written (`accessMode: ReadOnly`).
pub(crate) fn read_only(l: &BackupStorageLocation) -> bool {
    l.spec.access_mode == Some(BackupStorageLocationAccessMode::ReadOnly)
}

/// The namespace's default location, when it may be written.
async fn writable_default(ctx: &VeleroContext) -> Option<BackupStorageLocation> {
    ctx.api::<BackupStorageLocation>()
        .list(&Default::default())
        .await
        .ok()?
        .items
        .into_iter()
        .find(|l| l.spec.default == Some(true) && !read_only(l))
}

async fn finalize(
    ctx: &VeleroContext,
    r: &Restore,
    backups: &[Backup],
    locations: &[BackupStorageLocation],
) -> Result<(), kube::Error> {
    let name = r.name_any();
    let named = |l: &str| {
        locations
            .iter()
            .find(|x| x.metadata.name.as_deref() == Some(l))
    };
    // Where its files went: the location the Restore names, else its backup's unless
    // that one is read-only (nothing was written there).
    let location = match r.annotations().get(RESTORE_FILES_LOCATION_ANNOTATION) {
        Some(l) => named(l),
        None => backup_of(r, backups)
            .and_then(|b| b.spec.storage_location.clone())
            .and_then(|l| named(&l))
            .filter(|l| !read_only(l)),
    };
    if let Some(location) = location {
        match ctx.open(location.clone()).await {
            Ok(open) => {
                if let Ok(keys) = open.access.layout.restore(&name) {
                    let dir = format!("{}/", keys.dir().trim_end_matches('/'));
                    if let Err(e) = open
                        .store
                        .delete_prefix(open.access.layout.bucket(), &dir)
                        .await
                    {
                        let msg = format!("error deleting the restore's files: {e}");
                        ctx.event(r, EventType::Warning, "DeleteFailed", msg.clone())
                            .await;
                        tracing::warn!(restore = %name, "{msg}");
                        return Ok(());
                    }
                }
            }
            Err(e) => {
                // A location that cannot be opened keeps the Restore until it can (its
                // files would otherwise be left behind); say so.
                let msg =
                    format!("cannot open the backup's location to delete the restore's files: {e}");
                ctx.event(r, EventType::Warning, "DeleteFailed", msg.clone())
                    .await;
                tracing::warn!(restore = %name, "{msg}");
                return Ok(());
            }
        }
    }
    let finalizers: Vec<String> = r
        .finalizers()
        .iter()
        .filter(|f| *f != RESTORE_FINALIZER)
        .cloned()
        .collect();
    patch(ctx, &name, json!({"metadata": {"finalizers": finalizers}})).await
}

/// Runs one admitted restore to its end.
async fn start(shared: &Arc<Shared>, r: Restore, source: Source) -> Result<(), kube::Error> {
    let ctx = &shared.ctx;
    let name = r.name_any();
    let backup_name = source.backup.name_any();
    let sched = schedule_of(&source.backup);
    let now = ctx.clock.now();
    patch(
        ctx,
        &name,
        json!({
            "metadata": {"annotations": {ANNOTATION_WAITING_FOR: null, ANNOTATION_QUEUE_POSITION: null}},
            "spec": {"backupName": backup_name},
            "status": {"phase": RestorePhase::InProgress, "startTimestamp": k8s_time(now)},
        }),
    )
    .await?;
    ctx.metrics
        .restore
        .attempt
        .with_label_values(&[&sched])
        .inc();
    tracing::info!(restore = %name, backup = %backup_name, "restore started");
    let open = match ctx.open(source.location.clone()).await {
        Ok(o) => o,
        Err(e) => {
            return finish_failed(
                ctx,
                &r,
                &sched,
                format!("error opening the storage location: {e}"),
            )
            .await;
        }
    };
    let integrity = match verified_source(ctx, &r, &source, &open).await {
        Ok(record) => record,
        Err(Refusal::Validation(reason)) => {
            return fail_validation(ctx, &r, vec![reason], std::slice::from_ref(&source.backup))
                .await;
        }
        Err(Refusal::Store(reason)) => return finish_failed(ctx, &r, &sched, reason).await,
    };
    let priorities = ctx.settings.priorities().unwrap_or_default();
    let (tx, rx) = tokio::sync::watch::channel(RestoreProgress::default());
    // At most one progress write a second: a restore of many small items would
    // otherwise write its Restore once per item.
    let progress_writer = super::context::spawn_progress_writer(
        ctx.api::<Restore>(),
        name.to_string(),
        rx,
        std::time::Duration::from_secs(1),
    );
    let mut running = r.clone();
    running.spec.backup_name = Some(backup_name.clone());
    let outcome = {
        let client = ctx.client.clone();
        let store = open.store.clone();
        let layout = open.access.layout.clone();
        let actions = shared.actions.clone();
        let backup = source.backup.clone();
        let timeout = ctx.settings.resource_timeout.0;
        let stop = shared.stop.clone();
        let integrity = integrity.clone();
        // The runner's future is not Send (its recursion over additional items holds
        // local futures), so it runs on a thread of its own, like a backup.
        super::thread::on_own_thread(format!("restore-{name}"), move |runtime| {
            let report = move |p: RestoreProgress| {
                let _ = tx.send(p);
            };
            runtime.block_on(run::run(RestoreRequest {
                client,
                restore: &running,
                backup: &backup,
                store: store.as_ref(),
                layout: &layout,
                actions: &actions,
                priorities: &priorities,
                resource_timeout: timeout,
                limits: &ArchiveLimits::default(),
                now,
                progress: &report,
                dry_run: false,
                stop: Some(&stop),
                integrity: integrity.as_ref(),
            }))
        })
        .await
    };
    let _ = progress_writer.await;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => return finish_failed(ctx, &r, &sched, e).await,
    };
    // The restore's files, as Velero writes them: beside the backup, unless its location
    // is read-only (another seed's): then in the default location, named on the Restore.
    let mut upload_error = None;
    let files_open = if read_only(&source.location) {
        match writable_default(ctx).await {
            Some(l) => {
                let named = l.name_any();
                match ctx.open(l).await {
                    Ok(o) => {
                        patch(
                            ctx,
                            &name,
                            json!({"metadata": {"annotations": {
                                RESTORE_FILES_LOCATION_ANNOTATION: named,
                            }}}),
                        )
                        .await?;
                        Some(o)
                    }
                    Err(e) => {
                        upload_error = Some(format!(
                            "error opening location {named} for the restore's files: {e}"
                        ));
                        None
                    }
                }
            }
            None => {
                ctx.event(
                    &r,
                    EventType::Normal,
                    "RestoreFilesNotStored",
                    format!(
                        "location {} is read-only and there is no writable default location: \
                         the restore's logs and results are not stored",
                        source.location.name_any()
                    ),
                )
                .await;
                None
            }
        }
    } else {
        Some(open)
    };
    if let Some(open) = &files_open
        && let Ok(keys) = open.access.layout.restore(&name)
    {
        let (logs, results, list) = run::encode_files(&outcome);
        let bucket = open.access.layout.bucket();
        let mut written = BTreeMap::new();
        for (key, data) in [
            (keys.logs(), logs),
            (keys.results(), results),
            (keys.resource_list(), list),
        ] {
            let digest = ObjectDigest::of(&data);
            match open.store.put(bucket, &key, Bytes::from(data)).await {
                Ok(()) => {
                    written.insert(integrity::name_in(keys.dir(), &key).to_owned(), digest);
                }
                Err(e) => upload_error = Some(format!("error uploading the restore's files: {e}")),
            }
        }
        // The restore's files are signed as a backup's are.
        let tenant = integrity::tenant_of_restore(&r);
        let stored = match integrity::sign(
            RecordKind::Restore,
            &name,
            tenant.as_deref(),
            written,
            &ctx.keys.current(),
        ) {
            Ok(record) => {
                integrity::put_record(open.store.as_ref(), bucket, &keys.integrity(), &record).await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = stored {
            upload_error = Some(e);
        }
    }
    let mut phase = outcome.phase;
    let mut errors = outcome.errors;
    if upload_error.is_some() && phase == RestoreResultPhase::Completed {
        phase = RestoreResultPhase::PartiallyFailed;
        errors += 1;
    }
    let phase_value = match phase {
        RestoreResultPhase::Completed => RestorePhase::Completed,
        RestoreResultPhase::PartiallyFailed => RestorePhase::PartiallyFailed,
        RestoreResultPhase::Failed => RestorePhase::Failed,
    };
    let failure_reason = outcome.failure_reason.clone().or(upload_error.clone());
    patch(
        ctx,
        &name,
        json!({"status": {
            "phase": phase_value,
            "completionTimestamp": k8s_time(outcome.completion_timestamp),
            "warnings": outcome.warnings,
            "errors": errors,
            "failureReason": failure_reason,
            "progress": {"totalItems": outcome.total_items, "itemsRestored": outcome.items_restored},
        }}),
    )
    .await?;
    let m = &ctx.metrics.restore;
    match phase {
        RestoreResultPhase::Completed => m.success.with_label_values(&[&sched]).inc(),
        RestoreResultPhase::PartiallyFailed => m.partial_failure.with_label_values(&[&sched]).inc(),
        RestoreResultPhase::Failed => m.failed.with_label_values(&[&sched]).inc(),
    }
    tracing::info!(restore = %name, phase = %phase_value, items = outcome.items_restored, errors, warnings = outcome.warnings, "restore finished");
    if let Some(reason) = failure_reason {
        ctx.event(&r, EventType::Warning, "RestoreFailed", reason)
            .await;
    }
    Ok(())
}

/// What `restore` would do, against the live cluster, changing nothing (`granary
/// restore create --dry-run`): validated as the controller would, then run with every
/// write left out. Custom resources whose CRD the restore would create are reported as
/// created.
pub async fn dry_run(
    ctx: &VeleroContext,
    restore: &Restore,
) -> Result<run::RestoreOutcome, Vec<String>> {
    let list_err = |e: kube::Error| vec![format!("error reading the cluster: {e}")];
    let backups = ctx
        .api::<Backup>()
        .list(&ListParams::default())
        .await
        .map_err(list_err)?
        .items;
    let locations = ctx
        .api::<BackupStorageLocation>()
        .list(&ListParams::default())
        .await
        .map_err(list_err)?
        .items;
    let source = validate(restore, &backups, &locations)?;
    let open = ctx
        .open(source.location.clone())
        .await
        .map_err(|e| vec![format!("error opening the storage location: {e}")])?;
    let integrity = verified_source(ctx, restore, &source, &open)
        .await
        .map_err(|r| vec![r.into_message()])?;
    let priorities = ctx.settings.priorities().map_err(|e| vec![e])?;
    let mut restore = restore.clone();
    restore.spec.backup_name = Some(source.backup.name_any());
    let actions = builtin_actions::builtin_with(&ctx.settings.non_admin.restore_role_ceiling);
    Ok(run::run(RestoreRequest {
        client: ctx.client.clone(),
        restore: &restore,
        backup: &source.backup,
        store: open.store.as_ref(),
        layout: &open.access.layout,
        actions: &actions,
        priorities: &priorities,
        resource_timeout: ctx.settings.resource_timeout.0,
        limits: &ArchiveLimits::default(),
        now: ctx.clock.now(),
        progress: &|_| {},
        dry_run: true,
        stop: None,
        integrity: integrity.as_ref(),
    })
    .await)
}

/// Why a restore does not read its backup.
enum Refusal {
    /// The backup failed its integrity check, or is unsigned and not allowed:
    /// `FailedValidation`.
    Validation(String),
    /// The store could not be read to check: `Failed`.
    Store(String),
}

impl Refusal {
    fn into_message(self) -> String {
        match self {
            Refusal::Validation(m) | Refusal::Store(m) => m,
        }
    }
}

/// Checks the restore's backup at its location (docs/formats.md#integrity-record): every
/// object, so what fails ends `FailedValidation` before the restore starts; the runner
/// checks the tarball against the returned record again as it reads it (a swap after
/// this check). A namespace owner's restore reads only backups signed for their
/// namespace.
async fn verified_source(
    ctx: &VeleroContext,
    r: &Restore,
    source: &Source,
    open: &super::context::OpenLocation,
) -> Result<Option<IntegrityRecord>, Refusal> {
    let backup = source.backup.name_any();
    let tenant = integrity::tenant_of_restore(r);
    let checked = integrity::check_backup(
        open.store.as_ref(),
        &open.access.layout,
        &source.backup.stored_name(),
        &ctx.keys.current(),
        tenant.as_deref(),
        integrity::Hash::AllBut(&[]),
    )
    .await
    .map_err(Refusal::Store)?;
    integrity::restore_admits(
        &checked.verdict,
        &backup,
        tenant.is_some(),
        integrity::allows_unverified(r),
    )
    .map_err(Refusal::Validation)?;
    if !checked.verdict.is_verified() {
        tracing::warn!(restore = %r.name_any(), backup = %backup, "restoring an unsigned backup: an administrator allowed it");
    }
    Ok(checked.record)
}

async fn finish_failed(
    ctx: &VeleroContext,
    r: &Restore,
    sched: &str,
    reason: String,
) -> Result<(), kube::Error> {
    let name = r.name_any();
    tracing::warn!(restore = %name, reason = %reason, "restore failed");
    patch(
        ctx,
        &name,
        json!({"status": {
            "phase": RestorePhase::Failed,
            "failureReason": reason,
            "completionTimestamp": k8s_time(ctx.clock.now()),
        }}),
    )
    .await?;
    ctx.metrics.restore.failed.with_label_values(&[sched]).inc();
    ctx.event(r, EventType::Warning, "RestoreFailed", reason)
        .await;
    Ok(())
}
