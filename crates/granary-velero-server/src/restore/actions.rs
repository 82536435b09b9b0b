//! Restore item actions (Velero's `RestoreItemAction` v2, in-process): given an item
//! about to be restored, an action may change it, skip it, or name additional items of
//! the backup that must be restored before it, and ask the restore to wait until those
//! are ready, as Velero 1.11's v2 actions do.
//!
//! The runner restores the additional items first (from the backup, through the same
//! filters, transformations and actions), then, when the output asks to wait, calls
//! [`RestoreItemAction::are_additional_items_ready`] every second until it answers true
//! or the timeout passes: the action's own [`RestoreActionOutput::additional_items_ready_timeout`]
//! when set, else the server's `--resource-timeout` (10m). On timeout the item is
//! restored anyway, with a warning.
//!
//! The built-in actions live in [`super::builtin_actions`].

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::backup::catalog::Catalog;
use granary_api::velero::Restore;
use granary_velero::resource::GroupResource;

pub use crate::backup::actions::{ActionError, ResourceIdentifier};

/// What an action may use: the cluster, what discovery found, and the restore.
pub struct RestoreActionContext {
    pub client: kube::Client,
    pub catalog: Catalog,
    /// The Restore being run (spec: namespace mapping, preserveNodePorts, …).
    pub restore: Restore,
}

impl RestoreActionContext {
    /// The namespace `ns` of the backup is restored into (`namespaceMapping`).
    pub fn target_namespace<'a>(&'a self, ns: &'a str) -> &'a str {
        map_namespace(&self.restore, ns)
    }
}

/// The namespace backup namespace `ns` is restored into by `restore`.
pub fn map_namespace<'a>(restore: &'a Restore, ns: &'a str) -> &'a str {
    restore
        .spec
        .namespace_mapping
        .as_ref()
        .and_then(|m| m.get(ns))
        .map(String::as_str)
        .unwrap_or(ns)
}

/// One item handed to an action.
pub struct RestoreActionInput<'a> {
    pub group_resource: &'a GroupResource,
    /// The item as it will be created: metadata already reset, namespace mapped,
    /// labels added, owner references rewritten; earlier actions' changes applied.
    pub item: &'a Value,
    /// The item exactly as it is in the backup.
    pub item_from_backup: &'a Value,
}

/// What an action returns for one item (Velero's `RestoreItemActionExecuteOutput`).
#[derive(Clone, Debug, Default)]
pub struct RestoreActionOutput {
    /// The item to restore instead of the one given (`None`: unchanged).
    pub updated: Option<Value>,
    /// Items of the backup to restore before this one (in the backup's namespaces and
    /// names; the runner maps namespaces).
    pub additional_items: Vec<ResourceIdentifier>,
    /// Do not restore this item (reported as skipped).
    pub skip: bool,
    /// Wait until [`RestoreItemAction::are_additional_items_ready`] says the additional
    /// items are ready before restoring this one.
    pub wait_for_additional_items: bool,
    /// How long to wait at most; `None` (or zero): the server's `--resource-timeout`.
    pub additional_items_ready_timeout: Option<Duration>,
}

/// A restore item action. Futures are boxed so actions can be held as
/// `dyn RestoreItemAction` (no `async-trait` in the root crate).
pub trait RestoreItemAction: Send + Sync {
    /// A name for logs (`velero.io/service` style).
    fn name(&self) -> &str;
    /// Whether the action runs for items of this resource.
    fn applies_to(&self, gr: &GroupResource) -> bool;
    fn execute<'a>(
        &'a self,
        ctx: &'a RestoreActionContext,
        input: RestoreActionInput<'a>,
    ) -> BoxFuture<'a, Result<RestoreActionOutput, ActionError>>;
    /// Whether the additional items (as restored: target namespaces) are ready. The
    /// default, like Velero's v1 adapter, says they are.
    fn are_additional_items_ready<'a>(
        &'a self,
        _ctx: &'a RestoreActionContext,
        _items: &'a [ResourceIdentifier],
    ) -> BoxFuture<'a, Result<bool, ActionError>> {
        Box::pin(async { Ok(true) })
    }
}
