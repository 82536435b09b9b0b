//! A real `kubectl` against the embedded server: apply, get, get -w, describe, explain,
//! api-resources, delete. Skipped (loudly) when no kubectl is installed, and only run
//! against the embedded server (it drives its own server's kubeconfig).

use std::path::Path;
use std::process::{Command, Output};

use crate::support::TestCluster;

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success())
}

async fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(&args)
            .output()
            .expect("kubectl runs")
    })
    .await
    .expect("kubectl task")
}

async fn ok(kubeconfig: &Path, args: &[&str]) -> String {
    let out = kubectl(kubeconfig, args).await;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
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

#[tokio::test]
async fn kubectl_works_against_the_embedded_server() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not installed (apt-get install kubernetes-client)");
        return;
    }
    let cluster = TestCluster::start().await;
    if !cluster.is_embedded() {
        return;
    }
    let kc = cluster.garden.kubeconfig_path.clone();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("crd.yaml"), CRD).unwrap();
    std::fs::write(dir.path().join("gizmo.yaml"), GIZMO).unwrap();
    let crd_path = dir.path().join("crd.yaml");
    ok(&kc, &["apply", "-f", crd_path.to_str().unwrap()]).await;
    ok(
        &kc,
        &[
            "wait",
            "--for",
            "condition=established",
            "--timeout=20s",
            "crd/gizmos.kubectl.granary.dev",
        ],
    )
    .await;
    let resources = ok(&kc, &["api-resources"]).await;
    assert!(
        resources.contains("gizmos") && resources.contains("configmaps"),
        "{resources}"
    );
    let gizmo_path = dir.path().join("gizmo.yaml");
    ok(&kc, &["apply", "-f", gizmo_path.to_str().unwrap()]).await;
    let got = ok(&kc, &["get", "gz"]).await;
    assert!(got.contains("g1"), "{got}");
    let yaml = ok(&kc, &["get", "gizmo", "g1", "-o", "yaml"]).await;
    assert!(yaml.contains("size: 3"), "{yaml}");
    let described = ok(&kc, &["describe", "gizmo", "g1"]).await;
    assert!(described.contains("g1"), "{described}");
    let explained = ok(&kc, &["explain", "gizmos.spec"]).await;
    assert!(explained.contains("How big the gizmo is"), "{explained}");
    // `kubectl create configmap` sends protobuf, which the embedded server does not
    // decode; manifests (apply/create -f) are JSON.
    let cm_path = dir.path().join("cm.yaml");
    std::fs::write(
        &cm_path,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm1}\ndata: {a: b}\n",
    )
    .unwrap();
    let watch = {
        let kc = kc.clone();
        tokio::spawn(async move {
            kubectl(&kc, &["get", "configmaps", "-w", "--request-timeout=4s"]).await
        })
    };
    ok(&kc, &["apply", "-f", cm_path.to_str().unwrap()]).await;
    let cms = ok(&kc, &["get", "cm", "cm1", "-o", "jsonpath={.data.a}"]).await;
    assert_eq!(cms, "b");
    let watched = String::from_utf8_lossy(&watch.await.unwrap().stdout).to_string();
    assert!(
        watched.contains("cm1"),
        "get -w saw the new configmap: {watched}"
    );
    ok(&kc, &["delete", "-f", gizmo_path.to_str().unwrap()]).await;
    ok(&kc, &["delete", "cm", "cm1"]).await;
    let after = ok(&kc, &["get", "gizmos", "-o", "name"]).await;
    assert!(after.trim().is_empty(), "{after}");
}
