//! Golden tests of `velero-backup.json` against the text Velero's Go code writes, and a
//! check of the Go shape tables against the fields of the typed Backup.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray,
};
use serde_json::{Value, json};

use super::backup_json::SPEC_AND_STATUS;
use super::go_shape::{Field, Shape};
use super::*;
use granary_api::velero::{Backup, BackupSpec};

fn backup(v: Value) -> Backup {
    serde_json::from_value(v).expect("a valid Backup")
}

fn encoded(b: &Backup) -> String {
    String::from_utf8(encode_backup_json(b)).expect("UTF-8")
}

/// A completed scheduled backup as Velero leaves it: defaults applied, the Go zero
/// structs present (so it is already in the form decoding gives back).
fn completed() -> Backup {
    backup(json!({
        "apiVersion": "velero.io/v1",
        "kind": "Backup",
        "status": {
            "hookStatus": {"hooksAttempted": 1},
            "progress": {"itemsBackedUp": 120, "totalItems": 120},
            "warnings": 2,
            "completionTimestamp": "2026-01-01T00:01:10Z",
            "startTimestamp": "2026-01-01T00:00:05Z",
            "phase": "Completed",
            "expiration": "2026-01-31T00:00:05Z",
            "formatVersion": "1.1.0",
            "version": 1
        },
        "spec": {
            "snapshotMoveData": false,
            "itemOperationTimeout": "4h0m0s",
            "csiSnapshotTimeout": "10m0s",
            "defaultVolumesToFsBackup": false,
            "storageLocation": "default",
            "hooks": {"resources": [{
                "pre": [{"exec": {
                    "timeout": "30s",
                    "onError": "Fail",
                    "command": ["/bin/sh", "-c", "fsfreeze --freeze /data && echo ok"],
                    "container": "db"
                }}],
                "includedNamespaces": ["db"],
                "name": "freeze"
            }]},
            "ttl": "720h0m0s",
            "snapshotVolumes": false,
            "labelSelector": {
                "matchExpressions": [{"values": ["web", "db"], "operator": "In", "key": "tier"}],
                "matchLabels": {"backup": "yes"}
            },
            "excludedResources": ["events", "events.events.k8s.io"],
            "includedNamespaces": ["shop", "db"],
            "metadata": {}
        },
        "metadata": {
            "annotations": {
                "velero.io/source-cluster-k8s-minor-version": "33",
                "velero.io/source-cluster-k8s-major-version": "1",
                "velero.io/source-cluster-k8s-gitversion": "v1.33.1",
                "velero.io/resource-timeout": "10m0s"
            },
            "labels": {
                "velero.io/storage-location": "default",
                "velero.io/schedule-name": "daily"
            },
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "generation": 7,
            "resourceVersion": "12345",
            "uid": "4f8a1c2e-0000-4000-8000-000000000001",
            "namespace": "velero",
            "name": "daily-20260101"
        }
    }))
}

/// Written by hand from Velero's Go types: `json.MarshalIndent(backup, "", "  ")`.
const COMPLETED: &str = r#"{
  "kind": "Backup",
  "apiVersion": "velero.io/v1",
  "metadata": {
    "name": "daily-20260101",
    "namespace": "velero",
    "uid": "4f8a1c2e-0000-4000-8000-000000000001",
    "resourceVersion": "12345",
    "generation": 7,
    "creationTimestamp": "2026-01-01T00:00:00Z",
    "labels": {
      "velero.io/schedule-name": "daily",
      "velero.io/storage-location": "default"
    },
    "annotations": {
      "velero.io/resource-timeout": "10m0s",
      "velero.io/source-cluster-k8s-gitversion": "v1.33.1",
      "velero.io/source-cluster-k8s-major-version": "1",
      "velero.io/source-cluster-k8s-minor-version": "33"
    }
  },
  "spec": {
    "metadata": {},
    "includedNamespaces": [
      "shop",
      "db"
    ],
    "excludedResources": [
      "events",
      "events.events.k8s.io"
    ],
    "labelSelector": {
      "matchLabels": {
        "backup": "yes"
      },
      "matchExpressions": [
        {
          "key": "tier",
          "operator": "In",
          "values": [
            "web",
            "db"
          ]
        }
      ]
    },
    "snapshotVolumes": false,
    "ttl": "720h0m0s",
    "hooks": {
      "resources": [
        {
          "name": "freeze",
          "includedNamespaces": [
            "db"
          ],
          "pre": [
            {
              "exec": {
                "container": "db",
                "command": [
                  "/bin/sh",
                  "-c",
                  "fsfreeze --freeze /data \u0026\u0026 echo ok"
                ],
                "onError": "Fail",
                "timeout": "30s"
              }
            }
          ]
        }
      ]
    },
    "storageLocation": "default",
    "defaultVolumesToFsBackup": false,
    "csiSnapshotTimeout": "10m0s",
    "itemOperationTimeout": "4h0m0s",
    "snapshotMoveData": false
  },
  "status": {
    "version": 1,
    "formatVersion": "1.1.0",
    "expiration": "2026-01-31T00:00:05Z",
    "phase": "Completed",
    "startTimestamp": "2026-01-01T00:00:05Z",
    "completionTimestamp": "2026-01-01T00:01:10Z",
    "warnings": 2,
    "progress": {
      "totalItems": 120,
      "itemsBackedUp": 120
    },
    "hookStatus": {
      "hooksAttempted": 1
    }
  }
}"#;

#[test]
fn a_completed_backup_encodes_exactly_as_velero_writes_it() {
    let b = completed();
    assert_eq!(encoded(&b), COMPLETED);
    assert_eq!(
        decode_backup_json(COMPLETED.as_bytes()).expect("decodes"),
        b
    );
}

#[test]
fn a_bare_backup_gets_the_go_zero_values() {
    // `&Backup{ObjectMeta: {Name: "b"}}` through Velero's encoder.
    let b = Backup::new("b", BackupSpec::default());
    let text = encoded(&b);
    assert_eq!(
        text,
        r#"{
  "kind": "Backup",
  "apiVersion": "velero.io/v1",
  "metadata": {
    "name": "b",
    "creationTimestamp": null
  },
  "spec": {
    "metadata": {},
    "ttl": "0s",
    "hooks": {},
    "csiSnapshotTimeout": "0s",
    "itemOperationTimeout": "0s"
  },
  "status": {}
}"#
    );
    // Decoding gives the form Velero reads back; encoding that again changes nothing.
    let back = decode_backup_json(text.as_bytes()).expect("decodes");
    assert_eq!(back.metadata.name.as_deref(), Some("b"));
    assert!(back.spec.hooks.is_some() && back.status.is_some());
    assert_eq!(encoded(&back), text);
}

#[test]
fn values_are_normalised_as_go_reads_and_writes_them() {
    let mut loose = completed();
    let spec = &mut loose.spec;
    spec.ttl = Some(granary_api::velero::Duration::parse("720h").expect("valid"));
    spec.csi_snapshot_timeout = Some(granary_api::velero::Duration::parse("600s").expect("valid"));
    spec.excluded_namespaces = Some(vec![]);
    spec.volume_snapshot_locations = Some(vec![]);
    spec.data_mover = Some(String::new());
    let status = loose.status.as_mut().expect("has status");
    status.errors = Some(0);
    status.start_timestamp = status
        .start_timestamp
        .map(|t| t + chrono::TimeDelta::milliseconds(250));
    assert_eq!(encoded(&loose), COMPLETED);
}

#[test]
fn decoding_refuses_other_kinds_and_reports_field_paths() {
    let err = |text: &str| decode_backup_json(text.as_bytes()).expect_err("refused");
    assert!(matches!(
        err(r#"{"apiVersion":"velero.io/v1","kind":"Restore","spec":{}}"#),
        FilesError::NotABackup(_)
    ));
    assert!(matches!(
        err(r#"{"kind":"Backup","spec":{}}"#),
        FilesError::NotABackup(_)
    ));
    assert!(matches!(err("[1, 2"), FilesError::Json(_)));
    match err(
        r#"{"apiVersion":"velero.io/v1","kind":"Backup","spec":{},"status":{"warnings":"many"}}"#,
    ) {
        FilesError::Field { path, .. } => assert_eq!(path, "status.warnings"),
        other => panic!("expected a field error, got {other}"),
    }
}

/// Property names of a CRD schema node, and the node of each.
fn properties(schema: &JSONSchemaProps) -> Vec<(&str, &JSONSchemaProps)> {
    schema
        .properties
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v))
        .collect()
}

fn item_schema(schema: &JSONSchemaProps) -> &JSONSchemaProps {
    match schema.items.as_ref() {
        Some(JSONSchemaPropsOrArray::Schema(s)) => s,
        other => panic!("list schema without one item schema: {other:?}"),
    }
}

/// Every struct table lists exactly the properties of the typed field it describes.
fn check_struct(at: &str, fields: &[Field], schema: &JSONSchemaProps, problems: &mut Vec<String>) {
    let want: BTreeSet<&str> = properties(schema).iter().map(|(k, _)| *k).collect();
    let have: BTreeSet<&str> = fields.iter().map(|f| f.name).collect();
    for missing in want.difference(&have) {
        problems.push(format!("{at}.{missing} is missing from the Go shape table"));
    }
    for extra in have.difference(&want) {
        problems.push(format!("{at}.{extra} is in the table but not in the type"));
    }
    for (name, sub) in properties(schema) {
        if let Some(f) = fields.iter().find(|f| f.name == name) {
            check_shape(&format!("{at}.{name}"), &f.shape, sub, problems);
        }
    }
}

fn check_shape(at: &str, shape: &Shape, schema: &JSONSchemaProps, problems: &mut Vec<String>) {
    match shape {
        Shape::Struct(fields) => check_struct(at, fields, schema, problems),
        Shape::List(inner) => check_shape(&format!("{at}[]"), inner, item_schema(schema), problems),
        Shape::Map(_) | Shape::Time | Shape::Duration | Shape::Plain => {}
    }
}

#[test]
fn shape_tables_cover_every_field_of_the_typed_backup() {
    let crd = granary_api::velero::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "Backup")
        .expect("Backup CRD");
    let root = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema");
    let top = properties(root);
    let mut problems = Vec::new();
    for (name, fields) in SPEC_AND_STATUS {
        let (_, schema) = top
            .iter()
            .find(|(k, _)| *k == name)
            .unwrap_or_else(|| panic!("CRD has {name}"));
        check_struct(name, fields, schema, &mut problems);
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_backup_with_every_field_set_leaves_no_key_unplaced() {
    let full = backup(json!({
        "apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {
            "name": "n", "generateName": "g", "namespace": "velero", "selfLink": "/x",
            "uid": "u", "resourceVersion": "1", "generation": 2,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionTimestamp": "2026-01-02T00:00:00Z", "deletionGracePeriodSeconds": 0,
            "labels": {"a": "b"}, "annotations": {"c": "d"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "o", "uid": "ou",
                                  "controller": true, "blockOwnerDeletion": false}],
            "finalizers": ["f"],
            "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "velero.io/v1",
                               "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:spec": {}}, "subresource": "status"}]
        },
        "spec": {
            "resourcePolicy": {"apiGroup": null, "kind": "configmap", "name": "p"},
            "uploaderConfig": {"parallelFilesUpload": 4},
            "orLabelSelectors": [{"matchLabels": {"a": "b"}}],
            "orderedResources": {"pods": "ns/a,ns/b"}
        },
        "status": {"validationErrors": ["v"], "queuePosition": 3}
    }));
    let value = serde_json::to_value(&full).expect("serialises");
    let shaped = super::go_shape::reshape(value, &super::backup_json::BACKUP_SHAPE);
    assert!(shaped.unknown.is_empty(), "{:?}", shaped.unknown);
    let text = encoded(&full);
    assert!(text.contains("\"apiGroup\": null,\n"), "{text}");
    assert!(
        text.contains("\"deletionGracePeriodSeconds\": 0,\n"),
        "{text}"
    );
}
