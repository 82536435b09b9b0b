//! Static checks of `deploy/`: every file parses and is listed, the kustomizations use
//! plain `resources:` only, every ServiceAccount/ConfigMap/Secret/Role a manifest refers
//! to is in the same kustomization (the admin-supplied garden kubeconfig Secret aside,
//! documented in deploy/README.md), the Deployments are hardened and leader-elected, the
//! ConfigMaps load with Granary's configuration loader, no RBAC rule uses `*`, and the
//! example overlays render (with kubectl, when installed).

mod seed_authorization;

use std::collections::BTreeSet;
use std::path::Path;

use granary_apiserver::ApiCall;
use granary_garden::config::GardenConfiguration;
use granary_seed::config::SeedConfiguration;
use granary_test_support::kubectl::Kubectl;
use granary_test_support::manifests::{
    self, Doc, deploy_dir, kustomization_resources, load_config_text, load_kustomization,
};
use serde_json::Value;

/// Secrets the landscape admin creates (deploy/README.md says how).
const ADMIN_SUPPLIED_SECRETS: &[&str] =
    &["granary-garden-kubeconfig", "granary-garden-webhook-tls"];

const SIDES: &[&str] = &["garden", "seed"];

pub(crate) fn side(name: &str) -> Vec<Doc> {
    load_kustomization(&deploy_dir().join(name))
}

pub(crate) fn find<'a>(docs: &'a [Doc], kind: &str, name: &str) -> Option<&'a Doc> {
    docs.iter().find(|d| d.kind() == kind && d.name() == name)
}

pub(crate) fn deployment(docs: &[Doc]) -> &Doc {
    let found: Vec<&Doc> = docs.iter().filter(|d| d.kind() == "Deployment").collect();
    assert_eq!(found.len(), 1, "one Deployment");
    found[0]
}

#[test]
fn base_kustomizations_list_plain_resources_and_every_file() {
    for name in SIDES {
        let dir = deploy_dir().join(name);
        let k = manifests::read_docs(&dir.join("kustomization.yaml"));
        let keys: BTreeSet<&str> = k[0]
            .value
            .as_object()
            .expect("a mapping")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from(["apiVersion", "kind", "resources"]),
            "{name}: plain resources only"
        );
        let listed: BTreeSet<_> = kustomization_resources(&dir).into_iter().collect();
        for path in &listed {
            assert!(path.is_file(), "{} is listed but missing", path.display());
        }
        let mut on_disk = BTreeSet::new();
        for sub in [dir.clone(), dir.join("crds")] {
            for entry in std::fs::read_dir(&sub).expect("readable") {
                let path = entry.expect("entry").path();
                let yaml = path.extension().is_some_and(|e| e == "yaml");
                if yaml && !path.ends_with("kustomization.yaml") {
                    on_disk.insert(path);
                }
            }
        }
        assert_eq!(
            listed, on_disk,
            "{name}: every YAML file is listed, and only those"
        );
    }
}

#[test]
fn every_document_is_a_named_object_in_the_expected_namespace() {
    for name in SIDES {
        let docs = side(name);
        assert!(docs.len() > 10, "{name}: {} documents", docs.len());
        for d in &docs {
            let at = format!("{}: {} {}", d.file.display(), d.kind(), d.name());
            assert!(d.value["apiVersion"].is_string(), "{at}: apiVersion");
            assert!(!d.kind().is_empty() && !d.name().is_empty(), "{at}");
            let cluster_scoped = matches!(
                d.kind(),
                "Namespace" | "CustomResourceDefinition" | "ClusterRole" | "ClusterRoleBinding"
            );
            match d.namespace() {
                None => assert!(cluster_scoped, "{at}: namespace missing"),
                Some(ns) => {
                    assert!(!cluster_scoped, "{at}: cluster-scoped with a namespace");
                    // `velero`: the Velero namespace, where the seed's Velero controllers
                    // hold their Lease (granary-velero, shared with `granary server`).
                    assert!(
                        ns == "granary-system" || ns == "garden" || ns == "velero",
                        "{at}: namespace {ns}"
                    );
                }
            }
        }
        let mut seen = BTreeSet::new();
        for d in &docs {
            let key = (
                d.kind().to_string(),
                d.namespace().map(String::from),
                d.name().to_string(),
            );
            assert!(seen.insert(key), "{name}: {} {} twice", d.kind(), d.name());
        }
    }
}

/// Every reference resolves inside the kustomization (`admin_secrets` aside).
fn check_references(docs: &[Doc], admin_secrets: &[&str], what: &str) {
    let pod = &deployment(docs).value["spec"]["template"]["spec"];
    let sa = pod["serviceAccountName"]
        .as_str()
        .expect("serviceAccountName");
    assert!(
        find(docs, "ServiceAccount", sa).is_some(),
        "{what}: ServiceAccount {sa}"
    );
    for volume in pod["volumes"].as_array().expect("volumes") {
        if let Some(cm) = volume["configMap"]["name"].as_str() {
            assert!(
                find(docs, "ConfigMap", cm).is_some(),
                "{what}: ConfigMap {cm}"
            );
        }
        if let Some(secret) = volume["secret"]["secretName"].as_str() {
            assert!(
                find(docs, "Secret", secret).is_some() || admin_secrets.contains(&secret),
                "{what}: Secret {secret}"
            );
        }
    }
    for binding in docs
        .iter()
        .filter(|d| matches!(d.kind(), "RoleBinding" | "ClusterRoleBinding"))
    {
        let role_ref = &binding.value["roleRef"];
        let (kind, name) = (
            role_ref["kind"].as_str().unwrap_or_default(),
            role_ref["name"].as_str().unwrap_or_default(),
        );
        assert!(
            find(docs, kind, name).is_some(),
            "{what}: {} {} → {kind} {name}",
            binding.kind(),
            binding.name()
        );
        for subject in binding.value["subjects"].as_array().expect("subjects") {
            if subject["kind"] == "ServiceAccount" {
                let sa = subject["name"].as_str().unwrap_or_default();
                assert!(
                    find(docs, "ServiceAccount", sa).is_some(),
                    "{what}: subject {sa}"
                );
            }
        }
    }
    let labels = &deployment(docs).value["spec"]["template"]["metadata"]["labels"];
    let ports = deployment(docs).value["spec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .expect("ports")
        .clone();
    let services: Vec<&Doc> = docs.iter().filter(|d| d.kind() == "Service").collect();
    assert!(!services.is_empty(), "{what}: a Service");
    for service in services {
        for (k, v) in service.value["spec"]["selector"]
            .as_object()
            .expect("selector")
        {
            assert_eq!(&labels[k], v, "{what}: the Service selects the pods");
        }
        for port in service.value["spec"]["ports"].as_array().expect("ports") {
            assert!(
                ports.iter().any(|p| p["name"] == port["targetPort"]),
                "{what}: Service {} targets a port the container names",
                service.name()
            );
        }
    }
}

#[test]
fn references_resolve_within_each_kustomization() {
    for name in SIDES {
        check_references(&side(name), ADMIN_SUPPLIED_SECRETS, name);
    }
    let readme = std::fs::read_to_string(deploy_dir().join("README.md")).expect("deploy/README.md");
    for secret in ADMIN_SUPPLIED_SECRETS {
        assert!(
            readme.contains(secret),
            "deploy/README.md documents {secret}"
        );
    }
}

#[test]
fn deployments_are_hardened_leader_elected_and_probed() {
    for name in SIDES {
        let docs = side(name);
        let d = &deployment(&docs).value;
        assert_eq!(d["spec"]["replicas"], 2, "{name}: 2 replicas");
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        let containers = pod["containers"].as_array().expect("containers");
        assert_eq!(containers.len(), 1);
        let c = &containers[0];
        let args: Vec<&str> = c["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(args[0], *name, "{name}: the subcommand");
        assert!(args.contains(&"--leader-elect=true"), "{name}: {args:?}");
        let sc = &c["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{name}");
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{name}");
        assert_eq!(
            sc["capabilities"]["drop"],
            serde_json::json!(["ALL"]),
            "{name}"
        );
        for k in ["requests", "limits"] {
            for r in ["cpu", "memory"] {
                assert!(
                    c["resources"][k][r].is_string(),
                    "{name}: resources.{k}.{r}"
                );
            }
        }
        assert_eq!(c["ports"][0]["name"], "metrics");
        assert_eq!(c["ports"][0]["containerPort"], 8085);
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz", "{name}");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz", "{name}");
        for probe in ["livenessProbe", "readinessProbe"] {
            assert_eq!(c[probe]["httpGet"]["port"], "metrics", "{name}: {probe}");
        }
        let scrape = &d["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(scrape["prometheus.io/scrape"], "true");
        let service = docs
            .iter()
            .find(|d| d.kind() == "Service" && d.name() == format!("granary-{name}"))
            .expect("Service");
        assert_eq!(
            service.value["metadata"]["annotations"]["prometheus.io/port"],
            "8085"
        );
        assert_eq!(service.value["spec"]["ports"][0]["targetPort"], "metrics");
        // --config points into the ConfigMap's mount.
        let config_arg = args
            .iter()
            .find_map(|a| a.strip_prefix("--config="))
            .expect("--config");
        let mount = c["volumeMounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .find(|m| m["name"] == "config")
            .expect("config mount");
        let dir = mount["mountPath"].as_str().expect("mountPath");
        assert_eq!(config_arg, format!("{dir}/config.yaml"), "{name}");
    }
}

#[test]
fn no_rule_uses_a_wildcard() {
    for name in SIDES {
        for (role, rule) in manifests::all_rules(&side(name)) {
            for list in [
                &rule.api_groups,
                &rule.resources,
                &rule.verbs,
                &rule.non_resource_urls,
            ] {
                assert!(
                    !list.iter().any(|s| s.contains('*')),
                    "{name}: {role} uses *"
                );
            }
            assert!(
                !rule.verbs.is_empty() && !rule.resources.is_empty(),
                "{name}: {role}"
            );
        }
    }
}

/// The ConfigMap's config.yaml as `granary` loads it, checked against the Deployment.
fn check_garden_config(text: &str, docs_namespace: &str) {
    let c: GardenConfiguration = load_config_text(text, &[]).expect("GardenConfiguration loads");
    assert!(c.leader_election.enabled);
    assert_eq!(c.leader_election.namespace, docs_namespace);
    assert_eq!(c.server.metrics_bind_address, ":8085");
}

fn check_seed_config(text: &str, docs_namespace: &str, garden_mount: &str) {
    let c: SeedConfiguration = load_config_text(text, &[]).expect("SeedConfiguration loads");
    assert!(c.leader_election.enabled);
    assert_eq!(c.leader_election.namespace, docs_namespace);
    assert_eq!(c.server.metrics_bind_address, ":8085");
    let kubeconfig = c.garden_kubeconfig.expect("gardenKubeconfig");
    assert_eq!(
        kubeconfig,
        format!("{garden_mount}/kubeconfig"),
        "the Secret's mount"
    );
}

pub(crate) fn config_text<'a>(docs: &'a [Doc], name: &str) -> &'a str {
    find(docs, "ConfigMap", name).expect("ConfigMap").value["data"]["config.yaml"]
        .as_str()
        .expect("config.yaml")
}

fn garden_kubeconfig_mount(docs: &[Doc]) -> String {
    let c = &deployment(docs).value["spec"]["template"]["spec"]["containers"][0];
    c["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["name"] == "garden-kubeconfig")
        .and_then(|m| m["mountPath"].as_str())
        .expect("the garden kubeconfig is mounted")
        .to_string()
}

#[test]
fn configmaps_load_with_the_configuration_loader() {
    let garden = side("garden");
    check_garden_config(
        config_text(&garden, "granary-garden-config"),
        "granary-system",
    );
    let seed = side("seed");
    let text = config_text(&seed, "granary-seed-config");
    check_seed_config(text, "granary-system", &garden_kubeconfig_mount(&seed));
    // A seed name is set per seed: the base's placeholder is there to be replaced.
    let c: SeedConfiguration = load_config_text(text, &[]).expect("loads");
    assert_eq!(c.seed_name, "my-seed");
}

pub(crate) fn kubectl_kustomize(dir: &Path) -> Option<Vec<Doc>> {
    let out = Kubectl::on_path()
        .command(&["kustomize"])
        .arg(dir)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<Value> = serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout))
        .expect("rendered YAML parses");
    Some(
        docs.into_iter()
            .filter(|d| !d.is_null())
            .map(|value| Doc {
                file: dir.to_path_buf(),
                value,
            })
            .collect(),
    )
}

#[test]
fn example_overlays_parse_render_and_resolve_every_reference() {
    let overlays = deploy_dir().join("examples/overlays");
    for name in SIDES {
        let dir = overlays.join(name);
        for entry in std::fs::read_dir(&dir).expect("overlay dir") {
            let path = entry.expect("entry").path();
            assert!(
                !manifests::read_docs(&path).is_empty(),
                "{}",
                path.display()
            );
        }
        let Some(docs) = kubectl_kustomize(&dir) else {
            eprintln!(
                "SKIPPED rendering {}: kubectl is not installed",
                dir.display()
            );
            continue;
        };
        // The example seed overlay brings its own garden kubeconfig Secret.
        check_references(&docs, &[], &format!("overlay {name}"));
        let image = deployment(&docs).value["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .expect("image")
            .to_string();
        assert_eq!(image, "registry.example.com/granary:v0.1.0");
        match *name {
            "garden" => {
                let text = config_text(&docs, "granary-garden-config");
                check_garden_config(text, "granary-system");
                let c: GardenConfiguration = load_config_text(text, &[]).expect("loads");
                assert_eq!(c.quota_for("aws"), Some(100));
            }
            _ => {
                let text = config_text(&docs, "granary-seed-config");
                check_seed_config(text, "granary-system", &garden_kubeconfig_mount(&docs));
                let c: SeedConfiguration = load_config_text(text, &[]).expect("loads");
                assert_eq!(c.seed_name, "aws-eu1");
            }
        }
    }
}

fn call(user: &str, verb: &str, resource: &str, namespace: &str) -> ApiCall {
    ApiCall {
        user: user.into(),
        verb: verb.into(),
        group: String::new(),
        resource: resource.into(),
        subresource: String::new(),
        namespace: namespace.into(),
        name: "x".into(),
        non_resource_path: String::new(),
    }
}

/// The checker itself: a Role binds only in its namespace, a missing verb is denied, an
/// unused verb is reported unless allowlisted.
#[test]
fn the_rbac_checker_finds_denied_calls_and_unused_grants() {
    let yaml = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r, namespace: a}
rules:
- {apiGroups: [""], resources: [secrets], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: r, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}
subjects: [{kind: ServiceAccount, name: sa, namespace: s}]
"#;
    let docs: Vec<Doc> = serde_saphyr::from_multiple::<Value>(yaml)
        .expect("YAML")
        .into_iter()
        .map(|value| Doc {
            file: "inline".into(),
            value,
        })
        .collect();
    let user = "system:serviceaccount:s:sa";
    let grants = manifests::grants_for(&docs, user);
    assert_eq!(grants.len(), 1);
    let calls = vec![
        call(user, "get", "secrets", "a"),
        call(user, "get", "secrets", "b"),
        call(user, "create", "secrets", "a"),
        call("someone-else", "list", "secrets", "a"),
    ];
    let denied: Vec<(String, String)> = manifests::denied(&grants, &calls, user)
        .into_iter()
        .map(|c| (c.verb.clone(), c.namespace.clone()))
        .collect();
    assert_eq!(
        denied,
        vec![("get".into(), "b".into()), ("create".into(), "a".into())]
    );
    let unused = manifests::unused(&grants, &calls, user, &[]);
    assert_eq!(unused.len(), 1, "{unused:?}");
    assert!(
        unused
            .iter()
            .next()
            .is_some_and(|u| u.contains("list /secrets"))
    );
    let excused = manifests::unused(
        &grants,
        &calls,
        user,
        &[("Role/r", "secrets", "list", "test")],
    );
    assert!(excused.is_empty());
}
