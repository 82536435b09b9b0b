//! Round trips of upstream-shaped extension objects, their CRDs and validation.

use kube::CustomResourceExt;

use super::*;
use crate::common::{ConditionStatus, ErrorCode, LastOperationState};
use crate::core::assert_structural;
use crate::core::tests::assert_round_trip;

fn messages(errors: &[crate::common::FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn crds_match_gardeners_extension_crds() {
    let crds = crds();
    assert_eq!(crds.len(), 2);
    for (crd, short, columns) in [
        (&crds[0], "bb", vec!["Type", "Region", "State", "Age"]),
        (
            &crds[1],
            "be",
            vec!["Type", "Region", "Bucket", "State", "Age"],
        ),
    ] {
        assert_structural(crd);
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.group, "extensions.gardener.cloud");
        assert_eq!(crd.spec.names.short_names, Some(vec![short.to_string()]));
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
        let names: Vec<_> = version
            .additional_printer_columns
            .as_ref()
            .expect("print columns")
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, columns);
    }
    // Arbitrary JSON fields keep their content.
    let schema =
        serde_json::to_value(&BackupEntry::crd().spec.versions[0].schema).expect("serializes");
    let root = &schema["openAPIV3Schema"]["properties"];
    for path in [
        &root["spec"]["properties"]["providerConfig"],
        &root["spec"]["properties"]["backupBucketProviderStatus"],
        &root["status"]["properties"]["providerStatus"],
        &root["status"]["properties"]["state"],
    ] {
        assert_eq!(path["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(path["type"], "object");
    }
    // Gardener's CRD has no enum for the class (any string, immutable once set).
    let class = &root["spec"]["properties"]["class"];
    assert_eq!(class["type"], "string");
    assert!(class.get("enum").is_none(), "{class}");
    for crd in &crds {
        assert_eq!(
            crd.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_DELETION_PROTECTED)),
            Some(&"true".to_string())
        );
    }
}

#[test]
fn backup_bucket_round_trips_with_full_status() {
    let bucket: BackupBucket = assert_round_trip(include_str!(
        "../../../../tests/fixtures/gardener/extension-backupbucket.yaml"
    ));
    assert_eq!(bucket.operation(), Some("reconcile"));
    let status = bucket.default_status().expect("status");
    assert_eq!(status.conditions[0].status, ConditionStatus::True);
    assert_eq!(
        status.last_error.as_ref().map(|e| e.codes.clone()),
        Some(vec![ErrorCode::InfraDependencies])
    );
    assert_eq!(status.resources[0].resource_ref.kind, "Secret");
    assert!(status.state.is_some());
    assert_eq!(
        bucket
            .status
            .as_ref()
            .and_then(|s| s.generated_secret_ref.as_ref())
            .map(|r| r.namespace.as_str()),
        Some("garden")
    );
    assert!(validate_extension_backup_bucket(&bucket).is_empty());
}

#[test]
fn backup_entry_round_trips_with_full_status() {
    let entry: BackupEntry = assert_round_trip(include_str!(
        "../../../../tests/fixtures/gardener/extension-backupentry.yaml"
    ));
    assert_eq!(entry.spec.class, Some(ExtensionClass::Seed));
    assert_eq!(entry.operation(), None);
    let status = entry.default_status().expect("status");
    assert_eq!(
        status.last_operation.as_ref().map(|op| op.state),
        Some(LastOperationState::Pending)
    );
    assert_eq!(status.conditions[0].status, ConditionStatus::Progressing);
    assert_eq!(status.resources[0].resource_ref.api_version, "");
    assert!(validate_extension_backup_entry(&entry).is_empty());
}

#[test]
fn extension_objects_report_every_problem() {
    let bucket = BackupBucket::new("Bad_Name", BackupBucketSpec::default());
    assert_eq!(
        messages(&validate_extension_backup_bucket(&bucket)),
        [
            "metadata.name: \"Bad_Name\" may only contain lowercase letters, digits and hyphens, not 'B'",
            "spec.type: required",
            "spec.region: required",
            "spec.secretRef.name: required",
            "spec.secretRef.namespace: required",
        ]
    );
    let entry = BackupEntry::new("e", BackupEntrySpec::default());
    assert_eq!(
        messages(&validate_extension_backup_entry(&entry)),
        [
            "spec.type: required",
            "spec.region: required",
            "spec.bucketName: required",
            "spec.secretRef.name: required",
            "spec.secretRef.namespace: required",
        ]
    );
}

#[test]
fn unknown_class_decodes_and_class_is_immutable() {
    // Gardener's CRD takes any string; a class this version does not know must not fail
    // a list or watch of every extension object.
    let json = serde_json::json!({
        "type": "aws", "region": "r", "secretRef": {"name": "n", "namespace": "garden"},
        "class": "cluster"
    });
    let spec: BackupBucketSpec = serde_json::from_value(json.clone()).expect("tolerant");
    assert_eq!(spec.class.map(ExtensionClass::as_str), Some("cluster"));
    assert_eq!(serde_json::to_value(&spec).expect("serializes"), json);

    let seed = Some(ExtensionClass::Seed);
    assert!(validate_class_update(None, seed).is_empty());
    assert!(validate_class_update(seed, None).is_empty());
    assert!(validate_class_update(seed, seed).is_empty());
    assert_eq!(
        messages(&validate_class_update(seed, Some(ExtensionClass::Shoot))),
        ["spec.class: Value is immutable (was seed, now shoot)"]
    );
}
