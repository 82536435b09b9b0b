//! RBAC authorization of token-file users, as kube-apiserver's RBAC authorizer decides
//! it: a request is allowed when a ClusterRoleBinding, or a RoleBinding in the
//! request's namespace, binds the user (by name, group or service account) to a role
//! with a rule matching the request's verb, API group, resource (and subresource),
//! name, or non-resource URL. Members of `system:masters` are always allowed. A refusal
//! is kube-apiserver's 403 Status.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::authn::UserInfo;
use super::errors::ApiError;
use super::recorder::ApiCall;
use super::state::State;
use super::store::GroupResource;

/// The group that bypasses authorization.
pub(crate) const MASTERS: &str = "system:masters";

/// The RBAC objects that decide a request.
#[derive(Debug, Default)]
pub(crate) struct Policy {
    cluster_roles: HashMap<String, Vec<Value>>,
    /// (namespace, name) → rules.
    roles: HashMap<(String, String), Vec<Value>>,
    cluster_role_bindings: Vec<Value>,
    /// (namespace, binding).
    role_bindings: Vec<(String, Value)>,
}

fn strs(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn meta(obj: &Value, key: &str) -> String {
    obj.pointer(&format!("/metadata/{key}"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn rules(obj: &Value) -> Vec<Value> {
    obj.get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

impl Policy {
    pub(crate) fn new(
        cluster_roles: &[Value],
        roles: &[Value],
        cluster_role_bindings: Vec<Value>,
        role_bindings: &[Value],
    ) -> Self {
        Policy {
            cluster_roles: cluster_roles
                .iter()
                .map(|r| (meta(r, "name"), rules(r)))
                .collect(),
            roles: roles
                .iter()
                .map(|r| ((meta(r, "namespace"), meta(r, "name")), rules(r)))
                .collect(),
            cluster_role_bindings,
            role_bindings: role_bindings
                .iter()
                .map(|b| (meta(b, "namespace"), b.clone()))
                .collect(),
        }
    }

    /// Whether `user` may make the request `call` describes.
    pub(crate) fn allows(&self, user: &UserInfo, call: &ApiCall) -> bool {
        if user.groups.iter().any(|g| g == MASTERS) {
            return true;
        }
        let granted = |rules: Option<&Vec<Value>>| {
            rules
                .into_iter()
                .flatten()
                .any(|rule| rule_allows(rule, call))
        };
        for b in &self.cluster_role_bindings {
            if binds(b, "", user)
                && role_kind(b) == "ClusterRole"
                && granted(self.cluster_roles.get(role_name(b)))
            {
                return true;
            }
        }
        if call.namespace.is_empty() {
            return false;
        }
        self.role_bindings
            .iter()
            .filter(|(ns, b)| *ns == call.namespace && binds(b, ns, user))
            .any(|(ns, b)| match role_kind(b) {
                "Role" => granted(self.roles.get(&(ns.clone(), role_name(b).to_string()))),
                "ClusterRole" => granted(self.cluster_roles.get(role_name(b))),
                _ => false,
            })
    }
}

fn role_kind(binding: &Value) -> &str {
    binding
        .pointer("/roleRef/kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn role_name(binding: &Value) -> &str {
    binding
        .pointer("/roleRef/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether one of `binding`'s subjects is `user` (`ns`: the binding's namespace, the
/// default of a service account subject's).
fn binds(binding: &Value, ns: &str, user: &UserInfo) -> bool {
    let Some(subjects) = binding.get("subjects").and_then(Value::as_array) else {
        return false;
    };
    subjects.iter().any(|s| {
        let field = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or_default();
        match field("kind") {
            "User" => field("name") == user.name,
            "Group" => user.groups.iter().any(|g| g == field("name")),
            "ServiceAccount" => {
                let sa_ns = match field("namespace") {
                    "" => ns,
                    n => n,
                };
                user.name == format!("system:serviceaccount:{sa_ns}:{}", field("name"))
            }
            _ => false,
        }
    })
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

/// Whether one PolicyRule covers the request.
fn rule_allows(rule: &Value, call: &ApiCall) -> bool {
    if !has(&strs(rule, "verbs"), &call.verb) {
        return false;
    }
    if !call.non_resource_path.is_empty() {
        return strs(rule, "nonResourceURLs").iter().any(|url| {
            url == "*"
                || *url == call.non_resource_path
                || url
                    .strip_suffix('*')
                    .is_some_and(|prefix| call.non_resource_path.starts_with(prefix))
        });
    }
    if !has(&strs(rule, "apiGroups"), &call.group) {
        return false;
    }
    let combined = if call.subresource.is_empty() {
        call.resource.clone()
    } else {
        format!("{}/{}", call.resource, call.subresource)
    };
    let resource_ok = strs(rule, "resources").iter().any(|r| {
        r == "*"
            || *r == combined
            || (!call.subresource.is_empty() && *r == format!("*/{}", call.subresource))
    });
    if !resource_ok {
        return false;
    }
    let names = strs(rule, "resourceNames");
    names.is_empty() || names.contains(&call.name)
}

/// kube-apiserver's 403 for a refused request.
pub(crate) fn forbidden(call: &ApiCall) -> ApiError {
    if !call.non_resource_path.is_empty() {
        return ApiError {
            code: 403,
            reason: "Forbidden",
            message: format!(
                "forbidden: User {:?} cannot {} path {:?}",
                call.user, call.verb, call.non_resource_path
            ),
            details: None,
        };
    }
    let resource = if call.subresource.is_empty() {
        call.resource.clone()
    } else {
        format!("{}/{}", call.resource, call.subresource)
    };
    let scope = if call.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {:?}", call.namespace)
    };
    let why = format!(
        "User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
        call.user, call.verb, call.group
    );
    let qualified = super::errors::qualified(&call.group, &call.resource);
    let message = if call.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {:?} is forbidden: {why}", call.name)
    };
    ApiError {
        code: 403,
        reason: "Forbidden",
        message,
        details: Some(json!({"group": call.group, "kind": call.resource, "name": call.name})),
    }
}

/// The ApiCall a SelfSubjectAccessReview's spec asks about.
pub(crate) fn review_attributes(user: &str, spec: &Value) -> Option<ApiCall> {
    let field = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut call = ApiCall {
        user: user.to_string(),
        verb: String::new(),
        group: String::new(),
        resource: String::new(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        non_resource_path: String::new(),
    };
    if let Some(r) = spec.get("resourceAttributes") {
        call.verb = field(r, "verb");
        call.group = field(r, "group");
        call.resource = field(r, "resource");
        call.subresource = field(r, "subresource");
        call.namespace = field(r, "namespace");
        call.name = field(r, "name");
    } else if let Some(n) = spec.get("nonResourceAttributes") {
        call.verb = field(n, "verb");
        call.non_resource_path = field(n, "path");
    } else {
        return None;
    }
    Some(call)
}

impl State {
    /// The RBAC objects as stored now.
    pub(crate) fn rbac_policy(&self) -> Policy {
        let all = |resource: &str| -> Vec<Value> {
            let gr = GroupResource::new("rbac.authorization.k8s.io", resource);
            self.store
                .list(&gr, None, None)
                .0
                .iter()
                .filter_map(|(_, data)| serde_json::from_slice(data).ok())
                .collect()
        };
        Policy::new(
            &all("clusterroles"),
            &all("roles"),
            all("clusterrolebindings"),
            &all("rolebindings"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            uid: String::new(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    fn call(verb: &str, group: &str, resource: &str, ns: &str, name: &str) -> ApiCall {
        ApiCall {
            user: "u".into(),
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: String::new(),
            namespace: ns.into(),
            name: name.into(),
            non_resource_path: String::new(),
        }
    }

    fn policy() -> Policy {
        let reader = json!({"metadata": {"name": "reader", "namespace": "team"},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}]});
        let one = json!({"metadata": {"name": "one-secret"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s1"]},
                      {"verbs": ["get"], "nonResourceURLs": ["/healthz/*", "/version"]},
                      {"verbs": ["update"], "apiGroups": ["apps"], "resources": ["*/scale"]}]});
        let rb = json!({"metadata": {"name": "devs-read", "namespace": "team"},
            "roleRef": {"kind": "Role", "name": "reader"},
            "subjects": [{"kind": "Group", "name": "devs"}]});
        let crb = json!({"metadata": {"name": "bob-one"},
            "roleRef": {"kind": "ClusterRole", "name": "one-secret"},
            "subjects": [{"kind": "User", "name": "bob"},
                         {"kind": "ServiceAccount", "name": "robot", "namespace": "ops"}]});
        Policy::new(&[one], &[reader], vec![crb], &[rb])
    }

    #[test]
    fn bindings_rules_and_scopes_decide() {
        let p = policy();
        let alice = user("alice", &["devs"]);
        let bob = user("bob", &[]);
        assert!(p.allows(&alice, &call("list", "", "configmaps", "team", "")));
        assert!(!p.allows(&alice, &call("list", "", "configmaps", "other", "")));
        assert!(
            !p.allows(&alice, &call("list", "", "configmaps", "", "")),
            "a Role is no cluster grant"
        );
        assert!(!p.allows(&alice, &call("create", "", "configmaps", "team", "")));
        assert!(!p.allows(&alice, &call("get", "apps", "configmaps", "team", "x")));
        assert!(p.allows(&bob, &call("get", "", "secrets", "any", "s1")));
        assert!(!p.allows(&bob, &call("get", "", "secrets", "any", "s2")));
        assert!(!p.allows(&bob, &call("list", "", "secrets", "any", "")));
        let mut scale = call("update", "apps", "deployments", "x", "d");
        scale.subresource = "scale".into();
        assert!(p.allows(&bob, &scale));
        let mut url = call("get", "", "", "", "");
        url.non_resource_path = "/healthz/ping".into();
        assert!(p.allows(&bob, &url));
        url.non_resource_path = "/metrics".into();
        assert!(!p.allows(&bob, &url));
        assert!(p.allows(
            &user("system:serviceaccount:ops:robot", &[]),
            &call("get", "", "secrets", "", "s1")
        ));
        assert!(p.allows(
            &user("root", &[MASTERS]),
            &call("delete", "x", "y", "", "z")
        ));
    }

    #[test]
    fn refusals_read_as_kube_apiserver_writes_them() {
        let mut c = call("get", "", "configmaps", "team", "cm1");
        c.user = "bob".into();
        assert_eq!(
            forbidden(&c).message,
            "configmaps \"cm1\" is forbidden: User \"bob\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team\""
        );
        let mut c = call("list", "apps", "deployments", "", "");
        c.user = "bob".into();
        assert_eq!(
            forbidden(&c).message,
            "deployments.apps is forbidden: User \"bob\" cannot list resource \"deployments\" in API group \"apps\" at the cluster scope"
        );
        let mut c = call("get", "", "", "", "");
        c.user = "bob".into();
        c.non_resource_path = "/metrics".into();
        assert_eq!(
            forbidden(&c).message,
            "forbidden: User \"bob\" cannot get path \"/metrics\""
        );
    }
}
