//! Hand-over between two seeds (docs/architecture.md#hand-over-between-seeds), each with its own seed API server and
//! agent, sharing one object store: an entry whose shoot moves to another seed and a
//! bucket reassigned to another seed are migrated (released by the old seed without a
//! provider call) and restored by the new one; every object in the bucket is still there.

use granary_api::common::{LastOperationState, LastOperationType};
use granary_api::core::LABEL_SEED;
use granary_api::extensions;
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_test_support::poll_until;
use granary_test_support::seed::{Backend, Landscape, ensure_namespace, install_seed_crds};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

fn migrated(op: Option<&granary_api::common::LastOperation>) -> bool {
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

/// #20, end to end with the garden controller and two real seed agents: a shoot's seed
/// stops for good and is deleted (`kubectl delete seed`), then the shoot moves to the
/// other seed. The old seed can no longer hand the entry over, so the garden does, and
/// the new seed restores it: its extension object and the shoot's `etcd-backup` Secret
/// are there, and the entry's status is Succeeded for its current generation on the new
/// seed. The old seed goes once nothing is on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shoot_moved_off_a_deleted_seed_is_restored_on_the_new_seed() {
    use granary_api::core::{Seed, Shoot};
    use granary_test_support::garden::{
        backup, config, create_profile, create_seed, create_shoot, entries, start,
    };
    use granary_test_support::seed::CREDENTIALS;
    use k8s_openapi::api::core::v1::Secret;
    use kube::ResourceExt;
    use kube::api::DeleteParams;
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let other = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .expect("second seed API server");
    let seed_b = other.client().await.expect("client");
    install_seed_crds(&l.cluster, &seed_b).await;
    let tc = &l.cluster;
    let (a, b, profile) = (tc.name("sa"), tc.name("sb"), tc.name("local"));
    let agent_a = l.start_agent(None, l.config(&a)).await;
    let agent_b = l.start_agent(Some(seed_b.clone()), l.config(&b)).await;
    create_seed(tc, &a, "local", "eu-1", None).await;
    create_seed(tc, &b, "local", "eu-1", None).await;
    create_profile(
        tc,
        &profile,
        "local",
        Some(backup("local", None, CREDENTIALS)),
    )
    .await;
    // Ready within 5 s of a renewal (the agents renew every second).
    let garden = start(tc, config(None, Some((5000, 2000))));
    let ns = tc.namespace("garden-m").await;
    create_shoot(tc, &ns, "web", &profile, &a).await;
    poll_until("the entry is placed", || async {
        !entries(tc).await.is_empty()
    })
    .await;
    let name = entries(tc).await[0].name_any();
    let technical = name
        .rsplit_once("--")
        .map(|(t, _)| t.to_string())
        .expect("technical id");
    ensure_namespace(&l.seed, &technical).await;
    ensure_namespace(&seed_b, &technical).await;
    let api = l.entries(&ns);
    poll_until("the entry Succeeded on the first seed", || async {
        api.get(&name).await.is_ok_and(|e| {
            let s = e.status.clone().unwrap_or_default();
            s.seed_name.as_deref() == Some(a.as_str())
                && s.observed_generation == e.metadata.generation
                && s.last_operation
                    .is_some_and(|o| o.state == LastOperationState::Succeeded)
        })
    })
    .await;

    // The first seed is gone for good, and deleted; then the shoot moves.
    agent_a.shutdown().await;
    Api::<Seed>::all(l.garden.clone())
        .delete(&a, &DeleteParams::default())
        .await
        .expect("seed deletion asked");
    Api::<Shoot>::namespaced(l.garden.clone(), &ns)
        .patch("web", &PatchParams::default(), &assign(&b))
        .await
        .expect("shoot moved");
    poll_until(
        "the entry restored and Succeeded on the new seed",
        || async {
            api.get(&name).await.is_ok_and(|e| {
                let s = e.status.clone().unwrap_or_default();
                e.spec.seed_name.as_deref() == Some(b.as_str())
                    && s.seed_name.as_deref() == Some(b.as_str())
                    && s.observed_generation == e.metadata.generation
                    && s.last_operation.is_some_and(|o| {
                        o.type_ == LastOperationType::Restore
                            && o.state == LastOperationState::Succeeded
                    })
            })
        },
    )
    .await;
    let ext_b: Api<extensions::BackupEntry> = Api::all(seed_b.clone());
    assert!(
        ext_b.get_opt(&name).await.unwrap().is_some(),
        "extension object on the new seed"
    );
    let secret: Option<Secret> = Api::namespaced(seed_b.clone(), &technical)
        .get_opt("etcd-backup")
        .await
        .unwrap();
    assert!(secret.is_some(), "etcd-backup Secret on the new seed");
    poll_until("the deleted seed is gone once nothing is on it", || async {
        Api::<Seed>::all(l.garden.clone())
            .get_opt(&a)
            .await
            .expect("seed read")
            .is_none()
    })
    .await;
    garden.stop().await;
    agent_b.shutdown().await;
    other.shutdown().await;
}
