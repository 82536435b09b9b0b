//! `granary backup-location` flags → the BackupStorageLocation (or the merge patch)
//! velero's CLI would send (`pkg/cmd/cli/backuplocation/create.go`, `set.go`), and the
//! `get` table. Pure; every error names its flag.

use k8s_openapi::api::core::v1::SecretKeySelector;
use kube::api::ObjectMeta;
use serde_json::{Map, Value, json};

use super::flags::{self, FlagError, take};
use super::output::{go_time, table};
use granary_api::velero::{
    BackupStorageLocation, BackupStorageLocationAccessMode, BackupStorageLocationPhase,
    BackupStorageLocationSpec, ObjectStorageLocation,
};

/// The flags of `granary backup-location create`, unparsed; the `///` lines on the
/// fields are their help.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct LocationFlags {
    /// Object-store provider: aws, azure, gcp, local (or velero.io/<name>).
    #[arg(long)]
    pub provider: Option<String>,
    /// Bucket holding the backups.
    #[arg(long)]
    pub bucket: Option<String>,
    /// Prefix inside the bucket.
    #[arg(long)]
    pub prefix: Option<String>,
    // Repeatable.
    /// Provider settings, k=v,... (region, s3Url, s3ForcePathStyle, ...).
    #[arg(long, value_name = "K=V,...")]
    pub config: Vec<String>,
    /// The credentials Secret key, secret-name=key.
    #[arg(long, value_name = "SECRET=KEY")]
    pub credential: Option<String>,
    /// Make it the default location (clears the old default).
    #[arg(long)]
    pub default: bool,
    /// ReadWrite (default) or ReadOnly.
    #[arg(long)]
    pub access_mode: Option<String>,
    /// How often the location is validated (Go duration; 0 disables).
    #[arg(long)]
    pub validation_frequency: Option<String>,
    /// How often backups are synced from the store (Go duration; 0 disables).
    #[arg(long)]
    pub backup_sync_period: Option<String>,
    /// Labels for the location, k=v,...
    #[arg(long, value_name = "K=V,...")]
    pub labels: Vec<String>,
}

/// The flags of `granary backup-location set`, unparsed; unset ones change nothing.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct LocationSetFlags {
    /// Make it the default location (`--default=false` to stop being it).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub default: Option<bool>,
    /// The credentials Secret key, secret-name=key.
    #[arg(long, value_name = "SECRET=KEY")]
    pub credential: Option<String>,
    /// ReadWrite or ReadOnly.
    #[arg(long)]
    pub access_mode: Option<String>,
    /// How often the location is validated (Go duration; 0 disables).
    #[arg(long)]
    pub validation_frequency: Option<String>,
    /// How often backups are synced from the store (Go duration; 0 disables).
    #[arg(long)]
    pub backup_sync_period: Option<String>,
}

fn access_mode(text: &str) -> Result<BackupStorageLocationAccessMode, FlagError> {
    match text {
        "ReadWrite" => Ok(BackupStorageLocationAccessMode::ReadWrite),
        "ReadOnly" => Ok(BackupStorageLocationAccessMode::ReadOnly),
        _ => Err(FlagError::new(
            "--access-mode",
            text,
            "must be ReadWrite or ReadOnly",
        )),
    }
}

fn credential(text: &str) -> Result<SecretKeySelector, FlagError> {
    let (name, key) = flags::parse_credential("--credential", text)?;
    Ok(SecretKeySelector {
        name,
        key,
        optional: None,
    })
}

/// The flag that sets a BSL spec field, for validation messages.
fn flag_of(path: &str) -> String {
    let field = path.trim_start_matches("spec.");
    let flag = match field.split(['.', '[']).next().unwrap_or(field) {
        "provider" => "--provider",
        "objectStorage" if field.contains("prefix") => "--prefix",
        "objectStorage" => "--bucket",
        "credential" => "--credential",
        "validationFrequency" => "--validation-frequency",
        "backupSyncPeriod" => "--backup-sync-period",
        _ => path,
    };
    flag.to_string()
}

/// The location `name` in `namespace` that velero's CLI would create, or every problem.
pub fn build_location(
    name: &str,
    namespace: &str,
    f: &LocationFlags,
) -> Result<BackupStorageLocation, Vec<FlagError>> {
    let mut errs = Vec::new();
    if !granary_api::names::is_dns1123_subdomain(name) {
        errs.push(FlagError::new(
            "NAME",
            name,
            "not a valid object name (lower-case letters, digits, '-', '.')",
        ));
    }
    let provider = f.provider.clone().unwrap_or_default();
    let bucket = f.bucket.clone().unwrap_or_default();
    let config = take(&mut errs, flags::parse_map("--config", &f.config)).unwrap_or_default();
    let labels = take(&mut errs, flags::parse_labels("--labels", &f.labels)).unwrap_or_default();
    let cred = f
        .credential
        .as_deref()
        .and_then(|c| take(&mut errs, credential(c)));
    let mode = take(
        &mut errs,
        access_mode(f.access_mode.as_deref().unwrap_or("ReadWrite")),
    );
    let validation = f.validation_frequency.as_deref().and_then(|v| {
        take(
            &mut errs,
            flags::parse_go_duration("--validation-frequency", v),
        )
    });
    let sync = f.backup_sync_period.as_deref().and_then(|v| {
        take(
            &mut errs,
            flags::parse_go_duration("--backup-sync-period", v),
        )
    });
    let spec = BackupStorageLocationSpec {
        provider,
        config: (!config.is_empty()).then_some(config),
        credential: cred,
        object_storage: ObjectStorageLocation {
            bucket,
            prefix: f.prefix.clone().filter(|p| !p.is_empty()),
            ..ObjectStorageLocation::default()
        },
        default: f.default.then_some(true),
        access_mode: mode,
        backup_sync_period: sync,
        validation_frequency: validation,
    };
    for e in spec.validate_at("spec") {
        errs.push(FlagError::new(&flag_of(&e.path), "", e.message));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let mut bsl = BackupStorageLocation::new(name, spec);
    bsl.metadata = ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        labels: (!labels.is_empty()).then_some(labels),
        ..ObjectMeta::default()
    };
    Ok(bsl)
}

/// The JSON merge patch of `backup-location set`, or every problem with its flags.
pub fn set_patch(f: &LocationSetFlags) -> Result<Value, Vec<FlagError>> {
    let mut errs = Vec::new();
    let mut spec = Map::new();
    if let Some(d) = f.default {
        spec.insert("default".into(), json!(d));
    }
    if let Some(c) = &f.credential {
        match credential(c) {
            Ok(sel) => {
                spec.insert(
                    "credential".into(),
                    json!({"name": sel.name, "key": sel.key}),
                );
            }
            Err(e) => errs.push(e),
        }
    }
    if let Some(m) = &f.access_mode {
        match access_mode(m) {
            Ok(mode) => {
                spec.insert(
                    "accessMode".into(),
                    serde_json::to_value(mode).unwrap_or_default(),
                );
            }
            Err(e) => errs.push(e),
        }
    }
    for (flag, field, value) in [
        (
            "--validation-frequency",
            "validationFrequency",
            &f.validation_frequency,
        ),
        (
            "--backup-sync-period",
            "backupSyncPeriod",
            &f.backup_sync_period,
        ),
    ] {
        if let Some(v) = value {
            match flags::parse_go_duration(flag, v) {
                Ok(d) => {
                    spec.insert(field.into(), json!(d.as_str()));
                }
                Err(e) => errs.push(e),
            }
        }
    }
    if errs.is_empty() && spec.is_empty() {
        errs.push(FlagError::new(
            "flags",
            "",
            "nothing to set: give --default, --credential, --access-mode, --validation-frequency or --backup-sync-period",
        ));
    }
    if errs.is_empty() {
        Ok(json!({ "spec": spec }))
    } else {
        Err(errs)
    }
}

/// `granary backup-location get`: NAME PROVIDER BUCKET/PREFIX PHASE LAST VALIDATED
/// ACCESS MODE DEFAULT.
pub fn locations_table(locations: &[BackupStorageLocation]) -> String {
    let mut rows: Vec<Vec<String>> = locations
        .iter()
        .map(|l| {
            let os = &l.spec.object_storage;
            let mut bucket = os.bucket.clone();
            if let Some(p) = os.prefix.as_deref().filter(|p| !p.is_empty()) {
                bucket = format!("{bucket}/{p}");
            }
            let status = l.status.clone().unwrap_or_default();
            let phase = match status.phase {
                Some(BackupStorageLocationPhase::Available) => "Available",
                Some(BackupStorageLocationPhase::Unavailable) => "Unavailable",
                None => "Unknown",
            };
            let mode = match l.spec.effective_access_mode() {
                BackupStorageLocationAccessMode::ReadWrite => "ReadWrite",
                BackupStorageLocationAccessMode::ReadOnly => "ReadOnly",
            };
            // A seed's default location without a bucket yet has a placeholder
            // provider and bucket: none is shown, its message says why.
            let placeholder = l.spec.provider == granary_seed::PROVIDER_NONE;
            let (provider, bucket) = if placeholder {
                ("-".to_string(), "-".to_string())
            } else {
                (l.spec.provider.clone(), bucket)
            };
            // Why a location cannot be used (velero keeps it in status.message only).
            let message = match status.phase {
                Some(BackupStorageLocationPhase::Unavailable) => {
                    status.message.clone().unwrap_or_default()
                }
                _ => String::new(),
            };
            vec![
                l.metadata.name.clone().unwrap_or_default(),
                provider,
                bucket,
                phase.to_string(),
                status
                    .last_validation_time
                    .map(|t| go_time(&t))
                    .unwrap_or_default(),
                mode.to_string(),
                if l.spec.default == Some(true) {
                    "true".into()
                } else {
                    String::new()
                },
                message,
            ]
        })
        .collect();
    let mut headers = vec![
        "NAME",
        "PROVIDER",
        "BUCKET/PREFIX",
        "PHASE",
        "LAST VALIDATED",
        "ACCESS MODE",
        "DEFAULT",
    ];
    // The MESSAGE column only when a location has one: velero's columns otherwise.
    if rows.iter().any(|r| !r[7].is_empty()) {
        headers.push("MESSAGE");
    } else {
        for r in &mut rows {
            r.pop();
        }
    }
    table(&headers, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use granary_api::velero::BackupStorageLocationStatus;

    #[test]
    fn create_builds_what_velero_sends() {
        let f = LocationFlags {
            provider: Some("aws".into()),
            bucket: Some("b1".into()),
            prefix: Some("velero/seed".into()),
            config: vec!["region=eu-1".into(), "s3ForcePathStyle=true".into()],
            credential: Some("cloud-credentials=cloud".into()),
            default: true,
            validation_frequency: Some("90s".into()),
            ..LocationFlags::default()
        };
        let bsl = build_location("primary", "velero", &f).unwrap();
        assert_eq!(
            serde_json::to_value(&bsl).unwrap(),
            json!({
                "apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
                "metadata": {"name": "primary", "namespace": "velero"},
                "spec": {
                    "provider": "aws",
                    "objectStorage": {"bucket": "b1", "prefix": "velero/seed"},
                    "config": {"region": "eu-1", "s3ForcePathStyle": "true"},
                    "credential": {"name": "cloud-credentials", "key": "cloud"},
                    "default": true, "accessMode": "ReadWrite", "validationFrequency": "1m30s"
                }
            })
        );
    }

    #[test]
    fn bad_create_flags_are_named() {
        let f = LocationFlags {
            bucket: Some("a/b".into()),
            access_mode: Some("readonly".into()),
            credential: Some("x=y,z=w".into()),
            ..LocationFlags::default()
        };
        let errs = build_location("p", "velero", &f).unwrap_err();
        let text = super::super::backup_spec::describe_errors(&errs);
        for flag in ["--provider", "--access-mode", "--credential"] {
            assert!(text.contains(flag), "{flag} missing: {text}");
        }
        let f = LocationFlags {
            provider: Some("aws".into()),
            bucket: Some("a/b".into()),
            ..LocationFlags::default()
        };
        let text = super::super::backup_spec::describe_errors(
            &build_location("p", "velero", &f).unwrap_err(),
        );
        assert!(text.contains("--bucket"), "{text}");
    }

    #[test]
    fn set_patches_only_what_is_given() {
        let p = set_patch(&LocationSetFlags {
            default: Some(true),
            access_mode: Some("ReadOnly".into()),
            ..LocationSetFlags::default()
        })
        .unwrap();
        assert_eq!(
            p,
            json!({"spec": {"default": true, "accessMode": "ReadOnly"}})
        );
        assert!(set_patch(&LocationSetFlags::default()).is_err());
        let errs = set_patch(&LocationSetFlags {
            validation_frequency: Some("soon".into()),
            ..LocationSetFlags::default()
        })
        .unwrap_err();
        assert_eq!(errs[0].flag, "--validation-frequency");
    }

    #[test]
    fn table_has_velero_columns() {
        let mut bsl = build_location(
            "default",
            "velero",
            &LocationFlags {
                provider: Some("local".into()),
                bucket: Some("b".into()),
                prefix: Some("p".into()),
                default: true,
                ..LocationFlags::default()
            },
        )
        .unwrap();
        bsl.status = Some(BackupStorageLocationStatus {
            phase: Some(BackupStorageLocationPhase::Available),
            last_validation_time: Some(chrono::Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()),
            ..BackupStorageLocationStatus::default()
        });
        let t = locations_table(&[bsl]);
        assert_eq!(
            t,
            "NAME      PROVIDER   BUCKET/PREFIX   PHASE       LAST VALIDATED                  ACCESS MODE   DEFAULT\n\
             default   local      b/p             Available   2026-01-01 00:00:00 +0000 UTC   ReadWrite     true\n"
        );
    }

    #[test]
    fn an_unavailable_location_says_why_and_no_placeholder_shows() {
        let mut broken = build_location(
            "archive",
            "velero",
            &LocationFlags {
                provider: Some("aws".into()),
                bucket: Some("b".into()),
                ..LocationFlags::default()
            },
        )
        .unwrap();
        broken.status = Some(BackupStorageLocationStatus {
            phase: Some(BackupStorageLocationPhase::Unavailable),
            message: Some("spec.objectStorage.prefix: \"../x\" has a \"..\" segment".into()),
            ..BackupStorageLocationStatus::default()
        });
        let mut waiting = broken.clone();
        waiting.metadata.name = Some("default".into());
        waiting.spec.provider = granary_seed::PROVIDER_NONE.into();
        waiting.status.as_mut().unwrap().message = Some("seed a has no bucket yet".into());
        let t = locations_table(&[broken, waiting]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].ends_with("MESSAGE"), "{t}");
        assert!(lines[1].ends_with("has a \"..\" segment"), "{t}");
        assert!(
            lines[2].starts_with("default   -  ") && lines[2].ends_with("seed a has no bucket yet"),
            "{t}"
        );
        assert!(!t.contains("granary.gardener.cloud/none"), "{t}");
    }
}
