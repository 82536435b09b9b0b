//! Building a manifest item from an object's JSON: the one function both the archive
//! writer and the tarball reader use, so the manifest written beside a backup and the
//! one rebuilt from its tarball cannot drift apart.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{ManifestError, ManifestItem};
use crate::resource::{GroupResource, split_api_version};

/// Describes `object` (a Kubernetes object as JSON) as an item of resource `gr`.
///
/// Requires `apiVersion` (whose group must be `gr`'s), `kind` and `metadata.name`;
/// `metadata.namespace`, `uid`, `labels`, `annotations` and `ownerReferences` are optional.
pub fn item_from_object(gr: &GroupResource, object: &Value) -> Result<ManifestItem, ManifestError> {
    let invalid = |msg: String| ManifestError::InvalidObject(msg);
    let obj = object
        .as_object()
        .ok_or_else(|| invalid("not a JSON object".into()))?;
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("missing apiVersion".into()))?;
    let (group, version) = split_api_version(api_version)
        .ok_or_else(|| invalid(format!("malformed apiVersion {api_version:?}")))?;
    if group != gr.group {
        return Err(invalid(format!(
            "apiVersion {api_version:?} is not in the group of resource {gr}"
        )));
    }
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| invalid("missing kind".into()))?;
    let meta = obj
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("missing metadata".into()))?;
    let text = |field: &str| -> Result<String, ManifestError> {
        match meta.get(field) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(invalid(format!("metadata.{field} is not a string"))),
        }
    };
    let name = text("name")?;
    if name.is_empty() {
        return Err(invalid("missing metadata.name".into()));
    }
    let string_map = |field: &str| -> Result<BTreeMap<String, String>, ManifestError> {
        match meta.get(field) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    _ => Err(invalid(format!("metadata.{field}.{k} is not a string"))),
                })
                .collect(),
            Some(_) => Err(invalid(format!("metadata.{field} is not an object"))),
        }
    };
    let owners = match meta.get("ownerReferences") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(refs)) => refs
            .iter()
            .map(|r| {
                r.get("uid")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| invalid("metadata.ownerReferences[] without uid".into()))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid("metadata.ownerReferences is not a list".into())),
    };
    Ok(ManifestItem {
        group: gr.group.clone(),
        version: version.to_owned(),
        kind: kind.to_owned(),
        resource: gr.resource.clone(),
        namespace: text("namespace")?,
        name,
        uid: text("uid")?,
        labels: string_map("labels")?,
        annotations: string_map("annotations")?,
        owners,
    })
}
