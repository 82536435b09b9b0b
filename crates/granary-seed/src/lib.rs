//! The seed agent (`granary seed`; docs/architecture.md#seed-agent): the garden → seed
//! [`mirror`] (the gardenlet's role), the [`extension`] controllers (the provider
//! extension's role), the seed's liveness Lease in the garden, its default Velero
//! BackupStorageLocation and the Velero-compatible controllers of
//! `granary-velero-server`, all started by [`agent`] from a
//! [`config::SeedConfiguration`]. Decisions are pure functions: [`grace`] (the deletion
//! grace period), [`prefix`] (an entry's prefix in its bucket), [`ownership`] (who owns
//! what in a bucket, from the bucket's own records), [`etcd_secret`] (the shoot's etcd
//! backup secret); the runtime's readiness and operation functions decide the rest.
//! [`metrics`] adds the seed's `granary_*` metrics.

pub mod agent;
pub mod config;
pub(crate) mod context;
pub mod etcd_secret;
pub(crate) mod extension;
pub(crate) mod failures;
pub(crate) mod feed;
pub(crate) mod garden_watch;
pub mod grace;
pub(crate) mod kube_ops;
pub mod metrics;
pub(crate) mod mirror;
pub mod ownership;
pub mod prefix;
pub(crate) mod reconnect;
pub(crate) mod sibling_locations;
pub(crate) mod velero_location;

pub use agent::{RunningSeed, SeedAgent, SeedController, SeedError, SeedOptions, run};
pub use extension::entry::FAILPOINT_DELETE_BATCH;
/// The provider of a seed's default location that has no bucket yet (a placeholder the
/// CLI never shows).
pub use velero_location::PROVIDER_NONE;

/// On an extension BackupEntry: the namespace of its garden BackupEntry, so the mirror
/// finds the garden object from the seed object.
pub const ANNOTATION_GARDEN_NAMESPACE: &str = "granary.gardener.cloud/garden-namespace";

/// On an extension BackupEntry: the UID of its garden BackupEntry. With the namespace it
/// is the seed object's identity: a garden entry of the same name from another
/// namespace never maps onto it, and its prefix marker records it.
pub const ANNOTATION_GARDEN_UID: &str = "granary.gardener.cloud/garden-uid";

/// On an extension BackupEntry: the UID of the Shoot owning its garden BackupEntry (the
/// entry's owner reference). A garden entry of the same Shoot recreated under the same
/// name and namespace (a new UID) takes over the seed object and the prefix by it.
pub const ANNOTATION_SHOOT_UID: &str = "granary.gardener.cloud/shoot-uid";
