//! Validation and pruning of custom objects against a CRD's structural
//! `openAPIV3Schema`, with field errors shaped like kube-apiserver's.
//!
//! Supported: `type`, `required`, `enum`, `properties`, `additionalProperties`, `items`,
//! `nullable`, `x-kubernetes-int-or-string`, `x-kubernetes-preserve-unknown-fields`,
//! `x-kubernetes-embedded-resource`, `minimum`/`maximum`, `minLength`/`maxLength`,
//! `minItems`/`maxItems`, `pattern`. Unknown fields are pruned (removed) unless the schema
//! preserves them; `null` values of non-nullable fields are dropped, as kube-apiserver does.

use serde_json::{Map, Value};

use super::errors::FieldCause;

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool).unwrap_or(false)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_error(path: &str, v: &Value, want: &str) -> FieldCause {
    let actual = type_name(v);
    FieldCause {
        reason: "FieldValueTypeInvalid",
        field: path.to_string(),
        message: format!(
            "Invalid value: \"{actual}\": {path} in body must be of type {want}: \"{actual}\""
        ),
    }
}

fn type_matches(want: &str, v: &Value) -> bool {
    match want {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        _ => true,
    }
}

/// Validates `obj` (a whole custom object) against `schema` and prunes unknown fields.
/// `apiVersion`, `kind` and `metadata` at the root are left to the server's own rules.
pub(crate) fn validate_and_prune(schema: &Value, obj: &mut Value) -> Vec<FieldCause> {
    let mut errors = Vec::new();
    let Some(map) = obj.as_object_mut() else {
        errors.push(type_error("", obj, "object"));
        return errors;
    };
    let props = schema.get("properties").and_then(Value::as_object);
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        match props.and_then(|p| p.get(&key)) {
            Some(child) => {
                if map.get(&key).is_some_and(Value::is_null) && !flag(child, "nullable") {
                    map.remove(&key);
                    continue;
                }
                if let Some(v) = map.get_mut(&key) {
                    walk(child, v, &key, &mut errors);
                }
            }
            None if preserve => {}
            None => {
                map.remove(&key);
            }
        }
    }
    check_required(schema, map, "", &mut errors);
    errors
}

fn check_required(
    schema: &Value,
    map: &Map<String, Value>,
    path: &str,
    errors: &mut Vec<FieldCause>,
) {
    if let Some(req) = schema.get("required").and_then(Value::as_array) {
        for r in req.iter().filter_map(Value::as_str) {
            if !map.contains_key(r) {
                errors.push(FieldCause::required(join(path, r)));
            }
        }
    }
}

fn walk(schema: &Value, v: &mut Value, path: &str, errors: &mut Vec<FieldCause>) {
    if v.is_null() {
        if !flag(schema, "nullable") {
            errors.push(type_error(
                path,
                v,
                schema
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("object"),
            ));
        }
        return;
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        if !(v.is_string() || v.is_i64() || v.is_u64()) {
            errors.push(type_error(path, v, "integer or string"));
            return;
        }
    } else if let Some(want) = schema.get("type").and_then(Value::as_str)
        && !type_matches(want, v)
    {
        errors.push(type_error(path, v, want));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        errors.push(FieldCause::not_supported(path, v, allowed));
    }
    check_bounds(schema, v, path, errors);
    match v {
        Value::Object(map) => walk_object(schema, map, path, errors),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(item_schema, item, &format!("{path}[{i}]"), errors);
                }
            }
        }
        _ => {}
    }
}

fn walk_object(
    schema: &Value,
    map: &mut Map<String, Value>,
    path: &str,
    errors: &mut Vec<FieldCause>,
) {
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(schema, "x-kubernetes-embedded-resource");
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let child_path = join(path, &key);
        let child = props.and_then(|p| p.get(&key));
        match (child, additional) {
            (Some(child), _) => {
                if map.get(&key).is_some_and(Value::is_null) && !flag(child, "nullable") {
                    map.remove(&key);
                    continue;
                }
                if let Some(v) = map.get_mut(&key) {
                    walk(child, v, &child_path, errors);
                }
            }
            (None, Some(extra)) if extra.is_object() => {
                if let Some(v) = map.get_mut(&key) {
                    walk(extra, v, &child_path, errors);
                }
            }
            (None, Some(Value::Bool(true))) => {}
            (None, _) if preserve => {}
            (None, _) if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") => {
            }
            (None, _) => {
                map.remove(&key);
            }
        }
    }
    check_required(schema, map, path, errors);
}

fn check_bounds(schema: &Value, v: &Value, path: &str, errors: &mut Vec<FieldCause>) {
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    let int = |k: &str| schema.get(k).and_then(Value::as_u64);
    if let Some(x) = v.as_f64() {
        if let Some(min) = num("minimum") {
            let excl = flag(schema, "exclusiveMinimum");
            if x < min || (excl && x == min) {
                let op = if excl {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                errors.push(FieldCause::invalid(
                    path,
                    v,
                    &format!("{path} in body should be {op} {min}"),
                ));
            }
        }
        if let Some(max) = num("maximum") {
            let excl = flag(schema, "exclusiveMaximum");
            if x > max || (excl && x == max) {
                let op = if excl {
                    "less than"
                } else {
                    "less than or equal to"
                };
                errors.push(FieldCause::invalid(
                    path,
                    v,
                    &format!("{path} in body should be {op} {max}"),
                ));
            }
        }
    }
    if let Some(s) = v.as_str() {
        let len = s.chars().count() as u64;
        if let Some(min) = int("minLength")
            && len < min
        {
            errors.push(FieldCause::invalid(
                path,
                v,
                &format!("{path} in body should be at least {min} chars long"),
            ));
        }
        if let Some(max) = int("maxLength")
            && len > max
        {
            errors.push(FieldCause {
                reason: "FieldValueTooLong",
                field: path.to_string(),
                message: format!("Too long: may not be more than {max} bytes"),
            });
        }
        if let Some(p) = schema.get("pattern").and_then(Value::as_str)
            && let Ok(re) = regex::Regex::new(p)
            && !re.is_match(s)
        {
            errors.push(FieldCause::invalid(
                path,
                v,
                &format!("{path} in body should match '{p}'"),
            ));
        }
    }
    if let Some(a) = v.as_array() {
        let len = a.len() as u64;
        if let Some(min) = int("minItems")
            && len < min
        {
            errors.push(FieldCause::invalid(
                path,
                v,
                &format!("{path} in body should have at least {min} items"),
            ));
        }
        if let Some(max) = int("maxItems")
            && len > max
        {
            errors.push(FieldCause {
                reason: "FieldValueTooMany",
                field: path.to_string(),
                message: format!("Too many: {len}: must have at most {max} items"),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "integer", "minimum": 1},
                        "color": {"type": "string", "enum": ["red", "blue"]},
                        "port": {"x-kubernetes-int-or-string": true},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "note": {"type": "string", "nullable": true},
                        "other": {"type": "string"}
                    }
                },
                "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
            }
        })
    }

    #[test]
    fn valid_object_is_pruned_of_unknown_fields() {
        let mut obj = json!({
            "apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
            "spec": {"size": 2, "unknown": 1, "port": "http", "free": {"any": {"thing": 1}},
                     "labels": {"a": "b"}, "note": null, "other": null},
            "extra": true
        });
        let errs = validate_and_prune(&schema(), &mut obj);
        assert!(errs.is_empty(), "{errs:?}");
        assert!(obj.get("extra").is_none());
        assert!(obj["spec"].get("unknown").is_none());
        assert_eq!(obj["spec"]["free"]["any"]["thing"], 1);
        assert!(obj["spec"]["note"].is_null() && obj["spec"].get("note").is_some());
        assert!(
            obj["spec"].get("other").is_none(),
            "null of non-nullable is dropped"
        );
        assert_eq!(obj["metadata"]["name"], "a");
    }

    #[test]
    fn errors_carry_field_paths() {
        let mut obj = json!({"spec": {"size": "big", "color": "pink", "tags": ["a", 3],
                                      "labels": {"x": 1}, "port": 1.5}});
        let errs = validate_and_prune(&schema(), &mut obj);
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.color",
                "spec.labels.x",
                "spec.port",
                "spec.size",
                "spec.tags[1]"
            ]
        );
        assert_eq!(
            errs[3].message,
            "Invalid value: \"string\": spec.size in body must be of type integer: \"string\""
        );
        assert_eq!(
            errs[0].message,
            "Unsupported value: \"pink\": supported values: \"red\", \"blue\""
        );
    }

    #[test]
    fn required_and_bounds() {
        let mut obj = json!({"spec": {"color": "red"}});
        let errs = validate_and_prune(&schema(), &mut obj);
        assert_eq!(errs, vec![FieldCause::required("spec.size")]);
        let mut obj = json!({"spec": {"size": 0}});
        let errs = validate_and_prune(&schema(), &mut obj);
        assert_eq!(errs[0].field, "spec.size");
        assert!(errs[0].message.contains("greater than or equal to 1"));
    }
}
