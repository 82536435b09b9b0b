//! Flag values → API values, as velero's CLI parses them (`pkg/cmd/util/flag`): label
//! selectors (`metav1.ParseToLabelSelector`), `--or-selector` lists joined by ` or `,
//! `k=v,…` maps, `--ordered-resources`, Go durations. Pure functions; every error names
//! the flag it came from.

use granary_api::names::{is_label_value, is_qualified_name};
use std::collections::BTreeMap;

use chrono::TimeDelta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use granary_api::velero::Duration;

/// A flag value that cannot be used; the message names the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value:?} for {flag}: {reason}")]
pub struct FlagError {
    pub flag: String,
    pub value: String,
    pub reason: String,
}

impl FlagError {
    pub fn new(flag: &str, value: &str, reason: impl Into<String>) -> Self {
        FlagError {
            flag: flag.to_string(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// Keeps the value of `r`, or records its error in `errs` (to report every bad flag at
/// once).
pub fn take<T>(errs: &mut Vec<FlagError>, r: Result<T, FlagError>) -> Option<T> {
    r.map_err(|e| errs.push(e)).ok()
}

/// Splits a selector at the commas that are not inside `( … )`.
fn split_terms(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0usize, Vec::new());
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

/// Parses a label selector the way `metav1.ParseToLabelSelector` does: `k=v`/`k==v` go to
/// `matchLabels`; `k!=v`, `k in (…)`, `k notin (…)`, `k`, `!k` to `matchExpressions`
/// (sorted by key, values sorted); `<`/`>` are refused.
pub fn parse_label_selector(flag: &str, text: &str) -> Result<LabelSelector, FlagError> {
    let bad = |reason: String| FlagError::new(flag, text, reason);
    if text.trim().is_empty() {
        return Err(bad("a label selector must not be empty".into()));
    }
    let mut labels = BTreeMap::new();
    let mut exprs: Vec<LabelSelectorRequirement> = Vec::new();
    for raw in split_terms(text) {
        let term = raw.trim();
        let key_ok = |k: &str| {
            if is_qualified_name(k) {
                Ok(k.to_string())
            } else {
                Err(bad(format!("{k:?} is not a valid label key")))
            }
        };
        let value_ok = |v: &str| {
            let v = v.trim();
            if is_label_value(v) {
                Ok(v.to_string())
            } else {
                Err(bad(format!("{v:?} is not a valid label value")))
            }
        };
        let expr = |key: String, op: &str, values: Option<Vec<String>>| LabelSelectorRequirement {
            key,
            operator: op.to_string(),
            values,
        };
        if term.is_empty() {
            return Err(bad("empty term (two commas in a row?)".into()));
        }
        if let Some(key) = term.strip_prefix('!') {
            exprs.push(expr(key_ok(key.trim())?, "DoesNotExist", None));
        } else if let Some((k, v)) = term.split_once("!=") {
            exprs.push(expr(key_ok(k.trim())?, "NotIn", Some(vec![value_ok(v)?])));
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            labels.insert(key_ok(k.trim())?, value_ok(v)?);
        } else if term.contains('<') || term.contains('>') {
            return Err(bad(format!(
                "{term:?}: \"<\" and \">\" are not supported in label selectors"
            )));
        } else if let Some((k, op, set)) = set_term(term) {
            let mut values = set
                .split(',')
                .map(value_ok)
                .collect::<Result<Vec<_>, _>>()?;
            values.sort();
            values.dedup();
            exprs.push(expr(key_ok(k)?, op, Some(values)));
        } else if term.contains(char::is_whitespace) || term.contains('(') {
            return Err(bad(format!(
                "{term:?} is not a requirement (key, !key, key=value, key!=value, key in (a,b), key notin (a,b))"
            )));
        } else {
            exprs.push(expr(key_ok(term)?, "Exists", None));
        }
    }
    exprs.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(LabelSelector {
        match_labels: (!labels.is_empty()).then_some(labels),
        match_expressions: (!exprs.is_empty()).then_some(exprs),
    })
}

/// `key in (a,b)` / `key notin (a,b)` → (key, operator, "a,b").
fn set_term(term: &str) -> Option<(&str, &'static str, &str)> {
    let open = term.find('(')?;
    let inner = term[open + 1..].strip_suffix(')')?;
    let head = term[..open].trim_end();
    let (key, op) = head.rsplit_once(char::is_whitespace)?;
    let op = match op {
        "in" => "In",
        "notin" => "NotIn",
        _ => return None,
    };
    Some((key.trim(), op, inner))
}

/// `--or-selector`: selectors separated by ` or `.
pub fn parse_or_selectors(flag: &str, text: &str) -> Result<Vec<LabelSelector>, FlagError> {
    text.split(" or ")
        .map(|part| parse_label_selector(flag, part))
        .collect()
}

/// `--selector` and `--or-selector` as given, parsed; each problem goes to `errs`, also
/// giving both (velero takes one or the other).
pub fn selectors(
    errs: &mut Vec<FlagError>,
    selector: Option<&str>,
    or_selector: Option<&str>,
) -> (Option<LabelSelector>, Option<Vec<LabelSelector>>) {
    let one = selector.and_then(|s| take(errs, parse_label_selector("--selector", s)));
    let any = or_selector.and_then(|s| take(errs, parse_or_selectors("--or-selector", s)));
    if one.is_some() && any.is_some() {
        errs.push(FlagError::new(
            "--or-selector",
            or_selector.unwrap_or_default(),
            "either --selector or --or-selector can be given, not both",
        ));
    }
    (one, any)
}

/// A selector written back as `kubectl` and velero print it (`metav1.FormatLabelSelector`):
/// requirements sorted by key, `<none>` when empty.
pub fn format_label_selector(selector: Option<&LabelSelector>) -> String {
    let Some(sel) = selector else {
        return "<none>".into();
    };
    let mut terms: Vec<(String, String)> = Vec::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        terms.push((k.clone(), format!("{k}={v}")));
    }
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        let text = match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => format!("{} {other} ({values})", e.key),
        };
        terms.push((e.key.clone(), text));
    }
    terms.sort_by(|a, b| a.0.cmp(&b.0));
    if terms.is_empty() {
        return "<none>".into();
    }
    terms.into_iter().map(|t| t.1).collect::<Vec<_>>().join(",")
}

/// A `k=v,k2=v2` map flag (velero's `flag.Map`); the values of repeated flags merge.
pub fn parse_map(flag: &str, values: &[String]) -> Result<BTreeMap<String, String>, FlagError> {
    let mut out = BTreeMap::new();
    for value in values {
        for part in value.split(',') {
            let Some((k, v)) = part.split_once('=') else {
                return Err(FlagError::new(
                    flag,
                    value,
                    format!("{part:?} is not key=value"),
                ));
            };
            if k.trim().is_empty() {
                return Err(FlagError::new(flag, value, format!("{part:?} has no key")));
            }
            out.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    Ok(out)
}

/// `--labels`: a map whose keys and values must be valid Kubernetes labels.
pub fn parse_labels(flag: &str, values: &[String]) -> Result<BTreeMap<String, String>, FlagError> {
    let map = parse_map(flag, values)?;
    for (k, v) in &map {
        if !is_qualified_name(k) {
            return Err(FlagError::new(
                flag,
                &values.join(","),
                format!("{k:?} is not a valid label key"),
            ));
        }
        if !is_label_value(v) {
            return Err(FlagError::new(
                flag,
                &values.join(","),
                format!("{v:?} is not a valid label value"),
            ));
        }
    }
    Ok(map)
}

/// `--ordered-resources 'pods=ns1/pod1,ns1/pod2;persistentvolumes=pv4,pv8'` (velero's
/// `ParseOrderedResources`).
pub fn parse_ordered_resources(
    flag: &str,
    text: &str,
) -> Result<BTreeMap<String, String>, FlagError> {
    let mut out = BTreeMap::new();
    for entry in text.split(';') {
        let kv: Vec<&str> = entry.split('=').collect();
        let [kind, order] = kv.as_slice() else {
            return Err(FlagError::new(
                flag,
                text,
                format!("{entry:?} is not resource=ns/name,ns/name"),
            ));
        };
        let (kind, order) = (kind.trim(), order.trim());
        if kind.is_empty() || order.is_empty() {
            return Err(FlagError::new(
                flag,
                text,
                format!("{entry:?} needs a resource and at least one name"),
            ));
        }
        out.insert(kind.to_string(), order.to_string());
    }
    Ok(out)
}

/// A non-negative Go duration, written back as Go's `Duration.String()` writes it
/// (`--ttl 24h` → `24h0m0s`), as velero's `DurationVar` flags do.
pub fn parse_go_duration(flag: &str, text: &str) -> Result<Duration, FlagError> {
    let parsed = Duration::parse(text.trim())
        .and_then(|d| d.to_delta())
        .map_err(|e| FlagError::new(flag, text, e.reason))?;
    if parsed < TimeDelta::zero() {
        return Err(FlagError::new(flag, text, "must not be negative"));
    }
    Ok(Duration::from_delta(parsed))
}

/// `--credential secret=key`: exactly one pair.
pub fn parse_credential(flag: &str, text: &str) -> Result<(String, String), FlagError> {
    let map = parse_map(flag, &[text.to_string()])?;
    let mut pairs = map.into_iter();
    match (pairs.next(), pairs.next()) {
        (Some((name, key)), None) if !key.is_empty() => Ok((name, key)),
        (Some(_), None) => Err(FlagError::new(flag, text, "the key after '=' is empty")),
        _ => Err(FlagError::new(
            flag,
            text,
            "give exactly one secret-name=key pair",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::names::is_dns1123_subdomain;

    fn sel(text: &str) -> serde_json::Value {
        serde_json::to_value(parse_label_selector("--selector", text).expect("valid")).unwrap()
    }

    #[test]
    fn selectors_parse_as_parse_to_label_selector_does() {
        assert_eq!(
            sel("app=nginx,tier==web"),
            serde_json::json!({"matchLabels": {"app": "nginx", "tier": "web"}})
        );
        assert_eq!(
            sel("zone notin (b, a),env in (prod,dev,prod),!legacy,team,x!=y"),
            serde_json::json!({"matchExpressions": [
                {"key": "env", "operator": "In", "values": ["dev", "prod"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "team", "operator": "Exists"},
                {"key": "x", "operator": "NotIn", "values": ["y"]},
                {"key": "zone", "operator": "NotIn", "values": ["a", "b"]},
            ]})
        );
        assert_eq!(
            sel("example.com/owner=me"),
            serde_json::json!({"matchLabels": {"example.com/owner": "me"}})
        );
    }

    #[test]
    fn bad_selectors_name_the_flag() {
        for text in ["", "a=b,,c", "a>3", "a in (x", "-bad=1", "a=b c", "k=v@"] {
            let err = parse_label_selector("--selector", text).expect_err(text);
            assert!(err.to_string().contains("--selector"), "{err}");
        }
    }

    #[test]
    fn or_selectors_split_at_or() {
        let list = parse_or_selectors("--or-selector", "app=a or tier in (x)").unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(format_label_selector(Some(&list[0])), "app=a");
        assert_eq!(format_label_selector(Some(&list[1])), "tier in (x)");
    }

    #[test]
    fn selector_formats_back() {
        let s = parse_label_selector("-l", "b in (2,1),a=x,!c").unwrap();
        assert_eq!(format_label_selector(Some(&s)), "a=x,b in (1,2),!c");
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(
            format_label_selector(Some(&LabelSelector::default())),
            "<none>"
        );
    }

    #[test]
    fn maps_labels_and_credentials() {
        let m = parse_map(
            "--config",
            &["region=eu-1,s3Url=http://x:1".into(), "a=".into()],
        )
        .unwrap();
        assert_eq!(m["region"], "eu-1");
        assert_eq!(m["s3Url"], "http://x:1");
        assert_eq!(m["a"], "");
        assert!(parse_map("--config", &["region".into()]).is_err());
        assert!(parse_labels("--labels", &["ok=yes".into()]).is_ok());
        let err = parse_labels("--labels", &["bad key=1".into()]).unwrap_err();
        assert!(err.to_string().contains("--labels"));
        assert_eq!(
            parse_credential("--credential", "cloud-credentials=cloud").unwrap(),
            ("cloud-credentials".into(), "cloud".into())
        );
        for bad in ["a=b,c=d", "a", "a="] {
            assert!(parse_credential("--credential", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ordered_resources_as_velero_parses_them() {
        let m = parse_ordered_resources(
            "--ordered-resources",
            "pods=ns1/pod1,ns1/pod2; persistentvolumes=pv4,pv8",
        )
        .unwrap();
        assert_eq!(m["pods"], "ns1/pod1,ns1/pod2");
        assert_eq!(m["persistentvolumes"], "pv4,pv8");
        for bad in ["pods", "pods=a=b", "=x", "pods="] {
            assert!(
                parse_ordered_resources("--ordered-resources", bad).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn durations_are_written_as_go_writes_them() {
        assert_eq!(
            parse_go_duration("--ttl", "24h").unwrap().as_str(),
            "24h0m0s"
        );
        assert_eq!(
            parse_go_duration("--ttl", "90m").unwrap().as_str(),
            "1h30m0s"
        );
        assert_eq!(parse_go_duration("--ttl", "0").unwrap().as_str(), "0s");
        for bad in ["-1h", "3 days", "1d"] {
            let err = parse_go_duration("--ttl", bad).expect_err(bad);
            assert!(err.to_string().contains("--ttl"), "{err}");
        }
    }

    #[test]
    fn object_names() {
        assert!(is_dns1123_subdomain("nightly-1.v2"));
        for bad in ["", "Upper", "a_b", "-a", "a..b"] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
    }
}
