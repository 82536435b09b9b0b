//! Structure-aware operations on objects for server-side apply, over a [`Shape`]:
//! the fields an object sets ([`fields_of`]), what changed between two objects
//! ([`compare`]), merging an applied configuration into a live object ([`merge`]) and
//! removing fields that nobody wants any more ([`remove_fields`]). Pure functions.
//!
//! Server-owned parts never count as fields: `apiVersion`, `kind` and the metadata the
//! server sets (name, namespace, uid, resourceVersion, generation, timestamps,
//! managedFields), as in kube-apiserver.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, Path, field_element, key_element, value_element};
use super::shape::{ChildKind, ListKind, Shape};

/// Metadata fields the server owns; they never appear in a field set.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
];

/// The fields an object sets.
#[derive(Debug, Default)]
pub(crate) struct Fields<'v> {
    /// What an applier owns by sending this object: leaves, list items, map elements.
    pub applied: FieldSet,
    /// `applied` plus the maps and granular lists themselves (what a write that
    /// creates them owns; kube-apiserver's `.: {}` markers on Update entries).
    pub full: FieldSet,
    /// The values at leaf paths (scalars, atomic lists and maps, empty objects).
    pub leaves: BTreeMap<Path, &'v Value>,
}

/// The key of a list-map item (missing key fields take their schema default), or why
/// it has none.
pub(crate) fn item_key(
    item: &Value,
    keys: &[String],
    item_shape: Shape,
) -> Result<BTreeMap<String, Value>, String> {
    let mut out = BTreeMap::new();
    for k in keys {
        let v = match item.get(k) {
            Some(v) if !v.is_null() => v.clone(),
            _ => match item_shape {
                Shape::Schema(s) => s
                    .pointer(&format!("/properties/{k}/default"))
                    .cloned()
                    .ok_or_else(|| {
                        format!(
                            "associative list with keys has an element that omits key field {k:?}"
                        )
                    })?,
                _ => {
                    return Err(format!(
                        "associative list with keys has an element that omits key field {k:?}"
                    ));
                }
            },
        };
        out.insert(k.clone(), v);
    }
    Ok(out)
}

/// The fields `obj` (a whole object) sets. Fails on a list-map item without its keys.
pub(crate) fn fields_of<'v>(obj: &'v Value, shape: Shape) -> Result<Fields<'v>, String> {
    let mut out = Fields::default();
    let mut path = Vec::new();
    if let Value::Object(map) = obj {
        walk_object(map, shape, &mut path, &mut out, Strip::Root)?;
    }
    Ok(out)
}

#[derive(Clone, Copy, PartialEq)]
enum Strip {
    None,
    Root,
    Metadata,
}

fn leaf<'v>(v: &'v Value, path: &Path, out: &mut Fields<'v>) {
    out.applied.insert(path);
    out.full.insert(path);
    out.leaves.insert(path.clone(), v);
}

fn display(path: &Path) -> String {
    super::fieldset::display_path(path)
}

fn walk_object<'v>(
    map: &'v Map<String, Value>,
    shape: Shape,
    path: &mut Path,
    out: &mut Fields<'v>,
    strip: Strip,
) -> Result<(), String> {
    if shape.is_map() {
        out.full.insert(path);
    }
    for (k, v) in map {
        let skip = match strip {
            Strip::Root => k == "apiVersion" || k == "kind",
            Strip::Metadata => SERVER_METADATA.contains(&k.as_str()),
            Strip::None => false,
        };
        if skip {
            continue;
        }
        let (child, kind) = shape.child(k);
        path.push(field_element(k));
        let child_strip = if strip == Strip::Root && k == "metadata" {
            Strip::Metadata
        } else {
            Strip::None
        };
        walk_value(v, child, path, out, child_strip)?;
        if kind == ChildKind::Element {
            out.applied.insert(path);
            out.full.insert(path);
        }
        path.pop();
    }
    Ok(())
}

fn walk_value<'v>(
    v: &'v Value,
    shape: Shape,
    path: &mut Path,
    out: &mut Fields<'v>,
    strip: Strip,
) -> Result<(), String> {
    match v {
        Value::Object(map) if map.is_empty() || shape.is_atomic_map() => leaf(v, path, out),
        Value::Object(map) => walk_object(map, shape, path, out, strip)?,
        Value::Array(items) => match shape.list_kind() {
            ListKind::Atomic => leaf(v, path, out),
            ListKind::Set => {
                out.full.insert(path);
                for item in items {
                    path.push(value_element(item));
                    leaf(item, path, out);
                    path.pop();
                }
            }
            ListKind::Map(keys) => {
                out.full.insert(path);
                let item_shape = shape.items();
                for (i, item) in items.iter().enumerate() {
                    let key = item_key(item, &keys, item_shape)
                        .map_err(|e| format!("{}: element {i}: {e}", display(path)))?;
                    path.push(key_element(&key));
                    out.applied.insert(path);
                    out.full.insert(path);
                    if let Value::Object(m) = item {
                        walk_object(m, item_shape, path, out, Strip::None)?;
                    }
                    path.pop();
                }
            }
        },
        _ => leaf(v, path, out),
    }
    Ok(())
}

/// What changed from `old` to `new`, as field sets.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    /// Added or modified: the fields a write sets to a new value.
    pub(crate) fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }
}

/// Compares the fields of two objects.
pub(crate) fn compare(old: &Fields, new: &Fields) -> Comparison {
    let mut modified = FieldSet::new();
    for (p, v) in &new.leaves {
        let changed = match old.leaves.get(p) {
            Some(ov) => ov != v,
            None => old.full.contains(p),
        };
        if changed {
            modified.insert(p);
        }
    }
    Comparison {
        added: new.full.difference(&old.full),
        modified,
        removed: old.full.difference(&new.full),
    }
}

/// Merges an applied configuration into `live`: objects field by field (unless atomic),
/// sets by value, list-maps by key (new items appended in the configuration's order),
/// everything else replaced.
pub(crate) fn merge(live: &Value, config: &Value, shape: Shape) -> Value {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) if !shape.is_atomic_map() => {
            let mut out = l.clone();
            for (k, cv) in c {
                let merged = match l.get(k) {
                    Some(lv) => merge(lv, cv, shape.child(k).0),
                    None => cv.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(c)) => match shape.list_kind() {
            ListKind::Atomic => config.clone(),
            ListKind::Set => {
                let mut out = l.clone();
                for item in c {
                    if !out.contains(item) {
                        out.push(item.clone());
                    }
                }
                Value::Array(out)
            }
            ListKind::Map(keys) => {
                let item_shape = shape.items();
                let key_of = |v: &Value| item_key(v, &keys, item_shape).ok();
                let mut out = l.clone();
                for item in c {
                    let k = key_of(item);
                    match out.iter_mut().find(|o| k.is_some() && key_of(o) == k) {
                        Some(existing) => *existing = merge(existing, item, item_shape),
                        None => out.push(item.clone()),
                    }
                }
                Value::Array(out)
            }
        },
        _ => config.clone(),
    }
}

/// Removes from `obj` every member of `remove` that no path of `keep` is at or under;
/// containers this empties are removed too unless `keep` holds something there.
pub(crate) fn remove_fields(obj: &mut Value, shape: Shape, remove: &FieldSet, keep: &FieldSet) {
    remove_in(obj, shape, remove, Some(keep));
}

fn kept(keep: Option<&FieldSet>) -> bool {
    keep.is_some_and(|k| !k.is_empty())
}

fn is_empty_container(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn remove_in(obj: &mut Value, shape: Shape, remove: &FieldSet, keep: Option<&FieldSet>) {
    match obj {
        Value::Object(map) => {
            for (el, rm) in remove.child_elements() {
                let Some(key) = el.strip_prefix("f:") else {
                    continue;
                };
                let keep_child = keep.and_then(|k| k.child(el));
                if rm.is_member() && !kept(keep_child) {
                    map.remove(key);
                    continue;
                }
                if let Some(child) = map.get_mut(key) {
                    let was_empty = is_empty_container(child);
                    remove_in(child, shape.child(key).0, rm, keep_child);
                    if !was_empty && is_empty_container(child) && !kept(keep_child) {
                        map.remove(key);
                    }
                }
            }
        }
        Value::Array(items) => match shape.list_kind() {
            ListKind::Atomic => {}
            ListKind::Set => items.retain(|item| {
                let el = value_element(item);
                !remove.child(&el).is_some_and(FieldSet::is_member)
                    || kept(keep.and_then(|k| k.child(&el)))
            }),
            ListKind::Map(keys) => {
                let item_shape = shape.items();
                items.retain_mut(|item| {
                    let Ok(key) = item_key(item, &keys, item_shape) else {
                        return true;
                    };
                    let el = key_element(&key);
                    let Some(rm) = remove.child(&el) else {
                        return true;
                    };
                    let keep_child = keep.and_then(|k| k.child(&el));
                    if rm.is_member() && !kept(keep_child) {
                        return false;
                    }
                    let identity: Vec<(String, Value)> = keys
                        .iter()
                        .filter_map(|k| item.get(k).map(|v| (k.clone(), v.clone())))
                        .collect();
                    remove_in(item, item_shape, rm, keep_child);
                    // A kept item keeps the fields that identify it.
                    if let Value::Object(m) = item {
                        for (k, v) in identity {
                            m.entry(k).or_insert(v);
                        }
                    }
                    true
                });
            }
        },
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
            "args": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "cfg": {"type": "object", "x-kubernetes-map-type": "atomic"},
            "size": {"type": "integer"}
        }}}})
    }

    fn obj() -> Value {
        json!({"apiVersion": "x/v1", "kind": "W",
               "metadata": {"name": "a", "uid": "u", "labels": {"l": "1"}, "finalizers": ["f"]},
               "spec": {"tags": ["a", "b"], "ports": [{"name": "http", "port": 80}],
                        "args": ["x"], "labels": {"k": "v"}, "cfg": {"a": 1}, "size": 3}})
    }

    #[test]
    fn fields_of_matches_kube_apiserver_fields_v1() {
        let s = schema();
        let o = obj();
        let f = fields_of(&o, Shape::root("W", Some(&s))).unwrap();
        assert_eq!(
            f.applied.to_fields_v1(),
            json!({
                "f:metadata": {"f:labels": {"f:l": {}}, "f:finalizers": {"v:\"f\"": {}}},
                "f:spec": {
                    "f:tags": {"v:\"a\"": {}, "v:\"b\"": {}},
                    "f:ports": {"k:{\"name\":\"http\"}": {".": {}, "f:name": {}, "f:port": {}}},
                    "f:args": {}, "f:labels": {"f:k": {}}, "f:cfg": {}, "f:size": {}
                }
            })
        );
        let full = f.full.to_fields_v1();
        assert_eq!(full["f:metadata"]["f:labels"]["."], json!({}));
        assert_eq!(full["f:spec"]["f:ports"]["."], json!({}));
        assert!(full["f:spec"].get(".").is_none(), "structs carry no marker");
    }

    #[test]
    fn list_map_items_need_their_keys() {
        let s = schema();
        let o = json!({"spec": {"ports": [{"port": 1}]}});
        let e = fields_of(&o, Shape::root("W", Some(&s))).unwrap_err();
        assert!(e.contains(".spec.ports: element 0"), "{e}");
        // Built-in ports default their protocol.
        let svc = json!({"spec": {"ports": [{"port": 80}]}});
        let f = fields_of(&svc, Shape::root("Service", None)).unwrap();
        assert!(f.applied.contains(&[
            "f:spec".into(),
            "f:ports".into(),
            "k:{\"port\":80,\"protocol\":\"TCP\"}".into()
        ]));
    }

    #[test]
    fn merge_follows_list_and_map_types() {
        let s = schema();
        let shape = Shape::root("W", Some(&s));
        let config = json!({"spec": {"tags": ["c", "a"], "ports": [{"name": "http", "port": 81}, {"name": "x", "port": 1}],
                                     "args": ["y"], "cfg": {"b": 2}, "labels": {"n": "m"}}});
        let m = merge(&obj(), &config, shape);
        assert_eq!(m["spec"]["tags"], json!(["a", "b", "c"]));
        assert_eq!(
            m["spec"]["ports"],
            json!([{"name": "http", "port": 81}, {"name": "x", "port": 1}])
        );
        assert_eq!(m["spec"]["args"], json!(["y"]));
        assert_eq!(m["spec"]["cfg"], json!({"b": 2}));
        assert_eq!(m["spec"]["labels"], json!({"k": "v", "n": "m"}));
        assert_eq!(m["spec"]["size"], 3);
    }

    #[test]
    fn compare_and_remove() {
        let s = schema();
        let shape = Shape::root("W", Some(&s));
        let old = obj();
        let mut new = old.clone();
        new["spec"]["size"] = json!(4);
        new["spec"]["labels"] = json!({"k": "v", "z": "1"});
        new["spec"]["tags"] = json!(["a"]);
        let (fo, fnew) = (
            fields_of(&old, shape).unwrap(),
            fields_of(&new, shape).unwrap(),
        );
        let c = compare(&fo, &fnew);
        assert_eq!(
            c.modified.paths(),
            vec![vec!["f:spec".to_string(), "f:size".into()]]
        );
        assert!(
            c.added
                .contains(&["f:spec".into(), "f:labels".into(), "f:z".into()])
        );
        assert!(
            c.removed
                .contains(&["f:spec".into(), "f:tags".into(), "v:\"b\"".into()])
        );

        let mut o = obj();
        let remove = fields_of(&obj(), shape).unwrap().applied;
        let mut keep = FieldSet::new();
        keep.insert(&[
            "f:spec".into(),
            "f:ports".into(),
            "k:{\"name\":\"http\"}".into(),
            "f:port".into(),
        ]);
        keep.insert(&["f:spec".into(), "f:labels".into(), "f:k".into()]);
        remove_fields(&mut o, shape, &remove, &keep);
        assert_eq!(
            o,
            json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a", "uid": "u"},
                   "spec": {"ports": [{"name": "http", "port": 80}], "labels": {"k": "v"}}})
        );
    }
}
