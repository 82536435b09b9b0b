//! Hand-over between two seeds (DESIGN §3.2), each with its own seed API server and
//! agent, sharing one object store: an entry whose shoot moves to another seed and a
//! bucket reassigned to another seed are migrated (released by the old seed without a
//! provider call) and restored by the new one; every object in the bucket is still there.

use crate::seed_support::{Backend, Landscape, ensure_namespace, install_seed_crds};
use crate::support::poll_until;
use granary::api::common::{LastOperationState, LastOperationType};
use granary::api::core::LABEL_SEED;
use granary::api::extensions;
use granary::embedded::{EmbeddedOptions, EmbeddedServer};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

fn migrated(op: Option<&granary::api::common::LastOperation>) -> bool {
    op.is_some_and(|o| {
        o.type_ == LastOperationType::Migrate && o.state == LastOperationState::Succeeded
    })
}

/// Plays the garden controller: assign to `seed` (spec), or relabel for it.
fn assign(seed: &str) -> Patch<serde_json::Value> {
    Patch::Merge(json!({"spec": {"seedName": seed}}))
}

fn relabel(seed: &str) -> Patch<serde_json::Value> {
    Patch::Merge(json!({"metadata": {"labels": {LABEL_SEED: seed}}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_hand_over_entry_and_bucket() {
    hand_over_entry_and_bucket(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_s3_hand_over_entry_and_bucket() {
    hand_over_entry_and_bucket(Backend::S3).await;
}

async fn hand_over_entry_and_bucket(backend: Backend) {
    let Some(l) = Landscape::start(backend).await else {
        return;
    };
    let other = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .expect("second seed API server");
    let seed_b = other.client().await.expect("client");
    install_seed_crds(&l.cluster, &seed_b).await;
    let agent_a = l.start_agent(None, l.config("seed-a")).await;
    let agent_b = l
        .start_agent(Some(seed_b.clone()), l.config("seed-b"))
        .await;

    let bucket = l.bucket_name("ho");
    let project = l.cluster.name("garden-h");
    ensure_namespace(&l.garden, &project).await;
    let (entry, _) = l.entry_name("ho");
    l.create_bucket(&bucket, "seed-a").await;
    l.create_entry(&project, &entry, &bucket, "seed-a", &[])
        .await;
    l.wait_entry_ready(&project, &entry).await;
    l.fill(&bucket, &entry, 20).await;
    let before = l.count(&bucket, "").await;
    assert_eq!(
        before, 22,
        "20 objects, the entry's marker and the bucket's record"
    );

    // The shoot moves to seed-b.
    let entries = l.entries(&project);
    entries
        .patch(&entry, &PatchParams::default(), &assign("seed-b"))
        .await
        .unwrap();
    poll_until("entry released by seed-a", || async {
        let e = entries.get(&entry).await.unwrap();
        let s = e.status.unwrap_or_default();
        migrated(s.last_operation.as_ref()) && s.seed_name.is_none()
    })
    .await;
    let ext_a: Api<extensions::BackupEntry> = Api::all(l.seed.clone());
    assert!(
        ext_a.get_opt(&entry).await.unwrap().is_none(),
        "seed-a let go of the entry"
    );
    assert_eq!(
        l.count(&bucket, "").await,
        before,
        "a hand-over deletes nothing"
    );
    entries
        .patch(&entry, &PatchParams::default(), &relabel("seed-b"))
        .await
        .unwrap();
    poll_until("entry restored on seed-b", || async {
        let e = entries.get(&entry).await.unwrap();
        let s = e.status.unwrap_or_default();
        s.seed_name.as_deref() == Some("seed-b")
            && s.last_operation.is_some_and(|o| {
                o.type_ == LastOperationType::Restore && o.state == LastOperationState::Succeeded
            })
    })
    .await;
    let ext_b: Api<extensions::BackupEntry> = Api::all(seed_b.clone());
    assert!(ext_b.get_opt(&entry).await.unwrap().is_some());
    assert_eq!(l.count(&bucket, "").await, before);

    // The bucket is reassigned to seed-b.
    let buckets = l.buckets();
    buckets
        .patch(&bucket, &PatchParams::default(), &assign("seed-b"))
        .await
        .unwrap();
    poll_until("bucket released by seed-a", || async {
        let b = buckets.get(&bucket).await.unwrap();
        let s = b.status.unwrap_or_default();
        migrated(s.last_operation.as_ref()) && s.seed_name.is_none()
    })
    .await;
    let bucket_a: Api<extensions::BackupBucket> = Api::all(l.seed.clone());
    assert!(bucket_a.get_opt(&bucket).await.unwrap().is_none());
    buckets
        .patch(&bucket, &PatchParams::default(), &relabel("seed-b"))
        .await
        .unwrap();
    poll_until("bucket restored on seed-b", || async {
        let b = buckets.get(&bucket).await.unwrap();
        let s = b.status.unwrap_or_default();
        s.seed_name.as_deref() == Some("seed-b")
            && s.last_operation.is_some_and(|o| {
                o.state == LastOperationState::Succeeded && o.type_ == LastOperationType::Restore
            })
    })
    .await;
    assert_eq!(
        l.count(&bucket, "").await,
        before,
        "every object is still there"
    );
    agent_a.shutdown().await;
    agent_b.shutdown().await;
    other.shutdown().await;
}
