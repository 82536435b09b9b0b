//! JSON exactly as Go's `encoding/json` writes it, which is how Velero writes item files
//! and its other JSON: map keys sorted by bytes, `<`, `>`, `&`, U+2028 and U+2029 escaped
//! as `\u003c`…, floats in Go's shortest form (`1e+21`, `1e-7`).
//!
//! Keys are sorted here rather than trusting `serde_json::Map` to be a `BTreeMap`: a
//! `preserve_order` feature turned on anywhere in the build would silently change that.

use std::io::{self, Write};

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

/// Writes `value` as compact JSON with sorted keys (Go's `json.Marshal`).
pub fn write_compact<W: Write>(out: W, value: &Value) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(out, GoFormatter(CompactFormatter));
    Sorted(value).serialize(&mut ser)
}

/// Writes any `Serialize` value compactly with Go's escaping, keeping its own field
/// order (Go struct order for typed values; `BTreeMap`s are sorted anyway).
pub fn write_compact_typed<W: Write, T: Serialize + ?Sized>(
    out: W,
    value: &T,
) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(out, GoFormatter(CompactFormatter));
    value.serialize(&mut ser)
}

/// Writes any `Serialize` value as Go's `json.MarshalIndent(v, "", "  ")` does: indented
/// by two spaces, Go's escaping, the value's own field order, no trailing newline.
pub fn write_pretty_typed<W: Write, T: Serialize + ?Sized>(
    out: W,
    value: &T,
) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(
        out,
        GoFormatter(PrettyFormatter::with_indent(b"  ")),
    );
    value.serialize(&mut ser)
}

/// A `Value` that serialises with object keys in byte order (Go's map order), whatever
/// the map type.
pub fn sorted(value: &Value) -> impl Serialize + '_ {
    Sorted(value)
}

/// Compact Go JSON into a fresh buffer.
pub fn to_vec_compact(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing a `Value` into a Vec cannot fail: no I/O errors, all keys are strings.
    write_compact(&mut out, value).expect("serializing a serde_json::Value into a Vec cannot fail");
    out
}

/// Serializes a `Value` with object keys in byte order whatever the map type.
struct Sorted<'a>(&'a Value);

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            // A `BTreeMap` is sorted already: no list of its entries is made.
            Value::Object(map) if map.keys().is_sorted() => {
                let mut m = s.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    m.serialize_entry(k, &Sorted(v))?;
                }
                m.end()
            }
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                let mut m = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    m.serialize_entry(k, &Sorted(v))?;
                }
                m.end()
            }
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    seq.serialize_element(&Sorted(v))?;
                }
                seq.end()
            }
            other => other.serialize(s),
        }
    }
}

/// Wraps a layout formatter (compact or pretty) and applies Go's escaping and float
/// formatting. serde_json's own control-character escapes (`\b \f \n \r \t`, `\u00XX`)
/// already match Go 1.22+.
struct GoFormatter<F>(F);

impl<F: Formatter> Formatter for GoFormatter<F> {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        frag: &str,
    ) -> io::Result<()> {
        // Bytes, not chars: the characters escaped are ASCII or start with 0xE2 (U+2028
        // is E2 80 A8, U+2029 E2 80 A9), and a byte scan is what keeps item files cheap.
        let bytes = frag.as_bytes();
        let (mut start, mut i) = (0, 0);
        while i < bytes.len() {
            let (esc, len): (&[u8], usize) = match bytes[i] {
                b'<' => (b"\\u003c", 1),
                b'>' => (b"\\u003e", 1),
                b'&' => (b"\\u0026", 1),
                0xE2 if bytes.get(i + 1) == Some(&0x80) => match bytes.get(i + 2) {
                    Some(0xA8) => (b"\\u2028", 3),
                    Some(0xA9) => (b"\\u2029", 3),
                    _ => {
                        i += 1;
                        continue;
                    }
                },
                _ => {
                    i += 1;
                    continue;
                }
            };
            w.write_all(&bytes[start..i])?;
            w.write_all(esc)?;
            i += len;
            start = i;
        }
        w.write_all(&bytes[start..])
    }

    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        w.write_all(go_float(value).as_bytes())
    }

    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        w.write_all(go_float(f64::from(value)).as_bytes())
    }

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// Go's float64 encoding: shortest round-trip digits, plain notation for
/// 1e-6 <= |v| < 1e21, otherwise exponent notation with an explicit `+` sign.
fn go_float(v: f64) -> String {
    let abs = v.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) || !v.is_finite() {
        // Rust's Display prints the shortest round-trip digits without an exponent.
        format!("{v}")
    } else {
        let s = format!("{v:e}");
        match s.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
            _ => s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compact(v: &Value) -> String {
        String::from_utf8(to_vec_compact(v)).expect("utf8")
    }

    #[test]
    fn keys_are_sorted_and_output_compact() {
        let v = json!({"b": 1, "a": {"z": [1, {"y": 2, "x": 3}], "c": null}});
        assert_eq!(
            compact(&v),
            r#"{"a":{"c":null,"z":[1,{"x":3,"y":2}]},"b":1}"#
        );
    }

    #[test]
    fn html_and_line_separators_are_escaped_like_go() {
        let v = json!({"s": "<a href=\"x\">&</a>\u{2028}\u{2029}\n\t\u{1}é"});
        assert_eq!(
            compact(&v),
            r#"{"s":"\u003ca href=\"x\"\u003e\u0026\u003c/a\u003e\u2028\u2029\n\t\u0001é"}"#
        );
    }

    proptest::proptest! {
        /// The byte scan escapes exactly the characters Go escapes, in any text.
        #[test]
        fn escaping_by_bytes_is_escaping_by_chars(text in "(.|<|>|&|\u{2028}|\u{2029}|\u{2027}|\u{20ac}){0,40}") {
            let mut reference = String::new();
            for c in text.chars() {
                match c {
                    '<' => reference.push_str("\\u003c"),
                    '>' => reference.push_str("\\u003e"),
                    '&' => reference.push_str("\\u0026"),
                    '\u{2028}' => reference.push_str("\\u2028"),
                    '\u{2029}' => reference.push_str("\\u2029"),
                    c => reference.push(c),
                }
            }
            let mut out = Vec::new();
            GoFormatter(CompactFormatter).write_string_fragment(&mut out, &text).expect("writes");
            proptest::prop_assert_eq!(String::from_utf8(out).expect("utf8"), reference);
        }
    }

    #[test]
    fn floats_follow_go() {
        assert_eq!(go_float(1.0), "1");
        assert_eq!(go_float(0.5), "0.5");
        assert_eq!(go_float(1e20), "100000000000000000000");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(1.5e-7), "1.5e-7");
        assert_eq!(go_float(0.000001), "0.000001");
        assert_eq!(go_float(-2.5e300), "-2.5e+300");
        assert_eq!(
            compact(&json!([1.25, -3, 18446744073709551615u64])),
            "[1.25,-3,18446744073709551615]"
        );
    }

    #[test]
    fn pretty_is_go_marshal_indent() {
        #[derive(serde::Serialize)]
        struct T {
            z: &'static str,
            a: Vec<u8>,
            m: Value,
            e: Vec<u8>,
        }
        let t = T {
            z: "<b>",
            a: vec![1, 2],
            m: json!({"y": {}, "x": 1.5}),
            e: vec![],
        };
        let mut out = Vec::new();
        write_pretty_typed(&mut out, &t).expect("ok");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "{\n  \"z\": \"\\u003cb\\u003e\",\n  \"a\": [\n    1,\n    2\n  ],\n  \"m\": {\n    \"x\": 1.5,\n    \"y\": {}\n  },\n  \"e\": []\n}"
        );
    }
}
