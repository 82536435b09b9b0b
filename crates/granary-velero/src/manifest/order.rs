//! Owners-before-dependents order over a manifest's ownership graph.
//!
//! Kahn's algorithm over item indices, taking among the ready items the one with the
//! lowest (rank, key): deterministic for a given manifest. When every remaining item
//! still waits for an owner, the graph has a cycle; one is found by walking owner edges
//! from the lowest remaining item, its lowest member is released (ordered as if its
//! waiting owners were already there) and the cycle is reported.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::{ItemKey, ItemMeta, Manifest};

/// A cycle the order had to break.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenCycle<'a> {
    /// The item placed before some of its owners.
    pub released: &'a ItemKey,
    /// The cycle, starting at `released`, each item owned by the next (the last by
    /// `released`).
    pub cycle: Vec<&'a ItemKey>,
}

/// The result of [`Manifest::dependency_order`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencyOrder<'a> {
    /// Every item exactly once; owners before dependents except where a cycle was broken.
    pub order: Vec<&'a ItemKey>,
    pub broken_cycles: Vec<BrokenCycle<'a>>,
}

impl Manifest {
    /// Every item, owners before the items they own; ties in key order.
    pub fn dependency_order(&self) -> DependencyOrder<'_> {
        self.dependency_order_by(|_, _| ())
    }

    /// Like [`Manifest::dependency_order`], but among items whose owners are all placed,
    /// the lowest `rank` goes first (ties in key order). Restore passes Velero's resource
    /// priorities here.
    pub fn dependency_order_by<R, F>(&self, rank: F) -> DependencyOrder<'_>
    where
        R: Ord + Clone,
        F: Fn(&ItemKey, &ItemMeta) -> R,
    {
        let keys: Vec<&ItemKey> = self.items.keys().map(|k| &**k).collect();
        let metas: Vec<&ItemMeta> = self.items.values().collect();
        let n = keys.len();
        let ranks: Vec<R> = keys.iter().zip(&metas).map(|(k, m)| rank(k, m)).collect();

        let index_of_uid: HashMap<&str, usize> = metas
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.uid.is_empty())
            .map(|(i, m)| (m.uid.as_str(), i))
            .collect();
        // owners[i]: indices of i's owners present in the manifest, deduplicated.
        let mut owners: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, meta) in metas.iter().enumerate() {
            for uid in &meta.owners {
                if let Some(&o) = index_of_uid.get(uid.as_str())
                    && !owners[i].contains(&o)
                {
                    owners[i].push(o);
                    children[o].push(i);
                }
            }
        }
        let mut waiting: Vec<usize> = owners.iter().map(Vec::len).collect();
        let mut placed = vec![false; n];
        let mut heap: BinaryHeap<Reverse<(R, usize)>> = (0..n)
            .filter(|&i| waiting[i] == 0)
            .map(|i| Reverse((ranks[i].clone(), i)))
            .collect();

        let mut order = Vec::with_capacity(n);
        let mut broken_cycles = Vec::new();
        let mut lowest_unplaced = 0;
        // Cycle search bookkeeping: the walk that last visited each item.
        let mut visited_in_walk = vec![usize::MAX; n];
        let mut walks = 0usize;

        while order.len() < n {
            let Some(Reverse((_, i))) = heap.pop() else {
                while placed[lowest_unplaced] {
                    lowest_unplaced += 1;
                }
                let cycle = find_cycle(
                    lowest_unplaced,
                    &owners,
                    &placed,
                    &mut visited_in_walk,
                    walks,
                );
                walks += 1;
                let released = *cycle
                    .iter()
                    .min_by(|&&a, &&b| (&ranks[a], a).cmp(&(&ranks[b], b)))
                    .expect("a cycle has at least one member");
                let start = cycle
                    .iter()
                    .position(|&c| c == released)
                    .expect("member of its cycle");
                let rotated: Vec<&ItemKey> = cycle[start..]
                    .iter()
                    .chain(&cycle[..start])
                    .map(|&c| keys[c])
                    .collect();
                broken_cycles.push(BrokenCycle {
                    released: keys[released],
                    cycle: rotated,
                });
                waiting[released] = 0;
                heap.push(Reverse((ranks[released].clone(), released)));
                continue;
            };
            if placed[i] {
                continue;
            }
            placed[i] = true;
            order.push(keys[i]);
            for &c in &children[i] {
                if !placed[c] && waiting[c] > 0 {
                    waiting[c] -= 1;
                    if waiting[c] == 0 {
                        heap.push(Reverse((ranks[c].clone(), c)));
                    }
                }
            }
        }
        DependencyOrder {
            order,
            broken_cycles,
        }
    }
}

/// Walks from `start` to its lowest unplaced owner, and on, until an item repeats; every
/// unplaced item still waits for an unplaced owner, so the walk must close a cycle.
/// Returns the cycle with each member owned by the next.
fn find_cycle(
    start: usize,
    owners: &[Vec<usize>],
    placed: &[bool],
    visited_in_walk: &mut [usize],
    walk: usize,
) -> Vec<usize> {
    let mut path: Vec<usize> = Vec::new();
    let mut at = start;
    loop {
        if visited_in_walk[at] == walk {
            let from = path
                .iter()
                .position(|&p| p == at)
                .expect("visited in this walk");
            // path runs child → owner; the cycle reads "each owned by the next".
            return path[from..].to_vec();
        }
        visited_in_walk[at] = walk;
        path.push(at);
        at = owners[at]
            .iter()
            .copied()
            .filter(|&o| !placed[o])
            .min()
            .expect("an unplaced item with no waiting owner would have been ready");
    }
}
