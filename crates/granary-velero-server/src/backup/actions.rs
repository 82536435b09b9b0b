//! Backup item actions (Velero's `BackupItemAction`, in-process): given an item about
//! to be backed up, an action may change it and name additional items that must be in
//! the backup with it. The runner fetches those, runs the same checks and actions on
//! them, and writes them too.
//!
//! Built in, the ones that matter for a backup of objects without volume data:
//! - [`CustomResourceDefinitionAction`]: a custom resource brings its CRD;
//! - [`ServiceAccountAction`]: a ServiceAccount brings the ClusterRoleBindings naming it
//!   and the ClusterRoles they bind (Velero's `service_account_action.go`);
//! - [`PodAction`]: a Pod brings its PersistentVolumeClaims (`pod_action.go`);
//! - [`PersistentVolumeClaimAction`]: a claim brings its bound PersistentVolume
//!   (`backup_pv_action.go`).
//!
//! What each one reads from an item is a pure function, tested below.

use std::collections::{BTreeSet, HashSet};

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::OnceCell;

use super::catalog::Catalog;
use super::cluster;
use granary_velero::resource::GroupResource;

/// An item named by an action.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceIdentifier {
    pub group_resource: GroupResource,
    /// `""` for cluster-scoped items.
    pub namespace: String,
    pub name: String,
}

impl ResourceIdentifier {
    pub fn new(group: &str, resource: &str, namespace: &str, name: &str) -> Self {
        Self {
            group_resource: GroupResource::new(group, resource),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

/// What an action returns for one item.
#[derive(Clone, Debug, Default)]
pub struct ActionOutput {
    /// The item to write instead of the one given (`None`: unchanged).
    pub updated: Option<Value>,
    pub additional: Vec<ResourceIdentifier>,
}

/// What actions may use: the cluster and what discovery found.
pub struct ActionContext {
    pub client: kube::Client,
    pub catalog: Catalog,
    /// Names (`plural.group`) of the cluster's CustomResourceDefinitions.
    pub crds: HashSet<String>,
}

/// An action's failure; the item fails (the backup ends `PartiallyFailed`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ActionError(pub String);

impl From<kube::Error> for ActionError {
    fn from(e: kube::Error) -> Self {
        ActionError(e.to_string())
    }
}

/// A backup item action. `execute` returns a boxed future so actions can be held as
/// `dyn BackupItemAction` (no `async-trait` in the root crate).
pub trait BackupItemAction: Send + Sync {
    /// A name for logs (`velero.io/pod` style).
    fn name(&self) -> &str;
    /// Whether the action runs for items of this resource.
    fn applies_to(&self, gr: &GroupResource, ctx: &ActionContext) -> bool;
    fn execute<'a>(
        &'a self,
        ctx: &'a ActionContext,
        item: &'a Value,
    ) -> BoxFuture<'a, Result<ActionOutput, ActionError>>;
}

/// The built-in actions, in the order they run.
pub fn builtin() -> Vec<Box<dyn BackupItemAction>> {
    vec![
        Box::new(CustomResourceDefinitionAction),
        Box::new(ServiceAccountAction::default()),
        Box::new(PodAction),
        Box::new(PersistentVolumeClaimAction),
    ]
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn additional(
    list: Vec<ResourceIdentifier>,
) -> BoxFuture<'static, Result<ActionOutput, ActionError>> {
    Box::pin(async move {
        Ok(ActionOutput {
            updated: None,
            additional: list,
        })
    })
}

/// A custom resource brings its CustomResourceDefinition.
pub struct CustomResourceDefinitionAction;

/// `<plural>.<group>`, the name of the CRD that defines resource `gr`.
pub fn crd_name(gr: &GroupResource) -> String {
    format!("{}.{}", gr.resource, gr.group)
}

impl BackupItemAction for CustomResourceDefinitionAction {
    fn name(&self) -> &str {
        "velero.io/crd"
    }
    fn applies_to(&self, gr: &GroupResource, ctx: &ActionContext) -> bool {
        !gr.group.is_empty() && ctx.crds.contains(&crd_name(gr))
    }
    fn execute<'a>(
        &'a self,
        _ctx: &'a ActionContext,
        item: &'a Value,
    ) -> BoxFuture<'a, Result<ActionOutput, ActionError>> {
        let api_version = str_at(item, "/apiVersion");
        let kind = str_at(item, "/kind");
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let list = _ctx
            .catalog
            .by_kind(group, kind)
            .map(|r| {
                vec![ResourceIdentifier::new(
                    "apiextensions.k8s.io",
                    "customresourcedefinitions",
                    "",
                    &crd_name(&r.group_resource()),
                )]
            })
            .unwrap_or_default();
        additional(list)
    }
}

/// A ServiceAccount brings the ClusterRoleBindings that name it and their ClusterRoles.
#[derive(Default)]
pub struct ServiceAccountAction {
    /// The cluster's ClusterRoleBindings, listed once per backup.
    bindings: OnceCell<Vec<Value>>,
}

/// The ClusterRoleBindings (and, for those binding a ClusterRole, the roles) among
/// `bindings` whose subjects include ServiceAccount `namespace/name`.
pub fn service_account_rbac(
    bindings: &[Value],
    namespace: &str,
    name: &str,
) -> Vec<ResourceIdentifier> {
    let rbac = "rbac.authorization.k8s.io";
    let mut binding_names = BTreeSet::new();
    let mut roles = BTreeSet::new();
    for crb in bindings {
        let names_sa = crb
            .get("subjects")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|s| {
                str_at(s, "/kind") == "ServiceAccount"
                    && str_at(s, "/namespace") == namespace
                    && str_at(s, "/name") == name
            });
        if names_sa {
            binding_names.insert(str_at(crb, "/metadata/name").to_owned());
            if str_at(crb, "/roleRef/kind") == "ClusterRole" {
                roles.insert(str_at(crb, "/roleRef/name").to_owned());
            }
        }
    }
    binding_names
        .into_iter()
        .map(|n| ResourceIdentifier::new(rbac, "clusterrolebindings", "", &n))
        .chain(
            roles
                .into_iter()
                .map(|n| ResourceIdentifier::new(rbac, "clusterroles", "", &n)),
        )
        .filter(|r| !r.name.is_empty())
        .collect()
}

impl BackupItemAction for ServiceAccountAction {
    fn name(&self) -> &str {
        "velero.io/service-account"
    }
    fn applies_to(&self, gr: &GroupResource, _ctx: &ActionContext) -> bool {
        gr.group.is_empty() && gr.resource == "serviceaccounts"
    }
    fn execute<'a>(
        &'a self,
        ctx: &'a ActionContext,
        item: &'a Value,
    ) -> BoxFuture<'a, Result<ActionOutput, ActionError>> {
        Box::pin(async move {
            let bindings = self
                .bindings
                .get_or_try_init(|| async {
                    let gr = GroupResource::new("rbac.authorization.k8s.io", "clusterrolebindings");
                    match ctx.catalog.get(&gr) {
                        Some(res) => cluster::list_all(&ctx.client, res).await,
                        None => Ok(Vec::new()),
                    }
                })
                .await?;
            Ok(ActionOutput {
                updated: None,
                additional: service_account_rbac(
                    bindings,
                    str_at(item, "/metadata/namespace"),
                    str_at(item, "/metadata/name"),
                ),
            })
        })
    }
}

/// A Pod brings its PersistentVolumeClaims.
pub struct PodAction;

/// The claims a pod's volumes name, in its namespace.
pub fn pod_claims(pod: &Value) -> Vec<ResourceIdentifier> {
    let ns = str_at(pod, "/metadata/namespace");
    let names: BTreeSet<&str> = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| str_at(v, "/persistentVolumeClaim/claimName"))
        .filter(|n| !n.is_empty())
        .collect();
    names
        .into_iter()
        .map(|n| ResourceIdentifier::new("", "persistentvolumeclaims", ns, n))
        .collect()
}

impl BackupItemAction for PodAction {
    fn name(&self) -> &str {
        "velero.io/pod"
    }
    fn applies_to(&self, gr: &GroupResource, _ctx: &ActionContext) -> bool {
        gr.group.is_empty() && gr.resource == "pods"
    }
    fn execute<'a>(
        &'a self,
        _ctx: &'a ActionContext,
        item: &'a Value,
    ) -> BoxFuture<'a, Result<ActionOutput, ActionError>> {
        additional(pod_claims(item))
    }
}

/// A PersistentVolumeClaim brings its bound PersistentVolume.
pub struct PersistentVolumeClaimAction;

/// The volume a claim is bound to (`spec.volumeName`), if any.
pub fn claim_volume(pvc: &Value) -> Option<ResourceIdentifier> {
    let name = str_at(pvc, "/spec/volumeName");
    (!name.is_empty()).then(|| ResourceIdentifier::new("", "persistentvolumes", "", name))
}

impl BackupItemAction for PersistentVolumeClaimAction {
    fn name(&self) -> &str {
        "velero.io/pv"
    }
    fn applies_to(&self, gr: &GroupResource, _ctx: &ActionContext) -> bool {
        gr.group.is_empty() && gr.resource == "persistentvolumeclaims"
    }
    fn execute<'a>(
        &'a self,
        _ctx: &'a ActionContext,
        item: &'a Value,
    ) -> BoxFuture<'a, Result<ActionOutput, ActionError>> {
        additional(claim_volume(item).into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pods_name_their_claims() {
        let pod = json!({"metadata": {"namespace": "ns", "name": "p"}, "spec": {"volumes": [
            {"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "b", "configMap": {"name": "cm"}},
            {"name": "c", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "d", "persistentVolumeClaim": {"claimName": "logs"}},
        ]}});
        assert_eq!(
            pod_claims(&pod),
            vec![
                ResourceIdentifier::new("", "persistentvolumeclaims", "ns", "data"),
                ResourceIdentifier::new("", "persistentvolumeclaims", "ns", "logs"),
            ]
        );
        assert!(pod_claims(&json!({"metadata": {"name": "p"}})).is_empty());
    }

    #[test]
    fn claims_name_their_volume() {
        assert_eq!(
            claim_volume(&json!({"spec": {"volumeName": "pv-1"}})),
            Some(ResourceIdentifier::new("", "persistentvolumes", "", "pv-1"))
        );
        assert_eq!(claim_volume(&json!({"spec": {}})), None);
    }

    #[test]
    fn service_accounts_name_their_cluster_rbac() {
        let crb = |name: &str, kind: &str, role: &str, subjects: Value| json!({"metadata": {"name": name}, "roleRef": {"kind": kind, "name": role}, "subjects": subjects});
        let bindings = vec![
            crb(
                "b1",
                "ClusterRole",
                "r1",
                json!([{"kind": "ServiceAccount", "namespace": "ns", "name": "sa"}]),
            ),
            crb(
                "b2",
                "ClusterRole",
                "r2",
                json!([{"kind": "ServiceAccount", "namespace": "other", "name": "sa"}]),
            ),
            crb(
                "b3",
                "ClusterRole",
                "r1",
                json!([{"kind": "User", "name": "sa"}, {"kind": "ServiceAccount", "namespace": "ns", "name": "sa"}]),
            ),
            crb("b4", "ClusterRole", "r4", Value::Null),
        ];
        let rbac = "rbac.authorization.k8s.io";
        assert_eq!(
            service_account_rbac(&bindings, "ns", "sa"),
            vec![
                ResourceIdentifier::new(rbac, "clusterrolebindings", "", "b1"),
                ResourceIdentifier::new(rbac, "clusterrolebindings", "", "b3"),
                ResourceIdentifier::new(rbac, "clusterroles", "", "r1"),
            ]
        );
    }

    #[test]
    fn crd_names() {
        assert_eq!(
            crd_name(&GroupResource::new("stable.example.com", "crontabs")),
            "crontabs.stable.example.com"
        );
    }
}
