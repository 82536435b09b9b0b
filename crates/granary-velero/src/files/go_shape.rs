//! Writing a typed object exactly as Go's `encoding/json` writes the Go struct it mirrors.
//!
//! serde writes our types field by field, with `Option`s left out when `None`; Go
//! writes struct fields in declaration order and decides per field what to leave out:
//! `omitempty` drops zero scalars and empty slices and maps, but never a struct (a
//! `metav1.Duration` is written as `"0s"`, a zero `metav1.Time` as `null`, an empty
//! struct as `{}`), and a field without `omitempty` is always written. A [`Shape`] is
//! the description of one Go type; [`reshape`] turns the serde value into the ordered
//! tree Go would have written, normalising `metav1.Time` (whole seconds, UTC) and
//! `metav1.Duration` (Go's `Duration.String()`) on the way.

use chrono::{DateTime, SecondsFormat};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

use crate::archive::json::sorted;
use granary_api::velero::Duration;

/// How Go writes a value of one type.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// A struct: its JSON fields in declaration order.
    Struct(&'static [Field]),
    /// `map[string]T`: keys sorted, as Go sorts them.
    Map(&'static Shape),
    /// `[]T`.
    List(&'static Shape),
    /// `metav1.Time`: RFC 3339 in whole seconds, UTC.
    Time,
    /// `metav1.Duration`: Go's `Duration.String()` form (`"4h"` is written `"4h0m0s"`).
    Duration,
    /// A string, number or bool, or raw JSON written as is (object keys sorted).
    Plain,
}

/// One field of a Go struct.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    pub name: &'static str,
    pub shape: Shape,
    pub when: When,
}

/// When Go writes a field.
#[derive(Debug, Clone, Copy)]
pub(crate) enum When {
    /// `omitempty` on a string, number, bool, slice or map: left out when `""`, `0`,
    /// `false`, empty or absent.
    NotEmpty,
    /// `omitempty` on a pointer: left out only when nil (`false`, `0`, `{}` are written).
    NotNil,
    /// Always written: no `omitempty`, or `omitempty` on a struct (which Go never
    /// omits). When absent, the Go zero value is written.
    Always(Zero),
}

/// A Go zero value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Zero {
    /// A zero struct: `{}` plus whatever its own always-written fields hold.
    Struct,
    /// A nil pointer or slice, or a zero `metav1.Time`.
    Null,
    /// A string-valued zero (`""`, or `"0s"` for a `metav1.Duration`).
    Str(&'static str),
}

/// Shorthand for the shape tables.
pub(crate) const fn field(name: &'static str, shape: Shape, when: When) -> Field {
    Field { name, shape, when }
}

/// The ordered JSON tree Go would write.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ordered {
    Object(Vec<(String, Ordered)>),
    Array(Vec<Ordered>),
    /// Written as is, object keys sorted.
    Leaf(Value),
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Ordered::Object(fields) => {
                let mut m = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            Ordered::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Ordered::Leaf(v) => sorted(v).serialize(s),
        }
    }
}

/// The result of [`reshape`]: the tree, and the paths of object keys the shape does not
/// know (written after the known fields, sorted; a typed value has none).
#[derive(Debug)]
pub(crate) struct Reshaped {
    pub tree: Ordered,
    pub unknown: Vec<String>,
}

/// Reshapes `value` (a serde-serialised typed object) as Go would write it.
pub(crate) fn reshape(value: Value, shape: &Shape) -> Reshaped {
    let mut unknown = Vec::new();
    let tree = walk(value, shape, "", &mut unknown);
    Reshaped { tree, unknown }
}

fn walk(value: Value, shape: &Shape, at: &str, unknown: &mut Vec<String>) -> Ordered {
    match (shape, value) {
        (Shape::Struct(fields), Value::Object(map)) => walk_struct(map, fields, at, unknown),
        (Shape::Map(inner), Value::Object(map)) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Ordered::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| {
                        let here = format!("{at}.{k}");
                        let v = walk(v, inner, &here, unknown);
                        (k, v)
                    })
                    .collect(),
            )
        }
        (Shape::List(inner), Value::Array(items)) => Ordered::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, v)| walk(v, inner, &format!("{at}[{i}]"), unknown))
                .collect(),
        ),
        (Shape::Time, Value::String(s)) => Ordered::Leaf(Value::String(go_time(s))),
        (Shape::Duration, Value::String(s)) => Ordered::Leaf(Value::String(go_duration(s))),
        (_, other) => Ordered::Leaf(other),
    }
}

fn walk_struct(
    mut map: Map<String, Value>,
    fields: &[Field],
    at: &str,
    unknown: &mut Vec<String>,
) -> Ordered {
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        let here = format!("{at}.{}", f.name);
        let value = map.remove(f.name);
        let value = match (f.when, value) {
            (When::NotEmpty, Some(v)) if is_empty(&v) => None,
            (When::NotNil, Some(Value::Null)) => None,
            (When::Always(zero), None | Some(Value::Null)) => Some(zero_value(zero)),
            (_, v) => v,
        };
        if let Some(v) = value {
            out.push((f.name.to_owned(), walk(v, &f.shape, &here, unknown)));
        }
    }
    let mut rest: Vec<(String, Value)> = map.into_iter().collect();
    rest.sort_by(|a, b| a.0.cmp(&b.0));
    for (k, v) in rest {
        unknown.push(format!("{at}.{k}"));
        out.push((k, Ordered::Leaf(v)));
    }
    Ordered::Object(out)
}

fn zero_value(zero: Zero) -> Value {
    match zero {
        Zero::Struct => Value::Object(Map::new()),
        Zero::Null => Value::Null,
        Zero::Str(s) => Value::String(s.to_owned()),
    }
}

/// What `omitempty` leaves out of a non-struct field.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

/// `metav1.Time` as Go writes it: UTC, whole seconds. Unparseable text is kept (Go
/// could not have read it in the first place).
fn go_time(s: String) -> String {
    match DateTime::parse_from_rfc3339(&s) {
        Ok(t) => t.to_utc().to_rfc3339_opts(SecondsFormat::Secs, true),
        Err(_) => s,
    }
}

/// `metav1.Duration` as Go writes it. Unparseable text is kept (validation reports it).
fn go_duration(s: String) -> String {
    match Duration::parse(&s).and_then(|d| d.to_delta()) {
        Ok(delta) => Duration::from_delta(delta).as_str().to_owned(),
        Err(_) => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const INNER: &[Field] = &[
        field("b", Shape::Plain, When::Always(Zero::Str(""))),
        field("a", Shape::Plain, When::NotEmpty),
    ];
    const OUTER: &[Field] = &[
        field("z", Shape::Struct(INNER), When::Always(Zero::Struct)),
        field("t", Shape::Time, When::Always(Zero::Null)),
        field("d", Shape::Duration, When::Always(Zero::Str("0s"))),
        field("p", Shape::Plain, When::NotNil),
        field("n", Shape::Plain, When::NotEmpty),
        field("m", Shape::Map(&Shape::Duration), When::NotEmpty),
        field("l", Shape::List(&Shape::Time), When::NotEmpty),
    ];

    fn text(v: Value) -> (String, Vec<String>) {
        let r = reshape(v, &Shape::Struct(OUTER));
        (
            serde_json::to_string(&r.tree).expect("serialises"),
            r.unknown,
        )
    }

    #[test]
    fn fields_follow_go_order_and_omission_rules() {
        let (s, unknown) = text(json!({}));
        assert_eq!(s, r#"{"z":{"b":""},"t":null,"d":"0s"}"#);
        assert!(unknown.is_empty());
        let (s, _) = text(json!({
            "l": ["2026-01-02T03:04:05.678+01:00"], "m": {"y": "90m", "x": "1h"}, "n": 0,
            "p": false, "d": "4h", "t": "2026-01-02T03:04:05.5Z", "z": {"a": "x", "b": "y"}
        }));
        assert_eq!(
            s,
            r#"{"z":{"b":"y","a":"x"},"t":"2026-01-02T03:04:05Z","d":"4h0m0s","p":false,"m":{"x":"1h0m0s","y":"1h30m0s"},"l":["2026-01-02T02:04:05Z"]}"#
        );
    }

    #[test]
    fn unknown_keys_come_last_sorted_and_are_reported() {
        let (s, unknown) = text(json!({"zz": 1, "aa": {"k": 2}, "n": "x"}));
        assert_eq!(
            s,
            r#"{"z":{"b":""},"t":null,"d":"0s","n":"x","aa":{"k":2},"zz":1}"#
        );
        assert_eq!(unknown, vec![".aa", ".zz"]);
    }

    #[test]
    fn bad_times_and_durations_are_kept_verbatim() {
        let (s, _) = text(json!({"t": "yesterday", "d": "forever"}));
        assert_eq!(s, r#"{"z":{"b":""},"t":"yesterday","d":"forever"}"#);
    }
}
