//! Loading the configuration files of `granary garden` and `granary seed`; the kinds
//! themselves live beside their parts (`garden::config`, `seed::config`), with the pieces
//! both share (durations, leader election, the metrics server) here. Defaults come from
//! the types, a YAML file overrides them, and
//! command-line flags override the file: each layer is applied to one JSON document that
//! is then deserialized once, so every problem is reported with its field path.

use crate::duration::{format_go_duration, parse_duration};
use granary_api::common::{FieldError, FieldErrors, describe_field_errors};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::path::Path;
use std::time::Duration;

/// The API version of Granary's configuration kinds.
pub const CONFIG_API_VERSION: &str = "granary.gardener.cloud/v1alpha1";

/// Why a configuration could not be loaded. The text names the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not valid YAML: {message}")]
    Yaml { path: String, message: String },
    #[error("{path}: no document of kind {kind} (found: {found})")]
    KindNotFound {
        path: String,
        kind: &'static str,
        found: String,
    },
    #[error("{origin}: {field}: {message}")]
    Field {
        origin: String,
        field: String,
        message: String,
    },
    #[error("{origin}: {}", describe_field_errors(.errors))]
    Invalid { origin: String, errors: FieldErrors },
}

/// A duration written as a string (`10s`, `5m`, `72h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ConfigDuration(pub Duration);

impl Serialize for ConfigDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_go_duration(self.0))
    }
}

/// Documented as what it is written as: a Go-style duration string.
impl JsonSchema for ConfigDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "format": "duration"
        })
    }
}

impl<'de> Deserialize<'de> for ConfigDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        parse_duration(&text)
            .map(ConfigDuration)
            .map_err(serde::de::Error::custom)
    }
}

impl From<ConfigDuration> for Duration {
    fn from(d: ConfigDuration) -> Duration {
        d.0
    }
}

impl ConfigDuration {
    /// `s` seconds.
    pub const fn secs(s: u64) -> Self {
        ConfigDuration(Duration::from_secs(s))
    }
}

/// `leaderElection` of both configuration kinds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LeaderElection {
    /// Only the replica holding the Lease runs the controllers; the others wait.
    pub enabled: bool,
    /// The namespace of the Lease.
    pub namespace: String,
    /// How long a Lease stays valid without renewal before another replica may take it.
    pub lease_duration: ConfigDuration,
    /// How long the holder keeps trying to renew before it gives up leading (shorter than
    /// `leaseDuration`).
    pub renew_deadline: ConfigDuration,
    /// How often a replica tries to acquire or renew the Lease.
    pub retry_period: ConfigDuration,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            enabled: true,
            namespace: "garden".to_string(),
            lease_duration: ConfigDuration::secs(15),
            renew_deadline: ConfigDuration::secs(10),
            retry_period: ConfigDuration::secs(2),
        }
    }
}

impl LeaderElection {
    /// Adds every problem of this section to `errors`.
    pub fn check(&self, errors: &mut FieldErrors) {
        self.validate(errors)
    }

    fn validate(&self, errors: &mut FieldErrors) {
        if self.enabled {
            if self.namespace.is_empty() {
                errors.push(FieldError::new(
                    "leaderElection.namespace",
                    "required when leader election is enabled",
                ));
            }
            if self.renew_deadline.0 >= self.lease_duration.0 {
                errors.push(FieldError::new(
                    "leaderElection.renewDeadline",
                    "must be shorter than leaderElection.leaseDuration",
                ));
            }
            if self.retry_period.0.is_zero() || self.retry_period.0 >= self.renew_deadline.0 {
                errors.push(FieldError::new(
                    "leaderElection.retryPeriod",
                    "must be positive and shorter than leaderElection.renewDeadline",
                ));
            }
        }
    }
}

/// `server` of both configuration kinds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Where `/metrics`, `/healthz` and `/readyz` are served (`host:port`; `:port` binds
    /// every address).
    pub metrics_bind_address: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            metrics_bind_address: ":8085".to_string(),
        }
    }
}

/// A configuration kind Granary loads.
pub trait ConfigKind: Sized + for<'de> Deserialize<'de> {
    /// The `kind` of the document.
    const KIND: &'static str;
    /// Other kinds accepted for the same document.
    const KIND_ALIASES: &'static [&'static str];
    /// Rewrites accepted aliases of fields into their Granary names.
    fn normalize(doc: &mut Map<String, Value>, origin: &str) -> Result<(), ConfigError>;
    /// Every semantic problem with its field path.
    fn problems(&self) -> FieldErrors;
}

/// A flag's value to lay over the file: `path` is the dotted camelCase field path
/// (`server.metricsBindAddress`).
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    pub path: &'static str,
    pub value: Value,
}

impl Override {
    pub fn new(path: &'static str, value: impl Into<Value>) -> Self {
        Override {
            path,
            value: value.into(),
        }
    }
}

/// Loads configuration kind `K`: defaults, then the document of kind `K` from `file` (a
/// file may hold several documents separated by `---`), then `overrides` from flags.
pub fn load<K: ConfigKind>(file: Option<&Path>, overrides: &[Override]) -> Result<K, ConfigError> {
    let (origin, mut doc) = match file {
        None => ("configuration".to_string(), Map::new()),
        Some(path) => {
            let origin = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: origin.clone(),
                source,
            })?;
            let doc = select_document::<K>(&text, &origin)?;
            (origin, doc)
        }
    };
    K::normalize(&mut doc, &origin)?;
    for o in overrides {
        set_path(&mut doc, o.path, o.value.clone());
    }
    let config: K = serde_path_to_error::deserialize(Value::Object(doc)).map_err(|e| {
        let field = e.path().to_string();
        ConfigError::Field {
            origin: origin.clone(),
            field: if field == "." {
                "(top level)".to_string()
            } else {
                field
            },
            message: e.into_inner().to_string(),
        }
    })?;
    let problems = config.problems();
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError::Invalid {
            origin,
            errors: problems,
        })
    }
}

/// Parses `text` and returns the body of the document of kind `K`, without `apiVersion`
/// and `kind`.
fn select_document<K: ConfigKind>(
    text: &str,
    origin: &str,
) -> Result<Map<String, Value>, ConfigError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| ConfigError::Yaml {
        path: origin.to_string(),
        message: e.to_string(),
    })?;
    let mut found = Vec::new();
    let mut selected: Option<Map<String, Value>> = None;
    for (index, doc) in docs.into_iter().enumerate() {
        let Value::Object(mut map) = doc else {
            if doc.is_null() {
                continue;
            }
            return Err(ConfigError::Field {
                origin: origin.to_string(),
                field: "(document)".to_string(),
                message: "must be a mapping".to_string(),
            });
        };
        let kind = map
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if kind == K::KIND || K::KIND_ALIASES.contains(&kind.as_str()) {
            if selected.is_some() {
                // Two of the same kind: which one was meant cannot be told.
                return Err(ConfigError::Field {
                    origin: origin.to_string(),
                    field: format!("(document {})", index + 1),
                    message: format!("a second document of kind {}; keep one per file", K::KIND),
                });
            }
            map.remove("kind");
            if let Some(api_version) = map.remove("apiVersion") {
                let ok = api_version.as_str() == Some(CONFIG_API_VERSION)
                    || K::KIND_ALIASES.contains(&kind.as_str());
                if !ok {
                    return Err(ConfigError::Field {
                        origin: origin.to_string(),
                        field: "apiVersion".to_string(),
                        message: format!("must be {CONFIG_API_VERSION}, got {api_version}"),
                    });
                }
            }
            selected = Some(map);
            continue;
        }
        found.push(if kind.is_empty() {
            "(no kind)".to_string()
        } else {
            kind
        });
    }
    selected.ok_or_else(|| ConfigError::KindNotFound {
        path: origin.to_string(),
        kind: K::KIND,
        found: if found.is_empty() {
            "nothing".to_string()
        } else {
            found.join(", ")
        },
    })
}

fn set_path(doc: &mut Map<String, Value>, path: &str, value: Value) {
    let mut parts = path.split('.').peekable();
    let mut current = doc;
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            current.insert(part.to_string(), value);
            return;
        }
        let entry = current
            .entry(part.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        current = match entry {
            Value::Object(map) => map,
            _ => unreachable!("replaced by an object just above"),
        };
    }
}
