//! Server-side dry run (`dryRun=All`), as kube-apiserver answers it: every write verb
//! answers what the real request would (validation, defaulting, 409 and 422 included)
//! while nothing is stored, the resourceVersion does not move and no watch event is
//! sent. Unknown dryRun values are refused.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};

use granary_test_support::TestCluster;
use granary_test_support::api::{api_error, cm};
use granary_test_support::kubectl::{self, Kubectl};

fn dry_post() -> PostParams {
    PostParams {
        dry_run: true,
        ..Default::default()
    }
}

fn dry_delete() -> DeleteParams {
    DeleteParams {
        dry_run: true,
        ..Default::default()
    }
}

fn data(c: &ConfigMap) -> BTreeMap<String, String> {
    c.data.clone().unwrap_or_default()
}

/// Every write verb with dryRun=All answers like the real write and changes nothing: the
/// stored object and its resourceVersion stay, and the watch opened before sees only the
/// real write made after them.
#[tokio::test]
async fn dry_run_writes_answer_like_real_ones_and_change_nothing() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("dry").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let kept = api
        .create(&PostParams::default(), &cm("kept", &[("app", "dry")]))
        .await
        .expect("create");
    let kept_rv = kept.metadata.resource_version.clone().expect("rv");
    let list = api.list(&ListParams::default()).await.expect("list");
    let list_rv = list.metadata.resource_version.clone().expect("list rv");
    let mut events = api
        .watch(&WatchParams::default(), &list_rv)
        .await
        .expect("watch")
        .boxed();

    // create: the answer is the object as it would be created, with a uid and
    // defaults, but without a resourceVersion; it is not there afterwards.
    let made = api
        .create(&dry_post(), &cm("ghost", &[]))
        .await
        .expect("dry-run create");
    assert_eq!(made.metadata.name.as_deref(), Some("ghost"));
    assert!(made.metadata.uid.is_some(), "{made:?}");
    assert!(made.metadata.creation_timestamp.is_some(), "{made:?}");
    assert_eq!(made.metadata.resource_version, None, "{made:?}");
    assert_eq!(api_error(api.get("ghost").await).code, 404);
    // create: the same errors as a real create.
    assert_eq!(
        api_error(api.create(&dry_post(), &cm("kept", &[])).await).code,
        409
    );
    assert_eq!(
        api_error(api.create(&dry_post(), &cm("Not_A_Name", &[])).await).code,
        422
    );

    // update: answers the new data, stores nothing; a stale resourceVersion is 409.
    let mut changed = kept.clone();
    changed.data = Some(BTreeMap::from([("k".into(), "updated".into())]));
    let updated = api
        .replace("kept", &dry_post(), &changed)
        .await
        .expect("dry-run update");
    assert_eq!(data(&updated)["k"], "updated");
    let mut stale = changed.clone();
    stale.metadata.resource_version = Some("1".into());
    assert_eq!(
        api_error(api.replace("kept", &dry_post(), &stale).await).code,
        409
    );

    // merge patch and server-side apply.
    let patched = api
        .patch(
            "kept",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"data": {"k": "patched"}})),
        )
        .await
        .expect("dry-run patch");
    assert_eq!(data(&patched)["k"], "patched");
    let applied = api
        .patch(
            "kept",
            &PatchParams::apply("dry-test").force().dry_run(),
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kept"}, "data": {"k": "applied"},
            })),
        )
        .await
        .expect("dry-run apply");
    assert_eq!(data(&applied)["k"], "applied");
    let fresh = api
        .patch(
            "applied-ghost",
            &PatchParams::apply("dry-test").dry_run(),
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "applied-ghost"}, "data": {"a": "b"},
            })),
        )
        .await
        .expect("dry-run apply that would create");
    assert_eq!(fresh.metadata.name.as_deref(), Some("applied-ghost"));
    assert_eq!(api_error(api.get("applied-ghost").await).code, 404);

    // delete and deletecollection.
    let gone = api.delete("kept", &dry_delete()).await.expect("dry delete");
    let gone = gone.left().expect("an immediate delete answers the object");
    assert_eq!(gone.metadata.name.as_deref(), Some("kept"));
    assert_eq!(
        api_error(api.delete("ghost", &dry_delete()).await).code,
        404
    );
    api.delete_collection(&dry_delete(), &ListParams::default())
        .await
        .expect("dry-run deletecollection");

    let now = api.get("kept").await.expect("still there");
    assert_eq!(now.metadata.resource_version.as_deref(), Some(&*kept_rv));
    assert_eq!(data(&now)["k"], "v");
    assert!(now.metadata.deletion_timestamp.is_none());
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names, ["kept"]);

    // The first event the watch sees is the real write made after all of the above.
    api.create(&PostParams::default(), &cm("marker", &[]))
        .await
        .expect("real create");
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), events.next())
        .await
        .expect("an event within the deadline")
        .expect("stream open")
        .expect("event decodes");
    match first {
        WatchEvent::Added(c) => assert_eq!(c.metadata.name.as_deref(), Some("marker")),
        other => panic!("a dry run reached the watch: {other:?}"),
    }
}

/// `dryRun` takes only `All`: anything else is refused on every write verb, naming the
/// field, and nothing is written.
#[tokio::test]
async fn unknown_dry_run_values_are_refused() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("dryv").await;
    let client = cluster.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let body = serde_json::to_vec(&cm("v1", &[])).unwrap();
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    for (method, uri, ct, options) in [
        (
            http::Method::POST,
            format!("{base}?dryRun=Yes"),
            "application/json",
            "CreateOptions",
        ),
        (
            http::Method::PUT,
            format!("{base}/v1?dryRun=All&dryRun=Some"),
            "application/json",
            "UpdateOptions",
        ),
        (
            http::Method::PATCH,
            format!("{base}/v1?dryRun=true"),
            "application/merge-patch+json",
            "PatchOptions",
        ),
        (
            http::Method::DELETE,
            format!("{base}/v1?dryRun=x"),
            "application/json",
            "DeleteOptions",
        ),
    ] {
        let req = http::Request::builder()
            .method(method.clone())
            .uri(uri)
            .header("Content-Type", ct)
            .body(body.clone())
            .unwrap();
        let status = api_error(client.request::<Value>(req).await);
        assert_eq!(status.code, 422, "{method}: {status:?}");
        assert!(
            status.message.contains(options) && status.message.contains("dryRun"),
            "{method}: {}",
            status.message
        );
    }
    assert_eq!(api_error(api.get("v1").await).code, 404);
}

/// kubectl's `--dry-run=server` on create and on server-side apply persists nothing.
#[tokio::test]
async fn kubectl_server_dry_run_persists_nothing() {
    if !kubectl::available() {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let cluster = TestCluster::start().await;
    if !cluster.is_embedded() {
        return;
    }
    let ns = cluster.namespace("dryk").await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::new(&cluster.garden.kubeconfig_path)
        .private_cache()
        .namespace(&ns);
    let out = k
        .ok(&[
            "create",
            "configmap",
            "k1",
            "--from-literal=a=b",
            "--dry-run=server",
            "-o",
            "jsonpath={.data.a}",
        ])
        .await;
    assert_eq!(out, "b");
    let manifest = dir.path().join("cm.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k2}\ndata: {a: b}\n",
    )
    .unwrap();
    let out = k
        .ok(&[
            "apply",
            "--server-side",
            "--dry-run=server",
            "-f",
            manifest.to_str().unwrap(),
        ])
        .await;
    assert!(out.contains("k2"), "{out}");
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    assert_eq!(api_error(api.get("k1").await).code, 404);
    assert_eq!(api_error(api.get("k2").await).code, 404);
    // delete, and client-side apply (a patch), of an existing object.
    let kept = api
        .create(&PostParams::default(), &cm("k3", &[]))
        .await
        .expect("create");
    k.ok(&["delete", "configmap", "k3", "--dry-run=server"])
        .await;
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k3}\ndata: {k: changed}\n",
    )
    .unwrap();
    k.ok(&[
        "apply",
        "--dry-run=server",
        "-f",
        manifest.to_str().unwrap(),
    ])
    .await;
    let now = api.get("k3").await.expect("still there");
    assert_eq!(
        now.metadata.resource_version,
        kept.metadata.resource_version
    );
    assert_eq!(data(&now)["k"], "v");
}
