//! What the built-in actions do to identities and their bindings (Velero's
//! `service_account_action.go`, `secret_action.go`, `rolebinding_action.go`,
//! `clusterrolebinding_action.go`): legacy service-account token secrets are left to the
//! new cluster to mint, and binding subjects follow the restore's namespace mapping.
//! Pure functions on the item as JSON; odd shapes are left alone, never a panic.

use std::collections::BTreeMap;

use serde_json::Value;

/// The type of a Secret holding a service account's token.
pub const SERVICE_ACCOUNT_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";

/// The annotation tying a token Secret to its ServiceAccount's UID.
pub const SERVICE_ACCOUNT_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// A ServiceAccount without its auto-generated token secret (`<name>-token-…`) in
/// `secrets`. As Velero does, only the last such entry is dropped: a cluster generates
/// one per account.
pub fn service_account_for_restore(sa: &Value) -> Value {
    let mut out = sa.clone();
    let prefix = format!("{}-token-", str_at(sa, "/metadata/name"));
    if let Some(secrets) = out.get_mut("secrets").and_then(Value::as_array_mut)
        && let Some(i) = secrets
            .iter()
            .rposition(|s| str_at(s, "/name").starts_with(&prefix))
    {
        secrets.remove(i);
    }
    out
}

/// What the secret action does with one Secret.
#[derive(Clone, Debug, PartialEq)]
pub enum SecretDecision {
    /// Not a token Secret: restored as it is.
    Keep,
    /// The token Secret a ServiceAccount of its namespace generated
    /// (`<account>-token-…`): the new cluster generates it again, so it is skipped.
    Skip,
    /// A token Secret made by hand: restored without the old token, CA and account UID,
    /// which the token controller fills in for the new account.
    Update(Value),
}

/// Whether the Secret holds a service account's token (only those need the cluster's
/// ServiceAccounts to decide).
pub fn is_token_secret(secret: &Value) -> bool {
    str_at(secret, "/type") == SERVICE_ACCOUNT_TOKEN_TYPE
}

/// Velero's secret action, `service_accounts` being the names of the ServiceAccounts in
/// the Secret's target namespace: see [`SecretDecision`].
pub fn secret_for_restore<'a>(
    secret: &Value,
    service_accounts: impl IntoIterator<Item = &'a str>,
) -> SecretDecision {
    if !is_token_secret(secret) {
        return SecretDecision::Keep;
    }
    let name = str_at(secret, "/metadata/name");
    if service_accounts
        .into_iter()
        .any(|sa| name.starts_with(&format!("{sa}-token-")))
    {
        return SecretDecision::Skip;
    }
    let mut out = secret.clone();
    if let Some(a) = out
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(SERVICE_ACCOUNT_UID_ANNOTATION);
    }
    if let Some(d) = out.get_mut("data").and_then(Value::as_object_mut) {
        d.remove("token");
        d.remove("ca.crt");
    }
    SecretDecision::Update(out)
}

/// A RoleBinding or ClusterRoleBinding whose subjects' namespaces are mapped through the
/// restore's `namespaceMapping`; `None` when nothing changes.
pub fn binding_for_restore(binding: &Value, mapping: &BTreeMap<String, String>) -> Option<Value> {
    if mapping.is_empty() {
        return None;
    }
    let mut out = binding.clone();
    let mut changed = false;
    for subject in out
        .get_mut("subjects")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        // Go reads an absent namespace as "", which a mapping cannot name (validation
        // refuses empty names), so only subjects with a namespace move.
        let Some(to) = subject
            .get("namespace")
            .and_then(Value::as_str)
            .and_then(|ns| mapping.get(ns))
        else {
            continue;
        };
        subject.insert("namespace".into(), Value::String(to.clone()));
        changed = true;
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn service_accounts_drop_their_generated_token_secret() {
        let sa = json!({"metadata": {"name": "app"}, "secrets": [
            {"name": "app-token-aaaaa"}, {"name": "registry"}, {"name": "app-token-bbbbb"}, {"name": "other-token-x"}
        ]});
        assert_eq!(
            service_account_for_restore(&sa)["secrets"],
            json!([{"name": "app-token-aaaaa"}, {"name": "registry"}, {"name": "other-token-x"}])
        );
        let none = json!({"metadata": {"name": "app"}, "secrets": [{"name": "registry"}]});
        assert_eq!(service_account_for_restore(&none), none);
        for odd in [
            json!({}),
            json!({"secrets": "x"}),
            json!({"metadata": {"name": 3}, "secrets": [1, {"name": 2}, {"name": "-token-1"}]}),
        ] {
            let _ = service_account_for_restore(&odd);
        }
    }

    fn token_secret(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "annotations": {
                SERVICE_ACCOUNT_UID_ANNOTATION: "u1", "kubernetes.io/service-account.name": "robot", "team": "a"}},
               "type": SERVICE_ACCOUNT_TOKEN_TYPE,
               "data": {"token": "dG9r", "ca.crt": "Y2E=", "namespace": "bnM="}})
    }

    #[test]
    fn generated_token_secrets_are_skipped() {
        let s = token_secret("app-token-x7k2p");
        assert_eq!(secret_for_restore(&s, ["db", "app"]), SecretDecision::Skip);
    }

    #[test]
    fn hand_made_token_secrets_lose_the_old_token() {
        let s = token_secret("robot-credentials");
        let SecretDecision::Update(out) = secret_for_restore(&s, ["app"]) else {
            panic!("a hand-made token secret is updated");
        };
        assert_eq!(
            out["metadata"]["annotations"],
            json!({"kubernetes.io/service-account.name": "robot", "team": "a"})
        );
        assert_eq!(out["data"], json!({"namespace": "bnM="}));
        // Without annotations or data there is nothing to strip, and no panic.
        let bare =
            json!({"metadata": {"name": "t"}, "type": SERVICE_ACCOUNT_TOKEN_TYPE, "data": 3});
        assert_eq!(
            secret_for_restore(&bare, []),
            SecretDecision::Update(bare.clone())
        );
    }

    #[test]
    fn other_secrets_are_kept() {
        let s =
            json!({"metadata": {"name": "app-token-x"}, "type": "Opaque", "data": {"token": "x"}});
        assert_eq!(secret_for_restore(&s, ["app"]), SecretDecision::Keep);
        assert_eq!(
            secret_for_restore(&json!({}), ["app"]),
            SecretDecision::Keep
        );
        assert_eq!(
            secret_for_restore(&json!({"type": 5}), ["app"]),
            SecretDecision::Keep
        );
    }

    #[test]
    fn binding_subjects_follow_the_namespace_mapping() {
        let rb = json!({"subjects": [
            {"kind": "ServiceAccount", "name": "a", "namespace": "prod"},
            {"kind": "ServiceAccount", "name": "b", "namespace": "other"},
            {"kind": "User", "name": "alice"},
            "odd",
        ]});
        let mapping: BTreeMap<String, String> =
            [("prod".to_string(), "prod-copy".to_string())].into();
        let out = binding_for_restore(&rb, &mapping).expect("changed");
        assert_eq!(out["subjects"][0]["namespace"], "prod-copy");
        assert_eq!(out["subjects"][1]["namespace"], "other");
        assert!(out["subjects"][2].get("namespace").is_none());
        assert_eq!(binding_for_restore(&rb, &BTreeMap::new()), None);
        let untouched: BTreeMap<String, String> = [("x".to_string(), "y".to_string())].into();
        assert_eq!(binding_for_restore(&rb, &untouched), None);
        for odd in [
            json!({}),
            json!({"subjects": {}}),
            json!({"subjects": [{"namespace": 1}]}),
        ] {
            assert_eq!(binding_for_restore(&odd, &mapping), None);
        }
    }
}
