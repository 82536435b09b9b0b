//! `granary migrate` end to end, in the world of [`crate::migrate_world`]. Scenarios: a legacy per-shoot bucket of
//! 3,000 objects on moto into a shared bucket; objects added and deleted between plan
//! and cut-over; a failpoint in every phase with the copy requests counted over the
//! re-runs; a cross-provider (streamed) move; `--dry-run` changing nothing.

use std::collections::BTreeMap;

use bytes::Bytes;
use granary_api::common::SecretReference;
use granary_api::core::{BackupBucketProvider, BackupBucketSpec, GARDEN_NAMESPACE, LABEL_SEED};
use granary_migrate::manifest::ObjectState;
use granary_migrate::phase::{ANNOTATION_ETCD_REPLICAS, ANNOTATION_PHASE};
use granary_migrate::{discover_legacy, import_legacy, migrate_entry, migration_status};
use granary_providers::SecretData;
use granary_runtime::selector::ObjectSelector;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use granary_test_support::seed::{Backend, CREDENTIALS, ensure_namespace};
use granary_test_support::worlds::migrate::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_bucket_of_3000_objects_on_moto_moves_into_a_shared_bucket() {
    let Some(w) = world(Backend::S3).await else {
        return;
    };
    let store = w.land.store().await;
    let legacy = w.legacy_source().await;
    let shared = w.shared_bucket("dst").await;
    fill(store.as_ref(), &legacy, "", 3000, "obj").await;
    // The legacy entry's prefix is the bucket root: the import's entry points there.
    assert_eq!(w.entry_obj().await.spec.bucket_name, legacy);

    let started = std::time::Instant::now();
    let report = migrate_entry(&w.ctx(16), &w.request(&shared))
        .await
        .expect("migration succeeds");
    eprintln!("3000 objects migrated in {:?}: {report}", started.elapsed());
    assert_eq!(report.phase, "Done");
    assert_eq!(report.counters.server_side_copies, 3000);
    assert_eq!(report.counters.bytes_through_process, 0);
    assert!(report.downtime_seconds.is_some());

    let src = listing(store.as_ref(), &legacy, "").await;
    let dst_prefix = format!("{}/", w.entry);
    let dst = listing(store.as_ref(), &shared, &dst_prefix).await;
    assert_eq!(src.len(), 3000);
    assert_eq!(
        src.iter()
            .map(|(k, m)| (k, m.size, &m.etag))
            .collect::<Vec<_>>(),
        dst.iter()
            .map(|(k, m)| (k, m.size, &m.etag))
            .collect::<Vec<_>>(),
        "same keys, sizes and etags"
    );
    let sample: Vec<String> = src.keys().step_by(60).cloned().collect();
    same_bytes(
        store.as_ref(),
        &legacy,
        "",
        store.as_ref(),
        &shared,
        &dst_prefix,
        &sample,
    )
    .await;
    let manifest = w.manifest(store.as_ref(), &shared, &legacy).await;
    assert_eq!(manifest.objects.len(), 3000);
    assert!(
        manifest
            .objects
            .iter()
            .all(|o| o.state == ObjectState::Copied)
    );

    // etcd back, entry switched, secret switched, source handed over for deletion.
    w.sim.wait_ready(3).await;
    let entry = w.entry_obj().await;
    assert_eq!(entry.spec.bucket_name, shared);
    assert!(!entry.annotations().contains_key(ANNOTATION_PHASE));
    assert!(!entry.annotations().contains_key(ANNOTATION_ETCD_REPLICAS));
    assert_eq!(
        etcd_secret_bucket(&w).await.as_deref(),
        Some(shared.as_str())
    );
    let source = w
        .entries()
        .get_opt(&format!("source-{}", w.entry))
        .await
        .expect("get source entry");
    assert!(source.is_none_or(|s| s.metadata.deletion_timestamp.is_some()));
    let legacy_bucket = w.land.buckets().get_opt(&legacy).await.expect("get bucket");
    assert!(legacy_bucket.is_none_or(|b| b.metadata.deletion_timestamp.is_some()));
    let dst_bucket = w.land.buckets().get(&shared).await.expect("get bucket");
    assert_eq!(dst_bucket.status.and_then(|s| s.entry_count), Some(1));

    // Running it again is a no-op.
    let again = migrate_entry(&w.ctx(16), &w.request(&shared))
        .await
        .expect("no-op");
    assert!(again.already_there);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failpoint_in_every_phase_then_a_rerun_copies_nothing_twice() {
    let Some(w) = world(Backend::Local).await else {
        return;
    };
    let (store, from, to) = w.src_and_dst().await;
    let prefix = format!("{}/", w.entry);
    fill(store.as_ref(), &from, &prefix, 40, "o").await;

    let mut copies = 0;
    for (point, phase_after) in [
        ("migrate.plan.written=1:error", None),
        ("migrate.copy.object=5:error", Some("Copy")),
        ("migrate.cutover.scaled-down=1:error", Some("CutOver")),
        ("migrate.cutover.before-switch=1:error", Some("CutOver")),
        ("migrate.scale-up=1:error", Some("ScaleUp")),
        ("migrate.cleanup=1:error", Some("Cleanup")),
    ] {
        let (ok, n, out) = run_binary(&w, &to, Some(point)).await;
        assert!(!ok, "{point} stops the run: {out}");
        copies += n;
        let entry = w.entry_obj().await;
        assert_eq!(
            entry
                .annotations()
                .get(ANNOTATION_PHASE)
                .map(String::as_str),
            phase_after,
            "phase recorded after {point}"
        );
        if phase_after != Some("ScaleUp") {
            // A cut-over failure brings etcd back on the old configuration.
            w.sim.wait_ready(3).await;
            assert!(!entry.annotations().contains_key(ANNOTATION_ETCD_REPLICAS));
        }
        if phase_after == Some("CutOver") {
            assert_eq!(
                entry.spec.bucket_name, from,
                "not switched before the switch"
            );
        }
        let status = migration_status(&w.land.garden).await.expect("status");
        let ours = status
            .iter()
            .find(|s| s.entry == format!("{}/{}", w.namespace, w.entry));
        assert_eq!(ours.map(|s| s.phase.as_str()), phase_after, "{status:?}");
        if phase_after == Some("Copy") {
            // The run stopped after asking the garden: the place is asked for or held.
            let place = ours.and_then(|s| s.place.as_deref());
            assert!(matches!(place, Some("asked" | "held")), "{status:?}");
        }
    }
    let (_, n, _) = run_binary(&w, &to, None).await;
    copies += n;
    assert_eq!(copies, 40, "every object copied exactly once over all runs");
    w.sim.wait_ready(3).await;
    assert_eq!(w.entry_obj().await.spec.bucket_name, to);
    let src = listing(store.as_ref(), &from, &prefix).await;
    let dst = listing(store.as_ref(), &to, &prefix).await;
    assert_eq!(
        src.keys().collect::<Vec<_>>(),
        dst.keys().collect::<Vec<_>>()
    );
    let keys: Vec<String> = src.keys().cloned().collect();
    same_bytes(
        store.as_ref(),
        &from,
        &prefix,
        store.as_ref(),
        &to,
        &prefix,
        &keys,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_added_and_deleted_between_plan_and_cut_over() {
    let Some(w) = world(Backend::Local).await else {
        return;
    };
    let (store, from, to) = w.src_and_dst().await;
    let prefix = format!("{}/", w.entry);
    fill(store.as_ref(), &from, &prefix, 30, "o").await;

    // Stop at the first copy: the plan (30 objects) is committed, nothing copied.
    let (ok, n, _) = run_binary(&w, &to, Some("migrate.copy.object=1:error")).await;
    assert!(!ok);
    assert_eq!(n, 0);
    // Gone before being copied (etcd's garbage collection) → NotFound in the copy.
    let gone_early = format!("{prefix}etcd-main/o-00003");
    store
        .delete_many(&from, &[gone_early])
        .await
        .expect("delete");
    // Copy everything, stop when etcd is down (before the final copy).
    let (ok, _, _) = run_binary(&w, &to, Some("migrate.cutover.scaled-down=1:error")).await;
    assert!(!ok);
    // Between the bulk copy and the cut-over: one object is deleted after it was
    // copied, one changes, two are new.
    let gone_late = format!("{prefix}etcd-main/o-00007");
    store
        .delete_many(&from, &[gone_late])
        .await
        .expect("delete");
    store
        .put(
            &from,
            &format!("{prefix}etcd-main/o-00010"),
            Bytes::from_static(b"changed!"),
        )
        .await
        .expect("change");
    for k in ["new-1", "new-2"] {
        store
            .put(
                &from,
                &format!("{prefix}etcd-main/{k}"),
                Bytes::from(k.to_string()),
            )
            .await
            .expect("add");
    }
    let (ok, n, out) = run_binary(&w, &to, None).await;
    assert!(ok, "{out}");
    assert_eq!(
        n, 3,
        "the final copy takes the changed and the new objects only"
    );

    let m = w.manifest(store.as_ref(), &to, &from).await;
    let state = |k: &str| {
        m.objects
            .iter()
            .find(|o| o.key == format!("etcd-main/{k}"))
            .map(|o| o.state)
    };
    assert_eq!(state("o-00003"), Some(ObjectState::NotFound));
    assert_eq!(state("o-00007"), Some(ObjectState::NotFound));
    assert_eq!(state("o-00010"), Some(ObjectState::Copied));
    assert_eq!(state("new-1"), Some(ObjectState::Copied));
    assert_eq!(state("new-2"), Some(ObjectState::Copied));
    assert_eq!(m.objects.len(), 32);
    let src = listing(store.as_ref(), &from, &prefix).await;
    let dst = listing(store.as_ref(), &to, &prefix).await;
    assert_eq!(
        src.keys().collect::<Vec<_>>(),
        dst.keys().collect::<Vec<_>>(),
        "the destination mirrors the source at cut-over"
    );
    let keys: Vec<String> = src.keys().cloned().collect();
    same_bytes(
        store.as_ref(),
        &from,
        &prefix,
        store.as_ref(),
        &to,
        &prefix,
        &keys,
    )
    .await;
    w.sim.wait_ready(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_left_copy_is_found_by_head_and_not_copied_again() {
    let Some(w) = world(Backend::Local).await else {
        return;
    };
    let (store, from, to) = w.src_and_dst().await;
    let prefix = format!("{}/", w.entry);
    fill(store.as_ref(), &from, &prefix, 12, "o").await;
    // First copy pass fails on its first object: the manifest is written, the pass
    // counted, nothing copied.
    let (ok, n, _) = run_binary(&w, &to, Some("migrate.copy.object=1:error")).await;
    assert!(!ok);
    assert_eq!(n, 0);
    // What a crash after four copies (before the manifest was saved) would leave.
    for i in 0..4 {
        let key = format!("{prefix}etcd-main/o-{i:05}");
        store.copy(&from, &key, &to, &key).await.expect("copy");
    }
    let (ok, n, out) = run_binary(&w, &to, None).await;
    assert!(ok);
    assert_eq!(n, 8, "the four present objects are skipped: {out}");
    let skipped: u64 = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "pass")
        .map(|v| v["counters"]["skippedPresent"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(skipped, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_provider_move_streams_identical_bytes_from_local_to_s3() {
    let Some(w) = world(Backend::S3).await else {
        return;
    };
    // Source: a `local` bucket with its own credentials secret.
    let local_secret = "local-credentials";
    let mut secret = Secret {
        data: Some(BTreeMap::from([(
            "note".to_string(),
            ByteString(b"the local store needs none".to_vec()),
        )])),
        ..Default::default()
    };
    secret.metadata.name = Some(local_secret.into());
    Api::<Secret>::namespaced(w.land.garden.clone(), GARDEN_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    let from = w.land.bucket_name("loc");
    let mut b = granary_api::core::BackupBucket::new(
        &from,
        BackupBucketSpec {
            provider: BackupBucketProvider {
                type_: "local".into(),
                region: "local".into(),
            },
            credentials_ref: Some(granary_api::common::ObjectReference {
                api_version: "v1".into(),
                kind: "Secret".into(),
                name: local_secret.into(),
                namespace: GARDEN_NAMESPACE.into(),
                ..Default::default()
            }),
            seed_name: Some(SEED.into()),
            ..Default::default()
        },
    );
    b.metadata.labels = Some(BTreeMap::from([(LABEL_SEED.to_string(), SEED.to_string())]));
    w.land
        .buckets()
        .create(&PostParams::default(), &b)
        .await
        .expect("create local bucket");
    let local = granary_providers::open("local", None, &SecretData::new(), &w.land.store_options())
        .await
        .expect("local store");
    local
        .ensure_bucket(&from, &Default::default())
        .await
        .expect("local bucket");
    let to = w.shared_bucket("s3").await;
    w.entry_in(&from).await;
    let prefix = format!("{}/", w.entry);
    fill(local.as_ref(), &from, &prefix, 20, "x").await;
    // One object larger than a single read buffer.
    let big: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    local
        .put(
            &from,
            &format!("{prefix}etcd-main/full-snapshot"),
            Bytes::from(big.clone()),
        )
        .await
        .expect("big object");

    let report = migrate_entry(&w.ctx(4), &w.request(&to))
        .await
        .expect("migration succeeds");
    assert_eq!(report.counters.streamed_copies, 21);
    assert_eq!(report.counters.server_side_copies, 0);
    let s3 = w.land.store().await;
    let src = listing(local.as_ref(), &from, &prefix).await;
    let dst = listing(s3.as_ref(), &to, &prefix).await;
    assert_eq!(
        src.keys().collect::<Vec<_>>(),
        dst.keys().collect::<Vec<_>>()
    );
    let total: u64 = src.values().map(|m| m.size).sum();
    assert_eq!(report.counters.bytes_through_process, total);
    let keys: Vec<String> = src.keys().cloned().collect();
    same_bytes(
        local.as_ref(),
        &from,
        &prefix,
        s3.as_ref(),
        &to,
        &prefix,
        &keys,
    )
    .await;
    assert_eq!(etcd_secret_bucket(&w).await.as_deref(), Some(to.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_changes_nothing() {
    // No garden: a dry run does not need one (and nothing may change the objects the
    // test compares).
    let Some(w) = world_with(Backend::Local, GardenMode::None).await else {
        return;
    };
    let store = w.land.store().await;
    let legacy = w.legacy_source().await;
    let to = w.shared_bucket("dst").await;
    fill(store.as_ref(), &legacy, "", 25, "d").await;
    // Discovery from the seed's `backup--<bucket>` namespace finds the same bucket.
    ensure_namespace(&w.land.seed, &format!("backup--{legacy}")).await;
    let secret_ref = SecretReference {
        name: CREDENTIALS.into(),
        namespace: GARDEN_NAMESPACE.into(),
    };
    let found = discover_legacy(
        &w.land.garden,
        &w.land.seed,
        "local",
        "us-east-1",
        &secret_ref,
    )
    .await
    .expect("discover");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].bucket, legacy);
    let selector = ObjectSelector::new(Some(w.land.cluster.object_selector.clone()));
    let imported = import_legacy(&w.land.garden, &found, &selector)
        .await
        .expect("import");
    assert_eq!(imported[0].result, "unchanged");
    let before = (
        listing(store.as_ref(), &legacy, "").await,
        listing(store.as_ref(), &to, "").await,
        w.entry_obj().await,
        w.land.buckets().get(&to).await.expect("bucket"),
        w.sim.state().await,
    );
    let mut req = w.request(&to);
    req.dry_run = true;
    let report = migrate_entry(&w.ctx(8), &req).await.expect("plan");
    assert!(report.dry_run);
    assert_eq!(report.objects, 25);
    assert_eq!(report.pending, 25);
    assert!(report.bytes > 0);
    assert!(report.estimated_seconds.is_some_and(|s| s > 0.0));
    assert_eq!(report.counters.copy_requests(), 0);
    let after = (
        listing(store.as_ref(), &legacy, "").await,
        listing(store.as_ref(), &to, "").await,
        w.entry_obj().await,
        w.land.buckets().get(&to).await.expect("bucket"),
        w.sim.state().await,
    );
    assert_eq!(before.0, after.0, "source untouched");
    assert!(after.1.is_empty(), "nothing written to the destination");
    assert_eq!(
        before.2.resource_version(),
        after.2.resource_version(),
        "entry untouched"
    );
    assert_eq!(
        before.3.resource_version(),
        after.3.resource_version(),
        "bucket untouched"
    );
    assert_eq!(before.4, after.4, "etcd untouched");
    assert!(
        w.entries()
            .get_opt(&format!("source-{}", w.entry))
            .await
            .expect("get")
            .is_none()
    );

    // A legacy bucket is never a target, even for a dry run.
    let mut back = w.request(&legacy);
    back.dry_run = true;
    w.entries()
        .patch(
            &w.entry,
            &Default::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"bucketName": to}})),
        )
        .await
        .expect("patch");
    let err = migrate_entry(&w.ctx(8), &back).await.expect_err("refused");
    assert!(err.to_string().contains("legacy"), "{err}");
}
