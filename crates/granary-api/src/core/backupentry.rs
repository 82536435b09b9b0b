//! The garden `BackupEntry` (`core.gardener.cloud/v1beta1`, in the shoot's project
//! namespace): one shoot's prefix in a bucket, named `<technicalID>--<shoot uid>`
//! (docs/architecture.md#entry-placement). The seed that handles it is `status.seedName`,
//! else `spec.seedName` (docs/architecture.md#bucket-assignment).

use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use chrono::{DateTime, Utc};

use super::checks::{dns_label_problem, dns_subdomain_problem, push_problem, require};
use super::constants::{ANNOTATION_FORCE_DELETION, ANNOTATION_SHOOT_PURPOSE, SOURCE_ENTRY_PREFIX};
use crate::common::{FieldError, FieldErrors, LastError, LastOperation, ObjectReference};

/// Which bucket the entry is in and which seed handles it.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    doc = "The place of one shoot's backups in a BackupBucket (a prefix named after the entry); the seed named in spec.seedName looks after it.",
    group = "core.gardener.cloud",
    version = "v1beta1",
    kind = "BackupEntry",
    plural = "backupentries",
    shortname = "bec",
    category = "all",
    namespaced,
    status = "BackupEntryStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Bucket", "type": "string", "jsonPath": ".spec.bucketName"}"#,
    printcolumn = r#"{"name": "Seed", "type": "string", "jsonPath": ".spec.seedName"}"#,
    printcolumn = r#"{"name": "Status", "type": "string", "jsonPath": ".status.lastOperation.state"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::drop_defaults)]
pub struct BackupEntrySpec {
    /// The garden BackupBucket holding the entry.
    #[serde(default)]
    pub bucket_name: String,
    /// The seed that should handle the entry (changes on control-plane migration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_name: Option<String>,
    /// For self-hosted shoots: the shoot (in the entry's namespace) handling the entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shoot_ref: Option<ObjectReference>,
}

/// What the seed reported about the entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::drop_defaults)]
pub struct BackupEntryStatus {
    /// The last operation on the entry (create, reconcile, delete, migrate, restore)
    /// and how it went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_operation: Option<LastOperation>,
    /// The last error of the entry's operations, with codes; cleared when the operation
    /// succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastError>,
    /// The metadata.generation the seed last acted on; the status is current when it
    /// equals metadata.generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The seed that holds the extension object now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_name: Option<String>,
    /// Left over from Gardener's ForceRestore; kept for round trips, unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration_start_time: Option<DateTime<Utc>>,
}

impl BackupEntry {
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

    /// True when `backupentry.core.gardener.cloud/force-deletion=true` skips the grace
    /// period.
    pub fn is_force_deletion(&self) -> bool {
        self.annotations()
            .get(ANNOTATION_FORCE_DELETION)
            .is_some_and(|value| value == "true")
    }

    /// The shoot purpose copied onto the entry, if any.
    pub fn purpose(&self) -> Option<&str> {
        self.annotations()
            .get(ANNOTATION_SHOOT_PURPOSE)
            .map(String::as_str)
            .filter(|purpose| !purpose.is_empty())
    }

    /// True for a `source-<entry>` made to copy backups between buckets.
    pub fn is_source(&self) -> bool {
        self.name_any().starts_with(SOURCE_ENTRY_PREFIX)
    }
}

/// Every problem of a garden BackupEntry: a valid object name and namespace, a
/// `bucketName` that can name a BackupBucket, and `shootRef` only alone and only in the
/// entry's own namespace.
pub fn validate_backup_entry(entry: &BackupEntry) -> FieldErrors {
    let mut errors = FieldErrors::new();
    push_problem(
        &mut errors,
        "metadata.name",
        dns_subdomain_problem(&entry.name_any()),
    );
    let namespace = entry.namespace().unwrap_or_default();
    require(&mut errors, "metadata.namespace", &namespace);
    let spec = &entry.spec;
    push_problem(
        &mut errors,
        "spec.bucketName",
        dns_label_problem(&spec.bucket_name),
    );
    if let Some(shoot) = &spec.shoot_ref {
        if spec.seed_name.as_deref().is_some_and(|s| !s.is_empty()) {
            errors.push(FieldError::new(
                "spec.shootRef",
                "must not be set together with spec.seedName",
            ));
        }
        require(&mut errors, "spec.shootRef.name", &shoot.name);
        if !shoot.namespace.is_empty() && shoot.namespace != namespace {
            errors.push(FieldError::new(
                "spec.shootRef.namespace",
                format!(
                    "must be the entry's own namespace {namespace:?}, not {:?}",
                    shoot.namespace
                ),
            ));
        }
    }
    errors
}
