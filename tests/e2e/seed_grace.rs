//! The deletion grace period of BackupEntries, end to end in real time (a few seconds
//! through `deletionGracePeriod`): Pending with the scheduled time and nothing deleted
//! before it, everything after; only listed purposes (and entries without a purpose)
//! wait; force deletion skips the wait.

use granary_api::common::{LastOperationState, LastOperationType};
use granary_api::core::{ANNOTATION_FORCE_DELETION, ANNOTATION_SHOOT_PURPOSE};
use granary_api::extensions;
use granary_runtime::config::ConfigDuration;
use granary_test_support::http_get;
use granary_test_support::poll_until;
use granary_test_support::seed::{Backend, Landscape, ensure_namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use std::time::{Duration, Instant};

const GRACE: Duration = Duration::from_secs(5);
/// Kubernetes keeps deletionTimestamp in whole seconds, so the schedule may start up to
/// a second before the test's own clock reading.
const SLACK: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_grace_period_purposes_and_force_deletion() {
    grace_period_purposes_and_force_deletion(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_s3_grace_period_purposes_and_force_deletion() {
    grace_period_purposes_and_force_deletion(Backend::S3).await;
}

async fn grace_period_purposes_and_force_deletion(backend: Backend) {
    let Some(l) = Landscape::start(backend).await else {
        return;
    };
    let mut config = l.config("seed-g");
    config.controllers.backup_entry.deletion_grace_period = Some(ConfigDuration(GRACE));
    config.controllers.backup_entry.deletion_grace_period_hours = 24;
    config
        .controllers
        .backup_entry
        .deletion_grace_period_shoot_purposes = vec!["production".to_string()];
    let agent = l.start_agent(None, config).await;

    let bucket = l.bucket_name("gr");
    let project = l.cluster.name("garden-g");
    ensure_namespace(&l.garden, &project).await;
    l.create_bucket(&bucket, "seed-g").await;
    let (production, _) = l.entry_name("prod");
    let (no_purpose, _) = l.entry_name("none");
    let (evaluation, _) = l.entry_name("eval");
    let (forced, _) = l.entry_name("force");
    let purpose = |p: &'static str| vec![(ANNOTATION_SHOOT_PURPOSE, p)];
    l.create_entry(
        &project,
        &production,
        &bucket,
        "seed-g",
        &purpose("production"),
    )
    .await;
    l.create_entry(&project, &no_purpose, &bucket, "seed-g", &[])
        .await;
    l.create_entry(
        &project,
        &evaluation,
        &bucket,
        "seed-g",
        &purpose("evaluation"),
    )
    .await;
    l.create_entry(&project, &forced, &bucket, "seed-g", &purpose("production"))
        .await;
    for e in [&production, &no_purpose, &evaluation, &forced] {
        l.wait_entry_ready(&project, e).await;
        l.fill(&bucket, e, 10).await;
    }

    let deleted_at = Instant::now();
    for e in [&production, &no_purpose, &evaluation, &forced] {
        l.entries(&project)
            .delete(e, &DeleteParams::default())
            .await
            .unwrap();
    }
    // An unlisted purpose has no grace period.
    l.wait_entry_gone(&project, &evaluation).await;
    assert_eq!(l.count(&bucket, &format!("{evaluation}/")).await, 0);

    // Listed purpose and no purpose: Pending with the scheduled time, data untouched.
    for e in [&production, &no_purpose, &forced] {
        let api = l.entries(&project);
        poll_until(&format!("{e} Pending"), || async {
            let obj = api.get(e).await.unwrap();
            obj.status.and_then(|s| s.last_operation).is_some_and(|op| {
                op.state == LastOperationState::Pending
                    && op.type_ == LastOperationType::Delete
                    && op.description.starts_with("deletion scheduled for ")
            })
        })
        .await;
    }
    assert!(
        deleted_at.elapsed() < GRACE - SLACK,
        "checked within the grace period"
    );
    for e in [&production, &no_purpose, &forced] {
        assert_eq!(
            l.count(&bucket, &format!("{e}/")).await,
            11,
            "nothing deleted yet"
        );
    }
    let metrics = http_get(agent.metrics_address.unwrap(), "/metrics").await;
    assert!(
        metrics.contains("granary_backupentries_pending_deletion{seed=\"seed-g\"} 3"),
        "{metrics}"
    );
    // Each waiting entry's due time, the one its status names (what the alert on
    // deletions stuck past their grace period reads).
    for e in [&production, &no_purpose, &forced] {
        let scheduled = pending_description(&l, &project, e).await;
        let scheduled = scheduled.trim_start_matches("deletion scheduled for ");
        let due = chrono::DateTime::parse_from_rfc3339(scheduled)
            .unwrap()
            .timestamp();
        assert_eq!(deletion_due(&metrics, e), Some(due), "{e}: {metrics}");
    }
    assert_eq!(deletion_due(&metrics, &evaluation), None, "gone: {metrics}");

    // Force deletion skips what is left of the wait.
    l.entries(&project)
        .patch(
            &forced,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {ANNOTATION_FORCE_DELETION: "true"}}}),
            ),
        )
        .await
        .unwrap();
    l.wait_entry_gone(&project, &forced).await;
    assert!(
        deleted_at.elapsed() < GRACE - SLACK,
        "forced before the grace period ended"
    );
    assert_eq!(l.count(&bucket, &format!("{forced}/")).await, 0);
    assert_eq!(l.count(&bucket, &format!("{production}/")).await, 11);

    // After the grace period everything of the waiting entries goes.
    for e in [&production, &no_purpose] {
        l.wait_entry_gone(&project, e).await;
        assert_eq!(l.count(&bucket, &format!("{e}/")).await, 0);
    }
    assert!(
        deleted_at.elapsed() >= GRACE - SLACK,
        "not before the grace period"
    );
    let metrics = http_get(agent.metrics_address.unwrap(), "/metrics").await;
    assert!(
        !metrics.contains("granary_backupentry_deletion_due_timestamp_seconds{"),
        "no due time is left once the entries are gone: {metrics}"
    );
    agent.shutdown().await;
}

/// The value of `granary_backupentry_deletion_due_timestamp_seconds` for `entry`.
fn deletion_due(metrics: &str, entry: &str) -> Option<i64> {
    metrics
        .lines()
        .filter(|l| l.starts_with("granary_backupentry_deletion_due_timestamp_seconds{"))
        .find(|l| l.contains(&format!("backupentry=\"{entry}\"")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The description of an entry's Pending deletion, once it shows one.
async fn pending_description(l: &Landscape, project: &str, entry: &str) -> String {
    let api = l.entries(project);
    let last = || async {
        api.get(entry)
            .await
            .unwrap()
            .status
            .and_then(|s| s.last_operation)
    };
    poll_until(&format!("{entry} Pending"), || async {
        last().await.is_some_and(|op| {
            op.state == LastOperationState::Pending
                && op.description.starts_with("deletion scheduled for ")
        })
    })
    .await;
    last().await.map(|op| op.description).unwrap_or_default()
}

/// `granary seed` stopped and started again while an entry waits out its grace period:
/// the new process shows the same scheduled time (it is computed from the recorded
/// deletion time, not from when a process saw the deletion), deletes nothing before it,
/// and everything after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_restarted_during_the_grace_period_keeps_the_schedule() {
    const LONGER: Duration = Duration::from_secs(12);
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let mut config = l.config("seed-r");
    config.controllers.backup_entry.deletion_grace_period = Some(ConfigDuration(LONGER));
    let agent = l.start_agent(None, config.clone()).await;
    let bucket = l.bucket_name("rs");
    let project = l.cluster.name("garden-r");
    ensure_namespace(&l.garden, &project).await;
    l.create_bucket(&bucket, "seed-r").await;
    let (entry, _) = l.entry_name("wait");
    l.create_entry(&project, &entry, &bucket, "seed-r", &[])
        .await;
    l.wait_entry_ready(&project, &entry).await;
    l.fill(&bucket, &entry, 10).await;

    let deleted_at = Instant::now();
    l.entries(&project)
        .delete(&entry, &DeleteParams::default())
        .await
        .unwrap();
    let before = pending_description(&l, &project, &entry).await;
    agent.shutdown().await;

    // What the first process reported is wiped on both sides, so what shows next is the
    // new process' own computation.
    let clear = json!({"status": {"lastOperation": null}});
    Api::<extensions::BackupEntry>::all(l.seed.clone())
        .patch_status(&entry, &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    l.entries(&project)
        .patch_status(&entry, &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    let agent = l.start_agent(None, config).await;
    let after = pending_description(&l, &project, &entry).await;
    assert_eq!(after, before, "the same schedule after a restart");
    assert!(
        deleted_at.elapsed() < LONGER - SLACK,
        "checked within the grace period"
    );
    assert_eq!(
        l.count(&bucket, &format!("{entry}/")).await,
        11,
        "nothing deleted yet"
    );
    l.wait_entry_gone(&project, &entry).await;
    assert_eq!(l.count(&bucket, &format!("{entry}/")).await, 0);
    assert!(
        deleted_at.elapsed() >= LONGER - SLACK,
        "not before the grace period"
    );
    agent.shutdown().await;
}
