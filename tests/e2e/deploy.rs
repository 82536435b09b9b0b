//! The manifests under `deploy/` against running controllers: the RBAC rules cover every
//! API call a garden placement, a seed provisioning and a deletion make, and grant
//! nothing those calls do not need; `kubectl apply -k` of both sides succeeds; the binary
//! exits cleanly on SIGTERM, releasing its leader Lease.

mod rbac_run;
pub mod signals;

use std::process::Output;

use granary_test_support::TestCluster;
use granary_test_support::kubectl::{self, Kubectl};
use granary_test_support::manifests;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};

/// The identities the manifests deploy (ServiceAccount users).
pub const GARDEN_USER: &str = "system:serviceaccount:granary-system:granary-garden";
pub const SEED_USER: &str = "system:serviceaccount:granary-system:granary-seed";

/// Creates namespace `name` unless it exists.
pub async fn ensure_namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.to_string());
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("namespace {name}: {e}"),
    }
}

fn assert_ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `kubectl apply -k deploy/garden` and `-k deploy/seed` (twice: a re-apply changes
/// nothing and still succeeds) against the embedded server, or the real cluster of
/// `GRANARY_TEST_KUBECONFIG`. The garden side expects Gardener's `garden` namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_k_of_garden_and_seed_succeeds() {
    if !kubectl::runs() {
        eprintln!("SKIPPED: kubectl is not installed (apt-get install kubernetes-client)");
        return;
    }
    let tc = TestCluster::start().await;
    ensure_namespace(&tc.client(), "garden").await;
    let k = Kubectl::new(&tc.garden.kubeconfig_path);
    let deploy = manifests::deploy_dir();
    for side in ["garden", "seed"] {
        let dir = deploy.join(side);
        let dir = dir.to_str().expect("UTF-8 path");
        for round in 0..2 {
            let out = k.run(&["apply", "-k", dir]).await;
            let text = assert_ok(&out, &format!("kubectl apply -k {dir} (round {round})"));
            assert!(
                text.contains("deployment.apps/granary-"),
                "the Deployment is applied: {text}"
            );
        }
        let out = k
            .run(&[
                "get",
                "deployment",
                "-n",
                "granary-system",
                &format!("granary-{side}"),
                "-o",
                "jsonpath={.spec.replicas}",
            ])
            .await;
        assert_eq!(assert_ok(&out, "kubectl get deployment"), "2");
    }
    if !tc.is_embedded() {
        // A real cluster keeps what was applied: remove it again, CRDs and the namespace
        // aside (other tests use the CRDs).
        let namespaced = "deployment,service,configmap,serviceaccount,role,rolebinding";
        let selector = "app.kubernetes.io/part-of=granary";
        for (kinds, scope) in [
            (namespaced, vec!["-n", "granary-system"]),
            (namespaced, vec!["-n", "garden"]),
            ("clusterrole,clusterrolebinding", vec![]),
        ] {
            let mut args = vec!["delete", kinds, "-l", selector, "--ignore-not-found"];
            args.extend(scope);
            let _ = k.run(&args).await;
        }
    }
}
