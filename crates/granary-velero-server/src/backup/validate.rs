//! The spec checks of Velero's `prepareBackupRequest` that need no cluster, with
//! Velero's messages (they become `status.validationErrors` of a `FailedValidation`
//! backup), plus Granary's refusals of what it does not do.
//!
//! Refused, never silently ignored (each message names the field):
//! - exec hooks (`spec.hooks.resources[].pre` / `.post`): a pre hook usually quiesces an
//!   application so its data is consistent; running the backup without it would give a
//!   backup that looks fine and is not.
//! - `spec.snapshotVolumes: true`, `spec.defaultVolumesToFsBackup: true` (and its
//!   deprecated spelling `defaultVolumesToRestic: true`), `spec.snapshotMoveData: true`:
//!   each explicitly asks for volume data, which Granary does not take; a Velero user
//!   would otherwise find a `Completed` backup without the data they asked for.
//! - `spec.resourcePolicy`: Velero's resource policies can change what is included
//!   (include/exclude policies); Granary does not read them.
//!
//! Unset or `false` volume fields are fine: Granary backs up the objects (PVCs, PVs)
//! without their data, as Velero does when no snapshotter is configured.

use std::collections::BTreeSet;

use granary_api::velero::Backup;

/// Velero's message for old- and new-style resource filters in one backup.
pub const MIXED_FILTERS: &str = "include-resources, exclude-resources and include-cluster-resources are old filter parameters.\n\
include-cluster-scoped-resources, exclude-cluster-scoped-resources, include-namespace-scoped-resources and exclude-namespace-scoped-resources are new filter parameters.\n\
They cannot be used together";

/// Velero's message for `labelSelector` with `orLabelSelectors`.
pub const BOTH_SELECTORS: &str = "encountered labelSelector as well as orLabelSelectors in backup spec, only one can be specified";

fn list(v: &Option<Vec<String>>) -> Vec<String> {
    v.clone().unwrap_or_default()
}

/// `collections.ValidateIncludesExcludes`.
fn includes_excludes(includes: &[String], excludes: &[String]) -> Vec<String> {
    let inc: BTreeSet<&str> = includes.iter().map(String::as_str).collect();
    let exc: BTreeSet<&str> = excludes.iter().map(String::as_str).collect();
    let mut errs = Vec::new();
    if inc.len() > 1 && inc.contains("*") {
        errs.push(
            "includes list must either contain '*' only, or a non-empty list of items".into(),
        );
    }
    if exc.contains("*") {
        errs.push("excludes list cannot contain '*'".into());
    }
    for item in &exc {
        if inc.contains(item) {
            errs.push(format!(
                "excludes list cannot contain an item in the includes list: {item}"
            ));
        }
    }
    errs
}

/// `collections.ValidateScopedIncludesExcludes`.
fn scoped_includes_excludes(includes: &[String], excludes: &[String]) -> Vec<String> {
    let inc: BTreeSet<&str> = includes.iter().map(String::as_str).collect();
    let exc: BTreeSet<&str> = excludes.iter().map(String::as_str).collect();
    let mut errs = Vec::new();
    if inc.len() > 1 && inc.contains("*") {
        errs.push(
            "includes list must either contain '*' only, or a non-empty list of items".into(),
        );
    }
    if exc.len() > 1 && exc.contains("*") {
        errs.push(
            "excludes list must either contain '*' only, or a non-empty list of items".into(),
        );
    }
    if !inc.is_empty() && exc.contains("*") {
        errs.push("when exclude is '*', include cannot have value".into());
    }
    for item in &exc {
        if inc.contains(item) {
            errs.push(format!(
                "excludes list cannot contain an item in the includes list: {item}"
            ));
        }
    }
    errs
}

/// Kubernetes' namespace-name check with Velero's wildcard allowance (`*` → `x`).
fn namespace_name(ns: &str) -> Vec<String> {
    if ns.is_empty() {
        return Vec::new();
    }
    let name = ns.replace('*', "x");
    let mut errs = Vec::new();
    if name.len() > 63 {
        errs.push(format!(
            "invalid namespace {ns:?}: must be no more than 63 characters"
        ));
    }
    let b = name.as_bytes();
    let ok = b
        .iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric);
    if !ok {
        errs.push(format!(
            "invalid namespace {ns:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        ));
    }
    errs
}

/// Every validation message for `backup`'s spec, in Velero's order, then Granary's
/// refusals. Empty when the backup may run.
pub fn validation_errors(backup: &Backup) -> Vec<String> {
    let spec = &backup.spec;
    let mut errs = Vec::new();
    let old = spec.uses_old_resource_filters();
    if old && !spec.new_resource_filters_set().is_empty() {
        errs.push(MIXED_FILTERS.to_owned());
    }
    if old || spec.new_resource_filters_set().is_empty() {
        for e in includes_excludes(
            &list(&spec.included_resources),
            &list(&spec.excluded_resources),
        ) {
            errs.push(format!("Invalid included/excluded resource lists: {e}"));
        }
    } else {
        for e in scoped_includes_excludes(
            &list(&spec.included_cluster_scoped_resources),
            &list(&spec.excluded_cluster_scoped_resources),
        ) {
            errs.push(format!(
                "Invalid cluster-scoped included/excluded resource lists: {e}"
            ));
        }
        for e in scoped_includes_excludes(
            &list(&spec.included_namespace_scoped_resources),
            &list(&spec.excluded_namespace_scoped_resources),
        ) {
            errs.push(format!(
                "Invalid namespace-scoped included/excluded resource lists: {e}"
            ));
        }
    }
    let (inc_ns, exc_ns) = (
        list(&spec.included_namespaces),
        list(&spec.excluded_namespaces),
    );
    let mut ns_errs = includes_excludes(&inc_ns, &exc_ns);
    let names: BTreeSet<&String> = inc_ns.iter().chain(exc_ns.iter()).collect();
    ns_errs.extend(names.into_iter().flat_map(|n| namespace_name(n)));
    for e in ns_errs {
        errs.push(format!("Invalid included/excluded namespace lists: {e}"));
    }
    if spec.or_label_selectors.is_some() && spec.label_selector.is_some() {
        errs.push(BOTH_SELECTORS.to_owned());
    }
    errs.extend(out_of_scope(backup));
    if backup
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(granary_api::velero::STORED_NAME_ANNOTATION))
    {
        // Readers would look for its files under that name, not where it is written.
        errs.push(format!(
            "metadata.annotations[{}]: set by backup sync on another seed's backups only; \
             remove it",
            granary_api::velero::STORED_NAME_ANNOTATION
        ));
    }
    errs
}

/// Granary's refusals (module docs).
fn out_of_scope(backup: &Backup) -> Vec<String> {
    let spec = &backup.spec;
    let mut errs = Vec::new();
    let hooks = spec.hooks.as_ref().and_then(|h| h.resources.as_ref());
    for (i, hook) in hooks.into_iter().flatten().enumerate() {
        for (field, list) in [("pre", &hook.pre), ("post", &hook.post)] {
            if list.as_ref().is_some_and(|l| !l.is_empty()) {
                errs.push(format!(
                    "spec.hooks.resources[{i}].{field}: exec backup hooks are not supported by Granary; remove them or use Velero for this backup"
                ));
            }
        }
    }
    let volume_fields = [
        ("snapshotVolumes", spec.snapshot_volumes, "volume snapshots"),
        (
            "defaultVolumesToFsBackup",
            spec.default_volumes_to_fs_backup,
            "file-system volume backup",
        ),
        (
            "defaultVolumesToRestic",
            spec.default_volumes_to_restic,
            "file-system volume backup",
        ),
        (
            "snapshotMoveData",
            spec.snapshot_move_data,
            "snapshot data movement",
        ),
    ];
    for (field, value, what) in volume_fields {
        if value == Some(true) {
            errs.push(format!(
                "spec.{field}: {what} is not supported by Granary, which backs up objects only; set it to false or leave it unset"
            ));
        }
    }
    if spec.resource_policy.is_some() {
        errs.push(
            "spec.resourcePolicy: resource policies are not supported by Granary; remove the reference"
                .to_owned(),
        );
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::velero::{
        BackupHooks, BackupResourceHook, BackupResourceHookSpec, BackupSpec, ExecHook,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn backup(spec: BackupSpec) -> Backup {
        Backup::new("b", spec)
    }

    fn s(items: &[&str]) -> Option<Vec<String>> {
        Some(items.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn a_new_backup_never_names_other_files() {
        let mut b = backup(BackupSpec::default());
        b.metadata.annotations = Some(
            [(
                granary_api::velero::STORED_NAME_ANNOTATION.to_string(),
                "other".to_string(),
            )]
            .into(),
        );
        let errs = validation_errors(&b);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].contains("granary.gardener.cloud/stored-name"));
    }

    #[test]
    fn a_plain_backup_is_valid() {
        assert!(validation_errors(&backup(BackupSpec::default())).is_empty());
        assert!(
            validation_errors(&backup(BackupSpec {
                included_namespaces: s(&["app-*", "db"]),
                snapshot_volumes: Some(false),
                ..Default::default()
            }))
            .is_empty()
        );
    }

    #[test]
    fn velero_messages() {
        let errs = validation_errors(&backup(BackupSpec {
            included_resources: s(&["configmaps"]),
            included_cluster_scoped_resources: s(&["persistentvolumes"]),
            label_selector: Some(LabelSelector::default()),
            or_label_selectors: Some(vec![LabelSelector::default()]),
            ..Default::default()
        }));
        assert_eq!(
            errs,
            vec![MIXED_FILTERS.to_owned(), BOTH_SELECTORS.to_owned()]
        );

        let errs = validation_errors(&backup(BackupSpec {
            included_resources: s(&["*", "pods"]),
            excluded_resources: s(&["pods"]),
            included_namespaces: s(&["Bad_NS"]),
            excluded_namespaces: s(&["*"]),
            ..Default::default()
        }));
        assert_eq!(
            errs[0],
            "Invalid included/excluded resource lists: includes list must either contain '*' only, or a non-empty list of items"
        );
        assert_eq!(
            errs[1],
            "Invalid included/excluded resource lists: excludes list cannot contain an item in the includes list: pods"
        );
        assert_eq!(
            errs[2],
            "Invalid included/excluded namespace lists: excludes list cannot contain '*'"
        );
        assert!(errs[3].starts_with("Invalid included/excluded namespace lists: invalid namespace \"Bad_NS\": a lowercase RFC 1123 label"), "{}", errs[3]);
        assert_eq!(errs.len(), 4);

        let errs = validation_errors(&backup(BackupSpec {
            included_namespace_scoped_resources: s(&["pods"]),
            excluded_namespace_scoped_resources: s(&["*"]),
            ..Default::default()
        }));
        assert_eq!(errs, vec!["Invalid namespace-scoped included/excluded resource lists: when exclude is '*', include cannot have value".to_owned()]);
    }

    #[test]
    fn out_of_scope_features_are_refused_by_field() {
        let hook = BackupResourceHookSpec {
            name: "freeze".into(),
            pre: Some(vec![BackupResourceHook {
                exec: ExecHook {
                    command: vec!["fsfreeze".into()],
                    ..Default::default()
                },
            }]),
            ..Default::default()
        };
        let errs = validation_errors(&backup(BackupSpec {
            hooks: Some(BackupHooks {
                resources: Some(vec![hook]),
            }),
            snapshot_volumes: Some(true),
            default_volumes_to_fs_backup: Some(true),
            snapshot_move_data: Some(true),
            ..Default::default()
        }));
        let fields: Vec<&str> = errs
            .iter()
            .map(|e| e.split(':').next().unwrap_or(""))
            .collect();
        assert_eq!(
            fields,
            [
                "spec.hooks.resources[0].pre",
                "spec.snapshotVolumes",
                "spec.defaultVolumesToFsBackup",
                "spec.snapshotMoveData"
            ]
        );
        // A hook spec without exec hooks (name and filters only) runs nothing: fine.
        let empty_hook = BackupResourceHookSpec {
            name: "nothing".into(),
            ..Default::default()
        };
        assert!(
            validation_errors(&backup(BackupSpec {
                hooks: Some(BackupHooks {
                    resources: Some(vec![empty_hook])
                }),
                ..Default::default()
            }))
            .is_empty()
        );
    }
}
