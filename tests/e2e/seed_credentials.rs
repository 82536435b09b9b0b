//! Credentials end to end on Azurite, which checks every SharedKey signature: a wrong
//! key shows as Error with ERR_INFRA_UNAUTHENTICATED/UNAUTHORIZED on the garden bucket
//! and, through it, on its entries; fixing (rotating) the garden secret is copied into
//! the seed and heals both without a restart.

use crate::seed_support::{Backend, Landscape, ensure_namespace};
use crate::support::poll_until;
use granary::api::common::ErrorCode;
use granary::api::core::{GARDEN_NAMESPACE, bucket_secret_name, entry_secret_name};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

fn auth_codes(codes: &[ErrorCode]) -> bool {
    codes.iter().any(|c| {
        matches!(
            c,
            ErrorCode::InfraUnauthenticated | ErrorCode::InfraUnauthorized
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_bad_credentials_heal_after_rotation() {
    let Some(l) = Landscape::start(Backend::Azure).await else {
        return;
    };
    let good = l.good_credentials();
    // A well-formed key that is not the account's.
    let wrong_key = "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ==";
    let bad: Vec<(String, String)> = good
        .iter()
        .map(|(k, v)| {
            let v = if k == "storageKey" {
                wrong_key.to_string()
            } else {
                v.clone()
            };
            (k.clone(), v)
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
    poll_until("garden bucket shows the auth error", || async {
        let b = buckets.get(&bucket).await.unwrap();
        b.status
            .and_then(|s| s.last_error)
            .is_some_and(|e| auth_codes(&e.codes))
    })
    .await;
    let entries = l.entries(&project);
    poll_until("garden entry shows the bucket's codes", || async {
        let e = entries.get(&entry).await.unwrap();
        e.status
            .and_then(|s| s.last_error)
            .is_some_and(|e| auth_codes(&e.codes))
    })
    .await;
    let b = buckets.get(&bucket).await.unwrap();
    let description = b.status.unwrap().last_error.unwrap().description;
    assert!(
        !description.contains(wrong_key),
        "no secret in status: {description}"
    );

    // Rotate to the right key in the garden: copied, used, healed; no restart.
    l.set_credentials(&good).await;
    l.wait_bucket_ready(&bucket).await;
    l.wait_entry_ready(&project, &entry).await;
    let seed_secrets: Api<Secret> = Api::namespaced(l.seed.clone(), GARDEN_NAMESPACE);
    for name in [bucket_secret_name(&bucket), entry_secret_name(&entry)] {
        let copy = seed_secrets.get(&name).await.unwrap();
        let key = copy.data.unwrap()["storageKey"].0.clone();
        assert_eq!(
            String::from_utf8(key).unwrap(),
            granary_key(&good),
            "{name}"
        );
    }
    l.store()
        .await
        .head(&bucket, &format!("{entry}/.granary/entry.json"))
        .await
        .expect("marker written with the rotated key");
    agent.shutdown().await;
}

fn granary_key(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .find(|(k, _)| k == "storageKey")
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}
