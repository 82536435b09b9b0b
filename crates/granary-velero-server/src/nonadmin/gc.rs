//! NAC's garbage collector: every `nonAdmin.garbageCollectionPeriod`, Velero Backups and
//! Restores in the Velero namespace that NAC made ([`super::plan::nac_origin`]) but whose
//! NonAdminBackup or NonAdminRestore is gone are deleted (a Backup CR only: its data
//! stays in object storage, as with a plain delete), and so are the Velero
//! BackupStorageLocations, credentials Secret copies and NonAdminBackupStorageLocationRequests
//! made for a NonAdminBackupStorageLocation that is gone
//! ([`super::plan::location_orphaned`]; a location's data stays too). Objects without
//! NAC's labels and origin annotations are never touched.

use granary_runtime::passes::run_passes;
use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};

use super::is_not_found;
use super::plan::{Origin, live_locations, location_orphaned, nac_origin, secret_candidates};
use crate::context::VeleroContext;
use granary_api::oadp::{
    MANAGED_BY_LABEL, MANAGED_BY_LABEL_VALUE, NonAdminBackup, NonAdminBackupStorageLocation,
    NonAdminBackupStorageLocationRequest, NonAdminRestore, OADP_LABEL, OADP_LABEL_VALUE,
};
use granary_api::velero::{Backup, BackupStorageLocation, Restore};

/// Runs the collector every period until dropped; a zero period turns it off.
pub async fn run(ctx: Arc<VeleroContext>) {
    let every = ctx.settings.non_admin.garbage_collection_period.0;
    if every.is_zero() {
        return;
    }
    run_passes(
        "non-admin garbage collection pass failed",
        None,
        every,
        || pass(&ctx),
    )
    .await
}

fn keys<K: ResourceExt>(items: &[K]) -> BTreeSet<(String, String)> {
    items
        .iter()
        .map(|o| (o.namespace().unwrap_or_default(), o.name_any()))
        .collect()
}

async fn pass(ctx: &VeleroContext) -> Result<(), kube::Error> {
    let lp = ListParams::default();
    // Velero objects first: an origin created after this list cannot be mistaken as gone.
    let backups = ctx.api::<Backup>().list(&lp).await?.items;
    let restores = ctx.api::<Restore>().list(&lp).await?.items;
    let nabs = keys(
        &Api::<NonAdminBackup>::all(ctx.client.clone())
            .list(&lp)
            .await?
            .items,
    );
    let nars = keys(
        &Api::<NonAdminRestore>::all(ctx.client.clone())
            .list(&lp)
            .await?
            .items,
    );
    for b in &backups {
        if let Some(origin) = nac_origin(Origin::Backup, b.labels(), b.annotations())
            && !nabs.contains(&origin)
        {
            delete(ctx, ctx.api::<Backup>(), &b.name_any()).await?;
        }
    }
    for r in &restores {
        if let Some(origin) = nac_origin(Origin::Restore, r.labels(), r.annotations())
            && !nars.contains(&origin)
        {
            delete(ctx, ctx.api::<Restore>(), &r.name_any()).await?;
        }
    }
    locations_pass(ctx).await
}

/// The objects of NonAdminBackupStorageLocations that are gone. The seed reads Secrets
/// by name only (deploy/seed/rbac.yaml grants no `list` on them), so the Secret copies
/// looked at are those named like a location or request made for a NABSL
/// ([`secret_candidates`]); they go first, so a failed pass leaves the location and
/// request that lead to them for the next one.
async fn locations_pass(ctx: &VeleroContext) -> Result<(), kube::Error> {
    let nac = ListParams::default().labels(&format!(
        "{OADP_LABEL}={OADP_LABEL_VALUE},{MANAGED_BY_LABEL}={MANAGED_BY_LABEL_VALUE}"
    ));
    // The objects first, then their origins (as above).
    let locations = ctx.api::<BackupStorageLocation>().list(&nac).await?.items;
    let requests = ctx
        .api::<NonAdminBackupStorageLocationRequest>()
        .list(&nac)
        .await?
        .items;
    let mut secrets = Vec::new();
    let metas = locations
        .iter()
        .map(|l| &l.metadata)
        .chain(requests.iter().map(|r| &r.metadata));
    for name in secret_candidates(metas) {
        if let Some(s) = ctx.api::<Secret>().get_opt(&name).await? {
            secrets.push(s);
        }
    }
    let live = live_locations(
        &Api::<NonAdminBackupStorageLocation>::all(ctx.client.clone())
            .list(&ListParams::default())
            .await?
            .items,
    );
    for s in &secrets {
        if location_orphaned(s.labels(), s.annotations(), &live) {
            delete(ctx, ctx.api::<Secret>(), &s.name_any()).await?;
        }
    }
    for l in &locations {
        if location_orphaned(l.labels(), l.annotations(), &live) {
            delete(ctx, ctx.api::<BackupStorageLocation>(), &l.name_any()).await?;
        }
    }
    for r in &requests {
        if location_orphaned(r.labels(), r.annotations(), &live) {
            delete(
                ctx,
                ctx.api::<NonAdminBackupStorageLocationRequest>(),
                &r.name_any(),
            )
            .await?;
        }
    }
    Ok(())
}

async fn delete<K>(ctx: &VeleroContext, api: Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {
            tracing::info!(namespace = %ctx.namespace(), name, "non-admin garbage collected");
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e),
    }
}
