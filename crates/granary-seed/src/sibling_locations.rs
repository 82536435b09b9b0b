//! Sibling locations (docs/architecture.md#sibling-locations): the other seeds' Velero
//! prefixes in the buckets of this seed's pool, as read-only BackupStorageLocations
//! `seed-<name>`, so their backups sync into this seed's Velero namespace and restore
//! here when their seed is lost.
//!
//! Which buckets: those the garden labels this seed a reader of
//! ([`granary_api::core::velero_reader_label`]), found through that label (the seed
//! authorizer lets a seed list exactly those, and read their credentials). Which
//! seeds: the `velero/<seed>/` prefixes listed in each bucket, whatever happened to the
//! seed since: a deleted seed's backups stay readable as long as they are in the bucket.
//! A name read from a bucket is only a location's name: it must be a DNS label, and the
//! backups under it still have to verify with the landscape's key before anything is
//! restored from them.
//!
//! Only locations this pass made (label [`LABEL_MANAGED`] and [`LABEL_SOURCE_SEED`]) are
//! ever changed or deleted.

use crate::context::Context;
use crate::velero_location::{
    LABEL_MANAGED, MANAGED_BY, location_config, prefix, write_credentials,
};
use granary_api::core::{BackupBucket, velero_reader_label};
use granary_api::velero::{
    BackupStorageLocation, BackupStorageLocationAccessMode, BackupStorageLocationSpec,
    ObjectStorageLocation,
};
use granary_runtime::passes::run_passes;
use granary_velero_server::watch::each_event_with;
use k8s_openapi::api::core::v1::{Secret, SecretKeySelector};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// On a sibling location: the seed whose prefix it reads.
pub use granary_api::velero::SOURCE_SEED_LABEL as LABEL_SOURCE_SEED;
/// On a sibling location: the garden BackupBucket it reads.
pub const ANNOTATION_SOURCE_BUCKET: &str = "granary.gardener.cloud/source-bucket";

/// The location name for `seed`'s prefix.
pub fn location_name(seed: &str) -> String {
    format!("seed-{seed}")
}

/// The Secret (in the Velero namespace) with the credentials file of `bucket`.
fn credentials_secret(bucket: &str) -> String {
    format!("granary-sibling-{bucket}")
}

/// The seeds whose prefixes a listing of `velero/` shows, given the common prefixes
/// (`velero/<seed>/`): every DNS-label name but `me`, sorted.
pub fn sibling_seeds(common_prefixes: &[String], me: &str) -> Vec<String> {
    let mut seeds: Vec<String> = common_prefixes
        .iter()
        .filter_map(|p| p.strip_prefix("velero/")?.strip_suffix('/'))
        .filter(|s| *s != me && granary_api::names::is_dns1123_label(s))
        .map(str::to_owned)
        .collect();
    seeds.sort();
    seeds.dedup();
    seeds
}

/// The most sibling locations a seed keeps: a pool has far fewer seeds, and prefixes
/// someone with the pool's credentials planted in a bucket make no more than this.
pub const MAX_SIBLINGS: usize = 256;

/// The sibling locations wanted: one per other seed, in the first bucket (by name) that
/// holds its prefix, at most [`MAX_SIBLINGS`] (by seed name). `listed` maps each readable
/// bucket to the seeds found in it.
pub fn wanted(listed: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, (String, String)> {
    let mut out: BTreeMap<String, (String, String)> = BTreeMap::new();
    for (bucket, seeds) in listed {
        for seed in seeds {
            out.entry(location_name(seed))
                .or_insert_with(|| (seed.clone(), bucket.clone()));
        }
    }
    if out.len() > MAX_SIBLINGS {
        tracing::warn!(
            found = out.len(),
            kept = MAX_SIBLINGS,
            "more seed prefixes than sibling locations kept"
        );
        while out.len() > MAX_SIBLINGS {
            out.pop_last();
        }
    }
    out
}

/// Runs until dropped: on every change of the buckets this seed reads, and every backup
/// sync period (`velero.backupSyncPeriod`), so another seed's first backups appear here
/// within two periods: one to find its prefix, one for the location's sync.
pub async fn run(ctx: Arc<Context>) {
    let wake = Arc::new(Notify::new());
    let feed = {
        let wake = wake.clone();
        let config = watcher::Config::default()
            .labels(&format!("{}=true", velero_reader_label(&ctx.seed_name)));
        each_event_with(
            Api::<BackupBucket>::all(ctx.garden.clone()),
            config,
            "BackupBuckets this seed reads",
            move |event| match event {
                Event::InitDone | Event::Apply(_) | Event::Delete(_) => wake.notify_one(),
                _ => {}
            },
        )
    };
    let work = async {
        let period: Duration = ctx.config.velero.backup_sync_period.0;
        run_passes(
            "sibling BackupStorageLocations",
            Some(&wake),
            period,
            || pass(&ctx),
        )
        .await
    };
    tokio::join!(feed, work);
}

async fn pass(ctx: &Context) -> Result<(), kube::Error> {
    let namespace = ctx.config.velero.namespace.as_str();
    let buckets: Vec<BackupBucket> = Api::<BackupBucket>::all(ctx.garden.clone())
        .list(
            &ListParams::default().labels(&format!("{}=true", velero_reader_label(&ctx.seed_name))),
        )
        .await?
        .items
        .into_iter()
        .filter(|b| b.meta().deletion_timestamp.is_none())
        .collect();
    // What each bucket holds, and how to reach it. A bucket that cannot be listed now
    // keeps its locations (its backups are still there).
    let mut listed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut unreachable: BTreeSet<String> = BTreeSet::new();
    let mut access: BTreeMap<String, Access> = BTreeMap::new();
    for b in &buckets {
        let name = b.name_any();
        // Not created at the provider yet (or failing): nothing to list now.
        if !created(b) {
            unreachable.insert(name);
            continue;
        }
        match reach(ctx, b).await {
            Ok((prefixes, reached)) => {
                listed.insert(name.clone(), sibling_seeds(&prefixes, &ctx.seed_name));
                access.insert(name, reached);
            }
            Err(e) => {
                tracing::warn!(bucket = %name, error = %e, "sibling locations: bucket not listed");
                unreachable.insert(name);
            }
        }
    }
    let wanted = wanted(&listed);
    let locations: Api<BackupStorageLocation> = Api::namespaced(ctx.seed.clone(), namespace);
    let existing = locations
        .list(
            &ListParams::default()
                .labels(&format!("{LABEL_MANAGED}={MANAGED_BY},{LABEL_SOURCE_SEED}")),
        )
        .await?
        .items;
    for (location, (seed, bucket)) in &wanted {
        let Some(Access {
            provider,
            config,
            file,
        }) = access.get(bucket)
        else {
            continue;
        };
        let mut labels = BTreeMap::new();
        ctx.selector.label(&mut labels);
        labels.insert(LABEL_MANAGED.to_string(), MANAGED_BY.to_string());
        labels.insert(LABEL_SOURCE_SEED.to_string(), seed.clone());
        let credential = match file {
            Some(file) => {
                let secret = credentials_secret(bucket);
                write_credentials(ctx, namespace, &secret, &labels, file).await?;
                Some(SecretKeySelector {
                    name: secret,
                    key: "cloud".to_string(),
                    optional: None,
                })
            }
            None => None,
        };
        let spec = BackupStorageLocationSpec {
            provider: provider.clone(),
            config: config.clone(),
            credential,
            object_storage: ObjectStorageLocation {
                bucket: bucket.clone(),
                prefix: Some(prefix(seed)),
                ..Default::default()
            },
            access_mode: Some(BackupStorageLocationAccessMode::ReadOnly),
            ..Default::default()
        };
        let current = existing.iter().find(|l| l.name_any() == *location);
        if current.is_some_and(|l| l.spec == spec) {
            continue;
        }
        // An admin's own location of that name is left alone.
        if current.is_none() && locations.get_opt(location).await?.is_some() {
            tracing::warn!(location = %location, %seed, "a location of that name exists and is not Granary's: the sibling location is not made");
            continue;
        }
        let mut desired = BackupStorageLocation::new(location, spec);
        desired.metadata.namespace = Some(namespace.to_string());
        desired.metadata.labels = Some(labels);
        desired.metadata.annotations = Some(BTreeMap::from([(
            ANNOTATION_SOURCE_BUCKET.to_string(),
            bucket.clone(),
        )]));
        locations
            .patch(
                location,
                &PatchParams::apply(MANAGED_BY).force(),
                &Patch::Apply(&desired),
            )
            .await?;
        tracing::info!(location = %location, %seed, %bucket, "sibling BackupStorageLocation written");
    }
    // Locations no longer wanted go, and with them credentials no wanted location uses
    // (found through the locations: the seed reads Secrets by name only).
    let in_use: BTreeSet<String> = wanted
        .values()
        .map(|(_, b)| credentials_secret(b))
        .collect();
    let secrets: Api<Secret> = Api::namespaced(ctx.seed.clone(), namespace);
    for l in &existing {
        let name = l.name_any();
        let from_unreachable = l
            .annotations()
            .get(ANNOTATION_SOURCE_BUCKET)
            .is_some_and(|b| unreachable.contains(b));
        if wanted.contains_key(&name) || from_unreachable {
            continue;
        }
        locations.delete(&name, &DeleteParams::default()).await?;
        tracing::info!(location = %name, "sibling BackupStorageLocation removed");
        if let Some(c) = &l.spec.credential
            && c.name.starts_with("granary-sibling-")
            && !in_use.contains(&c.name)
        {
            match secrets.delete(&c.name, &DeleteParams::default()).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                other => {
                    other?;
                }
            }
        }
    }
    Ok(())
}

/// Whether bucket `b` exists at the provider (its last operation succeeded).
fn created(b: &BackupBucket) -> bool {
    b.status
        .as_ref()
        .and_then(|s| s.last_operation.as_ref())
        .is_some_and(|o| o.state == granary_api::common::LastOperationState::Succeeded)
}

/// How a location reaches a bucket.
pub(crate) struct Access {
    pub provider: String,
    pub config: Option<BTreeMap<String, String>>,
    /// The credentials file (none for `local`).
    pub file: Option<Vec<u8>>,
}

/// A ready bucket of this seed's pool, of those the garden lets it read, that holds
/// this seed's own Velero prefix (`velero/<seed>/`), and how a location reaches it;
/// `preferred` (the bucket the seed's default location used) is looked at first. For a
/// seed that holds no bucket any more: its backups are still there.
pub(crate) async fn own_prefix_bucket(
    ctx: &Context,
    preferred: Option<&str>,
) -> Result<Option<(String, Access)>, kube::Error> {
    let mut buckets: Vec<BackupBucket> = Api::<BackupBucket>::all(ctx.garden.clone())
        .list(
            &ListParams::default().labels(&format!("{}=true", velero_reader_label(&ctx.seed_name))),
        )
        .await?
        .items
        .into_iter()
        .filter(|b| b.meta().deletion_timestamp.is_none() && created(b))
        .collect();
    buckets.sort_by_key(|b| (Some(b.name_any().as_str()) != preferred, b.name_any()));
    let own = format!("velero/{}/", ctx.seed_name);
    for b in &buckets {
        match reach(ctx, b).await {
            Ok((prefixes, access)) if prefixes.contains(&own) => {
                return Ok(Some((b.name_any(), access)));
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(bucket = %b.name_any(), error = %e, "default location: bucket not listed");
            }
        }
    }
    Ok(None)
}

/// The `velero/<seed>/` prefixes in bucket `b`, and how a location reaches it.
async fn reach(ctx: &Context, b: &BackupBucket) -> Result<(Vec<String>, Access), String> {
    use futures::TryStreamExt;
    let provider = b.spec.provider.type_.clone();
    let region = b.spec.provider.region.clone();
    let data: granary_providers::SecretData = match b.credentials() {
        Some(r) if r.is_secret() => Api::<Secret>::namespaced(ctx.garden.clone(), &r.namespace)
            .get(&r.name)
            .await
            .map_err(|e| format!("credentials {}/{}: {e}", r.namespace, r.name))?
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect(),
        Some(_) => return Err("credentials that are not a Secret".into()),
        None if provider == "local" => Default::default(),
        None => return Err("no credentials".into()),
    };
    let store = ctx
        .open_store(&provider, &region, &data)
        .await
        .map_err(|e| e.to_string())?;
    let prefixes: Vec<String> = store
        .list(&b.name_any(), "velero/", Some("/"))
        .try_filter_map(|e| async move {
            Ok(match e {
                granary_providers::ListEntry::Prefix(p) => Some(p),
                granary_providers::ListEntry::Object(_) => None,
            })
        })
        .try_collect()
        .await
        .map_err(|e| format!("listing velero/: {e}"))?;
    let (file, config) = location_config(&provider, &region, &data)?;
    let file = (provider != "local").then_some(file);
    Ok((
        prefixes,
        Access {
            config: (!config.is_empty()).then_some(config),
            provider,
            file,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_seeds_prefixes_become_one_location_each() {
        let listed = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let seeds = sibling_seeds(
            &listed(&[
                "velero/a/",
                "velero/me/",
                "velero/b/",
                // not a seed name a location could carry
                "velero/Not_A_Label/",
                "velero/../",
                "velero/a/",
            ]),
            "me",
        );
        assert_eq!(seeds, ["a", "b"]);
        let by_bucket = BTreeMap::from([
            ("bucket-2".to_string(), vec!["a".to_string()]),
            (
                "bucket-1".to_string(),
                vec!["a".to_string(), "b".to_string()],
            ),
        ]);
        let w = wanted(&by_bucket);
        let many: BTreeMap<String, Vec<String>> = BTreeMap::from([(
            "bucket".to_string(),
            (0..MAX_SIBLINGS + 10).map(|i| format!("s{i:04}")).collect(),
        )]);
        assert_eq!(wanted(&many).len(), MAX_SIBLINGS);
        assert_eq!(
            w.into_iter().collect::<Vec<_>>(),
            [
                (
                    "seed-a".to_string(),
                    ("a".to_string(), "bucket-1".to_string())
                ),
                (
                    "seed-b".to_string(),
                    ("b".to_string(), "bucket-1".to_string())
                ),
            ]
        );
    }
}
