//! The backup's reads from the cluster, as raw JSON: discovery (the resources at each
//! group's preferred version), paged lists (`limit`/`continue`, a label selector) and
//! single gets. Objects stay `serde_json::Value` so they are written exactly as the API
//! server sent them (Velero writes its unstructured objects).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResource, APIResourceList};
use kube::api::{GetParams, ListParams};
use kube::core::Request;
use serde_json::Value;

use super::catalog::{Catalog, DiscoveredResource};

/// Reads discovery: the core group first, then the groups in the server's order, each
/// at its preferred version (Velero's `ServerPreferredResources`). A group whose
/// resources cannot be read (an unavailable aggregated API) is left out and named in
/// the returned list, which the runner logs as warnings, as Velero's discovery helper
/// does; failing to read the core group or the group list is an error.
pub async fn discover(client: &kube::Client) -> Result<(Catalog, Vec<String>), kube::Error> {
    let mut resources = Vec::new();
    let mut failed = Vec::new();
    let core = client.list_core_api_versions().await?;
    if let Some(v) = core.versions.first() {
        let list = client.list_core_api_resources(v).await?;
        resources.extend(convert("", v, &list));
    }
    for group in client.list_api_groups().await?.groups {
        let Some(preferred) = group
            .preferred_version
            .as_ref()
            .or_else(|| group.versions.first())
        else {
            continue;
        };
        match client
            .list_api_group_resources(&preferred.group_version)
            .await
        {
            Ok(list) => resources.extend(convert(&group.name, &preferred.version, &list)),
            Err(e) => failed.push(format!(
                "Failed to discover group: {}: {e}",
                preferred.group_version
            )),
        }
    }
    Ok((Catalog::new(resources), failed))
}

fn convert(group: &str, version: &str, list: &APIResourceList) -> Vec<DiscoveredResource> {
    list.resources
        .iter()
        .map(|r: &APIResource| DiscoveredResource {
            group: r.group.clone().unwrap_or_else(|| group.to_owned()),
            version: r.version.clone().unwrap_or_else(|| version.to_owned()),
            kind: r.kind.clone(),
            resource: r.name.clone(),
            singular: if r.singular_name.is_empty() {
                r.kind.to_ascii_lowercase()
            } else {
                r.singular_name.clone()
            },
            short_names: r.short_names.clone().unwrap_or_default(),
            namespaced: r.namespaced,
            verbs: r.verbs.clone(),
        })
        .collect()
}

/// The collection URL of a resource, in one namespace or across all.
pub(crate) fn url(res: &DiscoveredResource, namespace: Option<&str>) -> String {
    let base = if res.group.is_empty() {
        format!("/api/{}", res.version)
    } else {
        format!("/apis/{}/{}", res.group, res.version)
    };
    match namespace {
        Some(ns) if res.namespaced => format!("{base}/namespaces/{ns}/{}", res.resource),
        _ => format!("{base}/{}", res.resource),
    }
}

/// One page of a list: the items (with `apiVersion` and `kind` set, which list items
/// may lack) and the continue token of the next page.
pub async fn list_page(
    client: &kube::Client,
    res: &DiscoveredResource,
    namespace: Option<&str>,
    label_selector: &str,
    limit: u32,
    continue_token: Option<String>,
) -> Result<(Vec<Value>, Option<String>), kube::Error> {
    let mut lp = ListParams::default();
    if !label_selector.is_empty() {
        lp = lp.labels(label_selector);
    }
    if limit > 0 {
        lp = lp.limit(limit);
    }
    if let Some(token) = continue_token {
        lp = lp.continue_token(&token);
    }
    let req = Request::new(url(res, namespace))
        .list(&lp)
        .map_err(kube::Error::BuildRequest)?;
    let mut page: Value = client.request(req).await?;
    let next = page
        .pointer("/metadata/continue")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_owned);
    let items = match page.get_mut("items").map(Value::take) {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    Ok((items.into_iter().map(|i| typed(i, res)).collect(), next))
}

/// Every item of a (small) resource, all pages.
pub async fn list_all(
    client: &kube::Client,
    res: &DiscoveredResource,
) -> Result<Vec<Value>, kube::Error> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let (items, next) = list_page(client, res, None, "", 500, token).await?;
        out.extend(items);
        match next {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}

/// One object, `None` when it does not exist.
pub async fn get(
    client: &kube::Client,
    res: &DiscoveredResource,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, kube::Error> {
    let ns = (!namespace.is_empty()).then_some(namespace);
    let req = Request::new(url(res, ns))
        .get(name, &GetParams::default())
        .map_err(kube::Error::BuildRequest)?;
    match client.request::<Value>(req).await {
        Ok(v) => Ok(Some(typed(v, res))),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

fn typed(mut item: Value, res: &DiscoveredResource) -> Value {
    // `contains_key` first: `Map::entry` makes an owned key even when it is there.
    if let Some(obj) = item.as_object_mut() {
        if !obj.contains_key("apiVersion") {
            obj.insert("apiVersion".into(), Value::String(res.api_version()));
        }
        if !obj.contains_key("kind") {
            obj.insert("kind".into(), Value::String(res.kind.clone()));
        }
    }
    item
}
