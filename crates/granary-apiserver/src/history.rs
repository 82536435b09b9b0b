//! The recent changes of each resource: what a watch resumes from (`?watch&
//! resourceVersion=N`) and what a continued list reads the collection back through, as
//! it was at its first page.
//!
//! kube-apiserver keeps these per resource in its watch cache, sized to the resource's
//! rate of change (at least 100 events, at most 100 × 1024), and etcd keeps older
//! versions until its compaction every five minutes. A client asking for a version no
//! longer kept gets 410 Gone and lists again. This history follows the same shape: per
//! resource, at most [`Limits::most`] events, and events older than [`Limits::keep`]
//! are let go once the resource has more than [`Limits::least`].
//!
//! It used to be one queue of 20,000 events for all resources. A burst of writes to one
//! resource (a garden placing 100,000 BackupEntries) then pushed every other resource's
//! changes out within seconds, and continued lists of the busy resource ran out of
//! history halfway: its watchers listed it again and again (about eight times over at
//! 30,000 entries).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::store::{GroupResource, StoreEvent};

/// How much history each resource keeps.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Never more events than this per resource (kube's watch cache upper bound).
    pub most: usize,
    /// Events older than [`Limits::keep`] go only beyond this many.
    pub least: usize,
    /// How long an event is kept (etcd's compaction interval).
    pub keep: Duration,
}

impl Limits {
    /// The server's limits.
    pub(crate) const SERVER: Limits = Limits {
        most: 100 * 1024,
        least: 100,
        keep: Duration::from_secs(5 * 60),
    };

    /// At most `most` events per resource, however old (tests).
    #[cfg(test)]
    pub(crate) fn count(most: usize) -> Limits {
        Limits {
            most,
            least: most,
            keep: Duration::MAX,
        }
    }
}

/// One resource's recent events, oldest first.
#[derive(Default)]
struct Recent {
    events: VecDeque<(Instant, Arc<StoreEvent>)>,
    /// The resourceVersion of the newest event let go (0: none).
    dropped: u64,
}

/// Every resource's recent events.
pub(crate) struct History {
    limits: Limits,
    by_resource: HashMap<GroupResource, Recent>,
    /// Versions up to this one are forgotten for every resource ([`History::compact`]).
    compacted: u64,
}

impl History {
    pub(crate) fn new(limits: Limits) -> History {
        History {
            limits,
            by_resource: HashMap::new(),
            compacted: 0,
        }
    }

    /// Keeps `event` (the newest of its resource), letting go of what the limits no
    /// longer cover.
    pub(crate) fn push(&mut self, now: Instant, event: Arc<StoreEvent>) {
        let limits = self.limits;
        let recent = match self.by_resource.get_mut(&event.gr) {
            Some(recent) => recent,
            None => self.by_resource.entry(event.gr.clone()).or_default(),
        };
        recent.events.push_back((now, event));
        while let Some((at, oldest)) = recent.events.front() {
            let len = recent.events.len();
            let stale = len > limits.least && now.saturating_duration_since(*at) > limits.keep;
            if len <= limits.most && !stale {
                break;
            }
            recent.dropped = oldest.rv;
            recent.events.pop_front();
        }
    }

    /// Forgets everything up to `rv` (after bootstrap, so that versions from before are
    /// too old, as after an etcd compaction).
    pub(crate) fn compact(&mut self, rv: u64) {
        self.by_resource.clear();
        self.compacted = rv;
    }

    /// Every kept event of `gr` newer than `rv`, oldest first; `Err(oldest)` with the
    /// oldest version still complete when events newer than `rv` were let go.
    pub(crate) fn since(
        &self,
        gr: &GroupResource,
        rv: u64,
    ) -> Result<impl Iterator<Item = &Arc<StoreEvent>>, u64> {
        let recent = self.by_resource.get(gr);
        let floor = self.compacted.max(recent.map_or(0, |r| r.dropped));
        if rv < floor {
            return Err(floor);
        }
        let events = recent.map(|r| {
            let first = r.events.partition_point(|(_, e)| e.rv <= rv);
            r.events.range(first..).map(|(_, e)| e)
        });
        Ok(events.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EventType;
    use bytes::Bytes;

    fn event(resource: &str, rv: u64) -> Arc<StoreEvent> {
        Arc::new(StoreEvent {
            rv,
            gr: GroupResource::new("", resource),
            namespace: "ns".into(),
            name: format!("o{rv}"),
            kind: EventType::Added,
            object: Bytes::new(),
            old: None,
        })
    }

    fn rvs(history: &History, resource: &str, after: u64) -> Result<Vec<u64>, u64> {
        history
            .since(&GroupResource::new("", resource), after)
            .map(|events| events.map(|e| e.rv).collect())
    }

    #[test]
    fn a_busy_resource_does_not_push_out_another_one_s_history() {
        let mut history = History::new(Limits::count(3));
        let now = Instant::now();
        history.push(now, event("secrets", 1));
        for rv in 2..100 {
            history.push(now, event("backupentries", rv));
        }
        assert_eq!(rvs(&history, "secrets", 0), Ok(vec![1]));
        assert_eq!(rvs(&history, "secrets", 1), Ok(vec![]));
        assert_eq!(rvs(&history, "backupentries", 96), Ok(vec![97, 98, 99]));
        assert_eq!(
            rvs(&history, "backupentries", 95),
            Err(96),
            "rv 96 was let go: a watch from 95 would miss it"
        );
        assert_eq!(rvs(&history, "configmaps", 5), Ok(vec![]));
    }

    #[test]
    fn old_events_go_only_beyond_the_least_count() {
        let limits = Limits {
            most: 10,
            least: 2,
            keep: Duration::from_secs(60),
        };
        let mut history = History::new(limits);
        let start = Instant::now();
        for rv in 1..=4 {
            history.push(start, event("leases", rv));
        }
        assert_eq!(rvs(&history, "leases", 0), Ok(vec![1, 2, 3, 4]));
        // Two minutes later: the old ones go, but the resource keeps `least`.
        history.push(start + Duration::from_secs(120), event("leases", 5));
        assert_eq!(rvs(&history, "leases", 3), Ok(vec![4, 5]));
        assert_eq!(rvs(&history, "leases", 2), Err(3));
    }

    #[test]
    fn compaction_forgets_every_resource_up_to_its_version() {
        let mut history = History::new(Limits::count(10));
        let now = Instant::now();
        history.push(now, event("secrets", 1));
        history.push(now, event("configmaps", 2));
        history.compact(2);
        assert_eq!(rvs(&history, "secrets", 1), Err(2));
        assert_eq!(rvs(&history, "secrets", 2), Ok(vec![]));
        history.push(now, event("secrets", 3));
        assert_eq!(rvs(&history, "secrets", 2), Ok(vec![3]));
    }
}
