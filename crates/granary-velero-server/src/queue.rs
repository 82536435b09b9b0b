//! The backup queue's decision (Velero 1.18's concurrent backup queue), one pure function
//! over plain data: which queued backups start now, which wait and why, and every waiting
//! backup's `queuePosition`.
//!
//! Velero's rules: a backup runs when fewer than `concurrentBackups` are ReadyToStart or
//! InProgress and it shares no namespace with those nor with any backup ahead of it in the
//! queue; the earliest runnable backup goes first; the rest are numbered 1..n. One pass
//! here is what Velero's queue controller reaches after dequeuing one backup at a time,
//! in queue order, until none is runnable. New backups join the queue behind every
//! queued one, oldest first.

use super::namespaces::{NamespaceScope, overlap};
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// Where a backup stands, as far as the queue cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueuePhase {
    /// `""` or `New`.
    New,
    /// `Queued`, with its `queuePosition`.
    Queued(u32),
    /// `ReadyToStart` or `InProgress`: counts against `concurrentBackups`.
    Running,
}

/// One backup the queue looks at (finished ones are left out by the caller).
#[derive(Clone, Debug)]
pub struct QueueItem {
    pub name: String,
    pub created: DateTime<Utc>,
    pub phase: QueuePhase,
    pub scope: NamespaceScope,
}

/// Why a queued backup does not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// `running` backups hold every one of the `limit` slots.
    Concurrency { running: usize, limit: usize },
    /// It shares `namespace` with backup `with`, running or ahead in the queue.
    Overlap { with: String, namespace: String },
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitReason::Concurrency { running, limit } => write!(
                f,
                "{running} of {limit} concurrent backups are running (--concurrent-backups)"
            ),
            WaitReason::Overlap { with, namespace } if namespace == "*" => {
                write!(f, "both it and backup {with} include all namespaces")
            }
            WaitReason::Overlap { with, namespace } => {
                write!(f, "it shares namespace {namespace} with backup {with}")
            }
        }
    }
}

/// What the queue does with one New or Queued backup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueDecision {
    /// → `ReadyToStart`, `queuePosition` 0.
    Start,
    /// → `Queued` at `position` (1-based).
    Wait { position: u32, reason: WaitReason },
}

/// The decisions for every New and Queued backup, in queue order.
pub fn plan(items: &[QueueItem], concurrent: usize) -> Vec<(String, QueueDecision)> {
    let concurrent = concurrent.max(1);
    let mut running = Holders::default();
    for item in items.iter().filter(|i| i.phase == QueuePhase::Running) {
        running.push(item);
    }
    let mut queue: Vec<&QueueItem> = items
        .iter()
        .filter(|i| i.phase != QueuePhase::Running)
        .collect();
    queue.sort_by(|a, b| {
        let key = |i: &QueueItem| match i.phase {
            QueuePhase::Queued(p) => (0u8, p),
            _ => (1u8, 0),
        };
        key(a)
            .cmp(&key(b))
            .then(a.created.cmp(&b.created))
            .then(a.name.cmp(&b.name))
    });
    let mut waiting = Holders::default();
    let mut out = Vec::with_capacity(queue.len());
    for item in queue {
        // Overlap first: it is the reason that outlasts a free slot. The first backup
        // it overlaps, running ones before queued ones, each in the order they joined.
        let reason = running
            .first_overlap(item)
            .or_else(|| waiting.first_overlap(item))
            .map(|(other, namespace)| WaitReason::Overlap {
                with: other.name.clone(),
                namespace,
            })
            .or_else(|| {
                (running.len() >= concurrent).then_some(WaitReason::Concurrency {
                    running: running.len(),
                    limit: concurrent,
                })
            });
        match reason {
            None => {
                running.push(item);
                out.push((item.name.clone(), QueueDecision::Start));
            }
            Some(reason) => {
                waiting.push(item);
                let position = u32::try_from(waiting.len()).unwrap_or(u32::MAX);
                out.push((item.name.clone(), QueueDecision::Wait { position, reason }));
            }
        }
    }
    out
}

/// Backups in the order they joined a group (running, or waiting), indexed so that
/// finding the first one a backup overlaps does not compare it with every one: a
/// namespace → first listed holder map, and the all-namespaces holders apart (few,
/// and compared one by one since their excludes are patterns). Without the index a
/// pass over n backups that overlap nothing is n²/2 comparisons.
#[derive(Default)]
struct Holders<'a> {
    items: Vec<&'a QueueItem>,
    first_by_namespace: HashMap<&'a str, usize>,
    all_namespaces: Vec<usize>,
}

impl<'a> Holders<'a> {
    fn len(&self) -> usize {
        self.items.len()
    }

    fn push(&mut self, item: &'a QueueItem) {
        let index = self.items.len();
        self.items.push(item);
        match &item.scope {
            NamespaceScope::All { .. } => self.all_namespaces.push(index),
            NamespaceScope::Listed(names) => {
                for ns in names {
                    self.first_by_namespace.entry(ns.as_str()).or_insert(index);
                }
            }
        }
    }

    /// The first holder `item` overlaps, and the namespace [`overlap`] names.
    fn first_overlap(&self, item: &QueueItem) -> Option<(&'a QueueItem, String)> {
        let first = match &item.scope {
            // Every holder can overlap an all-namespaces backup: scan in order (the
            // first one usually does).
            NamespaceScope::All { .. } => {
                return self
                    .items
                    .iter()
                    .find_map(|other| overlap(&item.scope, &other.scope).map(|ns| (*other, ns)));
            }
            NamespaceScope::Listed(names) => {
                let listed = names
                    .iter()
                    .filter_map(|ns| self.first_by_namespace.get(ns.as_str()).copied())
                    .min();
                let all = self
                    .all_namespaces
                    .iter()
                    .copied()
                    .find(|&i| overlap(&item.scope, &self.items[i].scope).is_some());
                listed.into_iter().chain(all).min()?
            }
        };
        let other = self.items[first];
        overlap(&item.scope, &other.scope).map(|ns| (other, ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0)
            .single()
            .expect("valid")
    }

    fn item(name: &str, created: i64, phase: QueuePhase, ns: &[&str]) -> QueueItem {
        QueueItem {
            name: name.into(),
            created: at(created),
            phase,
            scope: NamespaceScope::Listed(ns.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn started(plan: &[(String, QueueDecision)]) -> Vec<&str> {
        plan.iter()
            .filter(|(_, d)| *d == QueueDecision::Start)
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// Five backups over overlapping namespaces, two slots: backup5 runs before backup3
    /// and backup4, which wait behind the queued backup2, which waits for the running
    /// backup1.
    #[test]
    fn a_later_backup_overtakes_those_waiting_on_shared_namespaces() {
        let items = vec![
            item("backup1", 1, QueuePhase::Running, &["ns1", "ns2"]),
            item("backup2", 2, QueuePhase::Queued(1), &["ns2", "ns3", "ns5"]),
            item("backup3", 3, QueuePhase::Queued(2), &["ns4", "ns3"]),
            item("backup4", 4, QueuePhase::Queued(2), &["ns5", "ns6"]),
            item("backup5", 5, QueuePhase::Queued(3), &["ns8", "ns9"]),
        ];
        let p = plan(&items, 2);
        assert_eq!(started(&p), vec!["backup5"]);
        let wait = |name: &str| {
            p.iter()
                .find(|(n, _)| n == name)
                .map(|(_, d)| d.clone())
                .expect("decided")
        };
        assert_eq!(
            wait("backup2"),
            QueueDecision::Wait {
                position: 1,
                reason: WaitReason::Overlap {
                    with: "backup1".into(),
                    namespace: "ns2".into()
                }
            }
        );
        assert_eq!(
            wait("backup3"),
            QueueDecision::Wait {
                position: 2,
                reason: WaitReason::Overlap {
                    with: "backup2".into(),
                    namespace: "ns3".into()
                }
            }
        );
        assert!(matches!(
            wait("backup4"),
            QueueDecision::Wait { position: 3, reason: WaitReason::Overlap { ref with, .. } } if with == "backup2"
        ));

        // backup1 finishes: backup2 runs; backup3 and backup4 still overlap with it.
        let next: Vec<QueueItem> = vec![
            item("backup2", 2, QueuePhase::Queued(1), &["ns2", "ns3", "ns5"]),
            item("backup3", 3, QueuePhase::Queued(2), &["ns4", "ns3"]),
            item("backup4", 4, QueuePhase::Queued(3), &["ns5", "ns6"]),
            item("backup5", 5, QueuePhase::Running, &["ns8", "ns9"]),
        ];
        let p = plan(&next, 2);
        assert_eq!(started(&p), vec!["backup2"]);
        assert_eq!(
            p.iter()
                .filter_map(|(n, d)| match d {
                    QueueDecision::Wait { position, .. } => Some((n.as_str(), *position)),
                    QueueDecision::Start => None,
                })
                .collect::<Vec<_>>(),
            vec![("backup3", 1), ("backup4", 2)]
        );
    }

    #[test]
    fn new_backups_join_behind_the_queue_oldest_first_and_may_start_at_once() {
        let items = vec![
            item("late", 9, QueuePhase::New, &["b"]),
            item("early", 1, QueuePhase::New, &["a"]),
            item("queued", 5, QueuePhase::Queued(1), &["a"]),
        ];
        let p = plan(&items, 1);
        assert_eq!(p[0], ("queued".into(), QueueDecision::Start));
        assert_eq!(p[1].0, "early");
        assert_eq!(p[2].0, "late");
        assert!(matches!(
            p[2].1,
            QueueDecision::Wait {
                position: 2,
                reason: WaitReason::Concurrency {
                    running: 1,
                    limit: 1
                }
            }
        ));
    }

    #[test]
    fn an_all_namespaces_backup_is_not_starved() {
        let all = QueueItem {
            name: "full".into(),
            created: at(2),
            phase: QueuePhase::Queued(1),
            scope: NamespaceScope::All { except: vec![] },
        };
        let items = vec![
            item("running", 1, QueuePhase::Running, &["a"]),
            all,
            item("small", 3, QueuePhase::Queued(2), &["b"]),
        ];
        let p = plan(&items, 5);
        assert!(
            started(&p).is_empty(),
            "nothing passes the full backup: {p:?}"
        );
        assert_eq!(
            WaitReason::Overlap {
                with: "full".into(),
                namespace: "*".into()
            }
            .to_string(),
            "both it and backup full include all namespaces"
        );
    }

    fn scope() -> impl Strategy<Value = NamespaceScope> {
        prop_oneof![
            1 => Just(NamespaceScope::All { except: vec![] }),
            6 => proptest::collection::btree_set("ns[0-5]", 0..3).prop_map(NamespaceScope::Listed),
        ]
    }

    fn items() -> impl Strategy<Value = Vec<QueueItem>> {
        proptest::collection::vec((scope(), 0u8..3, 0u32..6), 0..12).prop_map(|v| {
            let mut running: Vec<NamespaceScope> = Vec::new();
            v.into_iter()
                .enumerate()
                .map(|(i, (scope, kind, pos))| {
                    // Running backups never overlap each other (the queue's own invariant).
                    let can_run = running.iter().all(|r| overlap(r, &scope).is_none());
                    let phase = match kind {
                        0 if can_run => {
                            running.push(scope.clone());
                            QueuePhase::Running
                        }
                        1 => QueuePhase::Queued(pos + 1),
                        _ => QueuePhase::New,
                    };
                    QueueItem {
                        name: format!("b{i}"),
                        created: at(i as i64),
                        phase,
                        scope,
                    }
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn queue_invariants(items in items(), concurrent in 1usize..4) {
            let p = plan(&items, concurrent);
            let by_name = |n: &str| items.iter().find(|i| i.name == n).expect("known");
            let mut running: Vec<&QueueItem> =
                items.iter().filter(|i| i.phase == QueuePhase::Running).collect();
            let already = running.len();
            // Every New/Queued backup gets exactly one decision.
            prop_assert_eq!(p.len(), items.len() - already);
            let mut positions = Vec::new();
            let mut waited: Vec<&QueueItem> = Vec::new();
            for (name, decision) in &p {
                let it = by_name(name);
                match decision {
                    QueueDecision::Start => {
                        // Never two running backups sharing a namespace.
                        for r in &running {
                            prop_assert!(overlap(&it.scope, &r.scope).is_none());
                        }
                        // FIFO: nothing ahead in the queue that it overlaps with.
                        for w in &waited {
                            prop_assert!(overlap(&it.scope, &w.scope).is_none());
                        }
                        running.push(it);
                    }
                    QueueDecision::Wait { position, reason } => {
                        positions.push(*position);
                        if let WaitReason::Overlap { with, .. } = reason {
                            prop_assert!(overlap(&it.scope, &by_name(with).scope).is_some());
                        }
                        waited.push(it);
                    }
                }
            }
            prop_assert!(running.len() <= concurrent.max(already));
            // Positions are always 1..n in queue order.
            prop_assert_eq!(positions, (1..=waited.len() as u32).collect::<Vec<_>>());
        }
    }

    /// The pass as first written: every backup compared with every running and
    /// waiting one, in order. The indexed [`plan`] must decide exactly the same.
    fn plan_by_scan(items: &[QueueItem], concurrent: usize) -> Vec<(String, QueueDecision)> {
        let concurrent = concurrent.max(1);
        let mut running: Vec<&QueueItem> = items
            .iter()
            .filter(|i| i.phase == QueuePhase::Running)
            .collect();
        let mut queue: Vec<&QueueItem> = items
            .iter()
            .filter(|i| i.phase != QueuePhase::Running)
            .collect();
        queue.sort_by(|a, b| {
            let key = |i: &QueueItem| match i.phase {
                QueuePhase::Queued(p) => (0u8, p),
                _ => (1u8, 0),
            };
            key(a)
                .cmp(&key(b))
                .then(a.created.cmp(&b.created))
                .then(a.name.cmp(&b.name))
        });
        let mut waiting: Vec<&QueueItem> = Vec::new();
        let mut out = Vec::new();
        for item in queue {
            let reason = running
                .iter()
                .chain(waiting.iter())
                .find_map(|other| {
                    overlap(&item.scope, &other.scope).map(|namespace| WaitReason::Overlap {
                        with: other.name.clone(),
                        namespace,
                    })
                })
                .or_else(|| {
                    (running.len() >= concurrent).then_some(WaitReason::Concurrency {
                        running: running.len(),
                        limit: concurrent,
                    })
                });
            match reason {
                None => {
                    running.push(item);
                    out.push((item.name.clone(), QueueDecision::Start));
                }
                Some(reason) => {
                    waiting.push(item);
                    let position = u32::try_from(waiting.len()).unwrap_or(u32::MAX);
                    out.push((item.name.clone(), QueueDecision::Wait { position, reason }));
                }
            }
        }
        out
    }

    fn scope_with_excludes() -> impl Strategy<Value = NamespaceScope> {
        prop_oneof![
            1 => proptest::collection::vec("ns[0-5]|ns\\*|ns[0-2]?", 0..3)
                .prop_map(|except| NamespaceScope::All { except }),
            4 => proptest::collection::btree_set("ns[0-5]", 0..4).prop_map(NamespaceScope::Listed),
        ]
    }

    proptest! {
        #[test]
        fn the_index_decides_as_the_full_scan(
            v in proptest::collection::vec((scope_with_excludes(), 0u8..3, 0u32..8), 0..24),
            concurrent in 1usize..4,
        ) {
            let items: Vec<QueueItem> = v
                .into_iter()
                .enumerate()
                .map(|(i, (scope, kind, pos))| QueueItem {
                    name: format!("b{i}"),
                    created: at(i as i64 % 5),
                    phase: match kind {
                        0 => QueuePhase::Running,
                        1 => QueuePhase::Queued(pos + 1),
                        _ => QueuePhase::New,
                    },
                    scope,
                })
                .collect();
            prop_assert_eq!(plan(&items, concurrent), plan_by_scan(&items, concurrent));
        }
    }
}
