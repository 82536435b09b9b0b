//! The API types of every group Granary serves or reads, with their defaults and
//! validation. Field names are exactly those of the upstream projects (Gardener, Velero,
//! OADP) so their YAML and tools work unchanged. Nothing here does I/O.

pub mod bucket_name;
pub mod common;
pub mod core;
pub mod crds;
pub mod extensions;
pub mod lean;
pub mod names;
pub mod oadp;
pub mod rbac;
pub mod velero;
