//! kubectl's own generators (`kubectl create deployment|job|cronjob|service|…`) against
//! the embedded server. kubectl 1.2x and later send these objects as
//! `application/vnd.kubernetes.protobuf`; each object is read back through kube::Client
//! with the fields kubectl put in it.
//!
//! Runs plain `kubectl` from PATH (kubectl 1.32 on the development machines; the
//! GRANARY_KUBECTL override of the other kubectl tests is Debian's 1.20, which sends
//! JSON). Skipped (loudly) when there is no kubectl or it is older than 1.25.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ResourceQuota, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Api;

use granary_test_support::TestCluster;
use granary_test_support::kubectl::Kubectl;

#[tokio::test]
async fn kubectl_create_sends_protobuf_and_every_generator_works() {
    let version = match Kubectl::on_path()
        .command(&["version", "--client", "-o", "json"])
        .output()
    {
        Ok(out) if out.status.success() => out,
        _ => {
            eprintln!("SKIPPED: kubectl is not installed");
            return;
        }
    };
    let version: serde_json::Value = serde_json::from_slice(&version.stdout).expect("JSON");
    let client_version = &version["clientVersion"];
    eprintln!("using kubectl {}", client_version["gitVersion"]);
    // Older kubectls generate beta versions (batch/v1beta1 CronJobs, policy/v1beta1
    // PodDisruptionBudgets) the server does not serve, and send JSON anyway.
    let minor: u32 = client_version["minor"]
        .as_str()
        .unwrap_or_default()
        .trim_end_matches('+')
        .parse()
        .unwrap_or(0);
    if minor < 25 {
        eprintln!("SKIPPED: kubectl on PATH is older than 1.25");
        return;
    }
    let cluster = TestCluster::start().await;
    if !cluster.is_embedded() {
        return;
    }
    let ns = cluster.namespace("pb").await;
    let k = Kubectl::on_path()
        .kubeconfig(&cluster.garden.kubeconfig_path)
        .private_cache()
        .namespace(&ns);
    k.ok(&[
        "create",
        "deployment",
        "d1",
        "--image=nginx",
        "--replicas=0",
        "--port=8080",
    ])
    .await;
    k.ok(&["create", "job", "j1", "--image=busybox", "--", "echo", "hi"])
        .await;
    k.ok(&[
        "create",
        "cronjob",
        "c1",
        "--image=busybox",
        "--schedule=*/5 * * * *",
    ])
    .await;
    k.ok(&["create", "service", "clusterip", "s1", "--tcp=80:8080"])
        .await;
    k.ok(&[
        "create",
        "poddisruptionbudget",
        "pdb1",
        "--selector=app=d1",
        "--min-available=50%",
    ])
    .await;
    k.ok(&[
        "create",
        "ingress",
        "ing1",
        "--class=nginx",
        "--rule=foo.example/bar=s1:80",
    ])
    .await;
    let priority_class = format!("{ns}-high");
    k.ok(&[
        "create",
        "priorityclass",
        &priority_class,
        "--value=0",
        "--description=zero is a value",
    ])
    .await;
    k.ok(&["create", "quota", "q1", "--hard=pods=0,requests.memory=1Gi"])
        .await;
    k.ok(&["create", "serviceaccount", "sa1"]).await;
    k.ok(&[
        "create",
        "rolebinding",
        "rb1",
        "--clusterrole=view",
        "--serviceaccount",
        &format!("{ns}:sa1"),
    ])
    .await;
    k.ok(&["create", "secret", "generic", "sec1", "--from-literal=k=v"])
        .await;

    let client = cluster.client();
    let d: Deployment = Api::namespaced(client.clone(), &ns)
        .get("d1")
        .await
        .unwrap();
    let spec = d.spec.expect("spec");
    // A pointer set to zero stays zero (absent would mean the default, 1).
    assert_eq!(spec.replicas, Some(0));
    let pod = spec.template.spec.expect("pod spec");
    assert_eq!(pod.containers[0].image.as_deref(), Some("nginx"));
    assert_eq!(
        pod.containers[0].ports.as_ref().expect("ports")[0].container_port,
        8080
    );
    let labels = spec.selector.match_labels.expect("selector");
    assert_eq!(labels["app"], "d1");

    let j: Job = Api::namespaced(client.clone(), &ns)
        .get("j1")
        .await
        .unwrap();
    let pod = j.spec.expect("spec").template.spec.expect("pod spec");
    assert_eq!(pod.containers[0].image.as_deref(), Some("busybox"));
    assert_eq!(
        pod.containers[0].command.as_deref(),
        Some(&["echo".to_string(), "hi".to_string()][..])
    );
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));

    let c: CronJob = Api::namespaced(client.clone(), &ns)
        .get("c1")
        .await
        .unwrap();
    let spec = c.spec.expect("spec");
    assert_eq!(spec.schedule, "*/5 * * * *");
    assert_eq!(
        spec.job_template
            .metadata
            .expect("metadata")
            .name
            .as_deref(),
        Some("c1")
    );

    let s: Service = Api::namespaced(client.clone(), &ns)
        .get("s1")
        .await
        .unwrap();
    let spec = s.spec.expect("spec");
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    let port = &spec.ports.expect("ports")[0];
    assert_eq!(port.port, 80);
    assert_eq!(port.target_port, Some(IntOrString::Int(8080)));

    let pdb: PodDisruptionBudget = Api::namespaced(client.clone(), &ns)
        .get("pdb1")
        .await
        .unwrap();
    let spec = pdb.spec.expect("spec");
    assert_eq!(spec.min_available, Some(IntOrString::String("50%".into())));
    assert_eq!(
        spec.selector
            .expect("selector")
            .match_labels
            .expect("labels")["app"],
        "d1"
    );

    let ing: Ingress = Api::namespaced(client.clone(), &ns)
        .get("ing1")
        .await
        .unwrap();
    let spec = ing.spec.expect("spec");
    assert_eq!(spec.ingress_class_name.as_deref(), Some("nginx"));
    let rule = &spec.rules.expect("rules")[0];
    assert_eq!(rule.host.as_deref(), Some("foo.example"));
    let path = &rule.http.as_ref().expect("http").paths[0];
    assert_eq!(path.path.as_deref(), Some("/bar"));
    let backend = path.backend.service.as_ref().expect("service backend");
    assert_eq!(backend.name, "s1");
    assert_eq!(backend.port.as_ref().and_then(|p| p.number), Some(80));

    let pc: PriorityClass = Api::all(client.clone()).get(&priority_class).await.unwrap();
    // `value` is required: a zero must come through.
    assert_eq!(pc.value, 0);
    assert_eq!(pc.description.as_deref(), Some("zero is a value"));

    let q: ResourceQuota = Api::namespaced(client.clone(), &ns)
        .get("q1")
        .await
        .unwrap();
    let hard = q.spec.expect("spec").hard.expect("hard");
    assert_eq!(hard["pods"], Quantity("0".into()));
    assert_eq!(hard["requests.memory"], Quantity("1Gi".into()));

    let _: ServiceAccount = Api::namespaced(client.clone(), &ns)
        .get("sa1")
        .await
        .unwrap();
    let rb: RoleBinding = Api::namespaced(client.clone(), &ns)
        .get("rb1")
        .await
        .unwrap();
    assert_eq!(rb.role_ref.kind, "ClusterRole");
    assert_eq!(rb.role_ref.name, "view");
    let subject = &rb.subjects.expect("subjects")[0];
    assert_eq!(
        (
            subject.kind.as_str(),
            subject.name.as_str(),
            subject.namespace.as_deref()
        ),
        ("ServiceAccount", "sa1", Some(ns.as_str()))
    );
    let sec: Secret = Api::namespaced(client.clone(), &ns)
        .get("sec1")
        .await
        .unwrap();
    assert_eq!(sec.data.expect("data")["k"].0, b"v");

    // What kubectl shows for them (its tables come from the server).
    let listed = k
        .ok(&[
            "get",
            "deployments,jobs,cronjobs,services,poddisruptionbudgets,ingresses,resourcequotas",
            "-o",
            "name",
        ])
        .await;
    for name in [
        "deployment.apps/d1",
        "job.batch/j1",
        "cronjob.batch/c1",
        "service/s1",
        "poddisruptionbudget.policy/pdb1",
        "ingress.networking.k8s.io/ing1",
        "resourcequota/q1",
    ] {
        assert!(listed.contains(name), "{listed}");
    }
    k.ok(&["delete", "priorityclass", &priority_class]).await;
}
