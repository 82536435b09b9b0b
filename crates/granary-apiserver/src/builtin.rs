//! The built-in kinds the embedded server serves, as one table: later work adds a kind
//! by adding a row.

/// One built-in resource.
pub(crate) struct BuiltinKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// Has a `/status` subresource (main endpoint ignores status changes).
    pub status: bool,
    /// Has an autoscaling/v1 `/scale` subresource over `.spec.replicas`.
    pub scale: bool,
    /// Sets and bumps `metadata.generation`.
    pub generation: bool,
    /// Field-selector fields besides metadata.name / metadata.namespace.
    pub field_selectors: &'static [&'static str],
    /// The OpenAPI definition name kubectl looks up.
    pub openapi_name: &'static str,
}

const ALL: &[&str] = &["all"];

macro_rules! row {
    ($g:expr, $v:expr, $kind:expr, $plural:expr, $singular:expr, $ns:expr, $short:expr, $cat:expr,
     status: $st:expr, scale: $sc:expr, generation: $gen:expr, fields: $f:expr, openapi: $o:expr) => {
        BuiltinKind {
            group: $g,
            version: $v,
            kind: $kind,
            plural: $plural,
            singular: $singular,
            namespaced: $ns,
            short_names: $short,
            categories: $cat,
            status: $st,
            scale: $sc,
            generation: $gen,
            field_selectors: $f,
            openapi_name: $o,
        }
    };
}

/// Every built-in kind. Row order is discovery order.
pub(crate) const BUILTIN_KINDS: &[BuiltinKind] = &[
    row!("", "v1", "Namespace", "namespaces", "namespace", false, &["ns"], &[],
        status: true, scale: false, generation: false, fields: &["status.phase"],
        openapi: "io.k8s.api.core.v1.Namespace"),
    row!("", "v1", "ConfigMap", "configmaps", "configmap", true, &["cm"], &[],
        status: false, scale: false, generation: false, fields: &[],
        openapi: "io.k8s.api.core.v1.ConfigMap"),
    row!("", "v1", "Secret", "secrets", "secret", true, &[], &[],
        status: false, scale: false, generation: false, fields: &["type"],
        openapi: "io.k8s.api.core.v1.Secret"),
    row!("", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", true, &["sa"], &[],
        status: false, scale: false, generation: false, fields: &[],
        openapi: "io.k8s.api.core.v1.ServiceAccount"),
    row!("", "v1", "Service", "services", "service", true, &["svc"], ALL,
        status: true, scale: false, generation: false, fields: &[],
        openapi: "io.k8s.api.core.v1.Service"),
    row!("", "v1", "Pod", "pods", "pod", true, &["po"], ALL,
        status: true, scale: false, generation: false, fields: &["spec.nodeName", "status.phase"],
        openapi: "io.k8s.api.core.v1.Pod"),
    row!("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", "persistentvolumeclaim", true, &["pvc"], &[],
        status: true, scale: false, generation: false, fields: &[],
        openapi: "io.k8s.api.core.v1.PersistentVolumeClaim"),
    row!("", "v1", "PersistentVolume", "persistentvolumes", "persistentvolume", false, &["pv"], &[],
        status: true, scale: false, generation: false, fields: &[],
        openapi: "io.k8s.api.core.v1.PersistentVolume"),
    row!("", "v1", "Event", "events", "event", true, &["ev"], &[],
        status: false, scale: false, generation: false,
        fields: &["involvedObject.kind", "involvedObject.name", "involvedObject.namespace",
                  "involvedObject.uid", "involvedObject.apiVersion",
                  "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
                  "reportingComponent", "type", "source"],
        openapi: "io.k8s.api.core.v1.Event"),
    row!("events.k8s.io", "v1", "Event", "events", "event", true, &["ev"], &[],
        status: false, scale: false, generation: false,
        fields: super::events::EVENTS_V1_FIELDS,
        openapi: "io.k8s.api.events.v1.Event"),
    row!("", "v1", "ResourceQuota", "resourcequotas", "resourcequota", true, &["quota"], &[],
        status: true, scale: false, generation: false, fields: &[],
        openapi: "io.k8s.api.core.v1.ResourceQuota"),
    row!("coordination.k8s.io", "v1", "Lease", "leases", "lease", true, &[], &[],
        status: false, scale: false, generation: false, fields: &[],
        openapi: "io.k8s.api.coordination.v1.Lease"),
    row!("apps", "v1", "Deployment", "deployments", "deployment", true, &["deploy"], ALL,
        status: true, scale: true, generation: true, fields: &[],
        openapi: "io.k8s.api.apps.v1.Deployment"),
    row!("apps", "v1", "ReplicaSet", "replicasets", "replicaset", true, &["rs"], ALL,
        status: true, scale: true, generation: true, fields: &[],
        openapi: "io.k8s.api.apps.v1.ReplicaSet"),
    row!("apps", "v1", "StatefulSet", "statefulsets", "statefulset", true, &["sts"], ALL,
        status: true, scale: true, generation: true, fields: &[],
        openapi: "io.k8s.api.apps.v1.StatefulSet"),
    row!("batch", "v1", "Job", "jobs", "job", true, &[], ALL,
        status: true, scale: false, generation: true, fields: &["status.successful"],
        openapi: "io.k8s.api.batch.v1.Job"),
    row!("batch", "v1", "CronJob", "cronjobs", "cronjob", true, &["cj"], ALL,
        status: true, scale: false, generation: true, fields: &[],
        openapi: "io.k8s.api.batch.v1.CronJob"),
    row!("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", "poddisruptionbudget", true, &["pdb"], &[],
        status: true, scale: false, generation: true, fields: &[],
        openapi: "io.k8s.api.policy.v1.PodDisruptionBudget"),
    row!("networking.k8s.io", "v1", "Ingress", "ingresses", "ingress", true, &["ing"], &[],
        status: true, scale: false, generation: true, fields: &[],
        openapi: "io.k8s.api.networking.v1.Ingress"),
    row!("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", "priorityclass", false, &["pc"], &[],
        status: false, scale: false, generation: false, fields: &[],
        openapi: "io.k8s.api.scheduling.v1.PriorityClass"),
    row!("rbac.authorization.k8s.io", "v1", "Role", "roles", "role", true, &[], &[],
        status: false, scale: false, generation: false, fields: &[],
        openapi: "io.k8s.api.rbac.v1.Role"),
    row!("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", "rolebinding", true, &[], &[],
        status: false, scale: false, generation: false, fields: &[],
        openapi: "io.k8s.api.rbac.v1.RoleBinding"),
    row!("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", "clusterrole", false, &[], &[],
        status: false, scale: false, generation: false, fields: &[],
        openapi: "io.k8s.api.rbac.v1.ClusterRole"),
    row!("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", "clusterrolebinding", false, &[], &[],
        status: false, scale: false, generation: false, fields: &[],
        openapi: "io.k8s.api.rbac.v1.ClusterRoleBinding"),
    row!("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
        "customresourcedefinition", false, &["crd", "crds"], &["api-extensions"],
        status: true, scale: false, generation: true, fields: &[],
        openapi: "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"),
];

/// The verbs every resource answers.
pub(crate) const RESOURCE_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs of `/status` and `/scale` subresources.
pub(crate) const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn table_rows_are_unique_and_consistent() {
        let mut seen = HashSet::new();
        for k in BUILTIN_KINDS {
            assert!(seen.insert((k.group, k.version, k.plural)), "{}", k.plural);
            assert_eq!(k.singular, k.kind.to_lowercase());
            assert!(!k.scale || k.status, "{} scale without status", k.kind);
        }
    }
}
