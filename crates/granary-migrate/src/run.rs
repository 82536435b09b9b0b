//! The context of a migration run and the orchestration of `granary migrate entry`
//! (phase by phase, each recorded before the next starts) and `granary migrate status`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use granary_providers::{ObjectMeta, ObjectStore, SecretData, StoreOptions};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::MigrateError;
use super::copy::Endpoints;
use super::cutover;
use super::manifest::{Location, MANIFEST_VERSION, Manifest};
use super::phase::{
    ANNOTATION_ETCD_REPLICAS, ANNOTATION_PHASE, ANNOTATION_SOURCE, ANNOTATION_TARGET, Phase,
    Resume, resume,
};
use super::place;
use super::plan::{self, CopyMode, StoreIdentity};
use super::progress::{MigrationReport, Output};
use granary_api::core::{
    ANNOTATION_MIGRATION_REFUSED, ANNOTATION_MIGRATION_RESERVED, BackupBucket, BackupEntry,
    PoolKind,
};
use granary_garden::config::GardenConfiguration;
use granary_runtime::clock::Clock;
use granary_runtime::failpoints;
use granary_seed::prefix::{BucketLayout, entry_key_prefix};

/// Failpoint after the manifest is written, before the phase moves to Copy.
pub const FAILPOINT_PLAN: &str = "migrate.plan.written";

/// What every migration step needs.
pub struct MigrateContext {
    pub garden: Client,
    /// The seed that runs the shoot's control plane (etcd-main, the etcd-backup secret).
    pub seed: Client,
    pub store_options: StoreOptions,
    pub clock: Clock,
    /// For the per-provider bucket quota.
    pub garden_config: GardenConfiguration,
    /// Copy requests in flight at most.
    pub parallelism: usize,
    /// How long etcd may take to scale down or come back.
    pub etcd_timeout: Duration,
    /// How long to wait for the garden's answer to the request for a place in the
    /// destination ([`super::place`]).
    pub garden_timeout: Duration,
    pub output: Output,
}

/// One `granary migrate entry` request.
#[derive(Clone, Debug)]
pub struct EntryMigration {
    pub namespace: String,
    pub name: String,
    pub to_bucket: String,
    /// Plan and print, change nothing.
    pub dry_run: bool,
    /// Force-delete the source at once instead of after the grace period.
    pub delete_source_now: bool,
    /// Allow a destination outside the entry's backup pool (`--allow-other-pool`).
    pub allow_other_pool: bool,
}

/// One side of a migration: the garden bucket, its credentials and an open store.
pub struct BucketSide {
    pub bucket: BackupBucket,
    pub layout: BucketLayout,
    pub credentials: SecretData,
    pub store: Arc<dyn ObjectStore>,
}

impl BucketSide {
    pub fn name(&self) -> String {
        self.bucket.name_any()
    }

    pub fn provider(&self) -> &str {
        &self.bucket.spec.provider.type_
    }

    pub fn region(&self) -> &str {
        &self.bucket.spec.provider.region
    }

    fn identity(&self) -> StoreIdentity {
        StoreIdentity {
            provider: self.provider().to_string(),
            credentials: self.credentials.clone(),
        }
    }
}

impl MigrateContext {
    pub(crate) fn entries(&self, namespace: &str) -> Api<BackupEntry> {
        Api::namespaced(self.garden.clone(), namespace)
    }

    /// Opens the garden bucket `name` with its credentials.
    pub async fn open_bucket(&self, name: &str) -> Result<BucketSide, MigrateError> {
        let bucket = Api::<BackupBucket>::all(self.garden.clone())
            .get_opt(name)
            .await?
            .ok_or_else(|| {
                MigrateError::Invalid(format!("garden BackupBucket {name} not found"))
            })?;
        let reference = bucket.credentials().ok_or_else(|| {
            MigrateError::Invalid(format!("BackupBucket {name} has no credentialsRef"))
        })?;
        if !(reference.kind.is_empty() || reference.kind == "Secret") {
            return Err(MigrateError::Invalid(format!(
                "BackupBucket {name}: credentials of kind {} are not supported (only Secret)",
                reference.kind
            )));
        }
        let secret = Api::<Secret>::namespaced(self.garden.clone(), &reference.namespace)
            .get_opt(&reference.name)
            .await?
            .ok_or_else(|| {
                MigrateError::Invalid(format!(
                    "credentials secret {}/{} of BackupBucket {name} not found",
                    reference.namespace, reference.name
                ))
            })?;
        let credentials: SecretData = secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        let store = granary_providers::open(
            &bucket.spec.provider.type_,
            Some(&bucket.spec.provider.region)
                .filter(|r| !r.is_empty())
                .map(|r| r.as_str()),
            &credentials,
            &self.store_options,
        )
        .await?;
        let layout = match bucket.pool_kind() {
            Some(PoolKind::Legacy) => BucketLayout::Legacy,
            _ => BucketLayout::Shared,
        };
        Ok(BucketSide {
            bucket,
            layout,
            credentials,
            store,
        })
    }

    /// Merges `annotations` (a `null` value removes one) into the garden entry.
    pub(crate) async fn annotate(
        &self,
        namespace: &str,
        name: &str,
        annotations: Value,
    ) -> Result<BackupEntry, MigrateError> {
        let patch = json!({"metadata": {"annotations": annotations}});
        Ok(self
            .entries(namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?)
    }

    async fn set_phase(
        &self,
        req: &EntryMigration,
        phase: Phase,
        extra: Value,
    ) -> Result<(), MigrateError> {
        let mut annotations = json!({ ANNOTATION_PHASE: phase.annotation() });
        if let (Some(a), Some(extra)) = (annotations.as_object_mut(), extra.as_object()) {
            a.extend(extra.clone());
        }
        self.annotate(&req.namespace, &req.name, annotations)
            .await?;
        self.output
            .phase(&format!("{}/{}", req.namespace, req.name), phase);
        Ok(())
    }
}

/// Lists the source objects of an entry.
async fn list_source(side: &BucketSide, key_prefix: &str) -> Result<Vec<ObjectMeta>, MigrateError> {
    use futures::TryStreamExt;
    let name = side.name();
    let listing: Vec<_> = side
        .store
        .list(&name, key_prefix, None)
        .try_collect()
        .await?;
    Ok(listing
        .into_iter()
        .filter_map(|e| match e {
            granary_providers::ListEntry::Object(m) => Some(m),
            granary_providers::ListEntry::Prefix(_) => None,
        })
        .collect())
}

/// A fresh manifest of the source.
async fn new_manifest(
    ctx: &MigrateContext,
    req: &EntryMigration,
    source: &BucketSide,
    destination: &BucketSide,
) -> Result<Manifest, MigrateError> {
    let src_prefix = entry_key_prefix(source.layout, &req.name)?;
    let listing = list_source(source, &src_prefix).await?;
    Ok(Manifest {
        version: MANIFEST_VERSION,
        entry: format!("{}/{}", req.namespace, req.name),
        source: Location {
            bucket: source.name(),
            provider: source.provider().to_string(),
            key_prefix: src_prefix.clone(),
        },
        destination: Location {
            bucket: destination.name(),
            provider: destination.provider().to_string(),
            key_prefix: entry_key_prefix(destination.layout, &req.name)?,
        },
        created: ctx.clock.now(),
        copy_passes: 0,
        objects: plan::source_objects(&src_prefix, listing),
    })
}

/// Checks in advance that `destination` may take the entry: a shard of a backup pool
/// (legacy buckets are never targets), not being deleted, and within the provider's
/// quota now. Advisory (and what `--dry-run` reports): the place itself is given by the
/// garden ([`place`]).
async fn check_destination(
    ctx: &MigrateContext,
    destination: &BucketSide,
) -> Result<(), MigrateError> {
    let name = destination.name();
    if destination.layout == BucketLayout::Legacy {
        return Err(MigrateError::Invalid(format!(
            "bucket {name} is a legacy per-shoot bucket and never a migration target"
        )));
    }
    if granary_garden::buckets::pool_of(&destination.bucket).is_none() {
        return Err(MigrateError::Invalid(format!(
            "bucket {name} is not a shard of a backup pool (it has no {} labels), so the \
             garden keeps no count for it and cannot give it an entry",
            granary_api::core::LABEL_POOL_KIND
        )));
    }
    let entries = cutover::entries_in_bucket(ctx, &name).await?;
    let recorded = destination
        .bucket
        .status
        .as_ref()
        .and_then(|s| s.entry_count)
        .unwrap_or(0);
    let accepting = destination.bucket.metadata.deletion_timestamp.is_none();
    if !accepting {
        return Err(MigrateError::Quota(format!(
            "bucket {name} is being deleted and takes no new entries"
        )));
    }
    // The garden's limit, as it writes it on the bucket (this process has no garden
    // configuration of its own), else the one it was given.
    let limit = destination
        .bucket
        .status
        .as_ref()
        .and_then(|s| s.entry_limit)
        .or_else(|| ctx.garden_config.quota_for(destination.provider()));
    let held = entries.max(recorded);
    if !plan::quota_allows(held, accepting, limit) {
        return Err(MigrateError::Quota(format!(
            "bucket {name} is full: it holds {held} entr{} and takes at most {}",
            if held == 1 { "y" } else { "ies" },
            limit.map_or_else(|| "any number".to_string(), |l| l.to_string()),
        )));
    }
    Ok(())
}

fn report_from(
    req: &EntryMigration,
    manifest: &Manifest,
    phase: Phase,
    mode: CopyMode,
) -> MigrationReport {
    let s = manifest.summary();
    MigrationReport {
        entry: format!("{}/{}", req.namespace, req.name),
        source_bucket: manifest.source.bucket.clone(),
        destination_bucket: manifest.destination.bucket.clone(),
        phase: phase.to_string(),
        dry_run: req.dry_run,
        copy_mode: Some(mode),
        objects: s.objects,
        bytes: s.bytes,
        copied: s.copied,
        not_found: s.not_found,
        pending: s.pending,
        ..MigrationReport::default()
    }
}

/// Runs (or resumes) the migration of one entry to `req.to_bucket`.
pub async fn migrate_entry(
    ctx: &MigrateContext,
    req: &EntryMigration,
) -> Result<MigrationReport, MigrateError> {
    let entry = ctx.entries(&req.namespace).get(&req.name).await?;
    let annotations = entry.annotations().clone();
    let recorded = Phase::from_annotation(annotations.get(ANNOTATION_PHASE).map(String::as_str))?;
    let mut phase = match resume(
        recorded,
        annotations.get(ANNOTATION_TARGET).map(String::as_str),
        &entry.spec.bucket_name,
        &req.to_bucket,
    ) {
        Resume::AlreadyThere => {
            return Ok(MigrationReport {
                entry: format!("{}/{}", req.namespace, req.name),
                source_bucket: entry.spec.bucket_name.clone(),
                destination_bucket: req.to_bucket.clone(),
                phase: Phase::Done.to_string(),
                dry_run: req.dry_run,
                already_there: true,
                ..MigrationReport::default()
            });
        }
        Resume::OtherTarget(t) => {
            return Err(MigrateError::Invalid(format!(
                "a migration of {}/{} to bucket {t} is in flight; finish it first",
                req.namespace, req.name
            )));
        }
        Resume::At(p) => p,
    };
    let source_name = match phase {
        Phase::Plan => entry.spec.bucket_name.clone(),
        _ => annotations.get(ANNOTATION_SOURCE).cloned().ok_or_else(|| {
            MigrateError::Invalid(format!("{ANNOTATION_SOURCE} is missing on the entry"))
        })?,
    };
    let source = ctx.open_bucket(&source_name).await?;
    let destination = ctx.open_bucket(&req.to_bucket).await?;
    let mode = plan::copy_mode(&source.identity(), &destination.identity());
    let ends = Endpoints {
        source: source.store.clone(),
        destination: destination.store.clone(),
        mode,
        compare_etags: source.provider() == destination.provider(),
    };
    if phase == Phase::Plan {
        if let Some(why) = plan::refuse_to_start(&entry) {
            return Err(MigrateError::Invalid(why));
        }
        check_destination(ctx, &destination).await?;
        if !req.allow_other_pool
            && let Some(why) = plan::other_pool(&source.bucket, &destination.bucket)
        {
            return Err(MigrateError::Invalid(format!(
                "{why}: refusing to move entry {}/{} there (pass --allow-other-pool to do it on purpose)",
                req.namespace, req.name
            )));
        }
    }

    let mut manifest = match phase {
        Phase::Plan => new_manifest(ctx, req, &source, &destination).await?,
        _ => match ends
            .load(
                &destination.name(),
                &entry_key_prefix(destination.layout, &req.name)?,
                &source_name,
            )
            .await?
        {
            Some(m) => m,
            // Lost (or never written by a crash right after the annotation): copying
            // again from a fresh plan is safe; HEADs skip what is there already.
            None => {
                let mut m = new_manifest(ctx, req, &source, &destination).await?;
                m.copy_passes = 1;
                m
            }
        },
    };

    if req.dry_run {
        let mut report = report_from(req, &manifest, phase, mode);
        let s = manifest.summary();
        report.estimated_seconds =
            Some(plan::estimate(s.pending, s.pending_bytes, mode, ctx.parallelism).as_secs_f64());
        return Ok(report);
    }

    let mut counters = super::progress::CopyCounters::default();
    let mut downtime = None;
    while phase != Phase::Done {
        match phase {
            Phase::Plan => {
                ends.save(&manifest).await?;
                failpoints::hit(FAILPOINT_PLAN)?;
                // Also the request for a place in the destination (a fresh one: an
                // earlier refusal is cleared).
                ctx.set_phase(
                    req,
                    Phase::Copy,
                    json!({
                        ANNOTATION_SOURCE: source_name,
                        ANNOTATION_TARGET: req.to_bucket,
                        ANNOTATION_MIGRATION_REFUSED: null,
                    }),
                )
                .await?;
            }
            Phase::Copy => {
                if let Err(e) = place::await_place(ctx, req).await {
                    if matches!(e, MigrateError::Refused(_)) {
                        abandon(ctx, req, &ends, &manifest).await?;
                    }
                    return Err(e);
                }
                ends.copy_pending(&mut manifest, ctx.parallelism, &ctx.output, &mut counters)
                    .await?;
                ctx.set_phase(req, Phase::CutOver, json!({})).await?;
            }
            Phase::CutOver => {
                cutover::cut_over(
                    ctx,
                    req,
                    &source,
                    &destination,
                    &ends,
                    &mut manifest,
                    &mut counters,
                )
                .await?;
                ctx.set_phase(req, Phase::ScaleUp, json!({})).await?;
            }
            Phase::ScaleUp => {
                downtime = cutover::scale_up(ctx, req).await?;
                ctx.set_phase(req, Phase::Cleanup, json!({})).await?;
            }
            Phase::Cleanup => {
                super::cleanup::cleanup(ctx, req, &source).await?;
                ctx.set_phase(
                    req,
                    Phase::Done,
                    json!({
                        ANNOTATION_SOURCE: null,
                        ANNOTATION_TARGET: null,
                        ANNOTATION_MIGRATION_RESERVED: null,
                    }),
                )
                .await?;
            }
            Phase::Done => {}
        }
        phase = phase.next();
    }
    let mut report = report_from(req, &manifest, Phase::Done, mode);
    report.counters = counters;
    report.downtime_seconds = downtime.map(|d| d.as_secs_f64());
    Ok(report)
}

/// Gives up a migration the garden refused before anything was copied: the manifest
/// goes from the destination and the migration's annotations from the entry (the
/// refusal stays, for `kubectl describe` and until the next request).
async fn abandon(
    ctx: &MigrateContext,
    req: &EntryMigration,
    ends: &Endpoints,
    manifest: &Manifest,
) -> Result<(), MigrateError> {
    ends.remove_manifest(manifest).await?;
    ctx.annotate(
        &req.namespace,
        &req.name,
        json!({ ANNOTATION_PHASE: null, ANNOTATION_SOURCE: null, ANNOTATION_TARGET: null }),
    )
    .await
    .map(|_| ())
}

/// One migration in flight, for `granary migrate status`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationStatus {
    pub entry: String,
    pub phase: String,
    pub source_bucket: Option<String>,
    pub target_bucket: Option<String>,
    /// The recorded old etcd-main replicas while etcd is scaled down.
    pub etcd_replicas: Option<String>,
    /// The destination's place: `held`, `asked` (the garden has not answered) or
    /// `refused: <why>`; `None` once the entry lives in the destination.
    pub place: Option<String>,
}

/// Every garden BackupEntry with a migration in flight.
pub async fn migration_status(garden: &Client) -> Result<Vec<MigrationStatus>, MigrateError> {
    let all = Api::<BackupEntry>::all(garden.clone())
        .list(&ListParams::default())
        .await?;
    let mut out: Vec<MigrationStatus> = all
        .items
        .iter()
        .filter_map(|e| {
            let a: &BTreeMap<String, String> = e.annotations();
            let phase = a.get(ANNOTATION_PHASE)?;
            Some(MigrationStatus {
                entry: format!("{}/{}", e.namespace().unwrap_or_default(), e.name_any()),
                phase: phase.clone(),
                source_bucket: a.get(ANNOTATION_SOURCE).cloned(),
                target_bucket: a.get(ANNOTATION_TARGET).cloned(),
                etcd_replicas: a.get(ANNOTATION_ETCD_REPLICAS).cloned(),
                place: a
                    .get(ANNOTATION_TARGET)
                    .filter(|t| **t != e.spec.bucket_name)
                    .map(|t| match place::answer(e, t) {
                        Some(place::Answer::Held) => "held".to_string(),
                        Some(place::Answer::Refused(why)) => format!("refused: {why}"),
                        None => "asked".to_string(),
                    }),
            })
        })
        .collect();
    out.sort_by(|a, b| a.entry.cmp(&b.entry));
    Ok(out)
}
