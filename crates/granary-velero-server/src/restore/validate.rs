//! A new Restore's validation, pure: the spec's own rules (field paths), the source
//! backup (by name, or the latest Completed backup of a schedule), its phase, and its
//! location's availability. The messages follow Velero's where Velero has one.

use granary_api::velero::{
    Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationPhase, Restore,
};

const LABEL_SCHEDULE_NAME: &str = "velero.io/schedule-name";

/// The backup a valid restore reads, and its location.
#[derive(Debug, Clone)]
pub struct Source {
    pub backup: Backup,
    pub location: BackupStorageLocation,
}

/// The newest Completed backup of schedule `schedule` (`--from-schedule`): labelled with
/// it, and never one read from a namespace owner's location (backup sync keeps no label
/// of theirs, and this holds should one appear anyway): a backup planted in a tenant's
/// bucket never stands for an administrator's schedule.
pub fn latest_of_schedule<'a>(
    schedule: &str,
    backups: &'a [Backup],
    locations: &[BackupStorageLocation],
) -> Option<&'a Backup> {
    newest_completed(backups, locations, |x| {
        x.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_SCHEDULE_NAME))
            .is_some_and(|v| v == schedule)
    })
}

/// The newest Completed backup `wanted` accepts, never one from a namespace owner's
/// location.
fn newest_completed<'a>(
    backups: &'a [Backup],
    locations: &[BackupStorageLocation],
    wanted: impl Fn(&Backup) -> bool,
) -> Option<&'a Backup> {
    let tenants: Vec<&str> = locations
        .iter()
        .filter(|l| crate::location::tenant_namespace(l).is_some())
        .filter_map(|l| l.metadata.name.as_deref())
        .collect();
    backups
        .iter()
        .filter(|x| {
            wanted(x)
                && phase(x) == Some(BackupPhase::Completed)
                && !x
                    .spec
                    .storage_location
                    .as_deref()
                    .is_some_and(|l| tenants.contains(&l))
        })
        .max_by_key(|x| {
            (
                x.status.as_ref().and_then(|st| st.start_timestamp),
                x.metadata.name.clone(),
            )
        })
}

/// The newest Completed backup that holds namespace `namespace` (`--for-shoot`: a shoot's
/// control-plane namespace): one that includes it by name or with `*` and does not
/// exclude it, from any location but a namespace owner's (as [`latest_of_schedule`]).
pub fn newest_of_namespace<'a>(
    namespace: &str,
    backups: &'a [Backup],
    locations: &[BackupStorageLocation],
) -> Option<&'a Backup> {
    newest_completed(backups, locations, |b| {
        let included = b.spec.included_namespaces.as_deref().unwrap_or_default();
        let excluded = b.spec.excluded_namespaces.as_deref().unwrap_or_default();
        (included.is_empty() || included.iter().any(|n| n == namespace || n == "*"))
            && !excluded.iter().any(|n| n == namespace)
    })
}

/// The backup stored as `stored` in location `location` (`--from-seed`: another seed's
/// location `seed-<name>`, whose backups are listed as `<seed>.<name>`), or why there is
/// none: naming where a backup of that name is, when it is elsewhere.
pub fn stored_in<'a>(
    backups: &'a [Backup],
    location: &str,
    stored: &str,
) -> Result<&'a Backup, String> {
    let at = |b: &&Backup| b.spec.storage_location.as_deref().unwrap_or_default() == location;
    let named = |b: &&Backup| b.stored_name() == stored;
    if let Some(b) = backups.iter().filter(at).find(named) {
        return Ok(b);
    }
    let elsewhere: Vec<String> = backups
        .iter()
        .filter(named)
        .map(|b| {
            format!(
                "{:?} is in location {:?}",
                b.metadata.name.as_deref().unwrap_or_default(),
                b.spec.storage_location.as_deref().unwrap_or_default()
            )
        })
        .collect();
    if elsewhere.is_empty() {
        Err(format!(
            "backup {stored:?} is not listed in location {location} (another seed's backups \
             are listed there once its prefix is synced)"
        ))
    } else {
        Err(format!(
            "backup {stored:?} is not in location {location}: {}",
            elsewhere.join(", ")
        ))
    }
}

/// Validates `restore` against the backups and locations of its namespace.
pub fn validate(
    restore: &Restore,
    backups: &[Backup],
    locations: &[BackupStorageLocation],
) -> Result<Source, Vec<String>> {
    let spec = &restore.spec;
    let mut errors: Vec<String> = spec
        .validate_at("spec")
        .iter()
        .map(ToString::to_string)
        .collect();
    if spec
        .hooks
        .as_ref()
        .is_some_and(|h| h.resources.as_ref().is_some_and(|r| !r.is_empty()))
    {
        errors.push(
            "spec.hooks: restore hooks are not supported by Granary; remove spec.hooks".into(),
        );
    }
    for (field, set) in [
        ("spec.resourceModifier", spec.resource_modifier.is_some()),
        ("spec.resourcePolicy", spec.resource_policy.is_some()),
    ] {
        if set {
            errors.push(format!("{field}: not supported by Granary; remove {field}"));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let backup = match (spec.backup_name.as_deref(), spec.schedule_name.as_deref()) {
        (Some(b), _) if !b.is_empty() => match backups
            .iter()
            .find(|x| x.metadata.name.as_deref() == Some(b))
        {
            Some(x) => x.clone(),
            None => {
                return Err(vec![format!(
                    "Error retrieving backup: backups.velero.io {b:?} not found"
                )]);
            }
        },
        (_, Some(s)) => match latest_of_schedule(s, backups, locations) {
            Some(x) => x.clone(),
            None => {
                return Err(vec![format!(
                    "No completed backups found for schedule {s:?}"
                )]);
            }
        },
        _ => unreachable_source(),
    };
    let name = backup.metadata.name.clone().unwrap_or_default();
    match phase(&backup) {
        Some(BackupPhase::Completed | BackupPhase::PartiallyFailed) => {}
        other => {
            return Err(vec![format!(
                "backup {name:?} is in phase {}; only a Completed or PartiallyFailed backup can be restored",
                other.map(|p| p.to_string()).unwrap_or_else(|| "New".into())
            )]);
        }
    }
    let location_name = backup.spec.storage_location.clone().unwrap_or_default();
    let Some(location) = locations
        .iter()
        .find(|l| l.metadata.name.as_deref() == Some(location_name.as_str()))
    else {
        return Err(vec![format!(
            "Error getting backup storage location: backupstoragelocations.velero.io {location_name:?} not found"
        )]);
    };
    let available = location.status.as_ref().and_then(|s| s.phase)
        == Some(BackupStorageLocationPhase::Available);
    if !available {
        return Err(vec![format!(
            "backup storage location {location_name:?} of backup {name:?} is unavailable"
        )]);
    }
    Ok(Source {
        backup,
        location: location.clone(),
    })
}

/// `validate_at` refuses a spec with neither source, so this is never reached.
fn unreachable_source() -> ! {
    unreachable!("the spec's validation requires backupName or scheduleName")
}

fn phase(b: &Backup) -> Option<BackupPhase> {
    b.status.as_ref().and_then(|s| s.phase)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use granary_api::velero::{BackupSpec, BackupStatus, BackupStorageLocationStatus, RestoreSpec};

    fn backup(name: &str, phase: BackupPhase, schedule: Option<&str>, minute: u32) -> Backup {
        let mut b = Backup::new(
            name,
            BackupSpec {
                storage_location: Some("default".into()),
                ..Default::default()
            },
        );
        if let Some(s) = schedule {
            b.metadata.labels = Some([(LABEL_SCHEDULE_NAME.to_string(), s.to_string())].into());
        }
        b.status = Some(BackupStatus {
            phase: Some(phase),
            start_timestamp: Some(Utc.with_ymd_and_hms(2026, 1, 1, 0, minute, 0).unwrap()),
            ..Default::default()
        });
        b
    }

    fn location(phase: BackupStorageLocationPhase) -> BackupStorageLocation {
        let mut l = BackupStorageLocation::new("default", Default::default());
        l.status = Some(BackupStorageLocationStatus {
            phase: Some(phase),
            ..Default::default()
        });
        l
    }

    fn restore(spec: RestoreSpec) -> Restore {
        Restore::new("r", spec)
    }

    fn from_backup(b: &str) -> RestoreSpec {
        RestoreSpec {
            backup_name: Some(b.into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_newest_completed_backup_holding_a_shoots_namespace_is_chosen() {
        let cp = "shoot--dev--web";
        let with = |name: &str, phase, minute, included: &[&str], excluded: &[&str]| {
            let mut b = backup(name, phase, None, minute);
            b.spec.included_namespaces = Some(included.iter().map(|s| s.to_string()).collect());
            b.spec.excluded_namespaces = Some(excluded.iter().map(|s| s.to_string()).collect());
            b
        };
        let backups = [
            with("old", BackupPhase::Completed, 1, &[cp], &[]),
            with("whole", BackupPhase::Completed, 2, &["*"], &[]),
            with(
                "other",
                BackupPhase::Completed,
                5,
                &["shoot--dev--api"],
                &[],
            ),
            with("failed", BackupPhase::PartiallyFailed, 6, &[cp], &[]),
            with("excluded", BackupPhase::Completed, 7, &["*"], &[cp]),
        ];
        let loc = [location(BackupStorageLocationPhase::Available)];
        let pick =
            |b: &[Backup]| newest_of_namespace(cp, b, &loc).and_then(|b| b.metadata.name.clone());
        assert_eq!(pick(&backups).as_deref(), Some("whole"));
        assert_eq!(pick(&backups[..1]).as_deref(), Some("old"));
        assert_eq!(pick(&backups[2..]), None);
    }

    #[test]
    fn another_seeds_backup_is_found_by_its_stored_name_in_its_location() {
        let mut own = backup("daily-1", BackupPhase::Completed, None, 0);
        own.spec.storage_location = Some("default".into());
        let mut theirs = backup("eu-1.daily-1", BackupPhase::Completed, None, 0);
        theirs.spec.storage_location = Some("seed-eu-1".into());
        theirs.metadata.annotations = Some(
            [(
                granary_api::velero::STORED_NAME_ANNOTATION.to_string(),
                "daily-1".to_string(),
            )]
            .into(),
        );
        let all = [own, theirs];
        let found = stored_in(&all, "seed-eu-1", "daily-1").expect("found");
        assert_eq!(found.metadata.name.as_deref(), Some("eu-1.daily-1"));
        let found = stored_in(&all, "default", "daily-1").expect("found");
        assert_eq!(found.metadata.name.as_deref(), Some("daily-1"));
        let e = stored_in(&all, "seed-eu-2", "daily-1").expect_err("elsewhere");
        assert!(
            e.contains(r#""daily-1" is in location "default""#)
                && e.contains(r#""eu-1.daily-1" is in location "seed-eu-1""#),
            "{e}"
        );
        let e = stored_in(&all, "seed-eu-1", "weekly").expect_err("nowhere");
        assert!(e.contains("not listed in location seed-eu-1"), "{e}");
    }

    #[test]
    fn valid_restore_finds_backup_and_location() {
        let s = validate(
            &restore(from_backup("b1")),
            &[backup("b1", BackupPhase::PartiallyFailed, None, 0)],
            &[location(BackupStorageLocationPhase::Available)],
        )
        .expect("valid");
        assert_eq!(s.backup.metadata.name.as_deref(), Some("b1"));
    }

    #[test]
    fn schedule_picks_latest_completed() {
        let backups = [
            backup("s-1", BackupPhase::Completed, Some("s"), 1),
            backup("s-3", BackupPhase::Failed, Some("s"), 3),
            backup("s-2", BackupPhase::Completed, Some("s"), 2),
            backup("t-9", BackupPhase::Completed, Some("t"), 9),
        ];
        let spec = RestoreSpec {
            schedule_name: Some("s".into()),
            ..Default::default()
        };
        let s = validate(
            &restore(spec),
            &backups,
            &[location(BackupStorageLocationPhase::Available)],
        )
        .expect("valid");
        assert_eq!(s.backup.metadata.name.as_deref(), Some("s-2"));
        let none = RestoreSpec {
            schedule_name: Some("u".into()),
            ..Default::default()
        };
        let e = validate(&restore(none), &backups, &[]).unwrap_err();
        assert_eq!(
            e,
            vec!["No completed backups found for schedule \"u\"".to_string()]
        );
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let loc = [location(BackupStorageLocationPhase::Available)];
        let e = validate(&restore(RestoreSpec::default()), &[], &loc).unwrap_err();
        assert!(e[0].starts_with("spec.backupName"), "{e:?}");
        let e = validate(&restore(from_backup("nope")), &[], &loc).unwrap_err();
        assert_eq!(
            e,
            vec!["Error retrieving backup: backups.velero.io \"nope\" not found".to_string()]
        );
        let e = validate(
            &restore(from_backup("b")),
            &[backup("b", BackupPhase::InProgress, None, 0)],
            &loc,
        )
        .unwrap_err();
        assert!(e[0].contains("in phase InProgress"), "{e:?}");
        let e = validate(
            &restore(from_backup("b")),
            &[backup("b", BackupPhase::Completed, None, 0)],
            &[location(BackupStorageLocationPhase::Unavailable)],
        )
        .unwrap_err();
        assert!(e[0].contains("unavailable"), "{e:?}");
        let e = validate(
            &restore(from_backup("b")),
            &[backup("b", BackupPhase::Completed, None, 0)],
            &[],
        )
        .unwrap_err();
        assert!(e[0].contains("not found"), "{e:?}");
        let mut spec = from_backup("b");
        spec.existing_resource_policy = Some("replace".into());
        spec.resource_modifier = Some(k8s_openapi::api::core::v1::TypedLocalObjectReference {
            api_group: None,
            kind: "ConfigMap".into(),
            name: "modifiers".into(),
        });
        spec.hooks = Some(granary_api::velero::RestoreHooks {
            resources: Some(vec![granary_api::velero::RestoreResourceHookSpec {
                name: "h".into(),
                ..Default::default()
            }]),
        });
        let e = validate(&restore(spec), &[], &loc).unwrap_err();
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e.iter().any(|m| m.starts_with("spec.hooks")));
        assert!(e.iter().any(|m| m.starts_with("spec.resourceModifier")));
        assert!(
            e.iter()
                .any(|m| m.contains("Invalid ExistingResourcePolicy: replace"))
        );
    }
}
