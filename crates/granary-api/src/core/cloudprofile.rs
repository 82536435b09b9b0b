//! `CloudProfile` (`core.gardener.cloud/v1beta1`, cluster-scoped): Granary reads its
//! provider type, its regions and its `spec.backup` (Granary's extension of Gardener's
//! CloudProfile, see docs/architecture.md#bucket-pools), and reports problems with
//! `spec.backup` in `status.conditions`. Everything else a real profile holds is kept as
//! it is, in Rust (`extra`) and in the CRD (unknown fields preserved).

use std::collections::{BTreeMap, BTreeSet};

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::backup_spec::{BackupSpec, check_backup_spec};
use super::checks::require;
use crate::common::{Condition, FieldError, FieldErrors};

/// The profile's specification. Granary reads its type, regions and backup, and keeps
/// every other field as it is.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    doc = "A provider's offering for shoots; its spec.backup says where the backups of its shoots go.",
    group = "core.gardener.cloud",
    version = "v1beta1",
    kind = "CloudProfile",
    plural = "cloudprofiles",
    shortname = "cprofile",
    shortname = "cpfl",
    status = "CloudProfileStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Provider", "type": "string", "jsonPath": ".spec.type"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[schemars(transform = super::drop_defaults)]
pub struct CloudProfileSpec {
    /// The provider of the machines (`aws`, `azure`, `gcp`, …).
    #[serde(rename = "type", default)]
    pub type_: String,
    /// The regions shoots of this profile may use.
    #[serde(default)]
    pub regions: Vec<Region>,
    /// Where the backups of this profile's shoots go; without it they have no backups.
    /// An addition of Granary's: shipped Gardener's CloudProfile has no such field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupSpec>,
    /// Fields Granary does not read (kubernetes versions, machine images, …).
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// One region of a CloudProfile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[schemars(transform = super::drop_defaults)]
pub struct Region {
    /// Name of the region.
    pub name: String,
    /// Zones, labels, access restrictions, … kept as they are.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// CloudProfile status: Granary's conditions plus whatever else is there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[schemars(transform = super::drop_defaults)]
pub struct CloudProfileStatus {
    /// Granary's conditions: BackupConfigurationValid says whether spec.backup can be
    /// used, DeletionRefused what a deletion waits for. Shipped Gardener's CloudProfile
    /// has no status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl CloudProfile {
    /// The backup provider: `spec.backup.provider`, else `spec.type` (an unset provider
    /// means the profile's own; docs/architecture.md#bucket-pools). `None` without
    /// `spec.backup`.
    pub fn backup_provider(&self) -> Option<&str> {
        let backup = self.spec.backup.as_ref()?;
        Some(if backup.provider.is_empty() {
            self.spec.type_.as_str()
        } else {
            backup.provider.as_str()
        })
    }

    /// True when `name` is one of `spec.regions`.
    pub fn has_region(&self, name: &str) -> bool {
        self.spec.regions.iter().any(|region| region.name == name)
    }
}

/// Every problem of a CloudProfile that Granary cares about, with field paths:
/// `spec.type` and the region names, and `spec.backup` by the rules of
/// docs/architecture.md#bucket-pools (provider defaults to `spec.type`; a region is
/// required for a provider other than `spec.type`; credentials are required).
pub fn validate_cloud_profile(profile: &CloudProfile) -> FieldErrors {
    let mut errors = FieldErrors::new();
    let spec = &profile.spec;
    require(&mut errors, "spec.type", &spec.type_);
    let mut seen = BTreeSet::new();
    for (i, region) in spec.regions.iter().enumerate() {
        let path = format!("spec.regions[{i}].name");
        require(&mut errors, &path, &region.name);
        if !region.name.is_empty() && !seen.insert(region.name.as_str()) {
            errors.push(FieldError::new(
                path,
                format!("duplicate region {:?}", region.name),
            ));
        }
    }
    if let Some(backup) = &spec.backup {
        check_backup_spec(
            &mut errors,
            "spec.backup",
            backup,
            "spec.type",
            &spec.type_,
            false,
        );
    }
    errors
}
