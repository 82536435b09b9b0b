//! The landscape's integrity signing key (docs/formats.md#integrity-record): the garden
//! creates the Secret `garden/granary-integrity-keys` with one fresh key when it is
//! missing, and never changes it after (`granary integrity rotate` does). Every seed
//! reads it through the seed authorizer and signs and verifies its Velero-compatible
//! backups with it, so any seed can verify any seed's backups.
//!
//! The format (data keys `k1`, `k2`, …, each at least 32 random bytes, the highest
//! signing) is `granary_velero::integrity::Keyring`'s; the garden only ever writes a
//! first key, so it does not depend on the format crate for that.

use granary_api::core::{GARDEN_NAMESPACE, INTEGRITY_KEYS_SECRET};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, PostParams};
use std::collections::BTreeMap;
use std::time::Duration;

/// Creates the Secret with a first key `k1` unless it exists. `true` when created.
pub async fn ensure(client: &Client) -> Result<bool, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), GARDEN_NAMESPACE);
    if api.get_opt(INTEGRITY_KEYS_SECRET).await?.is_some() {
        return Ok(false);
    }
    let key: [u8; 32] = rand::random();
    let mut secret = Secret::default();
    secret.metadata.name = Some(INTEGRITY_KEYS_SECRET.to_owned());
    secret.metadata.labels = Some(BTreeMap::from([(
        "app.kubernetes.io/managed-by".to_owned(),
        "granary".to_owned(),
    )]));
    secret.type_ = Some("Opaque".to_owned());
    secret.data = Some(BTreeMap::from([(
        "k1".to_owned(),
        ByteString(key.to_vec()),
    )]));
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(true),
        // Another garden replica was first: its key is the landscape's.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// [`ensure`], retried until it succeeds.
pub async fn run(client: Client) {
    let mut delay = Duration::from_millis(200);
    loop {
        match ensure(&client).await {
            Ok(true) => {
                tracing::info!(secret = %format!("{GARDEN_NAMESPACE}/{INTEGRITY_KEYS_SECRET}"), "created the landscape's integrity signing key");
                return;
            }
            Ok(false) => return,
            Err(e) => tracing::warn!(error = %e, "the landscape's integrity signing key"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}
