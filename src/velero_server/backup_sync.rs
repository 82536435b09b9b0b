//! The `backup-sync` controller (Velero's `backup_sync_controller.go`): for every
//! Available location whose sync is due (`spec.backupSyncPeriod`, else the server's
//! `backupSyncPeriod`, 1m; 0 disables), import the backups found in the bucket and
//! missing in the cluster — `velero-backup.json` decoded, namespace, `storageLocation`
//! and the `velero.io/storage-location` label set, dangling Schedule owner references
//! dropped, in-flight phases skipped until they expire (then `PartiallyFailed`) — and
//! delete the in-cluster Completed/PartiallyFailed backups of the location that are
//! gone from the bucket; then `status.lastSyncedTime`.
//!
//! This is what lets backups outlive their cluster: any seed or `granary server`
//! pointed at the same location sees every backup there, Velero's own included.

use super::context::{VeleroContext, k8s_time};
use crate::api::velero::{
    Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationPhase, STORAGE_LOCATION_LABEL,
    Schedule,
};
use crate::velero::files::decode_backup_json;
use crate::velero::label::valid_label_value;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use granary_providers::ListEntry;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// The sync period of `location`: its own, else the server's; `None` when 0 (disabled).
pub fn sync_period(location: &BackupStorageLocation, server: Duration) -> Option<Duration> {
    let period = location
        .spec
        .backup_sync_period
        .as_ref()
        .and_then(|d| d.to_std().ok())
        .unwrap_or(server);
    (!period.is_zero()).then_some(period)
}

/// When `location` is next due for a sync (`None`: never, it is disabled or not
/// Available). A location never synced is due now.
pub fn next_sync(
    location: &BackupStorageLocation,
    server: Duration,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let period = sync_period(location, server)?;
    let status = location.status.as_ref();
    if status.and_then(|s| s.phase) != Some(BackupStorageLocationPhase::Available) {
        return None;
    }
    match status.and_then(|s| s.last_synced_time) {
        None => Some(now),
        Some(last) => Some(last + chrono::Duration::from_std(period).unwrap_or_default()),
    }
}

/// Phases a backup is still being worked on in (by plugins or the finalizer).
fn in_flight(phase: Option<BackupPhase>) -> bool {
    use BackupPhase::*;
    matches!(
        phase,
        Some(
            WaitingForPluginOperations
                | WaitingForPluginOperationsPartiallyFailed
                | Finalizing
                | FinalizingPartiallyFailed
        )
    )
}

/// The Backup to create in the cluster for `stored` (decoded `velero-backup.json`), or
/// `None` to skip it for now. `schedules` maps the Schedules of the namespace to UIDs.
pub fn imported(
    mut stored: Backup,
    namespace: &str,
    location: &str,
    schedules: &BTreeMap<String, String>,
    now: DateTime<Utc>,
) -> Option<Backup> {
    let status = stored.status.get_or_insert_with(Default::default);
    if in_flight(status.phase) {
        if status.expiration.is_none_or(|e| e > now) {
            return None;
        }
        status.phase = Some(BackupPhase::PartiallyFailed);
    }
    let meta = &mut stored.metadata;
    meta.namespace = Some(namespace.to_string());
    meta.resource_version = None;
    // The cluster gives it its own identity.
    meta.uid = None;
    meta.creation_timestamp = None;
    meta.generation = None;
    meta.managed_fields = None;
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    meta.finalizers = None;
    meta.labels.get_or_insert_with(Default::default).insert(
        STORAGE_LOCATION_LABEL.to_string(),
        valid_label_value(location).into_owned(),
    );
    if let Some(owners) = meta.owner_references.as_mut() {
        owners.retain(|o| {
            o.kind != "Schedule"
                || o.api_version != "velero.io/v1"
                || schedules.get(&o.name) == Some(&o.uid)
        });
        if owners.is_empty() {
            meta.owner_references = None;
        }
    }
    stored.spec.storage_location = Some(location.to_string());
    Some(stored)
}

/// Backups in the bucket and not in the cluster, in name order.
pub fn missing(in_bucket: &[String], in_cluster: &BTreeSet<String>) -> Vec<String> {
    let mut names: Vec<String> = in_bucket
        .iter()
        .filter(|n| !in_cluster.contains(*n))
        .cloned()
        .collect();
    names.sort();
    names.dedup();
    names
}

/// In-cluster backups of `location` (by its label) that are Completed or
/// PartiallyFailed but no longer in the bucket: Velero deletes them.
pub fn orphans(cluster: &[Backup], location: &str, in_bucket: &BTreeSet<String>) -> Vec<String> {
    let label = valid_label_value(location);
    cluster
        .iter()
        .filter(|b| b.labels().get(STORAGE_LOCATION_LABEL).map(String::as_str) == Some(&*label))
        .filter(|b| {
            matches!(
                b.status.as_ref().and_then(|s| s.phase),
                Some(BackupPhase::Completed | BackupPhase::PartiallyFailed)
            )
        })
        .map(|b| b.name_any())
        .filter(|n| !in_bucket.contains(n))
        .collect()
}

/// Runs the controller until dropped: syncs the due locations, then sleeps until the
/// next is due (at most the server's period).
pub async fn run(ctx: Arc<VeleroContext>) {
    let server = ctx.settings.backup_sync_period.0;
    let idle = if server.is_zero() {
        Duration::from_secs(60)
    } else {
        server
    };
    loop {
        let wait = match round(&ctx).await {
            Ok(Some(next)) => (next - ctx.clock.now()).to_std().unwrap_or_default(),
            Ok(None) => idle,
            Err(e) => {
                tracing::warn!(error = %e, "backup sync round");
                Duration::from_secs(5)
            }
        };
        // At most the server's period (a location added meanwhile), never a busy loop.
        tokio::time::sleep(wait.min(idle).max(Duration::from_millis(100))).await;
    }
}

/// Syncs every due location (the default one first). Returns when the next is due.
pub async fn round(ctx: &VeleroContext) -> Result<Option<DateTime<Utc>>, kube::Error> {
    let server = ctx.settings.backup_sync_period.0;
    let mut locations = ctx
        .api::<BackupStorageLocation>()
        .list(&ListParams::default())
        .await?
        .items;
    locations.sort_by_key(|l| (l.spec.default != Some(true), l.name_any()));
    let mut next: Option<DateTime<Utc>> = None;
    for location in locations {
        let now = ctx.clock.now();
        let Some(due) = next_sync(&location, server, now) else {
            continue;
        };
        if due > now {
            next = Some(next.map_or(due, |n| n.min(due)));
            continue;
        }
        let name = location.name_any();
        if let Err(e) = sync(ctx, &location).await {
            tracing::warn!(location = %name, error = %e, "backup sync");
        }
        let after = sync_period(&location, server).unwrap_or_default();
        let due = ctx.clock.now() + chrono::Duration::from_std(after).unwrap_or_default();
        next = Some(next.map_or(due, |n| n.min(due)));
    }
    Ok(next)
}

#[derive(Debug, thiserror::Error)]
enum SyncError {
    #[error("{0}")]
    Location(#[from] super::context::LocationProblem),
    #[error("listing backups: {0}")]
    Store(#[from] granary_providers::Error),
    #[error("{0}")]
    Kube(#[from] kube::Error),
}

async fn sync(ctx: &VeleroContext, location: &BackupStorageLocation) -> Result<(), SyncError> {
    let name = location.name_any();
    let open = ctx.open(location.clone()).await?;
    let layout = &open.access.layout;
    let bucket = layout.bucket();
    let prefixes: Vec<String> = open
        .store
        .list(bucket, &layout.backups_dir(), Some("/"))
        .try_filter_map(|e| async move {
            Ok(match e {
                ListEntry::Prefix(p) => Some(p),
                ListEntry::Object(_) => None,
            })
        })
        .try_collect()
        .await?;
    let in_bucket = layout.backup_names_from_prefixes(&prefixes);
    let backups = ctx.api::<Backup>();
    let cluster = backups.list(&ListParams::default()).await?.items;
    let in_cluster: BTreeSet<String> = cluster.iter().map(|b| b.name_any()).collect();
    let to_import = missing(&in_bucket, &in_cluster);
    let schedules: BTreeMap<String, String> = if to_import.is_empty() {
        BTreeMap::new()
    } else {
        ctx.api::<Schedule>()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(|s| (s.name_any(), s.uid().unwrap_or_default()))
            .collect()
    };
    for backup_name in &to_import {
        let Ok(keys) = layout.backup(backup_name) else {
            continue;
        };
        // Only a backup whose metadata exists is one (Velero's BackupExists).
        let bytes = match granary_providers::get_bytes(
            open.store.as_ref(),
            bucket,
            &keys.metadata(),
        )
        .await
        {
            Ok(b) => b,
            Err(granary_providers::Error::NotFound(_)) => continue,
            Err(e) => {
                tracing::warn!(location = %name, backup = %backup_name, error = %e, "reading velero-backup.json");
                continue;
            }
        };
        let stored = match decode_backup_json(&bytes) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(location = %name, backup = %backup_name, error = %e, "velero-backup.json cannot be read; not synced");
                continue;
            }
        };
        if stored.name_any() != *backup_name {
            tracing::warn!(location = %name, backup = %backup_name, named = %stored.name_any(), "velero-backup.json names another backup; not synced");
            continue;
        }
        let Some(backup) = imported(stored, ctx.namespace(), &name, &schedules, ctx.clock.now())
        else {
            tracing::debug!(location = %name, backup = %backup_name, "skipping non-expired incomplete backup");
            continue;
        };
        match backups.create(&PostParams::default(), &backup).await {
            Ok(_) => {
                tracing::info!(location = %name, backup = %backup_name, "backup synced from object storage")
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                tracing::warn!(location = %name, backup = %backup_name, error = %e, "creating synced backup")
            }
        }
    }
    let in_bucket: BTreeSet<String> = in_bucket.into_iter().collect();
    for orphan in orphans(&cluster, &name, &in_bucket) {
        match backups.delete(&orphan, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(location = %name, backup = %orphan, "deleted orphaned backup: not in object storage")
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                tracing::warn!(location = %name, backup = %orphan, error = %e, "deleting orphaned backup")
            }
        }
    }
    let patch = json!({"status": {"lastSyncedTime": k8s_time(ctx.clock.now())}});
    ctx.api::<BackupStorageLocation>()
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::velero::{
        BackupStatus, BackupStorageLocationSpec, BackupStorageLocationStatus,
        Duration as GoDuration,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().expect("time")
    }

    fn location(
        period: Option<&str>,
        phase: Option<BackupStorageLocationPhase>,
        last: Option<&str>,
    ) -> BackupStorageLocation {
        let mut l = BackupStorageLocation::new(
            "default",
            BackupStorageLocationSpec {
                backup_sync_period: period.map(|p| p.parse::<GoDuration>().expect("duration")),
                ..Default::default()
            },
        );
        l.status = Some(BackupStorageLocationStatus {
            phase,
            last_synced_time: last.map(t),
            ..Default::default()
        });
        l
    }

    fn stored(phase: BackupPhase, expiration: Option<&str>) -> Backup {
        let mut b = Backup::new("b1", Default::default());
        b.metadata.namespace = Some("velero".into());
        b.metadata.uid = Some("old-uid".into());
        b.metadata.resource_version = Some("42".into());
        b.spec.storage_location = Some("elsewhere".into());
        b.status = Some(BackupStatus {
            phase: Some(phase),
            expiration: expiration.map(t),
            ..Default::default()
        });
        b
    }

    const MIN: Duration = Duration::from_secs(60);
    use BackupStorageLocationPhase::{Available, Unavailable};

    #[test]
    fn periods_and_due_times() {
        let now = t("2026-01-01T00:10:00Z");
        assert_eq!(sync_period(&location(None, None, None), MIN), Some(MIN));
        assert_eq!(
            sync_period(&location(Some("5s"), None, None), MIN),
            Some(Duration::from_secs(5))
        );
        assert_eq!(sync_period(&location(Some("0s"), None, None), MIN), None);
        assert_eq!(
            sync_period(&location(None, None, None), Duration::ZERO),
            None
        );
        assert_eq!(
            next_sync(&location(None, Some(Available), None), MIN, now),
            Some(now)
        );
        assert_eq!(
            next_sync(
                &location(None, Some(Available), Some("2026-01-01T00:09:30Z")),
                MIN,
                now
            ),
            Some(t("2026-01-01T00:10:30Z"))
        );
        assert_eq!(
            next_sync(&location(None, Some(Unavailable), None), MIN, now),
            None
        );
        assert_eq!(next_sync(&location(None, None, None), MIN, now), None);
        assert_eq!(
            next_sync(&location(Some("0s"), Some(Available), None), MIN, now),
            None
        );
    }

    #[test]
    fn an_imported_backup_is_velero_s() {
        let now = t("2026-01-01T00:00:00Z");
        let mut b = stored(BackupPhase::Completed, None);
        b.metadata.owner_references = Some(vec![
            OwnerReference {
                api_version: "velero.io/v1".into(),
                kind: "Schedule".into(),
                name: "daily".into(),
                uid: "s-1".into(),
                ..Default::default()
            },
            OwnerReference {
                api_version: "velero.io/v1".into(),
                kind: "Schedule".into(),
                name: "gone".into(),
                uid: "s-2".into(),
                ..Default::default()
            },
            OwnerReference {
                api_version: "velero.io/v1".into(),
                kind: "Schedule".into(),
                name: "hourly".into(),
                uid: "other-uid".into(),
                ..Default::default()
            },
        ]);
        let schedules = [
            ("daily".to_string(), "s-1".to_string()),
            ("hourly".to_string(), "s-3".to_string()),
        ]
        .into();
        let i = imported(b, "backups", "primary", &schedules, now).expect("imported");
        assert_eq!(i.metadata.namespace.as_deref(), Some("backups"));
        assert_eq!(i.metadata.resource_version, None);
        assert_eq!(i.metadata.uid, None);
        assert_eq!(i.spec.storage_location.as_deref(), Some("primary"));
        assert_eq!(i.labels()[STORAGE_LOCATION_LABEL], "primary");
        let owners = i.metadata.owner_references.expect("owners");
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].name, "daily");
        assert_eq!(i.status.and_then(|s| s.phase), Some(BackupPhase::Completed));
    }

    #[test]
    fn in_flight_backups_wait_until_they_expire() {
        let now = t("2026-01-02T00:00:00Z");
        let none = BTreeMap::new();
        for phase in [
            BackupPhase::WaitingForPluginOperations,
            BackupPhase::WaitingForPluginOperationsPartiallyFailed,
            BackupPhase::Finalizing,
            BackupPhase::FinalizingPartiallyFailed,
        ] {
            assert_eq!(imported(stored(phase, None), "v", "l", &none, now), None);
            assert_eq!(
                imported(
                    stored(phase, Some("2026-01-03T00:00:00Z")),
                    "v",
                    "l",
                    &none,
                    now
                ),
                None
            );
            let expired = imported(
                stored(phase, Some("2026-01-01T00:00:00Z")),
                "v",
                "l",
                &none,
                now,
            )
            .expect("expired is imported");
            assert_eq!(
                expired.status.and_then(|s| s.phase),
                Some(BackupPhase::PartiallyFailed)
            );
        }
        for phase in [
            BackupPhase::Failed,
            BackupPhase::PartiallyFailed,
            BackupPhase::InProgress,
        ] {
            let i = imported(stored(phase, None), "v", "l", &none, now).expect("imported");
            assert_eq!(i.status.and_then(|s| s.phase), Some(phase));
        }
    }

    #[test]
    fn missing_and_orphans() {
        let bucket = vec!["a".to_string(), "c".into(), "b".into()];
        let cluster: BTreeSet<String> = ["b".to_string(), "x".into()].into();
        assert_eq!(missing(&bucket, &cluster), vec!["a", "c"]);

        let with = |name: &str, location: &str, phase: BackupPhase| {
            let mut b = stored(phase, None);
            b.metadata.name = Some(name.into());
            b.labels_mut()
                .insert(STORAGE_LOCATION_LABEL.into(), location.into());
            b
        };
        let cluster = vec![
            with("kept", "default", BackupPhase::Completed),
            with("gone", "default", BackupPhase::Completed),
            with("gone-partial", "default", BackupPhase::PartiallyFailed),
            with("gone-failed", "default", BackupPhase::Failed),
            with("gone-deleting", "default", BackupPhase::Deleting),
            with("gone-running", "default", BackupPhase::InProgress),
            with("elsewhere", "other", BackupPhase::Completed),
        ];
        let bucket: BTreeSet<String> = ["kept".to_string()].into();
        assert_eq!(
            orphans(&cluster, "default", &bucket),
            vec!["gone", "gone-partial"]
        );
    }

    proptest::proptest! {
        /// Whatever is in the bucket and the cluster: nothing is both imported and
        /// present, every bucket backup ends up in exactly one of the two, and an orphan
        /// is never a backup that is still in the bucket.
        #[test]
        fn import_and_orphans_never_overlap(
            bucket in proptest::collection::vec("[a-e]", 0..8),
            cluster in proptest::collection::vec(("[a-e]", 0usize..4), 0..8),
        ) {
            let phases = [
                BackupPhase::Completed,
                BackupPhase::PartiallyFailed,
                BackupPhase::Deleting,
                BackupPhase::InProgress,
            ];
            let backups: Vec<Backup> = cluster
                .iter()
                .map(|(name, p)| {
                    let mut b = stored(phases[*p], None);
                    b.metadata.name = Some(name.clone());
                    b.labels_mut().insert(STORAGE_LOCATION_LABEL.into(), "default".into());
                    b
                })
                .collect();
            let names: BTreeSet<String> = cluster.iter().map(|(n, _)| n.clone()).collect();
            let to_import = missing(&bucket, &names);
            for n in &to_import {
                proptest::prop_assert!(!names.contains(n));
            }
            for n in &bucket {
                proptest::prop_assert!(names.contains(n) != to_import.contains(n));
            }
            let in_bucket: BTreeSet<String> = bucket.iter().cloned().collect();
            for o in orphans(&backups, "default", &in_bucket) {
                proptest::prop_assert!(!in_bucket.contains(&o));
                proptest::prop_assert!(names.contains(&o));
            }
        }
    }
}
