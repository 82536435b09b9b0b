//! Granary: backup infrastructure for Gardener-style Kubernetes landscapes.
//!
//! The library holds everything; `main.rs` only parses the command line and calls in.
//! See `shared/DESIGN.md` §2 for the layout:
//! - [`bench`]: the benchmarks behind `granary bench` and `cargo bench`, side by side
//!   with their peers;
//! - [`api`]: the CRD types of every group Granary serves or reads, their defaults and
//!   validation, and CRD generation;
//! - [`runtime`]: plumbing every controller shares (clock, status builders, readiness,
//!   error codes, configuration files, logging, failpoints);
//! - [`cli`]: the Velero-style CLI (`granary backup`, `granary backup-location`);
//! - [`dev`]: `granary dev`, the whole landscape on one machine;
//! - [`embedded`]: the embedded Kubernetes API server used by `granary dev` and tests;
//! - [`garden`]: garden-side decisions (bucket pools, placement, seed assignment);
//! - [`seed`]: seed-side decisions (deletion grace period);
//! - [`migrate`]: `granary migrate` (legacy buckets, moving entries between buckets);
//! - [`velero`]: the Velero-compatible archive format, manifest and object-store layout;
//! - [`velero_server`]: the Velero-compatible controllers' decisions (the backup queue so
//!   far).

pub mod api;
pub mod bench;
pub mod cli;
pub mod dev;
pub mod embedded;
pub mod garden;
pub mod migrate;
pub mod runtime;
pub mod seed;
pub mod velero;
pub mod velero_server;
