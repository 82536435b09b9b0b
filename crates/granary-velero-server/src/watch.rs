//! The one watch loop of the Velero-compatible controllers: every event of a kind handed
//! to a callback, with a bounded back-off after a failed watch (the runtime's), so each
//! controller says only what an event means to it.

use futures::StreamExt;
use granary_runtime::backoff::WatchBackoff;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

/// Feeds every watch event of `api` to `on_event` until dropped; `what` names the kind in
/// the log line of a failed watch.
pub async fn each_event<K, F>(api: Api<K>, what: &'static str, on_event: F)
where
    K: kube::Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
    F: FnMut(Event<K>),
{
    each_event_with(api, watcher::Config::default(), what, on_event).await
}

/// [`each_event`] of the objects `config` selects.
pub async fn each_event_with<K, F>(
    api: Api<K>,
    config: watcher::Config,
    what: &'static str,
    mut on_event: F,
) where
    K: kube::Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
    F: FnMut(Event<K>),
{
    let stream = watcher::watcher(api, config).backoff(WatchBackoff::default());
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => on_event(event),
            Err(e) => tracing::warn!(error = %e, "watching {what}; retrying"),
        }
    }
}
