//! The garden side of a landscape: a [`garden_cluster`] with the garden CRDs, the
//! garden controllers started in-process ([`start`] with a test [`config`]), and the
//! test playing what the seeds do (liveness Leases, [`Heartbeats`]) around the objects
//! it creates (CloudProfiles, Seeds, Shoots).

use std::collections::BTreeMap;
use std::time::Duration;

use granary_api::common::ObjectReference;
use granary_api::core::{
    BackupBucket, BackupEntry, BackupSpec, CloudProfile, CloudProfileReference, CloudProfileSpec,
    Seed, SeedProvider, SeedSpec, Shoot, ShootSpec,
};
use granary_garden::config::{GardenConfiguration, ProviderQuota};
use granary_garden::{GardenController, RunningGarden};
use granary_runtime::config::ConfigDuration;
use granary_runtime::selector::ObjectSelector;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};

use crate::{TestCluster, poll_until};

/// A garden for one test: CRDs installed, the `garden` namespace present.
pub async fn garden_cluster() -> TestCluster {
    let tc = TestCluster::start().await;
    let dir = crate::repo_path("deploy/garden/crds");
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

    pub fn resume(&self, i: usize) {
        self.alive[i].store(true, std::sync::atomic::Ordering::SeqCst);
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
