//! `spec.backup` of a CloudProfile (Granary's addition, not a field of shipped Gardener;
//! see docs/architecture.md#bucket-pools) and of a Seed (shipped Gardener): which
//! provider holds the backups, in which region, with which credentials. One type for
//! both, with the checks both share.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::checks::{check_credentials_ref, check_secret_ref};
use crate::common::{FieldError, FieldErrors, ObjectReference, SecretReference};

/// Where and with which credentials backups of the owner's shoots are kept.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::drop_defaults)]
pub struct BackupSpec {
    /// Provider type of the object store (`aws`, `azure`, `gcp`, `local`, …). On a
    /// CloudProfile it may be left out and then means the profile's `spec.type`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// Region of the buckets. When set, every seed of the owner shares one bucket pool
    /// in this region. When left out, the backup provider must be the owner's own
    /// provider, and each region that has a seed gets a pool of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The credentials: a `v1` Secret or a WorkloadIdentity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_ref: Option<ObjectReference>,
    /// The Secret with the object-store credentials, the older way of naming them
    /// (before credentialsRef); used when credentialsRef is not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    /// Provider-specific bucket configuration (e.g. immutability), passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::arbitrary_object")]
    pub provider_config: Option<serde_json::Value>,
    /// Fields Granary does not read, kept so that writing the object back loses nothing.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl BackupSpec {
    /// `region` when set and not empty.
    pub fn region(&self) -> Option<&str> {
        self.region.as_deref().filter(|r| !r.is_empty())
    }

    /// The credentials as an object reference: `credentialsRef`, else `secretRef` as a
    /// `v1` Secret reference.
    pub fn credentials(&self) -> Option<ObjectReference> {
        if let Some(reference) = &self.credentials_ref {
            return Some(reference.clone());
        }
        self.secret_ref.as_ref().map(|secret| ObjectReference {
            api_version: "v1".to_string(),
            kind: "Secret".to_string(),
            name: secret.name.clone(),
            namespace: secret.namespace.clone(),
            ..ObjectReference::default()
        })
    }
}

/// Checks a `spec.backup` at `path` against its owner's provider (`owner_type` found at
/// `owner_type_path`). `provider_required`: a Seed must name the provider, a
/// CloudProfile may leave it to `spec.type`.
pub(crate) fn check_backup_spec(
    errors: &mut FieldErrors,
    path: &str,
    backup: &BackupSpec,
    owner_type_path: &str,
    owner_type: &str,
    provider_required: bool,
) {
    let provider = if backup.provider.is_empty() {
        if provider_required {
            errors.push(FieldError::new(format!("{path}.provider"), "required"));
        } else if owner_type.is_empty() {
            errors.push(FieldError::new(
                format!("{path}.provider"),
                format!("required when {owner_type_path} is empty"),
            ));
        }
        owner_type
    } else {
        backup.provider.as_str()
    };
    match &backup.region {
        Some(region) if region.trim().is_empty() => errors.push(FieldError::new(
            format!("{path}.region"),
            "must not be empty when set",
        )),
        Some(_) => {}
        None => {
            if !provider.is_empty() && !owner_type.is_empty() && provider != owner_type {
                errors.push(FieldError::new(
                    format!("{path}.region"),
                    format!(
                        "required when {path}.provider ({provider}) differs from \
                         {owner_type_path} ({owner_type})"
                    ),
                ));
            }
        }
    }
    match (&backup.credentials_ref, &backup.secret_ref) {
        (None, None) => errors.push(FieldError::new(
            format!("{path}.credentialsRef"),
            format!("required (or the older {path}.secretRef)"),
        )),
        (credentials, secret) => {
            if let Some(credentials) = credentials {
                check_credentials_ref(errors, &format!("{path}.credentialsRef"), credentials);
            }
            if let Some(secret) = secret {
                check_secret_ref(errors, &format!("{path}.secretRef"), secret);
            }
        }
    }
}
