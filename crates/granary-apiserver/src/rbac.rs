//! RBAC authorization of token-file users, as kube-apiserver's RBAC authorizer decides
//! it: a request is allowed when a ClusterRoleBinding, or a RoleBinding in the
//! request's namespace, binds the user (by name, group or service account) to a role
//! with a rule matching the request's verb, API group, resource (and subresource),
//! name, or non-resource URL. Members of `system:masters` are always allowed. A refusal
//! is kube-apiserver's 403 Status.
//!
//! Writes of Roles, ClusterRoles and their bindings by token-file users are also checked
//! against escalation, as kube-apiserver's RBAC storage checks them (see
//! [`EscalationCheck`]). The server's own token, its internal writes (bootstrap policy,
//! aggregation, garbage collection) and members of `system:masters` are not checked.

use std::cell::RefCell;
use std::collections::HashMap;

use k8s_openapi::api::rbac::v1::PolicyRule;

use granary_api::rbac as coverage;

use serde_json::{Value, json};

use super::authn::UserInfo;
use super::errors::ApiError;
use super::recorder::ApiCall;
use super::registry::ResourceInfo;
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

    /// The rules of the role a binding in `ns` (`""`: a ClusterRoleBinding) references;
    /// kube-apiserver's 404 when it does not exist.
    fn role_reference_rules(&self, kind: &str, name: &str, ns: &str) -> Result<&[Value], ApiError> {
        let found = match kind {
            "ClusterRole" => self.cluster_roles.get(name),
            "Role" => self.roles.get(&(ns.to_string(), name.to_string())),
            other => {
                return Err(ApiError::internal_unknown(format!(
                    "unsupported role reference kind: {}",
                    coverage::go_quote(other)
                )));
            }
        };
        let resource = if kind == "Role" {
            "roles"
        } else {
            "clusterroles"
        };
        found
            .map(Vec::as_slice)
            .ok_or_else(|| ApiError::not_found(RBAC_GROUP, resource, name))
    }

    /// Every rule `user` holds in `ns` (`""`: cluster-wide only), as kube-apiserver's
    /// rule resolver gathers them, and the messages of bindings whose role is missing.
    fn rules_for(&self, user: &UserInfo, ns: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        let mut add = |found: Result<&[Value], ApiError>| match found {
            Ok(found) => rules.extend(found.iter().map(coverage::rule_from_json)),
            Err(e) => errors.push(e.message),
        };
        for b in &self.cluster_role_bindings {
            if binds(b, "", user) {
                add(self.role_reference_rules(role_kind(b), role_name(b), ""));
            }
        }
        if !ns.is_empty() {
            for (b_ns, b) in &self.role_bindings {
                if b_ns == ns && binds(b, ns, user) {
                    add(self.role_reference_rules(role_kind(b), role_name(b), ns));
                }
            }
        }
        (rules, errors)
    }

    /// The `status` of a SelfSubjectRulesReview of `user` in `ns`, as kube-apiserver's
    /// rule resolver answers it: every rule the user holds there, split into resource and
    /// non-resource rules, `incomplete` (with the reason) when a binding's role is
    /// missing.
    pub(crate) fn rules_review_status(&self, user: &UserInfo, ns: &str) -> Value {
        let (rules, errors) = self.rules_for(user, ns);
        let (mut resource, mut non_resource) = (Vec::new(), Vec::new());
        for r in rules {
            let verbs = r.verbs.clone();
            if let Some(urls) = r.non_resource_urls.filter(|u| !u.is_empty()) {
                non_resource.push(json!({"verbs": verbs, "nonResourceURLs": urls}));
            }
            if let Some(resources) = r.resources.filter(|r| !r.is_empty()) {
                let mut rule = json!({
                    "verbs": verbs,
                    "apiGroups": r.api_groups.unwrap_or_default(),
                    "resources": resources,
                });
                if let Some(names) = r.resource_names.filter(|n| !n.is_empty()) {
                    rule["resourceNames"] = json!(names);
                }
                resource.push(rule);
            }
        }
        let mut status = json!({
            "resourceRules": resource,
            "nonResourceRules": non_resource,
            "incomplete": !errors.is_empty(),
        });
        if !errors.is_empty() {
            status["evaluationError"] = json!(errors.join(", "));
        }
        status
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

/// The API group of the RBAC objects.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

thread_local! {
    /// The token-file user whose request runs on this thread, with the request (see
    /// [`as_requester`]).
    static REQUESTER: RefCell<Option<(UserInfo, ApiCall)>> = const { RefCell::new(None) };
}

/// Runs `serve` as the request `call` of `user`: the writes inside it are checked
/// against escalation (see [`State::escalation_check`]). `serve` is synchronous, so the
/// user cannot leak into another request sharing the thread.
pub(crate) fn as_requester<R>(user: &UserInfo, call: &ApiCall, serve: impl FnOnce() -> R) -> R {
    struct Reset(Option<(UserInfo, ApiCall)>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let previous = self.0.take();
            REQUESTER.with(|r| *r.borrow_mut() = previous);
        }
    }
    let previous = REQUESTER.with(|r| r.replace(Some((user.clone(), call.clone()))));
    let _reset = Reset(previous);
    serve()
}

/// Which RBAC object a write is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RbacKind {
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
}

impl RbacKind {
    fn of(info: &ResourceInfo) -> Option<Self> {
        if info.group != RBAC_GROUP {
            return None;
        }
        Some(match info.plural.as_str() {
            "roles" => RbacKind::Role,
            "clusterroles" => RbacKind::ClusterRole,
            "rolebindings" => RbacKind::RoleBinding,
            "clusterrolebindings" => RbacKind::ClusterRoleBinding,
            _ => return None,
        })
    }

    fn resource(self) -> &'static str {
        match self {
            RbacKind::Role => "roles",
            RbacKind::ClusterRole => "clusterroles",
            RbacKind::RoleBinding => "rolebindings",
            RbacKind::ClusterRoleBinding => "clusterrolebindings",
        }
    }
}

/// kube-apiserver's escalation prevention for one write of a Role, ClusterRole,
/// RoleBinding or ClusterRoleBinding by a token-file user (its `policybased` storage):
///
/// - a Role or ClusterRole is written when the user holds every permission its rules
///   grant (in the Role's namespace; cluster-wide for a ClusterRole), or may `escalate`
///   it; an aggregationRule (on the new or the old ClusterRole) needs every permission
///   (`*` on everything and on every non-resource URL) unless the user may `escalate`;
/// - a binding is written when the user may `bind` the role it references (in the
///   binding's namespace; `resourceNames` may name the role), or holds every permission
///   of that role (a missing role is kube-apiserver's 404);
/// - an update that changes nothing but the fields the garbage collector writes (owner
///   references, finalizers) and what the server itself sets is not checked.
///
/// The refusal is kube-apiserver's 403, listing the permissions not held.
pub(crate) struct EscalationCheck {
    user: UserInfo,
    call: ApiCall,
    kind: RbacKind,
    policy: Policy,
}

impl State {
    /// The escalation check a write of `info` in the request running on this thread
    /// needs: `None` for other resources, for the server's own token and internal writes,
    /// and for members of `system:masters`. Made before the store is locked: it reads the
    /// RBAC objects.
    pub(crate) fn escalation_check(&self, info: &ResourceInfo) -> Option<EscalationCheck> {
        let kind = RbacKind::of(info)?;
        let (user, call) = REQUESTER.with(|r| r.borrow().clone())?;
        if user.groups.iter().any(|g| g == MASTERS) {
            return None;
        }
        Some(EscalationCheck {
            user,
            call,
            kind,
            policy: self.rbac_policy(),
        })
    }
}

/// Whether `new` differs from `old` only in what the garbage collector writes (owner
/// references, finalizers, deletion marks) or the server sets itself.
fn only_gc_fields_change(old: &Value, new: &Value) -> bool {
    const IGNORED: &[&str] = &[
        "ownerReferences",
        "finalizers",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "resourceVersion",
        "generation",
        "uid",
        "creationTimestamp",
    ];
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in IGNORED {
                m.remove(*k);
            }
        }
        v
    };
    strip(old) == strip(new)
}

fn has_aggregation_rule(role: &Value) -> bool {
    role.pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .is_some_and(|s| !s.is_empty())
}

impl EscalationCheck {
    /// Whether the requesting user may make this verb on the RBAC resource `resource`.
    fn may(&self, verb: &str, group: &str, resource: &str, ns: &str, name: &str) -> bool {
        let call = ApiCall {
            user: self.user.name.clone(),
            verb: verb.to_string(),
            group: group.to_string(),
            resource: resource.to_string(),
            subresource: String::new(),
            namespace: ns.to_string(),
            name: name.to_string(),
            non_resource_path: String::new(),
        };
        self.policy.allows(&self.user, &call)
    }

    /// kube-apiserver's ConfirmNoEscalation: the user holds every permission of `rules`
    /// in `ns`; else the message listing what is not held.
    fn confirm_no_escalation(&self, ns: &str, rules: &[PolicyRule]) -> Result<(), String> {
        let (held, resolution_errors) = self.policy.rules_for(&self.user, ns);
        let missing = coverage::uncovered(&held, rules);
        if missing.is_empty() {
            return Ok(());
        }
        let mut msg = format!(
            "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
            coverage::go_quote(&self.user.name),
            coverage::go_quote_list(&self.user.groups),
            coverage::describe_missing(&missing).join("\n")
        );
        if !resolution_errors.is_empty() {
            // One aggregate error, printed as a list of one.
            let mut seen: Vec<&String> = Vec::new();
            for e in &resolution_errors {
                if !seen.contains(&e) {
                    seen.push(e);
                }
            }
            let joined: Vec<&str> = seen.iter().map(|s| s.as_str()).collect();
            let aggregate = if joined.len() == 1 {
                joined[0].to_string()
            } else {
                format!("[{}]", joined.join(", "))
            };
            msg.push_str(&format!("; resolution errors: [{aggregate}]"));
        }
        Err(msg)
    }

    fn forbidden(&self, name: &str, why: &str) -> ApiError {
        let resource = self.kind.resource();
        ApiError::forbidden(format!(
            "{} \"{name}\" is forbidden: {why}",
            super::errors::qualified(RBAC_GROUP, resource)
        ))
        .with_details(RBAC_GROUP, resource, name)
    }

    /// Checks the write of `new` (replacing `old` on an update) in namespace `ns`.
    pub(crate) fn check(&self, old: Option<&Value>, new: &Value, ns: &str) -> Result<(), ApiError> {
        if old.is_some_and(|old| only_gc_fields_change(old, new)) {
            return Ok(());
        }
        let name = meta(new, "name");
        match self.kind {
            RbacKind::Role | RbacKind::ClusterRole => {
                let resource = self.kind.resource();
                if self.may(
                    "escalate",
                    RBAC_GROUP,
                    resource,
                    &self.call.namespace,
                    &self.call.name,
                ) {
                    return Ok(());
                }
                let rules = coverage::rules_from_json(new);
                self.confirm_no_escalation(ns, &rules)
                    .map_err(|why| self.forbidden(&name, &why))?;
                let aggregates = has_aggregation_rule(new) || old.is_some_and(has_aggregation_rule);
                if self.kind == RbacKind::ClusterRole && aggregates {
                    self.confirm_no_escalation("", &coverage::full_authority())
                        .map_err(|_| {
                            self.forbidden(
                                &name,
                                "must have cluster-admin privileges to use the aggregationRule",
                            )
                        })?;
                }
                Ok(())
            }
            RbacKind::RoleBinding | RbacKind::ClusterRoleBinding => {
                let field = |k: &str| {
                    new.pointer(&format!("/roleRef/{k}"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                };
                let (kind, role) = (field("kind"), field("name"));
                let role_resource = match kind {
                    "ClusterRole" => Some("clusterroles"),
                    "Role" => Some("roles"),
                    _ => None,
                };
                if let Some(resource) = role_resource
                    && self.may("bind", field("apiGroup"), resource, ns, role)
                {
                    return Ok(());
                }
                let rules: Vec<PolicyRule> = self
                    .policy
                    .role_reference_rules(kind, role, ns)?
                    .iter()
                    .map(coverage::rule_from_json)
                    .collect();
                self.confirm_no_escalation(ns, &rules)
                    .map_err(|why| self.forbidden(&name, &why))
            }
        }
    }
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
