//! The Velero-compatible half of Granary, as pure libraries over bytes: no Kubernetes
//! client lives here, so everything is testable without a server.
//!
//! - [`layout`]: every object-store key of a BackupStorageLocation, built in one place;
//! - [`archive`]: the backup tarball (`<name>.tar.gz`) writer and a reader that is safe
//!   against hostile archives;
//! - [`manifest`]: the per-backup object graph stored as `manifest.json.gz` (Granary's
//!   addition, which Velero ignores), its set operations and the owners-first dependency
//!   order;
//! - [`files`]: the other per-backup files (`velero-backup.json`, resource list,
//!   results, logs);
//! - [`label`]: Velero's shortening of over-long label values;
//! - [`resource`]: a resource's identity as the archive spells it;
//! - [`integrity`]: the signed record that proves a backup is the one Granary wrote;
//! - [`inspect`]: `inspect` and `verify`, the library side of `granary archive`.
//!
//! Formats follow Velero 1.18; docs/formats.md describes each of them.

pub mod archive;
pub mod files;
#[cfg(test)]
mod fuzz_seeds;
// The counting allocator of the memory tests, here and (feature `heap-counter`) in the
// restore's: the workspace's only unsafe code besides the benchmarks'.
#[cfg(any(test, feature = "heap-counter"))]
#[allow(unsafe_code)]
pub mod heap_counter;
pub mod inspect;
pub mod integrity;
pub mod label;
pub mod layout;
pub mod manifest;
pub mod resource;

/// `status.formatVersion` of a backup whose tarball is in Velero's format 1.1.0 and which
/// carries no manifest (what Velero itself writes).
pub const FORMAT_VERSION_VELERO: &str = "1.1.0";
/// `status.formatVersion` of a Granary backup that carries `manifest.json.gz` beside its
/// tarball. The tarball itself stays at 1.1.0, so Velero can still restore it.
pub const FORMAT_VERSION_WITH_MANIFEST: &str = "1.2.0";
