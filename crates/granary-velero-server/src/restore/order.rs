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
use std::collections::{BinaryHeap, HashMap};

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
    pub fn rank(&self, group_resource: &str) -> (u8, usize, String) {
        if let Some(i) = self.high.iter().position(|h| h == group_resource) {
            return (0, i, String::new());
        }
        if let Some(i) = self.low.iter().position(|l| l == group_resource) {
            return (2, i, String::new());
        }
        (1, 0, group_resource.to_string())
    }
}

/// One item of a backup, as the order needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreItem {
    /// `resource` for the core group, else `resource.group`.
    pub group_resource: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The UIDs of its owners (ownerReferences).
    pub owners: Vec<String>,
}

/// The indices of `items` in the order to create them.
pub fn restore_order(items: &[RestoreItem], priorities: &Priorities) -> Vec<usize> {
    let key = |i: usize| {
        let it = &items[i];
        (
            priorities.rank(&it.group_resource),
            it.namespace.clone(),
            it.name.clone(),
            i,
        )
    };
    let by_uid: HashMap<&str, usize> = items
        .iter()
        .enumerate()
        .filter(|(_, it)| !it.uid.is_empty())
        .map(|(i, it)| (it.uid.as_str(), i))
        .collect();
    // Edges owner → dependent, for owners that are in the backup.
    let mut waiting_on = vec![0usize; items.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    for (i, it) in items.iter().enumerate() {
        let mut owners: Vec<usize> = it
            .owners
            .iter()
            .filter_map(|u| by_uid.get(u.as_str()).copied())
            .filter(|&o| o != i)
            .collect();
        owners.sort_unstable();
        owners.dedup();
        waiting_on[i] = owners.len();
        for o in owners {
            dependents[o].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<_>> = (0..items.len())
        .filter(|&i| waiting_on[i] == 0)
        .map(|i| Reverse(key(i)))
        .collect();
    let mut done = vec![false; items.len()];
    let mut out = Vec::with_capacity(items.len());
    while out.len() < items.len() {
        let next = match ready.pop() {
            Some(Reverse((_, _, _, i))) => i,
            // Only a cycle is left: take the first-ranked item of it.
            None => (0..items.len())
                .filter(|&i| !done[i])
                .min_by_key(|&i| key(i))
                .expect("an item is left while the order is short"),
        };
        if done[next] {
            continue;
        }
        done[next] = true;
        out.push(next);
        for &d in &dependents[next] {
            if done[d] {
                continue;
            }
            waiting_on[d] = waiting_on[d].saturating_sub(1);
            if waiting_on[d] == 0 {
                ready.push(Reverse(key(d)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn item(gr: &str, name: &str, uid: &str, owners: &[&str]) -> RestoreItem {
        RestoreItem {
            group_resource: gr.into(),
            namespace: "ns".into(),
            name: name.into(),
            uid: uid.into(),
            owners: owners.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn names(items: &[RestoreItem], order: &[usize]) -> Vec<String> {
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
        assert_eq!(p.rank("namespaces"), (1, 0, "namespaces".into()));
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
            let mut items: Vec<RestoreItem> = resources
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
