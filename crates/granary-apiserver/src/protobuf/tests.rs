//! Ground truth: bodies kubectl v1.32.5 sent as protobuf (tests/fixtures/protobuf, whose
//! README has the command of each), each compared with the JSON the same object has in
//! the API.

use serde_json::{Value, json};

use super::decode;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/protobuf/",
            $name,
            ".bin"
        ))
    };
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn ok(body: &[u8]) -> Value {
    decode(body).unwrap_or_else(|e| panic!("decodes: {}", e.message))
}

#[test]
fn namespace() {
    assert_eq!(
        ok(fixture!("namespace")),
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "pbtest"}, "spec": {}, "status": {}})
    );
}

#[test]
fn configmaps() {
    assert_eq!(
        ok(fixture!("configmap")),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm1", "namespace": "pbtest"},
            "data": {"a": "b", "c": "d"}})
    );
    assert_eq!(
        ok(fixture!("configmap_labels")),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm2", "namespace": "pbtest"},
            "data": {"x": "y"}})
    );
}

#[test]
fn secrets_keep_their_bytes_as_base64() {
    assert_eq!(
        ok(fixture!("secret")),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s1", "namespace": "pbtest"},
            "data": {"pw": b64("s3cr3t"), "user": b64("admin")},
            "type": "Opaque"})
    );
    let docker = ok(fixture!("secret_docker"));
    assert_eq!(docker["type"], "kubernetes.io/dockerconfigjson");
    assert_eq!(
        docker["data"][".dockerconfigjson"],
        b64(r#"{"auths":{"r.example":{"username":"u","password":"p","auth":"dTpw"}}}"#)
    );
}

#[test]
fn service_account() {
    assert_eq!(
        ok(fixture!("serviceaccount")),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "sa1", "namespace": "pbtest"}})
    );
}

#[test]
fn roles_keep_the_core_group_as_an_empty_string() {
    assert_eq!(
        ok(fixture!("role")),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "r1", "namespace": "pbtest"},
        "rules": [
            {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"],
             "resourceNames": ["x"]},
            {"verbs": ["get", "list"], "apiGroups": ["core.gardener.cloud"],
             "resources": ["backupentries"], "resourceNames": ["x"]},
        ]})
    );
    assert_eq!(
        ok(fixture!("clusterrole")),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "cr1"},
        "rules": [
            {"verbs": ["get"], "apiGroups": [""], "resources": ["namespaces"]},
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
        ]})
    );
    assert_eq!(
        ok(fixture!("clusterrole_agg")),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "cr2"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}})
    );
}

#[test]
fn bindings() {
    assert_eq!(
        ok(fixture!("rolebinding")),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "rb1", "namespace": "pbtest"},
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"},
                {"kind": "ServiceAccount", "name": "sa1", "namespace": "pbtest"},
            ],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r1"}})
    );
    assert_eq!(
        ok(fixture!("clusterrolebinding")),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "crb1"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cr1"}})
    );
}

/// The pod template kubectl's workload generators write: Go's client sends every
/// non-pointer field, so their zeros come through (see protobuf_json.rs).
fn pod_spec(container: Value, restart_policy: Option<&str>) -> Value {
    let mut spec = json!({"containers": [container],
        "hostIPC": false, "hostNetwork": false, "hostPID": false});
    if let Some(policy) = restart_policy {
        spec["restartPolicy"] = policy.into();
    }
    spec
}

fn container(name: &str, image: &str) -> Value {
    json!({"name": name, "image": image, "resources": {},
        "stdin": false, "stdinOnce": false, "tty": false})
}

#[test]
fn deployment_keeps_zero_replicas_its_selector_and_container_port() {
    let mut nginx = container("nginx", "nginx");
    nginx["ports"] = json!([{"containerPort": 8080, "hostPort": 0}]);
    assert_eq!(
        ok(fixture!("deployment")),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d1", "namespace": "pbtest", "labels": {"app": "d1"}},
            "spec": {
                // A pointer set to zero: absent would mean the default, 1.
                "replicas": 0,
                "selector": {"matchLabels": {"app": "d1"}},
                "template": {"metadata": {"labels": {"app": "d1"}},
                             "spec": pod_spec(nginx, None)},
                "strategy": {}, "minReadySeconds": 0, "paused": false},
            "status": {"replicas": 0, "updatedReplicas": 0, "readyReplicas": 0,
                       "availableReplicas": 0, "unavailableReplicas": 0,
                       "observedGeneration": 0}})
    );
}

#[test]
fn jobs_keep_their_command_restart_policy_and_owner() {
    let mut j1 = container("j1", "busybox");
    j1["command"] = json!(["echo", "hi"]);
    let status = json!({"active": 0, "succeeded": 0, "failed": 0});
    assert_eq!(
        ok(fixture!("job")),
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j1", "namespace": "pbtest"},
            "spec": {"template": {"metadata": {}, "spec": pod_spec(j1, Some("Never"))}},
            "status": status})
    );
    // `kubectl create job --from=cronjob/c1`: the CronJob's template, owned by it.
    assert_eq!(
        ok(fixture!("job_from_cronjob")),
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j2", "namespace": "pbtest",
                "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                    "name": "c1", "uid": "ee654255-1bde-425c-8ca4-f6bbda2b79c3",
                    "controller": true}]},
            "spec": {"template": {"metadata": {},
                "spec": pod_spec(container("c1", "busybox"), Some("OnFailure"))}},
            "status": status})
    );
}

#[test]
fn cronjob_keeps_its_schedule_and_job_template() {
    assert_eq!(
        ok(fixture!("cronjob")),
        json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "c1", "namespace": "pbtest"},
            "spec": {"schedule": "*/5 * * * *",
                "jobTemplate": {"metadata": {"name": "c1"},
                    "spec": {"template": {"metadata": {},
                        "spec": pod_spec(container("c1", "busybox"), Some("OnFailure"))}}}},
            "status": {}})
    );
}

#[test]
fn services_keep_their_type_ports_and_int_target_port() {
    let service = |name: &str, type_: &str, node_port: i32| {
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "pbtest", "labels": {"app": name}},
            "spec": {"type": type_, "selector": {"app": name},
                "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80,
                           "targetPort": 8080, "nodePort": node_port}],
                "healthCheckNodePort": 0, "publishNotReadyAddresses": false},
            "status": {"loadBalancer": {}}})
    };
    assert_eq!(
        ok(fixture!("service_clusterip")),
        service("s1", "ClusterIP", 0)
    );
    assert_eq!(
        ok(fixture!("service_nodeport")),
        service("np1", "NodePort", 30080)
    );
}

#[test]
fn priority_class_keeps_a_zero_value() {
    assert_eq!(
        ok(fixture!("priorityclass")),
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "pc-high"},
            "value": 0, "globalDefault": false, "description": "zero is a value",
            "preemptionPolicy": "PreemptLowerPriority"})
    );
}

#[test]
fn pod_disruption_budget_keeps_a_percentage_as_a_string() {
    assert_eq!(
        ok(fixture!("poddisruptionbudget")),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb1", "namespace": "pbtest"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "d1"}}},
            "status": {"observedGeneration": 0, "disruptionsAllowed": 0,
                       "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}})
    );
}

#[test]
fn ingress_lifts_the_http_rule_into_the_rule() {
    assert_eq!(
        ok(fixture!("ingress")),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "ing1", "namespace": "pbtest"},
            "spec": {"ingressClassName": "nginx",
                "rules": [{"host": "foo.example", "http": {"paths": [{
                    "path": "/bar", "pathType": "Exact",
                    "backend": {"service": {"name": "s1", "port": {"number": 80}}}}]}}]},
            "status": {"loadBalancer": {}}})
    );
}

#[test]
fn quota_keeps_its_quantities() {
    assert_eq!(
        ok(fixture!("quota")),
        json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "q1", "namespace": "pbtest"},
            "spec": {"hard": {"pods": "0", "requests.memory": "1Gi"}},
            "status": {}})
    );
}

/// An envelope around `raw` for `apiVersion`/`kind` (test encoder).
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    fn ld(num: u8, bytes: &[u8], out: &mut Vec<u8>) {
        out.push(num << 3 | 2);
        out.push(u8::try_from(bytes.len()).expect("short test field"));
        out.extend_from_slice(bytes);
    }
    let mut meta = Vec::new();
    ld(1, api_version.as_bytes(), &mut meta);
    ld(2, kind.as_bytes(), &mut meta);
    let mut out = b"k8s\0".to_vec();
    ld(1, &meta, &mut out);
    ld(2, raw, &mut out);
    out
}

#[test]
fn kinds_without_generated_messages_get_415_saying_what_to_do() {
    let err = decode(&envelope("example.com/v1", "Widget", &[])).expect_err("refused");
    assert_eq!(err.code, 415);
    assert!(err.message.contains("kubectl apply -f"), "{}", err.message);
    assert!(err.message.contains("Widget"), "{}", err.message);
    // A group the server knows, a kind it does not have.
    let err = decode(&envelope("apps/v1", "Gadget", &[])).expect_err("refused");
    assert_eq!(err.code, 415);
}

#[test]
fn unknown_fields_and_broken_bodies_are_errors_not_silently_dropped() {
    // ConfigMap field 9 does not exist (varint 1).
    let err = decode(&envelope("v1", "ConfigMap", &[9 << 3, 1])).expect_err("refused");
    assert_eq!(err.code, 400);
    assert!(
        err.message.contains("field number 9") && err.message.contains("of ConfigMap"),
        "{}",
        err.message
    );
    let err = decode(b"not protobuf").expect_err("no prefix");
    assert_eq!(err.code, 400);
    // Truncated: a length larger than what follows.
    let mut truncated = envelope("v1", "ConfigMap", &[]);
    truncated.extend_from_slice(&[0x12, 0x40, 0x01]);
    assert_eq!(decode(&truncated).expect_err("truncated").code, 400);
}

#[test]
fn times_are_rfc3339_and_go_zero_times_are_left_out() {
    // metadata { name "n", creationTimestamp { seconds 1700000000 } }
    let mut time = vec![1 << 3];
    let mut v: u64 = 1_700_000_000;
    while v >= 0x80 {
        time.push((v as u8) | 0x80);
        v >>= 7;
    }
    time.push(v as u8);
    let mut meta = vec![1 << 3 | 2, 1, b'n', 8 << 3 | 2, time.len() as u8];
    meta.extend_from_slice(&time);
    meta.extend_from_slice(&[9 << 3 | 2, 0]); // an empty deletionTimestamp: null
    let mut raw = vec![1 << 3 | 2, meta.len() as u8];
    raw.extend_from_slice(&meta);
    let v = ok(&envelope("v1", "ConfigMap", &raw));
    assert_eq!(
        v["metadata"],
        json!({"name": "n", "creationTimestamp": "2023-11-14T22:13:20Z"})
    );
}
