//! From a BackupStorageLocation to an object store: the provider names Velero's plugins
//! use, Velero's credentials-file formats and `config` keys mapped onto the providers
//! crate's Secret data (docs/operations.md#credentials), and the location's key layout.
//! Pure: the controller reads the credential Secret and opens the store.
//!
//! | provider | credentials file (`spec.credential`) | `config` keys |
//! |---|---|---|
//! | `aws`, `velero.io/aws` | AWS shared-credentials file (`[default] aws_access_key_id=…`), profile from `config.profile` | `region`, `s3Url`, `s3ForcePathStyle` |
//! | `azure`, `velero.io/azure` | env file (`AZURE_STORAGE_ACCOUNT_ACCESS_KEY=…`; the variable named by `config.storageAccountKeyEnvVar`) | `storageAccount` (else the file's `AZURE_STORAGE_ACCOUNT`), `storageAccountURI` or `endpoint` (blob endpoint, e.g. an emulator's) |
//! | `gcp`, `velero.io/gcp` | service account JSON | `endpoint` (Granary's, for emulators; anonymous without credentials) |
//! | `local` (Granary's) | none: the root comes from the process (`--data-dir`) | none |
//!
//! A location without `spec.credential` uses Velero's default Secret
//! ([`DEFAULT_CREDENTIALS`]) when it exists.

use granary_providers::SecretData;
use granary_velero::layout::StorageLayout;
use std::collections::BTreeMap;

/// Velero's default credentials Secret and key (`velero install`), used when a location
/// names no `spec.credential`.
pub const DEFAULT_CREDENTIALS: (&str, &str) = ("cloud-credentials", "cloud");

/// What it takes to open a location's store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocationAccess {
    /// `local`, `aws`, `azure` or `gcp` (the providers crate's names).
    pub provider: &'static str,
    pub region: Option<String>,
    /// Secret data with the providers crate's keys. Never logged.
    pub secret: SecretData,
    pub layout: StorageLayout,
}

/// A location that cannot be used, with the field at fault (never a secret value).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct LocationError {
    pub field: String,
    pub message: String,
}

fn err(field: &str, message: impl Into<String>) -> LocationError {
    LocationError {
        field: field.to_string(),
        message: message.into(),
    }
}

/// The namespace whose owner's NonAdminBackupStorageLocation `location` was made for
/// (NAC's labels and origin annotations), `None` for an administrator's location. Such a
/// location's bucket belongs to that namespace's owner: nothing read from it is trusted
/// beyond that namespace.
pub fn tenant_namespace(location: &granary_api::velero::BackupStorageLocation) -> Option<String> {
    use kube::ResourceExt;
    crate::nonadmin::plan::nac_origin(
        crate::nonadmin::plan::Origin::Location,
        location.labels(),
        location.annotations(),
    )
    .map(|(namespace, _)| namespace)
}

/// The providers crate's name for a BSL `spec.provider`.
pub fn provider_kind(provider: &str) -> Option<&'static str> {
    match provider {
        "aws" | "velero.io/aws" => Some("aws"),
        "azure" | "velero.io/azure" => Some("azure"),
        "gcp" | "velero.io/gcp" => Some("gcp"),
        "local" | "granary.gardener.cloud/local" => Some("local"),
        _ => None,
    }
}

/// Maps a location onto store access. `credential` is the content of the Secret key
/// `spec.credential` names (`None` when the location names none).
pub fn location_access(
    provider: &str,
    bucket: &str,
    prefix: Option<&str>,
    config: &BTreeMap<String, String>,
    credential: Option<&[u8]>,
) -> Result<LocationAccess, LocationError> {
    let kind = provider_kind(provider).ok_or_else(|| {
        err(
            "spec.provider",
            format!(
                "unknown provider {provider:?} (aws, velero.io/aws, azure, velero.io/azure, \
                 gcp, velero.io/gcp, local)"
            ),
        )
    })?;
    let layout = StorageLayout::new(bucket, prefix).map_err(|e| {
        let field = match e {
            granary_velero::layout::LayoutError::InvalidPrefix { .. } => {
                "spec.objectStorage.prefix"
            }
            _ => "spec.objectStorage.bucket",
        };
        err(field, e.to_string())
    })?;
    let need_credential = || {
        credential.ok_or_else(|| {
            err(
                "spec.credential",
                format!(
                    "required for provider {provider:?} (a Secret key holding the credentials file)"
                ),
            )
        })
    };
    let mut region = config.get("region").cloned();
    let secret = match kind {
        "local" => SecretData::new(),
        "aws" => granary_providers::velero_aws_secret(
            need_credential()?,
            config.get("profile").map(String::as_str),
            config,
        )
        .map_err(|e| err("spec.credential", e.message().to_string()))?,
        "azure" => {
            let account = config
                .get("storageAccount")
                .ok_or_else(|| err("spec.config.storageAccount", "required for provider azure"))?;
            let var = config
                .get("storageAccountKeyEnvVar")
                .map(String::as_str)
                .unwrap_or("AZURE_STORAGE_ACCOUNT_ACCESS_KEY");
            let env = env_file(need_credential()?)?;
            let key = env.get(var).ok_or_else(|| {
                err(
                    "spec.credential",
                    format!(
                        "the credentials file has no {var} (the storage account key; Granary \
                         uses shared-key access)"
                    ),
                )
            })?;
            let mut s = SecretData::new();
            s.insert("storageAccount".into(), account.as_bytes().to_vec());
            s.insert("storageKey".into(), key.as_bytes().to_vec());
            if let Some(uri) = config
                .get("storageAccountURI")
                .or_else(|| config.get("endpoint"))
            {
                s.insert("endpoint".into(), uri.as_bytes().to_vec());
            }
            region = None;
            s
        }
        _ => {
            let mut s = SecretData::new();
            if let Some(json) = credential {
                s.insert("serviceaccount.json".into(), json.to_vec());
            }
            if let Some(endpoint) = config.get("endpoint") {
                s.insert("endpoint".into(), endpoint.as_bytes().to_vec());
            }
            if s.is_empty() {
                need_credential()?;
            }
            s
        }
    };
    Ok(LocationAccess {
        provider: kind,
        region,
        secret,
        layout,
    })
}

/// `KEY=value` lines (Velero's Azure credentials file); `#` comments, optional quotes.
fn env_file(bytes: &[u8]) -> Result<BTreeMap<String, String>, LocationError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| err("spec.credential", "the credentials file is not UTF-8"))?;
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = line.split_once('=').ok_or_else(|| {
            // The line number only: the line may hold a secret.
            err(
                "spec.credential",
                format!("line {} of the credentials file is not KEY=value", n + 1),
            )
        })?;
        let v = v.trim().trim_matches('"');
        out.insert(k.trim().to_string(), v.to_string());
    }
    Ok(out)
}

/// Gardener Secret data (what a seed holds for its backup pool) as the credentials file
/// Velero's plugin for `provider` reads, with the `config` a location needs beside it:
/// how the seed's default location carries the pool's credentials in Velero's format, so
/// Velero itself can use that location too.
pub fn velero_credentials_file(
    provider: &str,
    secret: &SecretData,
) -> Result<(Vec<u8>, BTreeMap<String, String>), LocationError> {
    let get = |k: &str| {
        secret
            .get(k)
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let missing = |k: &str| err("credentials", format!("the pool's Secret has no {k}"));
    let mut config = BTreeMap::new();
    let file = match provider {
        "local" => Vec::new(),
        "aws" => {
            let id = get("accessKeyID").ok_or_else(|| missing("accessKeyID"))?;
            let key = get("secretAccessKey").ok_or_else(|| missing("secretAccessKey"))?;
            if let Some(r) = get("region") {
                config.insert("region".into(), r.to_string());
            }
            if let Some(e) = get("endpoint") {
                config.insert("s3Url".into(), e.to_string());
            }
            if let Some(p) = get("s3ForcePathStyle") {
                config.insert("s3ForcePathStyle".into(), p.to_string());
            }
            format!("[default]\naws_access_key_id={id}\naws_secret_access_key={key}\n").into_bytes()
        }
        "azure" => {
            let account = get("storageAccount").ok_or_else(|| missing("storageAccount"))?;
            let key = get("storageKey").ok_or_else(|| missing("storageKey"))?;
            config.insert("storageAccount".into(), account.to_string());
            config.insert(
                "storageAccountKeyEnvVar".into(),
                "AZURE_STORAGE_ACCOUNT_ACCESS_KEY".into(),
            );
            if let Some(e) = get("endpoint") {
                config.insert("storageAccountURI".into(), e.to_string());
            }
            format!("AZURE_STORAGE_ACCOUNT_ACCESS_KEY={key}\nAZURE_CLOUD_NAME=AzurePublicCloud\n")
                .into_bytes()
        }
        "gcp" => {
            if let Some(e) = get("endpoint") {
                config.insert("endpoint".into(), e.to_string());
            }
            secret
                .get("serviceaccount.json")
                .cloned()
                .unwrap_or_default()
        }
        other => return Err(err("provider", format!("unknown provider {other:?}"))),
    };
    Ok((file, config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn aws_from_velero_s_credentials_file_and_config() {
        let file = b"[default]\naws_access_key_id = AKID\naws_secret_access_key = SECRET\n";
        let a = location_access(
            "velero.io/aws",
            "bucket",
            Some("/velero/seed-a/"),
            &config(&[
                ("region", "eu-west-1"),
                ("s3Url", "http://127.0.0.1:5000"),
                ("s3ForcePathStyle", "true"),
            ]),
            Some(file),
        )
        .expect("valid");
        assert_eq!(a.provider, "aws");
        assert_eq!(a.region.as_deref(), Some("eu-west-1"));
        assert_eq!(a.secret["accessKeyID"], b"AKID");
        assert_eq!(a.secret["endpoint"], b"http://127.0.0.1:5000");
        assert_eq!(a.layout.root(), "velero/seed-a/");
        let e = location_access("aws", "b", None, &config(&[]), None).expect_err("no credential");
        assert_eq!(e.field, "spec.credential");
    }

    #[test]
    fn azure_and_gcp_and_local() {
        let a = location_access(
            "azure",
            "container",
            None,
            &config(&[
                ("storageAccount", "acct"),
                ("storageAccountURI", "http://127.0.0.1:10000/acct"),
            ]),
            Some(b"AZURE_STORAGE_ACCOUNT_ACCESS_KEY=\"k3y\"\n"),
        )
        .expect("valid");
        assert_eq!(a.secret["storageKey"], b"k3y");
        assert_eq!(a.secret["endpoint"], b"http://127.0.0.1:10000/acct");
        let e = location_access("azure", "c", None, &config(&[]), Some(b"")).expect_err("account");
        assert_eq!(e.field, "spec.config.storageAccount");
        let e = location_access(
            "azure",
            "c",
            None,
            &config(&[("storageAccount", "a")]),
            Some(b"SECRET-VALUE-WITHOUT-EQUALS\n"),
        )
        .expect_err("bad file");
        assert!(!e.to_string().contains("SECRET-VALUE"), "{e}");

        let g = location_access(
            "gcp",
            "b",
            None,
            &config(&[("endpoint", "http://127.0.0.1:4443")]),
            None,
        )
        .expect("anonymous emulator access");
        assert_eq!(g.provider, "gcp");
        let l = location_access("local", "b", Some("p"), &config(&[]), None).expect("local");
        assert!(l.secret.is_empty());
        let e = location_access("minio", "b", None, &config(&[]), None).expect_err("unknown");
        assert_eq!(e.field, "spec.provider");
        let e = location_access("local", "", None, &config(&[]), None).expect_err("no bucket");
        assert_eq!(e.field, "spec.objectStorage.bucket");
    }

    #[test]
    fn a_pool_secret_round_trips_through_velero_s_formats() {
        let mut aws = SecretData::new();
        aws.insert("accessKeyID".into(), b"AKID".to_vec());
        aws.insert("secretAccessKey".into(), b"S".to_vec());
        aws.insert("endpoint".into(), b"http://127.0.0.1:9000".to_vec());
        aws.insert("s3ForcePathStyle".into(), b"true".to_vec());
        let (file, cfg) = velero_credentials_file("aws", &aws).expect("aws");
        let back = location_access("aws", "b", None, &cfg, Some(&file)).expect("back");
        assert_eq!(back.secret["accessKeyID"], b"AKID");
        assert_eq!(back.secret["secretAccessKey"], b"S");
        assert_eq!(back.secret["endpoint"], b"http://127.0.0.1:9000");

        let mut az = SecretData::new();
        az.insert("storageAccount".into(), b"acct".to_vec());
        az.insert("storageKey".into(), b"KEY".to_vec());
        let (file, cfg) = velero_credentials_file("azure", &az).expect("azure");
        let back = location_access("azure", "c", None, &cfg, Some(&file)).expect("back");
        assert_eq!(back.secret["storageKey"], b"KEY");
        assert!(velero_credentials_file("aws", &SecretData::new()).is_err());
    }
}
