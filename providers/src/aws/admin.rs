//! S3 bucket administration: idempotent create with hardening (default AES256
//! encryption, public access block, TLS-only policy, abort of incomplete multipart
//! uploads after 7 days, optional object lock), each read back after it is applied;
//! and bucket deletion, emptying versions and pending uploads first when asked.

use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, BucketLocationConstraint,
    CreateBucketConfiguration, DefaultRetention, Delete, ExpirationStatus, LifecycleRule,
    LifecycleRuleFilter, ObjectIdentifier, ObjectLockConfiguration, ObjectLockEnabled,
    ObjectLockRetentionMode, ObjectLockRule, PublicAccessBlockConfiguration, ServerSideEncryption,
    ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration, ServerSideEncryptionRule,
};

use super::S3Store;
use crate::error::{Error, ErrorKind, Result};
use crate::store::{BucketOptions, BucketReport, Immutability, ObjectStore};

const LIFECYCLE_RULE_ID: &str = "granary-abort-incomplete-multipart-uploads";
const ABORT_AFTER_DAYS: i32 = 7;

fn invalid(e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Invalid, e.to_string())
}

pub(super) async fn ensure_bucket(
    s: &S3Store,
    bucket: &str,
    opts: &BucketOptions,
) -> Result<BucketReport> {
    let mut report = BucketReport::default();
    let lock = opts.immutability.clone().or_else(|| s.immutability.clone());
    // us-east-1 answers 200 to a re-create by the owner, so whether this call created
    // the bucket is decided by a HEAD first; ownership still by CreateBucket's answer.
    let existed = s
        .retrier
        .run("head_bucket", || async {
            match s.client.head_bucket().bucket(bucket).send().await {
                Ok(_) => Ok(true),
                Err(e) => match s.err(e, format_args!("head bucket {bucket}")) {
                    Error::NotFound(_) | Error::BucketNotFound(_) => Ok(false),
                    // 403: exists but not ours (or no permission); CreateBucket decides.
                    Error::Unauthorized(_) => Ok(true),
                    other => Err(other),
                },
            }
        })
        .await?;
    let created = s
        .retrier
        .run("create_bucket", || async {
            let mut req = s.client.create_bucket().bucket(bucket);
            if s.region != "us-east-1" {
                req = req.create_bucket_configuration(
                    CreateBucketConfiguration::builder()
                        .location_constraint(BucketLocationConstraint::from(s.region.as_str()))
                        .build(),
                );
            }
            if lock.is_some() {
                req = req.object_lock_enabled_for_bucket(true);
            }
            match req.send().await {
                Ok(_) => Ok(true),
                Err(e) => {
                    let code = aws_sdk_s3::error::ProvideErrorMetadata::code(&e)
                        .unwrap_or("")
                        .to_string();
                    match code.as_str() {
                        "BucketAlreadyOwnedByYou" => Ok(false),
                        "BucketAlreadyExists" => {
                            Err(Error::new(ErrorKind::Conflict, "BucketAlreadyExists"))
                        }
                        _ => Err(s.err(e, format_args!("create bucket {bucket}"))),
                    }
                }
            }
        })
        .await;
    report.created = match created {
        Ok(c) => c && !existed,
        // Some stores (and us-east-1 semantics) say "exists" for our own bucket too:
        // only a bucket in our own ListBuckets is ours.
        Err(Error::Conflict(m)) if m == "BucketAlreadyExists" => {
            if owned_by_us(s, bucket).await? {
                false
            } else {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("bucket {bucket} exists and is owned by another account"),
                ));
            }
        }
        Err(e) => return Err(e),
    };
    harden(s, bucket, lock.as_ref(), &mut report).await?;
    Ok(report)
}

async fn owned_by_us(s: &S3Store, bucket: &str) -> Result<bool> {
    let mut token: Option<String> = None;
    loop {
        let out = s
            .retrier
            .run("list_buckets", || async {
                s.client
                    .list_buckets()
                    .set_continuation_token(token.clone())
                    .send()
                    .await
                    .map_err(|e| s.err(e, "list buckets"))
            })
            .await?;
        if out.buckets().iter().any(|b| b.name() == Some(bucket)) {
            return Ok(true);
        }
        match out.continuation_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return Ok(false),
        }
    }
}

/// Applies one hardening step; a refusal the credentials or the store cannot get past
/// (Unauthorized, Invalid/NotImplemented) becomes a warning, anything else an error.
fn soften(step: &str, r: Result<()>, report: &mut BucketReport) -> Result<()> {
    match r {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::Unauthorized | ErrorKind::Invalid | ErrorKind::Conflict
            ) =>
        {
            report
                .warnings
                .push(format!("{step} could not be applied: {e}"));
            Ok(())
        }
        Err(e) => Err(e),
    }
}

async fn harden(
    s: &S3Store,
    bucket: &str,
    lock: Option<&Immutability>,
    report: &mut BucketReport,
) -> Result<()> {
    // Default encryption.
    let sse = ServerSideEncryptionConfiguration::builder()
        .rules(
            ServerSideEncryptionRule::builder()
                .apply_server_side_encryption_by_default(
                    ServerSideEncryptionByDefault::builder()
                        .sse_algorithm(ServerSideEncryption::Aes256)
                        .build()
                        .map_err(invalid)?,
                )
                .build(),
        )
        .build()
        .map_err(invalid)?;
    let r = s
        .retrier
        .run("put_bucket_encryption", || async {
            s.client
                .put_bucket_encryption()
                .bucket(bucket)
                .server_side_encryption_configuration(sse.clone())
                .send()
                .await
                .map(|_| ())
                .map_err(|e| s.err(e, "default encryption"))
        })
        .await;
    soften("default encryption", r, report)?;

    // Public access block.
    let pab = PublicAccessBlockConfiguration::builder()
        .block_public_acls(true)
        .ignore_public_acls(true)
        .block_public_policy(true)
        .restrict_public_buckets(true)
        .build();
    let r = s
        .retrier
        .run("put_public_access_block", || async {
            s.client
                .put_public_access_block()
                .bucket(bucket)
                .public_access_block_configuration(pab.clone())
                .send()
                .await
                .map(|_| ())
                .map_err(|e| s.err(e, "public access block"))
        })
        .await;
    soften("public access block", r, report)?;

    // Lifecycle: abort incomplete multipart uploads.
    let lifecycle = BucketLifecycleConfiguration::builder()
        .rules(
            LifecycleRule::builder()
                .id(LIFECYCLE_RULE_ID)
                .status(ExpirationStatus::Enabled)
                .filter(LifecycleRuleFilter::builder().prefix("").build())
                .abort_incomplete_multipart_upload(
                    AbortIncompleteMultipartUpload::builder()
                        .days_after_initiation(ABORT_AFTER_DAYS)
                        .build(),
                )
                .build()
                .map_err(invalid)?,
        )
        .build()
        .map_err(invalid)?;
    let r = s
        .retrier
        .run("put_bucket_lifecycle_configuration", || async {
            s.client
                .put_bucket_lifecycle_configuration()
                .bucket(bucket)
                .lifecycle_configuration(lifecycle.clone())
                .send()
                .await
                .map(|_| ())
                .map_err(|e| s.err(e, "lifecycle rule"))
        })
        .await;
    soften("lifecycle rule", r, report)?;

    if let Some(lock) = lock {
        let mode = if lock.compliance {
            ObjectLockRetentionMode::Compliance
        } else {
            ObjectLockRetentionMode::Governance
        };
        let cfg = ObjectLockConfiguration::builder()
            .object_lock_enabled(ObjectLockEnabled::Enabled)
            .rule(
                ObjectLockRule::builder()
                    .default_retention(
                        DefaultRetention::builder()
                            .mode(mode)
                            .days(lock.retention_days as i32)
                            .build(),
                    )
                    .build(),
            )
            .build();
        let r = s
            .retrier
            .run("put_object_lock_configuration", || async {
                s.client
                    .put_object_lock_configuration()
                    .bucket(bucket)
                    .object_lock_configuration(cfg.clone())
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| s.err(e, "object lock (only possible on buckets created with it)"))
            })
            .await;
        soften("object lock", r, report)?;
    }

    verify(s, bucket, lock, report).await?;

    // Last, because over plain http it denies everything after it.
    if !s.tls_only_policy {
        report.warnings.push(format!(
            "TLS-only bucket policy not applied to bucket {bucket}: the endpoint is plain http and the policy would deny Granary's own requests"
        ));
        return Ok(());
    }
    // TLS-only policy.
    let policy = tls_only_policy(bucket);
    let r = s
        .retrier
        .run("put_bucket_policy", || async {
            s.client
                .put_bucket_policy()
                .bucket(bucket)
                .policy(&policy)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| s.err(e, "TLS-only bucket policy"))
        })
        .await;
    soften("TLS-only bucket policy", r, report)?;
    match s
        .retrier
        .run("get_bucket_policy", || async {
            s.client
                .get_bucket_policy()
                .bucket(bucket)
                .send()
                .await
                .map_err(|e| s.err(e, "get_bucket_policy"))
        })
        .await
    {
        Ok(out)
            if out
                .policy()
                .is_some_and(|p| p.contains("aws:SecureTransport")) => {}
        _ => report.warnings.push(format!(
            "TLS-only bucket policy is not in effect on bucket {bucket} (read back after applying)"
        )),
    }

    Ok(())
}

fn tls_only_policy(bucket: &str) -> String {
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "GranaryDenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [format!("arn:aws:s3:::{bucket}"), format!("arn:aws:s3:::{bucket}/*")],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}}
        }]
    })
    .to_string()
}

/// Reads every hardening setting back; what is missing becomes a warning.
async fn verify(
    s: &S3Store,
    bucket: &str,
    lock: Option<&Immutability>,
    report: &mut BucketReport,
) -> Result<()> {
    let mut missing: Vec<&str> = Vec::new();
    match s
        .retrier
        .run("get_bucket_encryption", || async {
            s.client
                .get_bucket_encryption()
                .bucket(bucket)
                .send()
                .await
                .map_err(|e| s.err(e, "get_bucket_encryption"))
        })
        .await
    {
        Ok(out) => {
            let ok = out.server_side_encryption_configuration().is_some_and(|c| {
                c.rules().iter().any(|r| {
                    r.apply_server_side_encryption_by_default()
                        .is_some_and(|d| *d.sse_algorithm() == ServerSideEncryption::Aes256)
                })
            });
            if !ok {
                missing.push("default encryption");
            }
        }
        Err(_) => missing.push("default encryption"),
    }
    match s
        .retrier
        .run("get_public_access_block", || async {
            s.client
                .get_public_access_block()
                .bucket(bucket)
                .send()
                .await
                .map_err(|e| s.err(e, "get_public_access_block"))
        })
        .await
    {
        Ok(out) => {
            let ok = out.public_access_block_configuration().is_some_and(|c| {
                c.block_public_acls() == Some(true)
                    && c.ignore_public_acls() == Some(true)
                    && c.block_public_policy() == Some(true)
                    && c.restrict_public_buckets() == Some(true)
            });
            if !ok {
                missing.push("public access block");
            }
        }
        Err(_) => missing.push("public access block"),
    }
    match s
        .retrier
        .run("get_bucket_lifecycle_configuration", || async {
            s.client
                .get_bucket_lifecycle_configuration()
                .bucket(bucket)
                .send()
                .await
                .map_err(|e| s.err(e, "get_bucket_lifecycle_configuration"))
        })
        .await
    {
        Ok(out) => {
            let ok = out.rules().iter().any(|r| {
                r.id() == Some(LIFECYCLE_RULE_ID)
                    && r.abort_incomplete_multipart_upload()
                        .and_then(|a| a.days_after_initiation())
                        == Some(ABORT_AFTER_DAYS)
            });
            if !ok {
                missing.push("lifecycle rule");
            }
        }
        Err(_) => missing.push("lifecycle rule"),
    }
    if let Some(lock) = lock {
        match s
            .retrier
            .run("get_object_lock_configuration", || async {
                s.client
                    .get_object_lock_configuration()
                    .bucket(bucket)
                    .send()
                    .await
                    .map_err(|e| s.err(e, "get_object_lock_configuration"))
            })
            .await
        {
            Ok(out) => {
                let ok = out.object_lock_configuration().is_some_and(|c| {
                    c.object_lock_enabled() == Some(&ObjectLockEnabled::Enabled)
                        && c.rule()
                            .and_then(|r| r.default_retention())
                            .and_then(|d| d.days())
                            == Some(lock.retention_days as i32)
                });
                if !ok {
                    missing.push("object lock");
                }
            }
            Err(_) => missing.push("object lock"),
        }
    }
    for m in missing {
        let w = format!("{m} is not in effect on bucket {bucket} (read back after applying)");
        if !report.warnings.iter().any(|x| x.starts_with(m)) {
            report.warnings.push(w);
        }
    }
    Ok(())
}

pub(super) async fn delete_bucket(s: &S3Store, bucket: &str, empty_first: bool) -> Result<()> {
    if empty_first {
        match empty_bucket(s, bucket).await {
            Ok(()) => {}
            Err(Error::BucketNotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    let r = s
        .retrier
        .run("delete_bucket", || async {
            s.client
                .delete_bucket()
                .bucket(bucket)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| s.err(e, format_args!("delete bucket {bucket}")))
        })
        .await;
    match r {
        Ok(()) | Err(Error::BucketNotFound(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

async fn empty_bucket(s: &S3Store, bucket: &str) -> Result<()> {
    s.delete_prefix(bucket, "").await?;
    // Object versions and delete markers (versioned and object-locked buckets).
    let mut key_marker: Option<String> = None;
    let mut version_marker: Option<String> = None;
    loop {
        let out = s
            .retrier
            .run("list_object_versions", || async {
                s.client
                    .list_object_versions()
                    .bucket(bucket)
                    .set_key_marker(key_marker.clone())
                    .set_version_id_marker(version_marker.clone())
                    .send()
                    .await
                    .map_err(|e| s.err(e, format_args!("list versions of {bucket}")))
            })
            .await?;
        let ids: Vec<ObjectIdentifier> = out
            .versions()
            .iter()
            .map(|v| (v.key(), v.version_id()))
            .chain(
                out.delete_markers()
                    .iter()
                    .map(|m| (m.key(), m.version_id())),
            )
            .filter_map(|(k, v)| {
                ObjectIdentifier::builder()
                    .set_key(k.map(str::to_string))
                    .set_version_id(v.map(str::to_string))
                    .build()
                    .ok()
            })
            .collect();
        if !ids.is_empty() {
            let delete = Delete::builder()
                .set_objects(Some(ids))
                .quiet(true)
                .build()
                .map_err(invalid)?;
            s.retrier
                .run("delete_versions", || async {
                    s.client
                        .delete_objects()
                        .bucket(bucket)
                        .delete(delete.clone())
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| s.err(e, format_args!("delete versions in {bucket}")))
                })
                .await?;
        }
        if out.is_truncated() == Some(true) {
            key_marker = out.next_key_marker().map(str::to_string);
            version_marker = out.next_version_id_marker().map(str::to_string);
        } else {
            break;
        }
    }
    // Pending multipart uploads.
    let out = s
        .retrier
        .run("list_multipart_uploads", || async {
            s.client
                .list_multipart_uploads()
                .bucket(bucket)
                .send()
                .await
                .map_err(|e| s.err(e, format_args!("list uploads of {bucket}")))
        })
        .await?;
    for u in out.uploads() {
        if let (Some(k), Some(id)) = (u.key(), u.upload_id()) {
            let _ = s
                .client
                .abort_multipart_upload()
                .bucket(bucket)
                .key(k)
                .upload_id(id)
                .send()
                .await;
        }
    }
    Ok(())
}
