//! The cut-over (the third phase of a migration, after plan and copy; see
//! docs/architecture.md#legacy-migration): record etcd-main's replicas, scale it down and
//! wait until no replica runs, re-list the source and copy what is new or changed, then
//! switch the entry — `source-<entry>` keeps the old bucket referenced, the destination's
//! entry count is raised by compare-and-swap, `spec.bucketName`, the shoot's etcd-backup
//! secret and the Druid backup store name the destination. Any failure scales etcd back
//! up before the error is returned; the etcd-visible configuration (secret, Etcd store)
//! changes last, so until then "back up" means on the old configuration. Then
//! [`scale_up`] brings etcd back and measures the downtime.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::MigrateError;
use super::copy::Endpoints;
use super::etcd::{ETCD_MAIN, EtcdMain};
use super::manifest::Manifest;
use super::phase::{ANNOTATION_ETCD_REPLICAS, ANNOTATION_SCALED_DOWN_AT};
use super::plan;
use super::progress::CopyCounters;
use super::run::{BucketSide, EntryMigration, MigrateContext};
use granary_api::core::{
    ANNOTATION_SHOOT_PURPOSE, BackupEntry, BackupEntrySpec, SOURCE_ENTRY_PREFIX,
};
use granary_runtime::failpoints;
use granary_seed::etcd_secret::{
    CREATED_BY_ANNOTATION, ETCD_BACKUP_SECRET_NAME, etcd_backup_secret_data,
};
use granary_seed::prefix::{entry_key_prefix, entry_prefix};

/// Failpoint after etcd is down, before the final copy.
pub const FAILPOINT_SCALED_DOWN: &str = "migrate.cutover.scaled-down";
/// Failpoint after the final copy, before the switch.
pub const FAILPOINT_BEFORE_SWITCH: &str = "migrate.cutover.before-switch";
/// Failpoint at the start of the scale-up (the switch is committed, etcd still down).
pub const FAILPOINT_SCALE_UP: &str = "migrate.scale-up";

/// The shoot's control-plane namespace in the seed: the entry name without `--<uid>`.
pub fn technical_id(entry_name: &str) -> Result<String, MigrateError> {
    entry_name
        .rsplit_once("--")
        .map(|(id, _)| id.to_string())
        .filter(|id| !id.is_empty())
        .ok_or_else(|| {
            MigrateError::Invalid(format!(
                "entry name {entry_name:?} is not <technicalID>--<uid>"
            ))
        })
}

/// How many garden BackupEntries take a place in `bucket` (the garden's counting rule).
pub async fn entries_in_bucket(ctx: &MigrateContext, bucket: &str) -> Result<u32, MigrateError> {
    let all = Api::<BackupEntry>::all(ctx.garden.clone())
        .list(&ListParams::default())
        .await?;
    Ok(all
        .items
        .iter()
        .filter(|e| granary_garden::moves::counts_in(e, bucket))
        .count() as u32)
}

fn parse_time(v: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(v)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Phase 3: etcd down, final copy, switch. On failure etcd is scaled back up.
pub async fn cut_over(
    ctx: &MigrateContext,
    req: &EntryMigration,
    source: &BucketSide,
    destination: &BucketSide,
    ends: &Endpoints,
    manifest: &mut Manifest,
    counters: &mut CopyCounters,
) -> Result<(), MigrateError> {
    let namespace = technical_id(&req.name)?;
    let etcd = EtcdMain::find(ctx.seed.clone(), &namespace, ctx.etcd_timeout).await?;
    let entry = ctx.entries(&req.namespace).get(&req.name).await?;
    // Recorded before scaling, so a crash while etcd is down still knows the count.
    let old = match entry.annotations().get(ANNOTATION_ETCD_REPLICAS) {
        Some(v) => v.parse::<i32>().map_err(|_| {
            MigrateError::Invalid(format!("{ANNOTATION_ETCD_REPLICAS}={v:?} is not a number"))
        })?,
        None => {
            let n = etcd.desired().await?;
            ctx.annotate(
                &req.namespace,
                &req.name,
                json!({
                    ANNOTATION_ETCD_REPLICAS: n.to_string(),
                    ANNOTATION_SCALED_DOWN_AT: ctx.clock.now().to_rfc3339(),
                }),
            )
            .await?;
            n
        }
    };
    let result = async {
        etcd.scale(0).await?;
        etcd.wait("scaled down", |replicas, _| replicas == 0)
            .await?;
        failpoints::hit(FAILPOINT_SCALED_DOWN)?;
        final_copy(ctx, source, ends, manifest, counters).await?;
        failpoints::hit(FAILPOINT_BEFORE_SWITCH)?;
        switch(ctx, req, source, destination, &etcd).await
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(entry = %req.name, error = %e, "cut-over failed; scaling etcd-main back up");
        let back = async {
            etcd.scale(old).await?;
            etcd.wait("ready", |_, ready| ready >= old).await?;
            ctx.annotate(
                &req.namespace,
                &req.name,
                json!({ ANNOTATION_ETCD_REPLICAS: null, ANNOTATION_SCALED_DOWN_AT: null }),
            )
            .await
        }
        .await;
        return Err(match back {
            Ok(_) => e,
            Err(b) => MigrateError::Invalid(format!(
                "{e}; and scaling {ETCD_MAIN} back to {old} replicas failed too: {b}"
            )),
        });
    }
    Ok(())
}

/// Re-lists the source (etcd is down: nothing changes any more) and copies the delta.
async fn final_copy(
    ctx: &MigrateContext,
    source: &BucketSide,
    ends: &Endpoints,
    manifest: &mut Manifest,
    counters: &mut CopyCounters,
) -> Result<(), MigrateError> {
    use futures::TryStreamExt;
    let prefix = manifest.source.key_prefix.clone();
    let listing: Vec<_> = source
        .store
        .list(&source.name(), &prefix, None)
        .try_collect()
        .await?;
    let listing = listing
        .into_iter()
        .filter_map(|e| match e {
            granary_providers::ListEntry::Object(m) => Some(m),
            granary_providers::ListEntry::Prefix(_) => None,
        })
        .collect();
    let changes = plan::relist(manifest, plan::source_objects(&prefix, listing));
    ctx.output.event(
        json!({"event": "relisted", "added": changes.added, "changed": changes.changed, "vanished": changes.vanished}),
        || {
            format!(
                "source re-listed: {} new, {} changed, {} gone",
                changes.added, changes.changed, changes.vanished
            )
        },
    );
    ends.remove_stale(manifest, &changes.remove_from_destination)
        .await?;
    ends.copy_pending(manifest, ctx.parallelism, &ctx.output, counters)
        .await?;
    // Saved even when nothing was pending: the NotFound states are part of the record.
    ends.save(manifest).await
}

/// Points the entry and everything etcd reads at the destination. Idempotent.
async fn switch(
    ctx: &MigrateContext,
    req: &EntryMigration,
    source: &BucketSide,
    destination: &BucketSide,
    etcd: &EtcdMain,
) -> Result<(), MigrateError> {
    let entries = ctx.entries(&req.namespace);
    let entry = entries.get(&req.name).await?;
    ensure_source_entry(ctx, req, &entry, &source.name()).await?;
    let dest = destination.name();
    if entry.spec.bucket_name != dest {
        // The place was given before the copy; this only confirms it is still held.
        super::place::await_place(ctx, req).await?;
        let patch = json!({"spec": {"bucketName": dest}});
        entries
            .patch(&req.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    // What etcd reads comes last (see the module docs).
    let prefix = entry_prefix(destination.layout, &req.name)?;
    write_etcd_secret(ctx, req, destination, &prefix).await?;
    let store_prefix = format!(
        "{}{ETCD_MAIN}",
        entry_key_prefix(destination.layout, &req.name)?
    );
    etcd.set_backup_store(&dest, &store_prefix, destination.provider())
        .await
}

/// The `source-<entry>` BackupEntry that keeps the old bucket referenced until cleanup
/// deletes it (the seed then removes the old objects after the grace period).
async fn ensure_source_entry(
    ctx: &MigrateContext,
    req: &EntryMigration,
    entry: &BackupEntry,
    source_bucket: &str,
) -> Result<(), MigrateError> {
    let name = format!("{SOURCE_ENTRY_PREFIX}{}", req.name);
    let entries = ctx.entries(&req.namespace);
    if let Some(existing) = entries.get_opt(&name).await? {
        if existing.spec.bucket_name != source_bucket {
            return Err(MigrateError::Invalid(format!(
                "BackupEntry {}/{name} exists and points at bucket {}, not {source_bucket}",
                req.namespace, existing.spec.bucket_name
            )));
        }
        return Ok(());
    }
    let mut source = BackupEntry::new(
        &name,
        BackupEntrySpec {
            bucket_name: source_bucket.to_string(),
            seed_name: entry.spec.seed_name.clone(),
            shoot_ref: entry.spec.shoot_ref.clone(),
        },
    );
    source.metadata.namespace = Some(req.namespace.clone());
    source.metadata.labels = Some(entry.labels().clone());
    let annotations: BTreeMap<String, String> = entry
        .annotations()
        .get(ANNOTATION_SHOOT_PURPOSE)
        .map(|p| (ANNOTATION_SHOOT_PURPOSE.to_string(), p.clone()))
        .into_iter()
        .collect();
    source.metadata.annotations = Some(annotations);
    source.metadata.owner_references = entry.meta().owner_references.clone();
    match entries.create(&PostParams::default(), &source).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Writes `<technicalID>/etcd-backup` for the destination, as the seed's entry
/// reconcile would.
async fn write_etcd_secret(
    ctx: &MigrateContext,
    req: &EntryMigration,
    destination: &BucketSide,
    prefix: &str,
) -> Result<(), MigrateError> {
    let namespace = technical_id(&req.name)?;
    let data = etcd_backup_secret_data(
        destination.provider(),
        destination.region(),
        &destination.credentials,
        &destination.name(),
        prefix,
    )
    .map_err(|e| MigrateError::Invalid(e.to_string()))?;
    let data: BTreeMap<String, ByteString> =
        data.into_iter().map(|(k, v)| (k, ByteString(v))).collect();
    let api: Api<Secret> = Api::namespaced(ctx.seed.clone(), &namespace);
    match api.get_opt(ETCD_BACKUP_SECRET_NAME).await? {
        Some(mut existing) => {
            existing.data = Some(data);
            existing
                .annotations_mut()
                .insert(CREATED_BY_ANNOTATION.to_string(), req.name.clone());
            api.replace(ETCD_BACKUP_SECRET_NAME, &PostParams::default(), &existing)
                .await?;
        }
        None => {
            let mut secret = Secret {
                data: Some(data),
                ..Default::default()
            };
            secret.metadata.name = Some(ETCD_BACKUP_SECRET_NAME.to_string());
            secret.metadata.annotations =
                Some([(CREATED_BY_ANNOTATION.to_string(), req.name.clone())].into());
            api.create(&PostParams::default(), &secret).await?;
        }
    }
    Ok(())
}

/// Phase 4: scale etcd-main back to the recorded replicas and wait until they are
/// ready. Returns the downtime since the scale-down when it was recorded.
pub async fn scale_up(
    ctx: &MigrateContext,
    req: &EntryMigration,
) -> Result<Option<Duration>, MigrateError> {
    let namespace = technical_id(&req.name)?;
    let etcd = EtcdMain::find(ctx.seed.clone(), &namespace, ctx.etcd_timeout).await?;
    let entry = ctx.entries(&req.namespace).get(&req.name).await?;
    let annotations = entry.annotations();
    let old = match annotations.get(ANNOTATION_ETCD_REPLICAS) {
        Some(v) => v.parse::<i32>().map_err(|_| {
            MigrateError::Invalid(format!("{ANNOTATION_ETCD_REPLICAS}={v:?} is not a number"))
        })?,
        // Already scaled up and the annotation removed by an earlier run.
        None => return Ok(None),
    };
    let since = annotations
        .get(ANNOTATION_SCALED_DOWN_AT)
        .and_then(|v| parse_time(v));
    failpoints::hit(FAILPOINT_SCALE_UP)?;
    etcd.scale(old).await?;
    etcd.wait("ready", |_, ready| ready >= old).await?;
    let downtime = since.and_then(|t| (ctx.clock.now() - t).to_std().ok());
    ctx.annotate(
        &req.namespace,
        &req.name,
        json!({ ANNOTATION_ETCD_REPLICAS: null, ANNOTATION_SCALED_DOWN_AT: null }),
    )
    .await?;
    Ok(downtime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn technical_id_is_the_entry_name_without_the_uid() {
        assert_eq!(
            technical_id("shoot--p--a--0a1b-22").expect("valid"),
            "shoot--p--a"
        );
        assert!(technical_id("plain").is_err());
        assert!(technical_id("--x").is_err());
    }
}
