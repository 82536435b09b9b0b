//! Which restores run now (beyond Velero, which runs one restore at a time: velero#487).
//! Restores whose footprints — the namespaces they write into and the cluster-scoped
//! items they may create — do not overlap run in parallel, up to `concurrentRestores`;
//! the others wait, in creation order, with the restores they wait for named. One pure
//! function, property-tested: never two overlapping restores at once, never more than
//! the limit, and a restore never overtakes an earlier one it overlaps.

use std::collections::BTreeSet;

use crate::backup::filters::IncludesExcludes;
use granary_api::velero::RestoreSpec;
use granary_velero::files::ResourceList;

/// A set that is either everything or some names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Names {
    All,
    Some(BTreeSet<String>),
}

impl Names {
    fn overlaps(&self, other: &Names) -> bool {
        match (self, other) {
            (Names::Some(a), Names::Some(b)) => !a.is_disjoint(b),
            (Names::All, Names::Some(b)) | (Names::Some(b), Names::All) => !b.is_empty(),
            (Names::All, Names::All) => true,
        }
    }
}

/// Where a restore writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// Target namespaces (after `namespaceMapping`).
    pub namespaces: Names,
    /// Cluster-scoped items (`apiVersion/Kind/name`) it may create.
    pub cluster: Names,
}

impl Footprint {
    pub fn overlaps(&self, other: &Footprint) -> bool {
        self.namespaces.overlaps(&other.namespaces) || self.cluster.overlaps(&other.cluster)
    }

    /// The footprint of a restore of a backup whose resource list is `list` (`None`:
    /// unknown, so everything). Conservative: resource filters and label selectors,
    /// which need discovery and the items themselves, are not applied.
    pub fn of(spec: &RestoreSpec, list: Option<&ResourceList>) -> Footprint {
        let Some(list) = list else {
            return Footprint {
                namespaces: Names::All,
                cluster: Names::All,
            };
        };
        let filter = IncludesExcludes::new(
            spec.included_namespaces.clone().unwrap_or_default(),
            spec.excluded_namespaces.clone().unwrap_or_default(),
        );
        let map = |ns: &str| -> String {
            spec.namespace_mapping
                .as_ref()
                .and_then(|m| m.get(ns))
                .cloned()
                .unwrap_or_else(|| ns.to_owned())
        };
        let cluster_allowed = match spec.include_cluster_resources {
            Some(b) => b,
            None => filter.include_everything(),
        };
        let mut namespaces = BTreeSet::new();
        let mut cluster = BTreeSet::new();
        for (gvk, entries) in &list.0 {
            let is_namespace = gvk == "v1/Namespace";
            for e in entries {
                match e.split_once('/') {
                    Some((ns, _)) => {
                        if filter.should_include(ns) {
                            namespaces.insert(map(ns));
                        }
                    }
                    None if is_namespace => {
                        if filter.should_include(e) {
                            namespaces.insert(map(e));
                        }
                    }
                    None => {
                        if cluster_allowed {
                            cluster.insert(format!("{gvk}/{e}"));
                        }
                    }
                }
            }
        }
        Footprint {
            namespaces: Names::Some(namespaces),
            cluster: Names::Some(cluster),
        }
    }
}

/// A restore in the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub name: String,
    pub footprint: Footprint,
}

/// What a waiting restore does now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Start,
    /// `position` is 1-based among the restores that wait; `blocked_by` names the
    /// running or earlier restores it overlaps (empty: all slots are taken).
    Wait {
        position: usize,
        blocked_by: Vec<String>,
    },
}

/// Decides, for each waiting restore (oldest first), whether it starts, given the
/// running ones and the limit.
pub fn admit(running: &[Candidate], waiting: &[Candidate], limit: usize) -> Vec<Decision> {
    let mut slots = limit.max(1).saturating_sub(running.len());
    let mut ahead: Vec<&Candidate> = running.iter().collect();
    let mut position = 0;
    waiting
        .iter()
        .map(|w| {
            let blocked_by: Vec<String> = ahead
                .iter()
                .filter(|a| a.footprint.overlaps(&w.footprint))
                .map(|a| a.name.clone())
                .collect();
            ahead.push(w);
            if blocked_by.is_empty() && slots > 0 {
                slots -= 1;
                Decision::Start
            } else {
                position += 1;
                Decision::Wait {
                    position,
                    blocked_by,
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fp(ns: &[&str], cluster: &[&str]) -> Footprint {
        Footprint {
            namespaces: Names::Some(ns.iter().map(|s| s.to_string()).collect()),
            cluster: Names::Some(cluster.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn c(name: &str, f: Footprint) -> Candidate {
        Candidate {
            name: name.into(),
            footprint: f,
        }
    }

    #[test]
    fn disjoint_restores_run_together_overlapping_ones_wait() {
        let running = vec![c("r1", fp(&["a"], &[]))];
        let waiting = vec![
            c("r2", fp(&["b"], &[])),
            c("r3", fp(&["a", "c"], &[])),
            c("r4", fp(&["c"], &[])),
            c("r5", fp(&["d"], &["v1/PersistentVolume/pv"])),
        ];
        assert_eq!(
            admit(&running, &waiting, 10),
            vec![
                Decision::Start,
                Decision::Wait {
                    position: 1,
                    blocked_by: vec!["r1".into()]
                },
                // r4 does not overtake r3, which it overlaps.
                Decision::Wait {
                    position: 2,
                    blocked_by: vec!["r3".into()]
                },
                Decision::Start,
            ]
        );
    }

    #[test]
    fn limit_holds() {
        let waiting = vec![c("r1", fp(&["a"], &[])), c("r2", fp(&["b"], &[]))];
        assert_eq!(
            admit(&[], &waiting, 1),
            vec![
                Decision::Start,
                Decision::Wait {
                    position: 1,
                    blocked_by: vec![]
                }
            ]
        );
    }

    #[test]
    fn footprint_from_resource_list() {
        let mut list = ResourceList::default();
        list.add("v1", "Namespace", "", "ns1");
        list.add("v1", "Namespace", "", "ns2");
        list.add("v1", "ConfigMap", "ns1", "cm");
        list.add("v1", "ConfigMap", "ns2", "cm");
        list.add("v1", "PersistentVolume", "", "pv");
        let spec = RestoreSpec {
            included_namespaces: Some(vec!["ns1".into()]),
            namespace_mapping: Some([("ns1".to_string(), "x".to_string())].into()),
            ..Default::default()
        };
        assert_eq!(Footprint::of(&spec, Some(&list)), fp(&["x"], &[]));
        let all = Footprint::of(&RestoreSpec::default(), Some(&list));
        assert_eq!(all, fp(&["ns1", "ns2"], &["v1/PersistentVolume/pv"]));
        let unknown = Footprint::of(&RestoreSpec::default(), None);
        assert!(unknown.overlaps(&all) && !unknown.overlaps(&fp(&[], &[])));
    }

    fn arb_fp() -> impl Strategy<Value = Footprint> {
        (
            prop::collection::btree_set("[a-d]", 0..3),
            prop::collection::btree_set("[x-z]", 0..2),
            any::<u8>(),
        )
            .prop_map(|(ns, cl, all)| Footprint {
                namespaces: if all % 11 == 0 {
                    Names::All
                } else {
                    Names::Some(ns)
                },
                cluster: Names::Some(cl),
            })
    }

    proptest! {
        #[test]
        fn never_overlapping_never_over_limit_never_overtaking(
            running in prop::collection::vec(arb_fp(), 0..3),
            waiting in prop::collection::vec(arb_fp(), 0..8),
            limit in 1usize..5,
        ) {
            // Running restores never overlap each other (the invariant we keep).
            let mut run: Vec<Candidate> = Vec::new();
            for (i, f) in running.into_iter().enumerate() {
                if run.len() < limit && !run.iter().any(|r| r.footprint.overlaps(&f)) {
                    run.push(c(&format!("run{i}"), f));
                }
            }
            let wait: Vec<Candidate> = waiting.into_iter().enumerate().map(|(i, f)| c(&format!("w{i}"), f)).collect();
            let d = admit(&run, &wait, limit);
            let started: Vec<&Candidate> = wait.iter().zip(&d).filter(|(_, d)| **d == Decision::Start).map(|(w, _)| w).collect();
            prop_assert!(run.len() + started.len() <= limit);
            let all: Vec<&Candidate> = run.iter().chain(started.iter().copied()).collect();
            for (i, a) in all.iter().enumerate() {
                for b in &all[i + 1..] {
                    prop_assert!(!a.footprint.overlaps(&b.footprint), "{} and {} overlap", a.name, b.name);
                }
            }
            for (j, (w, dj)) in wait.iter().zip(&d).enumerate() {
                if *dj == Decision::Start {
                    for earlier in &wait[..j] {
                        prop_assert!(!earlier.footprint.overlaps(&w.footprint), "{} overtook {}", w.name, earlier.name);
                    }
                }
            }
            let positions: Vec<usize> = d.iter().filter_map(|x| match x { Decision::Wait { position, .. } => Some(*position), _ => None }).collect();
            prop_assert_eq!(positions.clone(), (1..=positions.len()).collect::<Vec<_>>());
        }
    }
}
