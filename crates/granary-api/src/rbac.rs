//! Whether one set of RBAC rules covers another, as kube-apiserver decides it when it
//! prevents privilege escalation: every requested rule is broken down into atomic rules
//! (one API group, resource, verb and at most one resource name; or one non-resource URL
//! and verb), and each atomic rule must be covered by a single owner rule. What is not
//! covered is reported the way kube-apiserver's refusals list it: atomic rules of one
//! group, resource and name merged across verbs, each written in its compact form
//! (`{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`), sorted, without
//! duplicates.
//!
//! `*` in the owner's verbs, groups or resources matches anything; `*/<sub>` matches that
//! subresource of every resource; a non-resource URL ending in `*` matches every path
//! with that prefix. An owner rule limited to resource names covers only requests for
//! those names. A `*` in a requested rule is covered only by a `*` of the owner.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::PolicyRule;

fn list(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or_default()
}

fn one(s: &str) -> Option<Vec<String>> {
    Some(vec![s.to_string()])
}

/// The rule as atomic rules: one group, resource and verb (and at most one resource
/// name) each, then one non-resource URL and verb each.
pub fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for group in list(&rule.api_groups) {
        for resource in list(&rule.resources) {
            for verb in &rule.verbs {
                let atom = PolicyRule {
                    api_groups: one(group),
                    resources: one(resource),
                    verbs: vec![verb.clone()],
                    ..PolicyRule::default()
                };
                let names = list(&rule.resource_names);
                if names.is_empty() {
                    out.push(atom);
                } else {
                    out.extend(names.iter().map(|n| PolicyRule {
                        resource_names: one(n),
                        ..atom.clone()
                    }));
                }
            }
        }
    }
    for url in list(&rule.non_resource_urls) {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                non_resource_urls: one(url),
                verbs: vec![verb.clone()],
                ..PolicyRule::default()
            });
        }
    }
    out
}

fn has_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| set.contains(w))
}

fn resources_cover(set: &[String], wanted: &[String]) -> bool {
    if set.iter().any(|r| r == "*") {
        return true;
    }
    wanted.iter().all(|path| {
        set.contains(path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| set.contains(&format!("*/{sub}")))
    })
}

fn url_covers(owner: &str, path: &str) -> bool {
    owner == path
        || owner
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

/// Whether `owner` covers the atomic rule `atom` (see [`breakdown`]).
fn rule_covers(owner: &PolicyRule, atom: &PolicyRule) -> bool {
    let verbs = owner.verbs.iter().any(|v| v == "*") || has_all(&owner.verbs, &atom.verbs);
    let groups = list(&owner.api_groups).iter().any(|g| g == "*")
        || has_all(list(&owner.api_groups), list(&atom.api_groups));
    let resources = resources_cover(list(&owner.resources), list(&atom.resources));
    let urls = list(&atom.non_resource_urls).iter().all(|path| {
        list(&owner.non_resource_urls)
            .iter()
            .any(|o| url_covers(o, path))
    });
    let owner_names = list(&owner.resource_names);
    let names = owner_names.is_empty()
        || (!list(&atom.resource_names).is_empty()
            && has_all(owner_names, list(&atom.resource_names)));
    verbs && groups && resources && urls && names
}

/// The atomic rules of `requested` that no rule of `owner` covers (empty: covered).
pub fn uncovered(owner: &[PolicyRule], requested: &[PolicyRule]) -> Vec<PolicyRule> {
    requested
        .iter()
        .flat_map(breakdown)
        .filter(|atom| !owner.iter().any(|o| rule_covers(o, atom)))
        .collect()
}

/// Whether `owner` grants everything `requested` grants.
pub fn covers(owner: &[PolicyRule], requested: &[PolicyRule]) -> bool {
    uncovered(owner, requested).is_empty()
}

/// Merges rules of a single group and resource (and at most one resource name) that
/// differ only in their verbs, keeping the verbs in order; other rules are kept as
/// they are.
pub fn compact(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    type Key = (String, String, Option<String>);
    let mut simple: BTreeMap<Key, PolicyRule> = BTreeMap::new();
    let mut out = Vec::new();
    for rule in rules {
        let groups = list(&rule.api_groups);
        let resources = list(&rule.resources);
        let names = list(&rule.resource_names);
        let is_simple = groups.len() == 1
            && resources.len() == 1
            && names.len() <= 1
            && list(&rule.non_resource_urls).is_empty();
        if !is_simple {
            out.push(rule.clone());
            continue;
        }
        let key = (
            groups[0].clone(),
            resources[0].clone(),
            names.first().cloned(),
        );
        simple
            .entry(key)
            .and_modify(|r| r.verbs.extend(rule.verbs.iter().cloned()))
            .or_insert_with(|| PolicyRule {
                api_groups: rule.api_groups.clone(),
                resources: rule.resources.clone(),
                resource_names: rule.resource_names.clone().filter(|n| !n.is_empty()),
                verbs: rule.verbs.clone(),
                non_resource_urls: None,
            });
    }
    out.extend(simple.into_values());
    out
}

/// A string quoted as Go's `%q` writes it.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A list of strings as Go's `%q` writes a `[]string`: `["a" "b"]`.
pub fn go_quote_list<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| go_quote(s.as_ref())).collect();
    format!("[{}]", quoted.join(" "))
}

/// A rule in kube-apiserver's compact form: `{APIGroups:[""], Resources:["pods"],
/// ResourceNames:["p"], Verbs:["get"]}`, the fields that are set only.
pub fn compact_string(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    for (label, values) in [
        ("APIGroups", list(&rule.api_groups)),
        ("Resources", list(&rule.resources)),
        ("NonResourceURLs", list(&rule.non_resource_urls)),
        ("ResourceNames", list(&rule.resource_names)),
        ("Verbs", &rule.verbs[..]),
    ] {
        if !values.is_empty() {
            parts.push(format!("{label}:{}", go_quote_list(values)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// The lines kube-apiserver lists for rules not held: `missing` compacted, each in its
/// compact form, sorted, without duplicates.
pub fn describe_missing(missing: &[PolicyRule]) -> Vec<String> {
    compact(missing)
        .iter()
        .map(compact_string)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Everything: `*` on every resource of every group, and on every non-resource URL (what
/// `cluster-admin` grants).
pub fn full_authority() -> Vec<PolicyRule> {
    vec![
        PolicyRule {
            api_groups: one("*"),
            resources: one("*"),
            verbs: vec!["*".into()],
            ..PolicyRule::default()
        },
        PolicyRule {
            non_resource_urls: one("*"),
            verbs: vec!["*".into()],
            ..PolicyRule::default()
        },
    ]
}

/// A rule as JSON (`rules[]` of a Role or ClusterRole) read leniently: a field that is
/// missing or not a list of strings is empty.
pub fn rule_from_json(v: &serde_json::Value) -> PolicyRule {
    let strs = |key: &str| -> Option<Vec<String>> {
        v.get(key).and_then(serde_json::Value::as_array).map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
    };
    PolicyRule {
        api_groups: strs("apiGroups"),
        resources: strs("resources"),
        resource_names: strs("resourceNames"),
        non_resource_urls: strs("nonResourceURLs"),
        verbs: strs("verbs").unwrap_or_default(),
    }
}

/// The `rules` of a Role or ClusterRole as JSON.
pub fn rules_from_json(obj: &serde_json::Value) -> Vec<PolicyRule> {
    obj.get("rules")
        .and_then(serde_json::Value::as_array)
        .map(|a| a.iter().map(rule_from_json).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
        PolicyRule {
            api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
            resources: Some(resources.iter().map(|s| s.to_string()).collect()),
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            ..PolicyRule::default()
        }
    }

    fn named(rule: PolicyRule, names: &[&str]) -> PolicyRule {
        PolicyRule {
            resource_names: Some(names.iter().map(|s| s.to_string()).collect()),
            ..rule
        }
    }

    fn urls(paths: &[&str], verbs: &[&str]) -> PolicyRule {
        PolicyRule {
            non_resource_urls: Some(paths.iter().map(|s| s.to_string()).collect()),
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            ..PolicyRule::default()
        }
    }

    #[test]
    fn coverage_follows_kube_apiserver() {
        let pods_read = r(&[""], &["pods"], &["get", "list"]);
        assert!(covers(
            &[r(&[""], &["pods", "services"], &["*"])],
            std::slice::from_ref(&pods_read)
        ));
        assert!(!covers(
            std::slice::from_ref(&pods_read),
            &[r(&[""], &["pods"], &["watch"])]
        ));
        // A requested `*` needs an owner `*`.
        assert!(!covers(
            &[r(&[""], &["pods"], &["get", "list", "watch"])],
            &[r(&[""], &["pods"], &["*"])]
        ));
        assert!(!covers(
            std::slice::from_ref(&pods_read),
            &[r(&["*"], &["pods"], &["get"])]
        ));
        // Subresources: exact, or `*/<sub>`.
        assert!(covers(
            &[r(&["apps"], &["*/scale"], &["update"])],
            &[r(&["apps"], &["deployments/scale"], &["update"])]
        ));
        assert!(!covers(
            &[r(&["apps"], &["*/scale"], &["update"])],
            &[r(&["apps"], &["deployments"], &["update"])]
        ));
        // Resource names: an owner limited to names covers those names only.
        let one_secret = named(r(&[""], &["secrets"], &["get"]), &["s1"]);
        assert!(covers(
            std::slice::from_ref(&one_secret),
            std::slice::from_ref(&one_secret)
        ));
        assert!(!covers(
            std::slice::from_ref(&one_secret),
            &[r(&[""], &["secrets"], &["get"])]
        ));
        assert!(!covers(
            &[one_secret],
            &[named(r(&[""], &["secrets"], &["get"]), &["s2"])]
        ));
        assert!(covers(
            &[r(&[""], &["secrets"], &["get"])],
            &[named(r(&[""], &["secrets"], &["get"]), &["s2"])]
        ));
        // Non-resource URLs: exact or by a `*` prefix; never by resource rules.
        assert!(covers(
            &[urls(&["/healthz/*"], &["get"])],
            &[urls(&["/healthz/etcd"], &["get"])]
        ));
        assert!(!covers(
            &[r(&["*"], &["*"], &["*"])],
            &[urls(&["/metrics"], &["get"])]
        ));
        assert!(covers(&full_authority(), &full_authority()));
        // Empty requests are covered by anything.
        assert!(covers(&[], &[]));
        assert!(covers(&[], &[r(&[""], &[], &["get"])]));
    }

    #[test]
    fn missing_rules_read_as_kube_apiserver_lists_them() {
        let owner = [r(&[""], &["configmaps"], &["get", "list"])];
        let requested = [
            r(
                &["", "apps"],
                &["configmaps", "deployments"],
                &["get", "list", "watch"],
            ),
            named(r(&[""], &["secrets"], &["get"]), &["b", "a"]),
            urls(&["/metrics"], &["get"]),
        ];
        assert_eq!(
            describe_missing(&uncovered(&owner, &requested)),
            [
                "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"watch\"]}",
                "{APIGroups:[\"\"], Resources:[\"deployments\"], Verbs:[\"get\" \"list\" \"watch\"]}",
                "{APIGroups:[\"\"], Resources:[\"secrets\"], ResourceNames:[\"a\"], Verbs:[\"get\"]}",
                "{APIGroups:[\"\"], Resources:[\"secrets\"], ResourceNames:[\"b\"], Verbs:[\"get\"]}",
                "{APIGroups:[\"apps\"], Resources:[\"configmaps\"], Verbs:[\"get\" \"list\" \"watch\"]}",
                "{APIGroups:[\"apps\"], Resources:[\"deployments\"], Verbs:[\"get\" \"list\" \"watch\"]}",
                "{NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}",
            ]
        );
        assert_eq!(
            describe_missing(&uncovered(&[], &full_authority())),
            [
                "{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}",
                "{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}",
            ]
        );
        assert_eq!(go_quote("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\x01é\"");
        assert_eq!(go_quote_list(&["x", "y"]), "[\"x\" \"y\"]");
        assert_eq!(go_quote_list::<&str>(&[]), "[]");
    }

    #[test]
    fn rules_are_read_from_json_leniently() {
        let role = serde_json::json!({"rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["p"]},
            {"nonResourceURLs": ["/x"], "verbs": "not-a-list"},
        ]});
        let rules = rules_from_json(&role);
        assert_eq!(rules[0], named(r(&[""], &["pods"], &["get"]), &["p"]));
        assert!(rules[1].verbs.is_empty());
        assert!(rules_from_json(&serde_json::json!({})).is_empty());
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("*".to_string()),
            Just(String::new()),
            "[a-c]{1,2}",
            "[a-c]{1,2}/[xy]",
            Just("*/x".to_string()),
        ]
    }

    fn words() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec(word(), 0..3)
    }

    fn rule() -> impl Strategy<Value = PolicyRule> {
        let resource = (
            words(),
            words(),
            prop::collection::vec("[a-c]{1,2}", 0..2),
            words(),
        )
            .prop_map(|(groups, resources, names, verbs)| PolicyRule {
                api_groups: Some(groups),
                resources: Some(resources),
                resource_names: (!names.is_empty()).then_some(names),
                verbs,
                non_resource_urls: None,
            });
        let url = (
            prop::collection::vec(prop_oneof![Just("*".to_string()), "/[ab]{0,2}\\*?"], 0..3),
            words(),
        )
            .prop_map(|(paths, verbs)| PolicyRule {
                non_resource_urls: Some(paths),
                verbs,
                ..PolicyRule::default()
            });
        prop_oneof![resource, url]
    }

    /// The set of atoms a list of rules grants, as comparable tuples.
    fn atoms(rules: &[PolicyRule]) -> BTreeSet<String> {
        rules
            .iter()
            .flat_map(breakdown)
            .map(|a| compact_string(&a))
            .collect()
    }

    proptest! {
        #[test]
        fn rules_cover_themselves(rules in prop::collection::vec(rule(), 0..4)) {
            prop_assert!(covers(&rules, &rules));
        }

        #[test]
        fn full_authority_covers_every_resource_rule(rules in prop::collection::vec(rule(), 0..4)) {
            let resource_only: Vec<PolicyRule> = rules.into_iter().filter(|r| r.non_resource_urls.is_none()).collect();
            prop_assert!(covers(&full_authority(), &resource_only));
        }

        #[test]
        fn more_owner_rules_never_uncover(
            owner in prop::collection::vec(rule(), 0..4),
            extra in prop::collection::vec(rule(), 0..3),
            requested in prop::collection::vec(rule(), 0..4),
        ) {
            let mut wider = owner.clone();
            wider.extend(extra);
            let before = atoms(&uncovered(&owner, &requested));
            let after = atoms(&uncovered(&wider, &requested));
            prop_assert!(after.is_subset(&before), "{after:?} ⊄ {before:?}");
        }

        #[test]
        fn uncovered_atoms_are_requested_and_not_covered_one_by_one(
            owner in prop::collection::vec(rule(), 0..4),
            requested in prop::collection::vec(rule(), 0..4),
        ) {
            let missing = uncovered(&owner, &requested);
            let asked = atoms(&requested);
            for atom in &missing {
                prop_assert!(asked.contains(&compact_string(atom)));
                prop_assert!(!covers(&owner, std::slice::from_ref(atom)));
            }
            // Covering is transitive through what is missing: owner plus the missing
            // atoms covers the request.
            let mut completed = owner.clone();
            completed.extend(missing.iter().cloned());
            prop_assert!(covers(&completed, &requested));
        }

        #[test]
        fn compacting_keeps_the_atoms(rules in prop::collection::vec(rule(), 0..5)) {
            let atoms_of = |rs: &[PolicyRule]| atoms(&rs.iter().flat_map(breakdown).collect::<Vec<_>>());
            let missing: Vec<PolicyRule> = rules.iter().flat_map(breakdown).collect();
            prop_assert_eq!(atoms_of(&compact(&missing)), atoms_of(&missing));
        }
    }
}
