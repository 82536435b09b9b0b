//! `velero.io/v1` Backup: its spec (also the template of a Schedule and the
//! `backupSpec` of an OADP NonAdminBackup), status, phases, defaults and validation.
//!
//! Every field is optional on the wire as in Velero; fields are `Option` so an object
//! read and written back keeps exactly the fields it had (an explicit `hooks: {}` or
//! `snapshotMoveData: false` survives).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::checks::{self, push};
use super::{Duration, FieldErrors, ServerDefaults};

/// Extra metadata for the objects a Backup creates (`spec.metadata`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Metadata {
    /// Labels to put on the Backup objects made from this template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// What to back up and how (`velero.io/v1` Backup `spec`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "Backup",
    namespaced,
    status = "BackupStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Backup is a Velero resource that represents the capture of Kubernetes cluster state at a point in time (API objects and associated volume state)."
)]
#[serde(rename_all = "camelCase")]
pub struct BackupSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Namespaces to back up; empty or * means all namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub included_namespaces: Option<Vec<String>>,
    /// Namespaces to leave out of the backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub excluded_namespaces: Option<Vec<String>>,
    /// Resources to back up (e.g. deployments, configmaps); empty or * means all.
    /// Cannot be combined with the cluster-scoped/namespace-scoped filters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub included_resources: Option<Vec<String>>,
    /// Resources to leave out of the backup. Cannot be combined with the cluster-
    /// scoped/namespace-scoped filters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub excluded_resources: Option<Vec<String>>,
    /// Cluster-scoped resources to back up; empty means those related to the backed-up
    /// namespaced objects only, * means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub included_cluster_scoped_resources: Option<Vec<String>>,
    /// Cluster-scoped resources to leave out of the backup; * means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub excluded_cluster_scoped_resources: Option<Vec<String>>,
    /// Namespaced resources to back up; empty or * means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub included_namespace_scoped_resources: Option<Vec<String>>,
    /// Namespaced resources to leave out of the backup; * means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub excluded_namespace_scoped_resources: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub label_selector: Option<LabelSelector>,
    /// Back up the objects that match any one of these label selectors; cannot be
    /// combined with labelSelector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub or_label_selectors: Option<Vec<LabelSelector>>,
    /// Whether to take snapshots of persistent volumes; unset means yes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub snapshot_volumes: Option<bool>,
    /// How long the backup is kept (Go duration; Velero default 720h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Duration>,
    /// The label key that groups volumes into one volume group snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_group_snapshot_label_key: Option<String>,
    /// Whether to back up cluster-scoped resources: unset means those related to the
    /// backed-up namespaces, true all of them, false none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub include_cluster_resources: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<BackupHooks>,
    /// The BackupStorageLocation to write the backup to; unset means the default
    /// location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_location: Option<String>,
    /// The VolumeSnapshotLocations to use for volume snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot_locations: Option<Vec<String>>,
    /// Deprecated; read as `defaultVolumesToFsBackup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub default_volumes_to_restic: Option<bool>,
    /// Whether to back up every pod volume with the file-system uploader unless the pod
    /// opts out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub default_volumes_to_fs_backup: Option<bool>,
    /// The order in which objects of a resource are backed up: resource name to a
    /// comma-separated list of namespace/name (or name for cluster-scoped) objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub ordered_resources: Option<BTreeMap<String, String>>,
    /// Velero default 10m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi_snapshot_timeout: Option<Duration>,
    /// Velero default 4h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_operation_timeout: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_policy: Option<TypedLocalObjectReference>,
    /// Whether to move the data of CSI snapshots to the backup storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub snapshot_move_data: Option<bool>,
    /// The data mover that moves snapshot data; unset means Velero's built-in one.
    #[serde(default, rename = "datamover", skip_serializing_if = "Option::is_none")]
    pub data_mover: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub uploader_config: Option<UploaderConfigForBackup>,
}

/// Settings of the file-system uploader for this backup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UploaderConfigForBackup {
    /// How many files the uploader uploads at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_files_upload: Option<i64>,
}

/// Commands to run in the backed-up pods before and after their volumes are backed up.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct BackupHooks {
    /// The hooks to run, each for the objects it selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub resources: Option<Vec<BackupResourceHookSpec>>,
}

/// Hooks for the items matching the filters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupResourceHookSpec {
    /// Name of the hook, shown in logs.
    pub name: String,
    /// Namespaces whose pods the hook runs in; empty means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub included_namespaces: Option<Vec<String>>,
    /// Namespaces whose pods the hook does not run in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub excluded_namespaces: Option<Vec<String>>,
    /// Resources the hook applies to; empty means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub included_resources: Option<Vec<String>>,
    /// Resources the hook does not apply to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub excluded_resources: Option<Vec<String>>,
    /// Only objects with matching labels get the hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub label_selector: Option<LabelSelector>,
    /// Commands to run in the pod before its volumes are backed up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre: Option<Vec<BackupResourceHook>>,
    /// Commands to run in the pod after its volumes are backed up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post: Option<Vec<BackupResourceHook>>,
}

/// One backup hook.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct BackupResourceHook {
    /// A command to run in a container of the pod.
    pub exec: ExecHook,
}

/// A command run in a container of the pod through the exec API.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecHook {
    /// Defaults to the pod's first container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The command and its arguments.
    #[schemars(length(min = 1))]
    pub command: Vec<String>,
    /// Defaults to `Fail` for backup hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_error: Option<HookErrorMode>,
    /// Defaults to 30s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
}

/// Velero's default for an exec backup hook's `onError`.
pub const DEFAULT_BACKUP_HOOK_ON_ERROR: HookErrorMode = HookErrorMode::Fail;
/// Velero's default timeout of an exec hook (backup `timeout`, restore `execTimeout`), in seconds.
pub const DEFAULT_EXEC_HOOK_TIMEOUT_SECS: i64 = 30;

/// What a failing hook does to the backup or restore.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum HookErrorMode {
    /// Keep going; the backup/restore ends `PartiallyFailed`.
    Continue,
    /// Stop running further hooks; the backup/restore ends `PartiallyFailed`.
    Fail,
}

/// Lifecycle phase of a Backup.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum BackupPhase {
    New,
    Queued,
    ReadyToStart,
    FailedValidation,
    InProgress,
    WaitingForPluginOperations,
    WaitingForPluginOperationsPartiallyFailed,
    Finalizing,
    FinalizingPartiallyFailed,
    Completed,
    PartiallyFailed,
    Failed,
    Deleting,
}

impl BackupPhase {
    /// The exact string Velero uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "New",
            Self::Queued => "Queued",
            Self::ReadyToStart => "ReadyToStart",
            Self::FailedValidation => "FailedValidation",
            Self::InProgress => "InProgress",
            Self::WaitingForPluginOperations => "WaitingForPluginOperations",
            Self::WaitingForPluginOperationsPartiallyFailed => {
                "WaitingForPluginOperationsPartiallyFailed"
            }
            Self::Finalizing => "Finalizing",
            Self::FinalizingPartiallyFailed => "FinalizingPartiallyFailed",
            Self::Completed => "Completed",
            Self::PartiallyFailed => "PartiallyFailed",
            Self::Failed => "Failed",
            Self::Deleting => "Deleting",
        }
    }

    /// Phases after which Velero does no more work on the backup (deletion aside).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::FailedValidation | Self::Completed | Self::PartiallyFailed | Self::Failed
        )
    }
}

impl std::fmt::Display for BackupPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Observed state of a Backup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// Deprecated major format version (1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// Archive format version ("1.1.0").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_version: Option<String>,
    /// Start + ttl; when the backup may be garbage-collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub expiration: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BackupPhase>,
    /// Position in the backup queue; only meaningful while `Queued`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<i64>,
    /// Why the backup was not valid, one problem per line (phase FailedValidation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub validation_errors: Option<Vec<String>>,
    /// When the backup started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub start_timestamp: Option<DateTime<Utc>>,
    /// When the backup finished, successfully or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub completion_timestamp: Option<DateTime<Utc>>,
    /// How many volume snapshots were tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshots_attempted: Option<i64>,
    /// How many volume snapshots succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshots_completed: Option<i64>,
    /// Why the backup failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// Count of warnings (the messages are in object storage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<i64>,
    /// Count of errors (the messages are in object storage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<i64>,
    /// How many items were backed up so far, of how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub progress: Option<BackupProgress>,
    /// How many CSI volume snapshots were tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi_volume_snapshots_attempted: Option<i64>,
    /// How many CSI volume snapshots succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi_volume_snapshots_completed: Option<i64>,
    /// How many asynchronous item operations were started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_item_operations_attempted: Option<i64>,
    /// How many asynchronous item operations succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_item_operations_completed: Option<i64>,
    /// How many asynchronous item operations failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_item_operations_failed: Option<i64>,
    /// How many hooks ran and how many failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub hook_status: Option<HookStatus>,
}

/// Best-effort progress of a running backup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupProgress {
    /// How many items the backup is expected to hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_items: Option<i64>,
    /// How many items have been backed up so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_backed_up: Option<i64>,
}

/// Hook counters of a backup or restore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookStatus {
    /// How many hooks were run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks_attempted: Option<i64>,
    /// How many hooks failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks_failed: Option<i64>,
}

fn unset_or_zero(d: &Option<Duration>) -> bool {
    d.as_ref().is_none_or(Duration::is_zero)
}

impl BackupSpec {
    /// Fills what Velero fills when it prepares a backup: `ttl`, `csiSnapshotTimeout` and
    /// `itemOperationTimeout` when unset or zero (Velero treats `"0s"` as unset).
    pub fn apply_defaults(&mut self, defaults: &ServerDefaults) {
        if unset_or_zero(&self.ttl) {
            self.ttl = Some(defaults.backup_ttl.clone());
        }
        if unset_or_zero(&self.csi_snapshot_timeout) {
            self.csi_snapshot_timeout = Some(defaults.csi_snapshot_timeout.clone());
        }
        if unset_or_zero(&self.item_operation_timeout) {
            self.item_operation_timeout = Some(defaults.item_operation_timeout.clone());
        }
    }

    /// A copy with [`BackupSpec::apply_defaults`] applied using Velero's server defaults.
    pub fn defaulted(&self) -> Self {
        let mut spec = self.clone();
        spec.apply_defaults(&ServerDefaults::default());
        spec
    }

    /// True when one of the old-style filters (`includedResources`, `excludedResources`,
    /// `includeClusterResources`) is set.
    pub fn uses_old_resource_filters(&self) -> bool {
        non_empty(&self.included_resources)
            || non_empty(&self.excluded_resources)
            || self.include_cluster_resources.is_some()
    }

    /// The new-style filters that are set, with their JSON names.
    pub fn new_resource_filters_set(&self) -> Vec<&'static str> {
        [
            (
                "includedClusterScopedResources",
                &self.included_cluster_scoped_resources,
            ),
            (
                "excludedClusterScopedResources",
                &self.excluded_cluster_scoped_resources,
            ),
            (
                "includedNamespaceScopedResources",
                &self.included_namespace_scoped_resources,
            ),
            (
                "excludedNamespaceScopedResources",
                &self.excluded_namespace_scoped_resources,
            ),
        ]
        .into_iter()
        .filter(|(_, v)| non_empty(v))
        .map(|(name, _)| name)
        .collect()
    }

    /// Every problem with this spec; paths start with `prefix` (`spec`, `spec.template`,
    /// `spec.backupSpec`).
    pub fn validate_at(&self, prefix: &str) -> FieldErrors {
        let mut errs = FieldErrors::new();
        let p = |field: &str| format!("{prefix}.{field}");
        checks::includes_excludes(
            &mut errs,
            &p("includedNamespaces"),
            self.included_namespaces.as_ref(),
            &p("excludedNamespaces"),
            self.excluded_namespaces.as_ref(),
        );
        checks::includes_excludes(
            &mut errs,
            &p("includedResources"),
            self.included_resources.as_ref(),
            &p("excludedResources"),
            self.excluded_resources.as_ref(),
        );
        checks::includes_excludes(
            &mut errs,
            &p("includedClusterScopedResources"),
            self.included_cluster_scoped_resources.as_ref(),
            &p("excludedClusterScopedResources"),
            self.excluded_cluster_scoped_resources.as_ref(),
        );
        checks::includes_excludes(
            &mut errs,
            &p("includedNamespaceScopedResources"),
            self.included_namespace_scoped_resources.as_ref(),
            &p("excludedNamespaceScopedResources"),
            self.excluded_namespace_scoped_resources.as_ref(),
        );
        if self.uses_old_resource_filters() {
            for field in self.new_resource_filters_set() {
                push(
                    &mut errs,
                    p(field),
                    format!(
                        "new-style resource filters may not be mixed with the old-style ones \
                         ({prefix}.includedResources, {prefix}.excludedResources, \
                         {prefix}.includeClusterResources)"
                    ),
                );
            }
        }
        checks::selectors(
            &mut errs,
            prefix,
            self.label_selector.as_ref(),
            self.or_label_selectors.as_ref(),
        );
        checks::duration(&mut errs, &p("ttl"), self.ttl.as_ref());
        checks::duration(
            &mut errs,
            &p("csiSnapshotTimeout"),
            self.csi_snapshot_timeout.as_ref(),
        );
        checks::duration(
            &mut errs,
            &p("itemOperationTimeout"),
            self.item_operation_timeout.as_ref(),
        );
        checks::configmap_ref(
            &mut errs,
            &p("resourcePolicy"),
            self.resource_policy.as_ref(),
        );
        if let Some(n) = self
            .uploader_config
            .as_ref()
            .and_then(|u| u.parallel_files_upload)
            && n < 0
        {
            push(
                &mut errs,
                p("uploaderConfig.parallelFilesUpload"),
                "must not be negative",
            );
        }
        let hooks = self.hooks.as_ref().and_then(|h| h.resources.as_ref());
        for (i, hook) in hooks.into_iter().flatten().enumerate() {
            hook.validate_at(&format!("{prefix}.hooks.resources[{i}]"), &mut errs);
        }
        errs
    }
}

impl BackupResourceHookSpec {
    fn validate_at(&self, at: &str, errs: &mut FieldErrors) {
        checks::hook_selection(
            errs,
            at,
            checks::HookSelection {
                name: &self.name,
                included_namespaces: self.included_namespaces.as_ref(),
                excluded_namespaces: self.excluded_namespaces.as_ref(),
                included_resources: self.included_resources.as_ref(),
                excluded_resources: self.excluded_resources.as_ref(),
                label_selector: self.label_selector.as_ref(),
            },
        );
        for (list, hooks) in [("pre", &self.pre), ("post", &self.post)] {
            for (j, hook) in hooks.iter().flatten().enumerate() {
                let here = format!("{at}.{list}[{j}].exec");
                if hook.exec.command.is_empty() {
                    push(
                        errs,
                        format!("{here}.command"),
                        "must have at least one element",
                    );
                }
                checks::duration(errs, &format!("{here}.timeout"), hook.exec.timeout.as_ref());
            }
        }
    }
}

impl Backup {
    /// Every problem with this Backup's spec, paths from `spec`.
    pub fn validate(&self) -> FieldErrors {
        self.spec.validate_at("spec")
    }

    /// The name this backup's files are stored under in its location: the
    /// [`STORED_NAME_ANNOTATION`](super::STORED_NAME_ANNOTATION) of a backup synced from
    /// another seed, else its own name.
    pub fn stored_name(&self) -> String {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(super::STORED_NAME_ANNOTATION))
            .cloned()
            .or_else(|| self.metadata.name.clone())
            .unwrap_or_default()
    }
}

fn non_empty<T>(v: &Option<Vec<T>>) -> bool {
    v.as_ref().is_some_and(|v| !v.is_empty())
}
