//! kube-apiserver's bootstrap RBAC policy and ClusterRole aggregation: a fresh server
//! has `cluster-admin`, `admin`, `edit`, `view` and the `system:aggregate-to-*` roles,
//! the `cluster-admin` binding of `system:masters`, and a ClusterRole labelled to
//! aggregate into `admin` shows up in (and leaves) `admin`'s rules.
//!
//! Escalation prevention, as kube-apiserver's RBAC storage enforces it for users of the
//! static token file: a Role or ClusterRole is written only by someone who holds every
//! permission it grants (or `escalate` on it), a binding only by someone who holds every
//! permission of the role it references (or `bind` on that role); an aggregationRule
//! needs cluster-admin's permissions. Refusals are kube-apiserver's 403 (and its 404 for
//! a binding to a role that does not exist).

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef,
    Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::json;

use granary_api::rbac::covers;
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};

use granary_test_support::api::api_error;
use granary_test_support::worlds::nonadmin::client_as;
use granary_test_support::{TestCluster, poll_until};

const TO: &str = "rbac.authorization.k8s.io/aggregate-to-";

fn has_rule(role: &ClusterRole, resource: &str) -> bool {
    role.rules
        .iter()
        .flatten()
        .any(|r| r.resources.iter().flatten().any(|x| x == resource))
}

#[tokio::test]
async fn a_fresh_server_has_the_bootstrap_roles_and_aggregates_them() {
    let cluster = TestCluster::start().await;
    let roles: Api<ClusterRole> = Api::all(cluster.client());
    for (name, aggregate_to) in [
        ("cluster-admin", None),
        ("admin", None),
        ("edit", Some("admin")),
        ("view", Some("edit")),
        ("system:aggregate-to-admin", Some("admin")),
        ("system:aggregate-to-edit", Some("edit")),
        ("system:aggregate-to-view", Some("view")),
    ] {
        let role = roles
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Some(into) = aggregate_to {
            let labels = role.metadata.labels.clone().unwrap_or_default();
            assert_eq!(
                labels.get(&format!("{TO}{into}")).map(String::as_str),
                Some("true"),
                "{name}: {labels:?}"
            );
        }
    }
    let admin = roles.get("cluster-admin").await.unwrap();
    let rule = &admin.rules.as_ref().expect("rules")[0];
    assert_eq!(rule.verbs, ["*"]);
    assert_eq!(rule.resources.as_deref(), Some(&["*".to_string()][..]));
    let bindings: Api<ClusterRoleBinding> = Api::all(cluster.client());
    let masters = bindings.get("cluster-admin").await.expect("binding");
    assert_eq!(masters.role_ref.name, "cluster-admin");
    let subject = &masters.subjects.as_ref().expect("subjects")[0];
    assert_eq!(
        (&*subject.kind, &*subject.name),
        ("Group", "system:masters")
    );

    // Aggregated: admin ⊇ edit ⊇ view; view reads configmaps, never secrets.
    poll_until("admin, edit and view are aggregated", || {
        let roles = roles.clone();
        async move {
            let (Ok(admin), Ok(edit), Ok(view)) = (
                roles.get("admin").await,
                roles.get("edit").await,
                roles.get("view").await,
            ) else {
                return false;
            };
            has_rule(&admin, "rolebindings")
                && has_rule(&admin, "configmaps")
                && has_rule(&edit, "secrets")
                && !has_rule(&edit, "rolebindings")
                && has_rule(&view, "configmaps")
                && !has_rule(&view, "secrets")
        }
    })
    .await;
}

#[tokio::test]
async fn a_labelled_cluster_role_joins_and_leaves_admin() {
    let cluster = TestCluster::start().await;
    let roles: Api<ClusterRole> = Api::all(cluster.client());
    let name = cluster.name("gizmo-admin");
    let resource = format!("{}s", cluster.name("gizmo"));
    let mut extra = ClusterRole::default();
    extra.metadata.name = Some(name.clone());
    extra.metadata.labels = Some([(format!("{TO}admin"), "true".to_string())].into());
    extra.rules = Some(vec![PolicyRule {
        api_groups: Some(vec!["granary.test".into()]),
        resources: Some(vec![resource.clone()]),
        verbs: vec!["get".into(), "list".into()],
        ..Default::default()
    }]);
    roles
        .create(&PostParams::default(), &extra)
        .await
        .expect("create");
    cluster.delete_at_drop(ApiResource::erase::<ClusterRole>(&()), None, &name);
    let has = |want: bool, of: &'static str| {
        let roles = roles.clone();
        let resource = resource.clone();
        async move {
            roles
                .get(of)
                .await
                .is_ok_and(|r| has_rule(&r, &resource) == want)
        }
    };
    poll_until("the labelled role's rules show up in admin", || {
        has(true, "admin")
    })
    .await;
    assert!(
        has(false, "edit").await,
        "edit does not select admin's roles"
    );

    // Its label removed, its rules leave admin.
    roles
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"metadata": {"labels": {format!("{TO}admin"): null}}}),
            ),
        )
        .await
        .expect("unlabel");
    poll_until("unlabelled: the rules leave admin", || has(false, "admin")).await;

    // Labelled again, then deleted: the rules come and go again.
    roles
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"metadata": {"labels": {format!("{TO}admin"): "true"}}}),
            ),
        )
        .await
        .expect("relabel");
    poll_until("relabelled: back in admin", || has(true, "admin")).await;
    roles
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    poll_until("deleted: the rules leave admin", || has(false, "admin")).await;
}

const RBAC: &str = "rbac.authorization.k8s.io";
const TEAM: &str = "team";
/// `owner` owns namespace `team` (bound there to `admin`); `delegate` may write
/// ClusterRoles and ClusterRoleBindings but holds little else; `root` is a superuser.
const ESCALATION_TOKENS: &str = "owner-token-0123456789,owner,uid-owner\n\
                                 delegate-token-0123456789,delegate,uid-delegate,\"ops\"\n\
                                 root-token-0123456789,root,uid-root,system:masters\n";

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn named_rule(groups: &[&str], resources: &[&str], verbs: &[&str], names: &[&str]) -> PolicyRule {
    PolicyRule {
        resource_names: Some(names.iter().map(|s| s.to_string()).collect()),
        ..rule(groups, resources, verbs)
    }
}

fn role(name: &str, rules: Vec<PolicyRule>) -> Role {
    let mut r = Role::default();
    r.metadata.name = Some(name.into());
    r.rules = Some(rules);
    r
}

fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    let mut r = ClusterRole::default();
    r.metadata.name = Some(name.into());
    r.rules = Some(rules);
    r
}

fn user(name: &str) -> Subject {
    Subject {
        kind: "User".into(),
        name: name.into(),
        api_group: Some(RBAC.into()),
        ..Default::default()
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: RBAC.into(),
        kind: kind.into(),
        name: name.into(),
    }
}

fn role_binding(name: &str, kind: &str, role: &str, who: &str) -> RoleBinding {
    let mut b = RoleBinding::default();
    b.metadata.name = Some(name.into());
    b.role_ref = role_ref(kind, role);
    b.subjects = Some(vec![user(who)]);
    b
}

fn cluster_role_binding(name: &str, role: &str, who: &str) -> ClusterRoleBinding {
    let mut b = ClusterRoleBinding::default();
    b.metadata.name = Some(name.into());
    b.role_ref = role_ref("ClusterRole", role);
    b.subjects = Some(vec![user(who)]);
    b
}

/// The owner's RoleBinding of themselves to `cluster-admin` in their namespace is
/// refused with kube-apiserver's escalation message.
async fn owner_cannot_bind_cluster_admin(bindings: &Api<RoleBinding>) {
    let binding = role_binding(
        "owner-cluster-admin",
        "ClusterRole",
        "cluster-admin",
        "owner",
    );
    assert_escalation(
        bindings.create(&PostParams::default(), &binding).await,
        "rolebindings",
        "owner-cluster-admin",
        "owner",
        OWNER_GROUPS,
        &[EVERYTHING, EVERY_URL],
    );
}

/// kube-apiserver's refusal of an escalating write: 403, naming the object and every
/// permission (compacted, sorted) the user does not hold.
fn assert_escalation<T: std::fmt::Debug>(
    r: Result<T, kube::Error>,
    resource: &str,
    name: &str,
    who: &str,
    groups: &str,
    missing: &[&str],
) {
    let e = api_error(r);
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"), "{e:?}");
    assert_eq!(
        e.message,
        format!(
            "{resource}.{RBAC} \"{name}\" is forbidden: user \"{who}\" (groups={groups}) is attempting to grant RBAC permissions not currently held:\n{}",
            missing.join("\n")
        )
    );
}

const OWNER_GROUPS: &str = "[\"system:authenticated\"]";
const EVERYTHING: &str = "{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}";
const EVERY_URL: &str = "{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}";

struct Escalation {
    _server: EmbeddedServer,
    _dir: tempfile::TempDir,
    admin: kube::Client,
    owner: kube::Client,
    delegate: kube::Client,
    root: kube::Client,
}

/// An embedded server whose `owner` is bound to `admin` in `team` (once `admin` is
/// aggregated) and whose `delegate` may create and update ClusterRoles and
/// ClusterRoleBindings.
async fn escalation_world() -> Escalation {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, ESCALATION_TOKENS).expect("token file");
    let server = EmbeddedServer::start_with_token_file(EmbeddedOptions::default(), &tokens)
        .await
        .expect("server");
    let admin = server.client().await.expect("admin client");
    let mut ns = Namespace::default();
    ns.metadata.name = Some(TEAM.into());
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    // Aggregation settles in steps (view into edit, edit into admin): wait until admin
    // holds all of edit and edit all of view.
    poll_until("admin ⊇ edit ⊇ view", || async {
        let rules = |name: &'static str| {
            let roles = roles.clone();
            async move {
                roles
                    .get(name)
                    .await
                    .ok()
                    .and_then(|r| r.rules)
                    .unwrap_or_default()
            }
        };
        let (admin, edit, view) = (
            rules("admin").await,
            rules("edit").await,
            rules("view").await,
        );
        !view.is_empty() && covers(&admin, &edit) && covers(&edit, &view)
    })
    .await;
    Api::<RoleBinding>::namespaced(admin.clone(), TEAM)
        .create(
            &PostParams::default(),
            &role_binding("owner-admin", "ClusterRole", "admin", "owner"),
        )
        .await
        .expect("owner's binding");
    roles
        .create(
            &PostParams::default(),
            &cluster_role(
                "rbac-writer",
                vec![rule(
                    &[RBAC],
                    &["clusterroles", "clusterrolebindings"],
                    &["create", "update", "patch", "get"],
                )],
            ),
        )
        .await
        .expect("rbac-writer");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &cluster_role_binding("delegate-rbac-writer", "rbac-writer", "delegate"),
        )
        .await
        .expect("delegate's binding");
    let owner = client_as(&server, "owner-token-0123456789").await;
    let delegate = client_as(&server, "delegate-token-0123456789").await;
    let root = client_as(&server, "root-token-0123456789").await;
    Escalation {
        _server: server,
        _dir: dir,
        admin,
        owner,
        delegate,
        root,
    }
}

#[tokio::test]
async fn a_namespace_owner_cannot_grant_what_they_do_not_hold() {
    let w = escalation_world().await;
    let pp = PostParams::default();
    let bindings: Api<RoleBinding> = Api::namespaced(w.owner.clone(), TEAM);
    let roles: Api<Role> = Api::namespaced(w.owner.clone(), TEAM);

    // Bound to admin in their namespace, the owner cannot bind themselves to
    // cluster-admin there.
    owner_cannot_bind_cluster_admin(&bindings).await;
    assert!(
        bindings
            .get_opt("owner-cluster-admin")
            .await
            .unwrap()
            .is_none(),
        "nothing was stored"
    );
    // Nor create a ClusterRoleBinding at all (RBAC refuses the request itself).
    let e = api_error(
        Api::<ClusterRoleBinding>::all(w.owner.clone())
            .create(
                &pp,
                &cluster_role_binding("owner-cluster-admin", "cluster-admin", "owner"),
            )
            .await,
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "clusterrolebindings.rbac.authorization.k8s.io is forbidden: User \"owner\" cannot create resource \"clusterrolebindings\" in API group \"rbac.authorization.k8s.io\" at the cluster scope"
        )
    );
    // Nor a Role granting everything.
    assert_escalation(
        roles
            .create(&pp, &role("everything", vec![rule(&["*"], &["*"], &["*"])]))
            .await,
        "roles",
        "everything",
        "owner",
        OWNER_GROUPS,
        &[EVERYTHING],
    );
    assert!(roles.get_opt("everything").await.unwrap().is_none());

    // What admin holds may be granted: view, edit and admin itself, in the namespace.
    for granted in ["view", "edit", "admin"] {
        bindings
            .create(
                &pp,
                &role_binding(&format!("dev-{granted}"), "ClusterRole", granted, "dev"),
            )
            .await
            .unwrap_or_else(|e| panic!("binding {granted}: {e}"));
    }
    // A Role of permissions the owner holds, and a binding to it.
    roles
        .create(
            &pp,
            &role(
                "config-reader",
                vec![rule(&[""], &["configmaps"], &["get", "list"])],
            ),
        )
        .await
        .expect("a Role within the owner's permissions");
    bindings
        .create(
            &pp,
            &role_binding("dev-config-reader", "Role", "config-reader", "dev"),
        )
        .await
        .expect("a binding to it");

    // Updating that Role beyond the owner's permissions is refused too, by update and by
    // patch; the missing permissions are compacted (verbs of one resource together).
    let mut wider = roles.get("config-reader").await.expect("role");
    wider.rules = Some(vec![
        rule(&[""], &["configmaps"], &["get", "list"]),
        rule(&[""], &["nodes"], &["get", "list"]),
        rule(&["apps"], &["deployments"], &["get"]),
    ]);
    let nodes = "{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\" \"list\"]}";
    assert_escalation(
        roles.replace("config-reader", &pp, &wider).await,
        "roles",
        "config-reader",
        "owner",
        OWNER_GROUPS,
        &[nodes],
    );
    assert_escalation(
        roles
            .patch(
                "config-reader",
                &PatchParams::default(),
                &Patch::Merge(json!({"rules": [
                    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
                    {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get"], "resourceNames": ["pv1"]},
                ]})),
            )
            .await,
        "roles",
        "config-reader",
        "owner",
        OWNER_GROUPS,
        &[
            nodes,
            "{APIGroups:[\"\"], Resources:[\"persistentvolumes\"], ResourceNames:[\"pv1\"], Verbs:[\"get\"]}",
        ],
    );
    let kept = roles.get("config-reader").await.expect("role");
    assert_eq!(kept.rules.expect("rules").len(), 1, "the Role is unchanged");

    // A binding to a role that does not exist is kube-apiserver's 404.
    let e = api_error(
        bindings
            .create(
                &pp,
                &role_binding("dev-nothing", "ClusterRole", "no-such-role", "dev"),
            )
            .await,
    );
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (
            404,
            "NotFound",
            "clusterroles.rbac.authorization.k8s.io \"no-such-role\" not found"
        )
    );
}

#[tokio::test]
async fn bind_and_escalate_let_a_user_grant_beyond_their_permissions() {
    let w = escalation_world().await;
    let pp = PostParams::default();
    let bindings: Api<RoleBinding> = Api::namespaced(w.owner.clone(), TEAM);
    let roles: Api<Role> = Api::namespaced(w.owner.clone(), TEAM);
    Api::<ClusterRole>::all(w.admin.clone())
        .create(
            &pp,
            &cluster_role(
                "node-reader",
                vec![rule(&[""], &["nodes"], &["get", "list", "watch"])],
            ),
        )
        .await
        .expect("node-reader");
    let node_reader =
        "{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\" \"list\" \"watch\"]}";
    assert_escalation(
        bindings
            .create(
                &pp,
                &role_binding("dev-node-reader", "ClusterRole", "node-reader", "dev"),
            )
            .await,
        "rolebindings",
        "dev-node-reader",
        "owner",
        OWNER_GROUPS,
        &[node_reader],
    );

    // `bind` on node-reader (by name) in the namespace: the owner may bind it, and only it.
    let admin_roles: Api<Role> = Api::namespaced(w.admin.clone(), TEAM);
    let admin_bindings: Api<RoleBinding> = Api::namespaced(w.admin.clone(), TEAM);
    admin_roles
        .create(
            &pp,
            &role(
                "binder",
                vec![named_rule(
                    &[RBAC],
                    &["clusterroles"],
                    &["bind"],
                    &["node-reader"],
                )],
            ),
        )
        .await
        .expect("binder");
    admin_bindings
        .create(
            &pp,
            &role_binding("owner-binder", "Role", "binder", "owner"),
        )
        .await
        .expect("owner-binder");
    bindings
        .create(
            &pp,
            &role_binding("dev-node-reader", "ClusterRole", "node-reader", "dev"),
        )
        .await
        .expect("bind allows binding node-reader");
    owner_cannot_bind_cluster_admin(&bindings).await;

    // `escalate` on roles in the namespace: a Role beyond the owner's permissions.
    assert_escalation(
        roles
            .create(&pp, &role("everything", vec![rule(&["*"], &["*"], &["*"])]))
            .await,
        "roles",
        "everything",
        "owner",
        OWNER_GROUPS,
        &[EVERYTHING],
    );
    admin_roles
        .create(
            &pp,
            &role("escalator", vec![rule(&[RBAC], &["roles"], &["escalate"])]),
        )
        .await
        .expect("escalator");
    admin_bindings
        .create(
            &pp,
            &role_binding("owner-escalator", "Role", "escalator", "owner"),
        )
        .await
        .expect("owner-escalator");
    roles
        .create(&pp, &role("everything", vec![rule(&["*"], &["*"], &["*"])]))
        .await
        .expect("escalate allows any Role");
    // Escalate is no bind: binding that Role is still refused.
    assert_escalation(
        bindings
            .create(
                &pp,
                &role_binding("owner-everything", "Role", "everything", "owner"),
            )
            .await,
        "rolebindings",
        "owner-everything",
        "owner",
        OWNER_GROUPS,
        &[EVERYTHING],
    );
}

#[tokio::test]
async fn cluster_roles_and_cluster_role_bindings_are_checked_cluster_wide() {
    let w = escalation_world().await;
    let pp = PostParams::default();
    let delegate_groups = "[\"ops\" \"system:authenticated\"]";
    let roles: Api<ClusterRole> = Api::all(w.delegate.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(w.delegate.clone());
    // The delegate holds what rbac-writer grants, and may grant exactly that.
    roles
        .create(
            &pp,
            &cluster_role(
                "crb-writer",
                vec![rule(&[RBAC], &["clusterrolebindings"], &["create", "get"])],
            ),
        )
        .await
        .expect("a ClusterRole within the delegate's permissions");
    assert_escalation(
        roles
            .create(
                &pp,
                &cluster_role("secret-reader", vec![rule(&[""], &["secrets"], &["get"])]),
            )
            .await,
        "clusterroles",
        "secret-reader",
        "delegate",
        delegate_groups,
        &["{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"],
    );
    assert_escalation(
        bindings
            .create(
                &pp,
                &cluster_role_binding("delegate-cluster-admin", "cluster-admin", "delegate"),
            )
            .await,
        "clusterrolebindings",
        "delegate-cluster-admin",
        "delegate",
        delegate_groups,
        &[EVERYTHING, EVERY_URL],
    );
    bindings
        .create(
            &pp,
            &cluster_role_binding("dev-crb-writer", "crb-writer", "dev"),
        )
        .await
        .expect("a binding to a role the delegate holds");

    // An aggregationRule needs cluster-admin's permissions, even with no rules.
    let mut aggregated = cluster_role("gathers-everything", vec![]);
    aggregated.aggregation_rule = Some(AggregationRule {
        cluster_role_selectors: Some(vec![LabelSelector {
            match_labels: Some([("gather".to_string(), "true".to_string())].into()),
            ..Default::default()
        }]),
    });
    let e = api_error(roles.create(&pp, &aggregated).await);
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (
            403,
            "Forbidden",
            "clusterroles.rbac.authorization.k8s.io \"gathers-everything\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
        )
    );
    // ... and so does adding one to an existing ClusterRole.
    let e = api_error(
        roles
            .patch(
                "crb-writer",
                &PatchParams::default(),
                &Patch::Merge(json!({"aggregationRule": {"clusterRoleSelectors": [
                    {"matchLabels": {"gather": "true"}}
                ]}})),
            )
            .await,
    );
    assert_eq!(
        e.message,
        "clusterroles.rbac.authorization.k8s.io \"crb-writer\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
    );

    // `escalate` on clusterroles lifts both checks; `bind` on clusterroles lets a
    // ClusterRoleBinding name any ClusterRole.
    let admin_roles: Api<ClusterRole> = Api::all(w.admin.clone());
    admin_roles
        .create(
            &pp,
            &cluster_role(
                "escalate-bind",
                vec![rule(&[RBAC], &["clusterroles"], &["escalate", "bind"])],
            ),
        )
        .await
        .expect("escalate-bind");
    Api::<ClusterRoleBinding>::all(w.admin.clone())
        .create(
            &pp,
            &cluster_role_binding("delegate-escalate-bind", "escalate-bind", "delegate"),
        )
        .await
        .expect("binding");
    roles
        .create(&pp, &aggregated)
        .await
        .expect("escalate allows an aggregationRule");
    bindings
        .create(
            &pp,
            &cluster_role_binding("delegate-cluster-admin", "cluster-admin", "delegate"),
        )
        .await
        .expect("bind allows binding cluster-admin");

    // A member of system:masters (and the server's own token) is never checked.
    Api::<ClusterRoleBinding>::all(w.root.clone())
        .create(
            &pp,
            &cluster_role_binding("dev-cluster-admin", "cluster-admin", "dev"),
        )
        .await
        .expect("a superuser binds anything");
    Api::<Role>::namespaced(w.root.clone(), TEAM)
        .create(
            &pp,
            &role("root-everything", vec![rule(&["*"], &["*"], &["*"])]),
        )
        .await
        .expect("a superuser creates any Role");
}

/// POSTs `body` to `path` as `client`; the created review.
async fn review(client: &kube::Client, path: &str, body: serde_json::Value) -> serde_json::Value {
    let request = http::Request::post(path)
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&body).expect("JSON"))
        .expect("request");
    client.request(request).await.expect("the review answered")
}

/// `kubectl auth can-i --list` (SelfSubjectRulesReview) and `kubectl auth whoami`
/// (SelfSubjectReview), as kube-apiserver answers them: the rules the requester holds
/// in the namespace, and who it is.
#[tokio::test]
async fn a_user_can_list_its_rules_and_ask_who_it_is() {
    let w = escalation_world().await;
    const RULES: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
    let rules_in = |client: kube::Client, ns: &'static str| async move {
        review(
            &client,
            RULES,
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                   "spec": {"namespace": ns}}),
        )
        .await
    };
    let owner_team = rules_in(w.owner.clone(), TEAM).await;
    assert_eq!(owner_team["kind"], "SelfSubjectRulesReview");
    assert_eq!(owner_team["status"]["incomplete"], false);
    let may = |status: &serde_json::Value, resource: &str, verb: &str| {
        status["resourceRules"]
            .as_array()
            .expect("resourceRules")
            .iter()
            .any(|r| {
                let has = |field: &str, v: &str| {
                    r[field]
                        .as_array()
                        .is_some_and(|a| a.iter().any(|x| x == v || x == "*"))
                };
                has("resources", resource) && has("verbs", verb)
            })
    };
    assert!(
        may(&owner_team["status"], "configmaps", "create"),
        "{owner_team}"
    );
    // Everyone's: discovery and the review APIs themselves.
    assert!(
        owner_team["status"]["nonResourceRules"]
            .as_array()
            .is_some_and(|r| !r.is_empty()),
        "{owner_team}"
    );
    let owner_default = rules_in(w.owner.clone(), "default").await;
    assert!(
        !may(&owner_default["status"], "configmaps", "create"),
        "{owner_default}"
    );
    let root = rules_in(w.root.clone(), "default").await;
    assert!(may(&root["status"], "anything", "delete"), "{root}");
    // A namespace is required.
    let request = http::Request::post(RULES)
        .header("Content-Type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectRulesReview", "spec": {}}))
            .expect("JSON"),
        )
        .expect("request");
    let refused = api_error(w.owner.request::<serde_json::Value>(request).await);
    assert_eq!(refused.code, 422, "{refused:?}");

    let whoami = review(
        &w.owner,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await;
    assert_eq!(whoami["kind"], "SelfSubjectReview");
    let info = &whoami["status"]["userInfo"];
    assert_eq!(info["username"], "owner");
    assert_eq!(info["uid"], "uid-owner");
    assert!(
        info["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|x| x == "system:authenticated")),
        "{whoami}"
    );
}

/// The review kinds are in discovery as kube-apiserver lists them (create only), so
/// `kubectl api-resources` shows them and clients that check discovery before a review
/// (`kubectl auth whoami`) find them.
#[tokio::test]
async fn the_review_kinds_are_in_discovery() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let get = |uri: &'static str| {
        let client = client.clone();
        async move {
            let request = http::Request::get(uri).body(Vec::new()).expect("request");
            client
                .request::<serde_json::Value>(request)
                .await
                .expect("a discovery document")
        }
    };
    let groups = get("/apis").await;
    for group in ["authentication.k8s.io", "authorization.k8s.io"] {
        assert!(
            groups["groups"]
                .as_array()
                .expect("groups")
                .iter()
                .any(|g| g["name"] == group),
            "{group}"
        );
    }
    for (uri, plural) in [
        ("/apis/authorization.k8s.io/v1", "selfsubjectaccessreviews"),
        ("/apis/authorization.k8s.io/v1", "selfsubjectrulesreviews"),
        ("/apis/authentication.k8s.io/v1", "selfsubjectreviews"),
    ] {
        let list = get(uri).await;
        let resource = list["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["name"] == plural)
            .unwrap_or_else(|| panic!("{plural} in {list}"));
        assert_eq!(resource["verbs"], json!(["create"]), "{resource}");
        assert_eq!(resource["namespaced"], false);
    }
}
