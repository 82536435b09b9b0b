//! The `gc` controller (Velero's `gc_controller.go`): every `garbageCollectionFrequency`
//! (`--garbage-collection-frequency`, 1h) it looks at every Backup; an expired one gets a
//! DeleteBackupRequest unless one is pending, which the `backup-deletion` controller
//! then carries out. When the backup's location is missing, cannot be read or is
//! ReadOnly, the backup gets Velero's `velero.io/gc-failure` label instead (removed
//! again once collection can go ahead); an unavailable location is retried next round.

use super::context::VeleroContext;
use chrono::{DateTime, Utc};
use granary_api::velero::{
    BACKUP_NAME_LABEL, BACKUP_UID_LABEL, Backup, BackupStorageLocation,
    BackupStorageLocationAccessMode, BackupStorageLocationPhase, DeleteBackupRequest,
    DeleteBackupRequestPhase, DeleteBackupRequestSpec, GC_FAILURE_LABEL,
};
use granary_velero::label::valid_label_value;
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::sync::Arc;

/// `velero.io/gc-failure` values.
pub const GC_FAILURE_BSL_NOT_FOUND: &str = "BSLNotFound";
pub const GC_FAILURE_BSL_CANNOT_GET: &str = "BSLCannotGet";
pub const GC_FAILURE_BSL_READ_ONLY: &str = "BSLReadOnly";

/// The location of a backup as the controller found it.
#[derive(Debug)]
pub enum LocationLookup<'a> {
    Found(&'a BackupStorageLocation),
    NotFound,
    /// Reading it failed.
    CannotGet,
}

/// What to do with one backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GcDecision {
    /// Not expired (or no expiration): nothing.
    Keep,
    /// Expired but cannot be collected: set `velero.io/gc-failure` to this value.
    Fail(&'static str),
    /// Expired, location unavailable: try again next round (Velero requeues).
    Wait,
    /// Expired and collectable: drop the gc-failure label, and ask for deletion unless a
    /// request is pending.
    Collect,
}

/// Velero's decision for one backup at `now`.
pub fn decide(backup: &Backup, location: LocationLookup<'_>, now: DateTime<Utc>) -> GcDecision {
    let expiration = backup.status.as_ref().and_then(|s| s.expiration);
    match expiration {
        Some(e) if e <= now => {}
        _ => return GcDecision::Keep,
    }
    let location = match location {
        LocationLookup::NotFound => return GcDecision::Fail(GC_FAILURE_BSL_NOT_FOUND),
        LocationLookup::CannotGet => return GcDecision::Fail(GC_FAILURE_BSL_CANNOT_GET),
        LocationLookup::Found(l) => l,
    };
    if location.spec.access_mode == Some(BackupStorageLocationAccessMode::ReadOnly) {
        return GcDecision::Fail(GC_FAILURE_BSL_READ_ONLY);
    }
    if location.status.as_ref().and_then(|s| s.phase) != Some(BackupStorageLocationPhase::Available)
    {
        return GcDecision::Wait;
    }
    GcDecision::Collect
}

/// Whether one of `requests` (those labelled for the backup) is still to be processed.
pub fn pending(requests: &[DeleteBackupRequest]) -> bool {
    requests.iter().any(|r| {
        matches!(
            r.status.as_ref().and_then(|s| s.phase),
            None | Some(DeleteBackupRequestPhase::New | DeleteBackupRequestPhase::InProgress)
        )
    })
}

/// The DeleteBackupRequest Velero creates for `backup` (`delete_helpers.go`).
pub fn delete_request(backup: &Backup) -> DeleteBackupRequest {
    let name = backup.name_any();
    let mut r = DeleteBackupRequest::new(
        "",
        DeleteBackupRequestSpec {
            backup_name: name.clone(),
        },
    );
    r.metadata.name = None;
    r.metadata.generate_name = Some(format!("{name}-"));
    r.metadata.labels = Some(
        [
            (
                BACKUP_NAME_LABEL.to_string(),
                valid_label_value(&name).into_owned(),
            ),
            (
                BACKUP_UID_LABEL.to_string(),
                backup.uid().unwrap_or_default(),
            ),
        ]
        .into(),
    );
    r
}

/// Runs the controller until dropped: one round now, then one every frequency.
pub async fn run(ctx: Arc<VeleroContext>) {
    let every = ctx.settings.garbage_collection_frequency.0;
    loop {
        if let Err(e) = round(&ctx).await {
            tracing::warn!(error = %e, "garbage collection round");
        }
        tokio::time::sleep(every).await;
    }
}

/// Looks at every backup once.
pub async fn round(ctx: &VeleroContext) -> Result<(), kube::Error> {
    let backups = ctx
        .api::<Backup>()
        .list(&ListParams::default())
        .await?
        .items;
    let now = ctx.clock.now();
    for backup in backups {
        let expired = backup
            .status
            .as_ref()
            .and_then(|s| s.expiration)
            .is_some_and(|e| e <= now);
        if !expired {
            continue;
        }
        if let Err(e) = collect(ctx, &backup, now).await {
            tracing::warn!(backup = %backup.name_any(), error = %e, "garbage collection");
        }
    }
    Ok(())
}

async fn collect(
    ctx: &VeleroContext,
    backup: &Backup,
    now: DateTime<Utc>,
) -> Result<(), kube::Error> {
    let name = backup.name_any();
    let location_name = backup.spec.storage_location.clone().unwrap_or_default();
    let found = if location_name.is_empty() {
        Ok(None)
    } else {
        ctx.api::<BackupStorageLocation>()
            .get_opt(&location_name)
            .await
    };
    let lookup = match &found {
        Ok(Some(l)) => LocationLookup::Found(l),
        Ok(None) => LocationLookup::NotFound,
        Err(_) => LocationLookup::CannotGet,
    };
    let label = |value: Option<&str>| json!({"metadata": {"labels": {GC_FAILURE_LABEL: value}}});
    let backups = ctx.api::<Backup>();
    match decide(backup, lookup, now) {
        GcDecision::Keep => Ok(()),
        GcDecision::Wait => {
            tracing::info!(backup = %name, location = %location_name, "expired backup waits for its location to be available");
            Ok(())
        }
        GcDecision::Fail(value) => {
            if backup.labels().get(GC_FAILURE_LABEL).map(String::as_str) != Some(value) {
                tracing::info!(backup = %name, reason = value, "expired backup cannot be collected");
                backups
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&label(Some(value))),
                    )
                    .await?;
            }
            Ok(())
        }
        GcDecision::Collect => {
            if backup.labels().contains_key(GC_FAILURE_LABEL) {
                backups
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&label(None)))
                    .await?;
            }
            let selector = format!(
                "{BACKUP_NAME_LABEL}={},{BACKUP_UID_LABEL}={}",
                valid_label_value(&name),
                backup.uid().unwrap_or_default()
            );
            let requests = ctx.api::<DeleteBackupRequest>();
            let existing = requests
                .list(&ListParams::default().labels(&selector))
                .await?
                .items;
            if pending(&existing) {
                return Ok(());
            }
            let created = requests
                .create(&PostParams::default(), &delete_request(backup))
                .await?;
            tracing::info!(backup = %name, request = %created.name_any(), "expired backup: deletion requested");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::velero::{
        BackupStatus, BackupStorageLocationSpec, BackupStorageLocationStatus,
        DeleteBackupRequestStatus,
    };

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().expect("time")
    }

    fn backup(expiration: Option<&str>) -> Backup {
        let mut b = Backup::new("b1", Default::default());
        b.metadata.uid = Some("uid-1".into());
        b.spec.storage_location = Some("default".into());
        b.status = Some(BackupStatus {
            expiration: expiration.map(t),
            ..Default::default()
        });
        b
    }

    fn location(
        mode: Option<BackupStorageLocationAccessMode>,
        phase: Option<BackupStorageLocationPhase>,
    ) -> BackupStorageLocation {
        let mut l = BackupStorageLocation::new(
            "default",
            BackupStorageLocationSpec {
                access_mode: mode,
                ..Default::default()
            },
        );
        l.status = Some(BackupStorageLocationStatus {
            phase,
            ..Default::default()
        });
        l
    }

    #[test]
    fn only_expired_backups_are_collected() {
        let now = t("2026-01-02T00:00:00Z");
        let ok = location(None, Some(BackupStorageLocationPhase::Available));
        let found = || LocationLookup::Found(&ok);
        assert_eq!(decide(&backup(None), found(), now), GcDecision::Keep);
        assert_eq!(
            decide(&backup(Some("2026-01-03T00:00:00Z")), found(), now),
            GcDecision::Keep
        );
        assert_eq!(
            decide(&backup(Some("2026-01-01T00:00:00Z")), found(), now),
            GcDecision::Collect
        );
        assert_eq!(
            decide(&backup(Some("2026-01-02T00:00:00Z")), found(), now),
            GcDecision::Collect
        );
    }

    #[test]
    fn location_problems_give_velero_s_label_values() {
        let now = t("2026-01-02T00:00:00Z");
        let b = backup(Some("2026-01-01T00:00:00Z"));
        assert_eq!(
            decide(&b, LocationLookup::NotFound, now),
            GcDecision::Fail("BSLNotFound")
        );
        assert_eq!(
            decide(&b, LocationLookup::CannotGet, now),
            GcDecision::Fail("BSLCannotGet")
        );
        let ro = location(
            Some(BackupStorageLocationAccessMode::ReadOnly),
            Some(BackupStorageLocationPhase::Available),
        );
        assert_eq!(
            decide(&b, LocationLookup::Found(&ro), now),
            GcDecision::Fail("BSLReadOnly")
        );
        let down = location(None, Some(BackupStorageLocationPhase::Unavailable));
        assert_eq!(
            decide(&b, LocationLookup::Found(&down), now),
            GcDecision::Wait
        );
        let never = location(None, None);
        assert_eq!(
            decide(&b, LocationLookup::Found(&never), now),
            GcDecision::Wait
        );
    }

    #[test]
    fn a_request_is_pending_until_processed() {
        let with = |phase| {
            let mut r = delete_request(&backup(None));
            r.status = Some(DeleteBackupRequestStatus {
                phase,
                errors: None,
            });
            r
        };
        assert!(!pending(&[]));
        assert!(pending(&[with(None)]));
        assert!(pending(&[with(Some(DeleteBackupRequestPhase::New))]));
        assert!(pending(&[with(Some(DeleteBackupRequestPhase::InProgress))]));
        assert!(!pending(&[with(Some(DeleteBackupRequestPhase::Processed))]));
    }

    #[test]
    fn the_request_is_velero_s() {
        let r = delete_request(&backup(None));
        assert_eq!(r.metadata.generate_name.as_deref(), Some("b1-"));
        assert_eq!(r.metadata.name, None);
        assert_eq!(r.spec.backup_name, "b1");
        let labels = r.metadata.labels.expect("labels");
        assert_eq!(labels[BACKUP_NAME_LABEL], "b1");
        assert_eq!(labels[BACKUP_UID_LABEL], "uid-1");
    }
}
