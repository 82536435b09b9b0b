use super::*;
use granary_api::oadp::NonAdminBackupStorageLocationSpec;
use granary_api::velero::ObjectStorageLocation;
use k8s_openapi::ByteString;

fn nabsl(ns: &str, prefix: Option<&str>) -> NonAdminBackupStorageLocation {
    let mut n = NonAdminBackupStorageLocation::new(
        "mine",
        NonAdminBackupStorageLocationSpec {
            backup_storage_location_spec: BackupStorageLocationSpec {
                provider: "aws".into(),
                object_storage: ObjectStorageLocation {
                    bucket: "team-bucket".into(),
                    prefix: prefix.map(String::from),
                    ..Default::default()
                },
                credential: Some(SecretKeySelector {
                    name: "creds".into(),
                    key: "cloud".into(),
                    optional: None,
                }),
                ..Default::default()
            },
        },
    );
    n.metadata.namespace = Some(ns.into());
    n
}

fn paths(errs: &FieldErrors) -> Vec<&str> {
    errs.iter().map(|e| e.path.as_str()).collect()
}

#[test]
fn a_plain_location_is_accepted() {
    let errs = location_problems(
        &nabsl("ns-a", Some("mine")),
        &Default::default(),
        "velero",
        None,
    );
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn prefixes_that_escape_are_refused_naming_the_field() {
    for bad in [
        "..",
        "../ns-b",
        "a/../../ns-b",
        "/abs",
        "a//b",
        "./a",
        "a\\b",
        "a/.",
    ] {
        let errs = location_problems(
            &nabsl("ns-a", Some(bad)),
            &Default::default(),
            "velero",
            None,
        );
        assert_eq!(
            paths(&errs),
            ["spec.backupStorageLocationSpec.objectStorage.prefix"],
            "{bad}: {errs:#?}"
        );
    }
    for good in ["a", "a/b", "a/b/", "a..b", "..a"] {
        let errs = location_problems(
            &nabsl("ns-a", Some(good)),
            &Default::default(),
            "velero",
            None,
        );
        assert!(errs.is_empty(), "{good}: {errs:#?}");
    }
}

#[test]
fn unserved_providers_odd_buckets_ca_refs_and_the_velero_namespace_are_refused() {
    let mut n = nabsl("velero", None);
    n.spec.backup_storage_location_spec.provider = "openstack".into();
    n.spec.backup_storage_location_spec.object_storage.bucket = "..".into();
    n.spec
        .backup_storage_location_spec
        .object_storage
        .ca_cert_ref = Some(SecretKeySelector {
        name: "cloud-credentials".into(),
        key: "cloud".into(),
        optional: None,
    });
    let errs = location_problems(&n, &Default::default(), "velero", None);
    let p = paths(&errs);
    for want in [
        "metadata.namespace",
        "spec.backupStorageLocationSpec.provider",
        "spec.backupStorageLocationSpec.objectStorage.bucket",
        "spec.backupStorageLocationSpec.objectStorage.caCertRef",
    ] {
        assert!(p.contains(&want), "{want} missing from {p:?}");
    }
    let mut slash = nabsl("ns-a", None);
    slash
        .spec
        .backup_storage_location_spec
        .object_storage
        .bucket = "b/../c".into();
    assert_eq!(
        paths(&location_problems(
            &slash,
            &Default::default(),
            "velero",
            None
        )),
        ["spec.backupStorageLocationSpec.objectStorage.bucket"]
    );
}

#[test]
fn the_local_provider_is_the_administrators_choice_only() {
    let mut n = nabsl("ns-a", None);
    for provider in ["local", "granary.gardener.cloud/local"] {
        n.spec.backup_storage_location_spec.provider = provider.into();
        let errs = location_problems(&n, &Default::default(), "velero", None);
        assert_eq!(
            paths(&errs),
            ["spec.backupStorageLocationSpec.provider"],
            "{provider}"
        );
        assert!(
            errs[0].message.contains("nonAdmin.enforceBSLSpec.provider"),
            "{}",
            errs[0].message
        );
    }
    // The administrator enforces it: the user may name it or leave it empty.
    let enforced = BackupStorageLocationSpec {
        provider: "local".into(),
        ..Default::default()
    };
    n.spec.backup_storage_location_spec.provider = "local".into();
    assert!(location_problems(&n, &enforced, "velero", None).is_empty());
    n.spec.backup_storage_location_spec.provider = String::new();
    assert!(location_problems(&n, &enforced, "velero", None).is_empty());
    // Enforcing another provider keeps local out, naming the same field once.
    let aws = BackupStorageLocationSpec {
        provider: "aws".into(),
        ..Default::default()
    };
    n.spec.backup_storage_location_spec.provider = "local".into();
    assert_eq!(
        paths(&location_problems(&n, &aws, "velero", None)),
        ["spec.backupStorageLocationSpec.provider"]
    );
}

#[test]
fn the_enforced_spec_fills_and_rejects() {
    let enforced = BackupStorageLocationSpec {
        config: Some([("region".to_string(), "eu-1".to_string())].into()),
        object_storage: ObjectStorageLocation {
            bucket: "admins-bucket".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let mine = nabsl("ns-a", Some("p"));
    let errs = location_problems(&mine, &enforced, "velero", None);
    assert_eq!(
        paths(&errs),
        ["spec.backupStorageLocationSpec.objectStorage.bucket"]
    );
    assert!(
        errs[0].message.contains("the administrator has restricted"),
        "{errs:?}"
    );
    let mut same = mine.clone();
    same.spec.backup_storage_location_spec.object_storage.bucket = "admins-bucket".into();
    assert!(location_problems(&same, &enforced, "velero", None).is_empty());
    let l = velero_location(&same, &enforced, "velero", "uuid-1");
    assert_eq!(l.spec.config.expect("filled")["region"], "eu-1");
}

#[test]
fn the_velero_location_lives_under_the_namespace_with_the_copied_secret() {
    let n = nabsl("ns-a", Some("/team/"));
    let l = velero_location(&n, &Default::default(), "velero", "ns-a-mine-uuid");
    assert_eq!(l.metadata.name.as_deref(), Some("ns-a-mine-uuid"));
    assert_eq!(l.metadata.namespace.as_deref(), Some("velero"));
    assert_eq!(l.spec.object_storage.prefix.as_deref(), Some("ns-a/team"));
    assert_eq!(l.spec.default, Some(false));
    let c = l.spec.credential.expect("credential");
    assert_eq!(
        (c.name.as_str(), c.key.as_str()),
        ("ns-a-mine-uuid", "cloud")
    );
    assert_eq!(
        l.metadata.labels.as_ref().expect("labels")["openshift.io/oadp-nabsl-origin-nacuuid"],
        "ns-a-mine-uuid"
    );
    assert_eq!(
        l.metadata.annotations.as_ref().expect("annotations")["openshift.io/oadp-nabsl-origin-namespace"],
        "ns-a"
    );
    let bare = velero_location(&nabsl("ns-b", None), &Default::default(), "velero", "u");
    assert_eq!(bare.spec.object_storage.prefix.as_deref(), Some("ns-b"));

    let mut source = Secret::default();
    source.metadata.name = Some("creds".into());
    source.metadata.labels = Some([("openshift.io/oadp".to_string(), "True".to_string())].into());
    source.type_ = Some("Opaque".into());
    source.data = Some([("cloud".to_string(), ByteString(b"k".to_vec()))].into());
    let copy = secret_copy(&source, &n, "velero", "ns-a-mine-uuid");
    assert_eq!(copy.metadata.name.as_deref(), Some("ns-a-mine-uuid"));
    assert_eq!(copy.metadata.namespace.as_deref(), Some("velero"));
    assert_eq!(copy.data, source.data);
    assert_eq!(copy.type_.as_deref(), Some("Opaque"));
    assert_eq!(copy.metadata.labels, Some(nabsl_labels("ns-a-mine-uuid")));
}

#[test]
fn credentials_must_exist_in_the_namespace_with_the_key() {
    let n = nabsl("ns-a", None);
    let missing = credential_problem(&n, None).expect("refused");
    assert_eq!(
        missing.path,
        "spec.backupStorageLocationSpec.credential.name"
    );
    let mut s = Secret {
        data: Some([("other".to_string(), ByteString(vec![]))].into()),
        ..Default::default()
    };
    let no_key = credential_problem(&n, Some(&s)).expect("refused");
    assert_eq!(no_key.path, "spec.backupStorageLocationSpec.credential.key");
    s.data = Some([("cloud".to_string(), ByteString(vec![]))].into());
    assert_eq!(credential_problem(&n, Some(&s)), None);
}

#[test]
fn a_decision_counts_only_for_the_spec_it_was_asked_about() {
    let n = nabsl("ns-a", Some("p"));
    assert_eq!(approval(&n, None), Approval::Missing);
    let mut r = location_request(&n, "velero", "u");
    assert_eq!(r.metadata.name.as_deref(), Some("u"));
    assert_eq!(r.metadata.namespace.as_deref(), Some("velero"));
    assert_eq!(approval(&n, Some(&r)), Approval::Pending);
    r.spec.approval_decision = Some(NonAdminBslRequestDecision::Approve);
    assert_eq!(approval(&n, Some(&r)), Approval::Approved);
    r.spec.approval_decision = Some(NonAdminBslRequestDecision::Reject);
    assert_eq!(approval(&n, Some(&r)), Approval::Rejected);
    // A request whose status (the spec asked about) is not written yet: the decision
    // made meanwhile is kept (not Outdated, which would set it back to pending).
    let mut unfiled = r.clone();
    unfiled.status = None;
    assert_eq!(approval(&n, Some(&unfiled)), Approval::Pending);
    let mut changed = n.clone();
    changed
        .spec
        .backup_storage_location_spec
        .object_storage
        .bucket = "elsewhere".into();
    r.spec.approval_decision = Some(NonAdminBslRequestDecision::Approve);
    assert_eq!(approval(&changed, Some(&r)), Approval::Outdated);
    let status = request_status(&changed, "u", NonAdminBslRequestPhase::Pending);
    r.status = Some(status);
    r.spec.approval_decision = Some(NonAdminBslRequestDecision::Pending);
    assert_eq!(approval(&changed, Some(&r)), Approval::Pending);
}

fn location(
    name: &str,
    provider: &str,
    bucket: &str,
    prefix: Option<&str>,
) -> BackupStorageLocation {
    BackupStorageLocation::new(
        name,
        BackupStorageLocationSpec {
            provider: provider.into(),
            object_storage: ObjectStorageLocation {
                bucket: bucket.into(),
                prefix: prefix.map(String::from),
                ..Default::default()
            },
            ..Default::default()
        },
    )
}

#[test]
fn a_location_never_shares_keys_with_another() {
    let mine = |prefix: &str| location("mine", "aws", "b", Some(prefix));
    let admin_root = location("default", "velero.io/aws", "b", None);
    let admin_velero = location("default", "aws", "b", Some("/velero/"));
    let shared = |m: &BackupStorageLocation, o: &BackupStorageLocation| {
        shared_directory_problem(m, std::slice::from_ref(o))
    };
    // The same directory.
    let e = shared(&mine("velero"), &admin_velero).expect("same root");
    assert_eq!(
        e.path,
        "spec.backupStorageLocationSpec.objectStorage.prefix"
    );
    assert!(!e.message.contains("default"), "{e:?}");
    // Inside another's top-level directory, or the other inside mine's.
    assert!(shared(&mine("backups"), &admin_root).is_some());
    assert!(shared(&mine("velero/backups/x"), &admin_velero).is_some());
    assert!(
        shared(
            &mine("ns-a"),
            &location("o", "aws", "b", Some("ns-a/kopia"))
        )
        .is_some()
    );
    // Beside it, in another bucket, store or provider, or itself: fine.
    assert!(shared(&mine("ns-a/team"), &admin_root).is_none());
    assert!(shared(&mine("ns-a/team"), &admin_velero).is_none());
    assert!(
        shared(
            &mine("velero"),
            &location("default", "aws", "c", Some("velero"))
        )
        .is_none()
    );
    assert!(
        shared(
            &mine("velero"),
            &location("default", "gcp", "b", Some("velero"))
        )
        .is_none()
    );
    let mut elsewhere = location("default", "aws", "b", Some("velero"));
    elsewhere.spec.config = Some([("s3Url".to_string(), "http://other".to_string())].into());
    assert!(shared(&mine("velero"), &elsewhere).is_none());
    assert!(
        shared(
            &mine("velero"),
            &location("mine", "aws", "b", Some("velero"))
        )
        .is_none()
    );
}

#[test]
fn a_tenant_location_stays_off_the_landscape_s_and_the_administrator_s_buckets() {
    let none = BackupStorageLocationSpec::default();
    let pool = "europe-1-eu-0a1b2c3d-1".to_string();
    let admin = location("default", "local", &pool, Some("velero/europe-1"));
    let check =
        |draft: &BackupStorageLocation, enforced: &BackupStorageLocationSpec, allowed: &[&str]| {
            let allowed: Vec<String> = allowed.iter().map(|b| b.to_string()).collect();
            reserved_bucket_problem(
                draft,
                enforced,
                std::slice::from_ref(&admin),
                std::slice::from_ref(&pool),
                &allowed,
            )
            .map(|e| {
                assert_eq!(
                    e.path,
                    "spec.backupStorageLocationSpec.objectStorage.bucket"
                );
                e.message
            })
        };
    // A landscape bucket: never, on any provider, even enforced or allowed.
    for provider in ["local", "aws", "gcp", "azure"] {
        let m = check(
            &location("t", provider, &pool, Some("team-a")),
            &none,
            &[&pool],
        )
        .expect("refused");
        assert!(m.contains("landscape's shoot backups"), "{m}");
    }
    let mut enforced_pool = none.clone();
    enforced_pool.object_storage.bucket = pool.clone();
    assert!(check(&location("t", "local", &pool, None), &enforced_pool, &[]).is_some());
    // An administrator's location's bucket on the same provider: not unless enforced.
    let admin_s3 = location("default", "aws", "velero-backups", None);
    let refused = reserved_bucket_problem(
        &location("t", "velero.io/aws", "velero-backups", Some("team-a")),
        &none,
        std::slice::from_ref(&admin_s3),
        &[],
        &[],
    )
    .expect("refused");
    assert!(
        refused
            .message
            .contains("administrator's backup storage location")
    );
    let mut enforced = none.clone();
    enforced.object_storage.bucket = "velero-backups".into();
    assert_eq!(
        reserved_bucket_problem(
            &location("t", "aws", "velero-backups", Some("team-a")),
            &enforced,
            std::slice::from_ref(&admin_s3),
            &[],
            &[],
        ),
        None
    );
    // The same name at another provider is another bucket.
    assert_eq!(
        reserved_bucket_problem(
            &location("t", "gcp", "velero-backups", Some("team-a")),
            &none,
            std::slice::from_ref(&admin_s3),
            &[],
            &[],
        ),
        None
    );
    // `local`: only an allowed or the enforced bucket.
    let m = check(&location("t", "local", "team-a-backups", None), &none, &[]).expect("refused");
    assert!(m.contains("nonAdmin.allowedLocalBuckets: none"), "{m}");
    assert!(
        check(
            &location("t", "local", "team-a-backups", None),
            &none,
            &["team-a-backups"]
        )
        .is_none()
    );
    let mut enforced_local = none.clone();
    enforced_local.object_storage.bucket = "tenants".into();
    assert!(
        check(
            &location("t", "local", "tenants", None),
            &enforced_local,
            &[]
        )
        .is_none()
    );
    // Other providers' tenant buckets are the tenant's own.
    assert!(check(&location("t", "aws", "team-a-backups", None), &none, &[]).is_none());
}
