//! A world for the CRD conformance tests: a test CRD `widgets.<unique group>` (two
//! served versions, status and scale subresources, a schema exercising validation and
//! pruning) installed and served, and a namespace to create Widgets in.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use serde_json::json;

use crate::{TestCluster, poll_until, wait_established};

/// A test CRD `widgets.<unique group>` with two served versions (v1 stored), a status
/// and a scale subresource, and a schema exercising validation and pruning.
fn widget_crd_yaml(group: &str, scope: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{group}
spec:
  group: {group}
  scope: {scope}
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wdg]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {{}}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Size
      type: integer
      jsonPath: .spec.size
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {{type: integer, minimum: 1}}
              color: {{type: string, enum: [red, blue]}}
              replicas: {{type: integer}}
              port: {{x-kubernetes-int-or-string: true}}
              extra: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
          status:
            type: object
            properties:
              phase: {{type: string}}
              replicas: {{type: integer}}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#
    )
}

/// The Widget CRD of one test, served, and the API to its objects.
pub struct Widgets {
    pub cluster: TestCluster,
    pub ns: String,
    pub ar: ApiResource,
    pub api: Api<DynamicObject>,
    pub group: String,
}

/// Installs the Widget CRD with `scope` (`Namespaced` or `Cluster`) and waits until served.
pub async fn widgets(scope: &str) -> Widgets {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("crd").await;
    let group = format!("{}.conformance.granary.dev", cluster.object_selector);
    let client = cluster.client();
    cluster
        .apply_yaml(&client, &widget_crd_yaml(&group, scope))
        .await;
    let crds = ApiResource::erase::<CustomResourceDefinition>(&());
    cluster.delete_at_drop(crds, None, &format!("widgets.{group}"));
    wait_established(&client, &format!("widgets.{group}")).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1", "Widget"),
        "widgets",
    );
    // Serving follows Established "within a moment": wait until the resource answers.
    let probe: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    poll_until("widgets served", || async {
        probe.list(&ListParams::default()).await.is_ok()
    })
    .await;
    let api = if scope == "Namespaced" {
        Api::namespaced_with(client, &ns, &ar)
    } else {
        Api::all_with(client, &ar)
    };
    Widgets {
        cluster,
        ns,
        ar,
        api,
        group,
    }
}

/// Widget `name` with `spec`.
pub fn widget(w: &Widgets, name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{}/v1", w.group), "kind": "Widget",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}
