//! The RBAC ceiling of non-admin restores. A Velero Restore made for a NonAdminRestore
//! (labelled with the NAR origin) runs with the controllers' identity, which may create
//! any RBAC object; the backup it reads is data a tenant may have written. So such a
//! restore creates an RBAC object only when it grants no more than the ClusterRole
//! `velero.nonAdmin.restoreRoleCeiling` (`admin` unless set) grants inside the restored
//! namespace:
//!
//! - a Role, when the ceiling's rules cover its rules;
//! - a RoleBinding, when the ceiling's rules cover the rules of the role it references:
//!   a ClusterRole as it is in the cluster (a missing one is refused), a Role as it is in
//!   the target namespace, else as the backup holds it (a Role found in neither is
//!   refused);
//! - never a ClusterRole or a ClusterRoleBinding.
//!
//! What is already there is no grant: a Role whose same-named Role in the target
//! namespace already covers its rules, and a RoleBinding whose same-named binding already
//! binds the same role to every one of its subjects, pass (the restore then finds them
//! existing). A refused item is not created; it fails with the reason, which the
//! restore's results name. Restores made by an administrator are not touched.
//!
//! [`decide`] is the decision; [`RbacCeilingAction`] looks up what it needs.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use futures::future::BoxFuture;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleBinding};
use kube::Api;
use serde_json::Value;

use super::super::actions::{
    ActionError, RestoreActionContext, RestoreActionInput, RestoreActionOutput, RestoreItemAction,
};
use granary_api::oadp::NAR_ORIGIN_NACUUID_LABEL;
use granary_api::rbac::{self as coverage, go_quote};
use granary_velero::resource::GroupResource;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// What [`decide`] needs besides the item, as looked up for it.
#[derive(Debug, Default)]
pub struct Found<'a> {
    /// The ceiling ClusterRole's name.
    pub ceiling_name: &'a str,
    /// Its rules; `None` when it does not exist.
    pub ceiling: Option<&'a [PolicyRule]>,
    /// The object of the item's name already in the target namespace (JSON).
    pub existing: Option<&'a Value>,
    /// For a RoleBinding: the rules of the role it references (see the module
    /// documentation for where they come from); `None` when it was found nowhere.
    pub referenced: Option<&'a [PolicyRule]>,
}

/// Whether a non-admin restore may create `item`, an object of the RBAC resource
/// `resource`; `Err` says why not.
pub fn decide(resource: &str, item: &Value, found: &Found<'_>) -> Result<(), String> {
    let ceiling_is = || {
        format!(
            "the non-admin restore ceiling (velero.nonAdmin.restoreRoleCeiling, ClusterRole {})",
            go_quote(found.ceiling_name)
        )
    };
    let ceiling = || {
        found
            .ceiling
            .ok_or_else(|| format!("not restored: {} does not exist", ceiling_is()))
    };
    let beyond = |what: String, rules: &[PolicyRule]| -> Result<(), String> {
        let missing = coverage::uncovered(ceiling()?, rules);
        if missing.is_empty() {
            return Ok(());
        }
        Err(format!(
            "not restored: {what} grants what {} does not: {}",
            ceiling_is(),
            coverage::describe_missing(&missing).join(", ")
        ))
    };
    match resource {
        "roles" => {
            let rules = coverage::rules_from_json(item);
            if found
                .existing
                .is_some_and(|e| coverage::covers(&coverage::rules_from_json(e), &rules))
            {
                return Ok(());
            }
            beyond("it".to_string(), &rules)
        }
        "rolebindings" => {
            if found.existing.is_some_and(|e| already_binds(e, item)) {
                return Ok(());
            }
            let field = |k: &str| {
                item.pointer(&format!("/roleRef/{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            let (kind, name) = (field("kind"), field("name"));
            let role = format!("{kind} {}", go_quote(name));
            if !matches!(kind, "ClusterRole" | "Role") || field("apiGroup") != RBAC_GROUP {
                return Err(format!(
                    "not restored: it binds {role}, which is no RBAC role"
                ));
            }
            let Some(rules) = found.referenced else {
                let nowhere = if kind == "Role" {
                    "is found neither in the namespace nor in the backup"
                } else {
                    "does not exist"
                };
                return Err(format!("not restored: it binds {role}, which {nowhere}"));
            };
            beyond(format!("it binds {role}, which"), rules)
        }
        "clusterroles" | "clusterrolebindings" => Err(
            "not restored: a non-admin restore never creates cluster-scoped RBAC objects"
                .to_string(),
        ),
        _ => Ok(()),
    }
}

/// Whether the binding `existing` already binds the role `item` references to every
/// subject of `item` (restoring `item` then grants nothing new).
fn already_binds(existing: &Value, item: &Value) -> bool {
    let subject_key = |s: &Value| {
        let f = |k: &str| {
            s.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        (f("kind"), f("name"), f("namespace"))
    };
    let subjects = |v: &Value| -> Vec<(String, String, String)> {
        v.get("subjects")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(subject_key).collect())
            .unwrap_or_default()
    };
    let held = subjects(existing);
    existing.get("roleRef") == item.get("roleRef")
        && subjects(item).iter().all(|s| held.contains(s))
}

/// How many restores' backup Roles are kept at once (restores run one or a few at a
/// time; the oldest are forgotten first).
const REMEMBERED_RESTORES: usize = 32;

/// Roles of the backup seen by one restore: (target namespace, name) → rules.
type BackupRoles = HashMap<(String, String), Vec<PolicyRule>>;

/// `granary.gardener.cloud/nonadmin-rbac-ceiling`: see the module documentation.
pub struct RbacCeilingAction {
    ceiling: String,
    /// Per restore (namespace/name/uid), the Roles of its backup it has seen: the
    /// restore handles Roles before RoleBindings, and a Role may not be in the cluster
    /// yet (or was refused) when a binding to it is decided.
    backup_roles: Mutex<VecDeque<(String, BackupRoles)>>,
}

impl RbacCeilingAction {
    pub fn new(ceiling: &str) -> Self {
        RbacCeilingAction {
            ceiling: ceiling.to_string(),
            backup_roles: Mutex::new(VecDeque::new()),
        }
    }

    fn remember_role(&self, restore: &str, ns: &str, name: &str, rules: Vec<PolicyRule>) {
        let mut all = self
            .backup_roles
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let key = (ns.to_string(), name.to_string());
        if let Some((_, roles)) = all.iter_mut().find(|(r, _)| r == restore) {
            roles.insert(key, rules);
            return;
        }
        if all.len() >= REMEMBERED_RESTORES {
            all.pop_front();
        }
        all.push_back((restore.to_string(), [(key, rules)].into()));
    }

    fn backup_role(&self, restore: &str, ns: &str, name: &str) -> Option<Vec<PolicyRule>> {
        self.backup_roles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(r, _)| r == restore)
            .and_then(|(_, roles)| roles.get(&(ns.to_string(), name.to_string())).cloned())
    }

    async fn decide_item(
        &self,
        ctx: &RestoreActionContext,
        input: &RestoreActionInput<'_>,
    ) -> Result<(), ActionError> {
        let resource = input.group_resource.resource.as_str();
        let item = input.item;
        let ns = item
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let meta = &ctx.restore.metadata;
        let restore = format!(
            "{}/{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
            meta.uid.as_deref().unwrap_or_default()
        );
        if resource == "roles" {
            self.remember_role(
                &restore,
                ns,
                name,
                coverage::rules_from_json(input.item_from_backup),
            );
        }
        let read = |what: &str, e: kube::Error| ActionError(format!("reading {what}: {e}"));
        let cluster_role = |role: &str| {
            let api: Api<ClusterRole> = Api::all(ctx.client.clone());
            let role = role.to_string();
            async move {
                api.get_opt(&role)
                    .await
                    .map(|r| r.map(|r| r.rules.unwrap_or_default()))
                    .map_err(|e| read(&format!("ClusterRole {role}"), e))
            }
        };
        let ceiling = cluster_role(&self.ceiling).await?;
        let mut existing = None;
        let mut referenced = None;
        match resource {
            "roles" => {
                let api: Api<Role> = Api::namespaced(ctx.client.clone(), ns);
                existing = api
                    .get_opt(name)
                    .await
                    .map_err(|e| read(&format!("Role {ns}/{name}"), e))?
                    .and_then(|r| serde_json::to_value(r).ok());
            }
            "rolebindings" => {
                let api: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), ns);
                existing = api
                    .get_opt(name)
                    .await
                    .map_err(|e| read(&format!("RoleBinding {ns}/{name}"), e))?
                    .and_then(|b| serde_json::to_value(b).ok());
                let field = |k: &str| {
                    item.pointer(&format!("/roleRef/{k}"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                };
                let role = field("name");
                referenced = match field("kind") {
                    "ClusterRole" => cluster_role(role).await?,
                    "Role" => {
                        let api: Api<Role> = Api::namespaced(ctx.client.clone(), ns);
                        match api
                            .get_opt(role)
                            .await
                            .map_err(|e| read(&format!("Role {ns}/{role}"), e))?
                        {
                            Some(r) => Some(r.rules.unwrap_or_default()),
                            None => self.backup_role(&restore, ns, role),
                        }
                    }
                    _ => None,
                };
            }
            _ => {}
        }
        let found = Found {
            ceiling_name: &self.ceiling,
            ceiling: ceiling.as_deref(),
            existing: existing.as_ref(),
            referenced: referenced.as_deref(),
        };
        decide(resource, item, &found).map_err(ActionError)
    }
}

impl RestoreItemAction for RbacCeilingAction {
    fn name(&self) -> &str {
        "granary.gardener.cloud/nonadmin-rbac-ceiling"
    }
    fn applies_to(&self, gr: &GroupResource) -> bool {
        gr.group == RBAC_GROUP
            && matches!(
                gr.resource.as_str(),
                "roles" | "rolebindings" | "clusterroles" | "clusterrolebindings"
            )
    }
    fn execute<'a>(
        &'a self,
        ctx: &'a RestoreActionContext,
        input: RestoreActionInput<'a>,
    ) -> BoxFuture<'a, Result<RestoreActionOutput, ActionError>> {
        Box::pin(async move {
            let non_admin = ctx
                .restore
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(NAR_ORIGIN_NACUUID_LABEL));
            if non_admin {
                self.decide_item(ctx, &input).await?;
            }
            Ok(RestoreActionOutput::default())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
        coverage::rule_from_json(
            &json!({"apiGroups": groups, "resources": resources, "verbs": verbs}),
        )
    }

    /// A ceiling like `admin`: everything on a few namespaced resources.
    fn ceiling() -> Vec<PolicyRule> {
        vec![
            rule(
                &["", "apps"],
                &["configmaps", "secrets", "deployments"],
                &["*"],
            ),
            rule(&[RBAC_GROUP], &["roles", "rolebindings"], &["*"]),
        ]
    }

    fn binding(kind: &str, role: &str, subject: &str) -> Value {
        json!({"metadata": {"name": "b", "namespace": "ns"},
               "roleRef": {"apiGroup": RBAC_GROUP, "kind": kind, "name": role},
               "subjects": [{"kind": "User", "name": subject}]})
    }

    fn role(rules: Value) -> Value {
        json!({"metadata": {"name": "r", "namespace": "ns"}, "rules": rules})
    }

    fn found<'a>(ceiling: &'a [PolicyRule], referenced: Option<&'a [PolicyRule]>) -> Found<'a> {
        Found {
            ceiling_name: "admin",
            ceiling: Some(ceiling),
            existing: None,
            referenced,
        }
    }

    #[test]
    fn roles_within_the_ceiling_are_restored_others_refused() {
        let c = ceiling();
        let within =
            role(json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]));
        assert_eq!(decide("roles", &within, &found(&c, None)), Ok(()));
        let everything = role(json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]));
        let e = decide("roles", &everything, &found(&c, None)).unwrap_err();
        assert_eq!(
            e,
            "not restored: it grants what the non-admin restore ceiling \
             (velero.nonAdmin.restoreRoleCeiling, ClusterRole \"admin\") does not: \
             {APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}"
        );
        // The same Role already there, as wide: restoring it grants nothing new.
        let existing = everything.clone();
        let f = Found {
            existing: Some(&existing),
            ..found(&c, None)
        };
        assert_eq!(decide("roles", &everything, &f), Ok(()));
        // A narrower one there does not make a wider one pass.
        let f = Found {
            existing: Some(&within),
            ..found(&c, None)
        };
        assert!(decide("roles", &everything, &f).is_err());
    }

    #[test]
    fn bindings_are_judged_by_the_role_they_reference() {
        let c = ceiling();
        let edit = vec![rule(&[""], &["configmaps"], &["get", "update"])];
        assert_eq!(
            decide(
                "rolebindings",
                &binding("ClusterRole", "edit", "dev"),
                &found(&c, Some(&edit))
            ),
            Ok(())
        );
        let admin_all = coverage::full_authority();
        let e = decide(
            "rolebindings",
            &binding("ClusterRole", "cluster-admin", "me"),
            &found(&c, Some(&admin_all)),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "not restored: it binds ClusterRole \"cluster-admin\", which grants what the \
             non-admin restore ceiling (velero.nonAdmin.restoreRoleCeiling, ClusterRole \
             \"admin\") does not: {APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}, \
             {NonResourceURLs:[\"*\"], Verbs:[\"*\"]}"
        );
        assert_eq!(
            decide(
                "rolebindings",
                &binding("ClusterRole", "gone", "me"),
                &found(&c, None)
            ),
            Err("not restored: it binds ClusterRole \"gone\", which does not exist".into())
        );
        assert_eq!(
            decide(
                "rolebindings",
                &binding("Role", "gone", "me"),
                &found(&c, None)
            ),
            Err(
                "not restored: it binds Role \"gone\", which is found neither in the namespace \
                 nor in the backup"
                    .into()
            )
        );
        assert!(
            decide(
                "rolebindings",
                &binding("Group", "x", "me"),
                &found(&c, Some(&[]))
            )
            .unwrap_err()
            .contains("no RBAC role")
        );
        // Already bound to the same role for the same subjects (and more): passes.
        let mut there = binding("ClusterRole", "cluster-admin", "me");
        there["subjects"] =
            json!([{"kind": "User", "name": "me"}, {"kind": "User", "name": "you"}]);
        let f = Found {
            existing: Some(&there),
            ..found(&c, Some(&admin_all))
        };
        assert_eq!(
            decide(
                "rolebindings",
                &binding("ClusterRole", "cluster-admin", "me"),
                &f
            ),
            Ok(())
        );
        // A new subject for the same role is a new grant.
        assert!(
            decide(
                "rolebindings",
                &binding("ClusterRole", "cluster-admin", "them"),
                &f
            )
            .is_err()
        );
    }

    #[test]
    fn cluster_scoped_rbac_is_never_restored_and_a_missing_ceiling_refuses() {
        let c = ceiling();
        for resource in ["clusterroles", "clusterrolebindings"] {
            assert!(
                decide(resource, &json!({}), &found(&c, None))
                    .unwrap_err()
                    .contains("never creates cluster-scoped RBAC objects")
            );
        }
        let none = Found {
            ceiling_name: "tenant",
            ..Found::default()
        };
        assert_eq!(
            decide("roles", &role(json!([])), &none),
            Err(
                "not restored: the non-admin restore ceiling (velero.nonAdmin.restoreRoleCeiling, \
                 ClusterRole \"tenant\") does not exist"
                    .into()
            )
        );
        assert_eq!(decide("configmaps", &json!({}), &none), Ok(()));
    }
}
