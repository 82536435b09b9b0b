//! kube-apiserver's bootstrap RBAC policy and ClusterRole aggregation: a fresh server
//! has `cluster-admin`, `admin`, `edit`, `view` and the `system:aggregate-to-*` roles,
//! the `cluster-admin` binding of `system:masters`, and a ClusterRole labelled to
//! aggregate into `admin` shows up in (and leaves) `admin`'s rules.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;

use crate::support::{TestCluster, poll_until};

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
