use super::*;
use chrono::TimeZone;
use granary_api::velero::{BackupProgress, BackupSpec, BackupStatus, Duration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap()
}

fn backup(name: &str, ns: &[&str], status: BackupStatus) -> Backup {
    let mut b = Backup::new(
        name,
        BackupSpec {
            included_namespaces: Some(ns.iter().map(|s| s.to_string()).collect()),
            storage_location: Some("default".into()),
            ttl: Some(Duration::hours(720)),
            ..BackupSpec::default()
        },
    );
    b.metadata.namespace = Some("velero".into());
    b.metadata.creation_timestamp = Some(Time(granary_runtime::clock::to_k8s(
        now() - chrono::TimeDelta::hours(1),
    )));
    b.status = Some(status);
    b
}

fn queued(pos: i64) -> BackupStatus {
    BackupStatus {
        phase: Some(BackupPhase::Queued),
        queue_position: Some(pos),
        ..BackupStatus::default()
    }
}

#[test]
fn get_shows_velero_columns() {
    let mut done = backup(
        "done",
        &["a"],
        BackupStatus {
            phase: Some(BackupPhase::Completed),
            errors: Some(2),
            warnings: Some(1),
            expiration: Some(now() + chrono::TimeDelta::days(29)),
            ..BackupStatus::default()
        },
    );
    done.spec.label_selector =
        Some(crate::cli::flags::parse_label_selector("-l", "app=web").expect("valid"));
    let fresh = backup("fresh", &["a"], BackupStatus::default());
    let t = backups_table(&[done, fresh], now());
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[0],
        "NAME    STATUS      ERRORS   WARNINGS   CREATED                         EXPIRES   STORAGE LOCATION   SELECTOR   INTEGRITY"
    );
    assert_eq!(
        lines[1],
        "done    Completed   2        1          2026-03-01 11:00:00 +0000 UTC   29d       default            app=web    <unchecked>"
    );
    // No status: New, and the expiry estimated from creation + ttl.
    assert!(
        lines[2].starts_with("fresh   New         0        0"),
        "{}",
        lines[2]
    );
    assert!(lines[2].contains("29d") && lines[2].ends_with("<none>     <unchecked>"));
}

#[test]
fn queued_backup_says_what_it_waits_for() {
    let running = backup(
        "running",
        &["ns1", "ns2"],
        BackupStatus {
            phase: Some(BackupPhase::InProgress),
            ..BackupStatus::default()
        },
    );
    let first = backup("first", &["ns3"], queued(1));
    let me = backup("me", &["ns2", "ns3"], queued(2));
    let all = vec![running.clone(), first.clone(), me.clone()];
    let waits = waiting_for(&me, &all, &[]);
    assert_eq!(
        waits,
        vec![
            "backup running (running, InProgress): both include namespace ns2".to_string(),
            "backup first (queued at position 1): both include namespace ns3".to_string(),
        ]
    );
    // Nothing shared: only a slot can be missing.
    let alone = backup("alone", &["ns9"], queued(3));
    let waits = waiting_for(&alone, &[running, first, alone.clone()], &[]);
    assert_eq!(waits.len(), 1);
    assert!(waits[0].starts_with("a free slot: 1 backup(s) running (running)"));
    // Not queued: nothing to wait for once it runs.
    let done = backup("d", &["x"], BackupStatus::default());
    assert!(waiting_for(&done, &[], &[])[0].contains("queue"));

    let text = describe_backup(
        &me,
        &DescribeContext {
            now: now(),
            waiting_for: waiting_for(&me, &all, &[]),
            ..DescribeContext::default()
        },
    );
    assert!(
        text.contains("Phase:  Queued (position 2 in the queue)\n"),
        "{text}"
    );
    assert!(text.contains(
        "Waiting for:  backup running (running, InProgress): both include namespace ns2\n              backup first"
    ), "{text}");
}

#[test]
fn describe_in_progress_failed_validation_and_completed() {
    let b = backup(
        "b",
        &["a"],
        BackupStatus {
            phase: Some(BackupPhase::InProgress),
            progress: Some(BackupProgress {
                total_items: Some(40),
                items_backed_up: Some(12),
            }),
            start_timestamp: Some(now()),
            ..BackupStatus::default()
        },
    );
    let text = describe_backup(
        &b,
        &DescribeContext {
            now: now(),
            ..Default::default()
        },
    );
    assert!(text.contains("Phase:  InProgress\n"), "{text}");
    assert!(text.contains("Estimated total items to be backed up:  40\nItems backed up so far:                 12\n"), "{text}");
    assert!(text.contains("Started:    2026-03-01 12:00:00 +0000 UTC\nCompleted:  <n/a>"));

    let b = backup(
        "bad",
        &["a"],
        BackupStatus {
            phase: Some(BackupPhase::FailedValidation),
            validation_errors: Some(vec!["first problem".into(), "second".into()]),
            ..BackupStatus::default()
        },
    );
    let text = describe_backup(&b, &DescribeContext::default());
    assert!(
        text.contains("Validation errors:  first problem\n                    second\n"),
        "{text}"
    );

    let b = backup(
        "ok",
        &["a"],
        BackupStatus {
            phase: Some(BackupPhase::Completed),
            progress: Some(BackupProgress {
                total_items: Some(3),
                items_backed_up: Some(3),
            }),
            ..BackupStatus::default()
        },
    );
    let mut list = ResourceList::default();
    list.add("v1", "ConfigMap", "a", "cm");
    list.add("apps/v1", "Deployment", "a", "web");
    let mut warnings = MessageSet::default();
    warnings.add("a", "slow");
    let ctx = DescribeContext {
        now: now(),
        details: Some(Details {
            resources: Some(Ok(list)),
            results: Some(Ok((MessageSet::default(), warnings))),
        }),
        events: Some(Ok(vec![EventLine {
            type_: "Normal".into(),
            reason: "Completed".into(),
            last_seen: Some(now() - chrono::TimeDelta::minutes(5)),
            message: "backup completed".into(),
        }])),
        ..DescribeContext::default()
    };
    let text = describe_backup(&b, &ctx);
    assert!(text.contains("Total items to be backed up:  3\nItems backed up:              3\n"));
    assert!(
        text.contains(
            "Resource List:\n  apps/v1/Deployment:\n    - a/web\n  v1/ConfigMap:\n    - a/cm\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("Error messages:  <none>\nWarning messages:\n"),
        "{text}"
    );
    assert!(text.contains("    a:  slow\n"), "{text}");
    assert!(
        text.contains("  Normal   Completed   5m    backup completed"),
        "{text}"
    );

    let ctx = DescribeContext {
        details: Some(Details {
            resources: Some(Err("bucket b1 not found".into())),
            results: None,
        }),
        ..DescribeContext::default()
    };
    let text = describe_backup(&b, &ctx);
    assert!(
        text.contains(
            "Resource List:  <could not read the backup's manifest: bucket b1 not found>"
        )
    );
}
