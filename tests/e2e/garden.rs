//! `granary garden` end to end on the embedded garden: CRDs installed from
//! `deploy/garden/crds` as a user would, the garden controllers started in-process, and
//! the test playing the seeds (liveness Leases, finalizers, status). Pools, validation,
//! assignment and hand-over, deletion guards and conditions; placement lives in
//! `garden_placement.rs`.

use granary_api::common::ConditionStatus;
use granary_api::core::{
    BackupBucket, BackupEntry, CONDITION_BACKUP_BUCKETS_READY,
    CONDITION_BACKUP_CONFIGURATION_VALID, CloudProfile, FINALIZER_GARDEN_BUCKET_GUARD,
    LABEL_POOL_KIND, LABEL_REGION, LABEL_SEED, LABEL_SHARD, Seed, Shoot,
};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use granary_test_support::garden::*;
use granary_test_support::poll_until;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_appear_per_region_follow_credentials_and_survive_owner_deletion() {
    let tc = garden_cluster().await;
    let client = tc.client();
    let inst = tc.instance_label();
    let profile = tc.name("aws");
    let (eu, us) = (tc.name("s-eu"), tc.name("s-us"));
    create_profile(&tc, &profile, "aws", Some(backup("", None, "backup-a"))).await;
    renew(&client, &inst, &eu).await;
    create_seed(&tc, &eu, "aws", "eu-1", None).await;
    let garden = start(&tc, config(None, None));

    // The first seed's region gets a pool with shard 0, provisioned by that seed.
    poll_until("eu-1 bucket provisioned by the eu seed", || async {
        let all = buckets(&tc).await;
        all.len() == 1 && all[0].labels().get(LABEL_SEED) == Some(&eu)
    })
    .await;
    let first = buckets(&tc).await.remove(0);
    let l = first.labels();
    assert_eq!(l.get(LABEL_REGION).map(String::as_str), Some("eu-1"));
    assert_eq!(l.get(LABEL_SHARD).map(String::as_str), Some("0"));
    assert_eq!(
        l.get(LABEL_POOL_KIND).map(String::as_str),
        Some("cloudprofile")
    );
    assert_eq!(l.get(LABEL_SEED), Some(&eu));
    assert!(first.metadata.owner_references.is_none());
    assert_eq!(first.spec.provider.type_, "aws");
    assert_eq!(first.spec.seed_name.as_ref(), Some(&eu));
    assert_eq!(
        first.spec.credentials_ref.as_ref().map(|c| c.name.as_str()),
        Some("backup-a")
    );
    assert!(
        first
            .finalizers()
            .iter()
            .any(|f| f == FINALIZER_GARDEN_BUCKET_GUARD)
    );

    // A second region appears when its first seed registers.
    renew(&client, &inst, &us).await;
    create_seed(&tc, &us, "aws", "us-1", None).await;
    // (Usually provisioned by the us seed, same region first; the eu seed is as valid
    // when the controller saw the us seed before its Lease.)
    poll_until("us-1 bucket", || async {
        buckets(&tc).await.iter().any(|b| {
            b.labels().get(LABEL_REGION).map(String::as_str) == Some("us-1")
                && b.spec.seed_name.is_some()
                && b.labels().get(LABEL_SEED) == b.spec.seed_name.as_ref()
        })
    })
    .await;

    // Credentials flow into every bucket of the profile.
    Api::<CloudProfile>::all(client.clone())
        .patch(
            &profile,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"backup": {"credentialsRef": {"name": "backup-b"}}}})),
        )
        .await
        .expect("profile patched");
    poll_until("credentials rotated", || async {
        buckets(&tc)
            .await
            .iter()
            .all(|b| b.spec.credentials_ref.as_ref().map(|c| c.name.as_str()) == Some("backup-b"))
    })
    .await;

    // BackupBucketsReady: True while fine, False naming a failing bucket.
    let ready = |seed: String, status: ConditionStatus, text: &'static str| {
        let client = client.clone();
        async move {
            let s = Api::<Seed>::all(client).get(&seed).await.expect("seed");
            s.condition(CONDITION_BACKUP_BUCKETS_READY)
                .is_some_and(|c| c.status == status && c.message.contains(text))
        }
    };
    poll_until("BackupBucketsReady True", || {
        ready(eu.clone(), ConditionStatus::True, "")
    })
    .await;
    Api::<BackupBucket>::all(client.clone())
        .patch_status(
            &first.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"lastError": {"description": "access denied"}}})),
        )
        .await
        .expect("seed reports an error");
    poll_until("BackupBucketsReady False", || {
        ready(eu.clone(), ConditionStatus::False, "access denied")
    })
    .await;

    // Deleting the us seed hands its bucket to the eu seed; no bucket is deleted.
    Api::<Seed>::all(client.clone())
        .delete(&us, &DeleteParams::default())
        .await
        .expect("seed deleted");
    poll_until("us bucket handed to eu seed", || async {
        buckets(&tc).await.iter().any(|b| {
            b.labels().get(LABEL_REGION).map(String::as_str) == Some("us-1")
                && b.spec.seed_name.as_ref() == Some(&eu)
                && b.labels().get(LABEL_SEED) == Some(&eu)
        })
    })
    .await;
    poll_until(
        "the us seed is gone once its bucket is handed over",
        || async {
            Api::<Seed>::all(client.clone())
                .get_opt(&us)
                .await
                .expect("seed read")
                .is_none()
        },
    )
    .await;
    // Deleting the profile and then the last seed deletes no bucket either: the buckets
    // say they have no seed left, and the seed (whose deletion waits for its buckets, the
    // guard of #20) says it still has them.
    Api::<CloudProfile>::all(client.clone())
        .delete(&profile, &DeleteParams::default())
        .await
        .expect("profile deleted");
    Api::<Seed>::all(client.clone())
        .delete(&eu, &DeleteParams::default())
        .await
        .expect("seed deleted");
    poll_until("buckets say why they are stuck", || async {
        let all = buckets(&tc).await;
        all.len() == 2
            && all.iter().all(|b| {
                b.status
                    .as_ref()
                    .and_then(|s| s.last_error.as_ref())
                    .is_some_and(|e| {
                        e.description
                            .contains("is being deleted, and no other ready seed")
                    })
            })
    })
    .await;
    poll_until("the last seed waits for its buckets", || async {
        Api::<Seed>::all(client.clone())
            .get(&eu)
            .await
            .is_ok_and(|s| {
                s.condition(granary_garden::guards::CONDITION_DELETION_REFUSED)
                    .is_some_and(|c| c.message.contains("2 objects still use this seed"))
            })
    })
    .await;
    assert!(
        buckets(&tc)
            .await
            .iter()
            .all(|b| b.metadata.deletion_timestamp.is_none())
    );
    garden.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_provider_backup_without_region_is_rejected_with_the_field_path() {
    let tc = garden_cluster().await;
    let client = tc.client();
    let profile = tc.name("cross");
    let seed = tc.name("s");
    renew(&client, &tc.instance_label(), &seed).await;
    create_seed(&tc, &seed, "aws", "eu-1", None).await;
    create_profile(&tc, &profile, "aws", Some(backup("gcp", None, "backup"))).await;
    let garden = start(&tc, config(None, None));
    let api: Api<CloudProfile> = Api::all(client.clone());
    poll_until("condition False with the field path", || async {
        api.get(&profile)
            .await
            .ok()
            .and_then(|p| p.status)
            .is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == CONDITION_BACKUP_CONFIGURATION_VALID
                        && c.status == ConditionStatus::False
                        && c.message.contains("spec.backup.region")
                })
            })
    })
    .await;
    poll_until("warning event", || async {
        events_about(&client, &profile)
            .await
            .iter()
            .any(|(t, _, note)| t == "Warning" && note.contains("spec.backup.region"))
    })
    .await;
    // A shoot of that profile gets no entry, and says why.
    let ns = tc.namespace("garden-p").await;
    create_shoot(&tc, &ns, "web", &profile, &seed).await;
    poll_until("shoot event", || async {
        events_about(&client, "web")
            .await
            .iter()
            .any(|(_, reason, _)| reason == "BackupEntryPending")
    })
    .await;
    assert!(
        buckets(&tc).await.is_empty(),
        "no bucket for an invalid profile"
    );
    assert!(entries(&tc).await.is_empty());
    // Fixing the profile creates the pool, and wakes the waiting shoot at once.
    let fixed_at = chrono::Utc::now();
    api.patch(
        &profile,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"backup": {"region": "europe-west1"}}})),
    )
    .await
    .expect("profile fixed");
    poll_until("bucket in the backup region", || async {
        buckets(&tc)
            .await
            .iter()
            .any(|b| b.spec.provider.region == "europe-west1" && b.spec.provider.type_ == "gcp")
    })
    .await;
    poll_until("the waiting shoot's entry", || async {
        !entries(&tc).await.is_empty()
    })
    .await;
    // Not at the shoot's next retry (30 s after its try just before the fix): the
    // profile's change is what placed it. (Timestamps are whole seconds; the bound is
    // far from both.)
    let created = granary_runtime::clock::from_k8s(
        entries(&tc).await[0]
            .metadata
            .creation_timestamp
            .clone()
            .expect("created")
            .0,
    );
    assert!(
        created - fixed_at < chrono::Duration::seconds(20),
        "the entry came {}s after the fix",
        (created - fixed_at).num_seconds()
    );
    garden.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_with_entries_refuses_deletion_until_they_are_gone() {
    let tc = garden_cluster().await;
    let client = tc.client();
    let (profile, seed) = (tc.name("aws"), tc.name("s"));
    renew(&client, &tc.instance_label(), &seed).await;
    create_seed(&tc, &seed, "aws", "eu-1", None).await;
    create_profile(&tc, &profile, "aws", Some(backup("aws", None, "backup"))).await;
    let garden = start(&tc, config(Some(10), None));
    let ns = tc.namespace("garden-d").await;
    create_shoot(&tc, &ns, "web", &profile, &seed).await;
    poll_until("entry placed", || async { entries(&tc).await.len() == 1 }).await;
    let entry = entries(&tc).await.remove(0);
    assert_eq!(entry.labels().get(LABEL_SEED), Some(&seed));
    let name = entry.spec.bucket_name.clone();
    let old_uid = bucket(&tc, &name).await.and_then(|b| b.uid());

    let api: Api<BackupBucket> = Api::all(client.clone());
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete requested");
    poll_until("refusal in status", || async {
        bucket(&tc, &name).await.is_some_and(|b| {
            b.status
                .and_then(|s| s.last_error)
                .is_some_and(|e| e.description.contains("1 BackupEntry still references"))
        })
    })
    .await;
    poll_until("refusal event", || async {
        events_about(&client, &name)
            .await
            .iter()
            .any(|(t, reason, _)| t == "Warning" && reason == "DeletionRefused")
    })
    .await;
    assert!(bucket(&tc, &name).await.is_some());
    // The shoot goes; garbage collection removes its entry; the bucket follows (and,
    // as the profile's pool still needs a first shard, a new one takes its place).
    Api::<Shoot>::namespaced(client.clone(), &ns)
        .delete("web", &DeleteParams::default())
        .await
        .expect("shoot deleted");
    poll_until("bucket deleted", || async {
        bucket(&tc, &name).await.and_then(|b| b.uid()) != old_uid
    })
    .await;
    garden.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_whose_seed_stops_renewing_is_handed_to_another_seed() {
    let tc = garden_cluster().await;
    // Ready within 1.5 s of a renewal; handed over after 1 s unready.
    let garden = start(&tc, config(None, Some((1500, 1000))));
    let (heartbeats, [a, b], _, holder) = two_live_seeds_and_an_assigned_bucket(&tc).await;
    let (silent, other) = if holder == a {
        (0, b.clone())
    } else {
        (1, a.clone())
    };
    // The holder goes silent; the other seed keeps renewing.
    heartbeats.silence(silent);
    poll_until("bucket handed over to the other seed", || async {
        buckets(&tc).await.first().is_some_and(|x| {
            x.spec.seed_name.as_ref() == Some(&other) && x.labels().get(LABEL_SEED) == Some(&other)
        })
    })
    .await;
    // The silent seed is lost; renewing again, it is not, at once (well before the
    // controllers' 5-minute resync: its Lease wakes it).
    let lost = |status: &'static str| {
        let (client, name) = (tc.client(), holder.clone());
        async move {
            Api::<granary_api::core::Seed>::all(client)
                .get(&name)
                .await
                .is_ok_and(|s| {
                    s.status.is_some_and(|st| {
                        st.conditions.iter().any(|c| {
                            c.type_ == granary_api::core::CONDITION_SEED_LOST
                                && c.status.as_str() == status
                        })
                    })
                })
        }
    };
    poll_until("the silent seed marked lost", || lost("True")).await;
    heartbeats.resume(silent);
    poll_until("the seed back to life is no longer lost", || lost("False")).await;
    drop(heartbeats);
    garden.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_entry_whose_seed_is_silent_is_cleaned_up_by_its_buckets_seed() {
    let tc = garden_cluster().await;
    let client = tc.client();
    let garden = start(&tc, config(None, Some((1500, 1000))));
    let (heartbeats, [a, b], profile, holder) = two_live_seeds_and_an_assigned_bucket(&tc).await;
    let (shoot_seed, silent) = if holder == a {
        (b.clone(), 1)
    } else {
        (a.clone(), 0)
    };
    // The shoot (and so its entry) lives on the seed that does not hold the bucket.
    let ns = tc.namespace("garden-h").await;
    create_shoot(&tc, &ns, "web", &profile, &shoot_seed).await;
    poll_until("entry placed on the shoot's seed", || async {
        entries(&tc).await.first().is_some_and(|e| {
            e.spec.seed_name.as_ref() == Some(&shoot_seed)
                && e.labels().get(LABEL_SEED) == Some(&shoot_seed)
        })
    })
    .await;
    let name = entries(&tc).await[0].name_any();
    let api: Api<BackupEntry> = Api::namespaced(client.clone(), &ns);
    // The test plays the entry's seed: its finalizer keeps the entry while it cleans up.
    let keep = json!({ "metadata": { "finalizers": ["test.granary/cleanup"] } });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&keep))
        .await
        .expect("finalizer added");
    // A young entry stays with its live seed while it is deleted ...
    Api::<Shoot>::namespaced(client.clone(), &ns)
        .delete("web", &DeleteParams::default())
        .await
        .expect("shoot deleted");
    poll_until("entry being deleted", || async {
        api.get(&name)
            .await
            .is_ok_and(|e| e.metadata.deletion_timestamp.is_some())
    })
    .await;
    assert_eq!(
        api.get(&name).await.expect("entry").spec.seed_name,
        Some(shoot_seed.clone())
    );
    // ... and goes to the bucket's seed once its own has been silent too long.
    heartbeats.silence(silent);
    poll_until("entry handed to the bucket's seed", || async {
        api.get(&name).await.is_ok_and(|e| {
            e.spec.seed_name.as_ref() == Some(&holder)
                && e.labels().get(LABEL_SEED) == Some(&holder)
        })
    })
    .await;
    poll_until("hand-over event", || async {
        events_about(&client, &name)
            .await
            .iter()
            .any(|(_, reason, note)| reason == "HandedOver" && note.contains(&holder))
    })
    .await;
    let done = json!({ "metadata": { "finalizers": null } });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&done))
        .await
        .expect("finalizer removed");
    drop(heartbeats);
    garden.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_with_its_own_backup_gets_its_own_pool_for_its_shoots() {
    let tc = garden_cluster().await;
    let (profile, own, plain) = (tc.name("aws"), tc.name("own"), tc.name("plain"));
    renew(&tc.client(), &tc.instance_label(), &own).await;
    renew(&tc.client(), &tc.instance_label(), &plain).await;
    create_profile(
        &tc,
        &profile,
        "aws",
        Some(backup("aws", None, "profile-creds")),
    )
    .await;
    create_seed(
        &tc,
        &own,
        "aws",
        "eu-1",
        Some(backup("aws", Some("eu-9"), "seed-creds")),
    )
    .await;
    create_seed(&tc, &plain, "aws", "eu-1", None).await;
    let garden = start(&tc, config(Some(5), None));
    let ns = tc.namespace("garden-o").await;
    create_shoot(&tc, &ns, "on-own", &profile, &own).await;
    create_shoot(&tc, &ns, "on-plain", &profile, &plain).await;
    poll_until("both entries, the seed's own pool assigned", || async {
        entries(&tc).await.len() == 2
            && buckets(&tc).await.iter().any(|b| {
                b.labels().get(LABEL_POOL_KIND).map(String::as_str) == Some("seed")
                    && b.spec.seed_name.as_ref() == Some(&own)
            })
    })
    .await;
    let all = buckets(&tc).await;
    let seed_pool = all
        .iter()
        .find(|b| b.labels().get(LABEL_POOL_KIND).map(String::as_str) == Some("seed"))
        .expect("the seed's own pool");
    assert_eq!(seed_pool.spec.provider.region, "eu-9");
    assert_eq!(seed_pool.spec.seed_name.as_ref(), Some(&own));
    assert_eq!(
        seed_pool
            .spec
            .credentials_ref
            .as_ref()
            .map(|c| c.name.as_str()),
        Some("seed-creds")
    );
    for e in entries(&tc).await {
        let bucket = all
            .iter()
            .find(|b| b.name_any() == e.spec.bucket_name)
            .expect("entry's bucket exists");
        let kind = bucket.labels().get(LABEL_POOL_KIND).cloned();
        if e.spec.seed_name.as_ref() == Some(&own) {
            assert_eq!(kind.as_deref(), Some("seed"));
        } else {
            assert_eq!(kind.as_deref(), Some("cloudprofile"));
        }
    }
    garden.stop().await;
}

/// A shoot moved to a seed name without a Seed (possible without gardener-apiserver):
/// once its old seed has released the entry, nobody holds it, and it says so, Pending
/// with a Warning event naming the missing seed, instead of keeping the old seed's
/// Succeeded; moved to a seed that exists, the garden stops saying it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_on_a_seed_that_does_not_exist_waits_and_says_so() {
    let tc = garden_cluster().await;
    let client = tc.client();
    let garden = start(&tc, config(None, None));
    let (heartbeats, [a, b], profile, _) = two_live_seeds_and_an_assigned_bucket(&tc).await;
    let ns = tc.namespace("garden-m").await;
    create_shoot(&tc, &ns, "web", &profile, &a).await;
    poll_until("entry placed on seed a", || async {
        entries(&tc)
            .await
            .first()
            .is_some_and(|e| e.spec.seed_name.as_ref() == Some(&a))
    })
    .await;
    let name = entries(&tc).await[0].name_any();
    let api: Api<BackupEntry> = Api::namespaced(client.clone(), &ns);
    // The test plays seed a: it provisioned the entry.
    let done = |seed: Option<&str>, kind: &str, description: &str| {
        json!({"status": {"seedName": seed, "lastOperation": {
            "type": kind, "state": "Succeeded", "progress": 100,
            "description": description, "lastUpdateTime": "2026-01-01T00:00:00Z"}}})
    };
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&done(Some(&a), "Create", "created")),
    )
    .await
    .expect("status written");
    let nowhere = tc.name("nowhere");
    Api::<Shoot>::namespaced(client.clone(), &ns)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"seedName": nowhere}})),
        )
        .await
        .expect("shoot moved");
    poll_until("the entry follows the shoot", || async {
        api.get(&name)
            .await
            .is_ok_and(|e| e.spec.seed_name.as_ref() == Some(&nowhere))
    })
    .await;
    // Seed a releases it, as its mirror does.
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&done(None, "Migrate", "released by the previous seed")),
    )
    .await
    .expect("released");
    poll_until("the entry says its seed does not exist", || async {
        api.get(&name).await.is_ok_and(|e| {
            e.status.and_then(|s| s.last_operation).is_some_and(|o| {
                o.state == granary_api::common::LastOperationState::Pending
                    && o.description
                        .contains(&format!("seed {nowhere} does not exist"))
            })
        })
    })
    .await;
    poll_until("a Warning event names the missing seed", || async {
        events_about(&client, &name)
            .await
            .iter()
            .any(|(kind, reason, note)| {
                kind == "Warning" && reason == "SeedNotFound" && note.contains(&nowhere)
            })
    })
    .await;
    // Moved to a seed that exists: that seed takes it (the garden says nothing more).
    Api::<Shoot>::namespaced(client.clone(), &ns)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"seedName": b}})),
        )
        .await
        .expect("shoot moved again");
    poll_until("the entry follows the shoot to seed b", || async {
        api.get(&name)
            .await
            .is_ok_and(|e| e.spec.seed_name.as_ref() == Some(&b))
    })
    .await;
    let said = events_about(&client, &name)
        .await
        .iter()
        .filter(|(_, reason, _)| reason == "SeedNotFound")
        .count();
    assert_eq!(said, 1, "said once, not on every reconcile");
    drop(heartbeats);
    garden.stop().await;
}

/// The gauges the alert on unprotected shoots reads, computed from the garden's caches
/// at each scrape: a shoot is listed while its entry is missing or not Succeeded, and
/// the entries are counted by state. A garden that stops reports none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprotected_shoots_are_gauged_until_their_entry_succeeds() {
    let tc = garden_cluster().await;
    let client = tc.client();
    let garden = start(&tc, config(None, None));
    let (heartbeats, [a, _], profile, _) = two_live_seeds_and_an_assigned_bucket(&tc).await;
    let ns = tc.namespace("garden-h").await;
    create_shoot(&tc, &ns, "web", &profile, &a).await;
    create_shoot(&tc, &ns, "db", &profile, &a).await;
    let unprotected = |text: &str| -> Vec<String> {
        let mut shoots: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("granary_garden_shoot_unprotected{"))
            .filter(|l| l.contains(&format!("namespace=\"{ns}\"")) && l.ends_with(" 1"))
            .filter_map(|l| {
                l.split("shoot=\"")
                    .nth(1)?
                    .split('"')
                    .next()
                    .map(str::to_string)
            })
            .collect();
        shoots.sort();
        shoots
    };
    let by_state = |text: &str, state: &str| -> Option<u64> {
        let series = format!("granary_garden_backupentries{{state=\"{state}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&series)?.parse().ok())
    };
    poll_until("both shoots unprotected while no seed reported", || async {
        let text = garden.metrics().render();
        unprotected(&text) == ["db", "web"] && by_state(&text, "None") == Some(2)
    })
    .await;
    let text = garden.metrics().render();
    let web_line = text
        .lines()
        .find(|l| l.starts_with("granary_garden_shoot_unprotected{") && l.contains("shoot=\"web\""))
        .expect("web's series");
    assert!(web_line.contains(&format!("seed=\"{a}\"")), "{web_line}");
    assert!(web_line.contains("backupentry=\""), "{web_line}");

    // The test plays seed a: web's entry Succeeded, db's in Error.
    let api: Api<BackupEntry> = Api::namespaced(client.clone(), &ns);
    let report = |state: &str| {
        json!({"status": {"seedName": a, "lastOperation": {
            "type": "Create", "state": state, "progress": 100,
            "description": "reported", "lastUpdateTime": "2026-01-01T00:00:00Z"}}})
    };
    for e in entries(&tc).await {
        let state = if e.name_any().contains("--web--") {
            "Succeeded"
        } else {
            "Error"
        };
        api.patch_status(
            &e.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&report(state)),
        )
        .await
        .expect("status written");
    }
    poll_until("only db unprotected", || async {
        let text = garden.metrics().render();
        unprotected(&text) == ["db"]
            && by_state(&text, "Succeeded") == Some(1)
            && by_state(&text, "Error") == Some(1)
            && by_state(&text, "None").is_none()
    })
    .await;
    let metrics = garden.metrics().clone();
    drop(heartbeats);
    garden.stop().await;
    let text = metrics.render();
    assert!(
        unprotected(&text).is_empty(),
        "a stopped garden says nothing: {text}"
    );
}
