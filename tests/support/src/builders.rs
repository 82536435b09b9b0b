//! Builders of the API objects the scenarios create, so a test names only the fields it
//! is about:
//!
//! ```ignore
//! let spec = backup_spec().namespaces(["app"]).location("default").ttl("1h").build();
//! let b = backup_spec().namespaces([&ns]).named("b1"); // a Backup
//! let r = restore_spec("b1").namespaces([&ns]).build();
//! ```
//!
//! Every field left out keeps its `Default` (absent), as `..Default::default()` would.

use granary_api::velero::{Backup, BackupSpec, Restore, RestoreSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

fn strings<I, S>(items: I) -> Option<Vec<String>>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    Some(items.into_iter().map(Into::into).collect())
}

/// A Velero `BackupSpec` with nothing set.
pub fn backup_spec() -> BackupSpecBuilder {
    BackupSpecBuilder(BackupSpec::default())
}

/// See [`backup_spec`].
#[derive(Debug, Clone)]
#[must_use]
pub struct BackupSpecBuilder(BackupSpec);

impl BackupSpecBuilder {
    /// `includedNamespaces`.
    pub fn namespaces<I: IntoIterator<Item = S>, S: Into<String>>(mut self, ns: I) -> Self {
        self.0.included_namespaces = strings(ns);
        self
    }

    /// `excludedNamespaces`.
    pub fn exclude_namespaces<I: IntoIterator<Item = S>, S: Into<String>>(mut self, ns: I) -> Self {
        self.0.excluded_namespaces = strings(ns);
        self
    }

    /// `includedResources`.
    pub fn resources<I: IntoIterator<Item = S>, S: Into<String>>(mut self, r: I) -> Self {
        self.0.included_resources = strings(r);
        self
    }

    /// `excludedResources`.
    pub fn exclude_resources<I: IntoIterator<Item = S>, S: Into<String>>(mut self, r: I) -> Self {
        self.0.excluded_resources = strings(r);
        self
    }

    /// `includeClusterResources`.
    pub fn cluster_resources(mut self, include: bool) -> Self {
        self.0.include_cluster_resources = Some(include);
        self
    }

    /// `storageLocation`.
    pub fn location(mut self, name: impl Into<String>) -> Self {
        self.0.storage_location = Some(name.into());
        self
    }

    /// `ttl`, as Velero writes it (`"24h"`, `"1h30m"`).
    pub fn ttl(mut self, ttl: &str) -> Self {
        self.0.ttl = Some(ttl.parse().expect("a valid ttl"));
        self
    }

    /// `labelSelector`.
    pub fn label_selector(mut self, selector: Option<LabelSelector>) -> Self {
        self.0.label_selector = selector;
        self
    }

    /// The spec.
    pub fn build(self) -> BackupSpec {
        self.0
    }

    /// A Backup `name` with the spec.
    pub fn named(self, name: &str) -> Backup {
        Backup::new(name, self.0)
    }
}

/// A Velero `RestoreSpec` of `backup`.
pub fn restore_spec(backup: &str) -> RestoreSpecBuilder {
    RestoreSpecBuilder(RestoreSpec {
        backup_name: Some(backup.into()),
        ..RestoreSpec::default()
    })
}

/// See [`restore_spec`].
#[derive(Debug, Clone)]
#[must_use]
pub struct RestoreSpecBuilder(RestoreSpec);

impl RestoreSpecBuilder {
    /// `includedNamespaces`.
    pub fn namespaces<I: IntoIterator<Item = S>, S: Into<String>>(mut self, ns: I) -> Self {
        self.0.included_namespaces = strings(ns);
        self
    }

    /// `namespaceMapping` (from, to).
    pub fn map_namespace(mut self, from: &str, to: &str) -> Self {
        self.0
            .namespace_mapping
            .get_or_insert_default()
            .insert(from.into(), to.into());
        self
    }

    /// The spec.
    pub fn build(self) -> RestoreSpec {
        self.0
    }

    /// A Restore `name` with the spec.
    pub fn named(self, name: &str) -> Restore {
        Restore::new(name, self.0)
    }
}
