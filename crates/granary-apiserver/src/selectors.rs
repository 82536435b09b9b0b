//! Label and field selectors as kube-apiserver parses them from `labelSelector` and
//! `fieldSelector` query parameters.

use granary_api::names::{is_label_value, is_qualified_name};
use serde_json::{Map, Value};

use super::errors::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum LabelOp {
    Eq(String),
    Ne(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct LabelSelector {
    requirements: Vec<(String, LabelOp)>,
}

fn bad(sel: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: {why} (selector {sel:?})"
    ))
}

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_set(sel: &str, rest: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad(sel, "expected a parenthesised set of values"))?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().any(|v| !is_label_value(v)) {
        return Err(bad(sel, "invalid label value"));
    }
    Ok(values)
}

impl LabelSelector {
    pub(crate) fn parse(sel: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        if sel.trim().is_empty() {
            return Ok(LabelSelector { requirements });
        }
        for term in split_terms(sel) {
            let term = term.trim();
            if term.is_empty() {
                return Err(bad(sel, "found '', expected: identifier"));
            }
            if let Some(key) = term.strip_prefix('!') {
                let key = key.trim();
                if !is_qualified_name(key) {
                    return Err(bad(sel, "invalid label key"));
                }
                requirements.push((key.to_string(), LabelOp::DoesNotExist));
                continue;
            }
            let key_end = term
                .find(|c: char| c.is_whitespace() || matches!(c, '=' | '!' | '<' | '>' | '('))
                .unwrap_or(term.len());
            let key = &term[..key_end];
            if !is_qualified_name(key) {
                return Err(bad(sel, "invalid label key"));
            }
            let rest = term[key_end..].trim_start();
            let op = if rest.is_empty() {
                LabelOp::Exists
            } else if let Some(v) = rest.strip_prefix("==").or_else(|| rest.strip_prefix('=')) {
                let v = v.trim();
                if !is_label_value(v) {
                    return Err(bad(sel, "invalid label value"));
                }
                LabelOp::Eq(v.to_string())
            } else if let Some(v) = rest.strip_prefix("!=") {
                let v = v.trim();
                if !is_label_value(v) {
                    return Err(bad(sel, "invalid label value"));
                }
                LabelOp::Ne(v.to_string())
            } else if let Some(v) = rest.strip_prefix('>') {
                LabelOp::Gt(
                    v.trim()
                        .parse()
                        .map_err(|_| bad(sel, "expected an integer"))?,
                )
            } else if let Some(v) = rest.strip_prefix('<') {
                LabelOp::Lt(
                    v.trim()
                        .parse()
                        .map_err(|_| bad(sel, "expected an integer"))?,
                )
            } else if let Some(v) = rest.strip_prefix("notin") {
                LabelOp::NotIn(parse_set(sel, v)?)
            } else if let Some(v) = rest.strip_prefix("in") {
                LabelOp::In(parse_set(sel, v)?)
            } else {
                return Err(bad(sel, "expected one of =, ==, !=, in, notin"));
            };
            requirements.push((key.to_string(), op));
        }
        Ok(LabelSelector { requirements })
    }

    /// Builds a selector from a `metav1.LabelSelector` object (matchLabels / matchExpressions).
    pub(crate) fn from_object(sel: &Value) -> Option<Self> {
        let mut requirements = Vec::new();
        if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
                requirements.push((k.clone(), LabelOp::Eq(v.as_str()?.to_string())));
            }
        }
        if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e.get("key")?.as_str()?.to_string();
                let values: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                let op = match e.get("operator")?.as_str()? {
                    "In" => LabelOp::In(values),
                    "NotIn" => LabelOp::NotIn(values),
                    "Exists" => LabelOp::Exists,
                    "DoesNotExist" => LabelOp::DoesNotExist,
                    _ => return None,
                };
                requirements.push((key, op));
            }
        }
        Some(LabelSelector { requirements })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The selector in its string form (as `Scale.status.selector` carries it).
    pub(crate) fn to_string_form(&self) -> String {
        let terms: Vec<String> = self
            .requirements
            .iter()
            .map(|(k, op)| match op {
                LabelOp::Eq(v) => format!("{k}={v}"),
                LabelOp::Ne(v) => format!("{k}!={v}"),
                LabelOp::In(vs) => format!("{k} in ({})", vs.join(",")),
                LabelOp::NotIn(vs) => format!("{k} notin ({})", vs.join(",")),
                LabelOp::Exists => k.clone(),
                LabelOp::DoesNotExist => format!("!{k}"),
                LabelOp::Gt(n) => format!("{k}>{n}"),
                LabelOp::Lt(n) => format!("{k}<{n}"),
            })
            .collect();
        terms.join(",")
    }

    pub(crate) fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.requirements.iter().all(|(key, op)| {
            let v = labels.and_then(|l| l.get(key)).and_then(Value::as_str);
            match op {
                LabelOp::Eq(want) => v == Some(want.as_str()),
                LabelOp::Ne(want) => v != Some(want.as_str()),
                LabelOp::In(set) => v.is_some_and(|v| set.iter().any(|s| s == v)),
                LabelOp::NotIn(set) => v.is_none_or(|v| !set.iter().any(|s| s == v)),
                LabelOp::Exists => v.is_some(),
                LabelOp::DoesNotExist => v.is_none(),
                LabelOp::Gt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v > *n),
                LabelOp::Lt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v < *n),
            }
        })
    }

    /// Matches the labels of a whole object.
    pub(crate) fn matches_object(&self, obj: &Value) -> bool {
        self.is_empty() || self.matches(obj.pointer("/metadata/labels").and_then(Value::as_object))
    }
}

/// A parsed field selector over a fixed set of supported fields.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct FieldSelector {
    /// (dotted field path, wanted value, equal?)
    requirements: Vec<(String, String, bool)>,
}

impl FieldSelector {
    /// Parses `sel`; `extra_fields` are the kind-specific fields besides
    /// `metadata.name` and `metadata.namespace`.
    pub(crate) fn parse(sel: &str, extra_fields: &[&str]) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        if sel.trim().is_empty() {
            return Ok(FieldSelector { requirements });
        }
        for term in sel.split(',') {
            let term = term.trim();
            let (field, value, eq) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{sel}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if field != "metadata.name"
                && field != "metadata.namespace"
                && !extra_fields.contains(&field)
            {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            requirements.push((field.to_string(), value.trim().to_string(), eq));
        }
        Ok(FieldSelector { requirements })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.requirements.iter().all(|(field, want, eq)| {
            let mut cur = obj;
            for part in field.split('.') {
                cur = cur.get(part).unwrap_or(&Value::Null);
            }
            let actual = match cur {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (actual == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn equality_and_inequality() {
        let l = labels(json!({"app": "web", "tier": "front"}));
        assert!(LabelSelector::parse("app=web").unwrap().matches(Some(&l)));
        assert!(
            LabelSelector::parse("app==web,tier=front")
                .unwrap()
                .matches(Some(&l))
        );
        assert!(!LabelSelector::parse("app!=web").unwrap().matches(Some(&l)));
        assert!(
            LabelSelector::parse("missing!=x")
                .unwrap()
                .matches(Some(&l))
        );
        assert!(LabelSelector::parse("").unwrap().matches(None));
    }

    #[test]
    fn sets_and_existence() {
        let l = labels(json!({"env": "prod", "a.b/c": "1"}));
        assert!(
            LabelSelector::parse("env in (dev, prod)")
                .unwrap()
                .matches(Some(&l))
        );
        assert!(
            !LabelSelector::parse("env notin (prod)")
                .unwrap()
                .matches(Some(&l))
        );
        assert!(
            LabelSelector::parse("x notin (prod)")
                .unwrap()
                .matches(Some(&l))
        );
        assert!(LabelSelector::parse("a.b/c").unwrap().matches(Some(&l)));
        assert!(!LabelSelector::parse("!env").unwrap().matches(Some(&l)));
        assert!(
            LabelSelector::parse("!nope,env in (prod),a.b/c>0")
                .unwrap()
                .matches(Some(&l))
        );
    }

    #[test]
    fn malformed_selectors_are_bad_requests() {
        for s in ["app=", "=x", "env in prod", "a,,b", "app===x", "Bad Key=1"] {
            let r = LabelSelector::parse(s);
            if s == "app=" {
                // An empty value is valid: it matches a label with the empty value.
                assert!(r.is_ok());
                continue;
            }
            assert_eq!(r.unwrap_err().code, 400, "{s}");
        }
    }

    #[test]
    fn object_selector_round_trips() {
        let s = LabelSelector::from_object(&json!({
            "matchLabels": {"app": "x"},
            "matchExpressions": [{"key": "t", "operator": "In", "values": ["a", "b"]}]
        }))
        .unwrap();
        assert_eq!(s.to_string_form(), "app=x,t in (a,b)");
        assert_eq!(LabelSelector::parse(&s.to_string_form()).unwrap(), s);
    }

    #[test]
    fn field_selectors() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns"}, "type": "Opaque"});
        let f = FieldSelector::parse("metadata.name=a,metadata.namespace!=x", &[]).unwrap();
        assert!(f.matches(&obj));
        assert!(
            !FieldSelector::parse("metadata.name==b", &[])
                .unwrap()
                .matches(&obj)
        );
        assert!(
            FieldSelector::parse("type=Opaque", &["type"])
                .unwrap()
                .matches(&obj)
        );
        assert_eq!(FieldSelector::parse("spec.x=1", &[]).unwrap_err().code, 400);
    }
}
