//! The Velero-compatible controllers that run in every seed (`granary seed`) and alone on
//! any cluster (`granary server`): locations, the backup queue, backups, and later sync,
//! garbage collection, deletion, schedules, downloads and restores (DESIGN §4
//! "Velero-compatible"). They use the format library in [`crate::velero`], which holds no
//! Kubernetes client; the decisions they make are pure functions in files of their own,
//! tested beside them.
//!
//! Built so far: the queue's decision ([`queue`]) and the namespace overlap it rests on
//! ([`namespaces`]). The controllers that apply them are issue #15's work.

pub mod backup;
pub mod namespaces;
pub mod queue;
