//! `granary migrate` with the rest of the landscape: the garden giving (or refusing) the
//! destination's place, etcd-main driven by etcd-druid, and a live seed removing the
//! source after the grace period. Built on the world of [`crate::migrate`].

use std::time::Duration;

use granary_api::core::{
    ANNOTATION_MIGRATION_REFUSED, ANNOTATION_MIGRATION_RESERVED, ANNOTATION_MIGRATION_TARGET,
};
use granary_migrate::phase::ANNOTATION_PHASE;
use granary_migrate::{EntryMigration, MigrateError, migrate_entry};
use granary_runtime::config::ConfigDuration;
use kube::ResourceExt;
use serde_json::json;

use granary_test_support::etcd_sim::EtcdSim;
use granary_test_support::poll_until;
use granary_test_support::seed::Backend;
use granary_test_support::worlds::migrate::{
    GardenMode, SEED, World, etcd_secret_bucket, fill, listing, migrate_command, run_binary,
    shoot_with_etcd, world, world_with,
};

/// Two migrations race for the last place in a bucket (quota 1): the garden, the one
/// writer of bucket counts, gives it to one; the other is refused and gives up before
/// copying anything, leaving its entry as it was with the reason on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_migrations_race_for_the_last_place_and_the_garden_gives_it_to_one() {
    let Some(w) = world_with(Backend::Local, GardenMode::Quota(Some(1))).await else {
        return;
    };
    let (store, src, dst) = w.src_and_dst().await;
    let (entry_b, _sim_b) = shoot_with_etcd(&w.land, &w.namespace, "b").await;
    w.land
        .create_entry(&w.namespace, &entry_b, &src, SEED, &[])
        .await;
    for (entry, tag) in [(&w.entry, "a"), (&entry_b, "b")] {
        fill(store.as_ref(), &src, &format!("{entry}/"), 20, tag).await;
    }
    // The advance check in the migration's own configuration knows no quota (the
    // default), so both runs get past it: only the garden decides.
    let ctx = w.ctx(4);
    let req_a = w.request(&dst);
    let req_b = EntryMigration {
        name: entry_b.clone(),
        ..w.request(&dst)
    };
    let (a, b) = tokio::join!(migrate_entry(&ctx, &req_a), migrate_entry(&ctx, &req_b));
    let (winner, loser, err) = match (a, b) {
        (Ok(_), Err(e)) => (w.entry.clone(), entry_b.clone(), e),
        (Err(e), Ok(_)) => (entry_b.clone(), w.entry.clone(), e),
        (a, b) => panic!("exactly one migration must win: {a:?} / {b:?}"),
    };
    assert!(
        matches!(err, MigrateError::Refused(ref why) if why.contains("full")),
        "{err}"
    );
    let entries = w.entries();
    let won = entries.get(&winner).await.expect("winner");
    assert_eq!(won.spec.bucket_name, dst);
    let lost = entries.get(&loser).await.expect("loser");
    assert_eq!(lost.spec.bucket_name, src, "the refused entry stays");
    let a = lost.annotations();
    assert!(!a.contains_key(ANNOTATION_PHASE), "{a:?}");
    assert!(!a.contains_key(ANNOTATION_MIGRATION_TARGET), "{a:?}");
    assert!(!a.contains_key(ANNOTATION_MIGRATION_RESERVED), "{a:?}");
    assert!(
        a.get(ANNOTATION_MIGRATION_REFUSED)
            .is_some_and(|why| why.contains(&dst)),
        "{a:?}"
    );
    let everything = |prefix: String| {
        let (store, dst) = (store.clone(), dst.clone());
        async move {
            granary_providers::list_all(store.as_ref(), &dst, &prefix, None)
                .await
                .expect("list")
                .len()
        }
    };
    assert_eq!(
        everything(format!("{loser}/")).await,
        0,
        "nothing of the refused entry in the destination, not even its manifest"
    );
    assert_eq!(
        everything(format!("{winner}/")).await,
        21,
        "the winner's 20 objects and its manifest"
    );
    // The garden's count of the destination settles on the one entry it holds, beside
    // the limit it enforces.
    poll_until("destination count 1 of at most 1", || async {
        let b = w.land.buckets().get(&dst).await.expect("bucket");
        b.status
            .is_some_and(|s| s.entry_count == Some(1) && s.entry_limit == Some(1))
    })
    .await;
    // A dry run into the full destination is refused as the real run was, with the
    // garden's limit (this process is given none).
    let dry = EntryMigration {
        name: loser.clone(),
        dry_run: true,
        ..w.request(&dst)
    };
    let err = migrate_entry(&ctx, &dry)
        .await
        .expect_err("a full destination");
    assert!(
        matches!(err, MigrateError::Quota(ref why) if why.contains("is full") && why.contains("at most 1")),
        "{err}"
    );
}

/// Etcd etcd-main with 3 ready replicas in the world's shoot namespace, and etcd-druid
/// played for it (each step taking 30 ms).
async fn start_druid(w: &World) -> EtcdSim {
    EtcdSim::start_druid(
        w.land.seed.clone(),
        &w.sim.namespace,
        3,
        Duration::from_millis(30),
    )
    .await
}

/// etcd-main driven by etcd-druid (its `Etcd` CRD is in the seed): the cut-over scales
/// the `Etcd` resource — with the reconcile annotation Druid acts on — rather than the
/// StatefulSet Druid owns, and points the resource's backup store at the destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_druid_etcd_is_scaled_through_its_resource_and_its_backup_store_switched() {
    let Some(w) = world(Backend::Local).await else {
        return;
    };
    let (store, src, dst) = w.src_and_dst().await;
    fill(store.as_ref(), &src, &format!("{}/", w.entry), 30, "d").await;
    let druid = start_druid(&w).await;
    let statefulset = (w.sim.state().await, w.sim.transitions());

    let report = migrate_entry(&w.ctx(4), &w.request(&dst))
        .await
        .expect("migration succeeds");
    assert_eq!(report.phase, "Done");
    assert!(report.downtime_seconds.is_some());
    druid.wait_ready(3).await;
    assert_eq!(
        druid.transitions(),
        3,
        "the first status, then scaled down and up once each through the Etcd resource"
    );
    let etcd = druid.etcd().await;
    assert_eq!(
        etcd.data.pointer("/spec/backup/store"),
        Some(&json!({
            "container": dst,
            "prefix": format!("{}/etcd-main", w.entry),
            "provider": "Local",
        }))
    );
    assert!(
        etcd.metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key("gardener.cloud/operation")),
        "Druid took the reconcile request"
    );
    assert_eq!(
        (w.sim.state().await, w.sim.transitions()),
        statefulset,
        "the StatefulSet Druid owns is not scaled directly"
    );
    assert_eq!(etcd_secret_bucket(&w).await.as_deref(), Some(dst.as_str()));
    assert_eq!(w.entry_obj().await.spec.bucket_name, dst);
    assert_eq!(
        listing(store.as_ref(), &dst, &format!("{}/", w.entry))
            .await
            .len(),
        30
    );
}

/// A Druid that never takes the reconcile request (not running): the cut-over stops at
/// its first request with an error naming the pending operation, switches nothing, and
/// the backup store and the entry stay on the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_druid_that_does_not_take_the_request_stops_the_cut_over_before_anything_switches() {
    let Some(w) = world(Backend::Local).await else {
        return;
    };
    let (store, src, dst) = w.src_and_dst().await;
    fill(store.as_ref(), &src, &format!("{}/", w.entry), 5, "n").await;
    // Etcd etcd-main exists, ready, and then nobody plays Druid any more.
    let druid = start_druid(&w).await;
    druid.stop();
    let mut ctx = w.ctx(4);
    ctx.etcd_timeout = Duration::from_secs(2);

    let err = migrate_entry(&ctx, &w.request(&dst))
        .await
        .expect_err("nobody takes the request");
    let message = err.to_string();
    assert!(
        message.contains(
            "etcd-druid did not take the gardener.cloud/operation=reconcile request on etcd-main"
        ),
        "{message}"
    );
    let etcd = druid.etcd().await;
    assert_eq!(
        etcd.data.pointer("/spec/backup/store/container"),
        Some(&json!("old")),
        "the backup store is not switched"
    );
    assert_eq!(
        etcd.data.pointer("/spec/replicas"),
        Some(&json!(3)),
        "the scale-back request restores the replicas"
    );
    assert_eq!(w.entry_obj().await.spec.bucket_name, src);
    assert_eq!(
        listing(store.as_ref(), &src, &format!("{}/", w.entry))
            .await
            .len(),
        5
    );
}

/// After a (lazy) move, with a seed running: the source entry waits out the deletion
/// grace period with the old objects untouched, then the seed removes them — and only
/// them: the moved entry's objects in the destination and a neighbour's objects in the
/// source bucket stay, and the moved entry is healthy on the destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_seed_removes_the_source_after_the_grace_period_and_nothing_else() {
    const GRACE: Duration = Duration::from_secs(5);
    let Some(w) = world(Backend::Local).await else {
        return;
    };
    // The seed is registered and live, so the garden keeps the buckets on it.
    granary_test_support::garden::create_seed(&w.land.cluster, SEED, "local", "us-east-1", None)
        .await;
    let mut config = w.land.config(SEED);
    config.controllers.backup_entry.deletion_grace_period = Some(ConfigDuration(GRACE));
    let _agent = w.land.start_agent(None, config).await;

    let (_, src, dst) = w.src_and_dst().await;
    let neighbour = w.land.entry_name("nb").0;
    w.land
        .create_entry(&w.namespace, &neighbour, &src, SEED, &[])
        .await;
    w.land.wait_entry_ready(&w.namespace, &w.entry).await;
    w.land.wait_entry_ready(&w.namespace, &neighbour).await;
    let moved_prefix = format!("{}/", w.entry);
    let neighbour_prefix = format!("{neighbour}/");
    w.land.fill(&src, &w.entry, 40).await;
    w.land.fill(&src, &neighbour, 10).await;
    let src_before = w.land.count(&src, &moved_prefix).await;
    let neighbour_before = w.land.count(&src, &neighbour_prefix).await;

    let report = migrate_entry(&w.ctx(4), &w.request(&dst))
        .await
        .expect("migration succeeds");
    assert_eq!(report.phase, "Done");
    let source_entry = format!("source-{}", w.entry);
    let source = w
        .entries()
        .get(&source_entry)
        .await
        .expect("the source entry waits out the grace period");
    assert!(source.metadata.deletion_timestamp.is_some());
    assert_eq!(
        w.land.count(&src, &moved_prefix).await,
        src_before,
        "nothing of the source removed within the grace period"
    );

    w.land.wait_entry_gone(&w.namespace, &source_entry).await;
    assert_eq!(w.land.count(&src, &moved_prefix).await, 0, "source removed");
    assert_eq!(
        w.land.count(&src, &neighbour_prefix).await,
        neighbour_before,
        "the neighbour's objects stay"
    );
    assert_eq!(
        listing(w.land.store().await.as_ref(), &dst, &moved_prefix)
            .await
            .len(),
        40,
        "the moved objects stay in the destination"
    );
    let moved = w.land.wait_entry_ready(&w.namespace, &w.entry).await;
    assert_eq!(moved.spec.bucket_name, dst);
    assert_eq!(etcd_secret_bucket(&w).await.as_deref(), Some(dst.as_str()));
}

/// `granary migrate abandon` after a cut-over was killed with etcd down (a crash, not an
/// error: nothing scaled it back): etcd comes back on the old configuration, the copies
/// leave the destination, the garden releases the place, the entry and its source are as
/// before — and a second migration into the same bucket works. Once the entry is
/// switched, abandoning is refused with what to do instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_migration_leaves_everything_as_before() {
    let Some(w) = world_with(Backend::Local, GardenMode::Quota(Some(1))).await else {
        return;
    };
    let (store, src, dst) = w.src_and_dst().await;
    let prefix = format!("{}/", w.entry);
    fill(store.as_ref(), &src, &prefix, 25, "a").await;
    let source_before = listing(store.as_ref(), &src, &prefix).await;
    let secret_before = etcd_secret_bucket(&w).await;

    let (ok, _, _) = run_binary(&w, &dst, Some("migrate.cutover.scaled-down=1:abort")).await;
    assert!(!ok, "the run was killed in the cut-over");
    assert_eq!(w.sim.state().await.0, 0, "etcd-main left down");
    assert!(!listing(store.as_ref(), &dst, &prefix).await.is_empty());

    let abandon = |expect_ok: bool| {
        let mut cmd = migrate_command(&w);
        cmd.args(["abandon", &format!("{}/{}", w.namespace, w.entry)]);
        async move {
            let out = cmd.output().await.expect("granary migrate abandon runs");
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            );
            assert_eq!(out.status.success(), expect_ok, "{stdout}\n{stderr}");
            (stdout, stderr)
        }
    };
    let (stdout, _) = abandon(true).await;
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON report");
    assert_eq!(report["etcdRestored"], true, "{report}");
    assert!(
        report["objectsRemoved"].as_u64().unwrap_or(0) >= 25,
        "{report}"
    );

    w.sim.wait_ready(3).await;
    assert!(
        granary_providers::list_all(store.as_ref(), &dst, &prefix, None)
            .await
            .expect("list")
            .is_empty(),
        "nothing of the entry left in the destination"
    );
    assert_eq!(listing(store.as_ref(), &src, &prefix).await, source_before);
    let entry = w.entry_obj().await;
    assert_eq!(entry.spec.bucket_name, src);
    assert_eq!(
        etcd_secret_bucket(&w).await,
        secret_before,
        "etcd-backup secret as before"
    );
    for a in [ANNOTATION_PHASE, ANNOTATION_MIGRATION_TARGET] {
        assert!(!entry.annotations().contains_key(a), "{a} removed");
    }
    poll_until("the garden released the place", || async {
        let e = w.entry_obj().await;
        let b = w.land.buckets().get(&dst).await.expect("bucket");
        !e.annotations().contains_key(ANNOTATION_MIGRATION_RESERVED)
            && b.status.and_then(|s| s.entry_count) == Some(0)
    })
    .await;

    // The place is free again (quota 1): this time the run gets past the switch before
    // it is killed, and there is no way back but forward.
    let (ok, _, _) = run_binary(&w, &dst, Some("migrate.scale-up=1:abort")).await;
    assert!(!ok, "the run was killed after the switch");
    assert_eq!(w.entry_obj().await.spec.bucket_name, dst);
    let (_, stderr) = abandon(false).await;
    assert!(
        stderr.contains(&format!("already lives in bucket {dst}")),
        "{stderr}"
    );
    let report = migrate_entry(&w.ctx(4), &w.request(&dst))
        .await
        .expect("the migration finishes");
    assert_eq!(report.phase, "Done");
    w.sim.wait_ready(3).await;
    let (_, stderr) = abandon(false).await;
    assert!(stderr.contains("no migration"), "{stderr}");
}

/// A destination in another backup pool (here another CloudProfile's) is refused before
/// anything is planned or copied, saying which pools, unless `--allow-other-pool` asks
/// for it (#20: a Europe shoot's backups must not land in the America bucket unasked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_in_another_pool_is_refused_unless_asked() {
    let Some(w) = world(Backend::Local).await else {
        return;
    };
    let (store, src, dst) = w.src_and_dst().await;
    fill(store.as_ref(), &src, &format!("{}/", w.entry), 5, "a").await;
    let req = EntryMigration {
        allow_other_pool: false,
        ..w.request(&dst)
    };
    let err = migrate_entry(&w.ctx(4), &req)
        .await
        .expect_err("another pool is refused");
    let text = err.to_string();
    assert!(matches!(err, MigrateError::Invalid(_)), "{err:?}");
    assert!(text.contains("--allow-other-pool"), "{text}");
    assert!(text.contains("is in backup pool"), "{text}");
    assert_eq!(
        listing(store.as_ref(), &dst, "").await.len(),
        0,
        "nothing planned or copied into {dst}"
    );
    let entry = w.entries().get(&w.entry).await.expect("entry");
    assert_eq!(entry.spec.bucket_name, src, "the entry stays where it is");
    assert!(!entry.annotations().contains_key(ANNOTATION_PHASE));
}

/// Draining a bucket whose deletion the garden refuses: its entry moved to another
/// shard with `granary migrate`. The source entry the migration leaves in the
/// terminating bucket is provisioned and deleted like any other (its prefix removed
/// after the grace period, its finalizer released), and then the bucket goes, at the
/// provider too: nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_bucket_drained_with_migrate_is_deleted_with_nothing_left() {
    const GRACE: Duration = Duration::from_secs(3);
    let Some(w) = world(Backend::Local).await else {
        return;
    };
    granary_test_support::garden::create_seed(&w.land.cluster, SEED, "local", "us-east-1", None)
        .await;
    let mut config = w.land.config(SEED);
    config.controllers.backup_entry.deletion_grace_period = Some(ConfigDuration(GRACE));
    let _agent = w.land.start_agent(None, config).await;
    let (store, src, dst) = w.src_and_dst().await;
    w.land.wait_entry_ready(&w.namespace, &w.entry).await;
    w.land.fill(&src, &w.entry, 20).await;

    // The admin deletes the bucket: refused while entries reference it.
    let buckets: kube::Api<granary_api::core::BackupBucket> = kube::Api::all(w.land.garden.clone());
    buckets
        .delete(&src, &Default::default())
        .await
        .expect("deletion requested");
    poll_until("the deletion is refused", || async {
        buckets.get_opt(&src).await.ok().flatten().is_some_and(|b| {
            b.metadata.deletion_timestamp.is_some()
                && b.status
                    .and_then(|s| s.last_error)
                    .is_some_and(|e| e.description.starts_with("deletion refused"))
        })
    })
    .await;
    // So the admin drains it.
    let report = migrate_entry(&w.ctx(4), &w.request(&dst))
        .await
        .expect("the migration succeeds");
    assert_eq!(report.phase, "Done");
    // The source entry waits out the grace period, then goes with its prefix.
    w.land
        .wait_entry_gone(&w.namespace, &format!("source-{}", w.entry))
        .await;
    let moved = w.land.wait_entry_ready(&w.namespace, &w.entry).await;
    assert_eq!(moved.spec.bucket_name, dst);
    poll_until("the drained bucket is deleted", || async {
        buckets.get_opt(&src).await.ok().flatten().is_none()
    })
    .await;
    assert!(
        granary_providers::list_all(store.as_ref(), &src, "", None)
            .await
            .map_or(true, |objects| objects.is_empty()),
        "nothing left in the drained bucket"
    );
    assert_eq!(
        listing(store.as_ref(), &dst, &format!("{}/", w.entry))
            .await
            .len(),
        20,
        "the moved objects are in the destination"
    );
}
