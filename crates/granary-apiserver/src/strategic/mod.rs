//! Strategic merge patch (`application/strategic-merge-patch+json`) for the built-in
//! kinds, as kube-apiserver applies it: a JSON merge patch whose lists merge by the
//! field's patch metadata instead of being replaced.
//!
//! Where a field's metadata comes from: the `+patchStrategy` and `+patchMergeKey` tags
//! of the Kubernetes `generated.proto` files, collected into [`meta::FIELDS`] (generated,
//! with a drift test), and the field's type from the same descriptors the protobuf
//! decoder uses (`k8s.fds`). A value of a type without metadata (a map of strings, a
//! free-form object) merges like JSON.
//!
//! The rules, as apimachinery's `strategicpatch` (patch version 2) applies a patch
//! (`MergeParallelList` and `IgnoreUnmatchedNulls` on, as the API server sets them):
//! - **maps** merge key by key; `null` removes a key; a value of another JSON type
//!   replaces; `$patch: replace` takes the patch map as it is, `$patch: delete` leaves an
//!   empty map; `$retainKeys: [...]` first clears the keys of the original not listed
//!   (every key the patch sets must be listed).
//! - **lists with strategy `merge` and a merge key** (containers by `name`, ports by
//!   `containerPort`, …): a patch element is merged into the element with the same key,
//!   or added; `{key: v, $patch: delete}` removes the elements with that key; an element
//!   `{$patch: replace}` makes the other patch elements the whole list. Then the order:
//!   the patched elements in the patch's order, the others in the original's, the two
//!   interleaved where the original orders them, a new element before the rest.
//! - **lists of scalars with strategy `merge`** (finalizers) take the union, ordered the
//!   same way; `$deleteFromPrimitiveList/<field>: [...]` removes values.
//! - `$setElementOrder/<field>: [...]` orders the merged list: the listed elements as
//!   listed, the others where the original had them.
//! - every other list is replaced.
//!
//! One departure: a value the original lacks is taken from the patch after its own
//! directives are applied to an empty original (upstream stores it as sent and the
//! typed decoding then drops the directive keys, which leaves `{key: v}` of an element
//! meant to be deleted). Errors carry upstream's messages and status codes: malformed
//! directives 400, lists of lists 422, anything else (a missing merge key, an unknown
//! `$patch`) 500 as kube-apiserver answers a non-API error.

use std::collections::HashMap;
use std::sync::OnceLock;

use protobuf::reflect::{MessageDescriptor, RuntimeFieldType, RuntimeType};
use serde_json::{Map, Value};

#[rustfmt::skip]
pub(crate) mod meta;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

/// Why a patch cannot be applied, with the HTTP status kube-apiserver answers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PatchError {
    /// 400: a malformed directive.
    BadRequest(String),
    /// 422: what the API cannot hold (lists of lists).
    Unprocessable(String),
    /// 500: anything else (kube-apiserver's answer to a non-API error).
    Other(String),
}

fn bad_patch_type(directive: &Value, map: &Map<String, Value>) -> PatchError {
    PatchError::Other(format!(
        "unknown patch type: {} in map: {}",
        directive
            .as_str()
            .map_or_else(|| directive.to_string(), str::to_owned),
        Value::Object(map.clone())
    ))
}

fn no_merge_key(map: &Map<String, Value>, key: &str) -> PatchError {
    PatchError::Other(format!(
        "map: {} does not contain declared merge key: {key}",
        Value::Object(map.clone())
    ))
}

fn bad_retain_keys() -> PatchError {
    PatchError::BadRequest("invalid patch format of retainKeys".into())
}

fn bad_primitive_list() -> PatchError {
    PatchError::BadRequest("invalid patch format of primitive list".into())
}

fn bad_set_element_order() -> PatchError {
    PatchError::BadRequest("invalid patch format of setElementOrder list".into())
}

/// What patching knows of a value's type.
#[derive(Clone, Debug, Default)]
pub(crate) enum Ty {
    /// No metadata: maps merge as JSON, lists are replaced.
    #[default]
    Unknown,
    Message(MessageDescriptor),
    /// A proto map: every key's value has this type.
    Map(Box<Ty>),
}

/// A list's patch strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Strategy {
    Replace,
    Merge,
}

/// A field's patch metadata: the type of its value (of each element, for a list), how
/// a list of it is patched, its merge key, and whether a map of it is replaced whole.
#[derive(Clone, Debug)]
struct Field {
    ty: Ty,
    list: Strategy,
    merge_key: &'static str,
    replace_map: bool,
}

impl Field {
    fn plain(ty: Ty) -> Field {
        Field {
            ty,
            list: Strategy::Replace,
            merge_key: "",
            replace_map: false,
        }
    }
}

/// (message, field) → (strategy, merge key).
type Tags = HashMap<(&'static str, &'static str), (&'static str, &'static str)>;

/// Every tagged field, from [`meta::FIELDS`].
fn tags() -> &'static Tags {
    static TAGS: OnceLock<Tags> = OnceLock::new();
    TAGS.get_or_init(|| {
        meta::FIELDS
            .iter()
            .map(|(m, f, s, k)| ((*m, *f), (*s, *k)))
            .collect()
    })
}

impl Ty {
    /// The type of a built-in kind, [`Ty::Unknown`] for any other.
    pub(crate) fn of_kind(api_version: &str, kind: &str) -> Ty {
        crate::protobuf::descriptor_of(api_version, kind).map_or(Ty::Unknown, Ty::Message)
    }

    fn of_runtime(t: &RuntimeType) -> Ty {
        match t {
            RuntimeType::Message(m) => Ty::Message(m.clone()),
            _ => Ty::Unknown,
        }
    }

    fn field(&self, key: &str) -> Field {
        match self {
            Ty::Unknown => Field::plain(Ty::Unknown),
            Ty::Map(value) => Field::plain((**value).clone()),
            Ty::Message(message) => {
                let Some((owner, field)) = crate::protobuf::json_field(message, key) else {
                    return Field::plain(Ty::Unknown);
                };
                let ty = match field.runtime_field_type() {
                    RuntimeFieldType::Singular(t) | RuntimeFieldType::Repeated(t) => {
                        Ty::of_runtime(&t)
                    }
                    RuntimeFieldType::Map(_, value) => Ty::Map(Box::new(Ty::of_runtime(&value))),
                };
                let (strategy, merge_key) = tags()
                    .get(&(owner.full_name(), field.name()))
                    .copied()
                    .unwrap_or(("", ""));
                let strategies: Vec<&str> = strategy.split(',').map(str::trim).collect();
                Field {
                    ty,
                    list: if strategies.contains(&"merge") {
                        Strategy::Merge
                    } else {
                        Strategy::Replace
                    },
                    merge_key,
                    replace_map: strategies.contains(&"replace"),
                }
            }
        }
    }
}

/// Applies strategic merge patch `patch` to `original` of type `ty`.
pub(crate) fn apply(original: &Value, patch: &Value, ty: &Ty) -> Result<Value, PatchError> {
    let (Value::Object(original), Value::Object(patch)) = (original, patch) else {
        return Err(PatchError::BadRequest("invalid JSON document".into()));
    };
    merge_map(original.clone(), patch.clone(), ty).map(Value::Object)
}

/// The JSON kinds patching tells apart.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Map,
    List,
    Scalar,
}

fn kind(v: &Value) -> Kind {
    match v {
        Value::Object(_) => Kind::Map,
        Value::Array(_) => Kind::List,
        _ => Kind::Scalar,
    }
}

fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    ty: &Ty,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.get(DIRECTIVE).cloned() {
        return match directive.as_str() {
            Some("replace") => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(bad_patch_type(&directive, &patch)),
        };
    }
    retain_keys(&mut original, &mut patch)?;
    set_element_orders(&mut original, &mut patch, ty)?;
    for (key, value) in patch {
        let (key, deleting) = match key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            Some(rest) => (
                rest.strip_prefix('/')
                    .ok_or_else(bad_primitive_list)?
                    .to_string(),
                true,
            ),
            None => (key, false),
        };
        if value.is_null() {
            original.remove(&key);
            continue;
        }
        let field = ty.field(&key);
        let Some(current) = original.remove(&key) else {
            // Nothing to delete from; anything else is taken as the patch says.
            if !deleting {
                original.insert(key, fresh(value, &field)?);
            }
            continue;
        };
        let merged = match (current, value) {
            (Value::Array(c), Value::Array(v)) if field.list == Strategy::Merge => {
                Value::Array(merge_list(c, v, &field, deleting)?)
            }
            // `$deleteFromPrimitiveList` names a merge list of scalars, nothing else.
            _ if deleting => return Err(bad_primitive_list()),
            (Value::Object(c), Value::Object(v)) if !field.replace_map => {
                Value::Object(merge_map(c, v, &field.ty)?)
            }
            (_, value) => value,
        };
        original.insert(key, merged);
    }
    Ok(original)
}

/// A value the original lacks, its directives applied to an empty original.
fn fresh(value: Value, field: &Field) -> Result<Value, PatchError> {
    Ok(match value {
        Value::Object(v) if !field.replace_map => {
            Value::Object(merge_map(Map::new(), v, &field.ty)?)
        }
        Value::Array(v) if field.list == Strategy::Merge => {
            Value::Array(merge_list(Vec::new(), v, field, false)?)
        }
        other => other,
    })
}

/// `$retainKeys`: the original keeps only the listed keys, and the patch sets no other.
fn retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), PatchError> {
    let Some(list) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(list) = list else {
        return Err(bad_retain_keys());
    };
    let listed = |k: &str| list.iter().any(|v| v.as_str() == Some(k));
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || k.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        if !listed(k) {
            return Err(bad_retain_keys());
        }
    }
    original.retain(|k, _| listed(k));
    Ok(())
}

/// Every `$setElementOrder/<field>` of `patch`: the field merged and ordered by it, the
/// directive and the field's patch consumed.
fn set_element_orders(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    ty: &Ty,
) -> Result<(), PatchError> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for key in keys {
        let order = patch.remove(&key).unwrap_or_default();
        let Value::Array(order) = order else {
            return Err(PatchError::Other(format!(
                "invalid type for {key}: expected a list, got {order}"
            )));
        };
        let field_key = key
            .strip_prefix(SET_ELEMENT_ORDER)
            .and_then(|r| r.strip_prefix('/'))
            .ok_or_else(bad_set_element_order)?
            .to_string();
        let list = |v: Option<Value>| -> Result<Option<Vec<Value>>, PatchError> {
            match v {
                None => Ok(None),
                Some(Value::Array(a)) => Ok(Some(a)),
                Some(other) => Err(PatchError::Other(format!(
                    "invalid type for {field_key}: expected a list, got {other}"
                ))),
            }
        };
        let current = list(original.get(&field_key).cloned())?;
        let patched = list(patch.remove(&field_key))?;
        let field = ty.field(&field_key);
        if let Some(p) = &patched {
            check_order(p, &order, field.merge_key)?;
        }
        let merged = match (&current, patched) {
            (None, None) => continue,
            (Some(c), None) => c.clone(),
            (None, Some(p)) => match fresh(Value::Array(p), &field)? {
                Value::Array(a) => a,
                _ => Vec::new(),
            },
            (Some(c), Some(p)) if field.list == Strategy::Merge => {
                merge_list(c.clone(), p, &field, false)?
            }
            (Some(_), Some(p)) => p,
        };
        let server_order = current.unwrap_or_default();
        let ordered = order_by(merged, &order, &server_order, field.merge_key)?;
        original.insert(field_key, Value::Array(ordered));
    }
    Ok(())
}

/// The patch's elements (but deletions) must come in the `$setElementOrder` list's order.
fn check_order(patch: &[Value], order: &[Value], merge_key: &str) -> Result<(), PatchError> {
    let kept: Vec<&Value> = patch.iter().filter(|v| !is_delete(v)).collect();
    let (mut p, mut o) = (0, 0);
    while p < kept.len() && o < order.len() {
        if kept[p].get(DIRECTIVE).is_some() {
            p += 1;
            continue;
        }
        if identity(kept[p], merge_key) == identity(&order[o], merge_key) {
            p += 1;
        }
        o += 1;
    }
    if p < kept.len() {
        return Err(PatchError::Other(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            Value::Array(patch.to_vec()),
            Value::Array(order.to_vec())
        )));
    }
    Ok(())
}

fn is_delete(v: &Value) -> bool {
    v.get(DIRECTIVE).and_then(Value::as_str) == Some("delete")
}

/// What an element is matched by: its merge key's value, or itself (scalars).
fn identity<'a>(v: &'a Value, merge_key: &str) -> Option<&'a Value> {
    if merge_key.is_empty() {
        Some(v)
    } else {
        v.get(merge_key)
    }
}

fn position(list: &[Value], v: &Value, merge_key: &str) -> Option<usize> {
    let id = identity(v, merge_key)?;
    list.iter().position(|x| identity(x, merge_key) == Some(id))
}

/// Merges list `patch` into `original` (a list field with strategy `merge`).
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    field: &Field,
    deleting: bool,
) -> Result<Vec<Value>, PatchError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let mut kinds = original.iter().chain(patch.iter()).map(kind);
    let first = kinds.next().unwrap_or(Kind::Scalar);
    if first == Kind::List {
        return Err(PatchError::Unprocessable(
            "lists of lists are not supported".into(),
        ));
    }
    if kinds.any(|k| k != first) {
        return Err(PatchError::Other(format!(
            "list element types are not identical: {} {}",
            Value::Array(original),
            Value::Array(patch)
        )));
    }
    if first == Kind::Scalar {
        if deleting {
            return Ok(original
                .into_iter()
                .filter(|v| !patch.contains(v))
                .collect());
        }
        let mut merged = original.clone();
        for v in &patch {
            if !merged.contains(v) {
                merged.push(v.clone());
            }
        }
        return order_by(merged, &patch, &original, "");
    }
    let key = field.merge_key;
    if key.is_empty() {
        return Err(PatchError::Other(
            "cannot merge lists without merge key for type map".into(),
        ));
    }
    // The special elements first: deletions, and a replacement of the whole list.
    let (mut original, mut rest, mut replace) = (original, Vec::new(), false);
    for v in patch {
        let Value::Object(map) = &v else {
            unreachable!("all elements are maps");
        };
        match map.get(DIRECTIVE) {
            None => rest.push(v),
            Some(d) => match d.as_str() {
                Some("delete") => {
                    let id = map.get(key).ok_or_else(|| no_merge_key(map, key))?;
                    original.retain(|o| o.get(key) != Some(id));
                }
                Some("replace") => replace = true,
                Some("merge") => {
                    return Err(PatchError::Other(
                        "merging lists cannot yet be specified in the patch".into(),
                    ));
                }
                _ => return Err(bad_patch_type(d, map)),
            },
        }
    }
    let patch = if replace {
        original = std::mem::take(&mut rest);
        Vec::new()
    } else {
        rest
    };
    let mut merged = original.clone();
    for v in &patch {
        let Value::Object(map) = v else {
            unreachable!("all elements are maps");
        };
        let id = map.get(key).ok_or_else(|| no_merge_key(map, key))?;
        match merged.iter().position(|o| o.get(key) == Some(id)) {
            Some(i) => {
                let Value::Object(current) = std::mem::take(&mut merged[i]) else {
                    unreachable!("all elements are maps");
                };
                merged[i] = Value::Object(merge_map(current, map.clone(), &field.ty)?);
            }
            None => merged.push(Value::Object(merge_map(
                Map::new(),
                map.clone(),
                &field.ty,
            )?)),
        }
    }
    order_by(merged, &patch, &original, key)
}

/// Orders `merged`: the elements found in `order` in its order, the others in
/// `server`'s, interleaved where `server` orders both (else the ordered one first).
fn order_by(
    merged: Vec<Value>,
    order: &[Value],
    server: &[Value],
    merge_key: &str,
) -> Result<Vec<Value>, PatchError> {
    if !merge_key.is_empty() {
        for v in merged.iter().chain(order).chain(server) {
            if let Value::Object(map) = v
                && !map.contains_key(merge_key)
            {
                return Err(no_merge_key(map, merge_key));
            }
        }
    }
    let (mut listed, mut others): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| position(order, v, merge_key).is_some());
    let rank = |list: &[Value], v: &Value| position(list, v, merge_key).unwrap_or(usize::MAX);
    listed.sort_by_key(|v| rank(order, v));
    others.sort_by_key(|v| rank(server, v));
    let mut out = Vec::with_capacity(listed.len() + others.len());
    let (mut left, mut right) = (others.into_iter().peekable(), listed.into_iter().peekable());
    loop {
        match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => out.extend(left.next()),
            (None, Some(_)) => out.extend(right.next()),
            (Some(l), Some(r)) => {
                let (li, ri) = (
                    position(server, l, merge_key),
                    position(server, r, merge_key),
                );
                if matches!((li, ri), (Some(li), Some(ri)) if li < ri) {
                    out.extend(left.next());
                } else {
                    out.extend(right.next());
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
