//! A real `kubectl` against the embedded server: apply (of `deploy/garden/crds/` as a
//! user would, and of custom objects), get, get -w, describe, explain, api-resources,
//! delete. The binary is `$GRANARY_KUBECTL` when set (scripts/test.sh points it at
//! Debian's kubernetes-client 1.20, the oldest kubectl the issue asks for), else
//! `kubectl` on PATH; skipped (loudly) when neither is there. Only run against the
//! embedded server (it drives its own server's kubeconfig).

use std::path::Path;

use granary_test_support::TestCluster;
use granary_test_support::kubectl::{self, Kubectl};

/// Runs `kubectl get <what> -w --show-labels` until it has printed two lines
/// containing `needle` (the object's line in the initial list, then a watch event),
/// or a minute passes; then stops it and returns what it printed.
fn watch(kubectl: &Kubectl, what: &[&str], needle: &str) -> tokio::task::JoinHandle<String> {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-w", "--show-labels", "--request-timeout=60s"]);
    let mut cmd = kubectl.command(&args);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let needle = needle.to_string();
    tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        let mut child = cmd.spawn().expect("kubectl get -w starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut seen = String::new();
        let mut hits = 0;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            seen.push_str(&line);
            seen.push('\n');
            hits += usize::from(line.contains(&needle));
            if hits == 2 {
                break;
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        seen
    })
}

/// Waits for `watch` to end while labelling the watched object with `touch=<n>` (one
/// change per poll), so that it gets an event after its initial list whenever it
/// started; returns what it printed.
async fn touch_until_seen(
    kubectl: &Kubectl,
    watch: tokio::task::JoinHandle<String>,
    touch: &[&str],
) -> String {
    let deadline = tokio::time::Instant::now() + granary_test_support::DEADLINE;
    let mut n = 0;
    while !watch.is_finished() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "kubectl get -w saw no change"
        );
        n += 1;
        let value = format!("touch={n}");
        let mut args = touch.to_vec();
        args.extend_from_slice(&[&value, "--overwrite"]);
        kubectl.ok(&args).await;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    watch.await.expect("watch task")
}

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.kubectl.granary.dev
spec:
  group: kubectl.granary.dev
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, shortNames: [gz]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        description: A gizmo for kubectl tests.
        properties:
          spec:
            type: object
            description: What the gizmo should be.
            properties:
              size: {type: integer, description: How big the gizmo is.}
"#;

const GIZMO: &str = r#"apiVersion: kubectl.granary.dev/v1
kind: Gizmo
metadata: {name: g1, namespace: default}
spec: {size: 3}
"#;

const BUCKET: &str = r#"apiVersion: core.gardener.cloud/v1beta1
kind: BackupBucket
metadata: {name: kubectl-bucket}
spec:
  provider: {type: local, region: dev-1}
  seedName: seed-a
"#;

#[tokio::test]
async fn kubectl_works_against_the_embedded_server() {
    if !kubectl::available() {
        eprintln!("SKIPPED: kubectl is not installed (apt-get install kubernetes-client)");
        return;
    }
    let cluster = TestCluster::start().await;
    if !cluster.is_embedded() {
        return;
    }
    let k = Kubectl::new(&cluster.garden.kubeconfig_path).private_cache();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("crd.yaml"), CRD).unwrap();
    std::fs::write(dir.path().join("gizmo.yaml"), GIZMO).unwrap();
    let crd_path = dir.path().join("crd.yaml");
    k.ok(&["apply", "-f", crd_path.to_str().unwrap()]).await;
    k.ok(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=20s",
        "crd/gizmos.kubectl.granary.dev",
    ])
    .await;
    let resources = k.ok(&["api-resources"]).await;
    assert!(
        resources.contains("gizmos") && resources.contains("configmaps"),
        "{resources}"
    );
    let gizmo_path = dir.path().join("gizmo.yaml");
    k.ok(&["apply", "-f", gizmo_path.to_str().unwrap()]).await;
    let got = k.ok(&["get", "gz"]).await;
    assert!(got.contains("g1"), "{got}");
    let yaml = k.ok(&["get", "gizmo", "g1", "-o", "yaml"]).await;
    assert!(yaml.contains("size: 3"), "{yaml}");
    let described = k.ok(&["describe", "gizmo", "g1"]).await;
    assert!(described.contains("g1"), "{described}");
    let explained = k.ok(&["explain", "gizmos.spec"]).await;
    assert!(explained.contains("How big the gizmo is"), "{explained}");
    let explained = k.ok(&["explain", "configmaps"]).await;
    assert!(explained.contains("ConfigMap"), "{explained}");
    // Built-in kinds are explained field by field, as on a real cluster.
    let explained = k.ok(&["explain", "deployment.spec.replicas"]).await;
    assert!(explained.contains("Number of desired pods"), "{explained}");
    let explained = k
        .ok(&["explain", "deployment.spec.template.spec.containers"])
        .await;
    assert!(
        explained.contains("image") && explained.contains("imagePullPolicy"),
        "{explained}"
    );
    // Built-ins from manifests (apply/create -f send JSON); kubectl's own generators
    // (which newer kubectls send as protobuf) are in kubectl_protobuf.rs.
    let cm_path = dir.path().join("cm.yaml");
    std::fs::write(
        &cm_path,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm1}\ndata: {a: b}\n",
    )
    .unwrap();
    k.ok(&["apply", "-f", cm_path.to_str().unwrap()]).await;
    let cms = k
        .ok(&["get", "cm", "cm1", "-o", "jsonpath={.data.a}"])
        .await;
    assert_eq!(cms, "b");
    let watch = watch(&k, &["configmaps", "cm1"], "cm1");
    let watched = touch_until_seen(&k, watch, &["label", "cm", "cm1"]).await;
    assert!(
        watched.contains("touch="),
        "get -w saw the change: {watched}"
    );
    k.ok(&["delete", "-f", gizmo_path.to_str().unwrap()]).await;
    k.ok(&["delete", "cm", "cm1"]).await;
    let after = k.ok(&["get", "gizmos", "-o", "name"]).await;
    assert!(after.trim().is_empty(), "{after}");
}

#[tokio::test]
async fn kubectl_applies_and_explains_the_garden_crds() {
    if !kubectl::available() {
        eprintln!("SKIPPED: kubectl is not installed (apt-get install kubernetes-client)");
        return;
    }
    let cluster = TestCluster::start().await;
    if !cluster.is_embedded() {
        return;
    }
    let k = Kubectl::new(&cluster.garden.kubeconfig_path).private_cache();
    let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/garden/crds");
    let applied = k.ok(&["apply", "-f", crds.to_str().unwrap()]).await;
    assert!(
        applied.contains("backupbuckets.core.gardener.cloud"),
        "{applied}"
    );
    k.ok(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=30s",
        "crd",
        "--all",
    ])
    .await;
    let resources = k
        .ok(&["api-resources", "--api-group=core.gardener.cloud"])
        .await;
    for plural in ["backupbuckets", "backupentries", "seeds", "shoots"] {
        assert!(resources.contains(plural), "{plural}: {resources}");
    }
    let dir = tempfile::tempdir().unwrap();
    let bucket = dir.path().join("bucket.yaml");
    std::fs::write(&bucket, BUCKET).unwrap();
    k.ok(&["apply", "-f", bucket.to_str().unwrap()]).await;
    // Server-side printing: the CRD's printer columns.
    let got = k.ok(&["get", "backupbuckets"]).await;
    assert!(
        got.contains("PROVIDER") && got.contains("kubectl-bucket") && got.contains("dev-1"),
        "{got}"
    );
    let described = k.ok(&["describe", "backupbucket", "kubectl-bucket"]).await;
    assert!(described.contains("seed-a"), "{described}");
    let explained = k.ok(&["explain", "backupbuckets.spec.provider"]).await;
    assert!(
        explained.contains("Provider and region of the object store"),
        "{explained}"
    );
    let watch = watch(&k, &["backupbuckets"], "kubectl-bucket");
    let watched = touch_until_seen(&k, watch, &["label", "backupbucket", "kubectl-bucket"]).await;
    assert!(
        watched.contains("touch="),
        "get -w saw the change: {watched}"
    );
    k.ok(&["delete", "-f", bucket.to_str().unwrap()]).await;
    let after = k.ok(&["get", "backupbuckets", "-o", "name"]).await;
    assert!(after.trim().is_empty(), "{after}");
    k.ok(&["delete", "-f", crds.to_str().unwrap()]).await;
}

/// A Deployment of two containers and a Service, as a user writes them.
const WORKLOAD: &str = r#"{"apiVersion": "v1", "kind": "List", "items": [
{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
 "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
  "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [
   {"name": "main", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
    "env": [{"name": "MODE", "value": "prod"}], "resources": {"limits": {"cpu": "500m"}}},
   {"name": "sidecar", "image": "busybox:1", "args": ["sleep", "3600"]}]}}}},
{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
 "spec": {"selector": {"app": "d"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}
]}"#;

/// A namespace of its own (`base`) with [`WORKLOAD`] applied by kubectl: the cluster,
/// kubectl in that namespace, and the manifest's file (in the returned directory).
async fn workload(base: &str) -> (TestCluster, Kubectl, tempfile::TempDir, std::path::PathBuf) {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace(base).await;
    let k = Kubectl::new(&cluster.garden.kubeconfig_path)
        .private_cache()
        .namespace(&ns);
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("workload.json");
    std::fs::write(&manifest, WORKLOAD).unwrap();
    k.ok(&["apply", "-f", manifest.to_str().unwrap()]).await;
    (cluster, k, dir, manifest)
}

/// Strategic merge patches as kubectl sends them (`patch`, `set image`, and `apply`'s
/// three-way patch with `$setElementOrder` and `$patch: delete`): lists merge by their
/// keys, as on kube-apiserver. Against the embedded server or a real cluster.
#[tokio::test]
async fn kubectl_strategic_merge_patches_merge_lists_by_key() {
    if !kubectl::available() {
        eprintln!("SKIPPED: kubectl is not installed (apt-get install kubernetes-client)");
        return;
    }
    let (_cluster, k, _dir, manifest) = workload("smp").await;
    let containers = |json: String| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(&json).expect("JSON")["spec"]["template"]["spec"]
            ["containers"]
            .clone()
    };

    // One container's image: the other container and every field stay.
    k.ok(&[
        "patch",
        "deployment",
        "d",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"nginx:1.28"}]}}}}"#,
    ])
    .await;
    let c = containers(k.ok(&["get", "deployment", "d", "-o", "json"]).await);
    assert_eq!(c.as_array().map(Vec::len), Some(2), "{c}");
    assert_eq!(c[0]["name"], "main");
    assert_eq!(c[0]["image"], "nginx:1.28");
    assert_eq!(c[0]["ports"][0]["containerPort"], 80, "{c}");
    assert_eq!(c[0]["env"][0]["value"], "prod", "{c}");
    assert_eq!(c[0]["resources"]["limits"]["cpu"], "500m", "{c}");
    assert_eq!(c[1]["name"], "sidecar");

    // kubectl set image of the sidecar leaves the main container.
    k.ok(&["set", "image", "deployment/d", "sidecar=busybox:2"])
        .await;
    let c = containers(k.ok(&["get", "deployment", "d", "-o", "json"]).await);
    assert_eq!(c.as_array().map(Vec::len), Some(2), "{c}");
    assert_eq!(
        (c[0]["image"].as_str(), c[1]["image"].as_str()),
        (Some("nginx:1.28"), Some("busybox:2"))
    );
    assert_eq!(c[1]["args"], serde_json::json!(["sleep", "3600"]));

    // A Service port added by patch keeps the existing one.
    k.ok(&[
        "patch",
        "service",
        "s",
        "-p",
        r#"{"spec":{"ports":[{"name":"https","port":443,"targetPort":8443}]}}"#,
    ])
    .await;
    let ports = k
        .ok(&[
            "get",
            "service",
            "s",
            "-o",
            "jsonpath={.spec.ports[*].port}",
        ])
        .await;
    let mut ports: Vec<&str> = ports.split_whitespace().collect();
    ports.sort();
    assert_eq!(ports, ["443", "80"]);

    // apply of a manifest without the sidecar: kubectl's three-way patch deletes it by
    // key ($patch: delete with $setElementOrder), the other container untouched.
    let one = WORKLOAD.replace(
        r#",
   {"name": "sidecar", "image": "busybox:1", "args": ["sleep", "3600"]}"#,
        "",
    );
    assert_ne!(one, WORKLOAD);
    std::fs::write(&manifest, one).unwrap();
    k.ok(&["apply", "-f", manifest.to_str().unwrap()]).await;
    let c = containers(k.ok(&["get", "deployment", "d", "-o", "json"]).await);
    assert_eq!(c.as_array().map(Vec::len), Some(1), "{c}");
    assert_eq!(c[0]["name"], "main");
    assert_eq!(c[0]["env"][0]["value"], "prod", "{c}");
}

/// `kubectl get` of built-in kinds prints kube-apiserver's columns (server-side
/// printing), not only NAME and AGE.
#[tokio::test]
async fn kubectl_get_prints_the_columns_of_built_in_kinds() {
    if !kubectl::available() {
        eprintln!("SKIPPED: kubectl is not installed (apt-get install kubernetes-client)");
        return;
    }
    let (_cluster, k, _dir, _) = workload("cols").await;
    let header = |out: &str| {
        out.lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let deploy = k.ok(&["get", "deployment", "d"]).await;
    assert_eq!(
        header(&deploy),
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{deploy}"
    );
    let wide = k.ok(&["get", "deployment", "d", "-o", "wide"]).await;
    assert!(
        wide.contains("CONTAINERS") && wide.contains("main,sidecar") && wide.contains("app=d"),
        "{wide}"
    );
    let svc = k.ok(&["get", "service", "s"]).await;
    assert_eq!(
        header(&svc),
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ],
        "{svc}"
    );
    assert!(svc.contains("80/TCP"), "{svc}");
    k.ok(&[
        "create",
        "configmap",
        "c",
        "--from-literal=a=b",
        "--from-literal=c=d",
    ])
    .await;
    let cm = k.ok(&["get", "configmap", "c"]).await;
    assert_eq!(header(&cm), ["NAME", "DATA", "AGE"], "{cm}");
    assert!(
        cm.lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().nth(1) == Some("2")),
        "{cm}"
    );
    // The other kinds have their own columns too.
    k.ok(&[
        "create",
        "rolebinding",
        "viewers",
        "--clusterrole=view",
        "--user=jane",
    ])
    .await;
    let binding = k.ok(&["get", "rolebinding", "viewers", "-o", "wide"]).await;
    assert_eq!(
        header(&binding),
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"],
        "{binding}"
    );
    assert!(
        binding.contains("ClusterRole/view") && binding.contains("jane"),
        "{binding}"
    );
    k.ok(&["create", "role", "reader", "--verb=get", "--resource=pods"])
        .await;
    let role = k.ok(&["get", "role", "reader"]).await;
    assert_eq!(header(&role), ["NAME", "CREATED", "AT"], "{role}");
}
