//! Seed isolation in the garden, end to end: `granary garden` (the binary) serves its
//! seed authorization webhook over HTTPS on 127.0.0.1 with a certificate made here; two
//! seeds each have a bucket, an entry and credentials in the garden; SubjectAccessReviews
//! and AdmissionReviews posted as kube-apiserver posts them are answered from the
//! garden's objects: each seed is refused the other's bucket, entry and credentials, and
//! allowed its own; a seed the garden made a reader of a bucket may read it and its
//! credentials, and write or delete nothing of it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use granary_api::common::ObjectReference;
use granary_api::core::{
    BackupBucket, BackupBucketSpec, BackupEntry, BackupEntrySpec, LABEL_POOL_KIND, LABEL_SEED,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

use granary_test_support::garden::garden_cluster;
use granary_test_support::{TestCluster, http_get, poll_until};

/// A CA (PEM) and a serving certificate and key for 127.0.0.1 signed by it.
struct TestTls {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

fn test_tls() -> TestTls {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key")).expect("CA");
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("leaf params");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().expect("leaf key");
    let cert = leaf.signed_by(&key, &ca).expect("leaf signed");
    TestTls {
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

/// POSTs `body` to `path` over HTTPS, trusting only `ca_pem`; the response's JSON body.
async fn post(addr: SocketAddr, ca_pem: &str, path: &str, body: &Value) -> Value {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("CA PEM"))
        .expect("CA added");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let name = ServerName::try_from("127.0.0.1").expect("server name");
    let mut tls = connector.connect(name, tcp).await.expect("TLS handshake");
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes())
        .await
        .expect("request sent");
    // Read until the announced body is complete (a peer closing without close_notify
    // must not fail the read of a complete response).
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let text = String::from_utf8_lossy(&raw).to_string();
        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .expect("content-length");
            if rest.len() >= length {
                assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{rest}");
                return serde_json::from_str(&rest[..length]).expect("JSON body");
            }
        }
        match tls.read(&mut buf).await {
            Ok(0) | Err(_) => panic!("response cut short: {text}"),
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
}

/// What kube-apiserver would make of the webhook's answer: `Some(true)` allowed,
/// `Some(false)` denied, `None` no opinion; and the reason (or evaluation error).
async fn review(
    addr: SocketAddr,
    ca: &str,
    user: &str,
    attributes: Value,
) -> (Option<bool>, String) {
    let sar = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", "system:authenticated"],
            "resourceAttributes": attributes,
        },
    });
    let answer = post(addr, ca, "/authorize", &sar).await;
    let status = &answer["status"];
    if let Some(error) = status["evaluationError"].as_str() {
        return (None, error.to_string());
    }
    let verdict = match (status["allowed"].as_bool(), status["denied"].as_bool()) {
        (Some(true), _) => Some(true),
        (_, Some(true)) => Some(false),
        _ => None,
    };
    let reason = status["reason"].as_str().unwrap_or_default().to_string();
    (verdict, reason)
}

fn seed_user(seed: &str) -> String {
    format!("system:serviceaccount:granary-system:granary-seed-{seed}")
}

fn core(verb: &str, resource: &str, namespace: &str, name: &str) -> Value {
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    let group = match resource {
        "secrets" => "",
        "leases" => "coordination.k8s.io",
        _ => "core.gardener.cloud",
    };
    json!({"verb": verb, "group": group, "resource": resource, "subresource": subresource,
           "namespace": namespace, "name": name})
}

/// One seed's objects: a bucket assigned to it, its credentials and an entry in it.
struct SeedObjects {
    seed: String,
    bucket: String,
    secret: String,
    entry: String,
}

async fn create_seed_objects(tc: &TestCluster, project: &str, base: &str) -> SeedObjects {
    let seed = tc.name(base);
    let bucket = tc.name(&format!("{base}-bucket"));
    let secret = tc.name(&format!("{base}-creds"));
    let entry = tc.name(&format!("shoot--{base}"));
    let labels = BTreeMap::from([tc.instance_label(), (LABEL_SEED.to_string(), seed.clone())]);

    let mut s = Secret::default();
    s.metadata.name = Some(secret.clone());
    s.data = Some(BTreeMap::from([(
        "accessKeyID".to_string(),
        ByteString(format!("key-of-{base}").into_bytes()),
    )]));
    Api::<Secret>::namespaced(tc.client(), "garden")
        .create(&PostParams::default(), &s)
        .await
        .expect("secret created");
    let mut b = BackupBucket::new(
        &bucket,
        BackupBucketSpec {
            seed_name: Some(seed.clone()),
            credentials_ref: Some(ObjectReference {
                api_version: "v1".into(),
                kind: "Secret".into(),
                namespace: "garden".into(),
                name: secret.clone(),
                ..ObjectReference::default()
            }),
            ..BackupBucketSpec::default()
        },
    );
    b.spec.provider.type_ = "local".into();
    b.spec.provider.region = "eu-1".into();
    b.metadata.labels = Some(labels.clone());
    Api::<BackupBucket>::all(tc.client())
        .create(&PostParams::default(), &b)
        .await
        .expect("bucket created");
    let mut e = BackupEntry::new(
        &entry,
        BackupEntrySpec {
            bucket_name: bucket.clone(),
            seed_name: Some(seed.clone()),
            ..BackupEntrySpec::default()
        },
    );
    e.metadata.labels = Some(labels);
    Api::<BackupEntry>::namespaced(tc.client(), project)
        .create(&PostParams::default(), &e)
        .await
        .expect("entry created");
    SeedObjects {
        seed,
        bucket,
        secret,
        entry,
    }
}

/// The address logged with the first JSON log line whose message contains `what`.
fn logged_address(log: &Path, what: &str) -> Option<SocketAddr> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["message"].as_str().is_some_and(|m| m.contains(what)))
        .and_then(|l| l["address"].as_str()?.parse().ok())
}

/// Starts `granary garden` with the webhook on 127.0.0.1 (a free port); returns the
/// child, the webhook's address and the health/metrics address, read from its log.
async fn start_garden(
    tc: &TestCluster,
    dir: &Path,
    tls: &TestTls,
) -> (Child, SocketAddr, SocketAddr) {
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, &tls.cert_pem).expect("cert written");
    std::fs::write(&key, &tls.key_pem).expect("key written");
    let config = dir.join("garden.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: granary.gardener.cloud/v1alpha1\nkind: GardenConfiguration\n\
             leaderElection: {{enabled: false}}\nseedAuthorization:\n  \
             bindAddress: 127.0.0.1:0\n  tlsCertFile: {}\n  tlsKeyFile: {}\n",
            cert.display(),
            key.display()
        ),
    )
    .expect("config written");
    let log = dir.join("garden.log");
    let child = Command::new(env!("CARGO_BIN_EXE_granary"))
        .args(["--log-format", "json", "garden"])
        .arg("--kubeconfig")
        .arg(&tc.garden.kubeconfig_path)
        .arg("--config")
        .arg(&config)
        .args(["--object-selector", &tc.object_selector])
        .args(["--metrics-bind-address", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .env_remove("GRANARY_FAILPOINTS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("granary garden starts");
    poll_until("the addresses in the log", || {
        std::future::ready(
            logged_address(&log, "seed authorization webhook").is_some()
                && logged_address(&log, "/metrics").is_some(),
        )
    })
    .await;
    let webhook = logged_address(&log, "seed authorization webhook").expect("polled");
    let health = logged_address(&log, "/metrics").expect("polled");
    (child, webhook, health)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_is_refused_another_seeds_bucket_entry_and_credentials() {
    let tc = garden_cluster().await;
    let project = tc.namespace("garden-authz").await;
    let a = create_seed_objects(&tc, &project, "sa").await;
    let b = create_seed_objects(&tc, &project, "sb").await;
    let dir = tempfile::tempdir().expect("temp dir");
    let tls = test_tls();
    let (mut child, addr, health) = start_garden(&tc, dir.path(), &tls).await;
    let ca = tls.ca_pem.as_str();
    let user_a = seed_user(&a.seed);

    // The caches fill after start: until then the answer is an evaluation error. (A get
    // of an entry the caches lack is allowed, so wait for the other's entry refused.)
    for (me, other) in [(&a, &b), (&b, &a)] {
        poll_until("the webhook's caches hold both seeds' objects", || {
            let user = seed_user(&me.seed);
            let (ca, project) = (ca.to_string(), project.clone());
            let (secret, entry) = (me.secret.clone(), other.entry.clone());
            async move {
                let theirs = core("get", "backupentries", &project, &entry);
                let creds = core("get", "secrets", "garden", &secret);
                review(addr, &ca, &user, theirs).await.0 == Some(false)
                    && review(addr, &ca, &user, creds).await.0 == Some(true)
            }
        })
        .await;
    }

    for (me, other) in [(&a, &b), (&b, &a)] {
        let user = seed_user(&me.seed);
        let cases = [
            (core("get", "backupbuckets", "", &me.bucket), true),
            (core("patch", "backupbuckets/status", "", &me.bucket), true),
            (core("get", "backupentries", &project, &me.entry), true),
            (
                core("patch", "backupentries/status", &project, &me.entry),
                true,
            ),
            (core("get", "secrets", "garden", &me.secret), true),
            (core("get", "backupbuckets", "", &other.bucket), false),
            (core("patch", "backupbuckets", "", &other.bucket), false),
            (core("get", "backupentries", &project, &other.entry), false),
            (
                core("patch", "backupentries/status", &project, &other.entry),
                false,
            ),
            (core("get", "secrets", "garden", &other.secret), false),
            (core("list", "secrets", "garden", ""), false),
            // liveness: its own Lease only
            (
                core("update", "leases", "garden", &format!("seed-{}", me.seed)),
                true,
            ),
            (
                core(
                    "update",
                    "leases",
                    "garden",
                    &format!("seed-{}", other.seed),
                ),
                false,
            ),
        ];
        for (attributes, allowed) in cases {
            let (verdict, reason) = review(addr, ca, &user, attributes.clone()).await;
            assert_eq!(verdict, Some(allowed), "{} {attributes}: {reason}", me.seed);
            if !allowed {
                assert!(
                    reason.contains(&me.seed),
                    "the reason names the seed: {reason}"
                );
            }
        }
        // A watch through its own seed label, not through the other's.
        let mut watch = core("watch", "backupentries", "", "");
        let selector = |seed: &str| json!({"requirements": [{"key": LABEL_SEED, "operator": "In", "values": [seed]}]});
        watch["labelSelector"] = selector(&me.seed);
        assert_eq!(review(addr, ca, &user, watch.clone()).await.0, Some(true));
        watch["labelSelector"] = selector(&other.seed);
        assert_eq!(review(addr, ca, &user, watch).await.0, Some(false));
    }
    // A reader of the first seed's bucket (a seed of its pool, labelled by the garden:
    // docs/architecture.md#sibling-locations) reads it and its credentials, and nothing
    // of it can be written, deleted or read beyond that.
    let reader = tc.name("sr");
    let reader_label = granary_api::core::velero_reader_label(&reader);
    Api::<BackupBucket>::all(tc.client())
        .patch(
            &a.bucket,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {&reader_label: "true"}}})),
        )
        .await
        .expect("reader label");
    let user_r = seed_user(&reader);
    poll_until("the webhook sees the reader label", || {
        let (ca, user, bucket) = (ca.to_string(), user_r.clone(), a.bucket.clone());
        async move {
            review(addr, &ca, &user, core("get", "backupbuckets", "", &bucket))
                .await
                .0
                == Some(true)
        }
    })
    .await;
    let by_reader_label = |seed: &str| {
        let mut w = core("watch", "backupbuckets", "", "");
        w["labelSelector"] = json!({"requirements": [{"key": granary_api::core::velero_reader_label(seed), "operator": "In", "values": ["true"]}]});
        w
    };
    let reader_cases = [
        (core("get", "backupbuckets", "", &a.bucket), true),
        (core("get", "secrets", "garden", &a.secret), true),
        (by_reader_label(&reader), true),
        (core("patch", "backupbuckets", "", &a.bucket), false),
        (core("update", "backupbuckets", "", &a.bucket), false),
        (core("patch", "backupbuckets/status", "", &a.bucket), false),
        (core("delete", "backupbuckets", "", &a.bucket), false),
        (core("update", "secrets", "garden", &a.secret), false),
        (core("delete", "secrets", "garden", &a.secret), false),
        (core("get", "backupentries", &project, &a.entry), false),
        (core("create", "backupentries", &project, ""), false),
        (
            core("patch", "backupentries/status", &project, &a.entry),
            false,
        ),
        (core("get", "backupbuckets", "", &b.bucket), false),
        (core("get", "secrets", "garden", &b.secret), false),
        (by_reader_label(&a.seed), false),
    ];
    for (attributes, allowed) in reader_cases {
        let (verdict, reason) = review(addr, ca, &user_r, attributes.clone()).await;
        assert_eq!(verdict, Some(allowed), "reader {attributes}: {reason}");
    }
    // The second seed, no reader of it, is still refused it.
    let theirs = core("get", "backupbuckets", "", &a.bucket);
    assert_eq!(
        review(addr, ca, &seed_user(&b.seed), theirs).await.0,
        Some(false)
    );

    // Anyone else: no opinion (RBAC decides).
    let admin = review(
        addr,
        ca,
        "kubernetes-admin",
        core("get", "secrets", "garden", &b.secret),
    );
    assert_eq!(admin.await.0, None);

    // Admission: seed A may add its finalizer to its bucket, not relabel it legacy.
    let bucket: Value = serde_json::to_value(
        Api::<BackupBucket>::all(tc.client())
            .get(&a.bucket)
            .await
            .expect("bucket"),
    )
    .expect("JSON");
    let admission = |new: &Value| {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "operation": "UPDATE",
                "resource": {"group": "core.gardener.cloud", "version": "v1beta1", "resource": "backupbuckets"},
                "name": a.bucket,
                "userInfo": {"username": user_a, "groups": ["system:serviceaccounts"]},
                "object": new,
                "oldObject": bucket,
            },
        })
    };
    let mut finalized = bucket.clone();
    let mut finalizers = bucket["metadata"]["finalizers"].clone();
    if !finalizers.is_array() {
        finalizers = json!([]);
    }
    finalizers
        .as_array_mut()
        .expect("an array")
        .push(json!("gardener"));
    finalized["metadata"]["finalizers"] = finalizers;
    let answer = post(addr, ca, "/validate", &admission(&finalized)).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let mut relabelled = bucket.clone();
    relabelled["metadata"]["labels"][LABEL_POOL_KIND] = json!("legacy");
    let answer = post(addr, ca, "/validate", &admission(&relabelled)).await;
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(answer["response"]["uid"], "u-1");

    // Ready with the caches filled; the answers are counted.
    assert!(
        http_get(health, "/readyz")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let metrics = http_get(health, "/metrics").await;
    for line in [
        r#"granary_seed_authorization_reviews_total{decision="deny",review="authorize"}"#,
        r#"granary_seed_authorization_reviews_total{decision="allow",review="admit"}"#,
        r#"granary_seed_authorization_reviews_total{decision="deny",review="admit"}"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }

    let _ = child.kill();
    let _ = child.wait();
}
