//! One backup run (module docs of [`super`]): the existence check, the cluster reads
//! the filters need, collection with the tarball streaming to the store, then the files.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::collect::WriteJob;
use super::logbook::{Logbook, Subject};
use super::persist::{self, Files};
use super::pipe::pipe;
use super::setup::setup;
use super::{BackupError, BackupOutcome, BackupProgress, BackupRequest, BackupResultPhase};
use granary_api::velero::{BACKUP_VERSION, Backup};
use granary_velero::FORMAT_VERSION_WITH_MANIFEST;
use granary_velero::archive::{ArchiveError, ArchiveWriter};
use granary_velero::files::{encode_backup_json, encode_logs};
use granary_velero::integrity::DigestingWriter;
use granary_velero::manifest::{ItemKey, ManifestSpool};

/// Bytes of tarball in flight between the writer and the upload.
const PIPE_CAPACITY: usize = 1 << 20;
/// Batches of items waiting for the tarball writer (each [`super::collect::WRITE_BATCH`]).
const WRITE_QUEUE: usize = 2;

/// The phase of a backup whose files were all stored: `PartiallyFailed` when any error
/// was counted (Velero: any error-level log line), else `Completed`.
pub(super) fn stored_phase(errors: u32) -> BackupResultPhase {
    if errors > 0 {
        BackupResultPhase::PartiallyFailed
    } else {
        BackupResultPhase::Completed
    }
}

/// The Backup as stored in `velero-backup.json`: the controller's copy with the final
/// phase (Velero's finalizer re-uploads it with this phase; Granary has no plugin
/// operations to wait for, so it writes it once), format version, counts and times.
pub(super) fn stored_backup(
    backup: &Backup,
    outcome: &BackupOutcome,
    start: DateTime<Utc>,
) -> Backup {
    let mut b = backup.clone();
    let status = b.status.get_or_insert_with(Default::default);
    status.phase = Some(outcome.phase.as_phase());
    status.version = Some(BACKUP_VERSION);
    status.format_version = Some(outcome.format_version.clone());
    status.start_timestamp.get_or_insert(start);
    status.completion_timestamp = Some(outcome.completion_timestamp);
    status.errors = Some(i64::from(outcome.errors));
    status.warnings = Some(i64::from(outcome.warnings));
    status.progress = Some(BackupProgress {
        total_items: Some(outcome.total_items as i64),
        items_backed_up: Some(outcome.items_backed_up as i64),
    });
    b
}

/// Writes the tarball from the jobs to `out` until the queue closes, counting items
/// written and, when asked, recording their keys in the order they were written.
pub(super) fn write_tarball<W: std::io::Write>(
    out: W,
    mut jobs: mpsc::Receiver<Vec<WriteJob>>,
    now: DateTime<Utc>,
    log: Arc<Logbook>,
    written: Arc<AtomicU64>,
    mut order: Option<&mut Vec<ItemKey>>,
) -> Result<(W, ManifestSpool), ArchiveError> {
    let mut archive = ArchiveWriter::new(out, now)?;
    while let Some(batch) = jobs.blocking_recv() {
        for job in batch {
            match archive.add_item(&job.group_resource, &job.preferred_version, &job.object) {
                Ok(key) => {
                    written.fetch_add(1, Ordering::Relaxed);
                    if let Some(order) = order.as_deref_mut() {
                        order.push(key);
                    }
                }
                // The output broke (the upload failed): stop.
                Err(ArchiveError::Io(e)) => return Err(ArchiveError::Io(e)),
                Err(e) => {
                    let meta = |f: &str| {
                        job.object
                            .pointer(&format!("/metadata/{f}"))
                            .and_then(serde_json::Value::as_str)
                            .unwrap_or("")
                            .to_owned()
                    };
                    let (ns, name, gr) = (
                        meta("namespace"),
                        meta("name"),
                        job.group_resource.to_string(),
                    );
                    log.error(
                        Subject::Item(&gr, &ns, &name),
                        &format!("error writing item to the backup: {e}"),
                    );
                }
            }
        }
    }
    archive.finish()
}

pub(super) async fn run(req: BackupRequest<'_>) -> Result<BackupOutcome, BackupError> {
    let backup = req.backup;
    let name = backup.metadata.name.clone().unwrap_or_default();
    let keys = req.layout.backup(&name).map_err(|e| BackupError::Invalid {
        field: "metadata.name".into(),
        message: e.to_string(),
    })?;
    let bucket = req.layout.bucket();
    match req.store.head(bucket, &keys.metadata()).await {
        Ok(_) => return Err(BackupError::AlreadyExists(name)),
        Err(granary_providers::Error::NotFound(_)) => {}
        Err(e) => return Err(BackupError::Store(e)),
    }
    let ns = backup.metadata.namespace.clone().unwrap_or_default();
    let log = Arc::new(Logbook::new(format!("{ns}/{name}"), req.now));
    log.info(Subject::Backup, "Starting backup");
    let spec = &backup.spec;
    let setup = setup(&req.client, spec, &log)
        .await
        .map_err(BackupError::Kube)?;

    let total = AtomicU64::new(0);
    let written = Arc::new(AtomicU64::new(0));
    let (job_tx, job_rx) = mpsc::channel::<Vec<WriteJob>>(WRITE_QUEUE);
    let (pipe_w, pipe_r) = pipe(PIPE_CAPACITY);
    let writer = {
        let (log, written, now) = (Arc::clone(&log), Arc::clone(&written), req.now);
        tokio::task::spawn_blocking(move || {
            // The tarball is hashed as it is written, for the integrity record.
            let out = DigestingWriter::new(pipe_w);
            let (out, mut spool) = write_tarball(out, job_rx, now, log, written, None)?;
            let (pipe, digest) = out.into_parts();
            pipe.finish()?;
            // Written from the spool while the tarball's last bytes are uploaded: the
            // manifest is never whole in memory (docs/architecture.md#backups).
            let manifest = spool.write_gz(Vec::new())?;
            let resource_list = spool.write_resource_list_gz(Vec::new())?;
            Ok::<_, ArchiveError>(((manifest, resource_list), digest))
        })
    };
    let collection = setup.collection(spec, &log, job_tx, &total, req.page_size, req.workers);
    let tar_key = keys.contents();
    let upload = req.store.put_reader(bucket, &tar_key, Box::pin(pipe_r));
    let collect = async move {
        collection.run().await;
        // Dropping the collection closes the job queue: the writer finishes the tarball.
    };
    let report = || BackupProgress {
        total_items: Some(total.load(Ordering::Relaxed) as i64),
        items_backed_up: Some(written.load(Ordering::Relaxed) as i64),
    };
    let work = async { tokio::join!(upload, collect).0 };
    tokio::pin!(work);
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let uploaded = loop {
        tokio::select! {
            r = &mut work => break r,
            _ = ticker.tick() => (req.progress)(report()),
        }
    };
    let written_tarball = match writer.await {
        Ok(r) => r,
        Err(e) => Err(ArchiveError::Io(std::io::Error::other(format!(
            "tarball writer panicked: {e}"
        )))),
    };
    let items = written.load(Ordering::Relaxed);
    let mut tarball_bytes = 0;
    let failure = match (uploaded, written_tarball) {
        (Ok(bytes), Ok(manifest)) => {
            tarball_bytes = bytes;
            Ok(manifest)
        }
        (Err(e), _) => Err(format!("error uploading {tar_key} to object storage: {e}")),
        (Ok(_), Err(e)) => Err(format!("error writing the backup tarball: {e}")),
    };
    let ((manifest, resource_list), tarball) = match failure {
        Ok(m) => m,
        Err(reason) => return Ok(fail(&req, &keys, &log, reason, items).await),
    };

    log.info(
        Subject::Backup,
        &format!("Backed up a total of {items} items"),
    );
    let (errors, warnings) = log.counts();
    let mut outcome = BackupOutcome {
        phase: stored_phase(errors),
        errors,
        warnings,
        total_items: items,
        items_backed_up: items,
        failure_reason: None,
        format_version: FORMAT_VERSION_WITH_MANIFEST.to_owned(),
        completion_timestamp: log.now(),
        tarball_bytes,
    };
    let stored = stored_backup(backup, &outcome, req.now);
    log.info(
        Subject::Backup,
        &format!("Backup completed with phase {}", outcome.phase.as_phase()),
    );
    let (lines, results) = log.take();
    let files = Files {
        name: name.clone(),
        tenant: req.tenant.map(str::to_owned),
        tarball,
        manifest,
        resource_list,
        results: results.to_gz_bytes(),
        logs: encode_logs(&lines),
        backup_json: encode_backup_json(&stored),
    };
    if let Err(reason) = persist::put_files(req.store, bucket, &keys, files, req.keyring).await {
        tracing::error!(backup = %format!("{ns}/{name}"), "{reason}");
        outcome.phase = BackupResultPhase::Failed;
        outcome.errors += 1;
        outcome.failure_reason = Some(reason);
    }
    (req.progress)(BackupProgress {
        total_items: Some(items as i64),
        items_backed_up: Some(items as i64),
    });
    Ok(outcome)
}

/// The store failed while the tarball was written: delete what was written, keep the
/// log if the store takes it, and report `Failed` (no `velero-backup.json` exists).
async fn fail(
    req: &BackupRequest<'_>,
    keys: &granary_velero::layout::BackupKeys,
    log: &Logbook,
    reason: String,
    items: u64,
) -> BackupOutcome {
    log.error(Subject::Backup, &reason);
    let bucket = req.layout.bucket();
    persist::clean_up(req.store, bucket, keys).await;
    let (errors, warnings) = log.counts();
    let completion_timestamp = log.now();
    let (lines, _) = log.take();
    persist::put_log(req.store, bucket, keys, encode_logs(&lines)).await;
    (req.progress)(BackupProgress {
        total_items: Some(items as i64),
        items_backed_up: Some(items as i64),
    });
    BackupOutcome {
        phase: BackupResultPhase::Failed,
        errors,
        warnings,
        total_items: items,
        items_backed_up: items,
        failure_reason: Some(reason),
        format_version: FORMAT_VERSION_WITH_MANIFEST.to_owned(),
        completion_timestamp,
        tarball_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::velero::{BackupPhase, BackupSpec};

    #[test]
    fn any_error_makes_a_stored_backup_partially_failed() {
        assert_eq!(stored_phase(0), BackupResultPhase::Completed);
        assert_eq!(stored_phase(1), BackupResultPhase::PartiallyFailed);
    }

    #[test]
    fn the_stored_backup_carries_the_outcome() {
        let start = DateTime::parse_from_rfc3339("2026-11-24T01:00:00Z")
            .expect("valid")
            .with_timezone(&Utc);
        let outcome = BackupOutcome {
            phase: BackupResultPhase::PartiallyFailed,
            errors: 2,
            warnings: 1,
            total_items: 7,
            items_backed_up: 7,
            failure_reason: None,
            format_version: "1.2.0".into(),
            completion_timestamp: start + chrono::TimeDelta::seconds(5),
            tarball_bytes: 1,
        };
        let b = stored_backup(&Backup::new("b", BackupSpec::default()), &outcome, start);
        let s = b.status.expect("status");
        assert_eq!(s.phase, Some(BackupPhase::PartiallyFailed));
        assert_eq!(s.format_version.as_deref(), Some("1.2.0"));
        assert_eq!(s.version, Some(1));
        assert_eq!(s.start_timestamp, Some(start));
        assert_eq!(s.errors, Some(2));
        assert_eq!(s.progress.and_then(|p| p.items_backed_up), Some(7));
    }
}
