//! Events are one store served through two APIs, as in kube-apiserver: `v1` Events
//! (what `kubectl get events` and `kubectl describe` read) and `events.k8s.io/v1`
//! Events (what newer recorders write). Objects are stored in the core form; the
//! events.k8s.io form is converted on the way in and out with kube-apiserver's field
//! mapping (its `pkg/apis/events` conversion): `regarding` is `involvedObject`, `note`
//! is `message`, `reportingController` is `reportingComponent`, the `deprecated*`
//! fields are the core `count`, `firstTimestamp`, `lastTimestamp` and `source`, and
//! the rest (`reason`, `type`, `eventTime`, `series`, `action`, `related`,
//! `reportingInstance`, metadata) carry over as they are. Fields neither form has are
//! dropped, as decoding into the typed object drops them.

use serde_json::{Map, Value};

use super::store::{GroupResource, Mutation, Store};

/// (core v1 field, events.k8s.io/v1 field).
const RENAMED: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("count", "deprecatedCount"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("source", "deprecatedSource"),
    ("reportingComponent", "reportingController"),
];

/// Fields both forms name alike.
const SHARED: &[&str] = &[
    "metadata",
    "reason",
    "type",
    "eventTime",
    "action",
    "related",
    "reportingInstance",
];

/// The fields of an `EventSeries` both forms have (core's deprecated `state` has no
/// events.k8s.io counterpart).
const SERIES: &[&str] = &["count", "lastObservedTime"];

fn convert(obj: &Value, api_version: &str, to_events_v1: bool) -> Value {
    let Some(src) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    out.insert("kind".into(), Value::String("Event".into()));
    out.insert("apiVersion".into(), Value::String(api_version.into()));
    for field in SHARED {
        if let Some(v) = src.get(*field) {
            out.insert((*field).into(), v.clone());
        }
    }
    for (core, v1) in RENAMED {
        let (from, to) = if to_events_v1 { (core, v1) } else { (v1, core) };
        if let Some(v) = src.get(*from) {
            out.insert((*to).into(), v.clone());
        }
    }
    if let Some(series) = src.get("series") {
        let kept = match series.as_object() {
            Some(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| SERIES.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            None => series.clone(),
        };
        out.insert("series".into(), kept);
    }
    Value::Object(out)
}

/// A stored (core `v1`) Event as `events.k8s.io/v1` serves it.
pub(crate) fn core_to_events_v1(obj: &Value) -> Value {
    convert(obj, "events.k8s.io/v1", true)
}

/// An `events.k8s.io/v1` Event in the stored core `v1` form.
pub(crate) fn events_v1_to_core(obj: &Value) -> Value {
    convert(obj, "v1", false)
}

/// kube-apiserver's field-selector names of events.k8s.io/v1 Events.
pub(crate) const EVENTS_V1_FIELDS: &[&str] = &[
    "reason",
    "type",
    "regarding.kind",
    "regarding.name",
    "regarding.namespace",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reportingController",
];

/// Moves events.k8s.io/v1 Events that a data directory kept in a store of their own
/// (before the two APIs shared one) into the core store, so they are served again; a
/// core Event of the same name wins.
pub(crate) fn fold_separate_events_v1(store: &Store) {
    let old_gr = GroupResource::new("events.k8s.io", "events");
    let core_gr = GroupResource::new("", "events");
    let (old, _) = store.list(&old_gr, None, None);
    for ((ns, name), data) in old {
        let Ok(obj) = serde_json::from_slice::<Value>(&data) else {
            continue;
        };
        let core = events_v1_to_core(&obj);
        let _ = store.mutate(&core_gr, &ns, &name, |cur, _| match cur {
            Some(c) => Ok(Mutation::Unchanged(c)),
            None => Ok(Mutation::Put(core)),
        });
        let _ = store.mutate(&old_gr, &ns, &name, |cur, _| match cur {
            Some(c) => Ok(Mutation::Remove(c)),
            None => Err(super::errors::ApiError::not_found(
                "events.k8s.io",
                "events",
                &name,
            )),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Limits;
    use serde_json::json;

    #[test]
    fn events_kept_apart_by_an_older_data_directory_are_folded_in() {
        let store = Store::new(Limits::count(10), 10);
        let old_gr = GroupResource::new("events.k8s.io", "events");
        let core_gr = GroupResource::new("", "events");
        for (gr, name, obj) in [
            (
                &old_gr,
                "e1",
                json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "e1", "namespace": "ns"}, "note": "kept apart"}),
            ),
            (
                &old_gr,
                "e2",
                json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "e2", "namespace": "ns"}, "note": "loses"}),
            ),
            (
                &core_gr,
                "e2",
                json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "e2", "namespace": "ns"}, "message": "wins"}),
            ),
        ] {
            store
                .mutate(gr, "ns", name, |_, _| Ok(Mutation::Put(obj)))
                .unwrap();
        }
        fold_separate_events_v1(&store);
        assert!(store.list(&old_gr, None, None).0.is_empty());
        let e1 = store.get(&core_gr, "ns", "e1").expect("folded in");
        assert_eq!(e1["message"], "kept apart");
        assert_eq!(e1["apiVersion"], "v1");
        assert_eq!(store.get(&core_gr, "ns", "e2").unwrap()["message"], "wins");
    }

    #[test]
    fn fields_map_both_ways_as_kube_apiserver_converts_them() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "ns"},
            "regarding": {"kind": "Pod", "name": "p", "namespace": "ns", "uid": "u1"},
            "related": {"kind": "Node", "name": "n"},
            "note": "pulled the image", "reason": "Pulled", "type": "Normal",
            "action": "Pulling", "eventTime": "2026-01-02T03:04:05.000000Z",
            "reportingController": "granary.dev/ctl", "reportingInstance": "ctl-1",
            "series": {"count": 3, "lastObservedTime": "2026-01-02T03:05:00.000000Z"},
            "deprecatedCount": 4, "deprecatedFirstTimestamp": "2026-01-02T03:00:00Z",
            "deprecatedLastTimestamp": "2026-01-02T03:05:00Z",
            "deprecatedSource": {"component": "kubelet", "host": "n"},
            "notAField": true,
        });
        let core = events_v1_to_core(&v1);
        assert_eq!(
            core,
            json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "e1", "namespace": "ns"},
                "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns", "uid": "u1"},
                "related": {"kind": "Node", "name": "n"},
                "message": "pulled the image", "reason": "Pulled", "type": "Normal",
                "action": "Pulling", "eventTime": "2026-01-02T03:04:05.000000Z",
                "reportingComponent": "granary.dev/ctl", "reportingInstance": "ctl-1",
                "series": {"count": 3, "lastObservedTime": "2026-01-02T03:05:00.000000Z"},
                "count": 4, "firstTimestamp": "2026-01-02T03:00:00Z",
                "lastTimestamp": "2026-01-02T03:05:00Z",
                "source": {"component": "kubelet", "host": "n"},
            })
        );
        let mut back = v1.clone();
        back.as_object_mut().unwrap().remove("notAField");
        assert_eq!(core_to_events_v1(&core), back);
    }

    #[test]
    fn core_series_state_has_no_events_v1_counterpart() {
        let core = json!({"series": {"count": 2, "lastObservedTime": "t", "state": "Ongoing"}});
        assert_eq!(
            core_to_events_v1(&core)["series"],
            json!({"count": 2, "lastObservedTime": "t"})
        );
    }
}
