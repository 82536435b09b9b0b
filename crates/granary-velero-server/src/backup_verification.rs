//! The `backup-verification` controller (Granary's; docs/formats.md#integrity-record):
//! the scrubber, and the restore rehearsals Schedules ask for.
//!
//! **Scrubbing.** Every `verifyFrequency` (24h) a round re-reads a sample of the stored
//! backups (Completed or PartiallyFailed, on a location that exists) and checks every
//! object of each against its integrity record: `ceil(verifySample × N)` backups, those
//! checked longest ago (or never) first, each at most once per `verifyFrequency /
//! verifySample`. The verdict goes onto the Backup (`granary.gardener.cloud/integrity`,
//! `…/integrity-reason`, `…/integrity-checked-at`, which `granary backup get` shows), a
//! Warning event says anything but `verified`, and
//! `granary_backup_verification_total{result}` and
//! `granary_backup_last_verified_timestamp{backup}` count them.
//!
//! **Rehearsals.** A Completed backup of a Schedule annotated
//! `granary.gardener.cloud/rehearse: "true"` that has not been rehearsed is: checked
//! deeply (every object against the record, the tarball item by item against the
//! manifest and the resource list), then its restore run against the live cluster with
//! nothing written (the restore controller's dry run); the outcome goes onto the Backup
//! ([`REHEARSAL_ANNOTATION`]). `granary restore create --rehearse` does the same on
//! demand.

use futures::{StreamExt, TryStreamExt};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use granary_api::velero::{
    Backup, BackupPhase, BackupStorageLocation, INTEGRITY_CHECKED_AT_ANNOTATION,
    INTEGRITY_REASON_ANNOTATION, REHEARSAL_ANNOTATION, REHEARSED_AT_ANNOTATION, Restore,
    SCHEDULE_NAME_LABEL, Schedule, is_synced,
};
use granary_runtime::passes::run_passes;
use granary_velero::integrity::Keyring;
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use serde_json::json;

use super::backup_sync::{integrity_annotations, integrity_event};
use super::context::{OpenLocation, VeleroContext, k8s_time};
use super::integrity::{self, Hash};

/// Annotation on a Schedule (value `true`): rehearse the restore of each of its backups.
pub const REHEARSE_ANNOTATION: &str = "granary.gardener.cloud/rehearse";
/// How many backups a scrubbing round checks at a time (reads and a verdict write each).
pub const SCRUB_CONCURRENCY: usize = 8;
/// How often the controller looks for rehearsals to run (rounds of the scrubber come
/// every `verifyFrequency`).
const PASS_EVERY: Duration = Duration::from_secs(30);

/// When `backup` was last checked, from its annotation.
fn checked_at(backup: &Backup) -> Option<DateTime<Utc>> {
    backup
        .annotations()
        .get(INTEGRITY_CHECKED_AT_ANNOTATION)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// Whether a backup holds stored files to check.
fn stored(backup: &Backup) -> bool {
    matches!(
        backup.status.as_ref().and_then(|s| s.phase),
        Some(BackupPhase::Completed | BackupPhase::PartiallyFailed)
    )
}

/// The scrubber's pick for one round: of the backups (name, last checked), those not
/// checked within `frequency / sample` (a tenth of `frequency` of slack, so a backup
/// checked just after a round is not skipped by the next), the least recently checked
/// first, at most `ceil(sample × all)`.
pub fn pick(
    backups: &[(String, Option<DateTime<Utc>>)],
    now: DateTime<Utc>,
    frequency: Duration,
    sample: f64,
) -> Vec<String> {
    let sample = sample.clamp(f64::MIN_POSITIVE, 1.0);
    let interval = frequency.div_f64(sample).saturating_sub(frequency / 10);
    let interval = chrono::Duration::from_std(interval).unwrap_or(chrono::Duration::MAX);
    let mut due: Vec<&(String, Option<DateTime<Utc>>)> = backups
        .iter()
        .filter(|(_, at)| at.is_none_or(|at| now - at >= interval))
        .collect();
    due.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    let quota = ((backups.len() as f64) * sample).ceil() as usize;
    due.into_iter()
        .take(quota.max(1))
        .map(|(n, _)| n.clone())
        .collect()
}

/// Whether a backup is due for a rehearsal: Completed, not rehearsed, made by one of the
/// `rehearsing` Schedules (never a synced record: a bucket does not choose).
pub fn needs_rehearsal(backup: &Backup, rehearsing: &[String]) -> bool {
    backup.status.as_ref().and_then(|s| s.phase) == Some(BackupPhase::Completed)
        && !is_synced(backup)
        && !backup.annotations().contains_key(REHEARSAL_ANNOTATION)
        && backup
            .labels()
            .get(SCHEDULE_NAME_LABEL)
            .is_some_and(|s| rehearsing.contains(s))
}

pub async fn run(ctx: Arc<VeleroContext>) {
    let mut next_round = ctx.clock.now();
    let every = PASS_EVERY.min(ctx.settings.verify_frequency.0);
    run_passes("backup verification", None, every, || {
        let ctx = ctx.clone();
        let due = ctx.clock.now() >= next_round;
        if due {
            next_round = ctx.clock.now()
                + chrono::Duration::from_std(ctx.settings.verify_frequency.0)
                    .unwrap_or(chrono::Duration::MAX);
        }
        async move { pass(&ctx, due).await }
    })
    .await
}

/// One pass: the due rehearsals, then, when `round`, a scrubbing round (public for the
/// benchmarks).
pub async fn pass(ctx: &Arc<VeleroContext>, round: bool) -> Result<(), kube::Error> {
    if ctx.keys.current().is_empty() {
        return Ok(());
    }
    let backups = ctx
        .api::<Backup>()
        .list(&ListParams::default())
        .await?
        .items;
    let rehearsing: Vec<String> = ctx
        .api::<Schedule>()
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|s| {
            s.annotations()
                .get(REHEARSE_ANNOTATION)
                .is_some_and(|v| v == "true")
        })
        .map(|s| s.name_any())
        .collect();
    for b in backups.iter().filter(|b| needs_rehearsal(b, &rehearsing)) {
        // The restore runner's future is not Send: it runs on a thread of its own, as a
        // restore does.
        let (shared, backup) = (ctx.clone(), b.clone());
        let outcome =
            super::thread::on_own_thread(format!("rehearse-{}", b.name_any()), move |rt| {
                rt.block_on(rehearse(&shared, &backup))
            })
            .await
            .unwrap_or_else(Rehearsal::Failed);
        record_rehearsal(ctx, b, &outcome).await?;
    }
    if !round {
        return Ok(());
    }
    let candidates: Vec<(String, Option<DateTime<Utc>>)> = backups
        .iter()
        .filter(|b| stored(b))
        .map(|b| (b.name_any(), checked_at(b)))
        .collect();
    let picked = pick(
        &candidates,
        ctx.clock.now(),
        ctx.settings.verify_frequency.0,
        ctx.settings.verify_sample,
    );
    tracing::info!(
        backups = candidates.len(),
        checking = picked.len(),
        "backup verification round"
    );
    let by_name: HashMap<String, &Backup> = backups.iter().map(|b| (b.name_any(), b)).collect();
    let picked: Vec<&Backup> = picked
        .iter()
        .filter_map(|n| by_name.get(n).copied())
        .collect();
    // Each location of the round is looked up and opened once (its credential Secret
    // read with it), not once per backup; one that cannot be keeps its reason.
    let mut opened = Opened::new();
    for b in &picked {
        if let Ok(name) = location_name(b)
            && !opened.contains_key(&name)
        {
            let o = open_location(ctx, &name).await;
            opened.insert(name, o);
        }
    }
    let keyring = ctx.keys.current();
    let (opened, keyring) = (&opened, &keyring);
    futures::stream::iter(picked)
        .map(Ok)
        .try_for_each_concurrent(SCRUB_CONCURRENCY, |b| async move {
            scrub(ctx, b, opened, keyring).await
        })
        .await
}

/// The locations of a round, opened, by name: the namespace owner each belongs to and
/// its store, or why it could not be opened.
type Opened = HashMap<String, Result<(Option<String>, OpenLocation), String>>;

/// Checks one backup and records the verdict.
async fn scrub(
    ctx: &VeleroContext,
    b: &Backup,
    opened: &Opened,
    keyring: &Keyring,
) -> Result<(), kube::Error> {
    let name = b.name_any();
    let location = location_name(b).and_then(|l| match opened.get(&l) {
        Some(Ok(o)) => Ok(o),
        Some(Err(e)) => Err(e.clone()),
        None => Err(format!("its storage location {l:?} was not opened")),
    });
    let checked = match location {
        Ok((tenant, open)) => {
            integrity::check_backup(
                open.store.as_ref(),
                &open.access.layout,
                &b.stored_name(),
                keyring,
                tenant.as_deref(),
                Hash::AllBut(&[]),
            )
            .await
        }
        Err(e) => Err(e),
    };
    let verdict = match checked.map(|c| c.verdict) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(backup = %name, error = %e, "backup verification: not checked this round");
            return Ok(());
        }
    };
    let now = ctx.clock.now();
    let mut annotations = serde_json::Map::new();
    annotations.insert(
        INTEGRITY_REASON_ANNOTATION.to_owned(),
        serde_json::Value::Null,
    );
    for (k, v) in integrity_annotations(&verdict, now) {
        annotations.insert(k, v.into());
    }
    let patch = json!({"metadata": {"annotations": annotations}});
    ctx.api::<Backup>()
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    ctx.metrics
        .verification
        .with_label_values(&[verdict.as_str()])
        .inc();
    ctx.metrics
        .integrity
        .with_label_values(&["scrub", verdict.as_str()])
        .inc();
    if verdict.is_verified() {
        ctx.metrics
            .last_verified
            .with_label_values(&[&name])
            .set(now.timestamp());
    }
    if let Some((reason, message)) = integrity_event(&verdict) {
        tracing::warn!(backup = %name, verdict = %verdict, "backup verification");
        ctx.event(b, EventType::Warning, reason, message).await;
    }
    Ok(())
}

/// The name of `b`'s location.
fn location_name(b: &Backup) -> Result<String, String> {
    b.spec
        .storage_location
        .clone()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| "the backup names no storage location".to_owned())
}

/// The location `name`.
async fn location_named(ctx: &VeleroContext, name: &str) -> Result<BackupStorageLocation, String> {
    ctx.api::<BackupStorageLocation>()
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("its storage location {name:?} does not exist"))
}

/// The location of `b`.
async fn location_of(ctx: &VeleroContext, b: &Backup) -> Result<BackupStorageLocation, String> {
    location_named(ctx, &location_name(b)?).await
}

/// Location `name` opened, and the namespace owner it belongs to, if any.
async fn open_location(
    ctx: &VeleroContext,
    name: &str,
) -> Result<(Option<String>, OpenLocation), String> {
    let location = location_named(ctx, name).await?;
    let tenant = super::location::tenant_namespace(&location);
    let open = ctx.open(location).await.map_err(|e| e.to_string())?;
    Ok((tenant, open))
}

/// What a rehearsal found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rehearsal {
    Ok {
        create: usize,
        update: usize,
        skip: usize,
    },
    Failed(String),
}

impl Rehearsal {
    /// The [`REHEARSAL_ANNOTATION`] value.
    pub fn annotation(&self) -> String {
        match self {
            Rehearsal::Ok {
                create,
                update,
                skip,
            } => format!("ok: {create} to create, {update} to update, {skip} to skip"),
            Rehearsal::Failed(reason) => format!("failed: {reason}"),
        }
    }
}

/// Rehearses the restore of `b`: a deep check, then the restore of everything in it run
/// against the live cluster with nothing written.
pub async fn rehearse(ctx: &VeleroContext, b: &Backup) -> Rehearsal {
    rehearse_restore(ctx, b, &rehearsal_restore(ctx.namespace(), b)).await
}

/// The Restore a rehearsal of `b` runs: everything in the backup, as a plain `granary
/// restore create --from-backup` would.
pub fn rehearsal_restore(namespace: &str, b: &Backup) -> Restore {
    let mut r = Restore::default();
    r.metadata.name = Some(format!("rehearsal-{}", b.name_any()));
    r.metadata.namespace = Some(namespace.to_owned());
    r.spec.backup_name = Some(b.name_any());
    r
}

/// Rehearses `restore` (of backup `b`): a deep check of the backup, then its dry run.
pub async fn rehearse_restore(ctx: &VeleroContext, b: &Backup, restore: &Restore) -> Rehearsal {
    use super::restore::run::ItemAction;
    match deep_check(ctx, b).await {
        Ok(problems) if problems.is_empty() => {}
        Ok(problems) => return Rehearsal::Failed(problems.join("; ")),
        Err(e) => return Rehearsal::Failed(e),
    }
    match super::restore_controller::dry_run(ctx, restore).await {
        Err(errors) => Rehearsal::Failed(errors.join("; ")),
        Ok(outcome) => {
            if let Some(reason) = outcome.failure_reason.clone() {
                return Rehearsal::Failed(reason);
            }
            let count = |a: ItemAction| outcome.handled.iter().filter(|h| h.action == a).count();
            let failing = count(ItemAction::Failed);
            if failing > 0 {
                return Rehearsal::Failed(format!("{failing} item(s) would fail to restore"));
            }
            Rehearsal::Ok {
                create: count(ItemAction::Created),
                update: count(ItemAction::Updated),
                skip: count(ItemAction::Skipped),
            }
        }
    }
}

/// The deep check of `b` at its location: the integrity record (every object), then the
/// tarball item by item against the stored manifest and resource list. The problems
/// found, empty when it is sound.
pub async fn deep_check(ctx: &VeleroContext, b: &Backup) -> Result<Vec<String>, String> {
    let location = location_of(ctx, b).await?;
    let tenant = super::location::tenant_namespace(&location);
    let open = ctx.open(location).await.map_err(|e| e.to_string())?;
    let checked = integrity::deep_check_backup(
        open.store.as_ref(),
        &open.access.layout,
        &b.stored_name(),
        &ctx.keys.current(),
        tenant.as_deref(),
    )
    .await?;
    if !checked.verdict.is_verified() {
        return Ok(vec![checked.verdict.describe()]);
    }
    Ok(checked.problems)
}

/// Writes a rehearsal's outcome onto the Backup (and a Warning event when it failed).
pub async fn record_rehearsal(
    ctx: &VeleroContext,
    b: &Backup,
    outcome: &Rehearsal,
) -> Result<(), kube::Error> {
    let patch = json!({"metadata": {"annotations": {
        REHEARSAL_ANNOTATION: outcome.annotation(),
        REHEARSED_AT_ANNOTATION: k8s_time(ctx.clock.now()),
    }}});
    ctx.api::<Backup>()
        .patch(
            &b.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    match outcome {
        Rehearsal::Ok { .. } => {
            tracing::info!(backup = %b.name_any(), outcome = %outcome.annotation(), "restore rehearsed")
        }
        Rehearsal::Failed(reason) => {
            ctx.event(
                b,
                EventType::Warning,
                "RehearsalFailed",
                format!("the restore rehearsal of this backup failed: {reason}"),
            )
            .await
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    const DAY: Duration = Duration::from_secs(24 * 3600);

    #[test]
    fn a_round_checks_the_never_checked_and_the_longest_ago_first() {
        let now = t("2026-11-28T12:00:00Z");
        let backups = vec![
            ("fresh".to_owned(), Some(t("2026-11-28T11:00:00Z"))),
            ("old".to_owned(), Some(t("2026-11-20T00:00:00Z"))),
            ("older".to_owned(), Some(t("2026-11-01T00:00:00Z"))),
            ("never".to_owned(), None),
        ];
        assert_eq!(pick(&backups, now, DAY, 1.0), vec!["never", "older", "old"]);
        // A quarter per round: one of four; each is checked about every four days.
        assert_eq!(pick(&backups, now, DAY, 0.25), vec!["never"]);
        // Half: two of four, and "old" (8 days) is due at 2 days.
        assert_eq!(pick(&backups, now, DAY, 0.5), vec!["never", "older"]);
        // Checked just after the last round (23h ago) is due at the next one.
        let just_after = vec![("b".to_owned(), Some(t("2026-11-27T13:00:00Z")))];
        assert_eq!(pick(&just_after, now, DAY, 1.0), vec!["b"]);
        assert!(pick(&[], now, DAY, 1.0).is_empty());
    }

    #[test]
    fn rehearsals_are_for_the_completed_unrehearsed_backups_of_asking_schedules() {
        let mut b = Backup::default();
        b.metadata.name = Some("nightly-1".into());
        b.metadata.labels = Some([(SCHEDULE_NAME_LABEL.to_owned(), "nightly".to_owned())].into());
        b.status = Some(granary_api::velero::BackupStatus {
            phase: Some(BackupPhase::Completed),
            ..Default::default()
        });
        let asking = vec!["nightly".to_owned()];
        assert!(needs_rehearsal(&b, &asking));
        assert!(!needs_rehearsal(&b, &[]));
        let mut done = b.clone();
        done.metadata.annotations =
            Some([(REHEARSAL_ANNOTATION.to_owned(), "ok".to_owned())].into());
        assert!(!needs_rehearsal(&done, &asking));
        let mut synced = b.clone();
        synced.metadata.labels.as_mut().unwrap().insert(
            granary_api::velero::SYNCED_LABEL.to_owned(),
            "true".to_owned(),
        );
        assert!(!needs_rehearsal(&synced, &asking));
        let mut failed = b;
        failed.status.as_mut().unwrap().phase = Some(BackupPhase::Failed);
        assert!(!needs_rehearsal(&failed, &asking));
    }

    #[test]
    fn rehearsal_annotations_say_the_counts_or_the_reason() {
        let ok = Rehearsal::Ok {
            create: 3,
            update: 1,
            skip: 2,
        };
        assert_eq!(ok.annotation(), "ok: 3 to create, 1 to update, 2 to skip");
        assert_eq!(Rehearsal::Failed("x".into()).annotation(), "failed: x");
    }
}
