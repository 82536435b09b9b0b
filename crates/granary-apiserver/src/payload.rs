//! The payload fields of built-in kinds that typed clients decode strictly and this
//! server, keeping JSON, would otherwise store as sent: ConfigMap `data` (strings) and
//! `binaryData` (base64), Secret `data` (base64), `stringData` (strings) and `type`.
//! kube-apiserver's decoder refuses a body where these are wrongly typed or not base64;
//! stored, one such Secret would make every typed list of Secrets in its namespace fail
//! (a serde error where the controller expected credentials). Checked and answered like
//! mistyped metadata ([`super::metadata::TypeError`]).

use base64::Engine;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use serde_json::{Value, json};

use super::metadata::TypeError;
use super::registry::ResourceInfo;

/// Go's `base64.StdEncoding` as `encoding/json` decodes `[]byte`: padded, line breaks
/// ignored, non-zero trailing bits allowed.
const GO_STD: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

fn go_decode(s: &str) -> Result<Vec<u8>, base64::DecodeError> {
    if s.contains(['\r', '\n']) {
        GO_STD.decode(s.replace(['\r', '\n'], ""))
    } else {
        GO_STD.decode(s)
    }
}

/// Go's decode error for a `[]byte` field's base64 text, if it has one.
pub(crate) fn base64_error(s: &str) -> Option<String> {
    let e = go_decode(s).err()?;
    let at = match e {
        base64::DecodeError::InvalidByte(at, _) => at,
        base64::DecodeError::InvalidLastSymbol(at, _) => at,
        _ => s.len(),
    };
    Some(format!("illegal base64 data at input byte {at}"))
}

/// How a payload map's values decode.
#[derive(Clone, Copy, PartialEq)]
enum Values {
    Strings,
    Base64,
}

/// (field, values) of the kind's string-keyed maps; `None` for kinds not checked here.
fn maps(info: &ResourceInfo) -> &'static [(&'static str, Values)] {
    match (info.group.as_str(), info.kind.as_str()) {
        ("", "ConfigMap") => &[("data", Values::Strings), ("binaryData", Values::Base64)],
        ("", "Secret") => &[("data", Values::Base64), ("stringData", Values::Strings)],
        _ => &[],
    }
}

/// The first payload field of `obj` Go's decoder refuses, if any.
pub(crate) fn type_error(info: &ResourceInfo, obj: &Value) -> Option<TypeError> {
    let err =
        |field: &str, element: Option<&str>, found: &Value, go_type: &'static str| TypeError {
            field: field.to_string(),
            element: element.map(String::from),
            owner: info.kind.clone(),
            found: super::metadata::json_kind(found),
            go_type: go_type.into(),
            detail: None,
        };
    if info.group.is_empty()
        && info.kind == "Secret"
        && let Some(t) = obj.get("type")
        && !(t.is_string() || t.is_null())
    {
        return Some(err("type", None, t, "v1.SecretType"));
    }
    for &(field, values) in maps(info) {
        let Some(v) = obj.get(field).filter(|v| !v.is_null()) else {
            continue;
        };
        let go_type = match values {
            Values::Strings => "map[string]string",
            Values::Base64 => "map[string][]uint8",
        };
        let Some(m) = v.as_object() else {
            return Some(err(field, None, v, go_type));
        };
        for (k, x) in m {
            match (x, values) {
                (Value::Null, _) => {}
                (Value::String(s), Values::Base64) => {
                    if let Some(detail) = base64_error(s) {
                        let mut te = err(field, Some(k), x, "[]uint8");
                        te.detail = Some(detail);
                        return Some(te);
                    }
                }
                (Value::String(_), Values::Strings) => {}
                (x, Values::Strings) => return Some(err(field, Some(k), x, "string")),
                (x, Values::Base64) => return Some(err(field, Some(k), x, "[]uint8")),
            }
        }
    }
    None
}

/// The payload as a decode/encode round trip leaves it (call after [`type_error`]
/// found nothing): null values empty, base64 canonical (what typed clients decode).
pub(crate) fn normalize(info: &ResourceInfo, obj: &mut Value) {
    for &(field, values) in maps(info) {
        if let Some(m) = obj.get_mut(field).and_then(Value::as_object_mut) {
            for v in m.values_mut() {
                match v {
                    Value::Null => *v = json!(""),
                    Value::String(s) if values == Values::Base64 => {
                        if let Ok(bytes) = go_decode(s) {
                            let canonical = STANDARD.encode(bytes);
                            if canonical != *s {
                                *s = canonical;
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn secret_and_config_map_payloads_must_decode() {
        let reg = Registry::new();
        let secret = reg.lookup("", "v1", "secrets").unwrap();
        let cm = reg.lookup("", "v1", "configmaps").unwrap();
        let bad = |info: &ResourceInfo, body: Value| type_error(info, &body);
        let e = bad(&secret, json!({"data": {"k": "not base64!"}})).unwrap();
        assert_eq!(e.field, "data");
        assert_eq!(
            e.undecodable(&secret).message,
            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 3"
        );
        assert!(bad(&secret, json!({"data": {"k": 1}})).is_some());
        assert!(bad(&secret, json!({"data": "x"})).is_some());
        assert!(bad(&secret, json!({"stringData": {"k": true}})).is_some());
        assert!(bad(&secret, json!({"type": 5})).is_some());
        assert!(bad(&cm, json!({"data": {"k": 1}})).is_some());
        assert!(bad(&cm, json!({"binaryData": {"k": "%%"}})).is_some());
        let fine = json!({"data": {"k": "c2VjcmV0", "e": "", "n": null}, "stringData": {"s": "x"}, "type": "Opaque"});
        assert_eq!(bad(&secret, fine.clone()), None);
        let mut fine = fine;
        fine["data"]["wrapped"] = json!("c2Vj\ncmV0");
        fine["data"]["bits"] = json!("YR==");
        assert_eq!(bad(&secret, fine.clone()), None, "Go's decoder takes both");
        normalize(&secret, &mut fine);
        assert_eq!(fine["data"]["n"], "");
        assert_eq!(fine["data"]["wrapped"], "c2VjcmV0");
        assert_eq!(fine["data"]["bits"], "YQ==");
        assert_eq!(
            bad(&cm, json!({"data": {"k": "not base64 is fine here"}})),
            None
        );
    }
}
