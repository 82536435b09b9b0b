//! `granary restore create` flags → the Restore velero's CLI would create
//! (`pkg/cmd/cli/restore/create.go`): `includedNamespaces: ["*"]` unless given, `hooks`
//! and `uploaderConfig` as empty objects and `itemOperationTimeout` as Go's zero `"0s"`
//! (the server fills its default), every other field only when its flag is set; the
//! name `<backup or schedule>-<yyyyMMddHHmmss>` unless given. Checks run before anything
//! is sent, each error naming its flag.

use std::collections::BTreeMap;

use chrono::DateTime;
use kube::api::ObjectMeta;

use super::backup_spec::{ScopeFlags, list};
use super::flags::{self, FlagError, take};
use granary_api::velero::{
    PolicyType, Restore, RestoreSpec, RestoreStatusSpec, UploaderConfigForRestore,
};

/// The flags of `granary restore create` as given (unparsed strings); the `///` lines on
/// the fields are their help.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct RestoreFlags {
    /// Backup to restore from.
    #[arg(long, value_name = "BACKUP")]
    pub from_backup: Option<String>,
    /// Schedule whose latest completed backup to restore from.
    #[arg(long, value_name = "SCHEDULE")]
    pub from_schedule: Option<String>,
    /// With --from-backup: the backup is another seed's, listed here through its
    /// read-only location `seed-<SEED>` (a lost or moved seed's backups).
    #[arg(long, value_name = "SEED")]
    pub from_seed: Option<String>,
    /// Restore the newest completed backup holding this shoot's control-plane namespace
    /// (`shoot--<project>--<shoot>`), from any location here, into that namespace.
    #[arg(long, value_name = "PROJECT/SHOOT")]
    pub for_shoot: Option<String>,
    /// What to restore, and labels for the restore.
    #[command(flatten)]
    pub scope: ScopeFlags,
    // Repeatable.
    /// Restore namespaces under other names: src1:dst1,src2:dst2.
    #[arg(long, value_name = "SRC:DST,...")]
    pub namespace_mappings: Vec<String>,
    /// What to do with objects that already exist: none (keep them) or update.
    #[arg(long, value_name = "none|update")]
    pub existing_resource_policy: Option<String>,
    /// Restore volume data: only false is accepted (Granary restores no volume data).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub restore_volumes: Option<bool>,
    /// Keep the node ports of Services.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub preserve_nodeports: Option<bool>,
    /// Resources whose status is restored too, as resource.group.
    #[arg(long, value_delimiter = ',', value_name = "RES,...")]
    pub status_include_resources: Vec<String>,
    /// Resources left out of --status-include-resources.
    #[arg(long, value_delimiter = ',', value_name = "RES,...")]
    pub status_exclude_resources: Vec<String>,
    /// Restore a backup that carries no integrity record (Velero's own, an older
    /// Granary's); one that fails its check is refused whatever this says.
    #[arg(long)]
    pub allow_unverified: bool,
}

/// `--for-shoot PROJECT/SHOOT`: the shoot's control-plane namespace on a seed,
/// `shoot--<project>--<shoot>` (Gardener's technical ID).
pub fn shoot_control_plane_namespace(value: &str) -> Result<String, FlagError> {
    let flag = "--for-shoot";
    let (project, shoot) = value
        .split_once('/')
        .ok_or_else(|| FlagError::new(flag, value, "is not PROJECT/SHOOT"))?;
    let ns = format!("shoot--{project}--{shoot}");
    if project.is_empty()
        || shoot.is_empty()
        || !granary_api::names::is_dns1123_label(project)
        || !granary_api::names::is_dns1123_label(shoot)
        || ns.len() > 63
    {
        return Err(FlagError::new(
            flag,
            value,
            "is not PROJECT/SHOOT naming a project and a shoot (their control-plane namespace shoot--<project>--<shoot> must be a namespace name)",
        ));
    }
    Ok(ns)
}

/// `--namespace-mappings`: `src:dst` pairs separated by commas, both namespace names.
fn parse_namespace_mappings(values: &[String]) -> Result<BTreeMap<String, String>, FlagError> {
    let flag = "--namespace-mappings";
    let namespace =
        |n: &str| n.len() <= 63 && !n.contains('.') && granary_api::names::is_dns1123_subdomain(n);
    let mut out = BTreeMap::new();
    for value in values {
        for pair in value.split(',').filter(|p| !p.trim().is_empty()) {
            let (from, to) = pair
                .split_once(':')
                .map(|(f, t)| (f.trim(), t.trim()))
                .ok_or_else(|| FlagError::new(flag, value, format!("{pair:?} is not src:dst")))?;
            if let Some(bad) = [from, to].into_iter().find(|n| !namespace(n)) {
                return Err(FlagError::new(
                    flag,
                    value,
                    format!("{bad:?} is not a valid namespace name"),
                ));
            }
            out.insert(from.to_string(), to.to_string());
        }
    }
    Ok(out)
}

/// Exactly one of `--from-backup` and `--from-schedule`.
fn check_source(errs: &mut Vec<FlagError>, backup: Option<&str>, schedule: Option<&str>) {
    match (backup, schedule) {
        (Some(_), Some(s)) => errs.push(FlagError::new(
            "--from-schedule",
            s,
            "either a backup or schedule must be specified, but not both",
        )),
        (None, None) => errs.push(FlagError::new(
            "--from-backup",
            "",
            "either a backup (--from-backup) or a schedule (--from-schedule) must be specified",
        )),
        _ => {}
    }
}

/// The flag that sets a field of the spec, for the spec's own validation messages.
fn flag_of(path: &str) -> &str {
    let field = path.trim_start_matches("spec.");
    let field = field.split('[').next().unwrap_or(field);
    match field {
        "backupName" => "--from-backup",
        "scheduleName" => "--from-schedule",
        "includedNamespaces" => "--include-namespaces",
        "excludedNamespaces" => "--exclude-namespaces",
        "includedResources" => "--include-resources",
        "excludedResources" => "--exclude-resources",
        "namespaceMapping" => "--namespace-mappings",
        "labelSelector" => "--selector",
        "orLabelSelectors" => "--or-selector",
        "existingResourcePolicy" => "--existing-resource-policy",
        "restoreStatus.includedResources" => "--status-include-resources",
        "restoreStatus.excludedResources" => "--status-exclude-resources",
        _ => path,
    }
}

/// The Restore velero's `restore create` would create (`pkg/cmd/cli/restore/create.go`),
/// or every problem with the flags. `now` names it when `name` is not given, in the
/// user's local time as velero does.
pub fn build_restore<Tz: chrono::TimeZone>(
    name: Option<&str>,
    namespace: &str,
    f: &RestoreFlags,
    now: DateTime<Tz>,
) -> Result<Restore, Vec<FlagError>>
where
    Tz::Offset: std::fmt::Display,
{
    let mut errs = Vec::new();
    let (backup, schedule) = (nonempty(&f.from_backup), nonempty(&f.from_schedule));
    let shoot_namespace = nonempty(&f.for_shoot)
        .and_then(|v| take(&mut errs, shoot_control_plane_namespace(v)).map(|ns| (v, ns)));
    if let Some(seed) = nonempty(&f.from_seed) {
        if backup.is_none() {
            errs.push(FlagError::new(
                "--from-seed",
                seed,
                "names the seed of the backup given with --from-backup",
            ));
        }
        if !granary_api::names::is_dns1123_label(seed) {
            errs.push(FlagError::new("--from-seed", seed, "is not a seed name"));
        }
    }
    match (backup, schedule, &shoot_namespace) {
        (Some(_), _, Some((v, _))) | (_, Some(_), Some((v, _))) => errs.push(FlagError::new(
            "--for-shoot",
            v,
            "picks the backup itself: give it without --from-backup or --from-schedule",
        )),
        (None, None, Some(_)) => {
            if let Some(v) = &f.scope.include_namespaces {
                errs.push(FlagError::new(
                    "--include-namespaces",
                    &v.join(","),
                    "--for-shoot restores the shoot's control-plane namespace only",
                ));
            }
        }
        (backup, schedule, _) => check_source(&mut errs, backup, schedule),
    }
    let name = match name {
        Some(n) => n.to_string(),
        None => format!(
            "{}-{}",
            schedule
                .or(backup)
                .or(shoot_namespace.as_ref().map(|(_, ns)| ns.as_str()))
                .unwrap_or_default(),
            now.format("%Y%m%d%H%M%S")
        ),
    };
    if !granary_api::names::is_dns1123_subdomain(&name) {
        errs.push(FlagError::new(
            "NAME",
            &name,
            "a restore name must be lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters",
        ));
    }
    let (label_selector, or_label_selectors) = flags::selectors(
        &mut errs,
        f.scope.selector.as_deref(),
        f.scope.or_selector.as_deref(),
    );
    let labels =
        take(&mut errs, flags::parse_labels("--labels", &f.scope.labels)).unwrap_or_default();
    let mapping =
        take(&mut errs, parse_namespace_mappings(&f.namespace_mappings)).unwrap_or_default();
    let policy = nonempty(&f.existing_resource_policy);
    if let Some(p) = policy
        && PolicyType::parse(p).is_none()
    {
        errs.push(FlagError::new(
            "--existing-resource-policy",
            p,
            "existing-resource-policy has invalid value, it accepts only none, update as value",
        ));
    }
    if f.restore_volumes == Some(true) {
        errs.push(FlagError::new(
            "--restore-volumes",
            "true",
            "Granary does not restore volume data (no snapshots, no file-system backups); leave the flag out or give --restore-volumes=false",
        ));
    }
    let status_included = list(&f.status_include_resources);
    let status_excluded = list(&f.status_exclude_resources);
    if status_included.is_none() && status_excluded.is_some() {
        // velero's CLI drops it silently; a flag that does nothing is refused instead.
        errs.push(FlagError::new(
            "--status-exclude-resources",
            &f.status_exclude_resources.join(","),
            "only narrows --status-include-resources; give that flag too",
        ));
    }
    let spec = RestoreSpec {
        backup_name: backup.map(String::from),
        schedule_name: schedule.map(String::from),
        included_namespaces: match (&shoot_namespace, &f.scope.include_namespaces) {
            (Some((_, ns)), _) => Some(vec![ns.clone()]),
            (None, None) => Some(vec!["*".to_string()]),
            (None, Some(v)) => list(v),
        },
        excluded_namespaces: list(&f.scope.exclude_namespaces),
        included_resources: list(&f.scope.include_resources),
        excluded_resources: list(&f.scope.exclude_resources),
        namespace_mapping: (!mapping.is_empty()).then_some(mapping),
        label_selector,
        or_label_selectors,
        restore_pvs: f.restore_volumes,
        restore_status: status_included.map(|included| RestoreStatusSpec {
            included_resources: Some(included),
            excluded_resources: status_excluded,
        }),
        preserve_node_ports: f.preserve_nodeports,
        include_cluster_resources: f.scope.include_cluster_resources,
        hooks: Some(Default::default()),
        existing_resource_policy: policy.map(String::from),
        item_operation_timeout: Some(granary_api::velero::Duration::from_delta(
            chrono::TimeDelta::zero(),
        )),
        uploader_config: Some(UploaderConfigForRestore::default()),
        ..RestoreSpec::default()
    };
    // The server's own checks, each told back as the flag that set the field (once per
    // flag: the checks above already said what is wrong with it).
    for e in spec.validate_at("spec") {
        let flag = flag_of(&e.path);
        // --for-shoot's backup is picked from the server afterwards.
        if shoot_namespace.is_some() && flag == "--from-backup" {
            continue;
        }
        if !errs.iter().any(|have| have.flag == flag) {
            errs.push(FlagError::new(flag, "", e.message));
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let mut restore = Restore::new(&name, spec);
    restore.metadata = ObjectMeta {
        name: Some(name),
        namespace: Some(namespace.to_string()),
        labels: (!labels.is_empty()).then_some(labels),
        annotations: f.allow_unverified.then(|| {
            BTreeMap::from([(
                granary_api::velero::ALLOW_UNVERIFIED_ANNOTATION.to_owned(),
                "true".to_owned(),
            )])
        }),
        ..ObjectMeta::default()
    };
    Ok(restore)
}

/// A flag's value, trimmed; `None` when unset or blank.
fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::backup_spec::describe_errors;
    use chrono::{TimeZone, Utc};
    use kube::ResourceExt;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 4, 5, 6, 7).unwrap()
    }

    fn from_backup(b: &str) -> RestoreFlags {
        RestoreFlags {
            from_backup: Some(b.into()),
            ..RestoreFlags::default()
        }
    }

    fn wire(r: &Restore) -> serde_json::Value {
        serde_json::to_value(r).unwrap()
    }

    #[test]
    fn no_flags_is_velero_s_default_restore() {
        let r = build_restore(Some("r1"), "velero", &from_backup("b1"), now()).unwrap();
        assert_eq!(
            wire(&r),
            json!({
                "apiVersion": "velero.io/v1", "kind": "Restore",
                "metadata": {"name": "r1", "namespace": "velero"},
                "spec": {"backupName": "b1", "hooks": {}, "includedNamespaces": ["*"],
                         "itemOperationTimeout": "0s", "uploaderConfig": {}}
            })
        );
    }

    #[test]
    fn for_shoot_restores_its_control_plane_namespace_and_from_seed_needs_a_backup() {
        let f = RestoreFlags {
            for_shoot: Some("dev/web".into()),
            ..RestoreFlags::default()
        };
        let r = build_restore(None, "velero", &f, now()).unwrap();
        assert_eq!(r.name_any(), "shoot--dev--web-20260304050607");
        assert_eq!(
            r.spec.included_namespaces,
            Some(vec!["shoot--dev--web".to_string()])
        );
        assert_eq!(r.spec.backup_name, None, "the CLI picks it from the server");
        let refused = |f: RestoreFlags| {
            describe_errors(&build_restore(Some("r"), "velero", &f, now()).expect_err("refused"))
        };
        for (f, flag) in [
            (
                RestoreFlags {
                    for_shoot: Some("web".into()),
                    ..RestoreFlags::default()
                },
                "--for-shoot",
            ),
            (
                RestoreFlags {
                    for_shoot: Some("dev/web".into()),
                    ..from_backup("b")
                },
                "--for-shoot",
            ),
            (
                RestoreFlags {
                    for_shoot: Some("dev/web".into()),
                    scope: ScopeFlags {
                        include_namespaces: Some(vec!["x".into()]),
                        ..ScopeFlags::default()
                    },
                    ..RestoreFlags::default()
                },
                "--include-namespaces",
            ),
            (
                RestoreFlags {
                    from_seed: Some("eu-1".into()),
                    ..RestoreFlags::default()
                },
                "--from-seed",
            ),
            (
                RestoreFlags {
                    from_seed: Some("Not_A_Seed".into()),
                    ..from_backup("b")
                },
                "--from-seed",
            ),
        ] {
            let text = refused(f);
            assert!(text.contains(flag), "{flag}: {text}");
        }
        let ok = RestoreFlags {
            from_seed: Some("eu-1".into()),
            ..from_backup("b")
        };
        assert!(build_restore(Some("r"), "velero", &ok, now()).is_ok());
    }

    #[test]
    fn the_name_defaults_to_source_and_timestamp() {
        let r = build_restore(None, "velero", &from_backup("nightly"), now()).unwrap();
        assert_eq!(r.name_any(), "nightly-20260304050607");
        let f = RestoreFlags {
            from_schedule: Some("daily".into()),
            ..RestoreFlags::default()
        };
        let r = build_restore(None, "velero", &f, now()).unwrap();
        assert_eq!(r.name_any(), "daily-20260304050607");
        assert_eq!(r.spec.schedule_name.as_deref(), Some("daily"));
        assert_eq!(r.spec.backup_name, None);
    }

    #[test]
    fn every_flag_lands_in_its_field() {
        let f = RestoreFlags {
            scope: ScopeFlags {
                include_namespaces: Some(vec!["a".into(), "b".into()]),
                exclude_namespaces: vec!["c".into()],
                include_resources: vec!["configmaps".into(), "deployments.apps".into()],
                exclude_resources: vec!["secrets".into()],
                include_cluster_resources: Some(false),
                selector: Some("app=web".into()),
                labels: vec!["team=x".into()],
                ..ScopeFlags::default()
            },
            from_backup: Some("b1".into()),
            namespace_mappings: vec!["a:a-copy,b:b-copy".into(), "x:y".into()],
            existing_resource_policy: Some("update".into()),
            restore_volumes: Some(false),
            preserve_nodeports: Some(true),
            status_include_resources: vec!["widgets.example.com".into()],
            status_exclude_resources: vec!["pods".into()],
            ..RestoreFlags::default()
        };
        let w = wire(&build_restore(Some("r"), "ns", &f, now()).unwrap());
        assert_eq!(w["metadata"]["labels"], json!({"team": "x"}));
        assert_eq!(
            w["spec"],
            json!({
                "backupName": "b1", "hooks": {}, "itemOperationTimeout": "0s", "uploaderConfig": {},
                "includedNamespaces": ["a", "b"], "excludedNamespaces": ["c"],
                "includedResources": ["configmaps", "deployments.apps"],
                "excludedResources": ["secrets"], "includeClusterResources": false,
                "namespaceMapping": {"a": "a-copy", "b": "b-copy", "x": "y"},
                "existingResourcePolicy": "update", "restorePVs": false, "preserveNodePorts": true,
                "restoreStatus": {"includedResources": ["widgets.example.com"], "excludedResources": ["pods"]},
                "labelSelector": {"matchLabels": {"app": "web"}}
            })
        );
        let f = RestoreFlags {
            scope: ScopeFlags {
                or_selector: Some("a=1 or b=2".into()),
                ..ScopeFlags::default()
            },
            ..from_backup("b1")
        };
        let r = build_restore(Some("r"), "ns", &f, now()).unwrap();
        assert_eq!(r.spec.or_label_selectors.map(|v| v.len()), Some(2));
    }

    fn refused(f: &RestoreFlags, name: Option<&str>) -> String {
        describe_errors(&build_restore(name, "velero", f, now()).expect_err("refused"))
    }

    #[test]
    fn bad_flags_are_all_named() {
        let f = RestoreFlags {
            scope: ScopeFlags {
                selector: Some("a=1".into()),
                or_selector: Some("b=2".into()),
                labels: vec!["bad key=1".into()],
                include_namespaces: Some(vec!["x".into()]),
                exclude_namespaces: vec!["x".into()],
                ..ScopeFlags::default()
            },
            from_backup: Some("b".into()),
            from_schedule: Some("s".into()),
            existing_resource_policy: Some("replace".into()),
            restore_volumes: Some(true),
            namespace_mappings: vec!["a-b".into()],
            status_exclude_resources: vec!["pods".into()],
            ..RestoreFlags::default()
        };
        let errs = refused(&f, Some("Bad_Name"));
        for flag in [
            "NAME",
            "--from-schedule",
            "--existing-resource-policy",
            "--restore-volumes",
            "--namespace-mappings",
            "--or-selector",
            "--labels",
            "--status-exclude-resources",
            "--exclude-namespaces",
        ] {
            assert!(errs.contains(flag), "{flag} missing from {errs}");
        }
        assert!(errs.contains("does not restore volume data"), "{errs}");
        let none = refused(&RestoreFlags::default(), Some("r"));
        assert!(none.contains("--from-backup"), "{none}");
        let non_restorable = RestoreFlags {
            scope: ScopeFlags {
                include_resources: vec!["nodes".into()],
                ..ScopeFlags::default()
            },
            ..from_backup("b")
        };
        assert!(refused(&non_restorable, Some("r")).contains("--include-resources"));
    }

    #[test]
    fn namespace_mappings_parse_as_velero_s_map() {
        let m = parse_namespace_mappings(&["a:b, c:d".into(), "a:e".into()]).unwrap();
        assert_eq!(
            m,
            BTreeMap::from([("a".into(), "e".into()), ("c".into(), "d".into())])
        );
        for bad in ["a", "a:", ":b", "a:B", "a:b.c", "a:b:c"] {
            let e = parse_namespace_mappings(&[bad.into()]).expect_err(bad);
            assert_eq!(e.flag, "--namespace-mappings", "{bad}");
        }
        assert!(parse_namespace_mappings(&[]).unwrap().is_empty());
    }
}
