//! Which object store `granary dev` keeps its buckets in: the `local` provider under
//! `<data-dir>/buckets` by default, or a real one (`--provider aws|azure|gcp` with
//! `--region`, `--endpoint` and credentials from `--credentials-file` or the
//! environment), so the same command can demonstrate a real bucket.

use std::collections::BTreeMap;
use std::path::PathBuf;

use granary_providers::{Credentials, ProviderKind, SecretData};

/// The store flags of `granary dev`; the `///` lines on the fields are their help.
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct StoreArgs {
    // `local` (default), `aws`, `azure` or `gcp`.
    /// Keep buckets at a real provider instead of local directories: aws, azure or gcp.
    #[arg(long, value_name = "TYPE")]
    pub provider: Option<String>,
    // Endpoint URL of an S3-compatible, Azure Blob or GCS service (emulators included).
    /// The provider's endpoint URL (S3-compatible stores, emulators).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    // The backup region (required for a provider other than `local`).
    /// The region of the shared buckets (required with --provider).
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    // A file with the credentials: a YAML/JSON map of the Secret keys Gardener uses
    // (`accessKeyID`, `secretAccessKey`, `storageAccount`, …), an AWS shared
    // credentials file (`[default]` …), or for `gcp` a service-account JSON key.
    /// Credentials for --provider: a YAML map of Gardener's Secret keys, an AWS
    /// credentials file, or a GCP service-account key; default: the provider's usual
    /// environment variables (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY,
    /// AZURE_STORAGE_ACCOUNT/AZURE_STORAGE_KEY, GOOGLE_APPLICATION_CREDENTIALS).
    #[arg(long, value_name = "FILE")]
    pub credentials_file: Option<PathBuf>,
}

/// The object store the landscape's CloudProfile points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackupStore {
    /// Directories under `<data-dir>/buckets`.
    Local,
    /// A real provider: `provider`, the pool's `region`, and the Secret data.
    Remote {
        provider: String,
        region: String,
        secret: BTreeMap<String, String>,
    },
}

/// A store flag that cannot work.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreArgsError(String);

fn usage(message: impl Into<String>) -> StoreArgsError {
    StoreArgsError(message.into())
}

impl BackupStore {
    /// Resolves the flags; `env` looks up environment variables (a parameter so the
    /// wiring is testable without touching the process environment).
    pub fn from_args(
        args: &StoreArgs,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<BackupStore, StoreArgsError> {
        let provider = args.provider.as_deref().unwrap_or("local");
        let kind: ProviderKind = provider
            .parse()
            .map_err(|e: granary_providers::Error| usage(format!("--provider: {e}")))?;
        if kind == ProviderKind::Local {
            if args.endpoint.is_some() || args.region.is_some() || args.credentials_file.is_some() {
                return Err(usage(
                    "--endpoint, --region and --credentials-file go with --provider aws|azure|gcp",
                ));
            }
            return Ok(BackupStore::Local);
        }
        let region = args
            .region
            .clone()
            .filter(|r| !r.is_empty())
            .ok_or_else(|| {
                usage(format!(
                    "--provider {provider} needs --region (the region of the shared buckets)"
                ))
            })?;
        let mut secret = match &args.credentials_file {
            Some(path) => {
                let bytes = std::fs::read(path)
                    .map_err(|e| usage(format!("--credentials-file {}: {e}", path.display())))?;
                read_credentials(kind, &bytes)
                    .map_err(|m| usage(format!("--credentials-file {}: {m}", path.display())))?
            }
            None => from_env(kind, &env),
        };
        if let Some(endpoint) = &args.endpoint {
            secret.insert("endpoint".into(), endpoint.clone());
            if kind == ProviderKind::Aws {
                // S3-compatible endpoints (MinIO, moto, …) want path-style addressing.
                secret
                    .entry("s3ForcePathStyle".into())
                    .or_insert_with(|| "true".into());
            }
        }
        if kind == ProviderKind::Aws {
            secret
                .entry("region".into())
                .or_insert_with(|| region.clone());
        }
        let data: SecretData = secret
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
            .collect();
        Credentials::from_secret(kind, &data).map_err(|e| {
            usage(format!(
                "credentials for --provider {provider} (from {}): {e}",
                if args.credentials_file.is_some() {
                    "--credentials-file"
                } else {
                    "the environment"
                }
            ))
        })?;
        Ok(BackupStore::Remote {
            provider: provider.to_string(),
            region,
            secret,
        })
    }

    /// A short description for the start-up banner (no secrets).
    pub fn describe(&self, buckets_dir: &std::path::Path) -> String {
        match self {
            BackupStore::Local => format!("local directories under {}", buckets_dir.display()),
            BackupStore::Remote {
                provider,
                region,
                secret,
            } => match secret.get("endpoint") {
                Some(endpoint) => format!("{provider} at {endpoint}, region {region}"),
                None => format!("{provider}, region {region}"),
            },
        }
    }
}

/// The provider's keys from the usual environment variables.
fn from_env(kind: ProviderKind, env: &impl Fn(&str) -> Option<String>) -> BTreeMap<String, String> {
    let pairs: &[(&str, &str)] = match kind {
        ProviderKind::Aws => &[
            ("AWS_ACCESS_KEY_ID", "accessKeyID"),
            ("AWS_SECRET_ACCESS_KEY", "secretAccessKey"),
        ],
        ProviderKind::Azure => &[
            ("AZURE_STORAGE_ACCOUNT", "storageAccount"),
            ("AZURE_STORAGE_KEY", "storageKey"),
        ],
        ProviderKind::Gcp | ProviderKind::Local => &[],
    };
    let mut out: BTreeMap<String, String> = pairs
        .iter()
        .filter_map(|(var, key)| env(var).map(|v| (key.to_string(), v)))
        .collect();
    if kind == ProviderKind::Gcp
        && let Some(path) = env("GOOGLE_APPLICATION_CREDENTIALS")
        && let Ok(json) = std::fs::read_to_string(path)
    {
        out.insert("serviceaccount.json".into(), json);
    }
    out
}

/// Parses a credentials file: an AWS shared-credentials file, a GCP service-account key,
/// or a YAML/JSON map of Secret keys.
fn read_credentials(kind: ProviderKind, bytes: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    if kind == ProviderKind::Aws && text.trim_start().starts_with('[') {
        let data = granary_providers::velero_aws_secret(bytes, None, &BTreeMap::new())
            .map_err(|e| e.to_string())?;
        return Ok(data
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
            .collect());
    }
    let value: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| {
        format!(
            "neither a credentials file nor a YAML map: {}",
            yaml_error(&e, text)
        )
    })?;
    if kind == ProviderKind::Gcp && value.get("type").is_some_and(|t| t == "service_account") {
        return Ok([("serviceaccount.json".to_string(), text.to_string())].into());
    }
    let map = value
        .as_object()
        .ok_or_else(|| "expected a map of Secret keys".to_string())?;
    map.iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k.clone(), s.clone())),
            serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {
                Ok((k.clone(), v.to_string()))
            }
            _ => Err(format!("{k}: expected a string")),
        })
        .collect()
}

/// A YAML error in a file of secrets: the parser's message and position, never the
/// snippet of the offending source line it would show (that line is the secret), and
/// with any source text the message itself quotes blanked out.
fn yaml_error(e: &serde_saphyr::Error, source: &str) -> String {
    granary_runtime::redact::without_source(&e.without_snippet().to_string(), source)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn local_is_the_default_and_refuses_remote_flags() {
        assert_eq!(
            BackupStore::from_args(&StoreArgs::default(), no_env).unwrap(),
            BackupStore::Local
        );
        let args = StoreArgs {
            region: Some("eu".into()),
            ..Default::default()
        };
        assert!(BackupStore::from_args(&args, no_env).is_err());
    }

    #[test]
    fn aws_from_the_environment_with_an_endpoint() {
        let args = StoreArgs {
            provider: Some("aws".into()),
            endpoint: Some("http://127.0.0.1:9000".into()),
            region: Some("us-east-1".into()),
            credentials_file: None,
        };
        let env = |k: &str| match k {
            "AWS_ACCESS_KEY_ID" => Some("AK".to_string()),
            "AWS_SECRET_ACCESS_KEY" => Some("SK".to_string()),
            _ => None,
        };
        let store = BackupStore::from_args(&args, env).unwrap();
        let BackupStore::Remote {
            provider,
            region,
            secret,
        } = &store
        else {
            panic!("remote expected")
        };
        assert_eq!((provider.as_str(), region.as_str()), ("aws", "us-east-1"));
        assert_eq!(secret["accessKeyID"], "AK");
        assert_eq!(secret["secretAccessKey"], "SK");
        assert_eq!(secret["endpoint"], "http://127.0.0.1:9000");
        assert_eq!(secret["s3ForcePathStyle"], "true");
        assert_eq!(secret["region"], "us-east-1");
        let shown = store.describe(std::path::Path::new("/x"));
        assert!(!shown.contains("SK"), "{shown}");
    }

    #[test]
    fn aws_without_credentials_or_region_says_what_is_missing() {
        let mut args = StoreArgs {
            provider: Some("aws".into()),
            ..Default::default()
        };
        let err = BackupStore::from_args(&args, no_env).unwrap_err();
        assert!(err.to_string().contains("--region"), "{err}");
        args.region = Some("us-east-1".into());
        let err = BackupStore::from_args(&args, no_env).unwrap_err();
        assert!(err.to_string().contains("the environment"), "{err}");
        args.provider = Some("ftp".into());
        let err = BackupStore::from_args(&args, no_env).unwrap_err();
        assert!(err.to_string().contains("--provider"), "{err}");
    }

    #[test]
    fn credentials_files_in_each_format() {
        let dir = tempfile::tempdir().unwrap();
        let ini = dir.path().join("cloud");
        std::fs::write(
            &ini,
            "[default]\naws_access_key_id = AK\naws_secret_access_key = SK\n",
        )
        .unwrap();
        let args = StoreArgs {
            provider: Some("aws".into()),
            region: Some("eu-west-1".into()),
            credentials_file: Some(ini),
            endpoint: None,
        };
        let BackupStore::Remote { secret, .. } = BackupStore::from_args(&args, no_env).unwrap()
        else {
            panic!("remote expected")
        };
        assert_eq!(secret["accessKeyID"], "AK");
        assert!(!secret.contains_key("endpoint"));

        let yaml = dir.path().join("azure.yaml");
        std::fs::write(&yaml, "storageAccount: acct\nstorageKey: a2V5\n").unwrap();
        let args = StoreArgs {
            provider: Some("azure".into()),
            region: Some("westeurope".into()),
            credentials_file: Some(yaml),
            endpoint: Some("http://127.0.0.1:10000/acct".into()),
        };
        let BackupStore::Remote { secret, .. } = BackupStore::from_args(&args, no_env).unwrap()
        else {
            panic!("remote expected")
        };
        assert_eq!(secret["storageAccount"], "acct");
        assert_eq!(secret["endpoint"], "http://127.0.0.1:10000/acct");
        assert!(!secret.contains_key("s3ForcePathStyle"));

        let missing = StoreArgs {
            credentials_file: Some(dir.path().join("nope")),
            ..args
        };
        let err = BackupStore::from_args(&missing, no_env).unwrap_err();
        assert!(err.to_string().contains("--credentials-file"), "{err}");
    }

    #[test]
    fn yaml_errors_keep_the_position_and_drop_quoted_source() {
        let text = "a: b\nsecretAccessKey: \"wJalrXUtnFEMIK7MDENG\n";
        let e = serde_saphyr::from_str::<serde_json::Value>(text).unwrap_err();
        let shown = yaml_error(&e, text);
        assert!(shown.contains("line 2, column 18"), "{shown}");
        assert!(!shown.contains("wJalr"), "{shown}");
    }

    #[test]
    fn a_broken_credentials_file_is_reported_without_its_contents() {
        const SECRET: &str = "wJalrXUtnFEMIK7MDENGbPxRfiCYzzSECRET";
        let dir = tempfile::tempdir().unwrap();
        let broken = [
            format!("accessKeyID: AKIAEXAMPLE\nsecretAccessKey: {SECRET}\n  bad: [\n"),
            format!("accessKeyID: AKIAEXAMPLE\nsecretAccessKey: \"{SECRET}\n"),
            format!("accessKeyID: AKIAEXAMPLE\nsecretAccessKey: {SECRET}: x\n"),
            format!("{{\"accessKeyID\": \"AKIAEXAMPLE\", \"secretAccessKey\": \"{SECRET}\""),
            format!("- {SECRET}\n"),
            format!("secretAccessKey: *{SECRET}\n"),
            format!("secretAccessKey: !{SECRET} x\n"),
            format!("secretAccessKey: [{SECRET}]\n"),
            format!("\t{SECRET}\n"),
            format!("[default]\naws_access_key_id = {SECRET}\n"),
            format!("[default]\n{SECRET}\n"),
        ];
        for (i, text) in broken.iter().enumerate() {
            let path = dir.path().join(format!("credentials-{i}"));
            std::fs::write(&path, text).unwrap();
            let args = StoreArgs {
                provider: Some("aws".into()),
                region: Some("eu-west-1".into()),
                credentials_file: Some(path.clone()),
                endpoint: None,
            };
            let err = BackupStore::from_args(&args, no_env)
                .unwrap_err()
                .to_string();
            assert!(
                !err.contains(&SECRET[..12]),
                "case {i} shows the secret: {err}"
            );
            assert!(err.contains("--credentials-file"), "case {i}: {err}");
        }
    }
}
