//! Issue #22's data-loss attacks, reproduced end to end against a seed agent: nothing a
//! garden user or a label edit does makes one entry's deletion destroy another entry's
//! backups.
//! - A shared bucket relabelled `pool-kind=legacy`: a force-deleted entry removes its own
//!   prefix only; the bucket and every other entry stay.
//! - A garden BackupEntry with a victim's name in another project namespace is refused
//!   (status and event) and its deletion touches nothing of the victim's.
//! - A seed object that is not the prefix's owner (a hand-made `source-` entry) may not
//!   delete the prefix: the marker names the owner.
//! - A legacy bucket is deleted whole only when the listing shows no other entry in it.

use bytes::Bytes;
use granary_api::common::{LastOperationState, SecretReference};
use granary_api::core::{
    ANNOTATION_FORCE_DELETION, FINALIZER_EXTENSIONS_BACKUPENTRY, GARDEN_NAMESPACE, LABEL_POOL_KIND,
    bucket_secret_name,
};
use granary_api::extensions::{self, BackupEntrySpec};
use granary_test_support::poll_until;
use granary_test_support::seed::{Backend, Landscape, ensure_namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

const FORCE: (&str, &str) = (ANNOTATION_FORCE_DELETION, "true");

/// Touches a garden entry so the mirror looks at it now.
async fn touch(l: &Landscape, ns: &str, name: &str, value: &str) {
    let patch = json!({"metadata": {"annotations": {"test.granary/touch": value}}});
    l.entries(ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("touch entry");
}

async fn label_bucket(l: &Landscape, bucket: &str, kind: &str) {
    let patch = json!({"metadata": {"labels": {LABEL_POOL_KIND: kind}}});
    l.buckets()
        .patch(bucket, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("label bucket");
}

fn seed_entries(l: &Landscape) -> Api<extensions::BackupEntry> {
    Api::all(l.seed.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relabelling_a_shared_bucket_legacy_never_wipes_it() {
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let seed_name = "seed-a";
    let agent = l.start_agent(None, l.config(seed_name)).await;
    let bucket = l.bucket_name("wipe");
    let project = l.cluster.name("garden-p");
    ensure_namespace(&l.garden, &project).await;
    let (e1, _) = l.entry_name("one");
    let (e2, _) = l.entry_name("two");
    l.create_bucket(&bucket, seed_name).await;
    l.create_entry(&project, &e1, &bucket, seed_name, &[FORCE])
        .await;
    l.create_entry(&project, &e2, &bucket, seed_name, &[]).await;
    l.wait_entry_ready(&project, &e1).await;
    l.wait_entry_ready(&project, &e2).await;
    l.fill(&bucket, &e1, 5).await;
    l.fill(&bucket, &e2, 5).await;
    let store = l.store().await;

    // The attack: relabel the garden bucket, wait until the label reached the seed
    // object, then force-delete one entry.
    label_bucket(&l, &bucket, "legacy").await;
    touch(&l, &project, &e1, "1").await;
    poll_until("legacy label mirrored onto the seed entry", || async {
        seed_entries(&l)
            .get_opt(&e1)
            .await
            .unwrap()
            .is_some_and(|e| e.labels().get(LABEL_POOL_KIND).map(String::as_str) == Some("legacy"))
    })
    .await;
    l.entries(&project)
        .delete(&e1, &DeleteParams::default())
        .await
        .unwrap();
    l.wait_entry_gone(&project, &e1).await;

    assert_eq!(
        l.count(&bucket, &format!("{e1}/")).await,
        0,
        "e1's own objects go"
    );
    assert_eq!(
        l.count(&bucket, &format!("{e2}/")).await,
        6,
        "e2's 5 objects and its marker stay"
    );
    let record = granary_providers::get_bytes(store.as_ref(), &bucket, ".granary/bucket.json")
        .await
        .expect("the bucket's layout is recorded when it is taken");
    assert!(
        String::from_utf8_lossy(&record).contains("\"layout\":\"shared\""),
        "{}",
        String::from_utf8_lossy(&record)
    );
    l.wait_entry_ready(&project, &e2).await;
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_named_like_another_projects_entry_touches_nothing_of_it() {
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let seed_name = "seed-a";
    let agent = l.start_agent(None, l.config(seed_name)).await;
    let bucket = l.bucket_name("twin");
    let victim_ns = l.cluster.name("garden-victim");
    let attacker_ns = l.cluster.name("garden-attacker");
    ensure_namespace(&l.garden, &victim_ns).await;
    ensure_namespace(&l.garden, &attacker_ns).await;
    let (name, _) = l.entry_name("victim");
    l.create_bucket(&bucket, seed_name).await;
    let victim = l
        .create_entry(&victim_ns, &name, &bucket, seed_name, &[])
        .await;
    l.wait_entry_ready(&victim_ns, &name).await;
    l.fill(&bucket, &name, 5).await;

    // The attacker's twin: same name, bucket and seed, force deletion.
    l.create_entry(&attacker_ns, &name, &bucket, seed_name, &[FORCE])
        .await;
    let twin = l.entries(&attacker_ns);
    poll_until("the twin is refused with the reason", || async {
        let e = twin.get(&name).await.unwrap();
        e.status
            .as_ref()
            .and_then(|s| s.last_operation.as_ref())
            .is_some_and(|o| {
                o.state == LastOperationState::Error
                    && o.description.contains(&format!("{victim_ns}/{name}"))
            })
    })
    .await;
    let ext = seed_entries(&l).get(&name).await.unwrap();
    assert_eq!(
        ext.annotations()
            .get(granary_seed::ANNOTATION_GARDEN_NAMESPACE)
            .map(String::as_str),
        Some(victim_ns.as_str()),
        "the seed object stays the victim's"
    );
    assert!(ext.meta().deletion_timestamp.is_none());

    twin.delete(&name, &DeleteParams::default()).await.unwrap();
    l.wait_entry_gone(&attacker_ns, &name).await;
    assert_eq!(
        l.count(&bucket, &format!("{name}/")).await,
        6,
        "the victim's 5 objects and its marker stay"
    );
    let ext = seed_entries(&l).get(&name).await.unwrap();
    assert!(
        ext.meta().deletion_timestamp.is_none(),
        "victim's seed object kept"
    );
    touch(&l, &victim_ns, &name, "after").await;
    let again = l.wait_entry_ready(&victim_ns, &name).await;
    assert_eq!(again.meta().uid, victim.meta().uid);
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_prefix_owner_or_its_own_migration_source_deletes_it() {
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let seed_name = "seed-a";
    let agent = l.start_agent(None, l.config(seed_name)).await;
    let bucket = l.bucket_name("owner");
    let project = l.cluster.name("garden-p");
    ensure_namespace(&l.garden, &project).await;
    let (name, _) = l.entry_name("owned");
    l.create_bucket(&bucket, seed_name).await;
    let garden = l
        .create_entry(&project, &name, &bucket, seed_name, &[])
        .await;
    l.wait_entry_ready(&project, &name).await;
    l.fill(&bucket, &name, 5).await;
    let store = l.store().await;
    // A seed object made by hand, named as the entry's migration source (same prefix),
    // with no garden entry behind it: its deletion is refused, nothing goes.
    let source = format!("source-{name}");
    let mut hand_made = extensions::BackupEntry::new(
        &source,
        BackupEntrySpec {
            type_: l.backend.provider().to_string(),
            region: "us-east-1".into(),
            bucket_name: bucket.clone(),
            secret_ref: SecretReference {
                name: bucket_secret_name(&bucket),
                namespace: GARDEN_NAMESPACE.into(),
            },
            provider_config: None,
            backup_bucket_provider_status: None,
            class: None,
        },
    );
    let (k, v) = l.cluster.instance_label();
    hand_made.metadata.labels = Some([(k, v)].into());
    hand_made.metadata.annotations = Some([(FORCE.0.into(), FORCE.1.into())].into());
    // With the finalizer from the start, as the mirror creates them.
    hand_made.metadata.finalizers = Some(vec![FINALIZER_EXTENSIONS_BACKUPENTRY.into()]);
    seed_entries(&l)
        .create(&PostParams::default(), &hand_made)
        .await
        .expect("create hand-made seed entry");
    seed_entries(&l)
        .delete(&source, &DeleteParams::default())
        .await
        .unwrap();
    poll_until("the hand-made entry's deletion is refused", || async {
        let e = seed_entries(&l).get(&source).await.unwrap();
        e.status
            .as_ref()
            .and_then(|s| s.last_error.as_ref())
            .is_some_and(|err| {
                err.description.contains("refusing to delete")
                    && err.description.contains(&format!("{project}/{name}"))
            })
    })
    .await;
    assert_eq!(
        l.count(&bucket, &format!("{name}/")).await,
        6,
        "nothing deleted"
    );
    // The marker names the owner: the garden entry's namespace and UID.
    let marker = granary_providers::get_bytes(
        store.as_ref(),
        &bucket,
        &format!("{name}/.granary/entry.json"),
    )
    .await
    .expect("marker");
    let marker: serde_json::Value = serde_json::from_slice(&marker).unwrap();
    assert_eq!(marker["gardenUID"], json!(garden.meta().uid));
    assert_eq!(marker["gardenNamespace"], json!(project));
    // Let it go without provider calls, as an admin would.
    let patch = json!({"metadata": {"finalizers": null}});
    seed_entries(&l)
        .patch(&source, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    // The owner's own deletion still works, marker last.
    l.entries(&project)
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    l.wait_entry_gone(&project, &name).await;
    assert_eq!(l.count(&bucket, &format!("{name}/")).await, 0);
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_bucket_is_deleted_whole_only_when_it_holds_nothing_else() {
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let seed_name = "seed-a";
    let agent = l.start_agent(None, l.config(seed_name)).await;
    let project = l.cluster.name("garden-p");
    ensure_namespace(&l.garden, &project).await;
    let store = l.store().await;

    for crowded in [true, false] {
        let bucket = l.bucket_name(if crowded { "crowded" } else { "alone" });
        let (name, _) = l.entry_name(if crowded { "c" } else { "a" });
        // Labelled legacy from the start, as `granary migrate legacy import` registers one.
        l.create_bucket_labelled(&bucket, seed_name, &[(LABEL_POOL_KIND, "legacy")])
            .await;
        l.wait_bucket_ready(&bucket).await;
        l.create_entry(&project, &name, &bucket, seed_name, &[FORCE])
            .await;
        l.wait_entry_ready(&project, &name).await;
        let record = granary_providers::get_bytes(store.as_ref(), &bucket, ".granary/bucket.json")
            .await
            .expect("record");
        assert!(String::from_utf8_lossy(&record).contains("\"layout\":\"legacy\""));
        // The legacy entry's data is the bucket root.
        store
            .put(&bucket, "v2/Full-00000001", Bytes::from_static(b"x"))
            .await
            .unwrap();
        if crowded {
            store
                .put(
                    &bucket,
                    "shoot--other--x--1/.granary/entry.json",
                    Bytes::from_static(b"{\"entry\":\"shoot--other--x--1\"}"),
                )
                .await
                .unwrap();
        }
        l.entries(&project)
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
        if crowded {
            let entries = l.entries(&project);
            poll_until("whole-bucket deletion refused", || async {
                let e = entries.get(&name).await.unwrap();
                e.status
                    .as_ref()
                    .and_then(|s| s.last_error.as_ref())
                    .is_some_and(|err| err.description.contains("shoot--other--x--1/"))
            })
            .await;
            store
                .head(&bucket, "v2/Full-00000001")
                .await
                .expect("nothing deleted");
        } else {
            l.wait_entry_gone(&project, &name).await;
            assert!(
                store.head(&bucket, ".granary/bucket.json").await.is_err(),
                "the legacy bucket is gone whole"
            );
        }
    }
    agent.shutdown().await;
}
