//! The `schedule` controller (Velero's `schedule_controller.go`): validates a Schedule
//! (`Enabled` / `FailedValidation` with `validationErrors`), and when it is due creates
//! the backup `<schedule>-<yyyyMMddHHmmss>` from its template — the template's labels
//! (else the schedule's) plus `velero.io/schedule-name`, an owner reference when
//! `useOwnerReferencesInBackup` — then records `lastBackup`. `paused` creates nothing;
//! `skipImmediately` skips the backup that is due now and records `lastSkipped`.
//!
//! Cron times come from croner (5 fields, Velero's descriptors mapped to them) and
//! Velero's `@every <duration>` is handled on top. Times are UTC unless a `CRON_TZ=` or
//! `TZ=` prefix names a zone (robfig/cron's, which Velero parses with): the pattern is
//! then wall-clock time in that zone, from the system tz database as Go's
//! `time.LoadLocation` reads it; an unknown zone fails validation. Across DST changes
//! croner's rules hold: a fixed time that falls into the spring-forward gap runs at
//! the first minute after it that day, one in the repeated fall-back hour runs once.
//!
//! Beyond Velero:
//! - A tick is never served twice: the next run counts from the newest backup the
//!   schedule has in the cluster as well as from `lastBackup`, so a restart between
//!   creating a backup and recording it does not create another (and `lastBackup` is
//!   repaired from it).
//! - No pile-up (Velero #4904/#2738): while a backup of the schedule is still
//!   New/Queued/ReadyToStart/InProgress, no new one is created; the schedule says so in
//!   the annotation [`ANNOTATION_WAITING_FOR`] and an event, and the missed ticks
//!   collapse into one backup once the previous one ends.
//! - A schedule counts only its own backups ([`own_backups`]): those it created, marked
//!   with its UID ([`SCHEDULE_UID_ANNOTATION`], or an owner reference), never one backup
//!   sync imported. A backup planted in a bucket with the schedule's label can neither
//!   move `lastBackup`, nor hold the schedule back, nor take its tick: a name already
//!   taken by a backup that is not the schedule's gets a Warning event and the backup is
//!   created under the next free name `<schedule>-<timestamp>-<n>`.

use super::context::{VeleroContext, k8s_time};
use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use granary_api::velero::cron::check_cron;
use granary_api::velero::{
    Backup, BackupPhase, SCHEDULE_NAME_LABEL, SCHEDULE_UID_ANNOTATION, Schedule, SchedulePhase,
    is_synced,
};
use granary_runtime::work_queue::{Next, WorkQueue};
use granary_velero::label::valid_label_value;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use kube::runtime::watcher;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// On a Schedule whose due backup waits for an earlier one: which, and in what phase.
pub const ANNOTATION_WAITING_FOR: &str = "granary.gardener.cloud/waiting-for";

/// How often a schedule waiting for its previous backup looks again.
const WAITING_RECHECK: Duration = Duration::from_secs(1);

/// When a schedule fires.
#[derive(Debug, Clone)]
pub enum Cadence {
    /// `@every <duration>`.
    Every(Duration),
    /// A cron pattern, in UTC or (with `CRON_TZ=`/`TZ=`) in a zone's wall-clock time.
    Cron(Box<Cron>, Option<jiff::tz::TimeZone>),
}

impl Cadence {
    /// Parses `spec.schedule` as Velero does (robfig/cron's standard parser plus
    /// descriptors); the message is what follows Velero's "invalid schedule: ".
    pub fn parse(expr: &str) -> Result<Cadence, String> {
        check_cron(expr)?;
        let mut rest = expr.trim();
        let mut tz = None;
        for prefix in ["CRON_TZ=", "TZ="] {
            if let Some(after) = rest.strip_prefix(prefix) {
                let (zone, pattern) = after.split_once(' ').unwrap_or((after, ""));
                tz = time_zone(zone)?;
                rest = pattern.trim();
            }
        }
        if let Some(d) = rest.strip_prefix("@every") {
            let d: granary_api::velero::Duration = d
                .trim()
                .parse()
                .map_err(|e: granary_api::velero::DurationError| e.to_string())?;
            let d = d.to_std().map_err(|e| e.to_string())?;
            if d.is_zero() {
                return Err("@every needs a positive duration".into());
            }
            return Ok(Cadence::Every(d));
        }
        let pattern = match rest {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .sloppy_ranges(true)
            .build()
            .parse(pattern)
            .map(|c| Cadence::Cron(Box::new(c), tz))
            .map_err(|e| e.to_string())
    }

    /// The first fire time strictly after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Cadence::Every(d) => chrono::Duration::from_std(*d).ok().map(|d| t + d),
            Cadence::Cron(c, None) => c.find_next_occurrence(&t, false).ok(),
            Cadence::Cron(c, Some(tz)) => {
                let at = jiff::Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
                    .ok()?
                    .to_zoned(tz.clone());
                let next = c.find_next_occurrence(&at, false).ok()?.timestamp();
                DateTime::from_timestamp(next.as_second(), next.subsec_nanosecond() as u32)
            }
        }
    }
}

/// The zone of a `CRON_TZ=`/`TZ=` prefix; `None` for UTC. The message is robfig/cron's.
/// How far ahead [`Cadence::longest_interval`] looks: a week covers weekday patterns,
/// plus a day for one that runs weekly.
const INTERVAL_HORIZON: chrono::TimeDelta = chrono::TimeDelta::days(8);
/// At most this many runs are looked at (a minutely pattern has 11,520 in 8 days; its
/// gaps are all the same).
const INTERVAL_RUNS: usize = 1_000;

impl Cadence {
    /// The longest wait between two consecutive runs from `from` on, over the next eight
    /// days and at least the next two waits (a monthly or yearly pattern), at most
    /// [`INTERVAL_RUNS`] runs: what an alert on a schedule whose backups stopped
    /// succeeding waits for. `None` when it never runs again.
    pub fn longest_interval(&self, from: DateTime<Utc>) -> Option<Duration> {
        if let Cadence::Every(d) = self {
            return Some(*d);
        }
        let first = self.next_after(from)?;
        let (mut at, mut longest, mut gaps) = (first, None, 0);
        while (at - from < INTERVAL_HORIZON || gaps < 2) && gaps < INTERVAL_RUNS {
            let Some(next) = self.next_after(at) else {
                break;
            };
            let gap = (next - at).to_std().unwrap_or_default();
            longest = Some(longest.map_or(gap, |l: Duration| l.max(gap)));
            gaps += 1;
            at = next;
        }
        // A pattern that runs once more only: the wait until then.
        longest.or_else(|| (first - from).to_std().ok())
    }
}

/// When the newest Completed backup of `backups` completed.
fn last_success(backups: &[Backup]) -> Option<DateTime<Utc>> {
    backups
        .iter()
        .filter_map(|b| b.status.as_ref())
        .filter(|s| s.phase == Some(BackupPhase::Completed))
        .filter_map(|s| s.completion_timestamp)
        .max()
}

fn time_zone(zone: &str) -> Result<Option<jiff::tz::TimeZone>, String> {
    if matches!(zone, "UTC" | "Etc/UTC") {
        return Ok(None);
    }
    jiff::tz::TimeZone::get(zone)
        .map(Some)
        .map_err(|_| format!("provided bad location {zone}: unknown time zone {zone}"))
}

/// When the schedule runs next: after the latest of `lastBackup`, `lastSkipped` and the
/// newest backup it has; `None` (never ran, nothing skipped) means now.
pub fn next_run(
    cadence: &Cadence,
    last_backup: Option<DateTime<Utc>>,
    last_skipped: Option<DateTime<Utc>>,
    newest_backup: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    let last = [last_backup, last_skipped, newest_backup]
        .into_iter()
        .flatten()
        .max()?;
    cadence.next_after(last)
}

/// Phases in which a backup of the schedule holds back the next one.
fn unfinished(phase: Option<BackupPhase>) -> bool {
    use BackupPhase::*;
    matches!(phase, None | Some(New | Queued | ReadyToStart | InProgress))
}

/// The first unfinished backup among `backups` (those of one schedule), for the status.
pub fn holding_back(backups: &[Backup]) -> Option<(String, String)> {
    backups
        .iter()
        .filter(|b| unfinished(b.status.as_ref().and_then(|s| s.phase)))
        .map(|b| {
            let phase = b
                .status
                .as_ref()
                .and_then(|s| s.phase)
                .map_or("New", BackupPhase::as_str);
            (b.name_any(), phase.to_string())
        })
        .min()
}

/// True when `backup` is `schedule`'s own: created by it (its UID in
/// [`SCHEDULE_UID_ANNOTATION`] or in an owner reference), not imported by backup sync.
pub fn is_own(schedule: &Schedule, backup: &Backup) -> bool {
    let Some(uid) = schedule.metadata.uid.as_deref().filter(|u| !u.is_empty()) else {
        return false;
    };
    if is_synced(backup) {
        return false;
    }
    let annotated = backup
        .annotations()
        .get(SCHEDULE_UID_ANNOTATION)
        .map(String::as_str)
        == Some(uid);
    let owned = backup
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Schedule" && o.api_version == "velero.io/v1" && o.uid == uid);
    annotated || owned
}

/// The schedule's own backups among `backups` ([`is_own`]).
pub fn own_backups(schedule: &Schedule, backups: Vec<Backup>) -> Vec<Backup> {
    backups
        .into_iter()
        .filter(|b| is_own(schedule, b))
        .collect()
}

/// How many other names a tick tries when its name is taken by a backup that is not the
/// schedule's own.
const OTHER_NAMES: u32 = 5;

/// The `n`th name a tick tries: `<schedule>-<timestamp>` first, then with `-<n>`.
pub fn tick_name(base: &str, n: u32) -> String {
    if n == 0 {
        base.to_string()
    } else {
        format!("{base}-{n}")
    }
}

/// The backup the schedule creates at `now` (Velero's `FromSchedule`).
pub fn backup_for(schedule: &Schedule, now: DateTime<Utc>) -> Backup {
    let name = schedule.name_any();
    let mut labels: BTreeMap<String, String> = schedule
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_else(|| schedule.labels().clone());
    labels.insert(
        SCHEDULE_NAME_LABEL.to_string(),
        valid_label_value(&name).into_owned(),
    );
    let mut backup = Backup::new(
        &schedule.timestamped_name(now),
        schedule.spec.template.clone(),
    );
    backup.metadata.namespace = schedule.metadata.namespace.clone();
    backup.metadata.labels = Some(labels);
    if let Some(uid) = schedule.uid() {
        backup.metadata.annotations = Some([(SCHEDULE_UID_ANNOTATION.to_string(), uid)].into());
    }
    if schedule.spec.use_owner_references_in_backup == Some(true) {
        backup.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "velero.io/v1".into(),
            kind: "Schedule".into(),
            name,
            uid: schedule.uid().unwrap_or_default(),
            controller: Some(true),
            ..Default::default()
        }]);
    }
    backup
}

/// Velero's validation: the cron expression and the template.
pub fn validation_errors(schedule: &Schedule) -> (Option<Cadence>, Vec<String>) {
    let mut errors = Vec::new();
    let cadence = match Cadence::parse(&schedule.spec.schedule) {
        Ok(c) => Some(c),
        Err(e) => {
            errors.push(format!("invalid schedule: {e}"));
            None
        }
    };
    errors.extend(
        schedule
            .spec
            .template
            .validate_at("spec.template")
            .iter()
            .map(|e| e.to_string()),
    );
    (cadence, errors)
}

/// Runs the controller until dropped.
pub async fn run(ctx: Arc<VeleroContext>) {
    // Velero initialises the series of backups of no schedule when its server starts.
    ctx.metrics.init_schedule("");
    let queue: WorkQueue<String> = WorkQueue::new();
    let feed = {
        let queue = queue.clone();
        super::watch::each_event(
            ctx.api::<Schedule>(),
            "Schedules",
            move |event| match event {
                watcher::Event::Apply(o)
                | watcher::Event::InitApply(o)
                | watcher::Event::Delete(o) => queue.trigger(o.name_any()),
                _ => {}
            },
        )
    };
    let work = queue.run(2, move |name| {
        let ctx = ctx.clone();
        async move {
            let done: futures::future::BoxFuture<'_, Result<Next, kube::Error>> =
                Box::pin(reconcile(&ctx, &name));
            done.await.unwrap_or_else(|e| {
                tracing::warn!(schedule = %name, error = %e, "schedule controller");
                Next::After(Duration::from_secs(5))
            })
        }
    });
    tokio::join!(feed, work);
}

async fn patch(
    ctx: &VeleroContext,
    name: &str,
    body: serde_json::Value,
) -> Result<(), kube::Error> {
    ctx.api::<Schedule>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map(|_| ())
}

async fn reconcile(ctx: &VeleroContext, name: &str) -> Result<Next, kube::Error> {
    let Some(schedule) = ctx.api::<Schedule>().get_opt(name).await? else {
        ctx.metrics.record_schedule(name, None, None);
        return Ok(Next::Done);
    };
    if schedule.metadata.deletion_timestamp.is_some() {
        ctx.metrics.record_schedule(name, None, None);
        return Ok(Next::Done);
    }
    ctx.metrics.init_schedule(name);
    let status = schedule.status.clone().unwrap_or_default();
    let (cadence, errors) = validation_errors(&schedule);
    let phase = if errors.is_empty() {
        SchedulePhase::Enabled
    } else {
        SchedulePhase::FailedValidation
    };
    let shown_errors = (!errors.is_empty()).then(|| errors.clone());
    if status.phase != Some(phase) || status.validation_errors != shown_errors {
        patch(
            ctx,
            name,
            json!({"status": {"phase": phase, "validationErrors": shown_errors}}),
        )
        .await?;
        if !errors.is_empty() {
            ctx.event(
                &schedule,
                EventType::Warning,
                "FailedValidation",
                errors.join("; "),
            )
            .await;
        }
    }
    let Some(cadence) = cadence.filter(|_| errors.is_empty()) else {
        ctx.metrics.record_schedule(name, None, None);
        return Ok(Next::Done);
    };
    if schedule.spec.paused == Some(true) {
        ctx.metrics.record_schedule(name, None, None);
        return Ok(Next::Done);
    }
    let now = ctx.clock.now();
    let mut last_skipped = status.last_skipped;
    if schedule.spec.skip_immediately == Some(true) {
        patch(
            ctx,
            name,
            json!({"spec": {"skipImmediately": false}, "status": {"lastSkipped": k8s_time(now)}}),
        )
        .await?;
        last_skipped = Some(now);
    }
    let selector = format!("{SCHEDULE_NAME_LABEL}={}", valid_label_value(name));
    let backups = own_backups(
        &schedule,
        ctx.api::<Backup>()
            .list(&ListParams::default().labels(&selector))
            .await?
            .items,
    );
    let created = schedule
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| granary_runtime::clock::from_k8s(t.0));
    ctx.metrics.record_schedule(
        name,
        cadence
            .longest_interval(now)
            .map(|i| (i, created.timestamp())),
        last_success(&backups).map(|t| t.timestamp()),
    );
    let newest = backups
        .iter()
        .filter_map(|b| b.metadata.creation_timestamp.as_ref())
        .map(|t| granary_runtime::clock::from_k8s(t.0))
        .max();
    if let Some(newest) = newest
        && status.last_backup.is_none_or(|l| l < newest)
    {
        // A backup created but not recorded (a restart in between): record it.
        patch(
            ctx,
            name,
            json!({"status": {"lastBackup": k8s_time(newest)}}),
        )
        .await?;
    }
    let due = next_run(&cadence, status.last_backup, last_skipped, newest);
    if let Some(at) = due
        && at > now
    {
        return Ok(Next::After(wait_until(at, now)));
    }
    let waiting = schedule.annotations().get(ANNOTATION_WAITING_FOR).cloned();
    if let Some((backup, phase)) = holding_back(&backups) {
        let says = format!("backup {backup} is still {phase}");
        if waiting.as_deref() != Some(says.as_str()) {
            patch(
                ctx,
                name,
                json!({"metadata": {"annotations": {ANNOTATION_WAITING_FOR: says}}}),
            )
            .await?;
            ctx.event(
                &schedule,
                EventType::Normal,
                "BackupSkipped",
                format!("a backup is due but {says}; it is created once that one ends"),
            )
            .await;
        }
        return Ok(Next::After(WAITING_RECHECK));
    }
    let mut backup = backup_for(&schedule, now);
    let base = backup.name_any();
    let api = ctx.api::<Backup>();
    let mut n = 0;
    let mut vanished = 0;
    loop {
        let backup_name = tick_name(&base, n);
        backup.metadata.name = Some(backup_name.clone());
        match api.create(&PostParams::default(), &backup).await {
            Ok(_) => {
                tracing::info!(schedule = %name, backup = %backup_name, "scheduled backup created");
                break;
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Same second, same name, our own backup: this tick is served. Anyone
                // else's backup under that name (one planted in a bucket and synced, or
                // made by hand) does not serve it.
                match api.get_opt(&backup_name).await? {
                    Some(b) if is_own(&schedule, &b) => break,
                    Some(_) => {}
                    // Gone between the create and the read: not served, try that name
                    // again (at most a few times, then later).
                    None if vanished < OTHER_NAMES => {
                        vanished += 1;
                        continue;
                    }
                    None => return Ok(Next::After(WAITING_RECHECK)),
                }
                n += 1;
                let next = (n <= OTHER_NAMES).then(|| tick_name(&base, n));
                ctx.event(
                    &schedule,
                    EventType::Warning,
                    "BackupNameTaken",
                    match &next {
                        Some(next) => format!(
                            "backup {backup_name} exists and is not this schedule's; creating {next} instead"
                        ),
                        None => format!(
                            "backup {backup_name} exists and is not this schedule's, and so do \
                             {OTHER_NAMES} other names; trying again shortly"
                        ),
                    },
                )
                .await;
                if next.is_none() {
                    return Ok(Next::After(WAITING_RECHECK));
                }
            }
            Err(e) => return Err(e),
        }
    }
    let mut body = json!({"status": {"lastBackup": k8s_time(now)}});
    if waiting.is_some() {
        body["metadata"] = json!({"annotations": {ANNOTATION_WAITING_FOR: null}});
    }
    patch(ctx, name, body).await?;
    Ok(match cadence.next_after(now) {
        Some(at) => Next::After(wait_until(at, now)),
        None => Next::Done,
    })
}

fn wait_until(at: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (at - now)
        .to_std()
        .unwrap_or_default()
        .max(Duration::from_millis(100))
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::velero::{BackupStatus, Metadata, ScheduleSpec};

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().expect("time")
    }

    fn next(expr: &str, after: &str) -> DateTime<Utc> {
        Cadence::parse(expr)
            .expect("parses")
            .next_after(t(after))
            .expect("a next time")
    }

    #[test]
    fn longest_interval_of_each_kind_of_pattern() {
        let from = t("2024-01-03T10:30:00Z"); // a Wednesday
        let hours = |h: u64| Some(Duration::from_secs(h * 3600));
        let longest = |expr: &str| Cadence::parse(expr).expect("parses").longest_interval(from);
        assert_eq!(longest("@every 90m"), Some(Duration::from_secs(5400)));
        assert_eq!(longest("0 2 * * *"), hours(24));
        assert_eq!(longest("0 */6 * * *"), hours(6));
        assert_eq!(longest("*/5 * * * *"), Some(Duration::from_secs(300)));
        // Weekdays only: Friday 02:00 to Monday 02:00.
        assert_eq!(longest("0 2 * * 1-5"), hours(72));
        assert_eq!(longest("0 3 * * 0"), hours(7 * 24));
        // Twice a day, unevenly: the longer gap.
        assert_eq!(longest("0 1,5 * * *"), hours(20));
        // Monthly: February's and March's waits, the longer; yearly: two years.
        assert_eq!(longest("0 0 1 * *"), hours(31 * 24));
        assert_eq!(longest("0 0 1 1 *"), hours(365 * 24));
    }

    #[test]
    fn cron_and_every() {
        assert_eq!(
            next("0 2 * * *", "2026-01-01T03:00:00Z"),
            t("2026-01-02T02:00:00Z")
        );
        assert_eq!(
            next("*/15 * * * *", "2026-01-01T03:00:00Z"),
            t("2026-01-01T03:15:00Z")
        );
        assert_eq!(
            next("@every 2s", "2026-01-01T03:00:00Z"),
            t("2026-01-01T03:00:02Z")
        );
        assert_eq!(
            next("@every 1h30m", "2026-01-01T03:00:00Z"),
            t("2026-01-01T04:30:00Z")
        );
        assert_eq!(
            next("@daily", "2026-01-01T03:00:00Z"),
            t("2026-01-02T00:00:00Z")
        );
        assert_eq!(
            next("@hourly", "2026-01-01T03:00:00Z"),
            t("2026-01-01T04:00:00Z")
        );
        // Sunday 0, names, and Vixie's day-of-month OR day-of-week.
        assert_eq!(
            next("0 0 * * 0", "2026-01-01T00:00:00Z"),
            t("2026-01-04T00:00:00Z")
        );
        assert_eq!(
            next("0 0 * * sun", "2026-01-01T00:00:00Z"),
            t("2026-01-04T00:00:00Z")
        );
        assert_eq!(
            next("0 0 15 * 0", "2026-01-01T00:00:00Z"),
            t("2026-01-04T00:00:00Z")
        );
        assert_eq!(
            next("CRON_TZ=UTC 30 1 * * *", "2026-01-01T03:00:00Z"),
            t("2026-01-02T01:30:00Z")
        );
        assert_eq!(
            Cadence::parse("CRON_TZ=Europe/Berlinx 0 1 * * *").unwrap_err(),
            "provided bad location Europe/Berlinx: unknown time zone Europe/Berlinx"
        );
        assert!(Cadence::parse("0 0 * *").is_err());
        assert!(Cadence::parse("0 0 * * * *").is_err(), "no seconds field");
        assert!(Cadence::parse("@every 0s").is_err());
        assert!(Cadence::parse("61 * * * *").is_err());
    }

    /// Wall-clock schedules in a zone, across both DST changes of 2026 in Berlin
    /// (29 March 02:00 CET → 03:00 CEST, 25 October 03:00 CEST → 02:00 CET).
    #[test]
    fn time_zones_across_dst_changes() {
        // 03:00 Berlin: 02:00Z in winter, 01:00Z in summer.
        for prefix in ["CRON_TZ=Europe/Berlin", "TZ=Europe/Berlin"] {
            let daily = format!("{prefix} 0 3 * * *");
            assert_eq!(
                next(&daily, "2026-03-28T02:00:00Z"),
                t("2026-03-29T01:00:00Z")
            );
            assert_eq!(
                next(&daily, "2026-03-29T01:00:00Z"),
                t("2026-03-30T01:00:00Z")
            );
            assert_eq!(
                next(&daily, "2026-10-24T01:00:00Z"),
                t("2026-10-25T02:00:00Z")
            );
        }
        // 02:30 does not exist on 29 March: it runs at the first minute after the gap,
        // 03:00 CEST, once; the day after at 02:30 CEST again.
        let gap = "CRON_TZ=Europe/Berlin 30 2 * * *";
        assert_eq!(next(gap, "2026-03-28T01:30:00Z"), t("2026-03-29T01:00:00Z"));
        assert_eq!(next(gap, "2026-03-29T01:00:00Z"), t("2026-03-30T00:30:00Z"));
        // 02:30 happens twice on 25 October: it runs once, at the first (CEST).
        assert_eq!(next(gap, "2026-10-24T00:30:00Z"), t("2026-10-25T00:30:00Z"));
        assert_eq!(next(gap, "2026-10-25T00:30:00Z"), t("2026-10-26T01:30:00Z"));
        // Hourly in a zone is still every hour of real time across the change.
        let hourly = "CRON_TZ=Europe/Berlin 0 * * * *";
        assert_eq!(
            next(hourly, "2026-10-25T00:00:00Z"),
            t("2026-10-25T01:00:00Z")
        );
        assert_eq!(
            next(hourly, "2026-10-25T01:00:00Z"),
            t("2026-10-25T02:00:00Z")
        );
        // UTC names stay UTC.
        assert_eq!(
            next("TZ=Etc/UTC 0 3 * * *", "2026-03-28T02:00:00Z"),
            t("2026-03-28T03:00:00Z")
        );
    }

    #[test]
    fn the_next_run_counts_from_the_latest_of_everything() {
        let every = Cadence::parse("@every 1h").expect("parses");
        assert_eq!(next_run(&every, None, None, None), None, "never ran: now");
        let a = t("2026-01-01T00:00:00Z");
        let b = t("2026-01-01T00:30:00Z");
        assert_eq!(
            next_run(&every, Some(a), None, None),
            Some(t("2026-01-01T01:00:00Z"))
        );
        assert_eq!(
            next_run(&every, Some(a), Some(b), None),
            Some(t("2026-01-01T01:30:00Z"))
        );
        // A backup created but never recorded (restart) still counts.
        assert_eq!(
            next_run(&every, Some(a), None, Some(b)),
            Some(t("2026-01-01T01:30:00Z"))
        );
        assert_eq!(
            next_run(&every, None, None, Some(a)),
            Some(t("2026-01-01T01:00:00Z"))
        );
    }

    fn schedule(labels: &[(&str, &str)], template_labels: Option<&[(&str, &str)]>) -> Schedule {
        let mut s = Schedule::new(
            "nightly",
            ScheduleSpec {
                schedule: "@every 1h".into(),
                ..Default::default()
            },
        );
        s.metadata.namespace = Some("velero".into());
        s.metadata.uid = Some("s-uid".into());
        s.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        s.spec.template.included_namespaces = Some(vec!["app".into()]);
        s.spec.template.metadata = template_labels.map(|l| Metadata {
            labels: Some(
                l.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
        });
        s
    }

    #[test]
    fn backups_are_named_and_labelled_as_velero_s() {
        let now = t("2026-03-04T05:06:07Z");
        let b = backup_for(&schedule(&[("team", "a")], None), now);
        assert_eq!(b.name_any(), "nightly-20260304050607");
        assert_eq!(b.metadata.namespace.as_deref(), Some("velero"));
        assert_eq!(b.labels()["team"], "a");
        assert_eq!(b.labels()[SCHEDULE_NAME_LABEL], "nightly");
        assert_eq!(b.spec.included_namespaces, Some(vec!["app".to_string()]));
        assert_eq!(b.metadata.owner_references, None);
        assert_eq!(b.annotations()[SCHEDULE_UID_ANNOTATION], "s-uid");

        let mut s = schedule(&[("team", "a")], Some(&[("tier", "gold")]));
        s.spec.use_owner_references_in_backup = Some(true);
        let b = backup_for(&s, now);
        assert_eq!(b.labels().get("team"), None, "the template's labels win");
        assert_eq!(b.labels()["tier"], "gold");
        assert_eq!(b.labels()[SCHEDULE_NAME_LABEL], "nightly");
        let owner = &b.metadata.owner_references.expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Schedule", "s-uid")
        );
    }

    #[test]
    fn a_schedule_s_own_backups_are_those_it_made() {
        let s = schedule(&[], None);
        let now = t("2026-03-04T05:06:07Z");
        let made = backup_for(&s, now);
        assert!(is_own(&s, &made));
        let mut by_owner = Backup::new("by-owner", Default::default());
        by_owner.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "velero.io/v1".into(),
            kind: "Schedule".into(),
            name: "nightly".into(),
            uid: "s-uid".into(),
            ..Default::default()
        }]);
        assert!(is_own(&s, &by_owner));
        // Labelled, but not made by it: planted, by hand, or another schedule's.
        let mut labelled = made.clone();
        labelled.metadata.annotations = None;
        assert!(!is_own(&s, &labelled));
        let mut other = made.clone();
        other
            .annotations_mut()
            .insert(SCHEDULE_UID_ANNOTATION.into(), "another-uid".into());
        assert!(!is_own(&s, &other));
        // Imported by backup sync: never, whatever it says.
        let mut synced = made.clone();
        synced
            .labels_mut()
            .insert(granary_api::velero::SYNCED_LABEL.into(), "true".into());
        assert!(!is_own(&s, &synced));
        let mut by_owner_synced = by_owner.clone();
        by_owner_synced
            .labels_mut()
            .insert(granary_api::velero::SYNCED_LABEL.into(), "true".into());
        assert!(!is_own(&s, &by_owner_synced));
        // A schedule without a UID (not stored yet) owns nothing.
        let mut unstored = s.clone();
        unstored.metadata.uid = None;
        assert!(!is_own(&unstored, &made));
        assert_eq!(
            own_backups(&s, vec![made.clone(), labelled, synced])
                .iter()
                .map(|b| b.name_any())
                .collect::<Vec<_>>(),
            vec![made.name_any()]
        );
        assert_eq!(
            tick_name("nightly-20260304050607", 0),
            "nightly-20260304050607"
        );
        assert_eq!(
            tick_name("nightly-20260304050607", 2),
            "nightly-20260304050607-2"
        );
    }

    #[test]
    fn unfinished_backups_hold_back_the_next() {
        let with = |name: &str, phase: Option<BackupPhase>| {
            let mut b = Backup::new(name, Default::default());
            b.status = Some(BackupStatus {
                phase,
                ..Default::default()
            });
            b
        };
        assert_eq!(holding_back(&[]), None);
        assert_eq!(
            holding_back(&[
                with("a", Some(BackupPhase::Completed)),
                with("b", Some(BackupPhase::Failed)),
                with("c", Some(BackupPhase::PartiallyFailed)),
            ]),
            None
        );
        for (phase, shown) in [
            (None, "New"),
            (Some(BackupPhase::New), "New"),
            (Some(BackupPhase::Queued), "Queued"),
            (Some(BackupPhase::ReadyToStart), "ReadyToStart"),
            (Some(BackupPhase::InProgress), "InProgress"),
        ] {
            assert_eq!(
                holding_back(&[with("a", Some(BackupPhase::Completed)), with("b", phase)]),
                Some(("b".to_string(), shown.to_string()))
            );
        }
    }

    #[test]
    fn validation_says_what_velero_says() {
        let mut s = schedule(&[], None);
        assert!(validation_errors(&s).1.is_empty());
        s.spec.schedule = "not a cron".into();
        let (cadence, errors) = validation_errors(&s);
        assert!(cadence.is_none());
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("invalid schedule: "), "{errors:?}");
    }

    proptest::proptest! {
        /// A cron schedule's next run is strictly after every time it counts from, on a
        /// whole minute the pattern allows, and no further than one period away.
        #[test]
        fn cron_next_runs_follow_the_latest_time(
            a in 0i64..4_000_000_000, b in proptest::option::of(0i64..4_000_000_000),
            c in proptest::option::of(0i64..4_000_000_000), step in 1u32..30,
        ) {
            let cadence = Cadence::parse(&format!("*/{step} * * * *")).expect("parses");
            let at = |s: i64| DateTime::from_timestamp(s, 0).expect("in range");
            let latest = [Some(a), b, c].into_iter().flatten().max().map(at).expect("a");
            let next = next_run(&cadence, Some(at(a)), b.map(at), c.map(at)).expect("next");
            proptest::prop_assert!(next > latest);
            proptest::prop_assert_eq!(next.timestamp() % 60, 0);
            proptest::prop_assert_eq!(chrono::Timelike::minute(&next) % step, 0);
            proptest::prop_assert!(next - latest <= chrono::Duration::minutes(60));
        }

        /// `@every` counts exactly one period from the latest time.
        #[test]
        fn every_counts_from_the_latest_time(
            a in 0i64..4_000_000_000, b in 0i64..4_000_000_000, secs in 1u64..100_000,
        ) {
            let cadence = Cadence::Every(Duration::from_secs(secs));
            let at = |s: i64| DateTime::from_timestamp(s, 0).expect("in range");
            let next = next_run(&cadence, Some(at(a)), None, Some(at(b))).expect("next");
            proptest::prop_assert_eq!(next, at(a.max(b) + secs as i64));
        }
    }
}
