//! Settings of the Velero-compatible controllers: the `velero:` section of
//! `SeedConfiguration` and of `granary server`'s own configuration file
//! (`ServerConfiguration`). Field names follow Velero's server flags
//! (`--concurrent-backups` is `concurrentBackups`), so do the defaults.

use granary_api::common::{FieldError, FieldErrors};
use granary_runtime::config::{
    ConfigDuration, ConfigError, ConfigKind, LeaderElection, ServerConfig,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::time::Duration;

/// Velero's controller names, as `--disable-controllers` takes them (those built so far).
pub const CONTROLLER_BACKUP_STORAGE_LOCATION: &str = "backup-storage-location";
pub const CONTROLLER_BACKUP_QUEUE: &str = "backup-queue";
pub const CONTROLLER_BACKUP: &str = "backup";
pub const CONTROLLER_BACKUP_DELETION: &str = "backup-deletion";
pub const CONTROLLER_GC: &str = "gc";
pub const CONTROLLER_BACKUP_SYNC: &str = "backup-sync";
pub const CONTROLLER_SCHEDULE: &str = "schedule";
pub const CONTROLLER_RESTORE: &str = "restore";
/// OADP's non-admin controllers (NonAdminBackup, NonAdminRestore,
/// NonAdminBackupStorageLocation, NonAdminDownloadRequest); they run only when
/// `velero.nonAdmin.enable` is on.
pub const CONTROLLER_NON_ADMIN: &str = "non-admin";
pub const CONTROLLER_DOWNLOAD_REQUEST: &str = "download-request";
pub const CONTROLLER_SERVER_STATUS_REQUEST: &str = "server-status-request";
/// Granary's: re-checks stored backups against their integrity records, and rehearses
/// the restores of backups a Schedule asks to rehearse.
pub const CONTROLLER_BACKUP_VERIFICATION: &str = "backup-verification";
/// Granary's: keeps the seed's default location (only in `granary seed`).
pub const CONTROLLER_DEFAULT_LOCATION: &str = "default-backup-storage-location";
/// Granary's: keeps read-only locations of the other seeds of the pool (only in
/// `granary seed`).
pub const CONTROLLER_SIBLING_LOCATIONS: &str = "sibling-backup-storage-locations";

/// Every Velero controller name Granary knows, for flag validation.
pub const CONTROLLERS: &[&str] = &[
    CONTROLLER_BACKUP_STORAGE_LOCATION,
    CONTROLLER_BACKUP_QUEUE,
    CONTROLLER_BACKUP,
    CONTROLLER_BACKUP_DELETION,
    CONTROLLER_GC,
    CONTROLLER_BACKUP_SYNC,
    CONTROLLER_SCHEDULE,
    CONTROLLER_RESTORE,
    CONTROLLER_NON_ADMIN,
    CONTROLLER_DOWNLOAD_REQUEST,
    CONTROLLER_SERVER_STATUS_REQUEST,
    CONTROLLER_BACKUP_VERIFICATION,
    CONTROLLER_DEFAULT_LOCATION,
    CONTROLLER_SIBLING_LOCATIONS,
];

/// `velero:`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct VeleroSettings {
    /// Switches the whole Velero-compatible part on (on by default).
    pub enabled: bool,
    /// The namespace of the Velero objects (`--namespace`, default `velero`).
    pub namespace: String,
    /// `--concurrent-backups` (1).
    pub concurrent_backups: u32,
    /// `--item-block-worker-count` (1): workers per running backup.
    pub item_block_worker_count: u32,
    /// `--default-backup-ttl` (720h).
    #[serde(rename = "defaultBackupTTL")]
    pub default_backup_ttl: ConfigDuration,
    /// `--store-validation-frequency` (1m): a location's validation period unless its
    /// `spec.validationFrequency` says otherwise; 0 validates once.
    pub store_validation_frequency: ConfigDuration,
    /// `--client-page-size` (500): list page size while collecting items.
    pub client_page_size: u32,
    /// `--default-backup-storage-location` (`default`): the location of a backup that
    /// names none, when no location has `spec.default: true`.
    pub default_backup_storage_location: String,
    /// How often queued backups are looked at again without a trigger (Velero: 1m).
    pub queued_backup_recheck_frequency: ConfigDuration,
    /// `--garbage-collection-frequency` (1h): how often expired backups are looked for.
    pub garbage_collection_frequency: ConfigDuration,
    /// `--backup-sync-period` (1m): a location's sync period unless its
    /// `spec.backupSyncPeriod` says otherwise; 0 disables sync of such locations.
    pub backup_sync_period: ConfigDuration,
    /// `--concurrent-restores` (1, as Velero, which runs one restore at a time):
    /// restores whose namespaces and cluster-scoped items do not overlap run in
    /// parallel up to this many; the others wait.
    pub concurrent_restores: u32,
    /// `--resource-timeout` (10m): the longest a restore waits for a CRD to be
    /// Established, a terminating namespace to go, or an action's additional items.
    pub resource_timeout: ConfigDuration,
    /// `--restore-resource-priorities`: replaces Velero's default order (high list,
    /// `-`, low list); empty keeps the default.
    pub restore_resource_priorities: String,
    /// The seed's own default location (`granary seed` only; `granary server` has no
    /// backup pool to put one in and ignores it).
    pub default_location: DefaultLocation,
    /// Where the `download-request` controller serves the download URLs of `local`
    /// locations, which cannot sign URLs (`127.0.0.1:0`: loopback, a free port).
    pub download_bind_address: String,
    /// What those URLs start with when clients reach the endpoint some other way than
    /// the bound address (a Service, a port-forward), e.g. `https://granary.example`.
    /// Unset: `http://<bound address>`.
    #[serde(rename = "downloadURLBase", skip_serializing_if = "Option::is_none")]
    pub download_url_base: Option<String>,
    /// OADP's non-admin API for namespace owners (the DPA's `spec.nonAdmin`).
    pub non_admin: NonAdminSettings,
    /// How often the `backup-verification` scrubber runs a round (24h): each round
    /// re-reads a sample of the stored backups and checks them against their integrity
    /// records.
    pub verify_frequency: ConfigDuration,
    /// The fraction of backups a scrubbing round checks (1.0; in (0, 1]), those checked
    /// longest ago first: each backup is checked about every `verifyFrequency /
    /// verifySample`, and a million backups need not cost a million reads a day.
    pub verify_sample: f64,
}

impl Default for VeleroSettings {
    fn default() -> Self {
        VeleroSettings {
            enabled: true,
            namespace: "velero".to_string(),
            concurrent_backups: 1,
            item_block_worker_count: 1,
            default_backup_ttl: ConfigDuration(Duration::from_secs(720 * 3600)),
            store_validation_frequency: ConfigDuration(Duration::from_secs(60)),
            client_page_size: 500,
            default_backup_storage_location: "default".to_string(),
            queued_backup_recheck_frequency: ConfigDuration(Duration::from_secs(60)),
            garbage_collection_frequency: ConfigDuration(Duration::from_secs(3600)),
            backup_sync_period: ConfigDuration(Duration::from_secs(60)),
            concurrent_restores: 1,
            resource_timeout: ConfigDuration(Duration::from_secs(600)),
            restore_resource_priorities: String::new(),
            default_location: DefaultLocation::default(),
            download_bind_address: "127.0.0.1:0".to_string(),
            download_url_base: None,
            non_admin: NonAdminSettings::default(),
            verify_frequency: ConfigDuration(Duration::from_secs(24 * 3600)),
            verify_sample: 1.0,
        }
    }
}

/// `velero.nonAdmin`: shaped like OADP's DPA `spec.nonAdmin`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NonAdminSettings {
    /// Runs the non-admin controllers (off by default, as OADP).
    pub enable: bool,
    /// Fields of every non-admin backup the administrator decides: an empty user field
    /// is filled from here, a different user value is refused.
    pub enforce_backup_spec: granary_api::velero::BackupSpec,
    /// The same for non-admin restores.
    pub enforce_restore_spec: granary_api::velero::RestoreSpec,
    /// The same for NonAdminBackupStorageLocations (`objectStorage` compared on bucket,
    /// prefix and caCert); any subset of the fields, `provider` and `objectStorage`
    /// included, may be given.
    #[serde(
        rename = "enforceBSLSpec",
        deserialize_with = "partial_bsl_spec",
        skip_serializing_if = "is_default_bsl_spec"
    )]
    pub enforce_bsl_spec: granary_api::velero::BackupStorageLocationSpec,
    /// The buckets a NonAdminBackupStorageLocation may name with provider `local` (the
    /// server's own disk, where the landscape's buckets live too), besides the one
    /// `enforceBSLSpec` sets; none by default.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_local_buckets: Vec<String>,
    /// A NonAdminBackupStorageLocation is created only once an administrator approves
    /// its NonAdminBackupStorageLocationRequest (off by default, as OADP).
    #[serde(rename = "requireApprovalForBSL")]
    pub require_approval_for_bsl: bool,
    /// How often NonAdminBackups are recreated from Velero backups made for them whose
    /// NonAdminBackup is gone (2m, as OADP); 0 turns that off.
    pub backup_sync_period: ConfigDuration,
    /// How often Velero Backups and Restores made for NonAdminBackups and
    /// NonAdminRestores that are gone are deleted (24h, as OADP); 0 turns that off.
    pub garbage_collection_period: ConfigDuration,
    /// The ClusterRole whose rules are the most a non-admin restore may grant inside the
    /// restored namespace (`admin`, the role namespace owners are bound to by
    /// convention): a Role is restored only when this role covers its rules, a
    /// RoleBinding only when it covers the role the binding references; ClusterRoles and
    /// ClusterRoleBindings never are. OADP's non-admin objects do not record who made
    /// them, so the administrator decides this ceiling, not the requesting user.
    pub restore_role_ceiling: String,
}

/// `velero.nonAdmin.restoreRoleCeiling` unless set.
pub const DEFAULT_RESTORE_ROLE_CEILING: &str = "admin";

impl Default for NonAdminSettings {
    fn default() -> Self {
        NonAdminSettings {
            enable: false,
            enforce_backup_spec: Default::default(),
            enforce_restore_spec: Default::default(),
            enforce_bsl_spec: Default::default(),
            allowed_local_buckets: Vec::new(),
            require_approval_for_bsl: false,
            backup_sync_period: ConfigDuration(Duration::from_secs(
                granary_api::oadp::DEFAULT_BACKUP_SYNC_PERIOD_SECS as u64,
            )),
            garbage_collection_period: ConfigDuration(Duration::from_secs(
                granary_api::oadp::DEFAULT_GARBAGE_COLLECTION_PERIOD_SECS as u64,
            )),
            restore_role_ceiling: DEFAULT_RESTORE_ROLE_CEILING.to_string(),
        }
    }
}

fn is_default_bsl_spec(spec: &granary_api::velero::BackupStorageLocationSpec) -> bool {
    *spec == Default::default()
}

/// `enforceBSLSpec` may leave out the fields a location requires (`provider`,
/// `objectStorage.bucket`): an empty one enforces nothing.
fn partial_bsl_spec<'de, D>(
    d: D,
) -> Result<granary_api::velero::BackupStorageLocationSpec, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let mut value = serde_json::Value::deserialize(d)?;
    if value.is_null() {
        return Ok(Default::default());
    }
    if let Some(map) = value.as_object_mut() {
        map.entry("provider").or_insert_with(|| "".into());
        let storage = map
            .entry("objectStorage")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(storage) = storage.as_object_mut() {
            storage.entry("bucket").or_insert_with(|| "".into());
        }
    }
    serde_json::from_value(value).map_err(serde::de::Error::custom)
}

/// `velero.defaultLocation`: the BackupStorageLocation every seed keeps in a shared
/// bucket of its own backup pool (docs/architecture.md#default-backup-location).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DefaultLocation {
    /// Runs the controller that keeps this location; off leaves the location alone.
    pub enabled: bool,
    /// The location's name (`default`).
    pub name: String,
}

impl Default for DefaultLocation {
    fn default() -> Self {
        DefaultLocation {
            enabled: true,
            name: "default".to_string(),
        }
    }
}

impl VeleroSettings {
    /// Every problem, with its path under `prefix` (`velero`).
    pub fn validate(&self, prefix: &str, errors: &mut FieldErrors) {
        let at = |f: &str| format!("{prefix}.{f}");
        if self.namespace.is_empty() {
            errors.push(FieldError::new(at("namespace"), "required"));
        }
        for (field, value) in [
            ("concurrentBackups", self.concurrent_backups),
            ("itemBlockWorkerCount", self.item_block_worker_count),
            ("clientPageSize", self.client_page_size),
            ("concurrentRestores", self.concurrent_restores),
        ] {
            if value == 0 {
                errors.push(FieldError::new(at(field), "must be at least 1"));
            }
        }
        if self.queued_backup_recheck_frequency.0.is_zero() {
            errors.push(FieldError::new(
                at("queuedBackupRecheckFrequency"),
                "must be positive",
            ));
        }
        if self.garbage_collection_frequency.0.is_zero() {
            errors.push(FieldError::new(
                at("garbageCollectionFrequency"),
                "must be positive",
            ));
        }
        if self.verify_frequency.0.is_zero() {
            errors.push(FieldError::new(
                at("verifyFrequency"),
                "must be positive (switch the scrubber off with --disable-controllers \
                 backup-verification)",
            ));
        }
        if !(self.verify_sample > 0.0 && self.verify_sample <= 1.0) {
            errors.push(FieldError::new(
                at("verifySample"),
                format!("must be in (0, 1], got {}", self.verify_sample),
            ));
        }
        if let Err(e) = self.priorities() {
            errors.push(FieldError::new(at("restoreResourcePriorities"), e));
        }
        if self
            .download_bind_address
            .parse::<std::net::SocketAddr>()
            .is_err()
        {
            errors.push(FieldError::new(
                at("downloadBindAddress"),
                "must be an address and port, e.g. 127.0.0.1:8086",
            ));
        }
        if let Some(base) = &self.download_url_base
            && !(base.starts_with("http://") || base.starts_with("https://"))
        {
            errors.push(FieldError::new(
                at("downloadURLBase"),
                "must be an http:// or https:// URL",
            ));
        }
        let enforced = &self.non_admin.enforce_backup_spec;
        errors.extend(enforced.validate_at(&at("nonAdmin.enforceBackupSpec")));
        for (field, set) in [
            ("includedNamespaces", enforced.included_namespaces.is_some()),
            ("excludedNamespaces", enforced.excluded_namespaces.is_some()),
            ("storageLocation", enforced.storage_location.is_some()),
        ] {
            if set {
                errors.push(FieldError::new(
                    at(&format!("nonAdmin.enforceBackupSpec.{field}")),
                    "cannot be enforced: the non-admin controller decides it",
                ));
            }
        }
        let restore = &self.non_admin.enforce_restore_spec;
        for (field, set) in [
            ("includedNamespaces", restore.included_namespaces.is_some()),
            ("namespaceMapping", restore.namespace_mapping.is_some()),
            ("backupName", restore.backup_name.is_some()),
            ("scheduleName", restore.schedule_name.is_some()),
        ] {
            if set {
                errors.push(FieldError::new(
                    at(&format!("nonAdmin.enforceRestoreSpec.{field}")),
                    "cannot be enforced: the non-admin controller decides it",
                ));
            }
        }
        if restore.include_cluster_resources == Some(true) {
            errors.push(FieldError::new(
                at("nonAdmin.enforceRestoreSpec.includeClusterResources"),
                "cannot be true: a non-admin restore never creates cluster-scoped objects",
            ));
        }
        let bsl = &self.non_admin.enforce_bsl_spec;
        for (field, set) in [
            ("default", bsl.default == Some(true)),
            ("credential", bsl.credential.is_some()),
        ] {
            if set {
                errors.push(FieldError::new(
                    at(&format!("nonAdmin.enforceBSLSpec.{field}")),
                    "cannot be enforced: each namespace owner's location uses its own \
                     credentials and is never the default",
                ));
            }
        }
        if let Some(problem) =
            granary_api::oadp::user_prefix_problem(bsl.object_storage.prefix.as_deref())
        {
            errors.push(FieldError::new(
                at("nonAdmin.enforceBSLSpec.objectStorage.prefix"),
                problem,
            ));
        }
        let ceiling = &self.non_admin.restore_role_ceiling;
        if ceiling.is_empty() {
            errors.push(FieldError::new(
                at("nonAdmin.restoreRoleCeiling"),
                "required: the ClusterRole whose rules bound what a non-admin restore may grant",
            ));
        } else if matches!(ceiling.as_str(), "." | "..")
            || ceiling.contains(['/', '%'])
            || ceiling.len() > 253
        {
            errors.push(FieldError::new(
                at("nonAdmin.restoreRoleCeiling"),
                "must be a ClusterRole name (no '/' or '%', not '.' or '..', at most 253 characters)",
            ));
        }
        if self.default_location.enabled && self.default_location.name.is_empty() {
            errors.push(FieldError::new(at("defaultLocation.name"), "required"));
        }
    }
}

impl VeleroSettings {
    /// The restore resource priorities: Velero's defaults unless replaced.
    pub fn priorities(&self) -> Result<super::restore::order::Priorities, String> {
        if self.restore_resource_priorities.trim().is_empty() {
            Ok(Default::default())
        } else {
            super::restore::order::Priorities::parse(&self.restore_resource_priorities)
        }
    }
}

/// The `velero:` settings as flags (Velero's flag names), laid over the file: those of
/// `granary seed` and `granary server`. The `///` lines on the fields are their help.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct VeleroFlags {
    /// The namespace of the Velero objects (default `velero`).
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Backups that may run at once (default 1).
    #[arg(long, value_name = "N")]
    pub concurrent_backups: Option<u32>,
    /// Item workers per running backup (default 1).
    #[arg(long, value_name = "N")]
    pub item_block_worker_count: Option<u32>,
    /// TTL of a backup that sets none (default 720h).
    #[arg(long, value_name = "DURATION")]
    pub default_backup_ttl: Option<String>,
    /// How often locations are validated (default 1m).
    #[arg(long, value_name = "DURATION")]
    pub store_validation_frequency: Option<String>,
    /// How often expired backups are looked for (default 1h).
    #[arg(long, value_name = "DURATION")]
    pub garbage_collection_frequency: Option<String>,
    /// How often backups are synced from each location (default 1m; 0 disables).
    #[arg(long, value_name = "DURATION")]
    pub backup_sync_period: Option<String>,
    /// Page size of the lists that collect a backup's items (default 500).
    #[arg(long, value_name = "N")]
    pub client_page_size: Option<u32>,
    /// Location of backups that name none (default `default`).
    #[arg(long, value_name = "NAME")]
    pub default_backup_storage_location: Option<String>,
    /// Restores that may run at once when they do not overlap (default 1).
    #[arg(long, value_name = "N")]
    pub concurrent_restores: Option<u32>,
    /// The longest a restore waits for a CRD, a terminating namespace or an action's
    /// additional items (default 10m).
    #[arg(long, value_name = "DURATION")]
    pub resource_timeout: Option<String>,
    /// Restore order: high list, `-`, low list (replaces Velero's default).
    #[arg(long, value_name = "LIST")]
    pub restore_resource_priorities: Option<String>,
    /// How often the backup-verification scrubber runs a round (default 24h).
    #[arg(long, value_name = "DURATION")]
    pub verify_frequency: Option<String>,
    /// Fraction of the backups a scrubbing round checks, oldest check first (default 1).
    #[arg(long, value_name = "FRACTION")]
    pub verify_sample: Option<f64>,
}

impl VeleroFlags {
    /// The overrides of the configuration file these flags make.
    pub fn overrides(&self) -> Vec<granary_runtime::config::Override> {
        use granary_runtime::config::Override;
        let mut o = Vec::new();
        let mut put = |path: &'static str, v: Option<serde_json::Value>| {
            if let Some(v) = v {
                o.push(Override::new(path, v));
            }
        };
        put("velero.namespace", self.namespace.clone().map(Into::into));
        put(
            "velero.concurrentBackups",
            self.concurrent_backups.map(Into::into),
        );
        put(
            "velero.itemBlockWorkerCount",
            self.item_block_worker_count.map(Into::into),
        );
        put(
            "velero.defaultBackupTTL",
            self.default_backup_ttl.clone().map(Into::into),
        );
        put(
            "velero.storeValidationFrequency",
            self.store_validation_frequency.clone().map(Into::into),
        );
        put(
            "velero.garbageCollectionFrequency",
            self.garbage_collection_frequency.clone().map(Into::into),
        );
        put(
            "velero.backupSyncPeriod",
            self.backup_sync_period.clone().map(Into::into),
        );
        put(
            "velero.clientPageSize",
            self.client_page_size.map(Into::into),
        );
        put(
            "velero.defaultBackupStorageLocation",
            self.default_backup_storage_location.clone().map(Into::into),
        );
        put(
            "velero.concurrentRestores",
            self.concurrent_restores.map(Into::into),
        );
        put(
            "velero.resourceTimeout",
            self.resource_timeout.clone().map(Into::into),
        );
        put(
            "velero.restoreResourcePriorities",
            self.restore_resource_priorities.clone().map(Into::into),
        );
        put(
            "velero.verifyFrequency",
            self.verify_frequency.clone().map(Into::into),
        );
        put("velero.verifySample", self.verify_sample.map(Into::into));
        o
    }
}

/// Checks `--disable-controllers` names against the controllers Granary has.
pub fn unknown_controllers<'a>(names: &'a [String], others: &[&str]) -> Vec<&'a str> {
    names
        .iter()
        .map(String::as_str)
        .filter(|n| !CONTROLLERS.contains(n) && !others.contains(n))
        .collect()
}

/// The configuration of `granary server` (kind `ServerConfiguration`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServerConfiguration {
    pub velero: VeleroSettings,
    pub leader_election: LeaderElection,
    pub server: ServerConfig,
}

impl ConfigKind for ServerConfiguration {
    const KIND: &'static str = "ServerConfiguration";
    const KIND_ALIASES: &'static [&'static str] = &[];

    fn normalize(_doc: &mut Map<String, Value>, _origin: &str) -> Result<(), ConfigError> {
        Ok(())
    }

    fn problems(&self) -> FieldErrors {
        let mut errors = FieldErrors::new();
        self.velero.validate("velero", &mut errors);
        self.leader_election.check(&mut errors);
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_runtime::config::{Override, load};

    #[test]
    fn defaults_are_velero_s() {
        let v = VeleroSettings::default();
        assert_eq!(v.namespace, "velero");
        assert_eq!(v.concurrent_backups, 1);
        assert_eq!(v.default_backup_ttl.0, Duration::from_secs(720 * 3600));
        assert_eq!(v.store_validation_frequency.0, Duration::from_secs(60));
        assert_eq!(v.client_page_size, 500);
        assert_eq!(v.garbage_collection_frequency.0, Duration::from_secs(3600));
    }

    #[test]
    fn server_configuration_file_and_flags() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("server.yaml");
        std::fs::write(
            &path,
            "apiVersion: granary.gardener.cloud/v1alpha1\nkind: ServerConfiguration\n\
             velero:\n  concurrentBackups: 3\n  defaultBackupTTL: 24h\n",
        )
        .expect("write");
        let c: ServerConfiguration =
            load(Some(&path), &[Override::new("velero.namespace", "backups")]).expect("loads");
        assert_eq!(c.velero.concurrent_backups, 3);
        assert_eq!(c.velero.namespace, "backups");
        assert_eq!(
            c.velero.default_backup_ttl.0,
            Duration::from_secs(24 * 3600)
        );

        std::fs::write(
            &path,
            "kind: ServerConfiguration\nvelero:\n  concurrentBackups: 0\n",
        )
        .expect("write");
        let e = load::<ServerConfiguration>(Some(&path), &[]).expect_err("invalid");
        assert!(e.to_string().contains("velero.concurrentBackups"), "{e}");
        std::fs::write(
            &path,
            "kind: ServerConfiguration\nvelero:\n  concurentBackups: 2\n",
        )
        .expect("write");
        let e = load::<ServerConfiguration>(Some(&path), &[]).expect_err("typo");
        assert!(e.to_string().contains("concurentBackups"), "{e}");
    }

    #[test]
    fn download_endpoint_settings() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("server.yaml");
        std::fs::write(
            &path,
            "kind: ServerConfiguration\nvelero:\n  downloadBindAddress: 0.0.0.0:8086\n  downloadURLBase: https://granary.example/\n",
        )
        .expect("write");
        let c: ServerConfiguration = load(Some(&path), &[]).expect("valid");
        assert_eq!(c.velero.download_bind_address, "0.0.0.0:8086");
        assert_eq!(
            c.velero.download_url_base.as_deref(),
            Some("https://granary.example/")
        );
        assert_eq!(
            VeleroSettings::default().download_bind_address,
            "127.0.0.1:0"
        );
        std::fs::write(
            &path,
            "kind: ServerConfiguration\nvelero:\n  downloadBindAddress: nowhere\n  downloadURLBase: granary.example\n",
        )
        .expect("write");
        let e = load::<ServerConfiguration>(Some(&path), &[])
            .expect_err("invalid")
            .to_string();
        assert!(e.contains("velero.downloadBindAddress"), "{e}");
        assert!(e.contains("velero.downloadURLBase"), "{e}");
        assert!(CONTROLLERS.contains(&"download-request"));
    }

    #[test]
    fn disable_controllers_names() {
        let names = vec!["backup".to_string(), "bakcup".to_string()];
        assert_eq!(
            unknown_controllers(&names, &["backupentry"]),
            vec!["bakcup"]
        );
    }

    #[test]
    fn non_admin_section_is_off_by_default_and_checked() {
        assert!(!VeleroSettings::default().non_admin.enable);
        assert_eq!(
            VeleroSettings::default().non_admin.backup_sync_period.0,
            Duration::from_secs(120)
        );
        assert_eq!(
            VeleroSettings::default()
                .non_admin
                .garbage_collection_period
                .0,
            Duration::from_secs(24 * 3600)
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("server.yaml");
        std::fs::write(
            &path,
            "kind: ServerConfiguration\nvelero:\n  nonAdmin:\n    enable: true\n    \
             enforceBackupSpec:\n      ttl: 24h\n",
        )
        .expect("write");
        let c: ServerConfiguration = load(Some(&path), &[]).expect("loads");
        assert!(c.velero.non_admin.enable);
        assert!(c.velero.non_admin.enforce_backup_spec.ttl.is_some());
        assert!(!c.velero.non_admin.require_approval_for_bsl);
        assert_eq!(c.velero.non_admin.restore_role_ceiling, "admin");
        std::fs::write(
            &path,
            "kind: ServerConfiguration\nvelero:\n  nonAdmin:\n    restoreRoleCeiling: tenant-owner\n",
        )
        .expect("write");
        let c: ServerConfiguration = load(Some(&path), &[]).expect("a ceiling loads");
        assert_eq!(c.velero.non_admin.restore_role_ceiling, "tenant-owner");
        for bad in ["\"\"", "a/b", "..", "50%"] {
            std::fs::write(
                &path,
                format!("kind: ServerConfiguration\nvelero:\n  nonAdmin:\n    restoreRoleCeiling: {bad}\n"),
            )
            .expect("write");
            let e = load::<ServerConfiguration>(Some(&path), &[])
                .expect_err("refused")
                .to_string();
            assert!(
                e.contains("velero.nonAdmin.restoreRoleCeiling"),
                "{bad}: {e}"
            );
        }
        std::fs::write(
            &path,
            "kind: ServerConfiguration\nvelero:\n  nonAdmin:\n    requireApprovalForBSL: true\n    \
             enforceBSLSpec:\n      config: {region: eu-1}\n",
        )
        .expect("write");
        let c: ServerConfiguration = load(Some(&path), &[]).expect("a partial BSL spec loads");
        assert!(c.velero.non_admin.require_approval_for_bsl);
        let bsl = &c.velero.non_admin.enforce_bsl_spec;
        assert_eq!(bsl.provider, "");
        assert_eq!(bsl.object_storage.bucket, "");
        assert_eq!(bsl.config.as_ref().expect("config")["region"], "eu-1");
        std::fs::write(
            &path,
            "kind: ServerConfiguration\nvelero:\n  nonAdmin:\n    enforceBSLSpec:\n      \
             default: true\n      objectStorage: {prefix: ../up}\n",
        )
        .expect("write");
        let e = load::<ServerConfiguration>(Some(&path), &[])
            .expect_err("refused")
            .to_string();
        assert!(e.contains("velero.nonAdmin.enforceBSLSpec.default"), "{e}");
        assert!(
            e.contains("velero.nonAdmin.enforceBSLSpec.objectStorage.prefix"),
            "{e}"
        );
        std::fs::write(
            &path,
            "kind: ServerConfiguration\nvelero:\n  nonAdmin:\n    enforceBackupSpec:\n      \
             includedNamespaces: [other]\n    enforceRestoreSpec:\n      \
             namespaceMapping: {a: b}\n      includeClusterResources: true\n",
        )
        .expect("write");
        let e = load::<ServerConfiguration>(Some(&path), &[]).expect_err("refused");
        let e = e.to_string();
        assert!(
            e.contains("velero.nonAdmin.enforceBackupSpec.includedNamespaces"),
            "{e}"
        );
        assert!(
            e.contains("velero.nonAdmin.enforceRestoreSpec.namespaceMapping"),
            "{e}"
        );
        assert!(
            e.contains("velero.nonAdmin.enforceRestoreSpec.includeClusterResources"),
            "{e}"
        );
    }
}
