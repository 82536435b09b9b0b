//! `metav1.LabelSelector` as the backup uses it: the string form sent as a list's
//! `labelSelector` (Velero's `metav1.FormatLabelSelector`), and matching against an
//! object's labels (for namespaces, which Velero lists unselected and then matches, and
//! for `orderedResources` items fetched by name).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// One requirement, in the form `labels.Selector` keeps it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Requirement {
    Equals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn key(&self) -> &str {
        match self {
            Self::Equals(k, _)
            | Self::In(k, _)
            | Self::NotIn(k, _)
            | Self::Exists(k)
            | Self::DoesNotExist(k) => k,
        }
    }
}

fn requirements(sel: &LabelSelector) -> Vec<Requirement> {
    let mut out: Vec<Requirement> = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| Requirement::Equals(k.clone(), v.clone()))
        .collect();
    for expr in sel.match_expressions.iter().flatten() {
        let mut values = expr.values.clone().unwrap_or_default();
        values.sort();
        values.dedup();
        out.push(match expr.operator.as_str() {
            "In" => Requirement::In(expr.key.clone(), values),
            "NotIn" => Requirement::NotIn(expr.key.clone(), values),
            "Exists" => Requirement::Exists(expr.key.clone()),
            // Validation refuses other operators before a backup runs.
            _ => Requirement::DoesNotExist(expr.key.clone()),
        });
    }
    // `labels.Selector.String()` lists requirements sorted by key (stable).
    out.sort_by(|a, b| a.key().cmp(b.key()));
    out
}

/// The selector as a list's `labelSelector` parameter: `a=b,c in (x,y),!d`. An empty
/// selector is `""` (everything).
pub fn format(sel: &LabelSelector) -> String {
    requirements(sel)
        .iter()
        .map(|r| match r {
            Requirement::Equals(k, v) => format!("{k}={v}"),
            Requirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
            Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            Requirement::Exists(k) => k.clone(),
            Requirement::DoesNotExist(k) => format!("!{k}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `labels` satisfy every requirement of `sel`.
pub fn matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    requirements(sel).iter().all(|r| match r {
        Requirement::Equals(k, v) => labels.get(k) == Some(v),
        Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
        Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        Requirement::Exists(k) => labels.contains_key(k),
        Requirement::DoesNotExist(k) => !labels.contains_key(k),
    })
}

/// The labels of an object as JSON (`metadata.labels`; non-string values ignored).
pub fn labels_of(object: &serde_json::Value) -> BTreeMap<String, String> {
    object
        .pointer("/metadata/labels")
        .and_then(serde_json::Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use proptest::prelude::*;

    fn sel(labels: &[(&str, &str)], exprs: &[(&str, &str, &[&str])]) -> LabelSelector {
        LabelSelector {
            match_labels: (!labels.is_empty()).then(|| {
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            match_expressions: (!exprs.is_empty()).then(|| {
                exprs
                    .iter()
                    .map(|(k, op, vs)| LabelSelectorRequirement {
                        key: k.to_string(),
                        operator: op.to_string(),
                        values: (!vs.is_empty())
                            .then(|| vs.iter().map(|v| v.to_string()).collect()),
                    })
                    .collect()
            }),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn formats_like_format_label_selector() {
        let s = sel(
            &[("app", "web")],
            &[
                ("tier", "In", &["b", "a"]),
                ("zone", "NotIn", &["x"]),
                ("b", "Exists", &[]),
                ("c", "DoesNotExist", &[]),
            ],
        );
        assert_eq!(format(&s), "app=web,b,!c,tier in (a,b),zone notin (x)");
        assert_eq!(format(&LabelSelector::default()), "");
    }

    #[test]
    fn matching() {
        let s = sel(
            &[("app", "web")],
            &[("tier", "In", &["a", "b"]), ("gone", "DoesNotExist", &[])],
        );
        assert!(matches(&s, &labels(&[("app", "web"), ("tier", "a")])));
        assert!(!matches(&s, &labels(&[("app", "web"), ("tier", "c")])));
        assert!(!matches(&s, &labels(&[("app", "web")])));
        assert!(!matches(
            &s,
            &labels(&[("app", "web"), ("tier", "a"), ("gone", "")])
        ));
        let notin = sel(&[], &[("t", "NotIn", &["x"])]);
        assert!(matches(&notin, &labels(&[])));
        assert!(!matches(&notin, &labels(&[("t", "x")])));
        assert!(matches(
            &LabelSelector::default(),
            &labels(&[("any", "thing")])
        ));
    }

    proptest! {
        /// A matchLabels selector matches exactly the label sets that contain its pairs.
        #[test]
        fn match_labels_is_containment(
            want in proptest::collection::btree_map("[a-c]", "[x-z]", 0..3),
            have in proptest::collection::btree_map("[a-d]", "[x-z]", 0..4),
        ) {
            let s = LabelSelector { match_labels: Some(want.clone()), match_expressions: None };
            let contained = want.iter().all(|(k, v)| have.get(k) == Some(v));
            prop_assert_eq!(matches(&s, &have), contained);
        }
    }
}
