//! The garden side (`granary garden`; docs/architecture.md#garden): CloudProfile and Seed
//! backup pools, bucket shards, entry placement with quota sharding, bucket → seed
//! assignment, hand-overs, deletion guards, the conditions `BackupBucketsReady` and
//! `BackupConfigurationValid`, and the places a migration asks for. It makes no
//! object-store call.
//!
//! Decisions are pure functions over plain data ([`pools`], [`placement`],
//! [`assignment`], [`buckets`], [`entries`], [`conditions`], [`moves`], [`guards`]); the
//! controllers fetch, decide and apply ([`bucket_controller`], [`owner_controllers`],
//! [`entry_controllers`]), with the placement commit in [`ledger`] and the entries per
//! bucket in [`entry_index`]. They share one watch and one cache per kind
//! ([`informers`]); [`triggers`] decides which changes wake which reconcile. [`runner`]
//! starts them from a [`config`] file: [`GardenController`] in-process, [`run()`] for the
//! CLI. [`seed_authz`] keeps each seed to its own objects (an authorization and admission
//! webhook); [`metrics`] adds the garden's own metrics; [`integrity_key`] creates the
//! landscape's integrity signing key every seed signs its backups with.

pub mod assignment;
pub mod bucket_controller;
pub mod buckets;
pub mod conditions;
pub mod config;
pub mod context;
pub mod entries;
pub mod entry_controllers;
pub mod entry_index;
pub mod guards;
pub mod health;
pub mod informers;
pub mod integrity_key;
pub mod ledger;
pub mod metrics;
pub mod moves;
pub mod owner_controllers;
pub mod placement;
pub mod placer;
pub mod pool_index;
pub mod pools;
pub mod runner;
pub mod seed_authz;
pub mod triggers;

pub use runner::{GardenController, GardenOptions, RunError, RunningGarden, run, serve};
