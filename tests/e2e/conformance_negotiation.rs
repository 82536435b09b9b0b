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
