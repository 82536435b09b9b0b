//! The garbage collector's index, kept by the store on every write: where each uid
//! lives, the dependents of each owner, and which objects a write may have given the
//! collector something to do about. A pass looks at those only, so its cost follows the
//! writes since the last pass, not the number of objects stored (a landscape of 10,000
//! shoots and their entries made every pass scan 20,000 objects, up to 20 times a
//! second while they were being written).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::store::{DELETING, GroupResource, ObjectKey, Record};

/// Where an object is stored.
pub(crate) type Place = (GroupResource, ObjectKey);

#[derive(Debug, Default)]
pub(crate) struct GcIndex {
    by_uid: HashMap<u128, Place>,
    dependents: HashMap<u128, HashSet<Place>>,
    dirty: HashSet<Place>,
}

/// What an owner's dependents judge it by: absent, or (deleting, its finalizers).
fn owner_facts(r: Option<&Record>) -> Option<(bool, &[String])> {
    r.map(|r| {
        (
            r.flags & DELETING != 0,
            r.gc.as_deref().map_or(&[][..], |f| &f.finalizers[..]),
        )
    })
}

fn owners(r: Option<&Record>) -> &[(u128, bool)] {
    r.and_then(|r| r.gc.as_deref())
        .map_or(&[][..], |f| &f.owners[..])
}

impl GcIndex {
    /// Records a write of the object at `place`: `old` is its record before (`None`: it
    /// did not exist), `new` after (`None`: it is gone).
    /// The place is copied only when the index keeps it (a new uid, a changed owner, a
    /// mark): a plain update of an object without owners allocates nothing here.
    pub(crate) fn changed(
        &mut self,
        gr: &GroupResource,
        key: &ObjectKey,
        old: Option<&Record>,
        new: Option<&Record>,
    ) {
        let place = || (gr.clone(), key.clone());
        let old_uid = old.map_or(0, |r| r.uid);
        let new_uid = new.map_or(0, |r| r.uid);
        if old_uid != new_uid {
            if old_uid != 0
                && self
                    .by_uid
                    .get(&old_uid)
                    .is_some_and(|(g, k)| g == gr && k == key)
            {
                self.by_uid.remove(&old_uid);
            }
            if new_uid != 0 {
                self.by_uid.insert(new_uid, place());
                // Dependents loaded before their owner now have one to look at.
                self.mark_dependents(new_uid);
            }
        }
        let (before, after) = (owners(old), owners(new));
        if before != after {
            let place = place();
            for (owner, _) in before {
                if let Some(set) = self.dependents.get_mut(owner) {
                    set.remove(&place);
                    if set.is_empty() {
                        self.dependents.remove(owner);
                    }
                }
                // One dependent fewer may let an owner that waits for them go.
                self.mark_uid(*owner);
            }
            for (owner, _) in after {
                self.dependents
                    .entry(*owner)
                    .or_default()
                    .insert(place.clone());
            }
        }
        // An object with owners, or being deleted, is looked at after each write.
        if new.is_some_and(|r| r.flags != 0) {
            self.dirty.insert(place());
        }
        // Its dependents judge it by whether it is there, being deleted, and how.
        if old_uid != 0 && owner_facts(old) != owner_facts(new) {
            self.mark_dependents(old_uid);
        }
    }

    fn mark_uid(&mut self, uid: u128) {
        if let Some(place) = self.by_uid.get(&uid) {
            self.dirty.insert(place.clone());
        }
    }

    fn mark_dependents(&mut self, uid: u128) {
        if let Some(set) = self.dependents.get(&uid) {
            self.dirty.extend(set.iter().cloned());
        }
    }

    /// Marks every object with owners or being deleted (a pass over everything).
    pub(crate) fn mark_all(
        &mut self,
        objects: &HashMap<GroupResource, BTreeMap<ObjectKey, Record>>,
    ) {
        for (gr, map) in objects {
            for (key, _) in map.iter().filter(|(_, r)| r.flags != 0) {
                self.dirty.insert((gr.clone(), key.clone()));
            }
        }
    }

    /// The objects marked since the last call.
    pub(crate) fn take_dirty(&mut self) -> HashSet<Place> {
        std::mem::take(&mut self.dirty)
    }

    /// Where the object with `uid` is stored, if anywhere.
    pub(crate) fn place_of(&self, uid: u128) -> Option<&Place> {
        self.by_uid.get(&uid)
    }

    /// The objects that name `uid` as an owner.
    pub(crate) fn dependents_of(&self, uid: u128) -> impl Iterator<Item = &Place> {
        self.dependents.get(&uid).into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::store::{GcFacts, HAS_OWNERS};

    fn place(name: &str) -> Place {
        (
            GroupResource::new("", "configmaps"),
            ("ns".to_string(), name.to_string()),
        )
    }

    fn record(uid: u128, owners: &[u128], deleting: &[&str]) -> Record {
        let mut flags = 0;
        if !owners.is_empty() {
            flags |= HAS_OWNERS;
        }
        if !deleting.is_empty() {
            flags |= DELETING;
        }
        Record {
            uid,
            flags,
            data: Bytes::new(),
            gc: (flags != 0).then(|| {
                Arc::new(GcFacts {
                    owners: owners.iter().map(|o| (*o, true)).collect(),
                    finalizers: deleting.iter().map(|f| f.to_string()).collect(),
                })
            }),
        }
    }

    #[test]
    fn a_plain_write_marks_nothing_and_a_dependent_is_looked_at_once_per_write() {
        let mut ix = GcIndex::default();
        let owner = record(1, &[], &[]);
        ix.changed(&place("owner").0, &place("owner").1, None, Some(&owner));
        assert!(ix.take_dirty().is_empty());
        let dep = record(2, &[1], &[]);
        ix.changed(&place("dep").0, &place("dep").1, None, Some(&dep));
        assert_eq!(ix.take_dirty(), HashSet::from([place("dep")]));
        assert!(ix.take_dirty().is_empty(), "taken");
        assert_eq!(ix.place_of(1), Some(&place("owner")));
        assert_eq!(ix.dependents_of(1).collect::<Vec<_>>(), vec![&place("dep")]);
    }

    #[test]
    fn an_owner_going_or_being_deleted_marks_its_dependents_and_a_dependent_going_marks_its_owner()
    {
        let mut ix = GcIndex::default();
        let owner = record(1, &[], &[]);
        let dep = record(2, &[1], &[]);
        ix.changed(&place("owner").0, &place("owner").1, None, Some(&owner));
        ix.changed(&place("dep").0, &place("dep").1, None, Some(&dep));
        ix.take_dirty();
        // Foreground deletion of the owner: its dependents are looked at, and so is it.
        let waiting = record(1, &[], &["foregroundDeletion"]);
        ix.changed(
            &place("owner").0,
            &place("owner").1,
            Some(&owner),
            Some(&waiting),
        );
        assert_eq!(
            ix.take_dirty(),
            HashSet::from([place("dep"), place("owner")])
        );
        // The dependent goes: the owner may go now.
        ix.changed(&place("dep").0, &place("dep").1, Some(&dep), None);
        assert_eq!(ix.take_dirty(), HashSet::from([place("owner")]));
        assert_eq!(ix.dependents_of(1).count(), 0);
        // The owner goes: nothing depends on it any more.
        ix.changed(&place("owner").0, &place("owner").1, Some(&waiting), None);
        assert!(ix.take_dirty().is_empty());
        assert_eq!(ix.place_of(1), None);
    }

    #[test]
    fn a_dependent_stored_before_its_owner_is_looked_at_when_the_owner_comes() {
        let mut ix = GcIndex::default();
        let dep = record(2, &[1], &[]);
        ix.changed(&place("dep").0, &place("dep").1, None, Some(&dep));
        ix.take_dirty();
        ix.changed(
            &place("owner").0,
            &place("owner").1,
            None,
            Some(&record(1, &[], &[])),
        );
        assert_eq!(ix.take_dirty(), HashSet::from([place("dep")]));
    }

    #[test]
    fn a_name_reused_by_a_new_object_moves_the_uid() {
        let mut ix = GcIndex::default();
        let first = record(1, &[], &[]);
        ix.changed(&place("x").0, &place("x").1, None, Some(&first));
        ix.changed(&place("x").0, &place("x").1, Some(&first), None);
        let second = record(3, &[], &[]);
        ix.changed(&place("x").0, &place("x").1, None, Some(&second));
        assert_eq!(ix.place_of(1), None);
        assert_eq!(ix.place_of(3), Some(&place("x")));
    }
}
