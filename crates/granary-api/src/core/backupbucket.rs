//! The garden `BackupBucket` (`core.gardener.cloud/v1beta1`, cluster-scoped): one
//! provider-side bucket, a shard of a bucket pool (docs/architecture.md#bucket-pools).
//! Granary adds `status.seedName` (the seed holding the extension object now) and
//! `status.entryCount` (the placement counter) to Gardener's fields.

use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::checks::{check_credentials_ref, check_secret_ref, dns_label_problem, require};
use super::constants::{LABEL_POOL_KIND, PoolKind};
use crate::bucket_name::{BucketName, validate_bucket_name_for_provider};
use crate::common::{
    FieldError, FieldErrors, LastError, LastOperation, ObjectReference, SecretReference,
};

/// What bucket to have, where, and which seed provisions it.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    doc = "A bucket in an object store that holds the backups of many shoots; the seed named in spec.seedName creates and looks after it.",
    group = "core.gardener.cloud",
    version = "v1beta1",
    kind = "BackupBucket",
    plural = "backupbuckets",
    shortname = "bbc",
    category = "all",
    status = "BackupBucketStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Provider", "type": "string", "jsonPath": ".spec.provider.type"}"#,
    printcolumn = r#"{"name": "Region", "type": "string", "jsonPath": ".spec.provider.region"}"#,
    printcolumn = r#"{"name": "Seed", "type": "string", "jsonPath": ".spec.seedName"}"#,
    printcolumn = r#"{"name": "Status", "type": "string", "jsonPath": ".status.lastOperation.state"}"#,
    printcolumn = r#"{"name": "Entries", "type": "integer", "jsonPath": ".status.entryCount", "priority": 1}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::drop_defaults)]
pub struct BackupBucketSpec {
    /// Provider and region of the object store; immutable.
    #[serde(default)]
    pub provider: BackupBucketProvider,
    /// Provider-specific configuration (e.g. immutability), passed to the seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::arbitrary_object")]
    pub provider_config: Option<serde_json::Value>,
    /// The credentials: a `v1` Secret or a WorkloadIdentity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_ref: Option<ObjectReference>,
    /// Deprecated in Gardener in favour of `credentialsRef`; kept for older objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    /// The seed that should provision the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_name: Option<String>,
    /// For self-hosted shoots: the shoot whose control plane provisions the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shoot_ref: Option<ObjectReference>,
}

/// `spec.provider` of a BackupBucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = super::drop_defaults)]
pub struct BackupBucketProvider {
    /// Provider type of the object store (aws, azure, gcp, local, ...).
    #[serde(rename = "type")]
    pub type_: String,
    /// Region of the object store.
    pub region: String,
}

/// What the seed reported about the bucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::drop_defaults)]
pub struct BackupBucketStatus {
    /// Provider-specific status, copied to the bucket's entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::arbitrary_object")]
    pub provider_status: Option<serde_json::Value>,
    /// The last operation on the bucket (create, reconcile, delete, migrate, restore)
    /// and how it went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_operation: Option<LastOperation>,
    /// The last error of the bucket's operations, with codes; cleared when the
    /// operation succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastError>,
    /// The metadata.generation the seed last acted on; the status is current when it
    /// equals metadata.generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The secret the provider generated for the bucket (e.g. Azure's storage key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_secret_ref: Option<SecretReference>,
    /// Granary's addition, not in Gardener's BackupBucket: the seed that holds the
    /// extension object now (as a BackupEntry's `status.seedName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_name: Option<String>,
    /// Granary's addition, not in Gardener's BackupBucket: how many BackupEntries are
    /// placed in this bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "entry_count_schema")]
    pub entry_count: Option<u32>,
    /// Granary's addition, not in Gardener's BackupBucket: the most BackupEntries the
    /// garden places in this bucket (its provider's bucket quota); absent when there is
    /// no limit. Written by the garden, so that tools (`granary migrate --dry-run`) see
    /// the same limit the garden enforces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "entry_count_schema")]
    pub entry_limit: Option<u32>,
}

/// A count: `type: integer` with no `format` (`uint32` is not a Kubernetes format).
fn entry_count_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "integer", "minimum": 0})
}

impl BackupBucket {
    /// The seed responsible now: `status.seedName` when set, else `spec.seedName`. A
    /// hand-over is under way when the two differ.
    pub fn responsible_seed(&self) -> Option<&str> {
        self.status
            .as_ref()
            .and_then(|status| status.seed_name.as_deref())
            .filter(|seed| !seed.is_empty())
            .or(self
                .spec
                .seed_name
                .as_deref()
                .filter(|seed| !seed.is_empty()))
    }

    /// The pool kind from the `granary.gardener.cloud/pool-kind` label, if it is one.
    pub fn pool_kind(&self) -> Option<PoolKind> {
        self.labels().get(LABEL_POOL_KIND)?.parse().ok()
    }

    /// The credentials: `credentialsRef`, else the deprecated `secretRef` as a Secret.
    pub fn credentials(&self) -> Option<ObjectReference> {
        if let Some(reference) = &self.spec.credentials_ref {
            return Some(reference.clone());
        }
        self.spec.secret_ref.as_ref().map(|secret| ObjectReference {
            api_version: "v1".to_string(),
            kind: "Secret".to_string(),
            name: secret.name.clone(),
            namespace: secret.namespace.clone(),
            ..ObjectReference::default()
        })
    }
}

/// Every problem of a garden BackupBucket: its name must be a [`BucketName`] (a legacy
/// bucket's only needs to suit its provider and be a DNS label), provider type and region
/// and credentials are required, and exactly one of `seedName` and `shootRef` is set.
pub fn validate_backup_bucket(bucket: &BackupBucket) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let name = bucket.name_any();
    let spec = &bucket.spec;
    if bucket.pool_kind() == Some(PoolKind::Legacy) {
        if let Some(problem) = dns_label_problem(&name) {
            errors.push(FieldError::new("metadata.name", problem));
        } else if let Err(error) = validate_bucket_name_for_provider(&spec.provider.type_, &name) {
            errors.push(FieldError::new("metadata.name", error.to_string()));
        }
    } else if let Err(error) = BucketName::try_from(name.as_str()) {
        errors.push(FieldError::new("metadata.name", error.to_string()));
    }
    require(&mut errors, "spec.provider.type", &spec.provider.type_);
    require(&mut errors, "spec.provider.region", &spec.provider.region);
    match (&spec.credentials_ref, &spec.secret_ref) {
        (Some(credentials), _) => {
            check_credentials_ref(&mut errors, "spec.credentialsRef", credentials);
        }
        (None, Some(secret)) => check_secret_ref(&mut errors, "spec.secretRef", secret),
        (None, None) => errors.push(FieldError::new("spec.credentialsRef", "required")),
    }
    let seed = spec.seed_name.as_deref().filter(|s| !s.is_empty());
    match (seed, &spec.shoot_ref) {
        (Some(_), Some(_)) => errors.push(FieldError::new(
            "spec.shootRef",
            "must not be set together with spec.seedName",
        )),
        (None, None) => errors.push(FieldError::new(
            "spec.seedName",
            "required unless spec.shootRef is set",
        )),
        (None, Some(shoot)) => {
            require(&mut errors, "spec.shootRef.name", &shoot.name);
            require(&mut errors, "spec.shootRef.namespace", &shoot.namespace);
        }
        (Some(_), None) => {}
    }
    errors
}
