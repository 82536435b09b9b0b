//! Types shared by several API groups: Gardener's `LastOperation`/`LastError` with their
//! error codes, Gardener-style conditions, secret and object references, and the
//! `FieldError` every validation function returns.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One validation problem at one field path (e.g. `spec.backup.region`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every problem a validation found; empty means valid.
pub type FieldErrors = Vec<FieldError>;

/// Joins validation problems into one line per problem, for status messages and stderr.
pub fn describe_field_errors(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Keeps an unknown value of a string enum for the life of the process, so the enum
/// stays `Copy`. Upstream adds values rarely, so the set of kept strings stays tiny.
pub(crate) fn intern(text: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static KEPT: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut kept = KEPT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(known) = kept.get(text) {
        return known;
    }
    let leaked: &'static str = Box::leak(text.to_string().into_boxed_str());
    kept.insert(leaked);
    leaked
}

/// A Gardener string enum whose Go type is a plain `string`: the schema is a plain
/// string (Gardener's CRDs carry no `enum`), and a value this version does not know
/// decodes to `Other` and is written back unchanged, so it never fails a list or watch.
macro_rules! gardener_string_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A value this version of Granary does not know, kept as it was.
            Other(&'static str),
        }

        impl $name {
            /// The exact string Gardener uses.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)*
                    Self::Other(text) => text,
                }
            }

            /// The value for a string; unknown strings are kept as `Other`.
            pub fn parse(text: &str) -> Self {
                match text {
                    $($text => Self::$variant,)*
                    other => Self::Other($crate::common::intern(other)),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = std::borrow::Cow::<str>::deserialize(d)?;
                Ok(Self::parse(&text))
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({"type": "string"})
            }
        }
    };
}
pub(crate) use gardener_string_enum;

gardener_string_enum! {
    /// The kind of operation a `lastOperation` describes (Gardener `LastOperationType`).
    LastOperationType {
        Create = "Create",
        Reconcile = "Reconcile",
        Delete = "Delete",
        Migrate = "Migrate",
        Restore = "Restore",
        LiveMigrate = "LiveMigrate",
    }
}

gardener_string_enum! {
    /// The state of a `lastOperation` (Gardener `LastOperationState`).
    LastOperationState {
        Processing = "Processing",
        Succeeded = "Succeeded",
        Error = "Error",
        Failed = "Failed",
        Pending = "Pending",
        Aborted = "Aborted",
    }
}

/// Gardener's `LastOperation`: what was last done to an object and how it went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastOperation {
    /// What happened in the operation, in words.
    pub description: String,
    /// When this operation was last updated.
    pub last_update_time: DateTime<Utc>,
    /// How far the operation has come, in percent (0 to 100).
    pub progress: i32,
    /// How the operation stands: Processing, Succeeded, Error, Failed, Pending or
    /// Aborted.
    pub state: LastOperationState,
    /// Which operation this is: Create, Reconcile, Delete, Migrate or Restore.
    #[serde(rename = "type")]
    pub type_: LastOperationType,
}

/// Gardener's machine-readable error codes (`ERR_*`), carried in `lastError.codes`.
/// Codes Granary does not know (a newer Gardener may add some) are kept as they are, so
/// reading and writing back an object never loses one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCode {
    InfraUnauthenticated,
    InfraUnauthorized,
    InfraQuotaExceeded,
    InfraRateLimitsExceeded,
    InfraDependencies,
    InfraResourcesDepleted,
    RetryableInfraDependencies,
    CleanupClusterResources,
    ConfigurationProblem,
    RetryableConfigurationProblem,
    ProblematicWebhook,
    /// A code this version of Granary does not know.
    Other(String),
}

const KNOWN_CODES: [(ErrorCode, &str); 11] = [
    (ErrorCode::InfraUnauthenticated, "ERR_INFRA_UNAUTHENTICATED"),
    (ErrorCode::InfraUnauthorized, "ERR_INFRA_UNAUTHORIZED"),
    (ErrorCode::InfraQuotaExceeded, "ERR_INFRA_QUOTA_EXCEEDED"),
    (
        ErrorCode::InfraRateLimitsExceeded,
        "ERR_INFRA_RATE_LIMITS_EXCEEDED",
    ),
    (ErrorCode::InfraDependencies, "ERR_INFRA_DEPENDENCIES"),
    (
        ErrorCode::InfraResourcesDepleted,
        "ERR_INFRA_RESOURCES_DEPLETED",
    ),
    (
        ErrorCode::RetryableInfraDependencies,
        "ERR_RETRYABLE_INFRA_DEPENDENCIES",
    ),
    (
        ErrorCode::CleanupClusterResources,
        "ERR_CLEANUP_CLUSTER_RESOURCES",
    ),
    (ErrorCode::ConfigurationProblem, "ERR_CONFIGURATION_PROBLEM"),
    (
        ErrorCode::RetryableConfigurationProblem,
        "ERR_RETRYABLE_CONFIGURATION_PROBLEM",
    ),
    (ErrorCode::ProblematicWebhook, "ERR_PROBLEMATIC_WEBHOOK"),
];

impl ErrorCode {
    /// The exact string Gardener uses.
    pub fn as_str(&self) -> &str {
        if let ErrorCode::Other(code) = self {
            return code;
        }
        KNOWN_CODES
            .iter()
            .find(|(code, _)| code == self)
            .map(|(_, text)| *text)
            .expect("every known variant is in KNOWN_CODES")
    }

    /// The code for a string; unknown strings are kept as [`ErrorCode::Other`].
    pub fn parse(text: &str) -> ErrorCode {
        KNOWN_CODES
            .iter()
            .find(|(_, known)| *known == text)
            .map(|(code, _)| code.clone())
            .unwrap_or_else(|| ErrorCode::Other(text.to_string()))
    }

    /// Gardener's `HasNonRetryableErrorCode` set: a human has to act before a retry helps.
    pub fn is_non_retryable(&self) -> bool {
        matches!(
            self,
            ErrorCode::InfraUnauthenticated
                | ErrorCode::InfraUnauthorized
                | ErrorCode::InfraDependencies
                | ErrorCode::InfraQuotaExceeded
                | ErrorCode::InfraRateLimitsExceeded
                | ErrorCode::ConfigurationProblem
                | ErrorCode::ProblematicWebhook
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(ErrorCode::parse(&text))
    }
}

impl JsonSchema for ErrorCode {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ErrorCode".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string"})
    }
}

/// Gardener's `LastError`: the last error of an operation, with its codes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastError {
    /// What went wrong, in words.
    pub description: String,
    /// The task that failed, when the operation has several; a later success of that
    /// task clears the error.
    #[serde(rename = "taskID", default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Machine-readable error codes (ERR_INFRA_UNAUTHORIZED, ERR_CONFIGURATION_PROBLEM,
    /// ...) that say what kind of problem it is and whether a retry can help.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<ErrorCode>,
    /// When the error was last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<DateTime<Utc>>,
}

gardener_string_enum! {
    /// `True`, `False`, `Unknown` or Gardener's `Progressing`.
    ConditionStatus {
        True = "True",
        False = "False",
        Unknown = "Unknown",
        Progressing = "Progressing",
    }
}

/// A condition of the object: what holds, since when and why (Gardener's conditions add
/// `lastUpdateTime` and error `codes` to Kubernetes' own).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The kind of condition, e.g. BackupBucketsReady.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False, Unknown or Progressing.
    pub status: ConditionStatus,
    /// When the status last changed.
    pub last_transition_time: DateTime<Utc>,
    /// When the condition was last written.
    pub last_update_time: DateTime<Utc>,
    /// A short CamelCase word for why the condition is as it is.
    pub reason: String,
    /// Why the condition is as it is, in words.
    pub message: String,
    /// Error codes (ERR_...) that classify the problem, when there is one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<ErrorCode>,
}

/// `corev1.SecretReference`: a Secret by name and namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretReference {
    /// Name of the Secret.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Namespace of the Secret.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// `corev1.ObjectReference` (as Gardener's `credentialsRef` uses it: usually a `v1`
/// `Secret` or a `security.gardener.cloud/v1alpha1` `WorkloadIdentity`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// API version of the referenced object, e.g. v1 for a Secret.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Kind of the referenced object, e.g. Secret or WorkloadIdentity.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Name of the referenced object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Namespace of the referenced object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// UID of the referenced object; not needed to refer to it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// A specific resourceVersion of the referenced object; not needed to refer to it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// A part of the referenced object, when the reference is to a field inside it; not
    /// used here.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field_path: String,
}

impl ObjectReference {
    /// True when the reference points to a core `v1` Secret.
    pub fn is_secret(&self) -> bool {
        self.kind == "Secret" && (self.api_version.is_empty() || self.api_version == "v1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_serialize_to_gardener_strings() {
        for code in [
            ErrorCode::InfraUnauthenticated,
            ErrorCode::InfraUnauthorized,
            ErrorCode::InfraQuotaExceeded,
            ErrorCode::InfraRateLimitsExceeded,
            ErrorCode::InfraDependencies,
            ErrorCode::InfraResourcesDepleted,
            ErrorCode::RetryableInfraDependencies,
            ErrorCode::CleanupClusterResources,
            ErrorCode::ConfigurationProblem,
            ErrorCode::RetryableConfigurationProblem,
            ErrorCode::ProblematicWebhook,
        ] {
            let json = serde_json::to_value(&code).expect("a code serializes");
            assert_eq!(json, serde_json::Value::String(code.as_str().to_string()));
            let back: ErrorCode = serde_json::from_value(json).expect("round trip");
            assert_eq!(back, code);
        }
        let unknown: ErrorCode =
            serde_json::from_value(serde_json::json!("ERR_SOMETHING_NEW")).expect("kept");
        assert_eq!(unknown, ErrorCode::Other("ERR_SOMETHING_NEW".into()));
        assert_eq!(
            serde_json::to_value(&unknown).expect("serializes"),
            serde_json::json!("ERR_SOMETHING_NEW")
        );
        assert!(ErrorCode::InfraUnauthorized.is_non_retryable());
        assert!(!ErrorCode::RetryableInfraDependencies.is_non_retryable());
    }

    #[test]
    fn last_operation_round_trips_with_gardener_field_names() {
        let json = serde_json::json!({
            "description": "Backup bucket reconciled",
            "lastUpdateTime": "2024-05-01T10:00:00Z",
            "progress": 100,
            "state": "Succeeded",
            "type": "Reconcile"
        });
        let op: LastOperation = serde_json::from_value(json.clone()).expect("valid");
        assert_eq!(op.type_, LastOperationType::Reconcile);
        assert_eq!(serde_json::to_value(&op).expect("serializes"), json);

        let err = serde_json::json!({
            "description": "access denied",
            "taskID": "t1",
            "codes": ["ERR_INFRA_UNAUTHORIZED"],
            "lastUpdateTime": "2024-05-01T10:00:00Z"
        });
        let e: LastError = serde_json::from_value(err.clone()).expect("valid");
        assert_eq!(serde_json::to_value(&e).expect("serializes"), err);
    }

    #[test]
    fn unknown_gardener_enum_values_decode_and_round_trip() {
        let json = serde_json::json!({
            "description": "d",
            "lastUpdateTime": "2024-05-01T10:00:00Z",
            "progress": 0,
            "state": "Paused",
            "type": "Hibernate"
        });
        let op: LastOperation = serde_json::from_value(json.clone()).expect("tolerant");
        assert_eq!(op.state, LastOperationState::Other("Paused"));
        assert_eq!(op.type_.as_str(), "Hibernate");
        assert_eq!(serde_json::to_value(&op).expect("serializes"), json);
        assert_eq!(ConditionStatus::parse("True"), ConditionStatus::True);
        let schema = serde_json::to_value(schemars::schema_for!(LastOperationState))
            .expect("schema serializes");
        assert_eq!(schema["type"], "string");
        assert!(schema.get("enum").is_none());
    }

    #[test]
    fn field_error_display_names_the_path() {
        let e = FieldError::new("spec.backup.region", "required");
        assert_eq!(e.to_string(), "spec.backup.region: required");
        assert_eq!(
            describe_field_errors(&[e.clone(), FieldError::new("spec.x", "bad")]),
            "spec.backup.region: required; spec.x: bad"
        );
    }
}
