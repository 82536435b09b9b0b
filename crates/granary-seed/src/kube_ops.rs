//! Small Kubernetes writes the seed reconcilers repeat: finalizers (with an optimistic
//! lock, so a concurrent writer makes the call fail with 409 instead of losing a
//! finalizer), annotations, status merge patches and namespaces.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use std::fmt::Debug;

/// True for a 404 from the API server.
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Reads garden object `name` as this seed sees it: `None` when it is gone, and also when
/// the garden's seed authorizer refuses it (403) — the object is another seed's now, as
/// after a hand-over; letting go of it makes no provider call.
pub(crate) async fn get_assigned<K>(api: &Api<K>, name: &str) -> Result<Option<K>, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await {
        Err(kube::Error::Api(s)) if s.code == 403 => {
            tracing::debug!(
                name,
                "the garden refuses this seed the object: not ours (any more)"
            );
            Ok(None)
        }
        other => other,
    }
}

/// True for a 409 from the API server.
pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn finalizer_patch<K: Resource>(obj: &K, finalizers: Vec<String>) -> Value {
    json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": obj.meta().resource_version,
    }})
}

/// Adds `finalizer` to `obj` unless present. Returns the updated object.
pub(crate) async fn add_finalizer<K>(
    api: &Api<K>,
    obj: &K,
    finalizer: &str,
) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    if obj.finalizers().iter().any(|f| f == finalizer) {
        return Ok(obj.clone());
    }
    let mut list = obj.finalizers().to_vec();
    list.push(finalizer.to_string());
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(finalizer_patch(obj, list)),
    )
    .await
}

/// Removes `finalizer` from object `obj` if present, re-reading the object when a
/// concurrent write changed it since `obj` was read. A vanished object is fine.
pub(crate) async fn remove_finalizer<K>(
    api: &Api<K>,
    obj: &K,
    finalizer: &str,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = obj.name_any();
    let mut current = obj.clone();
    for attempt in 0.. {
        if !current.finalizers().iter().any(|f| f == finalizer) {
            return Ok(());
        }
        let list: Vec<String> = current
            .finalizers()
            .iter()
            .filter(|f| *f != finalizer)
            .cloned()
            .collect();
        match api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(finalizer_patch(&current, list)),
            )
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) if is_conflict(&e) && attempt < 5 => match api.get_opt(&name).await? {
                Some(fresh) => current = fresh,
                None => return Ok(()),
            },
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sets (`Some`) or removes (`None`) annotations of object `name`.
pub(crate) async fn patch_annotations<K>(
    api: &Api<K>,
    name: &str,
    changes: &[(&str, Option<String>)],
) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut annotations = Map::new();
    for (key, value) in changes {
        annotations.insert(
            (*key).to_string(),
            value.clone().map_or(Value::Null, Value::String),
        );
    }
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
    )
    .await
}

/// Merge-patches the status subresource of `name` with `status` (a JSON object whose
/// `null` fields are removed).
pub(crate) async fn patch_status<K>(
    api: &Api<K>,
    name: &str,
    status: Value,
) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
}

/// Creates namespace `name` unless it exists; `Ok(false)` when it exists but is being
/// deleted (nothing can be written there then).
pub(crate) async fn ensure_namespace(
    client: &kube::Client,
    name: &str,
) -> Result<bool, kube::Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    if let Some(ns) = api.get_opt(name).await? {
        return Ok(ns.metadata.deletion_timestamp.is_none());
    }
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.to_string());
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(true),
        Err(e) if is_conflict(&e) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Whether namespace `name` exists and is not being deleted.
pub(crate) async fn namespace_usable(
    client: &kube::Client,
    name: &str,
) -> Result<bool, kube::Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    Ok(api
        .get_opt(name)
        .await?
        .is_some_and(|ns| ns.metadata.deletion_timestamp.is_none()))
}
