//! What kubectl's imperative `create` subcommands send is taken, and answers are only
//! ever in a media type the client accepts: JSON, or 406 NotAcceptable when the client
//! takes no JSON (as kube-apiserver answers a type it cannot produce).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::Api;

use granary_test_support::TestCluster;
use granary_test_support::api::api_error;
use granary_test_support::kubectl::{self, Kubectl};

#[tokio::test]
async fn answers_are_json_or_not_acceptable() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let get = |accept: &'static str| {
        http::Request::builder()
            .uri("/api/v1/namespaces/default/configmaps")
            .header("Accept", accept)
            .body(Vec::new())
            .unwrap()
    };
    let status = api_error(
        client
            .request::<serde_json::Value>(get("application/vnd.kubernetes.protobuf"))
            .await,
    );
    assert_eq!((status.code, &*status.reason), (406, "NotAcceptable"));
    assert!(
        status.message.contains("application/json"),
        "{}",
        status.message
    );
    let (parts, body) = get("application/vnd.kubernetes.protobuf, application/json").into_parts();
    let both = client
        .send(http::Request::from_parts(
            parts,
            kube::client::Body::from(body),
        ))
        .await
        .expect("an answer");
    assert_eq!(both.status(), 200);
    assert_eq!(
        both.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
}

/// `kubectl create deployment|job|cronjob|service clusterip|configmap|secret generic`
/// against the server; the objects read back with what kubectl put in them.
///
/// Runs with `$GRANARY_KUBECTL` only (scripts/test.sh sets it to kubectl 1.20, which
/// sends these objects as JSON); `kubectl_protobuf.rs` runs the kubectl on PATH, which
/// (from 1.2x on) sends them as protobuf.
#[tokio::test]
async fn kubectl_create_generators_work() {
    let explicit = kubectl::kubectl_bin().1;
    if !explicit {
        eprintln!("SKIPPED: GRANARY_KUBECTL is not set");
        return;
    }
    if !kubectl::available() {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let cluster = TestCluster::start().await;
    if !cluster.is_embedded() {
        return;
    }
    let ns = cluster.namespace("gen").await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::new(&cluster.garden.kubeconfig_path)
        .private_cache()
        .namespace(&ns);
    k.ok(&["create", "deployment", "d1", "--image=nginx"]).await;
    k.ok(&["create", "job", "j1", "--image=busybox"]).await;
    let cronjob = [
        "create",
        "cronjob",
        "c1",
        "--image=busybox",
        "--schedule=*/5 * * * *",
    ];
    // kubectl before 1.21 generates batch/v1beta1 CronJobs, which kube-apiserver stopped
    // serving in 1.25: its generated object is created as batch/v1 instead.
    let generated = k
        .ok(&[&cronjob[..], &["--dry-run=client", "-o", "json"]].concat())
        .await;
    let mut generated: serde_json::Value = serde_json::from_str(&generated).expect("JSON");
    if generated["apiVersion"] == "batch/v1beta1" {
        generated["apiVersion"] = "batch/v1".into();
        let path = dir.path().join("cronjob.json");
        std::fs::write(&path, generated.to_string()).unwrap();
        k.ok(&["create", "-f", path.to_str().unwrap()]).await;
    } else {
        k.ok(&cronjob).await;
    }
    k.ok(&["create", "service", "clusterip", "s1", "--tcp=80:8080"])
        .await;
    k.ok(&["create", "configmap", "cm1", "--from-literal=a=b"])
        .await;
    k.ok(&["create", "secret", "generic", "sec1", "--from-literal=k=v"])
        .await;

    let client = cluster.client();
    let d: Deployment = Api::namespaced(client.clone(), &ns)
        .get("d1")
        .await
        .unwrap();
    let pod = d.spec.expect("spec").template.spec.expect("pod spec");
    assert_eq!(pod.containers[0].image.as_deref(), Some("nginx"));
    let j: Job = Api::namespaced(client.clone(), &ns)
        .get("j1")
        .await
        .unwrap();
    let pod = j.spec.expect("spec").template.spec.expect("pod spec");
    assert_eq!(pod.containers[0].image.as_deref(), Some("busybox"));
    let c: CronJob = Api::namespaced(client.clone(), &ns)
        .get("c1")
        .await
        .unwrap();
    assert_eq!(c.spec.expect("spec").schedule, "*/5 * * * *");
    let s: Service = Api::namespaced(client.clone(), &ns)
        .get("s1")
        .await
        .unwrap();
    let port = &s.spec.expect("spec").ports.expect("ports")[0];
    assert_eq!(port.port, 80);
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080))
    );
    let cm: ConfigMap = Api::namespaced(client.clone(), &ns)
        .get("cm1")
        .await
        .unwrap();
    assert_eq!(cm.data.expect("data")["a"], "b");
    let sec: Secret = Api::namespaced(client.clone(), &ns)
        .get("sec1")
        .await
        .unwrap();
    assert_eq!(sec.data.expect("data")["k"].0, b"v");
    let listed = k
        .ok(&["get", "deployments,jobs,cronjobs,services", "-o", "name"])
        .await;
    for name in [
        "deployment.apps/d1",
        "job.batch/j1",
        "cronjob.batch/c1",
        "service/s1",
    ] {
        assert!(listed.contains(name), "{listed}");
    }
}

/// GET `path` with `accept`: the content type, the Vary header and the JSON body.
async fn discovery_get(
    client: &kube::Client,
    path: &str,
    accept: &str,
) -> (String, Option<String>, serde_json::Value) {
    let request = http::Request::builder()
        .uri(path)
        .header("Accept", accept)
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let response = client.send(request).await.expect("an answer");
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    let vary = response
        .headers()
        .get("vary")
        .map(|v| v.to_str().unwrap().to_string());
    let body = response.into_body().collect_bytes().await.expect("a body");
    let json: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    (content_type, vary, json)
}

/// Aggregated discovery: `/api` and `/apis` with kubectl's `Accept` (v2 first, then
/// v2beta1, then the legacy document) answer one `APIGroupDiscoveryList` with its own
/// content type, as kube-apiserver ≥ 1.30 does; without it, the legacy documents.
#[tokio::test]
async fn aggregated_discovery_is_served_to_clients_that_ask_for_it() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    const KUBECTL: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    let (ct, vary, apis) = discovery_get(&client, "/apis", KUBECTL).await;
    assert_eq!(
        ct.replace(' ', ""),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert!(vary.is_some_and(|v| v.contains("Accept")), "Vary: Accept");
    assert_eq!(apis["kind"], "APIGroupDiscoveryList");
    assert_eq!(apis["apiVersion"], "apidiscovery.k8s.io/v2");
    let apps = apis["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|g| g["metadata"]["name"] == "apps")
        .expect("the apps group");
    let v1 = apps["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .find(|v| v["version"] == "v1")
        .expect("apps/v1");
    let deployments = v1["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == "deployments")
        .expect("deployments");
    assert_eq!(
        deployments["responseKind"],
        serde_json::json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    assert_eq!(deployments["scope"], "Namespaced");
    assert_eq!(deployments["singularResource"], "deployment");
    let subresources: Vec<&str> = deployments["subresources"]
        .as_array()
        .expect("subresources")
        .iter()
        .filter_map(|s| s["subresource"].as_str())
        .collect();
    assert!(
        subresources.contains(&"scale") && subresources.contains(&"status"),
        "{subresources:?}"
    );
    // The core group, at /api.
    let (ct, _, api) = discovery_get(&client, "/api", KUBECTL).await;
    assert!(ct.contains("as=APIGroupDiscoveryList"), "{ct}");
    let core = &api["items"][0];
    assert!(
        core["metadata"].get("name").is_none_or(|n| n == ""),
        "{core}"
    );
    let configmaps = core["versions"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == "configmaps")
        .expect("configmaps");
    assert_eq!(configmaps["responseKind"]["kind"], "ConfigMap");
    // v2beta1 when only that is asked for; the legacy list without the parameters.
    let (ct, _, beta) = discovery_get(
        &client,
        "/apis",
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
    )
    .await;
    assert!(ct.contains("v=v2beta1"), "{ct}");
    assert_eq!(beta["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    let (ct, _, legacy) = discovery_get(&client, "/apis", "application/json").await;
    assert!(ct.starts_with("application/json"), "{ct}");
    assert!(!ct.contains("apidiscovery"), "{ct}");
    assert_eq!(legacy["kind"], "APIGroupList");
}

/// Server-side field validation, as kube-apiserver: `fieldValidation=Strict` refuses a
/// field the kind does not declare (400 for a create, 422 for a patch, naming it),
/// `Warn` (the default) stores the object without it and says so in a `Warning` header,
/// `Ignore` says nothing; the OpenAPI document names the parameter, so kubectl validates
/// on the server.
#[tokio::test]
async fn unknown_fields_are_refused_warned_about_or_ignored() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("fv").await;
    let client = cluster.client();
    let send = |method: &'static str, query: &'static str, name: &str, body: serde_json::Value| {
        let client = client.clone();
        let (uri, content_type) = if method == "POST" {
            (
                format!("/api/v1/namespaces/{ns}/configmaps{query}"),
                "application/json",
            )
        } else {
            (
                format!("/api/v1/namespaces/{ns}/configmaps/{name}{query}"),
                "application/strategic-merge-patch+json",
            )
        };
        async move {
            let request = http::Request::builder()
                .method(method)
                .uri(uri)
                .header("Content-Type", content_type)
                .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
                .unwrap();
            let response = client.send(request).await.expect("an answer");
            let status = response.status().as_u16();
            let warnings: Vec<String> = response
                .headers()
                .get_all("warning")
                .iter()
                .map(|v| v.to_str().unwrap().to_string())
                .collect();
            let body = response.into_body().collect_bytes().await.expect("body");
            let json: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
            (status, warnings, json)
        }
    };
    let cm = |name: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name}, "data": {"a": "b"}, "colour": "red"})
    };
    let (status, _, refused) = send("POST", "?fieldValidation=Strict", "", cm("strict")).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(
        refused["message"],
        "strict decoding error: unknown field \"colour\""
    );
    let (status, warnings, created) = send("POST", "", "", cm("warned")).await;
    assert_eq!(status, 201, "{created}");
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("299 ") && w.contains(r#"unknown field \"colour\""#)),
        "{warnings:?}"
    );
    assert!(created.get("colour").is_none(), "not stored: {created}");
    let (status, warnings, _) = send("POST", "?fieldValidation=Ignore", "", cm("ignored")).await;
    assert_eq!((status, warnings.len()), (201, 0));
    let (status, _, bad) = send("POST", "?fieldValidation=Maybe", "", cm("bad")).await;
    assert_eq!(status, 400, "{bad}");
    let (status, _, refused) = send(
        "PATCH",
        "?fieldValidation=Strict",
        "warned",
        serde_json::json!({"data": {"c": "d"}, "shade": "dark"}),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown field \"shade\"")),
        "{refused}"
    );
    // Advertised where kubectl looks for it (the patch operation of the kind's path).
    let request = http::Request::builder()
        .uri("/openapi/v3/api/v1")
        .body(Vec::new())
        .unwrap();
    let doc: serde_json::Value = client.request(request).await.expect("openapi v3");
    let advertised = doc["paths"].as_object().expect("paths").values().any(|p| {
        p["patch"]["x-kubernetes-group-version-kind"]["kind"] == "ConfigMap"
            && p["patch"]["parameters"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|x| x["name"] == "fieldValidation"))
    });
    assert!(advertised, "fieldValidation on ConfigMap's patch operation");
}

/// Field validation of the two patch kinds whose body is not an object of the kind: a
/// JSON patch is checked on the object it produces (`Strict` refuses with 422, `Warn`
/// drops the field and warns), and a server-side apply configuration with a field the
/// kind does not declare cannot be typed at all: kube-apiserver's field manager fails
/// it ("field not declared in schema"), whatever `fieldValidation` says.
#[tokio::test]
async fn json_patches_and_apply_configurations_are_checked_for_unknown_fields() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("fvp").await;
    let client = cluster.client();
    let send = |method: &'static str, uri: String, content_type: &'static str, body: Vec<u8>| {
        let client = client.clone();
        async move {
            let request = http::Request::builder()
                .method(method)
                .uri(uri)
                .header("Content-Type", content_type)
                .body(kube::client::Body::from(body))
                .unwrap();
            let response = client.send(request).await.expect("an answer");
            let status = response.status().as_u16();
            let warnings: Vec<String> = response
                .headers()
                .get_all("warning")
                .iter()
                .map(|v| v.to_str().unwrap().to_string())
                .collect();
            let body = response.into_body().collect_bytes().await.expect("body");
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            (status, warnings, body)
        }
    };
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}, "data": {"a": "b"}});
    let (status, _, _) = send(
        "POST",
        base.clone(),
        "application/json",
        serde_json::to_vec(&cm).unwrap(),
    )
    .await;
    assert_eq!(status, 201);

    let patch = serde_json::to_vec(&serde_json::json!([
        {"op": "add", "path": "/shade", "value": "dark"},
        {"op": "add", "path": "/data/c", "value": "d"},
    ]))
    .unwrap();
    let json_patch = "application/json-patch+json";
    let (status, _, refused) = send(
        "PATCH",
        format!("{base}/p?fieldValidation=Strict"),
        json_patch,
        patch.clone(),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown field \"shade\"")),
        "{refused}"
    );
    let (status, warnings, patched) = send("PATCH", format!("{base}/p"), json_patch, patch).await;
    assert_eq!(status, 200, "{patched}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(r#"unknown field \"shade\""#)),
        "{warnings:?}"
    );
    assert!(
        patched.get("shade").is_none() && patched["data"]["c"] == "d",
        "{patched}"
    );

    let apply =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\ncolour: red\ndata:\n  a: b\n";
    for query in ["", "&fieldValidation=Ignore"] {
        let (status, _, failed) = send(
            "PATCH",
            format!("{base}/p?fieldManager=fv-test{query}"),
            "application/apply-patch+yaml",
            apply.as_bytes().to_vec(),
        )
        .await;
        assert_eq!(status, 500, "{failed}");
        let message = failed["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("failed to create typed patch object")
                && message.ends_with(".colour: field not declared in schema"),
            "{message}"
        );
    }
}
