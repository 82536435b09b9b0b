//! Reading a backup's files straight from its BackupStorageLocation (`describe
//! --details`, `logs`): the location's provider and credential Secret → an
//! [`ObjectStore`], its bucket and prefix → the [`StorageLayout`] every key comes from.
//!
//! Velero's CLI asks its server for a signed URL through a DownloadRequest; Granary's
//! CLI reads the store itself with the location's own credentials, so it needs no
//! server to be running. Credentials are read the Velero way: `spec.credential` names a
//! key of a Secret holding a `cloud` file (AWS shared-credentials format, an Azure
//! `KEY=value` env file, or a GCP service-account JSON); without it, Velero's default
//! Secret `cloud-credentials`, key `cloud`. The `local` provider's root is the
//! directory given with `--data-dir`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use granary_providers::{ObjectStore, ProviderKind, RetryPolicy, SecretData, StoreOptions};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

use crate::api::velero::BackupStorageLocation;
use crate::velero::layout::StorageLayout;

/// Velero's default credentials Secret and key (`velero install`).
const DEFAULT_SECRET: (&str, &str) = ("cloud-credentials", "cloud");
/// The most a downloaded file may grow to when gunzipped (logs, manifests, results).
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// A location opened for reading.
pub struct LocationStore {
    pub name: String,
    pub store: Arc<dyn ObjectStore>,
    pub layout: StorageLayout,
}

/// The provider behind a BSL `spec.provider` (`aws`, `velero.io/aws`, …, `local`).
pub fn provider_kind(provider: &str) -> Result<ProviderKind, String> {
    let short = provider.strip_prefix("velero.io/").unwrap_or(provider);
    short.parse::<ProviderKind>().map_err(|_| {
        format!(
            "provider {provider:?} is not one Granary can read (aws, azure, gcp, local, or velero.io/<name>)"
        )
    })
}

/// Secret data with Gardener's keys (what the providers crate reads) from a Velero
/// credentials file and the location's `config`.
pub fn secret_data(
    kind: ProviderKind,
    file: Option<&[u8]>,
    config: &BTreeMap<String, String>,
) -> Result<SecretData, String> {
    let mut out = SecretData::new();
    let need = |what: &str| format!("the {kind} location needs a credentials Secret ({what})");
    match kind {
        ProviderKind::Local => {}
        ProviderKind::Aws => {
            let file = file.ok_or_else(|| need("a `cloud` file with aws_access_key_id"))?;
            return granary_providers::velero_aws_secret(
                file,
                config.get("profile").map(String::as_str),
                config,
            )
            .map_err(|e| e.to_string());
        }
        ProviderKind::Azure => {
            let file = file.ok_or_else(|| need("AZURE_STORAGE_ACCOUNT_ACCESS_KEY=…"))?;
            let text =
                std::str::from_utf8(file).map_err(|_| "the credentials file is not UTF-8")?;
            let env: BTreeMap<&str, &str> = text
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.trim(), v.trim()))
                .collect();
            let key_var = config
                .get("storageAccountKeyEnvVar")
                .map(String::as_str)
                .unwrap_or("AZURE_STORAGE_ACCOUNT_ACCESS_KEY");
            let account = config
                .get("storageAccount")
                .map(String::as_str)
                .or_else(|| env.get("AZURE_STORAGE_ACCOUNT").copied())
                .ok_or("the azure location has no config storageAccount")?;
            let key = env
                .get(key_var)
                .ok_or_else(|| format!("the credentials file has no {key_var}"))?;
            out.insert("storageAccount".into(), account.as_bytes().to_vec());
            out.insert("storageKey".into(), key.as_bytes().to_vec());
        }
        ProviderKind::Gcp => {
            if let Some(file) = file {
                out.insert("serviceaccount.json".into(), file.to_vec());
            }
        }
    }
    // Endpoints of S3-compatible stores and emulators (Granary's config key for
    // azure and gcp; `s3Url` is already mapped for aws).
    if let Some(endpoint) = config.get("endpoint") {
        out.insert("endpoint".into(), endpoint.as_bytes().to_vec());
    }
    Ok(out)
}

/// Opens `bsl` for reading: its credentials from the cluster, its store, its layout.
pub async fn open(
    client: &Client,
    namespace: &str,
    bsl: &BackupStorageLocation,
    data_dir: Option<&Path>,
) -> anyhow::Result<LocationStore> {
    let name = bsl.metadata.name.clone().unwrap_or_default();
    let spec = &bsl.spec;
    let kind = provider_kind(&spec.provider).map_err(anyhow::Error::msg)?;
    let layout = StorageLayout::new(
        &spec.object_storage.bucket,
        spec.object_storage.prefix.as_deref(),
    )
    .with_context(|| format!("backup storage location {name}"))?;
    let config = spec.config.clone().unwrap_or_default();
    let file = if kind == ProviderKind::Local {
        None
    } else {
        let (secret, key) = match &spec.credential {
            Some(c) => (c.name.clone(), c.key.clone()),
            None => (DEFAULT_SECRET.0.to_string(), DEFAULT_SECRET.1.to_string()),
        };
        let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
        match secrets.get_opt(&secret).await {
            Ok(Some(s)) => match s.data.and_then(|d| d.get(&key).map(|b| b.0.clone())) {
                Some(bytes) => Some(bytes),
                None => bail!(
                    "the credentials Secret {namespace}/{secret} of location {name} has no key {key:?}"
                ),
            },
            Ok(None) if spec.credential.is_none() => None,
            Ok(None) => bail!(
                "the credentials Secret {namespace}/{secret} of location {name} does not exist"
            ),
            Err(e) => {
                bail!("reading the credentials Secret {namespace}/{secret} of location {name}: {e}")
            }
        }
    };
    let data = secret_data(kind, file.as_deref(), &config)
        .map_err(|e| anyhow::anyhow!("location {name}: {e}"))?;
    if kind == ProviderKind::Local && data_dir.is_none() {
        bail!(
            "location {name} uses the local provider, whose files are in the data directory of the server that writes them: pass --data-dir DIR"
        );
    }
    let options = StoreOptions {
        local_root: data_dir.map(Path::to_path_buf),
        retry: RetryPolicy {
            max_attempts: 3,
            max_total_delay: std::time::Duration::from_secs(10),
            ..RetryPolicy::default()
        },
        request_timeout: std::time::Duration::from_secs(30),
        ..StoreOptions::default()
    };
    let region = config.get("region").map(String::as_str);
    let store = granary_providers::open(kind.as_str(), region, &data, &options)
        .await
        .with_context(|| format!("opening the object store of location {name}"))?;
    Ok(LocationStore {
        name,
        store,
        layout,
    })
}

impl LocationStore {
    /// The whole object at `key`, with a message that says which location could not
    /// be read.
    pub async fn get(&self, key: &str) -> anyhow::Result<bytes::Bytes> {
        granary_providers::get_bytes(self.store.as_ref(), self.layout.bucket(), key)
            .await
            .with_context(|| {
                format!(
                    "cannot read {key} from bucket {} of location {}",
                    self.layout.bucket(),
                    self.name
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_with_and_without_velero_prefix() {
        assert_eq!(provider_kind("velero.io/aws"), Ok(ProviderKind::Aws));
        assert_eq!(provider_kind("local"), Ok(ProviderKind::Local));
        assert!(
            provider_kind("openstack")
                .unwrap_err()
                .contains("openstack")
        );
    }

    #[test]
    fn credentials_files_map_to_gardener_keys() {
        let config: BTreeMap<String, String> = [
            ("region".to_string(), "eu-1".to_string()),
            ("s3Url".to_string(), "http://127.0.0.1:9000".to_string()),
        ]
        .into();
        let aws = secret_data(
            ProviderKind::Aws,
            Some(b"[default]\naws_access_key_id=AK\naws_secret_access_key=SK\n"),
            &config,
        )
        .unwrap();
        assert_eq!(aws["accessKeyID"], b"AK");
        assert_eq!(aws["endpoint"], b"http://127.0.0.1:9000");
        assert!(secret_data(ProviderKind::Aws, None, &config).is_err());

        let az_config: BTreeMap<String, String> =
            [("storageAccount".to_string(), "acct".to_string())].into();
        let az = secret_data(
            ProviderKind::Azure,
            Some(b"AZURE_STORAGE_ACCOUNT_ACCESS_KEY=a2V5\nAZURE_CLOUD_NAME=AzurePublicCloud\n"),
            &az_config,
        )
        .unwrap();
        assert_eq!(az["storageAccount"], b"acct");
        assert_eq!(az["storageKey"], b"a2V5");
        assert!(secret_data(ProviderKind::Local, None, &config).is_ok());
    }
}
