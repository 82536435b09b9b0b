//! Server-side apply, one test per rule, written from kube-apiserver's documented
//! behaviour (Server-Side Apply: field management, conflicts, merge strategy): they run
//! against the embedded server by default and against a real cluster with
//! `GRANARY_TEST_KUBECONFIG`.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

use granary_test_support::api::{api_error, cm};
use granary_test_support::{TestCluster, poll_until, wait_established};

fn config_map(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn pp(manager: &str) -> PatchParams {
    PatchParams::apply(manager)
}

async fn setup() -> (TestCluster, Api<ConfigMap>, String) {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("ssa").await;
    let api = Api::namespaced(cluster.client(), &ns);
    (cluster, api, ns)
}

/// The entry of `manager` (for `operation`), if any.
fn entry<'a>(
    entries: &'a Option<Vec<ManagedFieldsEntry>>,
    manager: &str,
    operation: &str,
) -> Option<&'a ManagedFieldsEntry> {
    entries.as_ref()?.iter().find(|e| {
        e.manager.as_deref() == Some(manager) && e.operation.as_deref() == Some(operation)
    })
}

fn fields_v1(e: &ManagedFieldsEntry) -> Value {
    e.fields_v1
        .as_ref()
        .map(|f| f.0.clone())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn apply_creates_a_missing_object_and_records_its_manager() {
    let (_c, api, _ns) = setup().await;
    let created = api
        .patch(
            "made",
            &pp("alice"),
            &Patch::Apply(config_map("made", json!({"a": "1"}))),
        )
        .await
        .unwrap();
    assert_eq!(created.data.as_ref().unwrap()["a"], "1");
    assert!(created.metadata.uid.is_some());
    let mf = &created.metadata.managed_fields;
    assert_eq!(mf.as_ref().map(Vec::len), Some(1), "{mf:?}");
    let e = entry(mf, "alice", "Apply").expect("an Apply entry for alice");
    assert_eq!(e.api_version.as_deref(), Some("v1"));
    assert_eq!(e.fields_type.as_deref(), Some("FieldsV1"));
    assert!(e.time.is_some());
    assert_eq!(fields_v1(e), json!({"f:data": {"f:a": {}}}));
    // A second apply with the same configuration changes nothing.
    let again = api
        .patch(
            "made",
            &pp("alice"),
            &Patch::Apply(config_map("made", json!({"a": "1"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        created.metadata.resource_version
    );
}

#[tokio::test]
async fn apply_requires_a_field_manager() {
    let (c, _api, ns) = setup().await;
    let body = serde_json::to_vec(&config_map("nofm", json!({"a": "1"}))).unwrap();
    let req = http::Request::patch(format!("/api/v1/namespaces/{ns}/configmaps/nofm"))
        .header("Content-Type", "application/apply-patch+yaml")
        .body(body)
        .unwrap();
    let e = api_error(c.client().request::<ConfigMap>(req).await);
    assert_eq!(e.code, 400);
    assert_eq!(e.reason, "BadRequest");
}

#[tokio::test]
async fn non_apply_writes_record_update_entries_that_applies_conflict_with() {
    let (_c, api, _ns) = setup().await;
    let pp_create = PostParams {
        field_manager: Some("creator".into()),
        ..Default::default()
    };
    let created = api.create(&pp_create, &cm("upd", &[])).await.unwrap();
    let e = entry(&created.metadata.managed_fields, "creator", "Update")
        .expect("an Update entry for the creator");
    assert_eq!(fields_v1(e), json!({"f:data": {".": {}, "f:k": {}}}));
    let merged = api
        .patch(
            "upd",
            &PatchParams {
                field_manager: Some("patcher".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({"data": {"p": "1"}})),
        )
        .await
        .unwrap();
    let e = entry(&merged.metadata.managed_fields, "patcher", "Update").expect("patcher entry");
    assert_eq!(fields_v1(e), json!({"f:data": {"f:p": {}}}));
    let err = api_error(
        api.patch(
            "upd",
            &pp("alice"),
            &Patch::Apply(config_map("upd", json!({"k": "changed"}))),
        )
        .await,
    );
    assert_eq!(err.code, 409);
    assert_eq!(err.reason, "Conflict");
    assert!(
        err.message.contains("conflict with \"creator\""),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn fields_no_longer_applied_are_removed() {
    let (_c, api, _ns) = setup().await;
    let both = config_map("rm", json!({"a": "1", "b": "2"}));
    api.patch("rm", &pp("alice"), &Patch::Apply(both))
        .await
        .unwrap();
    let mut only_b = config_map("rm", json!({"b": "2"}));
    only_b["metadata"]["labels"] = json!({"l": "x"});
    let out = api
        .patch("rm", &pp("alice"), &Patch::Apply(only_b))
        .await
        .unwrap();
    let data = out.data.unwrap();
    assert!(!data.contains_key("a"), "a is no longer applied: {data:?}");
    assert_eq!(data["b"], "2");
    let e = entry(&out.metadata.managed_fields, "alice", "Apply").unwrap();
    assert_eq!(
        fields_v1(e),
        json!({"f:data": {"f:b": {}}, "f:metadata": {"f:labels": {"f:l": {}}}})
    );
    let out = api
        .patch(
            "rm",
            &pp("alice"),
            &Patch::Apply(config_map("rm", json!({"b": "2"}))),
        )
        .await
        .unwrap();
    assert!(out.metadata.labels.unwrap_or_default().is_empty());
}

#[tokio::test]
async fn conflicting_apply_is_refused_and_force_takes_ownership() {
    let (_c, api, _ns) = setup().await;
    api.patch(
        "cf",
        &pp("alice"),
        &Patch::Apply(config_map("cf", json!({"a": "1", "mine": "x"}))),
    )
    .await
    .unwrap();
    let err = api_error(
        api.patch(
            "cf",
            &pp("bob"),
            &Patch::Apply(config_map("cf", json!({"a": "2"}))),
        )
        .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .data.a"
    );
    let causes = err.details.as_ref().map(|d| d.causes.clone()).unwrap();
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].field, ".data.a");
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].message, "conflict with \"alice\"");
    assert_eq!(
        api.get("cf").await.unwrap().data.unwrap()["a"],
        "1",
        "a refused apply changes nothing"
    );
    let forced = api
        .patch(
            "cf",
            &pp("bob").force(),
            &Patch::Apply(config_map("cf", json!({"a": "2"}))),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["a"], "2");
    let mf = &forced.metadata.managed_fields;
    assert_eq!(
        fields_v1(entry(mf, "alice", "Apply").unwrap()),
        json!({"f:data": {"f:mine": {}}})
    );
    assert_eq!(
        fields_v1(entry(mf, "bob", "Apply").unwrap()),
        json!({"f:data": {"f:a": {}}})
    );
}

#[tokio::test]
async fn appliers_of_the_same_value_share_a_field() {
    let (_c, api, _ns) = setup().await;
    let cfg = config_map("sh", json!({"a": "1"}));
    api.patch("sh", &pp("alice"), &Patch::Apply(cfg.clone()))
        .await
        .unwrap();
    let shared = api
        .patch("sh", &pp("bob"), &Patch::Apply(cfg))
        .await
        .unwrap();
    let mf = &shared.metadata.managed_fields;
    assert!(entry(mf, "alice", "Apply").is_some() && entry(mf, "bob", "Apply").is_some());
    // Changing a shared field conflicts with the other owner.
    let err = api_error(
        api.patch(
            "sh",
            &pp("bob"),
            &Patch::Apply(config_map("sh", json!({"a": "2"}))),
        )
        .await,
    );
    assert_eq!(err.code, 409);
    // One owner stops applying it: the field stays, owned by the other.
    let after = api
        .patch(
            "sh",
            &pp("alice"),
            &Patch::Apply(config_map("sh", json!({"z": "9"}))),
        )
        .await
        .unwrap();
    assert_eq!(after.data.as_ref().unwrap()["a"], "1");
    let mf = &after.metadata.managed_fields;
    assert_eq!(
        fields_v1(entry(mf, "bob", "Apply").unwrap()),
        json!({"f:data": {"f:a": {}}})
    );
}

#[tokio::test]
async fn finalizers_are_a_set_each_applier_owns_its_own_items() {
    let (_c, api, _ns) = setup().await;
    let with = |f: &str| {
        let mut c = config_map("fin", json!({"a": "1"}));
        c["metadata"]["finalizers"] = json!([f]);
        c
    };
    api.patch(
        "fin",
        &pp("alice"),
        &Patch::Apply(with("example.com/alice")),
    )
    .await
    .unwrap();
    let both = api
        .patch("fin", &pp("bob"), &Patch::Apply(with("example.com/bob")))
        .await
        .unwrap();
    assert_eq!(
        both.metadata.finalizers.clone().unwrap_or_default(),
        ["example.com/alice", "example.com/bob"]
    );
    let bob = fields_v1(entry(&both.metadata.managed_fields, "bob", "Apply").unwrap());
    assert_eq!(
        bob["f:metadata"]["f:finalizers"],
        json!({"v:\"example.com/bob\"": {}})
    );
    for m in ["alice", "bob"] {
        api.patch(
            "fin",
            &pp(m),
            &Patch::Apply(config_map("fin", json!({"a": "1"}))),
        )
        .await
        .unwrap();
    }
    let none = api.get("fin").await.unwrap();
    assert!(none.metadata.finalizers.unwrap_or_default().is_empty());
}

/// A test CRD with a list-map, a set, an atomic list and a status subresource.
fn gadget_crd_yaml(group: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: gadgets, singular: gadget, kind: Gadget}}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {{status: {{}}}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {{type: integer}}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {{type: string}}
                    port: {{type: integer}}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {{type: string}}
              args:
                type: array
                items: {{type: string}}
          status:
            type: object
            properties:
              phase: {{type: string}}
"#
    )
}

struct Gadgets {
    _cluster: TestCluster,
    api: Api<DynamicObject>,
    api_version: String,
}

async fn gadgets() -> Gadgets {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("ssacrd").await;
    let group = format!("{}.apply.granary.dev", cluster.object_selector);
    let client = cluster.client();
    cluster.apply_yaml(&client, &gadget_crd_yaml(&group)).await;
    let crds = ApiResource::erase::<CustomResourceDefinition>(&());
    cluster.delete_at_drop(crds, None, &format!("gadgets.{group}"));
    wait_established(&client, &format!("gadgets.{group}")).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1", "Gadget"),
        "gadgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, &ns, &ar);
    poll_until("gadgets served", || async {
        api.list(&ListParams::default()).await.is_ok()
    })
    .await;
    Gadgets {
        _cluster: cluster,
        api,
        api_version: format!("{group}/v1"),
    }
}

impl Gadgets {
    fn config(&self, name: &str, spec: Value) -> Value {
        json!({"apiVersion": self.api_version, "kind": "Gadget", "metadata": {"name": name}, "spec": spec})
    }

    async fn apply(&self, name: &str, manager: &str, body: Value) -> DynamicObject {
        self.api
            .patch(name, &pp(manager), &Patch::Apply(body))
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn list_map_items_merge_by_key_across_managers() {
    let g = gadgets().await;
    let http = json!({"ports": [{"name": "http", "port": 80}]});
    let out = g.apply("lm", "alice", g.config("lm", http)).await;
    assert_eq!(
        fields_v1(entry(&out.metadata.managed_fields, "alice", "Apply").unwrap()),
        json!({"f:spec": {"f:ports": {"k:{\"name\":\"http\"}": {".": {}, "f:name": {}, "f:port": {}}}}})
    );
    let metrics = json!({"ports": [{"name": "metrics", "port": 9090}]});
    let out = g.apply("lm", "bob", g.config("lm", metrics)).await;
    assert_eq!(
        out.data["spec"]["ports"],
        json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}])
    );
    let out = g
        .apply("lm", "alice", g.config("lm", json!({"size": 1})))
        .await;
    assert_eq!(
        out.data["spec"]["ports"],
        json!([{"name": "metrics", "port": 9090}]),
        "alice's item is gone, bob's stays"
    );
}

#[tokio::test]
async fn set_items_merge_by_value_across_managers() {
    let g = gadgets().await;
    g.apply("st", "alice", g.config("st", json!({"tags": ["a", "b"]})))
        .await;
    let out = g
        .apply("st", "bob", g.config("st", json!({"tags": ["b", "c"]})))
        .await;
    assert_eq!(out.data["spec"]["tags"], json!(["a", "b", "c"]));
    let out = g
        .apply("st", "alice", g.config("st", json!({"size": 1})))
        .await;
    assert_eq!(
        out.data["spec"]["tags"],
        json!(["b", "c"]),
        "b is still bob's"
    );
}

#[tokio::test]
async fn lists_without_a_list_type_are_atomic() {
    let g = gadgets().await;
    let out = g
        .apply("at", "alice", g.config("at", json!({"args": ["a", "b"]})))
        .await;
    assert_eq!(
        fields_v1(entry(&out.metadata.managed_fields, "alice", "Apply").unwrap()),
        json!({"f:spec": {"f:args": {}}})
    );
    let err = api_error(
        g.api
            .patch(
                "at",
                &pp("bob"),
                &Patch::Apply(g.config("at", json!({"args": ["c"]}))),
            )
            .await,
    );
    assert_eq!(err.code, 409);
    assert_eq!(err.details.unwrap().causes[0].field, ".spec.args");
    let out = g
        .api
        .patch(
            "at",
            &pp("bob").force(),
            &Patch::Apply(g.config("at", json!({"args": ["c"]}))),
        )
        .await
        .unwrap();
    assert_eq!(
        out.data["spec"]["args"],
        json!(["c"]),
        "replaced, not merged"
    );
    assert!(entry(&out.metadata.managed_fields, "alice", "Apply").is_none());
}

#[tokio::test]
async fn status_apply_touches_only_status() {
    let g = gadgets().await;
    let mut cfg = g.config("su", json!({"size": 1}));
    cfg["status"] = json!({"phase": "Ignored"});
    let out = g.apply("su", "alice", cfg).await;
    assert!(
        out.data.get("status").is_none(),
        "main endpoint ignores status"
    );
    let mut status_cfg = g.config("su", json!({"size": 5}));
    status_cfg["status"] = json!({"phase": "Ready"});
    let st = g
        .api
        .patch_status("su", &pp("ctrl"), &Patch::Apply(status_cfg))
        .await
        .unwrap();
    assert_eq!(st.data["status"]["phase"], "Ready");
    assert_eq!(st.data["spec"]["size"], 1, "/status ignores spec");
    let e = entry(&st.metadata.managed_fields, "ctrl", "Apply").unwrap();
    assert_eq!(e.subresource.as_deref(), Some("status"));
    assert_eq!(fields_v1(e), json!({"f:status": {"f:phase": {}}}));
    // The spec applier and the status applier do not conflict.
    let out = g
        .apply("su", "alice", g.config("su", json!({"size": 2})))
        .await;
    assert_eq!(out.data["status"]["phase"], "Ready");
}

#[tokio::test]
async fn kubectl_server_side_apply_conflicts_and_forces() {
    if !granary_test_support::kubectl::installed() {
        eprintln!("SKIPPED: kubectl is not installed (apt-get install kubernetes-client)");
        return;
    }
    let (c, api, ns) = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cm.yaml");
    let k = granary_test_support::kubectl::Kubectl::new(&c.garden.kubeconfig_path);
    let kubectl = |args: Vec<String>| {
        let k = &k;
        async move { k.run(&args).await }
    };
    let apply = |manager: &str, force: bool| {
        let mut args = vec![
            "apply".to_string(),
            "--server-side".into(),
            format!("--field-manager={manager}"),
            "-n".into(),
            ns.clone(),
            "-f".into(),
            file.to_string_lossy().to_string(),
        ];
        if force {
            args.push("--force-conflicts".into());
        }
        args
    };
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kc}\ndata: {a: one}\n",
    )
    .unwrap();
    let out = kubectl(apply("first", false)).await;
    assert!(out.status.success(), "{out:?}");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kc}\ndata: {a: two}\n",
    )
    .unwrap();
    let out = kubectl(apply("second", false)).await;
    assert!(!out.status.success(), "a conflicting apply fails");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("conflict"), "{stderr}");
    let out = kubectl(apply("second", true)).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(api.get("kc").await.unwrap().data.unwrap()["a"], "two");
}
