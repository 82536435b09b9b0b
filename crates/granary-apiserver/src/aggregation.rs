//! ClusterRole aggregation, kube-controller-manager's clusterrole-aggregation controller
//! run inside the server: a ClusterRole with an `aggregationRule` gets as its rules those
//! of every other ClusterRole its selectors match, in name order, without duplicates,
//! and keeps them up to date as those roles change.

use serde_json::Value;

use super::selectors::LabelSelector;
use super::state::State;
use super::store::GroupResource;

pub(crate) fn cluster_roles_gr() -> GroupResource {
    GroupResource::new("rbac.authorization.k8s.io", "clusterroles")
}

/// The rules `role` aggregates from `all` (every ClusterRole, sorted by name), or `None`
/// when it has no aggregationRule. A selector that cannot be read selects nothing.
pub(crate) fn aggregated_rules(role: &Value, all: &[Value]) -> Option<Vec<Value>> {
    let selectors = role
        .pointer("/aggregationRule/clusterRoleSelectors")?
        .as_array()?;
    let name = role.pointer("/metadata/name");
    let mut rules: Vec<Value> = Vec::new();
    for sel in selectors {
        let Some(sel) = LabelSelector::from_object(sel) else {
            continue;
        };
        for other in all {
            if other.pointer("/metadata/name") == name || !sel.matches_object(other) {
                continue;
            }
            for r in other
                .get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if !rules.contains(r) {
                    rules.push(r.clone());
                }
            }
        }
    }
    Some(rules)
}

/// The stored rules, an empty list and `null` alike meaning none.
fn same_rules(stored: Option<&Value>, rules: &[Value]) -> bool {
    match stored {
        Some(Value::Array(a)) => a.as_slice() == rules,
        None | Some(Value::Null) => rules.is_empty(),
        Some(_) => false,
    }
}

impl State {
    /// One pass of the aggregation controller.
    pub(crate) fn aggregate_cluster_roles(&self) {
        let gr = cluster_roles_gr();
        let (listed, _) = self.store.list(&gr, None, None);
        let all: Vec<Value> = listed
            .iter()
            .filter_map(|(_, data)| serde_json::from_slice(data).ok())
            .collect();
        for role in &all {
            let Some(rules) = aggregated_rules(role, &all) else {
                continue;
            };
            if same_rules(role.get("rules"), &rules) {
                continue;
            }
            let name = role
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            self.internal_update(&gr, "", name, |obj| {
                if same_rules(obj.get("rules"), &rules) {
                    return false;
                }
                obj["rules"] = if rules.is_empty() {
                    Value::Null
                } else {
                    Value::Array(rules.clone())
                };
                true
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(name: &str, labels: Value, rules: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels}, "rules": rules})
    }

    #[test]
    fn rules_come_from_matching_roles_in_name_order_without_duplicates() {
        let admin = json!({
            "metadata": {"name": "admin", "labels": {"x": "true"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "true"}}]},
            "rules": [{"verbs": ["stale"]}],
        });
        let r1 = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]});
        let r2 = json!({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]});
        let all = vec![
            admin.clone(),
            role("a", json!({"x": "true"}), json!([r2.clone()])),
            role("b", json!({"x": "true"}), json!([r1.clone(), r2.clone()])),
            role("c", json!({"x": "false"}), json!([{"verbs": ["nope"]}])),
        ];
        assert_eq!(aggregated_rules(&admin, &all), Some(vec![r2, r1]));
        assert_eq!(aggregated_rules(&all[1], &all), None, "no aggregationRule");
        let lone = json!({"metadata": {"name": "lone"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"y": "1"}}]}});
        assert_eq!(aggregated_rules(&lone, &all), Some(vec![]));
        assert!(same_rules(None, &[]));
        assert!(same_rules(Some(&Value::Null), &[]));
        assert!(!same_rules(Some(&json!([{"verbs": ["x"]}])), &[]));
    }
}
