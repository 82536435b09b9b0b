//! The built-in restore item actions through their trait, against the embedded API
//! server: the two that read the cluster (the secret action lists the namespace's
//! ServiceAccounts; the custom-resource action waits for its CRD to be Established), and
//! the ones that read the Restore's spec (preserveNodePorts, namespaceMapping). Their
//! pure decisions are unit-tested beside them.

use granary_api::velero::{Restore, RestoreSpec};
use granary_velero::resource::GroupResource;
use granary_velero_server::backup::catalog::Catalog;
use granary_velero_server::restore::actions::{
    RestoreActionContext, RestoreActionInput, RestoreActionOutput, RestoreItemAction,
};
use granary_velero_server::restore::builtin_actions::builtin;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use granary_test_support::{TestCluster, poll_until};

fn context(tc: &TestCluster, spec: RestoreSpec) -> RestoreActionContext {
    RestoreActionContext {
        client: tc.client(),
        catalog: Catalog::default(),
        restore: Restore::new("r", spec),
    }
}

fn action(name: &str) -> Box<dyn RestoreItemAction> {
    builtin()
        .into_iter()
        .find(|a| a.name() == name)
        .expect("a built-in action of that name")
}

async fn run(
    ctx: &RestoreActionContext,
    name: &str,
    gr: &GroupResource,
    item: &Value,
    from_backup: &Value,
) -> RestoreActionOutput {
    action(name)
        .execute(
            ctx,
            RestoreActionInput {
                group_resource: gr,
                item,
                item_from_backup: from_backup,
            },
        )
        .await
        .expect("the action runs")
}

#[tokio::test]
async fn token_secrets_are_judged_by_the_service_accounts_of_their_namespace() {
    let tc = TestCluster::start().await;
    let ns = tc.namespace("restore-secrets").await;
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some("app".into());
    Api::<ServiceAccount>::namespaced(tc.client(), &ns)
        .create(&PostParams::default(), &sa)
        .await
        .expect("service account");
    let ctx = context(&tc, RestoreSpec::default());
    let gr = GroupResource::new("", "secrets");
    let secret = |name: &str, type_: &str| {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "namespace": ns,
                            "annotations": {"kubernetes.io/service-account.uid": "old", "kubernetes.io/service-account.name": "app"}},
               "type": type_, "data": {"token": "dG9r", "ca.crt": "Y2E="}})
    };

    let generated = secret("app-token-x1y2z", "kubernetes.io/service-account-token");
    let out = run(&ctx, "velero.io/secret", &gr, &generated, &generated).await;
    assert!(out.skip, "the generated token secret is skipped");

    let hand_made = secret("robot-token", "kubernetes.io/service-account-token");
    let out = run(&ctx, "velero.io/secret", &gr, &hand_made, &hand_made).await;
    assert!(!out.skip);
    let updated = out.updated.expect("the old token is stripped");
    assert_eq!(updated["data"], json!({}));
    assert_eq!(
        updated["metadata"]["annotations"],
        json!({"kubernetes.io/service-account.name": "app"})
    );

    let opaque = secret("app-token-x1y2z", "Opaque");
    let out = run(&ctx, "velero.io/secret", &gr, &opaque, &opaque).await;
    assert!(!out.skip && out.updated.is_none());
}

#[tokio::test]
async fn a_custom_resource_waits_for_its_crd_to_be_established() {
    let tc = TestCluster::start().await;
    let ctx = context(&tc, RestoreSpec::default());
    let group = format!("{}.example.com", tc.object_selector);
    let gr = GroupResource::new(group.as_str(), "widgets");
    let item = json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "w", "namespace": "ns"}});
    let out = run(
        &ctx,
        "granary.gardener.cloud/custom-resource-crd",
        &gr,
        &item,
        &item,
    )
    .await;
    assert!(out.wait_for_additional_items);
    assert_eq!(out.additional_items.len(), 1);
    let crd_name = format!("widgets.{group}");
    assert_eq!(out.additional_items[0].name, crd_name);

    let act = action("granary.gardener.cloud/custom-resource-crd");
    // A CRD neither restored nor in the cluster is nothing to wait for.
    assert!(
        act.are_additional_items_ready(&ctx, &out.additional_items)
            .await
            .expect("readiness is read")
    );

    tc.apply_yaml(
        &tc.client(),
        &format!(
            r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {crd_name}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"#
        ),
    )
    .await;
    poll_until("the action to see the CRD established", || async {
        act.are_additional_items_ready(&ctx, &out.additional_items)
            .await
            .expect("readiness is read")
    })
    .await;
    // Once seen Established, the CRD's other custom resources wait for nothing.
    let next = act
        .execute(
            &ctx,
            RestoreActionInput {
                group_resource: &gr,
                item: &item,
                item_from_backup: &item,
            },
        )
        .await
        .expect("the action runs");
    assert!(next.additional_items.is_empty() && !next.wait_for_additional_items);
}

#[tokio::test]
async fn service_and_binding_actions_follow_the_restore_spec() {
    let tc = TestCluster::start().await;
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"type": "NodePort", "clusterIP": "10.0.0.9", "ports": [
            {"port": 80, "protocol": "TCP", "nodePort": 30080},
            {"port": 81, "protocol": "TCP", "nodePort": 30081}]}});
    // The runner hands actions an item without managedFields; the backup's copy has them.
    let mut from_backup = svc.clone();
    from_backup["metadata"]["managedFields"] = json!([{"manager": "kubectl", "operation": "Apply",
        "fieldsV1": {"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {"f:nodePort": {}}}}}}]);
    let gr = GroupResource::new("", "services");

    let ctx = context(&tc, RestoreSpec::default());
    let out = run(&ctx, "velero.io/service", &gr, &svc, &from_backup).await;
    let updated = out.updated.expect("changed");
    assert!(updated["spec"].get("clusterIP").is_none());
    assert_eq!(updated["spec"]["ports"][0]["nodePort"], 30080);
    assert!(updated["spec"]["ports"][1].get("nodePort").is_none());

    let ctx = context(
        &tc,
        RestoreSpec {
            preserve_node_ports: Some(true),
            ..RestoreSpec::default()
        },
    );
    let out = run(&ctx, "velero.io/service", &gr, &svc, &from_backup).await;
    let updated = out.updated.expect("the cluster IP still goes");
    assert_eq!(updated["spec"]["ports"], svc["spec"]["ports"]);

    let ctx = context(
        &tc,
        RestoreSpec {
            namespace_mapping: Some([("prod".to_string(), "prod-copy".to_string())].into()),
            ..RestoreSpec::default()
        },
    );
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "view", "apiGroup": "rbac.authorization.k8s.io"},
        "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "prod"}]});
    for (name, resource) in [
        ("velero.io/cluster-role-bindings", "clusterrolebindings"),
        ("velero.io/role-bindings", "rolebindings"),
    ] {
        let gr = GroupResource::new("rbac.authorization.k8s.io", resource);
        let out = run(&ctx, name, &gr, &binding, &binding).await;
        assert_eq!(
            out.updated.expect("mapped")["subjects"][0]["namespace"],
            "prod-copy"
        );
    }
}
