//! Legacy mode (docs/architecture.md#legacy-migration): a per-shoot bucket from the
//! BackupInfrastructure era becomes a garden BackupBucket labelled
//! `granary.gardener.cloud/pool-kind=legacy` (named as the provider's bucket, checked
//! against that provider's rules only; never a placement target) with the shoot's one
//! BackupEntry in it, whose prefix is the bucket root. The shoot then keeps working —
//! bucket existence reconciled, grace-period deletion — until `migrate entry` moves it.
//!
//! Import before `granary garden` first sees the shoot: an entry the garden already
//! placed in a shared bucket is reported as a conflict, not moved.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde::{Deserialize, Serialize};

use super::MigrateError;
use granary_api::common::{ObjectReference, SecretReference, describe_field_errors};
use granary_api::core::{
    BackupBucket, BackupBucketProvider, BackupBucketSpec, BackupEntry, LABEL_POOL_KIND,
    LABEL_POOL_OWNER, LABEL_REGION, LABEL_SEED, PoolKind, Shoot, validate_backup_bucket,
};
use granary_garden::entries::new_entry;
use granary_runtime::selector::ObjectSelector;

/// One legacy bucket, as listed in the import file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LegacyBucket {
    pub shoot_namespace: String,
    pub shoot_name: String,
    /// The provider's existing bucket name.
    pub bucket: String,
    pub provider: String,
    pub region: String,
    /// The garden Secret with the bucket's credentials.
    pub secret_ref: SecretReference,
}

/// What the import did with one bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportOutcome {
    pub bucket: String,
    pub entry: String,
    /// `created`, `unchanged` or `conflict`.
    pub result: String,
    pub message: String,
}

/// The garden BackupBucket of a legacy bucket, for the shoot's `seed`.
pub fn legacy_bucket_object(
    item: &LegacyBucket,
    seed: &str,
    selector: &ObjectSelector,
) -> BackupBucket {
    let mut bucket = BackupBucket::new(
        &item.bucket,
        BackupBucketSpec {
            provider: BackupBucketProvider {
                type_: item.provider.clone(),
                region: item.region.clone(),
            },
            credentials_ref: Some(ObjectReference {
                api_version: "v1".into(),
                kind: "Secret".into(),
                name: item.secret_ref.name.clone(),
                namespace: item.secret_ref.namespace.clone(),
                ..ObjectReference::default()
            }),
            seed_name: Some(seed.to_string()),
            ..BackupBucketSpec::default()
        },
    );
    let mut labels = BTreeMap::from([
        (
            LABEL_POOL_KIND.to_string(),
            PoolKind::Legacy.as_str().to_string(),
        ),
        (LABEL_POOL_OWNER.to_string(), item.bucket.clone()),
        (LABEL_REGION.to_string(), item.region.clone()),
        (LABEL_SEED.to_string(), seed.to_string()),
    ]);
    selector.label(&mut labels);
    bucket.metadata.labels = Some(labels);
    bucket
}

/// Registers legacy buckets: for each, the legacy garden BackupBucket and the shoot's
/// BackupEntry in it. Idempotent; one item's problem does not stop the others.
pub async fn import_legacy(
    garden: &Client,
    items: &[LegacyBucket],
    selector: &ObjectSelector,
) -> Result<Vec<ImportOutcome>, MigrateError> {
    let mut out = Vec::new();
    for item in items {
        out.push(import_one(garden, item, selector).await?);
    }
    Ok(out)
}

async fn import_one(
    garden: &Client,
    item: &LegacyBucket,
    selector: &ObjectSelector,
) -> Result<ImportOutcome, MigrateError> {
    let outcome = |entry: &str, result: &str, message: String| ImportOutcome {
        bucket: item.bucket.clone(),
        entry: entry.to_string(),
        result: result.to_string(),
        message,
    };
    let shoots: Api<Shoot> = Api::namespaced(garden.clone(), &item.shoot_namespace);
    let Some(shoot) = shoots.get_opt(&item.shoot_name).await? else {
        return Ok(outcome(
            "",
            "conflict",
            format!(
                "shoot {}/{} not found",
                item.shoot_namespace, item.shoot_name
            ),
        ));
    };
    let Some(seed) = shoot.spec.seed_name.clone().filter(|s| !s.is_empty()) else {
        return Ok(outcome("", "conflict", "the shoot has no seed".to_string()));
    };
    let entry = new_entry(&shoot, &item.bucket, selector)
        .map_err(|e| MigrateError::Invalid(format!("shoot {}: {e}", item.shoot_name)))?;
    let entry_name = format!("{}/{}", item.shoot_namespace, entry.name_any());

    let bucket = legacy_bucket_object(item, &seed, selector);
    let problems = validate_backup_bucket(&bucket);
    if !problems.is_empty() {
        return Ok(outcome(
            &entry_name,
            "conflict",
            describe_field_errors(&problems),
        ));
    }
    let buckets: Api<BackupBucket> = Api::all(garden.clone());
    let mut created = false;
    match buckets.create(&PostParams::default(), &bucket).await {
        Ok(_) => created = true,
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = buckets.get(&item.bucket).await?;
            if existing.pool_kind() != Some(PoolKind::Legacy) {
                return Ok(outcome(
                    &entry_name,
                    "conflict",
                    format!(
                        "BackupBucket {} exists and is not a legacy bucket",
                        item.bucket
                    ),
                ));
            }
        }
        Err(e) => return Err(e.into()),
    }
    let entries: Api<BackupEntry> = Api::namespaced(garden.clone(), &item.shoot_namespace);
    match entries.create(&PostParams::default(), &entry).await {
        Ok(_) => created = true,
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = entries.get(&entry.name_any()).await?;
            if existing.spec.bucket_name != item.bucket {
                return Ok(outcome(
                    &entry_name,
                    "conflict",
                    format!(
                        "the entry is already in bucket {}; move it with `granary migrate entry`",
                        existing.spec.bucket_name
                    ),
                ));
            }
        }
        Err(e) => return Err(e.into()),
    }
    Ok(if created {
        outcome(
            &entry_name,
            "created",
            "legacy bucket and entry registered".into(),
        )
    } else {
        outcome(&entry_name, "unchanged", "already registered".into())
    })
}

/// Finds legacy buckets from a seed's `backup--<bucket>` namespaces (the
/// BackupInfrastructure era's per-shoot backup namespaces, named after the bucket):
/// the shoot is the garden Shoot whose technical ID starts the bucket name. Provider,
/// region and credentials are the same for all (one call per provider account).
pub async fn discover_legacy(
    garden: &Client,
    seed: &Client,
    provider: &str,
    region: &str,
    secret_ref: &SecretReference,
) -> Result<Vec<LegacyBucket>, MigrateError> {
    let namespaces = Api::<Namespace>::all(seed.clone())
        .list(&ListParams::default())
        .await?;
    let shoots = Api::<Shoot>::all(garden.clone())
        .list(&ListParams::default())
        .await?;
    let mut out = Vec::new();
    for ns in namespaces.items {
        let Some(bucket) = ns.name_any().strip_prefix("backup--").map(str::to_string) else {
            continue;
        };
        let shoot = shoots.items.iter().find(|s| {
            let id = s.technical_id();
            bucket == id || bucket.starts_with(&format!("{id}--"))
        });
        if let Some(shoot) = shoot {
            out.push(LegacyBucket {
                shoot_namespace: shoot.namespace().unwrap_or_default(),
                shoot_name: shoot.name_any(),
                bucket,
                provider: provider.to_string(),
                region: region.to_string(),
                secret_ref: secret_ref.clone(),
            });
        } else {
            tracing::warn!(namespace = %ns.name_any(), "no shoot matches this backup namespace; skipped");
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_bucket_keeps_its_provider_name_and_is_labelled_legacy() {
        let item = LegacyBucket {
            shoot_namespace: "garden-dev".into(),
            shoot_name: "a".into(),
            bucket: "shoot--dev--a--3ef42".into(),
            provider: "aws".into(),
            region: "eu-west-1".into(),
            secret_ref: SecretReference {
                name: "creds".into(),
                namespace: "garden".into(),
            },
        };
        let b = legacy_bucket_object(&item, "seed-1", &ObjectSelector::new(None));
        assert_eq!(b.pool_kind(), Some(PoolKind::Legacy));
        assert!(
            validate_backup_bucket(&b).is_empty(),
            "{:?}",
            validate_backup_bucket(&b)
        );
        // The same name on Azure breaks Azure's own rules.
        let azure = LegacyBucket {
            provider: "azure".into(),
            ..item.clone()
        };
        assert!(
            !validate_backup_bucket(&legacy_bucket_object(
                &azure,
                "s",
                &ObjectSelector::new(None)
            ))
            .is_empty()
        );
        let yaml = "- shootNamespace: garden-dev\n  shootName: a\n  bucket: shoot--dev--a--3ef42\n  provider: aws\n  region: eu-west-1\n  secretRef: {name: creds, namespace: garden}\n";
        let parsed: Vec<LegacyBucket> = serde_saphyr::from_str(yaml).expect("valid list");
        assert_eq!(parsed, vec![item]);
    }
}
