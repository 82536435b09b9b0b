//! A namespace owner's own backup storage locations and downloads (#18) against the
//! embedded API server with real identities, as tests/e2e/nonadmin.rs sets it up: acting
//! as the owner of ns-a through its own token, a NonAdminBackupStorageLocation becomes a
//! Velero location named by its NACUUID with the prefix `ns-a/<prefix>` and a copy of the
//! owner's Secret, a NonAdminBackup into it lands under that prefix, and a
//! NonAdminDownloadRequest hands out a working URL of that backup's files that goes away
//! after expiry. Locations that would escape the namespace's directory, use another
//! namespace's Secret or location, or differ from the administrator's enforced spec are
//! refused naming the field with nothing created; with approval required nothing is
//! created until an administrator approves, and a changed spec waits for a new approval.
//! The `local` provider is open to a tenant only when the administrator enforces it. The
//! garbage collector removes the location objects of gone NABSLs, and the sync brings a
//! NonAdminBackup on a tenant's own location back after a plain delete.

use granary_api::oadp::{
    NonAdminBackup, NonAdminBackupStorageLocation, NonAdminBackupStorageLocationRequest,
    NonAdminDownloadRequest, NonAdminPhase, NonAdminRestore, NonAdminRestoreSpec,
};
use granary_api::velero::{
    Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationSpec, DownloadRequest,
    DownloadTargetKind, ObjectStorageLocation, RestorePhase, RestoreSpec,
};
use granary_runtime::config::ConfigDuration;
use granary_test_support::poll_until;
use granary_velero::layout::StorageLayout;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use std::time::Duration;

use granary_test_support::worlds::nonadmin_locations::*;

/// A NonAdminBackup applied together with the location it names (one `kubectl apply`,
/// as the README shows) is refused while the location is not ready, and goes on as soon
/// as the location is: the location's change wakes the backups, not a recheck an hour
/// later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_applied_with_its_new_location_goes_on_once_the_location_is_ready() {
    let w = start(|s| {
        s.queued_backup_recheck_frequency = ConfigDuration(Duration::from_secs(3600));
    })
    .await;
    let pp = PostParams::default();
    let nabsls_a: Api<NonAdminBackupStorageLocation> = Api::namespaced(w.owner_a.clone(), "ns-a");
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(w.owner_a.clone(), "ns-a");
    w.secret(&w.owner_a, "ns-a", "creds").await;
    nabs_a
        .create(&pp, &nab("together", Some("mine")))
        .await
        .expect("nab");
    // The backup is seen before its location exists (the order `kubectl apply` of one
    // file may take): it backs off, and goes on once the location comes.
    poll_until("the backup waits for its location", || async {
        nabs_a
            .get("together")
            .await
            .expect("nab")
            .status
            .and_then(|s| s.phase)
            == Some(NonAdminPhase::BackingOff)
    })
    .await;
    nabsls_a
        .create(&pp, &nabsl("mine", TENANTS, Some("team"), "creds"))
        .await
        .expect("create nabsl");
    poll_until("the backup on the new location completed", || async {
        nabs_a
            .get("together")
            .await
            .expect("nab")
            .status
            .and_then(|s| s.velero_backup)
            .and_then(|v| v.status)
            .and_then(|s| s.phase)
            == Some(BackupPhase::Completed)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_backs_up_into_their_own_location_and_downloads_from_it() {
    let w = start(|_| {}).await;
    let pp = PostParams::default();
    let nabsls_a: Api<NonAdminBackupStorageLocation> = Api::namespaced(w.owner_a.clone(), "ns-a");
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(w.owner_a.clone(), "ns-a");
    let nadrs_a: Api<NonAdminDownloadRequest> = Api::namespaced(w.owner_a.clone(), "ns-a");
    let mine = w
        .own_location(&nabsl("mine", TENANTS, Some("team"), "creds"))
        .await;
    let uuid = uuid_of(&mine);
    assert!(uuid.starts_with("ns-a-mine-") && uuid.len() <= 63, "{uuid}");
    assert!(
        mine.finalizers()
            .iter()
            .any(|f| f == "nonadminbackupstoragelocation.oadp.openshift.io/finalizer")
    );
    let v = serde_json::to_value(&mine).expect("json");
    for (type_, reason) in [
        ("Accepted", "BslSpecValidation"),
        ("SecretSynced", "SecretCreated"),
        (
            "BackupStorageLocationSynced",
            "BackupStorageLocationCreated",
        ),
    ] {
        let c = condition(&v, type_).unwrap_or_else(|| panic!("{type_} missing: {v}"));
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("True"), Some(reason))
        );
    }
    assert_eq!(
        v["status"]["veleroBackupStorageLocation"]["namespace"],
        VELERO
    );
    // The Velero location and the Secret copy, both named by the NACUUID.
    let location = w
        .velero::<BackupStorageLocation>()
        .get(&uuid)
        .await
        .expect("velero location");
    assert_eq!(
        location.spec.object_storage.prefix.as_deref(),
        Some("ns-a/team")
    );
    assert_eq!(location.spec.default, Some(false));
    let credential = location.spec.credential.clone().expect("credential");
    assert_eq!(
        (credential.name.as_str(), credential.key.as_str()),
        (uuid.as_str(), "cloud")
    );
    assert_eq!(
        location.labels()["openshift.io/oadp-nabsl-origin-nacuuid"],
        uuid
    );
    assert_eq!(
        location.annotations()["openshift.io/oadp-nabsl-origin-namespace"],
        "ns-a"
    );
    let copy = w.velero::<Secret>().get(&uuid).await.expect("secret copy");
    assert_eq!(
        copy.data.expect("data")["cloud"].0,
        b"credentials of ns-a".to_vec()
    );

    // A backup into it lands under the namespace's prefix.
    let cms_a: Api<ConfigMap> = Api::namespaced(w.owner_a.clone(), "ns-a");
    let mut app = ConfigMap::default();
    app.metadata.name = Some("app".into());
    app.data = Some([("k".to_string(), "v".to_string())].into());
    cms_a.create(&pp, &app).await.expect("configmap");
    nabs_a
        .create(&pp, &nab("b1", Some("mine")))
        .await
        .expect("nab");
    granary_test_support::worlds::nonadmin::wait_backed_up(&nabs_a, "b1").await;
    let b1 = nabs_a.get("b1").await.expect("nab");
    let vb = b1.velero_backup_name().expect("velero backup").to_string();
    let backup = w.velero::<Backup>().get(&vb).await.expect("velero backup");
    assert_eq!(backup.spec.storage_location.as_deref(), Some(uuid.as_str()));
    let keys = w.tenant_keys(&format!("ns-a/team/backups/{vb}/")).await;
    assert!(!keys.is_empty(), "nothing under ns-a/team");
    assert!(
        w.tenant_keys("")
            .await
            .iter()
            .all(|k| k.starts_with("ns-a/team/")),
        "everything of the location stays under ns-a/team/"
    );

    // A download of that backup's contents: a working URL on loopback.
    created_download(
        &nadrs_a,
        nadr("contents", DownloadTargetKind::BackupContents, "b1"),
    )
    .await;
    let dl = nadrs_a.get("contents").await.expect("nadr");
    let mirrored = dl
        .status
        .clone()
        .and_then(|s| s.velero)
        .and_then(|v| v.status)
        .expect("mirrored");
    let url = mirrored.download_url.clone().expect("url");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(mirrored.expiration.is_some());
    let velero_name = format!("nadr-{}", dl.uid().expect("uid"));
    let dr = w
        .velero::<DownloadRequest>()
        .get(&velero_name)
        .await
        .expect("velero download request");
    assert_eq!(dr.spec.target.name, vb);
    assert_eq!(
        dr.annotations()["openshift.io/oadp-nadr-origin-namespace"],
        "ns-a"
    );
    let body = reqwest::get(&url).await.expect("get");
    assert_eq!(body.status(), 200);
    let key = StorageLayout::new(TENANTS, Some("ns-a/team"))
        .expect("layout")
        .backup(&vb)
        .expect("keys")
        .contents();
    assert_eq!(
        body.bytes().await.expect("body").to_vec(),
        granary_providers::get_bytes(w.store.as_ref(), TENANTS, &key)
            .await
            .expect("object")
            .to_vec()
    );

    // A restore from it, and its log, downloaded the same way.
    cms_a
        .delete("app", &Default::default())
        .await
        .expect("delete configmap");
    let nars_a: Api<NonAdminRestore> = Api::namespaced(w.owner_a.clone(), "ns-a");
    nars_a
        .create(
            &pp,
            &NonAdminRestore::new(
                "r1",
                NonAdminRestoreSpec {
                    restore_spec: RestoreSpec {
                        backup_name: Some("b1".into()),
                        ..Default::default()
                    },
                },
            ),
        )
        .await
        .expect("nar");
    poll_until("r1 restored", || async {
        nars_a
            .get("r1")
            .await
            .ok()
            .and_then(|r| r.status)
            .and_then(|s| s.velero_restore)
            .and_then(|v| v.status)
            .and_then(|s| s.phase)
            == Some(RestorePhase::Completed)
    })
    .await;
    assert!(cms_a.get_opt("app").await.expect("get").is_some());
    let vr = nars_a
        .get("r1")
        .await
        .expect("nar")
        .velero_restore_name()
        .expect("velero restore")
        .to_string();
    created_download(
        &nadrs_a,
        nadr("restore-log", DownloadTargetKind::RestoreLog, "r1"),
    )
    .await;
    let url = nadrs_a
        .get("restore-log")
        .await
        .expect("nadr")
        .status
        .and_then(|s| s.velero)
        .and_then(|v| v.status)
        .and_then(|s| s.download_url)
        .expect("url");
    let body = reqwest::get(&url).await.expect("get");
    assert_eq!(body.status(), 200);
    let key = StorageLayout::new(TENANTS, Some("ns-a/team"))
        .expect("layout")
        .restore(&vr)
        .expect("keys")
        .logs();
    assert_eq!(
        body.bytes().await.expect("body").to_vec(),
        granary_providers::get_bytes(w.store.as_ref(), TENANTS, &key)
            .await
            .expect("object")
            .to_vec()
    );

    // Targets that are not this namespace's own location's backups are refused.
    let nabs_b: Api<NonAdminBackup> = Api::namespaced(w.owner_b.clone(), "ns-b");
    nabs_b
        .create(&pp, &nab("theirs", None))
        .await
        .expect("nab b");
    nabs_a
        .create(&pp, &nab("plain", None))
        .await
        .expect("nab plain");
    for (name, target, condition_type) in [
        ("other-ns", "theirs", "NonAdminBackupNotAvailable"),
        (
            "default-location",
            "plain",
            "NonAdminBackupStorageLocationNotUsed",
        ),
    ] {
        nadrs_a
            .create(&pp, &nadr(name, DownloadTargetKind::BackupLog, target))
            .await
            .expect("nadr");
        poll_until(&format!("{name} refused"), || async {
            nadrs_a
                .get(name)
                .await
                .expect("nadr")
                .status
                .and_then(|s| s.phase)
                == Some(NonAdminPhase::BackingOff)
        })
        .await;
        let v = json_of(&nadrs_a, name).await;
        let c = condition(&v, condition_type).unwrap_or_else(|| panic!("{v}"));
        assert_eq!(c["status"], "True");
        assert!(
            c["message"]
                .as_str()
                .unwrap_or_default()
                .contains("spec.target.name"),
            "{v}"
        );
    }
    // Into ns-b directly: forbidden.
    let nadrs_b_as_a: Api<NonAdminDownloadRequest> = Api::namespaced(w.owner_a.clone(), "ns-b");
    let forbidden = nadrs_b_as_a
        .create(&pp, &nadr("sneak", DownloadTargetKind::BackupLog, "theirs"))
        .await
        .expect_err("forbidden");
    assert!(
        matches!(forbidden, kube::Error::Api(ref s) if s.code == 403),
        "{forbidden}"
    );
    let nadr_names: Vec<String> = w.velero_names::<DownloadRequest>().await;
    assert_eq!(
        nadr_names.len(),
        2,
        "only the served ones exist: {nadr_names:?}"
    );
    assert!(nadr_names.contains(&velero_name));

    // After the URLs expire the requests and their Velero DownloadRequests go.
    w.clock.advance(chrono::TimeDelta::minutes(11));
    poll_until("expired downloads removed", || async {
        nadrs_a.get_opt("contents").await.expect("get").is_none()
            && nadrs_a.get_opt("restore-log").await.expect("get").is_none()
            && w.velero_names::<DownloadRequest>().await.is_empty()
    })
    .await;

    // Deleting the location removes the Velero location and the Secret copy.
    nabsls_a
        .delete("mine", &Default::default())
        .await
        .expect("delete");
    poll_until("location removed", || async {
        nabsls_a.get_opt("mine").await.expect("get").is_none()
            && w.velero::<BackupStorageLocation>()
                .get_opt(&uuid)
                .await
                .expect("get")
                .is_none()
            && w.velero::<Secret>()
                .get_opt(&uuid)
                .await
                .expect("get")
                .is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn location_tricks_and_the_enforced_spec_are_refused_with_nothing_created() {
    let w = start(|s| {
        let enforced = &mut s.non_admin.enforce_bsl_spec;
        enforced.object_storage.bucket = TENANTS.into();
        enforced.config = Some([("region".to_string(), "tenant-region".to_string())].into());
    })
    .await;
    let pp = PostParams::default();
    let nabsls_a: Api<NonAdminBackupStorageLocation> = Api::namespaced(w.owner_a.clone(), "ns-a");
    let nabsls_b: Api<NonAdminBackupStorageLocation> = Api::namespaced(w.owner_b.clone(), "ns-b");
    w.secret(&w.owner_a, "ns-a", "creds").await;
    w.secret(&w.owner_b, "ns-b", "creds-b").await;
    // ns-b's own location, which ns-a must never be able to use.
    nabsls_b
        .create(&pp, &nabsl("theirs", TENANTS, None, "creds-b"))
        .await
        .expect("nabsl b");
    let theirs = wait_available(&nabsls_b, "theirs").await;
    let theirs_location = w
        .velero::<BackupStorageLocation>()
        .get(&uuid_of(&theirs))
        .await
        .expect("location b");
    assert_eq!(
        theirs_location.spec.object_storage.prefix.as_deref(),
        Some("ns-b")
    );
    // Filled from the enforced spec.
    assert_eq!(
        theirs_location.spec.config.expect("config")["region"],
        "tenant-region"
    );
    // An administrator's location in the tenants' bucket, right where ns-a's "shared"
    // prefix would put a location of ns-a.
    let admins = BackupStorageLocation::new(
        "admins-in-tenants",
        BackupStorageLocationSpec {
            provider: "local".into(),
            object_storage: ObjectStorageLocation {
                bucket: TENANTS.into(),
                prefix: Some("ns-a/shared".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    w.velero::<BackupStorageLocation>()
        .create(&pp, &admins)
        .await
        .expect("admin location");
    let before_locations = w.velero_names::<BackupStorageLocation>().await;
    let before_secrets = w.velero_names::<Secret>().await;

    let tricks: Vec<(&str, NonAdminBackupStorageLocation, &str)> = vec![
        (
            "dotdot",
            nabsl("dotdot", TENANTS, Some("../ns-b"), "creds"),
            "spec.backupStorageLocationSpec.objectStorage.prefix",
        ),
        (
            "up",
            nabsl("up", TENANTS, Some(".."), "creds"),
            "spec.backupStorageLocationSpec.objectStorage.prefix",
        ),
        (
            "absolute",
            nabsl("absolute", TENANTS, Some("/ns-b"), "creds"),
            "spec.backupStorageLocationSpec.objectStorage.prefix",
        ),
        (
            "shared",
            nabsl("shared", TENANTS, Some("shared"), "creds"),
            "spec.backupStorageLocationSpec.objectStorage.prefix",
        ),
        (
            "their-secret",
            nabsl("their-secret", TENANTS, None, "creds-b"),
            "spec.backupStorageLocationSpec.credential.name",
        ),
        (
            "other-bucket",
            nabsl("other-bucket", BUCKET, None, "creds"),
            "spec.backupStorageLocationSpec.objectStorage.bucket",
        ),
    ];
    for (name, body, field) in &tricks {
        nabsls_a.create(&pp, body).await.expect("create");
        let m = wait_refused(&nabsls_a, name).await;
        assert!(m.contains(field), "{name}: {m}");
        if *name == "other-bucket" {
            assert!(m.contains("the administrator has restricted"), "{m}");
        }
    }
    // A NonAdminBackup naming ns-b's location by its name is refused too.
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(w.owner_a.clone(), "ns-a");
    nabs_a
        .create(&pp, &nab("into-theirs", Some("theirs")))
        .await
        .expect("nab");
    let m = wait_refused(&nabs_a, "into-theirs").await;
    assert!(m.contains("spec.backupSpec.storageLocation"), "{m}");
    // Nothing was created for any of them.
    assert_eq!(
        w.velero_names::<BackupStorageLocation>().await,
        before_locations
    );
    assert_eq!(w.velero_names::<Secret>().await, before_secrets);
    assert!(w.velero_names::<Backup>().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_approval_required_nothing_is_created_until_an_admin_approves() {
    let w = start(|s| s.non_admin.require_approval_for_bsl = true).await;
    let pp = PostParams::default();
    let nabsls_a: Api<NonAdminBackupStorageLocation> = Api::namespaced(w.owner_a.clone(), "ns-a");
    let requests = w.velero::<NonAdminBackupStorageLocationRequest>();
    w.secret(&w.owner_a, "ns-a", "creds").await;
    nabsls_a
        .create(&pp, &nabsl("asks", TENANTS, Some("p"), "creds"))
        .await
        .expect("nabsl");
    poll_until("approval requested", || async {
        let v = json_of(&nabsls_a, "asks").await;
        condition(&v, "ClusterAdminApproved").is_some_and(|c| c["status"] == "False")
    })
    .await;
    let asks = nabsls_a.get("asks").await.expect("nabsl");
    let uuid = uuid_of(&asks);
    assert_eq!(
        asks.status.clone().and_then(|s| s.phase),
        Some(NonAdminPhase::New)
    );
    poll_until("request filed", || async {
        requests
            .get_opt(&uuid)
            .await
            .expect("get")
            .and_then(|r| r.status)
            .and_then(|s| s.phase)
            .is_some()
    })
    .await;
    let request = json_of(&requests, &uuid).await;
    assert_eq!(request["spec"]["approvalDecision"], "pending");
    assert_eq!(request["status"]["phase"], "Pending");
    let source = &request["status"]["nonAdminBackupStorageLocation"];
    assert_eq!(source["namespace"], "ns-a");
    assert_eq!(source["name"], "asks");
    assert_eq!(source["requestedSpec"]["objectStorage"]["prefix"], "p");
    // Nothing for the owner yet, and the request is out of the owner's reach.
    assert!(
        w.velero::<BackupStorageLocation>()
            .get_opt(&uuid)
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        w.velero::<Secret>()
            .get_opt(&uuid)
            .await
            .expect("get")
            .is_none()
    );
    let r = Api::<NonAdminBackupStorageLocationRequest>::namespaced(w.owner_a.clone(), VELERO)
        .get(&uuid)
        .await;
    assert!(
        matches!(r, Err(kube::Error::Api(ref s)) if s.code == 403),
        "{r:?}"
    );

    let decide = |decision: &'static str, name: String| {
        let requests = requests.clone();
        async move {
            requests
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"approvalDecision": decision}})),
                )
                .await
                .expect("decide");
        }
    };
    decide("approve", uuid.clone()).await;
    wait_available(&nabsls_a, "asks").await;
    let v = json_of(&nabsls_a, "asks").await;
    assert_eq!(
        condition(&v, "ClusterAdminApproved").expect("approved")["status"],
        "True"
    );
    assert!(
        w.velero::<Secret>()
            .get_opt(&uuid)
            .await
            .expect("get")
            .is_some()
    );
    poll_until("request Approved", || async {
        json_of(&requests, &uuid).await["status"]["phase"] == "Approved"
    })
    .await;

    // A changed spec needs a new approval; the approved one stays in use meanwhile.
    nabsls_a
        .patch(
            "asks",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"backupStorageLocationSpec": {"config": {"k": "v"}}}})),
        )
        .await
        .expect("change");
    poll_until("change waits for approval", || async {
        let v = json_of(&nabsls_a, "asks").await;
        condition(&v, "SpecUpdateApproved").is_some_and(|c| c["status"] == "False")
    })
    .await;
    let request = json_of(&requests, &uuid).await;
    assert_eq!(request["spec"]["approvalDecision"], "pending");
    assert_eq!(request["status"]["phase"], "Pending");
    assert_eq!(
        request["status"]["nonAdminBackupStorageLocation"]["requestedSpec"]["config"]["k"],
        "v"
    );
    let location = w
        .velero::<BackupStorageLocation>()
        .get(&uuid)
        .await
        .expect("location");
    assert!(!location.spec.config.unwrap_or_default().contains_key("k"));
    decide("approve", uuid.clone()).await;
    poll_until("change applied", || async {
        w.velero::<BackupStorageLocation>()
            .get(&uuid)
            .await
            .expect("location")
            .spec
            .config
            .unwrap_or_default()
            .contains_key("k")
    })
    .await;
    poll_until("update approved", || async {
        let v = json_of(&nabsls_a, "asks").await;
        condition(&v, "SpecUpdateApproved").is_some_and(|c| c["status"] == "True")
    })
    .await;

    // A rejected location gets nothing and says so.
    nabsls_a
        .create(&pp, &nabsl("refused", TENANTS, Some("q"), "creds"))
        .await
        .expect("nabsl");
    poll_until("second request filed", || async {
        nabsls_a
            .get("refused")
            .await
            .ok()
            .and_then(|n| n.status)
            .and_then(|s| s.velero_backup_storage_location)
            .and_then(|v| v.nacuuid)
            .is_some()
    })
    .await;
    let refused_uuid = uuid_of(&nabsls_a.get("refused").await.expect("nabsl"));
    poll_until("second request exists", || async {
        requests
            .get_opt(&refused_uuid)
            .await
            .expect("get")
            .is_some()
    })
    .await;
    decide("reject", refused_uuid.clone()).await;
    poll_until("rejected", || async {
        let v = json_of(&nabsls_a, "refused").await;
        v["status"]["phase"] == "BackingOff"
            && condition(&v, "ClusterAdminApproved")
                .is_some_and(|c| c["status"] == "False" && c["reason"] == "BslSpecRejected")
    })
    .await;
    assert!(
        w.velero::<BackupStorageLocation>()
            .get_opt(&refused_uuid)
            .await
            .expect("get")
            .is_none()
    );
    poll_until("request Rejected", || async {
        json_of(&requests, &refused_uuid).await["status"]["phase"] == "Rejected"
    })
    .await;
}

/// Labels and annotations NAC puts on an object made for the NABSL `ns/name` under `uuid`.
fn nac_location_meta(obj: &mut kube::api::ObjectMeta, ns: &str, name: &str, uuid: &str) {
    obj.labels = Some(
        [
            ("openshift.io/oadp", "True"),
            ("app.kubernetes.io/managed-by", "oadp-nac-controller"),
            ("openshift.io/oadp-nabsl-origin-nacuuid", uuid),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into(),
    );
    obj.annotations = Some(
        [
            ("openshift.io/oadp-nabsl-origin-name", name),
            ("openshift.io/oadp-nabsl-origin-namespace", ns),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_picks_the_local_provider_only_when_the_admin_enforces_it() {
    let w = start(|s| s.non_admin.enforce_bsl_spec.provider = String::new()).await;
    let pp = PostParams::default();
    let nabsls_a: Api<NonAdminBackupStorageLocation> = Api::namespaced(w.owner_a.clone(), "ns-a");
    w.secret(&w.owner_a, "ns-a", "creds").await;
    let before_locations = w.velero_names::<BackupStorageLocation>().await;
    let before_secrets = w.velero_names::<Secret>().await;
    nabsls_a
        .create(&pp, &nabsl("on-server-disk", TENANTS, None, "creds"))
        .await
        .expect("create");
    let m = wait_refused(&nabsls_a, "on-server-disk").await;
    assert!(m.contains("spec.backupStorageLocationSpec.provider"), "{m}");
    assert!(m.contains("nonAdmin.enforceBSLSpec.provider"), "{m}");
    assert_eq!(
        w.velero_names::<BackupStorageLocation>().await,
        before_locations
    );
    assert_eq!(w.velero_names::<Secret>().await, before_secrets);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn location_objects_of_gone_locations_are_garbage_collected() {
    let w = start(|s| {
        s.non_admin.garbage_collection_period = ConfigDuration(Duration::from_secs(1));
    })
    .await;
    let pp = PostParams::default();
    let nabsls_a: Api<NonAdminBackupStorageLocation> = Api::namespaced(w.owner_a.clone(), "ns-a");
    w.secret(&w.owner_a, "ns-a", "creds").await;
    nabsls_a
        .create(&pp, &nabsl("kept", TENANTS, None, "creds"))
        .await
        .expect("create nabsl");
    let kept = uuid_of(&wait_available(&nabsls_a, "kept").await);
    // What a NABSL removed while no controller ran (its finalizer dropped) leaves behind.
    let orphan = "ns-a-gone-0123456789";
    let mut location = BackupStorageLocation::new(
        orphan,
        BackupStorageLocationSpec {
            provider: "local".into(),
            object_storage: ObjectStorageLocation {
                bucket: TENANTS.into(),
                prefix: Some("ns-a/gone".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    nac_location_meta(&mut location.metadata, "ns-a", "gone", orphan);
    w.velero::<BackupStorageLocation>()
        .create(&pp, &location)
        .await
        .expect("orphan location");
    let mut secret = Secret::default();
    secret.metadata.name = Some(orphan.into());
    nac_location_meta(&mut secret.metadata, "ns-a", "gone", orphan);
    w.velero::<Secret>()
        .create(&pp, &secret)
        .await
        .expect("orphan secret");
    let mut request = NonAdminBackupStorageLocationRequest::new(orphan, Default::default());
    nac_location_meta(&mut request.metadata, "ns-a", "gone", orphan);
    w.velero::<NonAdminBackupStorageLocationRequest>()
        .create(&pp, &request)
        .await
        .expect("orphan request");
    // The administrator's own Secret, named like NAC's but without its labels.
    let mut admins = Secret::default();
    admins.metadata.name = Some("ns-a-gone-admins".into());
    admins.metadata.annotations = Some(
        [(
            "openshift.io/oadp-nabsl-origin-namespace".to_string(),
            "ns-a".to_string(),
        )]
        .into(),
    );
    w.velero::<Secret>()
        .create(&pp, &admins)
        .await
        .expect("admin secret");

    poll_until("orphans collected", || async {
        !w.velero_names::<BackupStorageLocation>()
            .await
            .contains(&orphan.to_string())
            && !w
                .velero_names::<Secret>()
                .await
                .contains(&orphan.to_string())
            && !w
                .velero_names::<NonAdminBackupStorageLocationRequest>()
                .await
                .contains(&orphan.to_string())
    })
    .await;
    let locations = w.velero_names::<BackupStorageLocation>().await;
    assert!(
        locations.contains(&kept) && locations.contains(&"default".to_string()),
        "{locations:?}"
    );
    let secrets = w.velero_names::<Secret>().await;
    assert!(
        secrets.contains(&kept) && secrets.contains(&"ns-a-gone-admins".to_string()),
        "{secrets:?}"
    );
    wait_available(&nabsls_a, "kept").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_delete_on_an_own_location_and_the_sync_brings_the_backup_back() {
    let w = start(|s| {
        // Velero's sync notices a new location within the server's period; a location's
        // own period must stay below NAC's.
        s.backup_sync_period = ConfigDuration(Duration::from_secs(1));
        s.non_admin.backup_sync_period = ConfigDuration(Duration::from_secs(2));
    })
    .await;
    let pp = PostParams::default();
    let nabsls_a: Api<NonAdminBackupStorageLocation> = Api::namespaced(w.owner_a.clone(), "ns-a");
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(w.owner_a.clone(), "ns-a");
    w.secret(&w.owner_a, "ns-a", "creds").await;
    let mut body = nabsl("mine", TENANTS, Some("team"), "creds");
    body.spec.backup_storage_location_spec.backup_sync_period = Some("1s".parse().expect("1s"));
    nabsls_a.create(&pp, &body).await.expect("create nabsl");
    wait_available(&nabsls_a, "mine").await;
    nabs_a
        .create(&pp, &nab("keep", Some("mine")))
        .await
        .expect("nab");
    granary_test_support::worlds::nonadmin::wait_backed_up(&nabs_a, "keep").await;
    let first = nabs_a.get("keep").await.expect("nab");
    let vb = first.velero_backup_name().expect("velero name").to_string();
    let keys = w.tenant_keys(&format!("ns-a/team/backups/{vb}/")).await;
    assert!(!keys.is_empty());
    nabs_a
        .delete("keep", &DeleteParams::default())
        .await
        .expect("plain delete");
    // Velero's sync brings the Backup back from ns-a's own location (due on the test's
    // clock, moved on here), NAC's sync the NAB, naming that location again, which takes
    // over the same Velero Backup.
    let old_uid = first.uid();
    poll_until("keep recreated by the sync", || async {
        w.clock.advance(chrono::TimeDelta::seconds(2));
        nabs_a
            .get_opt("keep")
            .await
            .ok()
            .flatten()
            .is_some_and(|n| {
                n.uid() != old_uid
                    && n.status.as_ref().and_then(|s| s.phase) == Some(NonAdminPhase::Created)
            })
    })
    .await;
    let synced = nabs_a.get("keep").await.expect("nab");
    assert_eq!(
        synced.labels()["openshift.io/oadp-nab-synced-from-nacuuid"],
        vb
    );
    assert_eq!(
        synced.spec.backup_spec.storage_location.as_deref(),
        Some("mine")
    );
    assert_eq!(synced.velero_backup_name(), Some(vb.as_str()));
    assert_eq!(
        w.tenant_keys(&format!("ns-a/team/backups/{vb}/")).await,
        keys,
        "data kept"
    );
    assert_eq!(
        w.velero_names::<Backup>().await,
        vec![vb],
        "no second Velero Backup was made"
    );
}
