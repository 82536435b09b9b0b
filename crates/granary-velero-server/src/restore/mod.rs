//! Restores (docs/architecture.md#restores): the runner that brings a backup's items back
//! into a cluster, and the pure decisions it uses, each beside its tests:
//! - [`contents`]: what a restore keeps of a backup's items (heads in memory, bodies in
//!   a spill file);
//! - [`plan`]: which items, into which namespaces, in which order;
//! - [`order`]: Velero's priorities with owners before dependents;
//! - [`transform`]: the object created from a backed-up one, and the existing-resource
//!   comparison;
//! - [`queue`]: which restores run at the same time;
//! - [`run`]: running one restore (the I/O);
//! - [`validate`]: a new Restore's validation (Velero's messages);
//! - [`actions`]: the `RestoreItemAction` trait; [`builtin_actions`] the built-in ones.

pub mod actions;
pub mod builtin_actions;
pub mod contents;
// Installs the counting global allocator (`granary_velero::heap_counter`), which
// measures what a restore keeps.
#[cfg(test)]
mod memory_tests;
pub mod order;
pub mod plan;
pub mod queue;
pub mod run;
pub mod transform;
pub mod validate;
