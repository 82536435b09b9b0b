//! The data of the `<technicalID>/etcd-backup` Secret a successful BackupEntry reconcile
//! writes for the shoot's etcd backup sidecar (docs/architecture.md#provider-calls): the
//! provider's credential keys as Gardener's provider extensions pass them, plus
//! `bucketName` and Granary's `prefix`.

use granary_api::common::FieldError;
use std::collections::BTreeMap;

/// Annotation naming the BackupEntry that wrote the secret; Granary deletes only secrets
/// it wrote.
pub const CREATED_BY_ANNOTATION: &str = "backup.gardener.cloud/created-by";
/// The Secret's name in the shoot's control-plane namespace.
pub const ETCD_BACKUP_SECRET_NAME: &str = "etcd-backup";

/// Which credential keys each provider passes on: (required, optional).
fn credential_keys(provider: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
    match provider {
        "aws" => Some((
            &["accessKeyID", "secretAccessKey"],
            &["endpoint", "s3ForcePathStyle"],
        )),
        "azure" => Some((&["storageAccount", "storageKey"], &["domain", "endpoint"])),
        "gcp" => Some((&[], &["serviceaccount.json", "endpoint"])),
        "local" => Some((&[], &[])),
        _ => None,
    }
}

/// Builds the secret data. `credentials` is the copied credentials Secret's data; errors
/// name the missing key, never a value.
pub fn etcd_backup_secret_data(
    provider: &str,
    region: &str,
    credentials: &BTreeMap<String, Vec<u8>>,
    bucket_name: &str,
    prefix: &str,
) -> Result<BTreeMap<String, Vec<u8>>, FieldError> {
    let (required, optional) = credential_keys(provider).ok_or_else(|| {
        FieldError::new("spec.type", format!("unsupported provider {provider:?}"))
    })?;
    let mut data = BTreeMap::new();
    for key in required {
        let value = credentials.get(*key).ok_or_else(|| {
            FieldError::new(format!("secretRef.data.{key}"), "required by the provider")
        })?;
        data.insert((*key).to_string(), value.clone());
    }
    for key in optional {
        if let Some(value) = credentials.get(*key) {
            data.insert((*key).to_string(), value.clone());
        }
    }
    if provider == "gcp"
        && !data.contains_key("serviceaccount.json")
        && !data.contains_key("endpoint")
    {
        return Err(FieldError::new(
            "secretRef.data.serviceaccount.json",
            "required by the provider",
        ));
    }
    if provider == "aws" {
        data.insert("region".to_string(), region.as_bytes().to_vec());
    }
    data.insert("bucketName".to_string(), bucket_name.as_bytes().to_vec());
    data.insert("prefix".to_string(), prefix.as_bytes().to_vec());
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    fn keys(data: &BTreeMap<String, Vec<u8>>) -> Vec<&str> {
        data.keys().map(String::as_str).collect()
    }

    #[test]
    fn aws_keys_with_region_and_optional_endpoint() {
        let c = creds(&[
            ("accessKeyID", "AK"),
            ("secretAccessKey", "SK"),
            ("endpoint", "http://127.0.0.1:5000"),
            ("unrelated", "x"),
        ]);
        let data = etcd_backup_secret_data("aws", "eu-west-1", &c, "b-0", "shoot--p--s--uid")
            .expect("complete");
        assert_eq!(
            keys(&data),
            [
                "accessKeyID",
                "bucketName",
                "endpoint",
                "prefix",
                "region",
                "secretAccessKey"
            ]
        );
        assert_eq!(data["region"], b"eu-west-1");
        assert_eq!(data["prefix"], b"shoot--p--s--uid");
    }

    #[test]
    fn azure_gcp_and_local() {
        let az = etcd_backup_secret_data(
            "azure",
            "westeurope",
            &creds(&[("storageAccount", "a"), ("storageKey", "k")]),
            "b",
            "p",
        )
        .expect("complete");
        assert_eq!(
            keys(&az),
            ["bucketName", "prefix", "storageAccount", "storageKey"]
        );
        let gcp = etcd_backup_secret_data(
            "gcp",
            "eu",
            &creds(&[("serviceaccount.json", "{}")]),
            "b",
            "p",
        )
        .expect("complete");
        assert_eq!(keys(&gcp), ["bucketName", "prefix", "serviceaccount.json"]);
        let local =
            etcd_backup_secret_data("local", "", &BTreeMap::new(), "b", "").expect("complete");
        assert_eq!(keys(&local), ["bucketName", "prefix"]);
    }

    #[test]
    fn missing_keys_are_named_without_values() {
        let err = etcd_backup_secret_data(
            "aws",
            "r",
            &creds(&[("accessKeyID", "SECRET-AK")]),
            "b",
            "p",
        )
        .expect_err("incomplete");
        assert_eq!(
            err.to_string(),
            "secretRef.data.secretAccessKey: required by the provider"
        );
        let err = etcd_backup_secret_data("gcp", "r", &BTreeMap::new(), "b", "p")
            .expect_err("incomplete");
        assert!(err.to_string().contains("serviceaccount.json"));
        let err = etcd_backup_secret_data("openstack", "r", &BTreeMap::new(), "b", "p")
            .expect_err("unknown");
        assert!(err.to_string().starts_with("spec.type"));
    }
}
