//! `granary backup create` flags → the Backup velero's CLI would create
//! (`pkg/cmd/cli/backup/create.go` `BuildBackup`): `includedNamespaces: ["*"]` unless
//! given, `ttl`, `csiSnapshotTimeout` and `itemOperationTimeout` written as Go's zero
//! `"0s"` unless given (the server fills its defaults), empty `metadata` and `hooks`
//! objects, every other field only when its flag is set. Checks run before anything is
//! sent, each error naming its flag.

use kube::api::ObjectMeta;

use super::flags::{self, FlagError, take};
use granary_api::velero::{Backup, BackupHooks, BackupSpec, Duration, Metadata};

/// What a backup or restore takes: the namespace, resource and label filters velero's
/// `backup create`, `schedule create` and `restore create` share, and labels for the
/// object created; as given (unparsed strings). The `///` lines on the fields are their
/// help.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ScopeFlags {
    // `None` means velero's default `*`.
    /// Namespaces to include (`*` for all; the default).
    #[arg(long, value_delimiter = ',', value_name = "NS,...")]
    pub include_namespaces: Option<Vec<String>>,
    /// Namespaces to exclude.
    #[arg(long, value_delimiter = ',', value_name = "NS,...")]
    pub exclude_namespaces: Vec<String>,
    /// Resources to include, as resource.group (`*` for all).
    #[arg(long, value_delimiter = ',', value_name = "RES,...")]
    pub include_resources: Vec<String>,
    /// Resources to exclude, as resource.group.
    #[arg(long, value_delimiter = ',', value_name = "RES,...")]
    pub exclude_resources: Vec<String>,
    /// Include cluster-scoped resources (unset: velero's `auto`, decided by the server
    /// from the namespace filters).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub include_cluster_resources: Option<bool>,
    /// Only resources matching this label selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Resources matching any of these selectors, separated by ` or `.
    #[arg(long)]
    pub or_selector: Option<String>,
    // Repeatable.
    /// Labels for the object created (of a schedule: for the schedule and so its
    /// backups), k=v,...
    #[arg(long, value_name = "K=V,...")]
    pub labels: Vec<String>,
}

/// The flags of `granary backup create` (and of `granary schedule create`, for its
/// template) as given (unparsed strings); the `///` lines on the fields are their help.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct BackupFlags {
    #[command(flatten)]
    pub scope: ScopeFlags,
    /// How long before the backup can be garbage-collected (Go duration, e.g. 72h).
    #[arg(long)]
    pub ttl: Option<String>,
    /// Location in which to store the backup.
    #[arg(long)]
    pub storage_location: Option<String>,
    /// Per resource, the order of its items: `pods=ns1/p1,ns1/p2;persistentvolumes=pv1`.
    #[arg(long)]
    pub ordered_resources: Option<String>,
    #[command(flatten)]
    pub volumes: VolumeFlags,
}

/// velero's volume flags of `backup create` and `schedule create`, accepted so that
/// scripts written for velero run: Granary backs up Kubernetes objects, never volume
/// data, so a value asking for volume data is refused with the reason, and `false` and
/// the timeouts are kept on the backup as velero keeps them.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct VolumeFlags {
    /// Take snapshots of PersistentVolumes (velero). Granary backs up objects only:
    /// only `false` is accepted.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub snapshot_volumes: Option<bool>,
    /// Move snapshot data to the object store (velero). Only `false` is accepted.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub snapshot_move_data: Option<bool>,
    /// Back up every pod volume with file-system backup (velero). Only `false` is
    /// accepted.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub default_volumes_to_fs_backup: Option<bool>,
    /// How long to wait for CSI snapshots (Go duration; kept on the backup, which takes
    /// none).
    #[arg(long, value_name = "DURATION")]
    pub csi_snapshot_timeout: Option<String>,
    /// How long to wait for asynchronous item operations (Go duration; kept on the
    /// backup).
    #[arg(long, value_name = "DURATION")]
    pub item_operation_timeout: Option<String>,
    /// Volume snapshot locations (velero). Granary takes no volume snapshots: refused.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub volume_snapshot_locations: Vec<String>,
    /// A ConfigMap of resource policies (velero). Not supported by Granary: refused.
    #[arg(long, value_name = "NAME")]
    pub resource_policies_configmap: Option<String>,
}

/// What Granary does not do, told for a volume flag that asks for it.
const OBJECTS_ONLY: &str = "Granary backs up Kubernetes objects only, never volume data: leave the flag out or set it to false";

impl VolumeFlags {
    /// Sets the spec fields the flags give; every flag asking for what Granary does not
    /// do is an error naming it.
    fn apply(&self, spec: &mut BackupSpec, errs: &mut Vec<FlagError>) {
        for (flag, value, field) in [
            (
                "--snapshot-volumes",
                self.snapshot_volumes,
                &mut spec.snapshot_volumes,
            ),
            (
                "--snapshot-move-data",
                self.snapshot_move_data,
                &mut spec.snapshot_move_data,
            ),
            (
                "--default-volumes-to-fs-backup",
                self.default_volumes_to_fs_backup,
                &mut spec.default_volumes_to_fs_backup,
            ),
        ] {
            match value {
                Some(true) => errs.push(FlagError::new(flag, "true", OBJECTS_ONLY)),
                Some(false) => *field = Some(false),
                None => {}
            }
        }
        for (flag, value, field) in [
            (
                "--csi-snapshot-timeout",
                &self.csi_snapshot_timeout,
                &mut spec.csi_snapshot_timeout,
            ),
            (
                "--item-operation-timeout",
                &self.item_operation_timeout,
                &mut spec.item_operation_timeout,
            ),
        ] {
            if let Some(v) = value
                && let Some(d) = take(errs, flags::parse_go_duration(flag, v))
            {
                *field = Some(d);
            }
        }
        if let Some(locations) = list(&self.volume_snapshot_locations) {
            errs.push(FlagError::new(
                "--volume-snapshot-locations",
                &locations.join(","),
                "Granary takes no volume snapshots, so it has no volume snapshot locations: leave the flag out",
            ));
        }
        if let Some(name) = &self.resource_policies_configmap {
            errs.push(FlagError::new(
                "--resource-policies-configmap",
                name,
                "resource policies are not supported by Granary: leave the flag out and select resources with --include-resources/--exclude-resources or labels",
            ));
        }
    }
}

/// Non-empty entries of a list flag, trimmed; `None` when nothing is left (velero's
/// builder appends to a nil slice, so an empty list stays off the wire).
pub(crate) fn list(values: &[String]) -> Option<Vec<String>> {
    let v: Vec<String> = values
        .iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!v.is_empty()).then_some(v)
}

/// The Backup `name` in `namespace` that velero's CLI would create from `f`, or every
/// problem with the flags.
pub fn build_backup(
    name: &str,
    namespace: &str,
    f: &BackupFlags,
) -> Result<Backup, Vec<FlagError>> {
    let mut errs = Vec::new();
    if !granary_api::names::is_dns1123_subdomain(name) {
        errs.push(FlagError::new(
            "NAME",
            name,
            "a backup name must be lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters",
        ));
    }
    let (label_selector, or_label_selectors) = flags::selectors(
        &mut errs,
        f.scope.selector.as_deref(),
        f.scope.or_selector.as_deref(),
    );
    let ttl = match &f.ttl {
        Some(t) => take(&mut errs, flags::parse_go_duration("--ttl", t)),
        None => Some(Duration::from_delta(chrono::TimeDelta::zero())),
    };
    let ordered_resources = f.ordered_resources.as_deref().and_then(|s| {
        take(
            &mut errs,
            flags::parse_ordered_resources("--ordered-resources", s),
        )
    });
    let labels =
        take(&mut errs, flags::parse_labels("--labels", &f.scope.labels)).unwrap_or_default();
    let storage_location = f
        .storage_location
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    if let Some(loc) = storage_location
        && !granary_api::names::is_dns1123_subdomain(loc)
    {
        errs.push(FlagError::new(
            "--storage-location",
            loc,
            "not a valid BackupStorageLocation name",
        ));
    }

    let zero = Duration::from_delta(chrono::TimeDelta::zero());
    let mut spec = BackupSpec {
        metadata: Some(Metadata::default()),
        included_namespaces: match &f.scope.include_namespaces {
            None => Some(vec!["*".to_string()]),
            Some(v) => list(v),
        },
        excluded_namespaces: list(&f.scope.exclude_namespaces),
        included_resources: list(&f.scope.include_resources),
        excluded_resources: list(&f.scope.exclude_resources),
        label_selector,
        or_label_selectors,
        ttl,
        include_cluster_resources: f.scope.include_cluster_resources,
        hooks: Some(BackupHooks::default()),
        storage_location: storage_location.map(String::from),
        ordered_resources,
        csi_snapshot_timeout: Some(zero.clone()),
        item_operation_timeout: Some(zero),
        ..BackupSpec::default()
    };
    f.volumes.apply(&mut spec, &mut errs);
    // The spec's own validation (the server's FailedValidation checks), with each field
    // path told back as the flag that set it.
    for e in spec.validate_at("spec") {
        errs.push(FlagError::new(flag_of(&e.path), "", e.message));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let mut backup = Backup::new(name, spec);
    backup.metadata = ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        labels: (!labels.is_empty()).then_some(labels),
        ..ObjectMeta::default()
    };
    Ok(backup)
}

/// The flag that sets a spec field, for error messages.
fn flag_of(path: &str) -> &str {
    let field = path.trim_start_matches("spec.");
    let field = field.split(['.', '[']).next().unwrap_or(field);
    const FLAGS: [(&str, &str); 9] = [
        ("includedNamespaces", "--include-namespaces"),
        ("excludedNamespaces", "--exclude-namespaces"),
        ("includedResources", "--include-resources"),
        ("excludedResources", "--exclude-resources"),
        ("includeClusterResources", "--include-cluster-resources"),
        ("labelSelector", "--selector"),
        ("orLabelSelectors", "--or-selector"),
        ("ttl", "--ttl"),
        ("orderedResources", "--ordered-resources"),
    ];
    FLAGS
        .iter()
        .find(|(f, _)| *f == field)
        .map(|(_, flag)| *flag)
        .unwrap_or(path)
}

/// Every flag error on its own line, for stderr.
pub fn describe_errors(errs: &[FlagError]) -> String {
    errs.iter()
        .map(|e| {
            if e.value.is_empty() {
                format!("{}: {}", e.flag, e.reason)
            } else {
                e.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wire(b: &Backup) -> serde_json::Value {
        serde_json::to_value(b).unwrap()
    }

    #[test]
    fn no_flags_is_velero_default_backup() {
        let b = build_backup("b1", "velero", &BackupFlags::default()).unwrap();
        assert_eq!(
            wire(&b),
            json!({
                "apiVersion": "velero.io/v1", "kind": "Backup",
                "metadata": {"name": "b1", "namespace": "velero"},
                "spec": {
                    "csiSnapshotTimeout": "0s", "hooks": {}, "includedNamespaces": ["*"],
                    "itemOperationTimeout": "0s", "metadata": {}, "ttl": "0s"
                }
            })
        );
    }

    #[test]
    fn every_flag_lands_in_its_field() {
        let f = BackupFlags {
            scope: ScopeFlags {
                include_namespaces: Some(vec!["a".into(), "b".into()]),
                exclude_namespaces: vec!["c".into()],
                include_resources: vec!["configmaps".into(), "deployments.apps".into()],
                exclude_resources: vec!["secrets".into()],
                include_cluster_resources: Some(false),
                selector: Some("app=web,tier in (x,y)".into()),
                labels: vec!["team=x".into()],
                ..ScopeFlags::default()
            },
            ttl: Some("36h".into()),
            storage_location: Some("primary".into()),
            ordered_resources: Some("pods=a/p1,a/p2".into()),
            volumes: VolumeFlags::default(),
        };
        let b = build_backup("nightly", "ns", &f).unwrap();
        let w = wire(&b);
        assert_eq!(w["metadata"]["labels"], json!({"team": "x"}));
        assert_eq!(
            w["spec"],
            json!({
                "csiSnapshotTimeout": "0s", "hooks": {}, "metadata": {},
                "itemOperationTimeout": "0s",
                "includedNamespaces": ["a", "b"], "excludedNamespaces": ["c"],
                "includedResources": ["configmaps", "deployments.apps"],
                "excludedResources": ["secrets"], "includeClusterResources": false,
                "labelSelector": {"matchLabels": {"app": "web"}, "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["x", "y"]}]},
                "ttl": "36h0m0s", "storageLocation": "primary",
                "orderedResources": {"pods": "a/p1,a/p2"}
            })
        );
    }

    #[test]
    fn velero_volume_flags_are_kept_when_false_and_refused_when_asking_for_volume_data() {
        let f = BackupFlags {
            volumes: VolumeFlags {
                snapshot_volumes: Some(false),
                default_volumes_to_fs_backup: Some(false),
                csi_snapshot_timeout: Some("5m".into()),
                item_operation_timeout: Some("1h".into()),
                ..VolumeFlags::default()
            },
            ..BackupFlags::default()
        };
        let w = wire(&build_backup("b", "velero", &f).unwrap());
        assert_eq!(w["spec"]["snapshotVolumes"], false);
        assert_eq!(w["spec"]["defaultVolumesToFsBackup"], false);
        assert_eq!(w["spec"]["csiSnapshotTimeout"], "5m0s");
        assert_eq!(w["spec"]["itemOperationTimeout"], "1h0m0s");
        let f = BackupFlags {
            volumes: VolumeFlags {
                snapshot_volumes: Some(true),
                snapshot_move_data: Some(true),
                default_volumes_to_fs_backup: Some(true),
                csi_snapshot_timeout: Some("soon".into()),
                volume_snapshot_locations: vec!["aws-default".into()],
                resource_policies_configmap: Some("policies".into()),
                ..VolumeFlags::default()
            },
            ..BackupFlags::default()
        };
        let errs = describe_errors(&build_backup("b", "velero", &f).unwrap_err());
        for flag in [
            "--snapshot-volumes",
            "--snapshot-move-data",
            "--default-volumes-to-fs-backup",
            "--csi-snapshot-timeout",
            "--volume-snapshot-locations",
            "--resource-policies-configmap",
        ] {
            assert!(errs.contains(flag), "{flag} missing from {errs}");
        }
        assert_eq!(errs.lines().count(), 6, "{errs}");
    }

    #[test]
    fn or_selector_and_errors_name_their_flags() {
        let f = BackupFlags {
            scope: ScopeFlags {
                or_selector: Some("a=1 or b=2".into()),
                ..ScopeFlags::default()
            },
            ..BackupFlags::default()
        };
        let b = build_backup("b", "velero", &f).unwrap();
        assert_eq!(b.spec.or_label_selectors.as_ref().map(Vec::len), Some(2));

        let f = BackupFlags {
            scope: ScopeFlags {
                selector: Some("a=1".into()),
                or_selector: Some("b=2".into()),
                include_namespaces: Some(vec!["x".into()]),
                exclude_namespaces: vec!["x".into()],
                ..ScopeFlags::default()
            },
            ttl: Some("forever".into()),
            ..BackupFlags::default()
        };
        let errs = describe_errors(&build_backup("Bad_Name", "velero", &f).unwrap_err());
        for flag in ["NAME", "--or-selector", "--ttl", "--exclude-namespaces"] {
            assert!(errs.contains(flag), "{flag} missing from {errs}");
        }
    }
}
