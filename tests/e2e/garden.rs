//! `granary garden` end to end on the embedded garden: CRDs installed from
//! `deploy/garden/crds` as a user would, the garden controllers started in-process, and
//! the test playing the seeds (liveness Leases, finalizers, status). Pools, validation,
//! assignment and hand-over, deletion guards and conditions; placement lives in
//! `garden_placement.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use granary_api::common::{ConditionStatus, ObjectReference};
use granary_api::core::{
    BackupBucket, BackupEntry, BackupSpec, CONDITION_BACKUP_BUCKETS_READY,
    CONDITION_BACKUP_CONFIGURATION_VALID, CloudProfile, CloudProfileReference, CloudProfileSpec,
    FINALIZER_GARDEN_BUCKET_GUARD, LABEL_POOL_KIND, LABEL_REGION, LABEL_SEED, LABEL_SHARD, Seed,
    SeedProvider, SeedSpec, Shoot, ShootSpec,
};
use granary_garden::config::{GardenConfiguration, ProviderQuota};
use granary_garden::{GardenController, RunningGarden};
use granary_runtime::config::ConfigDuration;
use granary_runtime::selector::ObjectSelector;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::support::{TestCluster, poll_until};

/// A garden for one test: CRDs installed, the `garden` namespace present.
pub async fn garden_cluster() -> TestCluster {
    let tc = TestCluster::start().await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/garden/crds");
    tc.install_crds_from_dir(&tc.client(), &dir).await;
    let ns: Api<Namespace> = Api::all(tc.client());
    let mut garden = Namespace::default();
    garden.metadata.name = Some("garden".into());
    match ns.create(&PostParams::default(), &garden).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("garden namespace: {e}"),
    }
    tc
}

/// A test configuration: no leader election, the given quota for `aws`, seeds ready for
/// an hour after one renewal unless `liveness` says otherwise.
pub fn config(quota: Option<u32>, liveness: Option<(u64, u64)>) -> GardenConfiguration {
    let mut c = GardenConfiguration::default();
    c.leader_election.enabled = false;
    c.controllers.backup_entry.concurrent_syncs = 8;
    if let Some(limit) = quota {
        c.controllers.backup_bucket.quota = vec![ProviderQuota {
            provider: "aws".into(),
            limit,
        }];
    }
    let (ready_ms, hand_over_ms) = liveness.unwrap_or((3_600_000, 300_000));
    c.seed_liveness.ready_within = ConfigDuration(Duration::from_millis(ready_ms));
    c.controllers.backup_bucket.seed_hand_over_after =
        ConfigDuration(Duration::from_millis(hand_over_ms));
    c
}

pub fn start(tc: &TestCluster, config: GardenConfiguration) -> RunningGarden {
    // RUST_LOG=granary=debug shows what the controllers do.
    // Granary's own setup, so that test logs keep response bodies out as well.
    let _ = granary_runtime::logging::init_with(
        granary_runtime::logging::LogFormat::Text,
        "error",
        false,
        tracing_subscriber::fmt::TestWriter::new(),
    );
    GardenController::new(tc.client(), config)
        .object_selector(ObjectSelector::new(Some(tc.object_selector.clone())))
        .start()
        .expect("garden metrics register")
}

fn labels(tc: &TestCluster) -> BTreeMap<String, String> {
    BTreeMap::from([tc.instance_label()])
}

fn secret_ref(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: "v1".into(),
        kind: "Secret".into(),
        name: name.into(),
        namespace: "garden".into(),
        ..ObjectReference::default()
    }
}

/// `spec.backup` with a credentials Secret.
pub fn backup(provider: &str, region: Option<&str>, secret: &str) -> BackupSpec {
    BackupSpec {
        provider: provider.into(),
        region: region.map(Into::into),
        credentials_ref: Some(secret_ref(secret)),
        ..BackupSpec::default()
    }
}

pub async fn create_profile(
    tc: &TestCluster,
    name: &str,
    type_: &str,
    backup: Option<BackupSpec>,
) -> CloudProfile {
    let mut p = CloudProfile::new(
        name,
        CloudProfileSpec {
            type_: type_.into(),
            backup,
            ..CloudProfileSpec::default()
        },
    );
    p.metadata.labels = Some(labels(tc));
    Api::<CloudProfile>::all(tc.client())
        .create(&PostParams::default(), &p)
        .await
        .expect("profile is created")
}

pub async fn create_seed(
    tc: &TestCluster,
    name: &str,
    type_: &str,
    region: &str,
    backup: Option<BackupSpec>,
) -> Seed {
    let mut s = Seed::new(
        name,
        SeedSpec {
            provider: SeedProvider {
                type_: type_.into(),
                region: region.into(),
                ..SeedProvider::default()
            },
            backup,
            ..SeedSpec::default()
        },
    );
    s.metadata.labels = Some(labels(tc));
    Api::<Seed>::all(tc.client())
        .create(&PostParams::default(), &s)
        .await
        .expect("seed is created")
}

/// Plays the seed's liveness: creates or renews Lease `seed-<name>` in `garden`.
pub async fn renew(client: &Client, instance: &(String, String), seed: &str) {
    let api: Api<Lease> = Api::namespaced(client.clone(), "garden");
    let name = format!("seed-{seed}");
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let spec = LeaseSpec {
        holder_identity: Some(seed.to_string()),
        lease_duration_seconds: Some(40),
        renew_time: Some(now),
        ..LeaseSpec::default()
    };
    match api.get_opt(&name).await.expect("lease read") {
        Some(mut lease) => {
            lease.spec = Some(spec);
            api.replace(&name, &PostParams::default(), &lease)
                .await
                .expect("lease renewed");
        }
        None => {
            let mut lease = Lease::default();
            lease.metadata.name = Some(name);
            lease.metadata.labels = Some(BTreeMap::from([instance.clone()]));
            lease.spec = Some(spec);
            api.create(&PostParams::default(), &lease)
                .await
                .expect("lease created");
        }
    }
}

pub fn shoot(tc: &TestCluster, namespace: &str, name: &str, profile: &str, seed: &str) -> Shoot {
    let mut s = Shoot::new(
        name,
        ShootSpec {
            cloud_profile: Some(CloudProfileReference {
                kind: "CloudProfile".into(),
                name: profile.into(),
                ..CloudProfileReference::default()
            }),
            seed_name: Some(seed.into()),
            region: "eu-1".into(),
            ..ShootSpec::default()
        },
    );
    s.metadata.namespace = Some(namespace.into());
    s.metadata.labels = Some(labels(tc));
    s
}

pub async fn create_shoot(
    tc: &TestCluster,
    namespace: &str,
    name: &str,
    profile: &str,
    seed: &str,
) -> Shoot {
    Api::<Shoot>::namespaced(tc.client(), namespace)
        .create(
            &PostParams::default(),
            &shoot(tc, namespace, name, profile, seed),
        )
        .await
        .expect("shoot is created")
}

pub fn selector(tc: &TestCluster) -> ListParams {
    ListParams::default().labels(&format!("{}={}", tc.instance_label().0, tc.object_selector))
}

pub async fn buckets(tc: &TestCluster) -> Vec<BackupBucket> {
    Api::<BackupBucket>::all(tc.client())
        .list(&selector(tc))
        .await
        .expect("buckets listed")
        .items
}

pub async fn entries(tc: &TestCluster) -> Vec<BackupEntry> {
    Api::<BackupEntry>::all(tc.client())
        .list(&selector(tc))
        .await
        .expect("entries listed")
        .items
}

pub async fn bucket(tc: &TestCluster, name: &str) -> Option<BackupBucket> {
    Api::<BackupBucket>::all(tc.client())
        .get_opt(name)
        .await
        .expect("bucket read")
}

/// Events about `name` (any namespace), as (type, reason, note).
pub async fn events_about(client: &Client, name: &str) -> Vec<(String, String, String)> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .expect("events listed")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

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
    // Fixing the profile creates the pool.
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

/// The test playing two seeds' liveness: each renews its Lease while its flag is set.
pub struct Heartbeats {
    alive: std::sync::Arc<[std::sync::atomic::AtomicBool; 2]>,
    task: tokio::task::JoinHandle<()>,
}

impl Heartbeats {
    pub fn start(tc: &TestCluster, names: [String; 2]) -> Heartbeats {
        use std::sync::atomic::{AtomicBool, Ordering};
        let alive = std::sync::Arc::new([AtomicBool::new(true), AtomicBool::new(true)]);
        let (client, inst, flags) = (tc.client(), tc.instance_label(), alive.clone());
        let task = tokio::spawn(async move {
            loop {
                for (i, name) in names.iter().enumerate() {
                    if flags[i].load(Ordering::SeqCst) {
                        renew(&client, &inst, name).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        Heartbeats { alive, task }
    }

    pub fn silence(&self, i: usize) {
        self.alive[i].store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Two renewing seeds in one region and a profile whose first bucket went to one of them:
/// the heartbeats, the seeds' names, the profile and the bucket's seed.
pub async fn two_live_seeds_and_an_assigned_bucket(
    tc: &TestCluster,
) -> (Heartbeats, [String; 2], String, String) {
    let (profile, a, b) = (tc.name("aws"), tc.name("sa"), tc.name("sb"));
    let heartbeats = Heartbeats::start(tc, [a.clone(), b.clone()]);
    create_seed(tc, &a, "aws", "eu-1", None).await;
    create_seed(tc, &b, "aws", "eu-1", None).await;
    create_profile(tc, &profile, "aws", Some(backup("aws", None, "backup"))).await;
    poll_until("bucket assigned", || async {
        buckets(tc)
            .await
            .first()
            .is_some_and(|x| x.spec.seed_name.is_some())
    })
    .await;
    let holder = buckets(tc).await[0]
        .spec
        .seed_name
        .clone()
        .expect("assigned");
    (heartbeats, [a, b], profile, holder)
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
