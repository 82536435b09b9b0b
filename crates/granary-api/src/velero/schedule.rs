//! `velero.io/v1` Schedule: a cron expression and the Backup spec it creates.

use chrono::{DateTime, Utc};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::checks::push;
use super::cron::check_cron;
use super::{BackupSpec, FieldErrors, ServerDefaults};

/// When to back up and what (`velero.io/v1` Schedule `spec`).
// Several `printcolumn(type_ = ...)` entries read as duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "velero.io",
    version = "v1",
    kind = "Schedule",
    namespaced,
    status = "ScheduleStatus",
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.phase",
        description = "Status of the schedule"
    ),
    printcolumn(
        name = "Schedule",
        type_ = "string",
        json_path = ".spec.schedule",
        description = "A Cron expression defining when to run the Backup"
    ),
    printcolumn(
        name = "LastBackup",
        type_ = "date",
        json_path = ".status.lastBackup",
        description = "The last time a Backup was run for this schedule"
    ),
    printcolumn(
        name = "LastSkipped",
        type_ = "date",
        json_path = ".status.lastSkipped",
        description = "The last time a Backup was skipped for this schedule"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(name = "Paused", type_ = "boolean", json_path = ".spec.paused"),
    derive = "PartialEq",
    derive = "Default",
    doc = "Schedule is a Velero resource that represents a pre-scheduled or periodic Backup that should be run."
)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleSpec {
    /// The Backup spec of every backup this schedule creates.
    pub template: BackupSpec,
    /// Cron expression (5 fields, or a descriptor such as `@every 6h`).
    pub schedule: String,
    /// Whether the Backups made by the schedule are owned by it, so that deleting the
    /// schedule deletes them too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub use_owner_references_in_backup: Option<bool>,
    /// Whether the schedule is paused: no new Backups are made while it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Skip a backup that is due right when the schedule is created or unpaused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_immediately: Option<bool>,
}

/// Lifecycle phase of a Schedule.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SchedulePhase {
    New,
    Enabled,
    FailedValidation,
}

/// Observed state of a Schedule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<SchedulePhase>,
    /// When the schedule last made a Backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub last_backup: Option<DateTime<Utc>>,
    /// When the schedule last skipped a Backup (the previous one was still running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("id" = "granary:nullable"))]
    pub last_skipped: Option<DateTime<Utc>>,
    /// Why the schedule is not valid, one problem per line (phase FailedValidation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_errors: Option<Vec<String>>,
}

impl ScheduleSpec {
    /// Applies the Backup defaults to the template.
    pub fn apply_defaults(&mut self, defaults: &ServerDefaults) {
        self.template.apply_defaults(defaults);
    }

    /// Every problem with this spec; paths start with `prefix`.
    pub fn validate_at(&self, prefix: &str) -> FieldErrors {
        let mut errs = FieldErrors::new();
        if let Err(e) = check_cron(&self.schedule) {
            push(
                &mut errs,
                format!("{prefix}.schedule"),
                format!("invalid cron expression: {e}"),
            );
        }
        errs.extend(self.template.validate_at(&format!("{prefix}.template")));
        errs
    }
}

impl Schedule {
    /// Every problem with this Schedule's spec, paths from `spec`.
    pub fn validate(&self) -> FieldErrors {
        self.spec.validate_at("spec")
    }

    /// Name of the backup this schedule creates at `at`: `<schedule>-<YYYYMMDDhhmmss>`.
    pub fn timestamped_name(&self, at: DateTime<Utc>) -> String {
        let name = self.metadata.name.as_deref().unwrap_or_default();
        format!("{name}-{}", at.format("%Y%m%d%H%M%S"))
    }
}
