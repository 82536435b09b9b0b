//! `Shoot` (`core.gardener.cloud/v1beta1`, namespaced in its project namespace): Granary
//! reads which seed hosts it, its region, purpose and cloud profile, and its technical
//! ID and UID, from which its BackupEntry name is made. All other fields of a real Shoot
//! are kept as they are.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Namespaces of Gardener projects are `garden-<project>`; the `garden` project's own
/// namespace is just `garden`.
const PROJECT_NAMESPACE_PREFIX: &str = "garden-";

/// The shoot's specification. Granary reads its cloud profile, provider, purpose, region
/// and seed, and keeps every other field as it is.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    doc = "A Kubernetes cluster managed by Gardener; Granary keeps a BackupEntry for each shoot that has a seed.",
    group = "core.gardener.cloud",
    version = "v1beta1",
    kind = "Shoot",
    plural = "shoots",
    category = "all",
    namespaced,
    status = "ShootStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Provider", "type": "string", "jsonPath": ".spec.provider.type"}"#,
    printcolumn = r#"{"name": "Region", "type": "string", "jsonPath": ".spec.region"}"#,
    printcolumn = r#"{"name": "Seed", "type": "string", "jsonPath": ".spec.seedName"}"#,
    printcolumn = r#"{"name": "Purpose", "type": "string", "jsonPath": ".spec.purpose"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[schemars(transform = super::drop_defaults)]
pub struct ShootSpec {
    /// The profile, by kind (`CloudProfile` or `NamespacedCloudProfile`) and name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_profile: Option<CloudProfileReference>,
    /// The older way to name the CloudProfile; read when `cloudProfile` is unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_profile_name: Option<String>,
    #[serde(default)]
    pub provider: ShootProvider,
    /// What the cluster is for: `evaluation`, `testing`, `development`, `production` or
    /// `infrastructure` (gardener-apiserver refuses any other value, and so does this
    /// schema). It decides the deletion grace period of the shoot's backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["evaluation", "testing", "development", "production", "infrastructure"]))]
    pub purpose: Option<String>,
    /// Region the shoot's infrastructure runs in.
    #[serde(default)]
    pub region: String,
    /// The seed hosting the control plane, once scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_name: Option<String>,
    /// Fields Granary does not read (kubernetes, networking, workers, …).
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// `spec.cloudProfile` of a Shoot.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[schemars(transform = super::drop_defaults)]
pub struct CloudProfileReference {
    /// Kind of the profile: CloudProfile (the default) or NamespacedCloudProfile.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Name of the profile.
    pub name: String,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// The shoot's infrastructure provider.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[schemars(transform = super::drop_defaults)]
pub struct ShootProvider {
    /// Provider type of the shoot's infrastructure (aws, azure, gcp, ...).
    #[serde(rename = "type", default)]
    pub type_: String,
    /// Workers, infrastructureConfig, … kept as they are.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// The shoot's status. Granary reads its technical ID and UID, and keeps every other field
/// as it is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[schemars(transform = super::drop_defaults)]
pub struct ShootStatus {
    /// The name of the control-plane namespace in the seed.
    #[serde(
        rename = "technicalID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub technical_id: Option<String>,
    /// The shoot's UID as Gardener records it (kept across control-plane migration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl Shoot {
    /// The CloudProfile's name: `spec.cloudProfile.name`, else the older
    /// `spec.cloudProfileName`. With kind `NamespacedCloudProfile` this names that
    /// object, whose parent is the CloudProfile.
    pub fn cloud_profile_name(&self) -> Option<&str> {
        match &self.spec.cloud_profile {
            Some(reference) if !reference.name.is_empty() => Some(reference.name.as_str()),
            _ => self
                .spec
                .cloud_profile_name
                .as_deref()
                .filter(|name| !name.is_empty()),
        }
    }

    /// The kind `cloud_profile_name()` refers to: `spec.cloudProfile.kind`, defaulting to
    /// `CloudProfile` (always so for `spec.cloudProfileName`).
    pub fn cloud_profile_kind(&self) -> &str {
        match &self.spec.cloud_profile {
            Some(reference) if !reference.name.is_empty() && !reference.kind.is_empty() => {
                reference.kind.as_str()
            }
            _ => "CloudProfile",
        }
    }

    /// The project: the namespace without its `garden-` prefix (`garden` stays `garden`).
    pub fn project_name(&self) -> String {
        self.project().to_string()
    }

    fn project(&self) -> &str {
        let namespace = self.metadata.namespace.as_deref().unwrap_or_default();
        match namespace.strip_prefix(PROJECT_NAMESPACE_PREFIX) {
            Some(project) if !project.is_empty() => project,
            _ => namespace,
        }
    }

    /// `status.technicalID`, else Gardener's default `shoot--<project>--<name>`.
    pub fn technical_id(&self) -> String {
        let mut id = String::new();
        self.push_technical_id(&mut id);
        id
    }

    /// Appends [`Shoot::technical_id`] to `out` (one allocation for a whole entry name;
    /// the garden makes one per shoot event).
    fn push_technical_id(&self, out: &mut String) {
        match self.status.as_ref().and_then(|s| s.technical_id.as_deref()) {
            Some(id) if !id.is_empty() => out.push_str(id),
            _ => {
                let name = self
                    .metadata
                    .name
                    .as_deref()
                    .or(self.metadata.generate_name.as_deref())
                    .unwrap_or_default();
                for part in ["shoot--", self.project(), "--", name] {
                    out.push_str(part);
                }
            }
        }
    }

    /// The shoot's UID for backups: `status.uid`, else `metadata.uid`.
    pub fn backup_uid(&self) -> Option<&str> {
        self.status
            .as_ref()
            .and_then(|s| s.uid.as_deref())
            .filter(|uid| !uid.is_empty())
            .or(self.metadata.uid.as_deref().filter(|uid| !uid.is_empty()))
    }

    /// The name of the shoot's BackupEntry, `<technicalID>--<uid>`; `None` before the
    /// shoot has a UID.
    pub fn backup_entry_name(&self) -> Option<String> {
        let uid = self.backup_uid()?;
        let mut name = String::with_capacity(96);
        self.push_technical_id(&mut name);
        name.push_str("--");
        name.push_str(uid);
        Some(name)
    }
}
