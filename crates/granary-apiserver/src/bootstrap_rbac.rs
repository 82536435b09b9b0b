//! The RBAC objects kube-apiserver's bootstrap policy creates in every cluster: the
//! user-facing ClusterRoles `cluster-admin`, `admin`, `edit` and `view` (the last three
//! aggregated from the `system:aggregate-to-*` roles, see [`super::aggregation`]), the
//! discovery and basic-user roles every authenticated user holds, and their bindings
//! (`cluster-admin` to the group `system:masters`). Written from kube-apiserver's
//! documented default roles; the rules of the aggregate-to roles follow its policy.

use serde_json::{Value, json};

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Label every bootstrap object carries.
const BOOTSTRAPPING: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");
/// Label prefix of the aggregation into `admin`, `edit` and `view`.
pub(crate) const AGGREGATE_TO: &str = "rbac.authorization.k8s.io/aggregate-to-";

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

fn url_rule(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": urls})
}

fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    let mut label_map = serde_json::Map::new();
    label_map.insert(BOOTSTRAPPING.0.into(), json!(BOOTSTRAPPING.1));
    for (k, v) in labels {
        label_map.insert((*k).into(), json!(v));
    }
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": label_map,
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "rules": rules,
    })
}

/// A ClusterRole whose rules are those of the ClusterRoles labelled
/// `aggregate-to-<into>: "true"`.
fn aggregated(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut role = cluster_role(name, labels, Vec::new());
    role["rules"] = Value::Null;
    role["aggregationRule"] = json!({"clusterRoleSelectors": [
        {"matchLabels": {format!("{AGGREGATE_TO}{name}"): "true"}}
    ]});
    role
}

fn binding(name: &str, role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g}))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": name,
            "labels": {BOOTSTRAPPING.0: BOOTSTRAPPING.1},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// The bootstrap ClusterRoles, in kube-apiserver's order.
pub(crate) fn cluster_roles() -> Vec<Value> {
    let to = |into: &str| format!("{AGGREGATE_TO}{into}");
    let (to_admin, to_edit, to_view) = (to("admin"), to("edit"), to("view"));
    vec![
        cluster_role(
            "cluster-admin",
            &[],
            vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
        ),
        url_role(
            "system:discovery",
            &[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ],
        ),
        url_role(
            "system:public-info-viewer",
            &["/healthz", "/livez", "/readyz", "/version", "/version/"],
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
        ),
        aggregated("admin", &[]),
        aggregated("edit", &[(&to_admin, "true")]),
        aggregated("view", &[(&to_edit, "true")]),
        cluster_role(
            "system:aggregate-to-admin",
            &[(&to_admin, "true")],
            admin_rules(),
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &[(&to_edit, "true")],
            edit_rules(),
        ),
        cluster_role(
            "system:aggregate-to-view",
            &[(&to_view, "true")],
            view_rules(),
        ),
    ]
}

fn url_role(name: &str, urls: &[&str]) -> Value {
    cluster_role(name, &[], vec![url_rule(&["get"], urls)])
}

/// What `admin` adds to `edit`: roles and bindings in the namespace, local access reviews.
fn admin_rules() -> Vec<Value> {
    vec![
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews"],
        ),
        rule(
            READ_WRITE,
            &["rbac.authorization.k8s.io"],
            &["rolebindings", "roles"],
        ),
    ]
}

/// What `edit` adds to `view`: writing workloads, secrets and service accounts.
fn edit_rules() -> Vec<Value> {
    vec![
        rule(
            READ,
            &[""],
            &[
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
                "secrets",
                "services/proxy",
            ],
        ),
        rule(&["impersonate"], &[""], &["serviceaccounts"]),
        rule(
            WRITE,
            &[""],
            &[
                "pods",
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
            ],
        ),
        rule(&["create"], &[""], &["pods/eviction"]),
        rule(
            WRITE,
            &[""],
            &[
                "configmaps",
                "events",
                "persistentvolumeclaims",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "secrets",
                "serviceaccounts",
                "services",
                "services/proxy",
            ],
        ),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
        rule(
            WRITE,
            &["apps"],
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale",
            ],
        ),
        rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
        rule(WRITE, &["batch"], &["cronjobs", "jobs"]),
        rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
        rule(
            WRITE,
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
        ),
        rule(WRITE, &["coordination.k8s.io"], &["leases"]),
    ]
}

/// What `view` may read: most namespaced objects, never secrets.
fn view_rules() -> Vec<Value> {
    vec![
        rule(
            READ,
            &[""],
            &[
                "configmaps",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
            ],
        ),
        rule(
            READ,
            &[""],
            &[
                "bindings",
                "events",
                "limitranges",
                "namespaces/status",
                "pods/log",
                "pods/status",
                "replicationcontrollers/status",
                "resourcequotas",
                "resourcequotas/status",
            ],
        ),
        rule(READ, &[""], &["namespaces"]),
        rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
        rule(
            READ,
            &["apps"],
            &[
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
            ],
        ),
        rule(
            READ,
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        rule(
            READ,
            &["batch"],
            &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
        ),
        rule(
            READ,
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status", "networkpolicies"],
        ),
        rule(READ, &["coordination.k8s.io"], &["leases"]),
    ]
}

/// The bootstrap ClusterRoleBindings.
pub(crate) fn cluster_role_bindings() -> Vec<Value> {
    vec![
        binding("cluster-admin", "cluster-admin", &["system:masters"]),
        binding(
            "system:discovery",
            "system:discovery",
            &["system:authenticated"],
        ),
        binding(
            "system:basic-user",
            "system:basic-user",
            &["system:authenticated"],
        ),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_facing_roles_aggregate_as_kube_apiserver_wires_them() {
        let roles = cluster_roles();
        let by_name = |n: &str| {
            roles
                .iter()
                .find(|r| r["metadata"]["name"] == n)
                .unwrap_or_else(|| panic!("{n} is bootstrapped"))
        };
        for (role, selects) in [("admin", "admin"), ("edit", "edit"), ("view", "view")] {
            let sel = &by_name(role)["aggregationRule"]["clusterRoleSelectors"][0];
            assert_eq!(
                sel["matchLabels"][format!("{AGGREGATE_TO}{selects}")],
                "true"
            );
        }
        // view flows into edit, edit into admin.
        assert_eq!(
            by_name("view")["metadata"]["labels"][format!("{AGGREGATE_TO}edit")],
            "true"
        );
        assert_eq!(
            by_name("edit")["metadata"]["labels"][format!("{AGGREGATE_TO}admin")],
            "true"
        );
        assert_eq!(by_name("cluster-admin")["rules"][0]["verbs"], json!(["*"]));
        let view = serde_json::to_string(&view_rules()).unwrap();
        assert!(!view.contains("secrets"), "view never reads secrets");
        let admin = &cluster_role_bindings()[0];
        assert_eq!(admin["subjects"][0]["name"], "system:masters");
    }
}
