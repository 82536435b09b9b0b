//! Mirrors one garden BackupEntry into the seed's extension BackupEntry and reports back
//! (docs/architecture.md#seed-mirror). An entry waits, in state Error with its bucket's
//! codes, until its garden bucket is healthy; its spec comes from the bucket.

use super::{
    Ensured, Report, copy_credentials, delete_copied_secret, deletion_finished, deletion_requested,
    ensure_extension, garden_operation, handed_over, pending_on, reference, release_extension,
    report, same_error, same_operation, waiting,
};
use crate::context::{Context, ReconcileError};
use crate::kube_ops::{
    add_finalizer, is_not_found, patch_annotations, patch_status, remove_finalizer,
};
use crate::ownership::same_shoot;
use crate::{ANNOTATION_GARDEN_NAMESPACE, ANNOTATION_GARDEN_UID, ANNOTATION_SHOOT_UID};
use granary_api::common::{LastOperationType, SecretReference};
use granary_api::core::{
    self, ANNOTATION_DELETION_REQUESTED_AT, ANNOTATION_FORCE_DELETION, ANNOTATION_SHOOT_PURPOSE,
    FINALIZER_GARDENER, GARDEN_NAMESPACE, LABEL_POOL_KIND, entry_secret_name,
};
use granary_api::extensions::{self, BackupEntrySpec};
use granary_runtime::clock::from_k8s;
use granary_runtime::readiness::{Readiness, ReadinessInput, readiness};
use granary_runtime::status;
use granary_runtime::work_queue::Next;
use kube::api::{Api, DeleteParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use std::collections::BTreeMap;

/// The queue key of a garden entry: `<namespace>/<name>`.
pub(crate) fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn garden_api(ctx: &Context, namespace: &str) -> Api<core::BackupEntry> {
    Api::namespaced(ctx.garden.clone(), namespace)
}

fn seed_api(ctx: &Context) -> Api<extensions::BackupEntry> {
    Api::all(ctx.seed.clone())
}

/// How soon an entry waiting for its bucket looks again: the bucket may be held by
/// another seed, whose changes this seed's watches do not see.
const WAIT_FOR_BUCKET: std::time::Duration = std::time::Duration::from_secs(5);

/// The UID of the Shoot owning a garden entry (its owner reference), if any.
pub(crate) fn shoot_uid(garden: &core::BackupEntry) -> Option<String> {
    garden
        .owner_references()
        .iter()
        .find(|o| o.kind == "Shoot" && o.api_version.starts_with("core.gardener.cloud/"))
        .map(|o| o.uid.clone())
}

/// Why the seed object `ext` does not stand for the garden entry `namespace`/`uid` of
/// Shoot `shoot` (`uid` unknown when the garden entry is gone), or `None` when it does.
/// The seed object is cluster-scoped and named after the entry alone, so its identity
/// is the garden namespace and UID it carries; a seed object from before the UID was
/// carried is matched by namespace (and gets the UID on the next update). One of an
/// earlier garden entry of the same name, namespace and Shoot (the garden recreated the
/// entry) stands for the new one, which takes it over ([`same_shoot`]).
pub(crate) fn foreign_seed_object(
    ext: &extensions::BackupEntry,
    namespace: &str,
    uid: Option<&str>,
    shoot: Option<&str>,
) -> Option<String> {
    let annotations = ext.annotations();
    let ext_namespace = annotations
        .get(ANNOTATION_GARDEN_NAMESPACE)
        .map(String::as_str);
    let ext_uid = annotations.get(ANNOTATION_GARDEN_UID).map(String::as_str);
    let ext_shoot = annotations.get(ANNOTATION_SHOOT_UID).map(String::as_str);
    let same_namespace = ext_namespace == Some(namespace);
    let same_uid = match (ext_uid, uid) {
        (Some(a), Some(b)) => a == b || same_shoot(ext_shoot, &ext.name_any(), shoot),
        _ => true,
    };
    (!same_namespace || !same_uid).then(|| {
        format!(
            "the seed's BackupEntry {} belongs to the garden BackupEntry {}/{}{}",
            ext.name_any(),
            ext_namespace.unwrap_or("<none>"),
            ext.name_any(),
            ext_uid.map(|u| format!(" (uid {u})")).unwrap_or_default()
        )
    })
}

/// One mirror pass over the garden entry with queue key `key`.
pub(crate) async fn reconcile(ctx: &Context, key: &str) -> Result<Next, ReconcileError> {
    let Some((namespace, name)) = key.split_once('/') else {
        return Ok(Next::Done);
    };
    let garden = crate::kube_ops::get_assigned(&garden_api(ctx, namespace), name).await?;
    let ext = seed_api(ctx)
        .get_opt(name)
        .await?
        .filter(|e| ctx.selector.matches(e.meta().labels.as_ref()));
    let me = ctx.seed_name.as_str();
    let garden = garden.filter(|g| ctx.selector.matches(g.meta().labels.as_ref()));
    let uid = garden.as_ref().and_then(|g| g.meta().uid.clone());
    let shoot = garden.as_ref().and_then(shoot_uid);
    if let Some(why) = ext
        .as_ref()
        .and_then(|e| foreign_seed_object(e, namespace, uid.as_deref(), shoot.as_deref()))
    {
        return refuse_foreign(ctx, garden, why).await;
    }
    if let (Some(ext), Some(uid)) = (&ext, &uid)
        && let Some(previous) = ext.annotations().get(ANNOTATION_GARDEN_UID)
        && previous != uid
    {
        tracing::info!(
            entry = %key, previous_uid = %previous, uid = %uid,
            "the seed object of an earlier garden entry of the same shoot is taken over"
        );
    }
    let Some(garden) = garden.filter(|g| g.responsible_seed() == Some(me)) else {
        // Gone from the garden or another seed's now: let go without provider calls.
        if release_extension(ctx, ext.as_ref()).await? {
            delete_copied_secret(ctx, &entry_secret_name(name)).await?;
        }
        return Ok(Next::Done);
    };
    if garden.meta().deletion_timestamp.is_some() {
        return delete(ctx, garden, ext).await;
    }
    if garden.spec.seed_name.as_deref() != Some(me) {
        return hand_over(ctx, &garden, ext).await;
    }
    provision(ctx, garden, ext).await
}

/// A garden entry whose name is taken in this seed by another garden entry's seed
/// object (same name, another namespace or UID): nothing of the other's is touched — not
/// its seed object, its copied credentials or its prefix. The garden entry says why in
/// its status and an event; one being deleted lets go at once, for it never had
/// anything in this seed.
async fn refuse_foreign(
    ctx: &Context,
    garden: Option<core::BackupEntry>,
    why: String,
) -> Result<Next, ReconcileError> {
    let Some(garden) = garden.filter(|g| g.responsible_seed() == Some(ctx.seed_name.as_str()))
    else {
        return Ok(Next::Done);
    };
    let namespace = garden.namespace().unwrap_or_default();
    let deleting = garden.meta().deletion_timestamp.is_some();
    let description = if deleting {
        format!("{why}; nothing of it is deleted")
    } else {
        format!("{why}; this entry is refused (rename it or delete it)")
    };
    ctx.garden_warning(&reference(&garden), "NameCollision", description.clone())
        .await;
    if deleting {
        remove_finalizer(&garden_api(ctx, &namespace), &garden, FINALIZER_GARDENER).await?;
        return Ok(Next::Done);
    }
    let now = ctx.clock.now();
    let op = garden_operation(
        false,
        garden
            .status
            .as_ref()
            .and_then(|s| s.last_operation.as_ref()),
    );
    let r = Report {
        last_operation: status::errored(op, description.clone(), now),
        last_error: Some(status::last_error(
            description,
            granary_runtime::error_codes::FailureKind::Invalid.codes(),
            now,
        )),
        ready: false,
    };
    write_status(ctx, &garden, &r).await?;
    Ok(Next::After(ctx.resync))
}

/// The annotations carried from the garden entry to the seed object.
fn carried_annotations(garden: &core::BackupEntry) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert(
        ANNOTATION_GARDEN_NAMESPACE.to_string(),
        garden.namespace().unwrap_or_default(),
    );
    if let Some(uid) = garden.meta().uid.as_ref() {
        out.insert(ANNOTATION_GARDEN_UID.to_string(), uid.clone());
    }
    if let Some(shoot) = shoot_uid(garden) {
        out.insert(ANNOTATION_SHOOT_UID.to_string(), shoot);
    }
    for key in [ANNOTATION_SHOOT_PURPOSE, ANNOTATION_FORCE_DELETION] {
        if let Some(v) = garden.annotations().get(key) {
            out.insert(key.to_string(), v.clone());
        }
    }
    out
}

fn desired(
    ctx: &Context,
    garden: &core::BackupEntry,
    bucket: &core::BackupBucket,
) -> extensions::BackupEntry {
    let name = garden.name_any();
    let mut ext = extensions::BackupEntry::new(
        &name,
        BackupEntrySpec {
            type_: bucket.spec.provider.type_.clone(),
            region: bucket.spec.provider.region.clone(),
            bucket_name: garden.spec.bucket_name.clone(),
            secret_ref: SecretReference {
                name: entry_secret_name(&name),
                namespace: GARDEN_NAMESPACE.to_string(),
            },
            provider_config: bucket.spec.provider_config.clone(),
            backup_bucket_provider_status: bucket
                .status
                .as_ref()
                .and_then(|s| s.provider_status.clone()),
            class: None,
        },
    );
    let mut labels = BTreeMap::new();
    ctx.selector.label(&mut labels);
    if let Some(kind) = bucket.labels().get(LABEL_POOL_KIND) {
        labels.insert(LABEL_POOL_KIND.to_string(), kind.clone());
    }
    ext.metadata.labels = Some(labels);
    ext.metadata.annotations = Some(carried_annotations(garden));
    ext
}

/// Whether the garden bucket is healthy, by the one readiness function over its status.
fn bucket_readiness(bucket: &core::BackupBucket) -> Readiness {
    let status = bucket.status.as_ref();
    readiness(ReadinessInput {
        generation: bucket.meta().generation,
        observed_generation: status.and_then(|s| s.observed_generation),
        last_error: status.and_then(|s| s.last_error.as_ref()),
        last_operation: status.and_then(|s| s.last_operation.as_ref()),
        ..Default::default()
    })
}

async fn provision(
    ctx: &Context,
    garden: core::BackupEntry,
    ext: Option<extensions::BackupEntry>,
) -> Result<Next, ReconcileError> {
    let name = garden.name_any();
    let namespace = garden.namespace().unwrap_or_default();
    let garden = add_finalizer(&garden_api(ctx, &namespace), &garden, FINALIZER_GARDENER).await?;
    let last = garden
        .status
        .as_ref()
        .and_then(|s| s.last_operation.as_ref());
    let op = garden_operation(false, last);
    let now = ctx.clock.now();
    let bucket_name = &garden.spec.bucket_name;
    let bucket = Api::<core::BackupBucket>::all(ctx.garden.clone())
        .get_opt(bucket_name)
        .await?;
    let bucket = match bucket {
        None => {
            let r = pending_on(
                op,
                format!("waiting for BackupBucket {bucket_name}: it does not exist yet"),
                now,
            );
            write_status(ctx, &garden, &r).await?;
            return Ok(Next::After(ctx.resync.min(WAIT_FOR_BUCKET)));
        }
        Some(b) => b,
    };
    // A bucket whose deletion the garden refuses (entries still reference it) is still
    // there at the provider, and keeps working for every entry in it: those the seed
    // already holds and those made in it since (a migration's source entries, made to be
    // deleted), whenever they were created. The refusal is the bucket's news, not
    // theirs; each reports its own state. (Waiting for the bucket instead would wait
    // forever: the bucket waits for its entries to go.)
    let deletion_refused = bucket.meta().deletion_timestamp.is_some();
    match bucket_readiness(&bucket) {
        _ if deletion_refused => {}
        Readiness::Ready => {}
        Readiness::Failed { description, codes } => {
            let r = waiting(
                op,
                format!("waiting for BackupBucket {bucket_name}: {description}"),
                codes,
                now,
            );
            write_status(ctx, &garden, &r).await?;
            return Ok(Next::After(ctx.resync.min(WAIT_FOR_BUCKET)));
        }
        Readiness::Progressing(why) => {
            let r = pending_on(
                op,
                format!("waiting for BackupBucket {bucket_name}: {why}"),
                now,
            );
            write_status(ctx, &garden, &r).await?;
            return Ok(Next::After(ctx.resync.min(WAIT_FOR_BUCKET)));
        }
    }
    let prepared = async {
        let credentials = bucket.credentials().ok_or_else(|| {
            ReconcileError::Invalid(format!(
                "BackupBucket {bucket_name}: spec.credentialsRef: required"
            ))
        })?;
        copy_credentials(ctx, &credentials, &entry_secret_name(&name)).await
    }
    .await;
    let changed_at = match prepared {
        Ok(t) => t,
        Err(e) => {
            let description = format!("preparing the seed failed: {e}");
            ctx.garden_warning(&reference(&garden), "ReconcileError", description.clone())
                .await;
            let r = Report {
                last_operation: status::errored(op, description.clone(), now),
                last_error: Some(status::last_error(description, e.kind().codes(), now)),
                ready: false,
            };
            write_status(ctx, &garden, &r).await?;
            return Err(e);
        }
    };
    if ext
        .as_ref()
        .is_some_and(|e| e.meta().deletion_timestamp.is_some())
    {
        return Ok(Next::After(ctx.resync));
    }
    // A seed object taken over from an earlier garden entry of the same shoot: its last
    // success was that entry's, so any is too old and the extension reconciles now
    // (the prefix marker is rewritten with this entry's identity).
    let taken_over = ext.as_ref().is_some_and(|e| {
        e.annotations()
            .get(ANNOTATION_GARDEN_UID)
            .is_some_and(|u| Some(u) != garden.meta().uid.as_ref())
    });
    let ensured = ensure_extension(
        ctx,
        ext.as_ref(),
        desired(ctx, &garden, &bucket),
        changed_at,
        taken_over.then_some(std::time::Duration::ZERO),
        handed_over(last),
    )
    .await?;
    let r = match (&ensured, &ext) {
        (Ensured::Current, Some(ext)) => report(ext, op, now),
        _ => Report {
            last_operation: status::processing(op, "reconcile requested in the seed", now),
            last_error: None,
            ready: false,
        },
    };
    if let Some(err) = r.last_error.as_ref()
        && !same_error(
            garden.status.as_ref().and_then(|s| s.last_error.as_ref()),
            Some(err),
        )
    {
        ctx.garden_warning(
            &reference(&garden),
            "ReconcileError",
            err.description.clone(),
        )
        .await;
    }
    write_status(ctx, &garden, &r).await?;
    Ok(Next::After(ctx.resync))
}

/// Writes the report into the garden status (only when it says something new).
async fn write_status(
    ctx: &Context,
    garden: &core::BackupEntry,
    r: &Report,
) -> Result<(), ReconcileError> {
    let current = garden.status.clone().unwrap_or_default();
    let me = ctx.seed_name.clone();
    let generation = garden.meta().generation;
    let unchanged = same_operation(current.last_operation.as_ref(), Some(&r.last_operation))
        && same_error(current.last_error.as_ref(), r.last_error.as_ref())
        && current.observed_generation == generation
        && current.seed_name.as_deref() == Some(me.as_str());
    if unchanged {
        return Ok(());
    }
    patch_status(
        &garden_api(ctx, &garden.namespace().unwrap_or_default()),
        &garden.name_any(),
        json!({
            "lastOperation": r.last_operation,
            "lastError": r.last_error,
            "observedGeneration": generation,
            "seedName": me,
        }),
    )
    .await?;
    Ok(())
}

async fn delete(
    ctx: &Context,
    garden: core::BackupEntry,
    ext: Option<extensions::BackupEntry>,
) -> Result<Next, ReconcileError> {
    let name = garden.name_any();
    let namespace = garden.namespace().unwrap_or_default();
    let last = garden
        .status
        .as_ref()
        .and_then(|s| s.last_operation.as_ref());
    let now = ctx.clock.now();
    let requested = garden
        .meta()
        .deletion_timestamp
        .as_ref()
        .map(|t| super::timestamp(from_k8s(t.0)));
    match ext {
        Some(ext) => {
            // Keep what decides the grace period in sync (force-deletion may come later).
            let mut changes: Vec<(&str, Option<String>)> = Vec::new();
            if ext.annotations().get(ANNOTATION_DELETION_REQUESTED_AT) != requested.as_ref() {
                changes.push((ANNOTATION_DELETION_REQUESTED_AT, requested.clone()));
            }
            for key in [ANNOTATION_SHOOT_PURPOSE, ANNOTATION_FORCE_DELETION] {
                let want = garden.annotations().get(key).cloned();
                if ext.annotations().get(key) != want.as_ref() {
                    changes.push((key, want));
                }
            }
            if !changes.is_empty() {
                match patch_annotations(&seed_api(ctx), &name, &changes).await {
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => return Ok(Next::Done),
                    Err(e) => return Err(e.into()),
                }
            }
            if ext.meta().deletion_timestamp.is_none() {
                let r = Report {
                    last_operation: deletion_requested(now),
                    last_error: None,
                    ready: false,
                };
                write_status(ctx, &garden, &r).await?;
                match seed_api(ctx).delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(e.into()),
                }
                return Ok(Next::Done);
            }
            let r = report(&ext, LastOperationType::Delete, now);
            write_status(ctx, &garden, &r).await?;
            Ok(Next::After(ctx.resync))
        }
        None if deletion_finished(last) => {
            delete_copied_secret(ctx, &entry_secret_name(&name)).await?;
            remove_finalizer(&garden_api(ctx, &namespace), &garden, FINALIZER_GARDENER).await?;
            Ok(Next::Done)
        }
        None => provision(ctx, garden, None).await,
    }
}

async fn hand_over(
    ctx: &Context,
    garden: &core::BackupEntry,
    ext: Option<extensions::BackupEntry>,
) -> Result<Next, ReconcileError> {
    let namespace = garden.namespace().unwrap_or_default();
    if !release_extension(ctx, ext.as_ref()).await? {
        let r = Report {
            last_operation: status::processing(
                LastOperationType::Migrate,
                format!(
                    "handing over to seed {}",
                    garden.spec.seed_name.clone().unwrap_or_default()
                ),
                ctx.clock.now(),
            ),
            last_error: None,
            ready: false,
        };
        write_status(ctx, garden, &r).await?;
        return Ok(Next::After(ctx.resync));
    }
    delete_copied_secret(ctx, &entry_secret_name(&garden.name_any())).await?;
    patch_status(
        &garden_api(ctx, &namespace),
        &garden.name_any(),
        json!({
            "lastOperation": status::succeeded(LastOperationType::Migrate, "released by the previous seed", ctx.clock.now()),
            "lastError": null,
            "seedName": null,
        }),
    )
    .await?;
    Ok(Next::Done)
}
