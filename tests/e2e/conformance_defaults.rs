//! Defaulting and validation of built-in kinds, as kube-apiserver does them: a field a
//! client leaves out reads back as its default (and leaving it out again is no change),
//! a Service gets an address and node ports no other Service holds, a Job its generated
//! selector, a Secret's `stringData` is folded into `data`; a body Go cannot decode is a
//! 400 naming the struct field and type, and an invalid one a 422 with kube-apiserver's
//! field paths and messages. The restore item actions (Service addresses and node
//! ports, Job selectors) are written against exactly these behaviours.
//!
//! The assertions hold on a real cluster (`GRANARY_TEST_KUBECONFIG`): no address range
//! or port is assumed beyond kube-apiserver's flags' defaults for node ports.

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use granary_test_support::TestCluster;
use granary_test_support::api::api_error;

fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
}

fn api(cluster: &TestCluster, ns: &str, ar: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(cluster.client(), ns, ar)
}

async fn create(api: &Api<DynamicObject>, body: Value) -> Result<Value, kube::Error> {
    let obj: DynamicObject = serde_json::from_value(body).expect("a dynamic object");
    api.create(&PostParams::default(), &obj)
        .await
        .map(|o| serde_json::to_value(o).expect("JSON"))
}

async fn merge(api: &Api<DynamicObject>, name: &str, patch: Value) -> Result<Value, kube::Error> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|o| serde_json::to_value(o).expect("JSON"))
}

fn causes(status: &kube::core::Status) -> Vec<String> {
    status
        .details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect()
        })
        .unwrap_or_default()
}

fn deployment(name: &str, labels: Value, container: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}})
}

#[tokio::test]
async fn a_deployment_left_at_its_defaults_reads_back_with_them_and_bad_ones_are_refused() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("defaults").await;
    let deploys = api(
        &cluster,
        &ns,
        &resource("apps", "Deployment", "deployments"),
    );
    let made = create(
        &deploys,
        deployment(
            "web",
            json!({"app": "web"}),
            json!({"name": "main", "image": "nginx:1.28", "ports": [{"containerPort": 80}]}),
        ),
    )
    .await
    .expect("a minimal Deployment is created");
    let spec = &made["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["securityContext"], json!({}));
    let container = &pod["containers"][0];
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(container["terminationMessagePolicy"], "File");
    assert_eq!(container["ports"][0]["protocol"], "TCP");
    assert_eq!(made["metadata"]["generation"], 1);

    // Dropping a defaulted field is no change: it is defaulted again, and the
    // generation stays.
    let patched = merge(
        &deploys,
        "web",
        json!({"spec": {"replicas": null, "revisionHistoryLimit": null}}),
    )
    .await
    .expect("patch");
    assert_eq!(patched["spec"]["replicas"], 1);
    assert_eq!(patched["metadata"]["generation"], 1);
    assert_eq!(
        patched["metadata"]["resourceVersion"], made["metadata"]["resourceVersion"],
        "nothing changed, nothing written"
    );

    // What Go cannot decode: 400 naming the struct field and its type.
    let mut bad = deployment(
        "two",
        json!({"app": "web"}),
        json!({"name": "main", "image": "nginx"}),
    );
    bad["spec"]["replicas"] = json!("two");
    let e = api_error(create(&deploys, bad).await);
    assert_eq!(e.code, 400, "{e:?}");
    assert!(
        e.message.contains("cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"),
        "{}",
        e.message
    );

    // What validation refuses: 422 with every cause.
    let e = api_error(
        create(
            &deploys,
            deployment("bad", json!({"app": "other"}), json!({"name": "main"})),
        )
        .await,
    );
    assert_eq!(e.code, 422, "{e:?}");
    assert_eq!(
        causes(&e),
        vec![
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`",
            "spec.template.spec.containers[0].image: Required value",
        ]
    );
    let e = api_error(merge(&deploys, "web", json!({"spec": {"selector": {"matchLabels": {"app": "web", "tier": "x"}}, "template": {"metadata": {"labels": {"tier": "x"}}}}})).await);
    assert_eq!(e.code, 422);
    assert!(
        causes(&e)
            .iter()
            .any(|c| c.starts_with("spec.selector: Invalid value")
                && c.ends_with("field is immutable")),
        "{:?}",
        causes(&e)
    );
}

#[tokio::test]
async fn services_get_addresses_and_node_ports_nobody_else_holds() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("services").await;
    let services = api(&cluster, &ns, &resource("", "Service", "services"));
    let svc = |name: &str, spec: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec});
    let a = create(&services, svc("a", json!({"type": "NodePort", "selector": {"app": "a"}, "ports": [{"name": "http", "port": 80}]})))
        .await
        .expect("create");
    let spec = &a["spec"];
    let ip = spec["clusterIP"].as_str().expect("an address");
    assert!(ip.parse::<std::net::Ipv4Addr>().is_ok(), "{ip}");
    assert_eq!(spec["clusterIPs"], json!([ip]));
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(spec["externalTrafficPolicy"], "Cluster");
    assert_eq!(spec["internalTrafficPolicy"], "Cluster");
    assert_eq!(spec["ports"][0]["protocol"], "TCP");
    assert_eq!(spec["ports"][0]["targetPort"], 80);
    let node_port = spec["ports"][0]["nodePort"].as_u64().expect("a node port");
    assert!((30000..=32767).contains(&node_port), "{node_port}");
    assert_eq!(a["status"], json!({"loadBalancer": {}}));

    // Another Service asking for the same address or node port is refused.
    let e = api_error(create(&services, svc("b", json!({"type": "NodePort", "clusterIP": ip, "ports": [{"port": 80, "nodePort": node_port}]}))).await);
    assert_eq!(e.code, 422, "{e:?}");
    let got = causes(&e);
    assert!(
        got.iter()
            .any(|c| c.starts_with("spec.clusterIPs")
                && c.contains("provided IP is already allocated")),
        "{got:?}"
    );
    assert!(
        got.iter().any(|c| c.starts_with("spec.ports[0].nodePort")
            && c.contains("provided port is already allocated")),
        "{got:?}"
    );
    // A node port on a ClusterIP Service, two unnamed ports, no ports.
    let e = api_error(
        create(
            &services,
            svc("c", json!({"ports": [{"port": 80, "nodePort": 30999}]})),
        )
        .await,
    );
    assert_eq!(
        causes(&e),
        vec!["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
    );
    let e = api_error(
        create(
            &services,
            svc("d", json!({"ports": [{"port": 80}, {"port": 81}]})),
        )
        .await,
    );
    assert_eq!(
        causes(&e),
        vec![
            "spec.ports[0].name: Required value",
            "spec.ports[1].name: Required value"
        ]
    );
    let e = api_error(create(&services, svc("e", json!({"selector": {"app": "e"}}))).await);
    assert_eq!(causes(&e), vec!["spec.ports: Required value"]);
    // Headless: no address.
    let h = create(
        &services,
        svc("h", json!({"clusterIP": "None", "selector": {"app": "h"}})),
    )
    .await
    .expect("headless");
    assert_eq!(h["spec"]["clusterIPs"], json!(["None"]));

    // An update that leaves the address and node port out keeps them; changing the
    // address is refused.
    let mut replaced = a.clone();
    replaced["spec"] = json!({"type": "NodePort", "selector": {"app": "a"}, "ports": [{"name": "http", "port": 80}]});
    let obj: DynamicObject = serde_json::from_value(replaced).expect("object");
    let kept = services
        .replace("a", &PostParams::default(), &obj)
        .await
        .expect("replace");
    let kept = serde_json::to_value(kept).expect("JSON");
    assert_eq!(kept["spec"]["clusterIP"], ip);
    assert_eq!(kept["spec"]["ports"][0]["nodePort"], node_port);
    let e = api_error(
        merge(
            &services,
            "a",
            json!({"spec": {"clusterIP": "203.0.113.7", "clusterIPs": ["203.0.113.7"]}}),
        )
        .await,
    );
    assert_eq!(e.code, 422);
    assert!(
        causes(&e)
            .iter()
            .any(|c| c.starts_with("spec.clusterIPs[0]")),
        "{:?}",
        causes(&e)
    );
}

#[tokio::test]
async fn jobs_get_their_selector_and_a_foreign_one_is_refused() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("jobs").await;
    let jobs = api(&cluster, &ns, &resource("batch", "Job", "jobs"));
    let job = |name: &str, spec: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec});
    let template = |restart: &str| json!({"spec": {"restartPolicy": restart, "containers": [{"name": "main", "image": "busybox:1.36"}]}});
    let made = create(&jobs, job("once", json!({"template": template("Never")})))
        .await
        .expect("create");
    let uid = made["metadata"]["uid"].as_str().expect("uid");
    assert_eq!(
        made["spec"]["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    );
    let labels = &made["spec"]["template"]["metadata"]["labels"];
    for (k, v) in [
        ("controller-uid", uid),
        ("batch.kubernetes.io/controller-uid", uid),
        ("job-name", "once"),
        ("batch.kubernetes.io/job-name", "once"),
    ] {
        assert_eq!(labels[k], v, "{k}");
    }
    assert_eq!(made["spec"]["completions"], 1);
    assert_eq!(made["spec"]["parallelism"], 1);
    assert_eq!(made["spec"]["backoffLimit"], 6);
    assert_eq!(made["spec"]["completionMode"], "NonIndexed");
    assert_eq!(made["spec"]["suspend"], false);

    // The pod template of a Job must not restart always (the default).
    let e = api_error(create(&jobs, job("always", json!({"template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}}))).await);
    assert_eq!(
        causes(&e),
        vec![
            "spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
        ]
    );

    // A Job as another cluster stored it, with that cluster's generated selector (what
    // Velero's Job restore action strips).
    let mut foreign = template("Never");
    foreign["metadata"] = json!({"labels": {"controller-uid": "0f1e2d3c", "batch.kubernetes.io/controller-uid": "0f1e2d3c", "job-name": "copy", "batch.kubernetes.io/job-name": "copy"}});
    let e = api_error(create(&jobs, job("copy", json!({"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "0f1e2d3c"}}, "template": foreign}))).await);
    assert_eq!(e.code, 422, "{e:?}");
    let got = causes(&e);
    assert!(got.iter().any(|c| c.starts_with("spec.selector") && c.ends_with("`selector` not auto-generated")), "{got:?}");
    assert!(
        got.iter()
            .any(|c| c.starts_with("spec.template.metadata.labels[controller-uid]")),
        "{got:?}"
    );
}

#[tokio::test]
async fn secrets_pods_and_rbac_are_defaulted_and_checked() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("kinds").await;
    let secrets = api(&cluster, &ns, &resource("", "Secret", "secrets"));
    let s = create(&secrets, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"user": "admin"}}))
        .await
        .expect("create");
    assert_eq!(s["type"], "Opaque");
    assert_eq!(s["data"], json!({"user": "YWRtaW4="}));
    assert!(s.get("stringData").is_none(), "{s}");
    let e = api_error(merge(&secrets, "s", json!({"type": "kubernetes.io/tls"})).await);
    assert_eq!(e.code, 422);
    assert!(
        causes(&e).contains(
            &"type: Invalid value: \"kubernetes.io/tls\": field is immutable".to_string()
        ),
        "{:?}",
        causes(&e)
    );
    let e = api_error(create(&secrets, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "YQ=="}})).await);
    assert_eq!(causes(&e), vec!["data[tls.key]: Required value"]);

    let pods = api(&cluster, &ns, &resource("", "Pod", "pods"));
    let p = create(&pods, json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]}}))
        .await
        .expect("create");
    assert_eq!(p["status"]["phase"], "Pending");
    assert_eq!(p["status"]["qosClass"], "Guaranteed");
    assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Always");
    assert_eq!(
        p["spec"]["containers"][0]["resources"]["requests"],
        json!({"cpu": "100m", "memory": "64Mi"})
    );
    assert_eq!(p["spec"]["enableServiceLinks"], true);
    // An image may change; anything else of a Pod's spec may not.
    let image = json!({"spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}});
    pods.patch("p", &PatchParams::default(), &Patch::Strategic(image))
        .await
        .expect("a new image");
    let e = api_error(merge(&pods, "p", json!({"spec": {"restartPolicy": "Never"}})).await);
    assert_eq!(e.code, 422);
    assert!(
        causes(&e)[0].starts_with("spec: Forbidden: pod updates may not change fields other than"),
        "{:?}",
        causes(&e)
    );

    let roles = api(
        &cluster,
        &ns,
        &resource("rbac.authorization.k8s.io", "Role", "roles"),
    );
    let e = api_error(create(&roles, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": [{"resources": ["pods"]}]})).await);
    assert_eq!(
        causes(&e),
        vec![
            "rules[0].verbs: Required value: verbs must contain at least one value",
            "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
        ]
    );
    let bindings = api(
        &cluster,
        &ns,
        &resource("rbac.authorization.k8s.io", "RoleBinding", "rolebindings"),
    );
    let b = create(&bindings, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "b"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}, "subjects": [{"kind": "User", "name": "jane"}]}))
        .await
        .expect("create");
    assert_eq!(b["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    let e = api_error(merge(&bindings, "b", json!({"roleRef": {"name": "edit"}})).await);
    assert_eq!(e.code, 422);
    assert!(
        causes(&e)[0].starts_with("roleRef: Invalid value")
            && causes(&e)[0].ends_with("cannot change roleRef"),
        "{:?}",
        causes(&e)
    );
}

/// What `kubectl explain` reads: the OpenAPI v3 document of a group-version names each
/// built-in kind by `x-kubernetes-group-version-kind` and describes its fields with
/// their types and documentation, every referenced type in the same document; v2 has
/// the same definitions for older kubectls.
#[tokio::test]
async fn built_in_kinds_publish_typed_documented_schemas() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let get = |uri: &str| {
        let request = http::Request::builder().uri(uri).body(Vec::new()).unwrap();
        let client = client.clone();
        async move {
            client
                .request::<Value>(request)
                .await
                .expect("an OpenAPI document")
        }
    };
    let doc = get("/openapi/v3/apis/apps/v1").await;
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    let (_, deploy) = schemas
        .iter()
        .find(|(_, s)| {
            s["x-kubernetes-group-version-kind"]
                .as_array()
                .is_some_and(|g| {
                    g.iter()
                        .any(|g| g["kind"] == "Deployment" && g["version"] == "v1")
                })
        })
        .expect("Deployment's schema");
    for field in ["apiVersion", "kind", "metadata", "spec", "status"] {
        assert!(
            deploy["properties"].get(field).is_some(),
            "{field}: {deploy}"
        );
    }
    let target = |s: &Value| -> String {
        let r = s["$ref"]
            .as_str()
            .or_else(|| s["allOf"][0]["$ref"].as_str())
            .expect("a reference");
        r.trim_start_matches("#/components/schemas/").to_string()
    };
    let spec = &schemas[&target(&deploy["properties"]["spec"])];
    let replicas = &spec["properties"]["replicas"];
    assert_eq!(replicas["type"], "integer");
    assert_eq!(replicas["format"], "int32");
    assert!(
        replicas["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Number of desired pods")),
        "{replicas}"
    );
    let template = &schemas[&target(&spec["properties"]["template"])];
    let pod = &schemas[&target(&template["properties"]["spec"])];
    let containers = &pod["properties"]["containers"];
    assert_eq!(containers["type"], "array");
    let container = &schemas[&target(&containers["items"])];
    assert_eq!(container["properties"]["image"]["type"], "string");
    let strategy = &schemas[&target(&spec["properties"]["strategy"])];
    let rolling = &schemas[&target(&strategy["properties"]["rollingUpdate"])];
    let surge = &schemas[&target(&rolling["properties"]["maxSurge"])];
    assert_eq!(surge["x-kubernetes-int-or-string"], true, "{surge}");

    let v2 = get("/openapi/v2").await;
    let service = &v2["definitions"]["io.k8s.api.core.v1.ServiceSpec"];
    assert_eq!(
        service["properties"]["ports"]["x-kubernetes-patch-merge-key"],
        "port"
    );
    assert_eq!(
        service["properties"]["ports"]["items"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.ServicePort"
    );
}
