//! `core.gardener.cloud/v1beta1`: the garden-side kinds Granary reads (CloudProfile,
//! Seed, Shoot: subsets that keep every field they do not name) and the ones it manages
//! (BackupBucket, BackupEntry), with validation, Gardener's defaulting, the names of
//! annotations, labels and finalizers, and [`crds`] for landscapes without
//! gardener-apiserver (see docs/operations.md#upgrades-and-crds).

mod backup_spec;
mod backupbucket;
mod backupentry;
pub(crate) mod checks;
mod cloudprofile;
pub mod constants;
mod seed;
mod shoot;

#[cfg(test)]
pub(crate) mod tests;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use backup_spec::BackupSpec;
pub use backupbucket::{
    BackupBucket, BackupBucketProvider, BackupBucketSpec, BackupBucketStatus,
    validate_backup_bucket,
};
pub use backupentry::{BackupEntry, BackupEntrySpec, BackupEntryStatus, validate_backup_entry};
pub use cloudprofile::{
    CloudProfile, CloudProfileSpec, CloudProfileStatus, Region, validate_cloud_profile,
};
pub use constants::*;
pub use seed::{
    Seed, SeedProvider, SeedSpec, SeedStatus, default_seed, validate_seed, validate_seed_update,
};
pub use shoot::{CloudProfileReference, Shoot, ShootProvider, ShootSpec, ShootStatus};

/// The CRDs of this group, for the garden side.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        CloudProfile::crd(),
        Seed::crd(),
        Shoot::crd(),
        BackupBucket::crd(),
        BackupEntry::crd(),
    ]
}

/// Schema of a field holding arbitrary JSON (a Kubernetes `RawExtension`): an object
/// whose content the API server keeps as it is.
pub(crate) fn arbitrary_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Schema transform for structs with `#[serde(default)]` fields: schemars writes the
/// default into the schema, but Granary's CRDs carry no `default:` (defaults live in
/// Rust, where the controllers apply them).
pub(crate) fn drop_defaults(schema: &mut schemars::Schema) {
    if let Some(object) = schema.as_object_mut() {
        object.remove("default");
    }
    if let Some(properties) = schema
        .get_mut("properties")
        .and_then(|properties| properties.as_object_mut())
    {
        for property in properties.values_mut() {
            if let Some(property) = property.as_object_mut() {
                property.remove("default");
            }
        }
    }
}

/// Test helper: fails when a CRD schema is not structural in the ways our types could
/// break it (combinators, references, defaults, `additionalProperties` beside
/// `properties`, a node without a type that does not preserve unknown fields).
#[cfg(test)]
pub(crate) fn assert_structural(crd: &CustomResourceDefinition) {
    fn walk(name: &str, path: &str, node: &serde_json::Value) {
        let Some(object) = node.as_object() else {
            return;
        };
        for forbidden in [
            "oneOf",
            "anyOf",
            "allOf",
            "not",
            "$ref",
            "default",
            "x-kubernetes-validations",
        ] {
            assert!(
                !object.contains_key(forbidden),
                "{name}: {forbidden} at {path}"
            );
        }
        assert!(
            !(object.contains_key("properties") && object.contains_key("additionalProperties")),
            "{name}: additionalProperties next to properties at {path}"
        );
        let preserves = object.get("x-kubernetes-preserve-unknown-fields")
            == Some(&serde_json::Value::Bool(true));
        let int_or_string =
            object.get("x-kubernetes-int-or-string") == Some(&serde_json::Value::Bool(true));
        assert!(
            object.contains_key("type") || preserves || int_or_string,
            "{name}: no type at {path}"
        );
        if let Some(properties) = object.get("properties").and_then(|p| p.as_object()) {
            for (key, child) in properties {
                walk(name, &format!("{path}.{key}"), child);
            }
        }
        if let Some(items) = object.get("items") {
            walk(name, &format!("{path}[]"), items);
        }
        if let Some(additional) = object.get("additionalProperties") {
            walk(name, &format!("{path}{{}}"), additional);
        }
    }
    let name = crd.metadata.name.clone().unwrap_or_default();
    for version in &crd.spec.versions {
        let schema = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("every generated CRD has a schema");
        let json = serde_json::to_value(schema).expect("a schema serializes");
        walk(&name, "", &json);
    }
}
