//! Custom resources and their definitions: a CRD written with `preserveUnknownFields:
//! true` is made acceptable to `apiextensions.k8s.io/v1` (Velero's
//! `crd_v1_preserve_unknown_fields_action.go`), and a custom resource names its CRD so
//! the CRD is restored, and Established, before it (Granary, through the RIA v2 wait).
//! Pure functions on JSON; odd shapes are left alone, never a panic.

use serde_json::Value;

use super::super::actions::ResourceIdentifier;
use granary_velero::resource::GroupResource;

pub const CRD_GROUP: &str = "apiextensions.k8s.io";
pub const CRD_RESOURCE: &str = "customresourcedefinitions";

/// API groups Kubernetes itself serves (no CRD behind them), as of 1.33. A group that
/// is not here may be a CRD's; `*.k8s.io` is not enough to tell, since CRDs may live
/// there with approval (`gateway.networking.k8s.io`, `snapshot.storage.k8s.io`).
pub const BUILT_IN_GROUPS: &[&str] = &[
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "extensions",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

/// Whether items of `gr` may be custom resources (their group is not built in).
pub fn may_be_custom(gr: &GroupResource) -> bool {
    !BUILT_IN_GROUPS.contains(&gr.group.as_str())
}

/// The CustomResourceDefinition that defines `gr` (`<plural>.<group>`).
pub fn crd_of(gr: &GroupResource) -> ResourceIdentifier {
    ResourceIdentifier::new(
        CRD_GROUP,
        CRD_RESOURCE,
        "",
        &format!("{}.{}", gr.resource, gr.group),
    )
}

/// Whether a ResourceIdentifier names a CRD.
pub fn is_crd(r: &ResourceIdentifier) -> bool {
    r.group_resource.group == CRD_GROUP && r.group_resource.resource == CRD_RESOURCE
}

/// Whether a CRD (as JSON) has the condition `Established` with status `True`.
pub fn crd_established(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some("Established")
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

/// A `v1` CRD with `spec.preserveUnknownFields: true` (which `v1` refuses) turned into
/// `preserveUnknownFields: false` with `x-kubernetes-preserve-unknown-fields: true` on
/// every version's schema; `None` when nothing changes (other CRDs, other versions).
pub fn crd_for_restore(crd: &Value) -> Option<Value> {
    if crd.get("apiVersion").and_then(Value::as_str) != Some("apiextensions.k8s.io/v1")
        || crd.pointer("/spec/preserveUnknownFields") != Some(&Value::Bool(true))
    {
        return None;
    }
    let mut out = crd.clone();
    let spec = out.get_mut("spec")?.as_object_mut()?;
    spec.insert("preserveUnknownFields".into(), Value::Bool(false));
    for version in spec
        .get_mut("versions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(schema) = version
            .pointer_mut("/schema/openAPIV3Schema")
            .and_then(Value::as_object_mut)
        {
            schema.insert(
                "x-kubernetes-preserve-unknown-fields".into(),
                Value::Bool(true),
            );
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn custom_groups_are_told_from_built_in_ones() {
        for (group, custom) in [
            ("", false),
            ("apps", false),
            ("rbac.authorization.k8s.io", false),
            ("apiextensions.k8s.io", false),
            ("stable.example.com", true),
            ("gateway.networking.k8s.io", true),
            ("snapshot.storage.k8s.io", true),
            ("velero.io", true),
        ] {
            assert_eq!(
                may_be_custom(&GroupResource::new(group, "things")),
                custom,
                "{group}"
            );
        }
    }

    #[test]
    fn a_custom_resource_names_its_crd() {
        let crd = crd_of(&GroupResource::new("stable.example.com", "crontabs"));
        assert_eq!(
            crd,
            ResourceIdentifier::new(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "",
                "crontabs.stable.example.com"
            )
        );
        assert!(is_crd(&crd));
        assert!(!is_crd(&ResourceIdentifier::new(
            "",
            "configmaps",
            "ns",
            "c"
        )));
    }

    #[test]
    fn established_means_the_condition_is_true() {
        let with = |conds: Value| json!({"status": {"conditions": conds}});
        assert!(crd_established(&with(json!([
            {"type": "NamesAccepted", "status": "True"},
            {"type": "Established", "status": "True"},
        ]))));
        assert!(!crd_established(&with(
            json!([{"type": "Established", "status": "False"}])
        )));
        assert!(!crd_established(&with(
            json!([{"type": "NamesAccepted", "status": "True"}])
        )));
        for odd in [
            json!({}),
            json!({"status": null}),
            with(json!("x")),
            with(json!([1, {"type": true}])),
        ] {
            assert!(!crd_established(&odd));
        }
    }

    #[test]
    fn preserve_unknown_fields_moves_into_the_schemas() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "spec": {"preserveUnknownFields": true, "versions": [
            {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v2"},
            {"name": "v3", "schema": {"openAPIV3Schema": "odd"}},
        ]}});
        let out = crd_for_restore(&crd).expect("changed");
        assert_eq!(out["spec"]["preserveUnknownFields"], false);
        assert_eq!(
            out["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(out["spec"]["versions"][1], json!({"name": "v2"}));
        assert_eq!(
            out["spec"]["versions"][2]["schema"]["openAPIV3Schema"],
            "odd"
        );
    }

    #[test]
    fn other_crds_are_left_alone() {
        let beta = json!({"apiVersion": "apiextensions.k8s.io/v1beta1", "spec": {"preserveUnknownFields": true}});
        assert_eq!(crd_for_restore(&beta), None);
        let v1 = json!({"apiVersion": "apiextensions.k8s.io/v1", "spec": {"preserveUnknownFields": false}});
        assert_eq!(crd_for_restore(&v1), None);
        for odd in [
            json!({}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "spec": {"preserveUnknownFields": "true"}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "spec": {"preserveUnknownFields": true, "versions": 1}}),
        ] {
            let _ = crd_for_restore(&odd);
        }
    }
}
