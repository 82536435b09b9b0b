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

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use granary_providers::{ObjectStore, RetryPolicy, StoreOptions};
use kube::Client;

use granary_api::velero::BackupStorageLocation;
use granary_velero::layout::StorageLayout;
use granary_velero_server::context::read_credential;
use granary_velero_server::location::location_access;

/// The most a downloaded file may grow to when gunzipped (logs, manifests, results).
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// A location opened for reading.
pub struct LocationStore {
    pub name: String,
    pub store: Arc<dyn ObjectStore>,
    pub layout: StorageLayout,
}

/// Opens `bsl` for reading, the way the controllers do
/// ([`granary_velero_server::location`]): its credentials from the cluster, its store,
/// its layout.
pub async fn open(
    client: &Client,
    namespace: &str,
    bsl: &BackupStorageLocation,
    data_dir: Option<&Path>,
) -> anyhow::Result<LocationStore> {
    let name = bsl.metadata.name.clone().unwrap_or_default();
    let spec = &bsl.spec;
    let file = read_credential(client, namespace, bsl)
        .await
        .map_err(|e| anyhow::anyhow!("location {name}: {e}"))?;
    let config = spec.config.clone().unwrap_or_default();
    let access = location_access(
        &spec.provider,
        &spec.object_storage.bucket,
        spec.object_storage.prefix.as_deref(),
        &config,
        file.as_deref(),
    )
    .map_err(|e| anyhow::anyhow!("location {name}: {e}"))?;
    if access.provider == "local" && data_dir.is_none() {
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
    let store = granary_providers::open(
        access.provider,
        access.region.as_deref(),
        &access.secret,
        &options,
    )
    .await
    .with_context(|| format!("opening the object store of location {name}"))?;
    Ok(LocationStore {
        name,
        store,
        layout: access.layout,
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
