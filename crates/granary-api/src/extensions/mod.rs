//! `extensions.gardener.cloud/v1alpha1` BackupBucket and BackupEntry: the seed-side
//! objects the extension controllers reconcile against the object store (see
//! docs/architecture.md#seed-mirror). Both are cluster-scoped, wire-compatible with
//! Gardener's own extension objects (including the full extension `DefaultStatus`), so
//! upstream objects round-trip.

#[cfg(test)]
mod tests;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Condition, FieldError, FieldErrors, LastError, LastOperation, SecretReference,
    gardener_string_enum,
};
use crate::core::ANNOTATION_OPERATION;
use crate::core::checks::{
    check_secret_ref, dns_label_problem, dns_subdomain_problem, push_problem, require,
};

gardener_string_enum! {
    /// Which Gardener cluster an extension object is for (`DefaultSpec.class`); immutable
    /// once set ([`validate_class_update`]).
    ExtensionClass {
        Garden = "garden",
        Seed = "seed",
        Shoot = "shoot",
    }
}

/// Label Gardener puts on its extension CRDs: deleting them needs a confirmation.
pub const LABEL_DELETION_PROTECTED: &str = "gardener.cloud/deletion-protected";

/// The seed-side bucket: what the provider should create.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    doc = "A bucket in an object store, created and kept by the seed's backup controller for a garden BackupBucket.",
    group = "extensions.gardener.cloud",
    version = "v1alpha1",
    kind = "BackupBucket",
    plural = "backupbuckets",
    shortname = "bb",
    status = "BackupBucketStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Type", "type": "string", "jsonPath": ".spec.type", "description": "The type of the cloud provider for this resource."}"#,
    printcolumn = r#"{"name": "Region", "type": "string", "jsonPath": ".spec.region", "description": "The region into which the backup bucket should be created."}"#,
    printcolumn = r#"{"name": "State", "type": "string", "jsonPath": ".status.lastOperation.state", "description": "Status of the last operation."}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": "Creation timestamp."}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::core::drop_defaults)]
pub struct BackupBucketSpec {
    /// Provider type (`aws`, `azure`, `gcp`, `local`, …).
    #[serde(rename = "type")]
    pub type_: String,
    /// Region of the object store the bucket is created in.
    pub region: String,
    /// The copied credentials (`garden/bucket-<bucket>`).
    pub secret_ref: SecretReference,
    /// Provider-specific configuration of the bucket (e.g. immutability), as the garden
    /// BackupBucket has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::core::arbitrary_object")]
    pub provider_config: Option<serde_json::Value>,
    /// Which kind of cluster the object is for: garden, seed or shoot; immutable once
    /// set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<ExtensionClass>,
}

/// The seed-side entry: a prefix in a bucket.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    doc = "The place of one shoot's backups in a bucket (a prefix named after the entry), kept by the seed's backup controller for a garden BackupEntry.",
    group = "extensions.gardener.cloud",
    version = "v1alpha1",
    kind = "BackupEntry",
    plural = "backupentries",
    shortname = "be",
    status = "DefaultStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Type", "type": "string", "jsonPath": ".spec.type", "description": "The type of the cloud provider for this resource."}"#,
    printcolumn = r#"{"name": "Region", "type": "string", "jsonPath": ".spec.region", "description": "The region into which the backup entry should be created."}"#,
    printcolumn = r#"{"name": "Bucket", "type": "string", "jsonPath": ".spec.bucketName", "description": "The name of the bucket into which the backup entry should be created."}"#,
    printcolumn = r#"{"name": "State", "type": "string", "jsonPath": ".status.lastOperation.state", "description": "Status of the last operation."}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": "Creation timestamp."}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::core::drop_defaults)]
pub struct BackupEntrySpec {
    /// Provider type of the object store (aws, azure, gcp, local, ...).
    #[serde(rename = "type")]
    pub type_: String,
    /// Region of the object store.
    pub region: String,
    /// The bucket that holds the entry's backups, under a prefix named after the entry.
    pub bucket_name: String,
    /// The copied credentials (`garden/entry-<entry>`).
    pub secret_ref: SecretReference,
    /// Provider-specific configuration of the entry, passed to the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::core::arbitrary_object")]
    pub provider_config: Option<serde_json::Value>,
    /// The bucket's `providerStatus`, copied from the garden BackupBucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::core::arbitrary_object")]
    pub backup_bucket_provider_status: Option<serde_json::Value>,
    /// Which kind of cluster the object is for: garden, seed or shoot; immutable once
    /// set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<ExtensionClass>,
}

/// Gardener's extension `DefaultStatus`, shared by every extension kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::core::drop_defaults)]
pub struct DefaultStatus {
    /// Provider-specific status of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::core::arbitrary_object")]
    pub provider_status: Option<serde_json::Value>,
    /// Conditions of the object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The last error of the object's operations, with codes; cleared when the
    /// operation succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastError>,
    /// The last operation on the object (create, reconcile, delete, migrate, restore)
    /// and how it went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_operation: Option<LastOperation>,
    /// The metadata.generation the controller last acted on; the status is current when
    /// it equals metadata.generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Controller state carried across a migrate/restore between seeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::core::arbitrary_object")]
    pub state: Option<serde_json::Value>,
    /// Resources `state` refers to by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<NamedResourceReference>,
}

/// A resource the object's state refers to, by the name the state uses for it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamedResourceReference {
    /// The name by which the object's state refers to the resource.
    pub name: String,
    /// The referenced resource.
    pub resource_ref: CrossVersionObjectReference,
}

/// `autoscalingv1.CrossVersionObjectReference`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::core::drop_defaults)]
pub struct CrossVersionObjectReference {
    /// Kind of the referenced resource.
    pub kind: String,
    /// Name of the referenced resource.
    pub name: String,
    /// API version of the referenced resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
}

/// Extension BackupBucket status: the default status plus the generated secret.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupBucketStatus {
    #[serde(flatten)]
    pub default: DefaultStatus,
    /// The secret the provider generated for the bucket (e.g. Azure's storage key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_secret_ref: Option<SecretReference>,
}

impl BackupBucket {
    /// The default part of the status, if there is a status.
    pub fn default_status(&self) -> Option<&DefaultStatus> {
        self.status.as_ref().map(|status| &status.default)
    }

    /// The `gardener.cloud/operation` annotation, if set.
    pub fn operation(&self) -> Option<&str> {
        self.annotations()
            .get(ANNOTATION_OPERATION)
            .map(String::as_str)
    }
}

impl BackupEntry {
    /// The status, if there is one.
    pub fn default_status(&self) -> Option<&DefaultStatus> {
        self.status.as_ref()
    }

    /// The `gardener.cloud/operation` annotation, if set.
    pub fn operation(&self) -> Option<&str> {
        self.annotations()
            .get(ANNOTATION_OPERATION)
            .map(String::as_str)
    }
}

/// Every problem of an extension BackupBucket: its name (the bucket) is a DNS label,
/// type and region are required, the secret reference names a secret.
pub fn validate_extension_backup_bucket(bucket: &BackupBucket) -> FieldErrors {
    let mut errors = FieldErrors::new();
    push_problem(
        &mut errors,
        "metadata.name",
        dns_label_problem(&bucket.name_any()),
    );
    require(&mut errors, "spec.type", &bucket.spec.type_);
    require(&mut errors, "spec.region", &bucket.spec.region);
    check_secret_ref(&mut errors, "spec.secretRef", &bucket.spec.secret_ref);
    errors
}

/// Every problem of an extension BackupEntry: a valid name, type, region, a bucket name
/// and a secret reference that names a secret.
pub fn validate_extension_backup_entry(entry: &BackupEntry) -> FieldErrors {
    let mut errors = FieldErrors::new();
    push_problem(
        &mut errors,
        "metadata.name",
        dns_subdomain_problem(&entry.name_any()),
    );
    require(&mut errors, "spec.type", &entry.spec.type_);
    require(&mut errors, "spec.region", &entry.spec.region);
    push_problem(
        &mut errors,
        "spec.bucketName",
        dns_label_problem(&entry.spec.bucket_name),
    );
    check_secret_ref(&mut errors, "spec.secretRef", &entry.spec.secret_ref);
    errors
}

/// Gardener's rule for `spec.class` of every extension object: once set it may not
/// change (a CEL `self == oldSelf` rule upstream, checked only when both the old and
/// the new object carry a class). Granary's CRDs carry no CEL, so its writers check it.
pub fn validate_class_update(
    old: Option<ExtensionClass>,
    new: Option<ExtensionClass>,
) -> FieldErrors {
    match (old, new) {
        (Some(old), Some(new)) if old != new => vec![FieldError::new(
            "spec.class",
            format!("Value is immutable (was {old}, now {new})"),
        )],
        _ => FieldErrors::new(),
    }
}

/// The CRDs of this group, for the seed side, labelled deletion-protected as Gardener's.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![BackupBucket::crd(), BackupEntry::crd()];
    for crd in &mut crds {
        crd.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(LABEL_DELETION_PROTECTED.to_string(), "true".to_string());
    }
    crds
}
