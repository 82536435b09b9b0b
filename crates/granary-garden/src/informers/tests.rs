//! How a store takes in its lists ([`FirstList`]).

use futures::FutureExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::{Store, store::Writer};
use kube::runtime::watcher::Event;

use super::{FirstList, Incremental, apply, store_for};

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.namespace = Some("ns".into());
    c
}

fn names(store: &Store<ConfigMap>) -> Vec<String> {
    let mut n: Vec<String> = store
        .state()
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    n.sort();
    n
}

fn ready(store: &Store<ConfigMap>) -> bool {
    store.wait_until_ready().now_or_never().is_some()
}

/// The writer, its store and the state `apply` keeps, as `informer` sets them up.
fn setup(first_list: FirstList) -> (Writer<ConfigMap>, Store<ConfigMap>, Incremental) {
    let (store, writer, state) = store_for(first_list);
    (writer, store, state)
}

#[test]
fn as_it_comes_shows_each_object_of_the_first_list_at_once() {
    let (mut w, store, mut state) = setup(FirstList::AsItComes);
    assert!(ready(&store), "ready (and empty) before the first list");
    assert!(names(&store).is_empty());
    apply(&mut w, &mut state, Event::Init);
    apply(&mut w, &mut state, Event::InitApply(cm("a")));
    assert_eq!(names(&store), ["a"]);
    let back = apply(&mut w, &mut state, Event::InitApply(cm("b")));
    assert!(matches!(back, Event::InitApply(c) if c.metadata.name.as_deref() == Some("b")));
    assert_eq!(names(&store), ["a", "b"]);
    let back = apply(&mut w, &mut state, Event::InitDone);
    assert!(matches!(back, Event::InitDone));
    assert_eq!(names(&store), ["a", "b"], "the end of the list keeps it");
    assert_eq!(state, Incremental::Off);
    // Watch events after the list.
    apply(&mut w, &mut state, Event::Apply(cm("c")));
    apply(&mut w, &mut state, Event::Delete(cm("a")));
    assert_eq!(names(&store), ["b", "c"]);
}

#[test]
fn a_relist_after_the_first_is_swapped_in_whole() {
    let (mut w, store, mut state) = setup(FirstList::AsItComes);
    for e in [
        Event::Init,
        Event::InitApply(cm("a")),
        Event::InitApply(cm("b")),
        Event::InitDone,
    ] {
        apply(&mut w, &mut state, e);
    }
    apply(&mut w, &mut state, Event::Init);
    apply(&mut w, &mut state, Event::InitApply(cm("c")));
    assert_eq!(
        names(&store),
        ["a", "b"],
        "the old state until the relist is complete"
    );
    apply(&mut w, &mut state, Event::InitDone);
    assert_eq!(names(&store), ["c"], "a and b were deleted meanwhile");
}

#[test]
fn a_first_list_that_starts_over_drops_what_it_no_longer_has() {
    let (mut w, store, mut state) = setup(FirstList::AsItComes);
    apply(&mut w, &mut state, Event::Init);
    apply(&mut w, &mut state, Event::InitApply(cm("a")));
    apply(&mut w, &mut state, Event::InitApply(cm("b")));
    // The list failed on a later page and starts over; `a` was deleted meanwhile.
    apply(&mut w, &mut state, Event::Init);
    apply(&mut w, &mut state, Event::InitApply(cm("b")));
    apply(&mut w, &mut state, Event::InitDone);
    assert_eq!(names(&store), ["b"]);
}

#[test]
fn whole_shows_the_list_once_complete() {
    let (mut w, store, mut state) = setup(FirstList::Whole);
    assert!(!ready(&store));
    apply(&mut w, &mut state, Event::Init);
    apply(&mut w, &mut state, Event::InitApply(cm("a")));
    assert!(names(&store).is_empty());
    assert!(!ready(&store));
    apply(&mut w, &mut state, Event::InitDone);
    assert!(ready(&store));
    assert_eq!(names(&store), ["a"]);
}
