//! The configuration files of `granary garden` and `granary seed` (DESIGN §4
//! "Configuration files"). Defaults come from the types, a YAML file overrides them, and
//! command-line flags override the file: each layer is applied to one JSON document that
//! is then deserialized once, so every problem is reported with its field path.

use crate::api::common::{FieldError, FieldErrors, describe_field_errors};
use crate::runtime::duration::{format_go_duration, parse_duration};
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

fn secs(s: u64) -> ConfigDuration {
    ConfigDuration(Duration::from_secs(s))
}

/// `leaderElection` of both configuration kinds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LeaderElection {
    pub enabled: bool,
    pub namespace: String,
    pub lease_duration: ConfigDuration,
    pub renew_deadline: ConfigDuration,
    pub retry_period: ConfigDuration,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            enabled: true,
            namespace: "garden".to_string(),
            lease_duration: secs(15),
            renew_deadline: secs(10),
            retry_period: secs(2),
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServerConfig {
    pub metrics_bind_address: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            metrics_bind_address: ":8085".to_string(),
        }
    }
}

/// One `{provider, limit}` entry of the bucket quota: at most `limit` entries per bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderQuota {
    pub provider: String,
    pub limit: u32,
}

/// `controllers.backupBucket` of the garden configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GardenBackupBucketController {
    pub quota: Vec<ProviderQuota>,
    /// A bucket whose seed has been unready this long is handed to another seed.
    pub seed_hand_over_after: ConfigDuration,
    /// Empty shards are removed after this long; zero keeps them.
    pub remove_empty_shards_after: ConfigDuration,
}

impl Default for GardenBackupBucketController {
    fn default() -> Self {
        GardenBackupBucketController {
            quota: Vec::new(),
            seed_hand_over_after: secs(300),
            remove_empty_shards_after: secs(0),
        }
    }
}

/// `concurrentSyncs` alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConcurrentSyncs {
    #[serde(default = "default_entry_syncs")]
    pub concurrent_syncs: u32,
}

fn default_entry_syncs() -> u32 {
    20
}

fn default_bucket_syncs() -> u32 {
    5
}

/// `controllers` of the garden configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GardenControllers {
    #[serde(default)]
    pub backup_bucket: GardenBackupBucketController,
    #[serde(default = "entry_syncs")]
    pub backup_entry: ConcurrentSyncs,
}

fn entry_syncs() -> ConcurrentSyncs {
    ConcurrentSyncs {
        concurrent_syncs: default_entry_syncs(),
    }
}

impl Default for GardenControllers {
    fn default() -> Self {
        GardenControllers {
            backup_bucket: GardenBackupBucketController::default(),
            backup_entry: entry_syncs(),
        }
    }
}

/// `seedLiveness` of the garden configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GardenSeedLiveness {
    /// A seed is ready when its Lease was renewed within this time.
    pub ready_within: ConfigDuration,
}

impl Default for GardenSeedLiveness {
    fn default() -> Self {
        GardenSeedLiveness {
            ready_within: secs(40),
        }
    }
}

/// The configuration of `granary garden` (kind `GardenConfiguration`; seed 004's
/// `ControllerManagerConfiguration` is accepted as an alias).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GardenConfiguration {
    pub controllers: GardenControllers,
    pub seed_liveness: GardenSeedLiveness,
    pub leader_election: LeaderElection,
    pub server: ServerConfig,
    pub seed_authorization: SeedAuthorizationConfig,
}

/// `seedAuthorization` of the garden configuration: the HTTPS webhook kube-apiserver asks
/// about the seeds' requests (authorization, `SubjectAccessReview`) and writes
/// (admission, `AdmissionReview`). Not served while `bindAddress` is empty.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SeedAuthorizationConfig {
    /// Where the webhook listens (`:9443`, `127.0.0.1:0`); empty: not served.
    pub bind_address: String,
    /// PEM serving certificate (chain) and its private key.
    pub tls_cert_file: String,
    pub tls_key_file: String,
    /// The garden namespace of the seeds' ServiceAccounts `granary-seed-<seed>`.
    pub seed_service_account_namespace: String,
    /// Lets a seed list and watch buckets and entries with no label selector in the
    /// review. kube-apiserver passes list selectors to authorization webhooks from 1.32
    /// (1.31 with the `AuthorizeWithSelectors` feature gate); older ones never do, and
    /// need this to let the seeds watch at all.
    pub allow_list_without_label_selector: bool,
}

impl Default for SeedAuthorizationConfig {
    fn default() -> Self {
        SeedAuthorizationConfig {
            bind_address: String::new(),
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
            seed_service_account_namespace: "granary-system".to_string(),
            allow_list_without_label_selector: false,
        }
    }
}

impl SeedAuthorizationConfig {
    pub fn enabled(&self) -> bool {
        !self.bind_address.is_empty()
    }

    fn validate(&self, errors: &mut FieldErrors) {
        if !self.enabled() {
            return;
        }
        for (field, value) in [
            ("seedAuthorization.tlsCertFile", &self.tls_cert_file),
            ("seedAuthorization.tlsKeyFile", &self.tls_key_file),
            (
                "seedAuthorization.seedServiceAccountNamespace",
                &self.seed_service_account_namespace,
            ),
        ] {
            if value.is_empty() {
                errors.push(FieldError::new(
                    field,
                    "required when seedAuthorization.bindAddress is set",
                ));
            }
        }
    }
}

impl GardenConfiguration {
    /// The per-bucket entry limit for a provider type; `None` means no limit.
    pub fn quota_for(&self, provider: &str) -> Option<u32> {
        self.controllers
            .backup_bucket
            .quota
            .iter()
            .find(|q| q.provider == provider)
            .map(|q| q.limit)
    }

    fn validate(&self) -> FieldErrors {
        let mut errors = FieldErrors::new();
        let mut seen = std::collections::BTreeSet::new();
        for (i, q) in self.controllers.backup_bucket.quota.iter().enumerate() {
            if q.provider.is_empty() {
                errors.push(FieldError::new(
                    format!("controllers.backupBucket.quota[{i}].provider"),
                    "required",
                ));
            } else if !seen.insert(q.provider.as_str()) {
                errors.push(FieldError::new(
                    format!("controllers.backupBucket.quota[{i}].provider"),
                    format!("duplicate provider {:?}", q.provider),
                ));
            }
            if q.limit == 0 {
                errors.push(FieldError::new(
                    format!("controllers.backupBucket.quota[{i}].limit"),
                    "must be at least 1 (omit the provider for no limit)",
                ));
            }
        }
        if self.controllers.backup_entry.concurrent_syncs == 0 {
            errors.push(FieldError::new(
                "controllers.backupEntry.concurrentSyncs",
                "must be at least 1",
            ));
        }
        if self.seed_liveness.ready_within.0.is_zero() {
            errors.push(FieldError::new(
                "seedLiveness.readyWithin",
                "must be positive",
            ));
        }
        self.leader_election.validate(&mut errors);
        self.seed_authorization.validate(&mut errors);
        errors
    }
}

/// `controllers.backupEntry` of the seed configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SeedBackupEntryController {
    #[serde(default = "default_entry_syncs")]
    pub concurrent_syncs: u32,
    #[serde(default)]
    pub deletion_grace_period_hours: u32,
    /// Granary's override of `deletionGracePeriodHours`, allowing seconds.
    #[serde(default)]
    pub deletion_grace_period: Option<ConfigDuration>,
    #[serde(default)]
    pub deletion_grace_period_shoot_purposes: Vec<String>,
}

impl Default for SeedBackupEntryController {
    fn default() -> Self {
        SeedBackupEntryController {
            concurrent_syncs: default_entry_syncs(),
            deletion_grace_period_hours: 0,
            deletion_grace_period: None,
            deletion_grace_period_shoot_purposes: Vec::new(),
        }
    }
}

impl SeedBackupEntryController {
    /// The configured grace period: `deletionGracePeriod` when set, else the hours.
    pub fn grace_period(&self) -> Duration {
        self.deletion_grace_period
            .map(|d| d.0)
            .unwrap_or(Duration::from_secs(
                u64::from(self.deletion_grace_period_hours) * 3600,
            ))
    }
}

/// `controllers.backupBucket` of the seed configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SeedBackupBucketController {
    #[serde(default = "default_bucket_syncs")]
    pub concurrent_syncs: u32,
}

impl Default for SeedBackupBucketController {
    fn default() -> Self {
        SeedBackupBucketController {
            concurrent_syncs: default_bucket_syncs(),
        }
    }
}

/// `controllers` of the seed configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SeedControllers {
    pub backup_bucket: SeedBackupBucketController,
    pub backup_entry: SeedBackupEntryController,
}

/// `seedLiveness` of the seed configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SeedLivenessRenewal {
    pub renew_interval: ConfigDuration,
}

impl Default for SeedLivenessRenewal {
    fn default() -> Self {
        SeedLivenessRenewal {
            renew_interval: secs(10),
        }
    }
}

/// The configuration of `granary seed` (kind `SeedConfiguration`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SeedConfiguration {
    pub seed_name: String,
    pub garden_kubeconfig: Option<String>,
    pub controllers: SeedControllers,
    pub seed_liveness: SeedLivenessRenewal,
    pub leader_election: LeaderElection,
    pub server: ServerConfig,
    /// The Velero-compatible controllers in this seed.
    pub velero: crate::velero_server::settings::VeleroSettings,
}

impl SeedConfiguration {
    fn validate(&self) -> FieldErrors {
        let mut errors = FieldErrors::new();
        if self.seed_name.is_empty() {
            errors.push(FieldError::new(
                "seedName",
                "required (set it in the file or with --seed-name)",
            ));
        }
        if self.controllers.backup_bucket.concurrent_syncs == 0 {
            errors.push(FieldError::new(
                "controllers.backupBucket.concurrentSyncs",
                "must be at least 1",
            ));
        }
        if self.controllers.backup_entry.concurrent_syncs == 0 {
            errors.push(FieldError::new(
                "controllers.backupEntry.concurrentSyncs",
                "must be at least 1",
            ));
        }
        for (i, p) in self
            .controllers
            .backup_entry
            .deletion_grace_period_shoot_purposes
            .iter()
            .enumerate()
        {
            if !matches!(
                p.as_str(),
                "evaluation" | "testing" | "development" | "production" | "infrastructure"
            ) {
                errors.push(FieldError::new(
                    format!("controllers.backupEntry.deletionGracePeriodShootPurposes[{i}]"),
                    format!("unknown shoot purpose {p:?} (evaluation, testing, development, production, infrastructure)"),
                ));
            }
        }
        if self.seed_liveness.renew_interval.0.is_zero() {
            errors.push(FieldError::new(
                "seedLiveness.renewInterval",
                "must be positive",
            ));
        }
        self.leader_election.validate(&mut errors);
        self.velero.validate("velero", &mut errors);
        errors
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

impl ConfigKind for GardenConfiguration {
    const KIND: &'static str = "GardenConfiguration";
    const KIND_ALIASES: &'static [&'static str] = &["ControllerManagerConfiguration"];

    fn normalize(doc: &mut Map<String, Value>, origin: &str) -> Result<(), ConfigError> {
        // seed 004 called the bucket controller `backupInfrastructure`; only its quota
        // carries over.
        let Some(Value::Object(controllers)) = doc.get_mut("controllers") else {
            return Ok(());
        };
        let Some(legacy) = controllers.remove("backupInfrastructure") else {
            return Ok(());
        };
        let field = |field: &str, message: &str| ConfigError::Field {
            origin: origin.to_string(),
            field: field.to_string(),
            message: message.to_string(),
        };
        let Value::Object(mut legacy) = legacy else {
            return Err(field(
                "controllers.backupInfrastructure",
                "must be a mapping",
            ));
        };
        if let Some(quota) = legacy.remove("quota") {
            let bucket = controllers
                .entry("backupBucket")
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(bucket) = bucket else {
                return Err(field("controllers.backupBucket", "must be a mapping"));
            };
            if bucket.contains_key("quota") {
                return Err(field(
                    "controllers.backupInfrastructure.quota",
                    "set together with controllers.backupBucket.quota; keep one",
                ));
            }
            bucket.insert("quota".to_string(), quota);
        }
        if let Some(other) = legacy.keys().next() {
            return Err(field(
                &format!("controllers.backupInfrastructure.{other}"),
                "not supported (only quota is carried over from backupInfrastructure)",
            ));
        }
        Ok(())
    }

    fn problems(&self) -> FieldErrors {
        self.validate()
    }
}

impl ConfigKind for SeedConfiguration {
    const KIND: &'static str = "SeedConfiguration";
    const KIND_ALIASES: &'static [&'static str] = &[];

    fn normalize(_doc: &mut Map<String, Value>, _origin: &str) -> Result<(), ConfigError> {
        Ok(())
    }

    fn problems(&self) -> FieldErrors {
        self.validate()
    }
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

#[cfg(test)]
mod duplicate_documents {
    use super::*;

    #[test]
    fn two_documents_of_one_kind_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c.yaml");
        std::fs::write(
            &path,
            "kind: SeedConfiguration\nseedName: a\n---\nkind: GardenConfiguration\n---\nkind: SeedConfiguration\nseedName: b\n",
        )
        .expect("write");
        let e = load::<SeedConfiguration>(Some(&path), &[]).expect_err("ambiguous");
        let text = e.to_string();
        assert!(text.contains("(document 3)"), "{text}");
        assert!(
            text.contains("a second document of kind SeedConfiguration"),
            "{text}"
        );
        // One of each kind in one file stays fine.
        std::fs::write(
            &path,
            "kind: SeedConfiguration\nseedName: a\n---\nkind: GardenConfiguration\n",
        )
        .expect("write");
        assert_eq!(
            load::<SeedConfiguration>(Some(&path), &[])
                .expect("loads")
                .seed_name,
            "a"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(text.as_bytes()).expect("write");
        f
    }

    const DESIGN_EXAMPLE: &str = r#"
apiVersion: granary.gardener.cloud/v1alpha1
kind: GardenConfiguration
controllers:
  backupBucket:
    quota: [{provider: aws, limit: 100}]
    seedHandOverAfter: 5m
    removeEmptyShardsAfter: 0s
  backupEntry: {concurrentSyncs: 20}
seedLiveness: {readyWithin: 40s}
leaderElection: {enabled: true, namespace: garden, leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}
server: {metricsBindAddress: ":8085"}
---
apiVersion: granary.gardener.cloud/v1alpha1
kind: SeedConfiguration
seedName: aws-eu1
gardenKubeconfig: /etc/granary/garden/kubeconfig
controllers:
  backupBucket: {concurrentSyncs: 5}
  backupEntry:
    concurrentSyncs: 20
    deletionGracePeriodHours: 0
    deletionGracePeriod: null
    deletionGracePeriodShootPurposes: []
seedLiveness: {renewInterval: 10s}
leaderElection: {enabled: true, namespace: garden, leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}
server: {metricsBindAddress: ":8085"}
"#;

    #[test]
    fn seed_authorization_is_off_by_default_and_needs_its_certificate_when_on() {
        let garden: GardenConfiguration = load(None, &[]).expect("defaults are valid");
        assert!(!garden.seed_authorization.enabled());
        let on = [Override::new("seedAuthorization.bindAddress", ":9443")];
        let err = load::<GardenConfiguration>(None, &on).expect_err("no certificate");
        let text = err.to_string();
        assert!(
            text.contains("seedAuthorization.tlsCertFile") && text.contains("tlsKeyFile"),
            "{text}"
        );
        let f = file(
            "kind: GardenConfiguration\nseedAuthorization:\n  bindAddress: \":9443\"\n  \
             tlsCertFile: /tls/tls.crt\n  tlsKeyFile: /tls/tls.key\n",
        );
        let garden: GardenConfiguration = load(Some(f.path()), &[]).expect("valid");
        assert!(garden.seed_authorization.enabled());
        assert_eq!(
            garden.seed_authorization.seed_service_account_namespace,
            "granary-system"
        );
    }

    #[test]
    fn defaults_without_a_file() {
        let garden: GardenConfiguration = load(None, &[]).expect("defaults are valid");
        assert_eq!(garden, GardenConfiguration::default());
        assert_eq!(garden.quota_for("aws"), None);
        assert_eq!(garden.seed_liveness.ready_within.0, Duration::from_secs(40));
        let err = load::<SeedConfiguration>(None, &[]).expect_err("seed name required");
        assert!(err.to_string().contains("seedName: required"), "{err}");
    }

    #[test]
    fn the_design_example_loads_both_kinds_from_one_file() {
        let f = file(DESIGN_EXAMPLE);
        let garden: GardenConfiguration = load(Some(f.path()), &[]).expect("valid");
        assert_eq!(garden.quota_for("aws"), Some(100));
        assert_eq!(
            garden.controllers.backup_bucket.seed_hand_over_after.0,
            Duration::from_secs(300)
        );
        let seed: SeedConfiguration = load(Some(f.path()), &[]).expect("valid");
        assert_eq!(seed.seed_name, "aws-eu1");
        assert_eq!(
            seed.garden_kubeconfig.as_deref(),
            Some("/etc/granary/garden/kubeconfig")
        );
        assert_eq!(seed.controllers.backup_entry.grace_period(), Duration::ZERO);
    }

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let f = file(
            "kind: SeedConfiguration\nseedName: from-file\ncontrollers:\n  backupEntry:\n    deletionGracePeriodHours: 2\n",
        );
        let seed: SeedConfiguration = load(Some(f.path()), &[]).expect("valid");
        assert_eq!(
            seed.controllers.backup_entry.grace_period(),
            Duration::from_secs(7200)
        );
        assert_eq!(
            seed.controllers.backup_bucket.concurrent_syncs, 5,
            "default kept"
        );
        let seed: SeedConfiguration = load(
            Some(f.path()),
            &[
                Override::new("seedName", "from-flag"),
                Override::new("controllers.backupEntry.deletionGracePeriod", "90s"),
                Override::new("server.metricsBindAddress", "127.0.0.1:0"),
            ],
        )
        .expect("valid");
        assert_eq!(seed.seed_name, "from-flag");
        assert_eq!(
            seed.controllers.backup_entry.grace_period(),
            Duration::from_secs(90)
        );
        assert_eq!(seed.server.metrics_bind_address, "127.0.0.1:0");
    }

    #[test]
    fn seed_004_aliases_are_accepted() {
        let f = file(
            "apiVersion: controllermanager.config.gardener.cloud/v1alpha1\nkind: ControllerManagerConfiguration\ncontrollers:\n  backupInfrastructure:\n    quota:\n    - provider: gcp\n      limit: 3\n",
        );
        let garden: GardenConfiguration = load(Some(f.path()), &[]).expect("alias accepted");
        assert_eq!(garden.quota_for("gcp"), Some(3));

        let both = file(
            "kind: GardenConfiguration\ncontrollers:\n  backupInfrastructure: {quota: []}\n  backupBucket: {quota: []}\n",
        );
        let err = load::<GardenConfiguration>(Some(both.path()), &[]).expect_err("conflict");
        assert!(
            err.to_string()
                .contains("controllers.backupInfrastructure.quota"),
            "{err}"
        );
    }

    #[test]
    fn bad_input_names_the_field() {
        let cases = [
            (
                "kind: GardenConfiguration\ncontrollers:\n  backupBucket:\n    quota: [{provider: aws, limit: -1}]\n",
                "controllers.backupBucket.quota[0].limit",
            ),
            (
                "kind: GardenConfiguration\nseedLiveness: {readyWithin: soon}\n",
                "seedLiveness.readyWithin",
            ),
            (
                "kind: GardenConfiguration\nserver: {metricsBindAddres: x}\n",
                "server",
            ),
            (
                "kind: GardenConfiguration\ncontrollers:\n  backupBucket:\n    quota: [{provider: aws, limit: 0}]\n",
                "controllers.backupBucket.quota[0].limit: must be at least 1",
            ),
            (
                "kind: GardenConfiguration\nleaderElection: {leaseDuration: 5s}\n",
                "leaderElection.renewDeadline",
            ),
            (
                "kind: SeedConfiguration\nseedName: s\ncontrollers:\n  backupEntry:\n    deletionGracePeriodShootPurposes: [prod]\n",
                "deletionGracePeriodShootPurposes[0]",
            ),
            (
                "kind: Other\n",
                "no document of kind GardenConfiguration (found: Other)",
            ),
            (
                "apiVersion: v9\nkind: GardenConfiguration\n",
                "apiVersion: must be",
            ),
            ("kind: GardenConfiguration\n  bad: [\n", "not valid YAML"),
        ];
        for (text, expected) in cases {
            let f = file(text);
            let err = if text.contains("SeedConfiguration") {
                load::<SeedConfiguration>(Some(f.path()), &[])
                    .expect_err(text)
                    .to_string()
            } else {
                load::<GardenConfiguration>(Some(f.path()), &[])
                    .expect_err(text)
                    .to_string()
            };
            assert!(
                err.contains(expected),
                "{err:?} should contain {expected:?}"
            );
            assert!(
                err.starts_with(&f.path().display().to_string()),
                "{err} names the file"
            );
        }
    }
}
