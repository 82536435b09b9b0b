//! Seed isolation as deployed: the garden's webhook (port, Service, certificate mount,
//! configuration), its admission configuration and the kube-apiserver files under
//! `deploy/garden/seed-authorization/`, the seed side's Secret policy under
//! `deploy/seed/admission/`, and no RBAC left for a seed's garden identity. All of them
//! must name the same Service, paths and identities.

use std::collections::BTreeSet;

use granary_garden::config::GardenConfiguration;
use serde_json::Value;

use super::{config_text, deployment, find, kubectl_kustomize, side};
use granary_test_support::manifests::{
    self, Doc, deploy_dir, grants_for, load_config_text, read_docs,
};

const WEBHOOK_SERVICE: &str = "granary-garden-webhook";
const WEBHOOK_TLS: &str = "granary-garden-webhook-tls";
const SEED_IN_GARDEN: &str = "system:serviceaccount:granary-system:granary-seed-aws-eu1";

fn container(docs: &[Doc]) -> &Value {
    &deployment(docs).value["spec"]["template"]["spec"]["containers"][0]
}

/// The mount path of the volume backed by Secret `secret`.
fn secret_mount(docs: &[Doc], secret: &str) -> String {
    let pod = &deployment(docs).value["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["secret"]["secretName"] == secret)
        .unwrap_or_else(|| panic!("a volume of Secret {secret}"));
    container(docs)["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["name"] == volume["name"])
        .and_then(|m| m["mountPath"].as_str())
        .expect("the volume is mounted")
        .to_string()
}

/// The webhook as `granary garden` is configured to serve it, checked against the
/// Deployment and the Service; returns the configuration.
fn check_garden_webhook(docs: &[Doc], what: &str) -> GardenConfiguration {
    let c: GardenConfiguration =
        load_config_text(config_text(docs, "granary-garden-config"), &[]).expect("loads");
    let authz = &c.seed_authorization;
    assert!(authz.enabled(), "{what}: the webhook is served");
    let port = container(docs)["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .find(|p| p["name"] == "webhook")
        .unwrap_or_else(|| panic!("{what}: a container port named webhook"))["containerPort"]
        .as_u64()
        .expect("a port number");
    assert_eq!(authz.bind_address, format!(":{port}"), "{what}");
    let mount = secret_mount(docs, WEBHOOK_TLS);
    assert_eq!(authz.tls_cert_file, format!("{mount}/tls.crt"), "{what}");
    assert_eq!(authz.tls_key_file, format!("{mount}/tls.key"), "{what}");
    assert!(!authz.allow_list_without_label_selector, "{what}");
    let service = find(docs, "Service", WEBHOOK_SERVICE).expect("the webhook Service");
    assert_eq!(service.value["spec"]["ports"][0]["targetPort"], "webhook");
    assert_eq!(service.value["spec"]["ports"][0]["port"], 443);
    c
}

#[test]
fn the_garden_serves_the_webhook_with_the_admins_certificate() {
    let docs = side("garden");
    let c = check_garden_webhook(&docs, "deploy/garden");
    assert_eq!(
        c.seed_authorization.seed_service_account_namespace,
        "granary-system"
    );
    let overlay = deploy_dir().join("examples/overlays/garden");
    if let Some(rendered) = kubectl_kustomize(&overlay) {
        check_garden_webhook(&rendered, "the garden overlay");
        assert!(find(&rendered, "Secret", WEBHOOK_TLS).is_some());
    }
}

/// A kustomization that lists every YAML file beside it, and only plain resources.
fn check_kustomization(dir: &std::path::Path) -> Vec<Doc> {
    let listed: BTreeSet<_> = manifests::kustomization_resources(dir)
        .into_iter()
        .collect();
    let on_disk: BTreeSet<_> = std::fs::read_dir(dir)
        .expect("readable")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| !p.ends_with("kustomization.yaml"))
        .collect();
    assert_eq!(listed, on_disk, "{}: every YAML file listed", dir.display());
    let docs = manifests::load_kustomization(dir);
    if let Some(rendered) = kubectl_kustomize(dir) {
        assert_eq!(rendered.len(), docs.len(), "{}", dir.display());
    }
    docs
}

/// Every string of a CEL expression list, joined.
fn expressions(conditions: &Value) -> String {
    conditions
        .as_array()
        .expect("conditions")
        .iter()
        .filter_map(|c| c["expression"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn admission_and_authorization_reach_the_webhook_for_seed_identities_only() {
    let dir = deploy_dir().join("garden/seed-authorization");
    let docs = check_kustomization(&dir);
    let vwc = find(
        &docs,
        "ValidatingWebhookConfiguration",
        "granary-seed-restriction",
    )
    .expect("the admission webhook");
    let hook = &vwc.value["webhooks"][0];
    let service = &hook["clientConfig"]["service"];
    assert_eq!(service["name"], WEBHOOK_SERVICE);
    assert_eq!(service["namespace"], "granary-system");
    assert_eq!(service["path"], "/validate");
    assert_eq!(service["port"], 443);
    assert_eq!(hook["failurePolicy"], "Fail");
    assert_eq!(hook["sideEffects"], "None");
    let resources: Vec<&str> = hook["rules"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for r in [
        "backupbuckets",
        "backupbuckets/status",
        "backupentries/status",
    ] {
        assert!(resources.contains(&r), "{r}");
    }
    let seeds = "system:serviceaccount:granary-system:granary-seed-";
    assert!(expressions(&hook["matchConditions"]).contains(seeds));

    // The kube-apiserver side: not Kubernetes objects, but they must parse and agree.
    let apiserver = dir.join("kube-apiserver");
    let config = &read_docs(&apiserver.join("authorization-config.yaml"))[0].value;
    assert_eq!(config["kind"], "AuthorizationConfiguration");
    let types: Vec<&str> = config["authorizers"]
        .as_array()
        .expect("authorizers")
        .iter()
        .filter_map(|a| a["type"].as_str())
        .collect();
    let (webhook, rbac) = (
        types.iter().position(|t| *t == "Webhook").expect("Webhook"),
        types.iter().position(|t| *t == "RBAC").expect("RBAC"),
    );
    assert!(
        webhook < rbac,
        "the webhook is asked before RBAC: {types:?}"
    );
    let w = &config["authorizers"][webhook]["webhook"];
    assert_eq!(w["failurePolicy"], "Deny");
    assert_eq!(w["subjectAccessReviewVersion"], "v1");
    let conditions = expressions(&w["matchConditions"]);
    assert!(conditions.contains(seeds), "{conditions}");
    for r in ["backupbuckets", "backupentries", "secrets", "leases"] {
        assert!(conditions.contains(r), "{r}: {conditions}");
    }
    let kubeconfig_path = w["connectionInfo"]["kubeConfigFile"]
        .as_str()
        .expect("kubeConfigFile");
    assert!(kubeconfig_path.ends_with("/authorization-webhook.kubeconfig"));
    let kubeconfig = &read_docs(&apiserver.join("authorization-webhook.kubeconfig"))[0].value;
    let server = kubeconfig["clusters"][0]["cluster"]["server"]
        .as_str()
        .expect("server");
    assert_eq!(
        server,
        format!("https://{WEBHOOK_SERVICE}.granary-system.svc:443/authorize")
    );
    let readme = std::fs::read_to_string(deploy_dir().join("README.md")).expect("README");
    for flag in [
        "--authorization-config=",
        "--authorization-webhook-config-file=",
        "--authorization-webhook-version=v1",
        "--authorization-mode=Node,Webhook,RBAC",
        "allowListWithoutLabelSelector",
    ] {
        assert!(readme.contains(flag), "deploy/README.md documents {flag}");
    }
}

#[test]
fn a_seeds_garden_identity_holds_no_rbac() {
    let mut docs = side("garden");
    docs.extend(read_docs(
        &deploy_dir().join("examples/overlays/garden/seed-access.yaml"),
    ));
    assert!(find(&docs, "ServiceAccount", "granary-seed-aws-eu1").is_some());
    let grants = grants_for(&docs, SEED_IN_GARDEN);
    assert!(
        grants.is_empty(),
        "the webhook decides a seed's garden access; RBAC grants {:?}",
        grants.iter().map(|g| &g.role).collect::<Vec<_>>()
    );
}

#[test]
fn the_seed_agent_writes_only_its_own_secrets() {
    let dir = deploy_dir().join("seed/admission");
    let docs = check_kustomization(&dir);
    let policy =
        find(&docs, "ValidatingAdmissionPolicy", "granary-seed-secrets").expect("the policy");
    let binding = find(
        &docs,
        "ValidatingAdmissionPolicyBinding",
        "granary-seed-secrets",
    )
    .expect("its binding");
    assert_eq!(binding.value["spec"]["policyName"], policy.name());
    assert_eq!(
        binding.value["spec"]["validationActions"],
        serde_json::json!(["Deny"])
    );
    let spec = &policy.value["spec"];
    assert_eq!(spec["failurePolicy"], "Fail");
    let rule = &spec["matchConstraints"]["resourceRules"][0];
    assert_eq!(rule["resources"], serde_json::json!(["secrets"]));
    // The policy names the ServiceAccount deploy/seed runs as.
    let seed = side("seed");
    let sa = deployment(&seed).value["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .expect("serviceAccountName")
        .to_string();
    let ns = deployment(&seed)
        .namespace()
        .expect("namespace")
        .to_string();
    let user = format!("system:serviceaccount:{ns}:{sa}");
    assert!(
        expressions(&spec["matchConditions"]).contains(&format!("'{user}'")),
        "the policy matches {user}"
    );
    let validation = expressions(&spec["validations"]);
    for name in ["bucket-", "entry-", "etcd-backup", "source-etcd-backup"] {
        assert!(validation.contains(name), "{name}: {validation}");
    }
    // The non-admin location copies: only in the Velero namespace, and only a Secret that
    // is NAC's copy (named by its NABSL origin label, managed by NAC) both before and after
    // the write, so labelling another Secret does not bring it into reach.
    let velero = granary_velero_server::settings::VeleroSettings::default().namespace;
    assert!(
        validation.contains(&format!("request.namespace == '{velero}'"))
            && validation.contains("variables.newIsLocationCopy && variables.oldIsLocationCopy"),
        "{validation}"
    );
    let variable = |name: &str| -> String {
        spec["variables"]
            .as_array()
            .expect("variables")
            .iter()
            .find(|v| v["name"] == name)
            .and_then(|v| v["expression"].as_str())
            .unwrap_or_else(|| panic!("variable {name}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    for (name, obj) in [
        ("newIsLocationCopy", "object"),
        ("oldIsLocationCopy", "oldObject"),
    ] {
        let e = variable(name);
        assert!(e.starts_with(&format!("{obj} == null || (")), "{name}: {e}");
        for want in [
            format!(
                "{obj}.metadata.labels.exists(k, k == '{}' && {obj}.metadata.labels[k] == variables.name)",
                granary_api::oadp::NABSL_ORIGIN_NACUUID_LABEL
            ),
            format!(
                "{obj}.metadata.labels.exists(k, k == '{}' && {obj}.metadata.labels[k] == '{}')",
                granary_api::oadp::MANAGED_BY_LABEL,
                granary_api::oadp::MANAGED_BY_LABEL_VALUE
            ),
        ] {
            assert!(e.contains(&want), "{name}: {want} not in {e}");
        }
        // The null case (CREATE or DELETE) is the only way around the labels.
        assert_eq!(e.matches("||").count(), 1, "{name}: {e}");
    }
}
