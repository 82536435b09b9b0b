//! `GardenConfiguration`, the configuration file of `granary garden`: bucket quotas per
//! provider, hand-over and shard-removal delays, seed liveness, leader election, the
//! metrics server and the seed authorizer. Loaded by `runtime::config::load`.

use granary_api::common::{FieldError, FieldErrors};
use granary_runtime::config::{
    ConfigDuration, ConfigError, ConfigKind, LeaderElection, ServerConfig,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One `{provider, limit}` entry of the bucket quota: at most `limit` entries per bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderQuota {
    /// The backup provider type (`aws`, `azure`, `gcp`, `local`).
    pub provider: String,
    /// The most BackupEntries one bucket of this provider holds; a pool adds a shard when
    /// its buckets are full.
    pub limit: u32,
}

/// `controllers.backupBucket` of the garden configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GardenBackupBucketController {
    /// Entries per bucket, per provider type; a provider not listed has no limit (one
    /// bucket per pool).
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
            seed_hand_over_after: ConfigDuration::secs(300),
            remove_empty_shards_after: ConfigDuration::secs(0),
        }
    }
}

/// `concurrentSyncs` alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConcurrentSyncs {
    /// How many objects are reconciled at once.
    #[serde(default = "default_entry_syncs")]
    pub concurrent_syncs: u32,
}

fn default_entry_syncs() -> u32 {
    20
}

/// `controllers` of the garden configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GardenSeedLiveness {
    /// A seed is ready when its Lease was renewed within this time.
    pub ready_within: ConfigDuration,
}

impl Default for GardenSeedLiveness {
    fn default() -> Self {
        GardenSeedLiveness {
            ready_within: ConfigDuration::secs(40),
        }
    }
}

/// The configuration of `granary garden` (kind `GardenConfiguration`; the older kind
/// `ControllerManagerConfiguration` is accepted as an alias, see
/// docs/operations.md#configuration-files).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SeedAuthorizationConfig {
    /// Where the webhook listens (`:9443`, `127.0.0.1:0`); empty: not served.
    pub bind_address: String,
    /// PEM serving certificate (chain) and its private key.
    pub tls_cert_file: String,
    /// The private key of `tlsCertFile` (PEM).
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
        self.leader_election.check(&mut errors);
        self.seed_authorization.validate(&mut errors);
        errors
    }
}

impl ConfigKind for GardenConfiguration {
    const KIND: &'static str = "GardenConfiguration";
    const KIND_ALIASES: &'static [&'static str] = &["ControllerManagerConfiguration"];

    fn normalize(doc: &mut Map<String, Value>, origin: &str) -> Result<(), ConfigError> {
        // The older configuration called the bucket controller `backupInfrastructure`;
        // only its quota carries over.
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

#[cfg(test)]
mod tests {
    use super::*;
    use granary_runtime::config::{Override, load};
    use std::io::Write;
    use std::time::Duration;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(text.as_bytes()).expect("write");
        f
    }

    const EXAMPLE: &str = r#"
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
    }
    #[test]
    fn the_example_loads_beside_a_seed_document() {
        let f = file(EXAMPLE);
        let garden: GardenConfiguration = load(Some(f.path()), &[]).expect("valid");
        assert_eq!(garden.quota_for("aws"), Some(100));
        assert_eq!(
            garden.controllers.backup_bucket.seed_hand_over_after.0,
            Duration::from_secs(300)
        );
    }
    #[test]
    fn controller_manager_aliases_are_accepted() {
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
            let err = load::<GardenConfiguration>(Some(f.path()), &[])
                .expect_err(text)
                .to_string();
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
