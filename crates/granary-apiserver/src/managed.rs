//! `metadata.managedFields`: who owns which fields, kept as kube-apiserver keeps it.
//!
//! - An *apply* (`application/apply-patch+yaml`) by manager M: M's `Apply` entry becomes
//!   exactly the fields of the applied configuration; the configuration is merged into
//!   the live object; fields M applied before and no longer sends are removed unless
//!   another manager (or M's new configuration) still owns them or something below them;
//!   a field whose value the apply changes and that another manager owns is a conflict
//!   (409) unless forced, which moves its ownership to M.
//! - Any other write (create, update, patch) by manager M: the fields it adds or changes
//!   move to M's `Update` entry, and fields it removes leave every entry.
//! - Entries are per (manager, operation, subresource); empty entries disappear; the
//!   list is sorted as kube-apiserver sorts it (Apply first, then by time, manager).
//! - A write whose body carries managedFields different from the stored ones replaces
//!   them (`[{}]` clears them); an empty list or none keeps the stored ones. A create
//!   carrying managedFields (a restore) keeps them and its manager gets only what they
//!   do not cover.
//!
//! Pure: the caller gives the time.

use serde_json::{Map, Value, json};

use super::fieldset::{FieldSet, Path, display_path};
use super::merge::{Fields, compare, fields_of, merge, remove_fields};
use super::shape::Shape;

/// The two operations a managedFields entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    fn same_owner(&self, manager: &str, op: Operation, sub: Option<&str>) -> bool {
        self.manager == manager && self.operation == op && self.subresource.as_deref() == sub
    }

    /// How conflict messages name this manager.
    fn label(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
            if let Some(t) = &self.time {
                s.push_str(&format!(" at {t}"));
            }
        }
        s
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation.as_str()));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if let Some(s) = &self.subresource {
            m.insert("subresource".into(), json!(s));
        }
        Value::Object(m)
    }

    /// Reads one entry; `None` for entries that are empty or not understood.
    fn from_json(v: &Value) -> Option<Entry> {
        let manager = v.get("manager")?.as_str()?.to_string();
        let operation = match v.get("operation")?.as_str()? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        let fields = FieldSet::from_fields_v1(v.get("fieldsV1")?).ok()?;
        Some(Entry {
            manager,
            operation,
            api_version: v.get("apiVersion")?.as_str()?.to_string(),
            time: v.get("time").and_then(Value::as_str).map(String::from),
            subresource: v
                .get("subresource")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from),
            fields,
        })
    }
}

fn managed_fields(obj: &Value) -> Option<&Vec<Value>> {
    obj.pointer("/metadata/managedFields")?.as_array()
}

/// The entries of a stored object.
pub(crate) fn entries_of(obj: &Value) -> Vec<Entry> {
    managed_fields(obj)
        .map(|a| a.iter().filter_map(Entry::from_json).collect())
        .unwrap_or_default()
}

/// The entries a write starts from: the body's when it sets different, non-empty ones.
fn base_entries(live: Option<&Value>, new: &Value) -> (Vec<Entry>, bool) {
    let given = managed_fields(new).filter(|a| !a.is_empty());
    match (given, live.and_then(managed_fields)) {
        (Some(g), Some(l)) if g == l => (entries_of(live.unwrap_or(&Value::Null)), false),
        (Some(g), _) => (g.iter().filter_map(Entry::from_json).collect(), true),
        (None, _) => (live.map(entries_of).unwrap_or_default(), false),
    }
}

/// Writes `entries` (sorted, empty ones dropped) into `obj`'s metadata.
fn store_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (a.operation, &a.time, &a.manager, &a.subresource).cmp(&(
            b.operation,
            &b.time,
            &b.manager,
            &b.subresource,
        ))
    });
    let meta = super::objects::meta_mut(obj);
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(Entry::to_json).collect()),
        );
    }
}

/// Who makes a write, and how.
#[derive(Debug, Clone)]
pub(crate) struct Writer<'a> {
    pub manager: &'a str,
    pub subresource: Option<&'a str>,
    pub api_version: &'a str,
    pub now: &'a str,
}

/// Records a non-apply write: `new` is the object about to be stored (its metadata may
/// carry managedFields sent by the client), `live` the stored one (`None` on create).
/// Objects whose fields cannot be read keep their entries unchanged.
pub(crate) fn track_update(live: Option<&Value>, new: &mut Value, shape: Shape, w: &Writer) {
    let (mut entries, given) = base_entries(live, new);
    let changed = {
        let Ok(new_fields) = fields_of(new, shape) else {
            store_entries(new, entries);
            return;
        };
        match live {
            Some(l) if !(given && entries.is_empty()) => {
                let Ok(old_fields) = fields_of(l, shape) else {
                    store_entries(new, entries);
                    return;
                };
                let c = compare(&old_fields, &new_fields);
                let changed = c.changed();
                for e in entries.iter_mut() {
                    if !e.same_owner(w.manager, Operation::Update, w.subresource) {
                        e.fields = e.fields.difference(&changed).difference(&c.removed);
                    } else {
                        e.fields = e.fields.difference(&c.removed);
                    }
                }
                changed
            }
            // A reset (`[{}]`) leaves no owners.
            Some(_) => FieldSet::new(),
            None => {
                let owned = entries
                    .iter()
                    .fold(FieldSet::new(), |acc, e| acc.union(&e.fields));
                new_fields.full.difference(&owned)
            }
        }
    };
    if !changed.is_empty() {
        own(&mut entries, w, Operation::Update, |prev| {
            prev.union(&changed)
        });
    }
    store_entries(new, entries);
}

/// Sets the entry of `w` for `op` to `f(previous fields)` at `w.now`.
fn own(entries: &mut Vec<Entry>, w: &Writer, op: Operation, f: impl FnOnce(&FieldSet) -> FieldSet) {
    match entries
        .iter_mut()
        .find(|e| e.same_owner(w.manager, op, w.subresource))
    {
        Some(e) => {
            e.fields = f(&e.fields);
            e.time = Some(w.now.to_string());
            e.api_version = w.api_version.to_string();
        }
        None => entries.push(Entry {
            manager: w.manager.to_string(),
            operation: op,
            api_version: w.api_version.to_string(),
            time: Some(w.now.to_string()),
            subresource: w.subresource.map(String::from),
            fields: f(&FieldSet::new()),
        }),
    }
}

/// One field an apply would take from another manager.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Conflict {
    /// The other manager as kube-apiserver names it (`"mgr"`, `"mgr" using v1 at ...`).
    pub manager: String,
    pub path: Path,
}

/// Why an apply was refused.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ApplyError {
    /// The configuration (or the live object) has a malformed list-map item.
    Invalid(String),
    Conflicts(Vec<Conflict>),
}

/// kube-apiserver's message for a set of conflicts.
pub(crate) fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [c] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.manager,
            display_path(&c.path)
        );
    }
    let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
    managers.sort();
    managers.dedup();
    let mut lines = Vec::new();
    for m in managers {
        lines.push(format!("conflicts with {m}"));
        for c in conflicts.iter().filter(|c| c.manager == m) {
            lines.push(format!("- {}", display_path(&c.path)));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Applies `config` (already restricted to what the endpoint may change) by `w` to
/// `live` (`{}` when the object does not exist yet). Returns the object to store, with
/// its managedFields.
pub(crate) fn apply(
    live: &Value,
    config: &Value,
    shape: Shape,
    w: &Writer,
    force: bool,
) -> Result<Value, ApplyError> {
    let applied = fields_of(config, shape)
        .map_err(ApplyError::Invalid)?
        .applied;
    let mut entries = entries_of(live);
    let previous = entries
        .iter()
        .find(|e| e.same_owner(w.manager, Operation::Apply, w.subresource))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let others = entries
        .iter()
        .filter(|e| !e.same_owner(w.manager, Operation::Apply, w.subresource))
        .fold(FieldSet::new(), |acc, e| acc.union(&e.fields));
    let mut next = merge(live, config, shape);
    remove_fields(
        &mut next,
        shape,
        &previous.difference(&applied),
        &others.union(&applied),
    );
    let live_fields: Fields = fields_of(live, shape).map_err(ApplyError::Invalid)?;
    let next_fields = fields_of(&next, shape).map_err(ApplyError::Invalid)?;
    let c = compare(&live_fields, &next_fields);
    let changed = c.changed();
    let mut conflicts = Vec::new();
    for e in entries
        .iter()
        .filter(|e| !e.same_owner(w.manager, Operation::Apply, w.subresource))
    {
        for path in e.fields.intersection(&changed).paths() {
            conflicts.push(Conflict {
                manager: e.label(),
                path,
            });
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(ApplyError::Conflicts(conflicts));
    }
    for e in entries
        .iter_mut()
        .filter(|e| !e.same_owner(w.manager, Operation::Apply, w.subresource))
    {
        e.fields = e.fields.difference(&changed).difference(&c.removed);
    }
    let unchanged = c.added.is_empty() && c.modified.is_empty() && c.removed.is_empty();
    if !(unchanged && previous == applied) {
        own(&mut entries, w, Operation::Apply, |_| applied.clone());
    }
    // The live object's entries are authoritative; drop whatever the merge carried.
    if let Some(m) = next.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    store_entries(&mut next, entries);
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn writer<'a>(manager: &'a str, now: &'a str) -> Writer<'a> {
        Writer {
            manager,
            subresource: None,
            api_version: "v1",
            now,
        }
    }

    /// A ConfigMap configuration; without `data` when it is empty (an empty map is a
    /// field of its own).
    fn cm(data: Value) -> Value {
        let mut c = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        if data.as_object().is_some_and(|m| !m.is_empty()) {
            c["data"] = data;
        }
        c
    }

    fn shape() -> Shape<'static> {
        Shape::root("ConfigMap", None)
    }

    fn apply_as(live: &Value, config: &Value, m: &str, force: bool) -> Result<Value, ApplyError> {
        apply(
            live,
            config,
            shape(),
            &writer(m, "2024-01-01T00:00:00Z"),
            force,
        )
    }

    #[test]
    fn apply_records_an_apply_entry() {
        let obj = apply_as(&json!({}), &cm(json!({"a": "1"})), "alice", false).unwrap();
        assert_eq!(obj["data"], json!({"a": "1"}));
        assert_eq!(
            obj["metadata"]["managedFields"],
            json!([{"manager": "alice", "operation": "Apply", "apiVersion": "v1",
                    "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {"f:a": {}}}}])
        );
        // Applying the same again changes nothing, not even the time.
        let again = apply(
            &obj,
            &cm(json!({"a": "1"})),
            shape(),
            &writer("alice", "2030-01-01T00:00:00Z"),
            false,
        )
        .unwrap();
        assert_eq!(again, obj);
    }

    #[test]
    fn fields_no_longer_applied_are_removed_unless_shared() {
        let obj = apply_as(&json!({}), &cm(json!({"a": "1", "b": "2"})), "alice", false).unwrap();
        let obj = apply_as(&obj, &cm(json!({"b": "2"})), "bob", false).unwrap();
        let obj = apply_as(&obj, &cm(json!({})), "alice", false).unwrap();
        assert_eq!(obj["data"], json!({"b": "2"}), "b is still bob's");
        let entries = entries_of(&obj);
        assert_eq!(entries.len(), 1, "alice owns nothing any more: {entries:?}");
        assert_eq!(entries[0].manager, "bob");
        let obj = apply_as(&obj, &cm(json!({})), "bob", false).unwrap();
        assert!(obj.get("data").is_none(), "{obj}");
        assert!(obj["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn changing_another_managers_field_conflicts_unless_forced() {
        let obj = apply_as(&json!({}), &cm(json!({"a": "1", "b": "1"})), "alice", false).unwrap();
        let err = apply_as(&obj, &cm(json!({"a": "2", "b": "2"})), "bob", false).unwrap_err();
        let ApplyError::Conflicts(c) = err else {
            panic!("{err:?}")
        };
        assert_eq!(c.len(), 2);
        assert_eq!(
            conflict_message(&c),
            "Apply failed with 2 conflicts: conflicts with \"alice\"\n- .data.a\n- .data.b"
        );
        assert_eq!(
            conflict_message(&c[..1]),
            "Apply failed with 1 conflict: conflict with \"alice\": .data.a"
        );
        let forced = apply_as(&obj, &cm(json!({"a": "2"})), "bob", true).unwrap();
        assert_eq!(forced["data"], json!({"a": "2", "b": "1"}));
        let e = entries_of(&forced);
        let alice = e.iter().find(|e| e.manager == "alice").unwrap();
        assert_eq!(alice.fields.to_fields_v1(), json!({"f:data": {"f:b": {}}}));
    }

    #[test]
    fn updates_own_what_they_change() {
        let mut created = cm(json!({"a": "1"}));
        track_update(None, &mut created, shape(), &writer("kubectl", "T1"));
        assert_eq!(
            created["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {".": {}, "f:a": {}}})
        );
        let err = apply_as(&created, &cm(json!({"a": "2"})), "alice", false).unwrap_err();
        assert_eq!(
            err,
            ApplyError::Conflicts(vec![Conflict {
                manager: "\"kubectl\" using v1 at T1".into(),
                path: vec!["f:data".into(), "f:a".into()],
            }])
        );
        let applied = apply_as(&created, &cm(json!({"b": "2"})), "alice", false).unwrap();
        let mut updated = applied.clone();
        updated["data"]["b"] = json!("3");
        track_update(Some(&applied), &mut updated, shape(), &writer("ctl", "T2"));
        let e = entries_of(&updated);
        let alice = e.iter().find(|e| e.manager == "alice");
        assert!(alice.is_none(), "the update took b from alice: {e:?}");
        // A body with `[{}]` resets the entries.
        let mut reset = updated.clone();
        reset["metadata"]["managedFields"] = json!([{}]);
        track_update(Some(&updated), &mut reset, shape(), &writer("ctl", "T3"));
        assert!(reset["metadata"].get("managedFields").is_none());
    }

    fn data_map() -> impl Strategy<Value = serde_json::Map<String, Value>> {
        prop::collection::btree_map(
            prop::sample::select(vec!["a", "b", "c", "d"]),
            prop::sample::select(vec!["1", "2"]),
            0..4,
        )
        .prop_map(|m| {
            m.into_iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Whatever two managers applied before, a forced apply leaves exactly its
        /// configuration's values, owns exactly its fields, and is idempotent; the other
        /// manager keeps the fields it still holds with unchanged values.
        #[test]
        fn forced_apply_wins_and_is_idempotent(x in data_map(), y in data_map(), z in data_map()) {
            let obj = apply_as(&json!({}), &cm(Value::Object(x)), "a", true).unwrap();
            let obj = apply_as(&obj, &cm(Value::Object(y.clone())), "b", true).unwrap();
            let next = apply_as(&obj, &cm(Value::Object(z.clone())), "a", true).unwrap();
            for (k, v) in &z {
                prop_assert_eq!(&next["data"][k], v);
            }
            let entries = entries_of(&next);
            if let Some(b) = entries.iter().find(|e| e.manager == "b") {
                for p in b.fields.paths() {
                    let key = p[1].trim_start_matches("f:");
                    prop_assert!(!z.contains_key(key) || z[key] == y[key]);
                    prop_assert_eq!(&next["data"][key], &y[key]);
                }
            }
            let again = apply_as(&next, &cm(Value::Object(z)), "a", false).unwrap();
            prop_assert_eq!(again, next);
        }
    }
}
