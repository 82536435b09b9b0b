//! API-behaviour checks for CustomResourceDefinitions and custom objects (serving,
//! validation and pruning, status subresource, versions, scope), finalizers, garbage
//! collection and namespace deletion. Same rules as `conformance.rs`.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use serde_json::json;

use granary_test_support::api::{api_error, cm};
use granary_test_support::{TestCluster, poll_until};

use granary_test_support::worlds::crd::{widget, widgets};

#[tokio::test]
async fn crd_is_established_discoverable_and_served() {
    let w = widgets("Namespaced").await;
    let crds: Api<CustomResourceDefinition> = Api::all(w.cluster.client());
    let crd = crds.get(&format!("widgets.{}", w.group)).await.unwrap();
    let conds = crd.status.unwrap().conditions.unwrap();
    for t in ["NamesAccepted", "Established"] {
        assert!(
            conds.iter().any(|c| c.type_ == t && c.status == "True"),
            "{t}"
        );
    }
    let list = w
        .cluster
        .client()
        .list_api_group_resources(&format!("{}/v1", w.group))
        .await
        .unwrap();
    let names: Vec<&str> = list.resources.iter().map(|r| r.name.as_str()).collect();
    assert!(
        names.contains(&"widgets")
            && names.contains(&"widgets/status")
            && names.contains(&"widgets/scale")
    );
    let r = list.resources.iter().find(|r| r.name == "widgets").unwrap();
    assert_eq!(
        (r.kind.as_str(), r.singular_name.as_str(), r.namespaced),
        ("Widget", "widget", true)
    );
    assert_eq!(r.short_names.as_deref(), Some(&["wdg".to_string()][..]));
    let created = w
        .api
        .create(&PostParams::default(), &widget(&w, "a", json!({"size": 2})))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.metadata.namespace.as_deref(), Some(w.ns.as_str()));
}

#[tokio::test]
async fn custom_objects_are_validated_with_field_paths_and_pruned() {
    let w = widgets("Namespaced").await;
    let e = api_error(
        w.api
            .create(
                &PostParams::default(),
                &widget(&w, "bad", json!({"size": "big", "color": "pink"})),
            )
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(e.message.contains("spec.size"), "{}", e.message);
    assert!(e.message.contains("spec.color"), "{}", e.message);
    let e = api_error(
        w.api
            .create(&PostParams::default(), &widget(&w, "nosize", json!({})))
            .await,
    );
    assert!(
        e.message.contains("spec.size: Required value"),
        "{}",
        e.message
    );
    let ok = w
        .api
        .create(
            &PostParams::default(),
            &widget(
                &w,
                "ok",
                json!({"size": 1, "unknown": true, "port": "http", "extra": {"kept": {"deep": 1}}}),
            ),
        )
        .await
        .unwrap();
    let spec = &ok.data["spec"];
    assert!(
        spec.get("unknown").is_none(),
        "unknown fields are pruned: {spec}"
    );
    assert_eq!(spec["extra"]["kept"]["deep"], 1);
    assert_eq!(spec["port"], "http");
}

#[tokio::test]
async fn status_subresource_splits_spec_and_status() {
    let w = widgets("Namespaced").await;
    let mut obj = widget(&w, "s", json!({"size": 1}));
    obj.data["status"] = json!({"phase": "Ignored"});
    let created = w.api.create(&PostParams::default(), &obj).await.unwrap();
    assert!(created.data.get("status").is_none(), "create drops status");
    let st = w
        .api
        .patch_status(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"size": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["phase"], "Ready");
    assert_eq!(st.data["spec"]["size"], 1, "/status ignores spec");
    assert_eq!(
        st.metadata.generation,
        Some(1),
        "status changes keep the generation"
    );
    let main = w
        .api
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Nope"}, "spec": {"size": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(
        main.data["status"]["phase"], "Ready",
        "main endpoint ignores status"
    );
    assert_eq!(main.data["spec"]["size"], 3);
    assert_eq!(main.metadata.generation, Some(2));
    let scale = w.api.get_scale("s").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas.unwrap_or(0), 0);
}

#[tokio::test]
async fn every_served_version_reads_the_same_object() {
    let w = widgets("Namespaced").await;
    w.api
        .create(&PostParams::default(), &widget(&w, "v", json!({"size": 4})))
        .await
        .unwrap();
    let beta = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&w.group, "v1beta1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(w.cluster.client(), &w.ns, &beta);
    let got = api.get("v").await.unwrap();
    assert_eq!(
        got.types.unwrap().api_version,
        format!("{}/v1beta1", w.group)
    );
    assert_eq!(got.data["spec"]["size"], 4);
}

#[tokio::test]
async fn cluster_scoped_crds_have_no_namespace() {
    let w = widgets("Cluster").await;
    let name = w.cluster.name("c");
    w.cluster.delete_at_drop(w.ar.clone(), None, &name);
    let created = w
        .api
        .create(
            &PostParams::default(),
            &widget(&w, &name, json!({"size": 1})),
        )
        .await
        .unwrap();
    assert!(created.metadata.namespace.is_none());
}

#[tokio::test]
async fn deleting_a_crd_removes_its_objects_and_stops_serving() {
    let w = widgets("Namespaced").await;
    w.api
        .create(
            &PostParams::default(),
            &widget(&w, "gone", json!({"size": 1})),
        )
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(w.cluster.client());
    crds.delete(&format!("widgets.{}", w.group), &DeleteParams::default())
        .await
        .unwrap();
    poll_until("CRD gone", || async {
        crds.get_opt(&format!("widgets.{}", w.group))
            .await
            .unwrap()
            .is_none()
    })
    .await;
    poll_until("widgets no longer served", || async {
        matches!(w.api.list(&ListParams::default()).await, Err(kube::Error::Api(e)) if e.code == 404)
    })
    .await;
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("fin").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let mut c = cm("f", &[]);
    c.metadata.finalizers = Some(vec!["granary.gardener.cloud/test".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    api.delete("f", &DeleteParams::default()).await.unwrap();
    let held = api.get("f").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    let e = api_error(
        api.patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["granary.gardener.cloud/test", "other/x"]}}),
            ),
        )
        .await,
    );
    assert_eq!(e.code, 422, "no new finalizers while deleting");
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    poll_until("object gone after its last finalizer", || async {
        api.get_opt("f").await.unwrap().is_none()
    })
    .await;
}

fn owned_by(owner: &ConfigMap, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.metadata.name.clone().unwrap(),
        uid: owner.metadata.uid.clone().unwrap(),
        block_owner_deletion: Some(block),
        controller: None,
    }
}

async fn owner_and_dependent(api: &Api<ConfigMap>) -> ConfigMap {
    let owner = api
        .create(&PostParams::default(), &cm("owner", &[]))
        .await
        .unwrap();
    let mut dep = cm("dep", &[]);
    dep.metadata.owner_references = Some(vec![owned_by(&owner, true)]);
    api.create(&PostParams::default(), &dep).await.unwrap();
    owner
}

#[tokio::test]
async fn background_deletion_collects_dependents() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("gcb").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    owner_and_dependent(&api).await;
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    poll_until("dependent collected", || async {
        api.get_opt("dep").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn foreground_deletion_waits_for_dependents() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("gcf").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    owner_and_dependent(&api).await;
    let mut c = cm("dep", &[]);
    c.metadata.finalizers = Some(vec!["granary.gardener.cloud/hold".into()]);
    api.patch(
        "dep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["granary.gardener.cloud/hold"]}})),
    )
    .await
    .unwrap();
    api.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let owner = api.get("owner").await.unwrap();
    assert!(
        owner
            .metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    poll_until("dependent marked for deletion", || async {
        api.get("dep")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    assert!(
        api.get_opt("owner").await.unwrap().is_some(),
        "owner waits for its blocking dependent"
    );
    api.patch(
        "dep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    poll_until("owner gone", || async {
        api.get_opt("owner").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("gco").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    owner_and_dependent(&api).await;
    api.delete("owner", &DeleteParams::orphan()).await.unwrap();
    poll_until("owner gone", || async {
        api.get_opt("owner").await.unwrap().is_none()
    })
    .await;
    poll_until("dependent orphaned", || async {
        api.get("dep")
            .await
            .unwrap()
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    })
    .await;
}

#[tokio::test]
async fn namespace_deletion_removes_its_objects() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("nsdel").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    api.create(&PostParams::default(), &cm("inside", &[]))
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
    let terminating = namespaces.get_opt(&ns).await.unwrap();
    if let Some(t) = terminating {
        assert_eq!(t.status.unwrap().phase.as_deref(), Some("Terminating"));
        let e = api_error(api.create(&PostParams::default(), &cm("late", &[])).await);
        assert_eq!(e.code, 403);
    }
    poll_until("namespace gone", || async {
        namespaces.get_opt(&ns).await.unwrap().is_none()
    })
    .await;
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn openapi_v2_describes_custom_resources() {
    let w = widgets("Namespaced").await;
    let req = http::Request::get("/openapi/v2").body(Vec::new()).unwrap();
    let doc: serde_json::Value = w.cluster.client().request(req).await.unwrap();
    let reversed: Vec<&str> = w.group.split('.').rev().collect();
    let def = &doc["definitions"][format!("{}.v1.Widget", reversed.join("."))];
    assert_eq!(def["x-kubernetes-group-version-kind"][0]["kind"], "Widget");
    assert_eq!(
        def["properties"]["spec"]["properties"]["size"]["type"],
        "integer"
    );
}
