//! Ground truth: bodies kubectl v1.32.4 sent as protobuf (tests/fixtures/protobuf), each
//! compared with the JSON the same object has in the API.

use serde_json::{Value, json};

use super::decode;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/protobuf/",
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
