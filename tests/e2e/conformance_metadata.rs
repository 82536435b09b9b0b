//! Hostile metadata and sizes, checked through `kube::Client` as in `conformance.rs`
//! (embedded server by default, a real cluster with `GRANARY_TEST_KUBECONFIG`). Written
//! from kube-apiserver's behaviour:
//! - a body whose metadata does not decode into `ObjectMeta` is 400 BadRequest on
//!   create and update (the decoder refuses it before anything else);
//! - a merge, JSON or strategic patch whose result does not decode is 422 Invalid with
//!   the cause on the field `patch`; server-side apply of such a configuration fails in
//!   the field manager (500);
//! - well-typed but invalid values are 422 Invalid with `ValidateObjectMeta`'s field
//!   paths (`metadata.labels`, `metadata.ownerReferences.uid`, ...);
//! - bodies over 3 MiB are 413 RequestEntityTooLarge; objects over etcd's 1.5 MiB
//!   request limit fail with etcd's "request is too large" (500);
//! - after every refused write, the kind still lists through typed clients.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::{Value, json};

use granary_test_support::TestCluster;
use granary_test_support::api::{api_error, cm};
use granary_test_support::worlds::crd::{Widgets, widget, widgets};

/// Metadata Go's decoder refuses, each with the field its error names.
fn mistyped() -> Vec<(Value, &'static str)> {
    vec![
        (json!({"labels": {"a": 1}}), "labels"),
        (json!({"labels": ["a"]}), "labels"),
        (json!({"annotations": "x"}), "annotations"),
        (json!({"annotations": {"a": true}}), "annotations"),
        (json!({"finalizers": {}}), "finalizers"),
        (json!({"finalizers": [1]}), "finalizers"),
        (json!({"ownerReferences": "x"}), "ownerReferences"),
        (
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": 5}]}),
            "uid",
        ),
        (json!({"generateName": 5}), "generateName"),
    ]
}

/// `metadata` of a ConfigMap named `name` with `extra` merged in.
fn meta_with(name: &str, extra: &Value) -> Value {
    let mut meta = json!({"name": name});
    for (k, v) in extra.as_object().expect("metadata cases are objects") {
        meta[k] = v.clone();
    }
    meta
}

async fn raw(client: &kube::Client, req: http::Request<Vec<u8>>) -> Box<Status> {
    api_error(client.request::<Value>(req).await)
}

fn json_request(method: http::Method, uri: &str, body: &Value) -> http::Request<Vec<u8>> {
    http::Request::builder()
        .method(method)
        .uri(uri)
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(body).expect("JSON"))
        .expect("valid request")
}

async fn setup() -> (TestCluster, Api<ConfigMap>, String) {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("meta").await;
    let api = Api::namespaced(cluster.client(), &ns);
    (cluster, api, ns)
}

/// A typed list of the namespace still decodes and holds `names` (and nothing else).
async fn lists_exactly(api: &Api<ConfigMap>, names: &[&str]) {
    let list = api
        .list(&ListParams::default())
        .await
        .expect("typed list decodes after refused writes");
    let mut got: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n != "kube-root-ca.crt")
        .collect();
    got.sort();
    assert_eq!(got, names);
}

fn cause_fields(e: &Status) -> Vec<String> {
    e.details
        .as_ref()
        .map(|d| d.causes.iter().map(|c| c.field.clone()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn mistyped_metadata_is_refused_on_create_and_update() {
    let (c, api, ns) = setup().await;
    let client = c.client();
    let good = api
        .create(&PostParams::default(), &cm("good", &[("a", "b")]))
        .await
        .unwrap();
    let collection = format!("/api/v1/namespaces/{ns}/configmaps");
    for (i, (extra, field)) in mistyped().into_iter().enumerate() {
        let name = format!("bad-{i}");
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": meta_with(&name, &extra), "data": {"k": "v"}});
        let e = raw(
            &client,
            json_request(http::Method::POST, &collection, &body),
        )
        .await;
        assert_eq!(
            (e.code, e.reason.as_str()),
            (400, "BadRequest"),
            "create {extra}: {e:?}"
        );
        assert!(e.message.contains(field), "create {extra}: {}", e.message);

        let mut body = serde_json::to_value(&good).unwrap();
        for (k, v) in extra.as_object().unwrap() {
            body["metadata"][k] = v.clone();
        }
        let uri = format!("{collection}/good");
        let e = raw(&client, json_request(http::Method::PUT, &uri, &body)).await;
        assert_eq!(
            (e.code, e.reason.as_str()),
            (400, "BadRequest"),
            "update {extra}: {e:?}"
        );
    }
    let e = raw(
        &client,
        json_request(
            http::Method::POST,
            &collection,
            &json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": "x"}),
        ),
    )
    .await;
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"), "{e:?}");
    lists_exactly(&api, &["good"]).await;
    let kept = api.get("good").await.unwrap();
    assert_eq!(kept.metadata.labels, good.metadata.labels);
    assert_eq!(
        kept.metadata.resource_version,
        good.metadata.resource_version
    );
}

#[tokio::test]
async fn patches_that_mistype_metadata_are_invalid_on_the_patch() {
    let (_c, api, _ns) = setup().await;
    let good = api
        .create(&PostParams::default(), &cm("good", &[]))
        .await
        .unwrap();
    let pp = PatchParams::default();
    for (extra, _) in mistyped() {
        let merge = Patch::Merge(json!({"metadata": extra}));
        let ops: Vec<Value> = extra
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| json!({"op": "add", "path": format!("/metadata/{k}"), "value": v}))
            .collect();
        let json_patch: json_patch::Patch = serde_json::from_value(Value::Array(ops)).unwrap();
        let mut patches: Vec<(&str, Patch<Value>)> =
            vec![("merge", merge), ("json", Patch::Json(json_patch))];
        // A strategic merge of a list goes through merge-key handling first, whose
        // errors kube-apiserver does not all answer as 422: only non-lists here.
        if !extra.as_object().unwrap().values().any(Value::is_array) {
            patches.push(("strategic", Patch::Strategic(json!({"metadata": extra}))));
        }
        for (kind, patch) in &patches {
            let e = api_error(api.patch("good", &pp, patch).await);
            assert_eq!(
                (e.code, e.reason.as_str()),
                (422, "Invalid"),
                "{kind} {extra}: {e:?}"
            );
            assert_eq!(cause_fields(&e), ["patch"], "{kind} {extra}");
        }
        let mut config =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta_with("good", &extra)});
        config["data"] = json!({"k": "v"});
        let e = api_error(
            api.patch(
                "good",
                &PatchParams::apply("meta-test").force(),
                &Patch::Apply(&config),
            )
            .await,
        );
        assert_eq!(e.code, 500, "apply {extra}: {e:?}");
    }
    lists_exactly(&api, &["good"]).await;
    let kept = api.get("good").await.unwrap();
    assert_eq!(
        kept.metadata.resource_version,
        good.metadata.resource_version
    );
}

/// Well-typed metadata kube-apiserver's `ValidateObjectMeta` refuses: (metadata, the
/// field of the cause, a part of its message).
fn invalid_values() -> Vec<(Value, &'static str, &'static str)> {
    let qualified = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    vec![
        (
            json!({"labels": {"bad key!": "v"}}),
            "metadata.labels",
            qualified,
        ),
        (json!({"labels": {"-a": "v"}}), "metadata.labels", qualified),
        (
            json!({"labels": {"Bad.Prefix/a": "v"}}),
            "metadata.labels",
            "prefix part a lowercase RFC 1123 subdomain",
        ),
        (
            json!({"labels": {"k": "x".repeat(64)}}),
            "metadata.labels",
            "must be no more than 63 characters",
        ),
        (
            json!({"labels": {"k": "no spaces"}}),
            "metadata.labels",
            "a valid label must be an empty string",
        ),
        (
            json!({"annotations": {"a/b/c": "v"}}),
            "metadata.annotations",
            "a qualified name must consist",
        ),
        (
            json!({"annotations": {"big": "x".repeat(256 * 1024)}}),
            "metadata.annotations",
            "Too long: must have at most 262144 bytes",
        ),
        (
            json!({"finalizers": ["no spaces"]}),
            "metadata.finalizers",
            qualified,
        ),
        (
            json!({"finalizers": [""]}),
            "metadata.finalizers",
            "name part must be non-empty",
        ),
        (
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": ""}]}),
            "metadata.ownerReferences.uid",
            "uid must not be empty",
        ),
        (
            json!({"ownerReferences": [{"apiVersion": "", "kind": "ConfigMap", "name": "o", "uid": "1"}]}),
            "metadata.ownerReferences.apiVersion",
            "version must not be empty",
        ),
        (
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "", "name": "o", "uid": "1"}]}),
            "metadata.ownerReferences.kind",
            "kind must not be empty",
        ),
        (
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "", "uid": "1"}]}),
            "metadata.ownerReferences.name",
            "name must not be empty",
        ),
    ]
}

fn assert_invalid(e: &Status, field: &str, text: &str, what: &str) {
    assert_eq!(
        (e.code, e.reason.as_str()),
        (422, "Invalid"),
        "{what}: {e:?}"
    );
    assert!(cause_fields(e).iter().any(|f| f == field), "{what}: {e:?}");
    assert!(e.message.contains(text), "{what}: {}", e.message);
}

#[tokio::test]
async fn invalid_metadata_values_are_422_with_field_paths() {
    let (_c, api, _ns) = setup().await;
    let good = api
        .create(&PostParams::default(), &cm("good", &[]))
        .await
        .unwrap();
    for (i, (extra, field, text)) in invalid_values().into_iter().enumerate() {
        let what = format!(
            "{field} {}",
            &extra.to_string()[..extra.to_string().len().min(80)]
        );
        let mut obj = serde_json::to_value(cm(&format!("bad-{i}"), &[])).unwrap();
        for (k, v) in extra.as_object().unwrap() {
            obj["metadata"][k] = v.clone();
        }
        let obj: ConfigMap = serde_json::from_value(obj).unwrap();
        let e = api_error(api.create(&PostParams::default(), &obj).await);
        assert_invalid(&e, field, text, &format!("create {what}"));

        let e = api_error(
            api.patch(
                "good",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": extra})),
            )
            .await,
        );
        assert_invalid(&e, field, text, &format!("merge patch {what}"));

        let mut update = serde_json::to_value(&good).unwrap();
        for (k, v) in extra.as_object().unwrap() {
            update["metadata"][k] = v.clone();
        }
        let update: ConfigMap = serde_json::from_value(update).unwrap();
        let e = api_error(api.replace("good", &PostParams::default(), &update).await);
        assert_invalid(&e, field, text, &format!("update {what}"));
    }
    lists_exactly(&api, &["good"]).await;
}

#[tokio::test]
async fn valid_metadata_at_the_limits_is_accepted() {
    let (_c, api, _ns) = setup().await;
    let mut obj = cm("edge", &[]);
    obj.metadata.labels = Some(BTreeMap::from([
        ("example.com/key".to_string(), "x".repeat(63)),
        ("k".repeat(63), String::new()),
        ("A_b.c-1".to_string(), "V_1.x".to_string()),
    ]));
    // The size counts keys and values together: exactly at the limit.
    obj.metadata.annotations = Some(BTreeMap::from([(
        "Example.com/Note".to_string(),
        "x".repeat(256 * 1024 - "Example.com/Note".len()),
    )]));
    obj.metadata.finalizers = Some(vec!["example.com/hold".to_string()]);
    let owner = api
        .create(&PostParams::default(), &cm("owner", &[]))
        .await
        .unwrap();
    obj.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "owner".into(),
        uid: owner.metadata.uid.clone().unwrap(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(created.metadata.labels, obj.metadata.labels);
    lists_exactly(&api, &["edge", "owner"]).await;
    api.patch(
        "edge",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn custom_objects_and_status_refuse_mistyped_metadata() {
    let w: Widgets = widgets("Namespaced").await;
    let good = w
        .api
        .create(
            &PostParams::default(),
            &widget(&w, "good", json!({"size": 1})),
        )
        .await
        .unwrap();
    let mut bad = serde_json::to_value(widget(&w, "bad", json!({"size": 1}))).unwrap();
    bad["metadata"]["labels"] = json!({"a": 1});
    let collection = format!("/apis/{}/v1/namespaces/{}/widgets", w.group, w.ns);
    let client = w.cluster.client();
    let e = raw(&client, json_request(http::Method::POST, &collection, &bad)).await;
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"), "{e:?}");

    let mut status = serde_json::to_value(&good).unwrap();
    status["status"] = json!({"phase": "Ready"});
    status["metadata"]["finalizers"] = json!({});
    let uri = format!("{collection}/good/status");
    let e = raw(&client, json_request(http::Method::PUT, &uri, &status)).await;
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"), "{e:?}");

    let patch =
        Patch::Merge(json!({"metadata": {"ownerReferences": "x"}, "status": {"phase": "Ready"}}));
    let e = api_error(
        w.api
            .patch_status("good", &PatchParams::default(), &patch)
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{e:?}");
    assert_eq!(cause_fields(&e), ["patch"]);
    let e = api_error(w.api.patch("good", &PatchParams::default(), &patch).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{e:?}");

    let list = w.api.list(&ListParams::default()).await.unwrap();
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, ["good"]);
    let kept: DynamicObject = w.api.get("good").await.unwrap();
    assert_eq!(
        kept.metadata.resource_version,
        good.metadata.resource_version
    );
}

#[tokio::test]
async fn secret_and_config_map_payloads_must_decode() {
    let (c, api, ns) = setup().await;
    let client = c.client();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let uri = format!("/api/v1/namespaces/{ns}/secrets");
    let secret = |name: &str, data: Value| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data});
    for data in [json!({"k": "not base64!"}), json!({"k": 1}), json!(["x"])] {
        let e = raw(
            &client,
            json_request(http::Method::POST, &uri, &secret("bad", data.clone())),
        )
        .await;
        assert_eq!(
            (e.code, e.reason.as_str()),
            (400, "BadRequest"),
            "{data}: {e:?}"
        );
    }
    // Go's decoder takes line breaks in base64; what is read back is canonical.
    let wrapped = secret("good", json!({"k": "c2Vj\ncmV0"}));
    client
        .request::<Value>(json_request(http::Method::POST, &uri, &wrapped))
        .await
        .unwrap();
    let patch = Patch::Merge(json!({"data": {"k": "%%%"}}));
    let e = api_error(secrets.patch("good", &PatchParams::default(), &patch).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{e:?}");
    assert_eq!(cause_fields(&e), ["patch"]);
    let list = secrets.list(&ListParams::default()).await.unwrap();
    let good = list
        .items
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("good"))
        .expect("the good secret lists");
    let value = good.data.as_ref().and_then(|d| d.get("k")).unwrap();
    assert_eq!(value.0, b"secret");

    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "data": {"k": 1}});
    let e = raw(&client, json_request(http::Method::POST, &cms, &body)).await;
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"), "{e:?}");
    lists_exactly(&api, &[]).await;
}

/// kube-apiserver reads at most 3 MiB of a request body.
const MAX_BODY: usize = 3 * 1024 * 1024;

#[tokio::test]
async fn request_bodies_over_3_mib_are_413() {
    let (_c, api, _ns) = setup().await;
    let mut big = cm("big", &[]);
    big.data = Some(BTreeMap::from([("k".to_string(), "x".repeat(MAX_BODY))]));
    let e = api_error(api.create(&PostParams::default(), &big).await);
    assert_eq!(
        (e.code, e.reason.as_str()),
        (413, "RequestEntityTooLarge"),
        "{e:?}"
    );
    assert!(e.message.contains("limit is 3145728"), "{}", e.message);

    api.create(&PostParams::default(), &cm("small", &[]))
        .await
        .unwrap();
    let patch = Patch::Merge(json!({"data": {"k": "x".repeat(MAX_BODY)}}));
    let e = api_error(api.patch("small", &PatchParams::default(), &patch).await);
    assert_eq!(
        (e.code, e.reason.as_str()),
        (413, "RequestEntityTooLarge"),
        "{e:?}"
    );
    lists_exactly(&api, &["small"]).await;
}

#[tokio::test]
async fn objects_over_etcds_request_limit_are_refused() {
    let w = widgets("Namespaced").await;
    // Under etcd's 1.5 MiB: stored.
    let spec = json!({"size": 1, "extra": {"blob": "x".repeat(1024 * 1024)}});
    w.api
        .create(&PostParams::default(), &widget(&w, "fits", spec))
        .await
        .unwrap();
    // Over it, yet under the 3 MiB request limit: etcd refuses the write.
    let spec = json!({"size": 1, "extra": {"blob": "x".repeat(2 * 1024 * 1024)}});
    let e = api_error(
        w.api
            .create(&PostParams::default(), &widget(&w, "huge", spec))
            .await,
    );
    assert_eq!(e.code, 500, "{e:?}");
    assert!(e.message.contains("request is too large"), "{}", e.message);

    let grow = Patch::Merge(json!({"spec": {"extra": {"more": "y".repeat(1024 * 1024)}}}));
    let e = api_error(w.api.patch("fits", &PatchParams::default(), &grow).await);
    assert_eq!(e.code, 500, "{e:?}");
    assert!(e.message.contains("request is too large"), "{}", e.message);

    let list = w.api.list(&ListParams::default()).await.unwrap();
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, ["fits"]);
    assert!(list.items[0].data["spec"]["extra"].get("more").is_none());
}

/// A PATCH with a content type that is no patch type: 415 UnsupportedMediaType listing
/// the patch types the server takes, as kube-apiserver's
/// `negotiation.NewUnsupportedMediaTypeError(patchTypes)` does (#20).
#[tokio::test]
async fn an_unsupported_patch_type_lists_the_patch_types() {
    let (cluster, api, ns) = setup().await;
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("p415".into());
    api.create(&Default::default(), &cm).await.expect("create");
    let status = raw(
        &cluster.client(),
        json_request(
            http::Method::PATCH,
            &format!("/api/v1/namespaces/{ns}/configmaps/p415"),
            &serde_json::json!({"data": {"a": "b"}}),
        ),
    )
    .await;
    assert_eq!(status.code, 415, "{status:?}");
    assert_eq!(status.reason, "UnsupportedMediaType");
    for accepted in [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ] {
        assert!(status.message.contains(accepted), "{}", status.message);
    }
}
