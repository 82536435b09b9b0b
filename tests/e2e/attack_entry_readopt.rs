//! A shoot's garden BackupEntry force-deleted (its finalizers removed, so the seed never
//! cleaned up) and recreated by the garden for the same Shoot gets a new UID, while the
//! prefix marker `<prefix>/.granary/entry.json` and the seed object still name the old
//! one. The recreated entry of the same Shoot (same owner UID) re-adopts both: it becomes
//! ready, the marker names it, the old backups stay, and an event says from which
//! entry UID it re-adopted — whether the seed saw the old entry go (its seed object
//! released first) or not (the agent down meanwhile). An entry of another Shoot under
//! the same name is still refused, naming the owner, and touches nothing.

use granary_api::common::LastOperationState;
use granary_api::core::{self, BackupEntrySpec, Shoot};
use granary_api::extensions;
use granary_garden::entries::shoot_owner_reference;
use granary_runtime::config::ConfigDuration;
use granary_seed::RunningSeed;
use granary_seed::config::SeedConfiguration;
use granary_test_support::garden::{events_about, shoot};
use granary_test_support::poll_until;
use granary_test_support::seed::{Landscape, ensure_namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use std::time::Duration;

const SEED: &str = "seed-a";

/// The seed configuration with a deletion grace period: a garden entry deleted with its
/// finalizer still on leaves the backups alone for an hour.
fn config(l: &Landscape) -> SeedConfiguration {
    let mut c = l.config(SEED);
    c.controllers.backup_entry.deletion_grace_period =
        Some(ConfigDuration(Duration::from_secs(3600)));
    c
}

async fn start(l: &Landscape) -> RunningSeed {
    l.start_agent(None, config(l)).await
}

async fn create_shoot(l: &Landscape, ns: &str, name: &str) -> Shoot {
    Api::<Shoot>::namespaced(l.garden.clone(), ns)
        .create(
            &PostParams::default(),
            &shoot(&l.cluster, ns, name, "profile", SEED),
        )
        .await
        .unwrap_or_else(|e| panic!("create shoot {ns}/{name}: {e}"))
}

/// Plays the garden controller: the entry `name` of `owner` in `ns`, owned by the
/// Shoot as the garden makes it.
async fn create_owned_entry(
    l: &Landscape,
    ns: &str,
    name: &str,
    bucket: &str,
    owner: &Shoot,
) -> core::BackupEntry {
    let mut e = core::BackupEntry::new(
        name,
        BackupEntrySpec {
            bucket_name: bucket.to_string(),
            seed_name: Some(SEED.to_string()),
            shoot_ref: None,
        },
    );
    e.metadata.namespace = Some(ns.to_string());
    e.metadata.labels = Some(l.labels(SEED));
    e.metadata.owner_references = Some(vec![shoot_owner_reference(owner).expect("shoot uid")]);
    l.entries(ns)
        .create(&PostParams::default(), &e)
        .await
        .unwrap_or_else(|e| panic!("create garden entry {ns}/{name}: {e}"))
}

/// Force-deletes the garden entry: deleted, then its finalizers removed, as an operator
/// does with a stuck entry. The grace period keeps the seed from deleting anything.
async fn force_delete(l: &Landscape, ns: &str, name: &str) {
    l.entries(ns)
        .delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete garden entry {ns}/{name}: {e}"));
    let patch = json!({"metadata": {"finalizers": null}});
    match l
        .entries(ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("remove the finalizers of {ns}/{name}: {e}"),
    }
    l.wait_entry_gone(ns, name).await;
}

fn seed_entries(l: &Landscape) -> Api<extensions::BackupEntry> {
    Api::all(l.seed.clone())
}

/// The last operation of the garden entry: (state, description).
async fn last_operation(
    l: &Landscape,
    ns: &str,
    name: &str,
) -> Option<(LastOperationState, String)> {
    let e = l.entries(ns).get(name).await.expect("get entry");
    e.status
        .and_then(|s| s.last_operation)
        .map(|o| (o.state, o.description))
}

/// Waits until the garden entry is ready; an ownership refusal fails at once, with it.
async fn wait_readopted(l: &Landscape, ns: &str, name: &str) -> core::BackupEntry {
    poll_until(&format!("recreated entry {ns}/{name} ready"), || async {
        let e = l.entries(ns).get(name).await.expect("get entry");
        let status = e.status.clone().unwrap_or_default();
        let Some(op) = status.last_operation else {
            return false;
        };
        if op.state == LastOperationState::Error && op.description.contains("belongs to") {
            panic!(
                "the recreated entry {ns}/{name} of the same shoot is refused: {}",
                op.description
            );
        }
        op.state == LastOperationState::Succeeded
            && status.observed_generation == e.metadata.generation
            && status.last_error.is_none()
    })
    .await;
    l.entries(ns).get(name).await.expect("get entry")
}

async fn marker(l: &Landscape, bucket: &str, name: &str) -> serde_json::Value {
    let store = l.store().await;
    let key = format!("{name}/.granary/entry.json");
    let bytes = granary_providers::get_bytes(store.as_ref(), bucket, &key)
        .await
        .unwrap_or_else(|e| panic!("marker {bucket}/{key}: {e}"));
    serde_json::from_slice(&bytes).expect("marker json")
}

/// Waits for the seed's event saying `name` re-adopted its prefix from `old_uid`.
async fn wait_readopt_event(l: &Landscape, name: &str, old_uid: &str) {
    poll_until(&format!("re-adoption event of {name}"), || async {
        events_about(&l.seed, name)
            .await
            .iter()
            .any(|(_, reason, note)| reason == "PrefixReadopted" && note.contains(old_uid))
    })
    .await;
}

struct Placed {
    ns: String,
    bucket: String,
    name: String,
    owner: Shoot,
    first: core::BackupEntry,
}

/// A shoot and its ready entry in a new bucket, 5 objects under its prefix.
async fn placed(l: &Landscape, tag: &str) -> Placed {
    let ns = l.cluster.name("garden-p");
    ensure_namespace(&l.garden, &ns).await;
    let bucket = l.bucket_name(tag);
    l.create_bucket(&bucket, SEED).await;
    let owner = create_shoot(l, &ns, "web").await;
    let (_, technical) = l.entry_name(tag);
    let name = format!("{technical}--{}", owner.meta().uid.clone().expect("uid"));
    let first = create_owned_entry(l, &ns, &name, &bucket, &owner).await;
    l.wait_entry_ready(&ns, &name).await;
    l.fill(&bucket, &name, 5).await;
    Placed {
        ns,
        bucket,
        name,
        owner,
        first,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_deleted_entry_recreated_for_its_shoot_readopts_its_prefix() {
    let Some(l) = Landscape::start(granary_test_support::seed::Backend::Local).await else {
        return;
    };
    let agent = start(&l).await;
    let p = placed(&l, "readopt").await;
    let old_uid = p.first.uid().expect("uid");
    assert_eq!(
        marker(&l, &p.bucket, &p.name).await["gardenUID"],
        json!(old_uid)
    );

    force_delete(&l, &p.ns, &p.name).await;
    // The seed lets go of its object without provider calls; the backups stay.
    poll_until("the old seed object released", || async {
        seed_entries(&l).get_opt(&p.name).await.unwrap().is_none()
    })
    .await;
    assert_eq!(l.count(&p.bucket, &format!("{}/", p.name)).await, 6);

    // The garden recreates the entry of the same shoot: a new UID.
    let second = create_owned_entry(&l, &p.ns, &p.name, &p.bucket, &p.owner).await;
    let new_uid = second.uid().expect("uid");
    assert_ne!(new_uid, old_uid);
    wait_readopted(&l, &p.ns, &p.name).await;
    let m = marker(&l, &p.bucket, &p.name).await;
    assert_eq!(m["gardenUID"], json!(new_uid), "{m}");
    assert_eq!(m["gardenNamespace"], json!(p.ns), "{m}");
    assert_eq!(m["shootUID"], json!(p.owner.uid()), "{m}");
    assert_eq!(
        l.count(&p.bucket, &format!("{}/", p.name)).await,
        6,
        "the shoot's 5 objects and the marker stay"
    );
    wait_readopt_event(&l, &p.name, &old_uid).await;
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_recreated_while_the_seed_was_down_readopts_its_seed_object_and_prefix() {
    let Some(l) = Landscape::start(granary_test_support::seed::Backend::Local).await else {
        return;
    };
    let agent = start(&l).await;
    let p = placed(&l, "down").await;
    let old_uid = p.first.uid().expect("uid");
    // The seed sees neither the deletion nor the gap: its object still names the old
    // entry when the new one shows up.
    agent.shutdown().await;
    force_delete(&l, &p.ns, &p.name).await;
    let second = create_owned_entry(&l, &p.ns, &p.name, &p.bucket, &p.owner).await;
    let new_uid = second.uid().expect("uid");
    let agent = start(&l).await;
    wait_readopted(&l, &p.ns, &p.name).await;
    let ext = seed_entries(&l).get(&p.name).await.expect("seed object");
    assert_eq!(
        ext.annotations()
            .get(granary_seed::ANNOTATION_GARDEN_UID)
            .map(String::as_str),
        Some(new_uid.as_str()),
        "the seed object names the new entry"
    );
    let m = marker(&l, &p.bucket, &p.name).await;
    assert_eq!(m["gardenUID"], json!(new_uid), "{m}");
    assert_eq!(l.count(&p.bucket, &format!("{}/", p.name)).await, 6);
    wait_readopt_event(&l, &p.name, &old_uid).await;
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_of_another_shoot_under_the_same_name_is_still_refused() {
    let Some(l) = Landscape::start(granary_test_support::seed::Backend::Local).await else {
        return;
    };
    let agent = start(&l).await;
    let p = placed(&l, "other").await;
    let old_uid = p.first.uid().expect("uid");
    force_delete(&l, &p.ns, &p.name).await;
    poll_until("the old seed object released", || async {
        seed_entries(&l).get_opt(&p.name).await.unwrap().is_none()
    })
    .await;

    // Another shoot's entry given the victim's name (so its prefix).
    let intruder = create_shoot(&l, &p.ns, "intruder").await;
    create_owned_entry(&l, &p.ns, &p.name, &p.bucket, &intruder).await;
    poll_until("the other shoot's entry is refused", || async {
        last_operation(&l, &p.ns, &p.name)
            .await
            .is_some_and(|(state, why)| {
                state == LastOperationState::Error
                    && why.contains("belongs to BackupEntry")
                    && why.contains(&old_uid)
            })
    })
    .await;
    let m = marker(&l, &p.bucket, &p.name).await;
    assert_eq!(
        m["gardenUID"],
        json!(old_uid),
        "the marker still names the owner: {m}"
    );
    assert_eq!(
        l.count(&p.bucket, &format!("{}/", p.name)).await,
        6,
        "nothing of the owner's is touched"
    );
    assert!(
        !events_about(&l.seed, &p.name)
            .await
            .iter()
            .any(|(_, reason, _)| reason == "PrefixReadopted")
    );
    agent.shutdown().await;
}
