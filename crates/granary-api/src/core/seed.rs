//! `Seed` (`core.gardener.cloud/v1beta1`, cluster-scoped): Granary reads the seed's
//! provider and region and its optional `spec.backup` (a pool of its own, see
//! docs/architecture.md#bucket-pools), and sets `BackupBucketsReady` in
//! `status.conditions`. All other fields of a real Seed are kept as they are.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::backup_spec::{BackupSpec, check_backup_spec};
use super::checks::require;
use crate::common::{Condition, FieldError, FieldErrors};

/// The seed's specification. Granary reads its provider and backup, and keeps every other
/// field as it is.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    doc = "A cluster that hosts the control planes of shoots and runs their backups.",
    group = "core.gardener.cloud",
    version = "v1beta1",
    kind = "Seed",
    plural = "seeds",
    status = "SeedStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Provider", "type": "string", "jsonPath": ".spec.provider.type"}"#,
    printcolumn = r#"{"name": "Region", "type": "string", "jsonPath": ".spec.provider.region"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[schemars(transform = super::drop_defaults)]
pub struct SeedSpec {
    /// Where the seed runs.
    #[serde(default)]
    pub provider: SeedProvider,
    /// The seed's own backup pool, overriding its CloudProfile's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupSpec>,
    /// Fields Granary does not read (dns, networks, settings, ingress, …).
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// `spec.provider` of a Seed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[schemars(transform = super::drop_defaults)]
pub struct SeedProvider {
    /// Provider type of the seed's infrastructure (aws, azure, gcp, ...); the seed
    /// serves the CloudProfiles of the same type.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// Region the seed runs in.
    #[serde(default)]
    pub region: String,
    /// Zones, providerConfig, … kept as they are.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Seed status: its conditions plus whatever else is there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[schemars(transform = super::drop_defaults)]
pub struct SeedStatus {
    /// Conditions of the seed. Granary sets BackupBucketsReady (whether the buckets the
    /// seed provisions are healthy) and DeletionRefused (what a deletion waits for).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl Seed {
    /// The region of the seed's own backup pool: `spec.backup.region`, else the seed's
    /// region (Gardener's default). `None` without `spec.backup`.
    pub fn backup_region(&self) -> Option<&str> {
        let backup = self.spec.backup.as_ref()?;
        Some(backup.region().unwrap_or(&self.spec.provider.region))
    }

    /// The condition of the given type, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|condition| condition.type_ == type_)
    }
}

/// Gardener's defaulting of a Seed's backup: an unset `spec.backup.region` becomes the
/// seed's region when the backup provider is the seed's own (a backup at another
/// provider must name its region, see [`validate_seed`]).
pub fn default_seed(seed: &mut Seed) {
    let provider = &seed.spec.provider;
    if let Some(backup) = seed.spec.backup.as_mut()
        && backup.region().is_none()
        && backup.provider == provider.type_
        && !provider.region.is_empty()
    {
        backup.region = Some(provider.region.clone());
    }
}

/// Every problem of a Seed that Granary cares about: provider type and region, and
/// `spec.backup` as Gardener validates it (provider and credentials required, region
/// required when the backup provider is not the seed's).
pub fn validate_seed(seed: &Seed) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let provider = &seed.spec.provider;
    require(&mut errors, "spec.provider.type", &provider.type_);
    require(&mut errors, "spec.provider.region", &provider.region);
    if let Some(backup) = &seed.spec.backup {
        check_backup_spec(
            &mut errors,
            "spec.backup",
            backup,
            "spec.provider.type",
            &provider.type_,
            true,
        );
    }
    errors
}

/// The update rules Gardener has for a Seed's backup, on defaulted objects: once set,
/// `spec.backup` cannot be removed, and its provider and region cannot change (the
/// bucket would be elsewhere). Also runs [`validate_seed`] on the new object.
pub fn validate_seed_update(old: &Seed, new: &Seed) -> FieldErrors {
    let mut errors = validate_seed(new);
    let Some(old_backup) = &old.spec.backup else {
        return errors;
    };
    let Some(new_backup) = &new.spec.backup else {
        errors.push(FieldError::new("spec.backup", "cannot be removed once set"));
        return errors;
    };
    if old_backup.provider != new_backup.provider {
        errors.push(FieldError::new(
            "spec.backup.provider",
            format!(
                "field is immutable (was {:?}, now {:?})",
                old_backup.provider, new_backup.provider
            ),
        ));
    }
    if old.backup_region() != new.backup_region() {
        errors.push(FieldError::new(
            "spec.backup.region",
            format!(
                "field is immutable (was {:?}, now {:?})",
                old.backup_region().unwrap_or_default(),
                new.backup_region().unwrap_or_default()
            ),
        ));
    }
    errors
}
