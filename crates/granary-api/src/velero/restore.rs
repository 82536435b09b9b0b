//! `velero.io/v1` Restore: spec (also the `restoreSpec` of an OADP NonAdminRestore),
//! status, phases, defaults and validation.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::checks::{self, push};
use super::{Duration, FieldErrors, HookErrorMode, HookStatus, ServerDefaults};

/// Resources Velero never restores, whatever the filters say.
pub const NON_RESTORABLE_RESOURCES: [&str; 9] = [
    "nodes",
    "events",
    "events.events.k8s.io",
    "backups.velero.io",
    "restores.velero.io",
    "resticrepositories.velero.io",
    "csinodes.storage.k8s.io",
    "volumeattachments.storage.k8s.io",
    "backuprepositories.velero.io",
];

/// Finalizer Velero puts on a Restore so its data in object storage is removed with it.
pub const RESTORE_FINALIZER: &str = "restores.velero.io/external-resources-finalizer";

/// Velero's default for an exec restore hook's `onError`.
pub const DEFAULT_RESTORE_HOOK_ON_ERROR: HookErrorMode = HookErrorMode::Continue;

/// What to restore and how (`velero.io/v1` Restore `spec`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "Restore",
    namespaced,
    status = "RestoreStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Restore is a Velero resource that represents the application of resources from a Velero backup to a target Kubernetes cluster."
)]
#[serde(rename_all = "camelCase")]
pub struct RestoreSpec {
    /// The backup to restore from; exactly one of this and `scheduleName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_name: Option<String>,
    /// Restore from the latest completed backup of this schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_name: Option<String>,
    /// Namespaces of the backup to restore; empty or * means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub included_namespaces: Option<Vec<String>>,
    /// Namespaces of the backup not to restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub excluded_namespaces: Option<Vec<String>>,
    /// Resources to restore; empty or * means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub included_resources: Option<Vec<String>>,
    /// Resources not to restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub excluded_resources: Option<Vec<String>>,
    /// Restores the objects of a namespace (key) into another namespace (value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_mapping: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub label_selector: Option<LabelSelector>,
    /// Restore the objects that match any one of these label selectors; cannot be
    /// combined with labelSelector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub or_label_selectors: Option<Vec<LabelSelector>>,
    #[serde(
        default,
        rename = "restorePVs",
        skip_serializing_if = "Option::is_none"
    )]
    /// Whether to restore persistent volumes from their snapshots; unset means yes.
    #[schemars(extend("id" = "granary:nullable"))]
    pub restore_pvs: Option<bool>,
    /// Which resources get their status restored as well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub restore_status: Option<RestoreStatusSpec>,
    /// Whether services keep the node ports they had when backed up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub preserve_node_ports: Option<bool>,
    /// Whether to restore cluster-scoped resources: unset means those related to the
    /// restored namespaces, true all of them, false none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub include_cluster_resources: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<RestoreHooks>,
    /// What to do with resources that already exist (unset means `none`). Any string is
    /// accepted on the wire, as by Velero: an unknown one fails validation, never
    /// decoding (read it with [`RestoreSpec::existing_resource_policy`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub existing_resource_policy: Option<String>,
    /// Velero default 4h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_operation_timeout: Option<Duration>,
    /// ConfigMap of JSON patches applied to resources before they are restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub resource_modifier: Option<TypedLocalObjectReference>,
    /// ConfigMap of resource filter policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub resource_policy: Option<TypedLocalObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub uploader_config: Option<UploaderConfigForRestore>,
}

/// Settings of the file-system uploader for this restore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UploaderConfigForRestore {
    /// Whether restored files are written sparse (holes are not written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub write_sparse_files: Option<bool>,
    /// How many files the uploader downloads at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_files_download: Option<i64>,
}

/// Which resources get their `status` restored too.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStatusSpec {
    /// Resources whose status is restored; * means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub included_resources: Option<Vec<String>>,
    /// Resources whose status is not restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub excluded_resources: Option<Vec<String>>,
}

/// The `existingResourcePolicy` values Velero acts on.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PolicyType {
    /// Leave existing resources as they are.
    None,
    /// Patch existing resources that differ.
    Update,
}

impl PolicyType {
    /// The exact string Velero uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Update => "update",
        }
    }

    /// The policy a string names, if Velero knows it.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::None, Self::Update]
            .into_iter()
            .find(|p| p.as_str() == text)
    }
}

impl RestoreSpec {
    /// The typed `existingResourcePolicy`: `None` when unset or empty, `Err` with the
    /// text when Velero would not know it (validation reports that one).
    pub fn existing_resource_policy(&self) -> Option<Result<PolicyType, &str>> {
        let text = self.existing_resource_policy.as_deref()?;
        if text.is_empty() {
            return None;
        }
        Some(PolicyType::parse(text).ok_or(text))
    }
}

/// Commands to run in restored pods, or init containers to add to them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RestoreHooks {
    /// The hooks to run, each for the objects it selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<RestoreResourceHookSpec>>,
}

/// Restore hooks for the items matching the filters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreResourceHookSpec {
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
    /// What to run once a selected pod is restored: a command in a container, or init
    /// containers added to the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_hooks: Option<Vec<RestoreResourceHook>>,
}

/// One restore hook: an exec hook, an init-container hook, or (as Velero allows) both.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RestoreResourceHook {
    /// A command to run in a container of the restored pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecRestoreHook>,
    /// Init containers to add to the restored pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<InitRestoreHook>,
}

/// A command run in a restored pod's container.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecRestoreHook {
    /// The container to run the command in; unset means the pod's first container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The command and its arguments.
    #[schemars(length(min = 1))]
    pub command: Vec<String>,
    /// Defaults to `Continue` for restore hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_error: Option<HookErrorMode>,
    /// Defaults to 30s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_timeout: Option<Duration>,
    /// How long to wait for the container to be ready before running the command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_timeout: Option<Duration>,
    /// Whether to wait until the container is ready before running the command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub wait_for_ready: Option<bool>,
}

/// Init containers added to a restored pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitRestoreHook {
    /// The init containers to add, as container specifications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_objects")]
    pub init_containers: Option<Vec<serde_json::Value>>,
    /// How long to wait for the init containers to finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
}

fn free_form_objects(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "x-kubernetes-preserve-unknown-fields": true,
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
    })
}

/// Lifecycle phase of a Restore.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum RestorePhase {
    New,
    FailedValidation,
    InProgress,
    WaitingForPluginOperations,
    WaitingForPluginOperationsPartiallyFailed,
    Finalizing,
    FinalizingPartiallyFailed,
    Completed,
    PartiallyFailed,
    Failed,
}

impl RestorePhase {
    /// The exact string Velero uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "New",
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
        }
    }

    /// Phases after which Velero does no more work on the restore.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::FailedValidation | Self::Completed | Self::PartiallyFailed | Self::Failed
        )
    }
}

impl std::fmt::Display for RestorePhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Observed state of a Restore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<RestorePhase>,
    /// Why the restore was not valid, one problem per line (phase FailedValidation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub validation_errors: Option<Vec<String>>,
    /// How many warnings the restore had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<i64>,
    /// How many errors the restore had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<i64>,
    /// Why the restore failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// When the restore started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub start_timestamp: Option<DateTime<Utc>>,
    /// When the restore finished, successfully or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub completion_timestamp: Option<DateTime<Utc>>,
    /// How many items were restored so far, of how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub progress: Option<RestoreProgress>,
    /// How many asynchronous item operations were started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_item_operations_attempted: Option<i64>,
    /// How many asynchronous item operations succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_item_operations_completed: Option<i64>,
    /// How many asynchronous item operations failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_item_operations_failed: Option<i64>,
    /// How many hooks ran and how many failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub hook_status: Option<HookStatus>,
}

/// Best-effort progress of a running restore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreProgress {
    /// How many items the restore is expected to restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_items: Option<i64>,
    /// How many items have been restored so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_restored: Option<i64>,
}

fn set(s: &Option<String>) -> bool {
    s.as_ref().is_some_and(|s| !s.is_empty())
}

impl RestoreSpec {
    /// Fills `itemOperationTimeout` when unset or zero, as Velero does.
    pub fn apply_defaults(&mut self, defaults: &ServerDefaults) {
        if self
            .item_operation_timeout
            .as_ref()
            .is_none_or(Duration::is_zero)
        {
            self.item_operation_timeout = Some(defaults.restore_item_operation_timeout.clone());
        }
    }

    /// A copy with [`RestoreSpec::apply_defaults`] applied using Velero's server defaults.
    pub fn defaulted(&self) -> Self {
        let mut spec = self.clone();
        spec.apply_defaults(&ServerDefaults::default());
        spec
    }

    /// Every problem with this spec; paths start with `prefix` (`spec`, `spec.restoreSpec`).
    pub fn validate_at(&self, prefix: &str) -> FieldErrors {
        let mut errs = FieldErrors::new();
        let p = |field: &str| format!("{prefix}.{field}");
        match (set(&self.backup_name), set(&self.schedule_name)) {
            (true, true) => push(
                &mut errs,
                p("scheduleName"),
                format!(
                    "may not be set together with {prefix}.backupName (exactly one is required)"
                ),
            ),
            (false, false) => push(
                &mut errs,
                p("backupName"),
                format!("exactly one of {prefix}.backupName or {prefix}.scheduleName is required"),
            ),
            _ => {}
        }
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
        for (i, r) in self.included_resources.iter().flatten().enumerate() {
            if NON_RESTORABLE_RESOURCES.contains(&r.as_str()) {
                push(
                    &mut errs,
                    format!("{prefix}.includedResources[{i}]"),
                    format!("{r:?} is a non-restorable resource"),
                );
            }
        }
        if let Some(rs) = &self.restore_status {
            checks::includes_excludes(
                &mut errs,
                &p("restoreStatus.includedResources"),
                rs.included_resources.as_ref(),
                &p("restoreStatus.excludedResources"),
                rs.excluded_resources.as_ref(),
            );
        }
        for (from, to) in self.namespace_mapping.iter().flatten() {
            if from.is_empty() || to.is_empty() {
                push(
                    &mut errs,
                    p("namespaceMapping"),
                    format!("namespace names may not be empty ({from:?}: {to:?})"),
                );
            }
        }
        checks::selectors(
            &mut errs,
            prefix,
            self.label_selector.as_ref(),
            self.or_label_selectors.as_ref(),
        );
        checks::duration(
            &mut errs,
            &p("itemOperationTimeout"),
            self.item_operation_timeout.as_ref(),
        );
        checks::configmap_ref(
            &mut errs,
            &p("resourceModifier"),
            self.resource_modifier.as_ref(),
        );
        checks::configmap_ref(
            &mut errs,
            &p("resourcePolicy"),
            self.resource_policy.as_ref(),
        );
        if let Some(Err(text)) = self.existing_resource_policy() {
            // Velero's wording (`restore_controller.go`).
            push(
                &mut errs,
                p("existingResourcePolicy"),
                format!("Invalid ExistingResourcePolicy: {text}"),
            );
        }
        if let Some(n) = self
            .uploader_config
            .as_ref()
            .and_then(|u| u.parallel_files_download)
            && n < 0
        {
            push(
                &mut errs,
                p("uploaderConfig.parallelFilesDownload"),
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

impl RestoreResourceHookSpec {
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
        for (j, hook) in self.post_hooks.iter().flatten().enumerate() {
            let here = format!("{at}.postHooks[{j}]");
            if hook.exec.is_none() && hook.init.is_none() {
                push(errs, here.clone(), "one of exec or init is required");
            }
            if let Some(exec) = &hook.exec {
                if exec.command.is_empty() {
                    push(
                        errs,
                        format!("{here}.exec.command"),
                        "must have at least one element",
                    );
                }
                checks::duration(
                    errs,
                    &format!("{here}.exec.execTimeout"),
                    exec.exec_timeout.as_ref(),
                );
                checks::duration(
                    errs,
                    &format!("{here}.exec.waitTimeout"),
                    exec.wait_timeout.as_ref(),
                );
            }
            if let Some(init) = &hook.init {
                checks::duration(errs, &format!("{here}.init.timeout"), init.timeout.as_ref());
                for (k, c) in init.init_containers.iter().flatten().enumerate() {
                    if !c.is_object() {
                        push(
                            errs,
                            format!("{here}.init.initContainers[{k}]"),
                            "must be a container object",
                        );
                    }
                }
            }
        }
    }
}

impl Restore {
    /// Every problem with this Restore's spec, paths from `spec`.
    pub fn validate(&self) -> FieldErrors {
        self.spec.validate_at("spec")
    }
}
