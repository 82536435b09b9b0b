//! Credentials end to end on servers that check every request's signature: Azurite
//! (SharedKey) and moto with authentication on (SigV4). A wrong key shows as Error with
//! the precise auth code on the garden bucket and, through it, on its entries; rotating
//! the garden secret to the right key is copied into the seed, used, and heals both
//! without a restart.

use granary_api::common::ErrorCode;
use granary_api::core::{GARDEN_NAMESPACE, bucket_secret_name, entry_secret_name};
use granary_test_support::poll_until;
use granary_test_support::seed::{Backend, Landscape, ensure_namespace};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

/// The secret field of `backend`'s credentials, and a well-formed value that is wrong.
fn secret_field(backend: Backend) -> (&'static str, &'static str) {
    match backend {
        Backend::Azure => (
            "storageKey",
            "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ==",
        ),
        Backend::S3 => (
            "secretAccessKey",
            "wrongwrongwrongwrongwrongwrongwrongwrong",
        ),
        Backend::Local | Backend::Gcs => unreachable!("no credentials checked"),
    }
}

/// A wrong secret key: the bucket shows `expected` (and only it), its entry the same
/// codes; rotating to the right key heals both with no restart.
async fn bad_credentials_heal_after_rotation(backend: Backend, expected: ErrorCode) {
    let Some(l) = Landscape::start_checked(backend).await else {
        return;
    };
    let (field, wrong) = secret_field(backend);
    let good = l.good_credentials();
    let bad: Vec<(String, String)> = good
        .iter()
        .map(|(k, v)| {
            let v = if k == field { wrong } else { v };
            (k.clone(), v.to_string())
        })
        .collect();
    l.set_credentials(&bad).await;
    let agent = l.start_agent(None, l.config("seed-c")).await;

    let bucket = l.bucket_name("cr");
    let project = l.cluster.name("garden-c");
    ensure_namespace(&l.garden, &project).await;
    let (entry, _) = l.entry_name("cr");
    l.create_bucket(&bucket, "seed-c").await;
    l.create_entry(&project, &entry, &bucket, "seed-c", &[])
        .await;

    let buckets = l.buckets();
    poll_until("garden bucket shows an error", || async {
        let b = buckets.get(&bucket).await.unwrap();
        b.status.and_then(|s| s.last_error).is_some()
    })
    .await;
    let bucket_error = buckets
        .get(&bucket)
        .await
        .unwrap()
        .status
        .and_then(|s| s.last_error)
        .expect("bucket error");
    assert_eq!(bucket_error.codes, vec![expected], "{bucket_error:?}");
    assert!(
        !bucket_error.description.contains(wrong),
        "no secret in status: {}",
        bucket_error.description
    );
    let entries = l.entries(&project);
    poll_until("garden entry shows the bucket's codes", || async {
        let e = entries.get(&entry).await.unwrap();
        e.status
            .and_then(|s| s.last_error)
            .is_some_and(|e| e.codes == bucket_error.codes)
    })
    .await;

    // Rotate to the right key in the garden: copied, used, healed; no restart.
    l.set_credentials(&good).await;
    l.wait_bucket_ready(&bucket).await;
    l.wait_entry_ready(&project, &entry).await;
    let good_secret = good
        .iter()
        .find(|(k, _)| k == field)
        .map(|(_, v)| v.clone())
        .expect("secret field");
    let seed_secrets: Api<Secret> = Api::namespaced(l.seed.clone(), GARDEN_NAMESPACE);
    for name in [bucket_secret_name(&bucket), entry_secret_name(&entry)] {
        let copy = seed_secrets.get(&name).await.unwrap();
        let value = copy.data.unwrap()[field].0.clone();
        assert_eq!(String::from_utf8(value).unwrap(), good_secret, "{name}");
    }
    l.store()
        .await
        .head(&bucket, &format!("{entry}/.granary/entry.json"))
        .await
        .expect("marker written with the rotated key");
    agent.shutdown().await;
}

/// Azurite answers a bad SharedKey signature with 403 `AuthorizationFailure` (Azure
/// itself says `AuthenticationFailed`), which reads as unauthorized.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_azure_bad_credentials_heal_after_rotation() {
    bad_credentials_heal_after_rotation(Backend::Azure, ErrorCode::InfraUnauthorized).await;
}

/// moto answers a wrong SigV4 secret with 403 `SignatureDoesNotMatch`: unauthenticated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_s3_bad_credentials_heal_after_rotation() {
    bad_credentials_heal_after_rotation(Backend::S3, ErrorCode::InfraUnauthenticated).await;
}
