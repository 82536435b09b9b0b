//! Background controllers of the embedded server: ownerReference garbage collection
//! (background, foreground and orphan propagation), namespace deletion and ClusterRole
//! aggregation. They run in one task, woken after writes that may concern them (and
//! once a second).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::crd::crd_gr;
use super::gc_index::Place;
use super::objects::{
    self, FOREGROUND_FINALIZER, NAMESPACE_FINALIZER, ORPHAN_FINALIZER, Propagation,
};
use super::state::{DeleteOptions, State};
use super::store::{DELETING, GroupResource, Mutation, ObjectKey, Record, parse_uid};

/// A change one garbage-collector pass makes.
enum Work {
    /// Remove the references to these owners.
    DropRefs(GroupResource, ObjectKey, Vec<u128>),
    /// Delete the dependent.
    Delete(GroupResource, ObjectKey, Propagation),
    /// Remove this finalizer from an owner no dependent holds back any more.
    Release(GroupResource, ObjectKey, &'static str),
}

/// What happens to one dependent, given its owners' states.
#[derive(Debug, PartialEq)]
enum GcAction {
    Keep,
    /// Remove the references to these owners.
    DropRefs(Vec<u128>),
    Delete(Propagation),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum OwnerState {
    Absent,
    Alive,
    /// Deleting with `foregroundDeletion`: dependents go first.
    Waiting,
    /// Deleting with `orphan`: references to it are removed.
    Orphaning,
}

fn decide(owners: &[(u128, OwnerState)]) -> GcAction {
    if owners.is_empty() {
        return GcAction::Keep;
    }
    let orphaning: Vec<u128> = owners
        .iter()
        .filter(|(_, s)| *s == OwnerState::Orphaning)
        .map(|(u, _)| *u)
        .collect();
    if !orphaning.is_empty() {
        return GcAction::DropRefs(orphaning);
    }
    let solid = owners.iter().any(|(_, s)| *s == OwnerState::Alive);
    let gone: Vec<u128> = owners
        .iter()
        .filter(|(_, s)| matches!(s, OwnerState::Absent | OwnerState::Waiting))
        .map(|(u, _)| *u)
        .collect();
    if solid {
        if gone.is_empty() {
            GcAction::Keep
        } else {
            GcAction::DropRefs(gone)
        }
    } else if owners.iter().any(|(_, s)| *s == OwnerState::Waiting) {
        GcAction::Delete(Propagation::Foreground)
    } else {
        GcAction::Delete(Propagation::Background)
    }
}

/// The finalizers of a record being deleted (none otherwise).
fn finalizers(r: &Record) -> &[String] {
    r.gc.as_deref().map_or(&[][..], |f| &f.finalizers[..])
}

impl State {
    fn delete_as_gc(&self, gr: &GroupResource, key: &ObjectKey, propagation: Propagation) {
        let opts = DeleteOptions {
            propagation: Some(propagation),
            preconditions: None,
        };
        match self.registry.lookup_gr(gr) {
            Some(info) => {
                let _ = self.delete(&info, &key.0, &key.1, &opts);
            }
            None => {
                let _ = self.store.mutate(gr, &key.0, &key.1, |cur, _| match cur {
                    Some(v) => Ok(Mutation::Remove(v)),
                    None => Err(super::errors::ApiError::not_found(
                        &gr.group,
                        &gr.resource,
                        &key.1,
                    )),
                });
            }
        }
    }

    /// One pass of the garbage collector over the objects writes marked (over every
    /// object with owners or being deleted when `everything`). It reads the facts each
    /// record keeps (no JSON is parsed).
    pub(crate) fn collect_garbage(&self, everything: bool) {
        let work = self.gc_decisions(everything);
        for w in work {
            match w {
                Work::DropRefs(gr, key, uids) => self.internal_update(&gr, &key.0, &key.1, |obj| {
                    let Some(refs) = obj
                        .pointer_mut("/metadata/ownerReferences")
                        .and_then(Value::as_array_mut)
                    else {
                        return false;
                    };
                    let before = refs.len();
                    refs.retain(|r| {
                        !uids.contains(&parse_uid(
                            r.get("uid").and_then(Value::as_str).unwrap_or_default(),
                        ))
                    });
                    let (after, changed) = (refs.len(), before != refs.len());
                    if after == 0
                        && let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut)
                    {
                        m.remove("ownerReferences");
                    }
                    changed
                }),
                Work::Delete(gr, key, p) => self.delete_as_gc(&gr, &key, p),
                Work::Release(gr, key, finalizer) => {
                    self.internal_update(&gr, &key.0, &key.1, |obj| {
                        let Some(fs) = obj
                            .pointer_mut("/metadata/finalizers")
                            .and_then(Value::as_array_mut)
                        else {
                            return false;
                        };
                        let before = fs.len();
                        fs.retain(|x| x != finalizer);
                        before != fs.len()
                    });
                }
            }
        }
    }

    /// What one pass must do, decided under the read lock from borrowed records: only
    /// the objects a write marked since the last pass are looked at (every one with
    /// owners or being deleted when `everything`), and only those that need a change
    /// are copied out.
    fn gc_decisions(&self, everything: bool) -> Vec<Work> {
        let marked = self.store.take_gc_dirty(everything);
        if marked.is_empty() {
            return Vec::new();
        }
        let inner = self.store.read();
        let record = |(gr, key): &Place| inner.objects.get(gr).and_then(|m| m.get(key));
        let state_of = |uid: u128| match inner
            .gc
            .place_of(uid)
            .and_then(record)
            .filter(|r| r.uid == uid)
        {
            None => OwnerState::Absent,
            Some(r) if r.flags & DELETING == 0 => OwnerState::Alive,
            Some(r) if finalizers(r).iter().any(|x| x == ORPHAN_FINALIZER) => OwnerState::Orphaning,
            Some(r) if finalizers(r).iter().any(|x| x == FOREGROUND_FINALIZER) => {
                OwnerState::Waiting
            }
            Some(_) => OwnerState::Alive,
        };
        let mut work = Vec::new();
        for place in marked {
            let Some(rec) = record(&place) else {
                continue;
            };
            let (gr, key) = &place;
            if let Some(facts) = rec.gc.as_deref().filter(|f| !f.owners.is_empty()) {
                let owners: Vec<(u128, OwnerState)> = facts
                    .owners
                    .iter()
                    .map(|(u, _)| (*u, state_of(*u)))
                    .collect();
                match decide(&owners) {
                    GcAction::Keep => {}
                    GcAction::DropRefs(uids) => {
                        work.push(Work::DropRefs(gr.clone(), key.clone(), uids));
                    }
                    GcAction::Delete(p) if rec.flags & DELETING == 0 => {
                        work.push(Work::Delete(gr.clone(), key.clone(), p));
                    }
                    GcAction::Delete(_) => {}
                }
            }
            // An owner waiting for its dependents (foreground) or orphaning them: let it
            // go once no dependent that holds it back is left.
            if rec.flags & DELETING == 0 {
                continue;
            }
            let f = finalizers(rec);
            if !f
                .iter()
                .any(|x| x == FOREGROUND_FINALIZER || x == ORPHAN_FINALIZER)
            {
                continue;
            }
            // (held by a blocking dependent, held by any dependent)
            let (mut blocked, mut any) = (false, false);
            for dependent in inner.gc.dependents_of(rec.uid).filter_map(&record) {
                let refs = dependent.gc.as_deref().map_or(&[][..], |f| &f.owners[..]);
                for (_, block) in refs.iter().filter(|(u, _)| *u == rec.uid) {
                    any = true;
                    blocked |= *block;
                }
            }
            for (finalizer, is_held) in [(FOREGROUND_FINALIZER, blocked), (ORPHAN_FINALIZER, any)] {
                if !is_held && f.iter().any(|x| x == finalizer) {
                    work.push(Work::Release(gr.clone(), key.clone(), finalizer));
                }
            }
        }
        work
    }

    /// One pass of the namespace controller: empties terminating namespaces, then lets
    /// them go. True while a terminating namespace waits for its contents to go.
    pub(crate) fn finalize_namespaces(&self) -> bool {
        let nsgr = GroupResource::new("", "namespaces");
        let (namespaces, _) = self.store.list(&nsgr, None, None);
        let mut terminating = false;
        for (key, data) in namespaces {
            let Ok(ns) = serde_json::from_slice::<Value>(&data) else {
                continue;
            };
            if !objects::is_deleting(&ns) {
                continue;
            }
            terminating = true;
            let name = key.1;
            let mut contents: Vec<(GroupResource, ObjectKey, bool)> = Vec::new();
            {
                let inner = self.store.read();
                for (gr, map) in &inner.objects {
                    for (k, rec) in map.range((name.clone(), String::new())..) {
                        if k.0 != name {
                            break;
                        }
                        contents.push((gr.clone(), k.clone(), rec.flags & DELETING != 0));
                    }
                }
            }
            if contents.is_empty() {
                self.internal_update(&nsgr, "", &name, |obj| {
                    let Some(f) = obj
                        .pointer_mut("/spec/finalizers")
                        .and_then(Value::as_array_mut)
                    else {
                        return false;
                    };
                    let before = f.len();
                    f.retain(|x| x != NAMESPACE_FINALIZER);
                    before != f.len()
                });
                continue;
            }
            for (gr, k, deleting) in contents {
                if !deleting {
                    self.delete_as_gc(&gr, &k, Propagation::Background);
                }
            }
        }
        terminating
    }
}

/// The least time between two passes: under a stream of writes, passes run at most
/// this often instead of once per write.
const MIN_PASS_INTERVAL: Duration = Duration::from_millis(50);

/// How often the garbage collector looks at every object with owners or being deleted,
/// not only at those writes marked (the first pass, after a restore, is one too).
const FULL_PASS_INTERVAL: Duration = Duration::from_secs(60);

/// Runs the controllers until shutdown.
pub(crate) async fn run_controllers(state: Arc<State>) {
    let mut last_full: Option<tokio::time::Instant> = None;
    let mut crds = Input::new(crd_gr());
    let mut namespaces = Input::new(GroupResource::new("", "namespaces"));
    let mut roles = Input::new(super::aggregation::cluster_roles_gr());
    loop {
        let everything = last_full.is_none_or(|t| t.elapsed() >= FULL_PASS_INTERVAL);
        if everything {
            last_full = Some(tokio::time::Instant::now());
        }
        // Each controller reads one resource; it runs when that resource changed since
        // its last pass, while it still waits on other objects (a CRD or namespace
        // being deleted waits for its contents), and in every full pass. A stream of
        // unrelated writes (10,000 entries) costs them nothing.
        if crds.due(&state, everything) {
            crds.pending = state.reconcile_crds();
        }
        state.collect_garbage(everything);
        if namespaces.due(&state, everything) {
            namespaces.pending = state.finalize_namespaces();
        }
        if roles.due(&state, everything) {
            state.aggregate_cluster_roles();
        }
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = tokio::time::sleep(MIN_PASS_INTERVAL) => {}
        }
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = state.store.kick.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// What a built-in controller reads, and what it saw of it in its last pass.
struct Input {
    gr: GroupResource,
    /// The store's resourceVersion when the controller last ran (`None`: never).
    seen: Option<u64>,
    /// The last pass left work that waits on other objects.
    pending: bool,
}

impl Input {
    fn new(gr: GroupResource) -> Self {
        Input {
            gr,
            seen: None,
            pending: false,
        }
    }

    /// Whether the controller must run now; if so, what it reads is seen as of now (a
    /// write racing with the pass is newer, so the next pass runs again).
    fn due(&mut self, state: &State, everything: bool) -> bool {
        let now = state.store.current_rv();
        let changed = self
            .seen
            .is_none_or(|seen| state.store.last_write(&self.gr) > seen);
        let due = everything || self.pending || changed;
        if due {
            self.seen = Some(now);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_decisions() {
        use OwnerState::*;
        assert_eq!(decide(&[(1, Alive)]), GcAction::Keep);
        assert_eq!(
            decide(&[(1, Absent)]),
            GcAction::Delete(Propagation::Background)
        );
        assert_eq!(
            decide(&[(1, Waiting)]),
            GcAction::Delete(Propagation::Foreground)
        );
        assert_eq!(
            decide(&[(1, Absent), (2, Alive)]),
            GcAction::DropRefs(vec![1])
        );
        assert_eq!(
            decide(&[(1, Orphaning), (2, Absent)]),
            GcAction::DropRefs(vec![1])
        );
        assert_eq!(decide(&[]), GcAction::Keep);
    }
}
