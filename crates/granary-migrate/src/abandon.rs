//! `granary migrate abandon`: backs out of a migration that has not switched the entry
//! yet (a wrong `--to-bucket`, a destination that will not do). etcd-main comes back on
//! its old configuration if an interrupted cut-over left it down, the copies in the
//! destination go (they are referenced by nothing: the entry still lives in its source),
//! and the migration's annotations are removed, upon which the garden releases the place
//! it held in the destination. Once the entry is switched there is no way back but
//! finishing the migration (and migrating again).

use serde_json::json;

use super::MigrateError;
use super::cutover;
use super::phase::{
    ANNOTATION_ETCD_REPLICAS, ANNOTATION_PHASE, ANNOTATION_SCALED_DOWN_AT, ANNOTATION_SOURCE,
    ANNOTATION_TARGET, Phase,
};
use super::run::{EntryMigration, MigrateContext};
use granary_api::core::ANNOTATION_MIGRATION_REFUSED;
use granary_seed::prefix::{BucketLayout, entry_key_prefix};
use kube::ResourceExt;

/// What abandoning did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AbandonReport {
    pub entry: String,
    /// The bucket the entry was moving into.
    pub destination_bucket: String,
    /// Objects removed from the destination (copies and the manifest).
    pub objects_removed: u64,
    /// etcd-main was down from an interrupted cut-over and was scaled back up.
    pub etcd_restored: bool,
}

impl std::fmt::Display for AbandonReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "abandoned the migration of {} into {}: {} objects removed from the destination{}",
            self.entry,
            self.destination_bucket,
            self.objects_removed,
            if self.etcd_restored {
                ", etcd-main scaled back up"
            } else {
                ""
            }
        )
    }
}

/// Decides whether the migration of an entry in `phase`, naming `bucket_name`, with
/// `target` recorded, can be abandoned; returns the destination bucket.
pub fn may_abandon(
    entry: &str,
    phase: Phase,
    bucket_name: &str,
    target: Option<&str>,
) -> Result<String, String> {
    let Some(target) = target.filter(|_| phase != Phase::Plan) else {
        return Err(format!("no migration of {entry} is in flight"));
    };
    if bucket_name == target || phase >= Phase::ScaleUp {
        return Err(format!(
            "{entry} already lives in bucket {target}; finish the migration with `granary \
             migrate entry {entry} --to-bucket {target}` (and migrate again to move it back)"
        ));
    }
    Ok(target.to_string())
}

/// Abandons the migration of `namespace/name`.
pub async fn abandon(
    ctx: &MigrateContext,
    namespace: &str,
    name: &str,
) -> Result<AbandonReport, MigrateError> {
    let label = format!("{namespace}/{name}");
    let entry = ctx.entries(namespace).get(name).await?;
    let annotations = entry.annotations();
    let phase = Phase::from_annotation(annotations.get(ANNOTATION_PHASE).map(String::as_str))?;
    let target = may_abandon(
        &label,
        phase,
        &entry.spec.bucket_name,
        annotations.get(ANNOTATION_TARGET).map(String::as_str),
    )
    .map_err(MigrateError::Invalid)?;
    let mut report = AbandonReport {
        entry: label,
        destination_bucket: target.clone(),
        ..AbandonReport::default()
    };
    // etcd first: nothing was switched, so "back up" is on the old configuration.
    if annotations.contains_key(ANNOTATION_ETCD_REPLICAS) {
        let req = EntryMigration {
            namespace: namespace.to_string(),
            name: name.to_string(),
            to_bucket: target.clone(),
            dry_run: false,
            delete_source_now: false,
            allow_other_pool: false,
        };
        cutover::scale_up(ctx, &req).await?;
        report.etcd_restored = true;
    }
    // Then the copies (before the annotations, so a crash in between can be abandoned
    // again).
    let exists = kube::Api::<granary_api::core::BackupBucket>::all(ctx.garden.clone())
        .get_opt(&target)
        .await?
        .is_some();
    // A destination that is gone holds nothing of the entry.
    if exists {
        let destination = ctx.open_bucket(&target).await?;
        if destination.layout == BucketLayout::Legacy {
            return Err(MigrateError::Invalid(format!(
                "bucket {target} is a legacy bucket; its root is never deleted"
            )));
        }
        let prefix = entry_key_prefix(destination.layout, name)?;
        let deleted = destination.store.delete_prefix(&target, &prefix).await?;
        report.objects_removed = deleted.deleted;
    }
    // The garden sees the request withdrawn and releases the place it held.
    ctx.annotate(
        namespace,
        name,
        json!({
            ANNOTATION_PHASE: null,
            ANNOTATION_SOURCE: null,
            ANNOTATION_TARGET: null,
            ANNOTATION_MIGRATION_REFUSED: null,
            ANNOTATION_ETCD_REPLICAS: null,
            ANNOTATION_SCALED_DOWN_AT: null,
        }),
    )
    .await?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unswitched_migration_in_flight_can_be_abandoned() {
        let e = "p/e";
        assert!(
            may_abandon(e, Phase::Plan, "src", None)
                .unwrap_err()
                .contains("no migration")
        );
        assert_eq!(
            may_abandon(e, Phase::Copy, "src", Some("dst")),
            Ok("dst".into())
        );
        assert_eq!(
            may_abandon(e, Phase::CutOver, "src", Some("dst")),
            Ok("dst".into())
        );
        // Switched (the cut-over got as far as the entry) or past it.
        for phase in [Phase::CutOver, Phase::ScaleUp, Phase::Cleanup] {
            let why = may_abandon(e, phase, "dst", Some("dst")).unwrap_err();
            assert!(why.contains("already lives in bucket dst"), "{why}");
        }
        assert!(may_abandon(e, Phase::ScaleUp, "src", Some("dst")).is_err());
        // A phase without a target is not a migration this build can back out of.
        assert!(may_abandon(e, Phase::Copy, "src", None).is_err());
    }
}
