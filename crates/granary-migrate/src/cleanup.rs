//! Phase 5: the source goes away through Granary's normal entry deletion. The
//! `source-<entry>` BackupEntry on the old bucket is deleted — lazily (the seed removes
//! the old objects after the grace period) or, with `--delete-source-now`, force-deleted
//! at once. A legacy source bucket's garden BackupBucket is deleted too: the garden's
//! deletion guard keeps it until no entry references it, and the seed deletes a legacy
//! bucket whole with its one entry
//! (docs/architecture.md#ownership-comes-from-the-bucket).

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::MigrateError;
use super::run::{BucketSide, EntryMigration, MigrateContext};
use granary_api::core::{ANNOTATION_FORCE_DELETION, BackupBucket, SOURCE_ENTRY_PREFIX};
use granary_runtime::failpoints;
use granary_seed::prefix::BucketLayout;

/// Failpoint before the source is handed over for deletion.
pub const FAILPOINT_CLEANUP: &str = "migrate.cleanup";

fn absent_ok<T>(r: Result<T, kube::Error>) -> Result<(), MigrateError> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the source entry (and a legacy source bucket). Idempotent.
pub async fn cleanup(
    ctx: &MigrateContext,
    req: &EntryMigration,
    source: &BucketSide,
) -> Result<(), MigrateError> {
    failpoints::hit(FAILPOINT_CLEANUP)?;
    let entries = ctx.entries(&req.namespace);
    let name = format!("{SOURCE_ENTRY_PREFIX}{}", req.name);
    if req.delete_source_now {
        let patch = json!({"metadata": {"annotations": {ANNOTATION_FORCE_DELETION: "true"}}});
        absent_ok(
            entries
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await,
        )?;
    }
    absent_ok(entries.delete(&name, &DeleteParams::default()).await)?;
    if source.layout == BucketLayout::Legacy {
        let buckets: Api<BackupBucket> = Api::all(ctx.garden.clone());
        absent_ok(
            buckets
                .delete(&source.name(), &DeleteParams::default())
                .await,
        )?;
    }
    ctx.output.event(
        json!({"event": "cleanup", "sourceEntry": name, "now": req.delete_source_now}),
        || {
            format!(
                "source entry {name} deleted ({})",
                if req.delete_source_now {
                    "force: the seed removes the old objects now"
                } else {
                    "the seed removes the old objects after the grace period"
                }
            )
        },
    );
    Ok(())
}
