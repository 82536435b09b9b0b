//! The worlds scenarios start from: each module sets up one kind of world (API server,
//! CRDs, stores, controllers) and the helpers its scenarios drive it with.
//!
//! - [`backup_runner`]: a cluster full of known objects and the backup runner;
//! - [`crd`]: a served test CRD (Widgets) for the API conformance tests;
//! - [`velero`]: the Velero-compatible controllers on a bucket (lifecycle, restore,
//!   schedules, downloads);
//! - [`velero_server`]: the same controllers, looked at through their queue;
//! - [`nonadmin`]: namespace owners (tenants) with non-admin backups and locations;
//! - [`migrate`]: a garden, a seed with a simulated etcd, and `granary migrate`.

pub mod backup_runner;
pub mod crd;
pub mod migrate;
pub mod nonadmin;
pub mod nonadmin_locations;
pub mod velero;
pub mod velero_server;
