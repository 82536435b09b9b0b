//! Storing a backup's files after its tarball, in an order that never lets a partial
//! backup look complete: Velero's `PutBackup` writes `velero-backup.json` first and
//! deletes what it wrote when a later file fails; Granary streams the tarball first, so
//! it writes `velero-backup.json` last instead — the object whose presence means "this
//! backup exists" to backup sync, `BackupExists` and Velero itself.
//!
//! Order: `manifest.json.gz`, `<name>-resource-list.json.gz`, `<name>-results.gz` (a
//! failure deletes the tarball and what was written, like Velero), `<name>-logs.gz`
//! (best effort, as in Velero: a failure is ignored), then `velero-backup.json` (a
//! failure deletes everything else but the log).

use bytes::Bytes;
use granary_providers::ObjectStore;

use granary_velero::layout::BackupKeys;

/// The encoded files of a backup, ready to upload.
pub(super) struct Files {
    pub manifest: Vec<u8>,
    pub resource_list: Vec<u8>,
    pub results: Vec<u8>,
    pub logs: Vec<u8>,
    pub backup_json: Vec<u8>,
}

/// Deletes what a failed backup wrote (the tarball and the files after it, never the
/// log), ignoring errors: the store may be the thing that failed.
pub(super) async fn clean_up(store: &dyn ObjectStore, bucket: &str, keys: &BackupKeys) {
    let written = [
        keys.contents(),
        keys.manifest(),
        keys.resource_list(),
        keys.results(),
        keys.metadata(),
    ];
    if let Err(e) = store.delete_many(bucket, &written).await {
        tracing::warn!(
            dir = keys.dir(),
            "could not delete a failed backup's files: {e}"
        );
    }
}

/// Uploads the log alone (the failure path: a failed backup keeps its log, as Velero's
/// does, so users can read why). Errors are ignored.
pub(super) async fn put_log(
    store: &dyn ObjectStore,
    bucket: &str,
    keys: &BackupKeys,
    logs: Vec<u8>,
) {
    if let Err(e) = store.put(bucket, &keys.logs(), Bytes::from(logs)).await {
        tracing::warn!(key = keys.logs(), "could not upload a backup log: {e}");
    }
}

/// Uploads the files after the tarball; on failure cleans up and returns the reason.
pub(super) async fn put_files(
    store: &dyn ObjectStore,
    bucket: &str,
    keys: &BackupKeys,
    files: Files,
) -> Result<(), String> {
    let first = [
        (keys.manifest(), files.manifest),
        (keys.resource_list(), files.resource_list),
        (keys.results(), files.results),
    ];
    for (key, data) in first {
        if let Err(e) = store.put(bucket, &key, Bytes::from(data)).await {
            clean_up(store, bucket, keys).await;
            put_log(store, bucket, keys, files.logs).await;
            return Err(format!("error uploading {key} to object storage: {e}"));
        }
    }
    put_log(store, bucket, keys, files.logs).await;
    let key = keys.metadata();
    if let Err(e) = store
        .put(bucket, &key, Bytes::from(files.backup_json))
        .await
    {
        clean_up(store, bucket, keys).await;
        return Err(format!("error uploading {key} to object storage: {e}"));
    }
    Ok(())
}
