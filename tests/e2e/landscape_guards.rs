//! Issue #20's input guards, tried as a user would: the garden refuses a Shoot purpose
//! Gardener does not have (422 naming `spec.purpose`), and a seed creates nothing for a
//! hand-made garden BackupBucket whose name breaks the bucket-name rule (its status and
//! an event say which rule, with the field path).

use granary_api::common::LastOperationState;
use granary_api::core::Shoot;
use granary_test_support::garden::shoot;
use granary_test_support::seed::{Backend, Landscape};
use granary_test_support::{TestCluster, poll_until};
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
    use granary_api::core::{FINALIZER_GARDEN_BUCKET_GUARD, FINALIZER_GARDENER};
    use granary_test_support::http_get;
    use granary_test_support::seed::ensure_namespace;
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

/// The test plays seed `seed`: it provisioned the entry for generation 1 and says so.
async fn play_seed_done(api: &Api<granary_api::core::BackupEntry>, name: &str, seed: &str) {
    use kube::api::{Patch, PatchParams};
    let done = serde_json::json!({"status": {
        "seedName": seed,
        "observedGeneration": 1,
        "lastOperation": {"type": "Reconcile", "state": "Succeeded", "progress": 100,
            "description": "done", "lastUpdateTime": "2026-11-24T00:00:00Z"},
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&done))
        .await
        .expect("the seed reports");
}

/// A shoot on seed `on` of two live seeds, its entry provisioned there (played by the
/// test): the garden's heartbeats, the seeds, the profile and the entry's Api and name.
async fn an_entry_on_a_seed(
    tc: &TestCluster,
) -> (
    granary_test_support::garden::Heartbeats,
    [String; 2],
    String,
    Api<granary_api::core::BackupEntry>,
    String,
    String,
) {
    use granary_api::core::LABEL_SEED;
    use granary_test_support::garden::{
        create_shoot, entries, two_live_seeds_and_an_assigned_bucket,
    };
    use kube::ResourceExt;
    let (heartbeats, seeds, profile, _) = two_live_seeds_and_an_assigned_bucket(tc).await;
    let ns = tc.namespace("garden-m").await;
    create_shoot(tc, &ns, "web", &profile, &seeds[0]).await;
    poll_until("entry placed on the shoot's seed", || async {
        entries(tc).await.first().is_some_and(|e| {
            e.spec.seed_name.as_ref() == Some(&seeds[0])
                && e.labels().get(LABEL_SEED) == Some(&seeds[0])
        })
    })
    .await;
    let name = entries(tc).await[0].name_any();
    let api: Api<granary_api::core::BackupEntry> = Api::namespaced(tc.client(), &ns);
    play_seed_done(&api, &name, &seeds[0]).await;
    (heartbeats, seeds, profile, api, ns, name)
}

fn move_shoot(seed: &str) -> kube::api::Patch<serde_json::Value> {
    kube::api::Patch::Merge(serde_json::json!({"spec": {"seedName": seed}}))
}

/// #20: a shoot moves to another seed. While the old seed has not handed the entry over,
/// the entry no longer says Succeeded: `lastOperation` is Migrate/Pending saying what it
/// waits for (and an event); when the old seed stays silent past the hand-over time the
/// garden releases the entry to the new seed, as it does for buckets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_entry_says_what_it_waits_for_and_is_handed_over_when_its_seed_is_silent() {
    use granary_api::common::LastOperationType;
    use granary_api::core::LABEL_SEED;
    use granary_test_support::garden::{config, events_about, garden_cluster, start};
    use kube::ResourceExt;
    use kube::api::PatchParams;
    let tc = garden_cluster().await;
    // Ready within 1.5 s of a renewal; handed over after 1 s unready.
    let garden = start(&tc, config(None, Some((1500, 1000))));
    let (heartbeats, [a, b], _, api, ns, name) = an_entry_on_a_seed(&tc).await;
    Api::<Shoot>::namespaced(tc.client(), &ns)
        .patch("web", &PatchParams::default(), &move_shoot(&b))
        .await
        .expect("shoot moved");
    poll_until("the entry says it waits for the old seed", || async {
        api.get(&name).await.is_ok_and(|e| {
            let s = e.status.clone().unwrap_or_default();
            e.spec.seed_name.as_ref() == Some(&b)
                && s.seed_name.as_ref() == Some(&a)
                && s.last_operation.is_some_and(|o| {
                    o.type_ == LastOperationType::Migrate
                        && o.state == LastOperationState::Pending
                        && o.description
                            == format!("waiting for seed {a} to hand the entry over to seed {b}")
                })
        })
    })
    .await;
    poll_until("an event says so", || async {
        events_about(&tc.client(), &name)
            .await
            .iter()
            .any(|(_, reason, note)| reason == "HandOverPending" && note.contains(&a))
    })
    .await;
    // The old seed falls silent (its Lease is no longer renewed) and never hands over.
    heartbeats.silence(0);
    poll_until("the garden hands the entry to the new seed", || async {
        api.get(&name).await.is_ok_and(|e| {
            let s = e.status.clone().unwrap_or_default();
            s.seed_name.is_none()
                && e.labels().get(LABEL_SEED) == Some(&b)
                && s.last_operation.is_some_and(|o| {
                    o.type_ == LastOperationType::Migrate
                        && o.state == LastOperationState::Pending
                        && o.description.contains(&format!("waiting for seed {b}"))
                })
        })
    })
    .await;
    poll_until("hand-over event", || async {
        events_about(&tc.client(), &name)
            .await
            .iter()
            .any(|(_, reason, note)| reason == "HandedOver" && note.contains(&a))
    })
    .await;
    drop(heartbeats);
    garden.stop().await;
}

/// #20, the reported steps: `kubectl delete seed` on a seed that still has an entry waits
/// (the garden's finalizer; the `DeletionRefused` condition and an event name the
/// entry); then the shoot moves to the other seed: the garden releases the entry from
/// the seed being deleted at once, and the seed goes once nothing is on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_with_an_entry_waits_and_its_entry_is_handed_over() {
    use granary_api::common::ConditionStatus;
    use granary_api::core::{LABEL_SEED, Seed};
    use granary_garden::guards::CONDITION_DELETION_REFUSED;
    use granary_test_support::garden::{config, events_about, garden_cluster, start};
    use kube::ResourceExt;
    use kube::api::{DeleteParams, PatchParams};
    let tc = garden_cluster().await;
    let garden = start(&tc, config(None, Some((1500, 1000))));
    let (heartbeats, [a, b], _, api, ns, name) = an_entry_on_a_seed(&tc).await;
    let seeds: Api<Seed> = Api::all(tc.client());
    poll_until("the garden guards the seed", || async {
        seeds.get(&a).await.is_ok_and(|s| {
            s.finalizers()
                .iter()
                .any(|f| f == granary_garden::guards::FINALIZER_GARDEN_GUARD)
        })
    })
    .await;
    seeds
        .delete(&a, &DeleteParams::default())
        .await
        .expect("delete asked");
    poll_until("the seed says what it waits for", || async {
        seeds.get(&a).await.is_ok_and(|s| {
            s.metadata.deletion_timestamp.is_some()
                && s.condition(CONDITION_DELETION_REFUSED).is_some_and(|c| {
                    c.status == ConditionStatus::True
                        && c.message.contains(&format!("BackupEntry {ns}/{name}"))
                })
        })
    })
    .await;
    poll_until("an event says so", || async {
        events_about(&tc.client(), &a)
            .await
            .iter()
            .any(|(t, reason, note)| {
                t == "Warning" && reason == "StillInUse" && note.contains(&name)
            })
    })
    .await;
    Api::<Shoot>::namespaced(tc.client(), &ns)
        .patch("web", &PatchParams::default(), &move_shoot(&b))
        .await
        .expect("shoot moved");
    poll_until(
        "the entry is released from the seed being deleted",
        || async {
            api.get(&name).await.is_ok_and(|e| {
                let s = e.status.clone().unwrap_or_default();
                e.spec.seed_name.as_ref() == Some(&b)
                    && s.seed_name.is_none()
                    && e.labels().get(LABEL_SEED) == Some(&b)
                    && s.last_operation
                        .is_some_and(|o| o.description.contains("being deleted"))
            })
        },
    )
    .await;
    poll_until("the seed is gone", || async {
        seeds.get_opt(&a).await.expect("seed read").is_none()
    })
    .await;
    drop(heartbeats);
    garden.stop().await;
}

/// #20: a CloudProfile that a shoot uses is not deleted (the garden's finalizer; its
/// `DeletionRefused` condition and an event name the shoot); it goes once the shoot does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_profile_in_use_waits_for_its_shoots() {
    use granary_api::common::ConditionStatus;
    use granary_api::core::CloudProfile;
    use granary_garden::guards::CONDITION_DELETION_REFUSED;
    use granary_test_support::garden::{
        backup, config, create_profile, create_seed, create_shoot, events_about, garden_cluster,
        renew, start,
    };
    use kube::ResourceExt;
    use kube::api::DeleteParams;
    let tc = garden_cluster().await;
    let (profile, seed, unused) = (tc.name("aws"), tc.name("s"), tc.name("unused"));
    renew(&tc.client(), &tc.instance_label(), &seed).await;
    create_seed(&tc, &seed, "aws", "eu-1", None).await;
    create_profile(&tc, &profile, "aws", Some(backup("aws", None, "b"))).await;
    create_profile(&tc, &unused, "gcp", None).await;
    let garden = start(&tc, config(None, None));
    let ns = tc.namespace("garden-c").await;
    create_shoot(&tc, &ns, "web", &profile, &seed).await;
    let profiles: Api<CloudProfile> = Api::all(tc.client());
    for p in [&profile, &unused] {
        poll_until("the garden guards the profile", || async {
            profiles.get(p).await.is_ok_and(|x| {
                x.finalizers()
                    .iter()
                    .any(|f| f == granary_garden::guards::FINALIZER_GARDEN_GUARD)
            })
        })
        .await;
    }
    // A profile no shoot uses goes at once.
    profiles
        .delete(&unused, &DeleteParams::default())
        .await
        .expect("delete asked");
    poll_until("the unused profile is gone", || async {
        profiles.get_opt(&unused).await.expect("read").is_none()
    })
    .await;
    profiles
        .delete(&profile, &DeleteParams::default())
        .await
        .expect("delete asked");
    poll_until("the profile says what it waits for", || async {
        profiles.get(&profile).await.is_ok_and(|p| {
            p.metadata.deletion_timestamp.is_some()
                && p.status.as_ref().is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.type_ == CONDITION_DELETION_REFUSED
                            && c.status == ConditionStatus::True
                            && c.message.contains(&format!("Shoot {ns}/web"))
                    })
                })
        })
    })
    .await;
    poll_until("an event says so", || async {
        events_about(&tc.client(), &profile)
            .await
            .iter()
            .any(|(t, reason, note)| {
                t == "Warning" && reason == "StillInUse" && note.contains("web")
            })
    })
    .await;
    Api::<Shoot>::namespaced(tc.client(), &ns)
        .delete("web", &DeleteParams::default())
        .await
        .expect("shoot deleted");
    poll_until("the profile is gone", || async {
        profiles.get_opt(&profile).await.expect("read").is_none()
    })
    .await;
    garden.stop().await;
}

/// #20: a person relabels a shared bucket (another region, no shard): the garden keeps
/// the bucket in its pool by its own record, puts the labels back with a Warning event,
/// and the pool does not think it lost its shard (no second shard 0 is made).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relabelled_bucket_stays_in_its_pool_and_gets_its_labels_back() {
    use granary_api::core::{BackupBucket, LABEL_REGION, LABEL_SHARD};
    use granary_garden::buckets::ANNOTATION_POOL_RECORD;
    use granary_test_support::garden::{
        backup, buckets, config, create_profile, create_seed, events_about, garden_cluster, renew,
        start,
    };
    use kube::ResourceExt;
    use kube::api::{Patch, PatchParams};
    let tc = garden_cluster().await;
    let (profile, seed) = (tc.name("aws"), tc.name("s"));
    renew(&tc.client(), &tc.instance_label(), &seed).await;
    create_seed(&tc, &seed, "aws", "eu-1", None).await;
    create_profile(&tc, &profile, "aws", Some(backup("aws", None, "b"))).await;
    let garden = start(&tc, config(None, None));
    poll_until("the first shard, recorded", || async {
        buckets(&tc)
            .await
            .first()
            .is_some_and(|b| b.annotations().contains_key(ANNOTATION_POOL_RECORD))
    })
    .await;
    let name = buckets(&tc).await[0].name_any();
    let relabel =
        serde_json::json!({"metadata": {"labels": {LABEL_REGION: "us-9", LABEL_SHARD: null}}});
    Api::<BackupBucket>::all(tc.client())
        .patch(&name, &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .expect("relabelled");
    poll_until("the labels are put back", || async {
        buckets(&tc).await.iter().any(|b| {
            b.name_any() == name
                && b.labels().get(LABEL_REGION).map(String::as_str) == Some("eu-1")
                && b.labels().get(LABEL_SHARD).map(String::as_str) == Some("0")
        })
    })
    .await;
    poll_until("a Warning event says so", || async {
        events_about(&tc.client(), &name)
            .await
            .iter()
            .any(|(t, reason, note)| {
                t == "Warning" && reason == "PoolLabelsRestored" && note.contains("us-9")
            })
    })
    .await;
    assert_eq!(
        buckets(&tc).await.len(),
        1,
        "the pool kept its shard; no new one was made"
    );
    garden.stop().await;
}
