//! The `backup-deletion` controller: processes DeleteBackupRequests as Velero's
//! `backup_deletion_controller.go` does — validate (backup present and not running, its
//! location present, Available and ReadWrite), then `InProgress` with the backup
//! `Deleting`, every object under `backups/<name>/` removed with batched deletes, the
//! Restores of the backup removed (with their `restores/<name>/` data), the Backup CR
//! removed, and the request `Processed` with its `errors`. On success the other requests
//! for the backup go; a Processed request goes 24 hours after it was created.
//!
//! Crash safety, beyond Velero (which leaves an `InProgress` request stuck forever):
//! - `velero-backup.json` is deleted first, alone. Backup sync imports a backup only when
//!   that file exists, so a crash mid-delete never lets sync bring back half a backup.
//! - The CR goes only after the data, so a crash never leaves data without a CR, and a
//!   `Deleting` CR is never removed by sync (it removes only Completed/PartiallyFailed
//!   orphans).
//! - An `InProgress` request is resumed at the next start: the steps are idempotent,
//!   and the location is recorded on the request ([`ANNOTATION_STORAGE_LOCATION`]) so the
//!   data is removed even when the crash came after the CR went.
//! - A failed object-store delete leaves the CR (`Deleting`) with the error on the
//!   request and an event on the backup; a new request retries.

use super::context::VeleroContext;
use chrono::{DateTime, Utc};
use granary_api::velero::{
    BACKUP_NAME_LABEL, BACKUP_UID_LABEL, Backup, BackupPhase, BackupStorageLocation,
    BackupStorageLocationAccessMode, BackupStorageLocationPhase, DeleteBackupRequest,
    DeleteBackupRequestPhase, Restore,
};
use granary_runtime::work_queue::{Next, WorkQueue};
use granary_velero::label::valid_label_value;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::watcher;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// On an `InProgress` request: the location the backup's data is in, recorded before
/// anything is deleted so a resumed request finds the data after the CR is gone.
pub const ANNOTATION_STORAGE_LOCATION: &str = "granary.gardener.cloud/storage-location";

/// How long a Processed request is kept (Velero: 24h after creation).
pub const PROCESSED_REQUEST_TTL: Duration = Duration::from_secs(24 * 3600);

/// What to do with a request, decided from the request, its backup and the location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Processed: remove it at this time (now or in the past → now).
    Expire(DateTime<Utc>),
    /// Refuse: Processed with these errors, nothing touched.
    Reject(Vec<String>),
    /// Delete the backup whose data lives in this location.
    Delete { location: String },
    /// An `InProgress` request whose backup CR is already gone (a crash after the CR
    /// went): remove what data may be left in the recorded location, then Processed.
    Finish { location: Option<String> },
}

/// Phases in which a backup is being taken, so it cannot be deleted (Velero's tracker).
fn running(phase: Option<BackupPhase>) -> bool {
    use BackupPhase::*;
    matches!(
        phase,
        Some(
            ReadyToStart
                | InProgress
                | WaitingForPluginOperations
                | WaitingForPluginOperationsPartiallyFailed
                | Finalizing
                | FinalizingPartiallyFailed
        )
    )
}

/// Velero's validation of a request, plus resuming an interrupted one.
pub fn decide(
    request: &DeleteBackupRequest,
    backup: Option<&Backup>,
    location: Option<&BackupStorageLocation>,
) -> Decision {
    let phase = request.status.as_ref().and_then(|s| s.phase);
    if phase == Some(DeleteBackupRequestPhase::Processed) {
        let created = request
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| granary_runtime::clock::from_k8s(t.0))
            .unwrap_or_default();
        let ttl =
            chrono::Duration::from_std(PROCESSED_REQUEST_TTL).expect("24h fits a chrono::Duration");
        return Decision::Expire(created + ttl);
    }
    let resuming = phase == Some(DeleteBackupRequestPhase::InProgress);
    let recorded = request
        .annotations()
        .get(ANNOTATION_STORAGE_LOCATION)
        .cloned();
    let Some(backup) = backup else {
        return if resuming {
            Decision::Finish { location: recorded }
        } else {
            Decision::Reject(vec!["backup not found".into()])
        };
    };
    if !resuming && running(backup.status.as_ref().and_then(|s| s.phase)) {
        return Decision::Reject(vec!["backup is still in progress".into()]);
    }
    let name = recorded
        .or_else(|| backup.spec.storage_location.clone())
        .unwrap_or_default();
    let Some(location) = location else {
        return Decision::Reject(vec![format!("backup storage location {name} not found")]);
    };
    let mut errors = Vec::new();
    if location.spec.access_mode == Some(BackupStorageLocationAccessMode::ReadOnly) {
        errors.push(format!(
            "cannot delete backup because backup storage location {name} is currently in read-only mode"
        ));
    }
    if location.status.as_ref().and_then(|s| s.phase) != Some(BackupStorageLocationPhase::Available)
    {
        errors.push(format!(
            "cannot delete backup because backup storage location {name} is currently unavailable"
        ));
    }
    if errors.is_empty() {
        Decision::Delete { location: name }
    } else {
        Decision::Reject(errors)
    }
}

/// The order in which a backup's keys are removed: `velero-backup.json` alone first (so
/// sync never sees a half-deleted backup), then everything under the directory.
pub fn deletion_steps(keys: &granary_velero::layout::BackupKeys) -> [DeleteStep; 2] {
    [
        DeleteStep::Keys(vec![keys.metadata()]),
        DeleteStep::Prefix(keys.dir().to_string()),
    ]
}

/// One object-store delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteStep {
    Keys(Vec<String>),
    Prefix(String),
}

/// Runs the controller until dropped.
pub async fn run(ctx: Arc<VeleroContext>) {
    let queue: WorkQueue<String> = WorkQueue::new();
    let feed = {
        let queue = queue.clone();
        super::watch::each_event(
            ctx.api::<DeleteBackupRequest>(),
            "DeleteBackupRequests",
            move |event| match event {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                    queue.trigger(o.name_any())
                }
                _ => {}
            },
        )
    };
    // One at a time, as Velero: two requests for one backup never race.
    let work = queue.run(1, move |name| {
        let ctx = ctx.clone();
        async move {
            let processed: futures::future::BoxFuture<'_, Result<Next, kube::Error>> =
                Box::pin(reconcile(&ctx, &name));
            processed.await.unwrap_or_else(|e| {
                tracing::warn!(request = %name, error = %e, "backup-deletion");
                Next::After(Duration::from_secs(5))
            })
        }
    });
    tokio::join!(feed, work);
}

/// Failpoints after each step of a deletion (`GRANARY_FAILPOINTS`, crash tests).
pub const FAILPOINTS: [&str; 4] = [
    "velero.deletion.after-in-progress",
    "velero.deletion.after-metadata",
    "velero.deletion.after-data",
    "velero.deletion.after-backup-cr",
];

/// A failpoint `error` is a crash that did not happen: the step is retried later.
fn failpoint(name: &str) -> Result<(), kube::Error> {
    granary_runtime::failpoints::hit(name)
        .map_err(|e| kube::Error::Service(Box::new(std::io::Error::other(e.to_string()))))
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

async fn reconcile(ctx: &VeleroContext, name: &str) -> Result<Next, kube::Error> {
    let requests = ctx.api::<DeleteBackupRequest>();
    let Some(request) = requests.get_opt(name).await? else {
        return Ok(Next::Done);
    };
    let backup_name = request.spec.backup_name.clone();
    let backup = if backup_name.is_empty() {
        None
    } else {
        ctx.api::<Backup>().get_opt(&backup_name).await?
    };
    let location_name = request
        .annotations()
        .get(ANNOTATION_STORAGE_LOCATION)
        .cloned()
        .or_else(|| {
            backup
                .as_ref()
                .and_then(|b| b.spec.storage_location.clone())
        });
    let location = match &location_name {
        Some(l) if !l.is_empty() => ctx.api::<BackupStorageLocation>().get_opt(l).await?,
        _ => None,
    };
    let decision = decide(&request, backup.as_ref(), location.as_ref());
    let now = ctx.clock.now();
    match decision {
        Decision::Expire(at) if at <= now => {
            match requests.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e),
            }
            Ok(Next::Done)
        }
        Decision::Expire(at) => Ok(Next::After(
            (at - now)
                .to_std()
                .unwrap_or_default()
                .max(Duration::from_secs(1)),
        )),
        Decision::Reject(errors) => {
            tracing::info!(request = %name, backup = %backup_name, ?errors, "delete request refused");
            processed(ctx, name, &errors).await?;
            Ok(Next::After(PROCESSED_REQUEST_TTL))
        }
        Decision::Finish { location } => {
            let mut errors = Vec::new();
            if let Some(l) = location {
                errors.extend(delete_data(ctx, &l, &backup_name, &[]).await);
            }
            finish(ctx, &request, &errors).await?;
            Ok(Next::After(PROCESSED_REQUEST_TTL))
        }
        Decision::Delete { location } => {
            // Unwrap-free: `decide` only says Delete with a backup at hand.
            let Some(backup) = backup else {
                return Ok(Next::Done);
            };
            let errors = delete_backup(ctx, &request, &backup, &location).await?;
            finish(ctx, &request, &errors).await?;
            Ok(Next::After(PROCESSED_REQUEST_TTL))
        }
    }
}

async fn processed(ctx: &VeleroContext, name: &str, errors: &[String]) -> Result<(), kube::Error> {
    let patch = json!({"status": {
        "phase": DeleteBackupRequestPhase::Processed,
        "errors": if errors.is_empty() { None } else { Some(errors) },
    }});
    ctx.api::<DeleteBackupRequest>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// The request's label selector for "every request for this backup".
fn requests_of(backup_name: &str, uid: Option<&str>) -> String {
    let mut s = format!("{BACKUP_NAME_LABEL}={}", valid_label_value(backup_name));
    if let Some(uid) = uid {
        s.push_str(&format!(",{BACKUP_UID_LABEL}={uid}"));
    }
    s
}

/// InProgress, Deleting, then the data, the restores and the CR. Returns the errors.
async fn delete_backup(
    ctx: &VeleroContext,
    request: &DeleteBackupRequest,
    backup: &Backup,
    location: &str,
) -> Result<Vec<String>, kube::Error> {
    let name = request.name_any();
    let backup_name = backup.name_any();
    let schedule = backup
        .labels()
        .get(granary_api::velero::SCHEDULE_NAME_LABEL)
        .cloned()
        .unwrap_or_default();
    let first =
        request.status.as_ref().and_then(|s| s.phase) != Some(DeleteBackupRequestPhase::InProgress);
    if first {
        let patch = json!({
            "metadata": {
                "labels": {
                    BACKUP_NAME_LABEL: valid_label_value(&backup_name),
                    BACKUP_UID_LABEL: backup.uid(),
                },
                "annotations": {ANNOTATION_STORAGE_LOCATION: location},
            },
            "status": {"phase": DeleteBackupRequestPhase::InProgress},
        });
        ctx.api::<DeleteBackupRequest>()
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        ctx.metrics
            .deletion_attempt
            .with_label_values(&[&schedule])
            .inc();
        tracing::info!(request = %name, backup = %backup_name, "deleting backup");
    }
    if backup.status.as_ref().and_then(|s| s.phase) != Some(BackupPhase::Deleting) {
        let patch = json!({"status": {"phase": BackupPhase::Deleting}});
        ctx.api::<Backup>()
            .patch(&backup_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    failpoint(FAILPOINTS[0])?;
    let restores: Vec<String> = ctx
        .api::<Restore>()
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|r| r.spec.backup_name.as_deref() == Some(backup_name.as_str()))
        .map(|r| r.name_any())
        .collect();
    let mut errors = delete_data(ctx, location, &backup.stored_name(), &restores).await;
    failpoint(FAILPOINTS[2])?;
    for restore in &restores {
        match ctx
            .api::<Restore>()
            .delete(restore, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => errors.push(format!("error deleting restore {restore}: {e}")),
        }
    }
    // As Velero: wait up to a minute for the restores to be gone (the restore
    // controller's finalizer removes their files first).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for restore in &restores {
        loop {
            match ctx.api::<Restore>().get_opt(restore).await {
                Ok(None) => break,
                Ok(Some(_)) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Ok(Some(_)) => {
                    errors.push(format!(
                        "restore {restore} is still there a minute after its deletion"
                    ));
                    break;
                }
                Err(e) => {
                    errors.push(format!("error reading restore {restore}: {e}"));
                    break;
                }
            }
        }
    }
    if errors.is_empty() {
        match ctx
            .api::<Backup>()
            .delete(&backup_name, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => errors.push(format!("error deleting backup {backup_name}: {e}")),
        }
        failpoint(FAILPOINTS[3])?;
    }
    if errors.is_empty() {
        ctx.metrics
            .deletion_success
            .with_label_values(&[&schedule])
            .inc();
    } else {
        ctx.metrics
            .deletion_failure
            .with_label_values(&[&schedule])
            .inc();
        ctx.event(
            backup,
            EventType::Warning,
            "DeletionFailed",
            errors.join("; "),
        )
        .await;
    }
    Ok(errors)
}

/// Removes the backup's objects (metadata first) and those of its restores. Returns
/// the errors (none when everything is gone).
async fn delete_data(
    ctx: &VeleroContext,
    location: &str,
    backup_name: &str,
    restores: &[String],
) -> Vec<String> {
    let open = match ctx.open_named(location).await {
        Ok(o) => o,
        Err(e) => {
            return vec![format!(
                "error opening backup storage location {location}: {e}"
            )];
        }
    };
    let layout = &open.access.layout;
    let bucket = layout.bucket();
    let keys = match layout.backup(backup_name) {
        Ok(k) => k,
        Err(e) => return vec![e.to_string()],
    };
    let mut errors = Vec::new();
    for step in deletion_steps(&keys) {
        let result = match &step {
            DeleteStep::Keys(k) => open.store.delete_many(bucket, k).await,
            DeleteStep::Prefix(p) => open.store.delete_prefix(bucket, p).await,
        };
        if let Err(e) = result {
            errors.push(format!("error deleting backup from backup storage: {e}"));
            // Never the rest before the metadata is gone.
            return errors;
        }
        if matches!(step, DeleteStep::Keys(_))
            && let Err(e) = granary_runtime::failpoints::hit(FAILPOINTS[1])
        {
            // In-process `error`: stop here like a crash; the InProgress request resumes.
            return vec![e.to_string()];
        }
    }
    for restore in restores {
        let dir = match layout.restore(restore) {
            Ok(k) => k.dir().to_string(),
            Err(e) => {
                errors.push(e.to_string());
                continue;
            }
        };
        if let Err(e) = open.store.delete_prefix(bucket, &dir).await {
            errors.push(format!(
                "error deleting restore {restore} from backup storage: {e}"
            ));
        }
    }
    errors
}

/// Processed with `errors`; on success the other requests for the backup go.
async fn finish(
    ctx: &VeleroContext,
    request: &DeleteBackupRequest,
    errors: &[String],
) -> Result<(), kube::Error> {
    let name = request.name_any();
    processed(ctx, &name, errors).await?;
    tracing::info!(request = %name, backup = %request.spec.backup_name, ?errors, "delete request processed");
    if !errors.is_empty() {
        return Ok(());
    }
    let api = ctx.api::<DeleteBackupRequest>();
    let selector = requests_of(&request.spec.backup_name, None);
    for other in api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
    {
        let other_name = other.name_any();
        if other_name == name {
            continue;
        }
        match api.delete(&other_name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::velero::{
        BackupStatus, BackupStorageLocationSpec, BackupStorageLocationStatus,
        DeleteBackupRequestSpec, DeleteBackupRequestStatus,
    };
    use granary_velero::layout::StorageLayout;

    fn request(phase: Option<DeleteBackupRequestPhase>) -> DeleteBackupRequest {
        let mut r = DeleteBackupRequest::new(
            "b1-x",
            DeleteBackupRequestSpec {
                backup_name: "b1".into(),
            },
        );
        r.status = Some(DeleteBackupRequestStatus {
            phase,
            errors: None,
        });
        r
    }

    fn backup(phase: BackupPhase) -> Backup {
        let mut b = Backup::new("b1", Default::default());
        b.spec.storage_location = Some("default".into());
        b.status = Some(BackupStatus {
            phase: Some(phase),
            ..Default::default()
        });
        b
    }

    fn location(
        mode: BackupStorageLocationAccessMode,
        phase: BackupStorageLocationPhase,
    ) -> BackupStorageLocation {
        let mut l = BackupStorageLocation::new(
            "default",
            BackupStorageLocationSpec {
                access_mode: Some(mode),
                ..Default::default()
            },
        );
        l.status = Some(BackupStorageLocationStatus {
            phase: Some(phase),
            ..Default::default()
        });
        l
    }

    use BackupStorageLocationAccessMode::{ReadOnly, ReadWrite};
    use BackupStorageLocationPhase::{Available, Unavailable};

    #[test]
    fn a_valid_request_deletes() {
        let l = location(ReadWrite, Available);
        for phase in [
            BackupPhase::Completed,
            BackupPhase::PartiallyFailed,
            BackupPhase::Failed,
            BackupPhase::FailedValidation,
            BackupPhase::Deleting,
            BackupPhase::Queued,
        ] {
            assert_eq!(
                decide(&request(None), Some(&backup(phase)), Some(&l)),
                Decision::Delete {
                    location: "default".into()
                },
                "{phase}"
            );
        }
    }

    #[test]
    fn velero_s_refusals() {
        let l = location(ReadWrite, Available);
        assert_eq!(
            decide(&request(None), None, Some(&l)),
            Decision::Reject(vec!["backup not found".into()])
        );
        for phase in [
            BackupPhase::InProgress,
            BackupPhase::ReadyToStart,
            BackupPhase::Finalizing,
        ] {
            assert_eq!(
                decide(
                    &request(Some(DeleteBackupRequestPhase::New)),
                    Some(&backup(phase)),
                    Some(&l)
                ),
                Decision::Reject(vec!["backup is still in progress".into()])
            );
        }
        let b = backup(BackupPhase::Completed);
        assert_eq!(
            decide(&request(None), Some(&b), None),
            Decision::Reject(vec!["backup storage location default not found".into()])
        );
        assert_eq!(
            decide(
                &request(None),
                Some(&b),
                Some(&location(ReadOnly, Unavailable))
            ),
            Decision::Reject(vec![
                "cannot delete backup because backup storage location default is currently in read-only mode".into(),
                "cannot delete backup because backup storage location default is currently unavailable".into(),
            ])
        );
    }

    #[test]
    fn an_interrupted_request_resumes() {
        let l = location(ReadWrite, Available);
        let mut r = request(Some(DeleteBackupRequestPhase::InProgress));
        r.annotations_mut()
            .insert(ANNOTATION_STORAGE_LOCATION.into(), "default".into());
        assert_eq!(
            decide(&r, Some(&backup(BackupPhase::Deleting)), Some(&l)),
            Decision::Delete {
                location: "default".into()
            }
        );
        // The CR went before the crash: the data is looked at once more, then done.
        assert_eq!(
            decide(&r, None, Some(&l)),
            Decision::Finish {
                location: Some("default".into())
            }
        );
    }

    #[test]
    fn processed_requests_expire_a_day_after_creation() {
        let mut r = request(Some(DeleteBackupRequestPhase::Processed));
        let created: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().expect("time");
        r.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            granary_runtime::clock::to_k8s(created),
        ));
        assert_eq!(
            decide(&r, None, None),
            Decision::Expire("2026-01-02T00:00:00Z".parse().expect("time"))
        );
    }

    #[test]
    fn the_metadata_goes_first() {
        let layout = StorageLayout::new("bucket", Some("velero/seed")).expect("layout");
        let keys = layout.backup("b1").expect("keys");
        assert_eq!(
            deletion_steps(&keys),
            [
                DeleteStep::Keys(vec!["velero/seed/backups/b1/velero-backup.json".into()]),
                DeleteStep::Prefix("velero/seed/backups/b1/".into()),
            ]
        );
    }

    #[test]
    fn selector_of_the_requests_of_a_backup() {
        assert_eq!(requests_of("b1", None), "velero.io/backup-name=b1");
        assert_eq!(
            requests_of("b1", Some("u")),
            "velero.io/backup-name=b1,velero.io/backup-uid=u"
        );
    }
}
