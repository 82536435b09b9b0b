//! Small helpers over the Kubernetes API that scenarios of every kind use: an expected
//! API error's Status, the resourceVersion to start a watch from, a labelled ConfigMap.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::core::Status;

/// The Status of a request that must fail with an API error.
pub fn api_error<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> Box<Status> {
    match r {
        Err(kube::Error::Api(e)) => e,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The resourceVersion of a fresh list: where a watch that must miss nothing starts.
pub async fn list_version<K>(api: &Api<K>) -> String
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

/// ConfigMap `name` with `labels` and `data: {k: v}`.
pub fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.to_string());
    if !labels.is_empty() {
        c.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
    }
    c.data = Some(BTreeMap::from([("k".to_string(), "v".to_string())]));
    c
}
