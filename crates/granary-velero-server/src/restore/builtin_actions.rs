//! The built-in restore item actions: Velero's own where they matter without volume data,
//! plus one of Granary's, in the order they run:
//! - [`JobAction`] (`velero.io/job`): Job selectors lose the old controller-uid labels;
//! - [`PodAction`] (`velero.io/pod`): no node name or resolved priority, no legacy
//!   token-secret volumes; its PriorityClass is restored first;
//! - [`ServiceAction`] (`velero.io/service`): cluster IPs, and node ports unless chosen
//!   by the user or `preserveNodePorts`;
//! - [`ServiceAccountAction`] (`velero.io/service-account`): no generated token secret;
//! - [`RoleBindingAction`], [`ClusterRoleBindingAction`] (`velero.io/role-bindings`,
//!   `velero.io/cluster-role-bindings`): subjects follow `namespaceMapping`;
//! - [`CrdPreserveFieldsAction`] (`velero.io/crd-preserve-fields`);
//! - [`SecretAction`] (`velero.io/secret`): generated service-account tokens are skipped;
//! - [`CustomResourceCrdAction`] (`granary.gardener.cloud/custom-resource-crd`): a
//!   custom resource waits for its CRD to be Established.
//! - [`rbac_ceiling::RbacCeilingAction`] (`granary.gardener.cloud/nonadmin-rbac-ceiling`):
//!   a restore made for a NonAdminRestore creates no Role or RoleBinding granting more
//!   than `velero.nonAdmin.restoreRoleCeiling`, and no cluster-scoped RBAC object.
//!
//! Velero's volume actions (`add-pvc-from-pod`, `add-pv-from-pvc`, pod volume restores,
//! CSI) are left out: Granary restores no volume data. What each action decides is a
//! pure function in [`workloads`], [`identity`] or [`crds`], tested there; this file only
//! wires them to the trait and does the I/O two of them need.

pub mod crds;
pub mod identity;
pub mod rbac_ceiling;
pub mod workloads;

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

use super::actions::{
    ActionError, ResourceIdentifier, RestoreActionContext, RestoreActionInput, RestoreActionOutput,
    RestoreItemAction,
};
use granary_velero::resource::GroupResource;

/// The built-in actions, in the order they run (Velero's registration order, then
/// Granary's), with the default non-admin restore ceiling.
pub fn builtin() -> Vec<Box<dyn RestoreItemAction>> {
    builtin_with(crate::settings::DEFAULT_RESTORE_ROLE_CEILING)
}

/// The built-in actions, non-admin restores bounded by the ClusterRole `ceiling`
/// (`velero.nonAdmin.restoreRoleCeiling`).
pub fn builtin_with(ceiling: &str) -> Vec<Box<dyn RestoreItemAction>> {
    vec![
        Box::new(JobAction),
        Box::new(PodAction),
        Box::new(ServiceAction),
        Box::new(ServiceAccountAction),
        Box::new(RoleBindingAction),
        Box::new(ClusterRoleBindingAction),
        Box::new(CrdPreserveFieldsAction),
        Box::new(SecretAction),
        Box::new(CustomResourceCrdAction::default()),
        Box::new(rbac_ceiling::RbacCeilingAction::new(ceiling)),
    ]
}

/// An action that only looks at the item and the Restore (no cluster, no waiting): all
/// the built-in ones but the secret and custom-resource actions. Each is its own type;
/// this trait spares them the trait's boxed-future plumbing.
trait Rewrite: Send + Sync {
    /// The action's name (`velero.io/…`).
    const NAME: &'static str;
    /// The one resource it applies to: (group, plural).
    const RESOURCE: (&'static str, &'static str);
    fn rewrite(
        ctx: &RestoreActionContext,
        input: &RestoreActionInput<'_>,
    ) -> Result<RestoreActionOutput, ActionError>;
}

impl<T: Rewrite> RestoreItemAction for T {
    fn name(&self) -> &str {
        T::NAME
    }
    fn applies_to(&self, gr: &GroupResource) -> bool {
        (gr.group.as_str(), gr.resource.as_str()) == T::RESOURCE
    }
    fn execute<'a>(
        &'a self,
        ctx: &'a RestoreActionContext,
        input: RestoreActionInput<'a>,
    ) -> BoxFuture<'a, Result<RestoreActionOutput, ActionError>> {
        Box::pin(async move { T::rewrite(ctx, &input) })
    }
}

/// The output for an item replaced by `updated` (`None` when it did not change).
fn changed(input: &RestoreActionInput<'_>, updated: Value) -> RestoreActionOutput {
    RestoreActionOutput {
        updated: (updated != *input.item).then_some(updated),
        ..RestoreActionOutput::default()
    }
}

/// The output for an item replaced by `updated`, when the decision says it changed.
fn maybe(updated: Option<Value>) -> RestoreActionOutput {
    RestoreActionOutput {
        updated,
        ..RestoreActionOutput::default()
    }
}

/// `velero.io/job`: see [`workloads::job_for_restore`].
pub struct JobAction;

impl Rewrite for JobAction {
    const NAME: &'static str = "velero.io/job";
    const RESOURCE: (&'static str, &'static str) = ("batch", "jobs");
    fn rewrite(
        _: &RestoreActionContext,
        input: &RestoreActionInput<'_>,
    ) -> Result<RestoreActionOutput, ActionError> {
        Ok(changed(input, workloads::job_for_restore(input.item)))
    }
}

/// `velero.io/pod`: see [`workloads::pod_for_restore`] and
/// [`workloads::pod_priority_class`].
pub struct PodAction;

impl Rewrite for PodAction {
    const NAME: &'static str = "velero.io/pod";
    const RESOURCE: (&'static str, &'static str) = ("", "pods");
    fn rewrite(
        _: &RestoreActionContext,
        input: &RestoreActionInput<'_>,
    ) -> Result<RestoreActionOutput, ActionError> {
        let mut out = changed(input, workloads::pod_for_restore(input.item));
        out.additional_items = workloads::pod_priority_class(input.item)
            .into_iter()
            .collect();
        Ok(out)
    }
}

/// `velero.io/service`: see [`workloads::service_for_restore`]. Which node ports the
/// user chose is read from the annotation, else from the backup's managed fields (the
/// item handed to actions has none any more).
pub struct ServiceAction;

impl Rewrite for ServiceAction {
    const NAME: &'static str = "velero.io/service";
    const RESOURCE: (&'static str, &'static str) = ("", "services");
    fn rewrite(
        ctx: &RestoreActionContext,
        input: &RestoreActionInput<'_>,
    ) -> Result<RestoreActionOutput, ActionError> {
        let preserve = ctx.restore.spec.preserve_node_ports == Some(true);
        let managed = input
            .item
            .pointer("/metadata/managedFields")
            .or_else(|| input.item_from_backup.pointer("/metadata/managedFields"));
        let svc =
            workloads::service_for_restore(input.item, preserve, managed).map_err(ActionError)?;
        Ok(changed(input, svc))
    }
}

/// `velero.io/service-account`: see [`identity::service_account_for_restore`].
pub struct ServiceAccountAction;

impl Rewrite for ServiceAccountAction {
    const NAME: &'static str = "velero.io/service-account";
    const RESOURCE: (&'static str, &'static str) = ("", "serviceaccounts");
    fn rewrite(
        _: &RestoreActionContext,
        input: &RestoreActionInput<'_>,
    ) -> Result<RestoreActionOutput, ActionError> {
        Ok(changed(
            input,
            identity::service_account_for_restore(input.item),
        ))
    }
}

fn map_subjects(
    ctx: &RestoreActionContext,
    input: &RestoreActionInput<'_>,
) -> Result<RestoreActionOutput, ActionError> {
    let mapping = ctx
        .restore
        .spec
        .namespace_mapping
        .clone()
        .unwrap_or_default();
    Ok(maybe(identity::binding_for_restore(input.item, &mapping)))
}

/// `velero.io/role-bindings`: see [`identity::binding_for_restore`].
pub struct RoleBindingAction;

impl Rewrite for RoleBindingAction {
    const NAME: &'static str = "velero.io/role-bindings";
    const RESOURCE: (&'static str, &'static str) = ("rbac.authorization.k8s.io", "rolebindings");
    fn rewrite(
        ctx: &RestoreActionContext,
        input: &RestoreActionInput<'_>,
    ) -> Result<RestoreActionOutput, ActionError> {
        map_subjects(ctx, input)
    }
}

/// `velero.io/cluster-role-bindings`: see [`identity::binding_for_restore`].
pub struct ClusterRoleBindingAction;

impl Rewrite for ClusterRoleBindingAction {
    const NAME: &'static str = "velero.io/cluster-role-bindings";
    const RESOURCE: (&'static str, &'static str) =
        ("rbac.authorization.k8s.io", "clusterrolebindings");
    fn rewrite(
        ctx: &RestoreActionContext,
        input: &RestoreActionInput<'_>,
    ) -> Result<RestoreActionOutput, ActionError> {
        map_subjects(ctx, input)
    }
}

/// `velero.io/crd-preserve-fields`: see [`crds::crd_for_restore`].
pub struct CrdPreserveFieldsAction;

impl Rewrite for CrdPreserveFieldsAction {
    const NAME: &'static str = "velero.io/crd-preserve-fields";
    const RESOURCE: (&'static str, &'static str) = (crds::CRD_GROUP, crds::CRD_RESOURCE);
    fn rewrite(
        _: &RestoreActionContext,
        input: &RestoreActionInput<'_>,
    ) -> Result<RestoreActionOutput, ActionError> {
        Ok(maybe(crds::crd_for_restore(input.item)))
    }
}

/// `velero.io/secret`: see [`identity::secret_for_restore`]. Only token Secrets cost a
/// list of the ServiceAccounts of their (target) namespace, which the restore order
/// has created before any Secret.
pub struct SecretAction;

impl RestoreItemAction for SecretAction {
    fn name(&self) -> &str {
        "velero.io/secret"
    }
    fn applies_to(&self, gr: &GroupResource) -> bool {
        gr.group.is_empty() && gr.resource == "secrets"
    }
    fn execute<'a>(
        &'a self,
        ctx: &'a RestoreActionContext,
        input: RestoreActionInput<'a>,
    ) -> BoxFuture<'a, Result<RestoreActionOutput, ActionError>> {
        Box::pin(async move {
            if !identity::is_token_secret(input.item) {
                return Ok(RestoreActionOutput::default());
            }
            let ns = input
                .item
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let accounts: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), ns);
            let names: Vec<String> = accounts
                .list_metadata(&ListParams::default())
                .await
                .map_err(|e| {
                    ActionError(format!(
                        "listing the service accounts of namespace {ns}: {e}"
                    ))
                })?
                .items
                .into_iter()
                .filter_map(|sa| sa.metadata.name)
                .collect();
            Ok(
                match identity::secret_for_restore(input.item, names.iter().map(String::as_str)) {
                    identity::SecretDecision::Keep => RestoreActionOutput::default(),
                    identity::SecretDecision::Skip => RestoreActionOutput {
                        skip: true,
                        ..RestoreActionOutput::default()
                    },
                    identity::SecretDecision::Update(v) => changed(&input, v),
                },
            )
        })
    }
}

/// `granary.gardener.cloud/custom-resource-crd`: a custom resource names its CRD as an
/// additional item and waits until it is Established, so a CRD restored by the same
/// restore serves its first custom resource.
///
/// Which items are custom resources: the trait's `applies_to` sees only the group and
/// resource (no context, so no catalog), and discovery cannot tell a CRD's resource from
/// an aggregated API's anyway; so every group Kubernetes does not serve itself
/// ([`crds::BUILT_IN_GROUPS`]) applies. A resource with no CRD behind it (an aggregated
/// API) costs one GET: a CRD found neither in the backup nor in the cluster is nothing to
/// wait for, so it counts as ready.
#[derive(Default)]
pub struct CustomResourceCrdAction {
    /// CRDs seen Established during this restore: their other custom resources name no
    /// additional item and wait for nothing (one GET per CRD, not per item).
    established: Mutex<HashSet<String>>,
}

impl CustomResourceCrdAction {
    fn known_established(&self, crd: &str) -> bool {
        self.established
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(crd)
    }
}

impl RestoreItemAction for CustomResourceCrdAction {
    fn name(&self) -> &str {
        "granary.gardener.cloud/custom-resource-crd"
    }
    fn applies_to(&self, gr: &GroupResource) -> bool {
        crds::may_be_custom(gr)
    }
    fn execute<'a>(
        &'a self,
        _ctx: &'a RestoreActionContext,
        input: RestoreActionInput<'a>,
    ) -> BoxFuture<'a, Result<RestoreActionOutput, ActionError>> {
        let crd = crds::crd_of(input.group_resource);
        let out = if self.known_established(&crd.name) {
            RestoreActionOutput::default()
        } else {
            RestoreActionOutput {
                additional_items: vec![crd],
                wait_for_additional_items: true,
                ..RestoreActionOutput::default()
            }
        };
        Box::pin(async move { Ok(out) })
    }
    fn are_additional_items_ready<'a>(
        &'a self,
        ctx: &'a RestoreActionContext,
        items: &'a [ResourceIdentifier],
    ) -> BoxFuture<'a, Result<bool, ActionError>> {
        Box::pin(async move {
            let api: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
            for item in items.iter().filter(|i| crds::is_crd(i)) {
                if self.known_established(&item.name) {
                    continue;
                }
                let crd = api.get_opt(&item.name).await.map_err(|e| {
                    ActionError(format!(
                        "reading CustomResourceDefinition {}: {e}",
                        item.name
                    ))
                })?;
                let Some(crd) = crd else { continue };
                let json = serde_json::to_value(&crd).map_err(|e| ActionError(e.to_string()))?;
                if !crds::crd_established(&json) {
                    return Ok(false);
                }
                self.established
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(item.name.clone());
            }
            Ok(true)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_action_applies_to_its_resources_only() {
        let actions = builtin();
        let applying = |group: &str, resource: &str| -> Vec<&str> {
            let gr = GroupResource::new(group, resource);
            actions
                .iter()
                .filter(|a| a.applies_to(&gr))
                .map(|a| a.name())
                .collect()
        };
        assert_eq!(applying("batch", "jobs"), ["velero.io/job"]);
        assert_eq!(applying("", "pods"), ["velero.io/pod"]);
        assert_eq!(applying("", "services"), ["velero.io/service"]);
        assert_eq!(
            applying("", "serviceaccounts"),
            ["velero.io/service-account"]
        );
        assert_eq!(applying("", "secrets"), ["velero.io/secret"]);
        let ceiling = "granary.gardener.cloud/nonadmin-rbac-ceiling";
        assert_eq!(
            applying("rbac.authorization.k8s.io", "rolebindings"),
            ["velero.io/role-bindings", ceiling]
        );
        assert_eq!(
            applying("rbac.authorization.k8s.io", "clusterrolebindings"),
            ["velero.io/cluster-role-bindings", ceiling]
        );
        assert_eq!(applying("rbac.authorization.k8s.io", "roles"), [ceiling]);
        assert_eq!(
            applying("rbac.authorization.k8s.io", "clusterroles"),
            [ceiling]
        );
        assert_eq!(
            applying("apiextensions.k8s.io", "customresourcedefinitions"),
            ["velero.io/crd-preserve-fields"]
        );
        assert_eq!(
            applying("stable.example.com", "crontabs"),
            ["granary.gardener.cloud/custom-resource-crd"]
        );
        assert!(applying("", "configmaps").is_empty());
        assert!(applying("apps", "deployments").is_empty());
        // Names are unique: logs and results tell the actions apart by them.
        let mut names: Vec<&str> = actions.iter().map(|a| a.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), actions.len());
    }
}
