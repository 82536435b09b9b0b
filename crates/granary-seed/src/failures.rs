//! The seed's retry memory: consecutive failures per work key (`<controller>/<object>`),
//! which set the back-off of the next attempt. A key goes when its work succeeds or its
//! object goes away (a delete event, or missing from a relist after a watch restart
//! that never delivered the delete), so the map holds only objects that exist.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

#[derive(Debug, Default)]
pub(crate) struct Failures {
    counts: Mutex<HashMap<String, u32>>,
}

fn back_off_after(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(6)).min(Duration::from_secs(60))
}

impl Failures {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        // Plain data, consistent after any panic of a holder.
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a failure of `key` and returns how long to wait before the next attempt:
    /// 1 s doubling up to 60 s.
    pub(crate) fn record(&self, key: &str) -> Duration {
        let mut counts = self.lock();
        let n = counts.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        back_off_after(*n)
    }

    /// How long the current back-off of `key` is, without recording a failure.
    pub(crate) fn current(&self, key: &str) -> Duration {
        match self.lock().get(key) {
            None | Some(0) => Duration::from_secs(1),
            Some(n) => back_off_after(*n),
        }
    }

    /// The keys with recorded failures that start with `prefix`, without it.
    pub(crate) fn failing(&self, prefix: &str) -> Vec<String> {
        self.lock()
            .keys()
            .filter_map(|k| k.strip_prefix(prefix).map(str::to_string))
            .collect()
    }

    /// Forgets `key` (its work succeeded, or its object is gone).
    pub(crate) fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    /// Forgets every key under `prefix` whose object is not in `live` (the names a
    /// complete listing returned).
    pub(crate) fn forget_missing(&self, prefix: &str, live: &HashSet<String>) {
        self.lock().retain(|k, _| {
            k.strip_prefix(prefix)
                .is_none_or(|name| live.contains(name))
        });
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_up_to_a_minute_and_success_resets_it() {
        let f = Failures::default();
        let waits: Vec<u64> = (0..8).map(|_| f.record("c/a").as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(f.current("c/a").as_secs(), 60);
        f.forget("c/a");
        assert_eq!(f.current("c/a").as_secs(), 1);
        assert_eq!(f.len(), 0);
    }

    #[test]
    fn keys_of_objects_missing_from_a_listing_are_forgotten() {
        let f = Failures::default();
        for key in [
            "backupentry/a",
            "backupentry/b",
            "backupentry/c",
            "backupbucket/b",
        ] {
            f.record(key);
        }
        assert_eq!(f.len(), 4);
        f.forget_missing("backupentry/", &HashSet::from(["a".to_string()]));
        let mut left = f.failing("backupentry/");
        left.sort();
        assert_eq!(left, ["a"]);
        assert_eq!(
            f.failing("backupbucket/"),
            ["b"],
            "other controllers untouched"
        );
        assert_eq!(f.len(), 2);
    }
}
