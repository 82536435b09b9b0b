//! Storing a backup's files after its tarball, in an order that never lets a partial
//! backup look complete: Velero's `PutBackup` writes `velero-backup.json` first and
//! deletes what it wrote when a later file fails; Granary streams the tarball first, so
//! it writes `velero-backup.json` last instead — the object whose presence means "this
//! backup exists" to backup sync, `BackupExists` and Velero itself.
//!
//! Order: `manifest.json.gz`, `<name>-resource-list.json.gz`, `<name>-results.gz` (a
//! failure deletes the tarball and what was written, like Velero), `<name>-logs.gz`
//! (best effort, as in Velero: a failure is ignored), the signed integrity record
//! `<name>-integrity.json` (docs/formats.md#integrity-record) over everything written,
//! `velero-backup.json` included, then `velero-backup.json` (a failure of either
//! deletes everything else but the log). A backup sync finds is so always signed.

use bytes::Bytes;
use granary_providers::ObjectStore;

use granary_velero::integrity::{Keyring, ObjectDigest, RecordKind};
use granary_velero::layout::BackupKeys;
use std::collections::BTreeMap;

use crate::integrity::{name_in, put_record, sign};

/// The encoded files of a backup, ready to upload.
pub(super) struct Files {
    pub name: String,
    /// Bound into the integrity record: the namespace owner the backup was made for.
    pub tenant: Option<String>,
    /// The tarball as it was uploaded.
    pub tarball: ObjectDigest,
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
        keys.integrity(),
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
/// does, so users can read why). Errors are ignored; whether it was stored is returned.
pub(super) async fn put_log(
    store: &dyn ObjectStore,
    bucket: &str,
    keys: &BackupKeys,
    logs: Vec<u8>,
) -> bool {
    if let Err(e) = store.put(bucket, &keys.logs(), Bytes::from(logs)).await {
        tracing::warn!(key = keys.logs(), "could not upload a backup log: {e}");
        return false;
    }
    true
}

/// Uploads the files after the tarball; on failure cleans up and returns the reason.
pub(super) async fn put_files(
    store: &dyn ObjectStore,
    bucket: &str,
    keys: &BackupKeys,
    files: Files,
    keyring: &Keyring,
) -> Result<(), String> {
    let dir = keys.dir();
    let mut written: BTreeMap<String, ObjectDigest> = BTreeMap::new();
    written.insert(name_in(dir, &keys.contents()).to_owned(), files.tarball);
    let first = [
        (keys.manifest(), files.manifest),
        (keys.resource_list(), files.resource_list),
        (keys.results(), files.results),
    ];
    for (key, data) in first {
        let digest = ObjectDigest::of(&data);
        if let Err(e) = store.put(bucket, &key, Bytes::from(data)).await {
            clean_up(store, bucket, keys).await;
            put_log(store, bucket, keys, files.logs).await;
            return Err(format!("error uploading {key} to object storage: {e}"));
        }
        written.insert(name_in(dir, &key).to_owned(), digest);
    }
    let logs = ObjectDigest::of(&files.logs);
    if put_log(store, bucket, keys, files.logs).await {
        written.insert(name_in(dir, &keys.logs()).to_owned(), logs);
    }
    let key = keys.metadata();
    written.insert(
        name_in(dir, &key).to_owned(),
        ObjectDigest::of(&files.backup_json),
    );
    let signed = sign(
        RecordKind::Backup,
        &files.name,
        files.tenant.as_deref(),
        written,
        keyring,
    );
    let stored = match &signed {
        Ok(record) => put_record(store, bucket, &keys.integrity(), record).await,
        Err(e) => Err(e.clone()),
    };
    if let Err(reason) = stored {
        clean_up(store, bucket, keys).await;
        return Err(reason);
    }
    if let Err(e) = store
        .put(bucket, &key, Bytes::from(files.backup_json))
        .await
    {
        clean_up(store, bucket, keys).await;
        return Err(format!("error uploading {key} to object storage: {e}"));
    }
    Ok(())
}
