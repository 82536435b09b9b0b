//! `granary seed` end to end, in-process, with a garden and a seed API server: a bucket
//! and entries created in the garden are provisioned at the provider and reported back;
//! deleting an entry (grace 0) removes its objects and nobody else's; deleting the
//! bucket removes it at the provider; the liveness Lease and the metrics are there.

use bytes::Bytes;
use granary_api::core::{
    ANNOTATION_CREATED_BY, FINALIZER_GARDEN_BUCKET_GUARD, FINALIZER_GARDENER, GARDEN_NAMESPACE,
    bucket_secret_name,
};
use granary_api::extensions;
use granary_test_support::seed::{Backend, Landscape, ensure_namespace, has_gardener_finalizer};
use granary_test_support::{http_get, poll_until};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams};

async fn happy_path_and_deletion(backend: Backend) {
    let Some(l) = Landscape::start(backend).await else {
        return;
    };
    let seed_name = "seed-a";
    let agent = l.start_agent(None, l.config(seed_name)).await;

    let bucket = l.bucket_name("hp");
    let project = l.cluster.name("garden-p");
    ensure_namespace(&l.garden, &project).await;
    let (e1, technical1) = l.entry_name("one");
    let (e2, _) = l.entry_name("two");
    // The shoot's control-plane namespace exists for e1 only.
    ensure_namespace(&l.seed, &technical1).await;
    l.create_bucket(&bucket, seed_name).await;
    l.create_entry(&project, &e1, &bucket, seed_name, &[]).await;
    l.create_entry(&project, &e2, &bucket, seed_name, &[]).await;

    let b = l.wait_bucket_ready(&bucket).await;
    assert!(has_gardener_finalizer(&b));
    assert_eq!(
        b.status.as_ref().and_then(|s| s.seed_name.as_deref()),
        Some(seed_name)
    );
    let ready = l.wait_entry_ready(&project, &e1).await;
    assert!(has_gardener_finalizer(&ready));
    l.wait_entry_ready(&project, &e2).await;

    // Provider side: the bucket and both markers exist.
    let store = l.store().await;
    for e in [&e1, &e2] {
        store
            .head(&bucket, &format!("{e}/.granary/entry.json"))
            .await
            .expect("prefix marker written");
    }
    // Seed side: copied credentials, the etcd-backup secret for e1.
    let seed_secrets: Api<Secret> = Api::namespaced(l.seed.clone(), GARDEN_NAMESPACE);
    assert!(
        seed_secrets
            .get_opt(&bucket_secret_name(&bucket))
            .await
            .unwrap()
            .is_some()
    );
    let etcd: Secret = Api::namespaced(l.seed.clone(), &technical1)
        .get("etcd-backup")
        .await
        .expect("etcd-backup secret written");
    assert_eq!(
        etcd.metadata.annotations.as_ref().unwrap()[ANNOTATION_CREATED_BY],
        e1
    );
    let data = etcd.data.unwrap();
    assert_eq!(data["bucketName"].0, bucket.as_bytes());
    assert_eq!(data["prefix"].0, e1.as_bytes());
    let ext: extensions::BackupEntry = Api::all(l.seed.clone()).get(&e1).await.unwrap();
    assert!(
        ext.operation().is_none(),
        "operation annotation removed when done"
    );

    // Objects of both entries; deleting e1 (grace 0) removes only its own.
    l.fill(&bucket, &e1, 25).await;
    l.fill(&bucket, &e2, 5).await;
    l.entries(&project)
        .delete(&e1, &DeleteParams::default())
        .await
        .unwrap();
    l.wait_entry_gone(&project, &e1).await;
    assert_eq!(l.count(&bucket, &format!("{e1}/")).await, 0);
    assert_eq!(
        l.count(&bucket, &format!("{e2}/")).await,
        6,
        "5 objects + marker"
    );
    let gone = Api::<Secret>::namespaced(l.seed.clone(), &technical1)
        .get_opt("etcd-backup")
        .await
        .unwrap();
    assert!(gone.is_none(), "our etcd-backup secret is deleted");

    // Liveness lease and metrics.
    let leases: Api<Lease> = Api::namespaced(l.garden.clone(), GARDEN_NAMESPACE);
    let lease = leases
        .get(&format!("seed-{seed_name}"))
        .await
        .expect("liveness lease");
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some(seed_name)
    );
    let metrics = http_get(agent.metrics_address.expect("metrics served"), "/metrics").await;
    assert!(
        metrics.contains("granary_reconcile_total{controller=\"backupentry\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("granary_objects_deleted_total"),
        "{metrics}"
    );
    assert!(
        http_get(agent.metrics_address.unwrap(), "/readyz")
            .await
            .contains("ok")
    );

    // e2, then the bucket: deleted at the provider, garden objects released.
    l.entries(&project)
        .delete(&e2, &DeleteParams::default())
        .await
        .unwrap();
    l.wait_entry_gone(&project, &e2).await;
    l.buckets()
        .delete(&bucket, &DeleteParams::default())
        .await
        .unwrap();
    poll_until("garden bucket gone", || async {
        l.buckets().get_opt(&bucket).await.unwrap().is_none()
    })
    .await;
    assert!(
        store
            .head(&bucket, &format!("{e2}/.granary/entry.json"))
            .await
            .is_err(),
        "bucket deleted with its contents"
    );
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_local_happy_path_and_deletion() {
    happy_path_and_deletion(Backend::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_s3_happy_path_and_deletion() {
    happy_path_and_deletion(Backend::S3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_azure_happy_path_and_deletion() {
    happy_path_and_deletion(Backend::Azure).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_gcs_happy_path_and_deletion() {
    happy_path_and_deletion(Backend::Gcs).await;
}

/// While the garden refuses a bucket's deletion (its guard finalizer, held while entries
/// reference the bucket), the seed deletes nothing at the provider; once the garden lets
/// go, the deletion runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_waits_for_the_garden_guard_before_deleting_a_bucket() {
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let seed_name = "seed-g";
    let agent = l.start_agent(None, l.config(seed_name)).await;
    let store = l.store().await;
    let guarded = l.bucket_name("guarded");
    let plain = l.bucket_name("plain");
    l.create_bucket(&guarded, seed_name).await;
    l.create_bucket(&plain, seed_name).await;
    l.wait_bucket_ready(&guarded).await;
    l.wait_bucket_ready(&plain).await;
    // Play the garden controller's deletion guard.
    let guard = serde_json::json!({"metadata": {"finalizers": [FINALIZER_GARDENER, FINALIZER_GARDEN_BUCKET_GUARD]}});
    l.buckets()
        .patch(&guarded, &PatchParams::default(), &Patch::Merge(&guard))
        .await
        .unwrap();
    store
        .put(
            &guarded,
            "shoot--p--s--uid/etcd-main/full",
            Bytes::from_static(b"data"),
        )
        .await
        .unwrap();

    l.buckets()
        .delete(&guarded, &DeleteParams::default())
        .await
        .unwrap();
    // An unguarded deletion after it completes: the agent has handled both events by then.
    l.buckets()
        .delete(&plain, &DeleteParams::default())
        .await
        .unwrap();
    poll_until("unguarded bucket gone", || async {
        l.buckets().get_opt(&plain).await.unwrap().is_none()
    })
    .await;
    let ext: Api<extensions::BackupBucket> = Api::all(l.seed.clone());
    let seed_object = ext.get(&guarded).await.expect("seed object kept");
    assert!(
        seed_object.metadata.deletion_timestamp.is_none(),
        "seed object not deleted"
    );
    assert!(
        store
            .head(&guarded, "shoot--p--s--uid/etcd-main/full")
            .await
            .is_ok(),
        "nothing deleted at the provider while the garden refuses"
    );

    // The garden lets go: now the bucket is deleted.
    let release = serde_json::json!({"metadata": {"finalizers": [FINALIZER_GARDENER]}});
    l.buckets()
        .patch(&guarded, &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    poll_until("guarded bucket gone", || async {
        l.buckets().get_opt(&guarded).await.unwrap().is_none()
    })
    .await;
    assert!(
        store
            .head(&guarded, "shoot--p--s--uid/etcd-main/full")
            .await
            .is_err()
    );
    agent.shutdown().await;
}
