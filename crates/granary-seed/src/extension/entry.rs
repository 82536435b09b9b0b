//! The BackupEntry actuator: ensure the entry's prefix marker and the shoot's
//! `etcd-backup` Secret; after the deletion grace period, delete everything under the
//! entry prefix in batches (a legacy bucket is deleted whole), then the etcd secret when
//! it is ours. The schedule is computed from timestamps only, so a restart keeps it.
//!
//! The bucket's layout comes from the bucket's own record and the prefix's owner from
//! its marker ([`crate::ownership`]), never from labels: an entry that does not
//! own its prefix neither writes nor deletes anything there, and a legacy bucket is
//! deleted whole only when the provider's listing shows no other entry in it. The
//! marker is deleted last, so a deletion that crashed half-way still knows its owner.

use super::{Actuator, ExtensionObject, Provisioned};
use crate::context::{Context, ReconcileError};
use crate::etcd_secret::{CREATED_BY_ANNOTATION, etcd_backup_secret_data};
use crate::extension::records::{ensure_bucket_record, read_record, scan_root, write_record};
use crate::grace::{DeletionSchedule, deletion_schedule, grace_period};
use crate::kube_ops::{is_not_found, namespace_usable};
use crate::mirror::reference;
use crate::ownership::{
    BucketRecord, Claim, EntryIdentity, EntryRecord, LayoutDecision, claim, resolve_layout,
    whole_bucket_deletable,
};
use crate::prefix::{
    BUCKET_RECORD, BucketLayout, ENTRY_MARKER, entry_key_prefix, entry_prefix, marker_key,
};
use crate::{ANNOTATION_GARDEN_NAMESPACE, ANNOTATION_GARDEN_UID, ANNOTATION_SHOOT_UID};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use granary_api::common::SecretReference;
use granary_api::core::{
    ANNOTATION_DELETION_REQUESTED_AT, ANNOTATION_FORCE_DELETION, ANNOTATION_SHOOT_PURPOSE,
    ETCD_BACKUP_SECRET_NAME, FINALIZER_EXTENSIONS_BACKUPENTRY, LABEL_POOL_KIND, PoolKind,
    SOURCE_ENTRY_PREFIX,
};
use granary_api::extensions::{BackupEntry, DefaultStatus};
use granary_providers::{ErrorKind, ListEntry, ObjectStore, SecretData};
use granary_runtime::clock::from_k8s;
use granary_runtime::failpoints;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

/// Failpoint hit after every batch of a prefix deletion (crash tests).
pub const FAILPOINT_DELETE_BATCH: &str = "seed.entry.delete-batch";

impl ExtensionObject for BackupEntry {
    const FINALIZER: &'static str = FINALIZER_EXTENSIONS_BACKUPENTRY;
    const CONTROLLER: &'static str = "backupentry";

    fn provider_type(&self) -> &str {
        &self.spec.type_
    }

    fn region(&self) -> &str {
        &self.spec.region
    }

    fn secret_ref(&self) -> &SecretReference {
        &self.spec.secret_ref
    }

    fn status_default(&self) -> Option<&DefaultStatus> {
        self.default_status()
    }
}

/// Whether the entry's `pool-kind` label (copied from the garden bucket) says legacy.
/// Only ever a request: the bucket record decides.
fn label_says_legacy(entry: &BackupEntry) -> bool {
    matches!(
        entry.labels().get(LABEL_POOL_KIND).map(|v| v.parse()),
        Some(Ok(PoolKind::Legacy))
    )
}

/// Who the entry acts for: the garden entry the mirror names in its annotations, else
/// (a seed object made by hand) the seed object itself.
pub(crate) fn identity(entry: &BackupEntry) -> EntryIdentity {
    let annotations = entry.annotations();
    let garden_uid = annotations.get(ANNOTATION_GARDEN_UID).cloned();
    let garden_namespace = annotations.get(ANNOTATION_GARDEN_NAMESPACE).cloned();
    EntryIdentity {
        name: entry.name_any(),
        garden_uid: garden_uid.or_else(|| entry.meta().uid.clone()),
        garden_namespace,
        shoot_uid: annotations.get(ANNOTATION_SHOOT_UID).cloned(),
    }
}

/// `(namespace, secret name)` of the etcd backup secret of entry `name`
/// (`<technicalID>--<uid>`; a `source-` entry writes `source-etcd-backup`).
pub(crate) fn etcd_secret_location(name: &str) -> Option<(String, String)> {
    let (stripped, secret) = match name.strip_prefix(SOURCE_ENTRY_PREFIX) {
        Some(rest) => (
            rest,
            format!("{SOURCE_ENTRY_PREFIX}{ETCD_BACKUP_SECRET_NAME}"),
        ),
        None => (name, ETCD_BACKUP_SECRET_NAME.to_string()),
    };
    let (technical_id, uid) = stripped.rsplit_once("--")?;
    (!technical_id.is_empty() && !uid.is_empty()).then(|| (technical_id.to_string(), secret))
}

/// When deletion was requested: the garden's time from the annotation, else the seed
/// object's own deletionTimestamp.
fn requested_at(entry: &BackupEntry) -> Option<DateTime<Utc>> {
    entry
        .annotations()
        .get(ANNOTATION_DELETION_REQUESTED_AT)
        .and_then(|v| DateTime::parse_from_rfc3339(v).ok())
        .map(|t| t.with_timezone(&Utc))
        .or_else(|| {
            entry
                .meta()
                .deletion_timestamp
                .as_ref()
                .map(|t| from_k8s(t.0))
        })
}

/// Provisions and cleans up entries through whatever store the entry's type names.
#[derive(Default)]
pub(crate) struct EntryActuator {
    pending: Mutex<HashSet<String>>,
    /// Recorded bucket layouts (a record is never rewritten, so it can be kept).
    layouts: Mutex<HashMap<String, BucketLayout>>,
}

impl EntryActuator {
    /// The layout of the entry's bucket, from the bucket's record. A bucket with no
    /// record yet is shared unless its label asks for legacy; then the record is made
    /// now, by the same rule the bucket reconcile uses.
    async fn layout(
        &self,
        ctx: &Context,
        entry: &BackupEntry,
        store: &dyn ObjectStore,
    ) -> Result<BucketLayout, ReconcileError> {
        let bucket = &entry.spec.bucket_name;
        let cached = self
            .layouts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(bucket)
            .copied();
        if let Some(layout) = cached {
            return Ok(layout);
        }
        let legacy_label = label_says_legacy(entry);
        let record = read_record::<BucketRecord>(store, bucket, BUCKET_RECORD).await?;
        let layout = match resolve_layout(record.as_ref(), legacy_label) {
            LayoutDecision::UnrecordedShared => return Ok(BucketLayout::Shared),
            LayoutDecision::WaitForRecord => ensure_bucket_record(ctx, store, bucket, legacy_label)
                .await?
                .layout
                .into(),
            LayoutDecision::Recorded { layout, .. } => layout,
        };
        if legacy_label != (layout == BucketLayout::Legacy) {
            tracing::warn!(
                entry = %entry.name_any(), bucket = %bucket, recorded = ?layout,
                "the entry's {LABEL_POOL_KIND} label is ignored: the bucket's record decides its layout"
            );
        }
        self.layouts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(bucket.clone(), layout);
        Ok(layout)
    }

    /// The entry's claim on the prefix whose marker is at `marker` (`None`: no marker).
    async fn claim(
        &self,
        store: &dyn ObjectStore,
        bucket: &str,
        marker: &str,
        me: &EntryIdentity,
    ) -> Result<Option<Claim>, ReconcileError> {
        Ok(read_record::<EntryRecord>(store, bucket, marker)
            .await?
            .map(|record| claim(&record, me)))
    }

    async fn write_etcd_secret(
        &self,
        ctx: &Context,
        entry: &BackupEntry,
        credentials: &SecretData,
        prefix: &str,
    ) -> Result<Option<String>, ReconcileError> {
        let name = entry.name_any();
        let Some((namespace, secret_name)) = etcd_secret_location(&name) else {
            return Ok(None);
        };
        if !namespace_usable(&ctx.seed, &namespace).await? {
            return Ok(None);
        }
        let data = etcd_backup_secret_data(
            &entry.spec.type_,
            &entry.spec.region,
            credentials,
            &entry.spec.bucket_name,
            prefix,
        )
        .map_err(|e| ReconcileError::Invalid(e.to_string()))?;
        let data: BTreeMap<String, ByteString> =
            data.into_iter().map(|(k, v)| (k, ByteString(v))).collect();
        let api: Api<Secret> = Api::namespaced(ctx.seed.clone(), &namespace);
        let mut annotations = BTreeMap::new();
        annotations.insert(CREATED_BY_ANNOTATION.to_string(), name.clone());
        let mut labels = BTreeMap::new();
        ctx.selector.label(&mut labels);
        match api.get_opt(&secret_name).await? {
            Some(mut existing) => {
                let ours = existing.annotations().get(CREATED_BY_ANNOTATION) == Some(&name);
                if ours && existing.data.as_ref() == Some(&data) {
                    return Ok(Some(namespace));
                }
                existing.data = Some(data);
                existing.annotations_mut().extend(annotations);
                // Optimistic lock: somebody else writing the same secret makes this a 409
                // and the reconcile runs again.
                api.replace(&secret_name, &PostParams::default(), &existing)
                    .await?;
            }
            None => {
                let mut secret = Secret {
                    data: Some(data),
                    ..Default::default()
                };
                secret.metadata.name = Some(secret_name.clone());
                secret.metadata.annotations = Some(annotations);
                secret.metadata.labels = (!labels.is_empty()).then_some(labels);
                api.create(&PostParams::default(), &secret).await?;
            }
        }
        Ok(Some(namespace))
    }

    async fn delete_etcd_secret(&self, ctx: &Context, name: &str) -> Result<(), ReconcileError> {
        let Some((namespace, secret_name)) = etcd_secret_location(name) else {
            return Ok(());
        };
        let api: Api<Secret> = Api::namespaced(ctx.seed.clone(), &namespace);
        let Some(secret) = api.get_opt(&secret_name).await? else {
            return Ok(());
        };
        if secret
            .annotations()
            .get(CREATED_BY_ANNOTATION)
            .map(String::as_str)
            != Some(name)
        {
            return Ok(());
        }
        match api.delete(&secret_name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes every object under `prefix` but those in `keep` in batches of the
    /// store's batch size, passing the crash-test failpoint after each batch. Returns the
    /// count.
    async fn delete_prefix(
        &self,
        ctx: &Context,
        store: &dyn ObjectStore,
        bucket: &str,
        prefix: &str,
        keep: &[&str],
    ) -> Result<u64, ReconcileError> {
        let batch = store.delete_batch_size().max(1);
        let counter = ctx
            .metrics
            .objects_deleted
            .with_label_values(&[store.kind().as_str()]);
        let mut deleted = 0u64;
        let mut pending: Vec<String> = Vec::with_capacity(batch);
        let mut listing = store.list(bucket, prefix, None);
        loop {
            let next = match listing.try_next().await {
                Ok(next) => next,
                Err(e) if e.kind() == ErrorKind::BucketNotFound => None,
                Err(e) => return Err(e.into()),
            };
            let done = next.is_none();
            if let Some(ListEntry::Object(meta)) = next
                && !keep.contains(&meta.key.as_str())
            {
                pending.push(meta.key);
            }
            if pending.len() >= batch || (done && !pending.is_empty()) {
                let report = store.delete_many(bucket, &pending).await?;
                deleted += report.deleted;
                counter.inc_by(report.deleted);
                pending.clear();
                failpoints::hit(FAILPOINT_DELETE_BATCH)?;
            }
            if done {
                return Ok(deleted);
            }
        }
    }
}

impl Actuator<BackupEntry> for EntryActuator {
    async fn reconcile(
        &self,
        ctx: &Context,
        entry: &BackupEntry,
        store: &dyn ObjectStore,
        credentials: &SecretData,
    ) -> Result<Provisioned, ReconcileError> {
        let name = entry.name_any();
        let bucket = &entry.spec.bucket_name;
        let layout = self.layout(ctx, entry, store).await?;
        let marker = marker_key(layout, &name).map_err(prefix_error)?;
        let me = identity(entry);
        let mut readopted = None;
        let write = match self.claim(store, bucket, &marker, &me).await? {
            None | Some(Claim::OwnerUnrecorded) => true,
            Some(Claim::Owner | Claim::MigrationSource) => false,
            Some(Claim::Readopt(previous)) => {
                readopted = Some(previous);
                true
            }
            Some(Claim::Foreign(why)) => {
                return Err(ReconcileError::Invalid(format!(
                    "{bucket}/{marker}: {why}; nothing is written there (if that entry is \
                     gone for good, deleting the marker lets this one take the prefix)"
                )));
            }
        };
        if write {
            let created = entry
                .meta()
                .creation_timestamp
                .as_ref()
                .map(|t| from_k8s(t.0));
            let record = me.record(entry.meta().uid.clone(), created);
            write_record(store, bucket, &marker, &record).await?;
        }
        let prefix = entry_prefix(layout, &name).map_err(prefix_error)?;
        if let Some(previous) = &readopted {
            let note = format!(
                "{bucket}/{prefix} re-adopted from BackupEntry {previous}, an earlier garden \
                 entry of the same Shoot; its marker now names this entry"
            );
            tracing::info!(entry = %name, bucket = %bucket, prefix = %prefix, previous = %previous, "entry prefix re-adopted");
            ctx.seed_event(
                &reference(entry),
                EventType::Normal,
                "PrefixReadopted",
                note,
            )
            .await;
        }
        let written = self
            .write_etcd_secret(ctx, entry, credentials, &prefix)
            .await?;
        let mut description = format!("entry prefix {bucket}/{prefix} is in place");
        if let Some(previous) = &readopted {
            description.push_str(&format!(" (re-adopted from BackupEntry {previous})"));
        }
        if let Some(ns) = written {
            description.push_str(&format!("; {ns}/etcd-backup written"));
        }
        Ok(Provisioned {
            description,
            ..Default::default()
        })
    }

    fn deletion_schedule(&self, ctx: &Context, entry: &BackupEntry) -> DeletionSchedule {
        let now = ctx.clock.now();
        let requested = requested_at(entry).unwrap_or(now);
        let purpose = entry
            .annotations()
            .get(ANNOTATION_SHOOT_PURPOSE)
            .map(String::as_str)
            .filter(|p| !p.is_empty());
        let force = entry
            .annotations()
            .get(ANNOTATION_FORCE_DELETION)
            .is_some_and(|v| v == "true");
        let grace = grace_period(&ctx.config.controllers.backup_entry, purpose);
        deletion_schedule(requested, grace, force, now)
    }

    fn set_deletion(&self, ctx: &Context, name: &str, deletion: Option<DeletionSchedule>) {
        let mut set = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(deletion, Some(DeletionSchedule::At(_))) {
            set.insert(name.to_string());
        } else {
            set.remove(name);
        }
        ctx.metrics
            .pending_deletion
            .with_label_values(&[&ctx.seed_name])
            .set(i64::try_from(set.len()).unwrap_or(i64::MAX));
        ctx.metrics.deletion_due(
            &ctx.seed_name,
            name,
            deletion.and_then(DeletionSchedule::due),
        );
    }

    async fn delete(
        &self,
        ctx: &Context,
        entry: &BackupEntry,
        store: &dyn ObjectStore,
        _credentials: &SecretData,
    ) -> Result<String, ReconcileError> {
        let name = entry.name_any();
        let bucket = &entry.spec.bucket_name;
        let me = identity(entry);
        let description = match self.layout(ctx, entry, store).await? {
            BucketLayout::Legacy => {
                // The entry is the whole legacy bucket, but only when the provider's own
                // listing says nothing else lives there.
                let record = read_record::<BucketRecord>(store, bucket, BUCKET_RECORD).await?;
                let root = scan_root(store, bucket).await?;
                whole_bucket_deletable(&me, bucket, record.as_ref(), &root)
                    .map_err(ReconcileError::Invalid)?;
                // Granary's records go last, so a crash half-way still finds the owner.
                let records = [ENTRY_MARKER, BUCKET_RECORD];
                let n = self.delete_prefix(ctx, store, bucket, "", &records).await?;
                store.delete_bucket(bucket, true).await?;
                self.layouts
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(bucket);
                tracing::info!(entry = %name, bucket = %bucket, deleted = n, "legacy bucket deleted");
                format!("legacy bucket {bucket} deleted")
            }
            BucketLayout::Shared => {
                let prefix = entry_key_prefix(BucketLayout::Shared, &name).map_err(prefix_error)?;
                let marker = marker_key(BucketLayout::Shared, &name).map_err(prefix_error)?;
                if let Some(Claim::Foreign(why)) = self.claim(store, bucket, &marker, &me).await? {
                    return Err(ReconcileError::Invalid(format!(
                        "refusing to delete {bucket}/{prefix}: {why}"
                    )));
                }
                tracing::info!(entry = %name, bucket = %bucket, prefix = %prefix, "deleting the entry's objects");
                let mut n = self
                    .delete_prefix(ctx, store, bucket, &prefix, &[marker.as_str()])
                    .await?;
                n += store.delete_many(bucket, &[marker]).await?.deleted;
                tracing::info!(entry = %name, deleted = n, "entry's objects deleted");
                format!("{n} objects under {bucket}/{prefix} deleted")
            }
        };
        self.delete_etcd_secret(ctx, &name).await?;
        Ok(description)
    }
}

fn prefix_error(e: crate::prefix::EmptyPrefix) -> ReconcileError {
    ReconcileError::Invalid(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_secret_names() {
        assert_eq!(
            etcd_secret_location("shoot--dev--a--0a1b-22"),
            Some(("shoot--dev--a".into(), "etcd-backup".into()))
        );
        assert_eq!(
            etcd_secret_location("source-shoot--dev--a--0a1b"),
            Some(("shoot--dev--a".into(), "source-etcd-backup".into()))
        );
        assert_eq!(etcd_secret_location("plain"), None);
        assert_eq!(etcd_secret_location("--x"), None);
    }
}
