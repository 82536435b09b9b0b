//! Restores (#17): the runner that brings a backup's items back into a cluster, and the
//! pure decisions it uses, each beside its tests:
//! - [`order`]: in which order items are created (Velero's priorities, owners first);
//! - [`actions`]: the `RestoreItemAction` trait; [`builtin_actions`] the built-in ones.

pub mod actions;
pub mod builtin_actions;
pub mod order;
