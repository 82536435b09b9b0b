//! API errors as kube-apiserver reports them: a `Status` object with `reason` and `code`,
//! so that clients (`kube::Error::Api`, kubectl) see the same thing a real cluster sends.

use serde_json::{Value, json};

/// One field-level cause of an `Invalid` error (`details.causes[]`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldCause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`, ...
    pub reason: &'static str,
    /// Dotted path such as `spec.replicas` or `spec.items[0].name`.
    pub field: String,
    /// The part of the message after the field path.
    pub message: String,
}

impl FieldCause {
    pub(crate) fn required(field: impl Into<String>) -> Self {
        FieldCause {
            reason: "FieldValueRequired",
            field: field.into(),
            message: "Required value".into(),
        }
    }
    pub(crate) fn invalid(field: impl Into<String>, value: &Value, detail: &str) -> Self {
        FieldCause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {}: {detail}", render_value(value)),
        }
    }
    /// `field.TooLong` with a byte limit (kube-apiserver omits the value).
    /// `field.Required` with kube-apiserver's detail text.
    pub(crate) fn required_message(field: impl Into<String>, detail: &str) -> Self {
        FieldCause {
            reason: "FieldValueRequired",
            field: field.into(),
            message: format!("Required value: {detail}"),
        }
    }
    pub(crate) fn too_long(field: impl Into<String>, max_bytes: usize) -> Self {
        FieldCause {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: format!("Too long: must have at most {max_bytes} bytes"),
        }
    }
    pub(crate) fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        FieldCause {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {detail}"),
        }
    }
    pub(crate) fn not_supported(
        field: impl Into<String>,
        value: &Value,
        allowed: &[Value],
    ) -> Self {
        let allowed: Vec<String> = allowed.iter().map(render_value).collect();
        FieldCause {
            reason: "FieldValueNotSupported",
            field: field.into(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                render_value(value),
                allowed.join(", ")
            ),
        }
    }
    /// `field.Duplicate`.
    pub(crate) fn duplicate(field: impl Into<String>, value: &Value) -> Self {
        FieldCause {
            reason: "FieldValueDuplicate",
            field: field.into(),
            message: format!("Duplicate value: {}", render_value(value)),
        }
    }
    fn text(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// Renders a value the way Go's `%#v`-ish field errors show it.
fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Object(m) if !m.is_empty() && m.values().all(Value::is_string) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k:?}:{}", render_value(v)))
                .collect();
            format!("map[string]string{{{}}}", items.join(", "))
        }
        Value::Object(_) => "\"object\"".into(),
        Value::Array(a) if a.iter().all(Value::is_string) => {
            let items: Vec<String> = a.iter().map(render_value).collect();
            format!("[]string{{{}}}", items.join(", "))
        }
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

/// An error answered to the client as a `Status` object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

/// `configmaps` for the core group, `backups.velero.io` otherwise (Go's GroupResource).
pub(crate) fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub(crate) fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": group, "kind": kind}));
        self
    }

    pub(crate) fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    pub(crate) fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details("", "", "")
    }

    pub(crate) fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    pub(crate) fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, resource)
            ),
        )
        .with_details(group, resource, name)
    }

    pub(crate) fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub(crate) fn invalid(group: &str, kind: &str, name: &str, causes: Vec<FieldCause>) -> Self {
        let texts: Vec<String> = causes.iter().map(FieldCause::text).collect();
        let summary = if texts.len() == 1 {
            texts[0].clone()
        } else {
            format!("[{}]", texts.join(", "))
        };
        let causes_json: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        ApiError {
            code: 422,
            reason: "Invalid",
            message: format!("{qualified_kind} \"{name}\" is invalid: {summary}"),
            details: Some(
                json!({"name": name, "group": group, "kind": kind, "causes": causes_json}),
            ),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// A bare 422 (kube-apiserver's `NewGenericServerResponse` for what the API cannot
    /// hold, e.g. a strategic merge patch with lists of lists).
    pub(crate) fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    pub(crate) fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// A resourceVersion or continue token older than the retained history.
    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// A list or watch from a resourceVersion the server has not reached
    /// (kube-apiserver's `NewTooLargeResourceVersionError`).
    pub(crate) fn too_large_resource_version(wanted: u64, current: u64) -> Self {
        ApiError {
            code: 504,
            reason: "Timeout",
            message: format!("Too large resource version: {wanted}, current: {current}"),
            details: Some(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            })),
        }
    }

    pub(crate) fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 415 for a PATCH whose content type is no patch type the server accepts, listing
    /// them as kube-apiserver does (`negotiation.NewUnsupportedMediaTypeError`).
    pub(crate) fn unsupported_patch_type() -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, \
             application/strategic-merge-patch+json, application/apply-patch+yaml",
        )
    }

    pub(crate) fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml; got {content_type:?}"
            ),
        )
    }

    /// 415 with the reason the body cannot be taken.
    pub(crate) fn unsupported_media_type_because(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// A 500 without a reason: what kube-apiserver answers for an error that is not an
    /// API status (its `StatusReasonUnknown`, the empty reason, left out of the body).
    pub(crate) fn internal_unknown(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// A body over the request size limit (kube-apiserver's `limitedReadBody`).
    pub(crate) fn request_entity_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// A write larger than etcd takes: etcd refuses it with this message and
    /// kube-apiserver passes it on as a 500 without a reason (kubernetes#112152).
    pub(crate) fn etcd_request_too_large() -> Self {
        Self::internal_unknown("etcdserver: request is too large")
    }

    /// The `Status` object for this error.
    pub(crate) fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        if !self.reason.is_empty() {
            s["reason"] = json!(self.reason);
        }
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.reason, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_message_matches_kube_apiserver() {
        let e = ApiError::not_found("", "configmaps", "x");
        assert_eq!(e.message, "configmaps \"x\" not found");
        let e = ApiError::not_found("velero.io", "backups", "b");
        assert_eq!(e.message, "backups.velero.io \"b\" not found");
        assert_eq!(e.to_status()["code"], 404);
    }

    #[test]
    fn invalid_lists_every_cause() {
        let e = ApiError::invalid(
            "example.com",
            "Widget",
            "w",
            vec![
                FieldCause::required("spec.size"),
                FieldCause::invalid("spec.color", &json!(3), "must be string"),
            ],
        );
        assert_eq!(
            e.message,
            "Widget.example.com \"w\" is invalid: [spec.size: Required value, spec.color: Invalid value: 3: must be string]"
        );
        assert_eq!(e.details.unwrap()["causes"][0]["field"], "spec.size");
    }
}
