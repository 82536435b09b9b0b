//! The destination's quota through the garden (see
//! docs/architecture.md#placement-stays-within-quota): a migration never writes a
//! bucket's `status.entryCount` itself — the garden is its one writer, and a second
//! writer would race its recounts. The migration asks for a place with the entry's
//! `migration-target` annotation (written when the plan is done) and waits here for the
//! garden's answer (`migration-reserved` or `migration-refused`, see
//! [`granary_garden::moves`]) before it copies anything; the place is held until the
//! entry is switched.

use std::time::Duration;

use kube::runtime::wait::await_condition;

use super::MigrateError;
use super::run::{EntryMigration, MigrateContext};
use granary_api::core::{ANNOTATION_MIGRATION_REFUSED, ANNOTATION_MIGRATION_RESERVED, BackupEntry};

/// The garden's answer to a request for a place in `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The place is held (or the entry is there already).
    Held,
    Refused(String),
}

/// What the entry says about its request for a place in `target`; `None` while the
/// garden has not answered.
pub fn answer(entry: &BackupEntry, target: &str) -> Option<Answer> {
    if entry.spec.bucket_name == target {
        return Some(Answer::Held);
    }
    let annotations = entry.metadata.annotations.as_ref()?;
    if annotations
        .get(ANNOTATION_MIGRATION_RESERVED)
        .is_some_and(|r| r == target)
    {
        return Some(Answer::Held);
    }
    annotations
        .get(ANNOTATION_MIGRATION_REFUSED)
        .map(|why| Answer::Refused(why.clone()))
}

/// Waits (watching the entry) for the garden's answer, at most `ctx.garden_timeout`.
pub async fn await_place(ctx: &MigrateContext, req: &EntryMigration) -> Result<(), MigrateError> {
    let entry = ctx.entries(&req.namespace).get(&req.name).await?;
    if answer(&entry, &req.to_bucket).is_none() {
        let bucket = req.to_bucket.clone();
        ctx.output.event(
            serde_json::json!({"event": "waiting", "for": "place", "bucket": bucket}),
            || format!("waiting for the garden to give the entry a place in bucket {bucket}"),
        );
    }
    let target = req.to_bucket.clone();
    let answered = move |e: Option<&BackupEntry>| e.is_none_or(|e| answer(e, &target).is_some());
    let waited = tokio::time::timeout(
        ctx.garden_timeout,
        await_condition(ctx.entries(&req.namespace), &req.name, answered),
    )
    .await;
    let entry = match waited {
        Err(_) => {
            return Err(MigrateError::Timeout(format!(
                "the garden did not answer the request for a place in bucket {} within {} \
                 (is `granary garden` running, and does its --object-selector match \
                 BackupEntry {}/{}?); run the migration again to keep waiting",
                req.to_bucket,
                seconds(ctx.garden_timeout),
                req.namespace,
                req.name
            )));
        }
        Ok(Err(e)) => {
            return Err(MigrateError::Invalid(format!(
                "watching BackupEntry {}/{}: {e}",
                req.namespace, req.name
            )));
        }
        Ok(Ok(None)) => {
            return Err(MigrateError::Invalid(format!(
                "BackupEntry {}/{} was deleted during the migration",
                req.namespace, req.name
            )));
        }
        Ok(Ok(Some(entry))) => entry,
    };
    match answer(&entry, &req.to_bucket) {
        Some(Answer::Held) => Ok(()),
        Some(Answer::Refused(why)) => Err(MigrateError::Refused(why)),
        // await_condition returned, so the condition held.
        None => Err(MigrateError::Invalid(format!(
            "BackupEntry {}/{}: no answer from the garden",
            req.namespace, req.name
        ))),
    }
}

fn seconds(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::core::BackupEntrySpec;

    fn entry(bucket: &str, pairs: &[(&str, &str)]) -> BackupEntry {
        let mut e = BackupEntry::new(
            "e",
            BackupEntrySpec {
                bucket_name: bucket.into(),
                ..Default::default()
            },
        );
        e.metadata.annotations = Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        e
    }

    #[test]
    fn the_answer_is_read_from_the_entry() {
        assert_eq!(answer(&entry("src", &[]), "dst"), None);
        assert_eq!(
            answer(
                &entry("src", &[(ANNOTATION_MIGRATION_RESERVED, "dst")]),
                "dst"
            ),
            Some(Answer::Held)
        );
        assert_eq!(answer(&entry("dst", &[]), "dst"), Some(Answer::Held));
        assert_eq!(
            answer(
                &entry(
                    "src",
                    &[(ANNOTATION_MIGRATION_REFUSED, "bucket dst is full")]
                ),
                "dst"
            ),
            Some(Answer::Refused("bucket dst is full".into()))
        );
        // A place held elsewhere is not an answer for this target.
        assert_eq!(
            answer(
                &entry("src", &[(ANNOTATION_MIGRATION_RESERVED, "other")]),
                "dst"
            ),
            None
        );
    }
}
