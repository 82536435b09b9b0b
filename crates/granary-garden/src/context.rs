//! What every garden controller shares: the client, the configuration, the caches
//! (reflector stores), the placement [`Ledger`], metrics and the event recorder. One
//! [`Context`] per leadership term; nothing global.

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};

use crate::assignment::{AssignmentTimings, SeedCandidate};
use crate::config::GardenConfiguration;
use crate::ledger::Ledger;
use crate::metrics::GardenMetrics;
use granary_api::core::{BackupBucket, BackupEntry, CloudProfile, GARDEN_NAMESPACE, Seed, Shoot};
use granary_runtime::clock::{Clock, from_k8s};
use granary_runtime::failpoints::FailpointError;
use granary_runtime::metrics::Metrics;
use granary_runtime::selector::ObjectSelector;

/// Why a reconcile failed. Variant names read well as metric labels.
#[derive(Debug, thiserror::Error)]
pub enum GardenError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Failpoint(#[from] FailpointError),
    #[error("placement of {entry} kept conflicting ({attempts} attempts); retrying")]
    PlacementContention { entry: String, attempts: u32 },
    #[error("the caches stopped before they were filled")]
    CachesStopped,
    #[error("no BackupEntry can be made: {0}")]
    Entry(#[from] crate::entries::EntryProblem),
}

impl GardenError {
    /// The metric label of the error.
    pub fn kind(&self) -> &'static str {
        match self {
            GardenError::Kube(kube::Error::Api(s)) if s.code == 409 => "Conflict",
            GardenError::Kube(_) => "Kube",
            GardenError::Failpoint(_) => "Failpoint",
            GardenError::PlacementContention { .. } => "PlacementContention",
            GardenError::CachesStopped => "CachesStopped",
            GardenError::Entry(_) => "Entry",
        }
    }
}

async fn wait_for_flag(flag: &tokio::sync::watch::Receiver<bool>) -> Result<(), GardenError> {
    let mut flag = flag.clone();
    flag.wait_for(|ready| *ready)
        .await
        .map(drop)
        .map_err(|_| GardenError::CachesStopped)
}

/// The reflector stores the controllers read from. Readiness comes from flags set when
/// each reflector sees its initial list complete: kube's `Store::wait_until_ready`
/// wakes only one of several concurrent waiters, so it is not used here.
#[derive(Clone)]
pub struct Stores {
    pub profiles: Store<CloudProfile>,
    pub seeds: Store<Seed>,
    pub shoots: Store<Shoot>,
    pub buckets: Store<BackupBucket>,
    pub entries: Store<BackupEntry>,
    /// Which entries count in which bucket, from the same watch as `entries`.
    pub entry_index: Arc<crate::entry_index::EntryIndex>,
    /// Every pool's buckets in shard order, from the same watch as `buckets`.
    pub pools: Arc<crate::pool_index::PoolIndex>,
    pub leases: Store<Lease>,
    /// Set when the initial lists are complete: every store's but the shoots'.
    pub ready: Vec<tokio::sync::watch::Receiver<bool>>,
    /// Set when the shoots' initial list is complete. The shoot store fills while it is
    /// read ([`crate::informers::FirstList::AsItComes`]), so that placement
    /// needs no more than the shoot it places.
    pub shoots_ready: tokio::sync::watch::Receiver<bool>,
}

impl Stores {
    /// The Seeds and CloudProfiles as pools see them.
    pub fn pool_views(&self) -> (Vec<crate::pools::SeedView>, Vec<crate::pools::ProfileView>) {
        let seeds = self
            .seeds
            .state()
            .iter()
            .map(|s| crate::pools::SeedView::of(s))
            .collect();
        let profiles = self
            .profiles
            .state()
            .iter()
            .map(|p| crate::pools::ProfileView::of(p))
            .collect();
        (seeds, profiles)
    }

    /// The seeds that read the Velero prefixes in the buckets of pool `key`: what the
    /// `granary.gardener.cloud/velero-reader-<seed>` labels of its buckets say.
    pub fn pool_readers(&self, key: &crate::pools::PoolKey) -> std::collections::BTreeSet<String> {
        let (seeds, profiles) = self.pool_views();
        crate::pools::pool_readers(key, &seeds, &profiles)
    }

    /// Waits until every store has its initial list.
    pub async fn wait_ready(&self) -> Result<(), GardenError> {
        self.wait_ready_but_shoots().await?;
        wait_for_flag(&self.shoots_ready).await
    }

    /// Waits until every store but the shoots' has its initial list: all a reconcile
    /// needs that reads no shoot besides its own (placement, the start-up recount).
    pub async fn wait_ready_but_shoots(&self) -> Result<(), GardenError> {
        for flag in &self.ready {
            wait_for_flag(flag).await?;
        }
        Ok(())
    }

    pub fn profile(&self, name: &str) -> Option<Arc<CloudProfile>> {
        self.profiles.get(&ObjectRef::new(name))
    }

    pub fn seed(&self, name: &str) -> Option<Arc<Seed>> {
        self.seeds.get(&ObjectRef::new(name))
    }

    /// The shoot's BackupEntry as the cache shows it.
    pub fn entry_of(&self, shoot: &Shoot) -> Option<Arc<BackupEntry>> {
        let name = shoot.backup_entry_name()?;
        self.entries
            .get(&ObjectRef::new(&name).within(&shoot.namespace()?))
    }

    /// The seed as an assignment candidate, with the renew time of its Lease
    /// `seed-<name>` in the garden namespace.
    pub fn candidate(&self, seed: &Seed) -> SeedCandidate {
        let name = seed.name_any();
        let lease = self
            .leases
            .get(&ObjectRef::new(&format!("seed-{name}")).within(GARDEN_NAMESPACE));
        SeedCandidate {
            region: seed.spec.provider.region.clone(),
            created: seed
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| from_k8s(t.0))
                .unwrap_or_default(),
            last_renewal: lease.as_deref().and_then(renewed),
            deleting: seed.metadata.deletion_timestamp.is_some(),
            name,
        }
    }

    /// Names (`namespace/name`) of the entries that reference `bucket`, including those
    /// being deleted (their data is still in the bucket).
    pub fn entries_in(&self, bucket: &str) -> Vec<String> {
        let mut names: Vec<String> = self.entry_index.read(|index| {
            index
                .in_bucket(bucket)
                .map(|(ns, name)| format!("{ns}/{name}"))
                .collect()
        });
        names.sort();
        names
    }
}

/// `spec.renewTime` of a Lease; `None` if it never renewed.
pub fn renewed(lease: &Lease) -> Option<chrono::DateTime<chrono::Utc>> {
    lease
        .spec
        .as_ref()?
        .renew_time
        .as_ref()
        .map(|t| from_k8s(t.0))
}

/// Shared by every reconcile of one leadership term.
pub struct Context {
    pub client: Client,
    pub config: GardenConfiguration,
    pub selector: ObjectSelector,
    pub clock: Clock,
    pub metrics: Metrics,
    pub garden_metrics: GardenMetrics,
    pub recorder: Recorder,
    pub stores: Stores,
    pub ledger: Ledger,
    /// Set once every bucket's count has been re-derived from the entries.
    pub counts_ready: tokio::sync::watch::Receiver<bool>,
}

impl Context {
    /// The `status.entryLimit` a bucket of pool `key` records: its provider's quota
    /// (`Some(None)`: no limit); `None` for a legacy bucket, which records none.
    pub fn entry_limit(
        &self,
        key: &crate::pools::PoolKey,
        bucket: &BackupBucket,
    ) -> Option<Option<u32>> {
        (key.kind != crate::pools::PoolKind::Legacy)
            .then(|| self.config.quota_for(&bucket.spec.provider.type_))
    }

    pub fn timings(&self) -> AssignmentTimings {
        let to_chrono =
            |d: std::time::Duration| chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX);
        AssignmentTimings {
            ready_within: to_chrono(self.config.seed_liveness.ready_within.0),
            hand_over_after: to_chrono(
                self.config.controllers.backup_bucket.seed_hand_over_after.0,
            ),
        }
    }

    /// Publishes an event on `obj`; a failure to publish is logged, never fatal.
    pub async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &obj.object_ref(&())).await {
            tracing::warn!(error = %e, reason, "could not publish event");
        }
    }

    /// Waits until the start-up recount is done (placement must not run before).
    pub async fn wait_counts_ready(&self) -> Result<(), GardenError> {
        let mut rx = self.counts_ready.clone();
        rx.wait_for(|ready| *ready)
            .await
            .map(|_| ())
            .map_err(|_| GardenError::CachesStopped)
    }
}
