//! NAC's validation of the non-admin kinds (what a namespace owner may ask for) and the
//! administrator's enforced specs (see
//! docs/architecture.md#non-admin-objects-stay-in-their-namespace). Pure: checks that
//! need the cluster (the NABSL exists and is `Created`, the Secret exists, the NAB named
//! by a NAR is `Created`) belong to the controllers.

use chrono::TimeDelta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{
    NonAdminBackup, NonAdminBackupStorageLocation, NonAdminRestore,
    VELERO_DEFAULT_BACKUP_SYNC_PERIOD_SECS,
};
use crate::velero::{
    BackupSpec, BackupStorageLocationSpec, Duration, FieldError, FieldErrors, RestoreSpec,
};

fn push(errs: &mut FieldErrors, path: String, message: impl Into<String>) {
    errs.push(FieldError {
        path,
        message: message.into(),
    });
}

/// NAC's `ValidateBackupSpec` rules for a backup of `namespace`: `includedNamespaces`
/// only that namespace, no `excludedNamespaces`, `includeClusterResources` false or
/// unset, no `includedClusterScopedResources`, no `volumeSnapshotLocations`.
pub fn validate_non_admin_backup_spec(
    spec: &BackupSpec,
    namespace: &str,
    prefix: &str,
) -> FieldErrors {
    let mut errs = FieldErrors::new();
    for (i, ns) in spec.included_namespaces.iter().flatten().enumerate() {
        if ns != namespace {
            push(
                &mut errs,
                format!("{prefix}.includedNamespaces[{i}]"),
                format!(
                    "may only contain the NonAdminBackup's own namespace {namespace:?} (got {ns:?})"
                ),
            );
        }
    }
    if spec
        .excluded_namespaces
        .as_ref()
        .is_some_and(|v| !v.is_empty())
    {
        push(
            &mut errs,
            format!("{prefix}.excludedNamespaces"),
            "must not be set for a non-admin backup",
        );
    }
    if spec.include_cluster_resources == Some(true) {
        push(
            &mut errs,
            format!("{prefix}.includeClusterResources"),
            "may only be false or unset for a non-admin backup",
        );
    }
    if spec
        .included_cluster_scoped_resources
        .as_ref()
        .is_some_and(|v| !v.is_empty())
    {
        push(
            &mut errs,
            format!("{prefix}.includedClusterScopedResources"),
            "must be empty for a non-admin backup",
        );
    }
    if spec
        .volume_snapshot_locations
        .as_ref()
        .is_some_and(|v| !v.is_empty())
    {
        push(
            &mut errs,
            format!("{prefix}.volumeSnapshotLocations"),
            "must not be set for a non-admin backup",
        );
    }
    errs
}

/// NAC's `ValidateRestoreSpec` rules: `backupName` (a NonAdminBackup) is required;
/// `scheduleName`, `includedNamespaces`, `excludedNamespaces` and `namespaceMapping`
/// are forbidden. Beyond NAC: `includeClusterResources` may only be false or unset, as
/// for a non-admin backup: a namespace owner's restore never creates a cluster-scoped
/// object (the backup may come from their own bucket and hold anything).
pub fn validate_non_admin_restore_spec(spec: &RestoreSpec, prefix: &str) -> FieldErrors {
    let mut errs = FieldErrors::new();
    if spec.backup_name.as_ref().is_none_or(|n| n.is_empty()) {
        push(
            &mut errs,
            format!("{prefix}.backupName"),
            "required (the name of a NonAdminBackup)",
        );
    }
    let forbidden = [
        (
            "scheduleName",
            spec.schedule_name.as_ref().is_some_and(|s| !s.is_empty()),
        ),
        (
            "includedNamespaces",
            spec.included_namespaces
                .as_ref()
                .is_some_and(|v| !v.is_empty()),
        ),
        (
            "excludedNamespaces",
            spec.excluded_namespaces
                .as_ref()
                .is_some_and(|v| !v.is_empty()),
        ),
        (
            "namespaceMapping",
            spec.namespace_mapping
                .as_ref()
                .is_some_and(|m| !m.is_empty()),
        ),
    ];
    for (field, set) in forbidden {
        if set {
            push(
                &mut errs,
                format!("{prefix}.{field}"),
                "must not be set for a non-admin restore",
            );
        }
    }
    if spec.include_cluster_resources == Some(true) {
        push(
            &mut errs,
            format!("{prefix}.includeClusterResources"),
            "may only be false or unset for a non-admin restore: it never creates \
             cluster-scoped objects",
        );
    }
    errs
}

/// NAC's `ValidateBslSpec` rules: `default` must be false, `credential.name` and
/// `credential.key` are required, and when the non-admin backup sync runs
/// (`nac_backup_sync_period` positive) the location's sync period (or Velero's 1m
/// default) must be lower than it.
pub fn validate_non_admin_bsl_spec(
    spec: &BackupStorageLocationSpec,
    prefix: &str,
    nac_backup_sync_period: Option<TimeDelta>,
) -> FieldErrors {
    let mut errs = FieldErrors::new();
    if spec.default == Some(true) {
        push(
            &mut errs,
            format!("{prefix}.default"),
            "must be false for a non-admin backup storage location",
        );
    }
    match &spec.credential {
        None => push(
            &mut errs,
            format!("{prefix}.credential"),
            "required (name and key of a Secret in this namespace)",
        ),
        Some(c) => {
            if c.name.is_empty() {
                push(&mut errs, format!("{prefix}.credential.name"), "required");
            }
            if c.key.is_empty() {
                push(&mut errs, format!("{prefix}.credential.key"), "required");
            }
        }
    }
    if let Some(problem) = user_prefix_problem(spec.object_storage.prefix.as_deref()) {
        push(&mut errs, format!("{prefix}.objectStorage.prefix"), problem);
    }
    if let Some(nac) = nac_backup_sync_period.filter(|p| *p > TimeDelta::zero()) {
        let own = match &spec.backup_sync_period {
            Some(d) => d.to_delta().ok(),
            None => Some(TimeDelta::seconds(VELERO_DEFAULT_BACKUP_SYNC_PERIOD_SECS)),
        };
        if let Some(own) = own.filter(|own| *own >= nac) {
            push(
                &mut errs,
                format!("{prefix}.backupSyncPeriod"),
                format!(
                    "must be lower than the non-admin backup sync period {} (got {}{})",
                    Duration::from_delta(nac),
                    Duration::from_delta(own),
                    if spec.backup_sync_period.is_none() {
                        ", Velero's default"
                    } else {
                        ""
                    }
                ),
            );
        }
    }
    errs
}

/// Why a NonAdminBackupStorageLocation's `objectStorage.prefix` cannot be put under the
/// namespace's own directory (`<namespace>/<prefix>`), or `None` when it can: it must be
/// a relative path of plain segments, with no `.` or `..` segment, no empty segment
/// (`a//b`), no backslash and no control character, so that the location of one
/// namespace can never reach the directory of another.
pub fn user_prefix_problem(prefix: Option<&str>) -> Option<String> {
    let prefix = prefix.filter(|p| !p.is_empty())?;
    if prefix.starts_with('/') {
        return Some(format!(
            "must be a relative path under the namespace's directory (got the absolute {prefix:?})"
        ));
    }
    if prefix.chars().any(|c| c.is_control() || c == '\\') {
        return Some("must not contain a backslash or control character".to_string());
    }
    let trimmed = prefix.strip_suffix('/').unwrap_or(prefix);
    if trimmed
        .split('/')
        .any(|seg| seg.is_empty() || seg == "." || seg == "..")
    {
        return Some(format!(
            "must not contain `.`, `..` or empty path segments (got {prefix:?})"
        ));
    }
    None
}

/// Appends `more`, leaving out problems at a path already reported.
fn merge(errs: &mut FieldErrors, more: FieldErrors) {
    for e in more {
        if !errs.iter().any(|have| have.path == e.path) {
            errs.push(e);
        }
    }
}

impl NonAdminBackup {
    /// NAC's rules and Velero's own rules for the embedded spec, paths from `spec`.
    pub fn validate(&self) -> FieldErrors {
        let namespace = self.metadata.namespace.as_deref().unwrap_or_default();
        let mut errs =
            validate_non_admin_backup_spec(&self.spec.backup_spec, namespace, "spec.backupSpec");
        merge(
            &mut errs,
            self.spec.backup_spec.validate_at("spec.backupSpec"),
        );
        errs
    }
}

impl NonAdminRestore {
    /// NAC's rules and Velero's own rules for the embedded spec, paths from `spec`.
    pub fn validate(&self) -> FieldErrors {
        let mut errs = validate_non_admin_restore_spec(&self.spec.restore_spec, "spec.restoreSpec");
        let velero = self.spec.restore_spec.validate_at("spec.restoreSpec");
        // backupName/scheduleName are covered by NAC's rules above.
        let velero = velero
            .into_iter()
            .filter(|e| {
                e.path != "spec.restoreSpec.backupName" && e.path != "spec.restoreSpec.scheduleName"
            })
            .collect();
        merge(&mut errs, velero);
        errs
    }
}

impl NonAdminBackupStorageLocation {
    /// NAC's rules and Velero's own rules for the embedded spec, paths from `spec`;
    /// `nac_backup_sync_period` is the DPA's `nonAdmin.backupSyncPeriod`.
    pub fn validate(&self, nac_backup_sync_period: Option<TimeDelta>) -> FieldErrors {
        let spec = &self.spec.backup_storage_location_spec;
        let prefix = "spec.backupStorageLocationSpec";
        let mut errs = validate_non_admin_bsl_spec(spec, prefix, nac_backup_sync_period);
        merge(&mut errs, spec.validate_at(prefix));
        errs
    }
}

/// Fields whose Go zero value is a zero duration (`"0s"`).
const DURATION_FIELDS: [&str; 5] = [
    "ttl",
    "csiSnapshotTimeout",
    "itemOperationTimeout",
    "backupSyncPeriod",
    "validationFrequency",
];

/// Go's "zero value" on the JSON form: null, 0, "", empty list or map, an object of
/// zero fields, or a zero duration in a duration field. Velero's spec booleans are
/// pointers, so a set `false` is not zero; only the plain `default` of a BSL is.
fn is_zero(field: &str, v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => field == "default" && !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => {
            s.is_empty()
                || (DURATION_FIELDS.contains(&field)
                    && Duration::parse(s).is_ok_and(|d| d.is_zero()))
        }
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.iter().all(|(k, v)| is_zero(k, v)),
    }
}

fn to_object<T: Serialize>(value: &T) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// The administrator's enforced spec: every field that is non-zero in `enforced` and
/// also non-zero but different in `user` is a problem ("the administrator has
/// restricted <prefix>.<field> field value to <value>"). For a BSL spec, `objectStorage`
/// is compared on `bucket`, `prefix` and `caCert` only.
pub fn enforced_spec_errors<T: Serialize>(user: &T, enforced: &T, prefix: &str) -> FieldErrors {
    let (user, enforced) = (to_object(user), to_object(enforced));
    let mut errs = FieldErrors::new();
    let mut compare = |path: String, field: &str, mine: Option<&Value>, theirs: &Value| {
        let Some(mine) = mine else { return };
        if !is_zero(field, theirs) && !is_zero(field, mine) && mine != theirs {
            let shown = match theirs {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            push(
                &mut errs,
                path.clone(),
                format!("the administrator has restricted {path} field value to {shown}"),
            );
        }
    };
    for (field, theirs) in &enforced {
        if field == "objectStorage" && theirs.is_object() {
            for sub in ["bucket", "prefix", "caCert"] {
                if let Some(t) = theirs.get(sub) {
                    let mine = user.get(field).and_then(|o| o.get(sub));
                    compare(format!("{prefix}.{field}.{sub}"), sub, mine, t);
                }
            }
            continue;
        }
        compare(format!("{prefix}.{field}"), field, user.get(field), theirs);
    }
    errs
}

/// The user's spec with every zero field filled from the administrator's enforced
/// spec (NAC does this before it creates the Velero object).
pub fn fill_from_enforced<T: Serialize + DeserializeOwned + Clone>(user: &T, enforced: &T) -> T {
    let mut merged = to_object(user);
    for (field, theirs) in to_object(enforced) {
        if is_zero(&field, &theirs) {
            continue;
        }
        let mine_is_zero = merged.get(&field).is_none_or(|m| is_zero(&field, m));
        if mine_is_zero {
            merged.insert(field, theirs);
        }
    }
    // Both inputs are the same type and only whole fields move between them, so the
    // merged object always deserialises; fall back to the user's spec regardless.
    serde_json::from_value(Value::Object(merged)).unwrap_or_else(|_| user.clone())
}
