//! Credential and hardening tests against servers that check: moto with authentication
//! on (a key created through moto's IAM during its three unauthenticated calls), and
//! Azurite (SAS signatures). Wrong credentials must end as Unauthenticated and never
//! show the secret in the message. S3 bucket hardening is read back with the SDK.

mod support;

use bytes::Bytes;
use granary_providers::{
    BucketOptions, ErrorKind, Immutability, ObjectStore, StoreOptions, get_bytes,
};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use support::{AZURITE_ACCOUNT, Backend, data};

/// One IAM query-API call to moto during its unauthenticated start.
async fn iam(endpoint: &str, form: &[(&str, &str)]) -> String {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let req = http::Request::post(format!("{endpoint}/"))
        .header("host", "iam.amazonaws.com")
        // moto routes by the credential scope's service; the signature is not checked
        // during its first unauthenticated calls.
        .header(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0",
        )
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Full::new(Bytes::from(body)))
        .expect("request");
    let resp = client.request(req).await.expect("IAM call");
    let status = resp.status();
    let text = String::from_utf8(
        resp.into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .to_vec(),
    )
    .expect("utf8");
    assert!(status.is_success(), "IAM {form:?}: {status} {text}");
    text
}

fn xml_field(xml: &str, name: &str) -> String {
    let open = format!("<{name}>");
    let start = xml.find(&open).unwrap_or_else(|| panic!("{name} in {xml}")) + open.len();
    let end = xml[start..].find('<').expect("closing tag") + start;
    xml[start..end].to_string()
}

async fn s3_store(
    endpoint: &str,
    key_id: &str,
    secret: &str,
    opts: &StoreOptions,
) -> std::sync::Arc<dyn ObjectStore> {
    let d = data(&[
        ("accessKeyID", key_id),
        ("secretAccessKey", secret),
        ("endpoint", endpoint),
        ("s3ForcePathStyle", "true"),
    ]);
    granary_providers::open("aws", Some("us-east-1"), &d, opts)
        .await
        .expect("open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_checks_credentials() {
    support::init();
    let Some(endpoint) = support::emulators::s3_auth() else {
        return;
    };
    iam(
        &endpoint,
        &[
            ("Action", "CreateUser"),
            ("UserName", "granary"),
            ("Version", "2010-05-08"),
        ],
    )
    .await;
    let key = iam(
        &endpoint,
        &[
            ("Action", "CreateAccessKey"),
            ("UserName", "granary"),
            ("Version", "2010-05-08"),
        ],
    )
    .await;
    let policy =
        r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#;
    iam(
        &endpoint,
        &[
            ("Action", "PutUserPolicy"),
            ("UserName", "granary"),
            ("PolicyName", "all"),
            ("PolicyDocument", policy),
            ("Version", "2010-05-08"),
        ],
    )
    .await;
    let key_id = xml_field(&key, "AccessKeyId");
    let secret = xml_field(&key, "SecretAccessKey");
    let opts = support::options();

    let good = s3_store(&endpoint, &key_id, &secret, &opts).await;
    let b = support::bucket("auth");
    good.ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("good key creates");
    good.put(&b, "k", Bytes::from_static(b"v"))
        .await
        .expect("good key puts");
    assert_eq!(
        get_bytes(good.as_ref(), &b, "k")
            .await
            .expect("good key gets"),
        "v"
    );

    // The last character changed (to one it is not: a fixed replacement would leave the
    // secret right whenever it already ends in that character).
    let last = if secret.ends_with('x') { 'y' } else { 'x' };
    let wrong_secret = format!("{}{last}", &secret[..secret.len() - 1]);
    let bad = s3_store(&endpoint, &key_id, &wrong_secret, &opts).await;
    let e = bad
        .put(&b, "k2", Bytes::from_static(b"v"))
        .await
        .expect_err("wrong secret");
    assert_eq!(e.kind(), ErrorKind::Unauthenticated, "{e}");
    assert!(
        !e.message().contains(&wrong_secret) && !e.message().contains(&secret),
        "{e}"
    );
    assert_eq!(
        bad.retry_stats().retries(),
        0,
        "auth failures are not retried"
    );

    let unknown = s3_store(&endpoint, "AKIAUNKNOWNKEY000000", &secret, &opts).await;
    let e = unknown.head(&b, "k").await.expect_err("unknown key id");
    // HEAD has no body: 403 without a code reads as Unauthorized.
    assert!(
        matches!(
            e.kind(),
            ErrorKind::Unauthenticated | ErrorKind::Unauthorized
        ),
        "{e}"
    );
    let e = unknown
        .put(&b, "k3", Bytes::from_static(b"v"))
        .await
        .expect_err("unknown key id");
    assert_eq!(e.kind(), ErrorKind::Unauthenticated, "{e}");
    assert!(!e.message().contains(&secret), "{e}");
}

/// Every hardening step, read back with its own Get* call through the SDK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_hardening_is_read_back() {
    support::init();
    let Some(endpoint) = support::endpoint(Backend::S3) else {
        return;
    };
    // Forced on although the emulator is plain http: it is applied last.
    let opts = StoreOptions {
        tls_only_policy: Some(true),
        ..support::options()
    };
    let store = s3_store(&endpoint, "test", "test", &opts).await;
    let b = support::bucket("hard");
    let lock = Immutability {
        retention_days: 3,
        compliance: false,
    };
    let report = store
        .ensure_bucket(
            &b,
            &BucketOptions {
                immutability: Some(lock),
            },
        )
        .await
        .expect("create hardened");
    assert!(report.created);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);

    let conf = aws_sdk_s3::Config::builder()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            "test", "test", None, None, "test",
        ))
        .endpoint_url(&endpoint)
        .force_path_style(true)
        .build();
    let s3 = aws_sdk_s3::Client::from_conf(conf);
    let enc = s3
        .get_bucket_encryption()
        .bucket(&b)
        .send()
        .await
        .expect("encryption");
    let rule = &enc
        .server_side_encryption_configuration()
        .expect("config")
        .rules()[0];
    assert_eq!(
        rule.apply_server_side_encryption_by_default()
            .expect("default")
            .sse_algorithm(),
        &aws_sdk_s3::types::ServerSideEncryption::Aes256
    );
    let pab = s3
        .get_public_access_block()
        .bucket(&b)
        .send()
        .await
        .expect("public access block");
    let pab = pab.public_access_block_configuration().expect("pab");
    assert_eq!(
        (
            pab.block_public_acls(),
            pab.ignore_public_acls(),
            pab.block_public_policy(),
            pab.restrict_public_buckets()
        ),
        (Some(true), Some(true), Some(true), Some(true))
    );
    let lc = s3
        .get_bucket_lifecycle_configuration()
        .bucket(&b)
        .send()
        .await
        .expect("lifecycle");
    let days = lc.rules()[0]
        .abort_incomplete_multipart_upload()
        .and_then(|a| a.days_after_initiation());
    assert_eq!(days, Some(7));
    let ol = s3
        .get_object_lock_configuration()
        .bucket(&b)
        .send()
        .await
        .expect("object lock");
    let ol = ol.object_lock_configuration().expect("lock config");
    assert_eq!(
        ol.object_lock_enabled(),
        Some(&aws_sdk_s3::types::ObjectLockEnabled::Enabled)
    );
    assert_eq!(
        ol.rule()
            .and_then(|r| r.default_retention())
            .and_then(|d| d.days()),
        Some(3)
    );
    let policy = s3
        .get_bucket_policy()
        .bucket(&b)
        .send()
        .await
        .expect("policy");
    let policy: serde_json::Value =
        serde_json::from_str(policy.policy().expect("policy text")).expect("json");
    assert_eq!(policy["Statement"][0]["Effect"], "Deny");
    assert_eq!(
        policy["Statement"][0]["Condition"]["Bool"]["aws:SecureTransport"],
        "false"
    );

    // Ensuring again is idempotent and keeps the hardening.
    let again = store
        .ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("again");
    assert!(!again.created);
}

/// On an http endpoint without the override, the TLS-only policy is skipped with a
/// warning rather than locking Granary out of its own bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_plain_http_warns_instead_of_locking_out() {
    support::init();
    let Some(endpoint) = support::endpoint(Backend::S3) else {
        return;
    };
    let store = s3_store(&endpoint, "test", "test", &support::options()).await;
    let b = support::bucket("http");
    let report = store
        .ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("create");
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(report.warnings[0].contains("TLS-only"));
    store
        .put(&b, "k", Bytes::from_static(b"v"))
        .await
        .expect("still usable");
    store.delete_bucket(&b, true).await.expect("cleanup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_wrong_key_is_unauthenticated() {
    support::init();
    let Some(endpoint) = support::endpoint(Backend::Azure) else {
        return;
    };
    // A well-formed key that is not the account's.
    let wrong = "d3JvbmdrZXl3cm9uZ2tleXdyb25na2V5d3JvbmdrZXl3cm9uZ2tleXdyb25na2V5";
    let d = data(&[
        ("storageAccount", AZURITE_ACCOUNT),
        ("storageKey", wrong),
        ("endpoint", &endpoint),
    ]);
    let store = granary_providers::open("azure", None, &d, &support::options())
        .await
        .expect("open");
    let e = store
        .ensure_bucket(&support::bucket("azauth"), &BucketOptions::default())
        .await
        .expect_err("wrong key");
    assert!(
        matches!(
            e.kind(),
            ErrorKind::Unauthenticated | ErrorKind::Unauthorized
        ),
        "{e}"
    );
    assert!(!e.message().contains(wrong), "{e}");
    // The SAS signature travels in the URL; it must not reach the message.
    assert!(
        !e.message().contains("sig=") || e.message().contains("sig=<redacted>"),
        "{e}"
    );
    assert_eq!(store.retry_stats().retries(), 0);

    // The right key works against the same server (the test is not vacuous).
    let d = data(&[
        ("storageAccount", AZURITE_ACCOUNT),
        ("storageKey", support::AZURITE_KEY),
        ("endpoint", &endpoint),
    ]);
    let good = granary_providers::open("azure", None, &d, &support::options())
        .await
        .expect("open");
    let b = support::bucket("azauth");
    good.ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("right key");
    good.delete_bucket(&b, true).await.expect("cleanup");
}
