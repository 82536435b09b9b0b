//! Signed download URLs ([`ObjectStore::presign_get`]) fetched with a plain HTTP client
//! that holds no credential: S3 on moto, Azure on Azurite (which checks the SAS
//! signature, so a tampered URL and one for another blob are refused), GCS on
//! fake-gcs-server (which does not check signatures: the URL must fetch; the signature
//! itself is checked against an independent vector in `gcs_sign`'s unit tests).

mod support;

use std::time::Duration;

use bytes::Bytes;
use granary_providers::gcs_sign::GcsUrlSigner;
use granary_providers::{BucketOptions, ErrorKind};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use support::{Backend, bucket};

const KEY: &str = "backups/b 1/b 1-logs.gz";
const BODY: &[u8] = b"signed bytes";

async fn fetch(url: &str) -> (u16, Bytes) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let uri: hyper::Uri = url.parse().expect("a valid URI");
    let resp = client.get(uri).await.expect("request");
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, body)
}

/// A bucket holding [`KEY`] on `backend`, and the store; `None` when skipped.
async fn seeded(
    backend: Backend,
) -> Option<(std::sync::Arc<dyn granary_providers::ObjectStore>, String)> {
    let (store, _) = support::open(backend, support::options()).await?;
    let b = bucket("presign");
    store
        .ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("bucket");
    store
        .put(&b, KEY, Bytes::from_static(BODY))
        .await
        .expect("put");
    Some((store, b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_urls_fetch_the_object() {
    let Some((store, b)) = seeded(Backend::S3).await else {
        return;
    };
    let url = store
        .presign_get(&b, KEY, Duration::from_secs(600))
        .await
        .expect("sign");
    assert!(url.contains("X-Amz-Signature="), "{url}");
    assert!(url.contains("X-Amz-Expires=600"), "{url}");
    assert!(
        !url.contains("secretAccessKey") && !url.contains("=test&"),
        "{url}"
    );
    assert_eq!(fetch(&url).await, (200, Bytes::from_static(BODY)));

    // Velero's `publicUrl`: URLs name the address clients use (here `localhost` for
    // moto's 127.0.0.1) while Granary talks to the endpoint.
    let endpoint = support::endpoint(Backend::S3).expect("running");
    let public = endpoint.replace("127.0.0.1", "localhost");
    let (_, mut secret) = support::secret_for(Backend::S3, &endpoint);
    secret.insert("publicEndpoint".into(), public.clone().into_bytes());
    let public_store =
        granary_providers::open("aws", Some("us-east-1"), &secret, &support::options())
            .await
            .expect("store");
    let url = public_store
        .presign_get(&b, KEY, Duration::from_secs(600))
        .await
        .expect("sign");
    assert!(url.starts_with(&format!("{public}/{b}/")), "{url}");
    assert_eq!(fetch(&url).await, (200, Bytes::from_static(BODY)));
    store.delete_bucket(&b, true).await.expect("cleanup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_urls_are_read_only_for_one_blob() {
    let Some((store, b)) = seeded(Backend::Azure).await else {
        return;
    };
    store
        .put(&b, "other", Bytes::from_static(b"other"))
        .await
        .expect("put");
    let url = store
        .presign_get(&b, KEY, Duration::from_secs(600))
        .await
        .expect("sign");
    assert!(url.contains("sp=r") && url.contains("sr=b"), "{url}");
    assert_eq!(fetch(&url).await, (200, Bytes::from_static(BODY)));
    // Azurite checks the signature: another blob with this SAS, or a changed one, fails.
    let other = url.replacen("/backups/b%201/b%201-logs.gz?", "/other?", 1);
    assert_ne!(other, url);
    assert_eq!(fetch(&other).await.0, 403, "the SAS names one blob");
    let tampered = url.replacen("sp=r", "sp=rw", 1);
    assert_eq!(fetch(&tampered).await.0, 403);
    store.delete_bucket(&b, true).await.expect("cleanup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcs_urls_fetch_and_anonymous_credentials_cannot_sign() {
    let Some((store, b)) = seeded(Backend::Gcs).await else {
        return;
    };
    // The emulator's store is anonymous: it has no key to sign with, and says so.
    let e = store
        .presign_get(&b, KEY, Duration::from_secs(600))
        .await
        .expect_err("anonymous cannot sign");
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert!(e.message().contains("private key"), "{e}");
    // A service account key signs URLs pointed at the emulator, which serves them.
    let endpoint = support::endpoint(Backend::Gcs).expect("running");
    let json = serde_json::json!({
        "type": "service_account",
        "client_email": "granary-test@example.iam.gserviceaccount.com",
        "private_key": include_str!("../testdata/gcs-test-key.pem"),
    })
    .to_string();
    let signer = GcsUrlSigner::from_service_account_json(&json, Some(&endpoint)).expect("key");
    let url = signer
        .sign_get(&b, KEY, Duration::from_secs(600), None)
        .await
        .expect("sign");
    assert!(url.contains("X-Goog-Signature="), "{url}");
    assert_eq!(fetch(&url).await, (200, Bytes::from_static(BODY)));
    store.delete_bucket(&b, true).await.expect("cleanup");
}

#[tokio::test]
async fn local_cannot_sign() {
    let (store, _dir) = support::open(Backend::Local, support::options())
        .await
        .expect("local");
    let e = store
        .presign_get("b", "k", Duration::from_secs(600))
        .await
        .expect_err("local cannot sign");
    assert!(e.message().contains("local"), "{e}");
}
