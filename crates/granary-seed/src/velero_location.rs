//! The seed's default BackupStorageLocation
//! (docs/architecture.md#default-backup-location): unless switched off, every seed keeps
//! a location `default` (`spec.default: true`) under `velero/<seed>` in a shared bucket
//! of its own backup pool, with the credentials the seed already holds for that pool
//! (written into the Velero namespace in Velero's credentials-file format, so Velero
//! itself can use the location too). It follows when the garden moves buckets: the
//! location keeps its bucket while that bucket stays with this seed and moves to another
//! of the seed's shared buckets when it goes. With no bucket yet, the location is
//! Unavailable and says why ([`ANNOTATION_UNAVAILABLE_REASON`]).
//!
//! Only a location this seed created (label [`LABEL_MANAGED`]) is ever changed: an
//! admin's own `default` location is left alone.

use crate::context::Context;
use granary_api::common::LastOperationState;
use granary_api::core::{
    GARDEN_NAMESPACE, LABEL_POOL_KIND, PoolKind, bucket_secret_name, entry_secret_name,
};
use granary_api::extensions;
use granary_api::velero::{
    BackupStorageLocation, BackupStorageLocationAccessMode, BackupStorageLocationSpec,
    ObjectStorageLocation,
};
use granary_runtime::passes::run_passes;
use granary_velero_server::location::velero_credentials_file;
use granary_velero_server::locations::ANNOTATION_UNAVAILABLE_REASON;
use granary_velero_server::watch::each_event;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, SecretKeySelector};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher::Event;
use kube::{Resource, ResourceExt};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// On a BackupStorageLocation Granary manages.
pub const LABEL_MANAGED: &str = "granary.gardener.cloud/managed-by";
pub const MANAGED_BY: &str = "granary-seed";
/// The Secret (in the Velero namespace) holding the default location's credentials file.
pub const CREDENTIALS_SECRET: &str = "granary-default-location";
/// The provider of a default location that has no bucket yet.
pub const PROVIDER_NONE: &str = "granary.gardener.cloud/none";
/// On a default location made read-only: why.
pub const ANNOTATION_READ_ONLY_REASON: &str = "granary.gardener.cloud/read-only-reason";

/// A bucket of the seed's pool this seed has credentials for — one it holds (its
/// BackupBucket) or one its shoots' entries live in (their BackupEntries) — as far as the
/// choice of the default location cares.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct HeldBucket {
    pub name: String,
    pub shared: bool,
    pub ready: bool,
    pub provider: String,
    pub region: String,
    /// The copied credentials in the seed's `garden` namespace.
    pub secret: String,
}

/// The bucket the default location uses: the current one while it is still a ready
/// shared bucket of this seed, else the first such bucket by name.
pub fn choose_bucket(current: Option<&str>, held: &[HeldBucket]) -> Option<String> {
    let usable = |b: &&HeldBucket| b.shared && b.ready;
    if let Some(c) = current
        && held.iter().filter(usable).any(|b| b.name == c)
    {
        return Some(c.to_string());
    }
    let mut names: Vec<&str> = held
        .iter()
        .filter(usable)
        .map(|b| b.name.as_str())
        .collect();
    names.sort_unstable();
    names.first().map(|s| s.to_string())
}

/// The prefix of the seed's default location.
pub fn prefix(seed: &str) -> String {
    format!("velero/{seed}")
}

/// The credentials file and `config` of a location in a bucket of `provider` in
/// `region`, from the bucket's credentials.
pub fn location_config(
    provider: &str,
    region: &str,
    data: &granary_providers::SecretData,
) -> Result<(Vec<u8>, BTreeMap<String, String>), String> {
    let (file, mut config) = velero_credentials_file(provider, data).map_err(|e| e.to_string())?;
    if provider == "aws" && !region.is_empty() {
        config
            .entry("region".to_string())
            .or_insert_with(|| region.to_string());
    }
    Ok((file, config))
}

/// Runs until dropped: on every change of the seed's buckets and entries (the buckets
/// it can use), and every 30 s.
pub async fn run(ctx: Arc<Context>) {
    let wake = Arc::new(Notify::new());
    let feed = {
        let wake = wake.clone();
        each_event(
            Api::<extensions::BackupBucket>::all(ctx.seed.clone()),
            "BackupBuckets for the default location",
            move |event| match event {
                Event::InitDone | Event::Apply(_) | Event::Delete(_) => wake.notify_one(),
                _ => {}
            },
        )
    };
    let entries = {
        let wake = wake.clone();
        each_event(
            Api::<extensions::BackupEntry>::all(ctx.seed.clone()),
            "BackupEntries for the default location",
            move |event| match event {
                Event::Apply(_) | Event::Delete(_) => wake.notify_one(),
                _ => {}
            },
        )
    };
    let work = async {
        run_passes(
            "default BackupStorageLocation",
            Some(&wake),
            Duration::from_secs(30),
            || pass(&ctx),
        )
        .await
    };
    tokio::join!(feed, entries, work);
}

fn shared(labels: &BTreeMap<String, String>) -> bool {
    !matches!(
        labels.get(LABEL_POOL_KIND).map(|v| v.parse()),
        Some(Ok(PoolKind::Legacy))
    )
}

fn ready<K: Resource>(o: &K, status: Option<&granary_api::extensions::DefaultStatus>) -> bool {
    o.meta().deletion_timestamp.is_none()
        && status
            .and_then(|s| s.last_operation.as_ref())
            .is_some_and(|op| op.state == LastOperationState::Succeeded)
}

fn held(b: &extensions::BackupBucket) -> HeldBucket {
    HeldBucket {
        name: b.name_any(),
        shared: shared(b.labels()),
        ready: ready(b, b.default_status()),
        provider: b.spec.type_.clone(),
        region: b.spec.region.clone(),
        secret: bucket_secret_name(&b.name_any()),
    }
}

fn entry_bucket(e: &extensions::BackupEntry) -> HeldBucket {
    HeldBucket {
        name: e.spec.bucket_name.clone(),
        shared: shared(e.labels()),
        ready: ready(e, e.default_status()),
        provider: e.spec.type_.clone(),
        region: e.spec.region.clone(),
        secret: entry_secret_name(&e.name_any()),
    }
}

async fn pass(ctx: &Context) -> Result<(), kube::Error> {
    let settings = &ctx.config.velero;
    let namespace = settings.namespace.as_str();
    let name = settings.default_location.name.as_str();
    let locations: Api<BackupStorageLocation> = Api::namespaced(ctx.seed.clone(), namespace);
    let existing = locations.get_opt(name).await?;
    if let Some(l) = &existing
        && l.labels().get(LABEL_MANAGED).map(String::as_str) != Some(MANAGED_BY)
    {
        tracing::debug!(
            location = name,
            "an admin's own default location: left alone"
        );
        return Ok(());
    }
    let mine = |labels: Option<&BTreeMap<String, String>>| ctx.selector.matches(labels);
    // Buckets the seed holds first, then those of its shoots' entries (a seed may hold
    // no bucket of its pool itself while its shoots' backups live in one).
    let mut held: Vec<HeldBucket> = Api::<extensions::BackupBucket>::all(ctx.seed.clone())
        .list(&Default::default())
        .await?
        .items
        .iter()
        .filter(|b| mine(b.meta().labels.as_ref()))
        .map(held)
        .collect();
    held.extend(
        Api::<extensions::BackupEntry>::all(ctx.seed.clone())
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter(|e| mine(e.meta().labels.as_ref()))
            .map(entry_bucket),
    );
    let current = existing
        .as_ref()
        .map(|l| l.spec.object_storage.bucket.as_str())
        .filter(|b| {
            existing
                .as_ref()
                .is_some_and(|l| l.spec.provider != PROVIDER_NONE)
                && !b.is_empty()
        });
    let mut labels = BTreeMap::new();
    ctx.selector.label(&mut labels);
    labels.insert(LABEL_MANAGED.to_string(), MANAGED_BY.to_string());
    let chosen = choose_bucket(current, &held);
    let mut annotations = BTreeMap::new();
    let former = existing
        .as_ref()
        .filter(|l| l.spec.provider != PROVIDER_NONE)
        .map(|l| l.spec.object_storage.bucket.clone());
    let spec = match chosen.and_then(|c| held.iter().find(|b| b.name == c && b.ready && b.shared)) {
        // No bucket of its own (its last shoot left, say): while its backups are in a
        // bucket of its pool, the location stays, read-only, so they can be restored,
        // described, downloaded and verified.
        None => match crate::sibling_locations::own_prefix_bucket(ctx, former.as_deref()).await? {
            Some((bucket, access)) => {
                annotations.insert(
                    ANNOTATION_READ_ONLY_REASON.to_string(),
                    format!(
                        "seed {} holds no bucket of its backup pool now: its backups under {} \
                         in bucket {bucket} stay readable, and new backups need a writable \
                         location (the seed gets one back with its next shoot)",
                        ctx.seed_name,
                        prefix(&ctx.seed_name)
                    ),
                );
                let credential = match &access.file {
                    Some(file) => {
                        write_credentials(ctx, namespace, CREDENTIALS_SECRET, &labels, file)
                            .await?;
                        Some(SecretKeySelector {
                            name: CREDENTIALS_SECRET.to_string(),
                            key: "cloud".to_string(),
                            optional: None,
                        })
                    }
                    None => None,
                };
                BackupStorageLocationSpec {
                    provider: access.provider,
                    config: access.config,
                    credential,
                    object_storage: ObjectStorageLocation {
                        bucket,
                        prefix: Some(prefix(&ctx.seed_name)),
                        ..Default::default()
                    },
                    access_mode: Some(BackupStorageLocationAccessMode::ReadOnly),
                    default: Some(true),
                    ..Default::default()
                }
            }
            None => {
                annotations.insert(
                    ANNOTATION_UNAVAILABLE_REASON.to_string(),
                    format!(
                        "seed {} has no ready shared bucket of its backup pool yet (it gets one \
                         with its first shoot's BackupEntry, or when the garden assigns it a bucket)",
                        ctx.seed_name
                    ),
                );
                BackupStorageLocationSpec {
                    provider: PROVIDER_NONE.to_string(),
                    object_storage: ObjectStorageLocation {
                        bucket: "none".to_string(),
                        prefix: Some(prefix(&ctx.seed_name)),
                        ..Default::default()
                    },
                    default: Some(true),
                    ..Default::default()
                }
            }
        },
        Some(bucket) => {
            let provider = bucket.provider.clone();
            let secrets: Api<Secret> = Api::namespaced(ctx.seed.clone(), GARDEN_NAMESPACE);
            let pool_secret = secrets.get_opt(&bucket.secret).await?;
            let data: granary_providers::SecretData = pool_secret
                .and_then(|s| s.data)
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            let (file, config) = match location_config(&provider, &bucket.region, &data) {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(bucket = %bucket.name, error = %e, "default location credentials");
                    return Ok(());
                }
            };
            let credential = if provider == "local" {
                None
            } else {
                write_credentials(ctx, namespace, CREDENTIALS_SECRET, &labels, &file).await?;
                Some(SecretKeySelector {
                    name: CREDENTIALS_SECRET.to_string(),
                    key: "cloud".to_string(),
                    optional: None,
                })
            };
            BackupStorageLocationSpec {
                provider,
                config: (!config.is_empty()).then_some(config),
                credential,
                object_storage: ObjectStorageLocation {
                    bucket: bucket.name.clone(),
                    prefix: Some(prefix(&ctx.seed_name)),
                    ..Default::default()
                },
                default: Some(true),
                ..Default::default()
            }
        }
    };
    let unchanged = existing.as_ref().is_some_and(|l| {
        l.spec == spec
            && [ANNOTATION_UNAVAILABLE_REASON, ANNOTATION_READ_ONLY_REASON]
                .iter()
                .all(|a| l.annotations().get(*a) == annotations.get(*a))
    });
    if unchanged {
        return Ok(());
    }
    let mut desired = BackupStorageLocation::new(name, spec);
    desired.metadata.namespace = Some(namespace.to_string());
    desired.metadata.labels = Some(labels);
    let mut all_annotations: BTreeMap<String, serde_json::Value> = annotations
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    for a in [ANNOTATION_UNAVAILABLE_REASON, ANNOTATION_READ_ONLY_REASON] {
        all_annotations
            .entry(a.to_string())
            .or_insert(serde_json::Value::Null);
    }
    let mut patch = serde_json::to_value(&desired).expect("a location serializes");
    patch["metadata"]["annotations"] = serde_json::to_value(all_annotations).expect("map");
    if existing.is_some() {
        // Fields the new spec leaves out go (e.g. the credential of a former bucket).
        for key in ["config", "credential", "accessMode"] {
            if patch["spec"].get(key).is_none() {
                patch["spec"][key] = serde_json::Value::Null;
            }
        }
        // Validate again now, not at the next period.
        patch["status"] = serde_json::json!({"lastValidationTime": null});
        locations
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    } else {
        if let Some(map) = patch["metadata"]["annotations"].as_object_mut() {
            map.retain(|_, v| !v.is_null());
        }
        locations
            .create(
                &Default::default(),
                &serde_json::from_value(patch).expect("a location"),
            )
            .await?;
    }
    tracing::info!(location = name, "default BackupStorageLocation written");
    Ok(())
}

/// Writes Velero credentials file `file` into Secret `name` (key `cloud`) of the Velero
/// namespace, unless it already holds it.
pub(crate) async fn write_credentials(
    ctx: &Context,
    namespace: &str,
    name: &str,
    labels: &BTreeMap<String, String>,
    file: &[u8],
) -> Result<(), kube::Error> {
    let secrets: Api<Secret> = Api::namespaced(ctx.seed.clone(), namespace);
    let data: BTreeMap<String, ByteString> =
        [("cloud".to_string(), ByteString(file.to_vec()))].into();
    if let Some(s) = secrets.get_opt(name).await?
        && s.data.as_ref() == Some(&data)
    {
        return Ok(());
    }
    let mut secret = Secret {
        data: Some(data),
        ..Default::default()
    };
    secret.metadata.name = Some(name.to_string());
    secret.metadata.labels = Some(labels.clone());
    secrets
        .patch(
            name,
            &PatchParams::apply(MANAGED_BY).force(),
            &Patch::Apply(&secret),
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(name: &str, shared: bool, ready: bool) -> HeldBucket {
        HeldBucket {
            name: name.into(),
            shared,
            ready,
            ..HeldBucket::default()
        }
    }

    #[test]
    fn the_location_keeps_its_bucket_while_it_can_and_follows_when_it_goes() {
        let held = [
            b("pool-1", true, true),
            b("pool-0", true, true),
            b("legacy", false, true),
        ];
        assert_eq!(choose_bucket(None, &held).as_deref(), Some("pool-0"));
        assert_eq!(
            choose_bucket(Some("pool-1"), &held).as_deref(),
            Some("pool-1")
        );
        assert_eq!(
            choose_bucket(Some("legacy"), &held).as_deref(),
            Some("pool-0")
        );
        assert_eq!(
            choose_bucket(Some("gone"), &held).as_deref(),
            Some("pool-0")
        );
        assert_eq!(
            choose_bucket(
                Some("pool-0"),
                &[b("pool-0", true, false), b("pool-1", true, true)]
            )
            .as_deref(),
            Some("pool-1")
        );
        assert_eq!(choose_bucket(None, &[b("legacy", false, true)]), None);
        assert_eq!(prefix("aws-eu1"), "velero/aws-eu1");
    }
}
