//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/<g>`,
//! `/apis/<g>/<v>`, built from the registry so CRDs appear as soon as they are served;
//! and aggregated discovery (`apidiscovery.k8s.io` v2 and v2beta1), the whole of `/api`
//! or `/apis` in one `APIGroupDiscoveryList`, for a client whose `Accept` asks for it
//! (kubectl and client-go since 1.30 ask for it first; kube-apiserver 1.30+ serves it).

use serde_json::{Value, json};

use super::builtin::{RESOURCE_VERBS, SUBRESOURCE_VERBS};
use super::registry::Registry;

pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-granary",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

/// The review resources the server answers (create only, never stored, not in the
/// registry): (group, plural, kind), all `v1` and cluster-scoped.
const REVIEWS: &[(&str, &str, &str)] = &[
    (
        "authentication.k8s.io",
        "selfsubjectreviews",
        "SelfSubjectReview",
    ),
    (
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
    ),
    (
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
    ),
];

/// The registry's groups and the review groups, each with its versions.
fn groups(registry: &Registry) -> Vec<(String, Vec<String>)> {
    let mut out = registry.groups();
    for (group, _, _) in REVIEWS {
        if !out.iter().any(|(g, _)| g == group) {
            out.push((group.to_string(), vec!["v1".to_string()]));
        }
    }
    out
}

/// The review resources of `group`/`version`: (plural, kind).
fn reviews(group: &str, version: &str) -> impl Iterator<Item = (&'static str, &'static str)> {
    REVIEWS
        .iter()
        .filter(move |(g, _, _)| *g == group && version == "v1")
        .map(|(_, plural, kind)| (*plural, *kind))
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

pub(crate) fn group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = groups(registry)
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_json(&g, &vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn group(registry: &Registry, name: &str) -> Option<Value> {
    let (g, vs) = groups(registry).into_iter().find(|(g, _)| g == name)?;
    let mut v = group_json(&g, &vs);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Some(v)
}

pub(crate) fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let infos = registry.resources(group, version);
    if infos.is_empty() && reviews(group, version).next().is_none() {
        return None;
    }
    let mut resources: Vec<Value> = reviews(group, version)
        .map(|(plural, kind)| {
            json!({"name": plural, "singularName": plural.trim_end_matches('s'),
                "namespaced": false, "kind": kind, "verbs": ["create"]})
        })
        .collect();
    for i in infos {
        let mut r = json!({
            "name": i.plural,
            "singularName": i.singular,
            "namespaced": i.namespaced,
            "kind": i.kind,
            "verbs": RESOURCE_VERBS,
        });
        if !i.short_names.is_empty() {
            r["shortNames"] = json!(i.short_names);
        }
        if !i.categories.is_empty() {
            r["categories"] = json!(i.categories);
        }
        resources.push(r);
        if i.status {
            resources.push(json!({
                "name": format!("{}/status", i.plural),
                "singularName": "",
                "namespaced": i.namespaced,
                "kind": i.kind,
                "verbs": SUBRESOURCE_VERBS,
            }));
        }
        if i.scale.is_some() {
            resources.push(json!({
                "name": format!("{}/scale", i.plural),
                "singularName": "",
                "namespaced": i.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": SUBRESOURCE_VERBS,
            }));
        }
        if i.plural == "namespaces" {
            resources.push(json!({
                "name": "namespaces/finalize",
                "singularName": "",
                "namespaced": false,
                "kind": "Namespace",
                "verbs": ["update"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }))
}

/// The aggregated discovery version a request's `Accept` header asks for first (`v2` or
/// `v2beta1`), if any: a media range `application/json` with `g=apidiscovery.k8s.io` and
/// `as=APIGroupDiscoveryList`. `None`: the legacy documents.
pub(crate) fn aggregated_version(accept: &str) -> Option<&'static str> {
    accept.split(',').find_map(|range| {
        let mut parts = range.split(';').map(str::trim);
        if !parts
            .next()
            .is_some_and(|m| m.eq_ignore_ascii_case("application/json"))
        {
            return None;
        }
        let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let param = |k: &str| {
            params
                .iter()
                .find(|(pk, _)| pk.trim() == k)
                .map(|(_, v)| v.trim())
        };
        if param("g") != Some("apidiscovery.k8s.io") || param("as") != Some("APIGroupDiscoveryList")
        {
            return None;
        }
        match param("v") {
            Some("v2") => Some("v2"),
            Some("v2beta1") => Some("v2beta1"),
            _ => None,
        }
    })
}

/// The `Content-Type` of an aggregated discovery document of `version`.
pub(crate) fn aggregated_content_type(version: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
}

/// `/api` (`core`) or `/apis` as an `APIGroupDiscoveryList` of apidiscovery `version`:
/// every group with its versions (the preferred first), each version's resources with
/// their kind, scope, verbs, short names, categories and subresources.
pub(crate) fn aggregated(registry: &Registry, core: bool, version: &str) -> Value {
    let items: Vec<Value> = groups(registry)
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let mut resources: Vec<Value> = registry
                        .resources(&group, v)
                        .iter()
                        .map(|i| aggregated_resource(i))
                        .collect();
                    resources.extend(reviews(&group, v).map(|(plural, kind)| {
                        json!({"resource": plural,
                            "responseKind": {"group": group, "version": v, "kind": kind},
                            "scope": "Cluster", "singularResource": plural.trim_end_matches('s'),
                            "verbs": ["create"]})
                    }));
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let mut metadata = json!({"creationTimestamp": null});
            if !group.is_empty() {
                metadata["name"] = json!(group);
            }
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

fn aggregated_resource(i: &super::registry::ResourceInfo) -> Value {
    let kind = json!({"group": i.group, "version": i.version, "kind": i.kind});
    let mut subresources = Vec::new();
    if i.status {
        subresources.push(
            json!({"subresource": "status", "responseKind": kind, "verbs": SUBRESOURCE_VERBS}),
        );
    }
    if i.scale.is_some() {
        subresources.push(json!({
            "subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": SUBRESOURCE_VERBS,
        }));
    }
    if i.plural == "namespaces" {
        subresources
            .push(json!({"subresource": "finalize", "responseKind": kind, "verbs": ["update"]}));
    }
    let mut r = json!({
        "resource": i.plural,
        "responseKind": kind,
        "scope": if i.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": i.singular,
        "verbs": RESOURCE_VERBS,
    });
    if !i.short_names.is_empty() {
        r["shortNames"] = json!(i.short_names);
    }
    if !i.categories.is_empty() {
        r["categories"] = json!(i.categories);
    }
    if !subresources.is_empty() {
        r["subresources"] = json!(subresources);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apps_lists_subresources() {
        let r = Registry::new();
        let list = resource_list(&r, "apps", "v1").unwrap();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"deployments/scale"));
        assert!(names.contains(&"statefulsets/status"));
        assert!(
            group_list(&r)["groups"]
                .as_array()
                .unwrap()
                .iter()
                .all(|g| g["name"] != "")
        );
    }

    #[test]
    fn the_review_kinds_are_discoverable() {
        let r = Registry::new();
        let authz = resource_list(&r, "authorization.k8s.io", "v1").unwrap();
        let names: Vec<&str> = authz["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]
        );
        assert_eq!(authz["resources"][0]["verbs"], json!(["create"]));
        assert!(group(&r, "authentication.k8s.io").is_some());
        let all = aggregated(&r, false, "v2");
        assert!(all["items"].as_array().unwrap().iter().any(|g| {
            g["metadata"]["name"] == "authentication.k8s.io"
                && g["versions"][0]["resources"][0]["resource"] == "selfsubjectreviews"
        }));
    }
}
