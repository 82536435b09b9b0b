//! Issue #20's input guards, tried as a user would: the garden refuses a Shoot purpose
//! Gardener does not have (422 naming `spec.purpose`), and a seed creates nothing for a
//! hand-made garden BackupBucket whose name breaks the bucket-name rule (its status and
//! an event say which rule, with the field path).

use crate::garden::shoot;
use crate::seed_support::{Backend, Landscape};
use crate::support::{TestCluster, poll_until};
use granary::api::common::LastOperationState;
use granary::api::core::Shoot;
use kube::api::{Api, PostParams};
use std::path::Path;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_shoot_purpose_is_refused_with_its_field() {
    let tc = TestCluster::start().await;
    let client = tc.client();
    tc.install_crds_from_dir(
        &client,
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/garden/crds"),
    )
    .await;
    let ns = tc.namespace("garden-p").await;
    let shoots: Api<Shoot> = Api::namespaced(client, &ns);
    let mut s = shoot(&tc, &ns, "yolo", "profile", "seed");
    s.spec.purpose = Some("yolo".into());
    let e = shoots
        .create(&PostParams::default(), &s)
        .await
        .expect_err("an unknown purpose is refused");
    let kube::Error::Api(status) = e else {
        panic!("an API error, got {e:?}")
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains("spec.purpose"),
        "{}",
        status.message
    );
    for purpose in [
        "evaluation",
        "testing",
        "development",
        "production",
        "infrastructure",
    ] {
        let mut s = shoot(&tc, &ns, purpose, "profile", "seed");
        s.spec.purpose = Some(purpose.into());
        shoots
            .create(&PostParams::default(), &s)
            .await
            .unwrap_or_else(|e| panic!("{purpose} is accepted: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_made_bucket_with_a_bad_name_gets_nothing_created() {
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let agent = l.start_agent(None, l.config("seed-a")).await;
    let store = l.store().await;
    // Over 63 characters, and one with a double hyphen: both break the one rule that
    // S3, GCS and Azure names share.
    let sel = &l.cluster.object_selector;
    for (name, says) in [
        (format!("{}-{sel}", "x".repeat(60)), "metadata.name"),
        (format!("b--{sel}"), "metadata.name"),
    ] {
        l.create_bucket(&name, "seed-a").await;
        let buckets = l.buckets();
        poll_until(&format!("{name} refused with the reason"), || async {
            buckets
                .get(&name)
                .await
                .ok()
                .and_then(|b| b.status)
                .is_some_and(|s| {
                    s.last_operation.is_some_and(|o| {
                        o.state == LastOperationState::Error
                            && o.description.contains("invalid BackupBucket")
                            && o.description.contains(says)
                    })
                })
        })
        .await;
        assert!(
            store.head(&name, ".granary/bucket.json").await.is_err(),
            "nothing created at the provider for {name}"
        );
    }
    agent.shutdown().await;
}

/// Deleting a BackupBucket that still has entries is refused by the garden (its guard
/// finalizer, `lastOperation` Delete/Error saying why): the bucket's healthy entries stay
/// Succeeded; the refusal is the bucket's news, not theirs (#20).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_bucket_deletion_leaves_its_entries_healthy() {
    use crate::seed_support::ensure_namespace;
    use crate::support::http_get;
    use granary::api::core::{FINALIZER_GARDEN_BUCKET_GUARD, FINALIZER_GARDENER};
    use kube::api::{DeleteParams, Patch, PatchParams};
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let agent = l.start_agent(None, l.config("seed-a")).await;
    let bucket = l.bucket_name("keep");
    let project = l.cluster.name("garden-p");
    ensure_namespace(&l.garden, &project).await;
    let (entry, _) = l.entry_name("e");
    l.create_bucket(&bucket, "seed-a").await;
    l.create_entry(&project, &entry, &bucket, "seed-a", &[])
        .await;
    l.wait_entry_ready(&project, &entry).await;

    // What the garden does when the bucket's deletion is asked for while it has entries.
    let guard = serde_json::json!({"metadata": {"finalizers": [FINALIZER_GARDENER, FINALIZER_GARDEN_BUCKET_GUARD]}});
    l.buckets()
        .patch(&bucket, &PatchParams::default(), &Patch::Merge(&guard))
        .await
        .expect("guard");
    l.buckets()
        .delete(&bucket, &DeleteParams::default())
        .await
        .expect("delete asked");
    let refused = serde_json::json!({"status": {
        "lastOperation": {"type": "Delete", "state": "Error",
            "description": "deletion refused: 1 BackupEntry still references this bucket",
            "lastUpdateTime": "2026-11-24T00:00:00Z"},
        "lastError": {"description": "deletion refused: 1 BackupEntry still references this bucket",
            "lastUpdateTime": "2026-11-24T00:00:00Z"},
    }});
    l.buckets()
        .patch_status(&bucket, &PatchParams::default(), &Patch::Merge(&refused))
        .await
        .expect("refusal reported");

    // Make the mirror look at the entry again and wait until it has.
    let metrics_at = agent.metrics_address.expect("metrics");
    let passes = || async {
        let text = http_get(metrics_at, "/metrics").await;
        text.lines()
            .find(|l| l.starts_with("granary_reconcile_total{controller=\"mirror-backupentry\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let before = passes().await;
    let touch = serde_json::json!({"metadata": {"annotations": {"test.granary/touch": "1"}}});
    l.entries(&project)
        .patch(&entry, &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .expect("touch");
    poll_until("the mirror looked at the entry again", || async {
        passes().await > before
    })
    .await;
    let e = l.entries(&project).get(&entry).await.expect("entry");
    let status = e.status.expect("status");
    assert_eq!(
        status.last_operation.map(|o| o.state),
        Some(LastOperationState::Succeeded),
        "the entry stays healthy"
    );
    assert!(status.last_error.is_none());
    agent.shutdown().await;
}
