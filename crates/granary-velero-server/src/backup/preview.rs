//! The dry run of a backup (Granary's, beyond Velero): the same [`setup`], collection,
//! item actions and tarball writer as [`super::run`], with the tarball written to
//! nowhere and nothing read from or written to the object store. What it returns is
//! what the backup would hold: the manifest items in the order they would be written,
//! and the errors and warnings the backup would report.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::BackupError;
use super::collect::WriteJob;
use super::logbook::{Logbook, Subject};
use super::runner::write_tarball;
use super::setup::setup;
use granary_api::velero::Backup;
use granary_velero::archive::ArchiveError;
use granary_velero::files::Results;
use granary_velero::manifest::{ItemKey, ManifestItem};

/// One backup to collect without storing it.
pub struct CollectRequest<'a> {
    pub client: kube::Client,
    pub backup: &'a Backup,
    /// Items per list page (`clientPageSize`); 0 lists unpaged.
    pub page_size: u32,
    /// Items backed up in parallel. With more than one the write order within a
    /// resource varies from run to run, as it does in a real backup.
    pub workers: usize,
    pub now: DateTime<Utc>,
}

/// What a backup of the request's spec would hold.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Collected {
    /// The manifest's items, in the order the tarball would hold them.
    pub items: Vec<ManifestItem>,
    /// The errors and warnings the backup would record (its `results` file).
    pub results: Results,
}

pub(super) async fn collect(req: CollectRequest<'_>) -> Result<Collected, BackupError> {
    let backup = req.backup;
    let name = backup.metadata.name.clone().unwrap_or_default();
    let ns = backup.metadata.namespace.clone().unwrap_or_default();
    let log = Arc::new(Logbook::new(format!("{ns}/{name}"), req.now));
    log.info(Subject::Backup, "Starting backup (dry run)");
    let spec = &backup.spec;
    let setup = setup(&req.client, spec, &log)
        .await
        .map_err(BackupError::Kube)?;
    let total = AtomicU64::new(0);
    let (job_tx, job_rx) = mpsc::channel::<Vec<WriteJob>>(2);
    let writer = {
        let (log, now) = (Arc::clone(&log), req.now);
        tokio::task::spawn_blocking(move || {
            let mut order: Vec<ItemKey> = Vec::new();
            let written = Arc::new(AtomicU64::new(0));
            let (_, mut spool) =
                write_tarball(std::io::sink(), job_rx, now, log, written, Some(&mut order))?;
            let manifest = spool.to_manifest()?;
            // Objects at a version other than the preferred one are written but are
            // not manifest items (the writer's rule); they are left out here too.
            let mut listed = std::collections::HashSet::new();
            let items = order
                .iter()
                .filter(|k| listed.insert(*k))
                .filter_map(|k| manifest.get(k).map(|i| i.to_owned_item()))
                .collect::<Vec<_>>();
            Ok::<_, ArchiveError>(items)
        })
    };
    setup
        .collection(spec, &log, job_tx, &total, req.page_size, req.workers)
        .run()
        .await;
    let items = match writer.await {
        Ok(Ok(items)) => items,
        Ok(Err(e)) => {
            return Err(BackupError::Invalid {
                field: "tarball".into(),
                message: format!("error writing the backup tarball: {e}"),
            });
        }
        Err(e) => {
            return Err(BackupError::Invalid {
                field: "tarball".into(),
                message: format!("the tarball writer panicked: {e}"),
            });
        }
    };
    let (_, results) = log.take();
    Ok(Collected { items, results })
}
