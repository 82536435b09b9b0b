//! Round-trip, CRD, defaulting and validation tests of the velero.io kinds.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::*;

/// Parses `yaml` into `K`, writes it back, and checks nothing was lost or renamed.
pub(crate) fn round_trip<K: DeserializeOwned + Serialize>(yaml: &str) -> K {
    let typed: K = serde_saphyr::from_str(yaml).expect("fixture parses into the typed object");
    let expected: serde_json::Value = serde_saphyr::from_str(yaml).expect("fixture is YAML");
    let back = serde_json::to_value(&typed).expect("typed object serialises");
    assert_eq!(
        back,
        expected,
        "round trip changed the object:\nwritten back: {}",
        serde_json::to_string_pretty(&back).unwrap()
    );
    typed
}

/// Asserts some error sits at `path` and mentions `needle`.
pub(crate) fn assert_error(errs: &FieldErrors, path: &str, needle: &str) {
    assert!(
        errs.iter().any(|e| e.path == path
            && e.to_string().contains(needle)
            && e.to_string().starts_with(path)),
        "no error at {path} mentioning {needle:?} in {errs:#?}"
    );
}

const BACKUP: &str = include_str!("../../../../tests/fixtures/velero/backup.yaml");
const BACKUP_QUEUED: &str = include_str!("../../../../tests/fixtures/velero/backup-queued.yaml");
const RESTORE: &str = include_str!("../../../../tests/fixtures/velero/restore.yaml");
const BSL: &str = include_str!("../../../../tests/fixtures/velero/bsl.yaml");
const BSL_CACERT: &str = include_str!("../../../../tests/fixtures/velero/bsl-cacert.yaml");
const SCHEDULE: &str = include_str!("../../../../tests/fixtures/velero/schedule.yaml");
const DBR: &str = include_str!("../../../../tests/fixtures/velero/deletebackuprequest.yaml");
const DOWNLOAD: &str = include_str!("../../../../tests/fixtures/velero/downloadrequest.yaml");

#[test]
fn backup_round_trips_with_hooks_selectors_and_status() {
    let b: Backup = round_trip(BACKUP);
    let status = b.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(BackupPhase::InProgress));
    assert_eq!(status.queue_position, Some(0));
    assert_eq!(status.progress.as_ref().unwrap().items_backed_up, Some(17));
    let hooks = b.spec.hooks.as_ref().unwrap().resources.as_ref().unwrap();
    assert_eq!(
        hooks[0].pre.as_ref().unwrap()[0].exec.on_error,
        Some(HookErrorMode::Fail)
    );
    assert_eq!(b.spec.ttl.as_ref().unwrap().as_str(), "720h0m0s");
    assert_eq!(b.validate(), vec![]);

    let q: Backup = round_trip(BACKUP_QUEUED);
    assert_eq!(q.status.as_ref().unwrap().phase, Some(BackupPhase::Queued));
    assert_eq!(q.validate(), vec![]);
}

#[test]
fn an_unknown_existing_resource_policy_decodes_and_fails_validation() {
    // Velero's CRD takes any string and the Restore goes FailedValidation; a list or
    // watch of Restores must never fail to decode because of one.
    let yaml = RESTORE.replace(
        "existingResourcePolicy: update",
        "existingResourcePolicy: merge",
    );
    assert_ne!(yaml, RESTORE);
    let r: Restore = round_trip(&yaml);
    assert_eq!(r.spec.existing_resource_policy(), Some(Err("merge")));
    assert_error(
        &r.validate(),
        "spec.existingResourcePolicy",
        "Invalid ExistingResourcePolicy: merge",
    );
    let mut unset = r.clone();
    unset.spec.existing_resource_policy = Some(String::new());
    assert_eq!(unset.spec.existing_resource_policy(), None);
}

#[test]
fn other_kinds_round_trip() {
    let r: Restore = round_trip(RESTORE);
    assert_eq!(
        r.spec.existing_resource_policy(),
        Some(Ok(PolicyType::Update))
    );
    assert_eq!(
        r.status.as_ref().unwrap().phase,
        Some(RestorePhase::Completed)
    );
    assert_eq!(r.validate(), vec![]);

    let bsl: BackupStorageLocation = round_trip(BSL);
    assert!(bsl.is_available());
    assert_eq!(bsl.validate(), vec![]);
    let legacy: BackupStorageLocation = round_trip(BSL_CACERT);
    assert_eq!(
        legacy.spec.effective_access_mode(),
        BackupStorageLocationAccessMode::ReadOnly
    );
    assert!(!legacy.is_available());

    let s: Schedule = round_trip(SCHEDULE);
    assert_eq!(
        s.status.as_ref().unwrap().phase,
        Some(SchedulePhase::Enabled)
    );
    assert_eq!(s.validate(), vec![]);
    let at = chrono::DateTime::parse_from_rfc3339("2025-03-06T01:00:04Z")
        .unwrap()
        .to_utc();
    assert_eq!(s.timestamped_name(at), "nginx-daily-20250306010004");

    let d: DeleteBackupRequest = round_trip(DBR);
    assert_eq!(
        d.status.unwrap().phase,
        Some(DeleteBackupRequestPhase::Processed)
    );
    let dl: DownloadRequest = round_trip(DOWNLOAD);
    assert_eq!(dl.spec.target.kind, DownloadTargetKind::BackupLog);
    assert_eq!(
        dl.status.unwrap().phase,
        Some(DownloadRequestPhase::Processed)
    );
}

#[test]
fn enums_use_the_exact_velero_strings() {
    let all_backup = [
        "New",
        "Queued",
        "ReadyToStart",
        "FailedValidation",
        "InProgress",
        "WaitingForPluginOperations",
        "WaitingForPluginOperationsPartiallyFailed",
        "Finalizing",
        "FinalizingPartiallyFailed",
        "Completed",
        "PartiallyFailed",
        "Failed",
        "Deleting",
    ];
    for s in all_backup {
        let p: BackupPhase = serde_json::from_value(serde_json::json!(s)).unwrap();
        assert_eq!(p.as_str(), s);
        assert_eq!(serde_json::to_value(p).unwrap(), serde_json::json!(s));
    }
    for s in [
        "BackupLog",
        "BackupContents",
        "BackupVolumeSnapshots",
        "BackupItemOperations",
        "BackupResourceList",
        "BackupResults",
        "RestoreLog",
        "RestoreResults",
        "RestoreResourceList",
        "RestoreItemOperations",
        "CSIBackupVolumeSnapshots",
        "CSIBackupVolumeSnapshotContents",
        "BackupVolumeInfos",
        "RestoreVolumeInfo",
    ] {
        let k: DownloadTargetKind = serde_json::from_value(serde_json::json!(s)).unwrap();
        assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(s));
    }
    assert_eq!(
        serde_json::to_value(PolicyType::None).unwrap(),
        serde_json::json!("none")
    );
    assert!(serde_json::from_value::<BackupPhase>(serde_json::json!("Bogus")).is_err());
}

#[test]
fn defaults_fill_unset_and_zero_durations_only() {
    let mut spec = BackupSpec {
        ttl: Some(Duration::parse("0s").unwrap()),
        item_operation_timeout: Some(Duration::parse("1h").unwrap()),
        ..Default::default()
    };
    spec.apply_defaults(&ServerDefaults::default());
    assert_eq!(spec.ttl.as_ref().unwrap().as_str(), "720h0m0s");
    assert_eq!(
        spec.csi_snapshot_timeout.as_ref().unwrap().as_str(),
        "10m0s"
    );
    assert_eq!(spec.item_operation_timeout.as_ref().unwrap().as_str(), "1h");
    assert_eq!(spec.defaulted(), spec);

    let r = RestoreSpec::default().defaulted();
    assert_eq!(r.item_operation_timeout.unwrap().as_str(), "4h0m0s");

    let bsl = BackupStorageLocationSpec::default().defaulted();
    assert_eq!(
        bsl.access_mode,
        Some(BackupStorageLocationAccessMode::ReadWrite)
    );

    let mut sched = ScheduleSpec::default();
    sched.apply_defaults(&ServerDefaults::default());
    assert_eq!(sched.template.ttl.unwrap().as_str(), "720h0m0s");
}

fn selector(
    key: &str,
    value: &str,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
        match_labels: Some([(key.to_owned(), value.to_owned())].into()),
        ..Default::default()
    }
}

#[test]
fn label_selectors_need_valid_keys_and_values_as_velero_parses_them() {
    let mut spec: BackupSpec = serde_saphyr::from_str(
        "
labelSelector:
  matchLabels: {app: \"café\", \"bad key!\": ok}
  matchExpressions: [{key: tier, operator: In, values: [ok, \"-leading\"]}]
",
    )
    .unwrap();
    let errs = spec.validate_at("spec");
    assert_error(
        &errs,
        "spec.labelSelector.matchLabels[\"app\"]",
        "invalid label value",
    );
    assert_error(
        &errs,
        "spec.labelSelector.matchLabels[\"bad key!\"]",
        "invalid label key",
    );
    assert_error(
        &errs,
        "spec.labelSelector.matchExpressions[0].values[1]",
        "invalid label value",
    );
    assert_eq!(errs.len(), 3, "{errs:?}");
    spec.label_selector = Some(selector("app.kubernetes.io/name", "web_1.x"));
    assert!(spec.validate_at("spec").is_empty());
}

#[test]
fn backup_validation_reports_every_problem_with_its_path() {
    let mut spec: BackupSpec = serde_saphyr::from_str(
        "
labelSelector: {matchExpressions: [{key: a, operator: Equals}, {key: b, operator: In}]}
orLabelSelectors: [{matchLabels: {x: y}}]
includedResources: [pods]
includedClusterScopedResources: [storageclasses]
excludedNamespaceScopedResources: [secrets]
includedNamespaces: [a, b]
excludedNamespaces: [b, '*']
ttl: 10
csiSnapshotTimeout: -5m
itemOperationTimeout: 4 hours
resourcePolicy: {kind: Secret, name: p}
hooks:
  resources:
  - name: ''
    pre: [{exec: {command: [], timeout: soon}}]
",
    )
    .unwrap();
    let errs = spec.validate_at("spec");
    assert_error(
        &errs,
        "spec.labelSelector",
        "may not be set together with spec.orLabelSelectors",
    );
    assert_error(
        &errs,
        "spec.labelSelector.matchExpressions[0].operator",
        "unknown operator",
    );
    assert_error(
        &errs,
        "spec.labelSelector.matchExpressions[1].values",
        "non-empty",
    );
    assert_error(&errs, "spec.includedClusterScopedResources", "old-style");
    assert_error(&errs, "spec.excludedNamespaceScopedResources", "old-style");
    assert_error(
        &errs,
        "spec.excludedNamespaces[0]",
        "also listed in spec.includedNamespaces",
    );
    assert_error(&errs, "spec.excludedNamespaces[1]", "\"*\"");
    assert_error(&errs, "spec.ttl", "missing unit");
    assert_error(&errs, "spec.csiSnapshotTimeout", "negative");
    assert_error(&errs, "spec.itemOperationTimeout", "invalid duration");
    assert_error(&errs, "spec.resourcePolicy.kind", "ConfigMap");
    assert_error(&errs, "spec.hooks.resources[0].name", "required");
    assert_error(
        &errs,
        "spec.hooks.resources[0].pre[0].exec.command",
        "at least one",
    );
    assert_error(
        &errs,
        "spec.hooks.resources[0].pre[0].exec.timeout",
        "invalid duration",
    );
    assert_eq!(errs.len(), 14, "{errs:#?}");

    // The same spec under a Schedule reports paths under spec.template.
    spec.label_selector = Some(selector("a", "b"));
    spec.or_label_selectors = None;
    let sched = ScheduleSpec {
        template: spec,
        schedule: "0 25 * * *".into(),
        ..Default::default()
    };
    let errs = sched.validate_at("spec");
    assert_error(&errs, "spec.schedule", "hour field");
    assert_error(&errs, "spec.template.ttl", "invalid duration");
}

#[test]
fn restore_validation() {
    let both = RestoreSpec {
        backup_name: Some("b".into()),
        schedule_name: Some("s".into()),
        ..Default::default()
    };
    assert_error(
        &both.validate_at("spec"),
        "spec.scheduleName",
        "exactly one",
    );
    let neither = RestoreSpec::default();
    assert_error(
        &neither.validate_at("spec"),
        "spec.backupName",
        "exactly one",
    );

    let spec: RestoreSpec = serde_saphyr::from_str(
        "
backupName: b
includedResources: [nodes, pods]
excludedResources: [pods]
labelSelector: {matchLabels: {a: b}}
orLabelSelectors: [{matchLabels: {c: d}}]
namespaceMapping: {a: ''}
itemOperationTimeout: 1x
resourceModifier: {kind: Secret, name: m}
hooks:
  resources:
  - name: h
    postHooks:
    - {}
    - exec: {command: [], execTimeout: 1q}
    - init: {initContainers: [oops], timeout: 1h}
",
    )
    .unwrap();
    let errs = spec.validate_at("spec.restoreSpec");
    assert_error(
        &errs,
        "spec.restoreSpec.includedResources[0]",
        "non-restorable",
    );
    assert_error(
        &errs,
        "spec.restoreSpec.excludedResources[0]",
        "also listed",
    );
    assert_error(&errs, "spec.restoreSpec.labelSelector", "orLabelSelectors");
    assert_error(&errs, "spec.restoreSpec.namespaceMapping", "empty");
    assert_error(
        &errs,
        "spec.restoreSpec.itemOperationTimeout",
        "unknown unit",
    );
    assert_error(&errs, "spec.restoreSpec.resourceModifier.kind", "ConfigMap");
    let hook = "spec.restoreSpec.hooks.resources[0].postHooks";
    assert_error(&errs, &format!("{hook}[0]"), "one of exec or init");
    assert_error(&errs, &format!("{hook}[1].exec.command"), "at least one");
    assert_error(
        &errs,
        &format!("{hook}[1].exec.execTimeout"),
        "invalid duration",
    );
    assert_error(
        &errs,
        &format!("{hook}[2].init.initContainers[0]"),
        "container object",
    );
    assert_eq!(errs.len(), 10, "{errs:#?}");
}

#[test]
fn storage_location_validation() {
    let bad: BackupStorageLocationSpec = serde_saphyr::from_str(
        "
provider: ' '
objectStorage: {bucket: 'bucket/with/path', caCert: AAAA, caCertRef: {name: '', key: ''}}
credential: {name: creds, key: ''}
backupSyncPeriod: 1 minute
",
    )
    .unwrap();
    let errs = bad.validate_at("spec");
    assert_error(&errs, "spec.provider", "required");
    assert_error(&errs, "spec.objectStorage.bucket", "must not contain '/'");
    assert_error(&errs, "spec.objectStorage.caCertRef", "caCert");
    assert_error(&errs, "spec.objectStorage.caCertRef.name", "required");
    assert_error(&errs, "spec.objectStorage.caCertRef.key", "required");
    assert_error(&errs, "spec.credential.key", "required");
    assert_error(&errs, "spec.backupSyncPeriod", "invalid duration");
    assert_eq!(errs.len(), 7, "{errs:#?}");

    let mut ok = BackupStorageLocationSpec {
        provider: "aws".into(),
        object_storage: ObjectStorageLocation {
            bucket: "arn:aws:s3::123456789012:accesspoint/mfzwi23gnjvgw.mrap".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(ok.validate_at("spec"), vec![]);
    ok.object_storage.bucket = "/plain-bucket/".into();
    ok.object_storage.prefix = Some("/a/b/".into());
    assert_eq!(ok.validate_at("spec"), vec![]);
    assert_eq!(ok.bucket_and_prefix(), ("plain-bucket", "a/b"));
    ok.object_storage.bucket = "//".into();
    assert_error(
        &ok.validate_at("spec"),
        "spec.objectStorage.bucket",
        "required",
    );
}

#[test]
fn request_validation() {
    let dbr = DeleteBackupRequest::new("x", DeleteBackupRequestSpec::default());
    assert_error(&dbr.validate(), "spec.backupName", "required");
    let dl = DownloadRequest::new("x", DownloadRequestSpec::default());
    assert_error(&dl.validate(), "spec.target.name", "required");
    assert!(DownloadTargetKind::RestoreVolumeInfo.is_restore_target());
    assert!(!DownloadTargetKind::BackupVolumeInfos.is_restore_target());
}

/// Asserts a CRD's schema has no construct kube-apiserver rejects or that we promised
/// not to emit (combinators, `$ref`, defaults, CEL, `null` enum values), has the status
/// subresource where upstream has it and is namespaced; returns it as JSON.
pub(crate) fn assert_structural_friendly(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> serde_json::Value {
    fn walk(kind: &str, at: &str, schema: &serde_json::Value) {
        let obj = schema
            .as_object()
            .unwrap_or_else(|| panic!("{kind} {at}: not an object"));
        for bad in [
            "oneOf",
            "anyOf",
            "allOf",
            "not",
            "$ref",
            "default",
            "x-kubernetes-validations",
        ] {
            assert!(!obj.contains_key(bad), "{kind} {at} has {bad}");
        }
        let preserves = obj.contains_key("x-kubernetes-preserve-unknown-fields");
        assert!(
            obj.contains_key("type") || preserves,
            "{kind} {at} has no type"
        );
        if let Some(values) = obj.get("enum").and_then(|e| e.as_array()) {
            assert!(
                values.iter().all(|v| v.is_string()),
                "{kind} {at} enum {values:?}"
            );
        }
        for (name, child) in obj
            .get("properties")
            .and_then(|p| p.as_object())
            .into_iter()
            .flatten()
        {
            walk(kind, &format!("{at}.{name}"), child);
        }
        if let Some(items) = obj.get("items") {
            walk(kind, &format!("{at}[]"), items);
        }
        if let Some(extra) = obj.get("additionalProperties").filter(|e| e.is_object()) {
            walk(kind, &format!("{at}{{}}"), extra);
        }
    }
    let json = serde_json::to_value(crd).unwrap();
    let kind = crd.spec.names.kind.as_str();
    let version = &json["spec"]["versions"][0];
    walk(kind, "", &version["schema"]["openAPIV3Schema"]);
    // As in Velero's own CRDs, no velero.io kind has a status subresource (Velero writes
    // status by updating the whole object); OADP's kinds all have one.
    let expected_status = if crd.spec.group != "velero.io" {
        serde_json::json!({})
    } else {
        serde_json::Value::Null
    };
    assert_eq!(version["subresources"]["status"], expected_status, "{kind}");
    assert_eq!(json["spec"]["scope"], "Namespaced", "{kind}");
    json
}

#[test]
fn crds_are_structural_friendly_with_upstream_names_and_columns() {
    let crds = crds();
    let names: Vec<_> = crds
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "backups.velero.io",
            "restores.velero.io",
            "backupstoragelocations.velero.io",
            "deletebackuprequests.velero.io",
            "schedules.velero.io",
            "downloadrequests.velero.io",
            "serverstatusrequests.velero.io",
        ]
    );
    for crd in &crds {
        assert_structural_friendly(crd);
    }
    let bsl = serde_json::to_value(&crds[2]).unwrap();
    assert_eq!(
        bsl["spec"]["names"]["shortNames"],
        serde_json::json!(["bsl"])
    );
    let columns: Vec<_> = bsl["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        columns,
        [
            "Provider",
            "Phase",
            "Last Validated",
            "Access Mode",
            "Age",
            "Default"
        ]
    );
    let phase = &bsl["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        ["phase"];
    assert_eq!(
        phase["enum"],
        serde_json::json!(["Available", "Unavailable"])
    );
    let sched = serde_json::to_value(&crds[4]).unwrap();
    // Velero 1.18 gives Schedules and Restores no short names.
    assert_eq!(
        sched["spec"]["names"]["shortNames"],
        serde_json::Value::Null
    );
    let init = &serde_json::to_value(&crds[1]).unwrap()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        ["properties"]["spec"]["properties"]["hooks"]["properties"]["resources"]["items"]["properties"]
        ["postHooks"]["items"]["properties"]["init"]["properties"]["initContainers"]["items"];
    assert_eq!(
        init["x-kubernetes-preserve-unknown-fields"],
        serde_json::json!(true)
    );
}
