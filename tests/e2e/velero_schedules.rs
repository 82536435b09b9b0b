//! Schedules (#16) against the embedded API server and the local provider: `@every`
//! backups named and labelled as Velero's, taken for real; paused and skipImmediately;
//! no pile-up behind an unfinished backup; no tick served twice across a restart.

use granary_api::velero::{Backup, BackupPhase, Schedule, SchedulePhase};
use granary_test_support::poll_until;
use granary_test_support::worlds::velero::World;
use granary_velero_server::schedules::ANNOTATION_WAITING_FOR;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn is_timestamped(name: &str, schedule: &str) -> bool {
    name.strip_prefix(&format!("{schedule}-"))
        .is_some_and(|t| t.len() == 14 && t.bytes().all(|b| b.is_ascii_digit()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_paused_skip_immediately_and_invalid() {
    let w = World::start().await;
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    let template = json!({"includedNamespaces": [w.app], "storageLocation": "default"});
    w.schedule(
        "often",
        json!({"schedule": "@every 2s", "template": template, "useOwnerReferencesInBackup": true}),
    )
    .await;
    w.schedule(
        "paused",
        json!({"schedule": "@every 1s", "template": template, "paused": true}),
    )
    .await;
    w.schedule(
        "later",
        json!({"schedule": "@every 1h", "template": template, "skipImmediately": true}),
    )
    .await;
    w.schedule(
        "broken",
        json!({"schedule": "every day", "template": template}),
    )
    .await;

    poll_until("two completed backups of often", || async {
        w.backups_of("often")
            .await
            .iter()
            .filter(|b| b.status.as_ref().and_then(|s| s.phase) == Some(BackupPhase::Completed))
            .count()
            >= 2
    })
    .await;
    for b in w.backups_of("often").await {
        assert!(is_timestamped(&b.name_any(), "often"), "{}", b.name_any());
        assert_eq!(b.labels()["team"], "a", "the schedule's labels");
        assert_eq!(b.spec.included_namespaces, Some(vec![w.app.clone()]));
        let owner = &b.metadata.owner_references.clone().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Schedule", "often")
        );
    }
    let often = w.schedule_status("often").await;
    assert_eq!(often.phase, Some(SchedulePhase::Enabled));
    assert!(often.last_backup.is_some());

    assert!(w.backups_of("paused").await.is_empty());
    assert_eq!(
        w.schedule_status("paused").await.phase,
        Some(SchedulePhase::Enabled)
    );
    let later = w.schedule_status("later").await;
    assert!(later.last_skipped.is_some() && later.last_backup.is_none());
    assert!(w.backups_of("later").await.is_empty());
    let later = w.api::<Schedule>().get("later").await.expect("later");
    assert_eq!(later.spec.skip_immediately, Some(false));
    let broken = w.schedule_status("broken").await;
    assert_eq!(broken.phase, Some(SchedulePhase::FailedValidation));
    assert!(broken.validation_errors.unwrap_or_default()[0].starts_with("invalid schedule: "),);

    // Unpaused, it runs at once.
    w.api::<Schedule>()
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"paused": false}})),
        )
        .await
        .expect("unpause");
    poll_until("paused runs once unpaused", || async {
        !w.backups_of("paused").await.is_empty()
    })
    .await;
    controllers.abort();
}

/// Nothing takes backups here (the backup controller is off): the schedule's first
/// backup never ends, and no second one piles up behind it; once it ends, one follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_backup_holds_back_the_schedule_and_restarts_do_not_duplicate() {
    let w = World::start().await;
    let controllers = w.controllers_but(w.settings(), &["backup"]);
    w.location("default", false).await;
    let template = json!({"includedNamespaces": [w.app], "storageLocation": "default"});
    w.schedule(
        "stuck",
        json!({"schedule": "@every 1s", "template": template}),
    )
    .await;
    poll_until("the schedule waits for its first backup", || async {
        w.api::<Schedule>()
            .get("stuck")
            .await
            .ok()
            .and_then(|s| s.annotations().get(ANNOTATION_WAITING_FOR).cloned())
            .is_some_and(|a| a.starts_with("backup stuck-") && a.ends_with("is still ReadyToStart"))
    })
    .await;
    let backups = w.backups_of("stuck").await;
    assert_eq!(backups.len(), 1, "no pile-up");
    let first = backups[0].name_any();

    w.api::<Backup>()
        .patch(
            &first,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": "Completed"}})),
        )
        .await
        .expect("finish");
    poll_until("one backup follows", || async {
        w.backups_of("stuck").await.len() == 2
    })
    .await;
    let second = w
        .backups_of("stuck")
        .await
        .into_iter()
        .map(|b| b.name_any())
        .find(|n| *n != first)
        .expect("second");
    poll_until("the schedule now waits for the second", || async {
        w.api::<Schedule>()
            .get("stuck")
            .await
            .ok()
            .is_some_and(|s| {
                s.annotations()
                    .get(ANNOTATION_WAITING_FOR)
                    .is_some_and(|a| a.contains(&second))
            })
    })
    .await;
    assert_eq!(w.backups_of("stuck").await.len(), 2, "still no pile-up");
    controllers.abort();
    let _ = controllers.await;

    // A restart right after a backup was created but before it was recorded: the
    // schedule (now hourly) sees the backup, records it and creates no other.
    w.schedule(
        "hourly",
        json!({"schedule": "@every 1h", "template": template}),
    )
    .await;
    // What the schedule itself writes: its label and its UID (a backup only labelled is
    // not the schedule's own, and does not count).
    let uid = w
        .api::<Schedule>()
        .get("hourly")
        .await
        .expect("schedule")
        .uid()
        .expect("uid");
    let b: Backup = serde_json::from_value(json!({
        "apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {
            "name": "hourly-20260101000000",
            "labels": {"velero.io/schedule-name": "hourly"},
            "annotations": {"granary.gardener.cloud/schedule-uid": uid},
        },
        "spec": template,
        "status": {"phase": "Completed"},
    }))
    .expect("backup");
    w.api::<Backup>()
        .create(&PostParams::default(), &b)
        .await
        .expect("backup");
    let controllers = w.controllers_but(w.settings(), &["backup"]);
    poll_until("lastBackup recorded from the backup", || async {
        w.api::<Schedule>()
            .get("hourly")
            .await
            .ok()
            .and_then(|s| s.status)
            .is_some_and(|s| s.phase == Some(SchedulePhase::Enabled) && s.last_backup.is_some())
    })
    .await;
    assert_eq!(w.backups_of("hourly").await.len(), 1);
    controllers.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_commands() {
    let w = World::start().await;
    let controllers = w.controllers_but(w.settings(), &["backup"]);
    w.location("default", false).await;
    let granary = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_granary"))
            .args(["schedule", "-n", &w.namespace, "--kubeconfig"])
            .arg(&w.cluster.garden.kubeconfig_path)
            .args(args)
            .output()
            .expect("run granary schedule");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, _, err) = granary(&["create", "bad", "--schedule", "every day"]);
    assert!(!ok && err.contains("--schedule"), "{err}");
    let (ok, out, err) = granary(&[
        "create",
        "nightly",
        "--schedule",
        "@every 1h",
        "--include-namespaces",
        &w.app,
        "--labels",
        "team=a",
        "--skip-immediately",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("Schedule \"nightly\" created successfully."),
        "{out}"
    );
    poll_until("nightly Enabled and skipped", || async {
        w.api::<Schedule>()
            .get("nightly")
            .await
            .ok()
            .and_then(|s| s.status)
            .is_some_and(|s| s.phase == Some(SchedulePhase::Enabled) && s.last_skipped.is_some())
    })
    .await;
    let (ok, out, err) = granary(&["get"]);
    assert!(ok, "{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with("nightly "))
        .expect("row");
    assert!(
        row.contains("Enabled") && row.contains("@every 1h") && row.ends_with("false"),
        "{out}"
    );
    let (ok, _, err) = granary(&["pause", "nightly"]);
    assert!(ok, "{err}");
    let (_, out, _) = granary(&["describe", "nightly"]);
    assert!(out.contains("Paused:         true"), "{out}");
    // Unpaused: the skipped tick stays skipped, the next is an hour away.
    let (ok, _, err) = granary(&["unpause", "nightly"]);
    assert!(ok, "{err}");
    let s = w.api::<Schedule>().get("nightly").await.expect("nightly");
    assert_eq!(s.spec.paused, Some(false));
    assert!(w.backups_of("nightly").await.is_empty());
    let (ok, out, err) = granary(&["delete", "nightly", "--confirm"]);
    assert!(ok, "{err}");
    assert!(out.contains("Schedule deleted: nightly"), "{out}");
    assert!(
        w.api::<Schedule>()
            .get_opt("nightly")
            .await
            .expect("get")
            .is_none()
    );
    controllers.abort();
}

/// `CRON_TZ=`/`TZ=` zones are accepted (an unknown one fails validation with robfig's
/// message), and Velero's per-schedule metrics: every schedule's series exist at 0 as
/// soon as it is seen, and its backups count under its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_zones_and_per_schedule_metrics() {
    let w = World::start().await;
    let controllers = w.controllers(w.settings());
    w.location("default", false).await;
    let template = json!({"includedNamespaces": [w.app], "storageLocation": "default"});
    w.schedule(
        "berlin",
        json!({"schedule": "CRON_TZ=Europe/Berlin 0 3 * * *", "template": template, "skipImmediately": true}),
    )
    .await;
    w.schedule(
        "nowhere",
        json!({"schedule": "TZ=Mars/Olympus 0 3 * * *", "template": template}),
    )
    .await;
    w.schedule(
        "often",
        json!({"schedule": "@every 1h", "template": template}),
    )
    .await;
    poll_until("schedules validated", || async {
        w.schedule_status("berlin").await.phase == Some(SchedulePhase::Enabled)
            && w.schedule_status("nowhere").await.phase == Some(SchedulePhase::FailedValidation)
    })
    .await;
    assert_eq!(
        w.schedule_status("nowhere").await.validation_errors,
        Some(vec![
            "invalid schedule: provided bad location Mars/Olympus: unknown time zone Mars/Olympus"
                .to_string()
        ])
    );
    assert!(
        w.backups_of("berlin").await.is_empty(),
        "skipped, next at 03:00 Berlin"
    );
    poll_until("often's first backup completes", || async {
        w.backups_of("often")
            .await
            .iter()
            .any(|b| b.status.as_ref().and_then(|s| s.phase) == Some(BackupPhase::Completed))
    })
    .await;
    // The controller counts a backup right after writing its last phase: the counters
    // may trail the phase this test saw by a moment.
    poll_until("often's backup counted", || async {
        w.metrics
            .render()
            .contains("velero_backup_success_total{schedule=\"often\"} 1")
    })
    .await;
    let text = w.metrics.render();
    for series in [
        "velero_backup_attempt_total{schedule=\"berlin\"} 0",
        "velero_backup_success_total{schedule=\"berlin\"} 0",
        "velero_backup_failure_total{schedule=\"nowhere\"} 0",
        "velero_backup_attempt_total{schedule=\"\"} 0",
        "velero_backup_attempt_total{schedule=\"often\"} 1",
        "velero_backup_success_total{schedule=\"often\"} 1",
        "velero_backup_last_status{schedule=\"often\"} 1",
        "velero_backup_last_successful_timestamp{schedule=\"often\"}",
        // What the overdue alert reads: each enabled schedule's longest interval.
        "granary_schedule_interval_seconds{schedule=\"often\"} 3600",
        "granary_schedule_interval_seconds{schedule=\"berlin\"} 86400",
        "granary_schedule_created_timestamp_seconds{schedule=\"often\"}",
    ] {
        assert!(text.contains(series), "{series} missing from\n{text}");
    }
    assert!(
        !text.contains("granary_schedule_interval_seconds{schedule=\"nowhere\"}"),
        "a schedule failing validation has no interval: {text}"
    );
    let last_success = series_value(
        &text,
        "velero_backup_last_successful_timestamp{schedule=\"often\"}",
    );
    controllers.abort();

    // A restarted server knows when each schedule last succeeded before its next
    // backup (an hour away): the alert does not go blind after a restart.
    let mut w = w;
    w.metrics = granary_runtime::metrics::Metrics::new();
    let controllers = w.controllers(w.settings());
    poll_until("the last success read back from the cluster", || async {
        series_value(
            &w.metrics.render(),
            "velero_backup_last_successful_timestamp{schedule=\"often\"}",
        ) == last_success
    })
    .await;
    assert!(last_success.is_some());
    assert_eq!(
        w.backups_of("often").await.len(),
        1,
        "no new backup was taken"
    );

    // Paused or gone: no interval, so no overdue alert.
    w.api::<Schedule>()
        .patch(
            "berlin",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .expect("pause");
    w.api::<Schedule>()
        .delete("often", &DeleteParams::default())
        .await
        .expect("delete");
    poll_until("paused and deleted schedules have no interval", || async {
        !w.metrics
            .render()
            .contains("granary_schedule_interval_seconds{")
    })
    .await;
    controllers.abort();
}

/// The value of the series named exactly `series` (name and labels) in `text`.
fn series_value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}
