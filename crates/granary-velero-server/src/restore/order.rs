//! In which order a restore creates items (docs/architecture.md#restores), one pure
//! function: Velero's resource priorities (`--restore-resource-priorities`: the high
//! list, then every other resource alphabetically, then the low list) decide, and inside
//! that order an owner is always created before its dependents (the ownership graph of
//! the backup's manifest), so that a dependent's ownerReferences can be rewritten to its
//! owner's new UID.
//!
//! Velero's own order would create a ReplicaSet (high list) before the Deployment that
//! owns it (alphabetical); here the Deployment is pulled forward, just far enough. Cycles
//! (which Kubernetes' garbage collector forbids, but a hand-made backup may hold) are
//! broken by taking the item that ranks first.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::hash::Hash;

/// Velero 1.18's default high-priority list (`pkg/cmd/server/config/config.go`).
pub const VELERO_HIGH: &[&str] = &[
    "customresourcedefinitions",
    "namespaces",
    "storageclasses",
    "volumesnapshotclass.snapshot.storage.k8s.io",
    "volumesnapshotcontents.snapshot.storage.k8s.io",
    "volumesnapshots.snapshot.storage.k8s.io",
    "datauploads.velero.io",
    "persistentvolumes",
    "persistentvolumeclaims",
    "clusterroles",
    "roles",
    "serviceaccounts",
    "clusterrolebindings",
    "rolebindings",
    "secrets",
    "configmaps",
    "limitranges",
    "priorityclasses",
    "pods",
    "replicasets.apps",
    "clusterclasses.cluster.x-k8s.io",
    "endpoints",
    "services",
];

/// Velero 1.18's default low-priority list.
pub const VELERO_LOW: &[&str] = &[
    "clusterbootstraps.run.tanzu.vmware.com",
    "clusters.cluster.x-k8s.io",
    "clusterresourcesets.addons.cluster.x-k8s.io",
    "apps.kappctrl.k14s.io",
    "packageinstalls.packaging.carvel.dev",
];

/// The resource priorities of a restore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Priorities {
    pub high: Vec<String>,
    pub low: Vec<String>,
}

impl Default for Priorities {
    fn default() -> Self {
        Priorities {
            high: VELERO_HIGH.iter().map(|s| s.to_string()).collect(),
            low: VELERO_LOW.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl Priorities {
    /// `--restore-resource-priorities`: comma-separated, `-` between the high and the low
    /// list; it replaces the default lists whole, as in Velero.
    pub fn parse(flag: &str) -> Result<Priorities, String> {
        let list = |s: &str| -> Vec<String> {
            s.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect()
        };
        let mut parts = flag.split('-');
        let high = list(parts.next().unwrap_or(""));
        let low = parts.next().map(list).unwrap_or_default();
        if parts.next().is_some() {
            return Err(format!(
                "--restore-resource-priorities: {flag:?} has more than one '-' (high list, '-', low list)"
            ));
        }
        Ok(Priorities { high, low })
    }

    /// The lists with each entry resolved as Velero resolves it (`ResourceFor` through
    /// discovery: `customresourcedefinitions` is `customresourcedefinitions.apiextensions.k8s.io`,
    /// the singular `volumesnapshotclass.…` its plural); an entry `resolve` does not
    /// know stays as written.
    pub fn resolved(&self, resolve: impl Fn(&str) -> Option<String>) -> Priorities {
        let map = |list: &[String]| {
            list.iter()
                .map(|e| resolve(e).unwrap_or_else(|| e.clone()))
                .collect()
        };
        Priorities {
            high: map(&self.high),
            low: map(&self.low),
        }
    }

    /// Where resource `group_resource` (`pods`, `replicasets.apps`) stands: the high list
    /// in its order, then the rest alphabetically, then the low list in its order.
    pub fn rank<'g>(&self, group_resource: &'g str) -> (u8, usize, &'g str) {
        if let Some(i) = self.high.iter().position(|h| h == group_resource) {
            return (0, i, "");
        }
        if let Some(i) = self.low.iter().position(|l| l == group_resource) {
            return (2, i, "");
        }
        (1, 0, group_resource)
    }
}

/// One item of a backup, as the order needs it (borrowed: the order of a million items
/// keeps a few integers per item, not their names). `U` is the type of UIDs.
#[derive(Debug, PartialEq, Eq)]
pub struct RestoreItem<'a, U> {
    /// `resource` for the core group, else `resource.group`.
    pub group_resource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a U,
    /// The UIDs of its owners (ownerReferences).
    pub owners: &'a [U],
}

/// The indices of `items` in the order to create them.
pub fn restore_order<U: Eq + Hash>(
    items: &[RestoreItem<'_, U>],
    priorities: &Priorities,
) -> Vec<usize> {
    restore_order_of(
        items.len(),
        |i| {
            let it = &items[i];
            RestoreItem {
                group_resource: it.group_resource,
                namespace: it.namespace,
                name: it.name,
                uid: it.uid,
                owners: it.owners,
            }
        },
        priorities,
    )
}

/// [`restore_order`] of the `n` items `item(0..n)` gives.
///
/// Memory: a few integers per item (its resource's rank, its place in the priority
/// order, the ready heap), plus the edges of the items that own or are owned.
pub fn restore_order_of<'a, U: Eq + Hash + 'a>(
    n: usize,
    item: impl Fn(usize) -> RestoreItem<'a, U>,
    priorities: &Priorities,
) -> Vec<usize> {
    // Each resource's place in the priorities, once per resource.
    let mut resource_rank: HashMap<&'a str, u32> = HashMap::new();
    for i in 0..n {
        resource_rank.entry(item(i).group_resource).or_insert(0);
    }
    let mut resources: Vec<&'a str> = resource_rank.keys().copied().collect();
    resources.sort_unstable_by(|a, b| priorities.rank(a).cmp(&priorities.rank(b)));
    for (r, name) in resources.iter().enumerate() {
        resource_rank.insert(name, r as u32);
    }
    let rank: Vec<u32> = (0..n)
        .map(|i| resource_rank[item(i).group_resource])
        .collect();
    drop(resource_rank);
    let key = |i: usize| {
        let it = item(i);
        (rank[i], it.namespace, it.name, i)
    };
    // The priority order alone; `place[i]` is item i's place in it.
    let mut sorted: Vec<u32> = (0..n as u32).collect();
    sorted.sort_unstable_by(|&a, &b| key(a as usize).cmp(&key(b as usize)));
    drop(rank);
    // Edges owner → dependent, for owners that are in the backup.
    let named: HashSet<&'a U> = (0..n).flat_map(|i| item(i).owners.iter()).collect();
    if named.is_empty() {
        return sorted.into_iter().map(|i| i as usize).collect();
    }
    let by_uid: HashMap<&'a U, usize> = (0..n)
        .filter_map(|i| {
            let uid = item(i).uid;
            named.contains(uid).then_some((uid, i))
        })
        .collect();
    let mut waiting_on: HashMap<usize, usize> = HashMap::new();
    let mut dependents: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..n {
        let mut owners: Vec<usize> = item(i)
            .owners
            .iter()
            .filter_map(|u| by_uid.get(u).copied())
            .filter(|&o| o != i)
            .collect();
        if owners.is_empty() {
            continue;
        }
        owners.sort_unstable();
        owners.dedup();
        waiting_on.insert(i, owners.len());
        for o in owners {
            dependents.entry(o).or_default().push(i);
        }
    }
    let mut place = vec![0u32; n];
    for (p, &i) in sorted.iter().enumerate() {
        place[i as usize] = p as u32;
    }
    let mut ready: BinaryHeap<Reverse<u32>> = (0..n)
        .filter(|i| !waiting_on.contains_key(i))
        .map(|i| Reverse(place[i]))
        .collect();
    let mut done = vec![false; n];
    // Where to look for the first-ranked item left, when only cycles are left.
    let mut first_left = 0;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let next = match ready.pop() {
            Some(Reverse(p)) => sorted[p as usize] as usize,
            // Only a cycle is left: take the first-ranked item of it.
            None => {
                while done[sorted[first_left] as usize] {
                    first_left += 1;
                }
                sorted[first_left] as usize
            }
        };
        if done[next] {
            continue;
        }
        done[next] = true;
        out.push(next);
        for &d in dependents.get(&next).map(Vec::as_slice).unwrap_or_default() {
            if done[d] {
                continue;
            }
            if let Some(w) = waiting_on.get_mut(&d) {
                *w = w.saturating_sub(1);
                if *w == 0 {
                    ready.push(Reverse(place[d]));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An item as the tests write it (owned).
    #[derive(Clone)]
    struct Item {
        group_resource: String,
        name: String,
        uid: String,
        owners: Vec<String>,
    }

    fn item(gr: &str, name: &str, uid: &str, owners: &[&str]) -> Item {
        Item {
            group_resource: gr.into(),
            name: name.into(),
            uid: uid.into(),
            owners: owners.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn restore_order(items: &[Item], p: &Priorities) -> Vec<usize> {
        let borrowed: Vec<RestoreItem<'_, String>> = items
            .iter()
            .map(|it| RestoreItem {
                group_resource: &it.group_resource,
                namespace: "ns",
                name: &it.name,
                uid: &it.uid,
                owners: &it.owners,
            })
            .collect();
        super::restore_order(&borrowed, p)
    }

    fn names(items: &[Item], order: &[usize]) -> Vec<String> {
        order.iter().map(|&i| items[i].name.clone()).collect()
    }

    #[test]
    fn velero_s_resource_order_without_owners() {
        let items = vec![
            item("services", "svc", "1", &[]),
            item("deployments.apps", "deploy", "2", &[]),
            item(
                "customresourcedefinitions.apiextensions.k8s.io",
                "crd-x",
                "3",
                &[],
            ),
            item("customresourcedefinitions", "crd", "4", &[]),
            item("clusters.cluster.x-k8s.io", "low", "5", &[]),
            item("configmaps", "cm", "6", &[]),
            item("namespaces", "ns", "7", &[]),
            item("apples.example.com", "apple", "8", &[]),
        ];
        // As written, `customresourcedefinitions` names the core-less plural only.
        let order = restore_order(&items, &Priorities::default());
        assert_eq!(
            names(&items, &order),
            ["crd", "ns", "cm", "svc", "apple", "crd-x", "deploy", "low"]
        );
        // Resolved through discovery, as Velero does, it is the apiextensions resource.
        let resolved = Priorities::default().resolved(|e| {
            (e == "customresourcedefinitions")
                .then(|| "customresourcedefinitions.apiextensions.k8s.io".to_string())
        });
        let order = restore_order(&items, &resolved);
        assert_eq!(
            names(&items, &order),
            ["crd-x", "ns", "cm", "svc", "apple", "crd", "deploy", "low"]
        );
    }

    #[test]
    fn an_owner_comes_before_its_dependents_even_against_the_priorities() {
        // Velero's list puts replicasets.apps (high) before deployments.apps (the rest).
        let items = vec![
            item("pods", "pod", "p", &["rs"]),
            item("replicasets.apps", "rs", "rs", &["d"]),
            item("deployments.apps", "d", "d", &[]),
            item("configmaps", "cm", "cm", &["cr"]),
            item("widgets.example.com", "cr", "cr", &[]),
        ];
        let order = restore_order(&items, &Priorities::default());
        let pos = |n: &str| names(&items, &order).iter().position(|x| x == n).unwrap();
        assert!(pos("d") < pos("rs") && pos("rs") < pos("pod"));
        assert!(pos("cr") < pos("cm"));
    }

    #[test]
    fn the_flag_replaces_the_lists_and_refuses_two_dashes() {
        let p = Priorities::parse("pods,configmaps-secrets").unwrap();
        assert_eq!(p.high, ["pods", "configmaps"]);
        assert_eq!(p.low, ["secrets"]);
        assert_eq!(p.rank("namespaces"), (1, 0, "namespaces"));
        assert!(Priorities::parse("a-b-c").is_err());
    }

    #[test]
    fn a_cycle_is_broken_and_every_item_placed_once() {
        let items = vec![
            item("configmaps", "a", "a", &["b"]),
            item("configmaps", "b", "b", &["a"]),
            item("secrets", "s", "s", &[]),
        ];
        let order = restore_order(&items, &Priorities::default());
        assert_eq!(names(&items, &order), ["s", "a", "b"]);
    }

    proptest! {
        #[test]
        fn owners_first_and_everything_once(
            resources in proptest::collection::vec(0usize..6, 1..30),
            links in proptest::collection::vec((0usize..30, 0usize..30), 0..30),
        ) {
            const GRS: [&str; 6] = ["pods", "replicasets.apps", "deployments.apps", "configmaps", "widgets.x.io", "namespaces"];
            let n = resources.len();
            let mut items: Vec<Item> = resources
                .iter()
                .enumerate()
                .map(|(i, &r)| item(GRS[r], &format!("i{i}"), &format!("u{i}"), &[]))
                .collect();
            // Owners only from lower to higher index: acyclic.
            for (a, b) in links {
                let (a, b) = (a % n, b % n);
                if a < b {
                    items[b].owners.push(format!("u{a}"));
                }
            }
            let order = restore_order(&items, &Priorities::default());
            let mut seen = order.clone();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..n).collect::<Vec<_>>());
            let pos: HashMap<usize, usize> = order.iter().enumerate().map(|(p, &i)| (i, p)).collect();
            for (i, it) in items.iter().enumerate() {
                for o in &it.owners {
                    let owner: usize = o[1..].parse().unwrap();
                    prop_assert!(pos[&owner] < pos[&i]);
                }
            }
        }
    }
}
