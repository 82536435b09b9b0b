//! `SeedConfiguration`, the configuration file of `granary seed`: the seed's name, the
//! garden it reports to, its controllers' concurrency and deletion grace period, lease
//! renewal, leader election, the metrics server and the Velero settings. Loaded by
//! `runtime::config::load`.

use granary_api::common::{FieldError, FieldErrors};
use granary_runtime::config::{
    ConfigDuration, ConfigError, ConfigKind, LeaderElection, ServerConfig,
};
use granary_velero_server::settings::VeleroSettings;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::time::Duration;

fn default_entry_syncs() -> u32 {
    20
}

fn default_bucket_syncs() -> u32 {
    5
}

/// `controllers.backupEntry` of the seed configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SeedBackupEntryController {
    /// How many BackupEntries are reconciled at once.
    #[serde(default = "default_entry_syncs")]
    pub concurrent_syncs: u32,
    /// How long a deleted shoot's backups are kept before its entry's data is deleted
    /// (Gardener's setting; 0 deletes at once).
    #[serde(default)]
    pub deletion_grace_period_hours: u32,
    /// Granary's override of `deletionGracePeriodHours`, allowing seconds.
    #[serde(default)]
    pub deletion_grace_period: Option<ConfigDuration>,
    /// When not empty, the grace period applies only to shoots of these purposes
    /// (`evaluation`, `testing`, `development`, `production`, `infrastructure`) and to
    /// entries whose purpose is unknown; other entries are deleted at once.
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SeedBackupBucketController {
    /// How many BackupBuckets are reconciled at once.
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SeedControllers {
    pub backup_bucket: SeedBackupBucketController,
    pub backup_entry: SeedBackupEntryController,
}

/// `seedLiveness` of the seed configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SeedLivenessRenewal {
    /// How often the seed renews its Lease in the garden, which tells the garden it is alive.
    pub renew_interval: ConfigDuration,
}

impl Default for SeedLivenessRenewal {
    fn default() -> Self {
        SeedLivenessRenewal {
            renew_interval: ConfigDuration::secs(10),
        }
    }
}

/// The configuration of `granary seed` (kind `SeedConfiguration`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SeedConfiguration {
    /// The name of this seed's Seed object in the garden (required; or `--seed-name`).
    pub seed_name: String,
    /// The kubeconfig of the garden's API server (required; or `--garden-kubeconfig`).
    pub garden_kubeconfig: Option<String>,
    pub controllers: SeedControllers,
    pub seed_liveness: SeedLivenessRenewal,
    pub leader_election: LeaderElection,
    pub server: ServerConfig,
    /// The Velero-compatible controllers in this seed.
    pub velero: VeleroSettings,
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
        self.leader_election.check(&mut errors);
        self.velero.validate("velero", &mut errors);
        errors
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
    fn defaults_need_a_seed_name() {
        let err = load::<SeedConfiguration>(None, &[]).expect_err("seed name required");
        assert!(err.to_string().contains("seedName: required"), "{err}");
    }
    #[test]
    fn the_example_loads_beside_a_garden_document() {
        let f = file(EXAMPLE);
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
    fn bad_input_names_the_field() {
        let cases = [
            (
                "kind: SeedConfiguration\nseedName: s\ncontrollers:\n  backupEntry:\n    deletionGracePeriodShootPurposes: [prod]\n",
                "deletionGracePeriodShootPurposes[0]",
            ),
            (
                "kind: Other\n",
                "no document of kind SeedConfiguration (found: Other)",
            ),
        ];
        for (text, expected) in cases {
            let f = file(text);
            let err = load::<SeedConfiguration>(Some(f.path()), &[])
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
