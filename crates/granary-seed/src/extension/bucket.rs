//! The BackupBucket actuator: ensure the bucket with the provider's hardening and
//! optional immutability from `providerConfig`; delete it (contents first) on deletion.

use super::{Actuator, ExtensionObject, Provisioned};
use crate::context::{Context, ReconcileError};
use crate::extension::records::ensure_bucket_record;
use crate::prefix::{BUCKET_RECORD, BucketLayout};
use granary_api::common::SecretReference;
use granary_api::core::{FINALIZER_EXTENSIONS_BACKUPBUCKET, LABEL_POOL_KIND, PoolKind};
use granary_api::extensions::{BackupBucket, DefaultStatus};
use granary_providers::{BucketOptions, Immutability, ObjectStore, SecretData};
use granary_runtime::duration::parse_duration;
use kube::ResourceExt;
use serde_json::Value;

impl ExtensionObject for BackupBucket {
    const FINALIZER: &'static str = FINALIZER_EXTENSIONS_BACKUPBUCKET;
    const CONTROLLER: &'static str = "backupbucket";

    fn provider_type(&self) -> &str {
        &self.spec.type_
    }

    fn region(&self) -> &str {
        &self.spec.region
    }

    fn secret_ref(&self) -> &SecretReference {
        &self.spec.secret_ref
    }

    fn status_default(&self) -> Option<&DefaultStatus> {
        self.default_status()
    }
}

/// The bucket settings from `providerConfig`: Gardener's
/// `immutability{retentionType: bucket, retentionPeriod, mode|locked}`.
pub(crate) fn bucket_options(provider_config: Option<&Value>) -> Result<BucketOptions, String> {
    let Some(immutability) = provider_config.and_then(|c| c.get("immutability")) else {
        return Ok(BucketOptions::default());
    };
    let field = |f: &str| format!("spec.providerConfig.immutability.{f}");
    if let Some(kind) = immutability.get("retentionType").and_then(Value::as_str)
        && kind != "bucket"
    {
        return Err(format!(
            "{}: only \"bucket\" is supported",
            field("retentionType")
        ));
    }
    let period = immutability
        .get("retentionPeriod")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{}: required", field("retentionPeriod")))?;
    let period =
        parse_duration(period).map_err(|e| format!("{}: {e}", field("retentionPeriod")))?;
    let days = period.as_secs() / 86_400;
    if days == 0 || period.as_secs() % 86_400 != 0 {
        return Err(format!(
            "{}: must be a positive multiple of 24h",
            field("retentionPeriod")
        ));
    }
    let compliance = match immutability.get("mode").and_then(Value::as_str) {
        Some("compliance") => true,
        Some("governance") | None => immutability
            .get("locked")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        Some(other) => {
            return Err(format!(
                "{}: {other:?} is neither governance nor compliance",
                field("mode")
            ));
        }
    };
    Ok(BucketOptions {
        immutability: Some(Immutability {
            retention_days: u32::try_from(days).unwrap_or(u32::MAX),
            compliance,
        }),
    })
}

/// Provisions buckets through whatever store the bucket's type names.
pub(crate) struct BucketActuator;

impl Actuator<BackupBucket> for BucketActuator {
    async fn reconcile(
        &self,
        ctx: &Context,
        obj: &BackupBucket,
        store: &dyn ObjectStore,
        _credentials: &SecretData,
    ) -> Result<Provisioned, ReconcileError> {
        let options =
            bucket_options(obj.spec.provider_config.as_ref()).map_err(ReconcileError::Invalid)?;
        let name = obj.name_any();
        let mut report = store.ensure_bucket(&name, &options).await?;
        let legacy_label = matches!(
            obj.labels().get(LABEL_POOL_KIND).map(|v| v.parse()),
            Some(Ok(PoolKind::Legacy))
        );
        let record = ensure_bucket_record(ctx, store, &name, legacy_label).await?;
        let layout: BucketLayout = record.layout.into();
        if legacy_label != (layout == BucketLayout::Legacy) {
            report.warnings.push(format!(
                "label {LABEL_POOL_KIND}={} ignored: bucket {name} was recorded as {} when \
                 Granary first took it ({BUCKET_RECORD}), and a label never changes that",
                obj.labels()
                    .get(LABEL_POOL_KIND)
                    .map(String::as_str)
                    .unwrap_or(""),
                if layout == BucketLayout::Legacy {
                    "a legacy per-shoot bucket"
                } else {
                    "a shared bucket"
                }
            ));
        }
        Ok(Provisioned {
            description: if report.created {
                format!("bucket {name} created")
            } else {
                format!("bucket {name} is in place")
            },
            provider_status: None,
            warnings: report.warnings,
        })
    }

    async fn delete(
        &self,
        _ctx: &Context,
        obj: &BackupBucket,
        store: &dyn ObjectStore,
        _credentials: &SecretData,
    ) -> Result<String, ReconcileError> {
        let name = obj.name_any();
        store.delete_bucket(&name, true).await?;
        Ok(format!("bucket {name} deleted"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn immutability_from_provider_config() {
        assert_eq!(bucket_options(None), Ok(BucketOptions::default()));
        assert_eq!(
            bucket_options(Some(&json!({"other": 1}))),
            Ok(BucketOptions::default())
        );
        let o = bucket_options(Some(&json!({"immutability": {
            "retentionType": "bucket", "retentionPeriod": "48h", "mode": "compliance"}})))
        .expect("valid");
        assert_eq!(
            o.immutability,
            Some(Immutability {
                retention_days: 2,
                compliance: true
            })
        );
        for bad in [
            json!({"immutability": {"retentionPeriod": "12h"}}),
            json!({"immutability": {}}),
            json!({"immutability": {"retentionType": "object", "retentionPeriod": "24h"}}),
            json!({"immutability": {"retentionPeriod": "24h", "mode": "strict"}}),
        ] {
            let e = bucket_options(Some(&bad)).expect_err("invalid");
            assert!(e.starts_with("spec.providerConfig.immutability."), "{e}");
        }
    }
}
