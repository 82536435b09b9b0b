//! `velero.io/v1` BackupStorageLocation (`bsl`): where backups live in object storage.
//! Also the `backupStorageLocationSpec` of an OADP NonAdminBackupStorageLocation.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::SecretKeySelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;
use super::FieldErrors;
use super::checks::{self, push};

/// Bucket names with this prefix (S3 multi-region access point ARNs) may contain `/`.
pub const MRAP_BUCKET_PREFIX: &str = "arn:aws:s3:";

/// Where and how to reach a backup store (`velero.io/v1` BackupStorageLocation `spec`).
// Several `printcolumn(type_ = ...)` entries read as duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "BackupStorageLocation",
    namespaced,
    status = "BackupStorageLocationStatus",
    shortname = "bsl",
    printcolumn(
        name = "Provider",
        type_ = "string",
        json_path = ".spec.provider",
        description = "Provider is the provider of the backup storage"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Backup Storage Location status such as Available/Unavailable"
    ),
    printcolumn(
        name = "Last Validated",
        type_ = "date",
        json_path = ".status.lastValidationTime",
        description = "LastValidationTime is the last time the backup store location was validated"
    ),
    printcolumn(
        name = "Access Mode",
        type_ = "string",
        json_path = ".spec.accessMode",
        description = "AccessMode defines the permissions for the backup storage location"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Default",
        type_ = "boolean",
        json_path = ".spec.default",
        description = "Default backup storage location"
    ),
    derive = "PartialEq",
    derive = "Default",
    doc = "BackupStorageLocation is a location where Velero stores backup objects"
)]
#[serde(rename_all = "camelCase")]
pub struct BackupStorageLocationSpec {
    /// Object-store plugin name (`aws`, `gcp`, `azure`, `velero.io/aws`, ...).
    pub provider: String,
    /// Provider-specific settings (region, endpoint, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<BTreeMap<String, String>>,
    /// Secret key holding the credentials file for this location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<SecretKeySelector>,
    /// Velero's inline `StorageType`.
    pub object_storage: ObjectStorageLocation,
    /// Whether this is the default location, used by backups that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
    /// Unset means `ReadWrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<BackupStorageLocationAccessMode>,
    /// How often backups are synced from the store; `0` disables sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub backup_sync_period: Option<Duration>,
    /// How often the store is validated; `0` disables validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub validation_frequency: Option<Duration>,
}

/// Bucket, prefix and TLS trust of a location.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStorageLocation {
    /// The bucket that holds the backups.
    pub bucket: String,
    /// The directory in the bucket under which backups are kept; unset means the
    /// bucket's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Deprecated inline CA bundle (base64 on the wire); use `caCertRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "base64_bytes")]
    pub ca_cert: Option<ByteString>,
    /// Secret key (same namespace) holding the CA bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert_ref: Option<SecretKeySelector>,
}

fn base64_bytes(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "format": "byte" })
}

/// Availability of a location.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum BackupStorageLocationPhase {
    Available,
    Unavailable,
}

/// Whether Velero may write to a location.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum BackupStorageLocationAccessMode {
    ReadOnly,
    ReadWrite,
}

/// Observed state of a location.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStorageLocationStatus {
    /// Unset is read as `Unavailable` (the upstream CRD default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BackupStorageLocationPhase>,
    /// When the backups in the location were last synced into the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub last_synced_time: Option<DateTime<Utc>>,
    /// When the location was last checked for being usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub last_validation_time: Option<DateTime<Utc>>,
    /// Why the location is unavailable, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Deprecated, unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_synced_revision: Option<String>,
    /// Deprecated, unused (the spec has the access mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<BackupStorageLocationAccessMode>,
}

impl BackupStorageLocationSpec {
    /// Fills `accessMode: ReadWrite` when unset.
    pub fn apply_defaults(&mut self) {
        self.access_mode
            .get_or_insert(BackupStorageLocationAccessMode::ReadWrite);
    }

    /// A copy with [`BackupStorageLocationSpec::apply_defaults`] applied.
    pub fn defaulted(&self) -> Self {
        let mut spec = self.clone();
        spec.apply_defaults();
        spec
    }

    /// The access mode, `ReadWrite` when unset.
    pub fn effective_access_mode(&self) -> BackupStorageLocationAccessMode {
        self.access_mode
            .unwrap_or(BackupStorageLocationAccessMode::ReadWrite)
    }

    /// Bucket and prefix with leading and trailing `/` trimmed, as Velero uses them.
    pub fn bucket_and_prefix(&self) -> (&str, &str) {
        (
            self.object_storage.bucket.trim_matches('/'),
            self.object_storage
                .prefix
                .as_deref()
                .unwrap_or("")
                .trim_matches('/'),
        )
    }

    /// Every problem with this spec; paths start with `prefix` (`spec`,
    /// `spec.backupStorageLocationSpec`).
    pub fn validate_at(&self, prefix: &str) -> FieldErrors {
        let mut errs = FieldErrors::new();
        let p = |field: &str| format!("{prefix}.{field}");
        if self.provider.trim().is_empty() {
            push(&mut errs, p("provider"), "required");
        }
        let (bucket, _) = self.bucket_and_prefix();
        if bucket.is_empty() {
            push(&mut errs, p("objectStorage.bucket"), "required");
        } else if bucket.contains('/') && !bucket.starts_with(MRAP_BUCKET_PREFIX) {
            push(
                &mut errs,
                p("objectStorage.bucket"),
                format!(
                    "must not contain '/' (got {bucket:?}; put the path in {prefix}.objectStorage.prefix)"
                ),
            );
        }
        let os = &self.object_storage;
        if os.ca_cert.as_ref().is_some_and(|c| !c.0.is_empty()) && os.ca_cert_ref.is_some() {
            push(
                &mut errs,
                p("objectStorage.caCertRef"),
                format!("may not be set together with {prefix}.objectStorage.caCert"),
            );
        }
        for (field, selector) in [
            ("credential", self.credential.as_ref()),
            ("objectStorage.caCertRef", os.ca_cert_ref.as_ref()),
        ] {
            if let Some(s) = selector {
                if s.name.is_empty() {
                    push(&mut errs, p(&format!("{field}.name")), "required");
                }
                if s.key.is_empty() {
                    push(&mut errs, p(&format!("{field}.key")), "required");
                }
            }
        }
        checks::duration(
            &mut errs,
            &p("backupSyncPeriod"),
            self.backup_sync_period.as_ref(),
        );
        checks::duration(
            &mut errs,
            &p("validationFrequency"),
            self.validation_frequency.as_ref(),
        );
        errs
    }
}

impl BackupStorageLocation {
    /// Every problem with this location's spec, paths from `spec`.
    pub fn validate(&self) -> FieldErrors {
        self.spec.validate_at("spec")
    }

    /// True when the status says `Available` (unset counts as `Unavailable`).
    pub fn is_available(&self) -> bool {
        self.status.as_ref().and_then(|s| s.phase) == Some(BackupStorageLocationPhase::Available)
    }
}
