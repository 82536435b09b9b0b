//! Sets of field paths, the currency of server-side apply: which fields a manager owns.
//!
//! A set is a trie whose edges are the path elements of kube-apiserver's `FieldsV1`
//! format — `f:<name>` (a struct field or map key), `k:{"key":"value"}` (the item of a
//! list-map, by its key fields), `v:<json>` (the item of a set) and `i:<n>` (a list
//! index, read but never produced here) — so a set converts to and from `fieldsV1` as
//! is. A node is a *member* when the field it names is itself in the set; a member with
//! children is written with the `.: {}` marker, as kube-apiserver does.
//!
//! Operations are member-wise, like structured-merge-diff's: removing `.data` from a set
//! does not remove `.data.a`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One path: its elements in `FieldsV1` key form (`f:spec`, `k:{"name":"a"}`, ...).
pub(crate) type Path = Vec<String>;

/// A set of field paths (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

/// Why a `fieldsV1` value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid fieldsV1 at {at:?}: {why}")]
pub(crate) struct FieldsV1Error {
    at: String,
    why: &'static str,
}

impl FieldSet {
    pub(crate) fn new() -> Self {
        FieldSet::default()
    }

    /// Whether no path at all is in the set.
    pub(crate) fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    /// Adds `path` (the empty path names the root).
    pub(crate) fn insert(&mut self, path: &[String]) {
        let mut node = self;
        for el in path {
            node = node.children.entry(el.clone()).or_default();
        }
        node.member = true;
    }

    /// Whether `path` itself is in the set.
    pub(crate) fn contains(&self, path: &[String]) -> bool {
        self.node(path).is_some_and(|n| n.member)
    }

    /// The subtree under `path` (the fields at or below it), if any.
    pub(crate) fn node(&self, path: &[String]) -> Option<&FieldSet> {
        let mut node = self;
        for el in path {
            node = node.children.get(el)?;
        }
        Some(node)
    }

    /// The child subtree for one path element.
    pub(crate) fn child(&self, el: &str) -> Option<&FieldSet> {
        self.children.get(el)
    }

    /// Whether this node itself is a member.
    pub(crate) fn is_member(&self) -> bool {
        self.member
    }

    /// The path elements directly below this node.
    pub(crate) fn child_elements(&self) -> impl Iterator<Item = (&String, &FieldSet)> {
        self.children.iter()
    }

    pub(crate) fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_in_place(other);
        out
    }

    fn union_in_place(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (k, v) in &other.children {
            self.children
                .entry(k.clone())
                .or_default()
                .union_in_place(v);
        }
    }

    /// The paths of `self` that are not in `other`.
    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            let child = match other.children.get(k) {
                Some(o) => v.difference(o),
                None => v.clone(),
            };
            if !child.is_empty() {
                out.children.insert(k.clone(), child);
            }
        }
        out
    }

    /// The paths in both sets.
    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            if let Some(o) = other.children.get(k) {
                let child = v.intersection(o);
                if !child.is_empty() {
                    out.children.insert(k.clone(), child);
                }
            }
        }
        out
    }

    /// Every member path, depth first in element order.
    pub(crate) fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_paths(&mut prefix, &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (k, v) in &self.children {
            prefix.push(k.clone());
            v.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The set in kube-apiserver's `fieldsV1` JSON form.
    pub(crate) fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (k, v) in &self.children {
            map.insert(k.clone(), v.to_fields_v1());
        }
        Value::Object(map)
    }

    /// Reads a `fieldsV1` value. A key mapping to `{}` is a member; `.` marks its parent.
    pub(crate) fn from_fields_v1(v: &Value) -> Result<FieldSet, FieldsV1Error> {
        fn read(v: &Value, at: &str) -> Result<FieldSet, FieldsV1Error> {
            let Some(map) = v.as_object() else {
                return Err(FieldsV1Error {
                    at: at.to_string(),
                    why: "not an object",
                });
            };
            let mut out = FieldSet {
                member: map.is_empty(),
                children: BTreeMap::new(),
            };
            for (k, child) in map {
                if k == "." {
                    out.member = true;
                    continue;
                }
                if !matches!(k.get(..2), Some("f:" | "k:" | "v:" | "i:")) {
                    return Err(FieldsV1Error {
                        at: k.clone(),
                        why: "unknown path element prefix",
                    });
                }
                out.children.insert(k.clone(), read(child, k)?);
            }
            Ok(out)
        }
        let set = read(v, "")?;
        // The root is never itself a member: `{}` is the empty set.
        Ok(FieldSet {
            member: false,
            ..set
        })
    }
}

/// The `f:<name>` element of a struct field or map key.
pub(crate) fn field_element(name: &str) -> String {
    format!("f:{name}")
}

/// The `v:<json>` element of a set item.
pub(crate) fn value_element(v: &Value) -> String {
    format!("v:{v}")
}

/// The `k:{...}` element of a list-map item, from its key fields (sorted, compact JSON).
pub(crate) fn key_element(keys: &BTreeMap<String, Value>) -> String {
    let map: Map<String, Value> = keys.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    format!("k:{}", Value::Object(map))
}

/// A path as kube-apiserver prints it in conflict messages: `.spec.containers[name="a"].image`.
pub(crate) fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for el in path {
        let (kind, rest) = el.split_at(el.len().min(2));
        match kind {
            "f:" => {
                out.push('.');
                out.push_str(rest);
            }
            "k:" => {
                let parts: Vec<String> = match serde_json::from_str::<Map<String, Value>>(rest) {
                    Ok(m) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                    Err(_) => vec![rest.to_string()],
                };
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            "v:" => out.push_str(&format!("[={rest}]")),
            "i:" => out.push_str(&format!("[{rest}]")),
            _ => out.push_str(el),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn p(els: &[&str]) -> Path {
        els.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fields_v1_round_trip_with_dot_markers() {
        let v = json!({
            "f:data": {"f:a": {}, "f:b": {}},
            "f:spec": {"f:items": {".": {}, "k:{\"name\":\"x\"}": {".": {}, "f:name": {}, "f:size": {}}}}
        });
        let set = FieldSet::from_fields_v1(&v).unwrap();
        assert!(set.contains(&p(&["f:data", "f:a"])));
        assert!(!set.contains(&p(&["f:data"])));
        assert!(set.contains(&p(&["f:spec", "f:items"])));
        assert!(set.contains(&p(&["f:spec", "f:items", "k:{\"name\":\"x\"}"])));
        assert_eq!(set.to_fields_v1(), v);
        assert_eq!(set.paths().len(), 6);
        assert!(FieldSet::from_fields_v1(&json!({"x:bad": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({})).unwrap().is_empty());
    }

    #[test]
    fn operations_are_member_wise() {
        let mut a = FieldSet::new();
        a.insert(&p(&["f:data"]));
        a.insert(&p(&["f:data", "f:x"]));
        let mut b = FieldSet::new();
        b.insert(&p(&["f:data"]));
        let d = a.difference(&b);
        assert!(!d.contains(&p(&["f:data"])));
        assert!(d.contains(&p(&["f:data", "f:x"])));
        assert_eq!(a.intersection(&b).paths(), vec![p(&["f:data"])]);
        assert!(a.node(&p(&["f:data"])).is_some_and(|n| !n.is_empty()));
        assert!(d.node(&p(&["f:spec"])).is_none());
    }

    #[test]
    fn paths_print_like_kube_apiserver() {
        let mut keys = BTreeMap::new();
        keys.insert("port".to_string(), json!(80));
        keys.insert("protocol".to_string(), json!("TCP"));
        assert_eq!(key_element(&keys), "k:{\"port\":80,\"protocol\":\"TCP\"}");
        let path = vec![
            field_element("spec"),
            field_element("ports"),
            key_element(&keys),
            field_element("name"),
        ];
        assert_eq!(
            display_path(&path),
            ".spec.ports[port=80,protocol=\"TCP\"].name"
        );
        let set_item = vec![field_element("finalizers"), value_element(&json!("a"))];
        assert_eq!(display_path(&set_item), ".finalizers[=\"a\"]");
    }

    fn arb_path() -> impl Strategy<Value = Path> {
        prop::collection::vec(
            prop::sample::select(vec!["f:a", "f:b", "k:{\"n\":1}", "v:2"]),
            0..4,
        )
        .prop_map(|v| v.into_iter().map(String::from).collect())
    }

    fn arb_set() -> impl Strategy<Value = FieldSet> {
        prop::collection::vec(arb_path(), 0..6).prop_map(|paths| {
            let mut s = FieldSet::new();
            for path in paths.iter().filter(|p| !p.is_empty()) {
                s.insert(path);
            }
            s
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn set_algebra_holds(a in arb_set(), b in arb_set()) {
            let u = a.union(&b);
            let d = a.difference(&b);
            let i = a.intersection(&b);
            for path in a.paths() {
                prop_assert!(u.contains(&path));
                prop_assert_eq!(d.contains(&path), !b.contains(&path));
                prop_assert_eq!(i.contains(&path), b.contains(&path));
            }
            for path in u.paths() {
                prop_assert!(a.contains(&path) || b.contains(&path));
            }
            prop_assert_eq!(d.union(&i), a.clone());
            let back = FieldSet::from_fields_v1(&a.to_fields_v1()).unwrap();
            prop_assert_eq!(back, a);
        }
    }
}
