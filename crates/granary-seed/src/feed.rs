//! Feeding the seed's work queues from watches: the names of every complete
//! (re)listing, so state kept per object (the retry memory, the indexes below) can drop
//! objects whose delete event a watch restart never delivered, and the indexes that wake
//! related work (entries by bucket, buckets by credentials Secret), which drop what is
//! gone rather than growing with every object ever seen.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource, ResourceExt};

use crate::context::Context;
use crate::extension::ExtensionObject;
use granary_runtime::backoff::WatchBackoff;

/// [`feed`], also handing `listed` the names of every complete (re)listing: after a
/// watch restart, objects deleted meanwhile are missing from it without a delete event.
pub(crate) async fn feed_listing<K, F, L>(api: Api<K>, config: watcher::Config, keys: F, listed: L)
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
    F: Fn(&K, bool),
    L: Fn(&HashSet<String>),
{
    let stream = watcher::watcher(api, config).backoff(WatchBackoff::default());
    futures::pin_mut!(stream);
    let mut listing: HashSet<String> = HashSet::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Apply(obj)) => keys(&obj, false),
            Ok(Event::InitApply(obj)) => {
                listing.insert(obj.name_any());
                keys(&obj, false)
            }
            Ok(Event::Delete(obj)) => keys(&obj, true),
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitDone) => listed(&std::mem::take(&mut listing)),
            Err(e) => tracing::warn!(error = %e, "watch failed; retrying"),
        }
    }
}

/// Files entry `key` under `bucket` in the index of entries by bucket or, `deleted`,
/// drops it everywhere along with the sets it leaves empty, so the index does not keep
/// buckets whose entries are all gone.
pub(crate) fn index_entry(
    index: &mut HashMap<String, HashSet<String>>,
    bucket: &str,
    key: &str,
    deleted: bool,
) {
    if deleted {
        index.retain(|_, keys| {
            keys.remove(key);
            !keys.is_empty()
        });
    } else {
        index
            .entry(bucket.to_string())
            .or_default()
            .insert(key.to_string());
    }
}

/// Records that garden bucket `bucket` uses credentials `secret` (`None`: none, or the
/// bucket is gone); returns true when `secret` had no user before (its namespace may
/// need a watch). Secrets without users are dropped.
pub(crate) fn track_secret_user(
    users: &mut HashMap<(String, String), HashSet<String>>,
    bucket: &str,
    secret: Option<(String, String)>,
) -> bool {
    users.retain(|_, buckets| {
        buckets.remove(bucket);
        !buckets.is_empty()
    });
    let Some(secret) = secret else {
        return false;
    };
    let buckets = users.entry(secret).or_default();
    let first = buckets.is_empty();
    buckets.insert(bucket.to_string());
    first
}

/// For an extension controller's watch: forget the failures of an object on its delete
/// event (it is gone, or out of this seed's selection) and of every object a relisting
/// no longer shows.
pub(crate) fn forget_vanished<O: ExtensionObject>(
    ctx: &Arc<Context>,
) -> (
    impl Fn(&str) + Send + 'static,
    impl Fn(&HashSet<String>) + Send + 'static,
) {
    let (a, b) = (ctx.clone(), ctx.clone());
    (
        move |name: &str| a.object_gone(O::CONTROLLER, name),
        move |live: &HashSet<String>| b.objects_listed(O::CONTROLLER, live),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_index_forgets_deleted_entries_and_empty_buckets() {
        let mut index = HashMap::new();
        index_entry(&mut index, "b1", "ns/a", false);
        index_entry(&mut index, "b1", "ns/b", false);
        index_entry(&mut index, "b2", "ns/c", false);
        index_entry(&mut index, "b1", "ns/a", true);
        index_entry(&mut index, "b2", "ns/c", true);
        assert_eq!(
            index,
            HashMap::from([("b1".to_string(), HashSet::from(["ns/b".to_string()]))])
        );
        index_entry(&mut index, "b1", "ns/b", true);
        assert!(index.is_empty());
    }

    #[test]
    fn credentials_without_users_are_forgotten() {
        let mut users = HashMap::new();
        let secret = |n: &str| Some(("garden".to_string(), n.to_string()));
        assert!(
            track_secret_user(&mut users, "b1", secret("s1")),
            "first user"
        );
        assert!(!track_secret_user(&mut users, "b2", secret("s1")));
        // b1 rotates to another Secret, b2 is deleted: s1 has no user left.
        assert!(track_secret_user(&mut users, "b1", secret("s2")));
        assert!(!track_secret_user(&mut users, "b2", None));
        assert_eq!(
            users,
            HashMap::from([(
                ("garden".to_string(), "s2".to_string()),
                HashSet::from(["b1".to_string()])
            )])
        );
        track_secret_user(&mut users, "b1", None);
        assert!(users.is_empty());
    }
}
