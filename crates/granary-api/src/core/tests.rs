//! Round trips of upstream-shaped objects, validation rules and helpers of the
//! `core.gardener.cloud` kinds.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::*;
use crate::common::{ConditionStatus, ErrorCode, LastOperationState, ObjectReference};

/// Parses `yaml` into `T` and back to JSON, and compares with the YAML read as plain
/// JSON: nothing lost, renamed or added.
pub(crate) fn assert_round_trip<T: Serialize + DeserializeOwned>(yaml: &str) -> T {
    let typed: T = serde_saphyr::from_str(yaml).expect("the fixture parses into the type");
    let expected: serde_json::Value =
        serde_saphyr::from_str(yaml).expect("the fixture parses as plain data");
    let actual = serde_json::to_value(&typed).expect("the type serializes");
    assert_eq!(
        actual,
        expected,
        "round trip changed the object:\n{}",
        serde_json::to_string_pretty(&actual).unwrap_or_default()
    );
    typed
}

fn messages(errors: &[crate::common::FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn secret_ref() -> ObjectReference {
    ObjectReference {
        api_version: "v1".into(),
        kind: "Secret".into(),
        name: "backup".into(),
        namespace: "garden".into(),
        ..Default::default()
    }
}

#[test]
fn crds_are_structural_and_named() {
    let crds = crds();
    let names: Vec<_> = crds
        .iter()
        .map(|crd| crd.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        [
            "cloudprofiles.core.gardener.cloud",
            "seeds.core.gardener.cloud",
            "shoots.core.gardener.cloud",
            "backupbuckets.core.gardener.cloud",
            "backupentries.core.gardener.cloud",
        ]
    );
    for crd in &crds {
        assert_structural(crd);
    }
    let scopes: Vec<_> = crds.iter().map(|crd| crd.spec.scope.as_str()).collect();
    assert_eq!(
        scopes,
        ["Cluster", "Cluster", "Namespaced", "Cluster", "Namespaced"]
    );
}

#[test]
fn foreign_kinds_keep_unknown_fields_in_their_crds() {
    for crd in [CloudProfile::crd(), Seed::crd(), Shoot::crd()] {
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("serializes");
        let root = &schema["openAPIV3Schema"]["properties"];
        for part in ["spec", "status"] {
            assert_eq!(
                root[part]["x-kubernetes-preserve-unknown-fields"],
                serde_json::json!(true),
                "{:?} {part}",
                crd.metadata.name
            );
        }
    }
}

#[test]
fn managed_kinds_have_status_subresource_and_columns() {
    for crd in [BackupBucket::crd(), BackupEntry::crd()] {
        let version = &crd.spec.versions[0];
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
        let columns: Vec<_> = version
            .additional_printer_columns
            .as_ref()
            .expect("print columns")
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert!(columns.contains(&"Seed") && columns.contains(&"Status"));
    }
}

#[test]
fn cloud_profile_round_trips() {
    let profile: CloudProfile = assert_round_trip(include_str!(
        "../../../../tests/fixtures/gardener/cloudprofile.yaml"
    ));
    assert_eq!(profile.spec.type_, "aws");
    assert!(profile.has_region("us-east-1"));
    assert_eq!(profile.backup_provider(), Some("aws"));
    assert!(profile.spec.extra.contains_key("machineImages"));
    assert!(validate_cloud_profile(&profile).is_empty());
}

#[test]
fn seed_round_trips() {
    let seed: Seed = assert_round_trip(include_str!(
        "../../../../tests/fixtures/gardener/seed.yaml"
    ));
    assert_eq!(seed.backup_region(), Some("westeurope"));
    let condition = seed
        .condition(CONDITION_BACKUP_BUCKETS_READY)
        .expect("condition present");
    assert_eq!(condition.status, ConditionStatus::False);
    assert_eq!(condition.codes, [ErrorCode::InfraUnauthorized]);
    for key in ["dns", "networks", "settings", "ingress", "taints"] {
        assert!(seed.spec.extra.contains_key(key), "{key}");
    }
    assert!(validate_seed(&seed).is_empty());
}

#[test]
fn shoots_round_trip_and_find_their_cloud_profile() {
    let shoot: Shoot = assert_round_trip(include_str!(
        "../../../../tests/fixtures/gardener/shoot.yaml"
    ));
    assert_eq!(shoot.cloud_profile_name(), Some("aws"));
    assert_eq!(shoot.cloud_profile_kind(), "CloudProfile");
    assert_eq!(shoot.technical_id(), "shoot--dev--payments");
    assert_eq!(
        shoot.backup_entry_name().as_deref(),
        Some("shoot--dev--payments--5e8a1b2c-3d4e-4f5a-9b6c-7d8e9f0a1b2c")
    );
    assert_eq!(shoot.spec.purpose.as_deref(), Some("production"));
    assert_eq!(shoot.spec.seed_name.as_deref(), Some("aws-eu1"));

    let old: Shoot = assert_round_trip(include_str!(
        "../../../../tests/fixtures/gardener/shoot-old.yaml"
    ));
    assert_eq!(old.cloud_profile_name(), Some("gcp"));
    assert_eq!(old.cloud_profile_kind(), "CloudProfile");
    // No status: the technical ID is derived; namespace `garden` is project `garden`.
    assert_eq!(old.technical_id(), "shoot--garden--legacy-app");
    assert_eq!(
        old.backup_entry_name().as_deref(),
        Some("shoot--garden--legacy-app--0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9")
    );
}

#[test]
fn technical_id_and_cloud_profile_fallbacks() {
    let mut shoot = Shoot::new("web", ShootSpec::default());
    shoot.metadata.namespace = Some("garden-team-a".into());
    assert_eq!(shoot.technical_id(), "shoot--team-a--web");
    assert_eq!(shoot.cloud_profile_name(), None);
    assert_eq!(shoot.backup_entry_name(), None);
    shoot.spec.cloud_profile_name = Some("old".into());
    assert_eq!(shoot.cloud_profile_name(), Some("old"));
    shoot.spec.cloud_profile = Some(CloudProfileReference {
        kind: "NamespacedCloudProfile".into(),
        name: "custom".into(),
        ..Default::default()
    });
    assert_eq!(shoot.cloud_profile_name(), Some("custom"));
    assert_eq!(shoot.cloud_profile_kind(), "NamespacedCloudProfile");
    shoot.metadata.uid = Some("u1".into());
    shoot.status = Some(ShootStatus {
        technical_id: Some("shoot--x--y".into()),
        uid: Some("u2".into()),
        ..Default::default()
    });
    assert_eq!(
        shoot.backup_entry_name().as_deref(),
        Some("shoot--x--y--u2")
    );
}

#[test]
fn backup_bucket_round_trips() {
    let bucket: BackupBucket = assert_round_trip(include_str!(
        "../../../../tests/fixtures/gardener/backupbucket.yaml"
    ));
    let status = bucket.status.as_ref().expect("status");
    assert_eq!(status.entry_count, Some(37));
    let error = status.last_error.as_ref().expect("lastError");
    assert_eq!(
        error.codes,
        [
            ErrorCode::InfraUnauthorized,
            ErrorCode::ConfigurationProblem
        ]
    );
    assert_eq!(bucket.responsible_seed(), Some("aws-eu1"));
    assert_eq!(bucket.pool_kind(), Some(PoolKind::CloudProfile));
    assert!(validate_backup_bucket(&bucket).is_empty());
}

#[test]
fn backup_entry_round_trips() {
    let entry: BackupEntry = assert_round_trip(include_str!(
        "../../../../tests/fixtures/gardener/backupentry.yaml"
    ));
    // status.seedName wins over spec.seedName: a hand-over is under way.
    assert_eq!(entry.responsible_seed(), Some("aws-eu1"));
    assert_eq!(entry.purpose(), Some("production"));
    assert!(!entry.is_force_deletion());
    assert!(!entry.is_source());
    let status = entry.status.as_ref().expect("status");
    assert_eq!(
        status.last_operation.as_ref().map(|op| op.state),
        Some(LastOperationState::Succeeded)
    );
    assert!(validate_backup_entry(&entry).is_empty());
}

#[test]
fn cloud_profile_backup_rules() {
    let mut profile = CloudProfile::new(
        "aws",
        CloudProfileSpec {
            type_: "aws".into(),
            regions: vec![Region {
                name: "eu-west-1".into(),
                ..Default::default()
            }],
            backup: Some(BackupSpec {
                credentials_ref: Some(secret_ref()),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    // Provider unset means spec.type; no region means one pool per seed region.
    assert!(validate_cloud_profile(&profile).is_empty());
    assert_eq!(profile.backup_provider(), Some("aws"));

    let backup = profile.spec.backup.as_mut().expect("set above");
    backup.provider = "azure".into();
    assert_eq!(
        messages(&validate_cloud_profile(&profile)),
        [
            "spec.backup.region: required when spec.backup.provider (azure) differs from spec.type (aws)"
        ]
    );
    profile.spec.backup.as_mut().expect("set").region = Some("westeurope".into());
    assert!(validate_cloud_profile(&profile).is_empty());

    // Every problem at once, each with its path.
    profile.spec.type_ = String::new();
    profile.spec.regions.push(Region {
        name: "eu-west-1".into(),
        ..Default::default()
    });
    profile.spec.regions.push(Region::default());
    let backup = profile.spec.backup.as_mut().expect("set");
    backup.provider = String::new();
    backup.region = Some(" ".into());
    backup.credentials_ref = None;
    assert_eq!(
        messages(&validate_cloud_profile(&profile)),
        [
            "spec.type: required",
            "spec.regions[1].name: duplicate region \"eu-west-1\"",
            "spec.regions[2].name: required",
            "spec.backup.provider: required when spec.type is empty",
            "spec.backup.region: must not be empty when set",
            "spec.backup.credentialsRef: required (or the older spec.backup.secretRef)",
        ]
    );

    // The older secretRef is accepted, but must name a secret.
    let backup = profile.spec.backup.as_mut().expect("set");
    backup.secret_ref = Some(Default::default());
    let errors = messages(&validate_cloud_profile(&profile));
    assert!(errors.contains(&"spec.backup.secretRef.name: required".to_string()));
    assert!(errors.contains(&"spec.backup.secretRef.namespace: required".to_string()));
}

#[test]
fn seed_backup_rules_and_defaulting() {
    let mut seed = Seed::new(
        "aws-eu1",
        SeedSpec {
            provider: SeedProvider {
                type_: "aws".into(),
                region: "eu-west-1".into(),
                ..Default::default()
            },
            backup: Some(BackupSpec {
                provider: "aws".into(),
                credentials_ref: Some(secret_ref()),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    default_seed(&mut seed);
    assert_eq!(
        seed.spec.backup.as_ref().and_then(|b| b.region.as_deref()),
        Some("eu-west-1")
    );
    assert!(validate_seed(&seed).is_empty());

    // Another provider: no default, region required.
    let mut cross = seed.clone();
    let backup = cross.spec.backup.as_mut().expect("set");
    backup.provider = "gcp".into();
    backup.region = None;
    default_seed(&mut cross);
    assert_eq!(
        messages(&validate_seed(&cross)),
        [
            "spec.backup.region: required when spec.backup.provider (gcp) differs from spec.provider.type (aws)"
        ]
    );

    let mut bare = Seed::new(
        "x",
        SeedSpec {
            backup: Some(BackupSpec::default()),
            ..Default::default()
        },
    );
    default_seed(&mut bare);
    assert_eq!(
        messages(&validate_seed(&bare)),
        [
            "spec.provider.type: required",
            "spec.provider.region: required",
            "spec.backup.provider: required",
            "spec.backup.credentialsRef: required (or the older spec.backup.secretRef)",
        ]
    );

    let mut bad_ref = seed.clone();
    bad_ref.spec.backup.as_mut().expect("set").credentials_ref = Some(ObjectReference {
        kind: "ConfigMap".into(),
        name: "x".into(),
        namespace: "garden".into(),
        ..Default::default()
    });
    let errors = messages(&validate_seed(&bad_ref));
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with("spec.backup.credentialsRef: must refer to a v1 Secret"));
}

#[test]
fn seed_backup_updates() {
    let mut old = Seed::new(
        "s",
        SeedSpec {
            provider: SeedProvider {
                type_: "aws".into(),
                region: "eu-west-1".into(),
                ..Default::default()
            },
            backup: Some(BackupSpec {
                provider: "aws".into(),
                credentials_ref: Some(secret_ref()),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    default_seed(&mut old);
    assert!(validate_seed_update(&old, &old).is_empty());

    let mut moved = old.clone();
    let backup = moved.spec.backup.as_mut().expect("set");
    backup.provider = "azure".into();
    backup.region = Some("westeurope".into());
    assert_eq!(
        messages(&validate_seed_update(&old, &moved)),
        [
            "spec.backup.provider: field is immutable (was \"aws\", now \"azure\")",
            "spec.backup.region: field is immutable (was \"eu-west-1\", now \"westeurope\")",
        ]
    );

    let mut removed = old.clone();
    removed.spec.backup = None;
    assert_eq!(
        messages(&validate_seed_update(&old, &removed)),
        ["spec.backup: cannot be removed once set"]
    );
    // Adding a backup later is allowed.
    assert!(validate_seed_update(&removed, &old).is_empty());
}

fn valid_bucket() -> BackupBucket {
    BackupBucket::new(
        "aws-eu-west-1-0a1b2c3d-0",
        BackupBucketSpec {
            provider: BackupBucketProvider {
                type_: "aws".into(),
                region: "eu-west-1".into(),
            },
            credentials_ref: Some(secret_ref()),
            seed_name: Some("aws-eu1".into()),
            ..Default::default()
        },
    )
}

#[test]
fn backup_bucket_rules() {
    assert!(validate_backup_bucket(&valid_bucket()).is_empty());

    let mut bucket = BackupBucket::new("shoot--dev--x", BackupBucketSpec::default());
    bucket.spec.shoot_ref = Some(ObjectReference::default());
    bucket.spec.seed_name = Some("s".into());
    let errors = messages(&validate_backup_bucket(&bucket));
    assert_eq!(errors.len(), 5, "{errors:?}");
    assert!(
        errors[0]
            .starts_with("metadata.name: bucket name \"shoot--dev--x\" must not contain \"--\"")
    );
    assert_eq!(errors[1], "spec.provider.type: required");
    assert_eq!(errors[2], "spec.provider.region: required");
    assert_eq!(errors[3], "spec.credentialsRef: required");
    assert_eq!(
        errors[4],
        "spec.shootRef: must not be set together with spec.seedName"
    );

    bucket.spec = valid_bucket().spec;
    bucket.spec.seed_name = None;
    assert_eq!(
        messages(&validate_backup_bucket(&bucket)),
        [
            "metadata.name: bucket name \"shoot--dev--x\" must not contain \"--\"",
            "spec.seedName: required unless spec.shootRef is set",
        ]
    );

    // A legacy bucket only needs a name its provider accepts.
    bucket.spec.seed_name = Some("s".into());
    bucket
        .metadata
        .labels
        .get_or_insert_default()
        .insert(LABEL_POOL_KIND.into(), PoolKind::Legacy.as_str().into());
    assert!(validate_backup_bucket(&bucket).is_empty());
    bucket.spec.provider.type_ = "azure".into();
    let errors = messages(&validate_backup_bucket(&bucket));
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with("metadata.name:"), "{errors:?}");

    // Older objects with only the deprecated secretRef are accepted.
    let mut old = valid_bucket();
    old.spec.credentials_ref = None;
    old.spec.secret_ref = Some(crate::common::SecretReference {
        name: "backup".into(),
        namespace: "garden".into(),
    });
    assert!(validate_backup_bucket(&old).is_empty());
    assert_eq!(old.credentials(), Some(secret_ref()));
}

#[test]
fn responsible_seed_prefers_status() {
    let mut bucket = valid_bucket();
    assert_eq!(bucket.responsible_seed(), Some("aws-eu1"));
    bucket.status = Some(BackupBucketStatus {
        seed_name: Some("aws-eu2".into()),
        ..Default::default()
    });
    assert_eq!(bucket.responsible_seed(), Some("aws-eu2"));

    let mut entry = BackupEntry::new("e", BackupEntrySpec::default());
    assert_eq!(entry.responsible_seed(), None);
    entry.spec.seed_name = Some("a".into());
    assert_eq!(entry.responsible_seed(), Some("a"));
    entry.status = Some(BackupEntryStatus {
        seed_name: Some(String::new()),
        ..Default::default()
    });
    assert_eq!(entry.responsible_seed(), Some("a"));
}

#[test]
fn backup_entry_rules() {
    let mut entry = BackupEntry::new("Shoot--X", BackupEntrySpec::default());
    entry.spec.seed_name = Some("s".into());
    entry.spec.shoot_ref = Some(ObjectReference {
        namespace: "garden-other".into(),
        ..Default::default()
    });
    let errors = messages(&validate_backup_entry(&entry));
    assert_eq!(
        errors,
        [
            "metadata.name: \"Shoot--X\" may only contain lowercase letters, digits, dots and hyphens, not 'S'",
            "metadata.namespace: required",
            "spec.bucketName: required",
            "spec.shootRef: must not be set together with spec.seedName",
            "spec.shootRef.name: required",
            "spec.shootRef.namespace: must be the entry's own namespace \"\", not \"garden-other\"",
        ]
    );
    let mut source = BackupEntry::new(
        "source-shoot--dev--x--u1",
        BackupEntrySpec {
            bucket_name: "b-1".into(),
            ..Default::default()
        },
    );
    source.metadata.namespace = Some("garden-dev".into());
    source
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(ANNOTATION_FORCE_DELETION.into(), "true".into());
    assert!(validate_backup_entry(&source).is_empty());
    assert!(source.is_source());
    assert!(source.is_force_deletion());
}
