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
//!
//! Whoever controls a bucket controls what sync reads, so an import is a record and
//! never work ([`imported`]): a backup that is not finished (New, Queued, InProgress, …)
//! is imported `Failed` with its phase named, every import carries
//! [`SYNCED_LABEL`](granary_api::velero::SYNCED_LABEL), which the queue, the backup
//! controller and the schedules ignore, and the schedule-ownership annotation never comes
//! from a bucket. A location made for a namespace owner's NonAdminBackupStorageLocation
//! is read as that owner's: names must carry the namespace's NACUUID prefix, and no
//! label, annotation or owner reference of the bucket's survives but NAC's own.
//!
//! A location of another seed's prefix (labelled `granary.gardener.cloud/source-seed`,
//! docs/architecture.md#sibling-locations) lists its backups as `<seed>.<name>`, the
//! stored name in `granary.gardener.cloud/stored-name`, so the same Schedule on two
//! seeds never hides one seed's backups behind the other's; their owner references and
//! schedule label stay behind (they name the other seed's Schedules).
//!
//! Every import is checked against its integrity record (docs/formats.md#integrity-record)
//! with every object read: the Backup carries the verdict
//! (`granary.gardener.cloud/integrity`: `verified`, `unsigned`, `unknown-key`,
//! `mismatch`), anything but `verified` gets a Warning event, and
//! `granary_backup_integrity_total{check="sync"}` counts them. A restore checks again; the
//! annotation is for people. Sync waits until the signing keys are known.

use super::context::{VeleroContext, k8s_time};
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use granary_api::oadp::{
    MANAGED_BY_LABEL, NAB_ORIGIN_NACUUID_LABEL, NAB_ORIGIN_NAME_ANNOTATION,
    NAB_ORIGIN_NAMESPACE_ANNOTATION, OADP_LABEL, nac_name_prefix,
};
use granary_api::velero::{
    Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationPhase, INTEGRITY_ANNOTATION,
    INTEGRITY_CHECKED_AT_ANNOTATION, INTEGRITY_REASON_ANNOTATION, SCHEDULE_NAME_LABEL,
    SCHEDULE_UID_ANNOTATION, SOURCE_SEED_LABEL, STORAGE_LOCATION_LABEL, STORED_NAME_ANNOTATION,
    SYNCED_LABEL, Schedule, sibling_backup_name,
};
use granary_providers::ListEntry;
use granary_velero::files::decode_backup_json;
use granary_velero::integrity::{ObjectDigest, Verdict};
use granary_velero::label::valid_label_value;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// How many backups a sync imports at a time (reads from the bucket and a create each).
pub const IMPORT_CONCURRENCY: usize = 8;

/// The names of the backups under a location's `backups/`: one delimited listing of
/// its prefixes (what sync imports from, `backup verify --all` checks and the scale
/// benchmark's peer reads).
pub async fn backup_names(
    store: &dyn granary_providers::ObjectStore,
    layout: &granary_velero::layout::StorageLayout,
) -> Result<Vec<String>, granary_providers::Error> {
    let prefixes: Vec<String> = store
        .list(layout.bucket(), &layout.backups_dir(), Some("/"))
        .try_filter_map(|e| async move {
            Ok(match e {
                ListEntry::Prefix(p) => Some(p),
                ListEntry::Object(_) => None,
            })
        })
        .try_collect()
        .await?;
    Ok(layout.backup_names_from_prefixes(&prefixes))
}

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

/// Phases of a finished backup: the only ones imported as they are.
fn finished(phase: Option<BackupPhase>) -> bool {
    use BackupPhase::*;
    matches!(
        phase,
        Some(Completed | PartiallyFailed | Failed | FailedValidation)
    )
}

/// Whose bucket a location reads, and so how far its `velero-backup.json` is believed.
#[derive(Clone, Copy, Debug)]
pub enum Origin<'a> {
    /// An administrator's location. `schedules` maps the namespace's Schedules to their
    /// UIDs (an owner reference to a Schedule that is not there is dropped).
    Admin {
        schedules: &'a BTreeMap<String, String>,
    },
    /// A location made for a NonAdminBackupStorageLocation of `namespace`: the bucket is
    /// that namespace owner's. Names are confined to the namespace's NACUUID prefix, and
    /// no label, annotation or owner reference of the bucket's is kept but NAC's own, the
    /// origin namespace always being `namespace`.
    Tenant { namespace: &'a str },
    /// A read-only location of seed `seed`'s Velero prefix: its backups are listed as
    /// `<seed>.<name>` with the stored name in [`STORED_NAME_ANNOTATION`].
    Sibling { seed: &'a str },
}

impl<'a> Origin<'a> {
    /// The origin of `location`'s backups: `tenant` is the namespace of the owner it was
    /// made for ([`tenant_namespace`](super::location::tenant_namespace)), `schedules`
    /// those of an administrator's.
    pub fn of(
        location: &'a BackupStorageLocation,
        tenant: Option<&'a str>,
        schedules: &'a BTreeMap<String, String>,
    ) -> Origin<'a> {
        if let Some(namespace) = tenant {
            Origin::Tenant { namespace }
        } else if let Some(seed) = location.labels().get(SOURCE_SEED_LABEL) {
            Origin::Sibling { seed }
        } else {
            Origin::Admin { schedules }
        }
    }
}

/// What sync does with one `velero-backup.json`.
#[derive(Clone, Debug, PartialEq)]
pub enum Import {
    /// Create this Backup; `warning`, when set, is said in a Warning event on it.
    Create {
        backup: Box<Backup>,
        warning: Option<String>,
    },
    /// Not now (a backup still being finalized elsewhere): try again at the next sync.
    Later,
    /// Never: the reason goes into a Warning event on the location.
    Refuse(String),
}

/// Labels of a tenant's backup that are kept: NAC's own, which tie the backup to a
/// NonAdminBackup of the location's namespace (checked again where they are used).
const TENANT_KEPT_LABELS: [&str; 3] = [OADP_LABEL, MANAGED_BY_LABEL, NAB_ORIGIN_NACUUID_LABEL];

/// The Backup to create in the cluster for `stored` (decoded `velero-backup.json`) read
/// from location `location` of `origin`. A bucket is a record, never a command: a
/// backup that is not finished is imported `Failed` (its phase named in
/// `failureReason`), except one being finalized, which waits until it expires (then
/// `PartiallyFailed`, as Velero's server would end it). Every import carries
/// [`SYNCED_LABEL`], which the queue, the backup controller and the schedules ignore.
pub fn imported(
    mut stored: Backup,
    namespace: &str,
    location: &str,
    origin: Origin<'_>,
    now: DateTime<Utc>,
) -> Import {
    let name = stored.name_any();
    if let Origin::Tenant { namespace: tenant } = origin {
        let prefix = nac_name_prefix(tenant);
        if !name.starts_with(&prefix) {
            return Import::Refuse(format!(
                "backup {name:?} in the location of namespace {tenant} is not synced: backups \
                 of a namespace owner's location must be named {prefix}…"
            ));
        }
    }
    let status = stored.status.get_or_insert_with(Default::default);
    let mut warning = None;
    if in_flight(status.phase) {
        if status.expiration.is_none_or(|e| e > now) {
            return Import::Later;
        }
        status.phase = Some(BackupPhase::PartiallyFailed);
    } else if !finished(status.phase) {
        let was = status.phase.map_or("New", BackupPhase::as_str);
        let reason = format!(
            "found in object storage in phase {was}; a backup read from a bucket is a record \
             and is never run"
        );
        status.phase = Some(BackupPhase::Failed);
        status.failure_reason = Some(reason.clone());
        status.completion_timestamp.get_or_insert(now);
        warning = Some(format!("backup {name:?} imported as Failed: {reason}"));
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
    // What says where a backup's files are, or which seed wrote it, is never a bucket's.
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(STORED_NAME_ANNOTATION);
    }
    if let Some(l) = meta.labels.as_mut() {
        l.remove(SOURCE_SEED_LABEL);
    }
    match origin {
        Origin::Admin { schedules } => {
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
            if let Some(a) = meta.annotations.as_mut() {
                a.remove(SCHEDULE_UID_ANNOTATION);
            }
        }
        Origin::Tenant { namespace: tenant } => {
            meta.owner_references = None;
            let labels = meta.labels.take().unwrap_or_default();
            meta.labels = Some(
                labels
                    .into_iter()
                    .filter(|(k, v)| {
                        TENANT_KEPT_LABELS.contains(&k.as_str())
                            && (k != NAB_ORIGIN_NACUUID_LABEL || *v == name)
                    })
                    .collect(),
            );
            let annotations = meta.annotations.take().unwrap_or_default();
            let mut kept: BTreeMap<String, String> = annotations
                .into_iter()
                .filter(|(k, _)| k == NAB_ORIGIN_NAME_ANNOTATION)
                .collect();
            kept.insert(
                NAB_ORIGIN_NAMESPACE_ANNOTATION.to_string(),
                tenant.to_string(),
            );
            meta.annotations = Some(kept);
        }
        Origin::Sibling { seed } => {
            let cluster_name = sibling_backup_name(seed, &name);
            if !granary_api::names::is_dns1123_subdomain(&cluster_name) {
                return Import::Refuse(format!(
                    "backup {name:?} of seed {seed} is not synced: {cluster_name:?} is not a \
                     valid name (at most 253 characters)"
                ));
            }
            meta.name = Some(cluster_name);
            meta.owner_references = None;
            let annotations = meta.annotations.get_or_insert_with(Default::default);
            annotations.remove(SCHEDULE_UID_ANNOTATION);
            annotations.insert(STORED_NAME_ANNOTATION.to_string(), name.clone());
            let labels = meta.labels.get_or_insert_with(Default::default);
            labels.remove(SCHEDULE_NAME_LABEL);
            labels.insert(SOURCE_SEED_LABEL.to_string(), seed.to_string());
        }
    }
    let labels = meta.labels.get_or_insert_with(Default::default);
    labels.insert(
        STORAGE_LOCATION_LABEL.to_string(),
        valid_label_value(location).into_owned(),
    );
    labels.insert(SYNCED_LABEL.to_string(), "true".to_string());
    stored.spec.storage_location = Some(location.to_string());
    Import::Create {
        backup: Box::new(stored),
        warning,
    }
}

/// The annotations that record an integrity check on a Backup: the verdict, why (when
/// it is not `verified`) and when.
pub fn integrity_annotations(verdict: &Verdict, now: DateTime<Utc>) -> BTreeMap<String, String> {
    let mut a = BTreeMap::from([
        (INTEGRITY_ANNOTATION.to_owned(), verdict.as_str().to_owned()),
        (INTEGRITY_CHECKED_AT_ANNOTATION.to_owned(), k8s_time(now)),
    ]);
    if !verdict.is_verified() {
        a.insert(INTEGRITY_REASON_ANNOTATION.to_owned(), verdict.describe());
    }
    a
}

/// The Warning event (reason, message) for a verdict that is not `verified`.
pub fn integrity_event(verdict: &Verdict) -> Option<(&'static str, String)> {
    match verdict {
        Verdict::Verified { .. } => None,
        Verdict::Unsigned => Some(("BackupUnsigned", verdict.describe())),
        Verdict::UnknownKey { .. } | Verdict::Mismatch { .. } => {
            Some(("IntegrityCheckFailed", verdict.describe()))
        }
    }
}

/// The stored names sync counts as already in the cluster for a location of `origin`
/// named `location`: every Backup's name (names are one namespace's), and for another
/// seed's location the stored names of its own Backups.
pub fn in_cluster(cluster: &[Backup], location: &str, origin: Origin<'_>) -> BTreeSet<String> {
    match origin {
        Origin::Sibling { .. } => cluster
            .iter()
            .filter(|b| b.spec.storage_location.as_deref() == Some(location))
            .map(Backup::stored_name)
            .collect(),
        _ => cluster.iter().map(|b| b.name_any()).collect(),
    }
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
/// PartiallyFailed but no longer in the bucket (by their stored name): Velero deletes them.
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
        .filter(|b| !in_bucket.contains(&b.stored_name()))
        .map(|b| b.name_any())
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
    let keyring = ctx.keys.current();
    if keyring.is_empty() {
        // Without keys every signed backup would look `unknown-key`: wait for them.
        tracing::info!(location = %name, "sync waits for the integrity signing keys");
        return Ok(());
    }
    let open = ctx.open(location.clone()).await?;
    let layout = &open.access.layout;
    let bucket = layout.bucket();
    let in_bucket = backup_names(open.store.as_ref(), layout).await?;
    let backups = ctx.api::<Backup>();
    let cluster = backups.list(&ListParams::default()).await?.items;
    let tenant = super::location::tenant_namespace(location);
    let mut schedules = BTreeMap::new();
    let in_cluster = in_cluster(
        &cluster,
        &name,
        Origin::of(location, tenant.as_deref(), &schedules),
    );
    let to_import = missing(&in_bucket, &in_cluster);
    if !to_import.is_empty() {
        schedules = ctx
            .api::<Schedule>()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(|s| (s.name_any(), s.uid().unwrap_or_default()))
            .collect();
    }
    let origin = Origin::of(location, tenant.as_deref(), &schedules);
    // Imports run IMPORT_CONCURRENCY at a time: each is a few reads and one create.
    let (name, keyring, tenant, backups, open) = (&name, &keyring, &tenant, &backups, &open);
    futures::stream::iter(&to_import)
        .for_each_concurrent(IMPORT_CONCURRENCY, |backup_name| async move {
            let Ok(keys) = layout.backup(backup_name) else {
                return;
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
                Err(granary_providers::Error::NotFound(_)) => return,
                Err(e) => {
                    tracing::warn!(location = %name, backup = %backup_name, error = %e, "reading velero-backup.json");
                    return;
                }
            };
            let stored = match decode_backup_json(&bytes) {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(location = %name, backup = %backup_name, error = %e, "velero-backup.json cannot be read; not synced");
                    return;
                }
            };
            if stored.name_any() != *backup_name {
                tracing::warn!(location = %name, backup = %backup_name, named = %stored.name_any(), "velero-backup.json names another backup; not synced");
                return;
            }
            let (mut backup, warning) = match imported(
                stored,
                ctx.namespace(),
                name,
                origin,
                ctx.clock.now(),
            ) {
                Import::Create { backup, warning } => (backup, warning),
                Import::Later => {
                    tracing::debug!(location = %name, backup = %backup_name, "skipping non-expired incomplete backup");
                    return;
                }
                Import::Refuse(reason) => {
                    tracing::warn!(location = %name, backup = %backup_name, reason = %reason, "backup not synced");
                    ctx.event(location, EventType::Warning, "BackupNotSynced", reason)
                        .await;
                    return;
                }
            };
            // Every import is checked against its integrity record, all objects read: the
            // `velero-backup.json` imported is the one read above (checked as read, never
            // read twice), the others read by the check.
            let metadata = keys.metadata();
            let skip = [crate::integrity::name_in(keys.dir(), &metadata)];
            let verdict = match crate::integrity::check_backup(
                open.store.as_ref(),
                layout,
                backup_name,
                keyring,
                tenant.as_deref(),
                crate::integrity::Hash::AllBut(&skip),
            )
            .await
            {
                Ok(c) => match (&c.verdict, &c.record) {
                    (Verdict::Verified { .. }, Some(record)) => record
                        .check_object(skip[0], &ObjectDigest::of(&bytes))
                        .map_or_else(|mismatch| mismatch, |()| c.verdict),
                    _ => c.verdict,
                },
                Err(e) => {
                    tracing::warn!(location = %name, backup = %backup_name, error = %e, "not synced this round");
                    return;
                }
            };
            // Set here, never from the bucket: what it says of itself is dropped first.
            let annotations = backup
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            annotations.remove(INTEGRITY_REASON_ANNOTATION);
            annotations.extend(integrity_annotations(&verdict, ctx.clock.now()));
            ctx.metrics
                .integrity
                .with_label_values(&["sync", verdict.as_str()])
                .inc();
            match backups.create(&PostParams::default(), &backup).await {
                Ok(created) => {
                    tracing::info!(location = %name, backup = %backup_name, integrity = verdict.as_str(), "backup synced from object storage");
                    if let Some(warning) = warning {
                        ctx.event(&created, EventType::Warning, "SyncedUnfinished", warning)
                            .await;
                    }
                    if let Some((reason, message)) = integrity_event(&verdict) {
                        ctx.event(&created, EventType::Warning, reason, message)
                            .await;
                    }
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    tracing::warn!(location = %name, backup = %backup_name, error = %e, "creating synced backup")
                }
            }
        })
        .await;
    let in_bucket: BTreeSet<String> = in_bucket.into_iter().collect();
    for orphan in orphans(&cluster, name, &in_bucket) {
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
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::velero::SCHEDULE_NAME_LABEL;
    use granary_api::velero::{
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

    fn admin_import(b: Backup, schedules: &BTreeMap<String, String>, now: DateTime<Utc>) -> Import {
        imported(b, "backups", "primary", Origin::Admin { schedules }, now)
    }

    fn created(i: Import) -> (Backup, Option<String>) {
        match i {
            Import::Create { backup, warning } => (*backup, warning),
            other => panic!("not imported: {other:?}"),
        }
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
        b.metadata.annotations = Some(
            [
                (SCHEDULE_UID_ANNOTATION.to_string(), "s-1".to_string()),
                ("note".to_string(), "kept".to_string()),
            ]
            .into(),
        );
        let schedules = [
            ("daily".to_string(), "s-1".to_string()),
            ("hourly".to_string(), "s-3".to_string()),
        ]
        .into();
        let (i, warning) = created(admin_import(b, &schedules, now));
        assert_eq!(warning, None);
        assert_eq!(i.metadata.namespace.as_deref(), Some("backups"));
        assert_eq!(i.metadata.resource_version, None);
        assert_eq!(i.metadata.uid, None);
        assert_eq!(i.spec.storage_location.as_deref(), Some("primary"));
        assert_eq!(i.labels()[STORAGE_LOCATION_LABEL], "primary");
        assert_eq!(i.labels()[SYNCED_LABEL], "true");
        assert!(granary_api::velero::is_synced(&i));
        // The schedule-ownership annotation never comes from a bucket.
        assert_eq!(i.annotations().keys().collect::<Vec<_>>(), vec!["note"]);
        let owners = i.metadata.owner_references.clone().expect("owners");
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
            assert_eq!(admin_import(stored(phase, None), &none, now), Import::Later);
            assert_eq!(
                admin_import(stored(phase, Some("2026-01-03T00:00:00Z")), &none, now),
                Import::Later
            );
            let (expired, _) = created(admin_import(
                stored(phase, Some("2026-01-01T00:00:00Z")),
                &none,
                now,
            ));
            assert_eq!(
                expired.status.and_then(|s| s.phase),
                Some(BackupPhase::PartiallyFailed)
            );
        }
        for phase in [
            BackupPhase::Completed,
            BackupPhase::Failed,
            BackupPhase::PartiallyFailed,
            BackupPhase::FailedValidation,
        ] {
            let (i, warning) = created(admin_import(stored(phase, None), &none, now));
            assert_eq!(i.status.and_then(|s| s.phase), Some(phase));
            assert_eq!(warning, None);
        }
    }

    #[test]
    fn an_unfinished_backup_is_imported_failed_never_as_work() {
        let now = t("2026-01-02T00:00:00Z");
        let none = BTreeMap::new();
        let mut unset = stored(BackupPhase::New, None);
        unset.status = None;
        let phases = [
            BackupPhase::New,
            BackupPhase::Queued,
            BackupPhase::ReadyToStart,
            BackupPhase::InProgress,
            BackupPhase::Deleting,
        ];
        let cases = phases
            .iter()
            .map(|p| (p.as_str(), stored(*p, None)))
            .chain([("New", unset)]);
        for (was, b) in cases {
            let (i, warning) = created(admin_import(b, &none, now));
            let status = i.status.expect("status");
            assert_eq!(status.phase, Some(BackupPhase::Failed), "{was}");
            let reason = status.failure_reason.expect("reason");
            assert!(reason.contains(&format!("phase {was}")), "{reason}");
            assert!(status.completion_timestamp.is_some());
            assert!(warning.expect("warning").contains("imported as Failed"));
        }
    }

    #[test]
    fn a_tenant_s_backup_keeps_nothing_of_the_bucket_but_nac_s_own() {
        let now = t("2026-01-02T00:00:00Z");
        let tenant = |mut b: Backup, name: &str| {
            b.metadata.name = Some(name.into());
            imported(
                b,
                "velero",
                "nabsl-loc",
                Origin::Tenant {
                    namespace: "team-a",
                },
                now,
            )
        };
        let mut b = stored(BackupPhase::Completed, None);
        let name = "team-a-mine-1a3d4da8-0f97-4117-a9c6-19e2c97d978a";
        b.metadata.labels = Some(
            [
                (SCHEDULE_NAME_LABEL, "nightly"),
                (OADP_LABEL, "True"),
                (MANAGED_BY_LABEL, "oadp-nac-controller"),
                (NAB_ORIGIN_NACUUID_LABEL, name),
                ("granary.gardener.cloud/synced", "false"),
                ("anything", "else"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        b.metadata.annotations = Some(
            [
                (NAB_ORIGIN_NAME_ANNOTATION, "mine"),
                (NAB_ORIGIN_NAMESPACE_ANNOTATION, "team-b"),
                (SCHEDULE_UID_ANNOTATION, "s-1"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        b.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "velero.io/v1".into(),
            kind: "Schedule".into(),
            name: "nightly".into(),
            uid: "s-1".into(),
            ..Default::default()
        }]);
        let (i, _) = created(tenant(b.clone(), name));
        let labels: Vec<(&str, &str)> = i
            .labels()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            labels,
            vec![
                (MANAGED_BY_LABEL, "oadp-nac-controller"),
                (SYNCED_LABEL, "true"),
                (OADP_LABEL, "True"),
                (NAB_ORIGIN_NACUUID_LABEL, name),
                (STORAGE_LOCATION_LABEL, "nabsl-loc"),
            ]
        );
        assert_eq!(i.annotations()[NAB_ORIGIN_NAMESPACE_ANNOTATION], "team-a");
        assert_eq!(i.annotations()[NAB_ORIGIN_NAME_ANNOTATION], "mine");
        assert_eq!(i.annotations().len(), 2);
        assert_eq!(i.metadata.owner_references, None);
        // A NACUUID label that is not the backup's own name is dropped.
        let (other, _) = created(tenant(b.clone(), "team-a-other"));
        assert!(!other.labels().contains_key(NAB_ORIGIN_NACUUID_LABEL));
        // Names outside the namespace's prefix are refused: an administrator's, a
        // schedule's, another namespace's, or one only sharing the first letters.
        for foreign in [
            "nightly-20260101000000",
            "team-b-mine",
            "team-ab-mine",
            "team-a",
        ] {
            match tenant(b.clone(), foreign) {
                Import::Refuse(reason) => assert!(reason.contains("team-a-"), "{reason}"),
                other => panic!("{foreign}: {other:?}"),
            }
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

    #[test]
    fn another_seeds_backup_is_listed_under_its_seeds_name_and_found_by_its_stored_name() {
        let now = t("2026-01-01T00:00:00Z");
        let mut b = stored(BackupPhase::Completed, None);
        b.metadata.name = Some("daily-20260101000000".into());
        b.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "velero.io/v1".into(),
            kind: "Schedule".into(),
            name: "daily".into(),
            uid: "s-1".into(),
            ..Default::default()
        }]);
        b.labels_mut()
            .insert(SCHEDULE_NAME_LABEL.into(), "daily".into());
        b.labels_mut().insert("team".into(), "web".into());
        // What the other seed's bucket says of the name and the seed is dropped.
        b.labels_mut()
            .insert(SOURCE_SEED_LABEL.into(), "forged".into());
        b.annotations_mut()
            .insert(STORED_NAME_ANNOTATION.into(), "someone-else".into());
        let (i, _) = created(imported(
            b.clone(),
            "velero",
            "seed-eu-1",
            Origin::Sibling { seed: "eu-1" },
            now,
        ));
        assert_eq!(i.name_any(), "eu-1.daily-20260101000000");
        assert_eq!(i.stored_name(), "daily-20260101000000");
        assert_eq!(i.labels()[SOURCE_SEED_LABEL], "eu-1");
        assert_eq!(i.labels()["team"], "web");
        assert_eq!(i.labels()[STORAGE_LOCATION_LABEL], "seed-eu-1");
        assert!(
            !i.labels().contains_key(SCHEDULE_NAME_LABEL),
            "not our Schedule's"
        );
        assert_eq!(i.metadata.owner_references, None);
        assert_eq!(i.spec.storage_location.as_deref(), Some("seed-eu-1"));
        // An administrator's location never takes either from its bucket.
        let (admin, _) = created(admin_import(b.clone(), &BTreeMap::new(), now));
        assert_eq!(admin.name_any(), "daily-20260101000000");
        assert!(!admin.annotations().contains_key(STORED_NAME_ANNOTATION));
        assert!(!admin.labels().contains_key(SOURCE_SEED_LABEL));
        assert_eq!(admin.stored_name(), "daily-20260101000000");
        // A name too long once prefixed is refused, never cut.
        b.metadata.name = Some("x".repeat(250));
        assert!(matches!(
            imported(b, "velero", "seed-eu-1", Origin::Sibling { seed: "eu-1" }, now),
            Import::Refuse(r) if r.contains("at most 253")
        ));

        // This seed's own backup of the same name does not hide the other seed's; the
        // other seed's is an orphan once gone from its bucket, by its stored name.
        let mut own = stored(BackupPhase::Completed, None);
        own.metadata.name = Some("daily-20260101000000".into());
        own.spec.storage_location = Some("default".into());
        own.labels_mut()
            .insert(STORAGE_LOCATION_LABEL.into(), "default".into());
        let cluster = vec![own, i];
        let sibling = Origin::Sibling { seed: "eu-1" };
        let schedules = BTreeMap::new();
        let admin = Origin::Admin {
            schedules: &schedules,
        };
        let bucket = vec!["daily-20260101000000".to_string(), "daily-2".into()];
        assert_eq!(
            missing(&bucket, &in_cluster(&cluster, "seed-eu-1", sibling)),
            vec!["daily-2"]
        );
        assert_eq!(
            missing(&bucket, &in_cluster(&cluster, "seed-eu-2", sibling)),
            vec!["daily-2", "daily-20260101000000"]
        );
        assert_eq!(
            missing(&bucket, &in_cluster(&cluster, "default", admin)),
            vec!["daily-2"]
        );
        assert!(orphans(&cluster, "seed-eu-1", &bucket.iter().cloned().collect()).is_empty());
        assert_eq!(
            orphans(&cluster, "seed-eu-1", &BTreeSet::new()),
            vec!["eu-1.daily-20260101000000"]
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
