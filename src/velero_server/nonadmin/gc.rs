//! NAC's garbage collector: every `nonAdmin.garbageCollectionPeriod`, Velero Backups and
//! Restores in the Velero namespace that NAC made ([`super::plan::nac_origin`]) but whose
//! NonAdminBackup or NonAdminRestore is gone are deleted (a Backup CR only: its data
//! stays in object storage, as with a plain delete). Objects without NAC's labels and
//! origin annotations are never touched. (NAC also collects the Secrets and locations
//! of NonAdminBackupStorageLocations, which Granary does not have yet.)

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};

use super::is_not_found;
use super::plan::{Origin, nac_origin};
use crate::api::oadp::{NonAdminBackup, NonAdminRestore};
use crate::api::velero::{Backup, Restore};
use crate::velero_server::context::VeleroContext;

/// Runs the collector every period until dropped; a zero period turns it off.
pub async fn run(ctx: Arc<VeleroContext>) {
    let every = ctx.settings.non_admin.garbage_collection_period.0;
    if every.is_zero() {
        return;
    }
    loop {
        if let Err(e) = pass(&ctx).await {
            tracing::warn!(error = %e, "non-admin garbage collection pass failed");
        }
        tokio::time::sleep(every).await;
    }
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
