//! Patch bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge
//! patch for built-in kinds ([`super::strategic`]; kube-apiserver refuses it for custom
//! resources). Server-side apply bodies are parsed here; applying them, with managed
//! fields, is [`super::managed`]'s work (only `/scale` answers an apply as a plain merge).

use serde_json::Value;

use super::errors::ApiError;

/// The patch flavours, from the request's `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatchKind {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchKind {
    pub(crate) fn from_content_type(ct: &str) -> Result<Self, ApiError> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/merge-patch+json" => Ok(PatchKind::Merge),
            "application/json-patch+json" => Ok(PatchKind::Json),
            "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchKind::Apply),
            _ => Err(ApiError::unsupported_patch_type()),
        }
    }
}

/// Parses a patch body: JSON for every kind, YAML (a superset) for apply.
pub(crate) fn parse_body(kind: PatchKind, body: &[u8]) -> Result<Value, ApiError> {
    let parsed = match kind {
        PatchKind::Apply => serde_json::from_slice(body).or_else(|_| {
            let text = std::str::from_utf8(body)
                .map_err(|e| ApiError::bad_request(format!("invalid UTF-8 in apply body: {e}")))?;
            serde_saphyr::from_str::<Value>(text)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
        }),
        _ => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}"))),
    }?;
    match (kind, &parsed) {
        (PatchKind::Json, Value::Array(_)) => Ok(parsed),
        (PatchKind::Json, _) => Err(ApiError::bad_request(
            "json patch must be an array of operations",
        )),
        (_, Value::Object(_)) => Ok(parsed),
        _ => Err(ApiError::bad_request("patch body must be a JSON object")),
    }
}

/// Applies `patch` to `doc` (the stored object, of built-in kind `kind` in
/// `api_version` when it is one: a strategic merge patch needs its type).
pub(crate) fn apply_patch(
    kind: PatchKind,
    doc: &Value,
    patch: &Value,
    (api_version, object_kind): (&str, &str),
) -> Result<Value, ApiError> {
    let mut out = doc.clone();
    match kind {
        PatchKind::Strategic => {
            let ty = super::strategic::Ty::of_kind(api_version, object_kind);
            out = super::strategic::apply(doc, patch, &ty).map_err(|e| match e {
                super::strategic::PatchError::BadRequest(m) => ApiError::bad_request(m),
                super::strategic::PatchError::Unprocessable(m) => ApiError::unprocessable(m),
                super::strategic::PatchError::Other(m) => ApiError::internal_unknown(m),
            })?;
        }
        PatchKind::Merge | PatchKind::Apply => {
            json_patch::merge(&mut out, patch);
        }
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid json patch: {e}")))?;
            json_patch::patch(&mut out, &ops)
                .map_err(|e| ApiError::invalid_patch(&e.to_string()))?;
        }
    }
    Ok(out)
}

impl ApiError {
    /// A JSON patch that cannot be applied (kube-apiserver answers 422 for a failed
    /// `test` or a missing path).
    pub(crate) fn invalid_patch(why: &str) -> Self {
        ApiError {
            code: 422,
            reason: "Invalid",
            message: format!(
                "the server rejected our request due to an error in our request: {why}"
            ),
            details: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_removes_nulls_and_replaces_lists() {
        let doc = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        let out = apply_patch(
            PatchKind::Merge,
            &doc,
            &json!({"a": {"b": null, "d": 3}, "l": [3]}),
            ("v1", "ConfigMap"),
        )
        .unwrap();
        assert_eq!(out, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
    }

    #[test]
    fn json_patch_ops_and_failed_test() {
        let doc = json!({"a": [1, 2]});
        let out = apply_patch(
            PatchKind::Json,
            &doc,
            &json!([{"op": "add", "path": "/a/-", "value": 3}, {"op": "replace", "path": "/b", "value": 1}]),
            ("v1", "ConfigMap"),
        );
        assert_eq!(
            out.unwrap_err().code,
            422,
            "replace of a missing path fails"
        );
        let out = apply_patch(
            PatchKind::Json,
            &doc,
            &json!([{"op": "add", "path": "/a/-", "value": 3}]),
            ("v1", "ConfigMap"),
        )
        .unwrap();
        assert_eq!(out, json!({"a": [1, 2, 3]}));
        let bad = apply_patch(
            PatchKind::Json,
            &doc,
            &json!([{"op": "test", "path": "/a/0", "value": 9}]),
            ("v1", "ConfigMap"),
        );
        assert_eq!(bad.unwrap_err().code, 422);
    }

    #[test]
    fn apply_body_may_be_yaml() {
        let v = parse_body(
            PatchKind::Apply,
            b"apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n",
        )
        .unwrap();
        assert_eq!(v["data"]["a"], "b");
        assert_eq!(
            PatchKind::from_content_type("application/apply-patch+yaml; charset=utf-8").unwrap(),
            PatchKind::Apply
        );
        let e = PatchKind::from_content_type("application/json").unwrap_err();
        assert_eq!(e.code, 415);
        for accepted in [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
        ] {
            assert!(e.message.contains(accepted), "{}", e.message);
        }
    }
}
