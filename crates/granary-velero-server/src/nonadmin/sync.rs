//! NAC's NonAdminBackup sync (`nonadminbackupsynchronizer`): every
//! `nonAdmin.backupSyncPeriod`, NonAdminBackups are recreated for finished Velero
//! Backups made for them ([`super::plan::nabs_to_sync`]) on the default location or on
//! the location of a NonAdminBackupStorageLocation that still exists
//! ([`super::plan::watched_locations`]; the NAB then names that NABSL), when their
//! namespace exists and their NAB is gone, e.g. after a plain `kubectl delete nab`
//! whose Velero Backup Velero's own sync brought back from object storage. The NAB
//! controller then takes the Velero Backup over ([`super::plan::adopted_nacuuid`]).

use granary_runtime::passes::run_passes;
use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};

use super::is_conflict;
use super::plan::{live_locations, nabs_to_sync, watched_locations};
use crate::context::VeleroContext;
use granary_api::oadp::{NonAdminBackup, NonAdminBackupStorageLocation};
use granary_api::velero::{Backup, BackupStorageLocation};

/// Runs the sync every period until dropped; a zero period turns it off.
pub async fn run(ctx: Arc<VeleroContext>) {
    let every = ctx.settings.non_admin.backup_sync_period.0;
    if every.is_zero() {
        return;
    }
    run_passes("non-admin backup sync pass failed", None, every, || {
        pass(&ctx)
    })
    .await
}

async fn pass(ctx: &VeleroContext) -> Result<(), kube::Error> {
    let lp = ListParams::default();
    let locations = ctx.api::<BackupStorageLocation>().list(&lp).await?.items;
    // The default location: the one marked default, else the configured name.
    let default = locations
        .iter()
        .find(|l| l.spec.default == Some(true))
        .map(|l| l.name_any())
        .unwrap_or_else(|| ctx.settings.default_backup_storage_location.clone());
    let live = live_locations(
        &Api::<NonAdminBackupStorageLocation>::all(ctx.client.clone())
            .list(&lp)
            .await?
            .items,
    );
    let watched = watched_locations(&default, &locations, &live);
    let backups = ctx.api::<Backup>().list(&lp).await?.items;
    let namespaces: BTreeSet<String> = Api::<Namespace>::all(ctx.client.clone())
        .list(&lp)
        .await?
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    let existing = Api::<NonAdminBackup>::all(ctx.client.clone())
        .list(&lp)
        .await?
        .items;
    for mut nab in nabs_to_sync(&backups, &watched, &namespaces, &existing) {
        let ns = nab.namespace().unwrap_or_default();
        if let Some(labels) = nab.metadata.labels.as_mut() {
            ctx.selector.label(labels);
        }
        let api: Api<NonAdminBackup> = Api::namespaced(ctx.client.clone(), &ns);
        match api.create(&PostParams::default(), &nab).await {
            Ok(_) => {
                tracing::info!(namespace = %ns, name = %nab.name_any(), "non-admin backup synced")
            }
            Err(e) if is_conflict(&e) => {}
            Err(e) => {
                tracing::warn!(namespace = %ns, name = %nab.name_any(), error = %e, "non-admin backup sync")
            }
        }
    }
    Ok(())
}
