//! `velero-backup.json`: the Backup object exactly as Velero writes it.
//!
//! Velero encodes it with `encode.To(backup, "json", …)`: the Kubernetes JSON
//! serializer's pretty mode, which is `json.MarshalIndent(obj, "", "  ")` of the Go
//! `Backup` struct (two-space indent, no trailing newline, `<`, `>`, `&` escaped), after
//! the versioning encoder has set the type meta. So `kind` comes before `apiVersion`
//! (`metav1.TypeMeta` declares `Kind` first), then `metadata` (`metav1.ObjectMeta` in its
//! Go field order), `spec` and `status` in `backup_types.go` order. Go's `omitempty`
//! rules decide what appears: struct-typed fields are always written (`spec.metadata`
//! and `spec.hooks` as `{}`, durations as `"0s"`, a zero `metadata.creationTimestamp`
//! as `null`, `status` as `{}`), zero counters, empty strings and empty lists are not,
//! and `*bool` fields are written even when `false`. Times are whole seconds in UTC and
//! durations in Go's `Duration.String()` form (`"4h"` is written `"4h0m0s"`).
//!
//! The shape tables below mirror the Go structs of Velero 1.18 and k8s.io/apimachinery;
//! a test checks them against the fields of our typed Backup.

use serde::Deserialize;

use super::FilesError;
use super::go_shape::{Field, Shape, When, Zero, field, reshape};
use crate::archive::json::write_pretty_typed;
use Shape::{Duration as Dur, List, Map, Plain, Struct, Time};
use When::{Always, NotEmpty, NotNil};
use granary_api::velero::Backup;

/// `apiVersion` of Velero's objects.
pub const VELERO_API_VERSION: &str = "velero.io/v1";
/// `kind` of a Backup.
pub const BACKUP_KIND: &str = "Backup";

const STRINGS: Shape = List(&Plain);
const STRING_MAP: Shape = Map(&Plain);

/// `metav1.OwnerReference`.
const OWNER_REFERENCE: &[Field] = &[
    field("apiVersion", Plain, Always(Zero::Str(""))),
    field("kind", Plain, Always(Zero::Str(""))),
    field("name", Plain, Always(Zero::Str(""))),
    field("uid", Plain, Always(Zero::Str(""))),
    field("controller", Plain, NotNil),
    field("blockOwnerDeletion", Plain, NotNil),
];

/// `metav1.ManagedFieldsEntry` (`fieldsV1` is raw JSON, written as stored).
const MANAGED_FIELDS_ENTRY: &[Field] = &[
    field("manager", Plain, NotEmpty),
    field("operation", Plain, NotEmpty),
    field("apiVersion", Plain, NotEmpty),
    field("time", Time, NotNil),
    field("fieldsType", Plain, NotEmpty),
    field("fieldsV1", Plain, NotNil),
    field("subresource", Plain, NotEmpty),
];

/// `metav1.ObjectMeta`. `creationTimestamp` is a `metav1.Time` struct: never omitted,
/// `null` when zero.
const OBJECT_META: &[Field] = &[
    field("name", Plain, NotEmpty),
    field("generateName", Plain, NotEmpty),
    field("namespace", Plain, NotEmpty),
    field("selfLink", Plain, NotEmpty),
    field("uid", Plain, NotEmpty),
    field("resourceVersion", Plain, NotEmpty),
    field("generation", Plain, NotEmpty),
    field("creationTimestamp", Time, Always(Zero::Null)),
    field("deletionTimestamp", Time, NotNil),
    field("deletionGracePeriodSeconds", Plain, NotNil),
    field("labels", STRING_MAP, NotEmpty),
    field("annotations", STRING_MAP, NotEmpty),
    field("ownerReferences", List(&Struct(OWNER_REFERENCE)), NotEmpty),
    field("finalizers", STRINGS, NotEmpty),
    field(
        "managedFields",
        List(&Struct(MANAGED_FIELDS_ENTRY)),
        NotEmpty,
    ),
];

/// `metav1.LabelSelectorRequirement`.
const LABEL_SELECTOR_REQUIREMENT: &[Field] = &[
    field("key", Plain, Always(Zero::Str(""))),
    field("operator", Plain, Always(Zero::Str(""))),
    field("values", STRINGS, NotEmpty),
];

/// `metav1.LabelSelector`.
const LABEL_SELECTOR: &[Field] = &[
    field("matchLabels", STRING_MAP, NotEmpty),
    field(
        "matchExpressions",
        List(&Struct(LABEL_SELECTOR_REQUIREMENT)),
        NotEmpty,
    ),
];

/// `corev1.TypedLocalObjectReference` (no `omitempty` anywhere).
const TYPED_LOCAL_OBJECT_REFERENCE: &[Field] = &[
    field("apiGroup", Plain, Always(Zero::Null)),
    field("kind", Plain, Always(Zero::Str(""))),
    field("name", Plain, Always(Zero::Str(""))),
];

/// Velero `Metadata` (`spec.metadata`).
const SPEC_METADATA: &[Field] = &[field("labels", STRING_MAP, NotEmpty)];

/// Velero `ExecHook`.
const EXEC_HOOK: &[Field] = &[
    field("container", Plain, NotEmpty),
    field("command", STRINGS, Always(Zero::Null)),
    field("onError", Plain, NotEmpty),
    field("timeout", Dur, Always(Zero::Str("0s"))),
];

/// Velero `BackupResourceHook`.
const BACKUP_RESOURCE_HOOK: &[Field] = &[field("exec", Struct(EXEC_HOOK), Always(Zero::Null))];

/// Velero `BackupResourceHookSpec`.
const BACKUP_RESOURCE_HOOK_SPEC: &[Field] = &[
    field("name", Plain, Always(Zero::Str(""))),
    field("includedNamespaces", STRINGS, NotEmpty),
    field("excludedNamespaces", STRINGS, NotEmpty),
    field("includedResources", STRINGS, NotEmpty),
    field("excludedResources", STRINGS, NotEmpty),
    field("labelSelector", Struct(LABEL_SELECTOR), NotNil),
    field("pre", List(&Struct(BACKUP_RESOURCE_HOOK)), NotEmpty),
    field("post", List(&Struct(BACKUP_RESOURCE_HOOK)), NotEmpty),
];

/// Velero `BackupHooks`.
const BACKUP_HOOKS: &[Field] = &[field(
    "resources",
    List(&Struct(BACKUP_RESOURCE_HOOK_SPEC)),
    NotEmpty,
)];

/// Velero `UploaderConfigForBackup`.
const UPLOADER_CONFIG_FOR_BACKUP: &[Field] = &[field("parallelFilesUpload", Plain, NotEmpty)];

/// Velero `BackupSpec`.
const BACKUP_SPEC: &[Field] = &[
    field("metadata", Struct(SPEC_METADATA), Always(Zero::Struct)),
    field("includedNamespaces", STRINGS, NotEmpty),
    field("excludedNamespaces", STRINGS, NotEmpty),
    field("includedResources", STRINGS, NotEmpty),
    field("excludedResources", STRINGS, NotEmpty),
    field("includedClusterScopedResources", STRINGS, NotEmpty),
    field("excludedClusterScopedResources", STRINGS, NotEmpty),
    field("includedNamespaceScopedResources", STRINGS, NotEmpty),
    field("excludedNamespaceScopedResources", STRINGS, NotEmpty),
    field("labelSelector", Struct(LABEL_SELECTOR), NotNil),
    field("orLabelSelectors", List(&Struct(LABEL_SELECTOR)), NotEmpty),
    field("snapshotVolumes", Plain, NotNil),
    field("ttl", Dur, Always(Zero::Str("0s"))),
    field("volumeGroupSnapshotLabelKey", Plain, NotEmpty),
    field("includeClusterResources", Plain, NotNil),
    field("hooks", Struct(BACKUP_HOOKS), Always(Zero::Struct)),
    field("storageLocation", Plain, NotEmpty),
    field("volumeSnapshotLocations", STRINGS, NotEmpty),
    field("defaultVolumesToRestic", Plain, NotNil),
    field("defaultVolumesToFsBackup", Plain, NotNil),
    field("orderedResources", STRING_MAP, NotEmpty),
    field("csiSnapshotTimeout", Dur, Always(Zero::Str("0s"))),
    field("itemOperationTimeout", Dur, Always(Zero::Str("0s"))),
    field(
        "resourcePolicy",
        Struct(TYPED_LOCAL_OBJECT_REFERENCE),
        NotNil,
    ),
    field("snapshotMoveData", Plain, NotNil),
    field("datamover", Plain, NotEmpty),
    field("uploaderConfig", Struct(UPLOADER_CONFIG_FOR_BACKUP), NotNil),
];

/// Velero `BackupProgress`.
const BACKUP_PROGRESS: &[Field] = &[
    field("totalItems", Plain, NotEmpty),
    field("itemsBackedUp", Plain, NotEmpty),
];

/// Velero `HookStatus`.
const HOOK_STATUS: &[Field] = &[
    field("hooksAttempted", Plain, NotEmpty),
    field("hooksFailed", Plain, NotEmpty),
];

/// Velero `BackupStatus`.
const BACKUP_STATUS: &[Field] = &[
    field("version", Plain, NotEmpty),
    field("formatVersion", Plain, NotEmpty),
    field("expiration", Time, NotNil),
    field("phase", Plain, NotEmpty),
    field("queuePosition", Plain, NotEmpty),
    field("validationErrors", STRINGS, NotEmpty),
    field("startTimestamp", Time, NotNil),
    field("completionTimestamp", Time, NotNil),
    field("volumeSnapshotsAttempted", Plain, NotEmpty),
    field("volumeSnapshotsCompleted", Plain, NotEmpty),
    field("failureReason", Plain, NotEmpty),
    field("warnings", Plain, NotEmpty),
    field("errors", Plain, NotEmpty),
    field("progress", Struct(BACKUP_PROGRESS), NotNil),
    field("csiVolumeSnapshotsAttempted", Plain, NotEmpty),
    field("csiVolumeSnapshotsCompleted", Plain, NotEmpty),
    field("backupItemOperationsAttempted", Plain, NotEmpty),
    field("backupItemOperationsCompleted", Plain, NotEmpty),
    field("backupItemOperationsFailed", Plain, NotEmpty),
    field("hookStatus", Struct(HOOK_STATUS), NotNil),
];

/// Velero `Backup`: `metav1.TypeMeta` inline (`kind` first), then the rest.
const BACKUP: &[Field] = &[
    field("kind", Plain, NotEmpty),
    field("apiVersion", Plain, NotEmpty),
    field("metadata", Struct(OBJECT_META), Always(Zero::Struct)),
    field("spec", Struct(BACKUP_SPEC), Always(Zero::Struct)),
    field("status", Struct(BACKUP_STATUS), Always(Zero::Struct)),
];

/// The shape of the whole object (for tests of the tables).
pub(crate) const BACKUP_SHAPE: Shape = Struct(BACKUP);
/// The shapes of `spec` and `status` (for tests of the tables).
#[cfg(test)]
pub(crate) const SPEC_AND_STATUS: [(&str, &[Field]); 2] =
    [("spec", BACKUP_SPEC), ("status", BACKUP_STATUS)];

/// Encodes `velero-backup.json` exactly as Velero writes the Backup (see the module
/// docs). Decoding the result gives `backup` in the form Velero would have read back:
/// Go zero values filled in (`spec.hooks: {}`, `"0s"` durations, `status: {}`), zero
/// counters and empty lists dropped, times in whole seconds, durations canonical.
pub fn encode_backup_json(backup: &Backup) -> Vec<u8> {
    // A Backup has only string-keyed maps and integer numbers: it always serialises.
    let value = serde_json::to_value(backup).expect("a Backup always serialises to JSON");
    let shaped = reshape(value, &BACKUP_SHAPE);
    if !shaped.unknown.is_empty() {
        // A field of the typed Backup missing from the tables above: still written
        // (after the known ones), but not where Velero would put it.
        tracing::warn!(fields = ?shaped.unknown, "velero-backup.json: fields without a Go position");
    }
    let mut out = Vec::new();
    // Writing string-keyed JSON into a Vec has no error case.
    write_pretty_typed(&mut out, &shaped.tree).expect("writing JSON into a Vec cannot fail");
    out
}

#[derive(Deserialize)]
struct TypeMeta {
    #[serde(default, rename = "apiVersion")]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

/// Decodes `velero-backup.json` (ours or Velero's), refusing anything but a
/// `velero.io/v1` Backup; a field of the wrong type is reported with its path.
pub fn decode_backup_json(bytes: &[u8]) -> Result<Backup, FilesError> {
    let meta: TypeMeta = serde_json::from_slice(bytes)?;
    if meta.api_version.as_deref() != Some(VELERO_API_VERSION)
        || meta.kind.as_deref() != Some(BACKUP_KIND)
    {
        return Err(FilesError::NotABackup(format!(
            "apiVersion {:?}, kind {:?}",
            meta.api_version, meta.kind
        )));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let backup: Backup =
        serde_path_to_error::deserialize(&mut de).map_err(|e| FilesError::Field {
            path: e.path().to_string(),
            source: e.into_inner(),
        })?;
    de.end()?;
    Ok(backup)
}
